"""uqconform: conformal prediction and uncertainty quantification for scikit-learn.

Public names only; see `uqconform.regression`, `uqconform.classification` and
`uqconform.evaluation`.
"""

from uqconform.bayes import LaplacePosterior, LinearizedPredictive
from uqconform.classification import (
    BinarizedSmoothedClassifier,
    MeanSmoothedClassifier,
    ReliablePredictionSets,
    SplitConformalClassifier,
)
from uqconform.regression import (
    ApproximateFullConformalRegressor,
    ConformalizedQuantileRegressor,
    FullConformalRidge,
    SplitConformalRegressor,
)

__version__ = "0.1.0.dev0"

__all__ = [
    "ApproximateFullConformalRegressor",
    "BinarizedSmoothedClassifier",
    "ConformalizedQuantileRegressor",
    "FullConformalRidge",
    "LaplacePosterior",
    "LinearizedPredictive",
    "MeanSmoothedClassifier",
    "ReliablePredictionSets",
    "SplitConformalClassifier",
    "SplitConformalRegressor",
    "__version__",
]
