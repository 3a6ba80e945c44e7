"""Multi-output prediction regions: the one set object of every multi-output method.

A region for row ``i`` is the set

    R_i = { y in R^d : || g_i(y) || <= radius_i }

where ``g_i`` is a bijection of ``R^d`` (the *latent map*), the norm is the Euclidean norm
(``"l2"``: ellipsoids, normalizing flows) or the max-norm (``"linf"``: boxes), and the radius
is the calibrated conformal quantile (one float, or one per row under Mondrian calibration;
``+inf`` when the calibration set was too small, i.e. the whole space).

`PredictionRegion` only asks the latent map for four vectorised operations (the
`LatentMap` protocol), so membership, sampling, boundaries, bounding boxes, plots and
volumes are written once for every method:

* membership is one pass ``y -> g_i(y)``;
* sampling, boundaries and boxes push latent points ``z`` through ``g_i^{-1}``;
* the volume is the Jacobian identity
  ``Vol R_i = Vol(B(radius_i)) * E_{z ~ U(B(radius_i))} |det d g_i^{-1} / dz|``:
  exact when the map is affine (the determinant is constant), a Monte Carlo average in log
  space with its standard error otherwise.

`AffineMap` is the latent map of the baselines: ``y = center_i + L_i z`` with a diagonal or
full ``L_i``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import gammaln, logsumexp

from uqconform._seeding import random_generator
from uqconform._validation import (
    check_int,
    first_non_number,
    frame_as_numbers,
    non_finite_rows_error,
    real_values,
    refuse_non_number_kinds,
)
from uqconform._warnings import warn_user
from uqconform.scores.regression import outward_margin

__all__ = ["AffineMap", "LatentMap", "PredictionRegion"]

Norm = Literal["l2", "linf"]
_NORMS = ("l2", "linf")

# Latent cells (rows x samples x dimension) handled at once by volume/sample/boundary, so
# memory stays bounded for many rows.
_CHUNK_CELLS = 2**21
#: Bounding boxes of non-affine maps in d >= 3: ascent from the best sampled point of each
#: extreme until every extreme has settled (an accepted move on the unit sphere shorter than
#: the tolerance, or a step length halved below the minimum reach), for at most this many
#: steps; the finite-difference step on the unit sphere (flows compute in float32).
_ASCENT_MAX_STEPS = 60
_ASCENT_TOLERANCE = 1e-5
_ASCENT_MIN_REACH = 2.0**-12
_ASCENT_STEP = 1e-3
#: Starting directions per extreme of a bounding box (d >= 3): the best sampled one and
#: the best ones far from it (one start stopped at a local maximum, up to 3.5% inside).
_ASCENT_STARTS = 8


@runtime_checkable
class LatentMap(Protocol):
    """The per-row bijections ``g_i`` of a region, vectorised over rows.

    Attributes
    ----------
    n_rows : int
        Number of rows (regions).
    dim : int
        Output dimension ``d``.
    is_affine : bool
        True when every ``g_i`` is affine, so ``log|det|`` is constant per row and volumes
        and bounding boxes are exact.

    A map may also have ``rounding`` (optional, default 0): the relative error of its
    ``to_latent`` from one batch of rows to another (a float32 network rounds differently
    for one row than for many). `PredictionRegion.contains` then accepts latent norms up to
    ``radius * (1 + rounding)``, so that a point scored at calibration as the radius is
    inside its region whatever the batch (on discrete targets many points tie there).

    A map may also have ``translation_invariant = True`` (optional) when
    ``g_i(y) = g(y - c_i)`` for one ``g``: every region is then a translate of one shape
    and a Monte Carlo volume is estimated once, on the first row, for all rows; bounding
    boxes and boundaries are computed once per distinct radius and shifted. Such a map may
    give the translations as ``offset`` (``(n, d)``, or None for none; exact shifts),
    otherwise they are taken from ``g_i^{-1}(0)``.

    Examples
    --------
    >>> import numpy as np
    >>> m = AffineMap(center=[[0.0, 0.0], [1.0, 1.0]], scale=[[1.0, 2.0]])
    >>> isinstance(m, LatentMap), m.n_rows, m.dim, m.is_affine
    (True, 2, 2, True)
    >>> m.to_latent(np.array([[1.0, 2.0], [1.0, 1.0]]))  # g_i(y) = (y - center_i) / scale
    array([[1., 1.],
           [0., 0.]])
    """

    if TYPE_CHECKING:  # read-only for type checkers: AffineMap and FlowMap use properties

        @property
        def n_rows(self) -> int: ...

        @property
        def dim(self) -> int: ...

        @property
        def is_affine(self) -> bool: ...

    else:  # at run time plain annotations, as before (a subclass may assign them)
        n_rows: int
        dim: int
        is_affine: bool

    def to_latent(self, Y: NDArray) -> NDArray:
        """``(n, d) -> (n, d)``: row ``i`` mapped by ``g_i``."""
        ...

    def from_latent(self, Z: NDArray) -> NDArray:
        """``(n, m, d) -> (n, m, d)``: the ``m`` points of row ``i`` mapped by ``g_i^{-1}``."""
        ...

    def log_abs_det_from_latent(self, Z: NDArray) -> NDArray:
        """``(n, m, d) -> (n, m)``: ``log|det d g_i^{-1}/dz|`` at each latent point."""
        ...

    def take(self, index: Any) -> LatentMap:
        """The map of a subset of rows (int, slice, integer array or boolean mask)."""
        ...


def _row_index(index: Any, n: int) -> NDArray:
    """Integer row positions (in order) for an int, slice, integer array or boolean mask."""
    if isinstance(index, (bool, np.bool_)):
        raise TypeError("A region cannot be indexed by a single boolean; use a boolean mask.")
    if isinstance(index, tuple):  # region[1, 2]: a 2-D index, not the rows [1, 2]
        raise IndexError(
            f"Regions have one axis (their rows) and take no tuple index, got {index!r}: "
            f"for several rows pass a list, e.g. region[{list(index)!r}]."
        )
    if isinstance(index, numbers.Integral):
        position = int(index)
        if not -n <= position < n:
            raise IndexError(f"Row index {position} is out of range for {n} regions.")
        return np.array([position % n])
    if isinstance(index, slice):
        return np.arange(n)[index]
    array = np.asarray(index)
    if array.dtype == bool:
        if array.shape != (n,):
            raise IndexError(
                f"A boolean mask must have shape ({n},) (one entry per region), got {array.shape}."
            )
        return np.flatnonzero(array)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise IndexError(
            "Regions are indexed by an int, a slice, a 1-D integer array or a boolean mask, "
            f"got {index!r}."
        )
    array = array.astype(np.intp)
    if array.size and (array.min() < -n or array.max() >= n):
        raise IndexError(f"Row indices out of range for {n} regions.")
    return array % n if array.size else array


def _forward_substitution(lower: NDArray, residual: NDArray) -> NDArray:
    """``lower^{-1} r`` for each row ``r`` of ``residual`` (``lower`` lower triangular: one
    ``(d, d)`` matrix, or one ``(n, d, d)`` per row), one output at a time with elementwise
    operations: the same numbers for a row alone as in any batch (a loop over the outputs,
    not the rows)."""
    latent = np.empty_like(residual)
    for j in range(lower.shape[-1]):
        total = residual[:, j].copy()
        for k in range(j):
            total -= lower[..., j, k] * latent[:, k]
        latent[:, j] = total / lower[..., j, j]
    return latent


def _is_lower_triangular(matrices: NDArray) -> bool:
    """Whether every ``(d, d)`` matrix of ``matrices`` is lower triangular (reads the strict
    upper triangles only: no copy of the matrices)."""
    above = np.triu_indices(matrices.shape[-1], 1)
    return not matrices[..., above[0], above[1]].any()


class AffineMap:
    """Affine latent map ``y = center_i + L_i z`` (so ``g_i(y) = L_i^{-1} (y - center_i)``).

    Parameters
    ----------
    center : array-like of shape (n, d)
        Centre of each region (the point prediction).
    scale : array-like of shape (n, d), (n, d, d), (1, d) or (1, d, d)
        ``L_i``: a diagonal given by its entries ``(n, d)`` (boxes, independent scales) or a
        full invertible matrix ``(n, d, d)`` such as the Cholesky factor of a covariance
        (ellipsoids). A leading axis of 1 shares one matrix between all rows.
    copy : bool, default=True
        Keep copies of ``center`` and ``scale`` (arrays the caller refills later must not
        move the map); ``False`` keeps float64 arrays as given, for arrays no one changes.

    Examples
    --------
    >>> import numpy as np
    >>> m = AffineMap(center=[[0.0, 1.0]], scale=[[2.0, 0.5]])
    >>> m.to_latent(np.array([[2.0, 1.5]]))
    array([[1., 1.]])
    >>> m.from_latent(np.array([[[1.0, 1.0]]]))
    array([[[2. , 1.5]]])
    >>> float(m.log_abs_det_from_latent(np.zeros((1, 1, 2)))[0, 0])
    0.0
    """

    is_affine = True

    def __init__(self, center: ArrayLike, scale: ArrayLike, *, copy: bool = True):
        as_array = np.array if copy else np.asarray
        center = as_array(center, dtype=float)
        scale = as_array(scale, dtype=float)
        if center.ndim != 2 or center.shape[1] < 1:
            raise ValueError(f"`center` must have shape (n, d), got {center.shape}.")
        n, d = center.shape
        if scale.ndim == 2:
            diagonal = True
        elif scale.ndim == 3:
            diagonal = False
            if scale.shape[1:] != (d, d):
                raise ValueError(
                    f"A full `scale` must have shape (n, {d}, {d}), got {scale.shape}."
                )
        else:
            raise ValueError(
                f"`scale` must have shape (n, d) (diagonal) or (n, d, d) (full), got {scale.shape}"
            )
        if scale.shape[0] not in (1, n) or scale.shape[1] != d:
            raise ValueError(
                f"`scale` of shape {scale.shape} does not match `center` of shape {center.shape}."
            )
        if not (np.isfinite(center).all() and np.isfinite(scale).all()):
            raise ValueError("`center` and `scale` must be finite.")
        if diagonal:
            with np.errstate(divide="ignore"):
                log_det = np.log(np.abs(scale)).sum(axis=1)
        else:
            _, log_det = np.linalg.slogdet(scale)
        if not np.isfinite(log_det).all():
            raise ValueError("`scale` must be invertible (a zero scale or a singular matrix).")
        self.center = center
        self.scale = scale
        self.diagonal = diagonal
        self._log_det = log_det
        # Cholesky factors (the library's full scales): solved by forward substitution
        self._lower_triangular = not diagonal and _is_lower_triangular(scale)

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return int(self.center.shape[0])

    @property
    def dim(self) -> int:
        """Output dimension ``d``."""
        return int(self.center.shape[1])

    def to_latent(self, Y: NDArray) -> NDArray:
        """``g_i(y_i) = L_i^{-1} (y_i - center_i)`` for each row.

        Parameters
        ----------
        Y : ndarray of shape (n, d)
            One point per row of the map.

        Returns
        -------
        ndarray of shape (n, d)
            The latent code of each point (with diagonal or lower-triangular scales, the
            library's own, each row solved alone, so a row's code does not depend on the
            rows beside it; other matrices are solved together).
        """
        residual = np.asarray(Y, dtype=float) - self.center
        if self.diagonal:
            return residual / self.scale
        # each row alone, under one shared matrix or a matrix per row: a single solve of
        # all rows rounds differently for one row than for a batch, and a tied calibration
        # score alone then lay outside the region it set (a row's coverage hung on its batch)
        triangular = self.__dict__.get("_lower_triangular")
        if triangular is None:  # a map pickled before it was recorded
            triangular = _is_lower_triangular(self.scale)
        if triangular:  # Cholesky factors
            lower = self.scale[0] if self.scale.shape[0] == 1 else self.scale
            return _forward_substitution(lower, residual)
        scale = np.broadcast_to(self.scale, (residual.shape[0], *self.scale.shape[1:]))
        return np.linalg.solve(scale, residual[..., None])[..., 0]

    def from_latent(self, Z: NDArray) -> NDArray:
        """``center_i + L_i z`` for the ``m`` latent points of each row.

        Parameters
        ----------
        Z : ndarray of shape (n, m, d)
            ``m`` latent points per row of the map.

        Returns
        -------
        ndarray of shape (n, m, d)
        """
        Z = np.asarray(Z, dtype=float)
        if self.diagonal:
            return self.center[:, None, :] + Z * self.scale[:, None, :]
        return self.center[:, None, :] + np.einsum("nij,nmj->nmi", self.scale, Z)

    def log_abs_det_from_latent(self, Z: NDArray) -> NDArray:
        """``log|det L_i|``, the same at every latent point of row ``i``.

        Parameters
        ----------
        Z : ndarray of shape (n, m, d)
            Latent points; only their shape is read (the map is affine).

        Returns
        -------
        ndarray of shape (n, m)
        """
        Z = np.asarray(Z)
        return np.broadcast_to(self._log_det[:, None], Z.shape[:2]).copy()

    def log_abs_det(self) -> NDArray:
        """``log|det L_i|`` per row.

        Returns
        -------
        ndarray of shape (n,)
        """
        return np.broadcast_to(self._log_det, (self.n_rows,)).copy()

    def row_extent(self, norm: Norm) -> NDArray:
        """Half-width per output of the image of the unit latent ball.

        ``max_{||z|| <= 1} (L_i z)_j``: the Euclidean norm of row ``j`` of ``L_i`` for the
        ``"l2"`` ball, its absolute sum for the ``"linf"`` ball.

        Parameters
        ----------
        norm : {"l2", "linf"}
            The latent ball's norm.

        Returns
        -------
        ndarray of shape (n, d)
        """
        matrix = np.abs(self.scale) if self.diagonal else self.scale
        if self.diagonal:
            extent = matrix
        elif norm == "l2":
            extent = np.sqrt((matrix**2).sum(axis=2))
        else:
            extent = np.abs(matrix).sum(axis=2)
        return np.broadcast_to(extent, (self.n_rows, self.dim))

    def take(self, index: Any) -> AffineMap:
        """The map of some of the rows.

        Parameters
        ----------
        index : int, slice, integer array or boolean mask
            The rows to keep, in the order given.

        Returns
        -------
        AffineMap
        """
        rows = _row_index(index, self.n_rows)
        scale = self.scale if self.scale.shape[0] == 1 else self.scale[rows]
        return AffineMap(self.center[rows], scale, copy=False)  # the map's own, unchanged

    def __repr__(self) -> str:
        kind = "diagonal" if self.diagonal else "full"
        return f"AffineMap(n_rows={self.n_rows}, dim={self.dim}, scale={kind})"


#: Latent points per row whose round trip through a map that is not affine is checked, and
#: the largest error accepted, relative to the latent norm (at least 1).
_ROUND_TRIP_POINTS = 8
_ROUND_TRIP_TOLERANCE = 0.01


def _log_ball_volume(dim: int, log_radius: NDArray, norm: Norm) -> NDArray:
    """Log-volume of the ``norm`` ball of each radius in ``R^dim``."""
    if norm == "l2":
        constant = 0.5 * dim * math.log(math.pi) - float(gammaln(0.5 * dim + 1))
    else:
        constant = dim * math.log(2.0)
    with np.errstate(divide="ignore"):
        return constant + dim * log_radius


def _unit_ball_sample(rng: np.random.Generator, shape: tuple[int, int], dim: int, norm: Norm):
    """Uniform points in the unit ball of ``norm``: ``(*shape, dim)``."""
    if norm == "linf":
        return rng.uniform(-1.0, 1.0, size=(*shape, dim))
    direction = rng.standard_normal((*shape, dim))
    length = np.linalg.norm(direction, axis=-1, keepdims=True)
    length[length == 0] = 1.0  # probability zero; avoids 0/0
    radius = rng.uniform(size=(*shape, 1)) ** (1.0 / dim)
    return direction / length * radius


#: Points added on the arc around each sampled extreme of a 2-D box (`bounding_box`).
_REFINE_POINTS = 64


def _unit_sphere_2d(n_points: int, norm: Norm) -> NDArray:
    """``n_points`` points on the unit circle (``"l2"``) or square (``"linf"``), angle order."""
    return _sphere_2d_at(np.arange(n_points), n_points, norm)


def _sphere_2d_at(step: NDArray, n_points: int, norm: Norm) -> NDArray:
    """Points of the unit circle (``"l2"``) or square (``"linf"``) at ``step`` (any shape,
    fractional allowed, read modulo ``n_points``) of ``n_points`` equal steps around it:
    ``(*step.shape, 2)``."""
    step = np.mod(step, n_points)
    if norm == "l2":
        angle = 2 * np.pi * step / n_points
        return np.stack([np.cos(angle), np.sin(angle)], axis=-1)
    # Perimeter of the square [-1, 1]^2 by arc length, counter-clockwise from the corner at
    # angle -pi/4, so the four corners are points whenever n_points is a multiple of 4.
    corners = np.array([[1.0, -1.0], [1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]])
    position = 4 * step / n_points  # in side lengths, [0, 4)
    side = np.minimum(np.floor(position).astype(int), 3)
    fraction = (position - side)[..., None]
    return corners[side] + fraction * (corners[side + 1] - corners[side])


def _unit_sphere_sample(rng: np.random.Generator, n_points: int, dim: int, norm: Norm):
    """Points on the unit sphere of ``norm`` (random directions plus the coordinate axes)."""
    axes = np.concatenate([np.eye(dim), -np.eye(dim)])
    if norm == "l2":
        direction = rng.standard_normal((n_points, dim))
        direction /= np.maximum(np.linalg.norm(direction, axis=1, keepdims=True), 1e-300)
        return np.concatenate([axes, direction])
    cube = rng.uniform(-1.0, 1.0, size=(n_points, dim))
    face = rng.integers(dim, size=n_points)
    cube[np.arange(n_points), face] = rng.choice([-1.0, 1.0], size=n_points)
    parts = [axes, cube]
    if dim <= 10:  # the 2^d corners, where a box's extremes are
        parts.append(np.array(np.meshgrid(*[[-1.0, 1.0]] * dim)).reshape(dim, -1).T)
    return np.concatenate(parts)


def _label_kind(labels: Sequence[Any]) -> str:
    """ "int" when ``labels`` are all integers (not booleans: integer labels may be
    positions), else "name" (strings, floats such as wavelengths, MultiIndex tuples, mixed
    labels: names only)."""
    if labels and all(
        isinstance(label, numbers.Integral) and not isinstance(label, bool | np.bool_)
        for label in labels
    ):
        return "int"
    return "name"


def _one_kind(labels: Sequence[Any]) -> list[Any] | None:
    """``labels`` as plain Python values (``str``, ``int``, ``float``, tuples of them), or
    None when one cannot name an output (unhashable, a missing value)."""
    plain = [label.item() if isinstance(label, np.generic) else label for label in labels]
    if any(
        label is None
        or (isinstance(label, float) and label != label)  # NaN
        or type(label).__name__ == "NAType"  # pandas' NA
        for label in plain
    ):
        return None
    try:
        set(plain)  # hashable
    except TypeError:
        return None
    if _label_kind(plain) == "int":
        return [int(label) for label in plain]
    return plain


def _label_array(labels: Sequence[Any]) -> NDArray:
    """A 1-D object array of ``labels`` (tuples kept whole, not read as rows)."""
    array = np.empty(len(labels), dtype=object)
    for index, label in enumerate(labels):  # a loop over the outputs, not rows
        array[index] = label
    return array


def _column_labels(Y: Any) -> list[Any] | None:
    """The column labels of a DataFrame ``Y`` as plain values, else None (an array)."""
    columns = getattr(Y, "columns", None)
    return None if columns is None else _one_kind(list(columns))


def output_columns(Y: Any) -> list[Any] | None:
    """The names of the outputs of a DataFrame ``Y``: its column labels, unless they are
    the positions ``0, ..., d - 1`` in order (the columns of a frame built from an array,
    which name nothing); else None."""
    labels = _column_labels(Y)
    if labels is None or labels == list(range(len(labels))):
        return None
    return labels


def record_or_check_output_columns(
    model: Any,
    Y: Any,
    attribute: str,
    *,
    learn: bool,
    name: str = "Y",
    seen: str = "those seen at fit",
) -> None:
    """At a fit (``learn``), record a DataFrame ``Y``'s output names as ``model.<attribute>``
    (none for arrays); later, refuse other names or another order (`check_output_columns`,
    naming ``model.<attribute>``)."""
    if not learn:
        known = model.__dict__.get(attribute)  # None in pickles from before it existed
        check_output_columns(Y, known, name, seen=seen, attribute=f"model.{attribute}")
        return
    columns = output_columns(Y)
    if columns is None:
        model.__dict__.pop(attribute, None)
    else:
        setattr(model, attribute, _label_array(columns))


def check_output_columns(
    Y: Any,
    output_names: Sequence[str] | Sequence[int] | NDArray | None,
    name: str = "Y",
    *,
    seen: str = "the region's outputs",
    attribute: str = "region.output_names",
) -> None:
    """Refuse a DataFrame ``Y`` whose columns are not the outputs in order (column ``j`` is
    read as output ``j``); arrays and other inputs pass. ``seen`` and ``attribute`` say
    where the names come from (a region, or a model's fit).

    Labels that are names (strings, floats, MultiIndex tuples, mixed) must equal the
    ``output_names`` of that kind. Integer labels are compared with integer
    ``output_names`` when they hold the same labels in another order; other integer labels
    are the outputs' positions, so labels that reorder ``0, ..., d - 1`` (``Y[[1, 0]]`` of
    a frame built from an array) are refused whatever the names. Other labels (names
    against integer names, integers that are no reordering) say nothing about the order:
    the columns are read by position.
    """
    labels = _column_labels(Y)
    if not labels:
        return
    known = None if output_names is None else (_one_kind(list(output_names)) or None)
    text = _label_kind(labels) == "name"
    if known is not None and (_label_kind(known) == "name") == text:  # names of this kind
        if labels == known:
            return
        if text or sorted(labels) == sorted(known):
            raise ValueError(
                f"The columns of `{name}` {labels} differ from {seen} {known}; give the "
                f"outputs in the same order, e.g. {name}[{attribute}], or pass "
                f"{name}.to_numpy() if its columns are already in that order."
            )
    positions = list(range(len(labels)))
    if not text and labels != positions and sorted(labels) == positions:
        raise ValueError(
            f"The columns of `{name}` {labels} reorder the outputs {positions} (integer "
            "column labels are read as the outputs' positions); give them in that order, "
            f"e.g. {name}[{positions}], or pass {name}.to_numpy() to read the columns as "
            "they stand."
        )


class PredictionRegion:
    """Prediction regions ``{y : ||g_i(y)|| <= radius}`` for ``n`` rows (one region per row).

    Returned by ``predict_set`` of every multi-output method of `uqconform.multioutput`;
    `uqconform.evaluation.coverage` and `uqconform.evaluation.mean_volume` accept it.

    Parameters
    ----------
    latent_map : LatentMap
        The per-row bijections ``g_i`` (e.g. `AffineMap`, or a normalizing flow).
    radius : float or array-like of shape (n,)
        The calibrated radius (``>= 0``); ``+inf`` makes the region the whole space. One
        value per row under group-conditional (Mondrian) calibration.
    norm : {"l2", "linf"}, default="l2"
        Norm of the latent ball: ``"l2"`` (ellipsoids, flows) or ``"linf"`` (boxes).
    output_names : array-like of shape (d,), optional
        The outputs' names: strings, numbers or tuples (the multi-output wrappers pass the
        column names of a DataFrame ``Y`` seen at fit): a
        DataFrame given to `contains` with column labels of the same kind must have these
        columns in this order, since column ``j`` is tested as output ``j``. Without
        integer names, integer column labels are the outputs' positions: a frame whose
        labels reorder ``0, ..., d - 1`` is refused.

    Attributes
    ----------
    radius : float or ndarray of shape (n,)
    norm : str
    dim : int
        Output dimension ``d``.
    latent_map : LatentMap
    output_names : ndarray of str or int of shape (d,) or None

    Examples
    --------
    >>> import numpy as np
    >>> boxes = PredictionRegion(AffineMap([[0.0, 0.0], [1.0, 1.0]], [[1.0, 2.0]]), 1.0, "linf")
    >>> boxes.contains(np.array([[0.5, 1.5], [0.5, 1.5]]))
    array([ True,  True])
    >>> boxes.volume()
    array([8., 8.])
    >>> bool(np.allclose(boxes.bounding_box()[1], [[0.0, 2.0], [-1.0, 3.0]]))  # + a few ulps
    True
    >>> len(boxes[1:]), boxes.boundary(n_points=8).shape
    (1, (2, 8, 2))
    """

    def __init__(
        self,
        latent_map: LatentMap,
        radius: float | ArrayLike,
        norm: Norm = "l2",
        *,
        output_names: ArrayLike | None = None,
    ):
        if norm not in _NORMS:
            raise ValueError(f"`norm` must be 'l2' or 'linf', got {norm!r}.")
        for attribute in ("to_latent", "from_latent", "log_abs_det_from_latent", "take"):
            if not callable(getattr(latent_map, attribute, None)):
                raise TypeError(
                    f"`latent_map` must implement the LatentMap protocol; "
                    f"{type(latent_map).__name__} has no {attribute}()."
                )
        values = real_values(radius)
        if values is None:  # text, booleans: not a radius
            raise ValueError(f"`radius` must be a number or an array of numbers, got {radius!r}.")
        n = int(latent_map.n_rows)
        if values.ndim > 1 or (values.ndim == 1 and values.shape[0] != n):
            raise ValueError(
                f"`radius` must be a float or have one value per row ({n}), got {values.shape}."
            )
        if np.isnan(values).any() or (values < 0).any():
            raise ValueError(f"`radius` must be >= 0 (or +inf), got {radius!r}.")
        if output_names is not None:
            given = (
                list(cast("Sequence[Any]", output_names)) if np.ndim(output_names) > 0 else None
            )
            labels = None if given is None else _one_kind(given)
            if labels is None or len(labels) != int(latent_map.dim):
                raise ValueError(
                    f"`output_names` must hold one name (a string, number or tuple) per "
                    f"output ({int(latent_map.dim)}), got {output_names!r:.80}."
                )
            output_names = _label_array(labels)
        self.latent_map = latent_map
        self.radius = float(values) if values.ndim == 0 else values
        self.norm = norm
        self.output_names = output_names

    # ---- basic protocol --------------------------------------------------------------------
    @property
    def dim(self) -> int:
        """Output dimension ``d``."""
        return int(self.latent_map.dim)

    def __len__(self) -> int:
        return int(self.latent_map.n_rows)

    def __array__(self, *args: Any, **kwargs: Any) -> NDArray:
        """Refused: a region is not an array of numbers (numpy would otherwise recurse into
        one-row regions until its 64-dimension limit)."""
        raise TypeError(
            "A PredictionRegion is not an array: use len(region) for its number of rows, "
            "region.contains(Y) to test points, region.bounding_box() for boxes, "
            "region.volume() or region.boundary() for shapes."
        )

    def __getitem__(self, index: Any) -> PredictionRegion:
        """The regions of a subset of rows (an int gives a region of one row)."""
        rows = _row_index(index, len(self))
        radius = self.radius if np.ndim(self.radius) == 0 else cast(NDArray, self.radius)[rows]
        return PredictionRegion(
            self.latent_map.take(rows), radius, self.norm, output_names=self.output_names
        )

    def __repr__(self) -> str:
        radius = self.radius if np.ndim(self.radius) == 0 else "per row"
        return (
            f"PredictionRegion(n={len(self)}, dim={self.dim}, norm={self.norm!r}, "
            f"radius={radius}, map={type(self.latent_map).__name__})"
        )

    def _radii(self) -> NDArray:
        """One radius per row, ``(n,)``."""
        return np.broadcast_to(np.asarray(self.radius, dtype=float), (len(self),))

    @property
    def is_whole_space(self) -> NDArray:
        """``(n,)`` bool: rows whose radius is infinite (the region is all of ``R^d``)."""
        return np.isinf(self._radii())

    def _latent_norm(self, Z: NDArray) -> NDArray:
        if self.norm == "l2":
            return np.linalg.norm(Z, axis=-1)
        return np.abs(Z).max(axis=-1)

    def _translates(self) -> tuple[NDArray, NDArray, NDArray] | None:
        """Rows grouped into translates of one shape, or None when nothing is saved.

        For a ``translation_invariant`` non-affine map, regions of equal radius are one
        shape shifted by the difference of their translations (see `_translations`).

        Returns
        -------
        tuple of (first, owner, shift), or None
            ``first`` ``(u,)``: one representative row per distinct radius; ``owner``
            ``(n,)``: position in ``first`` of each row's representative; ``shift``
            ``(n, d)``: translation of each row minus that of its representative. None when
            the map is affine or not translation invariant, every row has its own radius,
            or a translation is not finite.
        """
        if (
            len(self) < 2
            or getattr(self.latent_map, "is_affine", False)
            or not getattr(self.latent_map, "translation_invariant", False)
        ):
            return None
        _, first, owner = np.unique(self._radii(), return_index=True, return_inverse=True)
        if first.size == len(self):
            return None
        centres = self._translations()
        if centres.shape != (len(self), self.dim) or not np.isfinite(centres).all():
            return None
        return first, owner, centres - centres[first][owner]

    def _translations(self) -> NDArray:
        """Translation ``c_i`` of each row of a ``translation_invariant`` map, ``(n, d)``.

        The map's ``offset`` when it has one (None: no translation), else ``g_i^{-1}(0)``,
        equal to ``c_i`` up to a shift shared by all rows (and to the rounding of the map,
        which for a float32 flow depends on a point's position in its batch).
        """
        if hasattr(self.latent_map, "offset"):
            offset = self.latent_map.offset
            if offset is None:
                return np.zeros((len(self), self.dim))
            return np.asarray(offset, dtype=float)
        origin = np.zeros((len(self), 1, self.dim))
        return np.asarray(self.latent_map.from_latent(origin), dtype=float)[:, 0]

    def _chunks(self, per_row_cells: int):
        """Row slices whose latent arrays hold at most about ``_CHUNK_CELLS`` numbers."""
        n = len(self)
        step = max(1, _CHUNK_CELLS // max(1, per_row_cells))
        for start in range(0, n, step):
            yield slice(start, min(start + step, n))

    # ---- membership ------------------------------------------------------------------------
    def latent(self, Y: ArrayLike) -> NDArray:
        """Latent codes ``g_i(y_i)``: the nonconformity score is their norm.

        Parameters
        ----------
        Y : array-like or DataFrame of shape (n, d)
            One point per region, checked as in `contains`.

        Returns
        -------
        ndarray of shape (n, d)
        """
        return np.asarray(self.latent_map.to_latent(self._check_points(Y)), dtype=float)

    def _check_points(self, Y: ArrayLike) -> NDArray:
        check_output_columns(Y, getattr(self, "output_names", None))  # older pickles: none
        Y = frame_as_numbers(Y)  # nullable columns: pd.NA is a missing value
        try:
            points = np.asarray(Y)
        except ValueError:  # ragged rows
            raise ValueError(
                f"`Y` must have shape ({len(self)}, {self.dim}) (row i is tested against "
                "region i); its rows have different lengths."
            ) from None
        if points.dtype.kind == "c":
            raise ValueError("Complex data not supported: `Y` must be real.")
        refuse_non_number_kinds(points, "Y")  # text, booleans, dates: named, not cast
        try:
            points = np.array(points, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"`Y` must be numeric; {first_non_number(points)}.") from None
        if points.ndim == 1 and self.dim == 1:
            points = points[:, None]
        if points.ndim != 2 or points.shape != (len(self), self.dim):
            one_point = len(self) == 1 and points.shape == (self.dim,)
            single = " (one point: np.asarray(Y).reshape(1, -1))" if one_point else ""
            raise ValueError(
                f"`Y` must have shape ({len(self)}, {self.dim}) (row i is tested against "
                f"region i), got {points.shape}{single}."
            )
        if not np.isfinite(points).all():
            remedy = "remove those points and their regions, or impute them"
            raise non_finite_rows_error("Y", points, remedy)
        return points

    def contains(self, Y: ArrayLike) -> NDArray:
        """Whether ``Y[i]`` lies in region ``i``: ``||g_i(Y[i])|| <= radius`` (closed, up
        to rounding: a point computed on the boundary, such as those of `boundary`, can
        score a few ulps above the radius and be refused; how many are depends on the
        region and on the rounding of its map). For maps computed in float32, such as
        flows, points within their ``rounding`` of the boundary are accepted too (see
        `LatentMap`).

        Parameters
        ----------
        Y : array-like or DataFrame of shape (n, d)
            Finite real numbers: NaN, infinite or missing (``pd.NA``) points, numbers
            written as text and booleans raise a ValueError. A DataFrame's columns must be
            the outputs in order (see ``output_names``).

        Returns
        -------
        ndarray of shape (n,), bool
        """
        norms = self._latent_norm(self.latent(Y))
        rounding = float(getattr(self.latent_map, "rounding", 0.0))  # see LatentMap
        return (norms <= self._radii() * (1.0 + rounding)) | self.is_whole_space

    # ---- volume --------------------------------------------------------------------------
    def log_volume(
        self,
        n_samples: int = 2000,
        random_state: int | np.random.Generator | None = 0,
        return_std: bool = False,
    ) -> NDArray | tuple[NDArray, NDArray]:
        """Natural log of the volume of each region (``+inf`` for the whole space).

        Exact for affine maps. Otherwise the Jacobian identity
        ``Vol = Vol(B(r)) E_{z ~ U(B(r))} |det d g^{-1}/dz|`` is estimated with
        ``n_samples`` latent points per row, averaged with log-sum-exp so that large
        Jacobians do not overflow (once per distinct radius when the map is
        ``translation_invariant``: Mondrian groups of ResidualCONTRA included).

        Parameters
        ----------
        n_samples : int, default=2000
            Latent points per row (Monte Carlo only).
        random_state : int, Generator or None, default=0
            Seed of the Monte Carlo points. Fixed by default, so the same call on the same
            regions gives the same volumes (``evaluate`` reports included); ``None`` draws
            afresh. The points of a call are drawn for all its rows from one stream, so a
            row's estimate depends on the rows of the call: ``region[10:].volume()`` and
            ``region.volume()[10:]`` differ by their Monte Carlo error.
        return_std : bool, default=False
            Also return the standard error of the log-volume (delta method; 0 when exact).
            It assumes the Jacobian terms have a well-estimated variance: where they are
            heavy-tailed (3-D spline flows in three reviews) single estimates ranged from
            about half to two and a half times a hit-or-miss reference at 2,000 samples
            (0.7 to 1.7 times at 20,000) and the standard error is far too small: count
            `contains` hits in a padded `bounding_box` where such a volume matters.

        Returns
        -------
        log_volume : ndarray of shape (n,)
        std : ndarray of shape (n,)
            Only with ``return_std=True``.
        """
        n_samples = check_int(n_samples, "n_samples")
        random_generator(random_state)  # checked also where the volume is exact (affine)
        radii = self._radii()
        if (
            len(self) > 1
            and getattr(self.latent_map, "translation_invariant", False)
            and not getattr(self.latent_map, "is_affine", False)
        ):
            # regions of one radius are translates of one shape: one estimate per radius
            _, first, owner = np.unique(radii, return_index=True, return_inverse=True)
            if first.size < len(self):
                one = self[first].log_volume(n_samples, random_state, return_std=True)
                log_volume, std = (part[owner] for part in one)
                return (log_volume, std) if return_std else log_volume
        with np.errstate(divide="ignore"):
            log_ball = _log_ball_volume(self.dim, np.log(radii), self.norm)
        log_jacobian = np.zeros(len(self))
        std = np.zeros(len(self))
        finite = np.isfinite(radii) & (radii > 0)
        if getattr(self.latent_map, "is_affine", False):
            zeros = np.zeros((len(self), 1, self.dim))
            log_jacobian = np.asarray(self.latent_map.log_abs_det_from_latent(zeros))[:, 0]
        elif finite.any():
            rng = random_generator(random_state)
            rows = np.flatnonzero(finite)
            sub = self[rows] if rows.size < len(self) else self
            for block in sub._chunks(n_samples * self.dim):
                unit = _unit_ball_sample(
                    rng, (block.stop - block.start, n_samples), self.dim, self.norm
                )
                Z = unit * sub._radii()[block, None, None]
                part = sub[block]
                part._check_round_trip(Z)
                log_det = np.asarray(part.latent_map.log_abs_det_from_latent(Z))
                target = rows[block]
                log_jacobian[target] = logsumexp(log_det, axis=1) - math.log(n_samples)
                # delta method: sd(log mean J) = sd(J) / (mean(J) sqrt(m)), in scaled units
                weights = np.exp(log_det - log_det.max(axis=1, keepdims=True))
                mean = weights.mean(axis=1)
                spread = (
                    weights.std(axis=1, ddof=1) if n_samples > 1 else np.full_like(mean, np.inf)
                )
                std[target] = spread / (mean * math.sqrt(n_samples))
        log_volume = np.where(np.isinf(radii), np.inf, log_ball + log_jacobian)
        log_volume = np.where(radii == 0, -np.inf, log_volume)
        return (log_volume, std) if return_std else log_volume

    def volume(
        self,
        n_samples: int = 2000,
        random_state: int | np.random.Generator | None = 0,
        return_std: bool = False,
    ) -> NDArray | tuple[NDArray, NDArray]:
        """Volume (area for ``d = 2``) of each region; ``+inf`` for the whole space.

        Exact for affine maps (boxes, ellipsoids); a Monte Carlo estimate otherwise (see
        `log_volume`). A bounded region whose volume exceeds float64 (about 1.8e308: many
        outputs or large scales) gives ``inf`` with a warning; `log_volume` holds it.

        Parameters
        ----------
        n_samples : int, default=2000
            Latent points per row (Monte Carlo only).
        random_state : int, Generator or None, default=0
            Seed of the Monte Carlo points. Fixed by default, so the same call on the same
            regions gives the same volumes (``evaluate`` reports included); ``None`` draws
            afresh. The points of a call are drawn for all its rows from one stream, so a
            row's estimate depends on the rows of the call: ``region[10:].volume()`` and
            ``region.volume()[10:]`` differ by their Monte Carlo error.
        return_std : bool, default=False
            Also return the standard error of each volume (``volume * std(log_volume)``,
            the delta method; 0 when exact).

        Returns
        -------
        volume : ndarray of shape (n,)
        std : ndarray of shape (n,)
            Only with ``return_std=True``.
        """
        log_volume, log_std = self.log_volume(n_samples, random_state, return_std=True)
        with np.errstate(over="ignore"):
            volume = np.exp(log_volume)
        overflow = int((np.isinf(volume) & np.isfinite(log_volume)).sum())
        if overflow:
            warn_user(
                f"The volume of {overflow} of the {len(self)} regions overflows float64 "
                "(it is returned as inf, though the region is bounded): use log_volume(), "
                "the natural log of the volume, to compare or average such volumes.",
                UserWarning,
            )
        if not return_std:
            return volume
        with np.errstate(invalid="ignore"):
            std = np.where(np.isinf(volume), 0.0, volume * log_std)
        return volume, std

    # ---- pushing latent points forward ------------------------------------------------------
    def _push(
        self, Z: NDArray, check_round_trip: bool = True, report_overflow: bool = True
    ) -> NDArray:
        """Latent points ``(n, m, d)`` mapped to outputs, checked for overflow (non-finite
        outputs become NaN, reported unless ``report_overflow=False``) and, for maps that
        are not affine, for an inverse that does not map back."""
        Y = np.asarray(self.latent_map.from_latent(Z), dtype=float)
        bad = ~np.isfinite(Y)
        if bad.any():
            if report_overflow:
                warn_user(
                    f"{int(bad.any(axis=(1, 2)).sum())} regions map some latent points to "
                    "non-finite outputs (the map overflows there); those coordinates are NaN.",
                    RuntimeWarning,
                )
            Y[bad] = np.nan
        if check_round_trip:
            self._check_round_trip(Z, Y)
        return Y

    def _check_round_trip(self, Z: NDArray, Y: NDArray | None = None) -> None:
        """Warn when ``g_i(g_i^{-1}(z))`` misses ``z`` for a few of each row's latent points.

        A learned map can be so ill-conditioned far from its training data that its
        inverse, in float32, lands far from the point whose latent code is ``z``: samples,
        boundaries, boxes and volumes built on the inverse are then wrong for that row,
        while ``contains`` (the forward map, as in calibration) stays right.
        """
        if getattr(self.latent_map, "is_affine", False) or Z.shape[1] == 0:
            return
        n, m, d = Z.shape
        picked = np.unique(np.linspace(0, m - 1, min(m, _ROUND_TRIP_POINTS)).astype(int))
        latent = Z[:, picked].reshape(-1, d)
        images = self.latent_map.from_latent(Z[:, picked]) if Y is None else Y[:, picked]
        images = np.asarray(images, dtype=float).reshape(-1, d)
        rows = np.repeat(np.arange(n), picked.size)
        finite = np.isfinite(images).all(axis=1)  # overflowed images are reported already
        if not finite.any():
            return
        with np.errstate(invalid="ignore", over="ignore"):
            try:
                back = self.latent_map.take(rows[finite]).to_latent(images[finite])
            except NotImplementedError:  # a map made for drawing only: nothing to check
                return
            error = np.linalg.norm(np.asarray(back, dtype=float) - latent[finite], axis=1)
            scale = np.maximum(1.0, np.linalg.norm(latent[finite], axis=1))
        missed = np.zeros(n, dtype=bool)
        missed[rows[finite][~(error <= _ROUND_TRIP_TOLERANCE * scale)]] = True
        if missed.any():
            warn_user(
                f"{int(missed.sum())} of {n} regions: the map's inverse does not map back "
                f"(a round trip off by more than {_ROUND_TRIP_TOLERANCE:.0%} of the latent "
                "norm): a learned flow can be this ill-conditioned far from its training "
                "data. Their samples, boundaries, bounding boxes and volumes are unreliable; "
                "contains() and coverage are not affected. A spline flow (flow='spline') "
                "is the identity beyond its tail bound.",
                RuntimeWarning,
            )

    def sample(
        self, n_samples: int, random_state: int | np.random.Generator | None = None
    ) -> NDArray:
        """Points of each region: uniform in the latent ball, pushed through ``g_i^{-1}``.

        The points lie in the region but are uniform only when the map is affine.

        Parameters
        ----------
        n_samples : int
            Points per row.
        random_state : int, Generator or None, default=None
            Seed of the points: None draws afresh at every call (unlike `volume`, whose
            default seed 0 gives the same estimate every time); an int gives the same
            points.

        Returns
        -------
        ndarray of shape (n, n_samples, d)
        """
        n_samples = check_int(n_samples, "n_samples")
        if self.is_whole_space.any():
            raise ValueError(
                f"{int(self.is_whole_space.sum())} regions are the whole space (infinite "
                "radius: too few calibration points); there is no uniform sample of them."
            )
        rng = random_generator(random_state)
        out = np.empty((len(self), n_samples, self.dim))
        radii = self._radii()
        for block in self._chunks(n_samples * self.dim):
            unit = _unit_ball_sample(
                rng, (block.stop - block.start, n_samples), self.dim, self.norm
            )
            out[block] = self[block]._push(unit * radii[block, None, None])
        return out

    def _check_plane(self, method: str) -> None:
        """Refuse regions of ``d != 2``, naming the ``method`` called (boundary, plot)."""
        if self.dim != 2:
            raise ValueError(
                f"{method}() draws 2-D regions only; these have d={self.dim}. Use sample() or "
                "bounding_box() for other dimensions."
            )

    def boundary(self, n_points: int = 200) -> NDArray:
        """Closed boundary curve of each region (``d = 2`` only), in latent angle order.

        The latent circle (square for ``"linf"``) of the radius pushed through
        ``g_i^{-1}``; consecutive points are neighbours on the curve (never a convex hull).
        The points are on the boundary up to rounding, so `contains` may refuse some of
        them (it compares with the radius exactly, for affine maps).
        Rows whose region is the whole plane have no boundary: NaN. Computed once per
        distinct radius and shifted when the map is ``translation_invariant``.

        Parameters
        ----------
        n_points : int, default=200
            Points per curve (a multiple of 4 puts the corners of a box on it).

        Returns
        -------
        ndarray of shape (n, n_points, 2)
        """
        n_points = check_int(n_points, "n_points")
        self._check_plane("boundary")
        translates = self._translates()
        if translates is not None:  # one curve per distinct radius, shifted to each row
            first, owner, shift = translates
            return self[first].boundary(n_points)[owner] + shift[:, None, :]
        unit = _unit_sphere_2d(n_points, self.norm)
        return self._image_of_sphere(unit)

    def _image_of_sphere(self, unit: NDArray) -> NDArray:
        """``unit`` points ``(m, d)`` of the unit sphere scaled by each radius and pushed
        (NaN for rows of the whole space)."""
        out = np.full((len(self), unit.shape[0], self.dim), np.nan)
        for rows, _, pushed in self._sphere_blocks(unit):
            out[rows] = pushed
        return out

    def _sphere_blocks(self, unit: NDArray, extra_cells: int = 0):
        """Per block of the rows of finite radius: their positions, their regions and the
        images of ``unit`` scaled by their radii (bounded memory: ``extra_cells`` per row is
        what the caller adds to a block's latent arrays)."""
        finite = np.flatnonzero(np.isfinite(self._radii()))
        sub = self[finite] if finite.size < len(self) else self
        for block in sub._chunks(unit.size + extra_cells):
            part = sub[block]
            yield finite[block], part, part._push(unit[None, :, :] * part._radii()[:, None, None])

    def bounding_box(self, n_points: int = 1024) -> NDArray:
        """Smallest axis-aligned box around each region: ``(n, d, 2)`` lower/upper bounds.

        Exact for affine maps. Otherwise the extremes of the image of ``n_points`` points
        of the latent sphere (the boundary of the region), in angle order for ``d = 2``
        (each extreme then refined by 64 more points on the arc between its neighbouring
        samples) and seeded random directions plus the coordinate axes above; for ``d >= 3`` and
        the Euclidean norm (``"l2"``: every region the library builds over a flow) each
        extreme is then pushed outward along a finite-difference linearisation of the map
        from eight sampled directions far apart until it settles (exact for a map that is
        affine, whatever its type). A local search: where the boundary has several bumps
        along a coordinate and no start lies near the highest, the box can still be inside
        the region (up to 3.5% of the width on a 3-D spline flow, 0.9% on a MAF flow, in a
        review of four fits; more sampled directions help: ``n_points=200000`` left under
        0.02%, at about 15 times the time). A max-norm region over a non-affine map keeps
        its sampled extremes (0.1% of the width inside on a constructed map). A map with a
        ``rounding`` (flows) gets the box of the radius times ``1 + rounding``, as
        `contains` accepts: a point it accepts is not just outside the box. Infinite
        bounds for the whole space. Computed once per distinct radius and shifted when the
        map is ``translation_invariant``.

        Parameters
        ----------
        n_points : int, default=1024
            Latent sphere points (non-affine maps only), at least 4.

        Returns
        -------
        ndarray of shape (n, d, 2)
        """
        n_points = check_int(n_points, "n_points", low=4)  # fewer: a box of no width
        radii = self._radii()
        rounding = float(getattr(self.latent_map, "rounding", 0.0))  # see LatentMap
        if rounding > 0.0 and not isinstance(self.latent_map, AffineMap):
            # the box of every point contains() accepts (affine boxes round outward below)
            widened = PredictionRegion(
                self.latent_map,
                radii * (1.0 + rounding),
                self.norm,
                output_names=self.output_names,
            )
            return widened._sampled_box(n_points)
        if isinstance(self.latent_map, AffineMap):
            with np.errstate(invalid="ignore"):
                half = self.latent_map.row_extent(self.norm) * radii[:, None]
            half = np.where(np.isinf(radii)[:, None], np.inf, half)
            center = self.latent_map.center
            # rounded outward by a few ulps: contains() tests (y - c) / s <= r, and a point
            # it accepts must not fall just outside c + s r
            margin = outward_margin(center, half)
            return np.stack([center - half - margin, center + half + margin], axis=2)
        return self._sampled_box(n_points)

    def _sampled_box(self, n_points: int) -> NDArray:
        """`bounding_box` of a non-affine map at the regions' own radii."""
        translates = self._translates()
        if translates is not None:  # one box per distinct radius, shifted to each row
            first, owner, shift = translates
            return self[first]._sampled_box(n_points)[owner] + shift[:, :, None]
        d = self.dim
        if d == 2:
            unit = _unit_sphere_2d(n_points, self.norm)
        elif d == 1:
            unit = np.array([[-1.0], [1.0]])
        else:
            unit = _unit_sphere_sample(np.random.default_rng(0), n_points, d, self.norm)
        ascend = d >= 3 and self.norm == "l2"  # random directions miss the extremes there
        box = np.empty((len(self), d, 2))
        box[:, :, 0], box[:, :, 1] = -np.inf, np.inf  # rows of the whole space
        ascent_cells = 2 * d * _ASCENT_STARTS * (d + 2) * d if ascend else 0
        for rows, part, points in self._sphere_blocks(unit, ascent_cells):
            if ascend:  # starts from the sampled extremes and keeps them when not beaten
                box[rows] = part._ascend_extremes(unit, points)
                continue
            # fmin / fmax pass over NaN and leave all-NaN rows NaN, without a warning
            box[rows] = np.stack([np.fmin.reduce(points, 1), np.fmax.reduce(points, 1)], 2)
            if d == 2:
                box[rows] = part._refine_extremes_2d(points, box[rows])
        return box

    def _refine_extremes_2d(self, points: NDArray, box: NDArray) -> NDArray:
        """``box`` (``(n, 2, 2)``, of the sampled boundary ``points``, ``(n, m, 2)`` in
        angle order) widened where the boundary between each extreme's two neighbouring
        samples reaches further: 64 more points on that arc per extreme (a review found
        2-D flow boxes up to 0.13% of the width inside the region at 1,024 samples)."""
        n, m = points.shape[:2]
        coordinate, sign = np.array([0, 1, 0, 1]), np.array([-1.0, -1.0, 1.0, 1.0])
        values = np.nan_to_num(points[:, :, coordinate] * sign, nan=-np.inf)  # (n, m, 4)
        best = values.argmax(axis=1)  # (n, 4): the sampled extremes
        offsets = np.linspace(-1.0, 1.0, _REFINE_POINTS + 2)[1:-1]  # inside the arc
        steps = best[:, :, None] + offsets  # (n, 4, k)
        latent = _sphere_2d_at(steps, m, self.norm) * self._radii()[:, None, None, None]
        with np.errstate(over="ignore", invalid="ignore"):  # sampled points reported it
            images = self._push(latent.reshape(n, -1, 2), False, report_overflow=False)
        images = images.reshape(n, 4, -1, 2)
        picked = np.take_along_axis(images, coordinate[None, :, None, None], axis=3)[..., 0]
        reach = np.fmax.reduce(picked * sign[None, :, None], axis=2) * sign  # (n, 4)
        refined = box.copy()
        refined[:, :, 0] = np.fmin(box[:, :, 0], reach[:, :2])
        refined[:, :, 1] = np.fmax(box[:, :, 1], reach[:, 2:])
        return refined

    def _ascend_extremes(self, unit: NDArray, points: NDArray) -> NDArray:
        """The box of the sampled sphere points ``points`` (``(n, m, d)``, images of
        ``unit``), each of its ``2d`` extremes then pushed outward step by step until it
        settles: the sphere point where a linearisation of the map is largest along that
        coordinate (tangent part by finite differences, radial part from the rise over the
        image of the centre; exact in one step for a map affine on the sphere), kept when
        larger, a shorter move after a rejected one."""
        n, d, starts = points.shape[0], self.dim, _ASCENT_STARTS
        extreme_coordinate = np.arange(2 * d) % d
        extreme_sign = np.repeat([-1.0, 1.0], d)  # the d lower extremes, then the d upper
        radius = self._radii()[:, None, None]
        values = np.nan_to_num(points[:, :, extreme_coordinate] * extreme_sign, nan=-np.inf)
        # several starts per extreme, so that one local maximum does not end the search:
        # the best sampled direction, then the best more than 60 degrees from every start
        # taken (a loop over the few starts; once every sample is excluded the start is
        # the first sample, a search that can only add a larger value)
        chosen = np.empty((n, 2 * d, starts), dtype=np.intp)
        remaining = values  # (n, m, 2d)
        for k in range(starts):
            chosen[..., k] = remaining.argmax(axis=1)
            near = np.einsum("md,ned->nme", unit, unit[chosen[..., k]]) > 0.5
            remaining = np.where(near, -np.inf, remaining)
        best = np.take_along_axis(values.transpose(0, 2, 1), chosen, axis=2)
        best = best.reshape(n, -1)  # (n, 2d * starts), as the directions
        direction = unit[chosen.reshape(n, -1)]  # (n, 2d * starts, d)
        coordinate = np.repeat(extreme_coordinate, starts)  # those of every start
        sign = np.repeat(extreme_sign, starts)

        def objective(latent: NDArray) -> NDArray:  # (n, e, k, d) -> (n, e, k), e extremes
            # the sampled points reported overflow already
            with np.errstate(over="ignore", invalid="ignore"):
                images = self._push(latent.reshape(n, -1, d), False, report_overflow=False)
            images = images.reshape(latent.shape)
            picked = np.take_along_axis(images, coordinate[None, :, None, None], axis=3)[..., 0]
            return np.nan_to_num(picked * sign[None, :, None], nan=-np.inf)

        # The image of the latent centre: the radial part of the linearisation is the
        # value's rise from it (a map affine on the sphere then needs one step; the radial
        # finite difference would add how the map grows off the sphere).
        centre = objective(np.zeros((n, coordinate.size, 1, d)))
        # halved after a rejected step: a shorter move next
        reach = np.ones((n, coordinate.size, 1))
        for _ in range(_ASCENT_MAX_STEPS):
            probes = direction[:, :, None, :] + _ASCENT_STEP * np.eye(d)  # (n, e, d, d)
            stacked = (
                np.concatenate([direction[:, :, None, :], probes], axis=2) * radius[..., None]
            )
            f = objective(stacked)
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                gradient = (f[..., 1:] - f[..., :1]) / _ASCENT_STEP
                radial = (gradient * direction).sum(axis=2, keepdims=True)
                rise = f[..., :1] - centre
                gradient = gradient + (rise - radial) * direction  # tangent part + rise
                target = gradient / np.linalg.norm(gradient, axis=2, keepdims=True)
                candidate = direction + reach * (target - direction)
                candidate = candidate / np.linalg.norm(candidate, axis=2, keepdims=True)
            usable = np.isfinite(candidate).all(axis=2, keepdims=True)
            candidate = np.where(usable, candidate, direction)
            value = objective(candidate[:, :, None, :] * radius[..., None])[..., 0]
            better = value > best
            moved = np.linalg.norm(candidate - direction, axis=2)
            direction = np.where(better[..., None], candidate, direction)
            best = np.where(better, value, best)
            # a longer move after an accepted one, a shorter one after a rejected one
            reach = np.where(better[..., None], np.minimum(2 * reach, 1.0), reach / 2)
            settled = (
                (better & (moved < _ASCENT_TOLERANCE))
                | (reach[..., 0] < _ASCENT_MIN_REACH)
                | ~np.isfinite(best)
            )
            if settled.all():
                break
        with np.errstate(invalid="ignore"):
            best = best.reshape(n, 2 * d, starts).max(axis=2)
            bounds = np.where(np.isfinite(best), best * extreme_sign, np.nan)  # (n, 2d)
        return np.stack([bounds[:, :d], bounds[:, d:]], axis=2)

    # ---- plotting ---------------------------------------------------------------------------
    def plot(
        self,
        index: int = 0,
        ax: Any = None,
        n_points: int = 400,
        fill: bool = True,
        **kwargs: Any,
    ) -> Any:
        """Draw region ``index`` (``d = 2``) as a closed curve, filled by default.

        Needs matplotlib (``pip install "uqconform[plot]"``).

        Parameters
        ----------
        index : int, default=0
            Row whose region is drawn.
        ax : matplotlib Axes, optional
            Where to draw; a new figure by default.
        n_points : int, default=400
            Points of the boundary curve.
        fill : bool, default=True
            Fill the region (``Axes.fill``) rather than drawing its outline only.
        **kwargs
            Passed to ``Axes.fill`` or ``Axes.plot`` (``color``, ``alpha``, ``label``...).

        Returns
        -------
        matplotlib Axes
        """
        from uqconform.evaluation.plotting import _axes

        if isinstance(index, (bool, np.bool_)) or not isinstance(index, numbers.Integral):
            raise TypeError(f"`index` must be an int (one region), got {index!r}.")
        self._check_plane("plot")
        region = self[int(index)]
        curve = region.boundary(n_points)[0]
        ax = _axes(ax)
        if np.isnan(curve).all():  # the whole plane
            ax.text(
                0.5,
                0.5,
                "whole plane (infinite radius)",
                transform=ax.transAxes,
                ha="center",
                va="center",
            )
            return ax
        closed = np.vstack([curve, curve[:1]])
        if fill:
            kwargs.setdefault("alpha", 0.35)
            ax.fill(closed[:, 0], closed[:, 1], **kwargs)
        else:
            ax.plot(closed[:, 0], closed[:, 1], **kwargs)
        return ax
