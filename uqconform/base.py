"""The fit / calibrate / predict state machine shared by every split-conformal wrapper.

A wrapper is a scikit-learn meta-estimator around any model. Its life has three steps:

1. ``fit(X, y)`` fits a clone of ``estimator`` (skipped for a prefit model);
2. ``calibrate(X, y, groups=None)`` turns held-out data into conformity scores, one stratum
   per group (Mondrian calibration) and, for class-conditional sets, per class;
3. ``predict_interval`` / ``predict_set`` turn the scores into one threshold per stratum and
   level (the single conformal quantile of `uqconform.quantiles`) and apply the
   score's inverse to the model's output, batch by batch so memory stays bounded.

Subclasses only say how to validate a target, how to score calibration data and how to
turn a batch of model outputs and thresholds into intervals or sets.
"""

from __future__ import annotations

import functools
import hashlib
import numbers
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast, overload

import joblib
import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted, validate_data

from uqconform._warnings import warn_user
from uqconform.quantiles import check_alpha, conformal_quantile
from uqconform.routing import RoutesFitParams

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = [
    "ConformalPredictor",
    "check_groups",
    "check_regression_target",
    "check_rows",
    "slice_rows",
]

# Automatic batching (cells = rows x output columns). Small problems run in one batch, so
# the model is called once; large ones in about _BATCHES_PER_CALL batches, so the model's
# and the score's temporaries stay a small fraction of the output array, within bounds.
_ONE_BATCH_CELLS = 2**21
_MIN_BATCH_CELLS = 2**16
_MAX_BATCH_CELLS = 2**22
_BATCHES_PER_CALL = 128


def slice_rows(X: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of an array, a sparse matrix, a DataFrame or a list (no copy)."""
    rows = slice(start, stop)
    return X.iloc[rows] if hasattr(X, "iloc") else X[rows]


def row_sliceable(X: Any) -> Any:
    """``X`` with rows that can be sliced: sparse formats without row slicing (coo, dia,
    ...) become CSR; anything else is returned as is."""
    if sparse.issparse(X) and X.format not in ("csr", "csc"):
        return X.tocsr()
    return X


def take_rows(X: Any, rows: NDArray) -> Any:
    """Rows ``rows`` (integer positions) of an array, a sparse matrix, a DataFrame or a list
    of rows (returned as an array)."""
    if hasattr(X, "iloc"):
        return X.iloc[rows]
    if sparse.issparse(X):
        return row_sliceable(X)[rows]
    return X[rows] if hasattr(X, "shape") else np.asarray(X)[rows]


def is_per_row(value: Any, n: int) -> bool:
    """Whether a fit parameter has one entry per row of ``n`` (``sample_weight``); anything
    else (``eval_set=[(X_val, y_val)]``, scalars, strings) is passed as given."""
    if isinstance(value, (str, bytes, dict)):
        return False
    shape = getattr(value, "shape", None)
    if shape is not None:
        return len(shape) >= 1 and shape[0] == n
    try:
        return len(value) == n
    except TypeError:  # no length: a scalar or an object
        return False


def fit_params_rows(fit_params: dict[str, Any], n: int, rows: NDArray) -> dict[str, Any]:
    """The fit parameters of a model trained on rows ``rows`` of ``n``: per-row ones
    (``sample_weight``) taken on the same rows (a list stays a list of its entries), the
    others passed as given."""

    def rows_of(value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return [value[i] for i in rows.tolist()]
        return take_rows(value, rows)

    return {
        name: rows_of(value) if is_per_row(value, n) else value
        for name, value in fit_params.items()
    }


def n_rows(X: Any) -> int:
    """Number of rows of any 2-D input (array, DataFrame, sparse matrix, list)."""
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) > 0:
        return int(shape[0])
    return len(X)


#: What `pandas.api.types.infer_dtype` calls an object array holding only numbers.
_NUMBER_KINDS = frozenset({"integer", "floating", "mixed-integer-float", "boolean", "decimal"})


def float_values(values: Any) -> NDArray | None:
    """The values as a float64 array when every one is a number (a missing one as NaN).

    Numeric and boolean arrays, pandas columns of any numeric dtype (nullable ``Int64``,
    ``Float64`` and ``boolean`` with ``pd.NA`` included) and object arrays of numbers give
    the same float64 array, so what is computed from it (a hash of the rows) depends on
    the numbers, not on their container. None for anything else (strings, mixed).

    Examples
    --------
    >>> import pandas as pd
    >>> float_values(pd.Series([1, None], dtype="Int64"))
    array([ 1., nan])
    >>> float_values(np.array(["a", 1], dtype=object)) is None
    True
    """
    if isinstance(values, (pd.DataFrame, pd.Series)):  # decided from the column dtypes
        dtypes = list(values.dtypes) if isinstance(values, pd.DataFrame) else [values.dtype]
        numeric = [
            pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
            for dtype in dtypes
        ]
        if all(numeric):
            return values.to_numpy(dtype=np.float64, na_value=np.nan)
        if any(
            not ok and dtype != np.dtype(object) for ok, dtype in zip(numeric, dtypes, strict=True)
        ):
            return None  # text, categories, dates
        values = values.to_numpy()  # object columns: numbers held as objects, or not
    array = np.asarray(values)
    if array.dtype.kind in "biuf":
        return np.asarray(array, dtype=np.float64)
    if array.dtype.kind != "O" or array.size == 0:
        return None
    if pd.api.types.infer_dtype(array.ravel(), skipna=True) not in _NUMBER_KINDS:
        return None
    flat = pd.array(array.ravel(), dtype="Float64")
    return flat.to_numpy(dtype=np.float64, na_value=np.nan).reshape(array.shape)


def check_rows(name: str, values: ArrayLike, n: int, rows_of: str = "X") -> NDArray:
    """1-D array of length ``n`` (``y`` or ``groups``), with a message naming the argument
    (and ``rows_of``, what the rows belong to).

    A column vector ``(n, 1)`` is flattened (with a ``DataConversionWarning`` for ``y``, the
    scikit-learn convention).
    """
    if values is None and name == "y":
        raise _y_is_none()
    array = np.asarray(values)
    if array.ndim == 0:
        raise ValueError(f"`{name}` must be an array with one entry per row, got a scalar.")
    if array.ndim == 2 and array.shape[1] == 1:
        if name == "y":
            _warn_column_vector()
        array = array[:, 0]
    if array.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D, got an array of shape {array.shape}.")
    if array.shape[0] != n:
        raise ValueError(f"`{name}` has {array.shape[0]} entries but {rows_of} has {n} rows.")
    return array


def point_predictions(output: Any, name: str = "estimator") -> NDArray:
    """A scalar regressor's predictions as a float array of shape (n,).

    Keras-style models predict a column of shape (n, 1); it is taken as the (n,) array.

    Examples
    --------
    >>> point_predictions([[1.0], [2.0]])
    array([1., 2.])
    """
    values = np.asarray(output, dtype=float)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise ValueError(
            f"`{name}` predicts an array of shape {values.shape}; a scalar regressor "
            "must predict shape (n,). For several outputs use uqconform.multioutput."
        )
    return values


def _sort_by_stratum(strata: NDArray, n_strata: int) -> tuple[NDArray, NDArray]:
    """Row order grouped by stratum (stable) and each stratum's bounds in that order."""
    order = np.argsort(strata, kind="stable")
    return order, np.searchsorted(strata[order], np.arange(n_strata + 1))


def check_features(estimator: BaseEstimator, X: Any, *, reset: bool) -> Any:
    """Record (``reset=True``) or check the number and names of ``X``'s features.

    ``X`` itself is passed through (the wrapped model does its own conversion); ``None``,
    scalars, 1-D numeric arrays and inputs without rows are refused with a message naming
    `X`.
    """
    if X is None:
        raise ValueError("`X` is None; pass an array or DataFrame with one row per sample.")
    if not hasattr(X, "shape") and not isinstance(X, (list, tuple)) and hasattr(X, "__array__"):
        X = np.asarray(X)  # array-likes without len() or slicing
    if getattr(X, "ndim", None) == 0 or isinstance(X, (numbers.Number, str, bytes)):
        raise ValueError("`X` must be 2-D (one row per sample), got a scalar.")
    if isinstance(X, np.ndarray) and X.ndim == 1 and X.dtype.kind in "biufc":
        raise ValueError(
            f"`X` must be 2-D (one row per sample), got a 1-D array of shape {X.shape}. "
            "Reshape your data either using X.reshape(-1, 1) if it has a single feature "
            "or X.reshape(1, -1) if it is a single sample."
        )
    if isinstance(X, (list, tuple)) and len(X) == 0:  # before scikit-learn's IndexError
        raise ValueError("`X` has no rows.")
    validate_data(estimator, X, skip_check_array=True, reset=reset)
    if n_rows(X) == 0:
        raise ValueError("`X` has no rows.")
    return X


def _warn_column_vector() -> None:
    warn_user(
        "A column-vector y was passed when a 1d array was expected; `y` of shape (n, 1) was "
        "flattened to shape (n,).",
        DataConversionWarning,
    )


def _y_is_none() -> ValueError:
    # The phrase "requires y to be passed" is the scikit-learn convention checks look for.
    return ValueError(
        "This estimator requires y to be passed, but the target y is None: `y` must hold "
        "one target per row of X."
    )


def check_groups(groups: ArrayLike | None, n: int) -> NDArray | None:
    """Validate Mondrian group labels: one hashable, non-missing label per row."""
    if groups is None:
        return None
    labels = check_rows("groups", groups, n)
    if labels.dtype.kind == "f" and np.isnan(labels).any():
        raise ValueError("`groups` contains NaN; every row needs a group label.")
    if labels.dtype.kind == "O":
        if pd.isna(labels).any():
            raise ValueError("`groups` contains missing (None or NaN) labels.")
        _refuse_unorderable(labels, "groups")
    return labels


def _refuse_unorderable(labels: NDArray, name: str) -> None:
    """A ValueError naming ``name`` when its (object) labels mix types that do not order."""
    try:
        np.unique(labels)
    except TypeError:
        kinds = sorted({type(value).__name__ for value in labels})
        raise ValueError(
            f"`{name}` mixes label types ({', '.join(kinds)}) that cannot be ordered; use "
            "one type (e.g. all strings)."
        ) from None


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value, for readable messages (``'a'``, not ``np.str_``)."""
    return value.item() if isinstance(value, np.generic) else value


def _has_nan(block: Any) -> bool:
    """True if a numeric block of rows holds NaN; non-numeric data is the model's business."""
    if hasattr(block, "select_dtypes"):  # DataFrame: look at numeric columns only
        numeric = block.select_dtypes("number")
        return bool(numeric.shape[1]) and bool(numeric.isna().to_numpy().any())
    if sparse.issparse(block):  # sparse: the stored values
        block = block if block.format in ("csr", "csc", "coo", "bsr") else block.tocsr()
        array = block.data
    else:
        array = block
    array = np.asarray(array) if isinstance(array, list) else array
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "fc":
        return False
    # A sum is finite unless some entry is NaN/inf: one pass, no full-size temporary.
    return not np.isfinite(array.sum()) and bool(np.isnan(array).any())


def record_calibration_settings(model: Any, *, step: str = "calibrate") -> None:
    """Remember the parameters a step's result depends on: ``_calibration_params`` after
    ``calibrate`` (``step="fit"``: ``_fit_params``, for what fit learnt and prediction reads)."""
    names = getattr(model, "_fit_params" if step == "fit" else "_calibration_params", ())
    model.__dict__[f"_{step}_settings"] = {name: getattr(model, name) for name in names}


def check_calibration_settings(
    model: Any, method: str, *, step: str = "calibrate", again: str | None = None
) -> None:
    """Refuse to go on when a parameter the calibration (or the fit) depends on changed since.

    ``set_params(conformity_score=...)`` after ``calibrate`` would score test points with
    one function and compare them with thresholds of another: the sets would lose their
    guarantee without any error. ``again`` names the call that mends it (default: fit and
    calibrate, or calibrate).
    """
    used = model.__dict__.get(f"_{step}_settings", {})
    changed = [
        f"{name}={value!r}"
        for name, value in used.items()
        if not _same_setting(value, getattr(model, name))
    ]
    if changed:
        refit = step == "fit" and not model.__dict__.get("_estimator_adopted", False)
        if again is None:
            again = (
                "fit(X, y) and calibrate(X_calib, y_calib)"
                if refit
                else "calibrate(X_calib, y_calib)"
            )
        raise NotFittedError(
            f"{type(model).__name__}.{method}: parameters changed since {step} (it used "
            f"{', '.join(changed)}); call {again} again."
        )


def _same_setting(old: Any, new: Any) -> bool:
    """Whether a parameter still has the value a step used (arrays compared by value)."""
    if old is new:
        return True
    sequences = (list, tuple, np.ndarray)
    try:
        if (
            isinstance(old, sequences)
            and isinstance(new, sequences)
            and type(old) is not type(new)
        ):
            old, new = np.asarray(old, dtype=object), np.asarray(new, dtype=object)  # [1] == (1,)
        equal = old == new
        if np.ndim(equal) == 0:
            return bool(equal)
        return np.shape(old) == np.shape(new) and bool(np.all(equal))
    except (TypeError, ValueError):  # values that cannot be compared differ
        return False


_MISSING = object()


def keeps_state_on_error(method: Callable) -> Callable:
    """Decorator: when ``method`` raises, the estimator's attributes are put back as they
    were, so a rejected ``calibrate`` call keeps the previous (good) calibration.

    Attributes the method rebinds are restored from a shallow snapshot; lists it extends in
    place (diagnostics appended step by step) are cut back to their old length, which costs
    nothing per call however long they grow. Methods must not change other attribute
    objects in place.
    """

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        saved = dict(self.__dict__)
        lengths = {name: len(value) for name, value in saved.items() if isinstance(value, list)}
        generator = getattr(self, "random_state", None)  # Generators advance in place
        state: Any = None  # a Generator's bit-generator state or a RandomState's state
        if isinstance(generator, np.random.Generator):
            state = generator.bit_generator.state
        elif isinstance(generator, np.random.RandomState):
            state = generator.get_state()
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            # Put back name by name (never an empty object in between, for other threads).
            state_now = self.__dict__
            for name in [name for name in list(state_now) if name not in saved]:
                state_now.pop(name, None)
            for name, value in saved.items():
                if state_now.get(name, _MISSING) is not value:
                    state_now[name] = value
            for name, length in lengths.items():
                del saved[name][length:]
            if isinstance(generator, np.random.Generator):
                generator.bit_generator.state = state
            elif isinstance(generator, np.random.RandomState):
                generator.set_state(state)
            raise

    return wrapper


def refuses_nan(estimator: Any) -> bool:
    """True when a model certainly cannot take NaN in ``X``.

    A plain estimator says so in its tags. A meta-estimator's tags do not (scikit-learn
    marks every ``Pipeline`` and search as refusing NaN, even one that imputes first): a
    ``Pipeline`` is judged by its first step, which sees the raw rows, a wrapper with an
    inner ``estimator`` (a search, ``FrozenEstimator``) by that model, and a
    ``ColumnTransformer`` decides for itself (it is never refused here).

    Examples
    --------
    >>> from sklearn.impute import SimpleImputer
    >>> from sklearn.linear_model import Ridge
    >>> from sklearn.pipeline import make_pipeline
    >>> refuses_nan(Ridge()), refuses_nan(make_pipeline(SimpleImputer(), Ridge()))
    (True, False)
    """
    if get_tags(estimator).input_tags.allow_nan:
        return False
    steps = getattr(estimator, "steps", None)
    if isinstance(steps, (list, tuple)) and steps:  # a Pipeline: its first real step sees X
        first = next((step for _, step in steps if step not in (None, "passthrough")), None)
        return first is not None and refuses_nan(first)
    if hasattr(estimator, "transformers"):  # a ColumnTransformer: its own business
        return False
    for name in ("estimator", "regressor", "base_estimator"):  # searches, FrozenEstimator,
        inner = getattr(estimator, name, None)  # TransformedTargetRegressor, calibrated ...
        if isinstance(inner, BaseEstimator):
            return refuses_nan(inner)
    return True


def forward_input_tags(tags: Any, model: Any) -> Any:
    """``tags`` with the input tags of the ``model`` that receives ``X`` as given: a wrapper
    takes NaN, sparse matrices, categorical and string features exactly when its model does.

    Examples
    --------
    >>> from sklearn.base import BaseEstimator
    >>> from sklearn.ensemble import HistGradientBoostingRegressor
    >>> tags = forward_input_tags(BaseEstimator().__sklearn_tags__(),
    ...                           HistGradientBoostingRegressor())
    >>> tags.input_tags.allow_nan, tags.input_tags.sparse
    (True, False)
    """
    try:
        inner = get_tags(model)
    except (AttributeError, TypeError):  # not an estimator: fit says so, clearly
        return tags
    tags.input_tags.allow_nan = not refuses_nan(model)
    tags.input_tags.sparse = inner.input_tags.sparse
    tags.input_tags.categorical = inner.input_tags.categorical
    tags.input_tags.string = inner.input_tags.string
    return tags


class ConformalPredictor(RoutesFitParams, BaseEstimator, metaclass=ABCMeta):
    """Base class of the split-conformal wrappers (not used directly).

    Subclasses implement `_default_estimator` and `_check_target`; those that use the
    default ``calibrate`` also `_calibration_scores`, and those that predict through
    `_predict_batched` also `_output_columns` and `_predict_batch`.
    """

    # ---- hooks -----------------------------------------------------------------------
    @abstractmethod
    def _default_estimator(self) -> BaseEstimator:
        """The model used when ``estimator=None``."""

    @abstractmethod
    def _check_target(self, y: ArrayLike, n: int, *, calibrating: bool) -> NDArray:
        """Validate ``y`` (finite values, labels the model knows...)."""

    def _calibration_scores(self, X: Any, y: NDArray) -> tuple[NDArray, NDArray, int]:
        """Scores ``(n,)`` or ``(n, c)``, sub-stratum index per row, number of sub-strata."""
        raise NotImplementedError(f"{type(self).__name__} overrides calibrate.")

    def _output_columns(self) -> int:
        """Output cells per row and level (2 for intervals, n_classes for sets)."""
        raise NotImplementedError(f"{type(self).__name__} does not use _predict_batched.")

    def _predict_batch(self, X: Any, thresholds: NDArray, alphas: NDArray, rng: Any) -> NDArray:
        """The prediction of rows ``X``, shape ``(b, *output shape, k)`` (trailing axis:
        levels); with a single batch it is returned to the user as it is.

        ``thresholds`` has shape ``(b, n_sub, c, k)``: for each row, its group's thresholds
        per sub-stratum, score component and level; ``(1, n_sub, c, k)``, broadcast over the
        rows, when there are no Mondrian groups.
        """
        raise NotImplementedError(f"{type(self).__name__} does not use _predict_batched.")

    def _validate_params(self) -> None:
        """Check constructor arguments (called by ``fit`` and ``calibrate``)."""
        check_alpha(self.alpha, "alpha")
        check_int(getattr(self, "batch_size", None), "batch_size", allow_none=True)
        check_random_state_value(getattr(self, "random_state", None))
        check_n_jobs(getattr(self, "n_jobs", None))
        check_verbose(getattr(self, "verbose", False))

    # ---- the estimator ---------------------------------------------------------------
    def _estimator_or_default(self) -> BaseEstimator:
        return self._default_estimator() if self.estimator is None else self.estimator

    def __sklearn_tags__(self):
        return forward_input_tags(super().__sklearn_tags__(), self._estimator_or_default())

    def _validate_X(self, X: Any, *, reset: bool) -> Any:
        """Record or check the number and names of features; X itself is passed through."""
        return check_features(self, X, reset=reset)

    def _check_nan(self, X: Any) -> None:
        if refuses_nan(self.estimator_) and _has_nan(X):
            raise ValueError(
                f"`X` contains NaN and {type(self.estimator_).__name__} does not accept "
                "missing values: impute them (e.g. sklearn.impute.SimpleImputer in a Pipeline) "
                "or use a model that handles NaN, such as HistGradientBoosting."
            )

    @keeps_state_on_error
    def fit(self, X: Any, y: ArrayLike, **fit_params: Any) -> Self:
        """Fit a clone of ``estimator`` on training data.

        A ``FrozenEstimator`` is not refitted. Any previous calibration is discarded (a call
        that raises keeps it).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Training features, passed to the estimator unchanged.
        y : array-like of shape (n_samples,)
            Training targets.
        **fit_params : dict
            Passed to the estimator's ``fit`` (with scikit-learn's metadata routing on,
            those it requested, see `uqconform.routing`).

        Returns
        -------
        self
        """
        self._validate_params()
        model_params = self._model_fit_params(fit_params)
        self._reset_calibration()
        X = self._validate_X(X, reset=True)
        y = self._check_target(y, n_rows(X), calibrating=False)
        self.estimator_ = self._make_estimator()
        self._estimator_adopted = False
        self._check_nan(X)
        self.estimator_.fit(X, y, **model_params)
        self._after_fit(X, y, **fit_params)
        return self

    def _model_fit_params(self, fit_params: dict[str, Any]) -> dict[str, Any]:
        """The parameters of the estimator's ``fit`` (see `uqconform.routing`)."""
        return self._routed_fit_params(fit_params)["estimator"]

    def _make_estimator(self) -> BaseEstimator:
        """The unfitted model that ``fit`` trains: a clone of ``estimator`` (its unset
        seeds from ``random_state``)."""
        return seeded_clone(self._estimator_or_default(), getattr(self, "random_state", None))

    def _after_fit(self, X: Any, y: NDArray, **fit_params: Any) -> None:
        """Hook for extra training (difficulty estimators); default does nothing."""

    def _reset_calibration(self) -> None:
        for name in (
            "conformity_scores_",
            "calibration_strata_",
            "groups_",
            "n_calibration_",
            "_n_sub_strata",
            "_strata_sorting",
            "_last_threshold_table",
        ):
            self.__dict__.pop(name, None)

    def _prefit_estimator(self) -> BaseEstimator:
        """The fitted model adopted when ``calibrate`` comes without ``fit``."""
        if self.estimator is None:
            raise NotFittedError("no estimator")
        check_is_fitted(self.estimator)
        return self.estimator

    def _use_prefit_estimator(self) -> None:
        """Adopt ``estimator`` as is when ``calibrate`` comes without ``fit``."""
        try:
            prefit = self._prefit_estimator()
        except NotFittedError:
            raise NotFittedError(
                f"{type(self).__name__}.calibrate was called before fit and `estimator` is not "
                "fitted. Either call fit(X_train, y_train) first, or pass an already fitted "
                "model (optionally as sklearn.frozen.FrozenEstimator(model))."
            ) from None
        self.estimator_ = prefit
        self._estimator_adopted = True  # re-adopted at each calibrate, so set_params applies
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(prefit, name):
                setattr(self, name, getattr(prefit, name))
            else:
                self.__dict__.pop(name, None)

    # ---- calibration -----------------------------------------------------------------
    @keeps_state_on_error
    def calibrate(self, X: Any, y: ArrayLike, groups: ArrayLike | None = None) -> Self:
        """Compute conformity scores on calibration data held out from training.

        Without a prior ``fit``, a fitted ``estimator`` is used as is (never refitted).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Calibration features.
        y : array-like of shape (n_samples,)
            Calibration targets.
        groups : array-like of shape (n_samples,), optional
            Group label per row for Mondrian (group-conditional) calibration; the same
            argument must then be given at prediction.

        Returns
        -------
        self
        """
        X = self._start_calibration(X)
        n = n_rows(X)
        y = self._check_target(y, n, calibrating=True)
        group_labels = check_groups(groups, n)
        self._check_nan(X)
        self._store_calibration(X, y, group_labels)
        # Warn now, next to the cause, if a stratum is too small for the default level
        # (prediction warns again for the levels it is asked for); the table is kept.
        self._threshold_table(self._resolve_alpha(None)[0])
        return self

    def _start_calibration(self, X: Any) -> Any:
        """Check the parameters, adopt a fitted ``estimator`` if `fit` was not called (or
        adopted it before), drop the previous calibration, and validate ``X``."""
        self._validate_params()
        if not hasattr(self, "estimator_") or self.__dict__.get("_estimator_adopted", False):
            self._use_prefit_estimator()
        self._reset_calibration()
        return self._validate_X(X, reset=not hasattr(self, "n_features_in_"))

    def _store_calibration(self, X: Any, y: NDArray, group_labels: NDArray | None) -> None:
        """Score the (validated) calibration rows and record their groups and strata."""
        scores, sub_strata, n_sub = self._calibration_scores(X, y)
        if group_labels is None:
            strata = sub_strata
        else:
            self.groups_, group_index = np.unique(group_labels, return_inverse=True)
            strata = group_index * n_sub + sub_strata
        self.conformity_scores_ = scores
        record_calibration_settings(self)
        self.calibration_strata_ = strata
        self._n_sub_strata = n_sub
        n_strata = (1 if group_labels is None else self.groups_.size) * n_sub
        if n_strata > 1:  # sorted once here, not at every prediction
            self._strata_sorting = _sort_by_stratum(self.calibration_strata_, n_strata)
        self.n_calibration_ = int(y.shape[0])

    def _check_calibrated(self, method: str) -> None:
        check_is_fitted(self, "estimator_")
        if not hasattr(self, "conformity_scores_"):
            raise NotFittedError(
                f"{type(self).__name__}.{method} needs calibration: call "
                "calibrate(X_calib, y_calib) on held-out data first."
            )
        check_calibration_settings(self, method)

    def _group_index(self, groups: ArrayLike | None, n: int) -> NDArray | None:
        """Row -> calibration group (None without Mondrian groups).

        Groups unseen at calibration map to an extra, empty group: the whole output space.
        """
        labels = check_groups(groups, n)
        known = getattr(self, "groups_", None)
        if known is None:
            if labels is not None:
                raise ValueError(
                    "`groups` was given at prediction but not at calibration; calibrate "
                    "with groups=... to get group-conditional (Mondrian) sets."
                )
            return None
        if labels is None:
            raise ValueError(
                "The model was calibrated with `groups` (Mondrian calibration): pass the "
                "group of every row to this call as groups=..."
            )
        kinds = {known.dtype.kind, labels.dtype.kind}
        try:
            if kinds & set("US") and kinds & set("biuf"):  # strings against numbers
                raise TypeError
            position = np.searchsorted(known, labels)
        except TypeError:
            raise ValueError(
                f"`groups` at prediction ({labels.dtype}) cannot be compared with the groups "
                f"seen at calibration ({known.dtype}, e.g. {_plain(known[0])!r}): give the "
                "same kind of labels."
            ) from None
        position = np.minimum(position, known.size - 1)
        unseen = known[position] != labels
        if unseen.any():
            warn_user(
                f"{int(unseen.sum())} rows belong to groups without calibration data "
                f"(e.g. {_plain(labels[unseen][0])!r}); their sets are the whole output space.",
                UserWarning,
            )
            position = np.where(unseen, known.size, position)  # the empty extra group
        return position

    def _threshold_table(self, alphas: NDArray) -> NDArray:
        """Thresholds of shape ``(n_groups + 1, n_sub, c, k)``; the last group is empty.

        The last table is kept for the next call at the same levels (one-row predictions
        would otherwise recompute every stratum's quantiles); it is tied to the calibration
        arrays themselves, so a new calibration never reuses it.
        """
        scores = self.conformity_scores_
        key = (scores, self.__dict__.get("calibration_strata_"), alphas.tobytes())
        cached = self.__dict__.get("_last_threshold_table")
        if (
            cached is not None
            and cached[0] is key[0]
            and cached[1] is key[1]
            and cached[2] == key[2]
        ):
            table, too_few = cached[3], cached[4]
        else:
            table, too_few = self._compute_threshold_table(alphas)
            self._last_threshold_table = (*key, table, too_few)
        if too_few:
            n_groups = table.shape[0] - 1
            short = np.isinf(table[:-1]).any(axis=(0, 1, 2))  # the levels that lack points
            self._warn_too_few(too_few, alphas[short], n_groups)
        return table.copy()

    def _compute_threshold_table(self, alphas: NDArray) -> tuple[NDArray, dict[int, int]]:
        """The thresholds, and the strata (with their sizes) too small for some level."""
        scores = self.conformity_scores_
        scores2d = scores[:, None] if scores.ndim == 1 else scores
        n_components = scores2d.shape[1]
        n_groups = 1 if getattr(self, "groups_", None) is None else self.groups_.size
        n_sub = self._n_sub_strata
        table = np.full((n_groups + 1, n_sub, n_components, alphas.size), np.inf)
        n_strata = n_groups * n_sub
        order: slice | NDArray
        if n_strata == 1:  # plain split CP: every row, no sorting by stratum
            order, bounds = slice(None), np.array([0, scores2d.shape[0]])
        else:
            sorting = self.__dict__.get("_strata_sorting")
            if sorting is None:  # a model pickled before the sorting was stored
                sorting = _sort_by_stratum(self.calibration_strata_, n_strata)
            order, bounds = sorting
        too_few: dict[int, int] = {}
        for stratum in range(n_strata):  # a loop over strata, never over rows
            rows = (
                order
                if n_strata == 1
                else cast(NDArray, order)[bounds[stratum] : bounds[stratum + 1]]
            )
            for component in range(n_components):
                # An asymmetric score has one column per side, each calibrated at alpha/c.
                table[stratum // n_sub, stratum % n_sub, component] = conformal_quantile(
                    scores2d[rows, component], alphas / n_components, warn=False
                )
            if np.isinf(table[stratum // n_sub, stratum % n_sub]).any():
                too_few[stratum] = int(bounds[stratum + 1] - bounds[stratum])
        return table, too_few

    def _warn_too_few(self, too_few: dict[int, int], alphas: NDArray, n_groups: int) -> None:
        n_sub = self._n_sub_strata
        where = []
        for stratum, count in list(too_few.items())[:3]:
            parts = []
            if n_groups > 1 or getattr(self, "groups_", None) is not None:
                parts.append(f"group {_plain(self.groups_[stratum // n_sub])!r}")
            if n_sub > 1:
                parts.append(f"class {_plain(self.classes_[stratum % n_sub])!r}")
            where.append(f"{' / '.join(parts) or 'calibration set'} ({count} points)")
        consequence = (
            "that class is in every prediction set (its threshold is infinite)"
            if n_sub > 1
            else "those sets are the whole output space (infinite interval, every class)"
        )
        warn_user(
            f"Too few calibration points for alpha={alphas.tolist()} in "
            f"{', '.join(where)}{' ...' if len(too_few) > 3 else ''}: at least "
            f"ceil((n + 1)(1 - alpha)) <= n is needed, so {consequence}.",
            UserWarning,
        )

    # ---- prediction ------------------------------------------------------------------
    def _resolve_alpha(
        self, alpha: float | Sequence[float] | ArrayLike | None
    ) -> tuple[NDArray, bool]:
        value = self.alpha if alpha is None else alpha
        levels = check_alpha(value, "alpha")
        return levels, np.ndim(value) == 0

    def _batch_rows(self, n: int) -> int:
        """Rows per model call: ``batch_size``, or automatic (see the constants above)."""
        if self.batch_size is not None:
            return int(self.batch_size)
        columns = max(1, self._output_columns())
        if n * columns <= _ONE_BATCH_CELLS:
            return max(n, 1)
        rows = -(-n // _BATCHES_PER_CALL)
        return int(np.clip(rows, _MIN_BATCH_CELLS // columns, _MAX_BATCH_CELLS // columns))

    def _rng(self, stream: int, content: Any = None) -> np.random.Generator:
        """Independent generator per use (0: calibration, 1: prediction), fixed by the seed.

        ``content`` (the rows being predicted) enters the seed: see `seeded_generator`.
        """
        seed = self.random_state
        if isinstance(seed, np.random.Generator):
            return seed
        if isinstance(seed, np.random.RandomState):
            seed = int(seed.randint(np.iinfo(np.int32).max))
        if seed is None:
            return np.random.default_rng()
        return seeded_generator(int(seed), stream, content)

    def _draws_at_prediction(self) -> bool:
        """Whether predictions use random draws (then the rows are hashed into the seed)."""
        return False

    def _predict_batched(
        self,
        X: Any,
        alpha: float | Sequence[float] | ArrayLike | None,
        groups: ArrayLike | None,
        shape: tuple[int, ...],
        dtype: type,
        method: str,
    ) -> NDArray:
        self._check_calibrated(method)
        alphas, scalar = self._resolve_alpha(alpha)
        X = row_sliceable(self._validate_X(X, reset=False))
        n = n_rows(X)
        group_index = self._group_index(groups, n)
        table = self._threshold_table(alphas)
        rng = self._rng(stream=1, content=X if self._draws_at_prediction() else None)
        step = self._batch_rows(n)
        # one batch: its prediction is the result (no second full-size buffer to copy into)
        out: NDArray | None = (
            None if step >= n else np.empty((n, *shape, alphas.size), dtype=dtype)
        )
        for start in range(0, n, step):  # a loop over batches of rows, for bounded memory
            stop = min(start + step, n)
            block = slice_rows(X, start, stop)
            self._check_nan(block)
            # Without groups every row shares one threshold row: pass it once, broadcastable.
            rows = table[:1] if group_index is None else table[group_index[start:stop]]
            batch = self._predict_batch(block, rows, alphas, rng)
            if out is None:
                out = batch
            else:
                out[start:stop] = batch
        assert out is not None  # X has at least one row (check_features), so one batch ran
        return out[..., 0] if scalar else out

    def predict(self, X: Any) -> NDArray:
        """Point prediction of the wrapped model (available after ``fit`` alone).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        check_is_fitted(self, "estimator_")
        X = self._validate_X(X, reset=False)
        return self.estimator_.predict(X)


def seed_parameters(estimator: Any, only_unset: bool = False) -> list[str]:
    """Names of every ``random_state`` parameter, nested ones (Pipeline steps) included.

    With ``only_unset``, only those still ``None`` (the ones a library seed may fill in
    without overriding the user's choice).

    Examples
    --------
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> seed_parameters(make_pipeline(StandardScaler(), RandomForestRegressor()))
    ['randomforestregressor__random_state']
    """
    params = estimator.get_params(deep=True)
    return [
        name
        for name, value in params.items()
        if (name == "random_state" or name.endswith("__random_state"))
        and (value is None or not only_unset)
    ]


def seeded_clone(estimator: Any, random_state: Any) -> Any:
    """A clone of ``estimator`` whose ``random_state`` parameters left at None are seeded.

    A wrapper's seed then also fixes the models it trains (same seed, same numbers, also
    around an unseeded random forest); each unset parameter gets its own seed, seeds the
    user set are kept, and ``random_state=None`` changes nothing. A Generator or
    RandomState ``random_state`` gives one draw when some parameter is unset.

    Examples
    --------
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> a, b = seeded_clone(RandomForestRegressor(), 3), seeded_clone(RandomForestRegressor(), 3)
    >>> a.random_state == b.random_state is not None
    True
    >>> seeded_clone(RandomForestRegressor(random_state=1), 3).random_state
    1
    """
    model = clone(estimator)
    if random_state is None or not hasattr(model, "get_params"):
        return model
    unset = seed_parameters(model, only_unset=True)
    if unset:  # one seed each: two unseeded members of an ensemble stay independent
        seeds = np.random.default_rng(integer_seed(random_state)).integers(2**31, size=len(unset))
        model.set_params(**{name: int(seed) for name, seed in zip(unset, seeds, strict=True)})
    return model


def seeded_generator(
    seed: int, stream: int | Sequence[int], content: Any = None
) -> np.random.Generator:
    """The generator of one use of a seed, its draws tied to the rows they serve.

    With ``content`` (the rows of a prediction call) a hash of the rows joins the seed.
    Predicting the same rows again gives the same draws (predictions stay a function of
    the input), while other rows, such as one row per call, get fresh ones: a fixed seed
    restarted at every call would give each single-row call the same uniform, and the
    coverage of a row-by-row run would stray far from the nominal level.

    Examples
    --------
    >>> rows = np.arange(6.0).reshape(3, 2)
    >>> same = seeded_generator(0, 1, rows).random() == seeded_generator(0, 1, rows).random()
    >>> other = seeded_generator(0, 1, rows).random() != seeded_generator(0, 1, rows[:1]).random()
    >>> bool(same and other)
    True
    """
    entropy = [int(seed), *(int(word) for word in np.atleast_1d(stream))]
    if content is not None:
        digest = _rows_digest(content)
        entropy += [int(digest[i : i + 8], 16) for i in range(0, len(digest), 8)]
    return np.random.default_rng(entropy)


#: Rows hashed at a time by `_rows_digest` (bounded memory on millions of rows).
_HASH_ROWS = 16_384


def _rows_digest(content: Any) -> str:
    """A digest of the values of some rows, whatever their container and memory layout.

    Rows of a table (a DataFrame, a 2-D array or a list of rows) are hashed by value, one
    block of rows at a time, ignoring the index, column names and memory order; a sparse
    matrix by its canonical CSR arrays: the same values in a DataFrame with another index,
    a Fortran-ordered array or a list give the same digest, and so do the same numbers in
    any numeric dtype (``3`` and ``3.0``, nullable pandas columns, object arrays). A sparse
    matrix and its dense copy differ (hashing the dense rows of a wide sparse matrix would
    cost ``n x p``).
    """
    if sparse.issparse(content):
        rows = sparse.csr_matrix(content, copy=True)
        rows.sum_duplicates()
        rows.sort_indices()
        return joblib.hash((rows.shape, rows.data, rows.indices, rows.indptr))
    try:
        numbers_only = float_values(content)
    except (ValueError, TypeError):  # ragged rows
        numbers_only = None
    if numbers_only is not None:  # the same numbers in any dtype give the same digest
        content = numbers_only
    if not hasattr(content, "iloc"):
        try:
            content = np.asarray(content)
        except ValueError:  # ragged rows: hash them as given
            return joblib.hash(content)
        if content.ndim != 2:
            return joblib.hash(np.ascontiguousarray(content))
    digest = hashlib.md5(str(np.shape(content)).encode(), usedforsecurity=False)
    for start in range(0, np.shape(content)[0], _HASH_ROWS):  # a loop over row blocks
        rows = slice_rows(content, start, start + _HASH_ROWS)
        block = pd.DataFrame(rows)
        block = block.set_axis(range(block.shape[1]), axis=1)
        try:
            values = pd.util.hash_pandas_object(block, index=False).to_numpy().tobytes()
        except TypeError:  # cells pandas cannot hash (lists, dicts): joblib's hash
            values = joblib.hash(rows).encode()
        digest.update(values)
    return digest.hexdigest()


def integer_seed(random_state: Any) -> int | None:
    """An int seed (or None) from ``random_state``: an int, None, a Generator or RandomState.

    A generator gives one draw, so a seeded generator still gives reproducible results.
    Anything else (a negative int, a string) is refused with a message naming it.
    """
    check_random_state_value(random_state)
    if random_state is None or isinstance(random_state, numbers.Integral):
        return None if random_state is None else int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**31))
    return int(random_state.randint(2**31 - 1))  # a RandomState (checked above)


def check_random_state_value(random_state: Any) -> None:
    """``random_state`` is None, a non-negative int, a Generator or a RandomState.

    Examples
    --------
    >>> check_random_state_value(0)
    >>> check_random_state_value(1.5)
    Traceback (most recent call last):
    ...
    ValueError: `random_state` must be None, an int in [0, 2**32), ... got 1.5.
    """
    if random_state is None or isinstance(
        random_state, (np.random.Generator, np.random.RandomState)
    ):
        return
    if (
        isinstance(random_state, bool)
        or not isinstance(random_state, numbers.Integral)
        or not 0 <= cast(int, random_state) < 2**32
    ):
        raise ValueError(
            "`random_state` must be None, an int in [0, 2**32), a numpy Generator or a "
            f"RandomState, got {random_state!r}."
        )


def random_generator(random_state: Any) -> np.random.Generator:
    """``random_state`` as a numpy Generator, with a message naming it when numpy cannot
    use it: None, a non-negative int or sequence of them, a SeedSequence, a BitGenerator,
    a Generator or a RandomState (booleans, floats and text are refused).

    Examples
    --------
    >>> bool(random_generator(0).integers(10) == random_generator(0).integers(10))
    True
    >>> bool(random_generator([0, 11]).random() == random_generator([0, 11]).random())
    True
    """
    message = (
        "`random_state` must be None, a non-negative int (or a sequence of them), a "
        f"SeedSequence, a BitGenerator, a Generator or a RandomState, got {random_state!r}."
    )
    if isinstance(random_state, bool | float | str | bytes | np.bool_ | np.floating):
        raise ValueError(message)
    try:
        return np.random.default_rng(random_state)
    except (TypeError, ValueError):
        raise ValueError(message) from None


def check_bool(value: Any, name: str) -> None:
    """``value`` must be True or False (a numpy bool too): a string such as ``"no"`` is
    refused rather than read as True.

    Examples
    --------
    >>> check_bool(True, "randomized")
    >>> check_bool("no", "randomized")
    Traceback (most recent call last):
    ...
    ValueError: `randomized` must be True or False, got 'no'.
    """
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"`{name}` must be True or False, got {value!r}.")


def check_n_jobs(n_jobs: Any) -> None:
    """``n_jobs`` must be None or a non-zero integer (joblib's convention: -1 is every CPU).

    Examples
    --------
    >>> check_n_jobs(-1)
    >>> check_n_jobs(0)
    Traceback (most recent call last):
    ...
    ValueError: `n_jobs` must be None or a non-zero integer (-1: every CPU), got 0.
    """
    if n_jobs is not None and (
        isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0
    ):
        raise ValueError(
            f"`n_jobs` must be None or a non-zero integer (-1: every CPU), got {n_jobs!r}."
        )


def check_verbose(verbose: Any) -> None:
    """``verbose`` must be True/False or a non-negative integer (a string is refused).

    Examples
    --------
    >>> check_verbose(True)
    >>> check_verbose("False")
    Traceback (most recent call last):
    ...
    ValueError: `verbose` must be True, False or an integer >= 0, got 'False'.
    """
    if isinstance(verbose, bool | np.bool_):
        return
    if not isinstance(verbose, numbers.Integral) or verbose < 0:
        raise ValueError(f"`verbose` must be True, False or an integer >= 0, got {verbose!r}.")


def check_positive_float(value: Any, name: str) -> float:
    """``value`` as a float if it is a finite number > 0 (booleans refused), else a
    ``ValueError`` naming the parameter.

    Examples
    --------
    >>> check_positive_float(0.5, "noise")
    0.5
    """
    return _check_finite_number(value, name, zero_allowed=False)


def check_nonnegative_float(value: Any, name: str) -> float:
    """``value`` as a float if it is a finite number >= 0 (booleans refused), else a
    ``ValueError`` naming the parameter.

    Examples
    --------
    >>> check_nonnegative_float(0, "noise")
    0.0
    """
    return _check_finite_number(value, name, zero_allowed=True)


def _check_finite_number(value: Any, name: str, *, zero_allowed: bool) -> float:
    if isinstance(value, np.ndarray) and value.ndim == 0:  # a 0-d array is a number
        value = value.item()
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not np.isfinite(cast(float, value))
        or (value < 0 if zero_allowed else value <= 0)
    ):
        bound = ">= 0" if zero_allowed else "> 0"
        raise ValueError(f"`{name}` must be a finite number {bound}, got {value!r}.")
    return float(value)


@overload
def check_int(
    value: Any, name: str, low: int = 1, *, allow_none: Literal[False] = False
) -> int: ...
@overload
def check_int(value: Any, name: str, low: int = 1, *, allow_none: bool) -> int | None: ...
def check_int(value: Any, name: str, low: int = 1, *, allow_none: bool = False) -> int | None:
    """``value`` as an ``int`` if it is an integer >= ``low`` (booleans refused; None passes
    when ``allow_none``), else a ``ValueError`` naming the parameter.

    Examples
    --------
    >>> check_int(3, "n_samples")
    3
    >>> check_int(None, "batch_size", allow_none=True) is None
    True
    >>> check_int(-1, "k_reg", low=0)
    Traceback (most recent call last):
    ...
    ValueError: `k_reg` must be a non-negative integer, got -1.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(
            low, f"an integer >= {low}"
        )
        raise ValueError(
            f"`{name}` must be {'None or ' if allow_none else ''}{kind}, got {value!r}."
        )
    return int(value)


def check_class_labels(y: ArrayLike, n: int, name: str = "y", rows_of: str = "X") -> NDArray:
    """Class labels, one per row of X: no None, NaN or infinite label.

    Examples
    --------
    >>> check_class_labels(["a", "b"], 2)
    array(['a', 'b'], dtype='<U1')
    """
    if y is None:
        raise _y_is_none()
    labels = check_rows(name, y, n, rows_of)
    if labels.dtype.kind == "f" and not np.isfinite(labels).all():
        raise ValueError(f"`{name}` contains NaN or infinite labels.")
    if labels.dtype.kind == "O":
        if pd.isna(labels).any():  # None, NaN, pd.NA (nullable or categorical labels)
            raise ValueError(f"`{name}` contains missing (None or NaN) labels.")
        _refuse_unorderable(labels, name)
    return labels


def check_regression_target(y: ArrayLike, n: int, name: str = "y", rows_of: str = "X") -> NDArray:
    """A finite 1-D float target with one value per row of X (messages name ``name`` and
    ``rows_of``).

    A column vector ``(n, 1)`` is flattened with a ``DataConversionWarning`` (the
    scikit-learn convention); wider targets are refused: they need a multi-output method.
    """
    if y is None:
        raise _y_is_none()
    target = np.asarray(y)
    if target.ndim == 2 and target.shape[1] == 1:
        _warn_column_vector()
        target = target[:, 0]
    if target.ndim != 1:
        raise ValueError(
            f"`{name}` must be 1-D for a scalar regressor, got shape {target.shape}; for several "
            "outputs use the regions of uqconform.multioutput."
        )
    if target.shape[0] != n:
        raise ValueError(f"`{name}` has {target.shape[0]} entries but {rows_of} has {n} rows.")
    if target.dtype.kind == "c":
        raise ValueError(
            f"Complex data not supported: `{name}` must be real for a scalar regressor."
        )
    try:
        target = np.asarray(target, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"`{name}` must be numeric for regression.") from None
    if not np.isfinite(target).all():
        raise ValueError(
            f"`{name}` contains {int((~np.isfinite(target)).sum())} NaN or infinite values; "
            "remove or impute those rows first."
        )
    return target
