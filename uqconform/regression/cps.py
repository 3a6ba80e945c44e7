"""Split conformal predictive systems: a calibrated predictive distribution per test row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator

from uqconform._rows import n_rows, row_sliceable, slice_rows
from uqconform._validation import (
    NonFiniteOutputError,
    check_bool,
    check_row_order,
    real_values,
    value_summary,
)
from uqconform._warnings import warn_user
from uqconform.base import _plain
from uqconform.regression.split import (
    _ZERO_SPREAD_FLOOR,
    SplitConformalRegressor,
)
from uqconform.scores.regression import SignedResidualScore

__all__ = ["ConformalPredictiveSystem"]

_SIDES = ("auto", "lower", "upper")


def _check_quantiles(quantiles: float | ArrayLike) -> tuple[NDArray, bool]:
    """Levels as a 1-D float array strictly inside (0, 1), and whether one number was given."""
    values = real_values(quantiles)  # also numbers in an object array, or fractions
    if values is None:  # strings, booleans, ragged nesting: not levels
        raise ValueError(f"`quantiles` must be numbers in (0, 1), got {value_summary(quantiles)}.")
    if values.ndim > 1 or values.size == 0:
        raise ValueError(
            f"`quantiles` must be a number or a 1-D sequence of numbers, got shape {values.shape}."
        )
    if not ((values > 0) & (values < 1)).all():  # NaN fails too
        raise ValueError(
            f"`quantiles` must lie strictly between 0 and 1, got {value_summary(quantiles)}."
        )
    return np.atleast_1d(values), values.ndim == 0


class ConformalPredictiveSystem(SplitConformalRegressor):
    """Split conformal predictive system: a predictive distribution for every test row.

    The calibration residuals ``r_i = y_i - y_hat_i`` (divided by the difficulty with
    ``normalized=True``) are placed around the row's prediction, ``C_i = y_hat(x) +
    r_i d(x)``, and give the conformal predictive distribution (Vovk et al., 2019)

    ``Q(y, tau) = (#{C_i < y} + tau (#{C_i = y} + 1)) / (n + 1)``, tau uniform on [0, 1].

    Its guarantee: under exchangeability, ``Q(y_true, tau)`` is exactly uniform on
    [0, 1] (the distribution is calibrated in probability), so ``P(y <= q)`` is the level
    of every quantile it reports, up to one step ``1 / (n + 1)`` (group-conditional with
    ``groups=``). It says nothing per row: a row's distribution is the residual
    distribution shifted (and, normalized, scaled), as good as the model and the
    difficulty estimate.

    Parameters
    ----------
    estimator : regressor, default=None
        Any scikit-learn regressor or Pipeline; ``None`` means ``LinearRegression()``.
        A fitted model can be calibrated without ``fit``.
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) of `predict_interval` (the central interval between the
        ``alpha / 2`` and ``1 - alpha / 2`` quantiles); each call may override it.
    normalized : bool, default=False
        Scale the residuals by a per-row difficulty (``difficulty_estimator``), so the
        distribution widens where the noise is larger.
    difficulty_estimator : regressor, default=None
        As for `SplitConformalRegressor` with ``conformity_score="normalized"``: trained
        in ``fit`` on out-of-fold absolute residuals (``None``: a clone of
        ``estimator``), or a fitted model whose ``predict_std`` (else
        ``predict(X, return_std=True)``, else ``predict``) is the spread. Spreads at or
        below a small floor are lifted to it (for a fitted model, 2.2e-308: calibration
        rows so lifted get scores of about 1e308 or infinite, which make the quantiles in
        the tails that hold them huge or infinite; calibration warns); a model whose
        spreads stay positive where there is noise (``KNeighborsRegressor``, a random
        forest) suits best. Weighting under covariate shift (``likelihood_ratio``) is
        not offered here. The out-of-fold residuals come from ``cv`` fresh copies of
        ``estimator``'s model, trained on the fit rows, also when ``estimator`` is a
        ``FrozenEstimator`` (the frozen model itself is never refitted; fit warns): pass
        a fitted ``difficulty_estimator`` to train nothing.
    cv : int or cross-validation splitter, default=5
        Folds for the out-of-fold residuals of the normalized system (one copy of the
        model trained per fold).
    batch_size : int, default=None
        Rows predicted at once (``None``: automatic).
    random_state : int, Generator or None, default=None
        Seeds the out-of-fold split, the models trained here, and the draws of ``tau``
        (``smooth=True``).
    n_jobs : int, default=None
        Folds fitted in parallel (joblib).

    Attributes
    ----------
    estimator_ : regressor
    difficulty_estimator_ : regressor
        Normalized system only.
    conformity_scores_ : ndarray of shape (n_calibration, 2)
        ``(y_hat - y, y - y_hat)`` per calibration row (divided by the difficulty when
        normalized); the second column holds the residuals of the distribution.
    n_calibration_ : int
    n_features_in_ : int

    See Also
    --------
    SplitConformalRegressor : intervals alone (absolute or normalized residuals).
    uqconform.scores.SignedResidualScore : the score behind the system.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> X, y = make_regression(n_samples=700, n_features=4, noise=10, random_state=0)
    >>> cps = ConformalPredictiveSystem().fit(X[:300], y[:300]).calibrate(X[300:600], y[300:600])
    >>> cps.predict_quantile(X[600:], [0.05, 0.5, 0.95]).shape
    (100, 3)
    >>> pit = cps.predict_cdf(X[600:], y[600:])  # about uniform on [0, 1]
    >>> # its mean is a Mann-Whitney statistic: mean 1/2, this sd (n = 300 calibration
    >>> # rows, m = 100 test rows); a two-sided z-test at 0.1%
    >>> n, m = 300, 100
    >>> sd = np.sqrt(n * (n + m + 1) / (12 * m * (n + 1) ** 2))
    >>> bool(abs(pit.mean() - 0.5) < 3.29 * sd)
    True
    >>> low, high = cps.predict_interval(X[600:], alpha=0.1).T
    >>> bool((low == cps.predict_quantile(X[600:], 0.05)).all())
    True
    """

    _calibration_params = ("normalized",)
    # the calibrate-time warning concerns predict_interval at the constructor's alpha only
    _unbounded_prediction = (
        "infinite intervals from predict_interval at that level (predict_cdf and the "
        "quantiles that n points can give are unaffected)"
    )
    # what the rows of a group unseen at calibration get (see `_group_index`): no sets
    _unseen_group_lead = "their predictive distributions carry no information:"
    _unseen_group_prediction = (
        "predict_cdf gives tau at every value (1/2 unless smooth=True), lower quantiles "
        "are -inf and upper ones +inf, intervals (and predict_set) the whole real line, "
        "p-values 1"
    )

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        alpha: float | ArrayLike = 0.1,
        normalized: bool = False,
        difficulty_estimator: BaseEstimator | None = None,
        cv: int | Any = 5,
        batch_size: int | None = None,
        random_state: int | np.random.Generator | None = None,
        n_jobs: int | None = None,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.normalized = normalized
        self.difficulty_estimator = difficulty_estimator
        self.cv = cv
        self.batch_size = batch_size
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _validate_params(self) -> None:
        check_bool(self.normalized, "normalized")
        super()._validate_params()

    def _score_object(self) -> SignedResidualScore:
        return _PredictiveScore(normalized=bool(self.normalized))

    def _lifted_spreads_effect(self, floor: float) -> str:
        """What rows whose spread was lifted to ``floor`` do to the distributions: their
        tails hold those rows' huge scores."""
        tiny = floor <= _ZERO_SPREAD_FLOOR  # a prefit model's floor: 2.2e-308
        scores = "about 1e308 or infinite" if tiny else "far above the others"
        ends = "huge (up to about 1e308) or infinite (-inf, +inf)" if tiny else "far out"
        return (
            "distributions of almost no width, and their scores (residual / spread) are "
            f"{scores}. Those scores take the extreme places of every row's distribution (up "
            "to that share of the rows, split between the two tails by the residuals' "
            "signs): the quantiles, and the ends of predict_interval, that fall there are "
            f"{ends}. (A linear or boosted model fitted to absolute residuals can "
            "extrapolate to zero or below.) "
        )

    def _difficulty_switch(self, on: bool) -> str:
        return f"normalized={on}"

    # ---- the distribution ---------------------------------------------------------------
    def predict_cdf(
        self,
        X: Any,
        y: ArrayLike,
        *,
        groups: ArrayLike | None = None,
        smooth: bool = False,
    ) -> NDArray:
        """The predictive distribution function ``Q(y)`` of each row at given values.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : float or array-like of shape (n_samples,), (g,), (1, g) or (n_samples, g)
            One value for every row (a number), one value per row (e.g. the true
            targets: the probability integral transform), ``g`` values for every row
            (``g != n_samples``; shape ``(1, g)`` whatever the batch size), or each row's
            own ``g`` values. Whether ``C_i < y`` is
            decided on the residual scale, as ``r_i < (y - y_hat) / d``: at a value
            within a few units in the last place of some ``C_i`` the step may fall on
            either side. Finite values only (NaN and +-inf are refused).
        groups : array-like of shape (n_samples,), optional
            Group labels, required if (and only if) calibration used groups. A group
            without calibration data has no information: ``Q = tau``.
        smooth : bool, default=False
            ``False``: the middle of each step, ``tau = 1/2`` (deterministic; the middle
            of the range the smoothed value is drawn from). ``True``: one ``tau`` drawn
            uniformly per row from ``random_state`` (shared by the row's values, so its
            grid of values is a distribution function); then ``Q(y_true)`` is exactly
            uniform (with an int ``random_state`` the draws depend on the rows of the
            call, as for `predict_pvalue`).

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, g)
            The first for a number or one value per row. Values in [0, 1],
            non-decreasing in ``y`` for every row. (crepes' unsmoothed
            value is the top of the step, ``tau = 1``.)

        Examples
        --------
        >>> from sklearn.datasets import make_regression
        >>> X, y = make_regression(n_samples=500, n_features=3, noise=5, random_state=1)
        >>> cps = ConformalPredictiveSystem().fit(X[:200], y[:200])
        >>> cps = cps.calibrate(X[200:400], y[200:400])
        >>> cdf = cps.predict_cdf(X[400:], [-100.0, 0.0, 100.0])
        >>> cdf.shape, bool((cdf[:, 0] <= cdf[:, 1]).all() and (cdf[:, 1] <= cdf[:, 2]).all())
        ((100, 3), True)
        """
        return self._candidate_pvalues(
            "predict_cdf",
            X,
            y,
            groups,
            smooth,
            name="y",
            number_for_every_row=True,
            component=0,  # y_hat - y: its p-value is #{C_i < y} (+ ties) over n + 1
            tie_fraction=0.5,
        )

    def predict_quantile(
        self,
        X: Any,
        quantiles: float | Sequence[float] | ArrayLike,
        *,
        groups: ArrayLike | None = None,
        side: str = "auto",
    ) -> NDArray:
        """Quantiles of each row's predictive distribution.

        With ``n`` calibration points, the ``q``-quantile is one of the values ``C_i``
        (rounded outward by a few units in the last place, so `predict_cdf` there reads
        half a step beyond ``k / (n + 1)`` on its side: above it for an upper quantile,
        below it for a lower one; where values ``C_i`` lie closer than about 1e-15 times
        the prediction, the outward rounding can pass the next one too, always outward):
        ``side="upper"`` takes the ``ceil((n + 1) q)``-th smallest, so that ``P(y <= it)
        >= q`` (``+inf`` beyond ``n``); ``side="lower"`` the ``floor((n + 1) q)``-th, so
        that ``P(y >= it) >= 1 - q`` (``-inf`` below 1). ``"auto"`` takes the lower one
        below the median and the upper one from it, each conservative towards its own
        tail: the quantiles ``alpha / 2`` and ``1 - alpha / 2`` are then exactly the ends
        of `predict_interval` at ``alpha``. As for `predict_pvalue`, ``(n + 1) q`` within
        1e-9 of a whole number is read as that number (``q = 0.3`` stays the 3rd of 9
        points whatever its last digit), which costs at most 1e-9 of coverage.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        quantiles : float or sequence of float
            Levels strictly between 0 and 1.
        groups : array-like of shape (n_samples,), optional
            Group labels, required if (and only if) calibration used groups (a group
            without calibration data gets infinite quantiles).
        side : {"auto", "lower", "upper"}, default="auto"

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, k)
            The first for a single level.

        Examples
        --------
        >>> from sklearn.datasets import make_regression
        >>> X, y = make_regression(n_samples=500, n_features=3, noise=5, random_state=1)
        >>> cps = ConformalPredictiveSystem().fit(X[:200], y[:200])
        >>> cps = cps.calibrate(X[200:400], y[200:400])
        >>> q = cps.predict_quantile(X[400:], [0.1, 0.5, 0.9])
        >>> bool((q[:, 0] <= q[:, 1]).all() and (q[:, 1] <= q[:, 2]).all())
        True
        """
        self._check_calibrated("predict_quantile")
        levels, scalar = _check_quantiles(quantiles)
        if not isinstance(side, str) or side not in _SIDES:
            raise ValueError(f"`side` must be one of {_SIDES}, got {side!r}.")
        upper = levels >= 0.5 if side == "auto" else np.full(levels.size, side == "upper")
        check_row_order(X, groups, "groups")
        X = row_sliceable(self._validate_X(X, reset=False))
        n = n_rows(X)
        group_index = self._group_index(groups, n)
        table = self._quantile_thresholds(levels, upper)
        score = self._score_object()
        out = np.empty((n, levels.size))
        step = self._batch_rows(n, levels.size)
        for start in range(0, n, step):  # a loop over batches of rows, for bounded memory
            stop = min(start + step, n)
            block = slice_rows(X, start, stop)
            self._check_nan(block)
            try:
                output = self._checked_output(block, stop - start)
                difficulty = self._difficulty(block)
                self._refuse_non_finite(output, difficulty, "rows of `X`")
            except NonFiniteOutputError as error:  # name the row of X, not of the batch
                raise error.renumbered(np.arange(start, stop), more_rows=stop < n) from None
            rows = table[:1] if group_index is None else table[group_index[start:stop]]
            for j in range(levels.size):  # a loop over levels, not rows
                ends = score.inverse(output, rows[:, :, j], difficulty)
                out[start:stop, j] = ends[:, 1 if upper[j] else 0]
        return out[:, 0] if scalar else out

    def _quantile_thresholds(self, levels: NDArray, upper: NDArray) -> NDArray:
        """Thresholds of shape ``(n_groups + 1, 2, k)``: for each group (the last one
        empty) and level, the threshold of the side that level reads (the other side
        holds +inf). The lower side's ``q``-quantile is ``y_hat - t d`` with ``t`` the
        conformal threshold of ``y_hat - y`` at miscoverage ``q``; the upper side's is
        ``y_hat + t d`` with ``t`` that of ``y - y_hat`` at ``1 - q``: the very
        thresholds `predict_interval` uses at ``alpha = 2 q`` (``2 (1 - q)``).

        The last table is kept for the next call at the same levels and sides
        (`_kept_for_calibration`; one-row calls recomputed every group's quantiles: 67 ms a
        row with 20,000 groups).
        """
        table = self._kept_for_calibration(
            "_last_quantile_table",
            (levels.tobytes(), upper.tobytes()),
            lambda: self._compute_quantile_table(self.conformity_scores_, levels, upper),
        )
        read = np.where(upper, table[:-1, 1], table[:-1, 0])
        too_few = [int(group) for group in np.flatnonzero(np.isinf(read).any(axis=1))]
        if too_few:
            read = np.where(upper, table[too_few, 1], table[too_few, 0])
            short = levels[np.isinf(read).any(axis=0)]
            where = (
                "the calibration set"
                if getattr(self, "groups_", None) is None
                else f"{len(too_few)} group(s) (e.g. {_plain(self.groups_[too_few[0]])!r})"
            )
            warn_user(
                f"Too few calibration points in {where} for the quantile(s) "
                f"{', '.join(repr(float(v)) for v in short)}: a q-quantile needs (n + 1) q >= 1 "
                "(lower side) and ceil((n + 1) q) <= n (upper side), so those quantiles are "
                "infinite.",
                UserWarning,
            )
        return table.copy()

    def _compute_quantile_table(self, scores: NDArray, levels: NDArray, upper: NDArray) -> NDArray:
        """`_quantile_thresholds`' table, computed."""
        n_groups = 1 if getattr(self, "groups_", None) is None else self.groups_.size
        table = np.full((n_groups + 1, 2, levels.size), np.inf)
        # one stratum per group (a regressor has no sub-strata); the strata at once
        lower = ~upper
        if lower.any():
            table[:-1, 0, lower] = self._stratum_quantiles(scores[:, 0], levels[lower])
        if upper.any():
            # 1 - q rounds to 1 below q = 2**-54: the rank is 1 there all the same
            miscoverage = np.minimum(1.0 - levels[upper], np.nextafter(1.0, 0.0))
            table[:-1, 1, upper] = self._stratum_quantiles(scores[:, 1], miscoverage)
        return table


class _PredictiveScore(SignedResidualScore):
    """`SignedResidualScore` whose inverse may overflow quietly: a spread lifted to the
    floor at calibration makes a score of about 1e308 (or infinite), and such a
    threshold times a test row's spread is infinite, which the calibration warning
    announced (numpy's bare "overflow encountered in multiply" would add nothing)."""

    def inverse(
        self, y_pred: NDArray, threshold: NDArray | float, difficulty: NDArray | None = None
    ) -> NDArray:
        with np.errstate(over="ignore"):
            return super().inverse(y_pred, threshold, difficulty)
