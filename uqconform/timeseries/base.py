"""Sequential conformal prediction for time series: the design EnbPI, SPCI and KOWCPI share.

A method is a *residual source* (a leave-one-out bootstrap ensemble or a hold-out block),
a *conditional model* of the next residual given the recent ones (weights over stored
residuals), and the width-minimising search over ``beta``: the interval is
``f(x_t) + [Q_beta, Q_{1 - alpha + beta}]`` with the ``beta`` in ``[0, alpha]`` that gives
the narrowest interval.

The online protocol: ``predict_interval(X, y=y)`` issues the interval of each row from the
residuals known so far and, when ``y`` is given, absorbs the row's residual right after
(one step ahead); ``update(X, y)`` absorbs observations without predicting. The residual
memory keeps the last ``memory`` residuals.

The published algorithms have no finite-sample guarantee: their coverage is asymptotic
and conditional, under mixing assumptions on the residuals. ``finite_sample=True`` gives
at least ``1 - alpha`` when the residuals are exchangeable with equal weights (EnbPI; not
for a dependent series); with SPCI's and KOWCPI's data-dependent weights it is a
weighted-conformal approximation: on exchangeable series KOWCPI measured within half a
point of ``1 - alpha`` with a window of 1 at alpha 0.1 (0.896 to 0.903 over 150-300 seeds,
depending on the number of residuals) but below it at larger alpha, where its ``beta``
search on the stored residuals costs more (0.793 at alpha 0.2 and 0.682 to 0.689 at 0.3
over 100-340 seeds of 600 rows in a review; ``beta_grid=1`` gave 0.810 and 0.711), and
above it with longer windows (0.917 at 3, alpha 0.1), SPCI below it, more so with
longer windows (0.895, 0.891 and 0.886 at windows 1, 10 and 100, alpha 0.1, 100-900
seeds in a review; its width-minimising ``beta`` search on the stored residuals causes
most of it: ``beta_grid=1`` measured 0.895 at window 100). ACI
(``aci_gamma``) bounds the long-run miss rate on any sequence. Watch the rolling coverage
(``rolling_coverage``).
"""

from __future__ import annotations

import numbers
from abc import ABCMeta, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast, overload

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.ensemble import RandomForestRegressor
from sklearn.frozen import FrozenEstimator
from sklearn.utils.validation import _num_samples, check_is_fitted, validate_data

from uqconform._rows import check_sample_weight_rows, n_rows
from uqconform._seeding import check_random_state_value, random_generator, seed_parameters
from uqconform._validation import (
    check_bool,
    check_features,
    check_frozen_is_fitted,
    check_int,
    check_n_jobs,
    check_regression_model,
    check_regression_target,
    check_row_order,
    check_verbose,
    check_weights_row_order,
    check_wrapper_fitted,
    missing_target_error,
    no_calibrate_step,
    real_values,
    refuse_model_class,
    refuse_unencoded_features,
)
from uqconform._version import VersionedState
from uqconform._warnings import warn_user
from uqconform.base import (
    ExplainsCallMistakes,
    RefusesNestedDefaultParams,
    check_calibration_settings,
    check_nan_accepted,
    forward_input_tags,
    keeps_state_on_error,
    record_calibration_settings,
)
from uqconform.quantiles import (
    check_alpha,
    check_call_alpha,
    check_miscoverage,
    conformal_quantile,
    count_text,
    effective_sample_size,
    minimum_scores,
    weighted_quantile,
)
from uqconform.routing import RoutesFitParams
from uqconform.scores.regression import outward_margin
from uqconform.timeseries.conditional import lagged_pairs
from uqconform.timeseries.residuals import (
    bootstrap_residuals,
    holdout_residuals,
    prefit_residuals,
)

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["SequentialConformalRegressor", "rolling_coverage"]


def rolling_coverage(covered: ArrayLike, window: int = 50) -> NDArray:
    """Coverage of the last ``window`` steps at each step (shorter at the start).

    Parameters
    ----------
    covered : array-like of bool or 0/1 of shape (n_steps,)
        Whether each step's interval held its target (``coverage_history_``).
    window : int, default=50
        Number of steps averaged.

    Returns
    -------
    ndarray of shape (n_steps,)

    Examples
    --------
    >>> rolling_coverage([1, 0, 1, 1], window=2).tolist()
    [1.0, 0.5, 0.5, 1.0]
    """
    hits = np.asarray(covered, dtype=float)
    if hits.ndim != 1:
        raise ValueError("`covered` must be 1-D.")
    other = hits[~np.isin(hits, (0.0, 1.0))]
    if other.size:
        raise ValueError(
            f"`covered` must hold 0/1 or True/False values, got {int(other.size)} others "
            f"(first: {other[0]:g})."
        )
    check_int(window, "window")
    total = np.cumsum(hits)
    # a window longer than the series averages from the start (no array of its length)
    lagged = np.concatenate([np.zeros(min(window, hits.size)), total])[: hits.size]
    counts = np.minimum(np.arange(1, hits.size + 1), window)
    return (total - lagged) / counts


def residual_offsets(
    targets: NDArray,
    weights: NDArray,
    alphas: NDArray,
    fractions: NDArray,
    finite_sample: bool = False,
    nested: bool = True,
) -> NDArray:
    """Width-minimising ``[Q_beta, Q_{1 - alpha + beta}]`` of weighted residuals: (2, k).

    Only residuals with positive weight take part (so ``Q_0`` is the smallest of them, not
    of the whole memory). With several levels the intervals are made nested: each is
    widened to contain those of the larger levels (the ``beta`` search alone does not
    guarantee it), so a level's interval can be wider than when it is asked for alone;
    ``nested=False`` gives each level's interval as when asked for alone.

    With ``finite_sample=True`` the search is made full conformal
    (:func:`full_conformal_window`): the next residual ``r`` joins the residuals with the
    weights' own average weight ``sum_i w_i^2`` (a share ``s = 1 / (n_eff + 1)``, with
    ``n_eff = 1 / sum_i w_i^2`` the effective sample size), the narrowest window holding
    ``1 - alpha`` of that augmented mass is chosen, and the interval is the hull of the
    values of ``r`` that the chosen window contains. With equal weights over ``n``
    residuals the choice is a symmetric function of the ``n + 1`` residuals, so a new
    exchangeable residual is missed with probability ``1 - m / (n + 1) <= alpha``,
    ``m = ceil((n + 1)(1 - alpha))``, for any grid of ``beta``, when ``n >= 2 / alpha - 1``
    (below that, the interval is infinite). Choosing the narrowest window on the stored
    residuals alone, as the plain version does, costs up to two points of coverage. For one
    ``beta`` this is split conformal's two-sided interval, the ``k``-th and ``(k + m)``-th
    order statistics with ``k = floor((n + 1) beta)``. A tail
    below ``s`` would put an end at infinity, so ``beta`` is clipped to ``[s, alpha - s]``
    (``beta = 0`` becomes "the smallest residual", as in the plain version); if
    ``s > alpha / 2`` the interval is infinite. With unequal weights (SPCI, KOWCPI) no
    such argument holds (the weights belong to positions, not to the multiset), and each
    ``beta``'s ends are weighted conformal quantiles, the new residual's weight at minus
    infinity for the lower end and plus infinity for the upper end, split conformal's
    order statistics again when the weights are equal; the narrowest is chosen on the
    stored residuals (the full-conformal rule measured no better on the benchmark's real
    series with kernel weights).

    Examples
    --------
    >>> targets, w = np.arange(1.0, 41.0), np.full(40, 1 / 40)  # 40 residuals, equal weights
    >>> grid = np.linspace(0, 1, 5)
    >>> residual_offsets(targets, w, np.array([0.1]), grid).ravel().tolist()
    [1.0, 36.0]
    >>> residual_offsets(targets, w, np.array([0.1]), grid, finite_sample=True).ravel().tolist()
    [1.0, 40.0]

    (A next residual between 39 and 40 would be the upper end of a window narrower than
    every window leaving it out, so it is covered: the hull reaches 40.)
    """
    keep = np.flatnonzero(weights > 0)
    # sorted once for every level; equal residuals by weight, so that the input order of
    # (residual, weight) pairs never matters
    keep = keep[np.lexsort((weights[keep], targets[keep]))]
    targets, weights = targets[keep], weights[keep] / weights[keep].sum()
    test_weight = float(np.sum(weights**2))
    share = test_weight / (1.0 + test_weight)  # the new residual's share of the mass
    equal = bool(np.all(weights == weights[0]))  # EnbPI; kernel and forest weights differ
    out = np.empty((2, alphas.size))
    for j, level in enumerate(alphas):  # a loop over levels
        betas = fractions * level
        if not finite_sample:
            quantiles = weighted_quantile(
                targets, weights, np.concatenate([betas, 1 - level + betas])
            )
            lower, upper = quantiles[: betas.size], quantiles[betas.size :]
            best = int(np.argmin(upper - lower))
            out[:, j] = lower[best], upper[best]
        elif share > level / 2 * (1 + 1e-9):  # too few effective residuals: no finite end
            out[:, j] = -np.inf, np.inf
        else:
            # beta = 0: the smallest residual; a share within the tolerance above level / 2
            # clips to level / 2 (both ends finite), not past it (a lower end of -inf)
            edge = min(share, level / 2)
            betas = np.clip(betas, edge, level - edge)
            if equal:
                out[:, j] = full_conformal_window(targets, weights, test_weight, level, betas)
            else:
                out[:, j] = _weighted_conformal_window(targets, weights, test_weight, level, betas)
    return nest_levels(out, alphas) if nested else out


def _weighted_conformal_window(
    values: NDArray, weights: NDArray, test_weight: float, level: float, betas: NDArray
) -> tuple[float, float]:
    """Narrowest of the per-``beta`` intervals whose ends are weighted conformal quantiles.

    The new residual's weight sits at minus infinity for the lower end (tail ``beta``) and
    at plus infinity for the upper end (tail ``level`` minus the lower tail really used:
    rounding to a stored residual leaves at most ``beta``), so only one end is rounded
    conservatively. Valid for one ``beta`` and weights fixed in advance; the choice of
    the narrowest ``beta`` is made on the stored residuals.
    """
    lower = conformal_quantile(
        values, betas, kind="conformity", weights=weights, test_weight=test_weight, warn=False
    )
    below = (weights[None, :] * (values[None, :] < lower[:, None])).sum(axis=1)
    used = np.minimum((below + test_weight) / (1.0 + test_weight), betas)
    upper = conformal_quantile(
        values, level - used, weights=weights, test_weight=test_weight, warn=False
    )
    best = int(np.argmin(upper - lower))
    return float(lower[best]), float(upper[best])


#: Slack in comparisons of cumulative weights (sums of floats that should tie exactly).
_MASS_TOLERANCE = 1e-9


def full_conformal_window(
    values: NDArray, weights: NDArray, test_weight: float, level: float, betas: NDArray
) -> tuple[float, float]:
    """Hull of the residuals ``r`` that the narrowest-window rule covers once ``r`` joins.

    The rule, applied to the sorted ``values`` (weights summing to one) with ``r`` added at
    weight ``test_weight`` (total mass ``T = 1 + test_weight``): for each ``beta`` the
    window starts at the last point with mass below it at most ``beta T`` and ends at the
    first point at which it holds ``(1 - level) T``; the narrowest window wins. ``r`` only
    matters through the gap between stored values it falls in: there every window's ends
    are fixed points, and a window's width is constant unless ``r`` is one of its ends
    (then it is linear in ``r``). So within a gap ``r`` is covered on the whole gap, on
    none of it, or on up to two pieces at its ends, each found in closed form, for every
    gap and ``beta`` at once (``O(n g)`` time and memory, no loop over candidate values).
    Equal widths go to the first ``beta``, as in the plain search.

    Parameters
    ----------
    values : ndarray of shape (n,)
        Residuals, sorted.
    weights : ndarray of shape (n,)
        Their weights, positive, summing to one.
    test_weight : float
        Weight of the new residual.
    level : float
        Miscoverage level ``alpha``.
    betas : ndarray of shape (g,)
        Lower tails to try, within ``[s, level - s]``, ``s = test_weight / T``.

    Returns
    -------
    (float, float)
        The interval's ends.

    Examples
    --------
    >>> values = np.arange(1.0, 41.0)
    >>> full_conformal_window(values, np.full(40, 1 / 40), 1 / 40, 0.1, np.array([0.05]))
    (2.0, 39.0)
    """
    n, total = values.size, 1.0 + test_weight
    below = np.concatenate([[0.0], np.cumsum(weights)])  # stored mass below stored index q
    gap = np.arange(n + 1)[None, :]  # r's position among the n + 1 sorted points
    tolerance = _MASS_TOLERANCE

    def count_at_most(bound: NDArray) -> NDArray:
        """Points 0..n of the augmented sample with mass below them <= ``bound``."""
        stored = np.searchsorted(below, bound + tolerance, side="right")
        after = np.searchsorted(below[:-1], bound - test_weight + tolerance, side="right")
        return np.minimum(gap + 1, stored) + np.maximum(0, after - gap)

    def count_less(bound: NDArray) -> NDArray:
        """Positions 0..n+1 of the augmented sample with mass below them < ``bound``."""
        stored = np.searchsorted(below, bound - tolerance, side="left")
        after = np.searchsorted(below, bound - test_weight - tolerance, side="left")
        return np.minimum(gap + 1, stored) + np.maximum(0, after - gap)

    def value_at(position: NDArray) -> NDArray:
        """The stored value at an augmented position (NaN where ``r`` itself sits)."""
        shifted = np.where(position < gap, position, position - 1)
        return np.where(position == gap, np.nan, values[np.clip(shifted, 0, n - 1)])

    # Each beta's window, for r in each gap: (g, n + 1) positions in the augmented sample.
    low = count_at_most(np.asarray(betas, dtype=float)[:, None] * total) - 1
    mass_before_low = np.where(
        low <= gap, below[np.clip(low, 0, n)], below[np.clip(low - 1, 0, n)] + test_weight
    )
    high = count_less(mass_before_low + (1 - level) * total) - 1
    low_value = value_at(low)
    high_value = np.where(high <= n, value_at(np.minimum(high, n)), np.inf)
    width = high_value - low_value  # NaN where r is an end: the width then depends on r
    covers = (low <= gap) & (gap <= high)
    alone = (low == gap) & (high == gap)  # a window of r alone (one point): width 0
    width = np.where(alone, 0.0, width)
    r_is_low, r_is_high = (low == gap) & ~alone, (high == gap) & ~alone
    # r is covered iff the narrowest window (the first beta among equals) holds it
    missing_widths = np.where(covers, np.inf, width)
    inside_widths = np.where(covers & ~r_is_low & ~r_is_high, width, np.inf)
    first_missing, first_inside = missing_widths.argmin(axis=0), inside_widths.argmin(axis=0)
    missing, inside = missing_widths.min(axis=0), inside_widths.min(axis=0)
    # A window with r as an end wins against the best window leaving r out when it is
    # narrower, or as wide and of an earlier beta: a closed bound on r for those, an open
    # one for the others (it matters where the widths tie exactly, as with tied residuals).
    earlier = np.arange(width.shape[0])[:, None] < first_missing[None, :]

    def bound(is_end: NDArray, end_value: NDArray, lowest: bool) -> NDArray:
        """Per gap, the bound on r of the windows with r at that end (+-inf if none)."""
        fill = np.inf if lowest else -np.inf
        with np.errstate(invalid="ignore"):  # inf - inf where no window leaves r out
            if lowest:  # r as a lower end: high - r <= missing
                value = np.where(is_end, end_value, fill).min(axis=0) - missing
            else:  # r as an upper end: r - low <= missing
                value = np.where(is_end, end_value, fill).max(axis=0) + missing
        return np.where(np.isnan(value), fill, value)

    from_closed = bound(r_is_low & earlier, high_value, lowest=True)
    from_open = bound(r_is_low & ~earlier, high_value, lowest=True)
    to_closed = bound(r_is_high & earlier, low_value, lowest=False)
    to_open = bound(r_is_high & ~earlier, low_value, lowest=False)
    whole = (
        (inside < missing)
        | ((inside == missing) & (first_inside < first_missing))
        | (missing == np.inf)  # every window holds r
    )
    from_ = np.where(whole, -np.inf, np.minimum(from_closed, from_open))
    to = np.maximum(to_closed, to_open)
    edges = np.concatenate([[-np.inf], values, [np.inf]])
    gap_low, gap_high = edges[:-1], edges[1:]
    low_end = np.minimum(gap_high, to)  # the piece (gap_low, low_end] of each gap
    high_start = np.maximum(gap_low, from_)  # and the piece [high_start, gap_high)
    # a piece of length zero is kept only when its one point is covered
    point_low = (gap_low == low_end) & ((gap_low <= to_closed) | (gap_low < to_open))
    point_high = (high_start == gap_high) & (
        whole | (gap_high >= from_closed) | (gap_high > from_open)
    )
    starts = np.concatenate([gap_low, high_start])
    ends = np.concatenate([low_end, gap_high])
    single = np.concatenate([point_low, point_high]) & np.isfinite(starts)
    kept = (starts < ends) | single
    return float(starts[kept].min()), float(ends[kept].max())


# DtACI (Gibbs and Candes, 2024), with the defaults of the authors' code: the learning rate
# of the experts' exponential weights, and the share of weight spread evenly at each step
# (so that an expert that was wrong for long can regain weight after a shift).
DTACI_ETA = 2.72
DTACI_SIGMA = 1e-3
# Levels evaluated at each DtACI step, beside the experts', to find beta_t.
_BETA_LEVELS = np.linspace(0.02, 0.98, 49)


def _snap_levels(levels: NDArray) -> NDArray:
    """Working levels within 1e-12 of 0 or 1 snapped to it (in place): rounding must not
    turn the whole line or the empty set into a finite interval at a level of 1e-16."""
    levels[np.abs(levels) < 1e-12] = 0.0
    levels[np.abs(levels - 1) < 1e-12] = 1.0
    return levels


def nest_levels(offsets: NDArray, alphas: NDArray) -> NDArray:
    """Widen each interval ``(2, k)`` to contain those of the larger levels (in place)."""
    if alphas.size > 1:  # nested: smaller alpha, wider interval
        order = np.argsort(-alphas, kind="stable")
        offsets[0, order] = np.minimum.accumulate(offsets[0, order])
        offsets[1, order] = np.maximum.accumulate(offsets[1, order])
    return offsets


def minimum_effective_size(alphas: NDArray) -> int:
    """Smallest effective sample size at which ``finite_sample`` intervals are finite.

    The new residual's share ``1 / (n_eff + 1)`` must fit in each tail of the narrowest
    split of ``alpha``, ``alpha / 2``: ``n_eff >= 2 / alpha - 1``
    (:func:`uqconform.quantiles.minimum_scores` at ``alpha / 2``), at the smallest level.

    Examples
    --------
    >>> minimum_effective_size(np.array([0.1]))
    19
    """
    return minimum_scores(float(np.min(alphas)) / 2)


def _spread(values: NDArray) -> float:
    """Standard deviation of ``values`` computed in units of their largest magnitude, so
    that it neither underflows (values of order 1e-200 square to zero) nor overflows."""
    peak = float(np.max(np.abs(values))) if values.size else 0.0
    if not 0 < peak < np.inf:
        return 0.0 if peak == 0 else float(np.std(values))
    return peak * float(np.std(values / peak))


_TIME_INDEXES = (pd.DatetimeIndex, pd.PeriodIndex, pd.TimedeltaIndex)


def _time_index(data: Any) -> pd.Index | None:
    """The index of ``data`` if it holds times (dates, periods or durations), else None."""
    index = getattr(data, "index", None)
    return index if isinstance(index, _TIME_INDEXES) else None


def _warn_out_of_time_order(X: Any, y: Any) -> None:
    """Rows are read in the order given: warn when a pandas index of times (a
    DatetimeIndex, PeriodIndex or TimedeltaIndex) says that order is not time order (not
    increasing). (Whether X and y pair row by row is checked by `check_row_order`.)"""
    unsorted = {
        f"`{name}`": type(index).__name__
        for name, data in (("X", X), ("y", y))
        if (index := _time_index(data)) is not None and not index.is_monotonic_increasing
    }
    if unsorted:
        names = " and ".join(unsorted)
        kinds = set(unsorted.values())
        kind = kinds.pop() if len(kinds) == 1 else "time indexes"
        index = "index is" if len(unsorted) == 1 else "indexes are"
        warn_user(
            f"The {kind} of {names}: the {index} not increasing, but rows are taken "
            "in the order given, oldest first; sort them (e.g. X.sort_index()) so that "
            "each interval uses only the past.",
            UserWarning,
        )


class SequentialConformalRegressor(
    ExplainsCallMistakes,
    RefusesNestedDefaultParams,
    VersionedState,
    RoutesFitParams,
    RegressorMixin,
    BaseEstimator,
    metaclass=ABCMeta,
):
    """Base class of EnbPI, SPCI and KOWCPI (not used directly).

    ``fit``, ``predict_interval`` and ``update`` change nothing when they raise (an
    interrupted online batch included): the same call can be repeated.

    Adaptive conformal inference (``aci_gamma``, Gibbs and Candes, 2021): each level
    ``alpha`` runs its own working level ``a_t`` in online calls (`predict_interval` with
    ``y``): ``a_{t+1} = a_t + gamma (alpha - miss_t)``. Over the first ``T`` such steps after
    ``fit`` (the level starts at ``alpha``), whatever the series does, the share of misses
    is within ``(max(alpha, 1 - alpha) + gamma) / (gamma T)`` of ``alpha``; a stretch that
    starts at another working level ``a_s`` obeys the same bound with ``a_s`` in the
    max, at most ``(1 + 2 gamma) / (gamma T)``. A working level at or
    below 0 gives the whole line; at or above 1, the empty set (reported as the prediction
    itself, an interval a few ulps wide, and counted as a miss even when the value equals
    it: where values equal the prediction often, such as counts around a constant
    forecast, coverage measured on the returned intervals exceeds `coverage_history_`'s,
    which the bound is about). With a sequence of step sizes, ``aci_gamma`` runs DtACI
    (Gibbs and Candes, 2024): one ACI expert per step size, the interval issued at their
    weighted mean level, the weights following the experts' pinball losses (see
    `_dtaci_steps`); each expert obeys its own bound, and no bound is claimed for the
    issued intervals.
    `update` does not move the levels: to issue an interval before the value is
    known, call ``predict_interval(x)`` then, once it is, ``predict_interval(x, y=y)`` (the
    same interval again, then learned from). Levels of one call are nested by working
    level, so a level's intervals can depend on the others asked for with it.

    Attributes
    ----------
    source_ : ResidualSource
        The fitted models (``source_.models``) and the weights that combine them into the
        point prediction (`predict`).
    estimators_ : list of estimators
        The fitted models, ``source_.models``: the ``n_bootstrap`` bootstrap models, or the
        one model of ``residuals="holdout"`` (fitted clones of ``estimator``; named as the
        cross-conformal wrappers' fold models and scikit-learn's bagging ensembles).
    fit_residuals_ : ndarray of shape (n_residuals,)
        Out-of-sample residuals of the fit data in time order (one per fit row with
        ``residuals="bootstrap"``; the hold-out block's with ``"holdout"``).
    scale_ : float
        Robust scale (normal-consistent MAD) of ``fit_residuals_``; their standard deviation
        if the MAD is zero; 1 when both are numerically zero (with a warning at fit).
    memory_ : ndarray
        The residual memory: the newest residuals, at most ``memory``.
    n_steps_ : int
        Observations absorbed since fit (rows of ``predict_interval`` with ``y``, and of
        ``update``).
    coverage_history_ : ndarray of bool
        Whether ``y`` fell in its interval, for each row of every ``predict_interval`` call
        that received ``y``, at the first level of that call's ``alpha`` (in the order
        given). ``update`` adds nothing (it issues no interval); refitting empties it.
    n_features_in_ : int
        Number of features seen at fit.
    feature_names_in_ : ndarray of str
        Column names seen at fit (only when X has string column names).
    effective_sample_sizes_ : list of float
        ``1 / sum(w_i^2)`` of the conditional model's weights over the memory, once per
        residual-memory state used: one entry per ``predict_interval`` call without ``y``
        (its rows share the memory), one per row with ``y``; ``update`` adds nothing. NaN
        where ``aci_gamma`` had moved every level out of (0, 1) (no weights computed).
    n_infeasible_ : int
        Residual-memory states at which the conditional model fell back to plain weights
        (KOWCPI; always 0 for EnbPI and SPCI).
    aci_alphas_ : dict of float to float
        With ``aci_gamma``: the adapted level of each nominal level used online so far
        (empty after fit: each starts at its nominal value).
    aci_experts_ : dict of float to dict
        With several step sizes (DtACI): for each nominal level used online, its
        ``"gammas"``, the experts' ``"levels"`` and their ``"weights"`` (empty after fit;
        new step sizes start their experts at the current working level).
    aci_alpha_history_ : ndarray of float
        The level that issued each row of ``coverage_history_`` (first level of each
        call): the working level with ``aci_gamma``, else the nominal one.

    Examples
    --------
    >>> from sklearn.linear_model import LinearRegression
    >>> from uqconform.timeseries import EnbPI, KOWCPI, SPCI
    >>> all(issubclass(method, SequentialConformalRegressor) for method in (EnbPI, KOWCPI, SPCI))
    True
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(240, 2)); y = X @ [1.0, -1.0] + rng.normal(size=240)
    >>> model = EnbPI(LinearRegression(), n_bootstrap=10, random_state=0).fit(X[:200], y[:200])
    >>> model.predict_interval(X[200:220], y=y[200:220]).shape  # one step ahead, then absorbed
    (20, 2)
    >>> model.update(X[220:], y[220:]).n_steps_, len(model.coverage_history_)
    (40, 20)
    """

    def _default_estimator(self) -> BaseEstimator:
        return RandomForestRegressor(n_estimators=10, min_samples_leaf=5)

    def _estimator_or_default(self) -> BaseEstimator:
        return self._default_estimator() if self.estimator is None else self.estimator

    def _routed_models(self) -> dict[str, Any]:
        return {"estimator": self._estimator_or_default()}

    def __sklearn_tags__(self):
        return forward_input_tags(super().__sklearn_tags__(), self._routed_models()["estimator"])

    #: Parameters whose change after fit calls for a new fit before intervals: those of the
    #: fitted models and the residual memory (subclasses add what their tuning read).
    #: Parameters read afresh at each call (``alpha``, EnbPI's ``beta_grid``, ...) may change.
    #: The default of a parameter added later, for models pickled before it existed.
    aci_gamma: float | Sequence[float] | None = None

    _fit_params: ClassVar[tuple[str, ...]] = (
        "estimator",
        "n_bootstrap",
        "residuals",
        "holdout_fraction",
        "random_state",
        "memory",
    )
    #: Those of them the fitted models depend on (`predict` needs only these).
    _model_params: ClassVar[tuple[str, ...]] = (
        "estimator",
        "n_bootstrap",
        "residuals",
        "holdout_fraction",
        "random_state",
    )

    #: Whether `_next_weights` uses ``min_effective`` (then each level gets its own floor).
    _weights_follow_floor: ClassVar[bool] = False

    @abstractmethod
    def _next_weights(self, memory: NDArray, min_effective: int) -> tuple[NDArray, NDArray, bool]:
        """``(targets, weights, feasible)``: the conditional law of the next residual, and
        whether the method's own weights were used (False: it fell back to plain ones).

        ``min_effective`` is the effective sample size the weights should reach (0: no
        requirement); a model that can widen its neighbourhood does, the others ignore it.
        """

    def _tune(self, residuals: NDArray) -> None:
        """Choose hyper-parameters on the residuals of the fit data (default: nothing)."""

    # ---- validation ---------------------------------------------------------------------
    def _validate_params(self) -> None:
        check_miscoverage(self.alpha, "alpha", owner=self)
        refuse_model_class(self.estimator, self)
        check_regression_model(self._estimator_or_default(), self)
        if self.residuals not in ("bootstrap", "holdout"):
            raise ValueError(
                f"`residuals` must be 'bootstrap' or 'holdout', got {self.residuals!r}."
            )
        check_int(self.n_bootstrap, "n_bootstrap", low=2)
        check_int(self.memory, "memory", low=2, allow_none=True)
        fraction = self.holdout_fraction
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, numbers.Real)
            or not 0 < cast(float, fraction) < 1
        ):
            raise ValueError(
                f"`holdout_fraction` must lie in (0, 1), got {self.holdout_fraction!r}."
            )
        check_bool(self.finite_sample, "finite_sample")
        self._check_aci_gamma()
        check_random_state_value(self.random_state)
        check_n_jobs(self.n_jobs)
        check_verbose(self.verbose)
        self._beta_fractions()

    def _check_call_params(self) -> None:
        """The parameters that may change after fit (`set_params`), checked at each call
        as fit checks them (``finite_sample="no"`` would otherwise read as True)."""
        check_bool(self.finite_sample, "finite_sample")

    def _check_aci_gamma(self) -> float | NDArray | None:
        """The ACI step size (a float), DtACI's step sizes (an array of at least two), or
        None."""
        gamma = self.aci_gamma
        if gamma is None:
            return None
        # arrays and pandas objects as lists: their repr spans lines (a Series, its index)
        shown = gamma
        if isinstance(gamma, pd.DataFrame):
            shown = gamma.to_numpy().tolist()
        elif isinstance(gamma, np.ndarray | pd.Series | pd.Index):
            shown = gamma.tolist()
        message = (
            "`aci_gamma` must be None, a step size in (0, 1] (0.005 is usual), or a "
            "sequence of at least two distinct step sizes in (0, 1] (DtACI; e.g. "
            f"(0.001, 0.002, ..., 0.128)), got {shown!r}"
        )
        if isinstance(gamma, bool | np.bool_):
            raise ValueError(f"{message}.")
        gammas = real_values(gamma)  # a number or a 0-d array: one step size (ACI)
        if gammas is not None and gammas.ndim == 0:
            if not 0 < float(gammas) <= 1:
                raise ValueError(f"{message}.")
            return float(gammas)
        if (
            gammas is None
            or gammas.ndim != 1
            or gammas.size < 2
            or not ((gammas > 0) & (gammas <= 1)).all()
            or np.unique(gammas).size != gammas.size
        ):
            if gammas is not None and gammas.shape == (1,) and 0 < gammas[0] <= 1:
                raise ValueError(
                    f"{message}: for ACI with one step size pass it as a number, e.g. "
                    f"aci_gamma={float(gammas[0])!r}."
                )
            raise ValueError(f"{message}.")
        return gammas

    def _beta_fractions(self) -> NDArray:
        """The beta grid as fractions of alpha, in [0, 1]."""
        grid = self.beta_grid
        if isinstance(grid, np.ndarray) and grid.ndim == 0 and grid.dtype.kind in "iu":
            grid = int(grid)  # np.array(3): a count, as 3 is
        if isinstance(grid, numbers.Integral) and not isinstance(grid, bool):
            if grid < 1:
                raise ValueError(f"`beta_grid` must be >= 1 point, got {grid}.")
            return np.linspace(0.0, 1.0, int(grid)) if cast(int, grid) > 1 else np.array([0.5])
        message = (
            "`beta_grid` must be a number of points or a 1-D list of fractions of alpha "
            f"in [0, 1], got {grid!r}."
        )
        fractions = real_values(grid)
        if fractions is not None and fractions.ndim == 0:  # 1.0: a count or a fraction?
            raise ValueError(
                f"`beta_grid` must be an int (a number of points: beta_grid=1 is the "
                f"central interval) or a 1-D list of fractions of alpha in [0, 1] "
                f"([{float(fractions)!r}] for that one fraction), got the number {grid!r}."
            )
        if (
            fractions is None
            or fractions.ndim != 1
            or fractions.size == 0
            or not ((fractions >= 0) & (fractions <= 1)).all()  # NaN too
        ):
            raise ValueError(message)
        # sorted and distinct: the search keeps the first of equally wide intervals, so
        # the given order would otherwise decide ties
        return np.unique(fractions)  # 1-D, also for one fraction

    @overload
    def _check_series(
        self, X: Any, y: None, *, reset: bool, interval: bool = True
    ) -> tuple[Any, None]: ...
    @overload
    def _check_series(
        self, X: Any, y: ArrayLike, *, reset: bool, interval: bool = True
    ) -> tuple[Any, NDArray]: ...
    @overload
    def _check_series(
        self, X: Any, y: ArrayLike | None, *, reset: bool, interval: bool = True
    ) -> tuple[Any, NDArray | None]: ...
    def _check_series(
        self, X: Any, y: ArrayLike | None, *, reset: bool, interval: bool = True
    ) -> tuple[Any, NDArray | None]:
        # X's row labels in another order: refused, as by the other wrappers (before fit
        # records anything); other labels are paired by position, with a warning
        check_row_order(X, y, "y")
        X = check_features(self, X, reset=reset)  # None, 1-D, no rows: named errors
        # feature count and names only: X reaches the model as given (a Pipeline encodes it)
        X = validate_data(self, X, reset=False, skip_check_array=True)
        # the model named, before it fails inside scikit-learn
        check_nan_accepted(self._estimator_or_default(), X)
        _warn_out_of_time_order(X, y)
        if interval or y is not None:  # point predictions do not read the memory
            self._check_after_absorbed(X, y, reset=reset)
        if y is None:
            return X, None
        n = _num_samples(X)
        if not reset and np.ndim(y) == 0:  # one observation, e.g. ``y[t]`` for ``X[t:t+1]``
            if n != 1:
                raise ValueError(
                    f"`y` is a single value but X has {n} rows: give one value per row "
                    "(``y[t:t + k]`` for ``X[t:t + k]``)."
                )
            y = np.reshape(np.asarray(y), 1)
        try:
            return X, check_regression_target(y, n)
        except ValueError:
            if reset:
                raise
            values = pd.Series(np.ravel(np.asarray(y, dtype=object)))
            numbers = pd.to_numeric(values, errors="coerce")
            unknown = values.isna() | np.isinf(numbers.fillna(0.0).to_numpy(dtype=float))
            if not unknown.any() or unknown.size != n:
                raise
            # online: imputed values would enter the memory as residuals, and a removed
            # row breaks the one-step sequence
            first = int(np.flatnonzero(unknown.to_numpy())[0])
            observed = (
                f"give `y` for the rows before it only (X[:{first}] with y[:{first}]) and "
                "predict the later rows without `y`"
                if first
                else "predict those rows without `y`, and give `y` once it is observed"
            )
            raise ValueError(
                f"`y` holds {int(unknown.sum())} NaN, missing or infinite values, the first at "
                f"position {first}: {observed}; an imputed or clipped value would enter "
                "the memory as a residual."
            ) from None

    def _check_after_absorbed(self, X: Any, y: Any, *, reset: bool) -> None:
        """Rows must come after those absorbed before: warn when their times (the index of
        X if it holds times, else that of y: a DatetimeIndex, PeriodIndex or
        TimedeltaIndex) start before the latest time absorbed, or at it, unless times repeat
        in the rows given or in the training rows (several rows per time: a first row at
        the latest time is new). Rows whose values are absorbed (``y`` given) would enter
        the residual memory as the next steps (the earlier block, the last row again, or the
        training rows fed again online), and their latest time is remembered; rows only
        forecast would get intervals from later residuals (in-sample ones for rows absorbed
        before)."""
        absorbing = y is not None
        name, index = "X", _time_index(X)
        if index is None and absorbing:
            name, index = "y", _time_index(y)
        if index is None or len(index) == 0:
            if reset:  # a fit on rows without times: nothing to compare later rows with
                self.__dict__.pop("_latest_time", None)
                self.__dict__.pop("_fit_times_repeat", None)
            return
        if reset:
            self._latest_time = index.max()
            self._fit_times_repeat = bool(index.has_duplicates)
            return
        latest = self.__dict__.get("_latest_time")
        # several rows may share a time: then a first row at the latest time is new. Decided
        # by the training rows (a panel fed one row at a time) or the rows given alone: one
        # batch repeating a time leaves the check on for the batches after it (ts2 review)
        shared = self.__dict__.get("_fit_times_repeat", False) or index.has_duplicates
        first = index[0]
        source = f"the {type(index).__name__} of `{name}`"
        try:
            earlier = latest is not None and (first < latest or (first == latest and not shared))
        except (TypeError, ValueError):  # naive against aware; periods of other frequencies
            zone, zone_before = getattr(first, "tz", None), getattr(latest, "tz", None)
            if isinstance(first, pd.Timestamp) and isinstance(latest, pd.Timestamp):
                warn_user(
                    f"The rows given have times {'with' if zone else 'without'} a time zone "
                    f"({first}, {source}), the rows absorbed before "
                    f"{'with' if zone_before else 'without'} one ({latest}): their order cannot "
                    "be checked. Give every call's times in one convention (tz_localize or "
                    "tz_convert the index).",
                    UserWarning,
                )
            else:
                warn_user(
                    f"The rows given have times of another kind ({first!r}, {source}) than "
                    f"the rows absorbed before ({latest!r}): their order cannot be checked. "
                    "Give every call's times in one convention (one index type, frequency "
                    "and time zone).",
                    UserWarning,
                )
            earlier, latest = False, None
        if earlier and not absorbing:
            warn_user(
                f"The rows given start at {first} ({source}), not after the latest row "
                f"absorbed ({latest}): their intervals are not forecasts (the residual memory "
                "holds later rows, and for rows absorbed before their own residuals: "
                "in-sample) and carry no coverage guarantee. Forecast only rows after those "
                "absorbed.",
                UserWarning,
            )
        if not absorbing:
            return
        if earlier:
            warn_user(
                f"The rows given start at {first} ({source}), not after the latest row "
                f"absorbed ({latest}): their values enter the residual memory as the next "
                "steps of the series. Give only new rows, in time order (intervals for rows "
                "seen before are in-sample).",
                UserWarning,
            )
        self._latest_time = index.max() if latest is None else max(latest, index.max())

    def _short_history(
        self, available: int, needed: int, purpose: str, n_fit: int | None, hint: str = ""
    ) -> ValueError:
        """The error for a residual history shorter than ``needed``, naming its cause.

        ``available`` residuals exist before the ``memory`` trim; ``purpose`` says what
        needs ``needed`` of them (e.g. "`window`=5"); ``hint`` ends the message.
        """
        kept = self._trim(np.empty(available)).shape[0]
        if kept < needed <= available:  # only the memory is too short
            return ValueError(
                f"The residual memory has {kept} values (`memory`={self.memory}) but "
                f"{purpose} needs at least {needed}: set `memory` to {needed} or more (or "
                f"None){hint}."
            )
        message = f"The residual history has {kept} values but {purpose} needs at least {needed}"
        if self.residuals == "holdout":
            rows = "" if n_fit is None else f" of the {n_fit} fit rows"
            message += (
                f": with residuals='holdout' only the last `holdout_fraction`="
                f"{self.holdout_fraction}{rows} give residuals; give more rows, a larger "
                "`holdout_fraction`, or residuals='bootstrap' (one residual per fit row)"
            )
        else:
            message += ": give more fit rows (one residual per row)"
        if self.memory is not None and self.memory < needed:
            message += f", and set `memory` (now {self.memory}) to {needed} or more"
        return ValueError(message + hint + ".")

    def _require_history(self, residuals: NDArray, needed: int, purpose: str) -> None:
        """Raise `_short_history` unless the trimmed ``residuals`` hold ``needed`` values."""
        if self._trim(residuals).shape[0] < needed:
            raise self._short_history(residuals.shape[0], needed, purpose, self._n_fit_rows)

    def _warn_few_residuals(self, residuals: NDArray, window: int = 0) -> None:
        """Warn when the memory starts with fewer residuals (or ``(window, next residual)``
        pairs) than the level needs, ``2 / alpha - 1``: until it fills, the quantiles cannot
        reach the level."""
        alphas = check_alpha(self.alpha, "alpha")
        self._window_checked = window
        self._alpha_checked = float(np.min(alphas))  # prediction checks lower levels
        self._warned: frozenset[tuple] = frozenset()  # prediction warnings given since fit
        needed = minimum_effective_size(alphas)
        count = self._trim(residuals).shape[0] - window
        if count >= needed:
            return
        outcome, never, while_short = self._shortfall(needed, window)
        remedy = "give more fit rows" + (" or a shorter `window`" if window > 1 else "")
        if never:
            remedy = f"set `memory` (now {self.memory}) to {needed + window} or more"
        noun = "(window, next residual) pair" if window else "residual"
        what = f"{count} {noun}{'' if count == 1 else 's'}"
        warn_user(
            f"{type(self).__name__} starts with {what}; intervals at alpha="
            f"{np.min(alphas):g} need at least {count_text(needed)} (2 / alpha - 1) for their "
            f"quantiles to reach the level, so expect {outcome} {while_short}: {remedy}"
            f"{self._plain_quantiles_note()}.",
            UserWarning,
        )

    def _plain_quantiles_note(self) -> str:
        """With ``finite_sample=False`` more residuals do not restore the level: say so."""
        if self.finite_sample:
            return ""
        return (
            " (with `finite_sample=False` the plain quantiles fall short of the level by up "
            "to about 2 / (n + 1) for n residuals at beta = 0, and the search over beta can "
            "add about as much again; this stays so once the memory holds that many: "
            "`finite_sample=True` keeps the level)"
        )

    def _shortfall(self, needed: int, window: int) -> tuple[str, bool, str]:
        """What too few residuals for ``needed`` do: the outcome, whether the memory can
        never hold them, and for how long."""
        never = self.memory is not None and self.memory - window < needed
        # finite_sample widens to the whole line what the plain quantiles would cut short
        outcome = "infinite intervals" if self.finite_sample else "under-coverage"
        when = "throughout (the memory never holds enough)" if never else "until the memory fills"
        return outcome, never, when

    #: The lowest level `_warn_few_residuals` checked at fit (1: none, in models pickled
    #: before it was recorded) and the window it counted pairs of.
    _alpha_checked: float = 1.0
    _window_checked: int = 0

    def _warn_once(self, key: Any, message: str) -> None:
        """Warn once per fit for ``key``: Python's own once-per-place filter does not hold
        in an online loop (scikit-learn's input checks reset it at every call, so a warning
        came back at every step)."""
        warned = self.__dict__.get("_warned", frozenset())
        if key not in warned:
            warn_user(message, UserWarning)
            # rebound, not changed in place, after the warning: a call refused later (or
            # by a warning raised as an error) is undone with it and warns again
            self._warned = warned | {key}

    def _warn_few_residuals_for(self, alphas: NDArray) -> None:
        """At prediction: warn for a level below the one fit checked (a call's ``alpha``,
        or ``set_params``) that the memory holds too few residuals for; once per fit and
        setting."""
        level = float(np.min(alphas))
        if level >= self._alpha_checked:
            return
        needed = minimum_effective_size(np.array([level]))
        window = self._window_checked
        if self.memory_.shape[0] - window >= needed:
            return
        noun = "(window, next residual) pairs" if window else "residuals"
        outcome, never, when = self._shortfall(needed, window)
        remedy = (
            f"refit with `memory` (now {self.memory}) at {needed + window} or more"
            if never
            else "absorb more observations first, or refit with more rows"
        )
        self._warn_once(
            ("few residuals", level, window, self.memory),
            f"{type(self).__name__}: intervals at alpha={level:g} need at least "
            f"{count_text(needed)} {noun} (2 / alpha - 1) for their quantiles to reach the "
            f"level, and the memory holds fewer: expect {outcome} {when}: {remedy}"
            f"{self._plain_quantiles_note()}.",
        )

    # ---- fit ----------------------------------------------------------------------------
    @property
    def calibrate(self) -> Any:
        """Not a step of these online methods: reading it raises an ``AttributeError``
        that says so (``hasattr(model, "calibrate")`` stays false)."""
        raise no_calibrate_step(
            self,
            "`fit(X, y)` computes the residuals the intervals start from (out of bootstrap, "
            "or on the held-out tail with `holdout_fraction`), and `predict_interval(X, y=y)` "
            "or `update(X, y)` add new ones online",
            "SplitConformalRegressor (exchangeable rows)",
        )

    @keeps_state_on_error
    def fit(self, X: ArrayLike, y: ArrayLike | None = None, **fit_params: Any) -> Self:
        """Fit the point predictor and collect its out-of-sample residuals.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, in time order.
        y : array-like of shape (n_samples,)
            The series, in time order (NaN is refused).
        **fit_params : dict
            Passed to the model's ``fit`` (e.g. ``sample_weight``; for a Pipeline,
            ``step__param``; with scikit-learn's metadata routing on, those the model
            requested). Arrays with one entry per row are resampled with the rows of each
            bootstrap model (cut like the rows with ``residuals="holdout"``). ``groups``
            and ``alpha`` also go to the model: there is no group-conditional calibration
            here, and the level goes to `predict_interval` or the constructor (a model that
            refuses them gets a message saying so, and the fitted state is kept).

        Returns
        -------
        self
        """
        self._validate_params()
        check_weights_row_order(X, fit_params, y)  # (paired with X's rows, as y is)
        fit_params = self._routed_fit_params(fit_params)["estimator"]
        if y is None:
            raise missing_target_error()
        X, y = self._check_series(X, y, reset=True)
        check_sample_weight_rows(fit_params, n_rows(X))
        estimator = self._estimator_or_default()
        rng = random_generator(self.random_state)
        unset = seed_parameters(estimator, only_unset=True)  # Pipeline steps included
        if unset:  # one draw, shared by every unset parameter (none: no draw)
            seed = int(rng.integers(2**31))
            estimator = clone(estimator).set_params(**dict.fromkeys(unset, seed))
        if y.shape[0] < 2:  # (a frozen model's one residual gave zero-width intervals)
            raise ValueError(
                f"`X` and `y` have {y.shape[0]} sample (row): fit takes the model's "
                "out-of-sample residuals, which needs at least 2 rows (and about "
                "1 / alpha residuals for a finite interval). Fit on a longer stretch of the "
                "series."
            )
        try:
            if isinstance(estimator, FrozenEstimator):  # not refitted: residuals on every row
                check_frozen_is_fitted(estimator, self)
                source = prefit_residuals(estimator, X, y)
            elif self.residuals == "bootstrap":
                source = bootstrap_residuals(
                    estimator,
                    X,
                    y,
                    self.n_bootstrap,
                    rng,
                    n_jobs=self.n_jobs,
                    verbose=self.verbose,
                    fit_params=fit_params,
                )
            else:
                source = holdout_residuals(estimator, X, y, self.holdout_fraction, fit_params)
        except (TypeError, ValueError) as error:  # the model refused `groups` or `alpha`
            name = type(self).__name__
            refused = next(
                (
                    key
                    for key in ("groups", "alpha")
                    if key in fit_params
                    and any(
                        text in str(error)
                        for text in (f"keyword argument '{key}'", f"accept the {key} parameter")
                    )
                ),
                None,
            )
            if refused is None:
                refuse_unencoded_features(X, estimator, error)  # text: named, with remedy
                raise
            if refused == "groups":
                advice = (
                    f"{name} has no group-conditional (Mondrian) calibration: for coverage "
                    "by group, give the online intervals (predict_interval(X, y=y)) to "
                    "uqconform.evaluation.coverage_by_group."
                )
            else:
                value = fit_params["alpha"]
                real = isinstance(value, numbers.Real) and not isinstance(value, bool)
                level = f"{float(value):g}" if real else "..."
                advice = (
                    "The miscoverage level goes to prediction, predict_interval(X, "
                    f"alpha={level}), or to the constructor, {name}(..., alpha={level}); a "
                    "model's own `alpha` is set on the model, e.g. Ridge(alpha=1.0)."
                )
            raise type(error)(
                f"{name}.fit passed `{refused}` to the model, which refused it ({error}). "
                + advice
            ) from error
        if not np.isfinite(source.residuals).all():
            raise ValueError("The model's residuals are not finite: check the model and data.")
        self.source_ = source
        self.fit_residuals_ = source.residuals.copy()
        self.scale_ = self._fit_scale(source.residuals, y)
        self.__dict__.pop("tuning_results_", None)  # a refit does not keep an old tuning
        self._n_fit_rows = int(y.shape[0])
        self._tune(source.residuals)
        self.memory_ = self._trim(source.residuals)
        self.n_infeasible_ = 0
        self.n_steps_ = 0
        self.effective_sample_sizes_: list[float] = []
        self.coverage_history_ = np.zeros(0, dtype=bool)
        self.aci_alphas_: dict[float, float] = {}
        self._told_update_keeps_levels = False
        self.aci_experts_: dict[float, dict[str, NDArray]] = {}
        self.aci_alpha_history_ = np.zeros(0)
        record_calibration_settings(self, step="fit")
        if isinstance(estimator, FrozenEstimator):  # no residual source was built
            for name in ("n_bootstrap", "residuals", "holdout_fraction"):
                self._fit_settings.pop(name, None)
        return self

    def _scaled_pairs(self, memory: NDArray, window: int) -> tuple[NDArray, NDArray, NDArray]:
        """`lagged_pairs` of the residuals in units of ``scale_``: what the conditional
        models (SPCI's forest, KOWCPI's kernel) see, so that their weights do not depend
        on the units of y. The targets they weight are ``memory[window:]``, in original
        units exactly."""
        return lagged_pairs(memory / self.scale_, window)

    @staticmethod
    def _robust_scale(residuals: NDArray) -> float:
        """Median absolute deviation (consistent for the normal), never zero."""
        mad = 1.4826 * float(np.median(np.abs(residuals - np.median(residuals))))
        return mad if mad > 0 else _spread(residuals) or 1.0

    def _fit_scale(self, residuals: NDArray, y: NDArray) -> float:
        """`_robust_scale` of the fit residuals; 1 (absolute units), with a warning, when
        they are numerically zero: standard deviation (so also the MAD, at most about three
        times it) ``<= 1e-12 mean |y|``, or below the smallest normal float. Relative to
        ``y`` only, so a series in small units (``y`` of order 1e-14) is scaled like the
        same series in large ones."""
        spread = _spread(residuals)
        if spread > max(1e-12 * float(np.mean(np.abs(y))), np.finfo(float).tiny):
            return self._robust_scale(residuals)
        warn_user(
            f"The {residuals.shape[0]} fit residuals are all (numerically) zero (standard "
            f"deviation {spread:.3g}, mean |y| {float(np.mean(np.abs(y))):.3g}): the model "
            "reproduces the series exactly, so the intervals will have about zero width "
            "until non-zero residuals enter the memory, and a kernel bandwidth (KOWCPI) is in "
            "absolute units of y (scale_ = 1).",
            UserWarning,
        )
        return 1.0

    def _trim(self, residuals: NDArray) -> NDArray:
        return residuals if self.memory is None else residuals[-int(self.memory) :]

    # ---- prediction ---------------------------------------------------------------------
    @property
    def estimators_(self) -> list[BaseEstimator]:
        """The fitted models (``source_.models``)."""
        check_is_fitted(self, "source_")
        return list(self.source_.models)

    def predict(self, X: ArrayLike) -> NDArray:
        """Point prediction of the (ensemble) model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_wrapper_fitted(self, "source_", "predict")
        # the point prediction needs the models as fitted (not the memory or the window)
        check_calibration_settings(
            self, "predict", step="fit", again="fit(X, y)", only=self._model_params
        )
        X, _ = self._check_series(X, None, reset=False, interval=False)
        return self.source_.predict(X)

    def _interval_offsets(
        self,
        alphas: NDArray,
        record: bool = True,
        memo: dict[int, tuple] | None = None,
        nested: bool = True,
    ) -> NDArray:
        """``[Q_beta*, Q_{1 - alpha + beta*}]`` per level from the current memory: (2, k).

        When the weights depend on the effective-size floor (KOWCPI with
        ``finite_sample``), each level gets the weights of its own floor, so asking for
        several levels at once widens a level only to nest it, as promised. The
        diagnostics (effective sample size, infeasible weights) are recorded once, for the
        widest level (not at all with ``record=False``). ``memo``: the weights of this
        memory state by floor, filled and reused (DtACI asks up to three times per step).
        ``nested=False``: no nesting, each level's interval as when asked for alone
        (DtACI's experts).
        """
        fractions = self._beta_fractions()
        if not (self.finite_sample and self._weights_follow_floor):
            floor = minimum_effective_size(alphas) if self.finite_sample else 0
            floors = np.full(alphas.size, floor)
        else:
            floors = np.array([minimum_effective_size(np.array([a])) for a in alphas])
        out = np.empty((2, alphas.size))
        memory = self.memory_  # read once: another thread's update swaps it, whole
        kept = floors.max()
        for floor in np.unique(floors)[::-1]:  # a loop over distinct floors (few levels)
            levels = floors == floor
            # weights that ignore the floor (SPCI's forest) are one entry: DtACI's further
            # calls at other levels would refit the forest otherwise
            key = int(floor) if self._weights_follow_floor else 0
            if memo is not None and key in memo:
                targets, weights, feasible = memo[key]
            else:
                targets, weights, feasible = self._next_weights(memory, int(floor))
                if memo is not None:
                    memo[key] = (targets, weights, feasible)
            if record and floor == kept:  # recorded once
                self.effective_sample_sizes_.append(effective_sample_size(weights))
                self.n_infeasible_ += int(not feasible)
            out[:, levels] = residual_offsets(
                targets, weights, alphas[levels], fractions, self.finite_sample, nested
            )
        return nest_levels(out, alphas) if nested else out

    def _absorb(self, residuals: NDArray) -> None:
        if not np.isfinite(residuals).all():
            raise ValueError(
                f"{int((~np.isfinite(residuals)).sum())} new residuals are not finite (the "
                "model's predictions are NaN or infinite): check the features."
            )
        self.memory_ = self._trim(np.concatenate([self.memory_, residuals]))
        self.n_steps_ += residuals.shape[0]

    def predict_set(
        self, X: ArrayLike, alpha: float | ArrayLike | None = None, *, y: ArrayLike | None = None
    ) -> NDArray:
        """The native prediction set of a scalar regressor: `predict_interval`, with
        ``alpha`` second as in every ``predict_set`` (``y``, keyword only, makes it online:
        the observed values are absorbed).

        Give the observations as ``y=``: ``predict_set(X, y_test)`` passes them as
        ``alpha``: targets all in (0, 1) are read as levels (one interval per row and
        target, nothing absorbed), others raise ValueError.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the next time steps, in order.
        alpha : float or sequence of float, optional
            Miscoverage level(s); defaults to the constructor's ``alpha``. See
            `predict_interval`.
        y : array-like of shape (n_samples,), optional
            Keyword only: the observed values, absorbed online as in `predict_interval`.

        Returns
        -------
        ndarray of shape (n_samples, 2), or (n_samples, 2, k) for k levels
            Lower and upper bounds, as `predict_interval` returns them.
        """
        check_wrapper_fitted(self, "source_", "predict_set")
        return self.predict_interval(X, y=y, alpha=alpha)

    def predict_interval(
        self,
        X: ArrayLike,
        *positional: Any,
        y: ArrayLike | None = None,
        alpha: float | ArrayLike | None = None,
    ) -> NDArray:
        """Intervals for the next rows of the series.

        ``y`` and ``alpha`` are keyword only: a second positional value could be either
        (``predict_interval(x, 0.05)`` once absorbed 0.05 as an observation), so it is
        refused with a TypeError that says which keyword to write.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features of the next time steps, in order.
        *positional
            Refused (TypeError): ``y`` and ``alpha`` must be given by keyword.
        y : array-like of shape (n_samples,), optional
            Their observed values (a scalar is accepted when X has one row). When given, the
            intervals are produced online: row ``t`` gets its interval from the residuals up
            to ``t - 1``, then its own residual is absorbed, and the hits of the first level
            are appended to ``coverage_history_``. Without ``y`` every row uses the current
            residual memory. One step ahead only: for a target ``h > 1`` steps ahead, a
            row's value is known ``h`` rows later, so issue the intervals without ``y`` and
            `update` each row once its value is observed (see the online protocol in the
            time-series docs; absorbing it at once is a look-ahead).
        alpha : float or sequence of float, optional
            Miscoverage level(s); defaults to the constructor's ``alpha``. Several levels give
            nested intervals: each is widened, if needed, to contain those of larger levels.
            Each level searches its own width-minimising ``beta``, so intervals asked for in
            separate calls need not be nested: ask for the levels together. With
            ``aci_gamma`` the nesting is by each level's working level, which ACI moves
            level by level: the intervals of two levels can then cross.

        Returns
        -------
        ndarray of shape (n_samples, 2), or (n_samples, 2, k) for k levels
        """
        if positional:
            shown = ", ".join(f"{value!r:.40}" for value in positional)
            raise TypeError(
                f"{type(self).__name__}.predict_interval takes `y` and `alpha` by keyword "
                f"only, got {len(positional)} more positional value(s): {shown}. Write "
                "predict_interval(X, alpha=0.05) for a level, or predict_interval(X, y=y) "
                "to absorb the observations online."
            )
        # Without y the memory is only read (the diagnostics get an entry): no snapshot,
        # so that a refused call cannot disturb other threads predicting with the model.
        if y is None:
            return self._intervals(X, None, alpha)
        return self._online_intervals(X, y, alpha)

    def _intervals(self, X: ArrayLike, y: ArrayLike | None, alpha: Any) -> NDArray:
        check_wrapper_fitted(self, "source_", "predict_interval")
        self._check_call_params()  # an invalid value is named as such, not as a change
        check_calibration_settings(self, "predict_interval", step="fit", again="fit(X, y)")
        value = self.alpha if alpha is None else alpha
        alphas = check_call_alpha(alpha, self.alpha)
        self._warn_few_residuals_for(alphas)
        X, y = self._check_series(X, y, reset=False)
        centre = self.source_.predict(X)
        n = centre.shape[0]
        out = np.empty((n, 2, alphas.size))
        gamma = self._check_aci_gamma()
        if y is None:
            levels = alphas if gamma is None else self._adapted_levels(alphas)
            out[:] = centre[:, None, None] + self._level_offsets(levels)[None]
            lowered = np.broadcast_to(levels <= 0, (n, alphas.size))
        elif isinstance(gamma, np.ndarray):  # several step sizes: DtACI
            covered, lowered = self._dtaci_steps(centre, y, alphas, gamma, out)
        else:
            covered, lowered = self._online_steps(centre, y, alphas, gamma or 0.0, out)
        # rounded outward, row by row: a target whose residual equals an offset is inside
        # (-0.4 + 1.4 is 0.9999999999999999); |offset| <= |end| + |centre|
        column = centre[:, None]
        out[:, 0] -= outward_margin(column, column, out[:, 0])
        out[:, 1] += outward_margin(column, column, out[:, 1])
        if y is not None:
            if gamma is None:  # with ACI the steps judged their hits already (empty sets miss)
                covered = (out[:, 0, 0] <= y) & (y <= out[:, 1, 0])
            self.coverage_history_ = np.concatenate([self.coverage_history_, covered])
        # infinite at a working level ACI took to 0 or below is ACI's doing (the whole
        # line); at any positive level, the method's (finite_sample needs more residuals
        # at a level ACI lowered: about 2 / a - 1)
        infinite = int((np.isinf(out).any(axis=1) & ~lowered).any(axis=1).sum())
        if infinite:
            more = self._effective_size_advice()
            aci = (
                ""
                if gamma is None
                else " (with `aci_gamma` the level is the working one, "
                "`aci_alpha_history_`, which ACI lowers after misses: a level a needs an "
                "effective sample size of about 2 / a - 1)"
            )
            message = (
                f"{infinite} of {n} intervals are infinite: with `finite_sample=True` the "
                "weights' effective sample size (`effective_sample_sizes_`) is too small for "
                f"alpha{aci}; {more}set `finite_sample=False` (the published algorithm: "
                "finite, but short of the level there)."
            )
            if n == 1:  # an online loop predicting row by row: once per fit
                self._warn_once(("infinite", self.memory), message)
            else:
                warn_user(message, UserWarning)
        return out[..., 0] if np.ndim(value) == 0 else out

    def _effective_size_advice(self) -> str:
        """How to raise the weights' effective sample size (the infinite-interval warning's
        remedy, before "set `finite_sample=False`")."""
        return "" if self.memory is None else f"keep more residuals (`memory`={self.memory}) or "

    def _adapted_levels(self, alphas: NDArray) -> NDArray:
        """The current ACI level of each nominal level (its nominal value at first)."""
        current = self.__dict__.get("aci_alphas_", {})
        return np.array([current.get(float(a), float(a)) for a in alphas])

    def _level_offsets(
        self,
        levels: NDArray,
        record: bool = True,
        memo: dict[int, tuple] | None = None,
        nested: bool = True,
    ) -> NDArray:
        """`_interval_offsets` for levels of any value: at or below 0 the whole line, at or
        above 1 the empty set (a zero-width interval at the prediction); no levels, no
        intervals. The diagnostics are recorded as there (NaN when no level lies in
        (0, 1)); ``memo`` and ``nested`` as there."""
        if levels.size == 0:
            return np.zeros((2, 0))
        inside = (levels > 0) & (levels < 1)
        if inside.all():
            return self._interval_offsets(levels, record, memo, nested)
        out = np.zeros((2, levels.size))
        out[0, levels <= 0], out[1, levels <= 0] = -np.inf, np.inf
        if inside.any():
            out[:, inside] = self._interval_offsets(levels[inside], record, memo, nested)
        elif record:  # no weights were computed
            self.effective_sample_sizes_.append(float("nan"))
        return out

    def _online_steps(
        self, centre: NDArray, y: NDArray, alphas: NDArray, gamma: float, out: NDArray
    ) -> tuple[NDArray | None, NDArray]:
        """One step at a time: issue row ``t``'s interval (into ``out``, before the outward
        rounding, which is row by row), then absorb its residual.

        With adaptive conformal inference (``gamma > 0``; Gibbs and Candes, 2021) each
        nominal level ``alpha`` runs its own level ``a_t``: the interval of step ``t`` is
        the method's at ``a_t``, then ``a_{t+1} = a_t + gamma (alpha - miss_t)``; levels
        within 1e-12 of 0 or 1 are snapped to it, so rounding does not turn the whole line
        or the empty set into a finite interval at a level of 1e-16. ``gamma = 0``: the
        nominal levels throughout. Returns the first level's hits (judged here with ACI,
        on the rounded ends; None without, for the caller to judge on the whole block) and,
        per row and level, whether ACI had taken the level to 0 or below (the whole line
        there is ACI's doing, not the method's).
        """
        residuals = y - centre
        if not np.isfinite(residuals).all():  # refuse before any state changes
            self._absorb(residuals)
        levels = self._adapted_levels(alphas) if gamma else alphas
        n = centre.shape[0]
        hits = np.zeros((n, alphas.size), dtype=bool)
        history = np.empty(n)
        lowered = np.zeros((n, alphas.size), dtype=bool)
        for t in range(n):  # sequential by nature: step t needs the residual of t - 1
            history[t] = levels[0]
            lowered[t] = levels <= 0
            out[t] = centre[t] + self._level_offsets(levels)
            if gamma:  # the miss, on the ends as they will be rounded, moves the levels
                hits[t] = self._inside(centre[t], out[t], y[t], levels)
                levels = _snap_levels(levels + gamma * (alphas - ~hits[t]))
            self._absorb(residuals[t : t + 1])
        if gamma:
            # one current level: DtACI's experts of these levels start again from it
            used = {float(a) for a in alphas}
            experts = self.__dict__.get("aci_experts_", {})
            self.aci_experts_ = {a: v for a, v in experts.items() if a not in used}
        self._record_levels(alphas, levels if gamma else None, history)
        return (hits[:, 0] if gamma else None), lowered

    def _record_levels(self, alphas: NDArray, working: NDArray | None, history: NDArray) -> None:
        """Keep each nominal level's next working level (none without ACI) and append the
        levels that issued the online rows to ``aci_alpha_history_``."""
        if working is not None:
            self.aci_alphas_ = {
                **self.__dict__.get("aci_alphas_", {}),
                **{float(a): float(level) for a, level in zip(alphas, working, strict=True)},
            }
        self.aci_alpha_history_ = np.concatenate(  # without ACI: the nominal level
            [self.__dict__.get("aci_alpha_history_", np.zeros(0)), history]
        )

    def _dtaci_steps(
        self, centre: NDArray, y: NDArray, alphas: NDArray, gammas: NDArray, out: NDArray
    ) -> tuple[NDArray | None, NDArray]:
        """`_online_steps` with several step sizes: dynamically-tuned adaptive conformal
        inference (DtACI; Gibbs and Candes, 2024).

        Each nominal level runs one ACI expert per step size ``gamma_i``, with level
        ``a_i`` and probability ``p_i``; step ``t`` issues the method's own interval at
        ``sum_i p_i a_i`` (as a call without ``y`` would). Once ``y_t`` is known, each
        evaluated level gets its own interval, as when asked for alone (not nested with
        the others; with KOWCPI's ``finite_sample`` the kernel weights of its own floor):
        the paper's rule. ``beta_t`` is the largest level whose interval holds ``y_t`` (0
        if none) among the issued one, the experts', and 0.02, 0.04, ..., 0.98. Then
        ``p_i`` is multiplied by ``exp(-eta l(beta_t, a_i))`` (``l`` the pinball loss
        ``alpha (beta - a) - min(0, beta - a)``), normalised and mixed with uniform
        weights, ``(1 - sigma) p + sigma / k``; and ``a_i += gamma_i (alpha - miss_i)``,
        ``miss_i`` whether ``a_i``'s own interval missed ``y_t``. New experts start at the
        current working level.

        Not every grid level is evaluated, yet the weights are the whole grid's (to
        rounding): at or above every expert's level the losses are ``alpha (beta - a_i)``,
        whose common factor ``exp(-eta alpha beta)`` cancels in the normalisation (the
        mixing comes after it), so there only whether some level holds ``y_t`` matters,
        not which. The grid levels above the experts' are evaluated (together) only when
        the issued and the experts' levels leave ``beta_t`` below the largest expert's
        level: the intervals are not nested, so one above every expert's can hold ``y_t``
        when the largest expert's misses it. If none of them holds it either, the grid
        levels between the experts' are evaluated, except those at or below the largest
        level found to hold ``y_t``, which cannot raise ``beta_t`` (below every expert's
        level the losses are ``(1 - alpha)(a_i - beta)``: ``beta``'s exact value cancels
        too).
        """
        residuals = y - centre
        if not np.isfinite(residuals).all():  # refuse before any state changes
            self._absorb(residuals)
        n, n_levels, k = centre.shape[0], alphas.size, gammas.size
        # new experts start at the current working level (the nominal one after fit; ACI's
        # or other step sizes' when switched): one current level, whichever call reads it
        levels = np.repeat(self._adapted_levels(alphas)[:, None], k, axis=1)
        weights = np.full((n_levels, k), 1.0 / k)
        experts = self.__dict__.get("aci_experts_", {})
        for j, alpha in enumerate(alphas):  # a loop over nominal levels: their states
            state = experts.get(float(alpha))
            if state is not None and np.array_equal(state["gammas"], gammas):
                levels[j], weights[j] = state["levels"], state["weights"]
        hits = np.zeros((n, n_levels), dtype=bool)
        history = np.empty(n)
        lowered = np.zeros((n, n_levels), dtype=bool)
        for t in range(n):  # sequential by nature: step t needs the residual of t - 1
            working = _snap_levels(np.sum(weights * levels, axis=1))
            history[t] = working[0]
            lowered[t] = working <= 0
            memo: dict[int, tuple] = {}  # this memory state's weights, for every call
            # the issued interval: the method's own at the working level
            out[t] = centre[t] + self._level_offsets(working, memo=memo)
            hits[t] = self._inside(centre[t], out[t], y[t], working)
            # the experts' misses and beta_t from each level's own interval, as when asked
            # for alone (the paper's rule): the issued level and the experts' first
            judged = np.concatenate([working, levels.ravel()])
            inside = self._holds(centre[t], y[t], judged, memo)
            missed = ~inside[n_levels:].reshape(levels.shape)
            beta = float(np.max(judged[inside], initial=0.0))
            # the grid levels (see the docstring): those above every expert's level only
            # when beta_t is still below the largest expert's level (the weights do not
            # depend on how far above it beta_t lies); then, if none of them holds y_t,
            # those between the experts' levels above the largest level that holds it
            top = float(levels.max())
            if beta < top:
                above = _BETA_LEVELS[_BETA_LEVELS > top]
                held = self._holds(centre[t], y[t], above, memo)
                beta = max(beta, float(np.max(above[held], initial=0.0)))
            if beta < top:
                between = _BETA_LEVELS[
                    (_BETA_LEVELS > max(beta, levels.min())) & (_BETA_LEVELS < top)
                ]
                held = self._holds(centre[t], y[t], between, memo)
                beta = max(beta, float(np.max(between[held], initial=0.0)))
            below = beta - levels
            loss = alphas[:, None] * below - np.minimum(below, 0.0)
            weights = weights * np.exp(-DTACI_ETA * loss)
            weights /= weights.sum(axis=1, keepdims=True)
            weights = (1 - DTACI_SIGMA) * weights + DTACI_SIGMA / k
            levels = _snap_levels(levels + gammas * (alphas[:, None] - missed))
            self._absorb(residuals[t : t + 1])
        self.aci_experts_ = {
            **experts,
            **{
                float(a): {"gammas": gammas.copy(), "levels": levels[j], "weights": weights[j]}
                for j, a in enumerate(alphas)
            },
        }
        # the next step's levels
        self._record_levels(alphas, _snap_levels(np.sum(weights * levels, axis=1)), history)
        return hits[:, 0], lowered

    def _holds(
        self, centre: float, value: float, levels: NDArray, memo: dict[int, tuple]
    ) -> NDArray:
        """Whether each level's own interval (not nested with the others, as when asked for
        alone) holds ``value``, judged as `_inside` judges it."""
        offsets = self._level_offsets(levels, record=False, memo=memo, nested=False)
        return self._inside(centre, centre + offsets, value, levels)

    @staticmethod
    def _inside(centre: float, ends: NDArray, value: float, levels: NDArray) -> NDArray:
        """Whether ``value`` lies in each interval ``ends`` ``(2, k)`` as it will be rounded
        outward (row by row); a level at or above 1 (the empty set) misses."""
        low = ends[0] - outward_margin(centre, centre, ends[0])
        high = ends[1] + outward_margin(centre, centre, ends[1])
        return (low <= value) & (value <= high) & (levels < 1)

    # With y the memory absorbs each residual: a refused call leaves it as it was.
    _online_intervals = keeps_state_on_error(_intervals)

    @keeps_state_on_error
    def update(self, X: ArrayLike, y: ArrayLike) -> Self:
        """Absorb new observations (their residuals) without predicting.

        Nothing is appended to ``coverage_history_`` (no interval was issued), and the
        working levels of ``aci_gamma`` do not move: with ACI, give the value to
        ``predict_interval(x, y=y)`` instead (a warning says so, once per fit).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            A scalar is accepted when X has one row.

        Returns
        -------
        self
        """
        check_wrapper_fitted(self, "source_", "update")
        self._check_call_params()
        check_calibration_settings(self, "update", step="fit", again="fit(X, y)")
        if y is None:
            raise missing_target_error()
        X, y = self._check_series(X, y, reset=False)
        self._absorb(y - self.source_.predict(X))
        if self._check_aci_gamma() is not None and not getattr(
            self, "_told_update_keeps_levels", False
        ):  # once per fit: a loop of updates would repeat it at every step
            warn_user(
                "`update` does not move the adaptive levels of `aci_gamma`: they learn only "
                "from `predict_interval(X, y=y)`, which issues each interval before it sees "
                "the value. Give the values there instead (or ignore this warning if the "
                "levels are meant to stay). Said once per fit.",
                UserWarning,
            )
            self._told_update_keeps_levels = True
        return self
