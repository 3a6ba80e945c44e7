"""A layer-list view of a feed-forward network and one-pass Gaussian moment propagation.

A `Network` is a list of small layers (`Dense`, `Activation`, `Affine`, `LayerNorm`) and an
output link. Each layer has ``forward`` (the deterministic pass at given weights) and
``moments`` (the Gaussian moments of its output from those of its input): the single-pass
(streamlined) predictive of Li et al. (ICLR 2025) in numpy,

* `Dense` with random weights: the exact mean and covariance of ``h = a W + b`` for a random
  input ``a`` independent of the weights, under a Gaussian weight posterior block that is
  diagonal (`DiagonalBlock`), Kronecker-factored (`KroneckerBlock`) or a full covariance
  over the layer (`FullBlock`);
* `Activation`: local linearisation ``g(mu)``, ``g'(mu)^2 var`` (the default), exact
  rectified-Gaussian moments for ReLU, or probit-style moments for tanh and the logistic;
* `Affine` (batch normalisation in evaluation mode) scales the variances; `LayerNorm` is
  linearised at the mean input (or, as in the paper, uses the statistics of the mean input).

Weights are stored scikit-learn style, ``(n_in, n_out)``: ``h = a @ W + b``. The parameter
vector of a network is, layer by layer, ``W.ravel()`` (C order) then ``b``: the order of
`uqconform.linearize.linearize` for an ``MLPRegressor``, the same as the augmented matrix
``[W; b]`` of shape ``(n_in + 1, n_out)`` flattened row by row. A torch converter only
has to transpose ``nn.Linear.weight`` (``(out, in)``) and map its modules to these layers.

Covariances are either per-unit variances ``(n, d)`` (``covariance="diag"``) or full
per-row covariance matrices ``(n, d, d)`` (``covariance="full"``).
"""

from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit, ndtr, owens_t
from scipy.stats import norm

from uqconform._validation import refuse_non_finite

__all__ = [
    "ACTIVATIONS",
    "Activation",
    "Affine",
    "Dense",
    "DiagonalBlock",
    "FullBlock",
    "KroneckerBlock",
    "LayerNorm",
    "Network",
]

#: Hidden activations with moments: scikit-learn's four and GELU (torch networks).
ACTIVATIONS = ("identity", "relu", "tanh", "logistic", "gelu")
#: Activation moment modes: local linearisation, exact ReLU moments (linearisation elsewhere),
#: or moment matching everywhere it is available (exact ReLU, probit-style tanh / logistic).
MOMENT_MODES = ("linearize", "exact_relu", "matched")


def check_moment_mode(activation_moments: Any) -> None:
    """ValueError naming ``activation_moments`` unless it is one of `MOMENT_MODES` (a
    misspelt mode would otherwise read as ``"linearize"``)."""
    if activation_moments not in MOMENT_MODES:
        raise ValueError(
            f"`activation_moments` must be one of {list(MOMENT_MODES)}, got "
            f"{activation_moments!r}."
        )


#: What `Network.moments` propagates: per-unit variances, or full covariances between units.
COVARIANCES = ("diag", "full")
#: Relative tolerance of the symmetry and positive semi-definiteness checks of the covariance
#: factors of `KroneckerBlock` and `FullBlock`: the blocks the library builds from
#: eigendecompositions are symmetric and PSD only up to rounding (near 1e-16 relatively).
_PSD_TOLERANCE = 1e-8

_PROBIT = np.sqrt(np.pi / 8.0)  # logistic(x) ~ Phi(_PROBIT x), slopes equal at 0
# Array cells (rows x the largest per-row intermediate) of one block of rows: bounds the memory
# of `Network.moments` and of the Monte Carlo predictive.
_BLOCK_CELLS = 2**22
# `relu_moments`: below z = -_RELU_TAIL its mean and variance come from a continued fraction of
# _RELU_TERMS terms (the direct formulas cancel there)
_RELU_TAIL = 3.0
_RELU_TERMS = 40


def _diag(cov: NDArray) -> NDArray:
    """Variances from ``(n, d)`` variances or ``(n, d, d)`` covariances."""
    return cov if cov.ndim == 2 else np.diagonal(cov, axis1=1, axis2=2)


def _row_blocks(n_rows: int, cells_per_row: int) -> list[slice]:
    """Consecutive row slices of at most ``_BLOCK_CELLS // cells_per_row`` rows (at least one).

    Blocks of 16 rows or more hold a multiple of 16 rows: every row then keeps its offset
    modulo 16, so single-threaded BLAS kernels (unrolled over rows) round it as they would in
    one call over all the rows.

    Examples
    --------
    >>> _row_blocks(5, _BLOCK_CELLS // 2)
    [slice(0, 2, None), slice(2, 4, None), slice(4, 6, None)]
    >>> _row_blocks(40, _BLOCK_CELLS // 20)  # 20 rows fit: blocks of 16
    [slice(0, 16, None), slice(16, 32, None), slice(32, 48, None)]
    """
    step = max(1, _BLOCK_CELLS // max(1, cells_per_row))
    if step >= 16:
        step -= step % 16
    return [slice(start, start + step) for start in range(0, max(n_rows, 1), step)]


def _finite_array(value: Any, name: str, ndim: int) -> NDArray:
    """``value`` as a finite float array with ``ndim`` axes, or a ValueError naming it."""
    try:
        array = np.array(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"`{name}` must be an array of numbers: {error}") from None
    if array.ndim != ndim:
        raise ValueError(f"`{name}` must have {ndim} axes, got shape {array.shape}.")
    if not np.isfinite(array).all():
        raise ValueError(f"`{name}` contains NaN or infinite values.")
    return array


def _check_variances(values: NDArray, name: str) -> None:
    """Variances (or a covariance's diagonal) must be >= 0."""
    if (values < 0).any():
        raise ValueError(
            f"`{name}` holds negative variances (e.g. {float(values[values < 0][0])}); a "
            "posterior block holds variances or a covariance."
        )


def _check_covariance_matrix(matrix: NDArray, name: str, read_as: str = "") -> None:
    """A square ``matrix`` (diagonal already checked >= 0) must be symmetric and positive
    semi-definite up to rounding, or a ValueError naming it (``read_as``: how the argument
    was reshaped into ``matrix``).

    Symmetric: no entry differs from its transpose by more than ``_PSD_TOLERANCE`` times the
    largest absolute entry. Positive semi-definite: the smallest eigenvalue is at least
    ``-_PSD_TOLERANCE`` times the largest. An indefinite factor gives negative predictive
    variances.

    Examples
    --------
    >>> import numpy as np
    >>> _check_covariance_matrix(np.array([[1.0, 1.0], [1.0, 1.0]]), "A")  # singular: PSD
    >>> _check_covariance_matrix(np.array([[1.0, 5.0], [5.0, 1.0]]), "A")
    Traceback (most recent call last):
    ...
    ValueError: `A` must be a symmetric positive semi-definite matrix: its smallest
    eigenvalue is -4.0 (its largest 6.0).
    """
    if matrix.size == 0:
        return
    asymmetry = np.abs(matrix - matrix.T)
    if asymmetry.max() > _PSD_TOLERANCE * np.abs(matrix).max():
        i, j = np.unravel_index(int(np.argmax(asymmetry)), asymmetry.shape)
        raise ValueError(
            f"`{name}`{read_as} must be a symmetric positive semi-definite matrix: entries "
            f"[{i}, {j}] and [{j}, {i}] differ ({float(matrix[i, j])!r} and "
            f"{float(matrix[j, i])!r})."
        )
    # The cheap test first: a Cholesky factor of matrix + t I exists only when the smallest
    # eigenvalue is above -t, and t = tolerance * (largest diagonal entry) is at most
    # tolerance * (largest eigenvalue). It fails on singular matrices (and on rounding near
    # the bound): the eigenvalues then decide.
    shift = _PSD_TOLERANCE * float(np.diagonal(matrix).max())
    try:
        np.linalg.cholesky(matrix + shift * np.eye(matrix.shape[0]))
        return
    except np.linalg.LinAlgError:
        pass
    eigenvalues = np.linalg.eigvalsh(matrix)
    smallest, largest = float(eigenvalues[0]), float(eigenvalues[-1])
    if smallest < -_PSD_TOLERANCE * max(largest, 0.0):
        raise ValueError(
            f"`{name}`{read_as} must be a symmetric positive semi-definite matrix: its "
            f"smallest eigenvalue is {float(f'{smallest:.6g}')!r} (its largest "
            f"{float(f'{largest:.6g}')!r})."
        )


# ---- posterior blocks of one dense layer ------------------------------------------------------
@dataclass(frozen=True)
class DiagonalBlock:
    """Independent weights: ``Var W[i, o] = weight_var[i, o]``, ``Var b[o] = bias_var[o]``.

    Examples
    --------
    >>> import numpy as np
    >>> block = DiagonalBlock(weight_var=np.full((2, 1), 0.1), bias_var=np.array([0.05]))
    >>> layer = Dense(np.ones((2, 1)), [0.0])  # h = a0 + a1, weights random under `block`
    >>> layer.moments(np.array([[1.0, 2.0]]), np.zeros((1, 2)), block)  # 0.1 (1 + 4) + 0.05
    (array([[3.]]), array([[0.55]]))
    """

    weight_var: NDArray
    bias_var: NDArray

    def __post_init__(self) -> None:
        weight_var = _finite_array(self.weight_var, "weight_var", 2)
        bias_var = _finite_array(self.bias_var, "bias_var", 1)
        if bias_var.shape != (weight_var.shape[1],):
            raise ValueError(
                f"`bias_var` must have one variance per output ({weight_var.shape[1]}), got "
                f"shape {bias_var.shape}."
            )
        _check_variances(weight_var, "weight_var")
        _check_variances(bias_var, "bias_var")
        object.__setattr__(self, "weight_var", weight_var)
        object.__setattr__(self, "bias_var", bias_var)

    def shape_for(self, n_in: int, n_out: int) -> bool:
        """Whether the block fits a Dense layer of ``n_in`` inputs and ``n_out`` outputs."""
        return self.weight_var.shape == (n_in, n_out)

    def extra(self, mean: NDArray, cov: NDArray) -> NDArray:
        """``E[a~' Sigma_oo' a~]`` (only the diagonal ``o = o'`` is non-zero): ``(n, out)``."""
        second = mean**2 + _diag(cov)
        return second @ self.weight_var + self.bias_var

    def extra_full(self, mean: NDArray, cov: NDArray) -> NDArray:
        return np.einsum("no,op->nop", self.extra(mean, cov), np.eye(self.bias_var.size))


@dataclass(frozen=True)
class KroneckerBlock:
    """``Cov(W~[i, o], W~[j, p]) = input_cov[i, j] * output_cov[o, p]``.

    ``W~ = [W; b]`` is the ``(n_in + 1, n_out)`` augmented weight matrix (bias last row).
    Both factors must be symmetric positive semi-definite (up to rounding: a relative
    ``1e-8``); an indefinite one would give negative variances.

    Examples
    --------
    >>> import numpy as np
    >>> block = KroneckerBlock(input_cov=0.1 * np.eye(3), output_cov=np.eye(1))
    >>> layer = Dense(np.ones((2, 1)), [0.0])  # identity factors: independent, variance 0.1
    >>> layer.moments(np.array([[1.0, 2.0]]), np.zeros((1, 2)), block)  # 0.1 (1 + 4 + 1)
    (array([[3.]]), array([[0.6]]))
    """

    input_cov: NDArray
    output_cov: NDArray

    def __post_init__(self) -> None:
        for name in ("input_cov", "output_cov"):
            matrix = _finite_array(getattr(self, name), name, 2)
            if matrix.shape[0] != matrix.shape[1]:
                raise ValueError(f"`{name}` must be square, got shape {matrix.shape}.")
            _check_variances(np.diagonal(matrix), name)
            _check_covariance_matrix(matrix, name)
            object.__setattr__(self, name, matrix)

    def shape_for(self, n_in: int, n_out: int) -> bool:
        return self.input_cov.shape[0] == n_in + 1 and self.output_cov.shape[0] == n_out

    def _quadratic(self, mean: NDArray, cov: NDArray) -> NDArray:
        """``E[a~' A a~]`` per row with ``a~ = [a, 1]``: ``(n,)``."""
        A = self.input_cov
        augmented = np.hstack([mean, np.ones((mean.shape[0], 1))])
        value = np.einsum("ni,ij,nj->n", augmented, A, augmented)
        if cov.ndim == 2:
            return value + cov @ np.diagonal(A)[:-1]
        return value + np.einsum("nij,ij->n", cov, A[:-1, :-1])

    def extra(self, mean: NDArray, cov: NDArray) -> NDArray:
        return self._quadratic(mean, cov)[:, None] * np.diagonal(self.output_cov)[None, :]

    def extra_full(self, mean: NDArray, cov: NDArray) -> NDArray:
        return self._quadratic(mean, cov)[:, None, None] * self.output_cov[None]


@dataclass(frozen=True)
class FullBlock:
    """A full covariance over ``W~ = [W; b]``: ``cov[i, o, j, p] = Cov(W~[i, o], W~[j, p])``.

    Read as a matrix over the row-major ``vec W~`` (``cov.reshape(size, size)``), it must be
    symmetric positive semi-definite (up to rounding: a relative ``1e-8``).

    Examples
    --------
    >>> import numpy as np
    >>> block = FullBlock(cov=0.1 * np.eye(3).reshape(3, 1, 3, 1))  # W~ of shape (3, 1)
    >>> layer = Dense(np.ones((2, 1)), [0.0])
    >>> layer.moments(np.array([[1.0, 2.0]]), np.zeros((1, 2)), block)  # 0.1 (1 + 4 + 1)
    (array([[3.]]), array([[0.6]]))
    """

    cov: NDArray  # (n_in + 1, n_out, n_in + 1, n_out)

    def __post_init__(self) -> None:
        cov = _finite_array(self.cov, "cov", 4)
        if cov.shape[:2] != cov.shape[2:]:
            raise ValueError(
                f"`cov` must have shape (n_in + 1, n_out, n_in + 1, n_out), got {cov.shape}."
            )
        size = cov.shape[0] * cov.shape[1]
        matrix = cov.reshape(size, size)  # over the row-major vec W~
        _check_variances(np.diagonal(matrix), "cov")
        _check_covariance_matrix(matrix, "cov", f" (read as a {size} x {size} matrix)")
        object.__setattr__(self, "cov", cov)

    def shape_for(self, n_in: int, n_out: int) -> bool:
        return self.cov.shape[:2] == (n_in + 1, n_out)

    def _terms(self, mean: NDArray, cov: NDArray, pairs: str) -> NDArray:
        augmented = np.hstack([mean, np.ones((mean.shape[0], 1))])
        if pairs == "diag":
            sigma = np.einsum("iojo->oij", self.cov)  # Sigma_oo per output
            value = np.einsum("ni,oij,nj->no", augmented, sigma, augmented)
            if cov.ndim == 2:
                return value + cov @ np.diagonal(sigma, axis1=1, axis2=2)[:, :-1].T
            return value + np.einsum("nij,oij->no", cov, sigma[:, :-1, :-1])
        value = np.einsum("ni,iojp,nj->nop", augmented, self.cov, augmented)
        inner = self.cov[:-1, :, :-1, :]
        if cov.ndim == 2:
            return value + np.einsum("ni,ioip->nop", cov, inner)
        return value + np.einsum("nij,iojp->nop", cov, inner)

    def extra(self, mean: NDArray, cov: NDArray) -> NDArray:
        return self._terms(mean, cov, "diag")

    def extra_full(self, mean: NDArray, cov: NDArray) -> NDArray:
        return self._terms(mean, cov, "full")


Block = DiagonalBlock | KroneckerBlock | FullBlock


# ---- layers ----------------------------------------------------------------------------------
class Dense:
    """A linear layer ``h = a @ weight + bias`` (weight ``(n_in, n_out)``).

    Parameters
    ----------
    weight : array-like of shape (n_in, n_out)
    bias : array-like of shape (n_out,)

    Examples
    --------
    >>> import numpy as np
    >>> layer = Dense([[1.0, 2.0], [3.0, 4.0]], [0.5, -0.5])
    >>> layer.forward(np.array([[1.0, 1.0]]))
    array([[4.5, 5.5]])
    >>> layer.moments(np.array([[1.0, 1.0]]), np.array([[1.0, 0.0]]))  # input variances
    (array([[4.5, 5.5]]), array([[1., 4.]]))
    """

    def __init__(self, weight: Any, bias: Any):
        # copies: a network trained further in place (partial_fit) must not move this view
        # away from the posterior built at its weights
        self.weight = np.array(weight, dtype=np.float64)
        self.bias = np.array(bias, dtype=np.float64).reshape(-1)
        if self.weight.ndim != 2 or self.bias.shape != (self.weight.shape[1],):
            raise ValueError(
                f"Dense layer: weight must be (n_in, n_out) and bias (n_out,), got "
                f"{self.weight.shape} and {self.bias.shape}."
            )

    @property
    def n_in(self) -> int:
        return self.weight.shape[0]

    @property
    def n_out(self) -> int:
        return self.weight.shape[1]

    @property
    def n_parameters(self) -> int:
        return self.weight.size + self.bias.size

    def forward(self, a: NDArray) -> NDArray:
        return a @ self.weight + self.bias

    def moments(
        self, mean: NDArray, cov: NDArray, block: Block | None = None, **_: Any
    ) -> tuple[NDArray, NDArray]:
        """Mean and (co)variance of ``a @ W + b`` for ``a`` with moments ``(mean, cov)``.

        Exact first two moments when the weights (posterior ``block``, or deterministic for
        ``None``) are independent of the input.
        """
        if block is not None and not block.shape_for(self.n_in, self.n_out):
            raise ValueError(
                f"The posterior block ({type(block).__name__}) does not fit {self!r}: its "
                "shapes are those of another layer."
            )
        out_mean = mean @ self.weight + self.bias
        if cov.ndim == 2:
            out = cov @ self.weight**2
            if block is not None:
                out = out + block.extra(mean, cov)
        else:
            out = np.einsum("io,nij,jp->nop", self.weight, cov, self.weight, optimize=True)
            if block is not None:
                out = out + block.extra_full(mean, cov)
        return out_mean, out

    def __repr__(self) -> str:
        return f"Dense({self.n_in}, {self.n_out})"


class Activation:
    """An element-wise activation: one of `ACTIVATIONS`.

    Parameters
    ----------
    name : str
        The activation's name, as scikit-learn spells it (``"relu"``, ``"tanh"``...).

    Examples
    --------
    >>> import numpy as np
    >>> relu = Activation("relu")
    >>> relu.forward(np.array([[-1.0, 2.0]]))
    array([[0., 2.]])
    >>> mean, var = relu.moments(np.array([[0.0]]), np.array([[1.0]]), mode="exact_relu")
    >>> round(float(mean[0, 0]), 4), round(float(var[0, 0]), 4)  # max(h, 0), h ~ N(0, 1)
    (0.3989, 0.3408)
    """

    def __init__(self, name: str):
        if name not in ACTIVATIONS:
            raise TypeError(
                f"unsupported activation {name!r}; supported: {', '.join(ACTIVATIONS)}."
            )
        self.name = name

    def forward(self, z: NDArray) -> NDArray:
        return self.value_and_slope(z)[0]

    def value_and_slope(self, z: NDArray) -> tuple[NDArray, NDArray]:
        """``g(z)`` and ``g'(z)``."""
        name = self.name
        if name == "identity":
            return z, np.ones_like(z)
        if name == "relu":
            return np.maximum(z, 0.0), (z > 0).astype(z.dtype)
        if name == "tanh":
            t = np.tanh(z)
            return t, 1.0 - t * t
        if name == "logistic":
            s = expit(z)
            return s, s * (1.0 - s)
        # GELU, exact (erf) form: z Phi(z); derivative Phi(z) + z phi(z)
        cdf = ndtr(z)
        return z * cdf, cdf + z * norm.pdf(z)

    def moments(
        self, mean: NDArray, cov: NDArray, mode: str = "linearize", **_: Any
    ) -> tuple[NDArray, NDArray]:
        """Output moments: linearised at the mean, or moment-matched (see `MOMENT_MODES`)."""
        value, slope = self.value_and_slope(mean)
        matched = (mode == "exact_relu" and self.name == "relu") or (
            mode == "matched" and self.name in ("relu", "tanh", "logistic")
        )
        if cov.ndim == 2:
            if not matched:
                return value, slope**2 * cov
            return self._matched(mean, cov)
        out = slope[:, :, None] * cov * slope[:, None, :]
        if not matched:
            return value, out
        new_mean, new_var = self._matched(mean, _diag(cov))
        # The linearised correlations with the matched variances: a covariance again (the
        # matched variances set into the linearised matrix could make it indefinite).
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.sqrt(new_var / _diag(out))
        ratio = np.where(np.isfinite(ratio), ratio, 0.0)  # units the linearisation silences
        out *= ratio[:, :, None] * ratio[:, None, :]
        index = np.arange(mean.shape[1])
        out[:, index, index] = new_var
        return new_mean, out

    def _matched(self, mean: NDArray, var: NDArray) -> tuple[NDArray, NDArray]:
        if self.name == "relu":
            return relu_moments(mean, var)
        if self.name == "logistic":
            return _probit_moments(mean, var, _PROBIT)
        m, v = _probit_moments(mean, var, 2.0 * _PROBIT)  # tanh(x) = 2 logistic(2x) - 1
        return 2.0 * m - 1.0, 4.0 * v

    def __repr__(self) -> str:
        return f"Activation({self.name!r})"


def relu_moments(mean: NDArray, var: NDArray) -> tuple[NDArray, NDArray]:
    """Exact mean and variance of ``max(h, 0)`` for ``h ~ N(mean, var)`` (element-wise).

    NaN in ``mean`` or ``var`` gives NaN in both outputs; ``mean = -inf`` gives 0 and 0.
    Both outputs are accurate relative to their own size (against mpmath: about 1e-13 or
    less for ``z = mean / sqrt(var)`` down to -30, 2e-13 at -37, where the error of
    ``Phi(z)`` dominates) until ``Phi(z)`` underflows, below about ``z = -37.5``: they are 0
    there (the exact values are below ``1e-300 * sqrt(var)``).

    Examples
    --------
    >>> import numpy as np
    >>> m, v = relu_moments(np.array([0.0]), np.array([1.0]))
    >>> bool(np.isclose(m[0], 1 / np.sqrt(2 * np.pi)))
    True
    >>> bool(np.isclose(v[0], 0.5 - 1 / (2 * np.pi)))
    True
    """
    mean, var = np.broadcast_arrays(np.asarray(mean, dtype=float), np.asarray(var, dtype=float))
    std = np.sqrt(var)
    positive = std > 0
    safe = np.where(positive, std, 1.0)
    with np.errstate(over="ignore"):  # |z| = inf: Phi, phi and the clipping below take it
        z = mean / safe
    # z < -_RELU_TAIL has its own formulas (below), and var = 0 the value max(mean, 0): here
    # they are held at the boundary, so nothing is infinite (mean = -inf times Phi = 0 was
    # NaN, with numpy's "invalid value" warning)
    tail = positive & (z < -_RELU_TAIL)
    held = tail | ~positive
    near, z_near = np.where(held, -_RELU_TAIL * safe, mean), np.where(held, -_RELU_TAIL, z)
    cdf, pdf = ndtr(z_near), norm.pdf(np.minimum(z_near, 40.0))  # phi(40) is 0 already
    first = np.where(positive, near * cdf + safe * pdf, np.maximum(mean, 0.0))
    # The variance E[a^2] - E[a]^2 cancels for a strongly active unit (z = mean / sd large):
    # both terms are about mean^2 and the difference, about var, was lost (0 at mean 100,
    # var 1e-13). For z >= 0 it is var * (Phi(z) - m(-z) m(z)) instead, m(z) = z Phi(z) +
    # phi(z) the mean of max(h, 0) for h ~ N(z, 1) (from Var max(h, 0) + Var max(-h, 0) +
    # 2 m(z) m(-z) = Var h = 1): m(-z) is tiny (about phi(z) / z^2) where z is large, so
    # nothing cancels beside Phi(z) in [1/2, 1]. Beyond z = 40, m(-z) underflows to 0: z is
    # clipped there (no inf * 0).
    up = np.clip(z, 0.0, 40.0)
    cdf_up, pdf_up = ndtr(up), norm.pdf(up)
    stable = var * (cdf_up - (pdf_up - up * ndtr(-up)) * (up * cdf_up + pdf_up))
    # -3 <= z < 0: E[a^2] - E[a]^2 as written. E[a^2] = var ((z^2 + 1) Phi(z) + z phi(z))
    # cancels, its terms about z^4 / 2 times larger than the result (and phi(z), Phi(z) each
    # off by about z^2 units): about 1e-13 relative near z = -3 (against mpmath). Further
    # out the loss grows (2.3e-8 relative at z = -30, 1.1e-7 at z = -37), hence the tail.
    low = np.minimum(near, 0.0)  # z >= 0 takes `stable`; the minimum avoids inf * 0 there
    raw = (low**2 + var) * cdf + low * safe * pdf - (low * cdf + safe * pdf) ** 2
    variance = np.where(positive, np.maximum(np.where(z >= 0, stable, raw), 0.0), 0.0)
    if np.any(tail):
        # z < -3: with t = -z, J_n = E[max(u - t, 0)^n] for u ~ N(0, 1) has the ratios
        # r_n = J_n / J_{n-1} = n / (t + r_{n+1}) (integration by parts: J_{n+1} + t J_n =
        # n J_{n-1}), a continued fraction evaluated from its far end (40 terms, started at
        # the fixed point of r = 40 / (t + r): 3e-15 at t = 3, better beyond). Then E[a] =
        # sd j and Var a = var j (r_2 - j), j = r_1 Phi(z): products, and a difference of
        # terms far apart (j is below r_2 / 100), so nothing cancels. t is clipped at 40
        # (Phi(-40) is 0 already): no inf - inf in the fraction.
        t = np.minimum(-z[tail], 40.0)
        ratio = 0.5 * (np.sqrt(t * t + 4.0 * _RELU_TERMS) - t)  # r = n / (t + r), n = 40
        for n in range(_RELU_TERMS - 1, 0, -1):
            second, ratio = ratio, n / (t + ratio)
        j = ratio * ndtr(z[tail])
        first[tail] = safe[tail] * j
        variance[tail] = var[tail] * j * (second - j)
    missing = np.isnan(mean) | np.isnan(var)  # var = NaN is not "std > 0": it read as 0
    return np.where(missing, np.nan, first), np.where(missing, np.nan, variance)


def _probit_moments(mean: NDArray, var: NDArray, scale: float) -> tuple[NDArray, NDArray]:
    """Mean and variance of ``Phi(scale h)``, ``h ~ N(mean, var)`` (Owen's T for E Phi^2)."""
    shrink = np.sqrt(1.0 + scale**2 * var)
    k = scale * mean / shrink
    first = ndtr(k)
    rho = scale**2 * var / (1.0 + scale**2 * var)
    second = first - 2.0 * owens_t(k, np.sqrt((1.0 - rho) / (1.0 + rho)))
    return first, np.maximum(second - first**2, 0.0)


class Affine:
    """``a * scale + shift`` per unit: batch normalisation in evaluation mode.

    Examples
    --------
    >>> import numpy as np
    >>> bn = Affine(scale=[2.0, 0.5], shift=[1.0, 0.0])
    >>> bn.moments(np.array([[1.0, 1.0]]), np.ones((1, 2)))  # variances scale by scale**2
    (array([[3. , 0.5]]), array([[4.  , 0.25]]))
    """

    def __init__(self, scale: Any, shift: Any):
        self.scale = _finite_array(scale, "scale", np.ndim(scale)).reshape(-1)
        self.shift = _finite_array(shift, "shift", np.ndim(shift)).reshape(-1)
        if self.scale.shape != self.shift.shape:
            raise ValueError(
                f"Affine layer: `scale` and `shift` must have one entry per unit each, got "
                f"{self.scale.size} and {self.shift.size}."
            )

    @property
    def width(self) -> int | None:
        """Units it applies to (None: one value broadcast to any width)."""
        return self.scale.size if self.scale.size > 1 else None

    def forward(self, a: NDArray) -> NDArray:
        return a * self.scale + self.shift

    def moments(self, mean: NDArray, cov: NDArray, **_: Any) -> tuple[NDArray, NDArray]:
        out_mean = self.forward(mean)
        if cov.ndim == 2:
            return out_mean, cov * self.scale**2
        return out_mean, cov * np.outer(self.scale, self.scale)[None]

    def __repr__(self) -> str:
        return f"Affine({self.scale.size})"


class LayerNorm:
    """Layer normalisation over the last axis, ``gamma (a - m) / sqrt(s2 + eps) + beta``.

    Parameters
    ----------
    gamma, beta : array-like of shape (d,)
    eps : float, default=1e-5
    statistics : {"linearize", "fixed"}, default="linearize"
        How moments pass through. ``"fixed"`` (the paper's): the statistics ``m, s2`` are
        those of the mean input, so the random part is only scaled by
        ``gamma / sqrt(s2 + eps)``. ``"linearize"``: the whole map, statistics included, is
        linearised at the mean input (its Jacobian
        ``gamma / s (I - 1/d - z z' / d)``, ``z`` the normalised mean), which also removes
        the variance the centring takes out. ``"linearize"`` is exact as the input variance
        goes to 0; ``"fixed"`` is not, even then: it keeps the variance the centring
        removes (a random shift shared by every unit, which layer normalisation removes
        exactly, passes through it).

    Examples
    --------
    >>> import numpy as np
    >>> ln, x = LayerNorm(np.ones(3), np.zeros(3)), np.array([[1.0, 2.0, 3.0]])
    >>> ln.forward(x).round(3)
    array([[-1.225,  0.   ,  1.225]])
    >>> shift = np.ones((1, 3, 3))  # one random shift added to every unit: centring removes it
    >>> bool(np.allclose(ln.moments(x, shift)[1], 0.0))
    True
    """

    def __init__(self, gamma: Any, beta: Any, eps: float = 1e-5, statistics: str = "linearize"):
        if statistics not in ("linearize", "fixed"):
            raise ValueError(f"statistics must be 'linearize' or 'fixed', got {statistics!r}.")
        self.gamma = _finite_array(gamma, "gamma", np.ndim(gamma)).reshape(-1)
        self.beta = _finite_array(beta, "beta", np.ndim(beta)).reshape(-1)
        if self.gamma.shape != self.beta.shape:
            raise ValueError(
                f"LayerNorm: `gamma` and `beta` must have one entry per unit each, got "
                f"{self.gamma.size} and {self.beta.size}."
            )
        if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not 0 < eps < np.inf:
            raise ValueError(f"LayerNorm: `eps` must be a finite number > 0, got {eps!r}.")
        self.eps: float = float(eps)
        self.statistics: str = statistics

    @property
    def width(self) -> int | None:
        """Units it normalises (None: one value broadcast to any width)."""
        return self.gamma.size if self.gamma.size > 1 else None

    def _factor(self, a: NDArray) -> tuple[NDArray, NDArray]:
        centre = a.mean(axis=-1, keepdims=True)
        inv = 1.0 / np.sqrt(a.var(axis=-1, keepdims=True) + self.eps)
        return centre, inv

    def forward(self, a: NDArray) -> NDArray:
        centre, inv = self._factor(a)
        return (a - centre) * inv * self.gamma + self.beta

    def moments(self, mean: NDArray, cov: NDArray, **_: Any) -> tuple[NDArray, NDArray]:
        centre, inv = self._factor(mean)
        factor = inv * self.gamma  # (n, d)
        out_mean = (mean - centre) * factor + self.beta
        if self.statistics == "fixed":
            if cov.ndim == 2:
                return out_mean, cov * factor**2
            return out_mean, cov * factor[:, :, None] * factor[:, None, :]
        d = mean.shape[1]
        z = (mean - centre) * inv
        inner = np.eye(d)[None] - 1.0 / d - z[:, :, None] * z[:, None, :] / d
        J = factor[:, :, None] * inner  # (n, d, d)
        if cov.ndim == 2:
            return out_mean, np.einsum("nij,nj->ni", J**2, cov)
        return out_mean, np.einsum("nij,njk,nlk->nil", J, cov, J, optimize=True)

    def __repr__(self) -> str:
        return f"LayerNorm({self.gamma.size})"


LAYER_TYPES = (Dense, Activation, Affine, LayerNorm)


# ---- the network ------------------------------------------------------------------------------


def refuse_overflowed_moments(mean: NDArray, var: NDArray, predictive: str) -> None:
    """Refuse, naming the rows, moments that overflowed to NaN or infinity (inputs too
    large for float64 moments): ``predictive`` names the method in the message."""
    if not (np.isfinite(mean).all() and np.isfinite(var).all()):
        refuse_non_finite(
            np.column_stack([mean, var]),
            f"The {predictive} predictive overflowed (NaN or infinite moments)",
            "rows of `X`",
            " (inputs too large for float64 moments: rescale X, or check it for corrupt values)",
        )


class Network:
    """A feed-forward network as a list of layers, with an output link.

    Parameters
    ----------
    layers : list
        `Dense`, `Activation`, `Affine` and `LayerNorm` objects, applied in order.
    output : {"identity", "logistic", "softmax"}, default="identity"
        The link from the last layer's values (the logits of a classifier) to predictions.

    Examples
    --------
    >>> import numpy as np
    >>> net = Network([Dense(np.eye(2), np.zeros(2)), Activation("relu"),
    ...                Dense(np.ones((2, 1)), [0.5])])
    >>> net.forward(np.array([[1.0, -2.0]]))
    array([[1.5]])
    >>> net.n_parameters
    9
    """

    def __init__(self, layers: list[Any], output: str = "identity"):
        for layer in layers:
            if not isinstance(layer, LAYER_TYPES):
                raise TypeError(
                    f"unsupported layer {type(layer).__name__}; supported: "
                    f"{', '.join(t.__name__ for t in LAYER_TYPES)}."
                )
        if output not in ("identity", "logistic", "softmax"):
            raise ValueError(f"output must be identity, logistic or softmax, got {output!r}.")
        if not any(isinstance(layer, Dense) for layer in layers):
            raise ValueError("a Network needs at least one Dense layer.")
        width = None  # the number of units flowing between layers, once a layer fixes it
        for position, layer in enumerate(layers):
            needs = layer.n_in if isinstance(layer, Dense) else getattr(layer, "width", None)
            if width is not None and needs is not None and needs != width:
                raise ValueError(
                    f"`layers`: layer {position} ({layer!r}) takes {needs} units, but the "
                    f"layers before it give {width}."
                )
            if isinstance(layer, Dense):
                width = layer.n_out
            elif needs is not None:
                width = needs
        self.layers = list(layers)
        self.output = output

    @property
    def n_inputs(self) -> int:
        """The number of input features (the first layer with a width fixes it)."""
        for layer in self.layers:
            if isinstance(layer, Dense):
                return layer.n_in
            if getattr(layer, "width", None) is not None:
                return layer.width
        raise AssertionError("a Network has a Dense layer")  # checked at construction

    def _inputs(self, X: Any) -> NDArray:
        """``X`` as a finite float array ``(n, n_inputs)``, or a ValueError naming it.

        NaN or infinite inputs are refused here, naming the rows: passed on, they came out
        of `moments` as moments that "overflowed" (inputs too large), a wrong diagnosis.
        """
        a = np.asarray(X, dtype=np.float64)
        if a.ndim != 2 or a.shape[1] != self.n_inputs:
            raise ValueError(
                f"`X` must have shape (n_samples, {self.n_inputs}) for this network, got "
                f"{a.shape}."
            )
        refuse_non_finite(a, "`X` contains NaN or infinite values", "rows")
        return a

    @property
    def dense_layers(self) -> list[Dense]:
        return [layer for layer in self.layers if isinstance(layer, Dense)]

    @property
    def n_parameters(self) -> int:
        return sum(layer.n_parameters for layer in self.dense_layers)

    @property
    def n_outputs(self) -> int:
        return self.dense_layers[-1].n_out

    def parameter_slices(self) -> list[slice]:
        """Slice of each Dense layer's ``[W.ravel(), b]`` in the parameter vector."""
        sizes = np.cumsum([0] + [layer.n_parameters for layer in self.dense_layers])
        return [slice(int(a), int(b)) for a, b in itertools.pairwise(sizes)]

    def parameters(self) -> NDArray:
        """The parameter vector (layer by layer, ``W.ravel()`` then ``b``)."""
        return np.concatenate([np.r_[d.weight.ravel(), d.bias] for d in self.dense_layers])

    def features(self, X: NDArray) -> NDArray:
        """Input of the last Dense layer (every layer before it applied)."""
        last = max(i for i, layer in enumerate(self.layers) if isinstance(layer, Dense))
        a = self._inputs(X)
        for layer in self.layers[:last]:
            a = layer.forward(a)
        return a

    def forward(self, X: NDArray) -> NDArray:
        """Values of the last layer (regression outputs or logits), ``(n, n_outputs)``."""
        a = self._inputs(X)
        for layer in self.layers:
            a = layer.forward(a)
        return a

    def forward_samples(self, X: NDArray, theta: NDArray) -> NDArray:
        """Outputs for a batch of parameter vectors ``theta (S, P)``: ``(S, n, n_outputs)``.

        ``P`` must be `n_parameters` (the layout of `parameters`).
        """
        theta = np.asarray(theta, dtype=np.float64)
        if theta.ndim != 2 or theta.shape[1] != self.n_parameters:
            raise ValueError(
                f"`theta` must have shape (n_draws, {self.n_parameters}): one vector of this "
                f"network's {self.n_parameters} parameters per row, got shape {theta.shape}."
            )
        X = self._inputs(X)
        a = np.broadcast_to(X, (theta.shape[0], *X.shape))
        slices = iter(self.parameter_slices())
        for layer in self.layers:
            if isinstance(layer, Dense):
                part = theta[:, next(slices)]
                W = part[:, : layer.weight.size].reshape(-1, layer.n_in, layer.n_out)
                a = np.matmul(a, W) + part[:, None, layer.weight.size :]
            else:
                a = layer.forward(a)
        return a

    def moments(
        self,
        X: NDArray,
        blocks: list[Block | None],
        *,
        covariance: str = "diag",
        activation_moments: str = "linearize",
    ) -> tuple[NDArray, NDArray]:
        """One-pass Gaussian moments of the outputs: mean and variance ``(n, n_outputs)``.

        Parameters
        ----------
        X : ndarray of shape (n, n_features)
            Deterministic inputs.
        blocks : list
            One posterior block per Dense layer (``None``: deterministic weights).
        covariance : {"diag", "full"}
            Propagate per-unit variances only, or full covariances between units.
        activation_moments : {"linearize", "exact_relu", "matched"}
            How activations pass moments on (see `MOMENT_MODES`).

        Returns
        -------
        mean, var : ndarray of shape (n, n_outputs)

        Notes
        -----
        Rows are propagated in blocks of about ``2**22`` array cells (``rows * width`` with
        ``covariance="diag"``, ``rows * width**2`` with ``"full"``; ``width`` the widest
        layer or input), so memory does not grow with ``n``.
        """
        if covariance not in COVARIANCES:
            raise ValueError(
                f"`covariance` must be one of {list(COVARIANCES)}, got {covariance!r}."
            )
        check_moment_mode(activation_moments)
        dense = self.dense_layers
        if len(blocks) != len(dense):
            raise ValueError(f"{len(blocks)} posterior blocks for {len(dense)} Dense layers.")
        X = self._inputs(X)
        # rows are independent: propagate them in blocks, each holding at most about
        # _BLOCK_CELLS cells of (rows, d) variances or (rows, d, d) covariances (and the
        # (rows, d, d) Jacobians of a linearised LayerNorm)
        width = max(X.shape[1], *(layer.n_out for layer in dense))
        square = covariance != "diag" or any(
            isinstance(layer, LayerNorm) and layer.statistics == "linearize"
            for layer in self.layers
        )
        # finite inputs of extreme size overflow the squared means of the variance terms
        # (1e200: the network's own prediction is finite, the moments are not); numpy's
        # "overflow encountered" warnings are silenced: the refusal below names the rows
        with np.errstate(over="ignore", invalid="ignore"):
            parts = [
                self._block_moments(X[rows], blocks, covariance, activation_moments)
                for rows in _row_blocks(X.shape[0], width * width if square else width)
            ]
        if len(parts) == 1:
            mean, var = parts[0]
        else:
            mean = np.concatenate([m for m, _ in parts])
            var = np.concatenate([v for _, v in parts])
        refuse_overflowed_moments(mean, var, "one-pass")
        return mean, var

    def _block_moments(
        self, X: NDArray, blocks: list[Block | None], covariance: str, activation_moments: str
    ) -> tuple[NDArray, NDArray]:
        """`moments` of one block of rows."""
        mean = X
        n, d = mean.shape
        cov = np.zeros((n, d)) if covariance == "diag" else np.zeros((n, d, d))
        blocks_iter = iter(blocks)
        for layer in self.layers:
            block = next(blocks_iter) if isinstance(layer, Dense) else None
            mean, cov = layer.moments(mean, cov, block=block, mode=activation_moments)
        return mean, _diag(cov).copy()

    def __repr__(self) -> str:
        return f"Network({self.layers!r}, output={self.output!r})"
