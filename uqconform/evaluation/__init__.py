"""The coverage-evaluation module shared by every method, test and benchmark."""

from uqconform.evaluation.bounds import coverage_bounds, coverage_count_pmf

__all__ = ["coverage_bounds", "coverage_count_pmf"]
