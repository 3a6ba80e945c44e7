"""Multi-output regression: conformal prediction regions for a vector target ``Y`` (n, d).

Every method returns a `uqconform.regions.PredictionRegion` from ``predict_set`` and its
bounding box from ``predict_interval``:

* `EllipsoidalConformalRegressor`: Mahalanobis ellipsoids (global or local covariance);
* `RectangularConformalRegressor`: max-norm boxes, or per-output Bonferroni boxes.
"""

from uqconform.multioutput._base import MultiOutputConformalRegressor
from uqconform.multioutput.baselines import (
    EllipsoidalConformalRegressor,
    RectangularConformalRegressor,
)

__all__ = [
    "EllipsoidalConformalRegressor",
    "MultiOutputConformalRegressor",
    "RectangularConformalRegressor",
]
