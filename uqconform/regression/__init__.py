"""Conformal regression: split (absolute, normalized, user scores) and CQR."""

from uqconform.regression.cqr import ConformalizedQuantileRegressor
from uqconform.regression.split import SplitConformalRegressor

__all__ = ["ConformalizedQuantileRegressor", "SplitConformalRegressor"]
