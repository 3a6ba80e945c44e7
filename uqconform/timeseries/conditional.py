"""Conditional distribution of the next residual given the last ``window`` residuals.

Every model returns weights over stored residuals ("targets"): the conditional CDF of the
next residual is the weighted empirical CDF, and its quantiles come from the one
:func:`uqconform.quantiles.weighted_quantile` routine.

* empirical (EnbPI): uniform weights on the residual memory;
* quantile random forest (SPCI): Meinshausen's leaf co-membership weights of a forest
  refitted on (window -> next residual) pairs;
* Nadaraya-Watson, plain or reweighted (KOWCPI): kernel weights, times the empirical
  likelihood adjustment weights ``p_i = 1 / (n (1 + lambda z_i))`` of Hall, Wolff and Yao
  (1999) whose moment condition removes the first-order boundary bias.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray
from scipy import optimize
from sklearn.ensemble import RandomForestRegressor

from uqconform._validation import check_positive_float
from uqconform.quantiles import effective_sample_size

__all__ = [
    "KernelWeights",
    "adjustment_lambda",
    "forest_weights",
    "kernel_values",
    "lagged_pairs",
    "reweighted_nadaraya_watson",
]

KERNELS = ("epanechnikov", "gaussian")


def lagged_pairs(memory: NDArray, window: int) -> tuple[NDArray, NDArray, NDArray]:
    """Regression pairs of a residual series, **newest residual first** in every window.

    Parameters
    ----------
    memory : ndarray of shape (T,)
        Residuals in time order (oldest first).
    window : int
        Number of past residuals used as predictors.

    Returns
    -------
    windows : ndarray of shape (T - window, window)
        ``windows[i] = (e[i + w - 1], ..., e[i])``.
    targets : ndarray of shape (T - window,)
        ``targets[i] = e[i + w]``, the residual that followed.
    query : ndarray of shape (window,)
        The latest window ``(e[T - 1], ..., e[T - w])``, for the next residual.

    Examples
    --------
    >>> windows, targets, query = lagged_pairs(np.arange(5.0), 2)
    >>> windows.tolist(), targets.tolist(), query.tolist()
    ([[1.0, 0.0], [2.0, 1.0], [3.0, 2.0]], [2.0, 3.0, 4.0], [4.0, 3.0])
    """
    if memory.shape[0] <= window:
        raise ValueError(
            f"The residual history has {memory.shape[0]} values but `window`={window} needs "
            f"at least {window + 1}."
        )
    view = sliding_window_view(memory, window)[:, ::-1]  # newest first
    return view[:-1], memory[window:], view[-1]


def kernel_values(distance: NDArray, kernel: str) -> NDArray:
    """``k(r)`` for scaled distances ``r`` (the ``h^-w`` factor cancels in the weights).
    A distance whose square overflows is far outside the kernel: weight 0, without
    numpy's overflow warning."""
    with np.errstate(over="ignore"):
        squared = distance**2
    if kernel == "epanechnikov":
        return 0.75 * np.clip(1.0 - squared, 0.0, None)
    if kernel == "gaussian":
        return np.exp(-0.5 * squared)
    raise ValueError(f"Unknown `kernel` {kernel!r}: use one of {list(KERNELS)}.")


def _kernel_at(distance: NDArray, h: float, kernel: str) -> NDArray:
    """`kernel_values` at bandwidth ``h`` (a bandwidth near 1e-300 overflows the scaled
    distances to inf, whose weight is 0, without numpy's warning at every step)."""
    with np.errstate(over="ignore"):
        return kernel_values(distance / h, kernel)


def adjustment_lambda(z: NDArray) -> tuple[float, bool]:
    """Root of ``sum z_i / (1 + lambda z_i) = 0`` (the dual of the adjustment weights).

    Returns ``(lambda, feasible)``; when every non-zero ``z`` has the same sign the moment
    condition cannot hold and ``lambda = 0`` (plain Nadaraya-Watson) is returned.

    Examples
    --------
    >>> z = np.array([-1.0, 0.5, 2.0])
    >>> lam, ok = adjustment_lambda(z)
    >>> ok, abs(float(np.sum(z / (1 + lam * z)))) < 1e-12
    (True, True)
    """
    active = z[z != 0]
    if active.size == 0:  # every z is 0: lambda = 0 meets the condition exactly
        return 0.0, True
    if active.min() > 0 or active.max() < 0:
        return 0.0, False
    with np.errstate(over="ignore"):
        low, high = -1.0 / active.max(), -1.0 / active.min()
    span = high - low
    if not np.isfinite(span):  # subnormal z: numerically zero, nothing to adjust
        return 0.0, False
    low, high = low + 1e-10 * span, high - 1e-10 * span

    def moment(lam: float) -> float:
        return float(np.sum(active / (1.0 + lam * active)))

    if moment(low) <= 0 or moment(high) >= 0:  # numerically at the boundary
        return 0.0, False
    return float(optimize.brentq(moment, low, high, xtol=1e-14 * span)), True


def _vector_lambda(z: NDArray) -> tuple[NDArray, bool]:
    """``constraint="all"``: damped Newton on ``L(lambda) = -sum log(1 + lambda^T z_i)``.

    The moment conditions can hold only when the origin lies inside the convex hull of the
    ``z_i``; otherwise ``L`` is unbounded below and Newton runs off to infinity (while the
    gradient shrinks like ``1 / |lambda|``). A solution is accepted only when it satisfies
    ``sum_i 1 / (1 + lambda^T z_i) = n`` (the adjustment weights sum to one); otherwise
    ``(0, False)`` is returned and plain Nadaraya-Watson is used.
    """
    n, d = z.shape
    zero = np.zeros(d)
    if n <= d:
        return zero, False
    lam = zero.copy()
    size_z = float(np.abs(z).sum()) or 1.0
    for _ in range(100):  # Newton iterations (few), not a loop over samples
        ratio = z / (1.0 + z @ lam)[:, None]
        gradient = -ratio.sum(axis=0)
        if np.abs(gradient).max() <= 1e-13 * size_z:
            break
        hessian = ratio.T @ ratio
        ridge = 1e-12 * (np.trace(hessian) / d or 1.0)
        try:
            step = np.linalg.solve(hessian + ridge * np.eye(d), -gradient)
        except np.linalg.LinAlgError:
            return zero, False
        objective = -np.sum(np.log1p(z @ lam))
        size = 1.0
        while size > 1e-12:  # backtracking: stay feasible and decrease L
            trial = lam + size * step
            inner = 1.0 + z @ trial
            if np.all(inner > 0) and -np.sum(np.log(inner)) <= objective:
                break
            size /= 2
        else:
            break
        lam = trial
    inner = 1.0 + z @ lam
    converged = (
        np.all(inner > 0)
        and abs(float(np.mean(1.0 / inner)) - 1.0) < 1e-8
        and np.abs((z / inner[:, None]).sum(axis=0)).max() <= 1e-8 * size_z
    )
    return (lam, True) if converged else (zero, False)


@dataclass(frozen=True)
class KernelWeights:
    """Weights over the targets and what it took to get them."""

    weights: NDArray
    bandwidth: float
    feasible: bool  # False: the adjustment problem had no solution (plain NW used)


def reweighted_nadaraya_watson(
    windows: NDArray,
    query: NDArray,
    bandwidth: float,
    kernel: str = "epanechnikov",
    adjust: bool = True,
    constraint: str = "first",
    min_points: int = 10,
    min_effective: float = 0.0,
) -> KernelWeights:
    """Kernel weights of the next-residual distribution, reweighted (RNW) or plain (NW).

    Parameters
    ----------
    windows : ndarray of shape (n, w)
        Predictor windows, newest residual first (already scaled).
    query : ndarray of shape (w,)
        The current window.
    bandwidth : float
        Kernel radius in scaled units. It is doubled until at least ``min_points``
        windows carry weight: with the compact Epanechnikov kernel those inside the
        radius, with the Gaussian one those whose value does not underflow to 0 (within
        about 39 radii).
    adjust : bool, default=True
        Multiply by the empirical-likelihood adjustment weights (RNW); ``False`` is plain NW.
    constraint : {"first", "all"}, default="first"
        Moment condition on the newest residual only (the paper), or on every coordinate.
    min_points : int, default=10
        Fewest windows with a non-zero kernel value (inside the Epanechnikov kernel's
        radius; for the Gaussian kernel, not underflowed to 0); the radius is doubled
        until this many windows carry weight.
    min_effective : float, default=0
        Smallest effective sample size ``1 / sum(w_i^2)`` (never more than the number of
        windows): the radius grows by factors of 1.25 until the kernel weights reach it,
        and if the adjustment weights then concentrate the mass below it, plain NW is used
        (``feasible=False``, like an infeasible adjustment problem).

    Returns
    -------
    KernelWeights

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> windows, query = rng.normal(size=(200, 2)), np.zeros(2)
    >>> result = reweighted_nadaraya_watson(windows, query, 0.3, min_effective=50)
    >>> bool(1 / np.sum(result.weights**2) >= 50), result.bandwidth > 0.3
    (True, True)
    """
    h = check_positive_float(bandwidth, "bandwidth")
    if constraint not in ("first", "all"):
        raise ValueError(f"`constraint` must be 'first' or 'all', got {constraint!r}.")
    difference = windows - query
    distance = np.sqrt(np.einsum("ij,ij->i", difference, difference))
    values = _kernel_at(distance, h, kernel)
    needed = min(min_points, windows.shape[0])
    for _ in range(60):  # widen an empty neighbourhood (compact kernel, Gaussian underflow)
        if np.count_nonzero(values) >= needed:
            break
        h *= 2.0
        values = _kernel_at(distance, h, kernel)
    if np.count_nonzero(values) < needed:  # a radius far below the distances (1e-20)
        h = max(h, 1.5 * float(np.partition(distance, needed - 1)[needed - 1]))
        values = _kernel_at(distance, h, kernel)
    effective = min(float(min_effective), windows.shape[0]) * (1 - 1e-9)
    for _ in range(100):  # widen until the kernel's effective size is reached (1.25^100: flat)
        if effective_sample_size(values) >= effective:
            break
        h *= 1.25
        values = _kernel_at(distance, h, kernel)
    weights, feasible = _combined(difference, values, adjust, constraint)
    if adjust and effective_sample_size(weights) < effective:
        # the adjustment piles the mass on a few windows (a query at the edge of the
        # cloud, lambda near its feasibility bound): plain NW, counted as infeasible
        weights, feasible = values / values.sum(), False
    return KernelWeights(weights, h, feasible)


# Kernel values all below this are rescaled before the adjustment (far above the
# subnormal range, so that products with the lagged differences stay normal)
_TINY_KERNEL = 1e-200
_SMALLEST_NORMAL = float(np.finfo(float).tiny)


def _combined(
    difference: NDArray, values: NDArray, adjust: bool, constraint: str
) -> tuple[NDArray, bool]:
    """Kernel values times the adjustment weights (if ``adjust``), normalised."""
    feasible = True
    if adjust:
        largest = values.max(initial=0.0)
        if 0 < largest < _TINY_KERNEL:
            # kernel values near the underflow (a tiny Gaussian bandwidth): -1 / z overflowed
            # and the products difference * values underflowed, so the step fell back to
            # plain Nadaraya-Watson; the weights are normalised, so they do not depend on
            # the values' scale (spec 1.9.3)
            values = values / largest
        if constraint == "first":
            z = difference[:, 0] * values
            lam, feasible = adjustment_lambda(z)
            factor = 1.0 / (1.0 + lam * difference[:, 0] * values)
            if not feasible and (np.abs(z[z != 0]) < _SMALLEST_NORMAL).any():
                # a subnormal z on one side (normal ones on the other) overflows -1 / z, and
                # lambda itself can be beyond the floats: solved for z rescaled, whose
                # lambda z is the same
                z = z / np.abs(z).max()
                lam, feasible = adjustment_lambda(z)
                factor = 1.0 / (1.0 + lam * z)
        else:  # "all" (the name is checked by reweighted_nadaraya_watson)
            z = difference * values[:, None]
            lam_vector, feasible = _vector_lambda(z[values > 0])
            factor = 1.0 / (1.0 + z @ lam_vector)
        values = values * factor
    return values / values.sum(), feasible


def forest_weights(
    windows: NDArray, targets: NDArray, query: NDArray, forest: RandomForestRegressor
) -> NDArray:
    """Quantile-regression-forest weights (Meinshausen, 2006) of the targets at ``query``.

    Fits ``forest`` on (windows -> targets) and returns, for each target, the average over
    trees of ``1{same leaf as query} / (leaf size)``.
    """
    forest.fit(windows, targets)
    train_leaves = forest.apply(windows)  # (n, n_trees)
    query_leaves = forest.apply(query[None, :])[0]  # (n_trees,)
    same = train_leaves == query_leaves[None, :]
    sizes = same.sum(axis=0)
    return (same / np.maximum(sizes, 1)[None, :]).mean(axis=1)
