"""Conformal regression: split (absolute, normalized, user scores), CQR, cross-conformal
(CV+, jackknife+, jackknife+-after-bootstrap), conformal predictive systems, and full CP."""

from uqconform.regression.acp import ApproximateFullConformalRegressor
from uqconform.regression.cps import ConformalPredictiveSystem
from uqconform.regression.cqr import ConformalizedQuantileRegressor, QuantileBand
from uqconform.regression.cross import (
    CrossConformalRegressor,
    JackknifeAfterBootstrapRegressor,
)
from uqconform.regression.full import FullConformalRidge
from uqconform.regression.split import SplitConformalRegressor

__all__ = [
    "ApproximateFullConformalRegressor",
    "ConformalPredictiveSystem",
    "ConformalizedQuantileRegressor",
    "CrossConformalRegressor",
    "FullConformalRidge",
    "JackknifeAfterBootstrapRegressor",
    "QuantileBand",
    "SplitConformalRegressor",
]
