"""The ridge-regression confidence machine: exact full conformal prediction for linear fits.

For a ridge fit on features ``phi`` (the inputs for ridge regression, the parameter
Jacobian of a linearised network for ACP-GN), adding a test point with candidate label ``y``
changes every residual linearly in ``y``: ``r_i(y) = a_i + b_i y`` (Nouretdinov, Melluish
and Vovk, 2001). With ``Sigma = (Phi^T Phi + Lambda)^-1`` fitted on the ``N`` training
points, ``h_m = phi_m^T Sigma phi_m``, ``h_im = phi_i^T Sigma phi_m``, residuals ``e`` and
test prediction ``f_m`` (Sherman-Morrison, exact):

* ``a_i = e_i + h_im f_m / (1 + h_m)``, ``b_i = -h_im / (1 + h_m)`` for training points;
* ``a_m = -f_m / (1 + h_m)``, ``b_m = 1 / (1 + h_m)`` for the test point.

The full-CP set ``{y : p(y) > alpha}`` with ``p(y) = (1 + #{i : |r_i(y)| >= |r_m(y)|}) /
(N + 1)`` is then found exactly by a sweep over the ``2N`` roots (Vovk's O(N log N)
algorithm, vectorised over test points) or, faster, by the Burnaev-Vovk pair of
one-sided machines on signed residuals at ``alpha / 2`` each: another valid set, about as
wide on average, though per point it can be narrower or wider than the exact one.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy import linalg

from uqconform.quantiles import _warn_too_few, conformal_rank

__all__ = [
    "LinearConfidenceMachine",
    "exact_intervals",
    "exact_union",
    "fast_intervals",
    "p_values",
    "residual_coefficients",
]

Score = Literal["standard", "studentized", "deleted"]
SCORES = ("standard", "studentized", "deleted")

# Relative tolerance under which two slopes b_i, b_m count as equal.
_SLOPE_TOLERANCE = 1e-12
# Squared ratio of the smallest to the largest Cholesky pivot under which the regularised
# Gram matrix counts as singular (rounding, not data).
_SINGULAR_PIVOT_RATIO = 1e-12
# Relative size of a test point's component outside the pinned directions that counts.
_OUTSIDE_SPAN = 1e-6
# Floor of 1 - leverage in the studentized and deleted scores: a few dozen ulps of 1, so
# that rounding never gives 0 or a negative spread (1e-8 before: a training row of
# leverage 1 - 1.8e-9 had its score shrunk threefold and the sets came out narrower).
_MIN_ONE_MINUS_LEVERAGE = 1e-14
# 1 - leverage below this is recomputed without the cancellation of 1 - (h_i - ...).
_RECOMPUTE_SPREAD_BELOW = 1e-6
# Two residuals whose absolute values differ by less than this share of a test point's
# largest |a| count as tied (conforming): exact ties (integer labels, duplicated rows) come
# out of the linear algebra a few ulps apart and would otherwise be decided by rounding.
_TIE_TOLERANCE = 1e-10
# ... and at least this share of the training labels' size (root mean square): the
# rounding-sized residuals of a fit through every point are ties, while labels far larger
# than the residuals (a trend fitted almost exactly, labels far from 0) widen the sets by
# little (1e-10 of the labels' spread widened them 7% at a spread 1e9 times the residuals'
# in a review; this, a thousandth of that, keeps labels moved by an offset of 1e9 within
# 1e-4 of their place).
_LABEL_TIE_TOLERANCE = 1e-13


def _tie_margin(a: NDArray, label_size: float = 0.0) -> NDArray:
    """Per test point (m, 1): the residual difference that still counts as a tie.

    ``1e-10`` of the largest ``|a|``, and at least ``1e-13`` of ``label_size`` (the
    training labels' root mean square): a fit through every training point (more
    parameters than rows and no penalty, or noise-free labels) leaves residuals of rounding
    size, and a margin relative to them alone left exact ties to rounding (half the line
    dropped from a set).
    """
    largest = np.max(np.abs(a), axis=1, keepdims=True)
    return np.maximum(_TIE_TOLERANCE * largest, _LABEL_TIE_TOLERANCE * label_size)


def _set_margin(a: NDArray, label_size: float = 0.0) -> NDArray:
    """Half `_tie_margin`, for the sets' ends: they then lie inside the region where
    `p_values` counts the ties, so every label of a returned set has ``p(y) > alpha``."""
    return _tie_margin(a, label_size) / 2.0


def _cholesky_with_jitter(matrix: NDArray, name: str) -> tuple[tuple[NDArray, bool], float]:
    """Cholesky factor of a symmetric matrix, adding growing jitter until it is positive;
    returns the factor and the jitter used (0 when none was needed)."""
    scale = float(np.mean(np.abs(np.diag(matrix)))) or 1.0
    jitters = [0.0] + [scale * 1e-10 * 10.0 ** (2 * k) for k in range(7)]
    for jitter in jitters:  # no jitter first, then growing
        try:
            shifted = matrix + jitter * np.eye(matrix.shape[0]) if jitter else matrix
            return linalg.cho_factor(shifted, lower=True, check_finite=False), jitter
        except linalg.LinAlgError:
            continue
    raise ValueError(
        f"The {name} is singular even with jitter up to {jitter:.1e}: the features are "
        "degenerate (constant or duplicated columns, or far more parameters than data "
        "without a prior). Increase the prior precision / ridge strength."
    )


def _finite_test_features(test_features: NDArray) -> NDArray:
    """Test features as floats, or a ValueError if any is NaN or infinite."""
    test_features = np.asarray(test_features, dtype=float)
    if not np.isfinite(test_features).all():
        raise ValueError("The test features contain NaN or infinite values.")
    return test_features


def power_of_two_scale(values: NDArray, axis: int | None = None) -> NDArray:
    """The power of two at or above the largest magnitude of ``values`` (along ``axis``,
    kept as a length-1 axis; 1 where all are 0): dividing by it is exact, so sums of
    squares of the scaled values neither overflow nor change a bit where the unscaled
    ones did not overflow or underflow (for peaks from ``2**1023`` up, ``2**1023``).

    Examples
    --------
    >>> float(power_of_two_scale(np.array([3.0, -5.0])))
    8.0
    """
    peak = np.max(np.abs(values), axis=axis, keepdims=axis is not None)
    exponent = np.frexp(peak)[1]  # peak = mantissa * 2**exponent, mantissa in [0.5, 1)
    # at most 2**1023 (the largest power of two a float holds: peaks from 2**1023 up, such
    # as 1e308, gave inf, and a test row there an empty set)
    return np.where(peak > 0, np.ldexp(1.0, np.minimum(exponent, 1023)), 1.0)


def label_tie_size(labels: NDArray, centre: float) -> float:
    """The ``label_size`` of the tie margin for training labels whose residuals come out of
    a fit that holds their centre (an intercept, a network's bias): their root mean square
    about ``centre``, and at least 16 units in the last place of the largest label over
    the margin's share (noise-free labels far from 0 leave residuals of the labels' own
    resolution). The labels' distance from 0 then widens the sets only through that floor
    (labels 1e13 from 0 widened them by a third with their uncentred root mean square):
    each end moves outward by half of it over its crossing rate (see `_events`), about 10
    ulps of the labels at rates near 1 but thousands at the small rates of small data.
    Outward only, so coverage holds, but the widening grows with the labels' distance
    from 0 against their spread: in a review (80 rows, labels of spread about 1.3 moved
    by an offset) the sets of `FullConformalRidge` and ACP-GN around a Ridge alike were
    1.0013 times as wide as for the same labels near 0 at an offset of 1e12, 1.023 at
    1e13, 1.17 at 1e14 and 2.4 at 1e15. Centre such labels (subtract their mean, and add
    it back to the intervals) when they sit far from 0 relative to their spread.

    Examples
    --------
    >>> labels = 1e13 + np.array([-1.0, 0.0, 1.0])
    >>> round(label_tie_size(labels, float(np.mean(labels))) / root_mean_square(labels), 3)
    0.031
    """
    if not np.isfinite(centre):
        centre = 0.0
    largest = float(np.max(np.abs(labels), initial=0.0))
    resolution = 16 * float(np.spacing(largest)) / _LABEL_TIE_TOLERANCE
    return max(root_mean_square(labels - centre), resolution)


def root_mean_square(values: NDArray) -> float:
    """``sqrt(mean(values**2))`` without overflow (that formula where it does not
    overflow; else on the values scaled by a power of two).

    Examples
    --------
    >>> round(root_mean_square(np.array([3e200, 4e200])) / 1e200, 6)  # plain formula: inf
    3.535534
    """
    with np.errstate(over="ignore"):
        plain = float(np.sqrt(np.mean(values**2)))
    if np.isfinite(plain):
        return plain
    scale = power_of_two_scale(values)
    return float(np.sqrt(np.mean((values / scale) ** 2)) * scale)


class LinearConfidenceMachine:
    """Ridge quantities of a fixed feature map, for full conformal prediction.

    Parameters
    ----------
    features : ndarray of shape (n, p)
        Training features (inputs for ridge, Jacobians for a linearised network).
    penalty : ndarray of shape (p,)
        Ridge strength per feature, in sum-of-squares units (``sum r^2 + sum penalty w^2``).
        Zeros are allowed (an unpenalised intercept) as long as the system is invertible.

    Attributes
    ----------
    n_samples, n_features : int
        Shape of the features (the features themselves are not kept).
    leverage : ndarray of shape (n,)
        Training leverages ``h_i``.
    jitter : float
        Added to the diagonal of the unit-diagonal (Jacobi-scaled) Gram matrix to factorise
        it, i.e. that share of each diagonal entry (0 when none was needed). A factor that
        needed jitter marks the matrix as singular; it is not used to solve.
    singular : bool
        Whether some direction is pinned by neither data nor penalty. Then ``Sigma`` is
        the pseudo-inverse of the regularised Gram matrix in units of each column's scale
        (a generalised inverse: those directions left out; predictions and leverages of
        rows in the span of the training rows are those of any solution).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20, 2)); y = X @ [1.0, -1.0] + rng.normal(size=20)
    >>> machine = LinearConfidenceMachine(X, np.ones(2))
    >>> coef = machine.solve(y)
    >>> bool(np.allclose(coef, np.linalg.solve(X.T @ X + np.eye(2), X.T @ y)))
    True
    """

    def __init__(self, features: NDArray, penalty: NDArray):
        # The features themselves are not kept (the gain below has their size): only what
        # the confidence machine reads.
        features = np.asarray(features, dtype=float)
        if not np.isfinite(features).all():
            raise ValueError("The features contain NaN or infinite values.")
        self.n_samples, self.n_features = features.shape
        # Each column in its own units (Jacobi scaling): the Gram matrix is formed and
        # factorised with a unit diagonal, so the singularity test, the jitter and the
        # null space do not depend on the units of a column (an intercept column of ones
        # beside features in micrometres). The scale of column j is the square root of
        # its diagonal entry, ||phi_j||^2 + penalty_j, computed without squaring a
        # feature (hypot, and the norm in units of the column's largest entry), so
        # features far from 1 (1e-200) neither underflow nor overflow, whichever of data
        # and penalty dominates. The factor of the Gram matrix in original units is
        # diag(column_scale) times the factor of the unit one.
        penalty = np.asarray(penalty, dtype=float)
        peak = np.max(np.abs(features), axis=0) if self.n_samples else np.zeros(self.n_features)
        peak = np.where(peak > 0, peak, 1.0)
        relative = features / peak
        data_norm = peak * np.sqrt(np.einsum("ij,ij->j", relative, relative))
        del relative
        scale = np.hypot(data_norm, np.sqrt(penalty))
        self._column_scale = np.where(scale > 0, scale, 1.0)
        unit = features / self._column_scale
        gram = unit.T @ unit
        del unit  # freed before the gain (n x p) is built
        gram[np.diag_indices_from(gram)] += (np.sqrt(penalty) / self._column_scale) ** 2
        unit_factor, self.jitter = _cholesky_with_jitter(
            gram, "regularised Gram (curvature) matrix"
        )
        # Singular: a direction no data and no penalty pins. Either the solver needed
        # jitter, or the factorisation went through by rounding (squared pivot ratio at
        # round-off level). Then Sigma is the pseudo-inverse of the unit-column Gram matrix
        # (a generalised inverse of the Gram matrix): the
        # directions no one pins (`unpinned`, kept as a basis in the unit-column
        # coordinates) are left out instead of inverted through the jitter, whose
        # rounding-sized errors in the leverages would break exact ties (integer labels
        # on one-hot columns with an intercept). Points in the span of the training
        # features get the predictions and leverages of every solution of the normal
        # equations.
        pivots = np.abs(np.diag(unit_factor[0]))
        ratio = float(pivots.min() / pivots.max()) ** 2 if pivots.max() > 0 else 0.0
        self.singular = bool(self.jitter > 0 or ratio < _SINGULAR_PIVOT_RATIO)
        self._null_space = None
        self._factor: tuple[NDArray, bool] | None = None
        self._root: NDArray | None = None  # Sigma = root root^T when singular
        if self.singular:
            values, vectors = np.linalg.eigh(gram)
            small = values <= _SINGULAR_PIVOT_RATIO * max(float(values.max()), 0.0)
            self._null_space = vectors[:, small] if small.any() else None
            kept = ~small
            self._root = vectors[:, kept] / np.sqrt(values[kept]) / self._column_scale[:, None]
        else:
            self._factor = (unit_factor[0] * self._column_scale[:, None], True)
        # G = Phi Sigma, and the training leverages h_i = phi_i^T Sigma phi_i.
        self._gain = self.solve_normal(features.T).T
        self.leverage = np.einsum("ij,ij->i", self._gain, features)

    def solve(self, target: NDArray) -> NDArray:
        """Ridge coefficients ``Sigma Phi^T target``."""
        return self._gain.T @ target

    def solve_normal(self, right_hand_side: NDArray) -> NDArray:
        """``Sigma right_hand_side``: the regularised normal equations solved for any
        right-hand side of shape (p,) or (p, k) (``solve(target)`` is
        ``solve_normal(Phi^T target)``)."""
        if self._root is not None:
            return self._root @ (self._root.T @ right_hand_side)
        assert self._factor is not None
        return linalg.cho_solve(self._factor, right_hand_side, check_finite=False)

    def unpinned(self, test_features: NDArray) -> NDArray:
        """Test points with a component in a direction no data and no penalty pins, (m,).

        The fit then interpolates such a point whatever its label: every residual of the
        augmented fit is zero and every label has p-value 1.
        """
        test_features = np.asarray(test_features, dtype=float)
        if self._null_space is None:
            return np.zeros(test_features.shape[0], dtype=bool)
        unit = test_features / self._column_scale
        outside = np.linalg.norm(unit @ self._null_space, axis=1)
        scale = np.linalg.norm(unit, axis=1)
        return outside > _OUTSIDE_SPAN * np.maximum(scale, np.finfo(float).tiny)

    def test_leverage(self, test_features: NDArray) -> NDArray:
        """``h_m = phi_m^T Sigma phi_m`` of test points, (m,), without the cross leverages.

        With ``Sigma = R R^T`` (``R`` the inverse transposed Cholesky factor, or the
        pseudo-inverse's root when singular), ``h_m = ||R^T phi_m||^2``: one triangular
        solve or product, and no (m, n) array.
        """
        test_features = _finite_test_features(test_features)
        if self._root is not None:
            whitened = self._root.T @ test_features.T
        else:
            assert self._factor is not None
            whitened = linalg.solve_triangular(
                self._factor[0], test_features.T, lower=True, check_finite=False
            )
        return np.einsum("ij,ij->j", whitened, whitened)

    def test_leverages(self, test_features: NDArray) -> tuple[NDArray, NDArray]:
        """``h_m`` (m,) and ``h_im`` (m, n) of test points."""
        test_features = _finite_test_features(test_features)
        with np.errstate(over="ignore", invalid="ignore"):
            h_test = np.einsum("ij,ji->i", test_features, self.solve_normal(test_features.T))
        beyond = ~np.isfinite(h_test)
        if beyond.any():
            # rows far beyond the training scale: terms past the float range (inf - inf
            # gave NaN); again on the rows scaled by a power of two (exact), their
            # leverage then infinite (the whole line). Only there: scaling every row would
            # underflow where the inverse Gram matrix is tiny (features in huge units)
            rows = test_features[beyond]
            scale = power_of_two_scale(rows, axis=1)
            unit = rows / scale
            with np.errstate(over="ignore"):
                h_unit = np.einsum("ij,ji->i", unit, self.solve_normal(unit.T))
                h_test[beyond] = h_unit * scale[:, 0] ** 2
        return h_test, test_features @ self._gain.T


def residual_coefficients(
    residuals: NDArray,
    predictions: NDArray,
    train_leverage: NDArray,
    test_leverage: NDArray,
    cross_leverage: NDArray,
    score: Score = "standard",
    *,
    centred: bool = False,
) -> tuple[NDArray, NDArray]:
    """Coefficients ``a, b`` of ``r(y) = a + b y`` for every test point.

    With ``centred=True``, of ``r(y) = a + b (y - f_m)`` instead, ``f_m`` the test
    point's prediction: ``a`` holds the training residuals and 0 (times the score's
    scale), so it does not grow with the labels' offset (``a`` of ``r(y) = a + b y`` holds
    ``-b f_m``, and a tie margin relative to it widened the sets of labels far from 0).

    Parameters
    ----------
    residuals : ndarray of shape (n,)
        Training residuals of the fit without the test point.
    predictions : ndarray of shape (m,)
        Predictions at the test points.
    train_leverage : ndarray of shape (n,)
    test_leverage : ndarray of shape (m,)
    cross_leverage : ndarray of shape (m, n)
    score : {"standard", "studentized", "deleted"}
        Residuals as they are, divided by ``sqrt(1 - h)``, or by ``1 - h``, with ``h`` the
        leverage of each point in the fit that includes the test point.
    centred : bool, default=False
        Coefficients in ``y - f_m`` (see above).

    Returns
    -------
    a, b : ndarrays of shape (m, n + 1)
        The last column is the test point.
    """
    if score not in SCORES:
        raise ValueError(f"Unknown `conformity_score` {score!r}: use one of {list(SCORES)}.")
    denominator = 1.0 + test_leverage[:, None]
    a = np.empty((predictions.size, residuals.size + 1))
    b = np.empty_like(a)
    b[:, :-1] = -cross_leverage / denominator
    b[:, -1] = 1.0 / denominator[:, 0]
    if centred:  # r_i(f_m + t) = e_i + b_i t, r_m(f_m + t) = b_m t
        a[:, :-1] = residuals[None, :]
        a[:, -1] = 0.0
    else:
        a[:, :-1] = residuals[None, :] - b[:, :-1] * predictions[:, None]
        a[:, -1] = -predictions / denominator[:, 0]
    if score != "standard":
        augmented = np.empty_like(a)  # leverages in the fit with the test point added
        # h_i - c_i^2 / (1 + h) and h / (1 + h), written so that a test row whose leverage
        # overflows (|x| near 1e155) gives the limits, not inf / inf (an empty set)
        augmented[:, :-1] = train_leverage[None, :] + cross_leverage * b[:, :-1]
        with np.errstate(divide="ignore"):
            augmented[:, -1] = 1.0 / (1.0 + 1.0 / test_leverage)
        spread = 1.0 - augmented
        near_one = spread < _RECOMPUTE_SPREAD_BELOW
        if near_one.any():  # leverage near 1: 1 - h_i + c_i^2 / (1 + h) and 1 / (1 + h)
            direct = np.empty_like(spread)  # (the rows elsewhere keep their bits)
            direct[:, :-1] = (1.0 - train_leverage)[None, :] - cross_leverage * b[:, :-1]
            direct[:, -1] = 1.0 / (1.0 + test_leverage)
            spread = np.where(near_one, direct, spread)
        # the floor is for the training columns' rounding; the test column's 1 / (1 + h)
        # is exact, and flooring it widened the sets of test rows of leverage above 1e14
        spread[:, :-1] = np.clip(spread[:, :-1], _MIN_ONE_MINUS_LEVERAGE, 1.0)
        spread[:, -1] = np.clip(spread[:, -1], np.finfo(float).tiny, 1.0)
        scale = np.sqrt(spread) if score == "studentized" else spread
        a /= scale
        b /= scale
    return a, b


def _needed(n: int, alphas: NDArray, warn: bool = True) -> NDArray:
    """Training points that must conform for ``p(y) > alpha``: ``floor((n + 1) alpha)``."""
    needed = conformal_rank(n, alphas, kind="conformity")
    if warn and (needed == 0).any():
        _warn_too_few(n, alphas[needed == 0], "an infinite interval")
    return needed


def _events(
    a: NDArray, b: NDArray, label_size: float = 0.0
) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """Sweep events of the sets ``S_i = {y : |r_i(y)| >= |r_m(y)| - tie margin}``.

    The tie margin (`_tie_margin`) widens every ``S_i`` by a rounding-sized amount, so that
    labels where residuals tie exactly stay conforming: each end of ``S_i`` moves (so that
    ``S_i`` grows) by half the margin over the rate at which the two residuals part there
    (``|b_m - b_i|`` or ``b_m + b_i``), far more than the margin where that rate is far
    below 1.

    Returns sorted positions, kinds (0: counts from this point on; 1: stops counting just
    after it), the count after each event, and the count before the first event.
    """
    margin = _set_margin(a, label_size)
    sign = np.where(b < 0, -1.0, 1.0)
    a, b = a * sign, b * sign  # |a + b y| is unchanged; now every slope is >= 0
    a_t, b_t = a[:, -1:], b[:, -1:]
    a_i, b_i = a[:, :-1], b[:, :-1]
    equal = np.abs(b_i - b_t) <= _SLOPE_TOLERANCE * np.maximum(b_i, b_t)
    with np.errstate(divide="ignore", invalid="ignore"):
        root_1 = (a_i - a_t) / (b_t - b_i)  # r_i = r_m: |r_m| - |r_i| at rate |b_t - b_i|
        root_2 = -(a_i + a_t) / (b_t + b_i)  # r_i = -r_m: at rate b_t + b_i
        single = -(a_i + a_t) / (2.0 * b_i)
        widen_1 = margin / np.abs(b_t - b_i)
        widen_2 = margin / (b_t + b_i)
        widen_single = margin / (2.0 * b_i)
        inside = ~equal & (b_t > b_i)  # S_i = [low, high]
        outside = ~equal & (b_i > b_t)  # S_i = (-inf, low] U [high, inf)
        # widening S_i moves the ends of [low, high] outward, those of its complement
        # inward, each root by the margin over its own rate (equal slopes give infinite
        # roots and widths here, unused below)
        first_is_low = root_1 <= root_2
        direction = np.where(inside, 1.0, -1.0)
        low = np.minimum(root_1, root_2) - direction * np.where(first_is_low, widen_1, widen_2)
        high = np.maximum(root_1, root_2) + direction * np.where(first_is_low, widen_2, widen_1)
        # equal slopes: [single, inf) when a_i > a_t, (-inf, single] when a_i < a_t
        single = single - np.sign(a_i - a_t) * widen_single
    closed = outside & ~(low < high)  # the widened pieces meet: every label
    outside &= ~closed
    flat = equal & (b_t > 0)
    tied = np.abs(a_i - a_t) <= margin
    right = flat & ~tied & (a_i > a_t)  # S_i = [single, inf)
    left = flat & ~tied & (a_i < a_t)  # S_i = (-inf, single]
    everywhere = (
        (flat & tied) | (equal & (b_t == 0) & (np.abs(a_t) <= np.abs(a_i) + margin)) | closed
    )
    base = (outside | left | everywhere).sum(axis=1)

    inf = np.inf
    first_pos = np.select([inside, outside, right, left], [low, low, single, single], inf)
    first_kind = np.select([inside, outside, right, left], [0, 1, 0, 1], 1)
    first_delta = np.select([inside, outside, right, left], [1, -1, 1, -1], 0)
    second_pos = np.select([inside, outside], [high, high], inf)
    second_kind = np.select([inside, outside], [1, 0], 1)
    second_delta = np.select([inside, outside], [-1, 1], 0)

    position = np.concatenate([first_pos, second_pos], axis=1)
    kind = np.concatenate([first_kind, second_kind], axis=1)
    delta = np.concatenate([first_delta, second_delta], axis=1)
    position = np.where(np.isfinite(position), position, inf)
    delta = np.where(np.isfinite(position), delta, 0)
    order = np.lexsort((kind, position), axis=-1)
    position = np.take_along_axis(position, order, axis=1)
    kind = np.take_along_axis(kind, order, axis=1)
    count = base[:, None] + np.cumsum(np.take_along_axis(delta, order, axis=1), axis=1)
    return position, kind, count, base


def _states(position: NDArray, kind: NDArray) -> tuple[NDArray, NDArray]:
    """Which events end a real state: the value at a point, or on the gap after it."""
    finite = np.isfinite(position)
    next_position = np.concatenate([position[:, 1:], np.full((len(position), 1), np.inf)], 1)
    next_kind = np.concatenate([kind[:, 1:], np.ones((len(kind), 1), dtype=kind.dtype)], 1)
    new_position = next_position != position
    gap = finite & new_position
    point = finite & (kind == 0) & (new_position | (next_kind == 1))
    return point, gap


def exact_intervals(
    a: NDArray, b: NDArray, alphas: NDArray, warn: bool = True, label_size: float = 0.0
) -> NDArray:
    """Convex hull of the exact full-CP set for every test point and level.

    Parameters
    ----------
    a, b : ndarrays of shape (m, n + 1)
        Residual coefficients (last column: the test point).
    alphas : ndarray of shape (k,)
    label_size : float, default=0.0
        The training labels' root mean square: ties are decided within ``1e-13`` of it
        (see `_tie_margin`).

    Returns
    -------
    ndarray of shape (m, 2, k)
        ``[-inf, inf]`` where the set is unbounded; ``[nan, nan]`` where it is empty.
    """
    m, n = a.shape[0], a.shape[1] - 1
    needed = _needed(n, alphas, warn)
    position, kind, count, base = _events(a, b, label_size)
    point, gap = _states(position, kind)
    valid = point | gap
    final = count[:, -1]  # the unbounded gap to the right of every root
    next_position = np.concatenate([position[:, 1:], np.full((m, 1), np.inf)], axis=1)
    rows = np.arange(m)
    out = np.full((m, 2, alphas.size), np.nan)
    for j, need in enumerate(needed):  # a loop over levels
        ok = valid & (count >= need)
        has = ok.any(axis=1)
        first = np.argmax(ok, axis=1)
        last = ok.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1)
        lower = np.where(has, position[rows, first], np.nan)
        upper_at = np.where(gap[rows, last], next_position[rows, last], position[rows, last])
        # Only the unbounded left gap (-inf, first root] conforms: it ends at the first root.
        upper = np.where(has, upper_at, np.where(base >= need, position[:, 0], np.nan))
        out[:, 0, j] = np.where(base >= need, -np.inf, lower)
        out[:, 1, j] = np.where(final >= need, np.inf, upper)
    return out


def exact_union(
    a: NDArray, b: NDArray, alpha: float, warn: bool = True, label_size: float = 0.0
) -> list[NDArray]:
    """The exact full-CP set of each test point as a union of intervals (their closure).

    Parameters
    ----------
    a, b : ndarrays of shape (m, n + 1)
        Residual coefficients (last column: the test point).
    alpha : float
    warn : bool, default=True
        Warn when there are too few training points for ``alpha`` (once per call: pass
        False for all but the first batch of test points).
    label_size : float, default=0.0
        The training labels' root mean square: ties are decided within ``1e-13`` of it
        (see `_tie_margin`).

    Returns
    -------
    list of ndarray of shape (r_i, 2)
        Disjoint intervals in increasing order (``r_i = 0`` for an empty set).
    """
    m, n = a.shape[0], a.shape[1] - 1
    need = int(_needed(n, np.array([float(alpha)]), warn)[0])
    position, kind, count, base = _events(a, b, label_size)
    point, gap = _states(position, kind)
    next_position = np.concatenate([position[:, 1:], np.full((m, 1), np.inf)], axis=1)
    ok = count >= need
    # The pieces of each row in increasing order of their start: the left gap
    # (-inf, first root], then per event its point [y, y] and the gap [y, next y] after it.
    shape = (m, 2 * position.shape[1] + 1)
    start, end, taken = np.empty(shape), np.empty(shape), np.empty(shape, dtype=bool)
    start[:, 0], end[:, 0], taken[:, 0] = -np.inf, position[:, 0], base >= need
    start[:, 1::2], end[:, 1::2], taken[:, 1::2] = position, position, point & ok
    start[:, 2::2], end[:, 2::2], taken[:, 2::2] = position, next_position, gap & ok
    # Closures that touch or overlap merge: a piece opens a new interval when it starts
    # beyond the furthest end its row has reached so far.
    reach = np.maximum.accumulate(np.where(taken, end, -np.inf), axis=1)
    before = np.concatenate([np.full((m, 1), -np.inf), reach[:, :-1]], axis=1)
    opens = taken & (start > before)
    opens[:, 0] = taken[:, 0]  # the left gap starts at -inf
    rows, cols = np.nonzero(opens)
    # An interval ends where its row had reached just before the next one opens.
    last = np.append(rows[1:] != rows[:-1], True)
    ends = np.where(last, reach[rows, -1], before[rows, np.append(cols[1:], 0)])
    intervals = np.column_stack([start[rows, cols], ends])
    return np.split(intervals, np.cumsum(np.bincount(rows, minlength=m))[:-1]) if m else []


def fast_intervals(
    a: NDArray, b: NDArray, alphas: NDArray, warn: bool = True, label_size: float = 0.0
) -> NDArray:
    """Burnaev-Vovk intervals: two one-sided machines on signed residuals at ``alpha/2``.

    A training point whose residual grows with the label at least as fast as the test
    point's (``b_i >= b_m``: a test row of high leverage) conforms on one side of its
    crossing only; it is counted as conforming everywhere, which keeps each machine's set
    an interval and contains it (conservative).

    Returns
    -------
    ndarray of shape (m, 2, k)
    """
    m, n = a.shape[0], a.shape[1] - 1
    a_t, b_t = a[:, -1:], b[:, -1:]
    a_i, b_i = a[:, :-1], b[:, :-1]
    steeper = b_t > b_i
    with np.errstate(divide="ignore", invalid="ignore"):
        crossing = (a_i - a_t) / (b_t - b_i)
        widen = _set_margin(a, label_size) / (b_t - b_i)  # ties at a crossing stay inside
        lower_list = np.sort(np.where(steeper, crossing - widen, -np.inf), axis=1)
        upper_list = np.sort(np.where(steeper, crossing + widen, np.inf), axis=1)
    half = alphas / 2
    low_rank = conformal_rank(n, half, kind="conformity")
    high_rank = conformal_rank(n, half)
    short = (low_rank == 0) | (high_rank > n)
    if warn and short.any():
        _warn_too_few(n, alphas[short], "an infinite interval", each_side=True)
    out = np.empty((m, 2, alphas.size))
    for j in range(alphas.size):  # a loop over levels
        k_low, k_high = low_rank[j], high_rank[j]
        out[:, 0, j] = lower_list[:, k_low - 1] if k_low >= 1 else -np.inf
        out[:, 1, j] = upper_list[:, k_high - 1] if k_high <= n else np.inf
    return out


def p_values(a: NDArray, b: NDArray, candidates: NDArray, label_size: float = 0.0) -> NDArray:
    """Full-CP p-values ``p(y)`` of candidate labels ``candidates`` (m, g)."""
    n = a.shape[1] - 1
    residuals = np.abs(a[:, :, None] + b[:, :, None] * candidates[:, None, :])
    margin = _tie_margin(a, label_size)[:, :, None]  # rounding-sized differences are ties
    conforming = (residuals[:, :-1, :] >= residuals[:, -1:, :] - margin).sum(axis=1)
    return (conforming + 1) / (n + 1)
