"""Venn-Abers calibration: class probabilities with a validity guarantee.

An inductive Venn-Abers predictor (Vovk and Petej, 2014) turns any classifier's score
into a pair of probabilities ``p0 <= p1`` for the positive class. The calibration rows'
scores and labels, plus the test row with the label 0 (then 1), are fitted by isotonic
regression; ``p0`` and ``p1`` are the fitted values at the test row. Whatever the model,
the one of the two that used the true label is perfectly calibrated under
exchangeability, ``P(y = 1 | p_y) = p_y`` (on average over calibration sets, not given
one); ``p1 - p0`` shrinks as calibration rows are added and says how much the
calibration set leaves undecided. The single probability reported is
``p1 / (1 - p0 + p1)``, the one with the smallest worst-case log-loss regret against the
pair.

Scores closer than a relative ``16 * eps`` (see `calibration_ties`; in the calibrators
``eps`` of float32 when every calibration probability is a float32 number, float64's for a
test row whose probabilities are not) count as equal, for calibration and test rows
alike: the calibration scores and the test score are grouped by single linkage (chains of
scores each within the tolerance of the next form one cell), so the cells are a function
of the multiset of the ``n + 1`` scores, the rows stay exchangeable and the guarantee is
exact. A test score equal to a calibration score stays
tied to it while it moves by less than the tolerance (the same row's score computed in
another batch, its last digits differing); a score near the tolerance's edge can switch
between a tie and a gap. The fitted value at the added row then depends only on where
its score falls among the cells of the calibration scores (between two, in one, or
joining two adjacent cells into one), so both values are computed once for every
position at calibration, exactly, as slopes of common tangents of convex hulls of the
cumulative sums (Vovk, Petej and Fedorova, 2015, compute the same values); a prediction
is then a binary search.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import check_is_fitted

from uqconform._rows import n_rows
from uqconform._validation import (
    check_class_labels,
    check_row_order,
    class_probabilities,
    holds_missing_values,
    missing_proba_error,
    model_classes,
    real_values,
    value_summary,
)
from uqconform._warnings import warn_user
from uqconform.base import (
    ModelWrapper,
    keeps_state_on_error,
    record_calibration_settings,
    remember_calibration_rows,
)
from uqconform.classification.cross import CrossFitClassifier
from uqconform.classification.split import encode_labels

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["CrossVennAbersCalibrator", "VennAbersCalibrator", "venn_abers_bounds"]


def _lower_hull_links(W: list[int], S: list[int], from_right: bool) -> list[int]:
    """For each point ``(W[i], S[i])``, its neighbour on the lower convex hull of the
    points up to it (``from_right=False``: points 0..i) or from it on (points i..m);
    -1 at the hull's end. Following the links from ``i`` walks that hull, so one pass
    of the monotone chain gives the hull of every prefix (or suffix)."""
    links = [-1] * len(W)
    top = -1
    for i in range(len(W) - 1, -1, -1) if from_right else range(len(W)):
        while top != -1 and links[top] != -1:  # pop the top while it is not a strict turn
            q = links[top]
            cross = (W[top] - W[q]) * (S[i] - S[q]) - (S[top] - S[q]) * (W[i] - W[q])
            if (cross < 0) if from_right else (cross > 0):
                break
            top = q
        links[i] = top
        top = i
    return links


def _cumulative_hulls(counts: NDArray, sums: NDArray) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """The cumulative sum diagram of the cells and its hulls, shared by both labels.

    ``counts`` and ``sums``: the number of calibration rows and the sum of their labels in
    each cell of tied scores, in increasing order (``m`` of them). Returns the cumulative
    counts ``W`` and sums ``S`` (``m + 1`` points from ``(0, 0)``, int64) and the links of
    their prefix and suffix lower hulls (`_lower_hull_links`): the added point only shifts
    the suffix, so one pass each serves the added label 0 and 1 alike.
    """
    W_list = [0, *np.cumsum(counts).tolist()]
    S_list = [0, *np.cumsum(sums).tolist()]
    left = np.array(_lower_hull_links(W_list, S_list, False))
    right = np.array(_lower_hull_links(W_list, S_list, True))
    return np.array(W_list, dtype=np.int64), np.array(S_list, dtype=np.int64), left, right


def _added_point_values(
    hulls: tuple[NDArray, NDArray, NDArray, NDArray], label: int
) -> tuple[NDArray, NDArray, NDArray]:
    """Isotonic fit at an added point of label ``label`` (0 or 1), for every position.

    ``hulls``: `_cumulative_hulls` of the cells' counts and label sums (``m`` cells of
    tied scores, in increasing order). Returns the fitted value when the added score falls
    in gap ``j`` (before the ``j``-th cell, ``j = 0..m``), when it ties the ``j``-th cell
    (``j = 0..m-1``, pooled with its rows) and when it ties both cells ``j`` and ``j + 1``
    (``j = 0..m-2``, the three pooled into one).

    With cumulative counts ``W`` and sums ``S`` (the cumulative sum diagram), the fitted
    value is ``max_{a <= j} min_{b >= k}`` of the mean label of the block from cell ``a``
    to ``b - 1`` plus the added point, ``(S[b] - S[a] + label) / (W[b] - W[a] + 1)``
    (``k = j`` in a gap, ``j + 1`` on a tie, ``j + 2`` joining two cells: the prefix
    hulls up to ``j`` and the suffix hulls from ``j + 2`` do not hold the joined cells'
    inner point, so they are those of the unjoined cells): the slope of the lower common
    tangent of the lower hull of the prefix points ``(W[a], S[a])`` and that of the
    suffix points shifted by the added point, ``(W[b] + 1, S[b] + label)``. Both hulls
    come from one pass each, shared by the two labels (`_cumulative_hulls`: the shift
    moves every suffix vertex alike, so the hull's vertices stay the same); the tangent
    is found by walking them inward from the added point, the walks of every position at
    once (a tangent is unique, so the order of the steps does not matter). Counts and
    sums are integers, so the turns are exact.
    """
    W, S, left, right = hulls
    m = W.size - 1

    def tangent(a: NDArray, b: NDArray) -> NDArray:
        """Slopes of the tangents from prefix vertex ``a`` and suffix vertex ``b`` (one
        per position), all walks at once: at each step every unfinished walk moves each
        hull one vertex inward while that vertex lies below the current line."""
        a, b = a.copy(), b.copy()
        active = np.ones(a.size, dtype=bool)
        while active.any():  # a loop over walk steps (a few), not over positions
            rows = np.flatnonzero(active)
            A, B = a[rows], b[rows]
            ax, ay, bx, by = W[A], S[A], W[B] + 1, S[B] + label
            p = left[A]
            pc = np.maximum(p, 0)
            move_a = (p != -1) & ((bx - ax) * (S[pc] - ay) < (by - ay) * (W[pc] - ax))
            A = np.where(move_a, p, A)
            ax, ay = W[A], S[A]
            q = right[B]
            qc = np.maximum(q, 0)
            move_b = (q != -1) & ((bx - ax) * (S[qc] + label - ay) < (by - ay) * (W[qc] + 1 - ax))
            B = np.where(move_b, q, B)
            a[rows], b[rows] = A, B
            active[rows] = move_a | move_b
        return (S[b] + label - S[a]) / (W[b] + 1 - W[a])

    positions = np.arange(m + 1)
    gap = tangent(positions, positions)
    tie = tangent(positions[:m], positions[:m] + 1)
    joined = tangent(positions[: max(m - 1, 0)], positions[: max(m - 1, 0)] + 2)
    return gap, tie, joined


def venn_abers_bounds(
    calibration_scores: ArrayLike, calibration_labels: ArrayLike, scores: ArrayLike
) -> tuple[NDArray, NDArray]:
    """The Venn-Abers pair ``(p0, p1)`` of each score.

    Parameters
    ----------
    calibration_scores : array-like of shape (n,)
        A model's scores on calibration rows (larger: more likely positive).
    calibration_labels : array-like of shape (n,)
        Their labels, 0 or 1.
    scores : array-like of shape (m,)
        Scores of the rows to predict.

    Returns
    -------
    p0, p1 : ndarray of shape (m,)
        The isotonic fit at each score with the row added as a 0, and as a 1, where
        scores close to each other count as equal (Notes).

    Notes
    -----
    Two scores ``s`` and ``c`` within ``|s - c| <= 16 * eps * max(|s|, |c|)`` of each
    other (``eps = np.finfo(float).eps``, so a relative 3.6e-15: 16 to 32 units in the
    last place, 16 just above a power of two and nearly 32 just below the next) count as
    equal, and so do chains of such scores (single linkage): the calibration scores and
    the added score are grouped into cells that way, calibration and test scores alike,
    and the isotonic fit is that of the cells. The rule depends only on the multiset of
    the ``n + 1`` scores, so the rows stay exchangeable and the guarantee holds exactly.
    (The tolerance here is float64's whatever the scores' dtype; the calibrators use
    float32's for a model whose probabilities are float32 numbers.) A score equal to a
    calibration score stays tied to it while it moves by less than the tolerance, as the
    same row's score computed in another batch can (its last digits differ; a
    Fortran-ordered copy of ``X`` moved a GaussianNB log-odds by 64 units in the last place
    in one review: pass the same memory layout to calibrate and predict); a score near the
    tolerance's edge can switch between a tie and a gap (``1 + 15 * eps`` ties 1,
    ``1 + 17 * eps`` does not). A score close to the top of one
    cell and the bottom of the next joins them into one. An exact isotonic refit on the
    raw floats differs only near such ties: it keeps distinct floats apart
    (scikit-learn's pools scores within an absolute 1e-15), so with calibration scores
    1000 and 1001 labelled 0 and 1 the score ``1000 + 1e-12`` gets ``(0, 0.5)`` here,
    ``(0, 1)`` refitted.

    Examples
    --------
    >>> p0, p1 = venn_abers_bounds([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1], [0.2, 0.9])
    >>> p0.round(3).tolist(), p1.round(3).tolist()
    ([0.0, 0.5], [0.667, 1.0])
    """
    values = _scores_without_nan(calibration_scores, "calibration_scores")
    given = labels = np.asarray(calibration_labels)
    if given.dtype.kind == "O":  # e.g. an object column of a mixed DataFrame
        numbers = real_values(given)
        if numbers is None and all(isinstance(v, bool | np.bool_) for v in given.flat):
            numbers = given.astype(bool)
        labels = given if numbers is None else numbers
    if labels.ndim != 1 or labels.size != values.size:
        raise ValueError(
            f"`calibration_labels` must have one entry per calibration score "
            f"({values.size}), got shape {labels.shape}."
        )
    if not values.size:
        raise ValueError("`calibration_scores` is empty: Venn-Abers needs calibration rows.")
    if labels.dtype.kind == "f" and np.isnan(labels).any():
        raise ValueError(
            f"`calibration_labels` contains {int(np.isnan(labels).sum())} NaN labels; remove "
            "those rows first."
        )
    if labels.dtype.kind not in "biuf" or not np.isin(labels, (0, 1)).all():
        found = np.unique(given.astype(object).astype(str))
        raise ValueError(
            "`calibration_labels` must hold 0 and 1 (or booleans) only, got the values "
            f"{found[:6].tolist()}{' ...' if found.size > 6 else ''}: encode the positive "
            "class as 1 (e.g. `(labels == positive).astype(int)`)."
        )
    return _Table(values, labels == 1).bounds(_scores_without_nan(scores, "scores"))


def _scores_without_nan(values: ArrayLike, name: str) -> NDArray:
    """1-D float scores without NaN (infinite scores are ordered like any other); text,
    numeric text included, is refused as in every other numeric input, and a missing value
    (``pd.NA`` of a nullable pandas dtype) as a NaN is."""
    array = real_values(values)
    if array is None and holds_missing_values(values):
        raise ValueError(f"`{name}` contains NaN.")  # as a NaN is, below
    if array is None:
        raise ValueError(f"`{name}` must hold numbers, got {value_summary(values)}.")
    if array.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D, got shape {array.shape}.")
    if np.isnan(array).any():
        raise ValueError(f"`{name}` contains NaN.")
    return array


# Relative distance within which two scores are taken as equal (of the larger magnitude,
# see `_close`): 16 to 32 units in the last place, a few times the noise of a matrix
# product computed in other blocks, far below the gaps between distinct probabilities a
# model gives (1e-13 near 1 for naive Bayes, which a tolerance of 1e-12 merged).
_TIE_TOLERANCE = 16 * np.finfo(float).eps

# The same for a model whose probabilities are float32 numbers (a network in float32, a
# model given float32 features): its last digits move with the batch 2**29 times as far.
_FLOAT32_TIE_TOLERANCE = 16 * float(np.finfo(np.float32).eps)


def _float32_rows(proba: NDArray) -> NDArray:
    """Rows whose probabilities are all float32 numbers (a float32 model's are, on every
    row): ``(n,)`` booleans."""
    return (proba.astype(np.float32) == proba).all(axis=1)


class _Table:
    """The pair for every position among one calibration set's cells of tied scores."""

    def __init__(
        self,
        scores: NDArray,
        labels: NDArray,
        floor: float = 0.0,
        tolerance: float = _TIE_TOLERANCE,
    ):
        # single linkage: sorted distinct scores each close to the next form one cell
        # (the test score joins the cells it is close to, in `bounds`)
        self.floor = floor
        self.tolerance = tolerance
        # the table of the float64 tolerance, for test rows whose probabilities are not
        # float32 numbers when this one's is float32's (set by `_class_tables`)
        self.finer: _Table | None = None
        self.values, inverse = np.unique(scores, return_inverse=True)
        apart = ~_close(self.values[:-1], self.values[1:], floor, tolerance)
        self.cell = np.concatenate([[0], np.cumsum(apart)])  # each distinct score's cell
        cells = int(self.cell[-1]) + 1
        counts = np.bincount(self.cell[inverse], minlength=cells)
        sums = np.bincount(self.cell[inverse[labels]], minlength=cells)  # labels: bool
        hulls = _cumulative_hulls(counts, sums)  # one pass per side serves both labels
        self.gap0, self.tie0, self.join0 = _added_point_values(hulls, 0)
        self.gap1, self.tie1, self.join1 = _added_point_values(hulls, 1)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """A table pickled before the symmetric rule (no ``cell``) kept every distinct
        calibration score apart: each is its own cell and no join table exists, so it
        predicts as it did (a test score close to two of them takes the lower's tie).
        Calibrate again for the symmetric rule."""
        if "cell" not in state:
            empty = np.empty(0)
            state = {**state, "cell": np.arange(state["values"].size)}
            state.update(join0=empty, join1=empty)
        # pickled before the float32 tolerance: the float64 one, for every row
        state = {"tolerance": _TIE_TOLERANCE, "finer": None, **state}
        self.__dict__.update(state)

    def bounds(
        self, scores: NDArray, float32_rows: NDArray | None = None
    ) -> tuple[NDArray, NDArray]:
        """The pair of each score: the gap values where it is close to no calibration
        score, the tie values of the cell it is close to, and the joined values where it
        is close to the top of one cell and the bottom of the next (see
        `calibration_ties`). ``float32_rows``: the scores whose row's probabilities are
        float32 numbers; a table of the float32 tolerance gives the others the pairs of
        its `finer` table (the n + 1 rows' probabilities are then not all float32)."""
        if self.finer is not None and float32_rows is not None and not float32_rows.all():
            p0, p1 = np.empty(scores.shape), np.empty(scores.shape)  # each row read once
            for rows, table in ((float32_rows, self), (~float32_rows, self.finer)):
                p0[rows], p1[rows] = table.bounds(scores[rows])
            return p0, p1
        position, below, above = _neighbour_ties(self.values, scores, self.floor, self.tolerance)
        cell = np.append(self.cell, self.cell[-1] + 1)  # past the end: the last gap
        lower = cell[np.maximum(position - 1, 0)]
        upper = cell[position]
        join = below & above & (lower != upper)
        at = np.where(below, lower, upper)  # a tie's cell (the lower one of a join)
        last = self.tie0.size - 1
        tie_at, join_at = np.minimum(at, last), np.minimum(at, max(last - 1, 0))
        gap_at = upper  # in a gap both neighbours are in different cells
        p = []
        for gap, tie, joined in (
            (self.gap0, self.tie0, self.join0),
            (self.gap1, self.tie1, self.join1),
        ):
            value = np.where(below | above, tie[tie_at], gap[gap_at])
            if joined.size:
                value = np.where(join, joined[join_at], value)
            p.append(value)
        return p[0], p[1]


def calibration_ties(
    values: NDArray, scores: NDArray, floor: float = 0.0, tolerance: float = _TIE_TOLERANCE
) -> tuple[NDArray, NDArray, NDArray]:
    """Where each score falls among the sorted distinct calibration ``values``: its gap
    (``searchsorted`` position), the value it ties (index, where it ties) and whether it
    ties one. A score ``s`` ties a value ``v`` when ``|s - v| <= 16 * eps * max(|s|,
    |v|, floor)`` (`_TIE_TOLERANCE`; ``eps = np.finfo(float).eps``): a relative 3.6e-15,
    16 to 32 units in the last place of ``v`` (16 just above a power of two, nearly 32
    just below the next): the same row's probability computed in another batch can
    differ in its last digits, and would otherwise jump between a tie and a gap. The
    same test groups calibration scores among themselves (`_Table`: single linkage), so
    a score that ties a value is pooled with that value's whole cell (with both cells
    where it ties the top of one and the bottom of the next).
    ``floor``: the smallest magnitude the tolerance is relative to (1 for log-odds, whose
    values near 0 carry the absolute rounding of the probabilities they came from: an
    absolute 3.6e-15 below 1; 0, purely relative, for scores of unknown scale, such as
    probabilities near 0). ``tolerance``: ``16 * eps`` of float32 instead for a model
    whose probabilities are float32 numbers (the calibrators)."""
    position, tie_below, tie_above = _neighbour_ties(values, scores, floor, tolerance)
    above, below = np.minimum(position, values.size - 1), np.maximum(position - 1, 0)
    return position, np.where(tie_above, above, below), tie_above | tie_below


def _neighbour_ties(
    values: NDArray, scores: NDArray, floor: float, tolerance: float = _TIE_TOLERANCE
) -> tuple[NDArray, NDArray, NDArray]:
    """Each score's ``searchsorted`` position among the sorted distinct ``values`` and
    whether it ties the value below that position, and the value at it (`_close`)."""
    last = values.size - 1
    position = np.searchsorted(values, scores, side="left")
    above, below = np.minimum(position, last), np.maximum(position - 1, 0)
    tie_above = (position <= last) & _close(values[above], scores, floor, tolerance)
    tie_below = (position >= 1) & _close(values[below], scores, floor, tolerance)
    return position, tie_below, tie_above


def _close(a: NDArray, b: NDArray, floor: float, tolerance: float = _TIE_TOLERANCE) -> NDArray:
    """Equal, or finite and within ``tolerance`` of each other, relative to the larger
    magnitude or to ``floor`` if both are smaller (see `calibration_ties`)."""
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore", over="ignore"):  # infinite scores
        scale = np.maximum(np.maximum(np.abs(a), np.abs(b)), floor)
        close = np.abs(a - b) <= tolerance * scale
    return (a == b) | (finite & close)


def _log_odds(proba: NDArray) -> NDArray:
    """``(n, n_classes)``: each class's log-odds against the rest, clipped at the
    log-odds where a probability rounds to 1 in float64: the score the tables sort by.

    An increasing function of ``p_k``, so the pairs are those of ``p_k``, with one
    difference: scored by ``p_k`` alone, rows whose probability of the class is saturated
    at exactly 1.0 tie (naive Bayes gives many), while rows whose probability is
    saturated at 0 stay apart by their tiny values. Clipped log-odds tie both alike.
    Two classes: ``log p_1 - log p_0``, so that a row saturated at 1.0 keeps the digits
    of the other class's probability, and swapping the names of the classes negates the
    score and mirrors the pairs (``[p0, p1]`` becomes ``[1 - p1, 1 - p0]``), as the
    predictor must. More classes: ``log p_k - log(1 - p_k)`` from ``p_k`` alone, so that
    rows with the same ``p_k`` tie however the rest is split among the other classes (a
    sum of the others' probabilities differs in its last digit with their split).
    """
    # the input check lets probabilities through up to 1e-9 outside [0, 1]; one unit in
    # the last place past 1 (or below 0) made a NaN log-odds, scored as a coin flip
    proba = np.clip(proba, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        if proba.shape[1] == 2:
            scores = np.log(proba) - np.log(proba[:, ::-1])
        else:
            scores = np.log(proba) - np.log1p(-proba)
    scores = np.where(np.isnan(scores), 0.0, scores)  # 0 / 0: a row without probabilities
    return np.clip(scores, -_SATURATED_LOG_ODDS, _SATURATED_LOG_ODDS)


#: Log-odds beyond which a probability rounds to exactly 1 in float64 (1 - eps / 2): rows
#: beyond it tie, on both sides alike.
_SATURATED_LOG_ODDS = float(-np.log(np.finfo(float).eps / 2))


def _class_tables(proba: NDArray, index: NDArray) -> list[_Table]:
    """The tables of the positive class (two classes) or of each class against the rest."""
    scores = _log_odds(proba)
    columns = [1] if proba.shape[1] == 2 else range(proba.shape[1])
    # log-odds near 0 carry the absolute rounding of probabilities near 1/2 (a row's pair
    # changed with its batch under a purely relative tolerance): floor the scale at 1.
    # The tolerance is float32's when every calibration probability is a float32 number;
    # a test row whose probabilities are not gets the float64 rule (`finer`), so that the
    # rule is float32's exactly when all n + 1 rows' are: a function of their multiset.
    single = bool(_float32_rows(proba).all())
    tolerance = _FLOAT32_TIE_TOLERANCE if single else _TIE_TOLERANCE
    tables = []
    for k in columns:
        table = _Table(scores[:, k], index == k, floor=1.0, tolerance=tolerance)
        if single:
            table.finer = _Table(scores[:, k], index == k, floor=1.0)
        tables.append(table)
    return tables


def _class_pairs(tables: list[_Table], proba: NDArray) -> NDArray:
    """``(n, n_classes, 2)``: every class's pair ``[p0, p1]`` (for two classes the first
    class's is ``[1 - p1, 1 - p0]``)."""
    scores = _log_odds(proba)
    single = _float32_rows(proba) if any(t.finer is not None for t in tables) else None
    if proba.shape[1] == 2:
        p0, p1 = tables[0].bounds(scores[:, 1], single)
        return np.stack([np.column_stack([1 - p1, 1 - p0]), np.column_stack([p0, p1])], 1)
    pairs = [table.bounds(scores[:, k], single) for k, table in enumerate(tables)]
    return np.stack([np.column_stack(pair) for pair in pairs], axis=1)


def _merged_probabilities(pairs: NDArray) -> NDArray:
    """``(n, n_classes)`` from pairs ``(n, n_classes, K, 2)`` of ``K`` predictors:
    ``GM(p1) / (GM(1 - p0) + GM(p1))`` per class, ``GM`` the geometric mean over the
    ``K`` pairs (Vovk, Petej and Fedorova, 2015; ``p1 / (1 - p0 + p1)`` for one pair).
    Two classes: the second class's, and its complement; more: rescaled to sum to one.
    Where both means are 0 (one pair says surely not, another surely yes) the merge is
    0.5."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_yes = np.log(pairs[..., 1]).mean(axis=-1)
        log_no = np.log1p(-pairs[..., 0]).mean(axis=-1)
        # GM(p1) / (GM(1 - p0) + GM(p1)) = 1 / (1 + exp(log_no - log_yes))
        merged = 1.0 / (1.0 + np.exp(log_no - log_yes))
    merged = np.where(np.isnan(merged), 0.5, merged)
    if pairs.shape[1] == 2:
        return np.column_stack([1 - merged[:, 1], merged[:, 1]])
    return merged / merged.sum(axis=1, keepdims=True)


class VennAbersCalibrator(ClassifierMixin, ModelWrapper):
    """Class probabilities calibrated by inductive Venn-Abers prediction.

    Each class's probability comes with a pair ``p0 <= p1`` (`predict_proba_bounds`) of
    which the one that used the true label is perfectly calibrated under exchangeability
    of calibration and test rows, whatever the model; `predict_proba` reports the merged
    ``p1 / (1 - p0 + p1)``. Binary problems get the guarantee for the positive class (and
    so for both); with more classes each class is calibrated one against the rest and
    the merged probabilities are rescaled to sum to one, which keeps each pair's
    guarantee for its own yes/no question but not for the rescaled probabilities.

    Parameters
    ----------
    estimator : classifier with predict_proba, default=None
        Any scikit-learn classifier or Pipeline; ``None`` means ``LogisticRegression()``.
        A fitted model (or ``FrozenEstimator(model)``) can be calibrated without ``fit``.
        Only the order of its scores matters: each class is scored by its log-odds
        (with two classes ``log p_1 - log p_0``, so for a model whose rows do not sum to
        1 both columns count; from ``p_k`` alone with more than two classes), clipped where a
        probability rounds to 1 (rows saturated at 1 or at 0 tie alike, so renaming the
        classes mirrors the pairs). Log-odds within ``16 * eps`` (3.6e-15) of each other,
        relative to the larger of the two magnitudes where that exceeds 1 (16 to 32 units
        in the last place) and absolute below 1, count as equal, calibration and test rows'
        alike, chained by single linkage (see `venn_abers_bounds`), and the guarantee is
        exact: a row whose score equals a calibration score keeps its pair in any batch
        whose rounding moves the score by less than that, unless a score of another
        calibration cell lies within twice the tolerance (the moved score can then tie
        both and join their cells); a score near the tolerance's edge can switch between
        a tie and a gap, and so change its pair. When every calibration probability is a
        float32 number (a float32 network, a model given float32 features) ``eps`` is
        float32's (1.9e-6 for ``16 * eps``): an MLP on float32 features re-predicting its
        1,000 calibration rows one at a time changed 33 pairs under the float64 tolerance
        and none under this one. A test row whose probabilities are not float32 numbers
        gets the float64 tolerance, so the rule stays a function of the ``n + 1`` rows. A
        network, float32 or float64, can still move a score beyond its tolerance: five
        ``MLPClassifier((64, 64), max_iter=300)`` (seeds 0 to 4) trained on 1,000 rows of
        ``make_classification`` (20 features, 8 informative, ``random_state=0``) and
        re-predicting their 1,000 calibration rows one at a time moved 2 to 9 rows'
        log-odds beyond it (the farthest by 1.3 to 9.9 times it), changing a few pairs per
        model (1, 2, 2, 0 and 0) by up to 0.13; on float32 features they moved 0 to 2 rows
        beyond the float32 tolerance (by up to 5.5 times it) and changed no pair (with
        other data one can).
    random_state : int, Generator or None, default=None
        Seeds the classifier trained by ``fit`` where its own ``random_state`` is None.

    Attributes
    ----------
    estimator_ : classifier
    classes_ : ndarray of shape (n_classes,)
    n_calibration_ : int

    See Also
    --------
    sklearn.calibration.CalibratedClassifierCV : isotonic or sigmoid calibration, without
        a guarantee.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.naive_bayes import GaussianNB
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> venn = VennAbersCalibrator(GaussianNB()).fit(X[::2], y[::2])
    >>> proba = venn.calibrate(X[1::4], y[1::4]).predict_proba(X[3::4])
    >>> bounds = venn.predict_proba_bounds(X[3::4])
    >>> proba.shape, bounds.shape
    ((142, 2), (142, 2, 2))
    >>> bool(((bounds[..., 0] <= proba) & (proba <= bounds[..., 1])).all())
    True
    """

    _calibrated_attribute = "_tables"

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        random_state: int | np.random.Generator | None = None,
    ):
        self.estimator = estimator
        self.random_state = random_state

    def _default_estimator(self) -> BaseEstimator:
        return LogisticRegression()

    def _validate_params(self) -> None:
        super()._validate_params()
        if not hasattr(self._estimator_or_default(), "predict_proba"):
            raise missing_proba_error(
                self._estimator_or_default(), "`estimator`", "Venn-Abers needs class scores"
            )

    def _check_target(self, y, n, *, calibrating):
        return check_class_labels(y, n, training=not calibrating)

    @property
    def classes_(self) -> NDArray:
        """Class labels, in the column order of `predict_proba`."""
        check_is_fitted(self, "estimator_")
        return model_classes(self.estimator_)

    @keeps_state_on_error
    def calibrate(self, X: Any, y: ArrayLike) -> Self:
        """Build the Venn-Abers tables from calibration rows held out from training.

        There is no Mondrian (``groups``) calibration: fit one calibrator per group for
        probabilities calibrated within each.

        Without a prior ``fit``, a fitted ``estimator`` is used as is (never refitted).
        Given exactly the rows ``fit`` trained on, it warns (the probabilities would be
        overconfident).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Labels, all among the model's ``classes_``.

        Returns
        -------
        self
        """
        check_row_order(X, y, "y")
        X = self._start_calibration(X)
        if self.classes_.size < 2:  # a prefit model; fit refuses one class itself
            raise ValueError(
                f"`estimator` was trained on one class ({self.classes_.tolist()}): at least "
                "two are needed (there is nothing to calibrate against)."
            )
        n = n_rows(X)
        labels = self._check_target(y, n, calibrating=True)
        remember_calibration_rows(self, X, labels, "the probabilities will be overconfident")
        self._check_nan(X)
        classes = self.classes_
        index = encode_labels(labels, classes)
        proba = class_probabilities(self.estimator_, X, classes.size, check_sums=False)
        absent = classes[np.bincount(index, minlength=classes.size) == 0]
        if absent.size:
            warn_user(
                f"No calibration row has the class(es) {absent[:5].tolist()}: their pairs "
                "will be [0, p1] with p1 = 1 / (1 + the number of calibration rows scoring "
                "at least as high): small at low scores, rising to 1 above the highest "
                "(nothing says how likely the class is). Calibrate on rows of every class.",
                UserWarning,
            )
        self._tables = _class_tables(proba, index)
        self.n_calibration_ = n
        record_calibration_settings(self)
        return self

    def predict_proba_bounds(self, X: Any) -> NDArray:
        """The Venn-Abers pair ``[p0, p1]`` of every class, shape ``(n_samples,
        n_classes, 2)``.

        For a binary problem the second class's pair is computed and the first class's
        is ``[1 - p1, 1 - p0]``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Rows to predict, with the features the model was trained on.

        Returns
        -------
        ndarray of shape (n_samples, n_classes, 2)
            ``[..., 0]`` is ``p0``, ``[..., 1]`` is ``p1`` (``p0 <= p1``), classes in
            ``classes_`` order.
        """
        return self._pairs(X, "predict_proba_bounds")

    def _pairs(self, X: Any, method: str) -> NDArray:
        try:
            self._check_calibrated(method)  # names the method the user called
        except NotFittedError as error:
            if not hasattr(self, "estimator_") or "needs calibration" not in str(error):
                raise
            raise NotFittedError(
                f"{error} Its predictions are calibrated probabilities, so there are none "
                "before calibrate; in cross-validation or a search (which call fit, then "
                "predict or score) use CrossVennAbersCalibrator, which calibrates inside fit."
            ) from None
        X = self._validate_X(X, reset=False)
        self._check_nan(X)
        proba = class_probabilities(self.estimator_, X, self.classes_.size, check_sums=False)
        return _class_pairs(self._tables, proba)

    def predict_proba(self, X: Any) -> NDArray:
        """Merged probabilities ``p1 / (1 - p0 + p1)``, shape ``(n_samples, n_classes)``:
        inside each pair for two classes; with more, rescaled to sum to one, which can
        move a probability outside its class's pair.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Rows to predict, with the features the model was trained on.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to one, columns in ``classes_`` order.
        """
        return _merged_probabilities(self._pairs(X, "predict_proba")[:, :, None, :])

    def predict(self, X: Any) -> NDArray:
        """The class with the largest calibrated probability.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Rows to predict, with the features the model was trained on.

        Returns
        -------
        ndarray of shape (n_samples,)
            Labels from ``classes_`` (the largest column of `predict_proba`).
        """
        proba = _merged_probabilities(self._pairs(X, "predict")[:, :, None, :])
        return self.classes_[np.argmax(proba, axis=1)]


class CrossVennAbersCalibrator(CrossFitClassifier):
    """Class probabilities by cross Venn-Abers prediction (CVAP): every row both trains
    and calibrates.

    The rows are cut into ``K`` folds; model ``k`` is trained without fold ``k`` and its
    probabilities are calibrated by an inductive Venn-Abers predictor on fold ``k``
    (as `VennAbersCalibrator` does, one class against the rest with more than two
    classes). A test row gets ``K`` pairs ``(p0_k, p1_k)`` per class, merged as
    ``GM(p1) / (GM(1 - p0) + GM(p1))`` (Vovk, Petej and Fedorova, 2015), ``GM`` the
    geometric mean over the folds.

    The merged probability has no validity guarantee (each fold's pair has one, for its
    model), and no pairs are exposed. In exchange no row is set aside: each model trains
    on ``(K - 1) / K`` of the rows and every row calibrates one fold's pair, though each
    pair rests on only ``n / K`` rows. It was more accurate in Vovk et al.'s experiments;
    in ours (the docs' calibration benchmark, full scale) its log loss ranged from 17%
    lower (digits, naive Bayes) to 23% higher (digits, logistic) than the inductive
    predictor's: 2-3% lower on spam and the synthetic data, 12-17% higher on breast
    cancer; and its top-label calibration was worse. Try both on your data. Fit
    parameters (``sample_weight``) reach the fold models only: the calibration counts
    every row.

    Parameters
    ----------
    estimator : classifier with predict_proba, default=None
        Any scikit-learn classifier or Pipeline (not fitted: it is cloned and fitted once
        per fold); ``None`` means ``LogisticRegression()``. A fold model that never saw a
        class gives it probability 0.
    cv : int, cross-validation splitter or list of (train, test) pairs, default=5
        An int ``K >= 2``: ``KFold(K, shuffle=True)`` seeded by ``random_state``; or a
        splitter, or a list of ``(train, test)`` index pairs, that holds every row out
        exactly once and trains on all the others (``KFold``, ``StratifiedKFold``,
        ``GroupKFold`` with ``groups`` in ``fit``).
    n_jobs : int, default=None
        Folds fitted in parallel (joblib).
    random_state : int, Generator or None, default=None
        Seeds the folds of an int ``cv`` and the fold models whose own ``random_state`` is
        None.
    verbose : bool, default=False
        Show a progress bar of the fold fits.

    Attributes
    ----------
    estimators_ : list of classifiers
        The ``K`` fold models, model ``k`` trained without fold ``k``.
    classes_ : ndarray of shape (n_classes,)
        Every label of ``y`` in ``fit``, in the column order of `predict_proba`.
    fold_index_ : ndarray of shape (n_samples,)
        The fold of each training row (the model it calibrates).
    n_calibration_ : int
        ``n``: every training row calibrates one fold model.
    n_features_in_ : int

    See Also
    --------
    VennAbersCalibrator : the inductive predictor, whose pairs carry the guarantee.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.naive_bayes import GaussianNB
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> cvap = CrossVennAbersCalibrator(GaussianNB(), cv=5, random_state=0)
    >>> proba = cvap.fit(X[::2], y[::2]).predict_proba(X[1::2])
    >>> proba.shape, bool(np.allclose(proba.sum(axis=1), 1))
    ((284, 2), True)
    """

    _calibrated_attribute = "_fold_tables"
    _split_alternative = "VennAbersCalibrator"
    _splitter_examples = "KFold, StratifiedKFold, GroupKFold"
    _method_name = "cross Venn-Abers"
    _stratified_caveat = ""  # no coverage floor to lose
    _needs_probabilities_for = "Venn-Abers needs class scores"

    def _reads_distribution(self) -> bool:
        return False  # each column is a one-vs-rest score: its rows need not sum to 1

    def __init__(
        self,
        estimator: BaseEstimator | None = None,
        cv: int | Any = 5,
        n_jobs: int | None = None,
        random_state: int | np.random.Generator | None = None,
        verbose: bool = False,
    ):
        self.estimator = estimator
        self.cv = cv
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    def _store_scores(self, y: NDArray, outputs: NDArray, scored: NDArray, X: Any) -> None:
        index = encode_labels(y, self.classes_)
        folds = self.fold_index_[scored]
        missing = [
            k
            for k in range(len(self.estimators_))
            if np.unique(index[folds == k]).size < self.classes_.size
        ]
        if missing:
            warn_user(
                f"{len(missing)} of {len(self.estimators_)} folds lack a class among their "
                "rows: those folds' pairs for it are [0, p1] with p1 = 1 / (1 + the "
                "number of the fold's rows scoring at least as high), rising to 1 at the "
                "top. Use fewer folds or a StratifiedKFold.",
                UserWarning,
            )
        self._fold_tables = [
            _class_tables(outputs[folds == k], index[folds == k])
            for k in range(len(self.estimators_))
        ]

    def _combine(self, proba: NDArray) -> NDArray:
        """Each fold's pairs, merged as ``GM(p1) / (GM(1 - p0) + GM(p1))`` (rescaled to sum
        to one with more than two classes)."""
        pairs = [_class_pairs(tables, proba[:, k]) for k, tables in enumerate(self._fold_tables)]
        return _merged_probabilities(np.stack(pairs, axis=2))  # (b, classes, K, 2)
