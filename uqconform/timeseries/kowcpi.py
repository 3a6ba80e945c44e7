"""KOWCPI (Lee, Xu and Xie, 2024): kernel-based optimally weighted conformal intervals."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial.distance import cdist

from uqconform._validation import check_bool
from uqconform._warnings import warn_user
from uqconform.quantiles import check_alpha
from uqconform.timeseries.base import (
    SequentialConformalRegressor,
    minimum_effective_size,
    residual_offsets,
)
from uqconform.timeseries.conditional import (
    KERNELS,
    kernel_values,
    reweighted_nadaraya_watson,
)

__all__ = ["KOWCPI", "aic_bandwidth"]

_WINDOW_CANDIDATES = (1, 2, 3, 5, 10)
_DEFAULT_BANDWIDTH = 0.3
_BANDWIDTH_TUNING = (_DEFAULT_BANDWIDTH, 0.5, 1.0, 2.0)
_BANDWIDTH_CANDIDATES = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
#: Fit residuals the AIC bandwidth is chosen on (more with a longer window)
_AIC_RESIDUALS = 2000
#: Rounding allowance when a replayed coverage (hits / steps) is compared with 1 - alpha.
_COVERAGE_TOLERANCE = 1e-12


def aic_bandwidth(
    windows: NDArray,
    targets: NDArray,
    kernel: str,
    candidates=_BANDWIDTH_CANDIDATES,
    where: str = "",
) -> float:
    """Bandwidth minimising the nonparametric AIC of the Nadaraya-Watson smoother.

    ``log(RSS / n) + 2 (tr(S S^T) + 1) / (n - tr(S S^T) - 2)`` (Cai and Tiwari, 2000, as
    reconstructed in the method's spec: Hurvich, Simonoff and Tsai's AICc takes ``tr(S)``,
    which picks larger bandwidths), with ``S`` the leave-in smoother matrix of plain
    Nadaraya-Watson. When no candidate can be
    scored (too few windows for its degrees of freedom) it warns and returns 0.3, KOWCPI's
    default, if that is a candidate, else the first candidate; ``where`` ends the
    warning's first clause (which candidate window it concerns).
    """
    if len(candidates) == 0:
        raise ValueError("`candidates` must hold at least one bandwidth.")
    distance = cdist(windows, windows)  # (n, n), without an (n, n, w) intermediate
    n = targets.shape[0]
    fallback = _DEFAULT_BANDWIDTH if _DEFAULT_BANDWIDTH in candidates else candidates[0]
    best, best_score = float(fallback), np.inf
    for h in candidates:  # a loop over candidate bandwidths
        smoother = kernel_values(distance / h, kernel)
        smoother /= smoother.sum(axis=1, keepdims=True)
        rss = float(np.sum((targets - smoother @ targets) ** 2))
        dof = float(np.einsum("ij,ij->", smoother, smoother))
        if n - dof - 2 <= 0 or rss <= 0:
            continue
        score = np.log(rss / n) + 2 * (dof + 1) / (n - dof - 2)
        if score < best_score:
            best, best_score = float(h), score
    if best_score == np.inf:
        warn_user(
            f"No bandwidth could be scored by the AIC on {n} residual windows{where} (too "
            f"few for the smoother's degrees of freedom, or residuals fitted exactly): "
            f"bandwidth {best:g} is used.",
            UserWarning,
        )
    return best


class KOWCPI(SequentialConformalRegressor):
    """Kernel-based optimally weighted conformal prediction intervals for time series.

    The next residual's conditional distribution given the last ``window`` residuals is
    estimated by reweighted Nadaraya-Watson: kernel weights times empirical-likelihood
    adjustment weights (a 1-D convex problem per step). Recent, similar residual patterns
    get the weight, so intervals follow volatility regimes; asymptotic conditional
    coverage under mixing, no finite-sample guarantee. Not after the most extreme
    residuals: a residual beyond most of the memory has few neighbours, the radius widens
    into calmer windows and the next interval is too narrow (coverage about 0.72 after the
    largest 2% of residuals on an ARCH(1) series, against 0.89 overall, in a review with
    ``window=1`` and 60 runs of 300 online steps); on volatile series set ``aci_gamma``,
    which widens the intervals after misses.

    Fitted attributes every sequential method has (``source_``, ``fit_residuals_``,
    ``scale_``, ``memory_``, ``n_steps_``, ``coverage_history_``, ...) are described on
    `SequentialConformalRegressor`; those below are this method's own.

    Parameters
    ----------
    estimator : regressor, default=None
        Any scikit-learn regressor (``None``: a 10-tree random forest). A model wrapped in
        ``FrozenEstimator`` is not refitted: its residuals on every fit row form the
        residual history, so it must have been trained on other rows (``residuals`` and
        its settings then play no part).
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) in (0, 1); each call may override it. With several levels the
        window and bandwidth are tuned at the smallest (the widest interval).
    residuals : {"bootstrap", "holdout"}, default="bootstrap"
        Leave-one-out bootstrap ensemble residuals, or one model and a hold-out block.
    n_bootstrap : int, default=25
        Number of bootstrap models.
    holdout_fraction : float, default=0.2
        Share of the fit data kept for residuals with ``residuals="holdout"``.
    memory : int or None, default=None
        Residuals kept (the newest); ``None`` keeps all.
    beta_grid : int or sequence of float, default=5
        Number of ``beta`` values in ``[0, alpha]`` (1: the central interval,
        ``beta = alpha / 2``), or ``beta`` values given as
        fractions of ``alpha`` in ``[0, 1]`` (``[0, 0.5, 1]`` searches ``0``,
        ``alpha / 2`` and ``alpha``; searched in increasing order, ties in width going
        to the smaller ``beta``).
    finite_sample : bool, default=True
        Conformal ends with an effective-sample-size floor. The kernel weights concentrate
        on few residuals (an effective sample size ``n_eff = 1 / sum(w_i^2)`` of a few tens
        or fewer is common with ``window >= 2``), and plain weighted quantiles of so few
        points, with the narrowest ``beta``, under-cover badly (about 0.78 on average
        instead of 0.90 on i.i.d. residuals with ``window=3``, single runs about 0.71 to
        0.83, in reviews with 500 to 1,200 residuals). With ``True`` the next residual enters
        the weighted quantiles with the weights' average weight, a share
        ``1 / (n_eff + 1)`` (split conformal's rank correction when the weights are
        equal), and the kernel radius grows at steps where ``n_eff`` is too small for a
        finite interval (19 at ``alpha=0.1``). ``False`` is the published algorithm.
    aci_gamma : float or sequence of float, default=None
        Step size of adaptive conformal inference in online calls, in (0, 1] (0.005 to
        0.05 is usual); a sequence of at least two step sizes runs DtACI, which weighs
        one ACI expert per step size (e.g. ``(0.001, 0.002, ..., 0.128)``); ``None``:
        off. The long-run guarantee and how to feed it are described on
        `SequentialConformalRegressor`.
    n_jobs : int, default=None
        Parallel bootstrap fits through joblib (Dask with ``joblib.parallel_config``).
    random_state : int, numpy Generator, RandomState or None, default=None
        Seeds the bootstrap samples and every unset ``random_state`` of the model (nested
        ones, e.g. a Pipeline's forest, included; one seed drawn for all).
    verbose : bool, default=False
        Show a progress bar of the bootstrap fits.
    window : int or "auto", default="auto"
        Residuals the kernel conditions on; ``"auto"`` tries 1, 2, 3, 5 and 10. The tuning
        replays the tuning block (see ``bandwidth``) once per candidate, each step costing
        in proportion to the memory, so its time grows about as the square of the residual
        history: about 5 to 6 s of CPU time at fit with 10,000 residuals and 31 to 35 s with
        30,000 (a frozen linear model, no bootstrap fits, on a shared 2-core machine under
        load; four times the candidates with ``bandwidth="auto"``). An integer ``window``
        with a fixed ``bandwidth`` needs no tuning; a ``memory`` of a few thousand bounds
        each replayed step, so the time grows in proportion to the history instead (about
        11 s with 30,000 residuals and ``memory=3000``; the tuning then replays with that
        memory and may pick another window).
    bandwidth : float, "auto" or "aic", default=0.3
        Kernel radius in units of the residuals' robust scale (MAD); ``"auto"`` also tries
        0.5, 1 and 2 (on ELEC2 it gave the same intervals as 0.3, at about three times the
        fit time: benchmark suite ``timeseries``); ``"aic"`` takes the nonparametric AIC choice
        of the smoother (Cai and Tiwari, 2000) on the last 2,000 fit residuals (the last
        ``window + 11`` with a longer window), which is
        fitted for the conditional mean, not for quantiles (where no bandwidth can be
        scored, 0.3 with a warning). Window and bandwidth are chosen together on a tuning
        block (the last ``tune_fraction`` of the fit residuals, replayed online): the
        narrowest setting whose tuning coverage reaches ``1 - alpha``, else the one with
        the highest coverage
        (at the smallest level of the constructor's ``alpha``, read at fit: a level asked
        for later, at prediction or through ``set_params``, keeps that choice; refit to tune
        for it). The tuning block has ``tune_fraction`` of the fit residuals, so it needs
        a few times ``1 / alpha`` of them to tell the settings apart.
    kernel : {"epanechnikov", "gaussian"}, default="epanechnikov"
        The radius is doubled at steps where fewer than 10 windows get a non-zero kernel
        value: outside the compact Epanechnikov kernel's radius, or (Gaussian) so far
        away, about 39 radii, that the value underflows to 0. With ``finite_sample=True``
        it then grows further until the effective sample size allows a finite interval.
    constraint : {"first", "all"}, default="first"
        Moment condition on the newest residual (the paper) or on the whole window.
    reweight : bool, default=True
        ``False`` gives plain Nadaraya-Watson (the paper's ablation).
    tune_fraction : float, default=0.125
        Share of the fit residuals used to choose the window.

    Attributes
    ----------
    effective_sample_sizes_ : list of float
        ``1 / sum(w_i^2)`` of the kernel weights, once per residual-memory state
        used: one entry per ``predict_interval`` call without ``y`` (its rows share the
        memory), one per row with ``y``; ``update`` adds nothing.
    n_infeasible_ : int
        Residual-memory states (counted like ``effective_sample_sizes_``) at which plain
        Nadaraya-Watson weights were used: the adjustment problem had no solution, or
        (with ``finite_sample``) it concentrated the weights below the effective-size
        floor. The tuning replay is not counted.
    window_ : int
        The window used (the tuned one with ``window="auto"``).
    bandwidth_ : float
        The bandwidth used, in units of ``scale_`` (tuned with ``"auto"`` or ``"aic"``).
    tuning_results_ : list of dict
        Window, bandwidth, tuning coverage and mean width of each candidate tried (only
        when several candidates were compared).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2)); y = X @ [1.0, -1.0] + rng.normal(size=400)
    >>> model = KOWCPI(LinearRegression(), window=1, n_bootstrap=10, random_state=0)
    >>> model.fit(X[:300], y[:300]).predict_interval(X[300:], y=y[300:]).shape
    (100, 2)
    """

    def __init__(
        self,
        estimator: Any = None,
        alpha: float | ArrayLike = 0.1,
        window: int | str = "auto",
        bandwidth: float | str = _DEFAULT_BANDWIDTH,
        kernel: str = "epanechnikov",
        constraint: str = "first",
        reweight: bool = True,
        tune_fraction: float = 0.125,
        residuals: str = "bootstrap",
        n_bootstrap: int = 25,
        holdout_fraction: float = 0.2,
        memory: int | None = None,
        beta_grid: int | ArrayLike = 5,
        finite_sample: bool = True,
        aci_gamma: float | Sequence[float] | None = None,
        n_jobs: int | None = None,
        random_state: int | np.random.Generator | np.random.RandomState | None = None,
        verbose: bool = False,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.window = window
        self.bandwidth = bandwidth
        self.kernel = kernel
        self.constraint = constraint
        self.reweight = reweight
        self.tune_fraction = tune_fraction
        self.residuals = residuals
        self.n_bootstrap = n_bootstrap
        self.holdout_fraction = holdout_fraction
        self.memory = memory
        self.beta_grid = beta_grid
        self.finite_sample = finite_sample
        self.aci_gamma = aci_gamma
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _validate_params(self) -> None:
        super()._validate_params()
        w = self.window
        if not (isinstance(w, str) and w == "auto") and (
            isinstance(w, bool) or not isinstance(w, numbers.Integral) or w < 1
        ):
            raise ValueError(f"`window` must be a positive integer or 'auto', got {w!r}.")
        h = self.bandwidth
        if not (isinstance(h, str) and h in ("aic", "auto")) and (
            isinstance(h, bool)
            or not isinstance(h, numbers.Real)
            or not np.isfinite(h)
            or float(h) <= 0
        ):
            raise ValueError(f"`bandwidth` must be a positive float, 'auto' or 'aic', got {h!r}.")
        if self.kernel not in KERNELS:
            raise ValueError(f"Unknown `kernel` {self.kernel!r}: use one of {list(KERNELS)}.")
        check_bool(self.reweight, "reweight")
        if self.constraint not in ("first", "all"):
            raise ValueError(f"`constraint` must be 'first' or 'all', got {self.constraint!r}.")
        fraction = self.tune_fraction
        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, numbers.Real)
            or not (0 < fraction < 1)
        ):
            raise ValueError(f"`tune_fraction` must lie in (0, 1), got {self.tune_fraction!r}.")

    # ---- the conditional model ----------------------------------------------------------
    def _weights_with(
        self, memory: NDArray, window: int, bandwidth: float, min_effective: int
    ) -> tuple[NDArray, NDArray, bool]:
        windows, _, query = self._scaled_pairs(memory, window)
        result = reweighted_nadaraya_watson(
            windows,
            query,
            bandwidth,
            kernel=self.kernel,
            adjust=bool(self.reweight),
            constraint=self.constraint,
            min_effective=min_effective,
        )
        # the targets in original units exactly (not scaled and scaled back)
        return memory[window:], result.weights, result.feasible

    _weights_follow_floor = True
    _fit_params = (
        *SequentialConformalRegressor._fit_params,
        "window",
        "bandwidth",
        "kernel",
        "constraint",
        "reweight",
        "tune_fraction",
        "beta_grid",
        "finite_sample",
    )  # the window and bandwidth were tuned with these

    def _next_weights(self, memory: NDArray, min_effective: int) -> tuple[NDArray, NDArray, bool]:
        return self._weights_with(memory, self.window_, self.bandwidth_, min_effective)

    # ---- hyper-parameters ------------------------------------------------------------------
    def _bandwidths_for(self, residuals: NDArray, window: int) -> list[float]:
        """Candidate bandwidths for a window: the given one, the AIC choice, or a grid."""
        if self.bandwidth == "auto":
            return list(_BANDWIDTH_TUNING)
        if self.bandwidth == "aic":
            if self.window == "auto" and residuals.shape[0] <= window:
                return []  # too short for this candidate: the tuning says what it needs
            # the last 2,000 residuals, or ``window`` + 11 (the tuning's minimum) if more:
            # the AIC then works whenever the window fits the history
            recent = residuals[-max(_AIC_RESIDUALS, window + 11) :]
            windows, targets, _ = self._scaled_pairs(recent, window)
            where = ""
            if self.window == "auto":  # the fallback concerns this candidate only
                where = f" of length {window} (a candidate of window='auto', used if chosen)"
            return [aic_bandwidth(windows, targets, self.kernel, where=where)]
        return [float(self.bandwidth)]

    def _tune(self, residuals: NDArray) -> None:
        """Choose the window and bandwidth on a tuning block: the last ``tune_fraction`` of
        the fit residuals, replayed online with the earlier ones as memory. The narrowest
        pair whose tuning coverage reaches ``1 - alpha`` wins; if none does, the pair with
        the highest coverage. Windows a finite ``memory`` can never hold enough pairs for
        (their intervals would be infinite for good) are passed over while another fits.
        With several levels in ``alpha`` the tuning uses the smallest (the widest
        interval), whatever their order."""
        windows = _WINDOW_CANDIDATES if self.window == "auto" else (int(self.window),)
        if self.window != "auto":
            self._require_history(residuals, windows[0] + 1, f"`window`={windows[0]}")
        n_tune = max(round(residuals.shape[0] * self.tune_fraction), 1)
        history, block = residuals[:-n_tune], residuals[-n_tune:]
        tuned = len(windows) > 1 or self.bandwidth == "auto"
        if tuned and self._trim(history).shape[0] <= min(windows) + 10:
            # no candidate can be replayed: refused before any candidate's AIC warns
            tuning = f"`window`={self.window!r}"
            if self.window != "auto":  # the window is fixed: the bandwidth is tuned
                tuning = f"`bandwidth`={self.bandwidth!r} at `window`={self.window!r}"
            raise self._short_history(
                history.shape[0],
                min(windows) + 11,
                f"tuning {tuning} (window {min(windows)} and 10 more "
                f"residuals before the {n_tune}-residual tuning block, `tune_fraction`="
                f"{self.tune_fraction})",
                self._n_fit_rows,
                hint="; an integer `window` with a fixed `bandwidth` needs no tuning block",
            )
        candidates = [(w, h) for w in windows for h in self._bandwidths_for(residuals, w)]
        if len(candidates) == 1:
            self.window_, self.bandwidth_ = candidates[0]
            self._warn_few_residuals(residuals, self.window_)
            return
        level = float(np.min(check_alpha(self.alpha)))
        if n_tune < 2 / level:  # a miss or two decides: the choice is close to a guess
            warn_user(
                f"The tuning block has {n_tune} residuals (`tune_fraction`="
                f"{self.tune_fraction} of {residuals.shape[0]}): at alpha={level:g} one miss "
                f"moves its coverage by {1 / n_tune:.2g}, so the window and bandwidth it "
                f"chooses are close to a guess (at least {int(np.ceil(2 / level))} are "
                "needed). Give more history, or fix `window` and `bandwidth`.",
                UserWarning,
            )
        results = []
        for window, bandwidth in candidates:  # a loop over candidate settings
            if self._trim(history).shape[0] <= window + 10:
                continue  # (the smallest window fits: checked above)
            covered, widths = self._replay(history, block, window, bandwidth, level)
            reached = covered >= 1 - level - _COVERAGE_TOLERANCE  # 41 / 50 reaches 0.82
            results.append((reached, -widths, window, bandwidth, covered))
        # a window the memory can never hold enough pairs for gives infinite intervals
        # forever (its tuning coverage of 1 "reaches" the level): only if every window does
        pool = results
        if self.finite_sample and self.memory is not None:
            needed = minimum_effective_size(np.array([level]))
            pool = [r for r in results if self.memory - r[2] >= needed] or results
        valid = [r for r in pool if r[0]]
        chosen = max(valid, key=lambda r: r[1]) if valid else max(pool, key=lambda r: (r[4], r[1]))
        self.window_, self.bandwidth_ = chosen[2], chosen[3]
        self._warn_few_residuals(residuals, self.window_)
        self.tuning_results_ = [
            {"window": r[2], "bandwidth": r[3], "coverage": r[4], "width": -r[1]} for r in results
        ]

    def _replay(
        self, history: NDArray, block: NDArray, window: int, bandwidth: float, level: float
    ) -> tuple[float, float]:
        """Coverage and mean width of the online intervals on a block of known residuals."""
        memory = self._trim(history)
        fractions = self._beta_fractions()
        levels = np.array([level])
        floor = minimum_effective_size(levels) if self.finite_sample else 0
        hits, widths = 0, 0.0
        for residual in block:  # sequential replay over the tuning block
            targets, weights, _ = self._weights_with(memory, window, bandwidth, floor)
            lower, upper = residual_offsets(
                targets, weights, levels, fractions, self.finite_sample
            )[:, 0]
            hits += int(lower <= residual <= upper)
            widths += upper - lower
            memory = self._trim(np.append(memory, residual))
        return hits / block.shape[0], widths / block.shape[0]
