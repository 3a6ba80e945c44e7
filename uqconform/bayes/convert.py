"""Fitted estimators as `Network` layer lists, and their per-output Jacobians.

* scikit-learn `MLPRegressor` / `MLPClassifier` (also inside `sklearn.frozen.FrozenEstimator`
  or as the last step of a `sklearn.pipeline.Pipeline`, whose earlier steps transform ``X``);
  ``coefs_[l]`` is already ``(n_in, n_out)``. A regression network may also sit in a
  `sklearn.compose.TransformedTargetRegressor` with ``transformer=StandardScaler()``: the
  network then predicts the standardised target ``z`` and ``y = shift + scale * z``
  (`NetworkView.target_shift`, `NetworkView.target_scale`).
* ``torch.nn.Sequential`` of ``Linear`` / ``ReLU`` / ``GELU`` / ``Tanh`` / ``Sigmoid`` /
  ``BatchNorm1d`` / ``LayerNorm`` / ``Identity`` (`torch` is optional and imported only when
  such a module is passed): ``Linear.weight`` ``(out, in)`` is transposed.

Jacobians of every output with respect to the parameter vector come from
`uqconform.linearize.linearize` (the numpy backward pass of an ``MLPRegressor``): one scalar
output at a time, through a single-output copy of the network.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from sklearn.compose import TransformedTargetRegressor
from sklearn.frozen import FrozenEstimator
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted, validate_data

from uqconform._validation import (
    named_as_fitted,
    non_finite_kinds,
    refuse_model_class,
    refuse_non_numeric_features,
)
from uqconform.bayes.network import Activation, Dense, Network
from uqconform.bayes.torch_network import from_torch
from uqconform.linearize import (
    check_squared_error_loss,
    check_standard_target,
    linearize,
    standard_target_scaling,
)
from uqconform.linearize import is_torch_module as _is_torch_module

__all__ = ["NetworkView", "as_network", "output_jacobians"]

_SUPPORTED = (
    "MLPRegressor, MLPClassifier (optionally in a FrozenEstimator or as the last step of a "
    "Pipeline; an MLPRegressor also in a TransformedTargetRegressor with "
    "transformer=StandardScaler()) or a torch.nn.Sequential of "
    "Linear/ReLU/GELU/Tanh/Sigmoid/BatchNorm1d/LayerNorm"
)


@dataclass
class NetworkView:
    """A fitted model seen as a `Network` (picklable: no closures).

    Attributes
    ----------
    network : Network
    steps : list
        Fitted transformers applied to ``X`` first (the Pipeline's earlier steps).
    task : {"regression", "classification"}
    classes : ndarray or None
        The classifier's labels, in the order of its probability columns.
    model : object
        The innermost model (the MLP or torch module).
    target_shift, target_scale : float
        Regression: the network predicts ``z`` and the user's target is
        ``y = target_shift + target_scale * z`` (a `TransformedTargetRegressor` with a
        ``StandardScaler``); 0 and 1 otherwise.
    """

    network: Network
    steps: list[Any]
    task: str
    classes: NDArray | None
    model: Any
    target_shift: float = 0.0
    target_scale: float = 1.0

    def network_target(self, y: ArrayLike) -> NDArray:
        """The target on the network's scale, ``(y - target_shift) / target_scale``, as
        float64 (a list or a nullable Series too)."""
        values = np.asarray(y, dtype=np.float64)
        if self.target_shift == 0.0 and self.target_scale == 1.0:
            return values
        return (values - self.target_shift) / self.target_scale

    @property
    def entry(self) -> Any:
        """What first reads ``X``: the first pipeline step, else the network."""
        return self.steps[0] if self.steps else self.model

    def check_feature_names(self, X: Any) -> None:
        """scikit-learn's comparison of ``X``'s column names with those the network (or
        its pipeline) was fitted with: one warning on a mismatch, once per fit, instead
        of one per pass through the network."""
        if not _is_torch_module(self.entry):
            validate_data(self.entry, X, skip_check_array=True, reset=False)

    def transform(self, X: Any) -> NDArray:
        """The network's float64 input for the user's ``X``.

        ``X`` is named as the network's first step was fitted (a DataFrame's names are
        dropped for a network fitted on an array, an array gets the fitted names): the
        mismatch is reported by `check_feature_names` and the wrappers' own checks.
        """
        original = X  # with its column names, for the messages
        if not _is_torch_module(self.entry):
            X = named_as_fitted(self.entry, X)
        given = X
        try:
            for step in self.steps:
                X = step.transform(X)
        except ValueError as error:  # e.g. a scaler's "Input X contains infinity ..."
            if non_finite_kinds(given)[1]:
                raise ValueError(network_infinity_message(given)) from error
            raise
        check_network_input(X, given)
        try:
            if _is_torch_module(self.model):
                return _float_rows(X, self.network.dense_layers[0].n_in)
            X = validate_data(self.model, X, reset=False, accept_sparse=True, dtype=np.float64)
        except ValueError as error:  # numpy's bare "could not convert string to float"
            if not self.steps:  # (text out of a pipeline's steps is theirs to explain)
                refuse_non_numeric_features(original, NETWORK, "pipeline", error)
            raise
        if hasattr(X, "toarray"):
            X = X.toarray()
        return np.asarray(X, dtype=np.float64)


#: What cannot take columns that are not numbers, in `refuse_non_numeric_features`'s message.
NETWORK = "a network (and its linearisation)"

#: What NaN in a network's input gets: no network takes it, and none that does could be
#: linearised.
NETWORK_NAN_MESSAGE = (
    "`X` contains NaN, which a network (and its linearisation) cannot take: impute or drop "
    "the missing values first (e.g. sklearn.impute.SimpleImputer as a pipeline step "
    "before the network)."
)


def network_infinity_message(X: Any) -> str:
    """What infinity in a network's input gets: the columns holding it and what to do.

    Columns, not rows: `LinearizedPredictive.fit` passes subsets of the user's rows (the
    network's and the validation part), whose row numbers would mislead.

    Examples
    --------
    >>> print(network_infinity_message(np.array([[0.0, 1.0], [2.0, -np.inf]])))
    `X` contains infinity (in column 1), which a network (and its linearisation) cannot
    take: clip the values to a finite range, or set them to NaN and impute them (e.g.
    sklearn.impute.SimpleImputer as a pipeline step before the network).
    """
    columns = _infinite_columns(X)
    if not columns:
        where = ""
    elif len(columns) == 1:
        where = f" (in column {columns[0]!r})"
    else:
        where = f" (in {len(columns)} columns, the first {columns[0]!r})"
    return (
        f"`X` contains infinity{where}, which a network (and its linearisation) cannot "
        "take: clip the values to a finite range, or set them to NaN and impute them (e.g. "
        "sklearn.impute.SimpleImputer as a pipeline step before the network)."
    )


def _infinite_columns(X: Any) -> list[Any]:
    """The columns of ``X`` holding +inf or -inf: a DataFrame's names, else positions
    (empty when ``X`` is not a numeric table)."""
    try:
        if sparse.issparse(X):
            coo = sparse.coo_matrix(X)
            return np.unique(coo.col[np.isinf(coo.data)]).tolist()
        if hasattr(X, "select_dtypes"):  # a DataFrame: its numeric columns, by name
            numeric = X.select_dtypes("number")
            values = numeric.to_numpy(dtype=np.float64, na_value=np.nan)
            return numeric.columns[np.isinf(values).any(axis=0)].tolist()
        array = np.asarray(X, dtype=np.float64)
        if array.ndim != 2:
            return []
        return np.flatnonzero(np.isinf(array).any(axis=0)).tolist()
    except (TypeError, ValueError):
        return []


#: What infinity made by a pipeline step from an ``X`` without any gets.
STEP_INFINITY_MESSAGE = (
    "`X` holds no infinity, but a pipeline step before the network produced some (a log of "
    "0, say), which a network (and its linearisation) cannot take: make that step's output "
    "finite (e.g. clip it, or use np.log1p)."
)


def check_network_input(X: Any, given: Any = None) -> None:
    """ValueError naming ``X`` and what to do when a network's input holds NaN or infinity
    (scikit-learn's messages would suggest a model that takes NaN, or say nothing of what
    to do).

    ``given`` is the user's ``X`` when ``X`` is what a pipeline's steps made of it: the
    columns holding infinity are then named in ``given`` (the steps' output has other
    columns: a one-hot encoder's, say), and infinity only in their output is put down to a
    step.
    """
    missing, infinite = non_finite_kinds(X)
    if missing:
        raise ValueError(NETWORK_NAN_MESSAGE)
    if infinite:
        if given is None or given is X:
            raise ValueError(network_infinity_message(X))
        if non_finite_kinds(given)[1]:
            raise ValueError(network_infinity_message(given))
        raise ValueError(STEP_INFINITY_MESSAGE)


def transforms_input(estimator: Any) -> bool:
    """Whether pipeline steps transform ``X`` before the network reads it: a `Pipeline`
    (also in a `FrozenEstimator` or a `TransformedTargetRegressor`) with a step before its
    last other than ``"passthrough"`` or None. Such steps may make infinite values finite
    (a clip, an imputer), so only their output can be judged."""
    return any(
        isinstance(model, Pipeline)
        and any(step is not None and not isinstance(step, str) for _, step in model.steps[:-1])
        for model in _layers(estimator)
    )


def as_network(estimator: Any) -> NetworkView:
    """The `Network` of a fitted MLP or torch ``Sequential`` and how to feed it.

    A `TransformedTargetRegressor` with ``transformer=StandardScaler()`` is read through:
    the view holds its fitted regressor's network and the affine map back to ``y``
    (``target_shift``, ``target_scale``).

    Raises
    ------
    TypeError
        For other models, other target transforms, and unsupported layers or activations
        (named in the message). Checked before fitting, so an unfitted model that could
        never be read raises this rather than ``NotFittedError``.
    ValueError
        For a regression network with several outputs (the predictives and the noise are
        those of one target).
    sklearn.exceptions.NotFittedError
        If the scikit-learn model is not fitted.
    """
    steps: list[Any] = []
    model = estimator
    shift, scale, transformed = 0.0, 1.0, False
    while True:
        if isinstance(model, FrozenEstimator):
            model = model.estimator
        elif isinstance(model, Pipeline):
            _check_final_kind(model)  # before NotFittedError: training would not help
            check_is_fitted(model)
            # a copy: the user's pipeline refitted in place must not move this view
            steps = [*steps, copy.deepcopy(model[:-1])] if len(model.steps) > 1 else steps
            model = model.steps[-1][1]
        elif isinstance(model, TransformedTargetRegressor):
            inner_shift, inner_scale = _target_scaling(model)
            # y = shift + scale * u and u = inner_shift + inner_scale * z
            shift, scale = shift + scale * inner_shift, scale * inner_scale
            transformed = True
            model = model.regressor_
        else:
            break
    if _is_torch_module(model):
        # a copy, as Dense copies the weights: a module trained further in place must not
        # move the Jacobians (GLM path) away from the posterior and the mean
        model = copy.deepcopy(model)
        view = NetworkView(from_torch(model), steps, "regression", None, model, shift, scale)
        _check_single_output(view)
        return view
    _check_final_kind(model)  # also an unfitted model's loss: training would not help
    if transformed and isinstance(model, MLPClassifier):
        raise TypeError(
            "a TransformedTargetRegressor must wrap a regression network (MLPRegressor), "
            "got an MLPClassifier."
        )
    check_is_fitted(model, "coefs_")
    layers: list[Any] = []
    for index, (W, b) in enumerate(zip(model.coefs_, model.intercepts_, strict=True)):
        if index:
            layers.append(Activation(model.activation))
        layers.append(Dense(W, b))
    if isinstance(model, MLPClassifier):
        if model.out_activation_ not in ("softmax", "logistic") or (
            model.out_activation_ == "logistic" and model.n_outputs_ != 1
        ):
            raise TypeError(
                "multi-label MLPClassifier is not supported: only binary and multi-class."
            )
        network = Network(layers, output=model.out_activation_)
        task, classes = "classification", np.asarray(model.classes_)
    else:
        if model.out_activation_ != "identity":
            raise TypeError(f"MLPRegressor output {model.out_activation_!r} is not supported.")
        network, task, classes = Network(layers, output="identity"), "regression", None
    view = NetworkView(network, steps, task, classes, model, shift, scale)
    _check_single_output(view)
    return view


def _check_single_output(view: NetworkView) -> None:
    """ValueError for a regression network with several outputs: the predictives and the
    noise are those of one target (a 1-D ``y``)."""
    if view.task == "regression" and view.network.n_outputs != 1:
        raise ValueError(
            f"`estimator`: the network has {view.network.n_outputs} outputs; a regression "
            "posterior and predictive need one (y must be 1-D): use a network with a single "
            "output."
        )


def _target_scaling(model: TransformedTargetRegressor) -> tuple[float, float]:
    """``(shift, scale)`` of a fitted `TransformedTargetRegressor` with a ``StandardScaler``:
    ``y = shift + scale * regressor_(x)``.

    The map `uqconform.linearize.standard_target_scaling` reads (for ACP-GN too). The
    transform and the kind of regressor are checked first (TypeError), then whether it is
    fitted (NotFittedError), so an unfitted model that could never be read is refused before
    any training.
    """
    check_standard_target(model)
    if not hasattr(model, "regressor_"):
        _check_regressor_kind(model.regressor)
    check_is_fitted(model)
    return standard_target_scaling(model)


def _layers(model: Any) -> Iterator[Any]:
    """``model`` and the models its FrozenEstimator, Pipeline and TransformedTargetRegressor
    wrappers hold, outermost first, read without fitting (the unfitted ``regressor`` of a
    target transform)."""
    yield model
    while isinstance(model, (FrozenEstimator, Pipeline, TransformedTargetRegressor)):
        if isinstance(model, FrozenEstimator):
            model = model.estimator
        elif isinstance(model, Pipeline):
            model = model.steps[-1][1]
        else:
            model = model.regressor
        yield model


def _innermost(model: Any) -> Any:
    """The model at the end of FrozenEstimator, Pipeline and TransformedTargetRegressor
    wrappers (`_layers`)."""
    *_, last = _layers(model)
    return last


def _check_final_kind(model: Any) -> None:
    """TypeError unless the model at the end of the wrappers is an MLP or a torch module."""
    model = _innermost(model)
    refuse_model_class(model)
    if not (_is_torch_module(model) or isinstance(model, (MLPRegressor, MLPClassifier))):
        name = "None" if model is None else type(model).__name__
        raise TypeError(f"cannot build a network from {name}; use {_SUPPORTED}.")
    check_squared_error_loss(model, TypeError)


def _check_regressor_kind(regressor: Any) -> None:
    """TypeError unless the (unfitted) regressor of a `TransformedTargetRegressor` ends in an
    ``MLPRegressor`` (through FrozenEstimator and Pipeline)."""
    model = regressor
    while isinstance(model, (FrozenEstimator, Pipeline)):
        model = model.estimator if isinstance(model, FrozenEstimator) else model.steps[-1][1]
    if not isinstance(model, MLPRegressor):
        name = "None (LinearRegression)" if model is None else type(model).__name__
        raise TypeError(
            f"cannot build a network from a TransformedTargetRegressor whose regressor is "
            f"{name}; its regressor must be an MLPRegressor (optionally in a Pipeline)."
        )


def _float_rows(X: Any, n_features: int) -> NDArray:
    array = np.asarray(X, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != n_features:
        raise ValueError(
            f"X must have shape (n, {n_features}) for this network, got {array.shape}."
        )
    check_network_input(array)  # a torch tensor or a list is only an array here
    return array


def _single_output_mlp(network: Network, activation: str, output: int) -> MLPRegressor:
    """A fitted scalar ``MLPRegressor`` computing output ``output`` of ``network``."""
    dense = network.dense_layers
    proxy = MLPRegressor(hidden_layer_sizes=tuple(d.n_out for d in dense[:-1]))
    proxy.activation = activation
    proxy.coefs_ = [d.weight for d in dense[:-1]] + [dense[-1].weight[:, output : output + 1]]
    proxy.intercepts_ = [d.bias for d in dense[:-1]] + [dense[-1].bias[output : output + 1]]
    proxy.n_outputs_ = 1
    proxy.out_activation_ = "identity"
    proxy.n_features_in_ = dense[0].n_in
    return proxy


def output_jacobians(
    view: NetworkView, Xt: NDArray, *, rows: int | None = None
) -> Iterator[NDArray]:
    """Yield, per block of ``rows`` rows, the Jacobian ``(K, rows, P)`` of every output.

    Parameter order is the `Network`'s (layer by layer, ``W.ravel()`` then ``b``); ``Xt`` is
    the network input (already transformed).
    """
    network = view.network
    dense = network.dense_layers
    K, P = network.n_outputs, network.n_parameters
    last = network.parameter_slices()[-1]
    n_in = dense[-1].n_in
    if _is_torch_module(view.model):
        yield from _torch_jacobians(view, Xt, rows)
        return
    if any(not isinstance(layer, (Dense, Activation)) for layer in network.layers):
        raise TypeError("Jacobians need a network of Dense and Activation layers.")
    activations = {layer.name for layer in network.layers if isinstance(layer, Activation)}
    activation = activations.pop() if activations else "identity"
    proxies = [_single_output_mlp(network, activation, k) for k in range(K)]  # sklearn
    if rows is None:  # about 32 MB of float64 per block
        rows = max(1, min(512, 2**22 // max(1, K * P)))
    for start in range(0, Xt.shape[0], rows):
        block = Xt[start : start + rows]
        out = np.zeros((K, block.shape[0], P))
        for k, proxy in enumerate(proxies):  # a loop over outputs, not rows
            J = linearize(proxy, block).jacobian
            out[k, :, : last.start] = J[:, : last.start]
            weights = J[:, last.start : last.start + n_in]
            out[k, :, last.start + k : last.start + n_in * K : K] = weights
            out[k, :, last.start + n_in * K + k] = J[:, -1]
        yield out


def _torch_jacobians(view: NetworkView, Xt: NDArray, rows: int | None) -> Iterator[NDArray]:
    """Per-output Jacobians of a torch ``Sequential`` in the layer list's parameter order."""
    import torch

    from uqconform.bayes.torch_network import torch_parameter_index

    class _Output(torch.nn.Module):
        def __init__(self, module: Any, k: int):
            super().__init__()
            self.module, self.k = module, k

        def forward(self, x: Any) -> Any:
            return self.module(x)[:, self.k]

    network = view.network
    K, P = network.n_outputs, network.n_parameters
    index = torch_parameter_index(view.model, trainable_only=True)
    rows = rows or max(1, min(512, 2**22 // max(1, K * P)))
    wrappers = [_Output(view.model, k) for k in range(K)]
    for start in range(0, Xt.shape[0], rows):
        block = Xt[start : start + rows]
        out = np.empty((K, block.shape[0], P))
        for k, wrapper in enumerate(wrappers):  # a loop over outputs, not rows
            out[k] = linearize(wrapper, block).jacobian[:, index]
        yield out
