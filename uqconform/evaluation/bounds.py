"""The law of split-conformal coverage, for tests and benchmarks that judge coverage.

Given ``n`` calibration points with continuous scores, the coverage of the split-conformal
set conditional on the calibration data is ``Beta(n + 1 - l, l)`` with
``l = floor((n + 1) alpha)`` (Vovk, 2012). A test set of ``m`` points then covers a
Beta-Binomial number of them, and ``R`` independent resplits add up ``R`` such counts.
`coverage_bounds` returns the central interval of that law, so a test can assert that
observed coverage lies inside it instead of using a hand-picked tolerance.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import signal, stats

from uqconform.quantiles import check_alpha, conformal_rank

__all__ = ["coverage_bounds", "coverage_count_pmf"]


def check_confidence(confidence: Any) -> float:
    """``confidence`` as a float strictly between 0 and 1 (else a message naming it)."""
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, numbers.Real)
        or not 0 < confidence < 1
    ):
        raise ValueError(f"`confidence` must lie strictly between 0 and 1, got {confidence!r}.")
    return float(confidence)


def coverage_count_pmf(
    n_calibration: int, alpha: float, n_test: int, n_repeats: int = 1
) -> NDArray:
    """Probability of each number of covered test points, pooled over ``n_repeats`` resplits.

    Parameters
    ----------
    n_calibration : int
        Calibration points per resplit.
    alpha : float
        Miscoverage level.
    n_test : int
        Test points per resplit.
    n_repeats : int, default=1
        Independent resplits pooled.

    Returns
    -------
    ndarray of shape (n_repeats * n_test + 1,)
        ``pmf[c]`` is the probability that ``c`` test points are covered in total. One
        resplit's law is the exact beta-binomial; pooling uses FFT convolutions, whose
        round-off (about ``1e-15`` relative to the largest probability) makes far-tail
        probabilities below that level meaningless (the bounds are unaffected).

    Examples
    --------
    >>> pmf = coverage_count_pmf(19, 0.1, 10)
    >>> float(pmf.sum().round(12))
    1.0
    """
    for name, value, low in (
        ("n_calibration", n_calibration, 0),
        ("n_test", n_test, 1),
        ("n_repeats", n_repeats, 1),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not np.isfinite(value)
            or int(value) != value
            or value < low
        ):
            raise ValueError(f"`{name}` must be an integer >= {low}, got {value!r}.")
    if np.ndim(alpha) != 0:
        raise ValueError(
            f"`alpha` must be a single level here, got {alpha!r}; coverage_bounds takes several."
        )
    level = float(check_alpha(alpha)[0])
    conforming = int(conformal_rank(int(n_calibration), level, kind="conformity")[0])
    total = int(n_repeats) * int(n_test)
    if conforming == 0:  # too few calibration points: the set is everything, coverage 1
        pmf = np.zeros(total + 1)
        pmf[-1] = 1.0
        return pmf
    single = stats.betabinom.pmf(
        np.arange(int(n_test) + 1), int(n_test), int(n_calibration) + 1 - conforming, conforming
    )
    pmf = np.ones(1)
    power = single
    remaining = int(n_repeats)
    while remaining:  # convolution by repeated squaring: log2(R) FFTs
        if remaining & 1:
            pmf = np.clip(signal.fftconvolve(pmf, power), 0, None)
        remaining >>= 1
        if remaining:
            power = np.clip(signal.fftconvolve(power, power), 0, None)
    return pmf / pmf.sum()


def coverage_bounds(
    n_calibration: int,
    alpha: float | Sequence[float],
    n_test: int,
    confidence: float = 0.99,
    n_repeats: int = 1,
) -> tuple[float, float] | NDArray:
    """Interval that the observed coverage of a valid split-conformal method falls in.

    The central ``confidence`` interval of the coverage law of split conformal prediction
    with continuous scores: a Beta-Binomial count over ``n_test`` points, summed over
    ``n_repeats`` independent calibration/test resplits. Coverage outside it, for a method
    that claims split-conformal validity, is evidence of a bug.

    Parameters
    ----------
    n_calibration : int
        Calibration points per resplit (per group for Mondrian calibration).
    alpha : float or sequence of float
        Miscoverage level(s).
    n_test : int
        Test points per resplit.
    confidence : float, default=0.99
        Probability that a valid method's coverage lands inside the interval.
    n_repeats : int, default=1
        Number of independent resplits whose coverages are pooled (averaged).

    Returns
    -------
    (lower, upper) : tuple of float, or ndarray of shape (k, 2) for a sequence of levels

    Examples
    --------
    >>> low, high = coverage_bounds(1000, 0.1, 1000)
    >>> bool(low < 0.9 < high)
    True
    >>> coverage_bounds(1000, [0.1, 0.2], 1000, n_repeats=20).shape
    (2, 2)
    """
    check_confidence(confidence)
    levels = check_alpha(alpha)
    tail = (1 - confidence) / 2
    rows = []
    for level in levels:  # a loop over levels
        pmf = coverage_count_pmf(n_calibration, float(level), n_test, n_repeats)
        cdf = np.cumsum(pmf)
        total = pmf.size - 1
        low = int(np.searchsorted(cdf, tail, side="left"))
        high = int(np.searchsorted(cdf, 1 - tail, side="left"))
        rows.append((low / total, min(high, total) / total))
    if np.ndim(alpha) == 0:
        return rows[0]
    return np.asarray(rows)
