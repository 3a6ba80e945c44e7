"""The fit / calibrate / predict machinery shared by the multi-output region methods.

A multi-output method says three things (the subclass hooks):

* how to train (``_fit``): a clone of ``estimator`` and/or a flow, a covariance...;
* the per-row latent map ``g_i`` (``_latent_map``): the region of row ``i`` is
  ``{y : ||g_i(y)|| <= radius}``, with the norm of the class (``norm``);
* the point prediction (``_point_prediction``).

Everything else comes from `uqconform.base.ConformalPredictor`: parameter and feature
checks, the prefit-estimator protocol, Mondrian groups and the conformal thresholds (one
`uqconform.quantiles.conformal_quantile` per stratum and level). A score with several
columns (one per output) is calibrated column by column at ``alpha / d``: the Bonferroni
box of `RectangularConformalRegressor`.
"""

from __future__ import annotations

import warnings
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression
from sklearn.utils._param_validation import validate_parameter_constraints

from uqconform._cross import reads_groups
from uqconform._rows import check_sample_weight_rows, n_rows, take_rows
from uqconform._validation import (
    NonFiniteOutputError,
    check_groups,
    check_int,
    check_paired_rows,
    check_row_order,
    check_weights_row_order,
    first_non_number,
    frame_as_numbers,
    has_nan,
    missing_target_error,
    non_finite_rows_error,
    refuse_booleans,
    refuse_non_finite,
    refuse_non_number_kinds,
    sklearn_tags,
    swapped_level_error,
)
from uqconform._warnings import warn_user
from uqconform.base import (
    ConformalPredictor,
    check_calibration_settings,
    check_frozen_features,
    check_not_retrained,
    keeps_state_on_error,
    naming_refused_groups,
    record_calibration_settings,
    refuses_nan,
    remember_calibration_rows,
    remember_training_rows,
)
from uqconform.regions import (
    LatentMap,
    Norm,
    PredictionRegion,
    record_or_check_output_columns,
)

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = [
    "MultiOutputConformalRegressor",
    "check_multioutput_target",
    "take_rows",
]


def check_multioutput_target(Y: ArrayLike, n: int, n_outputs: int | None = None) -> NDArray:
    """A finite float target of shape ``(n, d)``, one row per row of X.

    Parameters
    ----------
    Y : array-like of shape (n, d)
        The targets. A 1-D ``Y`` is one output (``d = 1``).
    n : int
        Rows of X.
    n_outputs : int, optional
        The ``d`` the model was fitted with; a different number of columns is refused.

    Returns
    -------
    ndarray of shape (n, d), float (a new array: the input is never modified)

    Examples
    --------
    >>> check_multioutput_target([[1, 2], [3, 4]], 2).shape
    (2, 2)
    """
    if Y is None:
        raise missing_target_error()
    Y = frame_as_numbers(Y)  # nullable columns: pd.NA is a missing value, named below
    if sparse.issparse(Y):
        raise ValueError(
            f"`Y` is a sparse matrix of shape {np.shape(Y)}: pass a dense one (Y.toarray())."
        )
    try:
        target = np.asarray(Y)
    except ValueError:  # ragged rows
        raise ValueError(
            "`Y` must be 2-D (n_samples, n_outputs) with the same number of outputs in "
            "every row; its rows have different lengths."
        ) from None
    if target.ndim == 1:
        target = target[:, None]
    if target.ndim != 2:
        raise ValueError(f"`Y` must be 2-D (n_samples, n_outputs), got shape {target.shape}.")
    if target.shape[0] != n:
        raise ValueError(f"`Y` has {target.shape[0]} rows but X has {n} rows.")
    if target.shape[1] == 0:
        raise ValueError("`Y` has no columns; give at least one output.")
    if target.dtype.kind == "c":
        raise ValueError("Complex data not supported: `Y` must be real.")
    refuse_non_number_kinds(target, "Y")
    try:
        target = np.array(target, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"`Y` must be numeric for regression; {first_non_number(target)}."
        ) from None
    if not np.isfinite(target).all():
        raise non_finite_rows_error("Y", target, "remove or impute those rows first")
    if n_outputs is not None and target.shape[1] != n_outputs:
        raise ValueError(
            f"`Y` has {target.shape[1]} outputs but the model was fitted with {n_outputs}."
        )
    return target


class _DenseNumericInput(BaseEstimator):
    """Stand-in 'model' of methods without an estimator (flows): dense numeric X, no NaN."""


class MultiOutputConformalRegressor(RegressorMixin, ConformalPredictor):
    """Base class of the multi-output conformal regions (not used directly).

    Subclasses set ``norm`` (``"l2"`` or ``"linf"``) and implement ``_fit``,
    ``_latent_map`` and ``_point_prediction``. Methods that train no scikit-learn
    ``estimator`` (a conditional flow) set ``_uses_estimator = False``.

    ``fit(X, Y)`` trains on one part of the data, ``calibrate(X, Y)`` scores held-out rows
    by ``||g_i(Y_i)||`` and ``predict_set`` returns a `uqconform.regions.PredictionRegion`
    (a list, one per level, for several alphas) of radius the conformal quantile of the
    scores, hence marginal coverage ``P(Y in region) >= 1 - alpha``.

    Examples
    --------
    >>> from uqconform.multioutput import (CONTRA, EllipsoidalConformalRegressor,
    ...     RectangularConformalRegressor, ResidualCONTRA)
    >>> methods = (CONTRA, EllipsoidalConformalRegressor, RectangularConformalRegressor,
    ...            ResidualCONTRA)
    >>> all(issubclass(method, MultiOutputConformalRegressor) for method in methods)
    True
    >>> [method.norm for method in methods]  # balls (ellipsoids, flows) or boxes
    ['l2', 'l2', 'linf', 'l2']
    """

    norm: ClassVar[Norm] = "l2"
    _unbounded_prediction = "the whole output space (an infinite radius)"

    #: scikit-learn parameter constraints of the subclass's own parameters
    _parameter_constraints: ClassVar[dict] = {}

    def _validate_params(self) -> None:
        params = self.get_params(deep=False)
        swapped = swapped_level_error(params.get("estimator"), self)
        if swapped is not None:  # Wrapper(0.1, model)
            raise swapped
        refuse_booleans(self._parameter_constraints, params, type(self).__name__)
        validate_parameter_constraints(  # first: the types of the parameters
            self._parameter_constraints, params, caller_name=type(self).__name__
        )
        super()._validate_params()

    # ---- hooks -------------------------------------------------------------------------------
    @abstractmethod
    def _fit(self, X: Any, Y: NDArray, **fit_params: Any) -> None:
        """Train what the method needs on ``(X, Y)`` (e.g. with `_fit_estimator`)."""

    @abstractmethod
    def _latent_map(self, X: Any) -> LatentMap:
        """The latent maps ``g_i`` of the rows of ``X``."""

    @abstractmethod
    def _point_prediction(self, X: Any) -> NDArray:
        """Point prediction ``(n, d)``."""

    def _prepare_calibration(self, X: Any, Y: NDArray, *, prefit: bool) -> NDArray | None:
        """Called by ``calibrate`` before scoring; returns the rows to score (None: all).

        ``prefit`` is True when ``calibrate`` adopted a fitted ``estimator`` without
        ``fit``; a method that still needs to learn a shape can learn it on some rows here
        and return the others, which then calibrate the radius.
        """
        return None

    def _refuse_group_splitter(self, learner: str) -> None:
        """Refuse a ``cv`` that splits by group (``GroupKFold``): ``fit`` has no groups to
        give it (its ``**fit_params`` go to the estimator's ``fit``, and the groups of
        `calibrate` are Mondrian strata). ``learner`` is what the out-of-fold residuals
        train ("the region's shape")."""
        cv = getattr(self, "cv", None)
        if reads_groups(cv, unknown=False):
            raise ValueError(
                f"`cv` ({type(cv).__name__}) splits by group, but fit takes no groups: use "
                f"KFold (or an int) for the out-of-fold residuals ({learner} is learnt from "
                "them)."
            )

    def _learn_on_half(
        self, X: Any, Y: NDArray, learn: Callable[[Any, NDArray], None], what: str
    ) -> NDArray:
        """The prefit path of `_prepare_calibration`: ``learn(X, residuals)`` on a random
        half of the calibration rows; returns the other half, which scores the radius.

        With Mondrian groups each group is halved (its odd row scores), so every group
        keeps about half its rows for its radius: the shape is learnt on rows disjoint
        from the scoring rows, and within a group these stay exchangeable with its test
        rows. Without groups the split is the first half of one seeded permutation.
        ``what`` completes the messages ("learns the region shape"); the rows given and
        scored per group are kept for the too-few warning (`_warn_too_few`).
        """
        n = Y.shape[0]
        if n < 4:
            raise ValueError(
                f"A prefit estimator calibrated without fit {what} on half of the "
                f"calibration rows; {n} rows are too few. Call fit(X, Y) with "
                "FrozenEstimator(model) on separate data instead."
            )
        order = self._rng(stream=0).permutation(n)
        groups = self.__dict__.get("_calibration_groups")
        if groups is None:
            learning = order[: n // 2]
            given = np.array([n])
        else:  # each group's rows in random order, then the first half of each group
            _, index, given = np.unique(groups, return_inverse=True, return_counts=True)
            by_group = order[np.argsort(index[order], kind="stable")]
            rank = np.arange(n) - np.repeat(np.cumsum(given) - given, given)
            learning = by_group[rank < np.repeat(given // 2, given)]
            if learning.size < 2:
                raise ValueError(
                    f"A prefit estimator calibrated without fit {what} on half of each "
                    f"group's calibration rows, and `groups` ({given.size} groups) leave "
                    f"{learning.size} of the {n} calibration rows to learn on: too few. "
                    "Give the groups more rows each, or call fit(X, Y) with "
                    "FrozenEstimator(model) on separate data instead."
                )
        learns = np.zeros(n, dtype=bool)
        learns[learning] = True
        learn_rows, score_rows = np.flatnonzero(learns), np.flatnonzero(~learns)
        X_learn = take_rows(X, learn_rows)
        learn(X_learn, Y[learn_rows] - self._estimator_prediction(X_learn, learn_rows))
        self._prefit_split = (given, given - given // 2, what)
        return score_rows

    def _too_few_note(self, too_few: dict[int, int]) -> str:
        """After a prefit calibration: about half of each group's rows learnt the shape,
        with the rows given and scored."""
        split = self.__dict__.get("_prefit_split")
        if split is None:
            return ""
        given, scored, what = split
        grouped = getattr(self, "groups_", None) is not None
        groups = [stratum // self._n_sub_strata for stratum in list(too_few)[:3]]
        counts = "; ".join(
            f"{self._stratum_name(g, 1, grouped)}: {given[g]} given, {scored[g]} scored"
            for g in groups
        )
        each = "each group's " if grouped else "the "
        return (
            f"A prefit estimator calibrated without fit {what} on about half of {each}"
            f"calibration rows and scores the others ({counts}): give more calibration "
            "rows, or call fit(X, Y) with FrozenEstimator(model) on separate rows so that "
            "every calibration row scores."
        )

    def _calibration_scores(self, X: Any, Y: NDArray) -> tuple[NDArray, NDArray, int]:
        """Nonconformity scores ``||g_i(Y_i)||`` (``(n,)``), one stratum."""
        scores = self._scores(X, Y)
        return scores, np.zeros(scores.shape[0], dtype=np.intp), 1

    def _regions(self, X: Any, thresholds: NDArray) -> list[PredictionRegion]:
        """One region per level from thresholds ``(c, k)`` (or ``(n, c, k)`` with groups)."""
        latent_map = self._latent_map(X)
        names = self.__dict__.get("output_names_in_")
        return [
            PredictionRegion(latent_map, thresholds[..., 0, j], self.norm, output_names=names)
            for j in range(thresholds.shape[-1])
        ]

    # ---- what fit learnt from ----------------------------------------------------------------
    @property
    def _fit_params(self) -> tuple[str, ...]:  # type: ignore[override]
        """The parameters fit read, which what it learnt depends on: one changed since
        (``set_params``) makes calibration and prediction ask for a new fit (a new
        calibration when calibrate adopted a fitted model), as in the single-model
        wrappers. Here the model and the seed of its clone; subclasses add their own
        settings (``_calibration_params``: those a new calibration suffices for)."""
        if not self._uses_estimator:
            return ("random_state",)
        return ("estimator", "random_state") if self._fit_trained_estimator() else ("estimator",)

    def _fit_trained_estimator(self) -> bool:
        """Whether ``estimator_`` is a clone of ``estimator`` that fit trained: not a fitted
        model adopted by calibrate nor a ``FrozenEstimator``, which no fold, split or seed
        of fit touched."""
        return not self.__dict__.get("_estimator_adopted", False) and not isinstance(
            self._estimator_or_default(), FrozenEstimator
        )

    # ---- the estimator (for subclasses that wrap one) ---------------------------------------
    def _default_estimator(self) -> BaseEstimator:
        return LinearRegression()

    def _estimator_or_default(self) -> BaseEstimator:
        if not self._uses_estimator:
            return _DenseNumericInput()
        return super()._estimator_or_default()

    def _routed_models(self) -> dict[str, Any]:
        return super()._routed_models() if self._uses_estimator else {}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        return tags

    def _fit_estimator(self, X: Any, Y: NDArray, **fit_params: Any) -> None:
        """Fit a clone of ``estimator`` as ``estimator_`` (a ``FrozenEstimator`` stays as is)."""
        model_params = self._model_fit_params(fit_params)
        self.estimator_ = self._make_estimator()
        self._estimator_adopted = False
        try:
            # a column of text: named, with the remedy
            with naming_refused_groups(self, model_params), self._reading_features(X):
                self.estimator_.fit(X, Y, **model_params)
        except ValueError as error:
            tags = sklearn_tags(self.estimator_)  # None: a model outside scikit-learn
            if (
                Y.ndim == 2
                and Y.shape[1] > 1
                and tags is not None
                and not tags.target_tags.multi_output
                and self._fits_one_output(X, Y, model_params)
            ):
                raise ValueError(
                    f"{type(self.estimator_).__name__} could not be fitted on the {Y.shape[1]} "
                    "outputs of Y, though it fits the first alone (it may take one output "
                    "only): wrap it in "
                    f"sklearn.multioutput.MultiOutputRegressor. Its error: {error}"
                ) from error
            raise

    def _fits_one_output(self, X: Any, Y: NDArray, model_params: dict[str, Any]) -> bool:
        """Whether a clone of ``estimator_`` fits the first output alone: only then is a
        failure on every output about the outputs (an unrelated error, a bad parameter,
        fails on one output too and is shown as it is)."""
        try:
            with warnings.catch_warnings():  # a probe the user did not ask for: quiet
                warnings.simplefilter("ignore")
                clone(self.estimator_).fit(X, Y[:, 0], **model_params)
        except Exception:  # any failure: the error was not about the outputs
            return False
        return True

    def _estimator_prediction(self, X: Any, positions: NDArray | None = None) -> NDArray:
        """``estimator_.predict(X)`` as a float ``(n, d)`` array, checked against ``d`` and
        for NaN / inf rows (named by their ``positions`` in the caller's `X`, when ``X`` is
        a subset of it)."""
        with self._reading_features(X):  # a column of text given to a fitted model
            output = np.asarray(self.estimator_.predict(X), dtype=float)
        if output.ndim == 1:
            output = output[:, None]
        expected = (n_rows(X), self.n_outputs_)
        if output.shape != expected:
            raise ValueError(
                f"`estimator` predicts an array of shape {output.shape}, expected {expected} "
                "(one column per output of Y); wrap a single-output model in "
                "sklearn.multioutput.MultiOutputRegressor."
            )
        try:
            refuse_non_finite(
                output, "`estimator` predicted NaN or infinite values", "rows of `X`"
            )
        except NonFiniteOutputError as error:
            raise error if positions is None else error.renumbered(positions) from None
        return output

    def _check_nan(self, X: Any) -> None:
        if self._uses_estimator:  # the wrapped model decides, as for every wrapper
            super()._check_nan(X)
        elif refuses_nan(self._estimator_or_default()) and has_nan(X):
            raise ValueError(  # the flow itself reads X: there is no model to swap
                f"`X` contains NaN and {type(self).__name__} does not accept missing "
                "values: impute them in X before fit, calibrate and prediction."
            )

    # ---- state -----------------------------------------------------------------------------
    def _check_target(self, y: ArrayLike, n: int, *, calibrating: bool) -> NDArray:
        known = getattr(self, "n_outputs_", None) if calibrating else None
        Y = check_multioutput_target(y, n, known)
        self._check_output_names(y, learn=known is None)
        if Y.shape[1] == 1 and known is None:
            warn_user(
                f"`Y` has a single output: {type(self).__name__} works with d = 1 (its region "
                "is an interval, and predict returns shape (n, 1)), but a scalar method of "
                "uqconform.regression fits better.",
                UserWarning,
            )
        return Y

    def _check_output_names(self, y: ArrayLike, *, learn: bool, name: str = "Y") -> None:
        """Record the column names of a DataFrame ``Y`` (``learn``: at fit, or at a
        calibrate that adopts a fitted model), or refuse other names or another order
        (naming the argument ``name``): the region's shape and the point model give output
        ``j`` a meaning (see `uqconform.regions.check_output_columns`: integer labels
        too)."""
        record_or_check_output_columns(self, y, "output_names_in_", learn=learn, name=name)

    def _warn_if_degenerate(
        self,
        residuals: NDArray,
        what: str,
        hint: str = "Out-of-fold residuals of a linear model span at most n - p - 1 "
        "directions (n rows, p features): fit on more rows, or use "
        "RectangularConformalRegressor (one scale per output).",
    ) -> None:
        """Warn when the residual rows ``(n, d)`` that learn a region's shape span fewer
        than ``d`` directions because there are too few of them (``n < d + p + 1`` for
        ``p`` features): the shape is then flat in directions new rows do not keep to, and
        the calibrated radius (and volume) huge. Outputs that are dependent in the data
        (one predicted exactly, one the sum of others) with enough rows are no such case:
        the calibration residuals share the flat directions."""
        n, d = residuals.shape
        if d < 2 or not n or n >= d + getattr(self, "n_features_in_", 0) + 1:
            return
        rank = int(np.linalg.matrix_rank(residuals))
        if rank < d:
            warn_user(
                f"The {n} rows that {what} span only {rank} of the {d} output "
                "directions: the region's shape is flat in the others, so its radius and "
                f"volume will be huge (coverage still holds). {hint}",
                UserWarning,
            )

    def _is_trained(self) -> bool:
        return "n_outputs_" in self.__dict__

    def _check_trained(self, method: str) -> None:
        if not self._is_trained():
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet: call fit(X, Y) "
                f"before {method}."
            )

    def _check_calibrated(self, method: str) -> None:
        self._check_trained(method)
        check_calibration_settings(self, method, step="fit")
        if not hasattr(self, "conformity_scores_"):
            raise NotFittedError(
                f"{type(self).__name__}.{method} needs calibration: call "
                "calibrate(X_calib, Y_calib) on held-out data first."
            )
        check_calibration_settings(self, method)
        check_not_retrained(self, method)  # a prefit model trained again since calibrate

    def _reset_calibration(self) -> None:
        super()._reset_calibration()
        self.__dict__.pop("radius_", None)
        self.__dict__.pop("_prefit_split", None)

    # ---- public API ------------------------------------------------------------------------
    @keeps_state_on_error
    def fit(self, X: Any, y: ArrayLike, **fit_params: Any) -> Self:
        """Train the model on data held out from calibration.

        Any previous calibration is discarded (a call that raises keeps it).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Training features.
        y : array-like of shape (n_samples, n_outputs)
            Training targets (``Y``); finite.
        **fit_params : dict
            Passed to the estimator's ``fit``. With scikit-learn's metadata routing on, only
            those the model requested (see `uqconform.routing`). A ``sample_weight``
            weights the point model only: the region's shape is learnt from every row.

        Returns
        -------
        self
        """
        check_row_order(X, y, "Y")
        check_weights_row_order(X, fit_params, y, "Y")
        self._validate_params()
        self._reset_calibration()
        self.__dict__.pop("n_outputs_", None)
        X = self._validate_X(X, reset=True)
        check_sample_weight_rows(fit_params, n_rows(X))
        check_frozen_features(self, getattr(self, "estimator", None))
        Y = self._check_target(y, n_rows(X), calibrating=False)
        self._check_nan(X)
        self.n_outputs_ = Y.shape[1]
        self._fit(X, Y, **fit_params)
        record_calibration_settings(self, step="fit")
        remember_training_rows(self, X, Y)  # the region's shape is learnt on them too
        return self

    @keeps_state_on_error
    def calibrate(self, X: Any, y: ArrayLike, *, groups: ArrayLike | None = None) -> Self:
        """Score held-out calibration rows: ``||g_i(Y_i)||`` for each row.

        Without a prior ``fit``, a fitted ``estimator`` is adopted as is (never refitted).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Calibration features.
        y : array-like of shape (n_samples, n_outputs)
            Calibration targets (``Y``), with as many outputs as at ``fit``.
        groups : array-like of shape (n_samples,), optional
            Group label per row for Mondrian (group-conditional) calibration; the same
            argument must then be given at prediction. When a prefit estimator's region
            shape is learnt here, about half of each group's rows learn it and the others
            (the odd row included) calibrate the group's radius.

        Returns
        -------
        self
        """
        check_row_order(X, y, "Y")
        check_paired_rows(X, y, groups, "groups", "Y")
        self._validate_params()
        prefit = not self._is_trained() or self.__dict__.get("_estimator_adopted", False)
        if prefit:
            if not self._uses_estimator:
                raise NotFittedError(
                    f"{type(self).__name__}.calibrate was called before fit: call "
                    "fit(X_train, Y_train) first."
                )
            self._use_prefit_estimator()
            self.__dict__.pop("n_outputs_", None)
        else:
            check_calibration_settings(self, "calibrate", step="fit")
        self._reset_calibration()
        X = self._validate_X(X, reset=not hasattr(self, "n_features_in_"))
        n = n_rows(X)
        Y = self._check_target(y, n, calibrating=True)
        remember_calibration_rows(self, X, Y)
        group_labels = check_groups(groups, n)
        self._check_nan(X)
        if prefit:
            self.n_outputs_ = Y.shape[1]
        self._calibration_groups = group_labels  # a prefit split halves each group
        try:
            rows = self._prepare_calibration(X, Y, prefit=bool(prefit))
        finally:
            del self._calibration_groups
        if prefit:  # the shape (if any) was learnt just now
            record_calibration_settings(self, step="fit")
        if rows is not None:
            X, Y = take_rows(X, rows), Y[rows]
            group_labels = None if group_labels is None else group_labels[rows]
        try:
            self._store_calibration(X, Y, group_labels)
        except NonFiniteOutputError as error:  # name the row of the caller's X
            raise error if rows is None else error.renumbered(rows) from None
        alphas, scalar = self._resolve_alpha(None)
        table = self._threshold_table(alphas)[:-1, 0]  # (groups, c, k); warns if too few
        if getattr(self, "groups_", None) is None:
            table = table[0]
        if table.shape[-2] == 1:
            table = table[..., 0, :]
        radius = table[..., 0] if scalar else table
        self.radius_ = float(radius) if np.ndim(radius) == 0 else radius
        return self

    def _scores(self, X: Any, Y: NDArray) -> NDArray:
        latent = np.asarray(self._latent_map(X).to_latent(Y), dtype=float)
        if self.norm == "linf":
            return np.abs(latent).max(axis=1)
        return np.linalg.norm(latent, axis=1)

    def nonconformity(self, X: Any, y: ArrayLike) -> NDArray:
        """Nonconformity scores ``||g_i(Y_i)||`` of labelled rows (no calibration needed):
        the scores calibration uses (for a Bonferroni box, one per output,
        ``|y_j - f_j(x)|``, each calibrated at ``alpha / d``).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples, n_outputs)

        Returns
        -------
        ndarray of shape (n_samples,), or (n_samples, n_outputs) for a Bonferroni box
        """
        check_row_order(X, y, "Y")
        self._check_trained("nonconformity")
        check_calibration_settings(self, "nonconformity", step="fit")
        X = self._validate_X(X, reset=False)
        Y = self._check_target(y, n_rows(X), calibrating=True)
        self._check_nan(X)
        return self._scores(X, Y)

    def predict(self, X: Any) -> NDArray:
        """Point prediction (available after ``fit`` alone): the regressor's for the
        residual methods; for CONTRA the image of the latent origin, the centre of every
        region (a mode-like point of the flow, not its mean ``E[Y | x]``; ``score``, R^2,
        uses it).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_outputs)
        """
        self._check_trained("predict")
        X = self._validate_X(X, reset=False)
        self._check_nan(X)
        return self._point_prediction(X)

    def score(self, X: Any, y: ArrayLike, sample_weight: ArrayLike | None = None) -> float:
        """Coefficient of determination (R^2, scikit-learn's ``RegressorMixin.score``) of
        `predict`, averaged uniformly over the outputs.

        A DataFrame ``Y`` must have the columns seen at fit in the same order, as for
        `calibrate` (scikit-learn would read it by position).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples, n_outputs)
            True targets (``Y``).
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        float
        """
        check_row_order(X, y, "Y")
        self._check_trained("score")
        # the shape and rows of Y, its columns' names: as calibrate says (not scikit-learn's
        # "different number of output" or "inconsistent numbers of samples")
        Y = self._check_target(y, n_rows(X), calibrating=True)
        return float(super().score(X, Y, sample_weight=sample_weight))

    def predict_set(
        self,
        X: Any,
        alpha: float | Sequence[float] | None = None,
        *,
        groups: ArrayLike | None = None,
    ) -> PredictionRegion | list[PredictionRegion]:
        """Prediction regions, one per row of ``X``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s); defaults to the constructor's ``alpha``.
        groups : array-like of shape (n_samples,), optional
            Group labels, required if (and only if) calibration used groups.

        Returns
        -------
        PredictionRegion, or a list of them (one per level) for a sequence of alphas
            The whole space (infinite radius, with a ``UserWarning``) when the
            calibration set is too small for the level.
        """
        return self._predict_regions(X, alpha, groups, "predict_set")

    def _predict_regions(
        self, X: Any, alpha: Any, groups: ArrayLike | None, method: str
    ) -> PredictionRegion | list[PredictionRegion]:
        self._check_calibrated(method)
        alphas, scalar = self._resolve_alpha(alpha, X)
        check_row_order(X, groups, "groups")
        X = self._validate_X(X, reset=False)
        self._check_nan(X)
        group_index = self._group_index(groups, n_rows(X))
        table = self._threshold_table(alphas)[:, 0]  # (groups + 1, c, k)
        thresholds = table[0] if group_index is None else table[group_index]
        regions = self._regions(X, thresholds)
        return regions[0] if scalar else regions

    def predict_interval(
        self,
        X: Any,
        alpha: float | Sequence[float] | None = None,
        *,
        groups: ArrayLike | None = None,
        n_points: int = 1024,
    ) -> NDArray:
        """Bounding boxes of the prediction regions (`PredictionRegion.bounding_box`).

        Exact for ellipses and boxes; for flows the extremes of the region's boundary found
        by sampling it (1,024 points of the latent circle in 2-D, each extreme then refined
        on the arc between its neighbours; in 3-D and above, 1,024 seeded random
        directions and the coordinate axes, each extreme then pushed outward by a local
        ascent from eight of them far apart until it settles), so they can sit inside a
        curved region: up to 3.5% of the width on a 3-D spline flow and 0.9% on a MAF
        flow in a review of four fits (in 2-D up to 0.009% on one MAF fit to ``make_ring``,
        at most 0.005% on 16 other fits). For a tighter box pass more points:
        ``n_points=200000`` left under 0.02% there, at about 15 times the time.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Miscoverage level(s); defaults to the constructor's ``alpha``.
        groups : array-like of shape (n_samples,), optional
            Group labels, required if (and only if) calibration used groups.
        n_points : int, default=1024
            Points of the latent sphere searched for a flow's extremes, at least 4
            (`PredictionRegion.bounding_box`); ignored by ellipses and boxes, whose
            boxes are exact.

        Returns
        -------
        ndarray of shape (n_samples, n_outputs, 2), or (n_samples, n_outputs, 2, k)
            Lower and upper bound per output; infinite for the whole space.
        """
        n_points = check_int(n_points, "n_points", low=4)
        regions = self._predict_regions(X, alpha, groups, "predict_interval")
        if isinstance(regions, PredictionRegion):
            return regions.bounding_box(n_points)
        return np.stack([region.bounding_box(n_points) for region in regions], axis=-1)
