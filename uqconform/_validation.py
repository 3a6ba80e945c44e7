"""Input checks shared by every public entry point: each failure names the argument.

Targets (`check_regression_target`, `check_class_labels`), per-row arrays
(`check_rows`, `check_groups`), features (`check_features`) and settings (`check_int`,
`check_positive_float`, `check_bool`, ...).
"""

from __future__ import annotations

import inspect
import numbers
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, cast, overload

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from sklearn.base import BaseEstimator
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.utils import get_tags
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from uqconform._rows import n_rows
from uqconform._warnings import warn_user


def check_rows(name: str, values: ArrayLike, n: int, rows_of: str = "X") -> NDArray:
    """1-D array of length ``n`` (``y`` or ``groups``), with a message naming the argument
    (and ``rows_of``, what the rows belong to).

    A column vector ``(n, 1)`` is flattened (with a ``DataConversionWarning`` for ``y``, the
    scikit-learn convention).
    """
    if values is None and name == "y":
        raise missing_target_error()
    array = np.asarray(values)
    if (
        array.dtype.kind in "US"
        and not isinstance(values, np.ndarray)
        and pd.api.types.infer_dtype(values, skipna=False) not in ("string", "bytes")
    ):  # numpy reads [1, "1"] as two equal strings: keep the entries as given
        array = np.asarray(values, dtype=object)
    if array.ndim == 0:
        hint = f" For one row, pass a list holding its entry: {name}=[{values!r}]."
        if isinstance(values, str):
            hint += f" To use a column of X, pass the column itself: {name}=X[{values!r}]."
        raise ValueError(
            f"`{name}` must be an array with one entry per row, got a scalar ({values!r}).{hint}"
        )
    if array.ndim == 2 and array.shape[1] == 1:
        if name == "y":
            _warn_column_vector()
        array = array[:, 0]
    if array.ndim != 1:
        hint = ""
        if name == "groups" and array.ndim == 2:  # several columns (or pairs) per row
            hint = (
                " To group by several columns, combine them into one label per row, e.g. "
                'groups=df["a"].astype(str) + "|" + df["b"].astype(str), or an Index of '
                'tuples: pd.MultiIndex.from_frame(df[["a", "b"]]).to_flat_index() (a plain '
                "list of tuples reads as columns)."
            )
        raise ValueError(f"`{name}` must be 1-D, got an array of shape {array.shape}.{hint}")
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
    values = model_output_as_float(output)  # tensors, sparse, pd.NA: float64
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise ValueError(
            f"`{name}` predicts an array of shape {values.shape}; a scalar regressor "
            "must predict shape (n,). For several outputs use uqconform.multioutput."
        )
    return values


def _indexed_by_the_features(estimator: Any, X: pd.Series) -> bool:
    """Whether the Series ``X`` is indexed by the column labels ``estimator`` was fitted on:
    ``df.iloc[i]``, one row of a frame, of any dtype."""
    names = getattr(estimator, "feature_names_in_", None)
    if names is None:
        names = getattr(estimator, "_column_labels_in", None)
    try:
        return names is not None and len(names) == X.size and bool((X.index == names).all())
    except (TypeError, ValueError):  # labels that cannot be compared
        return False


def feature_axis_hint(X: Any) -> str:
    """What to say of an ``X`` of more than two dimensions whose feature count is wrong:
    scikit-learn counts features on the second axis, whatever the array's rank."""
    return (
        f"`X` is a {np.ndim(X)}-D array of shape {np.shape(X)}: the features are counted on "
        "its second axis; pass one row per sample with the fit's features as columns."
    )


def float_rows_without_nan(estimator: Any, X: Any, why: str, remedy: str, **kwargs: Any) -> Any:
    """``X`` as C-ordered floats (a DataFrame and its array give the same bits), with NaN
    or infinite values refused by a message saying why ``estimator`` cannot take them
    (``why``) and what to do (``remedy``), not scikit-learn's advice to switch to a model
    that takes NaN. ``kwargs`` go to scikit-learn's ``check_array`` (``accept_sparse``).
    """
    try:
        return check_array(
            X, dtype=float, order="C", estimator=estimator, input_name="X", **kwargs
        )
    except ValueError as error:
        if "NaN" not in str(error) and "infinity" not in str(error):
            raise
        raise ValueError(
            f"`X` contains NaN or infinite values: {type(estimator).__name__} {why}, which "
            f"cannot take them. Impute or drop them first (e.g. {remedy})."
        ) from None


#: What a column of each of pandas' inferred types holds, in the messages.
_COLUMN_KINDS = {
    "string": "text",
    "bytes": "text",
    "categorical": "categories",
    "datetime64": "dates",
    "datetime": "dates",
    "date": "dates",
    "period": "dates",
    "timedelta64": "durations",
    "timedelta": "durations",
}
#: How numpy and scikit-learn say that features could not be read as numbers.
_CONVERSION_FAILURES = (
    "could not convert",
    "float() argument",
    "could not be promoted",
    "cannot cast",
    "unable to convert",
    "arrays of bytes/strings",
)


def non_numeric_columns(X: Any) -> list[tuple[Any, str]]:
    """The columns of ``X`` holding text, categories, dates or durations, as (name, kind)
    pairs: a DataFrame's names, else positions; kinds "text", "categories", "dates" or
    "durations". Empty when ``X`` is not a table or all its columns read as numbers
    (numbers held as objects or as text, such as ``"1.5"``, do). Other objects (a dict in
    a cell) are not named: the model's message about them stands.

    Examples
    --------
    >>> frame = pd.DataFrame({"a": [1.0, 2.0], "city": ["Oslo", "Rome"], "n": ["1", "2"]})
    >>> non_numeric_columns(frame)
    [('city', 'text')]
    """
    kind = getattr(getattr(X, "dtype", None), "kind", "O")
    if sparse.issparse(X) or kind in "biufcmM":  # (numpy dates: the model's own reading)
        return []
    if isinstance(X, pd.DataFrame):
        columns = [
            (X.columns[j], X.iloc[:, j])
            for j, dtype in enumerate(X.dtypes)
            if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype))
        ]
    else:
        try:
            array = np.asarray(X)
        except (TypeError, ValueError):  # ragged rows, say
            return []
        if array.ndim != 2:
            return []
        columns = list(enumerate(array.T))
    found = []
    for name, values in columns:  # a loop over the columns that are not numeric dtypes
        if values.dtype.kind not in "mM":  # (dates and durations convert: to nanoseconds)
            try:
                np.asarray(values, dtype=np.float64)
                continue
            except (TypeError, ValueError):
                pass
        if isinstance(values.dtype, pd.CategoricalDtype):
            found.append((name, "categories"))
            continue
        inferred = pd.api.types.infer_dtype(values, skipna=True)
        if inferred.startswith("mixed"):  # text among numbers: a stray value, not codes
            stray = next((v for v in values if isinstance(v, (str, bytes))), None)
            if stray is not None:  # (a loop over the rows, on the error path only)
                found.append((name, f"numbers and text such as {stray!r}"))
            continue
        if inferred in _COLUMN_KINDS:
            found.append((name, _COLUMN_KINDS[inferred]))
    return found


def refuse_unencoded_features(X: Any, model: Any, error: Exception) -> None:
    """Re-raise ``error``, raised by ``model`` reading ``X``, as the message naming the
    columns of ``X`` that are not numbers and the encoding to use
    (`refuse_non_numeric_features`); return (the caller re-raises ``error``) when
    ``model`` is a Pipeline of several steps, which may encode columns itself (its own
    message stands), or when every column is a number."""
    inner = model.estimator if isinstance(model, FrozenEstimator) else model
    steps = getattr(inner, "steps", None)
    if isinstance(steps, list) and len(steps) > 1:
        return
    who = "`estimator`" + (
        "" if isinstance(model, (list, tuple)) else f" ({type(model).__name__})"
    )
    refuse_non_numeric_features(X, who, error=error)


@contextmanager
def reading_features(X: Any, model: Any) -> Iterator[None]:
    """Context of ``model``'s (or its clones') calls on ``X``: a failure to read columns of
    ``X`` that are not numbers is re-raised naming them (`refuse_unencoded_features`)."""
    try:
        yield
    except (TypeError, ValueError) as error:
        refuse_unencoded_features(X, model, error)
        raise


def refuse_sparse_columns(X: Any, who: str) -> None:
    """Raise a TypeError when every column of a DataFrame ``X`` is a pandas sparse column,
    which ``who`` reads as dense numbers (scikit-learn reads such a frame as a sparse
    matrix, and its message advises ``.toarray()``, which a DataFrame lacks; a frame
    mixing sparse and dense columns it makes dense); return otherwise.

    Examples
    --------
    >>> frame = pd.DataFrame({"a": pd.arrays.SparseArray([0.0, 1.0])})
    >>> refuse_sparse_columns(frame, "FullConformalRidge")
    Traceback (most recent call last):
    ...
    TypeError: `X` has only pandas sparse columns (['a']), which FullConformalRidge reads ...
    """
    if not isinstance(X, pd.DataFrame):
        return
    columns = [name for name, dtype in X.dtypes.items() if isinstance(dtype, pd.SparseDtype)]
    if columns and len(columns) == X.shape[1]:  # (scikit-learn makes a mixed frame dense)
        shown = repr(columns[:5])[:-1] + (", ...]" if len(columns) > 5 else "]")
        raise TypeError(
            f"`X` has only pandas sparse columns ({shown}), which {who} reads as dense "
            "numbers: pass X.sparse.to_dense()."
        )


def refuse_non_numeric_features(
    X: Any,
    who: str,
    where: Literal["estimator", "pipeline", "before"] = "estimator",
    error: BaseException | None = None,
) -> None:
    """Raise a ValueError naming ``X``, its columns that are not numbers and what to do,
    when it has any (`non_numeric_columns`); return otherwise.

    Given the ``error`` of a model that failed to read ``X``, the ValueError is raised
    from it, and only when that error is a failure to read numbers (numpy's "could not
    convert string to float", a ``DTypePromotionError`` for dates...): a model's other
    errors keep their message. ``who`` names what cannot take the columns; ``where`` says
    where to encode them: in the ``estimator`` (a pipeline step, or a model that takes
    categories), in a ``pipeline`` step before the model, or ``before`` calling the
    library's own model.

    Examples
    --------
    >>> frame = pd.DataFrame({"a": [1.0, 2.0], "city": ["Oslo", "Rome"]})
    >>> refuse_non_numeric_features(frame, "FullConformalRidge", "before")
    Traceback (most recent call last):
    ...
    ValueError: `X` has columns that are not numbers, which FullConformalRidge cannot ...
    """
    if error is not None:
        text = str(error).lower()
        promotion = getattr(np.exceptions, "DTypePromotionError", ())
        if not isinstance(error, promotion) and not any(s in text for s in _CONVERSION_FAILURES):
            return
    columns = non_numeric_columns(X)
    if not columns:
        return
    shown = ", ".join(f"{name!r} ({kind})" for name, kind in columns[:6])
    if len(columns) > 6:
        shown += f" and {len(columns) - 6} more"
    codes = [name for name, kind in columns if kind in ("text", "categories")]
    mixed = [name for name, kind in columns if kind.startswith("numbers and text")]
    steps = (
        "make_pipeline(ColumnTransformer([('codes', OneHotEncoder(handle_unknown='ignore'), "
        f"{codes[:6]!r})], remainder='passthrough'), <model>)"
    )
    remedy = ""
    if codes and where == "estimator":
        remedy = (
            f" Encode them in the `estimator`: e.g. {steps}, or a model that takes "
            "categories, such as HistGradientBoostingRegressor (or ...Classifier) with "
            "categorical_features='from_dtype' and those columns as dtype 'category'."
        )
    elif codes and where == "pipeline":
        remedy = f" Encode them as numbers in a pipeline step before the model: e.g. {steps}."
    elif codes:
        remedy = (
            " Encode them as numbers first: e.g. pd.get_dummies(X, columns=[...]) or "
            "sklearn.preprocessing.OneHotEncoder."
        )
    if mixed:
        remedy += (
            " Columns of numbers holding a stray text value (a missing-value marker?) must "
            "be cleaned: e.g. pd.to_numeric(X[column], errors='coerce'), then impute."
        )
    if len(codes) + len(mixed) < len(columns):
        remedy += (
            " Dates and durations must become numbers first: e.g. days since a start date, "
            "or the year and the month as columns."
        )
    kind = TypeError if isinstance(error, TypeError) else ValueError  # the model's class
    raise kind(
        f"`X` has columns that are not numbers, which {who} cannot take: {shown}.{remedy}"
    ) from error


def check_features(estimator: BaseEstimator, X: Any, *, reset: bool) -> Any:
    """Record (``reset=True``) or check the number and names of ``X``'s features.

    ``X`` itself is passed through (the wrapped model does its own conversion; an array
    given to a wrapper fitted on a DataFrame gets the fit's column names); ``None``,
    scalars, 1-D numeric arrays and inputs without rows are refused with a message naming
    `X`.
    """
    if X is None:
        raise ValueError("`X` is None; pass an array or DataFrame with one row per sample.")
    if not hasattr(X, "shape") and not isinstance(X, (list, tuple)) and hasattr(X, "__array__"):
        X = np.asarray(X)  # array-likes without len() or slicing
    if getattr(X, "ndim", None) == 0 or isinstance(X, (numbers.Number, str, bytes)):
        raise ValueError("`X` must be 2-D (one row per sample), got a scalar.")
    if isinstance(X, dict) and not sparse.issparse(X):  # {column: value}: a row, or columns
        # (a sparse dok_matrix is a dict too)
        raise ValueError(
            "`X` must be rows of features (an array or DataFrame), got a dict: wrap it as "
            "pd.DataFrame([row]) for one row, or pd.DataFrame(columns) for columns."
        )
    kind = getattr(getattr(X, "dtype", None), "kind", None)
    if isinstance(X, (list, tuple)) and len(X) and isinstance(X[0], (list, tuple, complex)):
        try:  # rows as lists: one conversion tells (the model converts them anyway)
            kind = "c" if np.iscomplexobj(np.asarray(X)) else kind
        except ValueError:  # ragged rows: the model's own message
            pass
    if kind == "c" or (isinstance(X, pd.DataFrame) and any(d.kind == "c" for d in X.dtypes)):
        raise ValueError(  # scikit-learn's message goes on to print the whole array
            "Complex data not supported: `X` holds complex numbers, and the models take real "
            "features; pass the real part (X.real), the modulus (np.abs(X)) or both as "
            "separate columns."
        )
    flat = X if isinstance(X, np.ndarray) else None
    if isinstance(X, (list, tuple)) and len(X) and isinstance(X[0], (numbers.Number, np.bool_)):
        flat = np.asarray(X)  # a list of numbers: one feature, or one sample
    elif isinstance(X, pd.api.extensions.ExtensionArray) and (
        pd.api.types.is_numeric_dtype(X.dtype) or pd.api.types.is_bool_dtype(X.dtype)
    ):  # a nullable array: as floats (older pandas give objects)
        flat = X.to_numpy(dtype=float, na_value=np.nan)
    if flat is not None and flat.ndim == 1 and flat.dtype.kind in "biufc":
        raise ValueError(
            f"`X` must be 2-D (one row per sample), got a 1-D array of shape {flat.shape}. "
            "Reshape your data either using X.reshape(-1, 1) if it has a single feature "
            "or X.reshape(1, -1) if it is a single sample."
        )
    if isinstance(X, pd.Series) and (  # df.iloc[i]: one row as a Series (or one column)
        pd.api.types.is_numeric_dtype(X.dtype)
        or pd.api.types.is_bool_dtype(X.dtype)
        or _indexed_by_the_features(estimator, X)  # a row of a mixed-type frame
    ):  # (a Series of documents for a text pipeline passes, as 1-D text arrays do)
        raise ValueError(
            f"`X` must be 2-D (one row per sample), got a pandas Series of length {X.size}: "
            "for one row of a DataFrame use df.iloc[[i]] (double brackets), for one feature "
            "X.to_frame()."
        )
    if isinstance(X, (list, tuple)) and len(X) == 0:  # before scikit-learn's IndexError
        raise ValueError("`X` has no rows.")
    try:
        validate_data(estimator, X, skip_check_array=True, reset=reset)
    except ValueError as error:
        ndim = getattr(X, "ndim", 2)
        if reset or ndim == 2:
            raise
        hint = (
            feature_axis_hint(X)
            if ndim > 2
            else f"`X` must be 2-D (one row per sample), got shape {np.shape(X)}."
        )
        raise ValueError(f"{str(error).rstrip('.')}. {hint}") from None
    if n_rows(X) == 0:
        raise ValueError("`X` has no rows.")
    _check_unnamed_columns(estimator, X, reset=reset)
    names = getattr(estimator, "feature_names_in_", None)
    if not reset and names is not None and isinstance(X, np.ndarray) and X.ndim == 2:
        # fitted on named columns, given an array: scikit-learn warned once above; the
        # models inside (25 bootstrap models, K fold models) get the fit's names, instead
        # of each warning again
        X = pd.DataFrame(X, columns=names, copy=False)
    return X


def _check_unnamed_columns(estimator: Any, X: Any, *, reset: bool) -> None:
    """Record (``reset``) or check a DataFrame's column labels that scikit-learn does not
    record as feature names (it records text only): integers (``pd.DataFrame(array)``),
    floats (wavelengths), timestamps (columns pivoted by date). A later frame whose labels
    reorder those recorded at the fit is refused, since column ``j`` is read as feature
    ``j`` (``X[[2, 1, 0]]`` gave each feature another's values silently); one with other
    labels of the same count gets a warning. Nothing is checked when the fit recorded none
    (an array, text names, a model adopted fitted, an older pickle)."""
    columns = getattr(X, "columns", None)
    labels = None
    if isinstance(columns, pd.MultiIndex):  # (pivot tables): its tuples
        columns = columns.to_flat_index()
    if (
        isinstance(columns, pd.Index)
        and len(columns)
        and not any(isinstance(label, str) for label in columns)  # scikit-learn's names
        and not columns.hasnans
        and columns.is_unique
    ):
        labels = columns.tolist()
    if reset:
        if labels is None:
            estimator.__dict__.pop("_column_labels_in", None)
        else:
            estimator.__dict__["_column_labels_in"] = labels
        return
    seen = estimator.__dict__.get("_column_labels_in")
    if labels is None or seen is None or getattr(estimator, "feature_names_in_", None) is not None:
        return
    if len(seen) != len(labels) or labels == list(seen):
        return  # another width: scikit-learn names it

    def shown(values: list[Any]) -> str:
        text = [str(_plain(value)) for value in values[:6]]
        return "[" + ", ".join(text) + (", ...]" if len(values) > 6 else "]")

    if set(labels) == set(seen):
        numbers_only = all(
            isinstance(label, (int, float)) and not isinstance(label, bool) for label in seen
        )
        order = str(list(seen)) if numbers_only and len(seen) <= 6 else "<the fit's columns>"
        raise ValueError(
            f"`X` has the column labels {shown(labels)} in another order than at the fit "
            f"({shown(list(seen))}): columns are read by position, so each feature would "
            f"get another's values. Pass the columns in the order of the fit, X[{order}]."
        )
    warn_user(
        f"`X` has the column labels {shown(labels)}, not those of the fit "
        f"({shown(list(seen))}): columns are read by position, as at the fit; check that "
        "they are the same features in the same order.",
        UserWarning,
    )


def frame_as_numbers(Y: Any, name: str = "Y") -> Any:
    """A DataFrame ``Y`` checked column by column (text, booleans, dates named with their
    column) and its nullable columns as floats (``pd.NA`` a missing value); anything else
    as given."""
    if not isinstance(Y, pd.DataFrame):
        return Y
    for column in Y.columns:  # a loop over the few outputs
        refuse_non_number_kinds(Y[column].to_numpy(), name, f" column {column!r}")
    floats = nullable_as_float(Y)
    return Y if floats is None else floats


def nullable_as_float(frame: pd.DataFrame) -> NDArray | None:
    """A frame with nullable numeric columns (``Float64``, ``Int64``, ``boolean``) as a float
    array with ``pd.NA`` as NaN, which the checks then name as a missing value; None for
    any other frame (its own conversion applies).

    Examples
    --------
    >>> import pandas as pd
    >>> nullable_as_float(pd.DataFrame({"a": pd.array([1, None], dtype="Int64")}))
    array([[ 1.],
           [nan]])
    """
    kinds = list(frame.dtypes)
    numeric = all(
        pd.api.types.is_numeric_dtype(kind) or pd.api.types.is_bool_dtype(kind) for kind in kinds
    )
    if not numeric or not any(
        isinstance(kind, pd.api.extensions.ExtensionDtype) for kind in kinds
    ):
        return None
    return frame.to_numpy(dtype=float, na_value=np.nan)


def named_as_fitted(model: Any, X: Any) -> Any:
    """``X`` named as ``model`` was fitted: a DataFrame's column names dropped for a model
    fitted on an array, an array given the fitted names.

    For a model inside a wrapper whose own feature check (`check_features`) already
    reported a mismatch once: the model would repeat that warning at every call.
    """
    names = getattr(model, "feature_names_in_", None)
    if names is None and isinstance(X, pd.DataFrame):
        floats = nullable_as_float(X)
        return X.to_numpy() if floats is None else floats
    if names is not None and isinstance(X, np.ndarray) and X.shape[1:] == (len(names),):
        return pd.DataFrame(X, columns=names, copy=False)
    return X


def _warn_column_vector() -> None:
    warn_user(
        "A column-vector y was passed when a 1d array was expected; `y` of shape (n, 1) was "
        "flattened to shape (n,).",
        DataConversionWarning,
    )


def missing_target_error() -> ValueError:
    # The phrase "requires y to be passed" is the scikit-learn convention checks look for.
    return ValueError(
        "This estimator requires y to be passed, but the target y is None: `y` must hold "
        "one target per row of X."
    )


def is_row_weight(name: str) -> bool:
    """Whether the fit parameter ``name`` is a row weight: ``sample_weight``, or a
    Pipeline step's ``step__sample_weight``."""
    return name == "sample_weight" or name.endswith("__sample_weight")


def check_weights_row_order(
    X: Any, fit_params: dict[str, Any], y: Any = None, y_name: str = "y"
) -> None:
    """`check_row_order` for the row weights among ``fit_params`` (paired with ``X`` as
    ``y`` is, or with ``y`` when ``X`` has no row labels: see `check_paired_rows`; other
    fit parameters are passed on as given)."""
    for name, value in fit_params.items():
        if is_row_weight(name):
            check_paired_rows(X, y, value, name, y_name)


def check_paired_rows(X: Any, y: Any, values: Any, name: str, y_name: str = "y") -> None:
    """`check_row_order` of a per-row input (``groups``, row weights) against ``X``'s row
    labels, or against ``y``'s when ``X`` has none: an array ``X`` (a scaler's output,
    ``df[cols].to_numpy()``) beside ``y`` and ``groups`` Series of one table in two orders
    paired each group with another row's target (a group's coverage 0.51 for 0.90).

    Examples
    --------
    >>> y = pd.Series([1.0, 2.0, 3.0], index=[10, 11, 12])
    >>> groups = pd.Series(["a", "b", "c"], index=[12, 11, 10])
    >>> check_paired_rows(np.zeros((3, 1)), y, groups, "groups")
    Traceback (most recent call last):
    ...
    ValueError: `groups` is indexed by the row labels of `y` in another order (position 0: ...
    """
    if isinstance(getattr(X, "index", None), pd.Index):
        check_row_order(X, values, name)
    else:  # (y's labels 0..n-1 are a table's as much as X's would be)
        check_row_order(y, values, name, rows_of=y_name)


def check_row_order(
    X: Any, values: Any, name: str, rows_of: str = "X", verb: str = "give"
) -> None:
    """Refuse a pandas ``values`` (``y``, ``groups``, a ratio's output) indexed by ``X``'s
    row labels in another order: rows are paired by position, so each row would get
    another row's value. A fresh ``RangeIndex`` from 0 (a Series built by position, or after
    ``reset_index``) and an index unrelated to ``X``'s are paired by position, as
    scikit-learn does; the latter with a warning when ``X`` has labels too (another slice
    of the table, ``X[200:400]`` with ``y[400:600]``). ``verb`` is what the message asks
    for (``"return"`` for a function's output).

    Examples
    --------
    >>> X = pd.DataFrame({"a": [1.0, 2.0, 3.0]}, index=[10, 11, 12])
    >>> check_row_order(X, pd.Series([5.0, 6.0, 7.0], index=[12, 11, 10]), "y")
    Traceback (most recent call last):
    ...
    ValueError: `y` is indexed by the row labels of `X` in another order (position 0: 12, ...
    """
    x_index = getattr(X, "index", None)
    own_index = getattr(values, "index", None)
    if not isinstance(x_index, pd.Index) or not isinstance(own_index, pd.Index):
        return
    if isinstance(own_index, pd.RangeIndex) and own_index.start == 0 and own_index.step == 1:
        return  # built by position (0, 1, 2, ...): no labels to misread
    # (a reversed or shifted RangeIndex, y[::-1] or y.iloc[100:], holds X's labels)
    if len(own_index) != len(x_index) or own_index.equals(x_index):
        return
    unique = x_index.is_unique and own_index.is_unique
    if not (unique and own_index.isin(x_index).all()) and not (
        not unique and _same_labels_reordered(own_index, x_index)
    ):
        built_by_position = (
            isinstance(x_index, pd.RangeIndex) and x_index.start == 0 and x_index.step == 1
        )
        first = None if built_by_position else _first_difference(own_index, x_index)
        if first is not None:  # (None: the same labels in other dtypes, time zones, Int64)
            shown = name if name.startswith("`") else f"`{name}`"
            warn_user(  # other rows' labels: another slice of the table, say
                f"{shown} and `{rows_of}` have different row labels (position {first}: "
                f"{_plain(own_index[first])!r} and {_plain(x_index[first])!r}): rows are "
                "paired by position, not by label; if they come from one table, select the "
                f"same rows (e.g. `.loc[{rows_of}.index]`).",
                UserWarning,
            )
        return
    first = _first_difference(own_index, x_index)
    if first is None:  # the same labels, one by one, in other dtypes (time zones, Int64)
        return
    shown = name if name.startswith("`") else f"`{name}`"
    remedy = f"`.reindex({rows_of}.index)`"
    if isinstance(x_index, pd.RangeIndex) and x_index.start == 0 and x_index.step == 1:
        # labels 0..n-1 may be a table's, or a `reset_index` of rows already in order
        remedy += (
            f"; but if `{rows_of}` was renumbered (`reset_index`) from the same rows in "
            f"the same order, renumber {shown} alike or pass `.to_numpy()` instead"
        )
    if not unique:  # reindex cannot undo a reordering of repeated labels
        remedy = (
            f"take it from the same rows as `{rows_of}`: `{rows_of}`'s row labels repeat, so "
            "reindexing cannot restore the order; give the table unique labels "
            "(`reset_index`) before splitting or sorting it"
        )
    raise ValueError(
        f"{shown} is indexed by the row labels of `{rows_of}` in another order (position "
        f"{first}: {_plain(own_index[first])}, where `{rows_of}` has "
        f"{_plain(x_index[first])}); rows are "
        f"paired by position, so {verb} it in the order of `{rows_of}` (e.g. {remedy})."
    )


def _same_labels_reordered(first: pd.Index, second: pd.Index) -> bool:
    """True when two indexes with repeated labels hold the same labels, each as often, in
    another order (``pd.concat`` of two frames, then sorted: every row paired wrongly)."""
    try:
        return bool(first.sort_values().equals(second.sort_values()))
    except TypeError:  # labels that do not order (mixed types): compare counts by hash
        counts = first.value_counts(dropna=False)
        other = second.value_counts(dropna=False)
        return counts.size == other.size and bool((other.reindex(counts.index) == counts).all())


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value, for readable messages (``'a'``, not ``np.str_``;
    ``500``, not ``np.int64(500)``; a date as a ``pd.Timestamp``, not nanoseconds)."""
    if isinstance(value, np.datetime64):
        return pd.Timestamp(value)
    if isinstance(value, np.timedelta64):
        return pd.Timedelta(value)
    if isinstance(value, tuple):  # a MultiIndex label
        return tuple(map(_plain, value))
    return value.item() if isinstance(value, np.generic) else value


def _first_difference(index: pd.Index, other: pd.Index) -> int | None:
    """The first position where two indexes of one length hold different labels (None:
    none does, though ``Index.equals`` says they differ, as for one time in two zones)."""
    differs = np.flatnonzero(np.asarray(index, dtype=object) != np.asarray(other, dtype=object))
    return int(differs[0]) if differs.size else None


def _dates_as_datetime64(labels: NDArray) -> NDArray:
    """Object ``labels`` holding only dates or only durations (``pd.Timestamp``,
    ``datetime.date``, ``pd.Timedelta``) as ``datetime64`` / ``timedelta64`` in the unit
    pandas gives them, so that they meet the same labels held in those dtypes (numpy
    compares across units exactly: a time inside a day is not that day); other labels
    (and time-zone-aware dates, which datetime64 cannot hold) as they are."""
    kind = pd.api.types.infer_dtype(labels, skipna=False)
    try:
        if kind in ("datetime", "datetime64", "date"):
            dates = pd.DatetimeIndex(labels)
            return labels if dates.tz is not None else dates.to_numpy()
        if kind in ("timedelta", "timedelta64"):
            return pd.TimedeltaIndex(labels).to_numpy()
    except (TypeError, ValueError):  # mixed time zones, say: kept as given
        pass
    return labels


def check_groups(groups: ArrayLike | None, n: int) -> NDArray | None:
    """Validate Mondrian group labels: one hashable, non-missing label per row."""
    if groups is None:
        return None
    labels = check_rows("groups", groups, n)
    # every kind: NaT in datetime64 / timedelta64 groups is missing too (as in the metrics)
    if np.any(pd.isna(labels)):
        if labels.dtype.kind == "f":
            raise ValueError("`groups` contains NaN; every row needs a group label.")
        raise ValueError(
            "`groups` contains missing (None, NaN or NaT) labels; every row needs a group label."
        )
    if labels.dtype.kind == "O":
        labels = _dates_as_datetime64(labels)  # Timestamps meet datetime64 groups
    if labels.dtype.kind == "O":
        _refuse_unorderable(labels, "groups")
    return labels


def distinct_labels(labels: NDArray) -> tuple[NDArray, NDArray]:
    """``(distinct, codes)`` with ``distinct[codes] == labels``: object labels through a
    hash table (``pd.factorize``, one pass), so that what sorts or compares them with
    Python comparisons sees each label once (50,000 ``pandas.cut`` intervals: seconds
    sorted whole); other labels as ``np.unique`` gives them (sorted)."""
    if labels.dtype.kind == "O":
        try:
            codes, distinct = pd.factorize(labels, use_na_sentinel=False)
            return np.asarray(distinct, dtype=object), codes.astype(np.intp)
        except TypeError:  # unhashable labels (lists): sorted whole, as they compare
            pass
    distinct, codes = np.unique(labels, return_inverse=True)
    return distinct, codes.reshape(-1)


def sorted_groups(labels: NDArray) -> tuple[NDArray, NDArray, NDArray]:
    """``np.unique(labels, return_inverse=True, return_counts=True)``, sorting only the
    distinct labels (see `distinct_labels`)."""
    distinct, codes = distinct_labels(labels)
    order = np.argsort(distinct, kind="stable")
    rank = np.empty(order.size, dtype=np.intp)
    rank[order] = np.arange(order.size)
    inverse = rank[codes]
    return distinct[order], inverse, np.bincount(inverse, minlength=order.size)


def _refuse_unorderable(labels: NDArray, name: str) -> None:
    """A ValueError naming ``name`` when its (object) labels mix types that do not order
    (sorted once per distinct label, see `distinct_labels`)."""
    try:
        np.unique(distinct_labels(labels)[0])  # sorted once per label (unhashable: whole)
    except TypeError:
        kinds = sorted({type(value).__name__ for value in labels})
        raise ValueError(
            f"`{name}` mixes label types ({', '.join(kinds)}) that cannot be ordered; use "
            "one type (e.g. all strings)."
        ) from None


def _float_entries(block: Any) -> NDArray | None:
    """The stored float entries of an array or sparse matrix (None for other data)."""
    if sparse.issparse(block):  # sparse: the stored values
        block = block if block.format in ("csr", "csc", "coo", "bsr") else block.tocsr()
        array = block.data
    else:
        array = block
    array = np.asarray(array) if isinstance(array, list) else array
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "fc":
        return None
    return array


def non_finite_kinds(block: Any) -> tuple[bool, bool]:
    """Whether a numeric block of rows holds NaN, and whether it holds +inf or -inf;
    non-numeric data is the model's business, but for missing values in object entries
    (``None``, ``NaN``, ``pd.NA``: numbers stored as objects), which count as NaN (see
    `non_finite_parts`, which tells the two apart).

    Examples
    --------
    >>> non_finite_kinds(np.array([[1.0, np.inf]])), non_finite_kinds([[None, 1.0]])
    ((False, True), (True, False))
    """
    nan, missing, infinite = non_finite_parts(block)
    return nan or missing, infinite


def non_finite_parts(block: Any) -> tuple[bool, bool, bool]:
    """Whether a block of rows holds NaN in numeric data (float arrays, sparse matrices,
    numeric DataFrame columns), missing values in object or string data (``None``, ``NaN``,
    ``pd.NA`` in an object array, a list of rows, an object or string DataFrame column), and
    +inf or -inf in numeric data. Data that is neither (a ragged list, say) is the model's
    business: nothing is reported.

    Missing object entries are told apart because a transformer (an imputer with
    ``missing_values=None``, a ``FunctionTransformer``) may replace them whatever its tags
    say of NaN.

    Examples
    --------
    >>> non_finite_parts([[np.nan, 1.0]]), non_finite_parts(np.array([["a", None]], object))
    ((True, False, False), (False, True, False))
    """
    if hasattr(block, "select_dtypes"):  # DataFrame: numeric columns, and text ones' NaN
        numeric = block.select_dtypes(["number", "boolean"])  # (nullable booleans hold NA)
        text = [
            position
            for position, dtype in enumerate(block.dtypes)
            if isinstance(dtype, pd.StringDtype)
            or (isinstance(dtype, np.dtype) and dtype.kind == "O")
        ]  # (by dtype: select_dtypes("object") warns of str columns in pandas 3)
        missing = bool(text) and bool(block.iloc[:, text].isna().to_numpy().any())
        if not numeric.shape[1]:
            return False, missing, False
        infinite = numeric.isin([np.inf, -np.inf]).to_numpy().any()
        return bool(numeric.isna().to_numpy().any()), missing, bool(infinite)
    if isinstance(block, list):
        try:
            block = np.asarray(block)
        except ValueError:  # ragged rows: the model's own message
            return False, False, False
    if isinstance(block, np.ndarray) and block.dtype == object:  # None is missing too
        return False, bool(pd.isna(block).any()), False
    array = _float_entries(block)
    if array is None:
        return False, False, False
    # A sum is finite unless some entry is NaN/inf: one pass, no full-size temporary (the
    # sum of large finite values can overflow: not worth a warning, the test follows).
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(array.sum()):
            return False, False, False
    return bool(np.isnan(array).any()), False, bool(np.isinf(array).any())


def has_nan(block: Any) -> bool:
    """True if a numeric block of rows holds NaN (see `non_finite_kinds`)."""
    return non_finite_kinds(block)[0]


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


def refuse_booleans(constraints: dict, params: dict, caller: str) -> None:
    """A bool given for a numeric parameter (scikit-learn's ``Interval`` constraints count
    ``True`` as the number 1) is refused, naming the parameter.

    Examples
    --------
    >>> import numbers
    >>> from sklearn.utils._param_validation import Interval
    >>> refuse_booleans({"n_neighbors": [Interval(numbers.Integral, 1, None, closed="left")]},
    ...                 {"n_neighbors": True}, "Model")
    Traceback (most recent call last):
    ...
    ValueError: Model: `n_neighbors` must be a number, got True (a boolean).
    """
    from sklearn.utils._param_validation import Interval

    for name, options in constraints.items():
        value = params.get(name)
        if (
            isinstance(value, bool | np.bool_)
            and "boolean" not in options
            and any(isinstance(option, Interval) for option in options)
        ):
            raise ValueError(f"{caller}: `{name}` must be a number, got {value!r} (a boolean).")


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
            f"{model_given_hint(value)}"
        )
    return int(value)


def _inferred(labels: NDArray) -> str:
    return str(pd.api.types.infer_dtype(labels, skipna=False))


def labels_as_numbers(labels: NDArray) -> NDArray:
    """Labels held as objects (a Series of dtype object) that are all integers, all floats
    or all booleans, in that numpy dtype (integers as int64, else uint64); converted
    exactly, so integers mixed with floats (2**53 + 1 has no float64) or beyond uint64 stay
    objects, as do other labels.

    Examples
    --------
    >>> labels_as_numbers(np.array([2, 0, 1], dtype=object)).dtype
    dtype('int64')
    >>> labels_as_numbers(np.array([2**53 + 1, 0.5], dtype=object)).dtype
    dtype('O')
    """
    if labels.dtype.kind != "O":
        return labels
    kind = _inferred(labels)
    for as_type in {"integer": (np.int64, np.uint64), "boolean": (bool,)}.get(
        kind, (float,) if kind == "floating" else ()
    ):
        try:
            return labels.astype(as_type)
        except OverflowError:  # beyond int64 (then uint64): kept as they are
            continue
    return labels


def check_class_labels(
    y: ArrayLike,
    n: int,
    name: str = "y",
    rows_of: str = "X",
    *,
    training: bool = False,
    classes: ArrayLike | None = None,
) -> NDArray:
    """Class labels, one per row of X: no None, NaN or infinite label; ``training``: at
    least two classes (a classifier trained on one separates nothing), and no float label
    with a fractional part (scikit-learn reads those as a continuous target). Calibration
    labels are only compared with a fitted model's classes, which may be any values; given
    those ``classes``, booleans are refused unless the classes are booleans too (``True ==
    1`` in numpy, so a thresholded target such as ``y > 1`` would silently read as the
    labels 1 and 0).

    Examples
    --------
    >>> check_class_labels(["a", "b"], 2)
    array(['a', 'b'], dtype='<U1')
    >>> check_class_labels(np.array([True, False]), 2, classes=[0, 1, 2])
    Traceback (most recent call last):
    ...
    ValueError: `y` holds booleans (True/False) but the model's classes are [0, 1, 2]: ...
    """
    if y is None:
        raise missing_target_error()
    labels = check_rows(name, y, n, rows_of)
    if labels.dtype.kind == "f" and not np.isfinite(labels).all():
        raise ValueError(
            f"`{name}` contains NaN or infinite labels; remove or impute those rows first."
        )
    if labels.dtype.kind == "O":
        if pd.isna(labels).any():  # None, NaN, pd.NA (nullable or categorical labels)
            raise ValueError(
                f"`{name}` contains missing (None or NaN) labels; remove or impute those rows "
                "first."
            )
        _refuse_unorderable(labels, name)
        # scikit-learn reads numbers held as objects as an "unknown" target and refuses them
        labels = labels_as_numbers(labels)
        if training and labels.dtype.kind == "O" and _inferred(labels) == "integer":
            raise ValueError(
                f"`{name}` holds integers beyond the int64 and uint64 ranges as objects, "
                f"which classifiers cannot train on: pass them as class names, e.g. "
                f"{name}.astype(str)."
            )
        if labels.dtype.kind == "f" and not np.isfinite(labels).all():
            raise ValueError(
                f"`{name}` contains infinite labels; remove or impute those rows first."
            )
    if training and (
        labels.dtype.kind == "S"
        or (labels.dtype.kind == "O" and any(isinstance(v, bytes) for v in labels[:1000]))
    ):  # scikit-learn's classifiers refuse them ("labels represented as bytes")
        raise ValueError(
            f"`{name}` holds bytes labels, which the classifiers cannot train on: decode "
            "them first, e.g. y.astype(str) (or [label.decode() for label in y])."
        )
    if training and labels.dtype.kind == "f" and (labels != np.round(labels)).any():
        fractional = np.unique(labels[labels != np.round(labels)])
        raise ValueError(
            f"`{name}` holds float labels with a fractional part "
            f"({fractional[:3].tolist()}{' ...' if fractional.size > 3 else ''}), which "
            f"classifiers read as a continuous target: pass them as class names, e.g. "
            f"{name}.astype(str), or use a regressor."
        )
    if training and np.unique(labels).size < 2:
        raise ValueError(
            f"`{name}` holds one class ({np.unique(labels).tolist()}): at least two are needed."
        )
    if classes is not None:
        refuse_boolean_labels(labels, classes, name)
    return labels


def _holds_booleans(values: NDArray) -> bool:
    """Whether labels are booleans: numpy's, pandas' (nullable or not), or in objects."""
    kind = values.dtype.kind
    return kind == "b" or (kind == "O" and _any_entry(values.ravel(), (bool, np.bool_)))


def refuse_boolean_labels(labels: ArrayLike, classes: ArrayLike, name: str = "y") -> None:
    """ValueError naming ``name`` when ``labels`` are booleans and the model's ``classes``
    are not (numpy reads ``True == 1``: a boolean target would pass for the labels 1 and 0).

    Examples
    --------
    >>> refuse_boolean_labels(np.array([True, False]), np.array([False, True]))
    >>> refuse_boolean_labels(np.array([True, False]), np.array([0, 1, 2]))
    Traceback (most recent call last):
    ...
    ValueError: `y` holds booleans (True/False) but the model's classes are [0, 1, 2]: ...
    """
    values, known = np.asarray(labels), np.asarray(classes)
    if _holds_booleans(values) and not _holds_booleans(known):
        convert = (
            f"if True and False stand for 1 and 0, convert them first with `{name}.astype(int)`"
            if known.dtype.kind in "iuf"
            else "map True and False to the class labels they stand for"
        )
        raise ValueError(
            f"`{name}` holds booleans (True/False) but the model's classes are "
            f"{labels_text(known)}: booleans are not read as the labels 1 and 0. Pass "
            f"labels from those classes; {convert}."
        )


def check_regression_target(y: ArrayLike, n: int, name: str = "y", rows_of: str = "X") -> NDArray:
    """A finite 1-D float target with one value per row of X (messages name ``name`` and
    ``rows_of``).

    A column vector ``(n, 1)`` is flattened with a ``DataConversionWarning`` (the
    scikit-learn convention); wider targets are refused: they need a multi-output method.
    """
    if y is None:
        raise missing_target_error()
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
    refuse_non_number_kinds(target, name)
    try:
        target = np.asarray(target, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"`{name}` must be numeric for regression; {first_non_number(target)}."
        ) from None
    if not np.isfinite(target).all():
        raise ValueError(
            f"`{name}` contains {int((~np.isfinite(target)).sum())} NaN or infinite values; "
            "remove or impute those rows first."
        )
    return target


def refuse_non_number_kinds(target: NDArray, name: str, where: str = "") -> None:
    """Refuse a regression target that numpy would read as numbers but is not numbers:
    booleans (0/1), dates and durations (counts of a unit the data does not state) and
    numbers written as text, also mixed among numbers in an object array. ``where``
    follows the name in messages (e.g. ``" column 'b'"``)."""
    kind = target.dtype.kind
    inferred = pd.api.types.infer_dtype(target.ravel(), skipna=True) if kind == "O" else ""
    if inferred in ("mixed", "mixed-integer"):  # numbers among other things: which?
        flat = target.ravel()
        if _any_entry(flat, (bool, np.bool_)):
            inferred = "boolean"
        elif _any_entry(flat, (str, bytes)):
            inferred = "string"
    shown = f"`{name}`{where}"
    if kind == "b" or inferred == "boolean":
        raise ValueError(
            f"{shown} holds booleans, not numbers: a regression target must be numeric. "
            "For a yes/no outcome use a classifier wrapper; to regress on 0/1, convert "
            "it with `.astype(float)`."
        )
    if kind in "mM" or inferred.startswith(("datetime", "timedelta", "date", "period")):
        raise ValueError(
            f"{shown} holds dates or durations (dtype {target.dtype}): convert them to "
            "numbers in the unit you want intervals in first, e.g. "
            "`(values - start) / np.timedelta64(1, 'D')` for days."
        )
    if kind in "US" or inferred in ("string", "bytes"):
        if pd.to_numeric(pd.Series(target.ravel(), dtype=object), errors="coerce").notna().all():
            raise ValueError(
                f"{shown} holds numbers written as text (dtype {target.dtype}): convert "
                "them first, e.g. with `.astype(float)`."
            )
        raise ValueError(f"{shown} must be numeric for regression; {first_non_number(target)}.")


def _any_entry(values: NDArray, types: tuple[type, ...]) -> bool:
    """Whether an entry of the object array ``values`` is an instance of ``types``."""
    return bool(np.frompyfunc(lambda value: isinstance(value, types), 1, 1)(values).any())


def non_finite_rows_error(name: str, values: np.ndarray, remedy: str) -> ValueError:
    """The error for 2-D ``values`` holding NaN or inf: how many, in how many rows, the
    first row's position, and ``remedy``.

    Examples
    --------
    >>> print(non_finite_rows_error("Y", np.array([[0.0, np.nan], [1.0, 2.0]]), "impute them"))
    `Y` contains 1 NaN or infinite value (in 1 row, the first at position 0); impute them.
    """
    bad = ~np.isfinite(values)
    count, rows = int(bad.sum()), np.flatnonzero(bad.any(axis=1))
    return ValueError(
        f"`{name}` contains {count} NaN or infinite value{'s' if count > 1 else ''} (in "
        f"{rows.size} row{'s' if rows.size > 1 else ''}, the first at position {rows[0]}); "
        f"{remedy}."
    )


def first_non_number(values: ArrayLike) -> str:
    """Where a target that cannot be read as floats goes wrong, for an error message:
    the first entry that is not a number, with its position.

    Examples
    --------
    >>> first_non_number(np.array([1.0, 2.5, "n/a", "x"], dtype=object))
    "entry 2 is 'n/a' (2 of 4 are not numbers)"
    """
    flat = pd.Series(np.ravel(np.asarray(values, dtype=object)), dtype=object)
    bad = np.flatnonzero(pd.to_numeric(flat, errors="coerce").isna() & flat.notna())
    what = "not numbers"
    if not bad.size:  # missing markers that are not float NaN: pd.NA, pd.NaT
        bad = np.flatnonzero(flat.isna() & ~flat.map(lambda value: isinstance(value, float)))
        what = "missing; remove or impute those rows"
    if not bad.size:
        return "its entries are not numbers"
    index = np.unravel_index(bad[0], np.shape(values))
    where = index[0] if len(index) == 1 else tuple(int(i) for i in index)
    return f"entry {where} is {flat.iloc[bad[0]]!r:.40} ({bad.size} of {flat.size} are {what})"


def is_sklearn_estimator(model: Any) -> bool:
    """Whether ``model`` is a scikit-learn estimator (``get_params`` and readable tags), one
    that ``clone``, ``check_is_fitted`` and ``get_tags`` understand. A scikit-learn wrapper
    around a model outside scikit-learn (``FrozenEstimator(booster)``) is not: its tags are
    those of the model inside.

    Examples
    --------
    >>> from sklearn.frozen import FrozenEstimator
    >>> from sklearn.linear_model import Ridge
    >>> class Booster:
    ...     def predict(self, X):
    ...         return X[:, 0]
    >>> is_sklearn_estimator(Ridge()), is_sklearn_estimator(Booster())
    (True, False)
    >>> is_sklearn_estimator(FrozenEstimator(Booster()))
    False
    """
    return hasattr(model, "get_params") and sklearn_tags(model) is not None


def sklearn_tags(model: Any) -> Any:
    """The scikit-learn tags of ``model``; None for a model outside scikit-learn (no
    ``__sklearn_tags__``) or a ``FrozenEstimator`` around one.

    From scikit-learn 1.8 on ``get_tags`` raises for such a model; before, it returned
    default tags (with a deprecation warning in 1.7), which would make a foreign model look
    like a scikit-learn one that refuses NaN and can be asked whether it is fitted. The test
    is made here, so every supported version behaves alike.

    Examples
    --------
    >>> from sklearn.linear_model import Ridge
    >>> sklearn_tags(Ridge()).input_tags.allow_nan, sklearn_tags(object())
    (False, None)
    """
    inner = model
    while isinstance(inner, FrozenEstimator):  # its tags are the wrapped model's
        inner = inner.estimator
    if not hasattr(inner, "__sklearn_tags__"):
        return None
    try:
        return get_tags(model)
    except (AttributeError, TypeError):  # a wrapper of a model without tags (1.8+)
        return None


def check_fitted_model(model: Any) -> None:
    """scikit-learn's ``check_is_fitted`` for a scikit-learn model; a model outside
    scikit-learn (`is_sklearn_estimator` is False) is taken as fitted, since nothing can
    ask it and it is never trained here.

    Examples
    --------
    >>> from sklearn.linear_model import Ridge
    >>> check_fitted_model(Ridge())
    Traceback (most recent call last):
    ...
    sklearn.exceptions.NotFittedError: This Ridge instance is not fitted yet. ...
    """
    if is_sklearn_estimator(model):
        check_is_fitted(model)


#: Why models given fitted, as a list, may be unfitted: said when one of them is.
CLONED_LIST_HINT = (
    "(A clone of this wrapper, as GridSearchCV and cross_validate make, clones the listed "
    "models unfitted: wrap each in sklearn.frozen.FrozenEstimator.)"
)


@contextmanager
def explaining_cloned_lists(estimator: Any) -> Iterator[None]:
    """Add `CLONED_LIST_HINT` to a NotFittedError raised inside, when ``estimator`` is a
    list (or tuple) of models given fitted: a clone of the wrapper holds unfitted copies.

    Examples
    --------
    >>> from sklearn.linear_model import Ridge
    >>> with explaining_cloned_lists([Ridge()]):
    ...     check_fitted_model(Ridge())
    Traceback (most recent call last):
    ...
    sklearn.exceptions.NotFittedError: This Ridge instance is not fitted yet. ... (A clone ...
    """
    try:
        yield
    except NotFittedError as error:
        if not isinstance(estimator, (list, tuple)) or not _unfitted_as_by_a_clone(estimator):
            raise
        raise NotFittedError(f"{error} {CLONED_LIST_HINT}") from None


def _unfitted_as_by_a_clone(models: Sequence[Any]) -> bool:
    """Whether a list of models looks like a clone's copies: every model not in a
    ``FrozenEstimator`` unfitted (a clone unfits them all, and keeps the frozen ones)."""
    plain = [model for model in models if not isinstance(model, FrozenEstimator)]
    for model in plain:  # a loop over the (few) listed models
        try:
            check_is_fitted(model)
        except (NotFittedError, TypeError):
            continue
        return False  # a fitted one: not a clone's copies
    return bool(plain)


def check_wrapper_fitted(
    wrapper: Any, attribute: str, method: str, needs: str = "fit(X, y)"
) -> None:
    """scikit-learn's ``check_is_fitted`` with a message that names the wrapper's method
    and the call(s) it ``needs`` (scikit-learn's own says "Call 'fit'", which is wrong for
    a wrapper that also needs calibrate, or may be calibrated alone).

    Examples
    --------
    >>> from sklearn.linear_model import Ridge
    >>> check_wrapper_fitted(Ridge(), "coef_", "predict_interval")
    Traceback (most recent call last):
    ...
    sklearn.exceptions.NotFittedError: Ridge.predict_interval needs fit(X, y) first.
    """
    # scikit-learn formats the message with %-substitution: a literal % must be doubled
    message = f"{type(wrapper).__name__}.{method} needs {needs} first.".replace("%", "%%")
    check_is_fitted(wrapper, attribute, msg=message)


def check_frozen_is_fitted(estimator: Any, wrapper: Any) -> None:
    """A ``FrozenEstimator`` given to ``fit`` must hold a fitted model (``fit`` never trains
    it): a NotFittedError that says so, naming the wrapper, instead of the model's own
    "call fit" message. Anything else passes.

    Examples
    --------
    >>> from sklearn.frozen import FrozenEstimator
    >>> from sklearn.linear_model import Ridge
    >>> check_frozen_is_fitted(FrozenEstimator(Ridge()), Ridge())
    Traceback (most recent call last):
    ...
    sklearn.exceptions.NotFittedError: Ridge.fit: `estimator` is a FrozenEstimator around ...
    """
    if not isinstance(estimator, FrozenEstimator):
        return
    try:
        check_fitted_model(estimator.estimator)
    except NotFittedError:
        raise NotFittedError(
            f"{type(wrapper).__name__}.fit: `estimator` is a FrozenEstimator around an "
            f"unfitted {type(estimator.estimator).__name__}, and fit never trains a frozen "
            "model. Fit the model before freezing it, or pass it unfrozen for fit to train."
        ) from None


def model_classes(model: Any) -> NDArray:
    """The labels of a fitted classifier's ``predict_proba`` columns (``classes_``), with a
    message naming `estimator` for a model outside scikit-learn that has none."""
    if not hasattr(model, "classes_"):
        raise AttributeError(
            f"`estimator` ({type(model).__name__}) has no `classes_`: the labels of its "
            "predict_proba columns, in column order. Set `model.classes_ = np.array([...])` "
            "on the model before calibrate."
        )
    classes = np.asarray(model.classes_)
    try:
        repeated = classes.ndim == 1 and np.unique(classes).size < classes.size
    except TypeError:  # labels of kinds that do not sort: left to the label checks
        repeated = False
    if repeated:  # a set's column would read as another column's label
        raise ValueError(
            f"`estimator`'s `classes_` repeats a label ({classes.tolist()!r:.200}): it must "
            "name each predict_proba column once, in column order."
        )
    return classes


def refuse_classifier(model: Any, wrapper: Any) -> None:
    """A regression wrapper given a classifier (or a Pipeline ending in one): a TypeError
    naming `estimator`. Its predicted labels would be read as numbers, giving intervals
    around class labels without a word.

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression, Ridge
    >>> refuse_classifier(Ridge(), object())  # a regressor passes
    >>> refuse_classifier(LogisticRegression(), object())
    Traceback (most recent call last):
    ...
    TypeError: `estimator` (LogisticRegression) is a classifier, but object needs a ...
    """
    tags = sklearn_tags(model)  # None outside scikit-learn
    if tags is not None and tags.estimator_type == "classifier":
        raise TypeError(
            f"`estimator` ({type(model).__name__}) is a classifier, but "
            f"{type(wrapper).__name__} needs a regressor: it builds intervals around "
            "predicted numbers. For prediction sets of classes, use SplitConformalClassifier "
            "or CrossConformalClassifier."
        )


def no_calibrate_step(model: Any, how: str, alternative: str) -> AttributeError:
    """The AttributeError a method without a ``calibrate`` step raises when it is read
    (as a property: ``hasattr(model, "calibrate")`` stays false): ``how`` says what
    ``fit`` does instead, ``alternative`` which wrapper calibrates a fitted model."""
    return AttributeError(
        f"{type(model).__name__} has no `calibrate` step: {how}; call the predict methods "
        f"after `fit`. To calibrate an already fitted model on held-out rows, use "
        f"{alternative}."
    )


def refuse_model_class(model: Any, wrapper: Any = None, name: str = "estimator") -> None:
    """A TypeError naming the parameter ``name`` (of ``wrapper``, shown in the example for
    `estimator`) when ``model`` is a class, not an instance (scikit-learn's clone message
    names neither).

    Examples
    --------
    >>> from sklearn.linear_model import Ridge
    >>> from uqconform import SplitConformalRegressor
    >>> refuse_model_class(Ridge, SplitConformalRegressor())
    Traceback (most recent call last):
    ...
    TypeError: `estimator` is the class Ridge: pass an instance, e.g. SplitConformalRegresso...
    """
    if isinstance(model, type):
        example = f"{model.__name__}()"
        if wrapper is not None and name == "estimator":
            # a wrapper may need the model wrapped (multi-label: OneVsRestClassifier)
            inner = getattr(wrapper, "_model_instance_example", "{model}()")
            example = f"{type(wrapper).__name__}({inner.format(model=model.__name__)})"
        raise TypeError(
            f"`{name}` is the class {model.__name__}: pass an instance, e.g. {example}."
        )


def check_regression_model(model: Any, wrapper: Any) -> None:
    """A regression wrapper's model: not a classifier (`refuse_classifier`) and with a
    ``predict`` (`check_model_methods`; ``fit`` is checked where a model is trained)."""
    refuse_classifier(model, wrapper)
    check_model_methods(model, ("predict",), wrapper)


def check_model_methods(model: Any, methods: tuple[str, ...], wrapper: Any) -> None:
    """A TypeError naming `estimator` when ``model`` lacks one of ``methods`` (it would
    otherwise surface as an AttributeError deep inside, after any training).

    Examples
    --------
    >>> from sklearn.linear_model import Ridge
    >>> check_model_methods(Ridge(), ("predict",), object())  # a regressor passes
    >>> check_model_methods(object(), ("predict",), object())
    Traceback (most recent call last):
    ...
    TypeError: `estimator` (object) has no `predict` method: object needs a model with ...
    """
    missing = [name for name in methods if not callable(getattr(model, name, None))]
    if missing:
        swapped = (  # (0.1, model): arguments swapped
            swapped_level_hint(wrapper) if isinstance(model, numbers.Number | str) else ""
        )
        raise TypeError(
            f"`estimator` ({type(model).__name__}) has no "
            f"{' or '.join(f'`{name}`' for name in missing)} method: "
            f"{type(wrapper).__name__} needs a model with {' and '.join(methods)}.{swapped}"
        )


def model_given_hint(value: Any) -> str:
    """The advice for a model given where a setting goes (``Wrapper(0.1, model)`` puts the
    model in the second parameter), else an empty string.

    Examples
    --------
    >>> from sklearn.linear_model import Ridge
    >>> model_given_hint(Ridge())  # doctest: +ELLIPSIS
    ' That is a model: the model is the first argument (`estimator`); ...'
    >>> model_given_hint(3)
    ''
    """
    if isinstance(value, type) or not (
        callable(getattr(value, "fit", None)) or callable(getattr(value, "forward", None))
    ):
        return ""
    return (
        " That is a model: the model is the first argument (`estimator`); pass the other "
        "settings by keyword."
    )


def swapped_level_hint(owner: Any) -> str:
    """The advice for ``Wrapper(0.1, model)``, the level given where the model goes, naming
    the wrapper ``owner``; empty unless its constructor takes the model first and has an
    ``alpha`` (a wrapper without a model or a level must not be told to pass them).

    Examples
    --------
    >>> from uqconform import SplitConformalRegressor
    >>> swapped_level_hint(SplitConformalRegressor())  # doctest: +ELLIPSIS
    ' The first argument is the model; ... SplitConformalRegressor(model, alpha=0.1).'
    >>> swapped_level_hint(None)
    ''
    """
    if owner is None:
        return ""
    try:
        parameters = list(inspect.signature(type(owner)).parameters)
    except (TypeError, ValueError):  # no signature to read
        return ""
    if parameters[:1] != ["estimator"] or "alpha" not in parameters:
        return ""
    return (
        " The first argument is the model; pass the level as alpha=..., e.g. "
        f"{type(owner).__name__}(model, alpha=0.1)."
    )


def _looks_like_levels(value: Any) -> bool:
    """A number, or a short list of numbers in (0, 1): levels given where a model goes."""
    levels = real_values(value)
    return (
        levels is not None
        and levels.ndim <= 1
        and 0 < levels.size <= 10
        and (levels.ndim == 0 or bool(((levels > 0) & (levels < 1)).all()))
    )


def swapped_level_error(model: Any, owner: Any, name: str = "`estimator`") -> TypeError | None:
    """The error for a level given where the model goes (``Wrapper(0.1, model)``, numpy
    scalars and short lists of levels too), when ``owner`` takes the model first and an
    ``alpha``; None otherwise.

    Examples
    --------
    >>> from uqconform import SplitConformalRegressor
    >>> print(swapped_level_error(0.1, SplitConformalRegressor()))  # doctest: +ELLIPSIS
    `estimator` is 0.1. The first argument is the model; pass the level as alpha=..., ...
    """
    swapped = swapped_level_hint(owner)
    if not (swapped and _looks_like_levels(model)):
        return None
    given = value_summary(model)
    return TypeError(f"{name} is {given}{'' if given.endswith('...') else '.'}{swapped}")


def missing_proba_error(model: Any, name: str, why: str, owner: Any = None) -> TypeError:
    """The error for a classifier without ``predict_proba``, with the fix for both kinds of
    model: a scikit-learn classifier without probabilities, and a model from outside
    scikit-learn whose ``predict`` gives them (Keras, torch, a LightGBM ``Booster``); a
    number given for the model of the wrapper ``owner`` is told the arguments are swapped.

    Examples
    --------
    >>> from sklearn.svm import LinearSVC
    >>> error = missing_proba_error(LinearSVC(), "`estimator`", "the sets need them")
    >>> print(error)  # doctest: +ELLIPSIS
    `estimator` (LinearSVC) has no predict_proba: the sets need them. ...CalibratedClassifierCV...
    """
    swapped = swapped_level_error(model, owner, name)
    if swapped is not None:
        return swapped
    arraylike = isinstance(model, np.ndarray | pd.DataFrame | list | tuple) or (
        hasattr(model, "shape") and not hasattr(model, "predict")  # a torch tensor, say
    )
    if arraylike:  # probabilities computed elsewhere
        try:
            shape = f" of shape {tuple(np.shape(model))}"
        except (TypeError, ValueError):  # ragged rows
            shape = ""
        return TypeError(
            f"{name} is an array{shape}, not a model: to use stored "
            "probabilities, wrap them in a small class with classes_ (the label of each "
            "column) whose predict_proba(X) returns the stored rows X points to, e.g. "
            "probabilities[X[:, 0]] (see Getting started); or pass the model that "
            "computed them."
        )
    steps = getattr(model, "steps", None)  # a Pipeline: its last step decides
    last = steps[-1][1] if isinstance(steps, list) and steps and len(steps[-1]) == 2 else model
    own_switch = {  # scikit-learn classifiers that give probabilities once asked to
        "SVC": "SVC(probability=True)",
        "NuSVC": "NuSVC(probability=True)",
        "SGDClassifier": 'SGDClassifier(loss="log_loss")',
    }.get(type(last).__name__)
    if own_switch is not None and type(last).__module__.startswith("sklearn."):
        where = " as the pipeline's last step" if last is not model else ""
        return TypeError(
            f"{name} ({type(model).__name__}) has no predict_proba with these settings: "
            f"{why}. Use {own_switch}{where}, or wrap the model in "
            "sklearn.calibration.CalibratedClassifierCV."
        )
    tags = sklearn_tags(model)
    if tags is not None and tags.estimator_type == "regressor":
        return TypeError(
            f"{name} ({type(model).__name__}) is a regressor, and has no predict_proba: "
            f"{why}. Pass a classifier (e.g. LogisticRegression() or "
            "HistGradientBoostingClassifier())."
        )
    return TypeError(
        f"{name} ({type(model).__name__}) has no predict_proba: {why}. A scikit-learn "
        "classifier without probabilities (LinearSVC, RidgeClassifier) can be wrapped in "
        "sklearn.calibration.CalibratedClassifierCV; a fitted model from outside "
        "scikit-learn (Keras, torch, a LightGBM Booster) needs a small class with "
        "predict_proba(X) returning shape (n, n_classes) and classes_, the label of each "
        "column (see Getting started)."
    )


# Far above rounding (a float32 softmax over 1e5 classes sums to 1 within 3e-7), far below
# a model that is not a distribution (per-class sigmoids, halves, all-zero rows).
_ROW_SUM_TOLERANCE = 1e-3


_WARNED_MODELS: weakref.WeakSet[Any] = weakref.WeakSet()


def _first_time(model: Any) -> bool:
    """True the first time ``model`` is seen here (always for an object that cannot be
    held weakly): the library's own warning filters reset Python's once-per-line memory."""
    try:
        if model in _WARNED_MODELS:
            return False
        _WARNED_MODELS.add(model)
    except TypeError:
        pass
    return True


def model_output_as_float(output: Any) -> NDArray:
    """A model's output (``predict_proba``'s, or one entry of its list) as a float array: a
    torch tensor detached from its autograd graph and moved to the CPU, a scipy sparse
    matrix made dense, a pandas frame or series with ``pd.NA`` read as NaN (which the
    callers' non-finite check then names by row); anything else through ``np.asarray``.

    Examples
    --------
    >>> import pandas as pd
    >>> model_output_as_float(pd.DataFrame({"p": pd.array([0.25, None], dtype="Float64")}))
    array([[0.25],
           [ nan]])
    >>> model_output_as_float(sparse.csr_matrix([[0.0, 1.0]]))
    array([[0., 1.]])
    """
    if (
        hasattr(output, "requires_grad")
        and callable(getattr(output, "detach", None))
        and callable(getattr(output, "cpu", None))
    ):  # a torch network's output: possibly in its autograd graph, or on a GPU
        output = output.detach().cpu()
        if output.is_floating_point():  # bfloat16 has no numpy type: float64 (exact)
            output = output.double()
    if sparse.issparse(output):  # numpy would read a sparse matrix as one object
        output = output.toarray()
    if isinstance(output, pd.DataFrame | pd.Series):  # nullable columns: pd.NA as NaN
        try:
            return output.to_numpy(dtype=float, na_value=np.nan)
        except TypeError:  # pd.NA in an object column
            return output.to_numpy(dtype=object, na_value=np.nan).astype(float)
    return np.asarray(output, dtype=float)


def class_probabilities(model: Any, X: Any, n_classes: int, *, check_sums: bool = True) -> NDArray:
    """``model.predict_proba(X)`` as a float array of shape ``(n, n_classes)``, with a
    message naming `estimator` when a model outside scikit-learn gives another shape (a
    sigmoid network's single column, more columns than ``classes_``). ``check_sums``:
    warn when rows do not sum to 1 (the scores that read them as a distribution), once
    per model object, however many batches, folds or heads read it. Tensors, sparse
    matrices and frames are read by `model_output_as_float`."""
    try:
        output = model.predict_proba(X)
    except (TypeError, ValueError) as error:  # numpy's "could not convert string to float"
        refuse_non_numeric_features(X, f"`estimator` ({type(model).__name__})", error=error)
        raise
    proba = model_output_as_float(output)
    if isinstance(output, pd.DataFrame) and proba.shape[1] == n_classes:  # else: shape error
        proba = _labelled_columns(model, output.columns, proba)
    if proba.ndim != 2 or proba.shape[1] != n_classes:
        hint = (
            " A single column (a sigmoid's P(class 1)) must become two: "
            "np.column_stack([1 - p, p])."
            if proba.ndim == 1 or (proba.ndim == 2 and proba.shape[1] == 1)
            else ""
        )
        raise ValueError(
            f"`estimator` ({type(model).__name__}) predict_proba returned shape {proba.shape}; "
            f"expected (n_samples, {n_classes}), one column per label of `classes_`.{hint}"
        )
    refuse_non_finite(
        proba,
        f"`estimator` ({type(model).__name__}) predict_proba gave NaN or infinite probabilities",
        "rows of `X`",
    )
    outside = (proba < -1e-9) | (proba > 1 + 1e-9)
    if outside.any():  # logits or scores: APS, RAPS and SAPS would read them as mass
        rows = np.flatnonzero(outside.any(axis=1))
        raise ValueError(
            f"`estimator` ({type(model).__name__}) predict_proba gave values outside [0, 1] "
            f"on {rows.size} rows of `X` (first: row {rows[0]}, {proba[rows[0]].tolist()!r:.80}):"
            " probabilities are needed, not logits or scores (apply a softmax first)."
        )
    if (
        check_sums
        and (np.abs(proba.sum(axis=1) - 1.0) > _ROW_SUM_TOLERANCE).any()
        and _first_time(model)
    ):  # per-class sigmoids, a hand-made table: still valid, but not a distribution
        warn_user(
            f"`estimator` ({type(model).__name__}) predict_proba gives rows that do not sum "
            "to 1: APS, RAPS and SAPS read them as probability mass and LAC as "
            "probabilities, so the sets keep their coverage but lose that meaning. Divide "
            "each row by its sum, or calibrate the model "
            "(sklearn.calibration.CalibratedClassifierCV)."
        )
    return proba


def _labelled_columns(model: Any, columns: pd.Index, proba: NDArray) -> NDArray:
    """The columns of a ``predict_proba`` DataFrame in the order of ``model.classes_`` when
    they are labelled by class, or by the classes written as text (AutoML wrappers return
    such frames, in an order of their own); other columns (a default ``RangeIndex``,
    ``'p0', 'p1'``) are read by position."""
    classes = getattr(model, "classes_", None)
    labels = columns.tolist()
    if classes is None or (
        isinstance(columns, pd.RangeIndex) and columns.start == 0 and columns.step == 1
    ):
        return proba
    classes = np.asarray(classes).tolist()
    try:
        position = {label: k for k, label in enumerate(labels)}
        order = [position.get(label, -1) for label in classes]
    except TypeError:  # unhashable labels: nothing to match by name
        return proba
    if len(position) == len(labels) == len(classes) and min(order, default=0) >= 0:
        return proba[:, order]  # every class named once: its column, wherever it is
    texts = {str(label): k for k, label in enumerate(labels)}  # '0','1' after a round trip
    order = [texts.get(str(label), -1) for label in classes]
    if len(texts) == len(labels) == len(classes) and min(order, default=0) >= 0:
        return proba[:, order]
    # columns that name no class ('p0', 'p1'; 1..k for the classes 0..k-1): by position,
    # as scikit-learn's own outputs are
    return proba


class NonFiniteOutputError(ValueError):
    """A model's output is NaN or infinite on some rows: the message names the model, the
    rows (``rows`` holds their positions) and where they came from.

    Examples
    --------
    >>> error = NonFiniteOutputError("`estimator` predicted NaN or infinite values",
    ...                              np.array([2, 5]), "rows of `X`")
    >>> print(error)
    `estimator` predicted NaN or infinite values on 2 rows of `X` (first: row 2).
    >>> print(error.renumbered(np.arange(100, 110), more_rows=True))  # a batch of X's rows
    `estimator` predicted NaN or infinite values on at least 2 rows of `X` (first: row 102).
    """

    def __init__(
        self, what: str, rows: NDArray, where: str, advice: str = "", more_rows: bool = False
    ) -> None:
        self.what, self.rows, self.where, self.advice = what, rows, where, advice
        self.more_rows = more_rows
        count = f"at least {rows.size}" if more_rows else str(rows.size)
        if rows.size == 1 and not more_rows and where.startswith("rows"):
            where = "row" + where[len("rows") :]  # "1 row of `X`"
        super().__init__(f"{what} on {count} {where} (first: row {rows[0]}){advice}.")

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt from its parts (a joblib worker sends it to the parent process)
        return type(self), (self.what, self.rows, self.where, self.advice, self.more_rows)

    def renumbered(self, positions: NDArray, *, more_rows: bool = False) -> NonFiniteOutputError:
        """The same error with the rows named by their ``positions`` in the caller's data
        (the model saw a subset of it, or copies of its rows: positions may repeat;
        ``more_rows``: a batch, the rest was not read)."""
        return NonFiniteOutputError(
            self.what, np.unique(positions[self.rows]), self.where, self.advice, more_rows
        )


def refuse_non_finite(values: NDArray, what: str, where: str, advice: str = "") -> None:
    """Raise `NonFiniteOutputError` when a row of ``values`` holds a NaN or an infinity.

    Examples
    --------
    >>> refuse_non_finite(np.array([1.0, np.nan]), "`estimator` predicted NaN", "rows")
    Traceback (most recent call last):
    ...
    uqconform._validation.NonFiniteOutputError: `estimator` predicted NaN on 1 row (first: row 1).
    """
    bad = non_finite_rows(values)
    if bad.size:
        raise NonFiniteOutputError(what, bad, where, advice)


def check_score_output(values: Any, shape: tuple[int, ...], producer: str) -> NDArray:
    """``values`` returned by a conformity score's ``producer`` (``"AbsoluteScore().score"``)
    as a float array of exactly ``shape``, without NaN: a user score with the wrong shape
    would otherwise be broadcast or truncated silently, and a NaN would reach the quantile.

    Examples
    --------
    >>> check_score_output([0.5, 1.0], (2,), "MyScore().score")
    array([0.5, 1. ])
    """
    array = np.asarray(values, dtype=float)
    if array.shape != shape:
        raise ValueError(f"{producer} must return an array of shape {shape}, got {array.shape}.")
    if np.isnan(array).any():
        rows = np.flatnonzero(np.isnan(array).reshape(shape[0], -1).any(axis=1))
        raise ValueError(
            f"{producer} returned NaN for {rows.size} row(s) (first: row {rows[0]}); "
            "conformity scores must be numbers (+-inf allowed)."
        )
    return array


def non_finite_rows(values: NDArray) -> NDArray:
    """Positions of the rows holding a NaN or infinite value (a row of any width).

    Examples
    --------
    >>> non_finite_rows(np.array([[0.0, 1.0], [np.nan, 1.0], [2.0, np.inf]]))
    array([1, 2])
    """
    return np.flatnonzero(~np.isfinite(values).reshape(len(values), -1).all(axis=1))


def real_values(value: Any) -> NDArray | None:
    """``value`` as a float array when every entry is a real number, else None.

    Booleans, text (also numeric text such as ``"0.5"``), complex numbers, times, masked
    arrays and ragged nesting are not real numbers here, so a setting given as
    ``["0.1"]`` is refused as ``"0.1"`` is.

    Examples
    --------
    >>> real_values([1, 2.5])
    array([1. , 2.5])
    >>> real_values(["0.5"]) is None, real_values([True, 0.5]) is None
    (True, True)
    """
    if isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_):
        return np.asarray(float(value))  # one number: the usual case, no entry loop
    if isinstance(value, str | bytes | np.ma.MaskedArray):
        return None
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):  # ragged nesting
        return None
    if raw.dtype.kind not in "iufO":
        return None
    if raw.dtype.kind == "O" or not isinstance(value, np.ndarray):
        # the entries' types: numpy reads [True, 0.5] and [0.1, "0.2"] as one common type;
        # each distinct type is checked once (a check per entry cost ~2 us)
        entries = raw if raw.dtype.kind == "O" else np.asarray(value, dtype=object)
        if not all(
            issubclass(kind, numbers.Real) and not issubclass(kind, bool | np.bool_)
            for kind in set(map(type, entries.ravel()))
        ):
            return None
    try:
        return raw.astype(float)
    except (TypeError, ValueError, OverflowError):
        return None


def holds_missing_values(value: Any) -> bool:
    """Whether ``value``, which `real_values` refuses, is numbers with missing entries:
    ``pd.NA`` in a nullable ``Float64`` or ``Int64`` array, Series or frame, or ``None``
    among numbers in an object array. Such a value is to be refused as a NaN is, not as
    one that is not numbers. Booleans and dates (``NaT``) are not numbers here: their
    refusal names them, not the missing entry; nor is ``None`` itself (no array at all).

    Examples
    --------
    >>> import pandas as pd
    >>> holds_missing_values(pd.Series([0.5, pd.NA], dtype="Float64"))
    True
    >>> holds_missing_values(["0.5", None]), holds_missing_values([0.5, 1.0])
    (False, False)
    """
    if value is None:  # not an array with a missing entry: refused as not numbers
        return False
    try:
        entries = np.asarray(value, dtype=object)
    except (TypeError, ValueError):  # ragged nesting
        return False
    missing = pd.isna(entries)
    dates = (np.datetime64, np.timedelta64, type(pd.NaT))
    if not np.any(missing) or any(isinstance(e, dates) for e in np.ravel(entries[missing])):
        return False
    return all(
        isinstance(entry, numbers.Real) and not isinstance(entry, (bool, np.bool_))
        for entry in np.ravel(entries[~missing])
    )


def value_summary(value: Any, shown: int = 3) -> str:
    """A one-line description of ``value`` for an error message: its repr when that is
    short and on one line, else its type, dtype, size and first ``shown`` entries (the
    repr of a Series or of a large array spans lines).

    Examples
    --------
    >>> import pandas as pd
    >>> value_summary(pd.Series(["0.1", "b", "c", "d"], dtype=object))
    "a Series of dtype object (4 entries): '0.1', 'b', 'c', ..."
    >>> value_summary(np.zeros((2, 3), dtype=complex))
    'an ndarray of dtype complex128 (shape (2, 3)): 0j, 0j, 0j, ...'
    >>> value_summary("0.5"), value_summary([0.1, "b"])
    ("'0.5'", "[0.1, 'b']")
    """

    def entry(item: Any) -> str:
        if isinstance(item, str):
            text = repr(str(item))  # quoted, whatever its type (np.str_ too)
        else:
            text = repr(bytes(item)) if isinstance(item, bytes) else str(item)
        return " ".join(text.split())[:20]  # one line, short

    try:
        entries = np.asarray(value, dtype=object)
    except (TypeError, ValueError):  # ragged nesting
        entries = None
    if entries is None or entries.ndim == 0:
        return " ".join(repr(value).split())[:60]
    if entries.size <= 2 * shown:
        text = repr(value)
        if "\n" not in text and len(text) <= 60:
            return text
    kind = type(value).__name__
    article = "an" if kind[:1].lower() in "aeiou" or kind == "ndarray" else "a"
    dtype = getattr(value, "dtype", None)
    of = "" if dtype is None else f" of dtype {dtype}"
    size = f"{entries.size} entries" if entries.ndim == 1 else f"shape {entries.shape}"
    flat = entries.ravel()
    first = ", ".join(entry(item) for item in flat[:shown])
    more = ", ..." if flat.size > shown else ""
    return f"{article} {kind}{of} ({size}): {first}{more}"


def label_type_hint(unseen: NDArray, classes: NDArray, name: str) -> str:
    """What to do when unseen labels are the classes in another type: bytes (which
    scikit-learn refuses), or numbers where the model has text (or the reverse)."""
    array = name if name.isidentifier() else "y"
    if any(isinstance(label, bytes) for label in unseen) and not any(
        isinstance(label, bytes) for label in classes
    ):
        return (
            f" `{name}` holds bytes: decode them to text first, e.g. {array}.astype(str) "
            "(for an array of dtype 'S')."
        )
    text = [isinstance(label, str) for label in unseen]
    known_text = [isinstance(label, str) for label in classes]
    if not (all(text) or not any(text)) or len(set(known_text)) != 1 or text[0] == known_text[0]:
        return ""  # the same kind of labels (or a mix): they are simply unknown
    if not {str(label) for label in unseen} <= {str(label) for label in classes}:
        return ""
    if text[0]:
        kind = "float" if np.asarray(classes).dtype.kind == "f" else "int"
        return (
            f" `{name}` holds text where the model's classes are numbers: convert it, "
            f"e.g. {array}.astype({kind})."
        )
    return (
        f" `{name}` holds numbers where the model's classes are text: convert it, e.g. "
        f"{array}.astype(str)."
    )


def labels_text(labels: Any, shown: int = 10) -> str:
    """Labels for a message: all of them up to ``shown``, else the first ``shown`` and the
    count (a message listed 1,000 classes whole).

    Examples
    --------
    >>> labels_text([0, 1, 2]), labels_text(np.arange(30), shown=5)
    ('[0, 1, 2]', '[0, 1, 2, 3, 4, ... (30 in all)]')
    """
    items = pd.Series(np.asarray(labels, dtype=object).ravel()).tolist()
    if len(items) <= shown:
        return str(items)
    return f"{str(items[:shown])[:-1]}, ... ({len(items)} in all)]"


def candidate_values(y_candidates: ArrayLike, name: str = "y_candidates") -> NDArray:
    """``y_candidates`` as floats (at least one; numbers, not booleans), or a ValueError
    naming it (as ``name``); missing values (``pd.NA`` in a nullable pandas dtype) are
    refused as a NaN is, and ``None`` itself is named as such."""
    if y_candidates is None:  # a forgotten argument, neither NaN nor the wrong type
        raise ValueError(
            f"`{name}` is None: pass the values at which to evaluate, as numbers (one "
            "per row, or a grid shared by the rows or given per row)."
        )
    values = real_values(y_candidates)
    if values is None and holds_missing_values(y_candidates):
        raise ValueError(  # as a NaN is
            f"`{name}` contains NaN or infinite values: remove them (the rows, or "
            "the grid values, that hold them)."
        )
    if values is None:  # booleans, text, complex, times: not candidate labels
        raise ValueError(
            f"`{name}` must be numbers (an array of shape (g,), (n_samples,), (1, g) or "
            f"(n_samples, g)), got {value_summary(y_candidates)}."
        )
    if values.size == 0:
        raise ValueError(f"`{name}` is empty: give at least one value.")
    return values


def candidate_grid(
    y_candidates: ArrayLike, n: int, name: str = "y_candidates"
) -> tuple[NDArray, bool]:
    """Candidate labels as an ``(n, g)`` grid, and whether one was given per row.

    ``y_candidates`` of shape ``(n,)`` gives one candidate per row, ``(g,)`` with ``g != n``
    the same ``g`` for every row, ``(n, g)`` a row's own ``g``, and ``(1, g)`` the same
    ``g`` for every row whatever ``n`` (a shared grid that a batch of ``g`` rows cannot
    read as one candidate per row); finite numbers only.

    Examples
    --------
    >>> grid, single = candidate_grid([0.0, 1.0, 2.0], 2)
    >>> grid.shape, single
    ((2, 3), False)
    """
    candidates = candidate_values(y_candidates, name)
    single = candidates.ndim == 1 and candidates.shape[0] == n
    if single:
        grid = candidates[:, None]
    elif candidates.ndim == 1:
        grid = np.broadcast_to(candidates, (n, candidates.size))
    elif candidates.ndim == 2 and candidates.shape[0] == n:
        grid = candidates
    elif candidates.ndim == 2 and candidates.shape[0] == 1:
        grid = np.broadcast_to(candidates, (n, candidates.shape[1]))
    else:
        raise ValueError(
            f"`{name}` must have shape (n_samples,), (g,), (1, g) or (n_samples, g); got "
            f"{candidates.shape} for {n} rows."
        )
    if not np.isfinite(grid).all():
        raise ValueError(
            f"`{name}` contains NaN or infinite values: remove them (the rows, or "
            "the grid values, that hold them)."
        )
    return grid, single
