"""uqconform: conformal prediction and uncertainty quantification for scikit-learn.

Public names only; see `uqconform.regression`, `uqconform.classification` and
`uqconform.evaluation`.
"""

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
