"""Conditional normalizing flows of y given x, built with nflows, for multi-output regions.

A flow is a bijection ``z = g(y; x)`` between the outputs ``y`` in ``R^d`` and a latent code
``z`` with a standard normal distribution, trained by maximum likelihood. The conformal
regions of `uqconform.multioutput.contra` are the images of latent balls, so this module
exposes the flow as a `FlowMap`, the latent map of `uqconform.regions.PredictionRegion`.

torch and nflows are optional dependencies (``pip install "uqconform[flows]"``); they are
imported only when a flow is trained or evaluated, never when uqconform is imported.

Design choices (see the CONTRA notes in the docs):

* Masked autoregressive transforms (MAF; ``kind="maf"``) or rational-quadratic spline
  autoregressive transforms (``kind="spline"``), alternating with a reversal of the
  coordinates, over a standard normal base. The context is the standardised ``x``; without
  ``x`` the flow is unconditional (the residual flow of ResidualCONTRA).
* ``x`` is standardised and ``y`` whitened (mean and Cholesky factor of its covariance) on
  the training data, and every layer starts as the identity: the untrained flow is the
  Gaussian fit of ``y`` (mean and centred covariance), whose regions are ellipsoids; for
  residuals that average 0 they are those of
  `uqconform.multioutput.EllipsoidalConformalRegressor`; training only moves away from it
  when the validation likelihood improves. The whitening is part of the map, so latent
  codes, log-determinants and volumes are in the original units of ``y``.
* Training: Adam on mini-batches, early stopping on a validation part of the training data
  only (the calibration data never reaches the flow); the best validation state is kept,
  and the Gaussian start unless the flow beats it by more than one standard error of the
  mean validation gain (the one-standard-error rule). torch's random state is left
  untouched; the same ``random_state`` gives the same flow bit for bit on the same machine.
* Computations run in float32 on one CPU thread (small networks: threads cost more than
  they gain, and oversubscribe a busy machine); inputs and outputs are float64 numpy arrays.
"""

from __future__ import annotations

import copy
import io
import math
import numbers
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, cast, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from uqconform._validation import check_int, check_positive_float
from uqconform._warnings import warn_user

__all__ = [
    "FLOW_KINDS",
    "ConditionalFlow",
    "FlowMap",
    "FlowSpec",
    "check_flow_params",
    "fit_flow",
    "require_flows",
]

FLOW_KINDS = ("maf", "spline")

_INSTALL_HINT = (
    "normalizing flows need the optional dependencies torch and nflows: "
    'pip install "uqconform[flows]"'
)
# Rows x latent samples evaluated per torch call (bounded memory, few Python iterations).
_EVAL_CELLS = 2**16
_TORCH_DTYPE_NAME = "float32"
# A trained flow replaces its Gaussian start only if its validation gain exceeds this many
# standard errors (see _clearly_better).
_ONE_SE = 1.0
# CPU threads used by torch inside this module (see _torch_threads).
_TORCH_THREADS = 1


def require_flows() -> Any:
    """Import torch and nflows, or raise an ``ImportError`` naming the ``flows`` extra.

    Returns
    -------
    module
        The ``torch`` module.

    Examples
    --------
    >>> torch = require_flows()
    >>> torch.__name__
    'torch'
    """
    try:
        import nflows.flows.base  # noqa: F401
        import torch
    except ImportError as error:
        raise ImportError(f"{_INSTALL_HINT} ({error})") from error
    return torch


@dataclass(frozen=True)
class FlowSpec:
    """Everything needed to rebuild a flow's torch module (its weights aside).

    Parameters
    ----------
    dim : int
        Output dimension ``d``.
    context_dim : int, default=0
        Number of features of ``x``; 0 for an unconditional flow.
    kind : {"maf", "spline"}, default="maf"
        Masked affine autoregressive or rational-quadratic spline autoregressive layers.
    n_blocks : int, default=5
        Number of autoregressive layers (each followed by a reversal of the coordinates).
    hidden_features : int, default=64
        Width of the masked networks (MADE) that give each layer its parameters.
    n_hidden_blocks : int, default=2
        Residual blocks per masked network.
    num_bins : int, default=8
        Spline bins (``kind="spline"`` only).
    tail_bound : float, default=5.0
        Splines are the identity outside ``[-tail_bound, tail_bound]`` (whitened units).

    Examples
    --------
    >>> spec = FlowSpec(dim=2, context_dim=3, kind="spline", n_blocks=2)
    >>> spec
    FlowSpec(dim=2, context_dim=3, kind='spline', n_blocks=2, hidden_features=64,
             n_hidden_blocks=2, num_bins=8, tail_bound=5.0)
    >>> import torch
    >>> with torch.random.fork_rng():  # build() draws from torch's global generator
    ...     module = spec.build()
    >>> type(module).__name__
    'Flow'
    """

    dim: int
    context_dim: int = 0
    kind: str = "maf"
    n_blocks: int = 5
    hidden_features: int = 64
    n_hidden_blocks: int = 2
    num_bins: int = 8
    tail_bound: float = 5.0

    def build(self) -> Any:
        """A freshly initialised ``nflows.flows.Flow`` (uses torch's global generator).

        Returns
        -------
        nflows.flows.Flow
            ``n_blocks`` autoregressive layers, each followed by a reversal of the
            coordinates, over a standard normal base, in float32; every layer starts as
            the identity.
        """
        require_flows()
        from nflows.distributions.normal import StandardNormal
        from nflows.flows.base import Flow
        from nflows.transforms.autoregressive import (
            MaskedAffineAutoregressiveTransform,
            MaskedPiecewiseRationalQuadraticAutoregressiveTransform,
        )
        from nflows.transforms.base import CompositeTransform
        from nflows.transforms.permutations import ReversePermutation

        context = self.context_dim or None
        layers: list[Any] = []
        for _ in range(self.n_blocks):
            if self.kind == "maf":
                layer = MaskedAffineAutoregressiveTransform(
                    features=self.dim,
                    hidden_features=self.hidden_features,
                    context_features=context,
                    num_blocks=self.n_hidden_blocks,
                )
            else:
                layer = MaskedPiecewiseRationalQuadraticAutoregressiveTransform(
                    features=self.dim,
                    hidden_features=self.hidden_features,
                    context_features=context,
                    num_bins=self.num_bins,
                    tails="linear",
                    tail_bound=self.tail_bound,
                    num_blocks=self.n_hidden_blocks,
                )
            self._start_at_identity(layer)
            layers += [layer, ReversePermutation(features=self.dim)]
        flow = Flow(CompositeTransform(layers), StandardNormal([self.dim]))
        return flow.to(getattr(_torch(), _TORCH_DTYPE_NAME))

    def _start_at_identity(self, layer: Any) -> None:
        """Zero the last layer of the masked network and set its biases so that the layer
        is the identity: training starts from the Gaussian fit of the whitened outputs."""
        torch = _torch()
        final = layer.autoregressive_net.final_layer
        with torch.no_grad():
            final.weight.zero_()
            bias = final.bias.view(self.dim, -1)
            bias.zero_()
            if self.kind == "maf":  # scale = softplus(u) + 1e-3 = 1
                bias[:, 0] = math.log(math.expm1(1 - layer._epsilon))
            else:  # derivatives = min_derivative + softplus(u) = 1, uniform bins
                bias[:, 2 * self.num_bins :] = math.log(math.expm1(1 - layer.min_derivative))


def _torch() -> Any:
    return require_flows()


def check_flow_params(
    *,
    kind: str,
    n_blocks: int,
    hidden_features: int,
    max_epochs: int,
    batch_size: int,
    learning_rate: float,
    patience: int | None,
    validation_fraction: float,
) -> None:
    """Validate the training arguments of `fit_flow`, with messages naming the argument.

    Parameters
    ----------
    kind : str
        One of `FLOW_KINDS` (named ``flow`` in the messages, as in the estimators).
    n_blocks, hidden_features, max_epochs, batch_size : int
        Positive integers.
    learning_rate : float
        A positive finite number.
    patience : int or None
        A positive integer, or None (no early stopping).
    validation_fraction : float
        In ``[0, 1)``.

    Raises
    ------
    ValueError
        For the first invalid argument, named.

    Examples
    --------
    >>> settings = dict(kind="maf", n_blocks=5, hidden_features=64, max_epochs=200,
    ...                 batch_size=256, learning_rate=1e-3, patience=20,
    ...                 validation_fraction=0.1)
    >>> check_flow_params(**settings)  # valid: returns None
    >>> check_flow_params(**{**settings, "n_blocks": 0})
    Traceback (most recent call last):
    ...
    ValueError: `n_blocks` must be a positive integer, got 0.
    """
    if kind not in FLOW_KINDS:
        raise ValueError(f"`flow` must be one of {FLOW_KINDS}, got {kind!r}.")
    for name, value in (
        ("n_blocks", n_blocks),
        ("hidden_features", hidden_features),
        ("max_epochs", max_epochs),
        ("batch_size", batch_size),
    ):
        check_int(value, name)
    check_int(patience, "patience", allow_none=True)
    if (
        isinstance(learning_rate, bool)
        or not isinstance(learning_rate, numbers.Real)
        or not (0 < learning_rate < math.inf)
    ):
        raise ValueError(f"`learning_rate` must be a positive number, got {learning_rate!r}.")
    if (
        isinstance(validation_fraction, bool)
        or not isinstance(validation_fraction, numbers.Real)
        or not (0 <= validation_fraction < 1)
    ):
        raise ValueError(f"`validation_fraction` must be in [0, 1), got {validation_fraction!r}.")


@contextmanager
def _torch_threads() -> Iterator[None]:
    """Run torch on ``_TORCH_THREADS`` CPU threads inside a block, then restore the setting.

    The networks are small: extra threads cost more in synchronisation than they gain, and
    on a busy machine (or under joblib parallelism) they slow training down many times.
    """
    torch = _torch()
    previous = torch.get_num_threads()
    if previous != _TORCH_THREADS:
        torch.set_num_threads(_TORCH_THREADS)
    try:
        yield
    finally:
        if previous != _TORCH_THREADS:
            torch.set_num_threads(previous)


@contextmanager
def _private_torch_rng(seed: int, device: Any) -> Iterator[None]:
    """Seed torch inside a block and restore the caller's generators and flags after it."""
    torch = _torch()
    devices = [device] if getattr(device, "type", "cpu") == "cuda" else []
    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)


#: Relative ridge of a covariance: each output's variance grows by this share.
COVARIANCE_RIDGE = 1e-9


def regularised_covariance(matrix: NDArray) -> NDArray:
    """Covariance(s) ``(..., d, d)`` plus a tiny ridge on the diagonal, each output's own
    share of its variance (a zero variance gets that share of the largest one), so that
    the result scales with the units of every output that varies.

    A matrix with every variance 0 has no units to follow: it becomes ``1e-9`` times the
    identity, a sphere in whatever units the outputs have. The baselines therefore replace
    in-sample residuals that are all 0 (``cv=None`` around a model that reproduces its fit
    rows) by the spread of each output of ``Y``, and warn.

    A ridge relative to the trace instead was one absolute amount for every output: an
    output on a scale 1e6 below another got a floor far above its own variance, and the
    regions grew along it about 15 times.

    Examples
    --------
    >>> import numpy as np
    >>> regularised_covariance(np.diag([1e12, 1e-12])).diagonal() / [1e12, 1e-12]
    array([1., 1.])
    """
    matrix = np.asarray(matrix, dtype=float)
    variances = np.diagonal(matrix, axis1=-2, axis2=-1)
    largest = variances.max(axis=-1, keepdims=True)
    fallback = np.where(largest > 0, largest, 1.0)
    floor = COVARIANCE_RIDGE * np.where(variances > 0, variances, fallback)
    out = matrix.copy()
    diagonal = np.einsum("...ii->...i", out)  # a writable view of the diagonal(s)
    diagonal += floor
    return out


def _whitener(values: NDArray) -> tuple[NDArray, NDArray]:
    """Mean and lower Cholesky factor of the covariance (plus a tiny relative ridge)."""
    mean = values.mean(axis=0)
    centred = values - mean
    covariance = centred.T @ centred / values.shape[0]
    return mean, np.linalg.cholesky(regularised_covariance(covariance))


def _whiten(Y: NDArray, mean: NDArray, chol: NDArray) -> NDArray:
    """``chol^{-1} (y - mean)`` for each row."""
    from scipy.linalg import solve_triangular

    return solve_triangular(chol, (Y - mean).T, lower=True).T


def _scaler(values: NDArray) -> tuple[NDArray, NDArray]:
    """Mean and standard deviation per column; a constant column keeps scale 1."""
    mean = values.mean(axis=0)
    scale = values.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    return mean, scale


@dataclass
class _History:
    train_loss: list[float] = field(default_factory=list)
    validation_loss: list[float] = field(default_factory=list)
    best_epoch: int = 0


class ConditionalFlow:
    """A trained flow ``y | x`` with its whitening, evaluated with numpy in and out.

    Built by `fit_flow`; not meant to be constructed by hand. The bijection is
    ``g(y; x) = T^{-1}(y_chol^{-1} (y - y_mean); (x - x_mean) / x_scale)`` with ``T`` the
    nflows transform from latent to whitened outputs and ``y_chol`` the Cholesky factor of
    the covariance of the training outputs (so the untrained flow, the identity, is the
    Gaussian fit of ``y``).

    Parameters
    ----------
    spec : FlowSpec
        Architecture of ``module``.
    module : nflows.flows.Flow
        The trained flow of the whitened outputs given the standardised features.
    x_mean, x_scale : ndarray of shape (p,) or None
        Mean and standard deviation of the training features (None: unconditional).
    y_mean : ndarray of shape (d,)
        Mean of the training outputs.
    y_chol : ndarray of shape (d, d)
        Lower Cholesky factor of the covariance of the training outputs (plus a tiny
        relative ridge, `regularised_covariance`).
    history : _History
        Training losses and the kept epoch (read through `history`).
    device : str, default="cpu"
        torch device of ``module``.

    Attributes
    ----------
    spec : FlowSpec
        Architecture (rebuilds the torch module on unpickling).
    history : dict
        ``train_loss`` and ``validation_loss`` per epoch (mean negative log-likelihood of
        the whitened outputs) and ``best_epoch``, the epoch whose state was kept (1-based;
        0 when the starting point, the Gaussian fit, was kept: no epoch beat it on the
        validation rows by more than one standard error of the mean gain).
    dim : int
        Output dimension ``d``.
    conditional : bool
        Whether the flow is conditional on ``x``.
    log_scale_sum : float
        ``log|det y_chol|``, the whitening's share of the log-determinants.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 1))
    >>> Y = X + rng.normal(size=(50, 2))
    >>> flow = fit_flow(Y, X, n_blocks=1, hidden_features=8, max_epochs=1, random_state=0)
    >>> flow.dim, flow.conditional, flow.spec.context_dim
    (2, True, 1)
    >>> flow.to_latent(Y[:4], X[:4]).shape, flow.log_prob(Y[:4], X[:4]).shape
    ((4, 2), (4,))
    >>> Z = flow.to_latent(Y[:4], X[:4])
    >>> bool(np.allclose(flow.from_latent(Z[:, None, :], X[:4])[:, 0], Y[:4], atol=1e-4))
    True
    """

    def __init__(
        self,
        spec: FlowSpec,
        module: Any,
        x_mean: NDArray | None,
        x_scale: NDArray | None,
        y_mean: NDArray,
        y_chol: NDArray,
        history: _History,
        device: str = "cpu",
    ) -> None:
        self.spec = spec
        self.module = module
        self.x_mean = x_mean
        self.x_scale = x_scale
        self.y_mean = y_mean
        self.y_chol = y_chol
        self._history = history
        self.device = device
        self.log_scale_sum = float(np.log(np.diag(y_chol)).sum())

    @property
    def dim(self) -> int:
        """Output dimension ``d``."""
        return self.spec.dim

    @property
    def conditional(self) -> bool:
        """Whether the flow is conditional on ``x`` (it was trained with features)."""
        return self.spec.context_dim > 0

    @property
    def history(self) -> dict[str, Any]:
        """Training losses per epoch and the kept epoch (see the class docstring)."""
        return asdict(self._history)

    # ---- pickling: the weights as numpy arrays plus the spec --------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        module = state.pop("module")
        buffer = io.BytesIO()
        weights = {
            name: value.detach().cpu().numpy().copy()
            for name, value in module.state_dict().items()
        }
        np.savez(buffer, **weights)
        state["_weights"] = buffer.getvalue()
        state["_weight_names"] = list(weights)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        torch = require_flows()
        raw = state.pop("_weights")
        names = state.pop("_weight_names")
        self.__dict__.update(state)
        device = self.device
        if str(device).startswith("cuda") and not torch.cuda.is_available():
            warn_user(
                f"The flow was saved on {device!r}, which is not available here; using the CPU.",
                UserWarning,
            )
            self.device = device = "cpu"
        with _private_torch_rng(0, torch.device(device)):
            module = self.spec.build()
        with np.load(io.BytesIO(raw)) as arrays:
            weights = {name: torch.from_numpy(arrays[name]) for name in names}
        module.load_state_dict(weights)
        self.module = module.to(device).eval()

    # ---- evaluation ------------------------------------------------------------------
    def _whiten(self, Y: NDArray) -> NDArray:
        if Y.ndim != 2 or Y.shape[1] != self.dim:
            raise ValueError(f"`Y` must have shape (n, {self.dim}), got {Y.shape}.")
        return _whiten(Y, self.y_mean, self.y_chol)

    def _context(self, X: ArrayLike | None, n: int) -> NDArray | None:
        if not self.conditional:
            return None
        if X is None:
            raise ValueError("This flow is conditional on x: pass X.")
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[0] != n or X.shape[1] != self.spec.context_dim:
            raise ValueError(f"`X` must have shape ({n}, {self.spec.context_dim}), got {X.shape}.")
        return (X - self.x_mean) / self.x_scale

    def _tensor(self, values: NDArray) -> Any:
        torch = _torch()
        values = np.ascontiguousarray(values, dtype=np.float32)
        if not values.flags.writeable:  # torch warns on read-only memory (pandas' arrays)
            values = values.copy()
        return torch.as_tensor(values, device=self.device)

    def to_latent(self, Y: ArrayLike, X: ArrayLike | None = None) -> NDArray:
        """Latent codes ``g(y_i; x_i)``, shape ``(n, d)``.

        Non-finite codes (overflow far outside the training range) become ``inf``, i.e.
        outside every region.

        Parameters
        ----------
        Y : array-like of shape (n, d)
            Outputs.
        X : array-like of shape (n, p), optional
            Features (conditional flows only; ignored otherwise).

        Returns
        -------
        ndarray of shape (n, d)
            The latent code of each row (``inf`` where it is not finite, with a warning).
        """
        torch = _torch()
        Y = np.asarray(Y, dtype=float)
        standard = self._whiten(Y)  # checks Y's shape
        n = Y.shape[0]
        context = self._context(X, n)
        out = np.empty((n, self.dim))
        step = max(1, _EVAL_CELLS)
        transform = self.module._transform
        with torch.no_grad(), _torch_threads():
            for start in range(0, n, step):  # batches of rows, bounded memory
                stop = min(start + step, n)
                ctx = None if context is None else self._tensor(context[start:stop])
                z, _ = transform(self._tensor(standard[start:stop]), context=ctx)
                out[start:stop] = z.cpu().numpy()
        return _finite_or_inf(out)

    @overload
    def from_latent(
        self, Z: ArrayLike, X: ArrayLike | None = None, *, log_det: Literal[False] = False
    ) -> NDArray: ...

    @overload
    def from_latent(
        self, Z: ArrayLike, X: ArrayLike | None = None, *, log_det: Literal[True]
    ) -> tuple[NDArray, NDArray]: ...

    @overload
    def from_latent(
        self, Z: ArrayLike, X: ArrayLike | None = None, *, log_det: bool
    ) -> NDArray | tuple[NDArray, NDArray]: ...

    def from_latent(
        self, Z: ArrayLike, X: ArrayLike | None = None, *, log_det: bool = False
    ) -> NDArray | tuple[NDArray, NDArray]:
        """Outputs ``g^{-1}(z; x_i)`` for ``m`` latent points per row.

        Parameters
        ----------
        Z : array-like of shape (n, m, d)
        X : array-like of shape (n, p), optional
            Features (conditional flows only).
        log_det : bool, default=False
            Also return ``log|det d g^{-1}/dz|`` of shape ``(n, m)``, the scaling of ``y``
            included.

        Returns
        -------
        Y : ndarray of shape (n, m, d)
        log_abs_det : ndarray of shape (n, m), only with ``log_det=True``
        """
        torch = _torch()
        Z = np.asarray(Z, dtype=float)
        if Z.ndim != 3 or Z.shape[2] != self.dim:
            raise ValueError(f"`Z` must have shape (n, m, {self.dim}), got {Z.shape}.")
        n, m, d = Z.shape
        context = self._context(X, n)
        Y = np.empty((n, m, d))
        logdet = np.empty((n, m))
        rows = max(1, _EVAL_CELLS // max(m, 1))
        transform = self.module._transform
        with torch.no_grad(), _torch_threads():
            for start in range(0, n, rows):  # batches of rows, bounded memory
                stop = min(start + rows, n)
                z = self._tensor(Z[start:stop].reshape(-1, d))
                ctx = None
                if context is not None:
                    ctx = self._tensor(np.repeat(context[start:stop], m, axis=0))
                y, ld = transform.inverse(z, context=ctx)
                Y[start:stop] = y.cpu().numpy().reshape(stop - start, m, d)
                logdet[start:stop] = ld.cpu().numpy().reshape(stop - start, m)
        Y = Y @ self.y_chol.T + self.y_mean
        logdet = logdet + self.log_scale_sum
        if not (np.isfinite(Y).all() and np.isfinite(logdet).all()):
            warn_user(
                "The flow's inverse overflowed for some latent points (far outside the "
                "training range); those outputs are inf/NaN.",
                RuntimeWarning,
            )
        return (Y, logdet) if log_det else Y

    def log_prob(self, Y: ArrayLike, X: ArrayLike | None = None) -> NDArray:
        """Log-density of the fitted model at ``y_i`` given ``x_i`` (original units), ``(n,)``.

        Parameters
        ----------
        Y : array-like of shape (n, d)
            Outputs.
        X : array-like of shape (n, p), optional
            Features (conditional flows only; ignored otherwise).

        Returns
        -------
        ndarray of shape (n,)
            ``log p(y_i | x_i)`` in the units of ``y`` (the whitening's Jacobian included).
        """
        torch = _torch()
        Y = np.asarray(Y, dtype=float)
        standard = self._whiten(Y)  # checks Y's shape
        n = Y.shape[0]
        context = self._context(X, n)
        out = np.empty(n)
        with torch.no_grad(), _torch_threads():
            for start in range(0, n, _EVAL_CELLS):
                stop = min(start + _EVAL_CELLS, n)
                ctx = None if context is None else self._tensor(context[start:stop])
                lp = self.module.log_prob(self._tensor(standard[start:stop]), context=ctx)
                out[start:stop] = lp.cpu().numpy()
        return out - self.log_scale_sum


def _finite_or_inf(Z: NDArray) -> NDArray:
    bad = ~np.isfinite(Z)
    if bad.any():
        warn_user(
            f"{int(bad.any(axis=1).sum())} latent codes are not finite (the flow overflowed "
            "far outside its training range); they count as outside every region.",
            RuntimeWarning,
        )
        Z = np.where(bad, np.inf, Z)
    return Z


def _seed(random_state: Any) -> int:
    from uqconform._seeding import integer_seed

    seed = integer_seed(random_state)
    if seed is None:
        seed = int(np.random.default_rng().integers(2**31))
    return seed


def fit_flow(
    Y: ArrayLike,
    X: ArrayLike | None = None,
    *,
    kind: str = "maf",
    n_blocks: int = 5,
    hidden_features: int = 64,
    n_hidden_blocks: int = 2,
    num_bins: int = 8,
    tail_bound: float = 5.0,
    max_epochs: int = 200,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    patience: int | None = 20,
    validation_fraction: float = 0.1,
    device: str = "cpu",
    verbose: bool = False,
    random_state: Any = None,
    desc: str = "flow",
) -> ConditionalFlow:
    """Train a normalizing flow of ``Y`` (given ``X``) by maximum likelihood.

    Parameters
    ----------
    Y : array-like of shape (n, d)
        Finite outputs.
    X : array-like of shape (n, p), optional
        Finite numeric features (the context); ``None`` for an unconditional flow.
    kind : {"maf", "spline"}, default="maf"
        Masked affine autoregressive or rational-quadratic spline layers.
    n_blocks, hidden_features, n_hidden_blocks, num_bins, tail_bound
        Architecture, see `FlowSpec`.
    max_epochs : int, default=200
        Passes over the training part.
    batch_size : int, default=256
        Mini-batch size of Adam.
    learning_rate : float, default=1e-3
        Adam step size.
    patience : int or None, default=20
        Stop after this many epochs without a better validation loss (None: never).
    validation_fraction : float, default=0.1
        Share of the rows held out for early stopping and for the choice between the
        trained flow and its Gaussian start (kept unless the flow gains more than one
        standard error there). 0: train on all rows for ``max_epochs`` epochs and keep the
        last state.
    device : str, default="cpu"
        torch device.
    verbose : bool, default=False
        Show a tqdm progress bar over epochs.
    random_state : int, numpy Generator or None
        Seeds the split, the initial weights and the mini-batches. torch's global random
        state is restored afterwards.
    desc : str
        Label of the progress bar.

    Returns
    -------
    ConditionalFlow

    Raises
    ------
    ValueError
        For invalid arguments or data (non-finite, wrong shapes, fewer than 2 rows).
    RuntimeError
        If the loss becomes non-finite (divergence).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> Y = rng.normal(size=(200, 2))
    >>> flow = fit_flow(Y, n_blocks=1, hidden_features=8, max_epochs=3, random_state=0)
    >>> flow.to_latent(Y[:3]).shape
    (3, 2)
    """
    torch = require_flows()
    check_flow_params(
        kind=kind,
        n_blocks=n_blocks,
        hidden_features=hidden_features,
        max_epochs=max_epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        patience=patience,
        validation_fraction=validation_fraction,
    )
    check_int(n_hidden_blocks, "n_hidden_blocks", low=0)  # 0: a plain masked network
    check_int(num_bins, "num_bins")
    check_positive_float(tail_bound, "tail_bound")
    Y, X = _check_flow_data(Y, X)
    y_mean, y_chol = _whitener(Y)
    Y_std = _whiten(Y, y_mean, y_chol)
    x_mean = x_scale = X_std = None
    if X is not None:
        x_mean, x_scale = _scaler(X)
        X_std = (X - x_mean) / x_scale
    seed = _seed(random_state)
    val_rows, train_rows = _validation_split(Y.shape[0], validation_fraction, seed)
    spec = FlowSpec(
        dim=Y.shape[1],
        context_dim=0 if X is None else X.shape[1],
        kind=kind,
        n_blocks=int(n_blocks),
        hidden_features=int(hidden_features),
        n_hidden_blocks=int(n_hidden_blocks),
        num_bins=int(num_bins),
        tail_bound=float(tail_bound),
    )
    try:
        torch_device = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as error:
        raise ValueError(
            f"`device` must name a torch device such as 'cpu', got {device!r}."
        ) from error
    if torch_device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            f"`device`={device!r}, but this torch has no CUDA device (torch.cuda."
            "is_available() is False): use device='cpu', or install a CUDA build of torch."
        )
    with _private_torch_rng(seed, torch_device), _torch_threads():
        module = spec.build().to(torch_device)

        def tensors(rows: NDArray) -> tuple[Any, Any]:
            """The whitened outputs and standardised context of ``rows`` on the device."""
            return cast(  # two entries: (outputs, context)
                tuple[Any, Any],
                tuple(
                    None
                    if values is None
                    else torch.as_tensor(values[rows], dtype=torch.float32, device=torch_device)
                    for values in (Y_std, X_std)
                ),
            )

        history = _train(
            module,
            tensors(train_rows),
            tensors(val_rows),
            seed=seed,
            max_epochs=max_epochs,
            batch_size=batch_size,
            learning_rate=learning_rate,
            patience=patience,
            verbose=verbose,
            desc=desc,
        )
    return ConditionalFlow(spec, module, x_mean, x_scale, y_mean, y_chol, history, str(device))


def _check_flow_data(Y: ArrayLike, X: ArrayLike | None) -> tuple[NDArray, NDArray | None]:
    """``Y`` (and ``X``) as finite float arrays of matching rows, at least 2 of them."""
    Y = np.asarray(Y, dtype=float)
    if Y.ndim != 2 or not np.isfinite(Y).all():
        raise ValueError("`Y` must be a finite 2-D array.")
    if Y.shape[0] < 2:
        raise ValueError(
            f"A flow needs at least 2 rows of training data, got n_samples={Y.shape[0]}."
        )
    if X is not None:
        X = np.asarray(X, dtype=float)
        if X.ndim != 2 or X.shape[0] != Y.shape[0] or not np.isfinite(X).all():
            raise ValueError("`X` must be a finite 2-D array with one row per row of Y.")
    return Y, X


def _validation_split(n: int, validation_fraction: float, seed: int) -> tuple[NDArray, NDArray]:
    """Validation and training rows: a random ``validation_fraction`` of the ``n`` rows (at
    least one and at most ``n - 1`` when the fraction is positive; none at 0)."""
    n_val = round(validation_fraction * n) if validation_fraction > 0 else 0
    n_val = min(max(n_val, 1 if validation_fraction > 0 else 0), n - 1)
    order = np.random.default_rng(seed).permutation(n)
    return order[:n_val], order[n_val:]


def _train(
    module: Any,
    train: tuple[Any, Any],
    validation: tuple[Any, Any],
    *,
    seed: int,
    max_epochs: int,
    batch_size: int,
    learning_rate: float,
    patience: int | None,
    verbose: bool,
    desc: str,
) -> _History:
    """Adam on mini-batches of ``train`` (outputs, context) with early stopping on
    ``validation``; ``module`` is left in the kept state (the best validation epoch, or its
    Gaussian start unless the trained flow is clearly better; the last epoch without
    validation rows), which must give finite codes on the training data."""
    torch = _torch()
    from tqdm.auto import tqdm

    (y_train, x_train), (y_val, x_val) = train, validation
    n_train, n_val = y_train.shape[0], y_val.shape[0]
    optimizer = torch.optim.Adam(module.parameters(), lr=float(learning_rate))
    generator = torch.Generator().manual_seed(seed)
    history = _History()
    best_loss, best_state, waited = math.inf, None, 0
    if n_val:  # the starting point (the Gaussian fit) is the first candidate
        with torch.no_grad():
            start_log_prob = module.log_prob(y_val, context=x_val)
        best_loss = float(-start_log_prob.mean())
        start_state = best_state = copy.deepcopy(module.state_dict())
    epochs = tqdm(range(max_epochs), desc=desc, disable=not verbose, leave=False)
    for epoch in epochs:
        module.train()
        permutation = torch.randperm(n_train, generator=generator).to(y_train.device)
        total = 0.0
        for start in range(0, n_train, batch_size):  # mini-batches
            rows = permutation[start : start + batch_size]
            context = None if x_train is None else x_train[rows]
            loss = -module.log_prob(y_train[rows], context=context).mean()
            if not torch.isfinite(loss):
                raise _diverged(epoch, learning_rate)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * rows.numel()
        history.train_loss.append(total / n_train)
        module.eval()
        if n_val == 0:
            continue
        with torch.no_grad():
            val_loss = float(-module.log_prob(y_val, context=x_val).mean())
        if not math.isfinite(val_loss):
            raise _diverged(epoch, learning_rate)
        history.validation_loss.append(val_loss)
        if verbose:
            epochs.set_postfix(train=f"{total / n_train:.3f}", validation=f"{val_loss:.3f}")
        if val_loss < best_loss:
            best_loss, waited, history.best_epoch = val_loss, 0, epoch + 1
            best_state = copy.deepcopy(module.state_dict())
        else:
            waited += 1
            if patience is not None and waited >= patience:
                break
    if best_state is not None:
        module.load_state_dict(best_state)
        if history.best_epoch > 0 and not _clearly_better(module, start_log_prob, y_val, x_val):
            module.load_state_dict(start_state)
            history.best_epoch = 0
    else:
        history.best_epoch = len(history.train_loss)
    module.eval()
    with torch.no_grad():  # the kept state must give finite codes on the training data
        check = module.log_prob(
            y_train[:1024], context=None if x_train is None else x_train[:1024]
        )
    if not torch.isfinite(check).all():
        raise _diverged(max(history.best_epoch - 1, 0), learning_rate)
    return history


def _clearly_better(module: Any, start_log_prob: Any, y_val: Any, x_val: Any) -> bool:
    """Whether the trained flow beats its starting point (the Gaussian fit) on the
    validation rows by more than ``_ONE_SE`` standard errors of the mean paired gain in
    log-likelihood (the one-standard-error rule: keep the simpler shape unless the data
    clearly prefer the flow; it only matters for small validation sets)."""
    torch = _torch()
    with torch.no_grad():
        gain = (module.log_prob(y_val, context=x_val) - start_log_prob).double()
    n = gain.numel()
    if n < 2:  # one validation row cannot show a clear gain: keep the simpler start
        return False
    return bool(gain.mean() > _ONE_SE * gain.std() / math.sqrt(n))


def _diverged(epoch: int, learning_rate: float) -> RuntimeError:
    return RuntimeError(
        f"Flow training diverged (non-finite loss at epoch {epoch + 1}) with "
        f"learning_rate={learning_rate!r}: use a smaller learning_rate (the default is 1e-3; "
        "try 1e-4), fewer n_blocks, or check y for extreme values."
    )


class FlowMap:
    """The latent map ``g_i(y) = flow(y - offset_i; x_i)`` of a flow, for a batch of rows.

    Implements the ``LatentMap`` protocol of `uqconform.regions`: region ``i`` is
    ``{y : ||g_i(y)|| <= radius}``.

    Parameters
    ----------
    flow : ConditionalFlow
        A trained flow.
    X : array-like of shape (n, p), optional
        Features of the rows (required for a conditional flow).
    offset : array-like of shape (n, d), optional
        Point predictions added to the flow's outputs (residual flows).
    n_rows : int, optional
        Number of rows when neither ``X`` nor ``offset`` says it.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> flow = fit_flow(rng.normal(size=(100, 2)), n_blocks=1, hidden_features=8,
    ...                 max_epochs=2, random_state=0)
    >>> latent = FlowMap(flow, offset=np.zeros((4, 2)))
    >>> latent.from_latent(np.zeros((4, 3, 2))).shape
    (4, 3, 2)
    """

    is_affine = False
    #: Relative error of a latent norm from one batch of rows to another (float32 network
    #: passes round differently for one row than for 500: up to 1e-5 in two reviews, more
    #: with deeper flows), within which `PredictionRegion.contains` counts a point as on
    #: the boundary (ten times that, for margin).
    rounding = 1e-4

    @property
    def translation_invariant(self) -> bool:
        """True when every ``g_i`` is one map translated (unconditional flow): the regions
        are translates of one shape, so they share one volume."""
        return not self.flow.conditional

    def __init__(
        self,
        flow: ConditionalFlow,
        X: ArrayLike | None = None,
        offset: ArrayLike | None = None,
        n_rows: int | None = None,
    ) -> None:
        self.flow = flow
        # copies: a caller refilling its X array for the next batch must not move regions
        # already returned
        self.X = None if X is None else np.array(X, dtype=float)
        self.offset = None if offset is None else np.array(offset, dtype=float)
        sizes = {a.shape[0] for a in (self.X, self.offset) if a is not None}
        if n_rows is not None:
            sizes.add(int(n_rows))
        if len(sizes) != 1:
            raise ValueError("FlowMap needs one number of rows (from X, offset or n_rows).")
        self.n_rows = sizes.pop()
        if self.n_rows < 0:  # no rows is fine: an empty selection of regions
            raise ValueError(f"`n_rows` must be >= 0, got {self.n_rows}.")
        if flow.conditional and self.X is None:
            raise ValueError("A conditional flow needs the features X of its rows.")
        if self.offset is not None and self.offset.shape != (self.n_rows, flow.dim):
            raise ValueError(
                f"`offset` must have shape ({self.n_rows}, {flow.dim}), got {self.offset.shape}."
            )

    @property
    def dim(self) -> int:
        return self.flow.dim

    def to_latent(self, Y: ArrayLike) -> NDArray:
        """Latent codes ``g_i(y_i)``: ``(n, d)`` in, ``(n, d)`` out."""
        Y = np.asarray(Y, dtype=float)
        if Y.shape != (self.n_rows, self.dim):
            raise ValueError(f"`Y` must have shape ({self.n_rows}, {self.dim}), got {Y.shape}.")
        if self.offset is not None:
            Y = Y - self.offset
        return self.flow.to_latent(Y, self.X)

    def _check_Z(self, Z: ArrayLike) -> NDArray:
        Z = np.asarray(Z, dtype=float)
        if Z.ndim != 3 or Z.shape[0] != self.n_rows or Z.shape[2] != self.dim:
            raise ValueError(f"`Z` must have shape ({self.n_rows}, m, {self.dim}), got {Z.shape}.")
        return Z

    def from_latent(self, Z: ArrayLike) -> NDArray:
        """Outputs ``g_i^{-1}(z)`` of ``m`` latent points per row: ``(n, m, d)``."""
        Y = self.flow.from_latent(self._check_Z(Z), self.X)
        return Y if self.offset is None else Y + self.offset[:, None, :]

    def log_abs_det_from_latent(self, Z: ArrayLike) -> NDArray:
        """``log|det d g_i^{-1}/dz|`` at ``m`` latent points per row: ``(n, m)``."""
        Z = self._check_Z(Z)
        return self.flow.from_latent(Z, self.X, log_det=True)[1]

    def take(self, index: Any) -> FlowMap:
        """The map of a subset of rows (int, slice, integer array or boolean mask)."""
        rows = np.arange(self.n_rows)[index]
        rows = np.atleast_1d(rows)
        return FlowMap(
            self.flow,
            X=None if self.X is None else self.X[rows],
            offset=None if self.offset is None else self.offset[rows],
            n_rows=rows.size,
        )
