"""Full conformal prediction for ridge regression: the exact ridge confidence machine.

Full (transductive) conformal prediction refits the model with the test point and every
candidate label and keeps the labels whose p-value exceeds ``alpha``. It uses all the data
for fitting (no calibration split) and is valid in finite samples. For ridge regression the
refits have a closed form, so the set is computed exactly (`uqconform.regression.crr`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.utils.validation import check_is_fitted

from uqconform._rows import n_rows, slice_rows
from uqconform._validation import (
    candidate_grid,
    check_bool,
    check_features,
    check_int,
    check_regression_target,
    check_row_order,
    check_wrapper_fitted,
    float_rows_without_nan,
    no_calibrate_step,
    refuse_model_class,
    refuse_non_numeric_features,
    refuse_sparse_columns,
)
from uqconform._version import VersionedState
from uqconform._warnings import warn_user
from uqconform.base import (
    ExplainsCallMistakes,
    RefusesNestedDefaultParams,
    check_calibration_settings,
    keeps_state_on_error,
    record_calibration_settings,
    remember_training_rows,
)
from uqconform.quantiles import check_alpha, check_call_alpha, check_miscoverage
from uqconform.regression.crr import (
    SCORES,
    LinearConfidenceMachine,
    Score,
    exact_intervals,
    exact_union,
    fast_intervals,
    label_tie_size,
    p_values,
    residual_coefficients,
)

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = ["FullConformalRidge"]

# Test points processed at once: bounds the (m, n) coefficient arrays to ~2**22 cells.
_CELLS_PER_BATCH = 2**19
# Test rows whose features are computed at once: bounds the (m, p) feature array (a
# linearised network's Jacobian) to 2**22 cells (32 MB).
_FEATURE_CELLS = 2**22


def _empty_at_centre(intervals: NDArray, predictions: NDArray) -> NDArray:
    """Report an empty set (``nan`` bounds) as the zero-width interval at the prediction,
    with a warning: the label equal to the prediction always conforms (its augmented
    residual is 0), so only a numerical failure empties a set.

    Parameters
    ----------
    intervals : ndarray of shape (m, 2, k)
    predictions : ndarray of shape (m,)

    Returns
    -------
    ndarray of shape (m, 2, k)
        ``intervals``, changed in place.
    """
    empty = np.isnan(intervals).any(axis=1)
    if empty.any():
        warn_user(
            f"{int(empty.any(axis=1).sum())} test row(s) got an empty full-CP set, which "
            "exact arithmetic never gives (the label equal to the prediction always "
            "conforms): a numerical failure, e.g. features or labels near the limits of "
            "floating point. Reported as the zero-width interval at the prediction, "
            "which does not cover.",
            RuntimeWarning,
        )
        centre = np.broadcast_to(predictions[:, None], empty.shape)
        intervals[:, 0, :] = np.where(empty, centre, intervals[:, 0, :])
        intervals[:, 1, :] = np.where(empty, centre, intervals[:, 1, :])
    return intervals


class FullConformalMixin:
    """Prediction side shared by the full-CP regressors.

    A subclass sets ``machine_`` (a fitted `LinearConfidenceMachine`) and
    ``training_residuals_``, and implements ``_test_input(X, method)`` (the checked test
    input; ``method`` names the caller in a before-fit error) and
    ``_test_features(X) -> (features, predictions)`` for rows of a checked input, and
    sets ``_label_size`` (the training labels' root mean square, the least scale of
    the tie margin; 0 in models pickled before it existed: the margin of the residuals).
    """

    _label_size: float = 0.0

    if TYPE_CHECKING:  # what a subclass provides (parameters, fitted state, test input)
        alpha: float | ArrayLike
        conformity_score: str
        algorithm: str
        batch_size: int | None
        machine_: LinearConfidenceMachine
        training_residuals_: NDArray

        def _test_input(self, X: Any, method: str) -> Any: ...

        def _test_features(self, X: Any) -> tuple[NDArray, NDArray]: ...

    def _validate_full_params(self, warn_level: bool = True) -> None:
        """Check the settings; ``warn_level=False`` (at prediction, where a call may give
        its own level) checks ``alpha`` without the warning about a coverage level."""
        (check_miscoverage if warn_level else check_alpha)(self.alpha, "alpha", owner=self)
        if self.conformity_score not in SCORES:
            raise ValueError(
                f"Unknown `conformity_score` {self.conformity_score!r}: use one of {list(SCORES)}."
            )
        if self.algorithm not in ("exact", "fast"):
            raise ValueError(f"`algorithm` must be 'exact' or 'fast', got {self.algorithm!r}.")
        check_int(self.batch_size, "batch_size", allow_none=True)

    def _feature_step(self) -> int:
        """Test rows whose features are computed at once (``batch_size``, or automatic)."""
        return self.batch_size or max(1, _FEATURE_CELLS // max(self.machine_.n_features, 1))

    def _feature_batches(
        self, X: Any, step: int | None = None
    ) -> Iterator[tuple[slice, NDArray, NDArray]]:
        """Yield ``(rows, features, predictions)`` for consecutive batches of rows.

        Parameters
        ----------
        X : array-like
            Test input checked by ``_test_input``.
        step : int, optional
            Rows per batch; defaults to ``_feature_step()``.

        Yields
        ------
        rows : slice
        features : ndarray of shape (rows, p)
        predictions : ndarray of shape (rows,)

        A warning of the feature map (a pipeline's transform, say) comes from each batch;
        Python's default filter shows it once.
        """
        step = step or self._feature_step()
        for start in range(0, n_rows(X), step):  # a loop over batches of rows
            features, predictions = self._test_features(slice_rows(X, start, start + step))
            yield slice(start, start + step), features, predictions
            del features, predictions  # not held while the next batch is computed

    def _map_feature_batches(
        self, X: Any, function: Callable[[NDArray, NDArray], NDArray]
    ) -> NDArray:
        """``function(features, predictions)`` of every batch of rows, concatenated.

        Parameters
        ----------
        X : array-like
            Test input checked by ``_test_input``.
        function : callable
            Maps the features (rows, p) and predictions (rows,) of a batch to (rows, ...).

        Returns
        -------
        ndarray
        """
        pieces = []
        for _, features, predictions in self._feature_batches(X):  # a loop over batches
            pieces.append(function(features, predictions))
            del features, predictions  # not held while the next batch is computed
        return np.concatenate(pieces)

    def _coefficient_batches(
        self, X: Any, width: int = 1
    ) -> Iterator[tuple[slice, NDArray, NDArray, NDArray]]:
        """Yield ``(rows, predictions, a, b)`` for batches of test points (``width``
        candidates each) of a test input checked by ``_test_input``; ``a, b`` are the
        coefficients of the residuals in ``y - prediction`` (centred)."""
        check_is_fitted(self, "machine_")
        self._validate_full_params(warn_level=False)
        n = self.machine_.n_samples
        # Bounded by the feature arrays (rows, p) and the coefficient arrays (rows, n * width).
        step = self.batch_size or min(
            self._feature_step(), max(1, _CELLS_PER_BATCH // max(n * width, 1))
        )
        outside = 0
        for rows, features, predictions in self._feature_batches(X, step):
            h_test, h_cross = self.machine_.test_leverages(features)
            a, b = residual_coefficients(
                self.training_residuals_,
                predictions,
                self.machine_.leverage,
                h_test,
                h_cross,
                cast(Score, self.conformity_score),  # checked by _validate_full_params
                centred=True,  # in y - prediction: the labels' offset leaves the sets alone
            )
            # Only when the regularised Gram matrix was singular: a test point outside the
            # span of the training features, in a direction no penalty pins, is
            # interpolated whatever its label, every residual is zero and every label gets
            # p-value 1 (the pseudo-inverse's formulas see only its part inside the span).
            # A merely ill-conditioned system keeps its exact sets.
            unpinned = self.machine_.unpinned(features)
            a[unpinned], b[unpinned] = 0.0, 0.0
            outside += int(unpinned.sum())
            yield rows, predictions, a, b
        if outside:  # one warning per call, counting the rows of every batch
            warn_user(
                f"{outside} test rows lie outside the span of the training "
                "features in a direction no penalty pins (the regularised Gram matrix "
                "is singular: more parameters than rows, or duplicated features, and no "
                "ridge): the fit interpolates them whatever their label, so their set is "
                "the whole line. Add a penalty (Ridge, a prior precision) or more rows.",
                UserWarning,
            )

    def predict_interval(self, X: Any, alpha: float | ArrayLike | None = None) -> NDArray:
        """Convex hull of the full conformal prediction set.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s); defaults to the constructor's ``alpha``.

        Returns
        -------
        ndarray of shape (n_samples, 2), or (n_samples, 2, k) for k levels
            ``-inf``/``inf`` where the set is unbounded (e.g. ``alpha < 1/(n + 1)``).
        """
        value = self.alpha if alpha is None else alpha
        alphas = check_call_alpha(alpha, self.alpha, X)
        algorithm = exact_intervals if self.algorithm == "exact" else fast_intervals
        pieces = []
        batches = self._coefficient_batches(self._test_input(X, "predict_interval"))
        for index, (_, predictions, a, b) in enumerate(batches):  # a loop over batches
            size = self._label_size
            centred = algorithm(a, b, alphas, index == 0, size) + predictions[:, None, None]
            pieces.append(_empty_at_centre(centred, predictions))
        out = np.concatenate(pieces, axis=0)
        return out[..., 0] if np.ndim(value) == 0 else out

    def predict_set(
        self, X: Any, alpha: float | ArrayLike | None = None, union: bool = False
    ) -> NDArray | list[NDArray]:
        """The full-CP set: its hull, or with ``union=True`` the exact union of intervals.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s); by default the constructor's. ``union=True`` takes one.
        union : bool, default=False
            Return, per row, the disjoint closed intervals whose union is the set (exact
            algorithm, whatever ``algorithm`` says).

        Returns
        -------
        ndarray of shape (n_samples, 2) or (n_samples, 2, k), or list of ndarray of shape (r_i, 2)
            The hull as `predict_interval` gives it (a trailing level axis for several
            levels); with ``union=True`` the intervals of each row.
        """
        check_wrapper_fitted(self, "machine_", "predict_set")  # ACP checked its own first
        check_bool(union, "union")
        if not union:
            return self.predict_interval(X, alpha=alpha)
        levels = check_call_alpha(alpha, self.alpha, X)
        if levels.size > 1:  # also when the constructor's alpha is a sequence
            raise ValueError(
                "`alpha` must be a single level when union=True: pass one to this call, "
                "e.g. predict_set(X, alpha=0.1, union=True), once per level."
            )
        level = float(levels[0])
        result: list[NDArray] = []
        batches = self._coefficient_batches(self._test_input(X, "predict_set"))
        for index, (_, predictions, a, b) in enumerate(batches):
            pieces = exact_union(a, b, level, index == 0, self._label_size)
            result.extend(p + c for p, c in zip(pieces, predictions, strict=True))
        return result

    def predict_pvalue(self, X: Any, y_candidates: ArrayLike) -> NDArray:
        """Full-CP p-values of candidate labels.

        The exact p-values, also with ``algorithm="fast"``: the fast intervals are
        another valid set, not ``{y : p(y) > alpha}``, so a label just inside one can have
        ``p(y) <= alpha``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y_candidates : array-like of shape (n_samples,), (g,), (1, g) or (n_samples, g)
            Candidate label(s) per row (a 1-D array of length ``g`` != n_samples, or an
            array of shape ``(1, g)`` whatever the batch size, is used for every row).

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, g)
        """
        check_row_order(X, y_candidates, "y_candidates")  # a Series in another row order
        X = self._test_input(X, "predict_pvalue")
        grid, single = candidate_grid(y_candidates, n_rows(X))
        out = np.empty(grid.shape)
        for rows, predictions, a, b in self._coefficient_batches(X, width=grid.shape[1]):
            out[rows] = p_values(a, b, grid[rows] - predictions[:, None], self._label_size)
        return out[:, 0] if single else out


class FullConformalRidge(
    ExplainsCallMistakes,
    RefusesNestedDefaultParams,
    VersionedState,
    FullConformalMixin,
    RegressorMixin,
    BaseEstimator,
):
    """Exact full conformal prediction for ridge regression (the ridge confidence machine).

    Every training point is used for fitting and none is held out; the set is exactly the
    one obtained by refitting ridge regression with the test point and each candidate
    label, up to a tie margin (1e-10 of the residuals' scale, at least 1e-13 of the
    labels' size) that widens it. Against exact-rational refits in reviews the ends moved
    by at most about 2e-10 of the set's width for labels near 0 (3e-9 with features in
    units of 1e3); the error grows as a training row's leverage approaches 1 (up to 2e-5 of
    the width with one row's features 1e6 times the others'). Nearly collinear columns
    (condition number 1e6 and above: the Gram matrix's squared condition reaches the
    singularity threshold) leave exactness: a direction the data barely pin is dropped,
    and 65 to 133 of 240 p-values differed from exact in a review (coverage as exact
    full CP's). With an intercept the labels are centred (exact), but the tie margin is
    at least 16 units in the last place (ulps) of the largest label, in residual units:
    each end moves outward (wider) by half of it over the rate at which the two residuals
    crossing there part as the label moves (``|b_{N+1} -+ b_i|`` on the method page),
    which can be far below 1 on small data. With labels shifted by 1e12 (``Ridge`` with an
    intercept, alpha 0.1 and 0.3, 60 problems in a review) the ends moved by at most 19
    ulps of the labels at n = 30 and 100, but by up to 20,925 ulps (at most 0.92% of the
    width) at n = 10; with more columns than rows (n = 4, p = 8, labels near 1e12) by up to
    6e-5 of the width. Outward only: coverage holds. Without an intercept the margin grows
    with the labels' distance from 0 (1e-13 of their root mean square).
    Finite-sample marginal coverage ``>= 1 - alpha`` under exchangeability.

    Parameters
    ----------
    estimator : Ridge or LinearRegression, default=None
        Gives the ridge strength (``alpha``) and ``fit_intercept`` (an unpenalised
        intercept); ``None`` means ``Ridge(alpha=1.0)``.
    alpha : float or sequence of float, default=0.1
        Miscoverage level(s) in (0, 1). An ``(n + 1) * alpha`` within 1e-9 of a whole
        number ``k`` counts as ``k`` (``alpha = 0.1 - 1e-12`` with n = 99 gives the set of
        0.1, without the labels whose p-value is exactly ``k / (n + 1)``); coverage then
        falls short of ``1 - alpha`` by less than ``1e-9 / (n + 1)``.
    conformity_score : {"standard", "studentized", "deleted"}, default="standard"
        Absolute residuals, divided by ``sqrt(1 - h)`` or by ``1 - h`` (``h``: leverage in
        the augmented fit); the rescaled scores adapt the width to the test point's leverage.
    algorithm : {"exact", "fast"}, default="exact"
        ``"exact"``: Vovk's O(n log n) sweep per test point (vectorised). ``"fast"``: the
        Burnaev-Vovk pair of one-sided machines at ``alpha/2``, for large n: another valid
        set, about as wide on average with thousands of points (per point narrower or
        wider than the exact one); with few points never less conservative (when
        ``floor(alpha (n + 1))`` is odd it covers ``1/(n + 1)`` more and is wider, about
        8% at n = 50 and 1% at n = 250 in a review; otherwise it covers the same), and
        infinite below ``2/alpha - 1`` training points where the exact set needs
        ``1/alpha - 1``. A training point whose residual moves with the label faster than
        the test point's (a test row of high leverage) counts as conforming on both sides,
        so the interval then holds the pair's set and can be wider (conservative).
    batch_size : int, default=None
        Test points processed at once (``None``: automatic, bounded memory).

    Attributes
    ----------
    estimator_ : Ridge or LinearRegression
        The fit on all training data (a clone of ``estimator``). `predict` uses the
        confidence machine's coefficients, the same fit except where no penalty pins a
        direction
        (``LinearRegression`` with more features than rows, duplicated columns): there
        the machine takes the solution of least norm in units of each column's scale,
        which predicts like scikit-learn's minimum-norm one on rows in the span of the
        training rows and differs outside it (the sets are unaffected: such test rows
        get the whole line).
    machine_ : LinearConfidenceMachine
    training_residuals_ : ndarray of shape (n_samples,)
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = X @ [1.0, 2.0, 0.0] + rng.normal(size=200)
    >>> model = FullConformalRidge(alpha=0.1).fit(X[:150], y[:150])
    >>> intervals = model.predict_interval(X[150:])
    >>> intervals.shape
    (50, 2)
    """

    _fit_params = ("estimator",)  # the machine is this model's; a new one needs a new fit

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        alpha: float | ArrayLike = 0.1,
        conformity_score: str = "standard",
        algorithm: str = "exact",
        batch_size: int | None = None,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.conformity_score = conformity_score
        self.algorithm = algorithm
        self.batch_size = batch_size

    def _ridge(self) -> BaseEstimator:
        model = Ridge(alpha=1.0) if self.estimator is None else self.estimator
        refuse_model_class(model, self)
        if isinstance(model, FrozenEstimator):
            raise TypeError(
                "FullConformalRidge refits ridge regression on the training data with every "
                "candidate label (that is full conformal prediction), so a FrozenEstimator "
                "cannot be kept as fitted: pass the unfitted Ridge or LinearRegression, or use "
                "SplitConformalRegressor for a model fitted once."
            )
        if not isinstance(model, (Ridge, LinearRegression)):
            raise TypeError(
                "FullConformalRidge needs `estimator` to be sklearn.linear_model.Ridge or "
                f"LinearRegression, got {type(model).__name__}; for other models (also a "
                "Pipeline with a scaler, RidgeCV or a GridSearchCV over Ridge) use "
                "ApproximateFullConformalRegressor (approximate full CP: a scaler or a tuned "
                "strength is held as fitted on the training rows)."
            )
        if getattr(model, "positive", False):
            raise ValueError(
                "FullConformalRidge needs an unconstrained least-squares fit: `positive=True` "
                "is not a linear function of y, so the ridge confidence machine does not apply."
            )
        return model

    def _features(self, X: NDArray) -> NDArray:
        if self.estimator_.fit_intercept:
            # Centred by the training means: with the intercept unpenalised this changes
            # no fit, prediction or leverage, and keeps the Gram matrix well conditioned
            # for features far from 0 (at 1e6 from 0 with unit spread, the uncentred
            # matrix was taken for singular and rows got the whole line).
            means = self.__dict__.get("_feature_means", 0.0)  # (older pickles: uncentred)
            return np.column_stack([X - means, np.ones(X.shape[0])])
        return X

    @property
    def calibrate(self) -> Any:
        """Not a step of full conformal prediction: reading it raises an
        ``AttributeError`` that says so (``hasattr(model, "calibrate")`` stays false)."""
        raise no_calibrate_step(
            self,
            "full conformal prediction uses every row of `fit(X, y)` (the ridge is refitted "
            "with each candidate label)",
            "SplitConformalRegressor",
        )

    def _default_model_text(self) -> str:
        return "Ridge(alpha=1.0)"

    @keeps_state_on_error
    def fit(self, X: ArrayLike, y: ArrayLike, **fit_params: Any) -> Self:
        """Fit ridge regression on all the data and prepare the confidence machine.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        **fit_params : dict
            None is accepted: ``sample_weight`` is refused (the confidence machine is
            that of an unweighted ridge fit), with a message saying so.

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        if fit_params.pop("groups", None) is not None:  # (groups=None: nothing given)
            raise ValueError(
                "`groups` is not supported: full conformal prediction here is marginal "
                "only. For group-conditional (Mondrian) intervals use "
                "SplitConformalRegressor, with the groups given to `calibrate(X, y, "
                "groups=...)` and `predict_interval(X, groups=...)`."
            )
        if fit_params:
            raise ValueError(
                f"fit parameters {sorted(fit_params)} are not supported: the confidence "
                "machine is that of an unweighted ridge fit on every row, so weights (or "
                "other fit parameters) would give a set that is not full conformal "
                "prediction of the model fitted. For weighted rows use "
                "SplitConformalRegressor or CrossConformalRegressor, which pass "
                "`sample_weight` to the model."
            )
        self._validate_full_params()
        model = self._ridge()
        X = self._checked_X(X, reset=True)
        y = check_regression_target(y, X.shape[0])
        value = getattr(model, "alpha", 0.0)
        if np.ndim(value) != 0:
            raise ValueError(
                f"The ridge strength `estimator.alpha` must be one number (one penalty for "
                f"every coefficient), got an array of shape {np.shape(value)}."
            )
        strength = float(value)
        if not np.isfinite(strength) or strength < 0:
            raise ValueError(
                "The ridge strength `estimator.alpha` must be a finite number >= 0, got "
                f"{strength}."
            )
        self.estimator_ = clone(model).fit(X, y)
        self._feature_means = X.mean(axis=0)
        features = self._features(X)
        penalty = np.full(features.shape[1], strength)
        if self.estimator_.fit_intercept:
            penalty[-1] = 0.0  # the intercept is not penalised, as in scikit-learn
        self.machine_ = LinearConfidenceMachine(features, penalty)
        # With an intercept, labels centred by their mean: an exact reparametrisation (the
        # intercept is unpenalised) that keeps the residuals' rounding, and the tie margin
        # that follows it, at the labels' spread, not their distance from 0 (labels 1e13
        # from 0 widened the sets by a third).
        offset = float(np.mean(y)) if self.estimator_.fit_intercept else 0.0
        self._label_offset = offset if np.isfinite(offset) else 0.0
        centred = y - self._label_offset
        self.coef_ = self.machine_.solve(centred)
        self.training_residuals_ = centred - features @ self.coef_
        self._label_size = label_tie_size(y, self._label_offset)  # the residuals' rounding
        record_calibration_settings(self, step="fit")
        remember_training_rows(self, X, y)  # (evaluate warns when given them as test rows)
        return self

    def _checked_X(self, X: Any, *, reset: bool) -> NDArray:
        """``X`` as C-ordered floats (a DataFrame and its array give the same bits); the
        features' number and names are compared once, by `check_features`; columns that
        are not numbers (text, categories, dates) are refused by name."""
        X = check_features(self, X, reset=reset)
        why = "refits a ridge regression on the features"
        refuse_sparse_columns(X, type(self).__name__)
        refuse_non_numeric_features(X, f"{type(self).__name__} (it {why})", "before")
        return cast(NDArray, float_rows_without_nan(self, X, why, "sklearn.impute.SimpleImputer"))

    def _test_input(self, X: Any, method: str) -> NDArray:
        check_wrapper_fitted(self, "machine_", method)
        check_calibration_settings(self, method, step="fit", again="fit(X, y)")
        return self._checked_X(X, reset=False)

    def _test_features(self, X: NDArray) -> tuple[NDArray, NDArray]:
        features = self._features(X)
        return features, features @ self.coef_ + self.__dict__.get("_label_offset", 0.0)

    def predict(self, X: ArrayLike) -> NDArray:
        """Ridge predictions (the fit on all training data).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._test_features(self._test_input(X, "predict"))[1]
