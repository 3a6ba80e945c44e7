"""Multi-output regression: conformal prediction regions for a vector target ``Y`` (n, d).

Every method returns a `uqconform.regions.PredictionRegion` from ``predict_set`` and its
bounding box from ``predict_interval``:

* `EllipsoidalConformalRegressor`: Mahalanobis ellipsoids (global or local covariance);
* `RectangularConformalRegressor`: max-norm boxes, or per-output Bonferroni boxes;
* `CONTRA`: the image of a latent ball under a conditional normalizing flow of ``Y | X``;
* `ResidualCONTRA`: any multi-output regressor plus a flow on its out-of-fold residuals.

The flows need torch and nflows (``pip install "uqconform[flows]"``); they are imported
only when a flow is trained.
"""

from uqconform.multioutput._base import MultiOutputConformalRegressor
from uqconform.multioutput.baselines import (
    EllipsoidalConformalRegressor,
    RectangularConformalRegressor,
)
from uqconform.multioutput.contra import CONTRA, ResidualCONTRA

__all__ = [
    "CONTRA",
    "EllipsoidalConformalRegressor",
    "MultiOutputConformalRegressor",
    "RectangularConformalRegressor",
    "ResidualCONTRA",
]
