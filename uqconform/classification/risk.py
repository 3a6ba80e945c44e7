"""Multi-label sets with a controlled risk: conformal risk control, its high-probability
variant (RCPS with the Hoeffding-Bentkus bound) and learn then test.

A multi-label classifier gives each row a probability ``p_k`` per label; the set of a row is
``{k : 1 - p_k <= q}``, one threshold ``q`` for every row. Split conformal prediction picks
``q`` so that the set holds the row's label with probability ``1 - alpha``; risk control
picks it so that a loss of the set, here the share of a row's true labels the set misses
(the false negative rate), stays at most ``alpha``:

* ``method="crc"`` (Angelopoulos et al., 2024): the smallest ``q`` with
  ``(n R_n(q) + 1) / (n + 1) <= alpha``, where ``R_n`` is the mean loss of the ``n``
  calibration rows. Then ``E[loss of a new row] <= alpha`` over calibration and test data,
  as split CP's coverage holds; with the loss "misses a label" it *is* split CP (LAC on the
  least probable true label).
* ``method="rcps"`` (Bates et al., 2021): the smallest ``q`` whose Hoeffding-Bentkus
  p-value for "the risk exceeds ``alpha``" is below ``delta`` (the exact binomial tail
  for ``risk="miscoverage"`` only: ``"fnr"`` keeps Hoeffding-Bentkus even when every row
  has one label, where its loss is 0/1 too, and gives slightly larger sets than
  ``"miscoverage"`` there). Then the risk of the
  calibrated sets, the expected loss over new rows, is at most ``alpha`` with probability
  ``1 - delta`` over the calibration data: a guarantee for the one calibration at hand, at
  the price of larger sets.

* ``method="ltt"`` (learn then test, Angelopoulos et al., 2021): on a grid of thresholds
  fixed in advance, the p-value of "the risk exceeds ``alpha``" at each, a family-wise
  error control (fixed sequence from the safe end of the grid, or Bonferroni), and the
  certified threshold furthest from the safe end. The same guarantee as RCPS, without needing
  the loss to be monotone: the share of a set's labels that are false (1 - precision)
  is not.

The false negative rate and the miscoverage are monotone in ``q`` and their empirical
risk is a step function with steps at the calibration rows' true-label scores, so CRC and
RCPS find the threshold exactly, without a grid.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse
from numpy.typing import ArrayLike, NDArray
from scipy import stats
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.multioutput import MultiOutputClassifier

from uqconform._validation import (
    check_int,
    check_wrapper_fitted,
    missing_proba_error,
    missing_target_error,
    model_output_as_float,
    refuse_non_finite,
)
from uqconform._warnings import warn_user
from uqconform.base import ConformalPredictor, sets_within_thresholds
from uqconform.quantiles import _RANK_TOLERANCE, check_alpha, check_single_alpha, levels_text
from uqconform.regions import record_or_check_output_columns
from uqconform.routing import routing_enabled

__all__ = ["MultiLabelRiskController", "hoeffding_bentkus_pvalue"]

_RISKS = ("fnr", "miscoverage", "precision")
_METHODS = ("crc", "rcps", "ltt")
_FWER = ("fixed_sequence", "bonferroni")
#: The finest grid an int `thresholds` may ask LTT for: LTT's arrays peak at about 65 bytes
#: per threshold (8 times the thresholds themselves: 0.65 GB and 0.8 s CPU at 10**7
#: thresholds, 6.5 GB at 10**8, more than many laptops hold).
_MAX_GRID = 10**7
#: Bytes LTT holds at its peak per threshold of its grid (measured with tracemalloc).
_GRID_BYTES = 65
#: What `alpha` is for the false negative rate, precision and the Hoeffding-Bentkus p-value.
_RISK_LEVEL = "the risk level: a bound on the expected loss, e.g. 0.1"


def hoeffding_bentkus_pvalue(risk: ArrayLike, n: int, alpha: float) -> NDArray:
    """Hoeffding-Bentkus p-value of the null hypothesis "the risk exceeds ``alpha``".

    For the mean ``risk`` of ``n`` independent losses in [0, 1] (Bates et al., 2021,
    Proposition 3): ``min(exp(-n h(min(risk, alpha), alpha)), e P(Bin(n, alpha) <=
    ceil(n risk)))`` with ``h(a, b) = a log(a / b) + (1 - a) log((1 - a) / (1 - b))``.

    Parameters
    ----------
    risk : array-like of float in [0, 1]
        Empirical risks.
    n : int
        Number of losses each risk averages.
    alpha : float
        The risk level of the null hypothesis, in (0, 1).

    Returns
    -------
    ndarray
        One p-value per risk, at most 1, in the shape of ``risk`` (a 0-d array for a single
        number).

    Examples
    --------
    >>> p = hoeffding_bentkus_pvalue([0.0, 0.05, 0.1, 0.3], 100, 0.1)
    >>> bool(p[0] < p[1] < p[2]), float(p[3])
    (True, 1.0)
    """
    check_int(n, "n")
    alpha = check_single_alpha(alpha, "alpha", _RISK_LEVEL)
    try:
        risk = np.asarray(risk, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"`risk` must be numbers in [0, 1], got {risk!r:.80}.") from None
    if not ((risk >= 0) & (risk <= 1)).all():  # NaN fails too
        raise ValueError("`risk` must be mean losses in [0, 1] (no NaN).")
    return _hoeffding_bentkus(risk, n, alpha)


def _hoeffding_bentkus(risk: NDArray, n: int | NDArray, alpha: float | NDArray) -> NDArray:
    """`hoeffding_bentkus_pvalue` without its checks, element by element of ``risk``, ``n``
    and ``alpha`` broadcast together (the p-values of many Mondrian groups in one call:
    each element is computed as it would be alone)."""
    low = np.minimum(risk, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(low > 0, low * np.log(low / alpha), 0.0) + (1 - low) * np.log(
            (1 - low) / (1 - alpha)
        )
    hoeffding = np.exp(-n * h)
    # n risk is a count of losses for 0/1 losses: round it before the ceiling
    bentkus = np.e * stats.binom.cdf(np.ceil(n * risk - _RANK_TOLERANCE), n, alpha)
    return np.asarray(np.minimum(np.minimum(hoeffding, bentkus), 1.0))


def multilabel_probabilities(model: Any, X: Any, n_labels: int | None = None) -> NDArray:
    """``P(label k present)`` for every row and label, shape ``(n, n_labels)``.

    A model may return one array of shape ``(n, n_labels)`` (``OneVsRestClassifier``,
    ``MLPClassifier``, ``ClassifierChain``) or one ``(n, 2)`` array per label
    (``MultiOutputClassifier``, random forests, k-NN on a label matrix), where the column of
    class 1 is taken (a label constant in training gives a single column: 0 or 1). Torch
    tensors, scipy sparse matrices and pandas frames (whole or per label) are converted by
    `model_output_as_float`. Frames are read by position, their column names ignored
    (unlike the single-label wrappers, which reorder a frame's columns by class label):
    column ``j`` of entry ``k`` is class ``model.classes_[k][j]`` (or ``j`` when the model
    has no ``classes_``), and column ``k`` of a whole frame is label ``k``.
    """
    name = f"`estimator` ({type(model).__name__})"
    output = model.predict_proba(X)
    if isinstance(output, list):
        classes = getattr(model, "classes_", None)
        columns = []
        for k, block in enumerate(output):
            block = model_output_as_float(block)
            if isinstance(classes, list) and len(classes) == len(output):
                labels = np.asarray(classes[k])
            elif block.ndim == 2 and block.shape[1] == 2:
                labels = np.arange(2)  # columns of classes 0 and 1
            else:
                raise ValueError(
                    f"{name} predict_proba gave a list whose entry {k} has shape "
                    f"{block.shape} and the model has no `classes_` (one array of labels "
                    "per entry) saying which class that column is: set it on the model."
                )
            if block.ndim != 2 or block.shape[1] != labels.size or labels.size > 2:
                raise ValueError(
                    f"{name} predict_proba gave a list whose entry {k} has shape "
                    f"{block.shape}: a multi-label model gives one (n, 2) array per label "
                    "(classes 0 and 1)."
                )
            if not set(labels.tolist()) <= {0, 1}:  # True == 1, False == 0
                raise ValueError(
                    f"{name} was fitted with classes {labels.tolist()} for label {k}: a "
                    "label matrix holds 0/1 (absent/present), and the column of class 1 is "
                    "read as the probability of presence. Refit on 0/1 labels."
                )
            present = np.flatnonzero(labels == 1)
            # a label never present in training: only class 0, probability of presence 0
            columns.append(block[:, present[0]] if present.size else np.zeros(block.shape[0]))
        proba = np.column_stack(columns)
    else:
        proba = model_output_as_float(output)
    if proba.ndim != 2 or (n_labels is not None and proba.shape[1] != n_labels):
        expected = "n_labels" if n_labels is None else n_labels
        raise ValueError(
            f"{name} predict_proba returned shape {proba.shape}; expected (n_samples, "
            f"{expected}), one probability per label (a multi-label model, such as "
            "OneVsRestClassifier or MultiOutputClassifier, fitted on a label matrix)."
        )
    refuse_non_finite(
        proba, f"{name} predict_proba gave NaN or infinite probabilities", "rows of `X`"
    )
    if proba.size and (proba.min() < 0 or proba.max() > 1):
        worst = float(proba.min()) if proba.min() < 0 else float(proba.max())
        raise ValueError(
            f"{name} predict_proba gave values outside [0, 1] (e.g. {worst!r}): a "
            "probability model is needed; rounding a hair past 0 or 1 can be mended "
            "with np.clip(proba, 0, 1) in the model."
        )
    return proba


def check_label_matrix(y: Any, n: int, n_labels: int | None = None) -> NDArray:
    """``y`` as an integer label matrix ``(n, n_labels)``: 0/1 (or bool) entries only."""
    if y is None:
        raise missing_target_error()
    if scipy.sparse.issparse(y):
        y = y.toarray()
    try:
        labels = np.asarray(y)
    except ValueError:  # ragged lists of labels
        labels = np.asarray(y, dtype=object)
    dtypes = list(y.dtypes) if isinstance(y, pd.DataFrame) else [getattr(y, "dtype", None)]
    textual = any(
        str(dtype) in ("object", "string", "str") for dtype in dtypes
    )  # '0'/'1' as text: refused as for an array of them, not read as numbers
    if labels.dtype.kind == "O" and hasattr(y, "to_numpy") and not textual:
        # a frame of bool and int columns, or of nullable Int64 / boolean ones
        try:
            labels = y.to_numpy(dtype=float, na_value=np.nan)
        except (TypeError, ValueError):
            pass  # not numbers: refused below, by dtype
    if labels.ndim != 2:
        # lists of labels per row, or one label per row (text classes held as objects)
        scalars = labels.ndim == 1 and all(isinstance(v, str | int) for v in labels[:100])
        listed = labels.dtype.kind == "O" and not scalars
        got = "lists of labels" if listed else f"shape {labels.shape}"
        remedy = "sklearn.preprocessing.MultiLabelBinarizer turns lists of labels into one"
        if labels.ndim >= 3:
            remedy = _extra_axis_remedy(labels, n)
        elif labels.ndim == 1 and labels.dtype.kind in "biuf" and np.isin(labels, (0, 1)).all():
            remedy = "for a single 0/1 label pass it as one column, y.reshape(-1, 1)"
        elif labels.ndim == 1 and (
            labels.dtype.kind in "biuUS"
            or (labels.dtype.kind == "O" and scalars)
            or (labels.dtype.kind == "f" and np.all(np.isfinite(labels) & (labels % 1 == 0)))
        ):  # class labels (not measurements, nor values with NaN)
            remedy = (
                "for one class per row use SplitConformalClassifier, or turn the classes "
                "into a 0/1 matrix with sklearn.preprocessing.label_binarize"
            )
        raise ValueError(
            "`y` must be a label matrix of shape (n_samples, n_labels) with 0/1 entries, "
            f"got {got}; {remedy}."
        )
    if labels.shape[0] != n:
        # (as many columns as X has rows, and rows few enough to be labels)
        transposed = labels.shape[1] == n and 2 * labels.shape[0] <= n
        hint = "; transposed? pass y.T" if transposed else ""
        raise ValueError(f"`y` has {labels.shape[0]} rows but X has {n} rows{hint}.")
    if labels.shape[1] == 0:
        raise ValueError(
            f"`y` has no label columns (shape {labels.shape}): a label matrix has one 0/1 "
            "column per label, at least one."
        )
    if n_labels is not None and labels.shape[1] != n_labels:
        raise ValueError(
            f"`y` has {labels.shape[1]} label columns but the model predicts {n_labels}."
        )
    # None, NaN or pd.NA held as objects too (a conversion recipe would read them as 0)
    missing = pd.isna(labels) if labels.dtype.kind in "fO" else None
    if missing is not None and missing.any():
        raise ValueError(
            f"`y` must hold 0/1 entries, got missing entries ({_missing_entries_text(y, missing)})"
            ": a label matrix needs 0 or 1 for every label of every row; fill them (e.g. "
            "y.fillna(0) when a missing label means absent) or leave those rows out."
        )
    if labels.dtype.kind not in "biuf":
        raise ValueError(
            f"`y` must hold 0/1 entries, got dtype {labels.dtype}{_conversion_hint(labels)}."
        )
    if labels.dtype.kind != "b" and not np.isin(labels, (0, 1)).all():
        bad = np.unique(labels[~np.isin(labels, (0, 1))])
        shown = ", ".join(f"{value:g}" for value in bad[:5].tolist())
        more = f" and {bad.size - 5} more" if bad.size > 5 else ""
        signs = bool(np.isin(labels, (-1, 1)).all())  # LIBSVM / MULAN style -1/+1
        hint = ": a -1/+1 label matrix converts with (y > 0).astype(int)" if signs else ""
        raise ValueError(
            f"`y` must hold 0/1 entries (label absent/present), got the values "
            f"[{shown}]{more}{hint}."
        )
    return labels.astype(np.int64)


def _conversion_hint(labels: NDArray) -> str:
    """How to turn a label matrix of text (or other objects) into 0/1, to follow "got dtype
    object" in a message: ``y.astype(int)`` for 0/1 held as text or objects (the digits,
    bools, 0/1 numbers), a comparison with the value meaning "present" for other text,
    e.g. ``(y == "yes").astype(int)`` (missing entries are refused before, by name)."""
    try:
        distinct = pd.unique(pd.Series(labels.ravel(), dtype=object))
    except TypeError:  # unhashable entries (lists)
        return ": convert it to 0/1 first"
    if all(_is_zero_or_one(value) for value in distinct):
        return ": convert it first, e.g. y.astype(int) for 0/1 held as text or objects"
    shown = sorted({repr(value) for value in distinct})
    listed = ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
    texts = [value for value in distinct if isinstance(value, str)]
    if not texts:
        return f" holding {listed}: convert them to 0/1 first"
    present = ("yes", "y", "true", "t", "present", "positive", "pos")
    chosen = next((v for v in texts if v.strip().lower() in present), max(texts))
    example = f'"{chosen}"' if '"' not in chosen else repr(chosen)
    return (
        f" holding {listed}: map them to 0/1 first, e.g. (y == {example})"
        ".astype(int) when that value means the label is present"
    )


def _is_zero_or_one(value: Any) -> bool:
    """Whether an entry of an object label matrix is 0 or 1 that ``astype(int)`` reads as
    such: a bool, a real number equal to 0 or 1, or the text ``"0"`` / ``"1"``."""
    if isinstance(value, str):
        return value.strip() in ("0", "1")
    return isinstance(value, bool | np.bool_ | numbers.Real) and value in (0, 1)


def _missing_entries_text(y: Any, missing: NDArray) -> str:
    """``2: row 4 column 'b', row 9 column 'c'``: how many entries of a label matrix are
    missing (``missing``: the mask of them), and which (the first three; row and column
    labels of a DataFrame)."""
    rows, columns = np.nonzero(missing)
    if isinstance(y, pd.DataFrame):
        row_names, column_names = y.index.tolist(), y.columns.tolist()
    else:
        row_names, column_names = range(missing.shape[0]), range(missing.shape[1])
    named = ", ".join(
        f"row {row_names[r]!r} column {column_names[c]!r}"
        for r, c in zip(rows[:3], columns[:3], strict=True)
    )
    more = f" and {rows.size - 3} more" if rows.size > 3 else ""
    return f"{rows.size}: {named}{more}"


def _extra_axis_remedy(labels: NDArray, n: int) -> str:
    """How to make a label array of 3 or more axes a label matrix, for ``y`` of ``n`` rows:
    drop an axis of size 1, take the "present" entries of one-hot pairs, or reshape."""
    shape = labels.shape
    if labels.ndim == 3 and shape[0] == 1 and shape[1] == n:  # a leading batch axis
        return f"its axis 0 has size 1: drop it with y[0] (or y.reshape({n}, -1))"
    if labels.ndim == 3 and shape[0] == n and shape[2] == 1:
        return f"its axis 2 has size 1: drop it with y[..., 0] (or y.reshape({n}, -1))"
    if (
        labels.ndim == 3
        and shape[0] == n
        and shape[2] == 2
        and labels.dtype.kind in "biuf"
        and np.isin(labels, (0, 1)).all()
        and (labels.sum(axis=2) == 1).all()
    ):
        return (
            "its axis 2 holds one-hot (absent, present) pairs per label: pass the present "
            "entries, y[..., 1]"
        )
    if shape[0] != n:  # a reshape would mix rows: nothing to suggest but the rows
        return (
            f"it has {labels.ndim} axes and {shape[0]} rows, a label matrix 2 axes (rows, "
            f"labels) and {n} rows, one per row of X"
        )
    return (
        f"it has {labels.ndim} axes, a label matrix 2 (rows, labels): y.reshape({n}, -1) "
        "if the axes after the first index the labels"
    )


def _grouped_step_sums(events: Any, n_groups: int, n_cuts: int, combine: Any) -> NDArray:
    """Sum step functions over increasing cuts, by group, from whole-number steps.

    ``events()`` yields blocks of ``(group, position, step)`` arrays (``step`` ``None``
    for steps of 1): the group's count grows by ``step`` from cut ``position`` on (a
    position of ``n_cuts``: never). ``combine(groups, counts)`` turns the counts of a slice
    of groups, shape ``(groups, n_cuts)``, into their summed loss at each cut. The counts
    are added up exactly (whole numbers in floats), a slice of groups at a time so that
    they take a few tens of MB whatever the grid (each slice reads the events again).
    """
    per_slice = max(1, 2**22 // (n_cuts + 1))
    total = np.zeros(n_cuts)
    for first in range(0, n_groups, per_slice):  # one slice for most label counts and grids
        groups = slice(first, min(first + per_slice, n_groups))
        width = groups.stop - groups.start
        counts = np.zeros(width * (n_cuts + 1))
        for group, position, step in events():
            inside = (group >= groups.start) & (group < groups.stop)
            cells = (group[inside] - groups.start) * (n_cuts + 1) + position[inside]
            weights = None if step is None else step[inside]
            counts += np.bincount(cells, weights=weights, minlength=counts.size)
        steps = counts.reshape(width, n_cuts + 1)[:, :n_cuts]
        total += combine(groups, np.cumsum(steps, axis=1))
    return total


def _requests(names: Iterable[str]) -> str:
    """``sample_weight=True``: the ``set_fit_request`` arguments asking for ``names``."""
    return ", ".join(f"{name}=True" for name in sorted(names))


def _snap_to_whole(summed_loss: NDArray, roundings: int) -> tuple[NDArray, float]:
    """Summed losses within rounding of a whole number of losses, taken as exactly there.

    Each sum is off the exact one by at most about ``roundings * eps * (the largest sum)``
    (``roundings``: how many rounded additions it carries); sums that close to a whole
    number are snapped to it, so that the binomial tails, which count whole losses, do not
    depend on the order of summation. The tolerance is 1e-9 at least (the one the tails
    already read counts with, and so that ``alpha`` reads as the decimal given).

    Returns
    -------
    snapped : ndarray
        ``summed_loss`` with the sums near a whole number replaced by it.
    tolerance : float
        The tolerance used, for comparisons of the sums with a bound.
    """
    tolerance = max(_RANK_TOLERANCE, roundings * np.finfo(float).eps * summed_loss.max())
    whole = np.rint(summed_loss)
    return np.where(np.abs(summed_loss - whole) <= tolerance, whole, summed_loss), tolerance


class MultiLabelRiskController(ClassifierMixin, ConformalPredictor):
    """Multi-label prediction sets whose false negative rate (or precision) is controlled.

    Each row's set holds the labels whose probability is high enough, one threshold for
    every row, chosen on calibration data so that the expected share of a row's true labels
    missing from its set (``risk="fnr"``), or the chance of missing any of them
    (``risk="miscoverage"``), is at most ``alpha``. Rows without any true label lose
    nothing.

    Parameters
    ----------
    estimator : multi-label classifier with predict_proba, default=None
        Fitted on a label matrix ``(n_samples, n_labels)``; ``None`` means
        ``OneVsRestClassifier(LogisticRegression())``, or
        ``MultiOutputClassifier(LogisticRegression())`` for a single label column (where
        ``OneVsRestClassifier`` and ``MLPClassifier`` predict two columns, the classes 0
        and 1). A fitted model (or ``FrozenEstimator(model)``) can be calibrated without
        ``fit``. The default for several label columns takes no ``sample_weight`` in
        ``fit``: pass ``MultiOutputClassifier(LogisticRegression())`` for weights (with
        metadata routing on, ``LogisticRegression().set_fit_request(sample_weight=True)``
        inside).
    alpha : float or sequence of float, default=0.1
        Risk level(s) in (0, 1); each prediction call may override it.
    risk : {"fnr", "miscoverage", "precision"}, default="fnr"
        ``"fnr"``: the share of the row's true labels missing from its set
        (1 - recall). ``"miscoverage"``: 1 if the set misses any true label, a stronger
        demand that gives larger sets (split CP on the least probable true label).
        ``"precision"``: the share of the set's labels that are false (1 - precision; 0
        for an empty set); not monotone, so ``method="ltt"`` only.
    method : {"crc", "rcps", "ltt"}, default="crc"
        ``"crc"``: conformal risk control, ``E[risk] <= alpha`` averaged over calibration
        sets. ``"rcps"``: risk-controlling prediction sets, the risk of these sets is at
        most ``alpha`` with probability ``1 - delta`` over the calibration set (larger
        sets; needs more calibration rows). Its p-value (and LTT's) is
        Hoeffding-Bentkus for ``"fnr"`` and ``"precision"`` and the exact binomial tail
        for the 0/1 ``"miscoverage"``. ``"ltt"``: the same guarantee, for any of the three
        risks,
        on the grid ``thresholds`` with the family-wise error control ``fwer``.
    delta : float, default=0.1
        ``method="rcps"`` or ``"ltt"``: an upper bound on the chance, over calibration
        sets, that the risk exceeds ``alpha``. Not used by ``"crc"`` (but still checked
        to lie in (0, 1)).
    thresholds : int or array-like of float, default=100
        ``method="ltt"``: the probability thresholds tried (a row's set holds the labels
        with ``p >= t``, compared as ``1 - p <= 1 - t``, so a probability a rounding error
        below ``t`` can count; the same at calibration and prediction), fixed before
        seeing the calibration data, each in (0, 1] (0 is refused: it would keep every
        label); an int ``m`` means ``1/m, 2/m, ..., 1`` (at most 10,000,000 for
        ``"ltt"``, which builds and tests the whole grid: about 65 bytes per threshold at
        its peak, 0.65 GB at that cap). Not used by the other methods (but still checked,
        like ``delta``).
    fwer : {"fixed_sequence", "bonferroni"}, default="fixed_sequence"
        ``method="ltt"``: ``"fixed_sequence"`` tests the thresholds from the safe end
        (the largest sets for ``"fnr"`` and ``"miscoverage"``, the smallest for
        ``"precision"``), each at level ``delta``, and stops at the first it cannot
        certify (powerful when the risk changes steadily along the grid; a bump in
        precision stops it early); ``"bonferroni"`` tests each at ``delta / m`` (no
        order needed, better when precision is not monotone in the threshold). Either way the
        sets are those of the certified threshold furthest from the safe end.
    batch_size : int, default=None
        Rows predicted at once (``None``: automatic), to bound memory on large inputs.
    random_state : int, Generator or None, default=None
        Seeds the classifier trained by ``fit`` where its own ``random_state`` is None.

    Attributes
    ----------
    estimator_ : classifier
    n_labels_ : int
        Number of labels, the columns of the sets.
    label_names_in_ : ndarray of object, shape (n_labels,)
        The column names of a label DataFrame seen at fit (or at a calibrate that adopts a
        fitted model); later label frames must have the same columns in the same order.
        Only when those labels (strings, numbers, tuples) are not ``0, ..., n - 1`` in
        order.
    conformity_scores_ : ndarray of shape (n_calibration, n_labels)
        ``1 - p`` of every calibration row and label.
    calibration_labels_ : ndarray of bool, shape (n_calibration, n_labels)
        The calibration label matrix.
    n_calibration_ : int

    See Also
    --------
    uqconform.classification.SplitConformalClassifier : one label per row.

    Notes
    -----
    With Mondrian ``groups=`` each group gets its own threshold and the guarantee holds
    in every group (for ``"rcps"`` and ``"ltt"``, with probability ``1 - delta`` in each
    group separately, not in all groups at once; under ``"precision"`` a group unseen at
    calibration gets empty sets, elsewhere every label). Rows without any true label lose nothing:
    when calibration has such rows (it warns), the risk of the labelled rows is only
    bounded by ``alpha`` divided by their share (in each group, its own share). A group
    of ``n`` rows without any labelled row loses nothing at any threshold: its sets are
    empty with ``"crc"`` once ``(n + 1) alpha >= 1``, with ``"rcps"`` once
    ``(1 - alpha)^n < delta`` (``"ltt"``: the smallest sets of the grid, from the same
    ``n`` with ``"fixed_sequence"``), and hold every label below that; the warning says
    which. ``"miscoverage"`` with ``"crc"`` gives
    exactly the sets of `SplitConformalClassifier` with the LAC score when every row has
    one label.

    Examples
    --------
    >>> from sklearn.datasets import make_multilabel_classification
    >>> X, Y = make_multilabel_classification(
    ...     n_samples=600, n_classes=5, allow_unlabeled=False, random_state=0
    ... )
    >>> controller = MultiLabelRiskController(alpha=0.1)
    >>> controller = controller.fit(X[:300], Y[:300]).calibrate(X[300:500], Y[300:500])
    >>> sets = controller.predict_set(X[500:])
    >>> sets.shape, sets.dtype
    ((100, 5), dtype('bool'))
    """

    _unbounded_prediction = "sets holding every label"
    # a model class given for `estimator`: most classifiers fit one label per row
    _model_instance_example = "OneVsRestClassifier({model}())"

    @property
    def _unseen_group_prediction(self) -> str:  # type: ignore[override]
        return "empty" if self.risk == "precision" else "the full label set"

    def __sklearn_tags__(self):
        # a 0/1 label matrix, never a single column of classes
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        tags.classifier_tags.multi_label = True
        return tags

    @property
    def _calibration_params(self) -> tuple[str, ...]:  # type: ignore[override]
        """What the thresholds depend on: ``delta`` for RCPS and LTT only, the grid and
        its error control for LTT only (changing a setting the method ignores keeps the
        calibration)."""
        names: tuple[str, ...] = ("risk", "method")
        if self.method != "crc":
            names += ("delta",)
        if self.method == "ltt":
            names += ("thresholds", "fwer")
        return names

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        alpha: float | ArrayLike = 0.1,
        risk: str = "fnr",
        method: str = "crc",
        delta: float = 0.1,
        thresholds: int | ArrayLike = 100,
        fwer: str = "fixed_sequence",
        batch_size: int | None = None,
        random_state: int | np.random.Generator | None = None,
    ):
        self.estimator = estimator
        self.alpha = alpha
        self.risk = risk
        self.method = method
        self.delta = delta
        self.thresholds = thresholds
        self.fwer = fwer
        self.batch_size = batch_size
        self.random_state = random_state

    def _default_estimator(self) -> BaseEstimator:
        if self.__dict__.get("n_labels_") == 1:  # fit knows the label columns by then
            # OneVsRestClassifier on a single label column predicts two: classes 0 and 1
            return MultiOutputClassifier(LogisticRegression())
        return OneVsRestClassifier(LogisticRegression())

    def _check_levels(self) -> None:
        if self.risk == "miscoverage":
            super()._check_levels()
        else:  # a bound on the expected FNR or false-label share: any level in (0, 1)
            check_alpha(self.alpha, "alpha", _RISK_LEVEL, owner=self)

    def _resolve_alpha(self, alpha: Any, X: Any = None) -> tuple[NDArray, bool]:
        if self.risk == "miscoverage" or alpha is None:
            return super()._resolve_alpha(alpha, X)
        return check_alpha(alpha, "alpha", _RISK_LEVEL), np.ndim(alpha) == 0

    def _validate_params(self) -> None:
        super()._validate_params()
        for name, value, allowed in (
            ("risk", self.risk, _RISKS),
            ("method", self.method, _METHODS),
            ("fwer", self.fwer, _FWER),
        ):
            if not isinstance(value, str) or value not in allowed:
                raise ValueError(f"`{name}` must be one of {list(allowed)}, got {value!r}.")
        if self.risk == "precision" and self.method != "ltt":
            raise ValueError(
                f"risk='precision' needs method='ltt', got method={self.method!r}: the "
                "share of false labels in a set is not monotone in the threshold, which "
                "CRC and RCPS need."
            )
        self._check_thresholds()  # the grid itself is built for LTT alone, at calibrate
        delta = self.delta
        if isinstance(delta, bool) or not isinstance(delta, (int, float, np.integer, np.floating)):
            got = "None" if delta is None else f"{type(delta).__name__} {delta!r}"
            raise TypeError(
                f"`delta` must be a float in (0, 1), got {got}: the chance that the risk of "
                "the sets exceeds alpha, e.g. delta=0.1."
            )
        if not 0 < float(delta) < 1:  # NaN fails too
            raise ValueError(f"`delta` must lie strictly between 0 and 1, got {delta!r}.")
        if not hasattr(self._estimator_or_default(), "predict_proba"):
            raise missing_proba_error(
                self._estimator_or_default(), "`estimator`", "the sets need label probabilities"
            )

    def _model_fit_params(self, fit_params: dict[str, Any]) -> dict[str, Any]:
        given = {name: value for name, value in fit_params.items() if value is not None}
        if self.estimator is None and given and routing_enabled():
            # the default model's inner LogisticRegression requests nothing, and the user
            # cannot reach it to ask (scikit-learn's error names it all the same)
            raise ValueError(
                f"fit parameters {sorted(given)} cannot reach the default model (a "
                "LogisticRegression per label, in OneVsRestClassifier, or MultiOutputClassifier "
                "for one label column) with metadata routing on: that LogisticRegression "
                "requests none. Pass the model with the request, e.g. "
                "estimator=OneVsRestClassifier("
                f"LogisticRegression().set_fit_request({_requests(given)})) "
                "(MultiOutputClassifier in place of OneVsRestClassifier for one label column)."
            )
        return super()._model_fit_params(fit_params)

    def _train_estimator(self, X: Any, y: Any, params: dict[str, Any]) -> None:
        given = [name for name, value in params.items() if value is not None]
        if self.estimator is None:  # (``sample_weight=None``: nothing to pass on)
            params = {name: params[name] for name in given}
        if self.estimator is None and given and isinstance(self.estimator_, OneVsRestClassifier):
            # routing off (`_model_fit_params` refuses them with it on): OneVsRestClassifier
            # takes fit parameters only through routing
            raise ValueError(
                f"fit parameters {sorted(given)} cannot reach the default model, "
                "OneVsRestClassifier(LogisticRegression()), which takes them only through "
                "scikit-learn's metadata routing. Pass estimator=MultiOutputClassifier("
                "LogisticRegression()), which passes them to each label's LogisticRegression "
                "(without them, it gives the default's probabilities; every label column must "
                "then hold both 0 and 1 in the training rows), or turn routing on and pass "
                "OneVsRestClassifier("
                f"LogisticRegression().set_fit_request({_requests(given)}))."
            )
        try:
            self.estimator_.fit(X, y, **params)
        except ValueError as error:
            if "1d array" not in str(error):  # scikit-learn's column_or_1d refusal only
                raise
            name = type(self.estimator_).__name__
            raise ValueError(
                f"`estimator` ({name}) fits one label per row, not the label matrix "
                f"`y` ({error}): wrap the model you passed, e.g. OneVsRestClassifier(model) "
                "or MultiOutputClassifier(model), or use a model that takes label matrices "
                "(RandomForestClassifier, KNeighborsClassifier, MLPClassifier)."
            ) from None

    def _check_target(self, y, n, *, calibrating):
        known = getattr(self, "n_labels_", None) if calibrating else None
        labels = check_label_matrix(y, n, known)
        self._check_label_names(y, learn=known is None)
        if not calibrating:
            self.n_labels_ = labels.shape[1]
        return labels

    def _check_label_names(self, y: Any, *, learn: bool) -> None:
        """Record the column names of a label DataFrame ``y`` (``learn``: at fit, or at a
        calibrate that adopts a fitted model), or refuse other names or another order:
        column ``k`` is read as label ``k`` of the model (see
        `uqconform.regions.check_output_columns`: integer labels too)."""
        record_or_check_output_columns(
            self, y, "label_names_in_", learn=learn, name="y", seen="the label columns seen at fit"
        )

    def _use_prefit_estimator(self) -> None:
        super()._use_prefit_estimator()
        self.__dict__.pop("n_labels_", None)  # learnt from the calibration rows

    def _check_thresholds(self) -> None:
        """Refuse a `thresholds` that is neither an int of at least 1 nor probabilities in
        (0, 1], without building the grid of an int (checked for every method, though
        only LTT reads it)."""
        grid = self.thresholds
        if isinstance(grid, numbers.Integral) and not isinstance(grid, bool):
            if grid < 1:
                raise ValueError(f"`thresholds` must be at least 1, got {grid}.")
            if self.method == "ltt" and grid > _MAX_GRID:  # the other methods never build it
                raise ValueError(
                    f"`thresholds` must be at most {_MAX_GRID} for method='ltt', got {grid}: "
                    f"LTT builds and tests the whole grid, about {_GRID_BYTES} bytes per "
                    f"threshold ({_GRID_BYTES * int(grid) / 1e9:.3g} GB at its peak, "
                    f"{8 * int(grid) / 1e9:.3g} GB for the thresholds alone). Pass a smaller "
                    "int, or an array of the thresholds you need."
                )
            return
        try:
            values = np.asarray(grid, dtype=float)
        except (TypeError, ValueError):
            values = np.empty(0)
        if isinstance(grid, bool) or values.ndim != 1 or not values.size:
            raise ValueError(
                f"`thresholds` must be an int or probabilities in (0, 1], got {grid!r:.80}."
            )
        outside = np.flatnonzero(~((values > 0) & (values <= 1)))  # NaN too
        if outside.size:
            shown = ", ".join(f"{float(values[i])!r} (entry {i})" for i in outside[:3])
            more = f" and {outside.size - 3} more" if outside.size > 3 else ""
            zero = " (a threshold of 0 would put every label in every set)"
            raise ValueError(
                f"`thresholds` must hold probabilities in (0, 1], got {shown}{more}: drop "
                f"them{zero if (values[outside] == 0).any() else ''}."
            )

    def _grid(self) -> NDArray:
        """The probability thresholds of ``method="ltt"``, increasing."""
        self._check_thresholds()
        grid = self.thresholds
        if isinstance(grid, numbers.Integral):  # (a bool is refused above)
            return np.arange(1, grid + 1) / grid
        return np.unique(np.asarray(grid, dtype=float))  # sorted, each threshold tested once

    def _reset_calibration(self) -> None:
        super()._reset_calibration()
        self.__dict__.pop("calibration_labels_", None)
        self.__dict__.pop("_tested_grid", None)

    def _calibration_scores(self, X, y):
        proba = multilabel_probabilities(self.estimator_, X)
        if proba.shape[1] != y.shape[1]:
            single = y.shape[1] == 1 and proba.shape[1] == 2
            name = type(self.estimator_).__name__
            raise ValueError(
                f"`y` has {y.shape[1]} label columns but the estimator ({name}) predicts "
                f"{proba.shape[1]}"
                + (
                    " (the classes 0 and 1 of a single-label binary classifier; "
                    "OneVsRestClassifier and MLPClassifier fitted on one label column give "
                    "those two too). For one label, wrap the model as "
                    "MultiOutputClassifier(model): fitted on the (n, 1) label matrix, it "
                    "gives that label's probability."
                    if single
                    else "."
                )
            )
        self.n_labels_ = y.shape[1]
        one_label = bool((y.sum(axis=1) == 1).all())  # one-hot rows: a multi-class problem
        if (
            y.shape[1] > 1
            and not one_label
            and np.allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-9)
        ):
            warn_user(
                f"The estimator's {y.shape[1]} probabilities sum to 1 on every calibration "
                "row, but rows of `y` have several labels or none: it looks like a "
                "single-label (multi-class) classifier, whose columns are not the labels' "
                "own probabilities. Use a multi-label model, e.g. OneVsRestClassifier or "
                "MultiOutputClassifier fitted on the label matrix.",
                UserWarning,
            )
        if self.risk != "precision" and not y.any():
            raise ValueError(
                f"No calibration row of `y` has a true label: the {self.risk} of every set "
                "is 0, so there is nothing to calibrate. Pass rows with labels."
            )
        self.calibration_labels_ = y == 1
        return 1.0 - proba, np.zeros(y.shape[0], dtype=np.intp), 1

    def _store_calibration(self, X: Any, y: NDArray, group_labels: NDArray | None) -> None:
        super()._store_calibration(X, y, group_labels)
        if self.method == "ltt":  # every level reads this grid, whatever `thresholds` holds
            self._tested_grid = self._grid()  # a new array, never the user's
        if self.risk != "precision":
            self._warn_about_unlabelled_rows()

    def _warn_about_unlabelled_rows(self) -> None:
        """Rows without a true label lose nothing: the labelled rows' risk is only bounded
        by ``alpha`` over their share, per Mondrian group (the smallest share is quoted,
        and a group without any labelled row named, with what its sets are at the
        constructor's levels: empty, or every label when it has too few rows)."""
        labelled = self.calibration_labels_.any(axis=1)
        if labelled.all():
            return
        n_groups = 1 if getattr(self, "groups_", None) is None else self.groups_.size
        sizes = np.bincount(self.calibration_strata_, minlength=n_groups)  # every group >= 1
        labelled_rows = np.bincount(self.calibration_strata_, weights=labelled, minlength=n_groups)
        shares = labelled_rows / sizes
        unlabelled = int((~labelled).sum())
        total = labelled.size
        if getattr(self, "groups_", None) is None:
            warn_user(
                f"{unlabelled} of {total} calibration rows have no true label: they lose "
                "nothing, so the risk of the rows with labels is only bounded by "
                f"alpha / {shares[0]:.3g} (the share of rows with a label). To control it "
                "for labelled rows alone, leave unlabelled rows out of calibration.",
                UserWarning,
            )
            return
        low = [int(s) for s in np.argsort(shares, kind="stable") if 0 < shares[s] < 1]
        none = {int(s): int(sizes[s]) for s in np.flatnonzero(shares == 0)}
        text = ""
        if low:  # the smallest shares first
            worst = ", ".join(
                f"alpha / {shares[s]:.3g} in {self._strata_text({s: int(sizes[s])})}"
                for s in low[:3]
            )
            extra = len(low) - 3
            more = f" and {extra} more group{'s' if extra > 1 else ''}" if extra > 0 else ""
            text += (
                ", so in each group the risk of the rows with labels is only bounded by "
                f"alpha / (the group's share of rows with a label): {worst}{more}"
            )
        for outcome, strata in self._unlabelled_group_outcomes(none).items():
            text += (
                f". No row has a label in {self._strata_text(strata)}, so nothing is "
                f"calibrated there: {outcome}"
            )
        warn_user(
            f"{unlabelled} of {total} calibration rows have no true label: they lose "
            f"nothing{text}. To control the risk for labelled rows alone, leave unlabelled "
            "rows out of calibration.",
            UserWarning,
        )

    def _unlabelled_group_outcomes(self, none: dict[int, int]) -> dict[str, dict[int, int]]:
        """What the sets of the groups without any labelled calibration row (``none``:
        stratum and rows) are at the constructor's levels, read from their thresholds,
        with the groups each description fits. Every loss is 0 there: CRC's sets are empty
        once ``(n + 1) alpha >= 1``, RCPS's once ``(1 - alpha)^n < delta`` (LTT's are then
        the smallest of its grid), and they hold every label before."""
        if not none:  # every group has a labelled row: nothing to describe
            return {}
        alphas = self._resolve_alpha(None)[0]
        if self.method == "crc":
            rule = "(n + 1) alpha >= 1"
        elif self.method == "ltt" and self.fwer == "bonferroni":
            rule = "(1 - alpha)^n < delta / (the number of thresholds)"
        else:
            rule = "(1 - alpha)^n < delta"
        rows = self._stratum_rows()
        strata = [
            (self.conformity_scores_[rows[stratum]], self.calibration_labels_[rows[stratum]])
            for stratum in none
        ]
        chosen = self._thresholds_of_strata(strata, alphas)
        described: dict[str, dict[int, int]] = {}
        for (stratum, size), thresholds in zip(none.items(), chosen, strict=True):
            outcomes = [
                "hold every label"
                if np.isinf(threshold)
                else "are empty"
                if threshold < 0  # below every score 1 - p
                else f"hold only the labels with probability at least {1 - threshold:g}"
                for threshold in thresholds
            ]
            parts: list[str] = []
            for outcome in dict.fromkeys(outcomes):  # each outcome once, in level order
                levels = alphas[[item == outcome for item in outcomes]]
                who = "they" if parts else "those sets"
                part = f"at alpha={levels_text(levels)} {who} {outcome}"
                if outcome == "hold every label":
                    part += f" (too few rows: {rule} is needed for smaller sets)"
                parts.append(part)
            text = ", ".join(parts)
            if any(outcome != "hold every label" for outcome in outcomes):
                text += (
                    ", so a row of that group with labels is not controlled at all (its "
                    "set can miss every label)"
                )
            described.setdefault(text, {})[stratum] = size
        return described

    def _output_columns(self) -> int:
        return self.n_labels_

    # ---- the thresholds ----------------------------------------------------------------
    def _compute_threshold_table(self, alphas: NDArray) -> tuple[NDArray, dict[int, int]]:
        n_groups = 1 if getattr(self, "groups_", None) is None else self.groups_.size
        table = np.full((n_groups + 1, 1, 1, alphas.size), np.inf)
        if self.risk == "precision":  # a group unseen at calibration: empty sets lose nothing
            table[-1] = -np.inf
        too_few: dict[int, int] = {}
        empty: dict[int, int] = {}
        strata = [
            (self.conformity_scores_[rows], self.calibration_labels_[rows])
            for rows in self._stratum_rows()  # never a loop over rows
        ]
        chosen = self._thresholds_of_strata(strata, alphas)
        for stratum, ((scores, _), thresholds) in enumerate(zip(strata, chosen, strict=True)):
            table[stratum, 0, 0] = thresholds
            if (~np.isfinite(thresholds)).any():
                too_few[stratum] = int(scores.shape[0])
            elif self.risk == "precision" and not (scores <= thresholds.min()).any():
                empty[stratum] = int(scores.shape[0])
        if empty:
            warn_user(
                f"The certified thresholds keep no label of any calibration row in "
                f"{self._strata_text(empty)} at some of alpha={levels_text(alphas)}: the "
                "sets will be (nearly) all empty. Only the strictest thresholds of the grid "
                "reach that precision; a larger alpha or delta, more calibration rows, or "
                "fwer='bonferroni' (when precision is not monotone in the threshold) help.",
                UserWarning,
            )
        return table, too_few

    def _strata_text(self, strata: dict[int, int]) -> str:
        """``the calibration set (n rows)`` or ``group 'a' (n rows), ...`` for messages."""
        if getattr(self, "groups_", None) is None:
            return f"the calibration set ({next(iter(strata.values()))} rows)"
        named = [f"{self._stratum_name(s, 1, True)} ({count} rows)" for s, count in strata.items()]
        more = f" and {len(named) - 3} more" if len(named) > 3 else ""
        return ", ".join(named[:3]) + more

    def _pvalues(self, summed_loss: NDArray, n: int | NDArray, level: float | NDArray) -> NDArray:
        """p-values of "the risk exceeds ``level``" from the summed losses of ``n`` rows
        (``n`` and ``level`` may be arrays of the shape of ``summed_loss``: the losses of
        several groups, or at several levels, in one call, each element as alone)."""
        if self.risk == "miscoverage":  # 0/1 losses: the exact binomial tail
            return stats.binom.cdf(np.ceil(summed_loss - _RANK_TOLERANCE), n, level)
        # cumulative sums of 1 / (labels per row) leave rounding just outside [0, 1]
        return _hoeffding_bentkus(np.clip(summed_loss / n, 0.0, 1.0), n, level)

    def _thresholds_of_strata(
        self, strata: list[tuple[NDArray, NDArray]], alphas: NDArray
    ) -> NDArray:
        """The thresholds of each ``(scores, labels)`` of ``strata`` at each level, shape
        ``(n_strata, n_levels)``: every group's p-values together (one call per level for
        LTT, per bisection step for RCPS), not group by group."""
        if self.method == "ltt":
            return self._tested_thresholds_of_strata(strata, alphas)
        return self._exact_thresholds_of_strata(strata, alphas)

    def _exact_thresholds(self, scores: NDArray, labels: NDArray, alphas: NDArray) -> NDArray:
        """CRC and RCPS: the smallest threshold meeting the rule at each level (``inf``
        when none does, a value below every score when even empty sets do)."""
        return self._exact_thresholds_of_strata([(scores, labels)], alphas)[0]

    def _exact_thresholds_of_strata(
        self, strata: list[tuple[NDArray, NDArray]], alphas: NDArray
    ) -> NDArray:
        """`_exact_thresholds` of each ``(scores, labels)`` of ``strata`` (Mondrian groups),
        shape ``(n_strata, n_levels)``: RCPS's p-values of every group and level in one
        call per step of the bisection, not per group."""
        out = np.empty((len(strata), alphas.size))
        candidates, snapped = [], []
        for i, (scores, labels) in enumerate(strata):  # a loop over groups, not rows
            values, summed_loss, snapped_loss, tolerance = self._loss_steps(scores, labels)
            candidates.append(np.concatenate([[-1.0], values, [np.inf]]))  # -1 < every 1 - p
            if self.method == "crc":
                n = scores.shape[0]
                allowed = (n + 1) * alphas - 1  # n R_n(q) + 1 <= (n + 1) alpha
                meets = summed_loss[None, :] <= allowed[:, None] + tolerance
                first = np.argmax(meets, axis=1)
                first[~meets.any(axis=1)] = summed_loss.size
                out[i] = candidates[i][first]
            else:
                snapped.append(snapped_loss)
        if self.method != "crc":
            sizes = np.array([scores.shape[0] for scores, _ in strata])
            first = self._first_certified(snapped, sizes, alphas)
            for i, chosen in enumerate(candidates):
                out[i] = chosen[first[i]]
        return out

    def _loss_steps(
        self, scores: NDArray, labels: NDArray
    ) -> tuple[NDArray, NDArray, NDArray, float]:
        """The candidate thresholds of CRC and RCPS (the true labels' scores, increasing)
        and ``n R_n(q)`` below every score then at each of them.

        Returns
        -------
        values : ndarray
            The scores where the summed loss steps down, increasing.
        summed_loss : ndarray of size ``values.size + 1``
            The summed loss of the rows at a threshold below every score (empty sets: each
            row with a label loses 1), then at each of ``values`` in turn.
        snapped : ndarray
            ``summed_loss`` with the sums within rounding of a whole number snapped to it.
        tolerance : float
            The rounding of the sums, for comparisons with a bound.
        """
        counts = labels.sum(axis=1)
        if self.risk == "fnr":  # each true label weighs 1 / (its row's number of labels)
            row, column = np.nonzero(labels)
            values = scores[row, column]
            weights = 1.0 / counts[row]
        else:  # the least probable true label decides
            has = counts > 0
            values = np.where(labels[has], scores[has], -np.inf).max(axis=1)
            weights = np.ones(values.size)
        order = np.argsort(values, kind="stable")
        values, covered = values[order], np.cumsum(weights[order])
        summed_loss = (counts > 0).sum() - np.concatenate([[0.0], covered])
        # a running sum of m positive weights adding up to S (the first sum, the largest)
        # is off by up to about m eps S (1e-9 falls short from some 10,000 rows of 3
        # labels): summed losses that close to the rule's bound, or to a whole number of
        # losses, are taken as exactly there
        snapped, tolerance = _snap_to_whole(summed_loss, values.size)
        return values, summed_loss, snapped, tolerance

    def _first_certified(self, summed: list[NDArray], sizes: NDArray, alphas: NDArray) -> NDArray:
        """RCPS: for each non-increasing array of ``summed`` (the summed losses of a group
        of ``sizes`` rows) and each level, the first index whose p-value is below
        ``delta`` (the array's size when none is), shape ``(n_groups, n_levels)``.

        By bisection: the p-value does not decrease with the summed loss (nor does the
        snapping to whole numbers before it), so those indices are the end of the array,
        found with about ``log2(size)`` p-values instead of one per candidate threshold.
        Every group and level moves one step at a time, their p-values in one call per step.
        """
        lengths = np.array([loss.size for loss in summed], dtype=np.intp)
        flat = np.concatenate(summed)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        # one search per (group, level) pair; certified from `high` on, not below `low`
        group = np.repeat(np.arange(lengths.size), alphas.size)
        levels = np.tile(alphas, lengths.size)
        low, high = np.zeros(group.size, dtype=np.intp), lengths[group]
        while (active := np.flatnonzero(low < high)).size:  # about log2(size) steps
            middle = (low[active] + high[active]) // 2
            at = group[active]
            certified = (
                self._pvalues(flat[starts[at] + middle], sizes[at], levels[active]) < self.delta
            )
            high[active] = np.where(certified, middle, high[active])
            low[active] = np.where(certified, low[active], middle + 1)
        return low.reshape(lengths.size, alphas.size)

    def _tested_thresholds(self, scores: NDArray, labels: NDArray, alphas: NDArray) -> NDArray:
        """Learn then test: at each level, the certified threshold of the grid furthest
        from the safe end (the smallest sets for the false negative rate and the
        miscoverage, the largest for precision); with none, ``inf`` (every label) for the
        first two and ``-inf`` (empty sets, which lose nothing) for precision."""
        return self._tested_thresholds_of_strata([(scores, labels)], alphas)[0]

    def _tested_thresholds_of_strata(
        self, strata: list[tuple[NDArray, NDArray]], alphas: NDArray
    ) -> NDArray:
        """`_tested_thresholds` of each ``(scores, labels)`` of ``strata`` (Mondrian groups),
        shape ``(n_strata, n_levels)``, the p-values of every group in one call per level."""
        # score thresholds in the order tested, from the safe end: the largest sets first
        # for the risks that fall as sets grow, the smallest sets first for precision
        grid = self.__dict__.get("_tested_grid")  # the grid taken at calibrate
        if grid is None:  # a model pickled before that copy was kept
            grid = self._grid()
        cuts = 1.0 - grid  # decreasing: the sets shrink along it
        if self.risk == "precision":
            cuts = cuts[::-1]
        losses, ends, sizes = [], [], []
        for scores, labels in strata:  # a loop over groups, not rows
            # the sets change only where a cut passes a score: cuts with the same number
            # of distinct scores at or below them choose the same labels, so have the same
            # loss and p-value; each such class of the grid is evaluated once, at its first
            # cut. The cuts are monotone, so each class is a run of consecutive cuts.
            passed = np.searchsorted(np.unique(scores), cuts, side="right")
            _, first = np.unique(passed, return_index=True)
            # each sum carries one rounding per kind of row, at most the labels + 1
            summed_loss, _ = _snap_to_whole(
                self._summed_losses(scores, labels, cuts[first]), labels.shape[1] + 1
            )
            runs = np.argsort(first)  # the classes in the order tested
            losses.append(summed_loss[runs])
            ends.append(np.append(first[runs][1:], cuts.size) - 1)  # each run's last cut
            sizes.append(np.full(runs.size, scores.shape[0]))
        lengths = np.array([loss.size for loss in losses], dtype=np.intp)
        flat, last_cut, n = np.concatenate(losses), np.concatenate(ends), np.concatenate(sizes)
        group = np.repeat(np.arange(lengths.size), lengths)
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        out = np.empty((lengths.size, alphas.size))
        for i, level in enumerate(alphas):  # a loop over levels, not groups nor rows
            pvalues = self._pvalues(flat, n, float(level))
            if self.fwer == "bonferroni":
                passes = pvalues < self.delta / cuts.size
                # the last certified run of each group (-1: none)
                last = np.full(lengths.size, -1)
                np.maximum.at(last, group[passes], np.flatnonzero(passes))
            else:  # from the safe end on, until the first run not certified
                stop = bounds[1:].copy()  # the first run that fails, per group
                fails = np.flatnonzero(~(pvalues < self.delta))
                np.minimum.at(stop, group[fails], fails)
                last = np.where(stop > bounds[:-1], stop - 1, -1)
            none = -np.inf if self.risk == "precision" else np.inf
            out[:, i] = np.where(last >= 0, cuts[last_cut[np.maximum(last, 0)]], none)
        return out

    def _summed_losses(self, scores: NDArray, labels: NDArray, cuts: NDArray) -> NDArray:
        """The summed loss of the rows at each of ``cuts`` (a row's set: the labels with
        ``scores <= cut``).

        A row's loss is a step function of the cut, changing only where the cut passes one
        of its scores: each score is placed once among the sorted cuts, and the losses are
        added up per kind of row from whole-number counts (the FNR: the missed labels of
        the rows with ``c`` labels, over ``c``; precision: the false labels of the sets of
        ``k`` labels, over ``k``; miscoverage: the rows missing a label, exactly). Each sum
        then carries one rounding per kind of row, at most the number of labels plus one,
        however many rows there are (a running sum over every score would carry one per
        score)."""
        order = np.argsort(cuts, kind="stable")
        increasing = cuts[order]
        n_cuts, n_labels = cuts.size, labels.shape[1]
        counts = labels.sum(axis=1)
        sizes = np.arange(n_labels + 1)

        def position(values: NDArray) -> NDArray:
            # the first cut (in increasing order) at or above a score: from there on, that
            # score's label is in the set
            return np.searchsorted(increasing, values, side="left")

        if self.risk == "miscoverage":  # the least probable true label decides
            has = counts > 0
            last = np.where(labels[has], scores[has], -np.inf).max(axis=1)
            covered = np.cumsum(np.bincount(position(last), minlength=n_cuts + 1))[:n_cuts]
            summed = (has.sum() - covered).astype(float)
        elif self.risk == "fnr":
            row, column = np.nonzero(labels)
            events = [(counts[row], position(scores[row, column]), None)]
            labelled = np.bincount(counts, minlength=n_labels + 1) * sizes  # per count c

            def fnr(groups: slice, covered: NDArray) -> NDArray:
                missed = labelled[groups, None] - covered
                return (missed / np.maximum(sizes[groups, None], 1)).sum(axis=0)  # c = 0: 0

            summed = _grouped_step_sums(lambda: events, n_labels + 1, n_cuts, fnr)
        else:

            def precision_events():  # per block of rows: a few MB at a time
                block = max(1, 2**20 // max(n_labels, 1))
                for start in range(0, scores.shape[0], block):
                    rows = slice(start, start + block)
                    within = np.argsort(scores[rows], axis=1, kind="stable")
                    steps = position(np.take_along_axis(scores[rows], within, axis=1))
                    # false labels among the k smallest scores of the row, k = 1 ... L
                    false = np.cumsum(~np.take_along_axis(labels[rows], within, axis=1), axis=1)
                    k = np.broadcast_to(sizes[1:], steps.shape)
                    # the set reaches k labels at the row's k-th score, and leaves k labels
                    # (for k + 1) at its (k + 1)-th
                    yield k.ravel(), steps.ravel(), false.ravel().astype(float)
                    yield (
                        k[:, :-1].ravel(),
                        steps[:, 1:].ravel(),
                        -false[:, :-1].ravel().astype(float),
                    )

            def precision(groups: slice, false: NDArray) -> NDArray:
                return (false / np.maximum(sizes[groups, None], 1)).sum(axis=0)

            summed = _grouped_step_sums(precision_events, n_labels + 1, n_cuts, precision)
        out = np.empty(n_cuts)
        out[order] = summed
        return out

    def _warn_too_few(
        self,
        too_few: dict[int, int],
        alphas: NDArray,
        n_groups: int,
        n_components: int = 1,
        weighted: bool = False,  # (risk control takes no likelihood_ratio)
    ) -> None:
        if self.method == "ltt":
            outcome = "are empty" if self.risk == "precision" else "hold every label"
            warn_user(
                f"No threshold of the grid is certified at alpha={levels_text(alphas)} "
                f"(delta={self.delta}, fwer={self.fwer!r}) in {self._strata_text(too_few)}: "
                f"those sets {outcome}. More calibration rows, a larger alpha or delta, or a grid "
                "reaching further help.",
                UserWarning,
            )
            return
        if self.method == "crc":
            need = "(n + 1) alpha >= 1"
        else:
            need = "(1 - alpha)^n < delta" + (
                "" if self.risk == "miscoverage" else " (with no miss at all)"
            )
        warn_user(
            f"Too few calibration rows for alpha={levels_text(alphas)} with "
            f"method={self.method!r} in {self._strata_text(too_few)}: {need} is needed, so "
            "those sets hold every label.",
            UserWarning,
        )

    # ---- prediction --------------------------------------------------------------------
    def _predict_batch(self, X, thresholds, alphas, rng):
        scores = 1.0 - multilabel_probabilities(self.estimator_, X, self.n_labels_)
        return sets_within_thresholds(scores, thresholds, alphas.size)

    def predict_set(
        self, X: Any, alpha: float | ArrayLike | None = None, *, groups: ArrayLike | None = None
    ) -> NDArray:
        """Label sets as a boolean mask over the label columns.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        alpha : float or sequence of float, optional
            Risk level(s); defaults to the constructor's ``alpha``.
        groups : array-like of shape (n_samples,), optional
            Group labels, required if (and only if) calibration used groups.

        Returns
        -------
        ndarray of bool, shape (n_samples, n_labels) or (n_samples, n_labels, k)
            ``sets[i, k]`` is True when label ``k`` is in the set of row ``i``.
        """
        return self._predict_batched(X, alpha, groups, bool, "predict_set")

    def predict(self, X: Any) -> NDArray:
        """The wrapped model's label matrix (``predict``; without one, probability at
        least 0.5), shape ``(n_samples, n_labels)``: no guarantee, see `predict_set`.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_labels)
            The model's own 0/1 predictions, one column per label.
        """
        check_wrapper_fitted(
            self,
            "estimator_",
            "predict",
            "fit(X, Y) (or calibrate(X_calib, Y_calib) alone around a fitted `estimator`)",
        )
        X = self._validate_X(X, reset=False)
        if hasattr(self.estimator_, "predict"):
            predicted = self.estimator_.predict(X)
            if scipy.sparse.issparse(predicted):  # a model fitted on a sparse label matrix
                predicted = predicted.toarray()
                if np.isin(predicted, (0, 1)).all():
                    predicted = predicted.astype(np.int64)  # as the dense matrix fit passes
            return np.asarray(predicted)
        return (multilabel_probabilities(self.estimator_, X) >= 0.5).astype(np.int64)

    def predict_proba(self, X: Any) -> NDArray:
        """``P(label k present)`` of the wrapped model, shape ``(n_samples, n_labels)``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        ndarray of float, shape (n_samples, n_labels)
            Column ``k``: the probability of label ``k``, uncalibrated (the sets of
            `predict_set` threshold it).
        """
        check_wrapper_fitted(
            self,
            "estimator_",
            "predict_proba",
            "fit(X, Y) (or calibrate(X_calib, Y_calib) alone around a fitted `estimator`)",
        )
        return multilabel_probabilities(self.estimator_, self._validate_X(X, reset=False))

    def score(self, X: Any, y: Any, sample_weight: ArrayLike | None = None) -> float:
        """Subset accuracy of `predict` (scikit-learn's ``ClassifierMixin.score``): the
        share of rows whose every label is predicted right; no guarantee.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like or DataFrame of shape (n_samples, n_labels)
            The 0/1 label matrix; a DataFrame must have the label columns seen at fit, in
            that order.
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        float
        """
        self._check_label_names(y, learn=False)
        return float(super().score(X, y, sample_weight=sample_weight))
