"""Linearisation of a fitted regressor in its parameters.

A fitted regressor ``f(x; theta*)`` is replaced near its parameters by the linear model
``f(x; theta) ~ f(x; theta*) + J(x) (theta - theta*)``. `linearize` returns the Jacobian
``J`` (one row per input), the predictions ``f(x; theta*)`` and which parameters the model's own
weight decay covers; `weight_decay` returns that weight decay's strength in
sum-of-squares units, so that the Gauss-Newton (GGN) precision of the model is
``J.T @ J + lam * diag(penalized)``.
Approximate full conformal prediction (ACP-GN) runs the ridge confidence machine in these
"Jacobian features".

Supported models (also inside `sklearn.frozen.FrozenEstimator` and as the last step of a
`sklearn.pipeline.Pipeline`, whose earlier steps transform ``X`` first):

* scikit-learn linear regressors whose predictions are ``X @ coef_ + intercept_``;
* `sklearn.neural_network.MLPRegressor` with a scalar, identity output (numpy Jacobians);
* ``torch.nn.Module`` regressors with one output per row (``torch.func``; torch is optional and
  only used when such a module is passed).
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.special import expit
from sklearn.base import BaseEstimator, is_classifier, is_regressor
from sklearn.compose import TransformedTargetRegressor
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import BayesianRidge, LinearRegression, Ridge, RidgeCV
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = [
    "Curvature",
    "Linearization",
    "linearize",
    "noise_variance",
    "parameter_count",
    "parameter_digest",
    "weight_decay",
]

_SUPPORTED = "scikit-learn linear regressors, MLPRegressor, torch.nn.Module"

# Smallest noise standard deviation, relative to the target's (see noise_variance).
_NOISE_FLOOR = 1e-12

# Rows of a torch Jacobian computed at once: at most this many entries per batch (64 MB float64).
_TORCH_BATCH_ENTRIES = 2**23


def noise_variance(residual: NDArray, target: NDArray) -> float:
    """Noise variance of a linearised regressor: the mean squared residual, floored at
    ``(1e-12 sd(target))**2`` (``1e-24`` for a constant target), so that a network that
    fits its rows exactly keeps a positive noise, the floor follows the units of ``y``,
    and a fit with little noise (an RMS residual 1e-9 of the target's spread) keeps its
    own. Shared by ACP-GN and the Laplace posteriors.

    Parameters
    ----------
    residual : ndarray of shape (n,)
        Residuals ``y - f(x)`` of the fit on its training rows.
    target : ndarray of shape (n,)
        The training targets ``y`` (only their standard deviation is read).

    Returns
    -------
    float
        ``max(mean(residual**2), (1e-12 sd(target))**2)``, or ``1e-24`` as the floor for
        a constant target.

    Examples
    --------
    >>> noise_variance(np.array([0.1, -0.3]), np.array([1.0, 2.0]))  # (0.01 + 0.09) / 2
    0.05
    >>> noise_variance(np.array([0.0, 0.0]), np.array([-1e-3, 1e-3])) == (1e-15) ** 2
    True
    >>> noise_variance(np.zeros(3), np.ones(3))  # a constant target
    1e-24
    """
    spread = float(np.std(target))
    floor = _NOISE_FLOOR * spread if spread > 0 else _NOISE_FLOOR
    return max(float(np.mean(residual**2)), floor * floor)


class Curvature(str, Enum):
    """Which parameters to linearise in.

    ``"full"`` uses every trainable parameter; ``"last_layer"`` only the weights and bias of the
    last layer (the rest of the network is a fixed feature map).

    Examples
    --------
    >>> [c.value for c in Curvature]
    ['full', 'last_layer']
    >>> Curvature("last_layer") is Curvature.LAST_LAYER, Curvature.FULL == "full"
    (True, True)
    """

    FULL = "full"
    LAST_LAYER = "last_layer"


#: jacobian, prediction, penalized mask and parameters, as a kind's linearisation returns them
_Parts = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Linearization:
    """The linearisation of a fitted regressor at its fitted parameters.

    Attributes
    ----------
    jacobian : ndarray of shape (n_samples, n_parameters)
        ``d f(x_i) / d theta`` at the fitted parameters ``theta*`` (float64).
    prediction : ndarray of shape (n_samples,)
        ``f(x_i; theta*)`` (float64).
    penalized : ndarray of shape (n_parameters,), dtype bool
        True for parameters covered by the model's weight decay (weights), False for the
        unpenalised ones (intercepts, biases, normalisation parameters).
    parameters : ndarray of shape (n_parameters,)
        The fitted parameters ``theta*`` themselves, in the order of the columns (float64).
    exact : bool
        Whether the model is linear in its parameters (a scikit-learn linear model, or a
        torch ``nn.Linear``, alone or in an ``nn.Sequential`` with ``nn.Flatten`` or
        ``nn.Identity``), so that the linearisation is the model itself.

    Examples
    --------
    The Gauss-Newton precision ``J.T @ J + lam * diag(penalized)`` of a ridge fit:

    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
    >>> model = Ridge(alpha=1.0).fit(X, [1.0, 2.0, 4.0])
    >>> lin = linearize(model, X)
    >>> precision = lin.jacobian.T @ lin.jacobian + weight_decay(model) * np.diag(lin.penalized)
    >>> lin.n_parameters, precision.diagonal().tolist()  # the intercept is not penalised
    (3, [6.0, 6.0, 3.0])
    """

    jacobian: np.ndarray
    prediction: np.ndarray
    penalized: np.ndarray
    parameters: np.ndarray
    exact: bool = False

    @property
    def n_parameters(self) -> int:
        """Number of parameters (columns of the Jacobian)."""
        return self.jacobian.shape[1]


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------


def linearize(estimator: Any, X: Any, *, curvature: str = "full") -> Linearization:
    """Jacobian and predictions of a fitted regressor at its fitted parameters.

    Parameters
    ----------
    estimator : estimator or torch.nn.Module
        A fitted scikit-learn linear regressor (``coef_``/``intercept_``), a fitted
        `sklearn.neural_network.MLPRegressor` with a scalar identity output, or a
        ``torch.nn.Module`` with one output per row; also wrapped in
        `sklearn.frozen.FrozenEstimator` or as the last step of a
        `sklearn.pipeline.Pipeline` (the earlier steps transform ``X`` first).
    X : array-like of shape (n_samples, n_features)
        Inputs (for a torch module: any float array whose first axis indexes the rows).
    curvature : {"full", "last_layer"}, default="full"
        Linearise in every parameter, or only in the last layer's weights and bias. For a
        linear model both are the same. For a torch module the last layer is the last child
        module (in registration order, descending into containers) that has trainable
        parameters.

    Returns
    -------
    Linearization
        ``jacobian`` (n_samples, n_parameters), ``prediction`` (n_samples,) and the boolean
        ``penalized`` mask (n_parameters,). Parameter order: linear models ``[coef_,
        intercept_]``; MLPRegressor, per layer, ``coefs_[l].ravel()`` then ``intercepts_[l]``;
        torch, ``named_parameters()`` order, each flattened.

    Raises
    ------
    TypeError
        If the estimator is a classifier or not one of the supported kinds.
    ValueError
        If the model has more than one output, an MLP has a non-identity output activation,
        ``curvature`` is unknown, or the Jacobian is not finite.
    sklearn.exceptions.NotFittedError
        If a scikit-learn estimator is not fitted.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
    >>> model = Ridge(alpha=1.0).fit(X, [1.0, 2.0, 4.0])
    >>> lin = linearize(model, X)
    >>> lin.jacobian
    array([[0., 1., 1.],
           [1., 0., 1.],
           [2., 2., 1.]])
    >>> lin.penalized
    array([ True,  True, False])
    >>> bool(np.allclose(lin.prediction, model.predict(X)))
    True
    """
    kind = _parse_curvature(curvature)
    model, X = _unwrap(estimator, X)
    if is_torch_module(model):
        jacobian, prediction, penalized, parameters = _torch_linearize(model, X, kind)
    elif isinstance(model, MLPRegressor):
        jacobian, prediction, penalized, parameters = _mlp_linearize(model, X, kind)
    else:
        jacobian, prediction, penalized, parameters = _linear_linearize(model, X)
    if not np.all(np.isfinite(jacobian)):
        raise ValueError(
            "non-finite Jacobian: some entries are NaN or infinite; check the inputs and the "
            "model (overflowing activations or diverged weights)."
        )
    if is_torch_module(model):
        exact = _torch_is_affine(model)
    else:
        exact = not isinstance(model, MLPRegressor)
    return Linearization(
        jacobian=jacobian,
        prediction=prediction,
        penalized=penalized,
        parameters=parameters,
        exact=exact,
    )


def parameter_count(estimator: Any, *, curvature: str = "full") -> int:
    """Number of parameters `linearize` differentiates with respect to.

    Parameters
    ----------
    estimator : estimator or torch.nn.Module
        As for `linearize` (fitted).
    curvature : {"full", "last_layer"}, default="full"
        As for `linearize`.

    Returns
    -------
    int
        The number of columns of ``linearize(estimator, X, curvature=curvature).jacobian``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
    >>> parameter_count(Ridge().fit(X, [1.0, 2.0, 4.0]))
    3
    """
    kind = _parse_curvature(curvature)
    model = _unwrap_model(estimator)
    if is_torch_module(model):
        return sum(int(p.numel()) for _, p in _torch_parameters(model, kind))
    if isinstance(model, MLPRegressor):
        _check_mlp(model)
        if kind is Curvature.LAST_LAYER:
            return int(model.coefs_[-1].size + model.intercepts_[-1].size)
        return int(
            sum(w.size + b.size for w, b in zip(model.coefs_, model.intercepts_, strict=True))
        )
    coef, _, has_intercept = _linear_parameters(model)
    return coef.size + int(has_intercept)


#: Numbers of a large array `parameter_digest(arrays_only=True)` hashes (a strided sample).
_DIGEST_SAMPLE = 4096


#: The version of what `parameter_digest` hashes, at the start of every digest: a digest
#: of another scheme (a model pickled by an older build) is judged by `digest_change`.
DIGEST_SCHEME = "d2"

#: The version of what `parameter_digest(arrays_only=True)` hashes: "d3" adds float
#: scalars (a linear model's ``intercept_``), which "d2" left out; "d4" adds the numeric
#: arrays a scikit-learn model keeps in private attributes (a k-nearest-neighbours
#: model's ``_fit_X`` and ``_y``, its whole learnt state).
ARRAYS_DIGEST_SCHEME = "d4"


def parameter_digest(estimator: Any, *, arrays_only: bool = False, like: Any = None) -> str:
    """A digest of a fitted model's learnt state, to notice a model retrained in place.

    Hashes the numbers a model learnt: a torch module's parameters and buffers; for
    scikit-learn objects, every public fitted attribute (name ending in ``_``) holding
    numpy numbers and every fitted model held in an attribute (a CQR pair given fitted),
    through Pipelines, FrozenEstimator, TransformedTargetRegressor and searches (their
    fitted sub-models). It starts with `DIGEST_SCHEME`. Equal for a pickled copy; it
    changes when the models `linearize` reads (linear models, MLPs, torch modules) are
    trained again on other data or with another seed. Models that keep what they learnt
    in other objects (scikit-learn's trees) are not covered. ``arrays_only`` leaves out
    integer scalars (and lists of scalars): a model may count its calls in one, and a
    retrained model's arrays change anyway; it keeps float scalars (a linear model's
    ``intercept_``, which alone moves when it is refitted on a shifted target), adds the
    numeric arrays held in private attributes of scikit-learn's own models (a
    k-nearest-neighbours model's ``_fit_X`` and ``_y``; not of a class defined elsewhere,
    which may cache arrays at every prediction) and hashes a strided sample of 4,096
    numbers of a larger array. Such a digest starts with `ARRAYS_DIGEST_SCHEME`;
    ``like``, a digest an older build recorded (scheme "d3" without the private arrays,
    "d2" or none without float scalars either), makes it hash as that build did, so
    `digest_change` compares like with like.

    Parameters
    ----------
    estimator : object
        A fitted model: a torch module, a scikit-learn estimator (or meta-estimator), or
        any object (only what the rules above cover is hashed).
    arrays_only : bool, default=False
        Leave out integer scalars and lists of scalars, and sample large arrays (see
        above).
    like : str, optional
        A digest recorded earlier; one of another scheme than `ARRAYS_DIGEST_SCHEME` makes
        an ``arrays_only`` digest hash as that scheme did ("d3", or "d2" for any other).
        Only read with ``arrays_only=True``.

    Returns
    -------
    str
        ``"<scheme>:<sha256 hex digest>"``, the scheme being `DIGEST_SCHEME`, or
        `ARRAYS_DIGEST_SCHEME` for an ``arrays_only`` digest (the older scheme ``like``
        asks for, "d3" or `DIGEST_SCHEME`), followed by ``"~"`` when a Pipeline was read
        (builds before stop 64 could skip one: `digest_change` only warns for those).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> X, y = np.eye(3), np.arange(3.0)
    >>> model = Ridge().fit(X, y)
    >>> before = parameter_digest(model)
    >>> before == parameter_digest(model), before == parameter_digest(model.fit(X, -y))
    (True, False)
    >>> before.split(":")[0], parameter_digest(model, arrays_only=True).split(":")[0]
    ('d2', 'd4')
    >>> parameter_digest(model, arrays_only=True, like=before).split(":")[0]
    'd2'
    """
    scheme = DIGEST_SCHEME
    if arrays_only:  # the newest scheme, or the one ``like`` was recorded with
        scheme = ARRAYS_DIGEST_SCHEME
        recorded = like.partition(":")[0].rstrip("~") if isinstance(like, str) else None
        if recorded is not None and recorded != ARRAYS_DIGEST_SCHEME:
            scheme = "d3" if recorded == "d3" else DIGEST_SCHEME
    digest = hashlib.sha256()
    seen: dict[int, Any] = {}
    _feed_digest(
        digest,
        estimator,
        seen,
        arrays_only,
        floats=scheme != DIGEST_SCHEME,
        private=scheme == "d4",
    )
    # "~": a Pipeline was read, which builds before stop 64 could skip (see `digest_change`)
    pipelines = any(isinstance(value, Pipeline) for value in seen.values())
    return f"{scheme}{'~' if pipelines else ''}:{digest.hexdigest()}"


def digest_change(recorded: Any, current: str) -> Literal["changed", "maybe"] | None:
    """How a stored digest compares with ``current`` (a `parameter_digest`): ``"changed"``
    when it has the scheme of ``current`` and differs; ``"maybe"`` when it has another
    (an older build's, or none) and its hash differs (it hashed other things, so a model it
    pickled may be unchanged: a warning, not a refusal); else None."""
    if not isinstance(recorded, str):
        return None
    scheme, _, value = current.partition(":")
    if recorded.startswith(f"{scheme}:"):
        return "changed" if recorded != current else None
    if scheme.endswith("~") and recorded.startswith(f"{scheme[:-1]}:"):
        # recorded before stop 64 over Pipelines: that build could skip one (a freed list's
        # id taken for the next one's), so a difference may be its own
        return "maybe" if recorded.partition(":")[2] != value else None
    return "maybe" if recorded != value else None


def _feed_digest(
    digest: Any,
    value: Any,
    seen: dict[int, Any],
    arrays_only: bool = False,
    floats: bool = False,
    private: bool = False,
) -> None:
    if isinstance(value, (BaseEstimator, list, tuple, dict)) or is_torch_module(value):
        if id(value) in seen:
            return
        # the object is kept beside its id: a temporary list (a Pipeline's steps) freed
        # after its turn left its id to the next one, which was then skipped as seen (the
        # digest hung on memory reuse: a calibrated model was refused as retrained)
        seen[id(value)] = value
    if is_torch_module(value):
        for name, tensor in [*value.named_parameters(), *value.named_buffers()]:
            digest.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
            data = tensor.detach().cpu()
            try:
                digest.update(data.contiguous().numpy().tobytes())
            except (TypeError, RuntimeError):  # dtypes numpy lacks (bfloat16)
                digest.update(data.double().numpy().tobytes())
    elif (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(item, (int, float, np.number)) for item in value)
    ):
        if not arrays_only:
            digest.update(np.asarray(value, dtype=float).tobytes())  # a loss curve, say
    elif isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf":  # numbers; object arrays hold addresses
            digest.update(f"{value.shape}{value.dtype}".encode())
            if arrays_only and value.size > _DIGEST_SAMPLE:
                # a retrained model changes nearly every number: a strided sample of a
                # large array tells it (hashing 4 million weights at every prediction made
                # one-row predictions 13 times slower)
                # (taken at C-order positions, whatever the memory layout, without copying
                # the array: a pickled copy, stored in C order, gives the same sample)
                step = -(-value.size // _DIGEST_SAMPLE)
                if value.flags.c_contiguous:  # a strided view: no index arrays (0.2 ms less)
                    value = value.reshape(-1)[::step]
                else:
                    positions = np.arange(0, value.size, step)
                    value = value[np.unravel_index(positions, value.shape)]
            digest.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, (bool, int, float, np.number)):
        if not arrays_only:
            digest.update(repr(value).encode())
        elif floats and isinstance(value, (float, np.floating)):
            # learnt numbers (an intercept_); integers are left out: counters a model may
            # update at predict time (the bytes, equal whatever numpy's repr)
            digest.update(np.float64(value).tobytes())
    elif isinstance(value, (list, tuple)):
        for item in value:
            _feed_digest(digest, item, seen, arrays_only, floats, private)
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            digest.update(str(key).encode())
            _feed_digest(digest, value[key], seen, arrays_only, floats, private)
    elif isinstance(value, BaseEstimator):
        if isinstance(value, Pipeline):
            _feed_digest(
                digest, [step for _, step in value.steps], seen, arrays_only, floats, private
            )
        if isinstance(value, FrozenEstimator):
            _feed_digest(digest, value.estimator, seen, arrays_only, floats, private)
        # private arrays of scikit-learn's own models only (a k-NN's _fit_X): a class of
        # the user's may keep a cache there that every predict call rewrites
        own = type(value).__module__.startswith("sklearn.")
        for name, item in sorted(vars(value).items()):
            # fitted attributes, and fitted models held as parameters (CQR's quantile pair)
            if (
                (name.endswith("_") and not name.startswith("_"))
                or (isinstance(item, BaseEstimator) or is_torch_module(item))
                or (private and name.startswith("_") and isinstance(item, np.ndarray) and own)
            ):
                digest.update(name.encode())
                _feed_digest(digest, item, seen, arrays_only, floats, private)


def _minibatch_factor(model: MLPRegressor) -> float:
    """How many times a stochastic solver's epoch counts ``alpha`` against the sum of
    squares: ``(N / K) * sum_k 1 / b_k`` over the ``K`` minibatches ``b_k`` of its ``N``
    training rows (``N / B`` for equal batches); 1 for ``lbfgs`` (one full batch)."""
    # t_ and loss_curve_ both count from the model's initialisation (warm starts and
    # partial_fit calls add to both; n_iter_ counts the last call only)
    epochs = len(getattr(model, "loss_curve_", None) or ())
    seen = int(getattr(model, "t_", 0))
    if model.solver == "lbfgs" or epochs < 1 or seen < 1:
        return 1.0
    n = max(1, round(seen / epochs))  # rows per epoch (after early stopping's split)
    batch = min(200, n) if model.batch_size == "auto" else int(np.clip(model.batch_size, 1, n))
    sizes = np.diff(np.r_[np.arange(0, n, batch), n])  # scikit-learn's gen_batches
    return float(n / sizes.size * np.sum(1.0 / sizes))


def weight_decay(estimator: Any) -> float | None:
    """The model's own L2 penalty strength in sum-of-squares units.

    The strength ``lam`` such that the model was fitted by minimising
    ``sum_i (y_i - f(x_i))**2 + lam * ||w||**2`` over its parameters, where ``w`` are the
    parameters marked ``penalized`` by `linearize` (intercepts and biases are not
    penalised). With sample weights, the sum of squares is the weighted one.

    * `sklearn.linear_model.Ridge`: ``alpha``; `sklearn.linear_model.RidgeCV`:
      ``alpha_``; `sklearn.linear_model.LinearRegression`: ``0.0``;
      `sklearn.linear_model.BayesianRidge`: ``lambda_ / alpha_`` (its posterior mean is
      that ridge solution).
    * `sklearn.neural_network.MLPRegressor`: ``alpha`` with ``solver="lbfgs"``.
      scikit-learn minimises ``0.5 * mean((y - f)**2) + alpha / (2 * n) * ||W||**2`` on the
      ``coefs_``; multiplying by ``2 n`` gives ``sum((y - f)**2) + alpha * ||W||**2``. The
      stochastic solvers (``"adam"``, ``"sgd"``) take that objective per minibatch, ``n``
      the batch size, so the penalty counts once per batch: an epoch of ``K`` batches of
      size ``B`` settles at the strength ``alpha * K = alpha * N / B`` (a smaller last
      batch weighs in as ``alpha * (N / K) * sum_k 1 / b_k``). ``N``, the training rows
      per epoch, is read off the fitted model as ``t_`` over the epochs in ``loss_curve_``
      (both count from the initialisation): exact for one fit, or for warm starts and
      ``partial_fit`` calls on equally many rows; an average otherwise.
    * Other linear models (Lasso, ElasticNet, SGDRegressor, HuberRegressor, ...), any fit
      with ``positive=True`` (a constrained optimum) and torch modules: ``None`` (no L2
      penalty of this form, or one that depends on quantities the fitted model does not
      store).

    Parameters
    ----------
    estimator : estimator or torch.nn.Module
        As for `linearize` (fitted).

    Returns
    -------
    float or None
        The ridge strength, or None if unknown.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]])
    >>> weight_decay(Ridge(alpha=3.0).fit(X, [1.0, 2.0, 4.0]))
    3.0
    """
    model = _unwrap_model(estimator)
    if is_torch_module(model):
        return None
    if isinstance(model, MLPRegressor):
        _check_mlp(model)
        return float(model.alpha) * _minibatch_factor(model)
    _linear_parameters(model)  # type, fit and output checks
    if bool(getattr(model, "positive", False)):  # np.True_ too
        return None  # non-negative coefficients: a constrained optimum, not a ridge one
    if isinstance(model, LinearRegression):
        return 0.0
    if isinstance(model, Ridge):
        return _scalar_or_none(model.alpha)
    if isinstance(model, RidgeCV):
        return _scalar_or_none(model.alpha_)
    if isinstance(model, BayesianRidge):
        return float(model.lambda_ / model.alpha_)
    return None


# --------------------------------------------------------------------------------------------
# Dispatch helpers
# --------------------------------------------------------------------------------------------


def _parse_curvature(curvature: str) -> Curvature:
    try:
        return Curvature(curvature)
    except ValueError:
        options = ", ".join(repr(c.value) for c in Curvature)
        raise ValueError(f"curvature must be one of {options}; got {curvature!r}.") from None


def _has_tag(test: Any, obj: Any) -> bool:
    """is_classifier / is_regressor, False for objects without scikit-learn tags."""
    try:
        return bool(test(obj))
    except (AttributeError, TypeError):
        return False


def is_torch_module(obj: Any) -> bool:
    """True for a torch module, without importing torch (a module can only exist if torch
    has been imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def _unwrap_model(estimator: Any) -> Any:
    """The innermost model (FrozenEstimator and Pipeline removed), checked for its kind."""
    model, _ = _unwrap(estimator, None)
    return model


def _unwrap(estimator: Any, X: Any) -> tuple[Any, Any]:
    """Strip FrozenEstimator and Pipeline wrappers, transforming X through pipeline steps."""
    model = estimator
    while True:
        if is_torch_module(model):
            return model, X
        if _has_tag(is_classifier, model):
            raise TypeError(
                f"{type(model).__name__} is a classifier; linearize supports regressors only "
                f"({_SUPPORTED})."
            )
        if isinstance(model, FrozenEstimator):
            model = model.estimator
        elif isinstance(model, Pipeline):
            last = model.steps[-1][1]
            if last is None or last == "passthrough":
                raise TypeError("the last step of the Pipeline must be a regressor.")
            # Check the final model before transforming, so an unfitted pipeline says so.
            _check_kind(last)
            if X is not None and len(model.steps) > 1:
                X = model[:-1].transform(X)
            model = last
        else:
            _check_kind(model)
            return model, X


def _check_kind(model: Any) -> None:
    """Raise TypeError unless model is (a wrapper of) one of the supported kinds."""
    if is_torch_module(model) or isinstance(model, (MLPRegressor, Pipeline, FrozenEstimator)):
        return
    linear_module = type(model).__module__.startswith("sklearn.linear_model")
    if _has_tag(is_regressor, model) and (linear_module or hasattr(model, "coef_")):
        return
    if isinstance(model, TransformedTargetRegressor):  # inside a Pipeline: the wrong depth
        raise TypeError(
            "`estimator`: a TransformedTargetRegressor is supported around the whole model "
            "only, not as a step of a Pipeline: write it as TransformedTargetRegressor("
            "make_pipeline(StandardScaler(), MLPRegressor(...)), "
            "transformer=StandardScaler())."
        )
    search = ("best_estimator_", "param_grid", "param_distributions")
    if any(hasattr(model, name) for name in search):  # inside a Pipeline or a TTR
        raise TypeError(
            f"`estimator`: a {type(model).__name__} is supported around the whole model "
            "only, not inside a Pipeline or a TransformedTargetRegressor: search over the "
            "whole model, e.g. GridSearchCV(TransformedTargetRegressor(make_pipeline(...)),"
            " {'regressor__ridge__alpha': [...]})."
        )
    raise TypeError(
        f"`estimator`: cannot linearise a {type(model).__name__}; supported models are "
        f"{_SUPPORTED} (optionally in a FrozenEstimator or as the last step of a Pipeline)."
    )


_STANDARD_TARGET = (
    "TransformedTargetRegressor is supported only with transformer=StandardScaler() (an "
    "affine map y = shift + scale * z, the regressor trained on the standardised z) and no "
    "func/inverse_func"
)


def check_standard_target(model: Any) -> None:
    """TypeError, before any training, unless a ``TransformedTargetRegressor`` transforms
    its target by a ``StandardScaler`` (no ``func`` / ``inverse_func``)."""
    if model.func is not None or model.inverse_func is not None:
        raise TypeError(
            f"{_STANDARD_TARGET}; got func={model.func!r}, inverse_func={model.inverse_func!r}."
        )
    if not isinstance(model.transformer, StandardScaler):
        got = (
            "transformer=None (the identity: pass the regressor itself instead)"
            if model.transformer is None
            else f"transformer={type(model.transformer).__name__}"
        )
        raise TypeError(f"{_STANDARD_TARGET}; got {got}.")


def standard_target_scaling(model: Any) -> tuple[float, float]:
    """``(shift, scale)`` with ``y = shift + scale * z`` of a fitted
    ``TransformedTargetRegressor`` whose target transform is a ``StandardScaler`` (``z``: the
    standardised target its regressor was trained on); TypeError for any other transform.
    """
    transformer = model.transformer_
    if not isinstance(transformer, StandardScaler):
        raise TypeError(f"{_STANDARD_TARGET}; got {type(transformer).__name__}.")
    if getattr(transformer, "n_features_in_", 1) != 1:
        raise ValueError(
            f"the TransformedTargetRegressor was fitted on {transformer.n_features_in_} "
            "targets; one is needed (y is 1-D)."
        )
    shift = float(transformer.mean_[0]) if transformer.with_mean else 0.0
    scale = float(transformer.scale_[0]) if transformer.with_std else 1.0
    return shift, scale


def _scalar_or_none(value: Any) -> float | None:
    values = np.ravel(np.asarray(value, dtype=float))
    return float(values[0]) if values.size == 1 else None


def _validate_X(model: Any, X: Any) -> np.ndarray:
    X = validate_data(model, X, reset=False, accept_sparse=True, dtype=np.float64)
    if hasattr(X, "toarray"):  # the Jacobian is dense anyway
        X = X.toarray()
    return np.asarray(X, dtype=np.float64)


# --------------------------------------------------------------------------------------------
# scikit-learn linear models
# --------------------------------------------------------------------------------------------


def _linear_parameters(model: Any) -> tuple[np.ndarray, float, bool]:
    """Return (coef (d,), intercept, has_intercept) of a fitted scalar linear regressor."""
    check_is_fitted(model)
    if not (hasattr(model, "coef_") and hasattr(model, "intercept_")):
        raise TypeError(
            f"{type(model).__name__} has no coef_/intercept_; supported models are {_SUPPORTED}."
        )
    coef = np.asarray(model.coef_, dtype=np.float64)
    intercept = np.ravel(np.asarray(model.intercept_, dtype=np.float64))
    if coef.ndim > 2 or (coef.ndim == 2 and coef.shape[0] != 1) or intercept.size != 1:
        raise ValueError(
            f"`estimator`: {type(model).__name__} has several outputs (coef_ of shape "
            f"{coef.shape}); only scalar regression is supported."
        )
    has_intercept = bool(getattr(model, "fit_intercept", True))
    return coef.ravel(), float(intercept[0]), has_intercept


def _linear_linearize(model: Any, X: Any) -> _Parts:
    coef, intercept, has_intercept = _linear_parameters(model)
    features = _validate_X(model, X)
    prediction = np.ravel(np.asarray(model.predict(X), dtype=np.float64))
    # The Jacobian [X, 1] is only right if the model predicts X @ coef_ + intercept_ (not a
    # GLM with a non-identity link, not PLS with internal centring).
    linear = features @ coef + intercept
    scale = 1.0 + np.max(np.abs(prediction), initial=0.0)
    if not np.allclose(linear, prediction, rtol=1e-5, atol=1e-6 * scale):
        raise TypeError(
            f"{type(model).__name__}.predict is not X @ coef_ + intercept_ (a non-identity "
            f"link or internal preprocessing?); supported models are {_SUPPORTED}."
        )
    n = features.shape[0]
    columns = [features, np.ones((n, 1))] if has_intercept else [features]
    jacobian = np.hstack(columns)
    penalized = np.ones(jacobian.shape[1], dtype=bool)
    if has_intercept:
        penalized[-1] = False
    parameters = np.append(coef, intercept) if has_intercept else coef
    return jacobian, prediction, penalized, parameters


# --------------------------------------------------------------------------------------------
# MLPRegressor (numpy forward and backward passes)
# --------------------------------------------------------------------------------------------


def _activation(name: str, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return g(z) and g'(z) for scikit-learn's hidden activations."""
    if name == "identity":
        return z, np.ones_like(z)
    if name == "logistic":
        s = expit(z)  # as scikit-learn computes it
        return s, s * (1.0 - s)
    if name == "tanh":
        t = np.tanh(z)
        return t, 1.0 - t * t
    if name == "relu":
        return np.maximum(z, 0.0), (z > 0).astype(z.dtype)
    raise ValueError(f"unsupported MLP activation {name!r}.")


def check_squared_error_loss(model: Any, error: type[Exception] = ValueError) -> None:
    """Refuse, before any training, an MLPRegressor whose loss gives a non-identity output
    (``loss="poisson"``: an exponential), which no linearisation here reads; ``error``
    is the exception the caller raises for an unsupported model. A loss that is no loss
    name (``MLPRegressor((8,))`` sets ``loss=(8,)``) is a ValueError naming it."""
    loss = getattr(model, "loss", "squared_error") if isinstance(model, MLPRegressor) else None
    if loss is None or loss == "squared_error":
        return
    if loss == "poisson":
        raise error(
            f"MLPRegressor(loss={loss!r}) has a non-identity output (exp); only "
            "loss='squared_error' networks are supported."
        )
    sizes = (
        " (layer sizes go in hidden_layer_sizes=, MLPRegressor's first positional "
        "parameter is `loss`)"
        if not isinstance(loss, str)
        else ""
    )
    raise ValueError(f"MLPRegressor(loss={loss!r}): `loss` must be 'squared_error' here{sizes}.")


def _check_mlp(model: MLPRegressor) -> None:
    check_is_fitted(model)
    if model.n_outputs_ != 1:
        raise ValueError(
            f"`estimator`: MLPRegressor has {model.n_outputs_} outputs; only scalar regression "
            "is supported."
        )
    if model.out_activation_ != "identity":
        raise ValueError(
            f"MLPRegressor output activation is {model.out_activation_!r} (loss="
            f"{getattr(model, 'loss', 'squared_error')!r}); only the identity output "
            "(loss='squared_error') can be linearised here."
        )


def _mlp_linearize(model: MLPRegressor, X: Any, kind: Curvature) -> _Parts:
    _check_mlp(model)
    A = _validate_X(model, X)
    n = A.shape[0]
    weights = [np.asarray(w, dtype=np.float64) for w in model.coefs_]
    biases = [np.asarray(b, dtype=np.float64) for b in model.intercepts_]
    n_layers = len(weights)

    # Forward: activations[l] = A_l (A_0 = X), derivatives[l] = g'(Z_l) for hidden layers.
    activations = [A]
    derivatives = []
    for layer in range(n_layers - 1):
        a, d = _activation(model.activation, activations[-1] @ weights[layer] + biases[layer])
        activations.append(a)
        derivatives.append(d)
    prediction = (activations[-1] @ weights[-1] + biases[-1])[:, 0]
    # the layers are read, so the model must predict with them: a subclass may not (an
    # MLPRegressor itself does, also one whose layers were set by hand, without fit)
    own = (
        prediction
        if type(model) is MLPRegressor
        else np.ravel(np.asarray(model.predict(X), dtype=np.float64))
    )
    scale = 1.0 + np.max(np.abs(prediction), initial=0.0)
    if own.shape != prediction.shape or not np.allclose(
        own, prediction, rtol=1e-5, atol=1e-6 * scale
    ):
        raise TypeError(
            f"{type(model).__name__}.predict is not the forward pass of its coefs_ and "
            "intercepts_ (a subclass with its own predict or fit?), so it cannot be "
            f"linearised from its layers; supported models are {_SUPPORTED}."
        )

    if kind is Curvature.LAST_LAYER:
        jacobian = np.hstack([activations[-1], np.ones((n, 1))])
        penalized = np.ones(jacobian.shape[1], dtype=bool)
        penalized[-1] = False
        return jacobian, prediction, penalized, np.append(weights[-1].ravel(), biases[-1])

    # Backward for a scalar output: delta_L = 1, delta_l = (delta_{l+1} W_{l+1}^T) * g'(Z_l);
    # df/dW_l = outer(A_{l-1}, delta_l) per row (C order of coefs_[l]), df/db_l = delta_l.
    sizes = [w.size + b.size for w, b in zip(weights, biases, strict=True)]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    jacobian = np.empty((n, offsets[-1]))
    penalized = np.zeros(offsets[-1], dtype=bool)
    delta = np.ones((n, 1))
    for layer in range(n_layers - 1, -1, -1):
        start, n_in, n_out = offsets[layer], *weights[layer].shape
        stop_w = start + n_in * n_out
        block = activations[layer][:, :, None] * delta[:, None, :]
        jacobian[:, start:stop_w] = block.reshape(n, n_in * n_out)
        jacobian[:, stop_w : offsets[layer + 1]] = delta
        penalized[start:stop_w] = True
        if layer > 0:
            delta = (delta @ weights[layer].T) * derivatives[layer - 1]
    parameters = np.concatenate(
        [np.append(w.ravel(), b) for w, b in zip(weights, biases, strict=True)]
    )
    return jacobian, prediction, penalized, parameters


# --------------------------------------------------------------------------------------------
# torch modules (torch.func; torch is imported only when a module is passed)
# --------------------------------------------------------------------------------------------


def _torch_is_affine(module: Any) -> bool:
    """True for a torch model linear in its parameters: a single ``nn.Linear``, bare or in
    an ``nn.Sequential`` whose other layers are ``nn.Flatten`` or ``nn.Identity`` (two
    linear layers multiply their weights)."""
    torch = sys.modules["torch"]
    nn = torch.nn
    layers = list(module) if type(module) is nn.Sequential else [module]
    # exact types (a subclass may change forward) without parametrisations (weight_norm)
    plain = all(
        type(layer) in (nn.Linear, nn.Flatten, nn.Identity)
        and not torch.nn.utils.parametrize.is_parametrized(layer)
        for layer in layers
    )
    return plain and sum(type(layer) is nn.Linear for layer in layers) == 1


def _torch_parameters(module: Any, kind: Curvature) -> list[tuple[str, Any]]:
    """Trainable (name, parameter) pairs to differentiate, names relative to ``module``."""
    params = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
    if not params:
        raise ValueError(f"{type(module).__name__} has no trainable parameters.")
    if kind is Curvature.FULL:
        return params

    def trainable(m: Any) -> bool:
        return any(p.requires_grad for p in m.parameters())

    # Descend into the last child with trainable parameters until a module has none such.
    prefix, current = "", module
    while True:
        children = [(name, child) for name, child in current.named_children() if trainable(child)]
        if not children:
            break
        name, current = children[-1]
        prefix = f"{prefix}{name}."
    return [(name, p) for name, p in params if name.startswith(prefix)]


def last_layer_name(module: Any) -> str:
    """The name of the child whose parameters ``curvature='last_layer'`` takes in a torch
    module (the last child with trainable parameters, descended into)."""
    name = _torch_parameters(module, Curvature.LAST_LAYER)[0][0]
    return name.rpartition(".")[0] or name


def _torch_linearize(module: Any, X: Any, kind: Curvature) -> _Parts:
    import torch
    from torch.func import functional_call, jacrev, vmap

    params = _torch_parameters(module, kind)
    reference = params[0][1]
    inputs = torch.as_tensor(  # a writable copy (a DataFrame's array can be read-only)
        np.array(X, dtype=np.float64), dtype=reference.dtype, device=reference.device
    )
    if inputs.ndim < 1 or inputs.shape[0] == 0:
        raise ValueError("X must have at least one row.")
    n = inputs.shape[0]
    names = [name for name, _ in params]
    values = {name: p.detach() for name, p in params}
    n_params = sum(int(p.numel()) for _, p in params)

    def output(theta: dict[str, Any], row: Any) -> tuple[Any, Any]:
        value = functional_call(module, theta, (row.unsqueeze(0),)).reshape(())
        return value, value  # the row's own output, kept to compare with the batch's

    row_jacobian = vmap(jacrev(output, has_aux=True), in_dims=(None, 0))
    batch = max(1, min(n, _TORCH_BATCH_ENTRIES // max(n_params, 1)))
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        with torch.no_grad():
            prediction = module(inputs)
            if prediction.numel() != n:
                raise ValueError(
                    f"{type(module).__name__} returns {prediction.numel() // n} values per row; "
                    "only scalar regression is supported."
                )
            jacobian = np.empty((n, n_params))
            alone = np.empty(n)
            for start in range(0, n, batch):
                rows = inputs[start : start + batch]
                try:
                    blocks, outputs = row_jacobian(values, rows)
                except RuntimeError as error:
                    raise ValueError(
                        f"`estimator`: torch.func could not differentiate "
                        f"{type(module).__name__} one row at a time ({str(error)[:200]}); its "
                        "forward must be a function of the parameters and the input row "
                        "(no .item(), data-dependent branches or in-place buffer updates)."
                    ) from error
                flat = torch.cat([blocks[name].reshape(rows.shape[0], -1) for name in names], 1)
                jacobian[start : start + rows.shape[0]] = flat.cpu().double().numpy()
                alone[start : start + rows.shape[0]] = outputs.cpu().double().numpy()
    finally:
        for m, training in modes:
            m.training = training
    batched = prediction.reshape(n).cpu().double().numpy()
    tolerance = 1e3 * float(torch.finfo(reference.dtype).eps)
    if not np.allclose(alone, batched, rtol=tolerance, atol=tolerance * np.abs(batched).max()):
        row = int(np.argmax(np.abs(alone - batched)))
        raise ValueError(
            f"`estimator`: {type(module).__name__} gives row {row} the output "
            f"{alone[row]:.6g} alone but {batched[row]:.6g} in a batch of {n}: its forward "
            "mixes rows (batch statistics?), so the per-row Jacobians do not describe its "
            "predictions. Make forward act on each row on its own."
        )
    penalized = np.concatenate(
        [np.full(int(p.numel()), p.ndim >= 2, dtype=bool) for _, p in params]
    )
    prediction = batched
    parameters = np.concatenate([p.detach().reshape(-1).cpu().double().numpy() for _, p in params])
    return jacobian, prediction, penalized, parameters
