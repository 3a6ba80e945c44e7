"""Helpers shared by the suites: timing, splits and the optional anchor libraries."""

from __future__ import annotations

import contextlib
import importlib
import logging
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

ANCHORS_HINT = 'pip install "uqconform[anchors]"'


def optional_module(name: str) -> Any | None:
    """The module ``name`` or ``None`` when it is not installed.

    crepes switches ``warnings.simplefilter("always")`` on at import; the filters are
    restored afterwards (and the root logger's level, which MAPIE's INFO messages reach)
    so the benchmark's output does not change.
    """
    root = logging.getLogger()
    level = root.level
    with warnings.catch_warnings():
        try:
            return importlib.import_module(name)
        except ImportError:
            return None
        finally:
            root.setLevel(level)


def uncross(intervals: np.ndarray) -> tuple[np.ndarray, int]:
    """Intervals with ``lower > upper`` rows replaced by the empty interval at their centre.

    Some libraries can return crossed bounds (e.g. CQR with a negative correction); they
    are counted and reported, and scored as zero-width intervals (empty in practice).
    """
    intervals = np.asarray(intervals, dtype=float)
    crossed = intervals[:, 0] > intervals[:, 1]
    count = int(crossed.sum())
    if count:
        intervals = intervals.copy()
        centre = intervals[crossed].mean(axis=1)
        intervals[crossed, 0] = centre
        intervals[crossed, 1] = centre
    return intervals, count


@contextlib.contextmanager
def quiet_root_logger() -> Iterator[None]:
    """Silence root-logger output for the duration (restored after).

    MAPIE calls ``logging.basicConfig(level=INFO)`` and logs "The predictions are
    ill-sorted." on every CQR call; a handler on the root logger makes ``basicConfig`` a
    no-op, so those lines do not flood the benchmark output.
    """
    root = logging.getLogger()
    handler = logging.NullHandler()
    level = root.level
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def log_axis_1_2_5(axis: Any) -> None:
    """A matplotlib axis (``ax.xaxis``) on a log scale labelled at 1, 2 and 5 times the
    powers of ten, as plain numbers, without labels on the minor ticks (they overlap)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def missing_anchor_note(library: str) -> str:
    return f"{library} is not installed: its rows are skipped ({ANCHORS_HINT})."


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    """``call()`` and its wall time in seconds."""
    start = time.perf_counter()
    value = call()
    return value, time.perf_counter() - start


def best_time(call: Callable[[], Any], repeats: int) -> tuple[Any, float]:
    """``call()`` run ``repeats`` times: the last value and the shortest time."""
    value, best = None, np.inf
    for _ in range(max(1, repeats)):
        value, elapsed = timed(call)
        best = min(best, elapsed)
    return value, best


def three_way_split(
    n: int, rng: np.random.Generator, fractions: tuple[float, float] = (0.5, 0.25)
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random train / calibration / test row indices (the rest after train and calib)."""
    order = rng.permutation(n)
    n_train = round(fractions[0] * n)
    n_cal = round(fractions[1] * n)
    return order[:n_train], order[n_train : n_train + n_cal], order[n_train + n_cal :]


def summarize(values: list[float]) -> tuple[float, float]:
    """Mean and standard deviation (0 for a single value); a NaN or infinite value makes
    them NaN or infinite (nothing is dropped)."""
    array = np.asarray(values, dtype=float)
    if array.size == 0:
        return float("nan"), float("nan")
    return float(array.mean()), float(array.std(ddof=1)) if array.size > 1 else 0.0


def headline(
    claim: str, value: Any, target: str | None = None, met: bool | None = None
) -> dict[str, Any]:
    """One key figure of a family for the summary, the README and the docs.

    Examples
    --------
    >>> headline("KOWCPI coverage on ELEC2", 0.917, "in [0.88, 0.92]", True)["met"]
    True
    """
    return {
        "claim": claim,
        "value": value,
        "target": target,
        "met": None if met is None else bool(met),
    }


def coverage_inside_law(
    rows: list[dict[str, Any]],
    alpha: float,
    *,
    library: str = "uqconform",
    conservative: tuple[str, ...] = (),
) -> tuple[int, int]:
    """How many of ``library``'s rows have a mean coverage inside the split-CP law.

    The interval is `uqconform.evaluation.coverage_bounds` for the row's ``n_cal``
    calibration and ``n_test`` test points, pooled over its ``resplits`` (the row's
    coverage is the mean over them; 1 when the row has no ``resplits``), at confidence
    ``1 - 0.01 / k`` for ``k`` rows: a valid implementation has all ``k`` inside with
    probability at least 99% (Bonferroni; at 99% each, 12 rows would all be inside only
    about 89% of the time). Methods in ``conservative`` (top-k: whole classes, so
    coverage above nominal by construction) are judged by the lower end only.
    """
    from uqconform.evaluation import coverage_bounds

    mine = [row for row in rows if row.get("library") == library]
    confidence = 1 - 0.01 / max(len(mine), 1)
    inside = 0
    for row in mine:
        low, high = coverage_bounds(
            int(row["n_cal"]),
            alpha,
            int(row["n_test"]),
            confidence=confidence,
            n_repeats=int(row.get("resplits", 1)),
        )
        if row.get("method") in conservative:
            high = 1.0
        inside += bool(low <= row["coverage"] <= high)
    return inside, len(mine)


def ratio_to(
    rows: list[dict[str, Any]], size: str, keys: tuple[str, ...], mine: str, other: str
) -> float:
    """Geometric mean over matching rows of ``size`` for library ``mine`` / ``other``."""
    table = {tuple(row[k] for k in keys): row[size] for row in rows if row["library"] == other}
    ratios = [
        row[size] / table[key]
        for row in rows
        if row["library"] == mine
        and (key := tuple(row[k] for k in keys)) in table
        and table[key] > 0
    ]
    return float(np.exp(np.mean(np.log(ratios)))) if ratios else float("nan")
