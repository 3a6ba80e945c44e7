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
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import signal, special, stats

from uqconform.quantiles import check_alpha, check_single_alpha, conformal_rank

__all__ = ["coverage_bounds", "coverage_count_pmf"]


# Beyond this the tails of the pooled law fall below the window kept around its mass, and
# the bounds could be off by a count (an audit found it at 1 - 1e-15).
_MAX_CONFIDENCE = 1 - 1e-12
# The largest calibration set accepted: the law (Stirling's series from 1e4 points) is
# checked against exact rational arithmetic up to here.
_MAX_CALIBRATION = 10**12
# The most counts one resplit's law is evaluated on (about 15 s and 2 GB): more test points
# than that spread over carry no information the Beta law of the conditional coverage
# does not already give.
# resplits from which the refusal points to the normal law of the pooled coverage: with
# fewer, the skewed Beta law of each resplit shows in the tails (a review: 1% below a
# normal 99% interval's lower end at 2 resplits, 0.86% at 20)
_NORMAL_FROM_REPEATS = 50
_MAX_WINDOW = 2 * 10**7
# The most counts a pmf is returned on (800 MB), and the most test points in all.
_MAX_PMF = 10**8
_MAX_COUNTS = 10**15
# From this many calibration points the beta-binomial pmf comes from Stirling's series
# (`_beta_binomial_pmf`): scipy's loses digits as the Beta parameters grow.
_STIRLING_FROM = 10**4


def check_confidence(confidence: Any, *, positional: bool = False) -> float:
    """``confidence`` as a float strictly between 0 and 1 (else a message naming it;
    ``positional``: called by `coverage_bounds`, where a count there may be ``n_repeats``
    given by position)."""
    if isinstance(confidence, np.ndarray) and confidence.ndim == 0:
        confidence = confidence.item()  # a 0-d array is one number, as for alpha
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real):
        # a ValueError still (callers catch it), but saying the type is what is wrong
        raise ValueError(
            "`confidence` must be a float in (0, 1), the probability of the bounds (e.g. "
            f"0.99), got {type(confidence).__name__} {confidence!r}."
        )
    if not 0 < cast(float, confidence) <= _MAX_CONFIDENCE:
        value = float(confidence)
        hints = []
        if 50 <= value < 100:
            hints.append(f"a percentage? pass {value / 100:g}")
        if positional and value >= 1 and value.is_integer():
            hints.append(
                "a count? pass n_repeats by keyword: the order is n_calibration, alpha, "
                "n_test, confidence, n_repeats"
            )
        order = f" ({'; or '.join(hints)})" if hints else ""
        raise ValueError(
            "`confidence` must lie strictly between 0 and 1 (at most 1 - 1e-12: further "
            f"out the law's tails are below the precision it is computed to), got "
            f"{confidence!r}{order}."
        )
    return float(confidence)


def _is_finite(value: numbers.Real) -> bool:
    """Whether a real number is finite, also for Python integers too large for a float."""
    if isinstance(value, numbers.Integral):
        return True
    return bool(np.isfinite(float(value)))


def _check_counts(n_calibration: Any, n_test: Any, n_repeats: Any) -> None:
    """The sizes must be integers (``n_test`` and ``n_repeats`` at least one)."""
    for name, value, low in (
        ("n_calibration", n_calibration, 0),
        ("n_test", n_test, 1),
        ("n_repeats", n_repeats, 1),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not _is_finite(value)
            or int(cast(float, value)) != value
            or value < low
        ):
            swapped = (
                " (a level? the order is n_calibration, alpha, n_test)"
                if name == "n_test" and isinstance(value, numbers.Real) and 0 < float(value) < 1
                else ""
            )
            raise ValueError(f"`{name}` must be an integer >= {low}, got {value!r}{swapped}.")
    if n_calibration > _MAX_CALIBRATION:
        raise ValueError(
            f"`n_calibration` must be at most 1e12 (the law is checked against exact "
            f"arithmetic up to there), got {n_calibration!r}; with so many calibration "
            "points the covered count is binomial with probability 1 - alpha to many digits."
        )
    if int(n_test) * int(n_repeats) > _MAX_COUNTS:  # Python integers: no wrap-around
        raise ValueError(
            "`n_test` x `n_repeats` must be at most 1e15 (counts beyond are not exact in "
            f"floating point), got {n_test!r} x {n_repeats!r}."
        )


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
        resplit's law is the beta-binomial (renormalised): while both of its parameters
        (the conformal rank k and n + 1 - k) are below 1e4,
        ``scipy.stats.betabinom`` (absolute errors of 3e-12 at ``n_calibration = 1e4``
        against exact rationals in a review), beyond the binomial pmf corrected by
        Stirling's series, where scipy's differences of log-beta terms lose digits (4e-10
        at 1e6, 7e-7 at 1e9; the series: within about 1e-12 relative at 100 test points,
        9.1e-13 at worst in a review, at 1e6 calibration points and alpha 0.001, and about
        2e-11 at 1e4, against exact rationals and 40- to 60-digit arithmetic). Pooling
        uses FFT convolutions, whose round-off (about ``1e-15`` relative to the largest
        probability) makes far-tail probabilities below that level meaningless. The
        bounds agreed with an exact oracle in every case a review ran below confidence
        1 - 1e-12; at that confidence a count
        whose exact tail probability lies within about 1e-15 of ``(1 - confidence) / 2``
        can fall on either side (3 cases in about 900). ``n_calibration`` above 1e12 is
        refused, and so is a pmf of more than 1e8 counts (use `coverage_bounds`).

    Examples
    --------
    >>> pmf = coverage_count_pmf(19, 0.1, 10)
    >>> float(pmf.sum().round(12))
    1.0
    """
    _check_counts(n_calibration, n_test, n_repeats)
    alpha = check_single_alpha(alpha, hint=" coverage_bounds takes several.")
    if int(n_repeats) * int(n_test) + 1 > _MAX_PMF:
        raise ValueError(
            f"`n_test` x `n_repeats` = {int(n_test) * int(n_repeats)}: the pmf would hold "
            f"more than {_MAX_PMF:.0e} counts; use coverage_bounds, which keeps only "
            "the counts that carry the law's mass."
        )
    offset, window = _pooled_count_law(int(n_calibration), alpha, int(n_test), int(n_repeats))
    pmf = np.zeros(int(n_repeats) * int(n_test) + 1)
    pmf[offset : offset + window.size] = window
    return pmf


def _single_count_law(n_calibration: int, level: float, n_test: int) -> tuple[int, NDArray]:
    """One resplit's covered count law on the counts that carry its mass: ``(first, pmf)``.

    The Beta-Binomial pmf is evaluated on a window of ``mean +- 12 sd`` (doubled until the
    mass outside it is below ``1e-15``), not on all ``n_test + 1`` counts: at a million test
    points the full pmf costs most of an evaluation. Pooling keeps the same rule after each
    convolution (`_carrying_mass`): without it ``R`` resplits held ``R x n_test`` values
    through the FFTs (5.6 GB at ``R = 100``, a million test points, 100 calibration
    points; 0.9 GB with it).
    """
    moments = _count_moments(n_calibration, level, n_test)
    if moments is None:  # too few calibration points: the set is everything, coverage 1
        return n_test, np.ones(1)
    a, b, mean, sd = moments
    half = _half_window(sd)
    if _too_wide(half, n_test):
        raise ValueError(
            f"`n_test` = {n_test} with `n_calibration` = {n_calibration}: the covered "
            f"count spreads over about {min(2 * half, n_test):.2g} counts, more than the "
            f"{_MAX_WINDOW:.0e} this law is evaluated on. With so many test points the "
            f"coverage of one resplit is its conditional coverage, Beta({a}, {b}), to "
            f"within about {1 / np.sqrt(n_test):.1g}: use "
            f"scipy.stats.beta({a}, {b}).interval(confidence) for one resplit (pooled "
            "resplits average independent draws of it)."
        )
    while True:  # a loop that doubles the window until it holds the mass
        first, last = max(int(mean) - half, 0), min(int(mean) + half, n_test)
        pmf = _beta_binomial_pmf(np.arange(first, last + 1), n_test, a, b)
        # unimodal (both Beta parameters >= 1), so outside the window the pmf falls
        # further: at most n_test counts, each below the larger edge value
        edges = [pmf[0] if first > 0 else 0.0, pmf[-1] if last < n_test else 0.0]
        if max(edges) * (n_test + 1) <= 1e-15:
            # normalised: pooling raises the window's sum to the power n_repeats
            return first, pmf / pmf.sum()
        half *= 2


def _half_window(sd: float) -> int:
    """Half the counts one resplit's law is first held on: ``12 sd`` and a margin."""
    return int(np.ceil(12 * sd)) + 50


def _too_wide(half: int, n_test: int) -> bool:
    """Whether one resplit's window of ``half`` counts each side exceeds `_MAX_WINDOW`."""
    return min(2 * half, n_test) + 1 > _MAX_WINDOW


def _count_moments(
    n_calibration: int, level: float, n_test: int
) -> tuple[int, int, float, float] | None:
    """One resplit's covered count: its Beta-Binomial parameters ``(a, b)``, mean and sd, or
    None when the set is the whole space (too few calibration points: every point covered).

    The moments come from their formulas: scipy's ``betabinom.std`` is wrong beyond 1e9
    test points.
    """
    conforming = int(conformal_rank(n_calibration, level, kind="conformity")[0])
    if conforming == 0:
        return None
    a, b = n_calibration + 1 - conforming, conforming
    mean = n_test * a / (a + b)
    sd = float(np.sqrt(n_test * a * b * (a + b + n_test) / ((a + b) ** 2 * (a + b + 1))))
    return a, b, mean, sd


def _check_pooled_window(n_calibration: int, level: float, n_test: int, n_repeats: int) -> None:
    """Refuse a pooled law whose window would exceed `_MAX_WINDOW` counts, before any FFT.

    The window is sized as one resplit's (`_single_count_law`: ``mean +- 12 sd``) with the
    pooled sd, ``sqrt(n_repeats)`` times one resplit's; it never exceeds the
    ``n_repeats * n_test + 1`` counts of the support. Peak memory measured about 100 bytes
    per count of this estimate (0.99 GB at 1e7 counts, 1.56 GB at 1.9e7). One resplit's
    window too wide (or ``n_repeats = 1``) is left to `_single_count_law`'s own guard and
    message, about ``n_test``.
    """
    moments = _count_moments(n_calibration, level, n_test)
    if n_repeats == 1 or moments is None:
        return
    a, b, _, sd = moments
    if _too_wide(_half_window(sd), n_test):
        return  # one resplit is already too wide: _single_count_law says so
    pooled_sd = float(np.sqrt(n_repeats)) * sd
    window = min(24 * pooled_sd + 100, n_repeats * n_test)
    if window + 1 > _MAX_WINDOW:
        share_sd = pooled_sd / (n_repeats * n_test)  # sd of the pooled coverage (a share)
        mean = a / (a + b)
        if n_repeats >= _NORMAL_FROM_REPEATS:
            instead = (
                f"over {n_repeats} resplits it is close to normal with mean {mean!r} and sd "
                f"{share_sd!r}: use scipy.stats.norm({mean!r}, {share_sd!r})"
                ".interval(confidence)"
            )
        else:  # few resplits of a skewed Beta law: the normal's tails are off (a review)
            instead = (
                f"with {n_repeats} resplits it is not yet normal (the Beta law is skewed): "
                "simulate it, e.g. the mean over resplits of "
                f"rng.binomial({n_test}, rng.beta({a}, {b}, size=(draws, {n_repeats}))) / "
                f"{n_test}, and take its quantiles"
            )
        raise ValueError(
            f"`n_repeats` = {n_repeats} with `n_test` = {n_test} and `n_calibration` = "
            f"{n_calibration}: the pooled covered count spreads over about {window:.2g} "
            f"counts, more than the {_MAX_WINDOW:.0e} this law is evaluated on. The pooled "
            "coverage is the mean of independent resplit coverages (each Beta"
            f"({a}, {b}) plus the binomial noise of its test points); {instead}; or pass "
            "fewer `n_repeats`."
        )


def _beta_binomial_pmf(counts: NDArray, n_test: int, a: int, b: int) -> NDArray:
    """The Beta-Binomial(n_test, a, b) pmf at ``counts``: scipy's below ``_STIRLING_FROM``
    calibration points (``stats.betabinom.pmf`` unfrozen: the same values as a frozen
    ``betabinom(n_test, a, b)``, whose construction cost about 1 ms a call); beyond, where
    scipy's differences of log-gamma terms lose digits (relative errors of 5e-6 at 1e9
    calibration points, 5e-3 at 1e12, measured against 40-digit arithmetic), the binomial
    pmf of ``a / (a + b)`` corrected by Stirling's series (relative error within about
    1e-12 at 100 test points, 9.1e-13 measured at 1e6 calibration points and alpha 0.001,
    about 2e-11 at 1e4, the binomial coefficient's own at more)."""
    if max(a, b) < _STIRLING_FROM:
        return cast(NDArray, stats.betabinom.pmf(counts, n_test, a, b))
    k = counts.astype(float)
    log_pmf = (
        log_choose(n_test, k)
        + k * np.log1p(-b / (a + b))
        + (n_test - k) * np.log1p(-a / (a + b))
        + _log_rising_excess(a, k)
        + _log_rising_excess(b, n_test - k)
        - _log_rising_excess(a + b, np.array([float(n_test)]))
    )
    return cast(NDArray, np.exp(log_pmf))


def log_choose(n: int, k: NDArray) -> NDArray:
    """``log C(n, k)`` for float counts ``k`` (log-gamma), shared by the binomial pmfs of
    `_beta_binomial_pmf` and RPS's `majority_coverage_bounds`."""
    return cast(
        NDArray, special.gammaln(n + 1.0) - special.gammaln(k + 1.0) - special.gammaln(n - k + 1.0)
    )


def _log_rising_excess(x: float, k: NDArray) -> NDArray:
    """``log Gamma(x + k) - log Gamma(x) - k log x``: Stirling's series (two terms, a
    remainder below 1e-22 from ``x = 1e4``) for large ``x``, where the difference of
    log-gamma terms cancels; directly for smaller ``x``."""
    if x < _STIRLING_FROM:
        return cast(NDArray, special.gammaln(x + k) - special.gammaln(x) - k * np.log(x))

    def tail(y: NDArray | float) -> NDArray | float:
        return 1 / (12 * y) - 1 / (360 * y**3)

    return cast(NDArray, (x + k - 0.5) * np.log1p(k / x) - k + tail(x + k) - tail(x))


def _pooled_count_law(
    n_calibration: int, alpha: float, n_test: int, n_repeats: int
) -> tuple[int, NDArray]:
    """Covered count law pooled over ``n_repeats`` resplits, on a window: ``(first, pmf)``."""
    level = float(check_alpha(alpha)[0])
    _check_pooled_window(n_calibration, level, n_test, n_repeats)  # before any FFT
    first, power = _single_count_law(n_calibration, level, n_test)
    offset, pmf = 0, np.ones(1)
    remaining = n_repeats
    while remaining:  # convolution by repeated squaring: log2(R) FFTs
        if remaining & 1:
            offset, pmf = _carrying_mass(offset + first, signal.fftconvolve(pmf, power))
        remaining >>= 1
        if remaining:
            first, power = _carrying_mass(2 * first, signal.fftconvolve(power, power))
    return offset, pmf / pmf.sum()


def _carrying_mass(first: int, pmf: NDArray) -> tuple[int, NDArray]:
    """The counts of a convolved pmf above its FFT noise (``1e-15`` of its largest value):
    the law of a sum of ``R`` resplits spreads like ``sqrt(R)``, its support like ``R``, so
    the ends below the noise are dropped (negative noise is clipped to 0)."""
    pmf = np.clip(pmf, 0, None)
    carrying = np.flatnonzero(pmf >= 1e-15 * pmf.max())
    kept = pmf[carrying[0] : carrying[-1] + 1]
    return first + int(carrying[0]), kept / kept.sum()


def central_share_interval(
    offset: int, pmf: NDArray, total: int, tail: float
) -> tuple[float, float]:
    """The counts ``offset + i`` of a normalised count law ``pmf`` that leave at most
    ``tail`` below and above, as shares of ``total`` (the conventions of `coverage_bounds`,
    shared by RPS's `majority_coverage_bounds`)."""
    cdf = np.cumsum(pmf)
    low = offset + int(np.searchsorted(cdf, tail, side="left"))
    high = offset + int(np.searchsorted(cdf, 1 - tail, side="left"))
    return low / total, min(high, total) / total


def coverage_bounds(
    n_calibration: int,
    alpha: float | Sequence[float] | ArrayLike,
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
        Miscoverage level(s). Every level in (0, 1) is legitimate here (one-sided checks
        use levels above 0.5), so none warns: ``0.9`` meant as 90% coverage is
        ``alpha=0.1``, and a result below 0.5 says the level was read as miscoverage.
    n_test : int
        Test points per resplit.
    confidence : float, default=0.99
        Probability that a valid method's coverage lands inside the interval.
    n_repeats : int, default=1
        Number of independent resplits whose coverages are pooled (averaged).

    Notes
    -----
    * The interval is two-sided: a valid method lands below it with probability at most
      ``(1 - confidence) / 2``, so a one-sided validity check (lower end only) has that
      false-alarm rate.
    * With ties or discrete scores the coverage of a valid method is only larger: the lower
      end stays a valid test, the upper end does not (coverage above it is then expected).
    * With ``n_calibration < 1 / alpha - 1`` a valid method returns the whole space, so
      the interval is ``(1.0, 1.0)``; a method that instead clips the threshold to the
      largest score is flagged.
    * With one test point and no pooling the interval is ``(0.0, 1.0)``, unless the
      marginal probability of a miss, ``l / (n + 1)`` (``l = floor((n + 1) alpha)``), is
      below ``(1 - confidence) / 2`` (then ``(1.0, 1.0)``) or that of a cover is (then
      ``(0.0, 0.0)``, e.g. ``alpha = 0.999``): pool resplits.
    * Cost: the pooled law is held only on the counts that carry its mass, which grow like
      ``sqrt(n_repeats)`` times one resplit's spread; with a small ``n_calibration`` (a
      wide Beta law) and many test points that is still large (measured:
      ``n_calibration=100``, a million test points, ``n_repeats=100``: 2.5 s and 0.9 GB;
      100 test points, ``n_repeats=1e10``: 11 s and 1 GB). Refused, each with the law to
      use instead:

      - a resplit's law spread over more than 2e7 counts (``mean +- 12 sd``; from about
        3e7 test points with 100 calibration points at alpha 0.1): use the Beta law of
        the conditional coverage;
      - a pooled law spread over more than 2e7 counts (``24 sqrt(n_repeats)`` times one
        resplit's sd; from about 4e10 resplits of 100 test points with 100 calibration
        points at alpha 0.1, from about 800 resplits of a million test points with 100
        calibration points, from about 180 with 20): use the normal law of the pooled
        coverage, whose mean and sd the message gives;
      - ``n_calibration`` above 1e12 and ``n_test * n_repeats`` above 1e15.

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
    check_confidence(confidence, positional=True)  # (a count there: n_repeats?)
    _check_counts(n_calibration, n_test, n_repeats)
    levels = check_alpha(alpha)
    tail = (1 - confidence) / 2
    rows = []
    for level in levels:  # a loop over levels
        offset, pmf = _pooled_count_law(
            int(n_calibration), float(level), int(n_test), int(n_repeats)
        )
        rows.append(central_share_interval(offset, pmf, int(n_repeats) * int(n_test), tail))
    if np.ndim(alpha) == 0:
        return rows[0]
    return np.asarray(rows)
