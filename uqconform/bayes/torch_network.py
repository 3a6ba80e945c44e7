"""torch modules as numpy layer lists (torch is optional: ``pip install "uqconform[torch]"``).

* `from_torch`: an ``nn.Sequential`` (nested ones are flattened) of ``Linear``, ``ReLU``,
  ``GELU``, ``Tanh``, ``Sigmoid``, ``BatchNorm1d`` (evaluation mode: running statistics),
  ``LayerNorm``, ``Identity`` and ``Dropout`` (the identity at prediction time) as a
  `Network`. ``Linear.weight`` is ``(out, in)``; the layer list stores ``(in, out)``.
  Tied (shared) ``Linear`` layers are refused.
* `from_torch_encoder_layer`: an ``nn.TransformerEncoderLayer`` (``batch_first=True``) as a
  `TransformerBlock` with value-path attention moments.
* `torch_parameter_index`: where each parameter of the layer list sits in
  ``torch.nn.utils.parameters_to_vector(module.parameters())``, to read a posterior computed
  by torch code (e.g. laplace-torch's ``posterior_variance``) in the layer list's order.

Weights are copied to float64 numpy arrays (no autograd is involved in the moments, so they
work under ``torch.no_grad()``). Only the ``Linear`` layers are Bayesian; normalisation
parameters are kept at their trained values.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from uqconform._warnings import warn_user
from uqconform.bayes.attention import TransformerBlock
from uqconform.bayes.network import Activation, Affine, Dense, LayerNorm, Network

__all__ = ["from_torch", "from_torch_encoder_layer", "require_torch", "torch_parameter_index"]

TORCH_HINT = 'torch is required for torch modules: pip install "uqconform[torch]"'


def require_torch() -> Any:
    """The torch module, or an ImportError naming the extra to install."""
    try:
        import torch
    except ImportError as error:  # pragma: no cover - torch is installed in CI
        raise ImportError(TORCH_HINT) from error
    return torch


def _array(tensor: Any) -> NDArray:
    return tensor.detach().cpu().double().numpy().copy()


def _flatten(module: Any, torch: Any) -> list[Any]:
    """The leaf modules of ``module`` in order (nested ``Sequential`` containers opened);
    TypeError for ``Linear`` layers that share parameters (see `_refuse_tied`)."""
    leaves = _leaves(module, torch)
    _refuse_tied(leaves, torch)
    return leaves


def _leaves(module: Any, torch: Any) -> list[Any]:
    _refuse_own_forward(module, torch)
    if isinstance(module, torch.nn.Sequential):
        return [leaf for child in module for leaf in _leaves(child, torch)]
    return [module]


def _refuse_own_forward(module: Any, torch: Any) -> None:
    """TypeError when ``module`` computes something its layers do not say: a subclass with
    its own ``forward`` (a skip connection, an output scale, a masked weight) or a forward
    hook. The layer list is read from the layers alone, so its predictive would not be the
    module's output (and the Jacobians, taken from the module, would not match it)."""
    kind: Any = type(module)
    # the nearest torch class, past the class a parametrization (weight_norm) makes in
    # torch.nn.utils.parametrize above the user's own
    base = next(
        parent
        for parent in kind.__mro__
        if parent.__module__.startswith("torch.")
        and not parent.__module__.startswith("torch.nn.utils.parametrize")
    )
    # a layer of the user's own (a Module subclass) is named unsupported by `_layer`
    if base is not torch.nn.Module and kind.forward is not base.forward:
        raise TypeError(
            f"{type(module).__name__} is a subclass of {base.__name__} with its own forward: "
            "the predictive is read from the layers alone and would not be the module's "
            f"output. Use a plain {base.__name__} of the supported layers (write a skip "
            "connection or an output scale outside the converted network)."
        )
    hooks = torch.nn.modules.module
    if (
        module._forward_hooks
        or module._forward_pre_hooks
        or getattr(hooks, "_global_forward_hooks", None)
        or getattr(hooks, "_global_forward_pre_hooks", None)
    ):
        raise TypeError(
            f"{type(module).__name__} has a forward hook (or a global one is registered): "
            "the predictive is read from the layers alone and would not be the module's "
            "output. Remove the hook (handle.remove()) before converting; the older "
            "torch.nn.utils.weight_norm and spectral_norm, and torch.nn.utils.prune, work "
            "by hooks: fold them into the weight first (torch.nn.utils.remove_weight_norm("
            "layer), remove_spectral_norm(layer), prune.remove(layer, 'weight'))."
        )


def _refuse_tied(leaves: list[Any], torch: Any) -> None:
    """TypeError naming the first ``Linear`` layer whose weight or bias was met before: the
    same module (or ``Sequential`` block) used twice, or a parameter assigned to two layers.
    The layer list would hold independent copies, each with its own posterior, which is not
    the module's posterior. Other modules may repeat (a shared ``ReLU`` or ``LayerNorm`` is
    exact: only ``Linear`` layers are Bayesian)."""
    seen: set[int] = set()
    for leaf in leaves:
        if not isinstance(leaf, torch.nn.Linear):
            continue
        # the registered parameters (a parametrized weight, weight_norm's, is built anew at
        # each access: its id is reused by the next layer's)
        parameters = {id(p) for p in leaf.parameters()}
        if parameters & seen:
            raise TypeError(
                f"{leaf} appears more than once in the module (the same layer used twice, "
                "or a weight or bias assigned to two Linear layers): tied (shared) layers "
                "are not supported, since the posterior would treat each use as an "
                "independent layer. Give each use its own Linear layer."
            )
        seen |= parameters


_NO_BIAS = (
    "Linear layers without bias (bias=False) are not supported: the posterior covers a "
    "weight matrix and a bias per layer."
)


def _layer(module: Any, torch: Any) -> Any | None:
    """The numpy layer of one torch module (None: the identity)."""
    nn = torch.nn
    if isinstance(module, nn.Linear):
        if module.bias is None:  # a zero bias would get posterior variance it does not have
            raise TypeError(_NO_BIAS)
        return Dense(_array(module.weight).T, _array(module.bias))
    if isinstance(module, (nn.Identity, nn.Dropout)):
        return None
    if isinstance(module, nn.ReLU):
        return Activation("relu")
    if isinstance(module, nn.Tanh):
        return Activation("tanh")
    if isinstance(module, nn.Sigmoid):
        return Activation("logistic")
    if isinstance(module, nn.GELU):
        if module.approximate != "none":
            raise TypeError("GELU(approximate='tanh') is not supported; use the exact GELU.")
        return Activation("gelu")
    if isinstance(module, nn.BatchNorm1d):
        if module.running_mean is None:
            raise TypeError("BatchNorm1d without running statistics is not supported.")
        if module.training:
            warn_user(
                "BatchNorm1d is in training mode: the predictive uses its running statistics "
                "(evaluation mode), while the module itself would use batch statistics; call "
                "module.eval() first.",
                UserWarning,
            )
        inv = 1.0 / np.sqrt(_array(module.running_var) + module.eps)
        gamma = _array(module.weight) if module.affine else np.ones_like(inv)
        beta = _array(module.bias) if module.affine else np.zeros_like(inv)
        return Affine(gamma * inv, beta - _array(module.running_mean) * gamma * inv)
    if isinstance(module, nn.LayerNorm):
        if len(module.normalized_shape) != 1:
            raise TypeError("LayerNorm over more than the last axis is not supported.")
        width = module.normalized_shape[0]
        gamma = _array(module.weight) if module.weight is not None else np.ones(width)
        beta = _array(module.bias) if module.bias is not None else np.zeros(width)
        return LayerNorm(gamma, beta, module.eps)
    raise TypeError(
        f"unsupported torch layer {type(module).__name__}; supported: Linear, ReLU, GELU, "
        "Tanh, Sigmoid, BatchNorm1d, LayerNorm, Identity, Dropout (in an nn.Sequential)."
    )


def from_torch(module: Any, output: str = "identity") -> Network:
    """The `Network` of a torch ``nn.Sequential`` (see the module docstring).

    Parameters
    ----------
    module : torch.nn.Sequential
    output : {"identity", "logistic", "softmax"}, default="identity"
        The link after the last layer (the module must return values or logits, not
        probabilities).

    Raises
    ------
    TypeError
        If a layer is not supported (named in the message), the module is not a
        ``Sequential``, a ``Linear`` layer's parameters are used more than once (tied
        weights: the same layer twice, or a weight assigned to two layers), or a module
        computes more than its layers say (a ``Sequential`` or ``Linear`` subclass with its
        own ``forward``, a forward hook).

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    >>> from_torch(net)
    Network([Dense(3, 4), Activation('relu'), Dense(4, 1)], output='identity')
    """
    torch = require_torch()
    if isinstance(module, torch.nn.TransformerEncoderLayer):
        raise TypeError(
            "a TransformerEncoderLayer has no Laplace posterior here; its one-pass moments "
            "come from from_torch_encoder_layer(layer) with a posterior block you supply."
        )
    if not isinstance(module, torch.nn.Sequential):
        raise TypeError(
            f"{type(module).__name__} is not an nn.Sequential; only sequential networks can "
            "be converted (wrap the layers in nn.Sequential)."
        )
    layers = [_layer(child, torch) for child in _flatten(module, torch)]
    return Network([layer for layer in layers if layer is not None], output=output)


def torch_parameter_index(module: Any, *, trainable_only: bool = False) -> NDArray:
    """Index into ``parameters_to_vector(module.parameters())`` of each layer-list parameter.

    ``vector[torch_parameter_index(module)]`` reorders a torch-ordered vector (e.g. a
    posterior variance from laplace-torch with ``subset_of_weights="all"``) into the order
    of ``from_torch(module).parameters()``: per ``Linear``, the transposed weight row by row
    then the bias. Normalisation parameters are left out. ``trainable_only=True`` counts
    only parameters with ``requires_grad`` (the columns of `uqconform.linearize.linearize`).

    Parameters
    ----------
    module : torch.nn.Module
        The module given to `from_torch` (its ``Linear`` layers, in nested ``Sequential``
        containers too, give the layer list).
    trainable_only : bool, default=False
        Count only parameters with ``requires_grad`` in the torch-ordered vector (frozen
        parameters, e.g. of a normalisation layer, then take no positions in it).

    Returns
    -------
    ndarray of int of shape (n_parameters,)
        Position in the torch-ordered vector of each parameter of the layer list.

    Raises
    ------
    TypeError
        If ``module`` is not a torch module, a ``Linear`` layer has no bias or shares its
        parameters with another (tied weights), or (with ``trainable_only=True``) a
        ``Linear`` layer has frozen parameters.

    Examples
    --------
    >>> import torch
    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 3))
    >>> torch_parameter_index(net)
    array([0, 2, 4, 1, 3, 5, 6, 7, 8])
    >>> vector = torch.nn.utils.parameters_to_vector(net.parameters()).detach().numpy()
    >>> bool(np.allclose(vector[torch_parameter_index(net)], from_torch(net).parameters()))
    True
    """
    torch = require_torch()
    if not isinstance(module, torch.nn.Module):
        raise TypeError(
            f"`module` must be a torch.nn.Module (a Sequential of supported layers), got "
            f"{type(module).__name__}."
        )
    offsets: dict[int, int] = {}
    position = 0
    for parameter in module.parameters():
        if trainable_only and not parameter.requires_grad:
            continue
        offsets[id(parameter)] = position
        position += parameter.numel()
    index = []
    for child in _flatten(module, torch):
        if not isinstance(child, torch.nn.Linear):
            continue
        n_out, n_in = child.weight.shape
        if torch.nn.utils.parametrize.is_parametrized(child) or not isinstance(
            child.weight, torch.nn.Parameter
        ):  # weight_norm, spectral_norm: the weight is computed from other parameters
            raise TypeError(
                f"{type(child).__name__}({n_in}, {n_out}) computes its weight from other "
                "parameters (weight_norm, spectral_norm or another parametrization): the "
                "posterior covers plain weights. Fold the parametrization into the weight "
                "first: torch.nn.utils.parametrize.remove_parametrizations(layer, 'weight') "
                "(torch.nn.utils.remove_weight_norm(layer) for the older weight_norm)."
            )
        if any(p is not None and id(p) not in offsets for p in (child.weight, child.bias)):
            raise TypeError(
                f"{child} has parameters with requires_grad=False: the posterior covers the "
                "weights and biases of every Linear layer. Unfreeze them (a frozen layer's "
                "weights would need zero posterior variance, which is not supported)."
            )
        start = offsets[id(child.weight)]
        # ours: W[i, o] = weight[o, i] at i * n_out + o; torch: o * n_in + i
        grid = np.arange(n_in)[:, None] + n_in * np.arange(n_out)[None, :]
        index.append(start + grid.ravel())
        if child.bias is not None:
            index.append(offsets[id(child.bias)] + np.arange(n_out))
        else:
            raise TypeError(_NO_BIAS)
    return np.concatenate(index)


def from_torch_encoder_layer(layer: Any) -> TransformerBlock:
    """A `TransformerBlock` from an ``nn.TransformerEncoderLayer`` (``batch_first=True``).

    The block is the layer in evaluation mode (dropout off); a layer in training mode with
    dropout gets a warning to call ``layer.eval()`` (as ``BatchNorm1d`` in `from_torch`).

    Parameters
    ----------
    layer : torch.nn.TransformerEncoderLayer
        A ``batch_first=True`` encoder layer with a relu or gelu activation, equal query,
        key and value widths, and biases in its attention.

    Returns
    -------
    TransformerBlock
        The layer's weights as float64 numpy arrays (post-norm or pre-norm as
        ``layer.norm_first``).

    Raises
    ------
    TypeError
        If ``layer`` is not an ``nn.TransformerEncoderLayer``, is not ``batch_first``, its
        attention lacks biases or has unequal q/k/v widths, or its activation is neither
        relu nor gelu.

    Examples
    --------
    >>> import torch
    >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
    <torch._C.Generator object at ...>
    >>> enc = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    >>> block = from_torch_encoder_layer(enc.eval())
    >>> x = torch.randn(3, 5, 8)
    >>> with torch.no_grad():
    ...     same = np.allclose(block.forward(x.double().numpy()), enc(x).numpy(), atol=1e-5)
    >>> same
    True
    """
    torch = require_torch()
    if not isinstance(layer, torch.nn.TransformerEncoderLayer):
        raise TypeError(f"{type(layer).__name__} is not an nn.TransformerEncoderLayer.")
    for part in layer.modules():  # the block is read from the parts alone
        _refuse_own_forward(part, torch)
    attention = layer.self_attn
    if not attention.batch_first:
        raise TypeError("only batch_first=True encoder layers are supported.")
    if not attention._qkv_same_embed_dim or attention.in_proj_bias is None:
        raise TypeError("the attention needs equal q/k/v widths and biases.")
    dropout = [m.p for m in layer.modules() if isinstance(m, torch.nn.Dropout)]
    if layer.training and max([*dropout, attention.dropout]) > 0:  # as BatchNorm1d's
        warn_user(
            "the TransformerEncoderLayer is in training mode: the block is the layer in "
            "evaluation mode (no dropout), while the layer itself would drop units at random; "
            "call layer.eval() first.",
            UserWarning,
        )
    d = attention.embed_dim
    weight, bias = _array(attention.in_proj_weight), _array(attention.in_proj_bias)
    query, key, value = (
        Dense(weight[k * d : (k + 1) * d].T, bias[k * d : (k + 1) * d]) for k in range(3)
    )
    activation: Any = getattr(layer, "activation_relu_or_gelu", None)
    name = {1: "relu", 2: "gelu"}.get(activation)
    if name is None:
        raise TypeError("only relu or gelu encoder layers are supported.")
    # an encoder layer's projections are Linear and its norms LayerNorm: never None
    return TransformerBlock(
        query,
        key,
        value,
        cast(Dense, _layer(attention.out_proj, torch)),
        attention.num_heads,
        cast(LayerNorm, _layer(layer.norm1, torch)),
        cast(LayerNorm, _layer(layer.norm2, torch)),
        cast(Dense, _layer(layer.linear1, torch)),
        Activation(name),
        cast(Dense, _layer(layer.linear2, torch)),
        norm_first=layer.norm_first,
    )
