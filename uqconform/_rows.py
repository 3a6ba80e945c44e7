"""Rows of any 2-D input (array, sparse matrix, DataFrame, list of rows).

Slicing and taking rows without converting the container, the fit parameters that follow
a model's rows (``sample_weight``), and the identity of rows by value (`float_values`,
`rows_digest`), which seeds and hashes depend on.
"""

from __future__ import annotations

import hashlib
from typing import Any

import joblib
import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import sparse


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


def check_sample_weight_rows(fit_params: dict[str, Any], n: int) -> None:
    """Refuse a ``sample_weight`` among ``fit_params`` that is not one weight per row of
    the ``n`` rows, naming the data's length (a model would name only its subsample's, or
    print its own terse message)."""
    weight = fit_params.get("sample_weight")
    if weight is not None and np.ndim(weight) >= 1 and not is_per_row(weight, n):
        raise ValueError(f"`sample_weight` has {len(weight)} entries but X has {n} rows.")
    if weight is not None and np.ndim(weight) > 1:
        raise ValueError(
            f"`sample_weight` must be 1-D (one weight per row of X: {n}), got shape "
            f"{np.shape(weight)}."
        )


def fit_params_rows(fit_params: dict[str, Any], n: int, rows: NDArray) -> dict[str, Any]:
    """The fit parameters of a model trained on rows ``rows`` of ``n``: per-row ones
    (``sample_weight``) taken on the same rows (a list stays a list of its entries), the
    others passed as given (`check_sample_weight_rows` first)."""
    check_sample_weight_rows(fit_params, n)

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


def numeric_columns_as_float(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every column of numbers (`float_values`: any numeric or boolean dtype,
    nullable or not, objects or categories holding numbers) as float64, ``-0.0`` as ``0.0``
    and missing values as NaN; text (categories of text as their values) and dates as given.

    So that a hash of the rows of a mixed table depends on the numbers, not on their
    dtype (an ``Int64`` column and the same values as ``float64`` agree).

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"a": pd.array([1, None], dtype="Int64"), "b": ["x", "y"]})
    >>> converted = numeric_columns_as_float(frame)
    >>> converted.iloc[:, 0].tolist(), converted.iloc[:, 1].tolist()
    ([1.0, nan], ['x', 'y'])
    """
    columns = {}
    for position in range(frame.shape[1]):  # a loop over columns
        column = frame.iloc[:, position]
        if isinstance(column.dtype, pd.CategoricalDtype):  # categories of numbers: numbers
            column = pd.Series(np.asarray(column), index=frame.index)
        numbers = float_values(column)
        columns[position] = column.to_numpy() if numbers is None else numbers + 0.0
    return pd.DataFrame(columns, index=frame.index)


#: Rows hashed at a time by `rows_digest` (bounded memory on millions of rows).
_HASH_ROWS = 16_384


def rows_digest(content: Any) -> str:
    """A digest of the values of some rows, whatever their container and memory layout.

    Rows of a table (a DataFrame, a 2-D array or a list of rows) are hashed by value, one
    block of rows at a time, ignoring the index, column names and memory order; a sparse
    matrix by its canonical CSR arrays: the same values in a DataFrame with another index,
    a Fortran-ordered array or a list give the same digest, and so do the same numbers in
    any numeric dtype (``3`` and ``3.0``, nullable pandas columns, object arrays). A sparse
    matrix and its dense copy differ (hashing the dense rows of a wide sparse matrix would
    cost ``n x p``). In a table mixing text and numbers, each column of numbers is read
    as float64 alike. One value per row (a list, array or Series of texts) is hashed as a
    table's single column.

    Examples
    --------
    >>> texts = ["a cat", "a dog"]
    >>> rows_digest(texts) == rows_digest(pd.Series(texts)) == rows_digest(pd.DataFrame(texts))
    True
    >>> rows_digest(texts) == rows_digest(np.array(texts, dtype=object))
    True
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
    elif isinstance(content, (pd.DataFrame, pd.Series)):  # a mixed table (or a column of
        content = numeric_columns_as_float(pd.DataFrame(content))  # categories): numbers alike
    elif isinstance(content, list) or (
        isinstance(content, np.ndarray) and content.dtype.kind == "O"
    ):
        try:  # a mixed table's `.to_numpy()` or rows, or texts
            table = np.asarray(content, dtype=object)
        except ValueError:  # ragged rows: hashed as given below
            table = None
        if table is not None and table.ndim == 2:  # read as the table itself is
            content = numeric_columns_as_float(pd.DataFrame(table))
        elif table is not None and table.ndim == 1:  # (converted once)
            content = table
    if not hasattr(content, "iloc"):
        try:
            content = np.asarray(content)
        except ValueError:  # ragged rows: hash them as given
            return joblib.hash(content)
        if content.ndim == 1:  # one value per row (texts): one column, as in a table
            content = content.reshape(-1, 1)
        if content.ndim != 2:
            return joblib.hash(np.ascontiguousarray(content))
    elif content.ndim == 1:  # a Series: one column too
        content = content.to_frame()
    digest = hashlib.md5(str(np.shape(content)).encode(), usedforsecurity=False)
    for start in range(0, np.shape(content)[0], _HASH_ROWS):  # a loop over row blocks
        rows = slice_rows(content, start, start + _HASH_ROWS)
        if isinstance(rows, np.ndarray) and rows.dtype == np.float64:
            values = _float_rows_hashes(rows).tobytes()
        else:
            block = pd.DataFrame(rows)
            block = block.set_axis(range(block.shape[1]), axis=1)
            try:
                values = pd.util.hash_pandas_object(block, index=False).to_numpy().tobytes()
            except TypeError:  # cells pandas cannot hash (lists, dicts): joblib's hash
                values = joblib.hash(rows).encode()
        digest.update(values)
    return digest.hexdigest()


def _float_rows_hashes(rows: NDArray[np.float64]) -> NDArray[np.uint64]:
    """Row hashes of a 2-D float64 array, equal to ``pandas.util.hash_pandas_object`` of
    its DataFrame (``index=False``) at a fraction of the cost on few rows: every column
    hashed in one call of ``pandas.util.hash_array``, then combined as pandas combines
    columns (CPython's tuple hash). -0.0 is read as 0.0 and every NaN alike (as pandas 3
    does; older versions hash their bits)."""
    n, p = rows.shape
    with np.errstate(invalid="ignore"):  # a signalling NaN stays a NaN, quietly
        values = np.ravel(rows, order="F") + 0.0  # a copy, -0.0 as 0.0
    values[np.isnan(values)] = np.nan
    columns = pd.util.hash_array(values).reshape(p, n)
    out = np.full(n, 0x345678, dtype=np.uint64)
    multiplier = np.uint64(1000003)
    for position, column in enumerate(columns):  # a loop over columns
        out ^= column
        out *= multiplier
        multiplier += np.uint64(82520 + 2 * (p - position))
    return out + np.uint64(97531)


#: Rows `rows_fingerprint` reads, evenly spread over the data.
_FINGERPRINT_ROWS = 16


def rows_fingerprint(X: Any, y: Any) -> tuple[int, str, str]:
    """The number of rows and digests of up to 16 rows of ``X`` and of ``y`` at evenly
    spread positions: equal for the same rows in the same order (also a copy, or another
    container), at a cost that does not grow with the data.

    Examples
    --------
    >>> import numpy as np
    >>> import pandas as pd
    >>> X, y = np.arange(200.0).reshape(100, 2), np.arange(100.0)
    >>> rows_fingerprint(X, y) == rows_fingerprint(pd.DataFrame(X.copy()), list(y))
    True
    >>> rows_fingerprint(X, y) == rows_fingerprint(X[::-1], y[::-1])
    False
    >>> rows_fingerprint(X, y) == rows_fingerprint(X, y + 1)  # same design, new targets
    False
    """
    n = n_rows(X)
    if n == 0:  # no rows: nothing to sample (the caller's own checks name the problem)
        return 0, "", ""
    positions = np.unique(np.linspace(0, n - 1, min(n, _FINGERPRINT_ROWS)).round().astype(int))
    targets = np.asarray(y)[positions].reshape(positions.size, -1)
    return n, rows_digest(take_rows(X, positions)), rows_digest(targets)


def shared_categories(
    source: pd.DataFrame, target: pd.DataFrame, names: tuple[str, str] = ("X_source", "X_target")
) -> tuple[pd.DataFrame, pd.DataFrame, dict[int, pd.Index]]:
    """The two frames with one dtype for each column that is categorical in either, whose
    categories are the union of both frames' (in that order: the first frame's, then the
    second's new ones), and those categories by column position; ``names`` name the two
    frames in messages. The frames must have the same columns in the same order.

    ``pd.concat`` turns a category column whose categories differ between the frames (a
    site absent from the target) into text, silently: a classifier selecting columns by
    dtype (``make_column_selector(dtype_include="category")``, gradient boosting with
    ``categorical_features="from_dtype"``) then drops it or fails on it. A column
    categorical in one frame only is made categorical in both (its other frame's values
    join the categories). An ordered column keeps its order when one frame's categories
    contain the other's in the same order; otherwise, or when it is ordered in one frame
    only, the union is refused, naming the column. The user's frames are not modified
    (shallow copies get the new columns). Only the columns whose dtype is categorical in
    either frame are read.

    Examples
    --------
    >>> a = pd.DataFrame({"x": [0.0, 1.0], "site": pd.Categorical(["a", "b"])})
    >>> b = pd.DataFrame({"x": [2.0], "site": pd.Categorical(["c"])})
    >>> a2, b2, categories = shared_categories(a, b)
    >>> joined = pd.concat([a2, b2]).site
    >>> list(categories[1]), joined.dtype.name, list(joined.cat.categories)
    (['a', 'b', 'c'], 'category', ['a', 'b', 'c'])
    """
    categories: dict[int, pd.Index] = {}
    copied = False
    flags = [
        isinstance(first, pd.CategoricalDtype) or isinstance(second, pd.CategoricalDtype)
        for first, second in zip(source.dtypes, target.dtypes, strict=True)
    ]
    for position in np.flatnonzero(flags).tolist():
        columns = source.iloc[:, position], target.iloc[:, position]
        dtype = _union_dtype(source.columns[position], names, *columns)
        categories[position] = dtype.categories
        if all(column.dtype == dtype for column in columns):
            continue
        if not copied:  # (isetitem inserts a new array, never writes into the old one)
            source, target, copied = source.copy(deep=False), target.copy(deep=False), True
        for frame, column in zip((source, target), columns, strict=True):
            if column.dtype != dtype:
                frame.isetitem(position, column.astype(dtype))
    return source, target, categories


def _union_dtype(
    name: Any, names: tuple[str, str], source: pd.Series, target: pd.Series
) -> pd.CategoricalDtype:
    """The categorical dtype of column ``name`` for both frames: see `shared_categories`."""
    first_name, second_name = names
    sides = {first_name: source, second_name: target}
    own = {  # each side's categories, and whether they are ordered (None: not categorical)
        side: (
            (column.cat.categories, bool(column.cat.ordered))
            if isinstance(column.dtype, pd.CategoricalDtype)
            else (pd.Index(column.dropna().unique()), None)
        )
        for side, column in sides.items()
    }
    flags = {side: ordered for side, (_, ordered) in own.items() if ordered is not None}
    first, second = own[first_name][0], own[second_name][0]
    same = (
        f"give it the same ordered dtype in both (e.g. {second_name}.astype({{{name!r}: "
        f"{first_name}[{name!r}].dtype}}))"
    )
    if not any(flags.values()):
        return pd.CategoricalDtype(first.append(second[~second.isin(first)]))
    if len(set(flags.values())) > 1:
        side = next(side for side, ordered in flags.items() if ordered)
        raise ValueError(
            f"`{first_name}` and `{second_name}` column {name!r} is ordered in `{side}` only: "
            f"{same.replace('same ordered dtype', 'same dtype')}."
        )
    if len(flags) == 1:  # ordered in one frame, plain values in the other
        side, other = (first_name, second_name) if flags.get(first_name) else names[::-1]
        order, values = own[side][0], own[other][0]
        outside = values[~values.isin(order)]
        if outside.size:
            raise ValueError(
                f"`{other}` column {name!r} holds values outside the order of the ordered "
                f"categories in `{side}` ({list(outside)[:5]}): add them to that order, or "
                "give the column the same ordered dtype in both frames."
            )
        return pd.CategoricalDtype(order, ordered=True)
    longer, shorter = (first, second) if first.size >= second.size else (second, first)
    places = longer.get_indexer(shorter)
    if (places < 0).any() or (np.diff(places) <= 0).any():
        raise ValueError(
            f"`{first_name}` and `{second_name}` column {name!r} is ordered, and the frames' "
            f"categories differ ({list(first)[:6]} and {list(second)[:6]}), but neither "
            "frame's categories contain the other's in the same order, which the union of "
            f"two orders requires (one merging them is not guessed): {same}."
        )
    return pd.CategoricalDtype(longer, ordered=True)
