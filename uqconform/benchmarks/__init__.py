"""Benchmark suites of uqconform, runnable from an installed package.

``uqconform benchmark --suite quick --out DIR`` (or `run_benchmark`) runs the suites;
new method families register a function with `register_family` in a module of
`uqconform.benchmarks.suites`.
"""

from uqconform.benchmarks.registry import (
    SCALES,
    FamilyResult,
    get_families,
    list_suites,
    register_family,
    resolve_suite,
)
from uqconform.benchmarks.runner import (
    BenchmarkContext,
    BenchmarkOutputError,
    format_table,
    run_benchmark,
)

__all__ = [
    "SCALES",
    "BenchmarkContext",
    "BenchmarkOutputError",
    "FamilyResult",
    "format_table",
    "get_families",
    "list_suites",
    "register_family",
    "resolve_suite",
    "run_benchmark",
]
