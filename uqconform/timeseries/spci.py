"""SPCI (Xu and Xie, 2023): a quantile random forest on the last residuals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.ensemble import RandomForestRegressor

from uqconform._seeding import integer_seed
from uqconform._validation import check_int
from uqconform.timeseries.base import SequentialConformalRegressor
from uqconform.timeseries.conditional import forest_weights

__all__ = ["SPCI"]


class SPCI(SequentialConformalRegressor):
    """Sequential predictive conformal inference: conditional residual quantiles from a forest.

    At every step a quantile regression forest is refitted on (last ``window`` residuals ->
    next residual) pairs of the residual memory, and the interval uses its conditional
    quantiles at the current window (Meinshausen weights, computed from scikit-learn's
    leaf indices). Adapts to residual dependence, at the cost of a forest fit per step,
    which grows with the residual memory: about 0.065 s of CPU time per step with 1,000
    stored residuals (the defaults: window 100, 10 trees; a 2-core machine under load) and
    seconds with tens of thousands (the time-series page measures it). With
    ``memory=None`` (every residual kept) a long stream slows down step after step (5,000
    steps: about 22 minutes from an empty memory, about 47 from the 2,755 residuals of an
    ELEC2 fit); give ``memory`` for long streams.

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
        Miscoverage level(s) in (0, 1); each call may override it.
    residuals : {"bootstrap", "holdout"}, default="bootstrap"
        Leave-one-out bootstrap ensemble residuals, or one model and a hold-out block.
    n_bootstrap : int, default=25
        Number of bootstrap models.
    holdout_fraction : float, default=0.2
        Share of the fit data kept for residuals with ``residuals="holdout"``.
    memory : int or None, default=None
        Residuals kept (the newest); ``None`` keeps all. The forest is refitted on every
        stored residual at each step, so a step costs in proportion to the memory: bound
        it (a few thousand) for long online runs.
    beta_grid : int or sequence of float, default=5
        Number of ``beta`` values in ``[0, alpha]`` (1: the central interval,
        ``beta = alpha / 2``), or ``beta`` values given as
        fractions of ``alpha`` in ``[0, 1]`` (``[0, 0.5, 1]`` searches ``0``,
        ``alpha / 2`` and ``alpha``; searched in increasing order, ties in width going
        to the smaller ``beta``).
    finite_sample : bool, default=False
        Conformal ends: with ``True`` the next residual takes part in the weighted
        quantiles with the forest weights' average weight, a share ``1 / (n_eff + 1)``.
        The forest cannot widen its leaves, so a step whose weights rest on fewer than 19
        effective residuals (at ``alpha=0.1``) gets an infinite interval, with a warning.
        ``False`` is the published algorithm (plain forest quantiles).
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
        ones, e.g. a Pipeline's forest, included; one seed drawn for all), and the
        per-step quantile forests (one integer seed fixed at fit, drawn afresh for None, plus
        the step count).
    verbose : bool, default=False
        Show a progress bar of the bootstrap fits.
    window : int, default=100
        Number of past residuals the forest conditions on.
    n_trees : int, default=10
    max_depth : int or None, default=2
        The quantile forest's settings (those of the official code; ``max_depth=None``
        grows the trees until their leaves are pure, as in scikit-learn).

    Attributes
    ----------
    effective_sample_sizes_ : list of float
        ``1 / sum(w_i^2)`` of the quantile forest's weights, once per residual-memory state
        used: one entry per ``predict_interval`` call without ``y`` (its rows share the
        memory), one per row with ``y``; ``update`` adds nothing.
    n_infeasible_ : int
        Always 0 for SPCI (the attribute of KOWCPI, kept for a common interface).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = X @ [1.0, -1.0] + rng.normal(size=300)
    >>> model = SPCI(LinearRegression(), window=5, n_bootstrap=10, random_state=0)
    >>> model.fit(X[:250], y[:250]).predict_interval(X[250:], y=y[250:]).shape
    (50, 2)
    """

    def __init__(
        self,
        estimator: Any = None,
        alpha: float | ArrayLike = 0.1,
        window: int = 100,
        n_trees: int = 10,
        max_depth: int | None = 2,
        residuals: str = "bootstrap",
        n_bootstrap: int = 25,
        holdout_fraction: float = 0.2,
        memory: int | None = None,
        beta_grid: int | ArrayLike = 5,
        finite_sample: bool = False,
        aci_gamma: float | Sequence[float] | None = None,
        n_jobs: int | None = None,
        random_state: int | np.random.Generator | np.random.RandomState | None = None,
        verbose: bool = False,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.window = window
        self.n_trees = n_trees
        self.max_depth = max_depth
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

    #: The per-step forests' base seed, drawn at fit (None in a model pickled before it was).
    _forest_seed: int | None = None

    def _effective_size_advice(self) -> str:
        # pure leaves (max_depth=None) keep the effective size near n_trees whatever the
        # memory holds: more residuals alone cannot help there
        forest = (
            f"use a shallower forest (`max_depth`={self.max_depth}) or more trees "
            f"(`n_trees`={self.n_trees}), "
        )
        return forest + super()._effective_size_advice()

    def _validate_params(self) -> None:
        super()._validate_params()
        self._check_forest_params()
        check_int(self.window, "window")

    def _check_forest_params(self) -> None:
        check_int(self.n_trees, "n_trees")
        if self.max_depth is not None:
            check_int(self.max_depth, "max_depth")

    def _check_call_params(self) -> None:
        super()._check_call_params()
        self._check_forest_params()  # the forests are built at each step

    def _next_weights(self, memory: NDArray, min_effective: int) -> tuple[NDArray, NDArray, bool]:
        # In units of scale_: the forest's float32 features and its impurity floor (a node
        # of variance below 2e-16 is not split) would otherwise depend on the units of y.
        window = int(self.window)
        windows, scaled_targets, query = self._scaled_pairs(memory, window)
        # Rounded to float32 (what the forest does to its features anyway): residuals that
        # differ in the last bit of float64 (a model's prediction on one row and on a batch
        # can) would otherwise split the trees differently, so that a stream fed row by row
        # and in one call got different intervals.
        windows, scaled_targets, query = (
            np.asarray(a, dtype=np.float32).astype(float) for a in (windows, scaled_targets, query)
        )
        base = self._forest_seed  # None: a model pickled before seeds were drawn at fit
        seed = None if base is None else (base + self.n_steps_) % 2**32
        forest = RandomForestRegressor(
            n_estimators=self.n_trees, max_depth=self.max_depth, random_state=seed
        )
        weights = forest_weights(windows, scaled_targets, query, forest)
        return memory[window:], weights, True  # the targets in original units exactly

    _fit_params = (*SequentialConformalRegressor._fit_params, "window")  # checked at fit

    def _tune(self, residuals: NDArray) -> None:
        """Check that the memory holds a window and its successor, and fix the seed of the
        per-step forests (``random_state`` + the step count, modulo 2**32; one draw from a
        generator, and a fresh draw for None: a fitted model issues the same interval
        again when asked again, as the online protocol and ACI's hit rate require)."""
        window = int(self.window)
        self._require_history(residuals, window + 1, f"`window`={window}")
        seed = integer_seed(self.random_state)
        self._forest_seed = int(np.random.default_rng().integers(2**31)) if seed is None else seed
        self._warn_few_residuals(residuals, window)  # a forest on a handful of pairs
