"""The coverage-evaluation module shared by every method, test and benchmark.

* `coverage`, `mean_width`, `mean_set_size`, `mean_volume`:
  marginal coverage and efficiency of intervals, boolean class sets and regions;
  `mean_interval_score`: width and misses of intervals on one scale (a proper score);
* `coverage_by_group`, `size_stratified_coverage`: conditional coverage;
* `coverage_bounds`, `coverage_count_pmf`: the law of split-conformal coverage,
  so tests judge coverage without hand-picked tolerances;
* `evaluate` and `CoverageReport`: all of it for a calibrated model in one call;
* `plot_intervals`, `plot_coverage`, `plot_efficiency`: 1-D regression bands, observed
  against nominal coverage with its valid interval, and efficiency per level (matplotlib,
  optional);
* `random_l2_perturbation`, `worst_of_k_perturbation`: l2 input shifts to check
  robustness certificates (BinCP);
* `flip_labels`, `insert_points`, `delete_points`, `worst_partitions`: simulated
  poisoning of training or calibration data, to check RPS certificates.
"""

from uqconform.evaluation.bounds import coverage_bounds, coverage_count_pmf
from uqconform.evaluation.metrics import (
    coverage,
    coverage_by_group,
    mean_interval_score,
    mean_set_size,
    mean_volume,
    mean_width,
    size_stratified_coverage,
)
from uqconform.evaluation.perturbation import random_l2_perturbation, worst_of_k_perturbation
from uqconform.evaluation.plotting import plot_coverage, plot_efficiency, plot_intervals
from uqconform.evaluation.poisoning import (
    delete_points,
    flip_labels,
    insert_points,
    worst_partitions,
)
from uqconform.evaluation.report import CoverageReport, evaluate

__all__ = [
    "CoverageReport",
    "coverage",
    "coverage_bounds",
    "coverage_by_group",
    "coverage_count_pmf",
    "delete_points",
    "evaluate",
    "flip_labels",
    "insert_points",
    "mean_interval_score",
    "mean_set_size",
    "mean_volume",
    "mean_width",
    "plot_coverage",
    "plot_efficiency",
    "plot_intervals",
    "random_l2_perturbation",
    "size_stratified_coverage",
    "worst_of_k_perturbation",
    "worst_partitions",
]
