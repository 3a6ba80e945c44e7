"""Moments through a transformer encoder block with value-path attention (numpy).

Inputs are token sequences ``(n, T, d)``. As in the single-pass predictive of Li et al.
(ICLR 2025), the queries and keys are computed from the *mean* input, so the attention matrix
``A = softmax(Q K' / sqrt(d_head))`` is a constant; only the values are random. Head ``h``
outputs ``o_t = sum_s A_ts v_s``; its per-coordinate moments are exact for independent
tokens (see `attention_moments`). The value weights may carry a
Gaussian posterior (`DiagonalBlock`), and so may the two dense layers of the MLP; every other
weight is deterministic. Residual connections add means and variances (the branch is taken as
independent of its input), layer norms pass moments as their own ``statistics`` says
(``LayerNorm``'s default linearises them at the mean input; ``"fixed"``, the paper's, uses
the mean input's statistics), and variances are kept per coordinate (the diagonal pipeline).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import softmax

from uqconform._validation import check_int
from uqconform.bayes.network import (
    Activation,
    Dense,
    DiagonalBlock,
    LayerNorm,
    check_moment_mode,
)

__all__ = ["TransformerBlock", "attention_moments"]


def _heads(x: NDArray, n_heads: int) -> NDArray:
    """``(n, T, d)`` -> ``(n, H, T, d / H)``."""
    n, T, d = x.shape
    return x.reshape(n, T, n_heads, d // n_heads).transpose(0, 2, 1, 3)


def _merge(x: NDArray) -> NDArray:
    n, H, T, k = x.shape
    return x.transpose(0, 2, 1, 3).reshape(n, T, H * k)


def _tokens(layer_moments: Any, mean: NDArray, var: NDArray, *args: Any, **kwargs: Any):
    """Apply a per-row (2-D) moment function to every token of ``(n, T, d)`` moments."""
    n, T, d = mean.shape
    m, v = layer_moments(mean.reshape(n * T, d), var.reshape(n * T, d), *args, **kwargs)
    return m.reshape(n, T, -1), v.reshape(n, T, -1)


def attention_matrix(query: Dense, key: Dense, mean: NDArray, n_heads: int) -> NDArray:
    """``softmax(Q K' / sqrt(d_head))`` per head from the mean input: ``(n, H, T, T)``."""
    Q = _heads(query.forward(mean), n_heads)
    K = _heads(key.forward(mean), n_heads)
    scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(Q.shape[-1])
    return softmax(scores, axis=-1)


def attention_moments(
    attention: NDArray,
    value: Dense,
    mean: NDArray,
    var: NDArray,
    value_block: DiagonalBlock | None = None,
) -> tuple[NDArray, NDArray]:
    """Mean and variance of the heads' outputs ``A V`` (before the output projection).

    Because the rows of ``A`` sum to one, ``o_t = sum_s A_ts (e_s W + b) = u_t W + b`` with
    ``u_t = sum_s A_ts e_s``: the attention is applied to the inputs first
    (``Var u_t = sum_s A_ts^2 Var e_s``, tokens independent), then the value layer's exact
    moments. This keeps the covariance that value weights shared by all tokens induce
    between them (treating the tokens' values as independent, as the paper does, misses
    it when the value weights are random).

    Parameters
    ----------
    attention : ndarray of shape (n, H, T, T)
        Fixed attention weights.
    value : Dense
        The value projection (weights ``(d, d)``).
    mean, var : ndarray of shape (n, T, d)
        Moments of the block's (normalised) input, tokens and coordinates independent.
    value_block : DiagonalBlock, optional
        Posterior of the value weights.
    """
    H = attention.shape[1]
    d_in, width = value.weight.shape
    k = width // H
    u_mean = attention @ mean[:, None]  # (n, H, T, d_in)
    u_var = (attention**2) @ var[:, None]
    W = value.weight.reshape(d_in, H, k)
    out_mean = np.einsum("nhti,ihk->nhtk", u_mean, W) + value.bias.reshape(1, H, 1, k)
    out_var = np.einsum("nhti,ihk->nhtk", u_var, W**2)
    if value_block is not None:
        S = value_block.weight_var.reshape(d_in, H, k)
        out_var = out_var + np.einsum("nhti,ihk->nhtk", u_mean**2 + u_var, S)
        out_var = out_var + value_block.bias_var.reshape(1, H, 1, k)
    return _merge(out_mean), _merge(out_var)


class TransformerBlock:
    """A transformer encoder block on ``(n, T, d)`` token sequences.

    ``norm_first=True`` (pre-norm, ViT): ``x + Attn(LN1(x))`` then ``x + MLP(LN2(x))``;
    ``False`` (post-norm): ``LN1(x + Attn(x))`` then ``LN2(x + MLP(x))``.

    Parameters
    ----------
    query, key, value, output : Dense
        The attention projections (weights ``(d, d)``).
    n_heads : int
    norm1, norm2 : LayerNorm
    hidden, activation, final : Dense, Activation, Dense
        The MLP.
    norm_first : bool, default=True

    Examples
    --------
    >>> import numpy as np
    >>> from uqconform.bayes.network import Activation, Dense, LayerNorm
    >>> rng = np.random.default_rng(0)
    >>> dense = lambda: Dense(rng.normal(size=(4, 4)), np.zeros(4))
    >>> norm = lambda: LayerNorm(np.ones(4), np.zeros(4))
    >>> block = TransformerBlock(dense(), dense(), dense(), dense(), 2, norm(), norm(),
    ...                          dense(), Activation("gelu"), dense())
    >>> x = rng.normal(size=(3, 5, 4))  # 3 sequences of 5 tokens of width 4
    >>> mean, var = block.moments(x, np.zeros_like(x))  # no input noise, fixed weights
    >>> mean.shape, bool(np.allclose(mean, block.forward(x))), float(var.max())
    ((3, 5, 4), True, 0.0)
    """

    def __init__(
        self,
        query: Dense,
        key: Dense,
        value: Dense,
        output: Dense,
        n_heads: int,
        norm1: LayerNorm,
        norm2: LayerNorm,
        hidden: Dense,
        activation: Activation,
        final: Dense,
        norm_first: bool = True,
    ):
        n_heads = check_int(n_heads, "n_heads")
        if value.n_out % n_heads:
            raise ValueError(f"width {value.n_out} is not divisible by {n_heads} heads.")
        self.query, self.key, self.value, self.output = query, key, value, output
        self.n_heads = int(n_heads)
        self.norm1, self.norm2 = norm1, norm2
        self.hidden, self.activation, self.final = hidden, activation, final
        self.norm_first = bool(norm_first)

    def _check_moment_inputs(
        self, mean: Any, var: Any, value_block: Any, activation_moments: str
    ) -> tuple[NDArray, NDArray]:
        """ValueError naming the argument: a mode, shape, non-finite value or negative
        variance that the moments would carry on silently (or fail on with numpy's text)."""
        check_moment_mode(activation_moments)
        mean = np.asarray(mean, dtype=np.float64)
        var = np.asarray(var, dtype=np.float64)
        d = self.value.n_in
        if mean.ndim != 3 or mean.shape[2] != d or 0 in mean.shape:
            raise ValueError(
                f"`mean` must have shape (n_sequences, n_tokens, {d}) (tokens of the block's "
                f"width, at least one sequence and one token), got {mean.shape}."
            )
        if var.shape != mean.shape:
            raise ValueError(f"`var` must have the shape of `mean` {mean.shape}, got {var.shape}.")
        for name, values in (("mean", mean), ("var", var)):
            if not np.isfinite(values).all():
                raise ValueError(f"`{name}` holds NaN or infinite values.")
        if (var < 0).any():
            raise ValueError(f"`var` holds negative variances (smallest {float(var.min())}).")
        if value_block is not None and not (
            isinstance(value_block, DiagonalBlock) and value_block.shape_for(d, self.value.n_out)
        ):
            got = getattr(value_block, "weight_var", None)
            raise ValueError(
                f"`value_block` must be a DiagonalBlock for the ({d}, {self.value.n_out}) value "
                f"projection, got a {type(value_block).__name__}"
                + (f" of weights {got.shape}." if got is not None else ".")
            )
        return mean, var

    def _check_mlp_blocks(self, mlp_blocks: Any) -> None:
        """ValueError naming ``mlp_blocks``: two posterior blocks (or None) for the MLP's two
        Dense layers, each fitting its layer."""
        layers = (self.hidden, self.final)
        if not isinstance(mlp_blocks, (tuple, list)) or len(mlp_blocks) != 2:
            raise ValueError(
                "`mlp_blocks` must be a pair (hidden, final) of posterior blocks or None, got "
                f"{mlp_blocks!r:.80}."
            )
        for which, block, layer in zip(("hidden", "final"), mlp_blocks, layers, strict=True):
            fits = getattr(block, "shape_for", None)
            if block is not None and not (callable(fits) and fits(layer.n_in, layer.n_out)):
                got = getattr(getattr(block, "weight_var", None), "shape", None)
                shape = f" of weights {got}" if got is not None else ""
                raise ValueError(
                    f"`mlp_blocks`: the {which} layer's block must be a posterior block for "
                    f"its ({layer.n_in}, {layer.n_out}) weights, or None, got a "
                    f"{type(block).__name__}{shape}."
                )

    def _attend(self, x: NDArray) -> NDArray:
        A = attention_matrix(self.query, self.key, x, self.n_heads)
        return self.output.forward(_merge(A @ _heads(self.value.forward(x), self.n_heads)))

    def _mlp(self, x: NDArray) -> NDArray:
        return self.final.forward(self.activation.forward(self.hidden.forward(x)))

    def forward(self, x: NDArray) -> NDArray:
        """Deterministic pass, ``(n, T, d)`` -> ``(n, T, d)``."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 3 or x.shape[2] != self.value.n_in:
            raise ValueError(
                f"`x` must have shape (n_sequences, n_tokens, {self.value.n_in}), got {x.shape}."
            )
        if self.norm_first:
            x = x + self._attend(self.norm1.forward(x))
            return x + self._mlp(self.norm2.forward(x))
        x = self.norm1.forward(x + self._attend(x))
        return self.norm2.forward(x + self._mlp(x))

    def moments(
        self,
        mean: NDArray,
        var: NDArray,
        *,
        value_block: DiagonalBlock | None = None,
        mlp_blocks: tuple[Any, Any] = (None, None),
        activation_moments: str = "linearize",
    ) -> tuple[NDArray, NDArray]:
        """Mean and per-coordinate variance of the block's output, ``(n, T, d)`` each.

        Parameters
        ----------
        mean, var : array-like of shape (n, T, d)
            Moments of the input tokens (coordinates independent); finite, ``var >= 0``.
        value_block : DiagonalBlock, optional
            Posterior of the value projection (``(d, d)`` weights); None: fixed weights.
        mlp_blocks : tuple of two posterior blocks or None
            Posteriors of the MLP's two Dense layers.
        activation_moments : {"linearize", "exact_relu", "matched"}
            How the MLP's activation passes moments on (see `MOMENT_MODES`).
        """
        mean, var = self._check_moment_inputs(mean, var, value_block, activation_moments)
        self._check_mlp_blocks(mlp_blocks)

        def attend(m: NDArray, v: NDArray) -> tuple[NDArray, NDArray]:
            A = attention_matrix(self.query, self.key, m, self.n_heads)
            o_mean, o_var = attention_moments(A, self.value, m, v, value_block)
            return _tokens(self.output.moments, o_mean, o_var)

        def mlp(m: NDArray, v: NDArray) -> tuple[NDArray, NDArray]:
            m, v = _tokens(self.hidden.moments, m, v, mlp_blocks[0])
            m, v = _tokens(self.activation.moments, m, v, activation_moments)
            return _tokens(self.final.moments, m, v, mlp_blocks[1])

        if self.norm_first:
            a_mean, a_var = attend(*_tokens(self.norm1.moments, mean, var))
            mean, var = mean + a_mean, var + a_var
            f_mean, f_var = mlp(*_tokens(self.norm2.moments, mean, var))
            return mean + f_mean, var + f_var
        a_mean, a_var = attend(mean, var)
        mean, var = _tokens(self.norm1.moments, mean + a_mean, var + a_var)
        f_mean, f_var = mlp(mean, var)
        return _tokens(self.norm2.moments, mean + f_mean, var + f_var)
