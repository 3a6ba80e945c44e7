"""Sampling-free Bayesian predictives for neural networks (Laplace posteriors).

* `LaplacePosterior`: a Gaussian (Laplace, generalised Gauss-Newton) posterior at the trained
  weights of a fitted `MLPRegressor` / `MLPClassifier` (``"diag"``, ``"kron"``, ``"full"``,
  ``"last_layer"``), with a tuned prior precision on every parameter;
* `LinearizedPredictive`: the single-pass Gaussian predictive (moments propagated through
  the layers), with Monte Carlo and linearised-Laplace (GLM) baselines on the same posterior;
  its ``predict_std`` serves as the difficulty of a normalized split-conformal regressor;
* `Network` and its layers: the layer-list view of a network and the moment formulas;
  `TransformerBlock`: value-path attention moments;
* torch (optional extra, imported only when used): `from_torch` (``nn.Sequential``),
  `from_torch_encoder_layer` (``nn.TransformerEncoderLayer``), `torch_parameter_index`.
"""

from uqconform.bayes.attention import TransformerBlock
from uqconform.bayes.laplace import LaplacePosterior
from uqconform.bayes.linearized import LinearizedPredictive
from uqconform.bayes.network import (
    Activation,
    Affine,
    Dense,
    DiagonalBlock,
    FullBlock,
    KroneckerBlock,
    LayerNorm,
    Network,
)
from uqconform.bayes.torch_network import (
    from_torch,
    from_torch_encoder_layer,
    torch_parameter_index,
)

__all__ = [
    "Activation",
    "Affine",
    "Dense",
    "DiagonalBlock",
    "FullBlock",
    "KroneckerBlock",
    "LaplacePosterior",
    "LayerNorm",
    "LinearizedPredictive",
    "Network",
    "TransformerBlock",
    "from_torch",
    "from_torch_encoder_layer",
    "torch_parameter_index",
]
