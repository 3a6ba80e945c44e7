"""Cross-conformal regression: jackknife+, CV+ and their min-max variants (Barber, Candes,
Ramdas and Tibshirani, 2021), in which every row both trains and calibrates.

``K`` models are trained, model ``k`` on every row outside fold ``k``; each row's score is
its absolute residual ``R_i`` under the model that did not see it. A test row ``x`` gets

* ``method="plus"`` (CV+; jackknife+ when every fold is one row): the
  ``floor(alpha (n + 1))``-th smallest of ``mu_{-k(i)}(x) - R_i`` and the
  ``ceil((1 - alpha)(n + 1))``-th smallest of ``mu_{-k(i)}(x) + R_i`` over the ``n`` rows,
  ``k(i)`` being row ``i``'s fold;
* ``method="minmax"``: ``min_k mu_{-k}(x) - q`` and ``max_k mu_{-k}(x) + q``, with ``q``
  the ``ceil((1 - alpha)(n + 1))``-th smallest ``R_i``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import LinearRegression

from uqconform._cross import CrossFitWrapper
from uqconform._rows import n_rows, take_rows
from uqconform._seeding import integer_seed
from uqconform._validation import (
    NonFiniteOutputError,
    check_int,
    check_regression_target,
    point_predictions,
    refuse_non_finite,
)
from uqconform._warnings import warn_user
from uqconform.quantiles import (
    _warn_too_few,
    check_call_alpha,
    check_miscoverage,
    conformal_quantile,
    conformal_rank,
)
from uqconform.scores.regression import outward_margin

__all__ = ["CrossConformalRegressor", "JackknifeAfterBootstrapRegressor"]

_METHODS = ("plus", "minmax")
# CV+ ends by a search over the folds' sorted scores (about K^2 log^2 n steps per row)
# when that is cheaper than selecting among all n shifted scores (n per row). The factor
# was timed on one quiet core (2,000 test rows, n from 1,000 to 50,000, K from 5 to 40):
# the search wins below K^2 log2(n)^2 / n of about 4 (n = 20,000, K = 10: 0.26 s against
# 0.69 s), so the switch sits there; it runs once per level where the selection serves
# every level at once, about twice its one-level time from two levels on (10 levels at
# n = 20,000, K = 10: 2.5 s against 2.3 s, 4 levels 1.0 s against 2.2 s in a review).
_FOLD_SEARCH_FACTOR = 0.25
_NON_FINITE = "the fold models predicted NaN or infinite values"
_INFINITE = "an infinite interval"


def _collapse_crossed(lower: NDArray, upper: NDArray, levels: NDArray) -> None:
    """Report a CV+ set that is empty (``lower > upper``, possible for ``alpha`` above 0.5,
    where the guarantee ``1 - 2 alpha`` is void) as a zero-width interval at the midpoint
    of its ends, kept inside the interval of the next wider level so that the levels of a
    call stay nested: such a level's point depends on the levels asked for with it, as
    the time-series intervals of several levels do. In place, ``(n_samples, k)``."""
    crossed = lower > upper
    if not crossed.any():
        return
    order = np.argsort(levels, kind="stable")  # the widest interval (smallest alpha) first
    for position, j in enumerate(order):  # a loop over levels
        point = (lower[:, j] + upper[:, j]) / 2
        if position:
            wider = order[position - 1]
            point = np.clip(point, lower[:, wider], upper[:, wider])
        lower[:, j] = np.where(crossed[:, j], point, lower[:, j])
        upper[:, j] = np.where(crossed[:, j], point, upper[:, j])


def _count_at_most(
    centre: NDArray, sorted_scores: NDArray, threshold: NDArray, sign: int
) -> NDArray:
    """Per row, how many ``centre + sign * S_j`` (rounded as computed) are at most
    ``threshold``, for ascending scores ``S``: a binary search on the exact bound, then
    corrected on the rounded values themselves (monotone in ``j``), so the count is that of
    the values the partition of all shifted scores would compare."""
    n = sorted_scores.size
    last = max(n - 1, 0)
    if sign < 0:  # centre - S_j does not increase with j: rows j >= first are at most t
        first = np.searchsorted(sorted_scores, centre - threshold, side="left")
        while True:
            back = (first > 0) & (centre - sorted_scores[np.maximum(first - 1, 0)] <= threshold)
            on = (first < n) & ~(centre - sorted_scores[np.minimum(first, last)] <= threshold)
            if not (back.any() or on.any()):
                return n - first
            first = first - back + on
    count = np.searchsorted(sorted_scores, threshold - centre, side="right")
    while True:  # centre + S_j does not decrease with j: rows j < count are at most t
        on = (count < n) & (centre + sorted_scores[np.minimum(count, last)] <= threshold)
        back = (count > 0) & ~(centre + sorted_scores[np.maximum(count - 1, 0)] <= threshold)
        if not (back.any() or on.any()):
            return count
        count = count + on - back


def _fold_order_statistic(
    predictions: NDArray, folds: list[NDArray], rank: int, sign: int
) -> NDArray:
    """Per row, the ``rank``-th smallest of ``mu_k(x) + sign * R_i`` over every fold ``k``
    and its rows' sorted scores ``folds[k]`` (``predictions``: ``(m, K)``), without the
    ``(m, n)`` array: in each fold, the smallest of its values with at least ``rank``
    values at or below it (a binary search, vectorised over rows), then the least of the
    folds' answers."""
    m = predictions.shape[0]
    best = np.full(m, np.inf)
    for k, scores in enumerate(folds):  # a loop over folds
        values = scores[::-1] if sign < 0 else scores  # this fold's values, ascending
        if not values.size:
            continue
        low, high = np.zeros(m, np.intp), np.full(m, values.size, np.intp)
        while (low < high).any():  # about log2(n / K) steps
            middle = (low + high) // 2
            threshold = predictions[:, k] + sign * values[np.minimum(middle, values.size - 1)]
            counts = sum(
                _count_at_most(predictions[:, f], folds[f], threshold, sign)
                for f in range(len(folds))
            )
            active, reached = low < high, counts >= rank
            high = np.where(active & reached, middle, high)
            low = np.where(active & ~reached, middle + 1, low)
        found = low < values.size
        end = predictions[:, k] + sign * values[np.minimum(low, values.size - 1)]
        best = np.where(found, np.minimum(best, end), best)
    return best


class CrossConformalRegressor(RegressorMixin, CrossFitWrapper):
    """Prediction intervals from models trained without one fold each: CV+ and jackknife+.

    Every row trains all models but one and calibrates the one that did not see it, so no
    data is set aside: on small data the intervals are narrower than split conformal
    prediction's, which trains on one part and calibrates on the other. The price is ``K``
    fits and, at prediction, ``K`` model calls per row and an order statistic of ``n``
    values per row (a partial sort, or a search of the folds' sorted scores when the
    folds are few and the rows many).

    Guarantees under exchangeability of the ``n`` training rows and the test row (Barber
    et al., 2021, for any model trained symmetrically in its rows):

    * ``method="plus"``: coverage at least ``1 - 2 alpha`` for jackknife+
      (``cv=LeaveOneOut()``) and at least ``1 - 2 alpha - min(2 (1 - 1/K) / (n/K + 1),
      (1 - K/n) / (K + 1))`` for CV+ with ``K`` equal folds. That is a worst-case floor:
      in practice coverage is close to ``1 - alpha``, and unstable models usually
      over-cover.
    * ``method="minmax"``: coverage at least ``1 - alpha``, with wider intervals.

    Parameters
    ----------
    estimator : regressor, default=None
        Any scikit-learn regressor or Pipeline (not fitted: it is cloned and fitted once per
        fold); ``None`` means ``LinearRegression()``.
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) in (0, 1); each prediction call may override it.
    method : {"plus", "minmax"}, default="plus"
    cv : int, cross-validation splitter or list of (train, test) pairs, default=5
        An int ``K >= 2``: ``KFold(K, shuffle=True)`` seeded by ``random_state``. A splitter
        (``KFold``, ``GroupKFold`` with ``groups`` in ``fit``, ``LeaveOneOut`` for
        jackknife+), or a list of ``(train, test)`` index pairs, must put every row in
        exactly one test fold and train on all the other rows: ``TimeSeriesSplit`` or
        ``ShuffleSplit`` are refused.
    batch_size : int, default=None
        Test rows whose ``(rows, n)`` matrices are built at once (``None``: automatic).
    n_jobs : int, default=None
        Folds fitted in parallel (joblib; a ``joblib.parallel_config`` applies).
    random_state : int, Generator or None, default=None
        Seeds the folds of an int ``cv`` and the fold models whose own ``random_state`` is
        None (each fold its own seed).
    verbose : bool, default=False
        Show a progress bar of the fold fits.

    Attributes
    ----------
    estimators_ : list of regressors
        The ``K`` fold models, model ``k`` trained without fold ``k``.
    fold_index_ : ndarray of shape (n_samples,)
        The fold of each training row (the model that did not see it).
    conformity_scores_ : ndarray of shape (n_samples,)
        Out-of-fold absolute residuals ``|y_i - mu_{-k(i)}(x_i)|``.
    n_calibration_ : int
        ``n``: every training row is a calibration row.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` had string column names.

    See Also
    --------
    SplitConformalRegressor : one model and held-out calibration rows: the better choice
        when data is plentiful (coverage at least ``1 - alpha`` in finite samples, not
        ``1 - 2 alpha``, and it costs one fit).

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> X, y = load_diabetes(return_X_y=True)
    >>> cp = CrossConformalRegressor(alpha=0.1, cv=10, random_state=0).fit(X[:400], y[:400])
    >>> intervals = cp.predict_interval(X[400:])
    >>> intervals.shape, len(cp.estimators_)
    ((42, 2), 10)
    >>> bool((intervals[:, 0] <= cp.predict(X[400:])).all())
    True
    """

    _split_alternative = "SplitConformalRegressor"
    _splitter_examples = "KFold, GroupKFold, LeaveOneOut"  # StratifiedKFold needs classes

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        alpha: float | ArrayLike = 0.1,
        method: str = "plus",
        cv: int | Any = 5,
        batch_size: int | None = None,
        n_jobs: int | None = None,
        random_state: int | np.random.Generator | None = None,
        verbose: bool = False,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.method = method
        self.cv = cv
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _default_estimator(self) -> BaseEstimator:
        return LinearRegression()

    def _check_target(self, y: ArrayLike, n: int, *, calibrating: bool) -> NDArray:
        return check_regression_target(y, n)

    def _validate_params(self) -> None:
        super()._validate_params()
        check_miscoverage(self.alpha, "alpha", owner=self)
        self._check_method()

    def _check_method(self) -> None:
        # read at prediction too (set_params after fit is allowed), so checked there
        if self.method not in _METHODS:
            raise ValueError(f"`method` must be one of {_METHODS}, got {self.method!r}.")

    def _model_output(self, model: Any, X: Any) -> NDArray:
        return point_predictions(model.predict(X))

    #: Who predicted, in the non-finite prediction error.
    _non_finite: str = _NON_FINITE

    def _store_scores(self, y: NDArray, outputs: NDArray, scored: NDArray, X: Any) -> None:
        try:
            refuse_non_finite(outputs, self._non_finite, "rows of `X`")
        except NonFiniteOutputError as error:  # positions among the scored rows: X's rows
            raise error.renumbered(scored) from None
        self.conformity_scores_ = np.abs(y - outputs)

    def _after_scoring(self) -> None:
        # warn now, next to the cause (prediction warns again for the levels it is given)
        levels = check_call_alpha(None, self.alpha)
        short = conformal_rank(self.n_calibration_, levels) > self.n_calibration_
        if short.any():  # only the levels that are short, as at prediction
            _warn_too_few(self.n_calibration_, levels[short], _INFINITE)

    def _centres(self, predictions: NDArray) -> NDArray:
        """``(rows, n)``: for each scored row ``i``, ``mu_{-i}(x)`` from the models'
        predictions ``(rows, K)``."""
        return predictions[:, self.fold_index_]

    def _fold_predictions(self, X: Any) -> NDArray:
        """``(n_samples, K)``: every fold model's prediction of every row."""
        predictions = self._fold_outputs(self._validate_X(X, reset=False))
        refuse_non_finite(predictions, self._non_finite, "rows of `X`")
        return predictions

    def predict(self, X: Any) -> NDArray:
        """The mean over the scored rows of their centres ``mu_{-i}(x)``: the fold models'
        mean, each weighted by its fold's share of the rows (for bootstrap models, by
        their mean out-of-sample weight).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        self._check_fitted("predict")
        return self._fold_predictions(X) @ self._model_shares()

    def predict_interval(self, X: Any, alpha: float | ArrayLike | None = None) -> NDArray:
        """Prediction intervals.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s); defaults to the constructor's ``alpha``.

        Returns
        -------
        ndarray of shape (n_samples, 2), or (n_samples, 2, k) for k levels
            Infinite ends where ``n`` rows are too few for the level (with a warning).
            Above ``alpha`` 0.5 a row's CV+ set can be empty (its guarantee ``1 - 2
            alpha`` is void): it is reported as a zero-width interval inside the next
            wider level's of the call, so it depends on the levels asked for with it.
        """
        self._check_fitted("predict_interval")
        self._check_method()
        value = self.alpha if alpha is None else alpha
        levels = check_call_alpha(alpha, self.alpha, X)
        predictions = self._fold_predictions(X)
        scores = self.conformity_scores_
        if self.method == "minmax":
            radius = conformal_quantile(scores, levels, warn=_INFINITE)  # warns if n is small
            low, high = self._extreme_centres(predictions)
            lower = low[:, None] - radius
            upper = high[:, None] + radius
        else:
            lower, upper = self._plus_ends(predictions, levels)
        # rounded outward: |end - prediction| <= R_max, so these bound the rounding errors
        size = np.abs(predictions).max(axis=1)[:, None] + scores.max()
        lower = lower - outward_margin(size, lower)
        upper = upper + outward_margin(size, upper)
        out = np.stack([lower, upper], axis=1)  # (n_samples, 2, k)
        return out[..., 0] if np.ndim(value) == 0 else out

    def _centre_batches(self, predictions: NDArray) -> Iterator[tuple[slice, NDArray]]:
        """Batches of test rows and their ``(b, n)`` centres, for bounded memory."""
        for rows in self._row_batches(predictions.shape[0], self.n_calibration_):
            yield rows, self._centres(predictions[rows])

    def _extreme_centres(self, predictions: NDArray) -> tuple[NDArray, NDArray]:
        """``min_i`` and ``max_i`` of ``mu_{-i}(x)`` per row (every fold scores a row)."""
        return predictions.min(axis=1), predictions.max(axis=1)

    def _plus_ends(self, predictions: NDArray, levels: NDArray) -> tuple[NDArray, NDArray]:
        """CV+ ends ``(n_samples, k)``: order statistics of ``mu_{-k(i)}(x) -/+ R_i``."""
        scores = self.conformity_scores_
        n = scores.size
        upper_rank = conformal_rank(n, levels)  # ceil((n + 1)(1 - alpha)), > n: +inf
        lower_rank = conformal_rank(n, levels, kind="conformity")  # floor((n + 1) alpha), 0: -inf
        if (upper_rank > n).any():
            _warn_too_few(n, levels[upper_rank > n], _INFINITE)
        upper_kth = np.minimum(upper_rank, n) - 1
        lower_kth = np.maximum(lower_rank, 1) - 1
        m = predictions.shape[0]
        lower = np.empty((m, levels.size))
        upper = np.empty((m, levels.size))
        if self._searches_folds(predictions.shape[1], levels.size):
            folds = [np.sort(scores[self.fold_index_ == k]) for k in range(predictions.shape[1])]
            for j in range(levels.size):  # a loop over levels
                lower[:, j] = _fold_order_statistic(predictions, folds, lower_kth[j] + 1, -1)
                upper[:, j] = _fold_order_statistic(predictions, folds, upper_kth[j] + 1, 1)
        else:
            for rows, centre in self._centre_batches(predictions):
                below = np.partition(centre - scores, np.unique(lower_kth), axis=1)
                above = np.partition(centre + scores, np.unique(upper_kth), axis=1)
                lower[rows] = below[:, lower_kth]
                upper[rows] = above[:, upper_kth]
        lower[:, lower_rank < 1] = -np.inf
        upper[:, upper_rank > n] = np.inf
        _collapse_crossed(lower, upper, levels)
        return lower, upper

    def _searches_folds(self, n_folds: int, n_levels: int = 1) -> bool:
        """Whether the ends come from the folds' sorted scores (few folds, many rows): the
        search runs once per level, the selection about twice as long from two levels on
        and then about flat (one pass for every level)."""
        n = self.conformity_scores_.size
        search = n_levels * n_folds**2 * np.log2(max(n, 2)) ** 2 * _FOLD_SEARCH_FACTOR
        return search < min(n_levels, 2) * n

    def predict_set(self, X: Any, alpha: float | ArrayLike | None = None) -> NDArray:
        """The native prediction set of a scalar regressor: `predict_interval` (see it).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s); defaults to the constructor's ``alpha``.

        Returns
        -------
        ndarray of shape (n_samples, 2), or (n_samples, 2, k) for k levels
            Lower and upper bounds, as `predict_interval` returns them.
        """
        return self.predict_interval(X, alpha=alpha)


class JackknifeAfterBootstrapRegressor(CrossConformalRegressor):
    """Jackknife+-after-bootstrap (Kim, Xu and Barber, 2020): the jackknife+ of an
    ensemble of models fitted on bootstrap samples, at the cost of the ensemble alone.

    ``B`` models are fitted on bootstrap samples of the ``n`` rows. Row ``i``'s
    out-of-sample prediction ``mu_{-i}`` is the mean of the models whose sample left it
    out, its score ``R_i = |y_i - mu_{-i}(x_i)|``, and a test row gets the
    ``floor(alpha (n + 1))``-th smallest of ``mu_{-i}(x) - R_i`` and the
    ``ceil((1 - alpha)(n + 1))``-th smallest of ``mu_{-i}(x) + R_i`` (``method="plus"``),
    or ``min_i mu_{-i}(x) - q`` and ``max_i mu_{-i}(x) + q`` (``"minmax"``, ``q`` the
    ``ceil((1 - alpha)(n + 1))``-th smallest ``R_i``).

    Guarantee: coverage at least ``1 - 2 alpha`` under exchangeability, for a number of
    models drawn as ``Binomial(B', (1 - 1/(n + 1))^n)`` (Kim et al.); with a fixed ``B``,
    as here and in every implementation we know of, it holds approximately. In practice
    coverage is about or above ``1 - alpha``: somewhat above with about 20 training rows,
    by an amount that depends on the model, and about nominal with 40 for linear and k-NN
    models. In a review (``B = 30``, ``1 - alpha = 0.9``, 600 simulated data sets with 20
    test rows each) it was 0.915, 0.911 and 0.925 for linear, 5-NN and depth-4 tree models
    with 20 rows, and 0.897, 0.902 and 0.913 with 40 (standard errors about 0.003). Rows
    that every bootstrap sample holds (rare beyond 20 models: a share ``0.632^B``) have
    no out-of-sample prediction and are left out of the scores, with a warning.

    Parameters
    ----------
    estimator : regressor, default=None
        Any scikit-learn regressor or Pipeline (cloned and fitted once per sample);
        ``None`` means ``LinearRegression()``.
    alpha : float or sequence of float, default=0.1
    method : {"plus", "minmax"}, default="plus"
    n_bootstrap : int, default=30
        Number of bootstrap models ``B`` (each on ``n`` rows drawn with replacement).
    batch_size : int, default=None
        Test rows whose ``(rows, n)`` matrices are built at once (``None``: automatic).
    n_jobs : int, default=None
        Models fitted in parallel (joblib).
    random_state : int, Generator or None, default=None
        Seeds the bootstrap samples and the models whose own ``random_state`` is None.
    verbose : bool, default=False

    Attributes
    ----------
    estimators_ : list of regressors
        The ``B`` bootstrap models.
    oob_weights_ : ndarray of shape (n_scored, n_bootstrap)
        Row ``i``'s weight on model ``b`` in ``mu_{-i}``: ``1 / m_i`` for the ``m_i``
        models whose sample left row ``i`` out, else 0.
    scored_rows_ : ndarray of int
        The rows of ``X`` with an out-of-sample prediction (all but those every sample
        held), in the order of ``conformity_scores_``.
    conformity_scores_ : ndarray of shape (n_scored,)
    n_calibration_ : int

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> X, y = load_diabetes(return_X_y=True)
    >>> jab = JackknifeAfterBootstrapRegressor(DecisionTreeRegressor(max_depth=4),
    ...                                        n_bootstrap=20, random_state=0)
    >>> jab.fit(X[:400], y[:400]).predict_interval(X[400:]).shape
    (42, 2)
    """

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        alpha: float | ArrayLike = 0.1,
        method: str = "plus",
        n_bootstrap: int = 30,
        batch_size: int | None = None,
        n_jobs: int | None = None,
        random_state: int | np.random.Generator | None = None,
        verbose: bool = False,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.method = method
        self.n_bootstrap = n_bootstrap
        self.batch_size = batch_size
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    _fit_params = ("estimator", "n_bootstrap", "random_state")
    _non_finite = "the bootstrap models predicted NaN or infinite values"
    _models_description = "bootstrap models"
    _scoring_scheme = (
        "trains models on bootstrap samples and scores every row with the models whose "
        "sample did not draw it"
    )

    def _check_resampling(self) -> None:
        check_int(self.n_bootstrap, "n_bootstrap", low=2)

    def _splits(self, X: Any, y: NDArray, groups: ArrayLike | None) -> list[tuple]:
        """``B`` bootstrap samples (with their repeats) and the rows each leaves out."""
        if groups is not None:
            raise ValueError(
                "JackknifeAfterBootstrapRegressor takes no `groups`: its bootstrap samples "
                "draw rows, not groups (`groups` sets the folds of CrossConformalRegressor "
                "with a GroupKFold); leave it out."
            )
        n = y.shape[0]
        seed = integer_seed(self.random_state)  # a stream of its own: [seed, 1]
        rng = np.random.default_rng(None if seed is None else [seed, 1])
        samples = rng.integers(0, n, size=(int(self.n_bootstrap), n))
        seen = np.zeros((samples.shape[0], n), dtype=bool)
        np.put_along_axis(seen, samples, True, axis=1)
        return [
            (np.sort(sample), np.flatnonzero(~held))
            for sample, held in zip(samples, seen, strict=True)
        ]

    def _out_of_sample(
        self, models: list[Any], splits: list[tuple[NDArray, NDArray]], X: Any
    ) -> tuple[NDArray, NDArray]:
        n = n_rows(X)
        left_out = np.zeros((n, len(models)), dtype=bool)
        for b, (_, rows) in enumerate(splits):  # a loop over models
            left_out[rows, b] = True
        counts = left_out.sum(axis=1)
        scored = np.flatnonzero(counts > 0)
        if not scored.size:
            samples = f"{n} sample" + ("" if n == 1 else "s")
            raise ValueError(
                f"X has {samples}, each drawn into every bootstrap sample, so none has an "
                "out-of-sample prediction: use more rows or models (`n_bootstrap`)."
            )
        if scored.size < n:
            warn_user(
                f"{n - scored.size} of {n} rows were drawn into every one of the "
                f"{len(models)} bootstrap samples: they have no out-of-sample prediction "
                "and are left out of the scores. Use more models (`n_bootstrap`).",
                UserWarning,
            )
        weights = left_out[scored] / counts[scored, None]
        predictions = np.zeros((n, len(models)))  # weight 0 where a model saw the row
        for b, (model, (_, rows)) in enumerate(zip(models, splits, strict=True)):
            if rows.size:  # a sample that drew every row leaves none out of bag
                out_of_bag = take_rows(X, rows)
                predictions[rows, b] = self._checked_model_output(model, out_of_bag, "rows")
        predictions = predictions[scored]
        self.oob_weights_ = weights
        self.scored_rows_ = scored
        return (predictions * weights).sum(axis=1), scored

    def _centres(self, predictions: NDArray) -> NDArray:
        return predictions @ self.oob_weights_.T

    def _searches_folds(self, n_folds: int, n_levels: int = 1) -> bool:
        return False  # each row's centre is a mean over models: no fold's sorted scores

    def _model_shares(self) -> NDArray:
        return self.oob_weights_.mean(axis=0)

    def _extreme_centres(self, predictions: NDArray) -> tuple[NDArray, NDArray]:
        low, high = np.empty(predictions.shape[0]), np.empty(predictions.shape[0])
        for rows, centres in self._centre_batches(predictions):
            low[rows], high[rows] = centres.min(axis=1), centres.max(axis=1)
        return low, high
