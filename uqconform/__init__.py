"""uqconform: conformal prediction and uncertainty quantification for scikit-learn.

Public names only; see `uqconform.regression`, `uqconform.classification` and
`uqconform.evaluation`.
"""

import importlib

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


def __getattr__(name: str) -> object:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"uqconform.{name}")
    raise AttributeError(f"module 'uqconform' has no attribute {name!r}")
