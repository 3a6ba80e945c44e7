"""Coverage and efficiency of prediction sets, marginal and conditional.

Every function accepts the three kinds of prediction the library produces
(see the output conventions of the API contract):

* an **interval array** of floats, ``(n, 2)`` or ``(n, 2, k)`` for ``k`` levels
  (lower <= upper, infinite bounds allowed; two arrays ``(lower, upper)`` are refused:
  ``np.column_stack([lower, upper])`` is the interval array); with a 2-D ``y_true`` of
  shape ``(n, d)``, a **box array** ``(n, d, 2)`` or ``(n, d, 2, k)`` (the bounding box
  of a multi-output set);
* a **set array** of booleans, ``(n, K)`` or ``(n, K, k)``, column ``j`` standing for label
  ``classes[j]`` (``j`` itself when ``classes`` is not given);
* a **region**: any object with ``contains(Y) -> (n,) bool`` and ``volume() -> (n,)``
  (such as ``PredictionRegion``), or a list of regions, one per level.

A trailing level axis (or a list of regions) makes the functions return one value per
level; otherwise they return a float. Inputs are never modified.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast, runtime_checkable

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from uqconform._rows import float_values
from uqconform._validation import (
    check_row_order,
    check_rows,
    label_type_hint,
    labels_as_numbers,
    labels_text,
)
from uqconform._warnings import warn_user
from uqconform.quantiles import check_miscoverage
from uqconform.regions import check_output_columns

__all__ = [
    "coverage",
    "coverage_by_group",
    "mean_interval_score",
    "mean_set_size",
    "mean_volume",
    "mean_width",
    "size_stratified_coverage",
]

_NO_CLASS = object()  # a set column whose text is no class


@runtime_checkable
class RegionLike(Protocol):
    """What the metrics need from a multi-output prediction region."""

    def contains(self, Y: NDArray) -> NDArray:  # pragma: no cover - protocol
        """Row ``i`` of ``Y`` tested against region ``i``: ``(n,)`` bool."""
        ...


Prediction = ArrayLike | RegionLike | Sequence[RegionLike]

_Kind = Literal["interval", "box", "set", "region"]

#: Name of the efficiency measure of each kind of prediction.
EFFICIENCY_NAME: dict[str, str] = {
    "interval": "mean_width",
    "box": "mean_volume",
    "set": "mean_set_size",
    "region": "mean_volume",
}


@dataclass(frozen=True)
class _Parsed:
    """A validated prediction: ``data`` always carries a trailing level axis."""

    kind: _Kind
    data: Any  # ndarray (n, ..., k) or list of regions
    single: bool  # no level axis in the user's input
    n: int | None  # rows, when known without calling the regions


def _is_region(obj: Any) -> bool:
    return callable(getattr(obj, "contains", None))


def _region_rows(region: Any) -> int | None:
    try:
        return len(region)
    except TypeError:
        return None


def _plain_array(prediction: Any, name: str, intervals_only: bool = False) -> NDArray:
    """The prediction as a bool or float array, also from pandas nullable or object data
    (a DataFrame of ``boolean`` or ``Float64`` columns, an object array of numbers);
    ``intervals_only``: the caller takes intervals only (for the message on ragged lists)."""
    try:
        array = np.asarray(prediction)
    except ValueError:  # numpy's "inhomogeneous shape": rows of different lengths
        if not isinstance(prediction, (list, tuple)):
            raise
        raise ValueError(_ragged_message(prediction, name, intervals_only)) from None
    if array.dtype != object or array.size == 0:
        return array
    if pd.api.types.infer_dtype(array.ravel(), skipna=True) == "boolean":
        if pd.isna(array).any():
            raise ValueError(f"`{name}` holds missing values (NA) in a boolean set array.")
        return array.astype(bool)
    numbers = float_values(array)
    return array if numbers is None else numbers


_STACK_HINT = "pass np.column_stack([lower, upper]), the (n, 2) interval array"
_SET_RECIPE = (
    "prediction sets must be boolean arrays (n, n_classes), True for each label in the set: "
    "mask = np.zeros((n, n_classes), bool); then, for each row i and its labels row, "
    "mask[i, row] = True"
)


def _two_bound_arrays(prediction: Any) -> bool:
    """Whether ``prediction`` is two non-boolean 1-D arrays (or Series) in a tuple or list,
    the form of ``(lower, upper)`` (not a nested list of rows ``[[l_0, u_0], [l_1, u_1]]``,
    nor two rows of a boolean set array); their lengths may differ."""
    if not isinstance(prediction, (list, tuple)) or len(prediction) != 2:
        return False
    if any(isinstance(item, (list, tuple)) or np.ndim(item) != 1 for item in prediction):
        return False
    return all(np.asarray(item).dtype != bool for item in prediction)


def _bound_pair_reading(prediction: Any, y_shape: tuple[int, ...] | None) -> str | None:
    """How two 1-D arrays of one length ``m`` read against ``n`` rows of ``y_true``: as the
    pair ``(lower, upper)`` (``"pair"``: ``m == n != 2``, or ``m != 2`` without ``y_true``,
    as a list of interval rows has items of 2 entries), as either the pair or two rows
    (``"either"``: ``m == 2`` with 2 rows or without ``y_true``), else ``None`` (two rows
    of 2 entries against ``n != 2`` rows, or items of a length no reading matches: read as
    an array, as any other list)."""
    if not _two_bound_arrays(prediction):
        return None
    length, other = (np.size(item) for item in prediction)
    if length != other:
        return None  # refused as a ragged list, with the lengths of both
    rows = y_shape[0] if y_shape else None
    if length == 2 and rows in (None, 2):
        return "either"
    if length != 2 and rows in (None, length):
        return "pair"
    return None


def _ragged_message(
    prediction: list[Any] | tuple[Any, ...], name: str, intervals_only: bool
) -> str:
    """The refusal of a list whose items have different lengths: two bound arrays are
    named with their lengths, interval callers ask for rows of 2 entries, others for the
    boolean set array (label lists)."""
    if _two_bound_arrays(prediction):
        lower, upper = (np.size(item) for item in prediction)
        return (
            f"`{name}` is two 1-D arrays of different lengths, (lower, upper)? lower has "
            f"{lower} entries, upper {upper}: intervals need both bounds of every row, in one "
            f"array: {_STACK_HINT}."
        )
    short = next((i for i, item in enumerate(prediction) if np.size(item) != 2), 0)
    if intervals_only:
        return (
            f"`{name}` is a ragged list (rows of different lengths): each row needs 2 "
            f"entries (lower, upper); row {short} has {np.size(prediction[short])}. Intervals "
            "are an array (n, 2) of floats."
        )
    return (
        f"`{name}` is a ragged list (rows of different lengths), such as lists of labels: "
        f"{_SET_RECIPE}. (For intervals each row needs 2 entries, lower and upper.)"
    )


def _parse_prediction(
    prediction: Any,
    y_shape: tuple[int, ...] | None,
    name: str = "prediction",
    intervals_only: bool = False,
    y_values: NDArray | None = None,
) -> _Parsed:
    """Recognise and validate a prediction (``y_shape`` decides interval versus box;
    ``intervals_only``: the caller takes nothing else, so 0/1 bounds are not suspect;
    ``y_values``: the targets, whose class-like labels make rows summing to 1 suspect).

    Two 1-D arrays in a tuple or list, ``(lower, upper)``, of one entry per row of
    ``y_true`` are refused (`_bound_pair_reading`): with two rows, they and two interval
    rows ``[l_0, u_0]``, ``[l_1, u_1]`` given as arrays look alike, so both are refused."""
    if _is_region(prediction):
        return _Parsed("region", [prediction], True, _region_rows(prediction))
    if isinstance(prediction, (list, tuple)) and prediction and _is_region(prediction[0]):
        if not all(_is_region(item) for item in prediction):
            raise TypeError(
                f"`{name}` is a list mixing regions and other objects; give one region per "
                "level (objects with a contains(Y) method)."
            )
        rows = cast("set[int]", {_region_rows(item) for item in prediction} - {None})
        if len(rows) > 1:
            raise ValueError(f"`{name}` holds regions of different lengths {sorted(rows)}.")
        return _Parsed("region", list(prediction), False, rows.pop() if rows else None)
    if isinstance(prediction, (list, tuple)) and not prediction:
        raise ValueError(
            f"`{name}` is an empty list: give at least one region (one per level), or an "
            "array of intervals or sets."
        )
    if prediction is None:
        raise TypeError(f"`{name}` is None; pass intervals, a boolean set array or a region.")
    reading = _bound_pair_reading(prediction, y_shape)
    if reading == "either":
        raise TypeError(
            f"`{name}` is two 1-D arrays of 2 entries each: two rows [lower, upper], or the "
            "bounds (lower, upper) of two rows? Intervals are one (n, 2) array: pass "
            "np.vstack(rows) for a list of rows, np.column_stack([lower, upper]) for the "
            "bounds."
        )
    if reading == "pair":
        raise TypeError(
            f"`{name}` is two 1-D arrays of {np.size(prediction[0])} entries each, (lower, "
            f"upper)? Intervals are one array: {_STACK_HINT}. (A nested list of rows "
            "[[l_0, u_0], [l_1, u_1], ...] is read row by row.)"
        )
    array = _plain_array(prediction, name, intervals_only)
    if array.dtype == bool and intervals_only:
        raise TypeError(
            f"`{name}` must hold numbers (lower, upper), got a boolean array (prediction "
            "sets? their size is measured by mean_set_size)."
        )
    if array.dtype == bool:
        if array.ndim not in (2, 3):
            raise ValueError(
                f"`{name}` as a set array must have shape (n, n_classes) or "
                f"(n, n_classes, k), got {array.shape}."
            )
        single = array.ndim == 2
        return _Parsed("set", array[..., None] if single else array, single, array.shape[0])
    if array.dtype.kind not in "iuf":
        raise TypeError(
            f"`{name}` must be a float interval array, a boolean set array or a region "
            f"(an object with contains(Y)), got an array of dtype {array.dtype}."
        )
    is_box = (
        y_shape is not None
        and len(y_shape) == 2
        and array.ndim in (3, 4)
        and array.shape[1] == y_shape[1]
        and array.shape[2] == 2
    )
    # integer bounds as 64-bit integers (widths in int32 wrapped: an int32 [min, max]
    # interval had width -1; `_widths` takes their difference exactly), and narrower
    # floats as float64 (a float16 [-40000, 40000] interval was infinitely wide)
    numbers = array
    if array.dtype.kind in "iu":
        numbers = array.astype(np.uint64 if array.dtype.kind == "u" else np.int64)
    elif array.dtype.kind == "f" and array.dtype.itemsize < 8:
        numbers = array.astype(np.float64)
    if is_box:
        single = array.ndim == 3
        data = numbers[..., None] if single else numbers
        _check_bounds(data[:, :, 0], data[:, :, 1], name)
        return _Parsed("box", data, single, array.shape[0])
    if array.ndim not in (2, 3):
        swapped = (
            " A 1-D array: were the arguments swapped? Metrics that take both read "
            "(y_true, prediction), the observed values first."
            if array.ndim == 1
            else ""
        )
        raise ValueError(
            f"`{name}` as an interval array must have shape (n, 2) or (n, 2, k), got "
            f"{array.shape}.{swapped}"
        )
    if array.shape[1] != 2:
        layout_hint = (
            f" Intervals laid out as (n, k, 2) go on the last axis: np.moveaxis({name}, 1, 2)."
            if array.ndim == 3 and array.shape[2] == 2
            else (
                f" Two rows of {array.shape[1]}: if they are the lower and upper bounds, "
                f"{_STACK_HINT} (or {name}.T)."
                if array.ndim == 2
                and array.shape[0] == 2
                and (not y_shape or y_shape[0] == array.shape[1])  # one bound per row of y
                else ""
            )
        )
        raise TypeError(
            f"`{name}` of shape {array.shape} would be a set array (n, n_classes[, k]), and set "
            f"arrays must be boolean, got dtype {array.dtype}; for intervals the second axis "
            f"must have length 2 (lower, upper).{layout_hint}"
        )
    zero_one = np.isin(array, (0, 1)).all()
    maybe_sets = not intervals_only and array.size and (array.dtype.kind in "iu" or zero_one)
    if maybe_sets:
        # integer arrays with two columns are label sets more often than intervals: top-2
        # label indices, or 0/1 masks over two classes (also as floats)
        kind = "of 0/1 values" if zero_one else "of integers"
        warn_user(
            f"`{name}` is an array {kind} with two columns: it is read as intervals "
            "[lower, upper]. Prediction sets must be boolean arrays (n, n_classes): "
            "sets.astype(bool) for 0/1 masks; for label lists such as top-k labels, "
            "mask = np.zeros((n, n_classes), bool); "
            "mask[np.arange(n)[:, None], labels] = True.",
            UserWarning,
        )
    single = array.ndim == 2
    data = numbers[..., None] if single else numbers
    hint = (
        f" If these are prediction sets over two classes, pass {name}.astype(bool)."
        if maybe_sets and zero_one  # (label indices such as top-2 labels are no masks)
        else ""
    )
    if array.ndim == 3 and array.shape[2] == 2:  # (n, 2, 2): levels stacked on axis 1?
        hint += f" Intervals laid out as (n, k, 2) go on the last axis: np.moveaxis({name}, 1, 2)."
        with np.errstate(invalid="ignore"):
            empty = np.isinf(data[:, 0]).all(axis=0) & (data[:, 0] == data[:, 1]).all(axis=0)
        if empty.any():  # one-sided intervals of two levels read across: [-inf, -inf]
            warn_user(
                f"`{name}` of shape {array.shape} holds a level whose every interval is "
                f"[inf, inf] or [-inf, -inf] (it contains nothing).{hint}",
                UserWarning,
            )
    probabilities = (  # (continuous targets: intervals about 0.5 of proportions, say)
        single
        and not intervals_only
        and not maybe_sets
        and y_values is not None
        and _look_like_labels(y_values)
        and _rows_are_distributions(array)
    )
    if probabilities:  # a binary classifier's predict_proba where sets go
        hint += (
            f" The rows of `{name}` are probability distributions (each in [0, 1], summing "
            "to 1): class probabilities? Prediction sets come from a conformal classifier's "
            "predict_set (boolean, n x n_classes)."
        )
    _check_bounds(data[:, 0], data[:, 1], name, hint)
    if probabilities:
        warn_user(f"`{name}` is read as intervals [lower, upper].{hint}", UserWarning)
    return _Parsed("interval", data, single, array.shape[0])


def _check_bounds(lower: NDArray, upper: NDArray, name: str, hint: str = "") -> None:
    """Refuse NaN bounds and lower > upper (``hint`` is added to the latter)."""
    if np.isnan(lower).any() or np.isnan(upper).any():
        raise ValueError(f"`{name}` contains NaN bounds; intervals need numbers (inf allowed).")
    inverted = lower > upper
    if inverted.any():
        raise ValueError(
            f"`{name}` has {int(inverted.sum())} intervals with lower > upper; the first "
            "column must be the lower bound. (Boxes of multi-output regressors, shape "
            "(n, d, 2), hold each output's bounds on the last axis: use coverage(Y, boxes), "
            "mean_volume(boxes), or boxes[..., 1] - boxes[..., 0] for widths per output.)"
            f"{hint}"
        )


def _check_rows(
    y: NDArray, n: int | None, name: str = "y_true", other: str = "prediction"
) -> None:
    if y.shape[0] == 0:
        raise ValueError(f"`{name}` is empty: at least one row is needed.")
    if n is not None and y.shape[0] != n:
        raise ValueError(f"`{name}` has {y.shape[0]} rows but `{other}` has {n}.")


def _numeric_target(y: NDArray, name: str = "y_true", keep_integers: bool = False) -> NDArray:
    """``y`` as floats, checked finite; ``keep_integers``: integer targets as they are, so
    that integer bounds compare with them exactly (float64 rounds integers above 2**53)."""
    # text such as "2.5" would be read as a number, dates as nanoseconds since 1970,
    # complex values without their imaginary part
    text = y.dtype.kind in "USmMc" or (
        y.dtype.kind == "O"
        and pd.api.types.infer_dtype(y.ravel(), skipna=True)
        in ("string", "bytes", "mixed", "mixed-integer")
    )
    if text:
        raise TypeError(f"`{name}` must be numeric for intervals or regions, got dtype {y.dtype}.")
    if keep_integers and y.dtype.kind in "iu":
        return y
    try:
        values = y.astype(float)
    except (TypeError, ValueError):
        raise TypeError(
            f"`{name}` must be numeric for intervals or regions, got dtype {y.dtype}."
        ) from None
    if not np.isfinite(values).all():
        raise ValueError(
            f"`{name}` contains {int((~np.isfinite(values)).sum())} NaN or infinite values."
        )
    return values


def _label_index(
    y: NDArray,
    n_columns: int,
    classes: ArrayLike | None,
    name: str = "y_true",
    of_model: bool = False,
    sets: NDArray | None = None,
) -> NDArray:
    """Column of each label of ``y`` in a set array with ``n_columns`` columns
    (``of_model``: ``classes`` is a model's ``classes_``, as `evaluate` passes it;
    ``sets``: the set array ``(n, K, k)``, to test integer labels lacking 0 for 1-based
    classes, `_one_based_evidence`)."""
    if y.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D for set arrays, got shape {y.shape}.")
    missing = pd.isna(y) if y.dtype.kind in "fOcmM" else np.zeros(y.shape, dtype=bool)
    if np.any(missing):
        raise ValueError(
            f"`{name}` contains {int(np.sum(missing))} missing (NaN/None) labels; remove or "
            "impute those rows first."
        )
    if classes is None:
        y = labels_as_numbers(y)  # numbers held as objects (a nullable column), as at fit
        if y.dtype.kind in "biu":
            index = y.astype(np.intp)
        elif y.dtype.kind == "f" and np.all(np.mod(y, 1) == 0):
            index = y.astype(np.intp)
        else:
            raise ValueError(
                f"`{name}` holds labels that are not column indices 0..K-1 (e.g. "
                f"{y[:3].tolist()}); pass classes=... giving the label of each column."
            )
        bad = (index < 0) | (index >= n_columns)
        if bad.any():
            raise ValueError(
                f"`{name}` holds labels outside 0..{n_columns - 1} (e.g. "
                f"{np.unique(y[bad])[:5].tolist()}); pass classes=... if the labels are not "
                "column indices."
            )
        if n_columns > 2 and not (index == 0).any():
            # no 0: 1-based classes read as positions? (with every class present, label K is
            # refused above). The rows of some classes of 0-based labels lack 0 too (a
            # per-class loop), so a subset warns only on the evidence of the sets. Not with
            # two columns, where the rows of the positive class (all 1) are common.
            advice = (
                f"labels are read as column indices 0..{n_columns - 1}; if they are the "
                "classes (such as 1..K), pass classes=model.classes_. For per-class coverage, "
                "coverage_by_group(y, sets, groups=y) takes all rows at once (with the same "
                f"classes=; indices without this warning: classes=np.arange({n_columns}))."
            )
            shifted, own = (0, 0) if sets is None else _one_based_evidence(sets, index)
            if np.array_equal(np.unique(index), np.arange(1, n_columns)):
                warn_user(
                    f"`{name}` holds the labels 1..{n_columns - 1} and no 0: {advice}",
                    UserWarning,
                )
            elif shifted >= 2 and shifted >= 2 * own:
                warn_user(
                    f"`{name}` holds no label 0, and reading each label as the column before "
                    f"it (label - 1) covers {shifted} sets that the label's own column misses "
                    f"(and misses {own} that it covers): {advice}",
                    UserWarning,
                )
        return index
    labels = np.asarray(classes)
    if labels.ndim != 1:
        raise ValueError(f"`classes` must be 1-D, got shape {labels.shape}.")
    if labels.size != n_columns:
        raise ValueError(
            f"`classes` has {labels.size} labels but the set array has {n_columns} columns."
        )
    lookup = pd.Index(labels)
    if not lookup.is_unique:
        raise ValueError("`classes` contains duplicate labels.")
    index = lookup.get_indexer(y)
    unknown = index < 0
    if unknown.any():
        unseen = pd.unique(y[unknown])
        source = "model.classes_" if of_model else "classes"
        never = (
            " The model's sets never hold them, so those rows can never be covered: drop "
            "them, or fit the model on data with every class."
            if of_model
            else ""
        )
        hint = label_type_hint(unseen, labels, name)  # the classes in another type?
        raise ValueError(
            f"`{name}` contains labels not in `{source}`: {labels_text(unseen, 5)}. "
            f"`{source}`: {labels_text(labels)}.{hint or never}"
        )
    return index.astype(np.intp)


def _one_based_evidence(sets: NDArray, index: NDArray) -> tuple[int, int]:
    """Counts of (row, level) pairs whose set holds column ``index - 1`` and not ``index``,
    and the reverse (``index`` >= 1 throughout; ``sets`` of shape ``(n, K, k)``).

    Read as 1-based classes shifted by one, labels are covered by the column before them:
    the first count exceeds the second. Read right (0-based), the label's own column
    covers at the nominal level and the column before it rarely alone. The warning takes
    the first count at least 2 and at least twice the second: on per-class subsets of
    iris, wine, digits and two synthetic sets (6 seeds, alpha 0.05/0.1/0.2, logistic
    regression and a random forest) it fired on 0 of 756 subsets of 0-based labels and on
    732 of 756 of 1-based labels, missing only where the sets hold most of 4 classes (2.4
    to 3.8 labels on average); on batches of 20 test rows, 0 of 138 lacking label 0 and
    144 of 144 of 1-based labels lacking K."""
    rows = np.arange(index.shape[0])
    own, before = sets[rows, index], sets[rows, index - 1]
    return int((before & ~own).sum()), int((own & ~before).sum())


def _classes_of_text(columns: pd.Index, known: pd.Index) -> pd.Index:
    """``columns`` with the text of a class (as a CSV round trip writes it) replaced by
    that class: ``"2"`` for ``2`` when that maps every column; else, for numeric classes,
    ``"2.0"`` or ``" 2"`` for ``2`` and ``"2"`` for ``2.0`` (the same number) when every
    column is such a text of a class, each of another one (``"3.0", "1", "2"`` for
    ``1, 2, 3``); else the exact texts replaced and the other columns as they are (classes
    absent from ``known``, the observed labels; refused against a given ``classes``)."""
    text = {str(label): label for label in known}  # the classes written as text
    if len(text) < known.size or not any(isinstance(c, str) and c in text for c in columns):
        exact = None
    else:
        exact = pd.Index([text.get(c, c) if isinstance(c, str) else c for c in columns])
        if all(isinstance(c, str) and c in text for c in columns):
            return exact
    by_value = {float(label): label for label in known} if known.dtype.kind in "iuf" else {}
    fallback = columns if exact is None else exact
    if len(by_value) < known.size or not all(isinstance(c, str) for c in columns):
        return fallback  # (two classes of one float value: 2**53 and 2**53 + 1)
    try:
        found = [by_value.get(float(c), _NO_CLASS) for c in columns]
    except ValueError:  # a column that is no number
        return fallback
    if any(label is _NO_CLASS for label in found) or len(set(found)) < len(found):
        return fallback
    return pd.Index(found)


def _frame_classes(
    prediction: Any,
    classes: ArrayLike | None,
    labels: NDArray,
    name: str = "prediction",
    labels_name: str = "y_true",
) -> tuple[Any, ArrayLike | None]:
    """A boolean set DataFrame whose column labels name classes (they share a label with
    ``classes``, or without it with the observed ``labels``, or are those labels as text,
    as a CSV round trip writes them: `_classes_of_text`) is read by label: its columns in
    the order of ``classes``, or its labels as ``classes``. The default ``0..K-1`` and
    its text "0".."K-1" in that order (whatever the classes) are read by position, as an
    array's; other columns that name no class (a MultiIndex, say) too, with a warning."""
    if not isinstance(prediction, pd.DataFrame):
        return prediction, classes
    columns = prediction.columns
    if columns.equals(pd.RangeIndex(len(columns))):
        return prediction, classes  # positions
    if _plain_array(prediction, name).dtype != bool:
        return prediction, classes  # intervals (such as lower/upper)
    given = None if classes is None else np.asarray(classes)
    if given is not None and (given.ndim != 1 or not pd.Index(given).is_unique):
        return prediction, classes  # refused by _label_index, with its own message
    known = pd.Index(given if given is not None else pd.unique(labels.reshape(-1)))
    multi = isinstance(columns, pd.MultiIndex)
    # the text of the default columns, in order (pd.DataFrame(sets) after a CSV round
    # trip): positions, even where "1" is also a class written as text
    positions = not multi and list(columns) == [str(j) for j in range(len(columns))]
    if not multi and not positions and not columns.isin(known).any():
        columns = _classes_of_text(columns, known)
    if multi or not columns.isin(known).any():
        # (labels of y that are not positions are refused by _label_index)
        if not positions and (given is not None or labels.dtype.kind in "biuf"):
            against = (
                f"`classes` ({labels_text(given)})"
                if given is not None
                else f"the labels of `{labels_name}` ({labels_text(known)})"
            )
            warn_user(
                f"The columns of `{name}` ({labels_text(columns.to_flat_index())}) share no "
                f"label with {against}: they are read by position, column j as the j-th class. "
                "If they stand for the classes, give them the classes' labels; to read by "
                f"position without this warning, pass `{name}.to_numpy()`.",
                UserWarning,
            )
        return prediction, classes  # the columns name no class: read by position
    if not columns.is_unique:
        raise ValueError(
            f"`{name}` has duplicate column labels {labels_text(prediction.columns)}; a set "
            "DataFrame needs one column per class."
        )
    if given is None:
        return prediction, np.asarray(columns)
    order = columns.get_indexer(given)
    if given.size == len(columns) and (order >= 0).all():
        return prediction.iloc[:, order], classes  # a new frame; the user's is unchanged
    raise ValueError(
        f"The columns of `{name}` name classes and differ from `classes`: `{name}` has "
        f"columns {labels_text(prediction.columns)}, `classes` is {labels_text(given)}. "
        f"Give the same labels in both, or pass `{name}` without `classes`."
    )


def _prepare(
    y_true: ArrayLike,
    prediction: Any,
    classes: ArrayLike | None,
    name: str = "y_true",
    prediction_name: str = "prediction",
    intervals_only: bool = False,
    of_model: bool = False,
) -> tuple[_Parsed, NDArray]:
    """Validated prediction and target (label indices for sets, floats otherwise;
    ``of_model``: ``classes`` is a model's ``classes_``)."""
    if y_true is None:
        raise ValueError(f"`{name}` is None; pass the observed targets.")
    if _is_region(y_true):
        raise TypeError(
            f"`{name}` is a prediction region: were the arguments swapped? Metrics that take "
            "both read (y_true, prediction), the observed values first."
        )
    y = np.asarray(y_true)
    if y.ndim == 0:
        raise ValueError(f"`{name}` must be an array with one entry per row, got a scalar.")
    prediction, classes = _frame_classes(prediction, classes, y, prediction_name, name)
    parsed = _parse_prediction(prediction, y.shape, prediction_name, intervals_only, y)
    if classes is not None and parsed.kind != "set":
        raise TypeError(
            "`classes` is only meaningful for boolean set arrays, but `prediction` is "
            f"{'an' if parsed.kind[0] in 'aeiou' else 'a'} {parsed.kind} prediction."
        )
    _check_rows(y, parsed.n, name, prediction_name)
    # a pandas prediction (intervals or sets as a DataFrame) keeps its row labels: a
    # y_true holding them in another order would be paired by position
    check_row_order(prediction, y_true, name, rows_of=prediction_name)
    if parsed.kind == "set":
        if y.ndim == 2 and y.shape[1] == 1:  # df[["label"]]: squeezed, as for intervals
            y = y[:, 0]
        return parsed, _label_index(
            y, parsed.data.shape[1], classes, name, of_model, sets=parsed.data
        )
    if parsed.kind == "region":
        for region in parsed.data:  # a DataFrame in another column order than the outputs
            check_output_columns(y_true, getattr(region, "output_names", None), name)
        if y.ndim == 1 and all(getattr(r, "dim", None) == 1 for r in parsed.data):
            y = y[:, None]  # one output: a 1-D target, as contains() takes it
        if y.ndim != 2:
            raise ValueError(f"`{name}` must have shape (n, d) for regions, got {y.shape}.")
        dims = cast("set[int]", {getattr(r, "dim", None) for r in parsed.data} - {None})
        if dims - {y.shape[1]}:
            raise ValueError(
                f"`{name}` has {y.shape[1]} columns but `{prediction_name}` is a region of "
                f"{', '.join(map(str, sorted(dims)))} outputs; give one column per output."
            )
        return parsed, _numeric_target(y, name)
    if parsed.kind == "box":
        return parsed, _numeric_target(y, name, keep_integers=True)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(
            f"`{name}` must be 1-D for an interval array, got shape {y.shape}; for several "
            "outputs pass a box array (n, d, 2) or a region."
        )
    return parsed, _numeric_target(y, name, keep_integers=True)


def _covered(parsed: _Parsed, y: NDArray) -> NDArray:
    """Per-row coverage, ``(n, k)`` bool."""
    data = parsed.data
    if parsed.kind == "interval":
        return (data[:, 0] <= y[:, None]) & (y[:, None] <= data[:, 1])
    if parsed.kind == "box":
        inside = (data[:, :, 0] <= y[:, :, None]) & (y[:, :, None] <= data[:, :, 1])
        return inside.all(axis=1)
    if parsed.kind == "set":
        return data[np.arange(y.shape[0]), y]
    columns = []
    for region in data:  # a loop over levels
        inside = np.asarray(region.contains(y))
        if inside.shape != (y.shape[0],) or inside.dtype != bool:
            raise TypeError(
                "`prediction.contains(y_true)` must return a boolean array of shape "
                f"({y.shape[0]},), got {inside.dtype} of shape {inside.shape}."
            )
        columns.append(inside)
    return np.stack(columns, axis=1)


def _widths(data: NDArray) -> NDArray:
    """``upper - lower`` along axis 1, 0 for degenerate infinite intervals ([inf, inf]);
    of 64-bit integer bounds (``lower <= upper``) exactly, as unsigned differences."""
    lower, upper = data[:, 0], data[:, 1]
    if data.dtype.kind in "iu":
        return _excess(upper, lower)
    with np.errstate(invalid="ignore"):
        return np.where(lower == upper, 0.0, upper - lower).astype(float)


def _excess(a: NDArray, b: NDArray) -> NDArray:
    """``max(a - b, 0)`` as floats; of integers exactly where the difference is below 2**64
    (as an unsigned difference; an unsigned ``a`` and a negative ``b`` further apart, in
    float)."""
    if a.dtype.kind not in "iu" or b.dtype.kind not in "iu":
        with np.errstate(invalid="ignore"):  # -inf - y and y - inf are fine, never inf - inf
            return np.maximum(a - b, 0.0)
    a, b = np.broadcast_arrays(a, b)
    a_negative, b_negative = a < 0, b < 0
    a_bits = a.astype(np.uint64, casting="unsafe")  # two's complement: ordered within a sign
    b_bits = b.astype(np.uint64, casting="unsafe")
    greater = np.where(a_negative == b_negative, a_bits > b_bits, b_negative)
    gap = np.subtract(a_bits, b_bits, dtype=np.uint64)  # a - b modulo 2**64
    wrapped = b_negative & ~a_negative & (gap < a_bits)  # a + |b| reached 2**64
    exact = gap.astype(float)
    if wrapped.any():
        far = a.astype(float) - b.astype(float)
        exact = np.where(wrapped, far, exact)
    return np.where(greater, exact, 0.0)


def _sizes(parsed: _Parsed, **volume_kwargs: Any) -> NDArray:
    """Per-row size (width, set size or volume), ``(n, k)`` float."""
    data = parsed.data
    if parsed.kind == "interval":
        return _widths(data)
    if parsed.kind == "box":
        sides = _widths(np.moveaxis(data, 2, 1))  # (n, d, k)
        # a side of width 0 makes the box a null set, even beside an infinite side
        # (the product would be 0 * inf = NaN)
        zero = sides == 0
        return np.where(zero.any(axis=1), 0.0, np.where(zero, 1.0, sides).prod(axis=1))
    if parsed.kind == "set":
        return data.sum(axis=1).astype(float)
    columns = []
    for region in data:  # a loop over levels
        if not callable(getattr(region, "volume", None)):
            raise TypeError(f"`region` of type {type(region).__name__} has no volume() method.")
        volume = np.asarray(region.volume(**volume_kwargs), dtype=float)
        if volume.ndim != 1 or (parsed.n is not None and volume.shape[0] != parsed.n):
            raise ValueError(
                f"`region.volume()` must return one volume per row, got shape {volume.shape}."
            )
        columns.append(volume)
    return np.stack(columns, axis=1)


def _per_level(values: NDArray, single: bool) -> float | NDArray:
    return float(values[0]) if single else values


def coverage(
    y_true: ArrayLike, prediction: Prediction, classes: ArrayLike | None = None
) -> float | NDArray:
    """Fraction of rows whose true value lies in its prediction set.

    Parameters
    ----------
    y_true : array-like of shape (n,) or (n, d)
        Observed targets: numbers for intervals, labels for set arrays, rows of ``d``
        outputs for boxes and regions.
    prediction : ndarray, region or list of regions
        Intervals ``(n, 2[, k])`` (bounds included), boxes ``(n, d, 2[, k])``, boolean sets
        ``(n, K[, k])``, an object with ``contains(Y) -> (n,) bool``, or a list of such
        objects (one per level).
    classes : array-like of shape (K,), optional
        Label of each set column (any type, strings included); by default column ``j`` is
        label ``j``. Pass ``classes=model.classes_`` whenever the labels are not 0..K-1:
        without it, labels 1..K are read as column indices. Label K is refused; with more
        than two columns, integer labels lacking 0 warn when they are exactly 1..K-1 or
        when reading each label as the column before it (label - 1) covers clearly more:
        at least 2 sets that the label's own column misses, and twice as many as the
        reverse (the rows of some classes of 1-based labels; per-class coverage of all
        classes at once: ``coverage_by_group(y, sets, groups=y)``).
        A set DataFrame whose columns share a label with ``classes`` (or, without it, with
        ``y_true``), or are those labels as text (``"2"`` for ``2`` after a CSV round
        trip; ``"2.0"`` for ``2``, or ``"2"`` for ``2.0``, when every column is such a
        text of another class), carries its classes: its columns are used as
        ``classes``, or aligned to ``classes`` when given (refused unless they hold the
        same labels). Columns that share none, and the default ``0..K-1``'s text
        ``"0".."K-1"`` in that order whatever the classes, are read by position:
        silently for the default columns and their text, with a warning otherwise (a
        MultiIndex, say).

    Returns
    -------
    float, or ndarray of shape (k,) with a level axis or a list of regions

    Examples
    --------
    >>> import numpy as np
    >>> coverage([0.5, 3.0], np.array([[0.0, 1.0], [1.0, 2.0]]))
    0.5
    >>> sets = np.array([[True, False], [True, True]])
    >>> coverage(["b", "b"], sets, classes=["a", "b"])
    0.5
    """
    parsed, y = _prepare(y_true, prediction, classes)
    return _per_level(_covered(parsed, y).mean(axis=0), parsed.single)


def mean_width(intervals: ArrayLike) -> float | NDArray:
    """Average interval width (infinite when some interval is unbounded).

    Parameters
    ----------
    intervals : array-like of shape (n, 2) or (n, 2, k)
        Lower and upper bounds (on the second axis). Not for the boxes ``(n, d, 2)`` of
        multi-output regressors: see `mean_volume`.

    Returns
    -------
    float, or ndarray of shape (k,)

    Examples
    --------
    >>> import numpy as np
    >>> mean_width(np.array([[0.0, 1.0], [1.0, 4.0]]))
    2.0
    """
    parsed = _parse_prediction(intervals, None, name="intervals", intervals_only=True)
    if parsed.kind != "interval":
        raise TypeError(
            f"`intervals` must be a float array (n, 2) or (n, 2, k), got a {parsed.kind} "
            "prediction."
        )
    _check_rows(parsed.data, None, "intervals")
    return _per_level(_sizes(parsed).mean(axis=0), parsed.single)


def mean_interval_score(
    y_true: ArrayLike, intervals: ArrayLike, alpha: float | ArrayLike
) -> float | NDArray:
    """Average interval score (Gneiting and Raftery, 2007; Winkler's score): the width plus
    ``2 / alpha`` times the distance by which the interval misses ``y``.

    Width alone rewards under-coverage: of two methods, the one that covers less is often
    the narrower. The interval score is a proper scoring rule for the central
    ``1 - alpha`` interval, so it compares intervals of different coverage on one scale
    (lower is better). Row ``i`` scores
    ``(u_i - l_i) + (2 / alpha) * (max(l_i - y_i, 0) + max(y_i - u_i, 0))``.

    Parameters
    ----------
    y_true : array-like of shape (n,)
    intervals : array-like of shape (n, 2) or (n, 2, k)
        Lower and upper bounds (on the second axis).
    alpha : float or sequence of float
        The miscoverage level the intervals were built for, one per level of
        ``intervals`` (a scalar for ``(n, 2)``). A level above 0.5 warns (``alpha=0.9``
        meant as 90% intervals would make the score prefer intervals covering 10%).

    Returns
    -------
    float, or ndarray of shape (k,)
        Infinite when some interval is unbounded.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([0.5, 3.0])
    >>> intervals = np.array([[0.0, 1.0], [0.0, 2.0]])  # widths 1 and 2; y_2 misses by 1
    >>> mean_interval_score(y, intervals, alpha=0.1)  # (1 + (2 + 20 * 1)) / 2
    11.5
    """
    parsed, y = _prepare(y_true, intervals, None, prediction_name="intervals", intervals_only=True)
    if parsed.kind != "interval":
        raise TypeError(
            f"`intervals` must be a float array (n, 2) or (n, 2, k), got a {parsed.kind} "
            "prediction."
        )
    levels = check_miscoverage(alpha)  # alpha=0.9 meant as 90%: the score would reward 10%
    n_levels = parsed.data.shape[-1]
    # a sequence of one level is that level, as everywhere in the library
    if levels.size != n_levels or (parsed.single and np.size(alpha) != 1):
        raise ValueError(
            f"`alpha` must give one level per level of `intervals` ({n_levels}"
            f"{', a scalar' if parsed.single else ''}), got {alpha!r}."
        )
    lower, upper = parsed.data[:, 0], parsed.data[:, 1]
    miss = _excess(lower, y[:, None]) + _excess(y[:, None], upper)
    scores = _widths(parsed.data) + (2.0 / levels) * miss
    return _per_level(scores.mean(axis=0), parsed.single)


def _look_like_labels(y: NDArray) -> bool:
    """Whether targets read as class labels: text, booleans or whole numbers."""
    if y.dtype.kind in "biuOUS":
        return True
    with np.errstate(invalid="ignore"):
        return bool(y.dtype.kind == "f" and np.all(np.mod(y, 1) == 0))


def _rows_are_distributions(array: NDArray) -> bool:
    """Whether every row of a 2-D array lies in [0, 1] and sums to 1 (probabilities)."""
    with np.errstate(invalid="ignore"):
        return bool(
            array.size
            and ((array >= 0) & (array <= 1)).all()
            and np.allclose(array.sum(axis=1), 1.0, atol=1e-6)
        )


def mean_set_size(sets: ArrayLike) -> float | NDArray:
    """Average number of labels per prediction set.

    Parameters
    ----------
    sets : array-like of bool, shape (n, K) or (n, K, k)

    Returns
    -------
    float, or ndarray of shape (k,)

    Examples
    --------
    >>> import numpy as np
    >>> mean_set_size(np.array([[True, False, False], [True, True, True]]))
    2.0
    """
    if _is_region(sets) or (isinstance(sets, (list, tuple)) and sets and _is_region(sets[0])):
        raise TypeError(
            "`sets` is a multi-output region, not a boolean set array (n, K[, k]): for a "
            "region use mean_volume."
        )
    array = _plain_array(sets, "sets")
    if array.dtype != bool:
        hint = ""
        if array.dtype.kind in "iuf" and np.isin(array, (0, 1)).all():  # 0/1 indicators
            hint = "; for 0/1 membership indicators pass sets.astype(bool)"
        elif array.dtype.kind in "iuf" and array.ndim == 2 and _rows_are_distributions(array):
            hint = " (class probabilities? sets come from a conformal classifier's predict_set)"
        elif array.dtype.kind in "iuf" and array.ndim in (2, 3) and array.shape[1] == 2:
            hint = " (intervals? their width is measured by mean_width)"
        raise TypeError(
            f"`sets` must be a boolean array (True for each label in the set), got dtype "
            f"{array.dtype}{hint}."
        )
    parsed = _parse_prediction(array, None, name="sets")
    _check_rows(parsed.data, None, "sets")
    return _per_level(_sizes(parsed).mean(axis=0), parsed.single)


def mean_volume(
    region: RegionLike | Sequence[RegionLike], **volume_kwargs: Any
) -> float | NDArray:
    """Average volume of a multi-output prediction region (or of one region per level).

    Parameters
    ----------
    region : region, list of regions, or box array
        Objects with a ``volume(**volume_kwargs) -> (n,)`` method (``PredictionRegion``),
        or boxes ``(n, d, 2[, k])`` (lower and upper bound of each output on the third
        axis, as ``predict_interval`` of the multi-output regressors returns them).
    **volume_kwargs
        Passed to ``volume`` (e.g. ``n_samples``, ``random_state`` for Monte Carlo volumes);
        refused with a box array, whose volume is exact.

    Returns
    -------
    float, or ndarray of shape (k,) for a list of regions

    Examples
    --------
    >>> import numpy as np
    >>> class Boxes:
    ...     def __init__(self, sides):
    ...         self.sides = np.asarray(sides)
    ...     def contains(self, Y):
    ...         return (np.abs(Y) <= self.sides / 2).all(axis=1)
    ...     def volume(self):
    ...         return self.sides.prod(axis=1)
    >>> mean_volume(Boxes([[1.0, 2.0], [2.0, 2.0]]))
    3.0
    >>> mean_volume([Boxes([[1.0, 1.0]]), Boxes([[2.0, 2.0]])])
    array([1., 4.])
    >>> mean_volume(np.array([[[0.0, 1.0], [0.0, 2.0]]]))  # one box, sides 1 and 2
    2.0
    """
    shape: Any = getattr(region, "shape", None)  # a tuple when region is an ndarray
    if (
        isinstance(region, np.ndarray)
        and region.dtype.kind in "iuf"
        and region.ndim in (3, 4)
        and shape[2] == 2
    ):
        parsed = _parse_prediction(region, shape[:2], name="region")  # boxes (n, d, 2[, k])
    else:
        parsed = _parse_prediction(region, None, name="region")
    if parsed.kind not in ("region", "box"):
        raise TypeError(
            "`region` must be an object with contains() and volume(), a list of them or a "
            "box array (n, d, 2[, k]); for interval arrays use mean_width, for set arrays "
            "mean_set_size."
        )
    if parsed.n == 0:
        raise ValueError("`region` has no rows: there is no mean volume.")
    if parsed.kind == "box" and volume_kwargs:
        raise TypeError(
            f"`region` is a box array, whose volume is the exact product of its sides: the "
            f"keywords {sorted(volume_kwargs)} apply to region objects' volume() only."
        )
    return _per_level(_sizes(parsed, **volume_kwargs).mean(axis=0), parsed.single)


def _factorize(labels: Any) -> tuple[NDArray, NDArray]:
    try:
        codes, uniques = pd.factorize(labels, sort=True)
    except TypeError:  # labels that cannot be ordered: keep order of appearance
        codes, uniques = pd.factorize(labels, sort=False)
    return np.asarray(codes), np.asarray(uniques)


def _stack_levels(frames: list[pd.DataFrame], single: bool) -> pd.DataFrame:
    if single:
        return frames[0]
    return pd.concat(frames, keys=range(len(frames)), names=["level"])


def coverage_by_group(
    y_true: ArrayLike,
    prediction: Prediction,
    groups: ArrayLike,
    classes: ArrayLike | None = None,
) -> pd.DataFrame:
    """Coverage and efficiency within each group (conditional coverage diagnostic).

    Parameters
    ----------
    y_true, prediction, classes
        As in `coverage`.
    groups : array-like of shape (n,)
        Group label of each row: one scalar each (numbers, strings, categories); a list
        of tuples is read as a 2-D array and refused.

    Returns
    -------
    pandas.DataFrame
        One row per group (index ``"group"``, in category order for a pandas
        Categorical, else sorted when the labels can be ordered) with columns ``count``,
        ``coverage`` and the efficiency measure (``mean_width``, ``mean_set_size`` or
        ``mean_volume``). With several levels, the index gains a
        leading ``"level"`` (position along the level axis).

    Examples
    --------
    >>> import numpy as np
    >>> intervals = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 3.0]])
    >>> coverage_by_group([0.5, 2.0, 2.0], intervals, groups=["a", "a", "b"])
           count  coverage  mean_width
    group
    a          2       0.5         1.0
    b          1       1.0         3.0
    """
    check_row_order(y_true, groups, "groups", "y_true")  # both pandas: same rows, same order
    check_row_order(prediction, groups, "groups", "prediction")  # a labelled prediction frame
    parsed, y = _prepare(y_true, prediction, classes)
    codes, uniques = _group_codes(groups, y.shape[0])
    return _group_table(parsed, _covered(parsed, y), _sizes(parsed), codes, uniques)


def _group_codes(groups: ArrayLike, n: int, rows_of: str = "`y_true`") -> tuple[NDArray, NDArray]:
    """Validated ``groups`` of ``n`` rows (those of ``rows_of``) as codes and their labels
    (in category order for a pandas Categorical, else sorted when the labels can be
    ordered)."""
    if groups is None:
        raise ValueError("`groups` is None; pass one group label per row.")
    # the length and shape checks of the wrappers; labels that do not order are fine here
    labels: Any = check_rows("groups", groups, n, rows_of=rows_of)
    # every kind: NaT in datetime64 / timedelta64 groups is missing too
    if np.any(pd.isna(labels)):
        raise ValueError(
            "`groups` contains missing (NaN/None/NaT) labels; every row needs a group."
        )
    dtype = getattr(groups, "dtype", None)
    if isinstance(dtype, pd.CategoricalDtype):
        labels = pd.Categorical(labels, dtype=dtype)  # factorized in category order
    return _factorize(labels)


def _group_table(
    parsed: _Parsed, covered: NDArray, sizes: NDArray, codes: NDArray, uniques: NDArray
) -> pd.DataFrame:
    """`coverage_by_group`'s table from per-row coverage and sizes ``(n, k)`` (`_covered`,
    `_sizes`) and group codes (`_group_codes`): `evaluate` passes the sizes it already
    took, so that no volume is computed twice (nor with other Monte Carlo points)."""
    counts = np.bincount(codes, minlength=uniques.size)
    index = pd.Index(uniques, name="group")
    frames = []
    for level in range(covered.shape[1]):  # a loop over levels; rows go through bincount
        frames.append(
            pd.DataFrame(
                {
                    "count": counts,
                    "coverage": np.bincount(codes, covered[:, level], uniques.size) / counts,
                    EFFICIENCY_NAME[parsed.kind]: _group_mean(codes, sizes[:, level], counts),
                },
                index=index,
            )
        )
    return _stack_levels(frames, parsed.single)


def _group_mean(codes: NDArray, values: NDArray, counts: NDArray) -> NDArray:
    """Mean of ``values`` per group, as ``np.mean`` gives it: inf stays inf and NaN stays
    NaN (bincount would turn an inf into NaN when it meets a finite total)."""
    finite = np.isfinite(values)
    totals = np.bincount(codes, np.where(finite, values, 0.0), counts.size)
    has_inf = np.bincount(codes, np.isinf(values), counts.size) > 0
    has_nan = np.bincount(codes, np.isnan(values), counts.size) > 0
    return np.where(has_nan, np.nan, np.where(has_inf, np.inf, totals / counts))


def _strata(sizes: NDArray, bins: int | Sequence[float] | None, discrete: bool) -> NDArray:
    """Stratum index of each row from its size."""
    if bins is None:
        if discrete:
            return np.unique(sizes, return_inverse=True)[1].reshape(-1)
        bins = 5
    if isinstance(bins, numbers.Integral) and not isinstance(bins, bool):
        if bins < 1:
            raise ValueError(f"`bins` must be a positive integer, got {bins!r}.")
        # inner edge i is the ceil(i n / bins)-th smallest size, from integer ranks (a float
        # grid such as linspace's 0.6000000000000001 moved rows into the next bin); stratum
        # i holds sizes in (q_{i-1}, q_i]: observed sizes, so ties stay together
        n = sizes.shape[0]
        ranks = -(-np.arange(1, int(bins)) * n // int(bins))
        edges = np.sort(sizes)[ranks - 1]
        return np.searchsorted(np.unique(edges), sizes, side="left")
    if np.ndim(bins) == 0:  # text, a bool, or 2.0: a count or an edge?
        raise TypeError(
            f"`bins` must be None, an integer number of bins or a sequence of edges, got {bins!r}."
        )
    try:
        edges = np.asarray(bins, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"`bins` must be None, an integer or a sequence of edges, got {bins!r}."
        ) from None
    if edges.ndim != 1 or edges.size < 2 or np.isnan(edges).any() or np.any(np.diff(edges) <= 0):
        raise ValueError(
            "`bins` as edges must be a strictly increasing 1-D sequence of at least 2 numbers."
        )
    return np.searchsorted(edges[1:-1], sizes, side="right")


def size_stratified_coverage(
    y_true: ArrayLike,
    prediction: Prediction,
    classes: ArrayLike | None = None,
    bins: int | Sequence[float] | None = None,
) -> pd.DataFrame:
    """Coverage within strata of rows whose sets have similar size.

    A method with good conditional coverage covers about ``1 - alpha`` in every stratum;
    a low coverage among small sets (or narrow intervals) reveals over-confidence that the
    marginal coverage hides (the size-stratified coverage check of Angelopoulos et al.).

    Parameters
    ----------
    y_true, prediction, classes
        As in `coverage`.
    bins : int or sequence of float, optional
        ``None``: one stratum per set size for set arrays, 5 quantile bins of the width
        (or volume) otherwise. An integer: that many quantile bins of the size (fewer when
        sizes tie). A sequence: bin edges, each bin closed on the left (``[e_i, e_i+1)``);
        sizes beyond the outer edges join the first or last bin.

    Returns
    -------
    pandas.DataFrame
        One row per non-empty stratum (index ``"stratum"``) with columns ``low`` and
        ``high`` (smallest and largest size in it), ``count`` and ``coverage``. With bin
        edges, ``stratum`` is the bin's number (``i`` for ``[e_i, e_i+1)``, empty bins
        left out), so tables of two methods on the same edges join on it; otherwise the
        strata are numbered from 0 in order of size. With several levels, the index gains
        a leading ``"level"``.

    Examples
    --------
    >>> import numpy as np
    >>> sets = np.array([[True, False], [False, True], [True, True], [True, True]])
    >>> size_stratified_coverage([0, 0, 1, 0], sets)
              low  high  count  coverage
    stratum
    0         1.0   1.0      2       0.5
    1         2.0   2.0      2       1.0
    """
    parsed, y = _prepare(y_true, prediction, classes)
    covered = _covered(parsed, y)
    sizes = _sizes(parsed)
    edges_given = bins is not None and not isinstance(bins, numbers.Integral)
    frames = []
    for level in range(covered.shape[1]):  # a loop over levels; rows go through bincount
        size = sizes[:, level]
        strata = _strata(size, bins, discrete=parsed.kind == "set")
        present, strata = np.unique(strata, return_inverse=True)  # drop empty strata
        strata = strata.reshape(-1)
        count = np.bincount(strata)
        low = np.full(count.size, np.inf)
        high = np.full(count.size, -np.inf)
        np.minimum.at(low, strata, size)
        np.maximum.at(high, strata, size)
        frames.append(
            pd.DataFrame(
                {
                    "low": low,
                    "high": high,
                    "count": count,
                    "coverage": np.bincount(strata, covered[:, level], count.size) / count,
                },
                index=(  # the bin's own number with edges: a join key across methods
                    pd.Index(present, name="stratum")
                    if edges_given
                    else pd.RangeIndex(count.size, name="stratum")
                ),
            )
        )
    return _stack_levels(frames, parsed.single)
