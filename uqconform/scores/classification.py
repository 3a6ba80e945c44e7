"""Classification scores: the nonconformity of every candidate label at once.

``scores(proba, u)`` returns an ``(n, n_classes)`` array: the score each label would get if
it were the true one. Calibration reads the true label's column; a prediction set keeps the
labels whose score is at most the threshold (its inverse). ``u`` holds one uniform draw per
row, used by the randomised scores so that coverage exceeds the nominal level by less than
``1/(n + 1)`` (``n`` calibration rows) instead of by the size of the ties. Labels of
probability exactly 0 keep tied APS / RAPS scores whatever the draw (``u * 0 = 0``), so
with such models only the lower bound holds.

Called directly, the scores of this module check what they are given (`_checked_inputs`):
``proba`` 2-D numbers, ``u`` one draw in [0, 1] per row when the score is randomised
(``u = rng.uniform(size=n)``; ignored otherwise), ``labels`` integer column indices, one
per row, and the score's own settings (`ClassificationScore.check_settings`).
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from uqconform._validation import (
    check_bool,
    check_int,
    check_nonnegative_float,
    check_positive_float,
    check_score_output,
)

__all__ = [
    "APSScore",
    "ClassificationScore",
    "LACScore",
    "RAPSScore",
    "SAPSScore",
    "TopKScore",
    "get_classification_score",
]


# Cells (rows x classes) per block when calibration scores are computed block by block.
_LABEL_SCORE_CELLS = 2**20
# Cumulative masses this close to 1 are the whole mass (see APSScore._cumulative).
_WHOLE_MASS_TOLERANCE = 1e-12


def _checked_inputs(
    score: ClassificationScore,
    proba: ArrayLike,
    u: ArrayLike | None,
    labels: ArrayLike | None = None,
) -> tuple[NDArray, NDArray | None, NDArray | None]:
    """``proba``, ``u`` and ``labels`` of a call to ``score.scores``, ``set_scores`` or
    ``label_scores`` as arrays, or a ``ValueError`` naming the argument at fault.

    The score's settings first (`ClassificationScore.check_settings`): called directly, a
    score does not pass through a wrapper, which checks them. ``proba`` must be a 2-D array
    of numbers ``(n, n_classes)``; when the score is randomised, ``u`` one draw in [0, 1]
    per row, ``(n,)`` (a single draw would be shared by every row), else ``u`` is not read
    and passes unchecked; ``labels`` (when given) integer column indices of ``proba``, one
    per row. The wrappers call these methods on every batch: no copy of ``proba`` (only
    ``np.asarray``), and O(n) checks of ``u`` and ``labels``.

    Examples
    --------
    >>> proba, u, _ = _checked_inputs(APSScore(), [[0.2, 0.8]], [0.5])
    >>> proba.shape, u
    ((1, 2), array([0.5]))
    >>> _checked_inputs(APSScore(), [[0.2, 0.8], [0.5, 0.5]], None)
    Traceback (most recent call last):
    ...
    ValueError: `u` is missing: APSScore(randomized=True) is randomised and needs one uniform draw per row of `proba`. Draw u = rng.uniform(size=2) (rng = np.random.default_rng(seed)), or use randomized=False.
    """  # noqa: E501
    score.check_settings()
    proba = np.asarray(proba)
    if proba.ndim != 2 or proba.dtype.kind not in "iuf":
        hint = " (one row: pass proba.reshape(1, -1))" if proba.ndim == 1 else ""
        raise ValueError(
            "`proba` must be a 2-D array of numbers, one row per sample and one column per "
            f"class (n_rows, n_classes), got shape {proba.shape} and dtype {proba.dtype}{hint}."
        )
    n, n_classes = proba.shape
    if not score.randomized:  # a non-randomised score does not read u
        u = None if u is None else np.asarray(u)
    elif u is None:
        raise ValueError(
            f"`u` is missing: {score!r} is randomised and needs one uniform draw per row of "
            f"`proba`. Draw u = rng.uniform(size={n}) (rng = np.random.default_rng(seed)), "
            "or use randomized=False."
        )
    else:
        u = np.asarray(u)
        if u.shape != (n,) or u.dtype.kind not in "iuf":
            raise ValueError(
                f"`u` must hold one uniform draw per row of `proba`, shape ({n},), got shape "
                f"{u.shape} and dtype {u.dtype}: draw u = rng.uniform(size={n}), one per row "
                "(a single draw is not shared by every row)."
            )
        if n and not (u.min() >= 0 and u.max() <= 1):  # NaN fails both comparisons
            row = int(np.flatnonzero(~((u >= 0) & (u <= 1)))[0])
            raise ValueError(
                f"`u` must lie in [0, 1] (uniform draws), got {float(u[row])!r} at row {row}: "
                f"draw u = rng.uniform(size={n})."
            )
    if labels is None:
        return proba, u, None
    labels = np.asarray(labels)
    if labels.shape == (n,) and n == 0:
        labels = labels.astype(np.intp)  # an empty list reads as floats
    if labels.shape != (n,) or labels.dtype.kind not in "iu":
        raise ValueError(
            f"`labels` must be integer column indices of `proba`, one per row (shape ({n},)), "
            f"got shape {labels.shape} and dtype {labels.dtype}."
        )
    if n and (labels.min() < 0 or labels.max() >= n_classes):
        row = int(np.flatnonzero((labels < 0) | (labels >= n_classes))[0])
        raise ValueError(
            f"`labels` must be column indices of `proba` in [0, {n_classes}), got "
            f"{int(labels[row])} at row {row}."
        )
    return proba, u, labels


class ClassificationScore(ABC):
    """A classification nonconformity score, computed for every candidate label.

    Attributes
    ----------
    randomized : bool
        Whether the score uses the per-row uniform draw ``u`` (then required: one draw in
        [0, 1] per row; a score that is not randomised ignores it).
    reads_distribution : bool
        Whether the score reads each row as a probability distribution (the wrappers then
        warn about rows that do not sum to 1); False for ranks only (top-k).

    Examples
    --------
    A custom score implements `scores`; the conformal classifiers accept an instance.

    >>> import numpy as np
    >>> from sklearn.datasets import load_iris
    >>> from uqconform import SplitConformalClassifier
    >>> class MarginScore(ClassificationScore):  # gap to the most probable label
    ...     def scores(self, proba, u=None):
    ...         return proba.max(axis=1, keepdims=True) - proba
    >>> MarginScore().scores(np.array([[0.7, 0.2, 0.1]]))
    array([[0. , 0.5, 0.6]])
    >>> X, y = load_iris(return_X_y=True)
    >>> cp = SplitConformalClassifier(conformity_score=MarginScore(), random_state=0)
    >>> cp.fit(X[::2], y[::2]).calibrate(X[1::2], y[1::2]).predict_set(X[1::2]).shape
    (75, 3)
    """

    reads_distribution: bool = True

    #: Recorded by value when a wrapper calibrates with it: a setting changed in place
    #: afterwards (``score.lambda_reg = 0.5``) asks for a new calibration.
    _conformity_score = True

    randomized: bool = False

    @abstractmethod
    def scores(self, proba: NDArray, u: NDArray | None = None) -> NDArray:
        """Scores ``(n, n_classes)`` from probabilities ``(n, n_classes)``."""

    def check_settings(self) -> None:
        """Refuse impossible settings with a ``ValueError`` naming them (the wrappers call
        it when they take the score: at ``calibrate`` and at prediction; `scores`,
        `set_scores` and `label_scores` of this module's scores call it on every use, so a
        score called directly is checked too, also after a setting changed in place). Not
        at construction: the wrappers refuse the score with the parameter's name. A score
        with settings overrides it; the default has none to check."""
        return None

    def label_scores(self, proba: NDArray, labels: NDArray, u: NDArray | None = None) -> NDArray:
        """Scores ``(n,)`` of one label per row (column index ``labels``), for calibration.

        Equals ``scores(proba, u)[i, labels[i]]``, computed in blocks of rows so that the
        temporary ``(n, n_classes)`` arrays of a sorting score stay small; a score may
        compute it more cheaply.
        """
        proba, u, checked_labels = _checked_inputs(self, proba, u, labels)
        assert checked_labels is not None
        out = np.empty(proba.shape[0])
        step = max(_LABEL_SCORE_CELLS // max(proba.shape[1], 1), 1)
        for start in range(0, proba.shape[0], step):  # a loop over blocks, for bounded memory
            rows = slice(start, start + step)
            block = self.validated_scores(proba[rows], u if u is None or not u.ndim else u[rows])
            out[rows] = np.take_along_axis(block, checked_labels[rows, None], axis=1)[:, 0]
        return out

    def set_scores(self, proba: NDArray, u: NDArray | None = None) -> NDArray:
        """The inverse: a label is in the prediction set when this is ``<=`` the threshold.

        The calibration score itself by default, which gives exact coverage for continuous
        scores. (The wrappers check what it returns, once.)
        """
        proba, u, _ = _checked_inputs(self, proba, u)
        return self.scores(proba, u)

    def validated_scores(self, proba: NDArray, u: NDArray | None = None) -> NDArray:
        """`scores` checked: one number per row and class (shape ``(n, n_classes)``, no
        NaN), or a ValueError naming the score, which a user score would otherwise pass
        on as wrong sets."""
        proba, u, _ = _checked_inputs(self, proba, u)
        return check_score_output(self.scores(proba, u), proba.shape, f"{self!r}.scores")

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({params})"


class LACScore(ClassificationScore):
    """Least ambiguous set-valued classifier: ``1 - p(y | x)`` (Sadinle et al., 2019).

    Gives the smallest average sets, at the price of weaker conditional coverage.

    Examples
    --------
    >>> import numpy as np
    >>> LACScore().scores(np.array([[0.7, 0.2, 0.1]]))
    array([[0.3, 0.8, 0.9]])
    """

    def scores(self, proba: NDArray, u: NDArray | None = None) -> NDArray:
        proba, _, _ = _checked_inputs(self, proba, u)
        return 1.0 - proba

    def label_scores(self, proba: NDArray, labels: NDArray, u: NDArray | None = None) -> NDArray:
        proba, _, checked = _checked_inputs(self, proba, u, labels)
        rows = cast(NDArray, checked)  # labels were given: never None
        return 1.0 - np.take_along_axis(proba, rows[:, None], axis=1)[:, 0]


def _descending_order(proba: NDArray) -> NDArray:
    """Labels from most to least probable; tied labels in column order. Any fixed rule
    keeps exchangeability, but it must be the same on every machine: numpy's default
    sort orders ties by CPU (its SIMD sorts), which changed RAPS, SAPS and top-k scores
    of tied labels, and so the sets of a fixed seed, from one machine to another."""
    return np.argsort(-proba, axis=1, kind="stable")


def _sorted_descending(proba: NDArray) -> tuple[NDArray, NDArray]:
    order = _descending_order(proba)
    return order, np.take_along_axis(proba, order, axis=1)


def _unsort(values_in_order: NDArray, order: NDArray) -> NDArray:
    out = np.empty_like(values_in_order)
    np.put_along_axis(out, order, values_in_order, axis=1)
    return out


class APSScore(ClassificationScore):
    """Adaptive prediction sets: probability mass of the labels ranked above ``y``.

    ``sum_{j ranked before y} p_j + u * p_y`` (Romano et al., 2020). With
    ``randomized=False`` the label's own mass counts in full (``u = 1``) at calibration,
    while a set keeps every label whose mass ranked *above* it is ``<=`` the threshold
    ``tau``, so it includes the label that crosses the threshold: sets are never empty, and
    coverage is above ``1 - alpha`` rather than exact. On exact ties this keeps more labels
    than stopping at the first label whose cumulative mass reaches ``tau`` (when the mass
    reaches ``tau`` exactly, the labels after it are kept too, every label of probability
    0 when ``tau = 1``); the stopping rule could drop a true label of probability 0 whose
    score equals ``tau``, which this rule keeps. Ties are those of the floating-point
    sums: masses equal in exact arithmetic but added in another order (``0.3 + 0.3 +
    0.3`` against ``0.5 + 0.4``) may differ in the last digit and not tie. Coverage does
    not depend on it: a label's set score is never above its own calibration score.

    Examples
    --------
    >>> import numpy as np
    >>> APSScore(randomized=False).scores(np.array([[0.2, 0.5, 0.3]]))
    array([[1. , 0.5, 0.8]])
    >>> APSScore(randomized=False).set_scores(np.array([[0.2, 0.5, 0.3]]))
    array([[0.8, 0. , 0.5]])
    >>> APSScore().scores(np.array([[0.2, 0.5, 0.3]]), u=np.array([0.5]))
    array([[0.9 , 0.25, 0.65]])
    """

    def __init__(self, randomized: bool = True) -> None:
        self.randomized = randomized

    def check_settings(self) -> None:
        check_bool(self.randomized, f"{type(self).__name__}.randomized")

    def _penalty(self, n_classes: int) -> NDArray | float:
        return 0.0

    def _cumulative(self, proba: NDArray, own: NDArray | float) -> NDArray:
        """Mass ranked above each label, plus the fraction ``own`` of its own, plus penalty."""
        order, ranked = _sorted_descending(proba)
        total = np.cumsum(ranked, axis=1)
        # The whole mass is 1 up to rounding, which differs from row to row: labels of
        # probability 0 (and the last label) would tie with each other's scores in exact
        # arithmetic but not in floating point, and whether a calibration score counted
        # against a test score would be decided by the last digit.
        total[np.abs(total - 1.0) <= _WHOLE_MASS_TOLERANCE] = 1.0
        if np.isscalar(own) and own == 0.0:
            # the mass ranked above, as the same float as the label before it counts
            # (total - ranked rounds differently: 1 - 1/7 is not 6/7 in floating point,
            # which broke exact ties against the label)
            total = np.concatenate([np.zeros_like(total[:, :1]), total[:, :-1]], axis=1)
        elif not (np.isscalar(own) and own == 1.0):
            total -= ranked * (1.0 - own)
        total += self._penalty(proba.shape[1])
        return _unsort(total, order)

    def scores(self, proba: NDArray, u: NDArray | None = None) -> NDArray:
        proba, u, _ = _checked_inputs(self, proba, u)
        # a randomised score's u is checked to be an array (never None)
        return self._cumulative(proba, cast(NDArray, u)[:, None] if self.randomized else 1.0)

    def set_scores(self, proba: NDArray, u: NDArray | None = None) -> NDArray:
        proba, u, _ = _checked_inputs(self, proba, u)
        if self.randomized:
            return self.scores(proba, u)
        return self._cumulative(proba, 0.0)


class RAPSScore(APSScore):
    """Regularised APS: APS plus ``lambda_reg * max(0, rank(y) - k_reg)``.

    The penalty discourages unlikely labels deep in the ranking, which shrinks the sets
    APS gives on models with many small probabilities (Angelopoulos et al., 2021).
    Randomised sets can be empty on confident rows; non-randomised ones keep a label when
    the mass ranked above it plus its own rank's penalty is within the threshold (the
    paper's non-randomised rule also keeps the label that its penalty takes over).

    Parameters
    ----------
    k_reg : int, default=1
        Number of top-ranked labels that are not penalised.
    lambda_reg : float, default=0.01
        Penalty per rank beyond ``k_reg``.
    randomized : bool, default=True

    Examples
    --------
    >>> import numpy as np
    >>> RAPSScore(k_reg=1, lambda_reg=0.1, randomized=False).scores(
    ...     np.array([[0.2, 0.5, 0.3]]))
    array([[1.2, 0.5, 0.9]])
    """

    def __init__(self, k_reg: int = 1, lambda_reg: float = 0.01, randomized: bool = True) -> None:
        self.k_reg = k_reg
        self.lambda_reg = lambda_reg
        self.randomized = randomized

    def check_settings(self) -> None:
        super().check_settings()
        check_int(self.k_reg, "RAPSScore.k_reg", low=0)
        check_nonnegative_float(self.lambda_reg, "RAPSScore.lambda_reg")

    def _penalty(self, n_classes: int) -> NDArray:
        ranks = np.arange(1, n_classes + 1)
        return self.lambda_reg * np.maximum(ranks - self.k_reg, 0)


def _check_saps_weight(weight: Any, name: str) -> float:
    """SAPS's rank weight: a finite number > 0 (at 0 every label below the top scores the
    top probability, so a set is the top label alone or every label)."""
    try:
        return check_positive_float(weight, name)
    except ValueError as error:
        if isinstance(weight, bool) or not (isinstance(weight, (int, float)) and weight == 0):
            raise
        raise ValueError(
            f"`{name}` must be > 0, got 0: at 0 every label below the top one scores the top "
            "probability, so each set is the top label alone or every label (the ranks SAPS "
            "adds are lost). Use a small positive weight (the default 0.3), or LAC/APS."
        ) from error


class SAPSScore(ClassificationScore):
    """Sorted adaptive prediction sets (Huang et al., 2023): rank, not probability mass.

    ``u * p_max`` for the top-ranked label, ``p_max + (rank - 2 + u) * weight`` for the
    others: only the largest probability is used, which makes the score robust to the
    poorly calibrated small probabilities of deep networks.

    Parameters
    ----------
    weight : float, default=0.3
        Cost of each rank beyond the first (``lambda`` in the paper).
    randomized : bool, default=True
        ``False`` scores with ``u = 1``, and a set always keeps the top-ranked label (its
        set score is 0, at most its calibration score, so coverage stays at least
        ``1 - alpha``): with ``u = 1`` alone, a row whose top probability exceeds the
        threshold would get an empty set, exactly where the model is surest.

    Examples
    --------
    >>> import numpy as np
    >>> SAPSScore(weight=0.5, randomized=False).scores(np.array([[0.2, 0.5, 0.3]]))
    array([[1.5, 0.5, 1. ]])
    >>> SAPSScore(weight=0.5, randomized=False).set_scores(np.array([[0.2, 0.5, 0.3]]))
    array([[1.5, 0. , 1. ]])
    """

    def __init__(self, weight: float = 0.3, randomized: bool = True) -> None:
        self.weight = weight
        self.randomized = randomized

    def check_settings(self) -> None:
        check_bool(self.randomized, "SAPSScore.randomized")
        _check_saps_weight(self.weight, "SAPSScore.weight")

    def scores(self, proba: NDArray, u: NDArray | None = None) -> NDArray:
        proba, u, _ = _checked_inputs(self, proba, u)
        order = _descending_order(proba)
        ranks = np.empty_like(order)
        np.put_along_axis(ranks, order, np.arange(1, proba.shape[1] + 1)[None, :], axis=1)
        top = proba.max(axis=1, keepdims=True)
        draw = cast(NDArray, u)[:, None] if self.randomized else 1.0  # randomised: u given
        return np.where(ranks == 1, draw * top, top + (ranks - 2 + draw) * self.weight)

    def set_scores(self, proba: NDArray, u: NDArray | None = None) -> NDArray:
        proba, u, _ = _checked_inputs(self, proba, u)
        values = self.scores(proba, u)
        if not self.randomized:  # the top-ranked label is always kept
            top = _descending_order(proba)[:, :1]
            np.put_along_axis(values, top, 0.0, axis=1)
        return values


class TopKScore(ClassificationScore):
    """Rank of the label among the model's ordered probabilities (1 = most likely).

    Every set has the same size, the calibrated ``k``.

    Examples
    --------
    >>> import numpy as np
    >>> TopKScore().scores(np.array([[0.2, 0.5, 0.3]]))
    array([[3., 1., 2.]])
    """

    reads_distribution = False

    def scores(self, proba: NDArray, u: NDArray | None = None) -> NDArray:
        proba, _, _ = _checked_inputs(self, proba, u)
        order = _descending_order(proba)
        ranks = np.broadcast_to(np.arange(1.0, proba.shape[1] + 1), proba.shape)
        return _unsort(np.ascontiguousarray(ranks), order)


def _is_default(name: str, value: object) -> bool:
    """Whether ``value`` is `get_classification_score`'s default for ``name`` (an array or
    an odd object is not)."""
    default = inspect.signature(get_classification_score).parameters[name].default
    try:
        return bool(value == default)
    except (TypeError, ValueError):
        return False


_MISSING = object()


def get_classification_score(
    score: str | ClassificationScore,
    *,
    randomized: bool = True,
    k_reg: int = 1,
    lambda_reg: float = 0.01,
    saps_weight: float = 0.3,
) -> ClassificationScore:
    """Resolve ``"lac"``, ``"aps"``, ``"raps"``, ``"saps"``, ``"topk"`` or pass a score object.

    Parameters
    ----------
    score : str or ClassificationScore
        A name, or a score object (returned as is).
    randomized : bool, default=True
        Randomised APS, RAPS and SAPS (the others ignore it).
    k_reg, lambda_reg : int, float
        The RAPS penalty: ``lambda_reg`` per rank beyond ``k_reg``.
    saps_weight : float, default=0.3
        The SAPS weight of each rank beyond the first.

    Returns
    -------
    ClassificationScore

    Examples
    --------
    >>> get_classification_score("raps", k_reg=2)
    RAPSScore(k_reg=2, lambda_reg=0.01, randomized=True)
    """
    if isinstance(score, ClassificationScore):
        given = dict(
            randomized=randomized, k_reg=k_reg, lambda_reg=lambda_reg, saps_weight=saps_weight
        )
        attribute = {"saps_weight": "weight"}  # the score objects' names of the settings

        def agrees(name: str, value: Any) -> bool:  # the object says the same already
            held = getattr(score, attribute.get(name, name), _MISSING)
            return held is not _MISSING and bool(held == value)

        ignored = [
            f"{k}={v!r}" for k, v in given.items() if not _is_default(k, v) and not agrees(k, v)
        ]
        if ignored:
            raise ValueError(
                f"{', '.join(ignored)} would be ignored: `conformity_score` is a score object "
                f"({score!r}), which carries its own settings. Set them on the object, or "
                "pass the score's name."
            )
        score.check_settings()
        return score
    check_bool(randomized, "randomized")
    check_int(k_reg, "k_reg", low=0)
    lambda_reg = check_nonnegative_float(lambda_reg, "lambda_reg")
    saps_weight = _check_saps_weight(saps_weight, "saps_weight")
    if score == "lac":
        return LACScore()
    if score == "aps":
        return APSScore(randomized=randomized)
    if score == "raps":
        return RAPSScore(k_reg=k_reg, lambda_reg=lambda_reg, randomized=randomized)
    if score == "saps":
        return SAPSScore(weight=saps_weight, randomized=randomized)
    if score == "topk":
        return TopKScore()
    raise ValueError(
        f"Unknown `conformity_score` {score!r}: use 'lac', 'aps', 'raps', 'saps', 'topk' or an "
        "instance of uqconform.scores.ClassificationScore."
    )
