"""Sequential conformal prediction for time series: KOWCPI, with EnbPI and SPCI."""

from uqconform.timeseries.base import SequentialConformalRegressor, rolling_coverage
from uqconform.timeseries.enbpi import EnbPI
from uqconform.timeseries.kowcpi import KOWCPI
from uqconform.timeseries.spci import SPCI

__all__ = ["KOWCPI", "SPCI", "EnbPI", "SequentialConformalRegressor", "rolling_coverage"]
