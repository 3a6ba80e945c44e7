"""uqconform: conformal prediction and uncertainty quantification for scikit-learn.

Public names only; see `uqconform.regression`, `uqconform.classification` and
`uqconform.evaluation`.
"""

import importlib
from typing import TYPE_CHECKING

from uqconform._version import InconsistentVersionWarning, __version__
from uqconform.bayes import LaplacePosterior, LinearizedPredictive
from uqconform.classification import (
    BinarizedSmoothedClassifier,
    CrossConformalClassifier,
    CrossVennAbersCalibrator,
    EnsembleConformalClassifier,
    MeanSmoothedClassifier,
    MultiDimScoreClassifier,
    MultiLabelRiskController,
    ReliablePredictionSets,
    SplitConformalClassifier,
    VennAbersCalibrator,
)
from uqconform.multioutput import (
    CONTRA,
    EllipsoidalConformalRegressor,
    RectangularConformalRegressor,
    ResidualCONTRA,
)
from uqconform.regions import PredictionRegion
from uqconform.regression import (
    ApproximateFullConformalRegressor,
    ConformalizedQuantileRegressor,
    ConformalPredictiveSystem,
    CrossConformalRegressor,
    FullConformalRidge,
    JackknifeAfterBootstrapRegressor,
    SplitConformalRegressor,
)
from uqconform.timeseries import KOWCPI, SPCI, EnbPI

__all__ = [
    "CONTRA",
    "KOWCPI",
    "SPCI",
    "ApproximateFullConformalRegressor",
    "BinarizedSmoothedClassifier",
    "ConformalPredictiveSystem",
    "ConformalizedQuantileRegressor",
    "CrossConformalClassifier",
    "CrossConformalRegressor",
    "CrossVennAbersCalibrator",
    "EllipsoidalConformalRegressor",
    "EnbPI",
    "EnsembleConformalClassifier",
    "FullConformalRidge",
    "InconsistentVersionWarning",
    "JackknifeAfterBootstrapRegressor",
    "LaplacePosterior",
    "LinearizedPredictive",
    "MeanSmoothedClassifier",
    "MultiDimScoreClassifier",
    "MultiLabelRiskController",
    "PredictionRegion",
    "RectangularConformalRegressor",
    "ReliablePredictionSets",
    "ResidualCONTRA",
    "SplitConformalClassifier",
    "SplitConformalRegressor",
    "VennAbersCalibrator",
    "__version__",
]

#: Subpackages reachable as attributes after ``import uqconform`` (imported on first use,
#: so that ``uqconform.evaluation.coverage`` works without its own import line).
_LAZY_SUBMODULES = frozenset(
    {"datasets", "evaluation", "linearize", "quantiles", "routing", "scores", "shift"}
)


if TYPE_CHECKING:  # what type checkers and editors see behind the lazy attributes
    from uqconform import datasets as datasets
    from uqconform import evaluation as evaluation
    from uqconform import linearize as linearize
    from uqconform import quantiles as quantiles
    from uqconform import routing as routing
    from uqconform import scores as scores
    from uqconform import shift as shift


def __getattr__(name: str) -> object:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"uqconform.{name}")
    raise AttributeError(f"module 'uqconform' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY_SUBMODULES)
