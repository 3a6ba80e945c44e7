"""torch networks in uqconform.bayes: conversion, layout, posterior, transformer block."""

from __future__ import annotations

import builtins
import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sklearn.datasets import make_friedman1  # noqa: E402
from sklearn.neural_network import MLPRegressor  # noqa: E402

from uqconform.bayes import LaplacePosterior, LinearizedPredictive  # noqa: E402
from uqconform.bayes.attention import attention_matrix, attention_moments  # noqa: E402
from uqconform.bayes.network import DiagonalBlock  # noqa: E402
from uqconform.bayes.torch_network import (  # noqa: E402
    from_torch,
    from_torch_encoder_layer,
    require_torch,
    torch_parameter_index,
)

torch.set_num_threads(1)


def _sequential(seed=0):
    torch.manual_seed(seed)
    nn = torch.nn
    net = nn.Sequential(
        nn.Linear(5, 8),
        nn.BatchNorm1d(8),
        nn.GELU(),
        nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Tanh(), nn.Dropout(0.1)),
        nn.Linear(8, 6),
        nn.ReLU(),
        nn.Linear(6, 1),
    ).double()
    with torch.no_grad():  # non-trivial running statistics
        net[1].running_mean.uniform_(-0.5, 0.5)
        net[1].running_var.uniform_(0.5, 2.0)
    return net.eval()


def test_sequential_conversion_matches_torch_forward():
    net = _sequential()
    X = np.random.default_rng(0).normal(size=(7, 5))
    with torch.no_grad():
        expected = net(torch.as_tensor(X)).numpy()
    network = from_torch(net)
    np.testing.assert_allclose(network.forward(X), expected, atol=1e-10)
    assert [type(layer).__name__ for layer in network.layers].count("Dense") == 4


def test_unsupported_layers_are_named():
    with pytest.raises(TypeError, match="Softplus"):
        from_torch(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Softplus()))
    with pytest.raises(TypeError, match="Sequential"):
        from_torch(torch.nn.Linear(2, 2))


def _tied(kind):
    """A Sequential whose middle Linear layers share their parameters."""
    torch.manual_seed(0)
    nn = torch.nn
    first, second = nn.Linear(4, 4), nn.Linear(4, 4)
    if kind == "module used twice":
        second = first
    elif kind == "block used twice":
        block = nn.Sequential(first, nn.Tanh())
        return nn.Sequential(nn.Linear(2, 4), nn.Tanh(), block, block, nn.Linear(4, 1))
    else:  # "weight tied": two modules, one Parameter
        second.weight = first.weight
    tail = (nn.Tanh(), second, nn.Tanh(), nn.Linear(4, 1))
    return nn.Sequential(nn.Linear(2, 4), nn.Tanh(), first, *tail).double().eval()


@pytest.mark.parametrize("kind", ["module used twice", "block used twice", "weight tied"])
def test_tied_linear_layers_are_refused(kind):
    """Review finding (s58): a Linear used twice was flattened into two independent Dense
    layers (57 parameters for a 37-parameter module), whose posterior treats the copies as
    independent (GLM variance 1.02-1.12 times the tied-weight oracle's)."""
    net = _tied(kind)
    match = r"Linear\(in_features=4, out_features=4.*tied \(shared\) .*not supported"
    with pytest.raises(TypeError, match=match):
        from_torch(net)
    with pytest.raises(TypeError, match=match):
        torch_parameter_index(net)
    X = np.random.default_rng(0).normal(size=(40, 2))
    with pytest.raises(TypeError, match=match):
        LaplacePosterior(net, prior_precision=1.0).fit(X, X[:, 0])


def test_a_shared_parameter_free_or_normalisation_module_is_accepted():
    """Reusing one ReLU (or LayerNorm) instance is exact: those are not Bayesian layers."""
    torch.manual_seed(0)
    nn = torch.nn
    relu, norm = nn.ReLU(), nn.LayerNorm(4)
    net = nn.Sequential(nn.Linear(2, 4), norm, relu, nn.Linear(4, 4), norm, relu, nn.Linear(4, 1))
    net = net.double().eval()
    X = np.random.default_rng(0).normal(size=(7, 2))
    with torch.no_grad():
        expected = net(torch.as_tensor(X)).numpy()
    np.testing.assert_allclose(from_torch(net).forward(X), expected, atol=1e-12)
    assert from_torch(net).n_parameters == sum(
        p.numel() for m in (net[0], net[3], net[6]) for p in m.parameters()
    )


def test_modules_computing_beyond_their_layers_are_refused():
    """Review s64: a Sequential subclass with its own forward (10 * body(x) + x0), a masked
    Linear subclass and a forward hook were read from their layers alone: predictions up
    to 5.4 away from the module's output, silently. Subclasses that keep the forward pass."""
    torch.manual_seed(0)
    nn = torch.nn

    class Scaled(nn.Sequential):
        def forward(self, x):
            return 10.0 * super().forward(x) + x[:, :1]

    class Masked(nn.Linear):
        def forward(self, x):
            return nn.functional.linear(x, self.weight * 0.5, self.bias)

    class Named(nn.Sequential):  # a subclass that keeps Sequential's forward
        pass

    X = np.random.default_rng(0).normal(size=(30, 2))
    y = X[:, 0]
    with pytest.raises(TypeError, match=r"Scaled is a subclass of Sequential with its own fo"):
        LinearizedPredictive(Scaled(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))).fit(X, y)
    with pytest.raises(TypeError, match=r"Masked is a subclass of Linear with its own forward"):
        from_torch(nn.Sequential(Masked(2, 4), nn.Tanh(), nn.Linear(4, 1)))
    hooked = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))
    handle = hooked[1].register_forward_hook(lambda module, inputs, output: 2 * output)
    with pytest.raises(TypeError, match=r"Tanh has a forward hook.*handle\.remove\(\)"):
        from_torch(hooked)
    handle.remove()
    for net in (hooked, Named(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))):
        net = net.double().eval()
        with torch.no_grad():
            expected = net(torch.as_tensor(X)).numpy()
        np.testing.assert_allclose(from_torch(net).forward(X), expected, atol=1e-12)
    # (diff review 50) a parametrized subclass is its own forward's too; a layer of the
    # user's own (a Module subclass) is named unsupported, as before
    parametrized = Masked(2, 4)
    torch.nn.utils.parametrizations.weight_norm(parametrized)
    with pytest.raises(TypeError, match=r"ParametrizedMasked is a subclass of Linear with its"):
        from_torch(nn.Sequential(parametrized, nn.Tanh(), nn.Linear(4, 1)))

    class Swish(nn.Module):
        def forward(self, x):
            return x * torch.sigmoid(x)

    with pytest.raises(TypeError, match=r"unsupported torch layer Swish"):
        from_torch(nn.Sequential(nn.Linear(2, 4), Swish(), nn.Linear(4, 1)))
    old_style = nn.Sequential(torch.nn.utils.weight_norm(nn.Linear(2, 4)), nn.Linear(4, 1))
    with pytest.raises(TypeError, match=r"remove_weight_norm\(layer\)"):
        from_torch(old_style)
    encoder = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True).eval()
    encoder.linear1.register_forward_hook(lambda module, inputs, output: 2 * output)
    with pytest.raises(TypeError, match=r"Linear has a forward hook"):
        from_torch_encoder_layer(encoder)


def test_weight_normalised_layers_are_not_taken_for_tied_ones():
    # diffrev25: a parametrized weight is built anew at each access, and its id was
    # reused by the next layer's: untied weight-normed layers were refused as tied
    from torch.nn.utils.parametrizations import weight_norm

    nn = torch.nn
    net = nn.Sequential(weight_norm(nn.Linear(2, 4)), nn.Tanh(), weight_norm(nn.Linear(4, 1)))
    assert len(from_torch(net.double()).layers) == 3


def test_a_weight_normalised_layer_is_told_how_to_fold_its_parametrization():
    # stop 58's review: a weight_norm layer got the "requires_grad=False ... Unfreeze them"
    # message, which names neither the cause nor the remedy
    from torch.nn.utils import parametrize
    from torch.nn.utils.parametrizations import weight_norm

    torch.manual_seed(0)
    net = torch.nn.Sequential(weight_norm(torch.nn.Linear(2, 4)), torch.nn.Tanh())
    net.append(torch.nn.Linear(4, 1))
    X = np.random.default_rng(0).normal(size=(40, 2))
    with pytest.raises(TypeError, match=r"Linear\(2, 4\).*remove_parametrizations") as error:
        LaplacePosterior(net, prior_precision=1.0).fit(X, X[:, 0])
    assert "requires_grad" not in str(error.value)
    before = net(torch.as_tensor(X, dtype=torch.float32)).detach().numpy()
    parametrize.remove_parametrizations(net[0], "weight")  # the remedy the message gives
    predictive = LinearizedPredictive(net, prior_precision=1.0).fit(X, X[:, 0])
    np.testing.assert_allclose(predictive.predict(X), before.ravel(), rtol=1e-5, atol=1e-6)


def test_a_frozen_linear_layer_is_named():
    """Fine-tuning the head only (requires_grad=False below): a clear refusal, not a
    KeyError on an object id."""
    net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    for parameter in net[0].parameters():
        parameter.requires_grad_(False)
    X = np.random.default_rng(0).normal(size=(40, 2)).astype(np.float32)
    with pytest.raises(TypeError, match=r"Linear\(in_features=2.*requires_grad=False"):
        LaplacePosterior(net, structure="last_layer", prior_precision=1.0).fit(X, X[:, 0])


@pytest.mark.parametrize("n_heads", [0, -1, 2.0, True])
def test_transformer_block_head_count_is_checked(n_heads):
    torch.manual_seed(0)
    enc = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    block = from_torch_encoder_layer(enc)
    parts = {name: getattr(block, name) for name in ("query", "key", "value", "output")}
    rest = {n: getattr(block, n) for n in ("norm1", "norm2", "hidden", "activation", "final")}
    with pytest.raises(ValueError, match="`n_heads` must be a positive integer"):
        type(block)(**parts, n_heads=n_heads, **rest)


def test_parameter_index_reorders_torch_vectors():
    net = _sequential()
    vector = torch.nn.utils.parameters_to_vector(net.parameters()).detach().numpy()
    np.testing.assert_array_equal(vector[torch_parameter_index(net)], from_torch(net).parameters())
    with pytest.raises(TypeError, match=r"`module` must be a torch\.nn\.Module"):
        torch_parameter_index(MLPRegressor())  # an sklearn network, which from_torch refuses too


def test_torch_posterior_matches_the_same_sklearn_network():
    """A ReLU Sequential and an MLPRegressor with the same weights get the same GGN."""
    X, y = make_friedman1(60, random_state=0)
    mlp = MLPRegressor(hidden_layer_sizes=(6,), max_iter=300, random_state=0).fit(X, y)
    net = torch.nn.Sequential(torch.nn.Linear(10, 6), torch.nn.ReLU(), torch.nn.Linear(6, 1))
    net = net.double()
    with torch.no_grad():
        for layer, W, b in zip((net[0], net[2]), mlp.coefs_, mlp.intercepts_, strict=True):
            layer.weight.copy_(torch.as_tensor(W.T))
            layer.bias.copy_(torch.as_tensor(b))
    ours = LaplacePosterior(mlp, prior_precision=1.0).fit(X, y)
    theirs = LaplacePosterior(net, prior_precision=1.0).fit(X, y)
    np.testing.assert_allclose(theirs.curvature_, ours.curvature_, rtol=1e-8)


def test_torch_one_pass_agrees_with_mc_under_no_grad():
    """Tight posterior (variances x 1e-6): the network is linear over it, so the one-pass
    variance equals the GLM one on the same posterior (measured within 2e-6 relative;
    checked at 1e-3). Monte Carlo (2000 draws) is the sanity check."""
    net = _sequential()
    X = np.random.default_rng(1).normal(size=(200, 5))
    with torch.no_grad():
        y = net(torch.as_tensor(X)).numpy()[:, 0] + 0.1 * np.random.default_rng(2).normal(size=200)
    post = LaplacePosterior(net, prior_precision=1.0).fit(X[:150], y[:150])
    with torch.no_grad():
        model = LinearizedPredictive(
            net, posterior=post, scale=1e-6, covariance="full", random_state=0
        ).fit(X[150:], y[150:])
        mean, one = model.predict_distribution(X[150:])
        _, mc = model.predict_distribution(X[150:], "mc", n_samples=2000)
        _, glm = model.predict_distribution(X[150:], "glm")
    with torch.no_grad():
        np.testing.assert_allclose(mean, net(torch.as_tensor(X[150:])).numpy()[:, 0])
    np.testing.assert_allclose(one, glm, rtol=1e-3)
    assert abs(np.median(one / mc) - 1) < 0.1
    assert abs(np.median(glm / mc) - 1) < 0.1


def test_transformer_block_moments_name_bad_inputs():
    """Review s64: TransformerBlock.moments checked nothing (negative variances gave
    negative output variances, NaN passed, a misspelt mode was read as 'linearize', shapes
    got numpy's unpacking and matmul messages)."""
    torch.manual_seed(0)
    enc = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    block = from_torch_encoder_layer(enc)
    x = np.random.default_rng(0).normal(size=(3, 5, 8))
    var = np.full_like(x, 0.1)
    bad = [
        ({"var": -var}, r"`var` holds negative variances"),
        ({"var": np.where(x > 1, np.nan, var)}, r"`var` holds NaN or infinite"),
        ({"mean": np.where(x > 1, np.inf, x)}, r"`mean` holds NaN or infinite"),
        ({"mean": x[0], "var": var[0]}, r"`mean` must have shape \(n_sequences, n_tokens, 8\)"),
        ({"var": var[:, :, :4]}, r"`var` must have the shape of `mean`"),
        ({"activation_moments": "exact-relu"}, r"`activation_moments` must be one of"),
        (
            {"value_block": DiagonalBlock(np.ones((3, 3)), np.ones(3))},
            r"`value_block` must be a DiagonalBlock for the \(8, 8\) value projection",
        ),
        # (diff review 50) the MLP's blocks and empty axes
        ({"mlp_blocks": (0.1, None)}, r"the hidden layer's block must be .* got a float\."),
        ({"mlp_blocks": (None,)}, r"`mlp_blocks` must be a pair \(hidden, final\)"),
        ({"mean": x[:0], "var": var[:0]}, r"at least one sequence and one token"),
    ]
    for change, message in bad:
        arguments = {"mean": x, "var": var, **change}
        with pytest.raises(ValueError, match=message):
            block.moments(**arguments)
    with pytest.raises(ValueError, match=r"`x` must have shape \(n_sequences, n_tokens, 8\)"):
        block.forward(x[0])
    mean, out_var = block.moments(x, var, activation_moments="exact_relu")
    assert mean.shape == x.shape and (out_var >= 0).all()


def test_attention_moments_match_monte_carlo_with_fixed_queries_and_keys():
    torch.manual_seed(0)
    enc = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    block = from_torch_encoder_layer(enc)
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(1, 4, 8))
    var = rng.uniform(0.01, 0.1, size=(1, 4, 8))
    S = rng.uniform(0.001, 0.01, size=(8, 8))
    s = rng.uniform(0.001, 0.01, size=8)
    A = attention_matrix(block.query, block.key, mean, 2)
    o_mean, o_var = attention_moments(A, block.value, mean, var, DiagonalBlock(S, s))
    draws = 100_000
    E = mean + np.sqrt(var) * rng.standard_normal((draws, 4, 8))
    W = block.value.weight + np.sqrt(S) * rng.standard_normal((draws, 8, 8))
    b = block.value.bias + np.sqrt(s) * rng.standard_normal((draws, 1, 8))
    V = (E @ W + b).reshape(draws, 4, 2, 4).transpose(0, 2, 1, 3)
    out = (A[0] @ V).transpose(0, 2, 1, 3).reshape(draws, 4, 8)
    np.testing.assert_allclose(out.mean(axis=0), o_mean[0], atol=5 * np.sqrt(o_var.max() / draws))
    np.testing.assert_allclose(out.var(axis=0), o_var[0], rtol=0.03)


def test_transformer_block_moments_on_a_tight_value_posterior():
    """Deterministic input tokens, Bayesian value weights scaled down: the block is linear
    in them, the means match Monte Carlo and the variances do on the median (per
    coordinate they are approximate: kept per coordinate, residual branch independent)."""
    torch.manual_seed(1)
    enc = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True).eval()
    block = from_torch_encoder_layer(enc)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(1, 4, 8))
    S, s = np.full((8, 8), 1e-6), np.full(8, 1e-6)
    mean, var = block.moments(x, np.zeros_like(x), value_block=DiagonalBlock(S, s))
    np.testing.assert_allclose(mean, block.forward(x), atol=1e-10)
    value = block.value
    outs = []
    for _ in range(2000):  # a loop over weight samples
        block.value = type(value)(
            value.weight + np.sqrt(S) * rng.standard_normal(S.shape),
            value.bias + np.sqrt(s) * rng.standard_normal(8),
        )
        outs.append(block.forward(x))
    block.value = value
    ratio = np.median(var / np.var(outs, axis=0))
    assert abs(ratio - 1) < 0.1


def test_importing_uqconform_does_not_import_torch():
    code = "import sys, uqconform, uqconform.bayes; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_torch_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "torch":
            raise ImportError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r"uqconform\[torch\]"):
        require_torch()


def test_batchnorm_in_training_mode_warns():
    torch = pytest.importorskip("torch")
    from uqconform.bayes.torch_network import from_torch

    net = torch.nn.Sequential(
        torch.nn.Linear(2, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(), torch.nn.Linear(4, 1)
    ).double()
    with pytest.warns(UserWarning, match="training mode"):
        from_torch(net)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_torch(net.eval())


def test_class_labels_for_a_torch_module_warn_that_it_is_a_regression_network():
    """A 1-logit module given 0/1 labels was fitted as a regressor without a word."""
    from uqconform.bayes import LinearizedPredictive

    net = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 1))
    X = np.random.default_rng(0).normal(size=(100, 3)).astype("float32")
    labels = (X[:, 0] > 0).astype(int)
    with pytest.warns(UserWarning, match="linearised as a regression network"):
        LinearizedPredictive(net, random_state=0).fit(X, labels)


def test_a_module_trained_further_in_place_is_refused():
    """The GLM path differentiated the user's live module: training it after fit changed
    the GLM variances (0.79 to 2.17 times) while the mean stayed that of the copied
    weights, so mean and variance described two networks. Then both were the old
    network's while the module predicted otherwise (review, stop 56): now refused."""
    from sklearn.exceptions import NotFittedError

    X, y = make_friedman1(80, random_state=0)
    net = torch.nn.Sequential(torch.nn.Linear(10, 6), torch.nn.Tanh(), torch.nn.Linear(6, 1))
    net = net.double()
    predictive = LinearizedPredictive(net, posterior=LaplacePosterior(net, prior_precision=1.0))
    predictive.fit(X, y)
    before = predictive.predict_std(X[:5])
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.mul_(1.5)  # "training" in place
    for method in ("onepass", "glm"):
        with pytest.raises(NotFittedError, match=r"predict_std: .*changed since fit.*fit\(X, y\)"):
            predictive.predict_std(X[:5], method=method)
    assert not np.array_equal(predictive.fit(X, y).predict_std(X[:5]), before)


def test_a_module_in_train_mode_that_updates_itself_is_refused_naming_eval():
    """Review finding (stop 56): a BatchNorm module left in train mode updates its running
    statistics whenever it predicts, and the predictive kept the old ones silently."""
    from sklearn.exceptions import NotFittedError

    X, y = make_friedman1(80, random_state=0)
    net = torch.nn.Sequential(
        torch.nn.Linear(10, 6), torch.nn.BatchNorm1d(6), torch.nn.Tanh(), torch.nn.Linear(6, 1)
    ).double()
    with pytest.warns(UserWarning, match="training mode"):
        predictive = LinearizedPredictive(net, prior_precision=1.0, random_state=0).fit(X, y)
    predictive.predict(X[:5])  # unchanged so far
    net(torch.as_tensor(X[:20]))  # the user's own prediction, in train mode
    with pytest.raises(NotFittedError, match=r"predict: .*train mode: call model.eval\(\)"):
        predictive.predict(X[:5])


def test_bias_free_layers_and_encoder_layers_are_refused_with_what_to_do():
    """from_torch gave a bias-free Linear zero biases that then took posterior variance;
    an encoder layer was told to wrap itself in nn.Sequential, which cannot work."""
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 4, bias=False), torch.nn.Tanh(), torch.nn.Linear(4, 1)
    )
    with pytest.raises(TypeError, match=r"without bias \(bias=False\)"):
        from_torch(net.double())
    encoder = torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, batch_first=True)
    with pytest.raises(TypeError, match="from_torch_encoder_layer"):
        from_torch(encoder)


def test_an_encoder_layer_in_training_mode_warns_like_batchnorm():
    """Review finding: a layer in training mode (dropout active) was converted without a
    word; the block is the layer in evaluation mode. Warned like a BatchNorm1d in training
    mode in from_torch; a layer without dropout computes the same either way."""
    torch.manual_seed(0)
    enc = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
    with pytest.warns(UserWarning, match=r"training mode.*call layer\.eval\(\) first"):
        from_torch_encoder_layer(enc.train())
    without_dropout = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    for layer in (enc.eval(), without_dropout.train()):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            from_torch_encoder_layer(layer)


def test_infinity_in_x_names_x_the_column_and_the_remedy():
    """Review finding: a torch network's input with infinity got "X contains NaN or infinite
    values." without the row or what to do."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    net = net.double().eval()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=40)
    model = LinearizedPredictive(net, random_state=0).fit(X, y)
    infinite = X.copy()
    infinite[3, 1] = np.inf
    message = (
        r"`X` contains infinity \(in column 1\), which a network \(and its linearisation\) "
        r"cannot take: clip the values to a finite range"
    )
    for call in (
        lambda: LaplacePosterior(net, prior_precision=1.0).fit(infinite, y),
        lambda: LinearizedPredictive(net, random_state=0).fit(infinite, y),
        lambda: model.predict(infinite),
        lambda: model.predict_std(infinite, "glm"),
    ):
        with pytest.raises(ValueError, match=message):
            call()
    missing = X.copy()
    missing[5, 0] = np.nan
    with pytest.raises(ValueError, match=r"`X` contains NaN, which a network"):
        model.predict(missing)
