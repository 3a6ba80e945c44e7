"""The coverage-evaluation module shared by every method, test and benchmark.

* :func:`coverage`, :func:`mean_width`, :func:`mean_set_size`, :func:`mean_volume`:
  marginal coverage and efficiency of intervals, boolean class sets and regions;
* :func:`coverage_by_group`, :func:`size_stratified_coverage`: conditional coverage;
* :func:`coverage_bounds`, :func:`coverage_count_pmf`: the law of split-conformal coverage,
  so tests judge coverage without hand-picked tolerances;
* :func:`evaluate` and :class:`CoverageReport`: all of it for a calibrated model in one call;
* :func:`plot_intervals`: 1-D regression bands (matplotlib, optional).
"""

from uqconform.evaluation.bounds import coverage_bounds, coverage_count_pmf
from uqconform.evaluation.metrics import (
    coverage,
    coverage_by_group,
    mean_set_size,
    mean_volume,
    mean_width,
    size_stratified_coverage,
)
from uqconform.evaluation.plotting import plot_coverage, plot_efficiency, plot_intervals
from uqconform.evaluation.report import CoverageReport, evaluate

__all__ = [
    "CoverageReport",
    "coverage",
    "coverage_bounds",
    "coverage_by_group",
    "coverage_count_pmf",
    "evaluate",
    "mean_set_size",
    "mean_volume",
    "mean_width",
    "plot_coverage",
    "plot_efficiency",
    "plot_intervals",
    "size_stratified_coverage",
]
