"""The conformal quantile: one function for every method of the library.

Split conformal prediction reduces to one order statistic of the calibration scores.
With ``n`` nonconformity scores (lower means more typical) the threshold at miscoverage
``alpha`` is the ``ceil((n + 1)(1 - alpha))``-th smallest score, and ``+inf`` when that
rank exceeds ``n``. Conformity scores (higher means more typical) use the
``floor((n + 1) alpha)``-th smallest score, and ``-inf`` when that rank is 0; this is the
same rule applied to the negated scores, and it is implemented that way.

The weighted variant puts weight ``w_i`` on calibration score ``i`` and the test point's
weight on ``+inf`` (the finite-sample correction done once); with unit weights it returns
exactly the unweighted order statistic.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from uqconform._validation import (
    holds_missing_values,
    real_values,
    swapped_level_hint,
    value_summary,
)
from uqconform._warnings import warn_user

__all__ = [
    "check_alpha",
    "conformal_quantile",
    "conformal_rank",
    "effective_sample_size",
    "minimum_scores",
    "weighted_quantile",
]

# (n + 1)(1 - alpha) is often an integer in exact arithmetic (n = 99, alpha = 0.1) but not
# in floating point (90.00000000000001); ranks are rounded to this tolerance first.
_RANK_TOLERANCE = 1e-9


def check_alpha(
    alpha: float | Sequence[float] | ArrayLike,
    name: str = "alpha",
    meaning: str = "the miscoverage level, e.g. 0.1 for 90% coverage",
    owner: Any = None,
) -> NDArray:
    """Validate a miscoverage level (or several) and return them as a 1-D float array.

    Parameters
    ----------
    alpha : float or sequence of float
        Miscoverage level(s), each strictly inside (0, 1).
    name : str, default="alpha"
        Argument name used in error messages.
    meaning : str, default="the miscoverage level, e.g. 0.1 for 90% coverage"
        What the level is, for the out-of-range message (a risk controller's ``alpha``
        bounds an expected loss instead).
    owner : object, optional
        The wrapper whose ``alpha`` this is: a model given as ``alpha`` (the arguments
        swapped, ``Wrapper(0.1, model)``) is told the right call naming its class.

    Returns
    -------
    ndarray of shape (k,)
        The levels, as floats.

    Raises
    ------
    TypeError
        If ``alpha`` is not a number or a sequence of numbers.
    ValueError
        If a level is NaN or outside (0, 1), or the sequence is empty.

    Examples
    --------
    >>> check_alpha(0.1)
    array([0.1])
    >>> check_alpha([0.05, 0.2])
    array([0.05, 0.2 ])
    """
    levels = real_values(alpha)
    if levels is None:  # text (also "0.1" in a list), booleans, None, ragged nesting
        swapped = ""  # Wrapper(0.1, model): the arguments swapped
        if any(callable(getattr(alpha, method, None)) for method in ("fit", "predict", "forward")):
            swapped = swapped_level_hint(owner)
        raise TypeError(
            f"`{name}` must be a float in (0, 1) or a sequence of them, got "
            f"{_sentence_end(value_summary(alpha))}{swapped}"
        )
    if levels.ndim > 1:
        raise ValueError(f"`{name}` must be a float or a 1-D sequence, got shape {levels.shape}.")
    levels = levels.reshape(-1)
    if levels.size == 0:
        raise ValueError(f"`{name}` is an empty sequence; give at least one level in (0, 1).")
    bad = ~((levels > 0) & (levels < 1))  # NaN fails both comparisons
    if bad.any():
        shown: Any = [float(f"{level:.4g}") for level in levels[bad][:5]]
        if np.ndim(alpha) == 0:  # a single number reads as given, not as a list
            shown = shown[0]
        count = int(bad.sum())
        more = f" and {count - 5} more, of {levels.size} levels" if count > 5 else ""
        raise ValueError(
            f"`{name}` must lie strictly between 0 and 1 (it is {meaning}); got {shown}{more}."
        )
    return levels


def _sentence_end(text: str) -> str:
    """``text`` closing a sentence: a full stop, unless it ends in an ellipsis already."""
    return text if text.endswith("...") else f"{text}."


def check_single_alpha(
    alpha: float,
    name: str = "alpha",
    meaning: str = "the miscoverage level, e.g. 0.1 for 90% coverage",
    hint: str = "",
) -> float:
    """`check_alpha` for a function that takes exactly one level, returned as a float (a
    sequence of one level is that level, as everywhere in the library).

    Parameters
    ----------
    alpha : float
        The level, strictly inside (0, 1).
    name, meaning : str
        As in `check_alpha`.
    hint : str, default=""
        Appended to the message refusing a sequence (what to call instead).

    Examples
    --------
    >>> check_single_alpha(0.1)
    0.1
    """
    levels = check_alpha(alpha, name, meaning)
    if levels.size != 1:
        raise ValueError(
            f"`{name}` must be a single level in (0, 1) here, got "
            f"{_sentence_end(value_summary(alpha))}{hint}"
        )
    return float(levels[0])


def check_miscoverage(
    alpha: float | Sequence[float] | ArrayLike, name: str = "alpha", owner: Any = None
) -> NDArray:
    """`check_alpha` for a wrapper's level (``owner``, the wrapper, named in the message for
    swapped arguments), warning when a level above 0.5 looks like a coverage level
    (``alpha=0.9`` meant as 90%: the sets would cover about 10%).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     levels = check_miscoverage(0.9)
    >>> print(caught[0].message)  # doctest: +ELLIPSIS
    alpha=0.9 is the miscoverage level: the sets aim to cover 1 - alpha = 10% of points...
    """
    levels = check_alpha(alpha, name, owner=owner)
    if levels.max() > 0.5:
        high = float(levels.max())
        near_one = high >= 0.99999  # shown as given: never "alpha=1" or "100% coverage"
        shown = repr(high) if near_one else f"{high:g}"
        # near 1 in decimal, from the level as written (0.99999: 99.999, not 99.99900000000001)
        coverage = f"{100 * high:g}"
        if near_one:
            coverage = format((Decimal(repr(high)) * 100).normalize(), "f")
        warn_user(
            f"{name}={shown} is the miscoverage level: the sets aim to cover 1 - {name} = "
            f"{100 * (1 - high):.3g}% of points. For {coverage}% coverage pass "
            f"{name}={1 - high:.3g}.",
            UserWarning,
        )
    return levels


def levels_text(levels: NDArray) -> str:
    """Levels for a message, without float noise (``0.060000000000000005`` reads 0.06): one
    level reads as a number, several as a list.

    Examples
    --------
    >>> levels_text(np.array([0.05 + 0.01, 0.2])), levels_text(np.array([0.1]))
    ('[0.06, 0.2]', '0.1')
    """
    texts = [f"{level:g}" for level in np.ravel(levels)]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def check_call_alpha(
    alpha: float | Sequence[float] | ArrayLike | None,
    default: float | Sequence[float] | ArrayLike,
    X: Any = None,
) -> NDArray:
    """The levels of one prediction call: ``alpha`` when given, checked and warned about
    above 0.5 as `check_miscoverage` does, else the wrapper's own ``default`` (warned about
    where it was set to work: at fit or calibrate).

    Given the call's ``X``, more than 10 levels, one per row of ``X``, are refused: they are
    the targets passed as the second argument (``predict_interval(X_test, y_test)``), which
    read as levels when they lie in (0, 1) and gave one interval per row and target.

    Examples
    --------
    >>> check_call_alpha(None, 0.1).tolist(), check_call_alpha([0.05, 0.1], 0.1).tolist()
    ([0.1], [0.05, 0.1])
    """
    if alpha is None:
        return check_alpha(default, "alpha")
    shape = getattr(X, "shape", None)
    rows = shape[0] if shape else len(X) if isinstance(X, (list, tuple)) else None
    if rows is not None and rows > 10 and np.ndim(alpha) == 1 and np.size(alpha) == rows:
        raise ValueError(
            f"`alpha` has {rows} values, one per row of `X`: a prediction call's second "
            "argument is `alpha`, the miscoverage level(s), were the targets passed there? "
            "Predict with predict_set(X, alpha=0.1) (a classifier's sets) or "
            "predict_interval(X, alpha=0.1) (a regressor's intervals) and give the targets "
            "to uqconform.evaluation.coverage or evaluate. (For that many levels, "
            "predict the rows in two calls.)"
        )
    try:
        return check_miscoverage(alpha, "alpha")
    except (TypeError, ValueError) as error:
        # a prediction call's second argument is alpha: targets passed there land here
        # (many values, or one per row of X: text labels or numbers outside (0, 1))
        try:
            size = np.size(alpha)
        except ValueError:  # ragged nesting
            raise error from None
        if size <= 10 and (rows is None or np.ndim(alpha) != 1 or size != rows):
            raise
        raise type(error)(
            f"{error} A prediction call's second argument is `alpha`: were targets passed there?"
        ) from None


def conformal_rank(
    n: int, alpha: ArrayLike, kind: Literal["nonconformity", "conformity"] = "nonconformity"
) -> NDArray:
    """Rank (1-based, among ``n`` sorted scores) of the conformal threshold.

    Parameters
    ----------
    n : int
        Number of calibration scores.
    alpha : float or array-like
        Miscoverage level(s).
    kind : {"nonconformity", "conformity"}
        ``"nonconformity"``: ``ceil((n + 1)(1 - alpha))``, which exceeds ``n`` when there are
        too few scores. ``"conformity"``: ``floor((n + 1) alpha)``, which is 0 then.

    Returns
    -------
    ndarray of int
        One rank per level.

    Examples
    --------
    >>> conformal_rank(99, 0.1)
    array([90])
    >>> conformal_rank(99, 0.1, kind="conformity")
    array([10])
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError(f"`n` must be a non-negative integer, got {n!r}.")
    levels = check_alpha(alpha)
    # The tolerance settles levels a rounding error away from a rank; it must not carry a
    # level within 1e-9 / (n + 1) of 0 or 1 past the ranks exact arithmetic gives for
    # alpha in (0, 1): 1 to n + 1 (nonconformity), 0 to n (conformity).
    if kind == "nonconformity":
        rank = np.ceil((n + 1) * (1 - levels) - _RANK_TOLERANCE)
        return np.clip(rank, 1, n + 1).astype(np.int64)
    if kind == "conformity":
        rank = np.floor((n + 1) * levels + _RANK_TOLERANCE)
        return np.clip(rank, 0, n).astype(np.int64)
    raise ValueError(f"`kind` must be 'nonconformity' or 'conformity', got {kind!r}.")


def conformal_quantile(
    scores: ArrayLike,
    alpha: float | Sequence[float] | ArrayLike,
    *,
    kind: Literal["nonconformity", "conformity"] = "nonconformity",
    weights: ArrayLike | None = None,
    test_weight: float | ArrayLike = 1.0,
    warn: bool | str = True,
) -> NDArray:
    """Conformal threshold of calibration scores at one or several miscoverage levels.

    Parameters
    ----------
    scores : array-like of shape (n,)
        Calibration scores. NaN is rejected.
    alpha : float or sequence of float
        Miscoverage level(s) in (0, 1).
    kind : {"nonconformity", "conformity"}, default="nonconformity"
        Rank convention. A test point is accepted when its nonconformity score is
        ``<=`` the threshold, or when its conformity score is ``>=`` the threshold.
    weights : array-like of shape (n,) or (m, n), optional
        Non-negative weights of the calibration scores (weighted conformal prediction);
        a 2-D array gives one set of weights, hence one threshold, per test point.
    test_weight : float or array-like of shape (m,), default=1.0
        Weight of the test point, placed on ``+inf`` (``-inf`` for conformity scores).
        Only used with ``weights``. A 1-D array of ``m`` entries (``m = 1`` too) with 1-D
        ``weights``: one threshold per test point, sharing the calibration weights (as in
        covariate-shift CP, where ``w(x_i)`` is fixed and each test point brings its own
        ``w(x)``). An infinite test weight (a test point off the calibration data's
        support, e.g. an infinite density ratio) gives an infinite threshold, and so does
        a test point whose weight and calibration weights are all zero (with a warning).
    warn : bool or str, default=True
        Emit a ``UserWarning`` when there are too few scores for a level, in which case
        the threshold is infinite and the prediction set is the whole output space; a
        string names that set in the warning (e.g. ``"the set of every class"``).

    Returns
    -------
    ndarray of shape (k,) or (m, k)
        Thresholds, one per level (and per row of a 2-D ``weights``, or per entry of a
        1-D ``test_weight``).

    Examples
    --------
    >>> scores = [0.5, 0.1, 0.9, 0.3]
    >>> conformal_quantile(scores, 0.4)  # rank ceil(5 * 0.6) = 3
    array([0.5])
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     conformal_quantile(scores, 0.1)  # rank 5 > 4: whole space, with a warning
    array([inf])
    >>> caught[0].category.__name__
    'UserWarning'
    >>> conformal_quantile(scores, 0.4, kind="conformity")  # rank floor(5 * 0.4) = 2
    array([0.3])
    >>> conformal_quantile(scores, 0.4, weights=[1, 1, 1, 1])
    array([0.5])
    """
    values = np.asarray(scores, dtype=float)
    if values.ndim != 1:
        raise ValueError(f"`scores` must be 1-D, got shape {values.shape}.")
    if np.isnan(values).any():
        raise ValueError("`scores` contains NaN; conformity scores must be numbers.")
    levels = check_alpha(alpha)
    if kind == "conformity":
        # floor((n+1) alpha)-th smallest of s == -(ceil((n+1)(1-alpha))-th smallest of -s)
        return -conformal_quantile(
            -values, levels, weights=weights, test_weight=test_weight, warn=warn
        )
    if kind != "nonconformity":
        raise ValueError(f"`kind` must be 'nonconformity' or 'conformity', got {kind!r}.")

    if weights is None:
        n = values.size
        ranks = conformal_rank(n, levels)
        thresholds = np.full(levels.shape, np.inf)
        finite = ranks <= n
        if finite.any():
            kth = np.maximum(ranks[finite] - 1, 0)
            thresholds[finite] = _kth_smallest(values, kth)
        if warn and not finite.all():
            _warn_too_few(n, levels[~finite], *([warn] if isinstance(warn, str) else []))
        return thresholds
    return _weighted_conformal_quantile(values, levels, weights, test_weight, bool(warn))


# Above this many scores, the order statistics are selected inside a band bracketed by a
# strided sample (a few percent of the scores) instead of partitioning all of them.
_BRACKETED_SELECTION_MIN = 10_000
_SAMPLE_STRIDE = 16


def _kth_smallest(values: NDArray, kth: NDArray) -> NDArray:
    """``np.sort(values)[kth]`` (``kth``: 0-based ranks), without sorting.

    On large arrays a strided sample brackets the ranks by values ``lo <= hi``; only the
    scores between them are partitioned (exact whenever the bracket holds the ranks, which
    is checked; otherwise every score is partitioned). About six times faster than
    ``np.partition`` on 1e5 scores.

    Examples
    --------
    >>> import numpy as np
    >>> values = np.random.default_rng(0).permutation(20_000).astype(float)
    >>> _kth_smallest(values, np.array([17_999, 99]))
    array([17999.,    99.])
    """
    n = values.size
    ranks = np.unique(kth)
    # ranks spread over more than a quarter of the scores: the band would hold many of them
    if n >= _BRACKETED_SELECTION_MIN and ranks[-1] - ranks[0] <= n // 4:
        sample = values[::_SAMPLE_STRIDE]
        m = sample.size
        ends = ranks[[0, -1]] / n  # quantile levels of the lowest and highest rank
        # four binomial standard deviations of a sample rank, plus a little
        margin = 4 * np.sqrt(m * ends * (1 - ends)) + 4
        sample_ranks = np.clip((ends * m + [-margin[0], margin[1]]).astype(np.intp), 0, m - 1)
        lo, hi = np.partition(sample, sample_ranks)[sample_ranks]
        below = np.count_nonzero(values < lo)
        band = values[(values >= lo) & (values <= hi)]
        if below <= ranks[0] and below + band.size > ranks[-1]:
            return np.partition(band, ranks - below)[np.asarray(kth) - below]
    return np.partition(values, ranks)[kth]


def minimum_scores(alpha: float) -> int:
    """Fewest scores for a finite threshold at ``alpha``: the smallest ``n`` with
    ``ceil((n + 1)(1 - alpha)) <= n``.

    Examples
    --------
    >>> minimum_scores(0.1)
    9
    """
    level = check_single_alpha(alpha)
    # conformal_rank's rule ceil((n + 1) fl(1 - a) - tol) <= n holds from about
    # (1 - tol) / (1 - fl(1 - a)) - 1 on (1 - fl(1 - a) is exact, and differs from a by up
    # to 1e-16 / a relatively); the float product may land a few counts off, so the count
    # is then settled against the rule itself by bisection (the rule is monotone in n)
    effective = 1.0 - float(1.0 - level)
    if effective < 2.0**-52:  # below, n + 1 is not a float of its own: the rule cannot tell
        # in exact arithmetic (1 / 5e-324 overflows a float)
        return max(math.ceil(Fraction(1 - _RANK_TOLERANCE) / Fraction(level) - 1), 0)
    count = max(int(np.ceil((1 - _RANK_TOLERANCE) / effective - 1)), 0)

    def finite(n: int) -> bool:
        return bool(conformal_rank(n, level)[0] <= n)

    low, high = count, count  # find low failing (or -1) and high holding, then bisect
    step = 1
    while not finite(high):
        low, high = high, high + step
        step *= 2
    if low == high:  # count holds already: look below it
        step = 1
        low = high - 1
        while low >= 0 and finite(low):
            high, low = low, low - step
            step *= 2
    while high - low > 1:
        middle = (low + high) // 2
        if finite(middle):
            high = middle
        else:
            low = middle
    return max(high, 0)


def count_text(count: int) -> str:
    """A count of scores for a message: exact up to a billion, else 3 significant digits
    (`minimum_scores` at alpha = 1e-300 is a 301-digit number).

    Examples
    --------
    >>> count_text(19), count_text(minimum_scores(1e-300))
    ('19', '1e+300')
    """
    if count < 10**9:
        return str(count)
    if count < 10**308:
        return f"{float(count):.3g}"
    return f"{Decimal(count):.3g}"  # beyond the float range (5e-324 needs 2e+323)


def effective_sample_size(weights: ArrayLike) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` of non-negative weights.

    How many equally weighted scores carry as much information as the weighted ones: ``n``
    for equal weights, 1 when one weight dominates. A weighted threshold rests on few
    scores when it is small (compare it with ``minimum_scores(alpha)``).

    Parameters
    ----------
    weights : array-like of shape (n,)
        Finite, non-negative weights, not all zero.

    Returns
    -------
    float

    Examples
    --------
    >>> effective_sample_size([1.0, 1.0, 1.0, 1.0])
    4.0
    >>> effective_sample_size([1.0, 0.0, 0.0, 0.0])
    1.0
    """
    w = real_values(weights)
    if w is None or w.ndim != 1:
        raise ValueError(f"`weights` must be a 1-D array of numbers, got {weights!r}.")
    if not np.isfinite(w).all() or (w < 0).any() or not w.any():
        raise ValueError("`weights` must be finite and non-negative, not all zero.")
    scaled = w / w.max()  # no overflow in the squares
    return float(scaled.sum() ** 2 / np.sum(scaled**2))


def _weight_values(weights: Any, per: str) -> NDArray:
    """``weights`` as a float array (one weight per ``per``), or a ValueError naming
    ``weights`` when they are not real numbers (text, complex numbers, booleans, missing
    entries, rows of different lengths), instead of numpy's message."""
    w = real_values(weights)
    if w is not None:
        return w
    if isinstance(weights, np.ma.MaskedArray):  # (real_values refuses every masked array)
        masked = int(np.ma.count_masked(weights))
        raise ValueError(
            f"`weights` is a masked array ({masked} of {np.size(weights)} entries masked), "
            "and masked arrays are not taken (a mask would be ignored): pass "
            "weights.filled(0) to give the masked entries weight 0, or np.asarray(weights) "
            f"for the values under the mask; one weight per {per}."
        )
    try:
        kind = np.asarray(weights).dtype.kind
    except (TypeError, ValueError):  # ragged nesting
        raise ValueError(
            f"`weights` holds rows of different lengths: one weight per {per} (2-D weights: "
            "rows of the same length)."
        ) from None
    if kind == "c":
        raise ValueError(
            f"`weights` holds complex numbers, got {value_summary(weights)}: weights are "
            "real, finite and non-negative."
        )
    if holds_missing_values(weights):
        raise ValueError(
            f"`weights` has missing entries (None or pd.NA): every {per} needs a finite, "
            "non-negative weight."
        )
    if kind == "O" and any(
        isinstance(entry, Decimal) for entry in np.ravel(np.asarray(weights, dtype=object))
    ):
        raise ValueError(
            f"`weights` holds Decimal numbers, got {value_summary(weights)}, which are not "
            "taken: convert with float (e.g. np.asarray(weights, dtype=float)); finite, "
            f"non-negative weights, one per {per}."
        )
    hint = " (booleans: pass weights.astype(float) for 0/1 weights)" if kind == "b" else ""
    raise ValueError(
        f"`weights` must be real numbers, got {value_summary(weights)}{hint}: finite, "
        f"non-negative weights, one per {per}."
    )


def _warn_too_few(
    n: int,
    levels: NDArray,
    outcome: str = "the whole output space (an infinite interval, or every class)",
    *,
    each_side: bool = False,
) -> None:
    """Warn that ``n`` scores are too few for ``levels`` (``each_side``: two one-sided
    machines at ``alpha / 2`` each, as the fast full-CP algorithm uses)."""
    how = " with algorithm='fast', whose two one-sided machines each work at alpha / 2"
    needed = minimum_scores(levels.min() / 2 if each_side else levels.min())
    warn_user(
        f"Only {n} scores (calibration or training points): too few for "
        f"alpha={levels_text(levels)}{how if each_side else ''} (at least "
        f"{count_text(needed)} are needed), so the prediction set is {outcome}.",
        UserWarning,
    )


def _weighted_conformal_quantile(
    values: NDArray, levels: NDArray, weights: ArrayLike, test_weight: ArrayLike, warn: bool
) -> NDArray:
    w = _weight_values(weights, "calibration score")
    if w.shape[-1:] != values.shape or w.ndim > 2:
        raise ValueError(
            f"`weights` must have shape (n,) or (m, n) with n={values.size}, got {w.shape}."
        )
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("`weights` must be finite and non-negative.")
    w_test = real_values(test_weight)
    if w_test is None:
        raise ValueError(f"`test_weight` must be a number or numbers, got {test_weight!r}.")
    if np.isnan(w_test).any() or (w_test < 0).any():
        raise ValueError("`test_weight` must be non-negative (+inf gives the whole space).")
    shared = w.ndim == 1 and w_test.ndim == 1  # one weight per test row (even one row)
    single = w.ndim == 1 and not shared
    w2 = np.atleast_2d(w)
    m = w_test.size if shared else w2.shape[0]
    if w_test.ndim > 1 or w_test.size not in (1, m):
        per = "per test row (1-D)" if w.ndim == 1 else f"per row of `weights` ({m})"
        raise ValueError(
            f"`test_weight` must be a number or have one entry {per}, got shape {w_test.shape}."
        )
    w_test = np.array(np.broadcast_to(w_test.reshape(-1), (m,)))  # a copy, rescaled below
    order = np.argsort(values, kind="stable")
    sorted_values = np.append(values[order], np.inf)
    if w.ndim == 1:  # one set of calibration weights, shared by every test weight
        scaled, rescaled_test = _rescaled(w[None, :], w_test)
        w_test = cast(NDArray, rescaled_test)
        cumulative = np.cumsum(scaled[0, order])
        total = (cumulative[-1] if values.size else 0.0) + w_test
        thresholds = _shared_weight_thresholds(sorted_values[:-1], cumulative, w_test, levels)
    else:  # one set of calibration weights per test point
        scaled, scaled_test = _rescaled(w2, w_test)
        total = scaled.sum(axis=1) + cast(NDArray, scaled_test)
        cumulative = _cumulative_shares(scaled, order, np.where(total > 0, total, 1.0))
        targets = _weighted_targets(levels, values.size)
        thresholds = sorted_values[_rowwise_searchsorted(cumulative, targets)]
        thresholds[total <= 0] = np.inf  # (the shared path's routine does this itself)
        w_test = cast(NDArray, scaled_test)
    empty = total <= 0  # no weight at all: no threshold is defined, the whole space
    if warn and np.isinf(thresholds).any():
        _warn_whole_space(thresholds, levels, w_test, total, empty, shared, single)
    return thresholds[0] if single else thresholds


def _warn_whole_space(
    thresholds: NDArray,
    levels: NDArray,
    w_test: NDArray,
    total: NDArray,
    empty: NDArray,
    shared: bool,
    single: bool,
) -> None:
    """Warn that some weighted thresholds are infinite: the test point carries too much of
    the total weight, or (``empty`` rows) there is no weight at all."""
    infinite = np.isinf(thresholds)
    rows = infinite.any(axis=1)
    name = "test_weight" if shared else "weights"
    heavy = rows & ~empty
    if heavy.any():
        with np.errstate(invalid="ignore"):  # an infinite test weight carries everything
            share = float(
                np.max(np.where(np.isinf(w_test[heavy]), 1.0, w_test[heavy] / total[heavy]))
            )
        where = "" if single else f" ({int(heavy.sum())} of {rows.size} rows of `{name}`)"
        warn_user(
            f"The weights leave too little mass on the calibration scores for "
            f"alpha={levels_text(levels[infinite[heavy].any(axis=0)])}: the test point "
            f"carries {share:.3g} of the total weight{where}, so the prediction set is the "
            "whole output space. More scores, or weights closer to uniform, give finite "
            "thresholds.",
            UserWarning,
        )
    if empty.any():
        where = "" if single else f" ({int(empty.sum())} of {rows.size} rows of `{name}`)"
        warn_user(
            f"`weights` and `test_weight` sum to zero{where}: no threshold is defined there, "
            "so the prediction set is the whole output space. Give some calibration score "
            "a positive weight.",
            UserWarning,
        )


def _rescaled(
    weights: NDArray, test_weight: NDArray | None = None
) -> tuple[NDArray, NDArray | None]:
    """Each row of weights (and its test weight) over the row's largest weight, so that
    sums of finite weights stay finite (weights of 1e307 summed to inf and gave a
    threshold far too small) and sums of tiny ones are not rounded on the subnormal grid
    (weights of 5e-324 gave a threshold one score too low); rows whose largest weight is
    1, and zero rows, are left alone."""
    scale = weights.max(axis=1) if weights.shape[1] else np.zeros(weights.shape[0])
    scale = np.where(scale > 0.0, scale, 1.0)
    if (scale == 1.0).all():
        return weights, test_weight
    rescaled = weights / scale[:, None]
    return rescaled, None if test_weight is None else test_weight / scale


def _weighted_targets(levels: NDArray, n: int) -> NDArray:
    """Share of the total weight the threshold's cumulative weight must reach, per level:
    ``1 - alpha``, less the unweighted rank's tolerance (so that unit weights give the
    unweighted order statistic)."""
    return (1 - levels) - _RANK_TOLERANCE / (n + 1)


def _shared_weight_thresholds(
    sorted_scores: NDArray, cumulative: NDArray, test_weights: NDArray, levels: NDArray
) -> NDArray:
    """Weighted conformal thresholds ``(m, k)`` of ``m`` test points that share one set of
    calibration weights (Tibshirani et al., 2019).

    ``sorted_scores`` ``(n,)`` ascending, ``cumulative`` the running sum of their weights
    in that order, ``test_weights`` ``(m,)`` on the same scale. Per test point and level,
    the smallest score whose cumulative weight reaches ``1 - alpha`` of the total plus the
    point's own weight (which sits on ``+inf``); ``+inf`` when no score does, when the
    test weight is infinite, or when there is no weight at all. One search per test point
    and level: the calibration weights are sorted and summed once. "Reaches" allows a
    shortfall of ``1e-9 / (n + 1)`` of the total (`_weighted_targets`: the tolerance that
    keeps unit weights equal to the unweighted order statistic), so a score short of the
    level by less can be taken (coverage cost below 1e-9).

    Examples
    --------
    >>> import numpy as np
    >>> _shared_weight_thresholds(
    ...     np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0]), np.array([1.0, 9.0]),
    ...     np.array([0.5]))
    array([[ 2.],
           [inf]])
    """
    total = cumulative[-1] if cumulative.size else 0.0
    mass = total + np.asarray(test_weights, dtype=float)  # +inf for a point off the support
    targets = _weighted_targets(levels, sorted_scores.size)
    index = np.searchsorted(cumulative, mass[:, None] * targets[None, :], side="left")
    thresholds = np.append(sorted_scores, np.inf)[index]
    # no weight anywhere: nothing to rank; no calibration weight: the test point carries
    # all of it (a tiny test weight times 1 - alpha underflowed to 0, the first score)
    thresholds[(mass <= 0) | (total <= 0)] = np.inf
    return thresholds


def _cumulative_shares(weights: NDArray, order: NDArray, totals: NDArray) -> NDArray:
    """Cumulative weight of the sorted values over each row's total, ``(m, n)``: one array,
    accumulated and normalised in place."""
    cumulative = weights[:, order]
    np.cumsum(cumulative, axis=1, out=cumulative)
    cumulative /= totals[:, None]
    return cumulative


def _rowwise_searchsorted(cumulative: NDArray, targets: NDArray) -> NDArray:
    """``searchsorted(cumulative[i], targets, side="left")`` for every row at once.

    Counts, per row and target, the entries strictly below the target: exact whatever the
    number of rows (no shared offset that would cost floating-point resolution).
    """
    return np.stack([(cumulative < t).sum(axis=1) for t in targets], axis=1)  # loop: levels


def weighted_quantile(values: ArrayLike, weights: ArrayLike, q: float | ArrayLike) -> NDArray:
    """Plain weighted quantile (inverse of the weighted empirical CDF), no correction.

    The building block for conditional quantile models (quantile random forests,
    Nadaraya-Watson weights): the smallest value whose normalised cumulative weight
    reaches ``q`` (at ``q = 0``, the smallest value of positive weight).

    Parameters
    ----------
    values : array-like of shape (n,)
    weights : array-like of shape (n,) or (m, n)
        Non-negative weights, not all zero (per row).
    q : float or array-like of shape (k,)
        Levels in [0, 1].

    Returns
    -------
    ndarray of shape (k,) or (m, k)

    Examples
    --------
    >>> weighted_quantile([1.0, 2.0, 3.0], [1, 1, 2], 0.5)
    array([2.])
    """
    v = real_values(values)
    if v is None or v.ndim != 1 or not v.size:
        raise ValueError(
            "`values` must be a non-empty 1-D array of numbers, got "
            + (f"shape {v.shape}." if v is not None else f"{type(values).__name__}.")
        )
    if np.isnan(v).any():
        raise ValueError("`values` contains NaN.")
    w = _weight_values(weights, "value")
    given = real_values(q)
    levels = np.atleast_1d(np.empty(0) if given is None else given)
    if given is None or levels.ndim > 1 or not levels.size:
        raise ValueError(f"`q` must be a level or a 1-D sequence of levels in [0, 1], got {q!r}.")
    if ((levels < 0) | (levels > 1) | np.isnan(levels)).any():
        raise ValueError(f"`q` must lie in [0, 1], got {levels.tolist()}.")
    if w.shape[-1:] != v.shape or w.ndim > 2:
        raise ValueError(f"`weights` must have shape (n,) or (m, n) with n={v.size}.")
    if (w < 0).any() or not np.isfinite(w).all():
        raise ValueError("`weights` must be finite and non-negative.")
    single = w.ndim == 1
    w2, _ = _rescaled(np.atleast_2d(w))
    totals = w2.sum(axis=1)
    if (totals <= 0).any():
        raise ValueError("`weights` sum to zero.")
    order = np.argsort(v, kind="stable")
    cumulative = _cumulative_shares(w2, order, totals)
    # at q = 0 the smallest value with positive weight (values of zero weight are absent)
    targets = np.maximum(levels - _RANK_TOLERANCE, np.finfo(float).tiny)
    index = _rowwise_searchsorted(cumulative, targets)
    result = v[order][np.minimum(index, v.size - 1)]
    return result[0] if single else result
