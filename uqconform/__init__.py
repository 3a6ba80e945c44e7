"""uqconform: conformal prediction and uncertainty quantification for scikit-learn.

Public names only; see :mod:`uqconform.regression`, :mod:`uqconform.classification` and
:mod:`uqconform.evaluation`.
"""

from uqconform.classification import SplitConformalClassifier
from uqconform.regression import ConformalizedQuantileRegressor, SplitConformalRegressor

__version__ = "0.1.0.dev0"

__all__ = [
    "ConformalizedQuantileRegressor",
    "SplitConformalClassifier",
    "SplitConformalRegressor",
    "__version__",
]
