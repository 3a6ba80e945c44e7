"""Regression scores: ``score(y, y_pred, difficulty)`` and its inverse ``inverse(...)``.

A score maps a target and the model's output to a nonconformity value (lower is more
typical); its inverse maps the model's output and a threshold back to the interval of
targets whose score is at most that threshold. The wrapper does quantiles, groups, levels
and batching, so a new score is a few lines.

An asymmetric score returns one column per side, ``(n, 2)``; each side is then calibrated
at ``alpha / 2`` and ``inverse`` receives two thresholds per row.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from uqconform._validation import check_bool

__all__ = [
    "AbsoluteScore",
    "CQRScore",
    "NormalizedScore",
    "RegressionScore",
    "SignedResidualScore",
    "get_regression_score",
    "interval_around",
]


# Outward rounding of interval ends: each end moves out by 2**-50 (8 units of 2**-53, the
# unit roundoff) of the magnitude of its own operands, so that a target whose (rounded)
# score equals the threshold is inside. The rounding of a score and of the end computed
# from its threshold together miss by at most about 5 such units. Row by row: a row's
# interval does not depend on the other rows of the call (or on the batch size).
_OUTWARD_RELATIVE = 2.0**-50
# Margins are capped here (never reached by finite operands): an infinite operand gets a
# finite margin, so its infinite end never becomes NaN (inf - inf).
_MARGIN_CAP = 1e300


def outward_margin(*parts: ArrayLike, out: NDArray | None = None) -> NDArray:
    """Outward-rounding margins of interval ends computed from ``parts``, element by element
    (broadcast): ``2**-50 * sum(|part|)``, written into ``out`` when given (it must have the
    broadcast shape). Widening each end by its margin keeps a target whose score equals the
    threshold inside. An infinite operand gets a large finite margin, so an infinite end
    stays infinite (never NaN).

    Examples
    --------
    >>> import numpy as np
    >>> -0.4 + 1.4 < 1.0
    True
    >>> bool(-0.4 + 1.4 + outward_margin(np.array([-0.4]), np.array([1.4]))[0] >= 1.0)
    True
    """
    first = np.asarray(parts[0], dtype=float)
    total = np.abs(first, out=out) if out is not None else np.abs(np.atleast_1d(first))
    total *= _OUTWARD_RELATIVE  # scaled before adding: no overflow near the largest float
    for part in parts[1:]:
        scaled = np.abs(part) * _OUTWARD_RELATIVE
        if out is not None or np.broadcast_shapes(total.shape, scaled.shape) == total.shape:
            total += scaled
        else:
            total = total + scaled
    return np.minimum(total, _MARGIN_CAP, out=total)


def interval_around(
    lower_anchor: NDArray, upper_anchor: NDArray, below: NDArray, above: NDArray
) -> NDArray:
    """``[lower_anchor - below, upper_anchor + above]`` as one ``(n, 2)`` array, each end
    rounded outward by a few units in the last place of its own operands.

    Floating-point rounding would otherwise put a target whose score equals the threshold
    just outside (``-0.4 + 1.4`` is ``0.9999999999999999``), which costs coverage when many
    scores tie (integer targets, duplicated rows). Computed inside the one result array.

    Examples
    --------
    >>> import numpy as np
    >>> interval_around(np.array([-0.4]), np.array([-0.4]), np.array([1.4]), np.array([1.4]))
    array([[-1.8,  1. ]])
    >>> bool(interval_around(np.array([-0.4]), np.array([-0.4]), np.array([1.4]),
    ...                      np.array([1.4]))[0, 1] >= 1.0)
    True
    """
    out = np.empty((np.shape(lower_anchor)[0], 2))
    lower, upper = out[:, 0], out[:, 1]
    # each column first holds its widened offset (no full-size temporary when the offset
    # is one shared value), then the end; a symmetric score widens once for both ends
    symmetric = upper_anchor is lower_anchor and above is below
    outward_margin(upper_anchor, above, out=upper)
    upper += above
    if symmetric:
        np.subtract(lower_anchor, upper, out=lower)
    else:
        outward_margin(lower_anchor, below, out=lower)
        lower += below
        np.subtract(lower_anchor, lower, out=lower)
    np.add(upper_anchor, upper, out=upper)
    return out


class RegressionScore(ABC):
    """A regression nonconformity score and its inverse.

    Attributes
    ----------
    n_components : int
        1 for a symmetric score; 2 for a score with one column per side.
    needs_difficulty : bool
        Whether the score divides by a per-row difficulty (a predictive spread).

    Examples
    --------
    A user score: the absolute error on the log scale of a positive target.

    >>> import numpy as np
    >>> class LogAbsolute(RegressionScore):
    ...     def score(self, y, y_pred, difficulty=None):
    ...         return np.abs(np.log(y) - np.log(y_pred))
    ...     def inverse(self, y_pred, threshold, difficulty=None):
    ...         q = threshold[:, 0]
    ...         return np.stack([y_pred * np.exp(-q), y_pred * np.exp(q)], axis=1)
    >>> s = LogAbsolute()
    >>> s.inverse(np.array([1.0]), s.score(np.array([2.0]), np.array([1.0]))[:, None])
    array([[0.5, 2. ]])
    """

    #: Recorded by value when a wrapper calibrates with it: a setting changed in place
    #: afterwards (``score.lambda_reg = 0.5``) asks for a new calibration.
    _conformity_score = True

    n_components: int = 1
    needs_difficulty: bool = False

    @abstractmethod
    def score(self, y: NDArray, y_pred: NDArray, difficulty: NDArray | None = None) -> NDArray:
        """Nonconformity of targets ``y`` (n,) given model output ``y_pred``.

        Parameters
        ----------
        y : ndarray of shape (n,)
            Targets.
        y_pred : ndarray of shape (n,) or (n, 2)
            The model's output: point predictions, or a band ``[lower, upper]`` per row.
        difficulty : ndarray of shape (n,), optional
            Per-row spread, for scores with ``needs_difficulty``.

        Returns
        -------
        ndarray of shape (n,) or (n, n_components)
            Scores; one column per side for an asymmetric score.
        """

    @abstractmethod
    def inverse(
        self, y_pred: NDArray, threshold: NDArray, difficulty: NDArray | None = None
    ) -> NDArray:
        """Interval ``(n, 2)`` of targets with score <= ``threshold``.

        ``threshold`` has shape ``(n, n_components)``, or ``(1, n_components)`` when every
        row shares it: write the inverse with broadcasting operations.

        Parameters
        ----------
        y_pred : ndarray of shape (n,) or (n, 2)
            The model's output, as in `score`.
        threshold : ndarray of shape (n, n_components) or (1, n_components)
            Calibrated thresholds (one per side for an asymmetric score).
        difficulty : ndarray of shape (n,), optional
            Per-row spread, for scores with ``needs_difficulty``.

        Returns
        -------
        ndarray of shape (n, 2)
            Lower and upper ends of each row's interval.
        """

    def check_settings(self) -> None:
        """Refuse impossible settings with a ``ValueError`` naming them (the wrappers call
        it when they take the score). A score with settings overrides it; the default has
        none to check."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class AbsoluteScore(RegressionScore):
    """``|y - y_pred|``: constant-width intervals ``y_pred -/+ q``.

    Examples
    --------
    >>> import numpy as np
    >>> AbsoluteScore().inverse(np.array([1.0, 2.0]), np.array([[0.5], [0.5]]))
    array([[0.5, 1.5],
           [1.5, 2.5]])
    """

    def score(self, y: NDArray, y_pred: NDArray, difficulty: NDArray | None = None) -> NDArray:
        return np.abs(y - y_pred)

    def inverse(
        self, y_pred: NDArray, threshold: NDArray, difficulty: NDArray | None = None
    ) -> NDArray:
        q = threshold[:, 0]
        return interval_around(y_pred, y_pred, q, q)


class NormalizedScore(RegressionScore):
    """``|y - y_pred| / difficulty``: intervals ``y_pred -/+ q * difficulty``.

    The difficulty is a per-row predictive spread (an estimate of the absolute residual,
    or a predictive standard deviation), so intervals adapt to heteroscedastic noise.

    Examples
    --------
    >>> import numpy as np
    >>> NormalizedScore().inverse(np.array([0.0]), np.array([[2.0]]), np.array([0.5]))
    array([[-1.,  1.]])
    """

    needs_difficulty = True

    def score(self, y: NDArray, y_pred: NDArray, difficulty: NDArray | None = None) -> NDArray:
        with np.errstate(over="ignore"):  # a residual over a zero-spread floor: +inf
            return np.abs(y - y_pred) / difficulty

    def inverse(
        self, y_pred: NDArray, threshold: NDArray, difficulty: NDArray | None = None
    ) -> NDArray:
        half = threshold[:, 0] * difficulty
        return interval_around(y_pred, y_pred, half, half)


class CQRScore(RegressionScore):
    """Conformalized quantile regression score on a band ``y_pred = [lower, upper]``.

    Parameters
    ----------
    symmetric : bool, default=True
        ``True``: ``max(lower - y, y - upper)`` with one threshold added to both ends
        (Romano et al., 2019). ``False``: the two sides are scored and calibrated
        separately at ``alpha / 2`` each, which lets the band move asymmetrically.

    Examples
    --------
    >>> import numpy as np
    >>> band = np.array([[0.0, 1.0]])
    >>> CQRScore().score(np.array([1.5]), band)
    array([0.5])
    >>> CQRScore(symmetric=False).inverse(band, np.array([[0.1, 0.2]]))
    array([[-0.1,  1.2]])
    """

    def __init__(self, symmetric: bool = True) -> None:
        self.symmetric = symmetric

    @property
    def n_components(self) -> int:  # type: ignore[override]  # follows ``symmetric``
        return 1 if self.symmetric else 2

    def check_settings(self) -> None:
        check_bool(self.symmetric, "CQRScore.symmetric")

    def score(self, y: NDArray, y_pred: NDArray, difficulty: NDArray | None = None) -> NDArray:
        below, above = y_pred[:, 0] - y, y - y_pred[:, 1]
        if self.symmetric:
            return np.maximum(below, above)
        return np.stack([below, above], axis=1)

    def inverse(
        self, y_pred: NDArray, threshold: NDArray, difficulty: NDArray | None = None
    ) -> NDArray:
        low_q = threshold[:, 0]
        high_q = threshold[:, -1]
        return interval_around(y_pred[:, 0], y_pred[:, 1], low_q, high_q)

    def __repr__(self) -> str:
        return f"CQRScore(symmetric={self.symmetric})"


class SignedResidualScore(RegressionScore):
    """Signed residuals, one column per side: ``(y_pred - y, y - y_pred)``.

    Each side is calibrated at ``alpha / 2``, so the interval ``[y_pred - q_low,
    y_pred + q_high]`` follows a skewed residual distribution (signed-error conformal
    regression). The calibrated ``y - y_pred`` column is also what a conformal predictive
    system is built from (`uqconform.regression.ConformalPredictiveSystem`).

    Parameters
    ----------
    normalized : bool, default=False
        Divide both residuals by the row's difficulty (a predictive spread): the ends
        become ``y_pred -/+ q * difficulty``.

    Examples
    --------
    >>> import numpy as np
    >>> SignedResidualScore().score(np.array([1.5]), np.array([1.0]))
    array([[-0.5,  0.5]])
    >>> SignedResidualScore().inverse(np.array([1.0]), np.array([[0.2, 0.5]]))
    array([[0.8, 1.5]])
    """

    n_components = 2

    def __init__(self, normalized: bool = False) -> None:
        self.normalized = normalized

    @property
    def needs_difficulty(self) -> bool:  # type: ignore[override]  # follows ``normalized``
        return bool(self.normalized)

    def check_settings(self) -> None:
        check_bool(self.normalized, "SignedResidualScore.normalized")

    def score(self, y: NDArray, y_pred: NDArray, difficulty: NDArray | None = None) -> NDArray:
        residual = y - y_pred
        if self.normalized:
            with np.errstate(over="ignore"):  # a residual over a zero-spread floor: +-inf
                residual = residual / difficulty
        return np.stack([-residual, residual], axis=1)

    def inverse(
        self,
        y_pred: NDArray,
        threshold: Any,  # NDArray (n, 2); Any while cps._PredictiveScore widens it
        difficulty: NDArray | None = None,
    ) -> NDArray:
        below, above = threshold[:, 0], threshold[:, 1]
        if self.normalized:
            below, above = below * difficulty, above * difficulty
        return interval_around(y_pred, y_pred, below, above)

    def __repr__(self) -> str:
        return f"SignedResidualScore(normalized={self.normalized})"


_REGRESSION_SCORES = {"absolute": AbsoluteScore, "normalized": NormalizedScore}


def get_regression_score(score: str | RegressionScore) -> RegressionScore:
    """Resolve a score name (``"absolute"``, ``"normalized"``) or pass a score object.

    Parameters
    ----------
    score : {"absolute", "normalized"} or RegressionScore
        A name (`AbsoluteScore`, `NormalizedScore`), or a score object, returned as is
        after its settings are checked (`RegressionScore.check_settings`).

    Returns
    -------
    RegressionScore
        A new score for a name; the object itself for a score object.

    Raises
    ------
    ValueError
        For an unknown name (or any other value), or a score object with invalid settings.

    Examples
    --------
    >>> get_regression_score("absolute")
    AbsoluteScore()
    >>> get_regression_score("normalized").needs_difficulty
    True
    >>> score = CQRScore(symmetric=False)
    >>> get_regression_score(score) is score
    True
    >>> get_regression_score("cqr")
    Traceback (most recent call last):
    ...
    ValueError: Unknown `conformity_score` 'cqr': use one of ['absolute', 'normalized'] or an instance of uqconform.scores.RegressionScore.
    """  # noqa: E501
    if isinstance(score, RegressionScore):
        score.check_settings()
        return score
    if isinstance(score, str) and score in _REGRESSION_SCORES:
        return _REGRESSION_SCORES[score]()
    raise ValueError(
        f"Unknown `conformity_score` {score!r}: use one of {sorted(_REGRESSION_SCORES)} or an "
        "instance of uqconform.scores.RegressionScore."
    )
