"""Row blocks of the one-pass moments and of the Monte Carlo predictive (uqconform.bayes).

Blocking bounds memory; it must not change a number. Each test fits once, then compares the
predictions made in one block (the default block size, for these few rows) with those made
in tiny blocks (the block-size constant patched), including a last partial block.
"""

from __future__ import annotations

import tracemalloc
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_friedman1
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier, MLPRegressor

from uqconform.bayes import LaplacePosterior, LinearizedPredictive
from uqconform.bayes import network as network_module
from uqconform.bayes.likelihood import log_probabilities
from uqconform.bayes.network import Network, _row_blocks

# Blocking reorders no floating-point operation within a row, but BLAS may round a row
# differently in a smaller matrix (kernel tails, threads): ulp-level differences only.
RTOL, ATOL = 1e-12, 1e-15
N_TEST = 37  # rows predicted: not a multiple of the block sizes below


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        yield


def _regressor(structure: str, covariance: str, method: str) -> tuple:
    X, y = make_friedman1(260, noise=0.5, random_state=0)
    net = MLPRegressor(hidden_layer_sizes=(16, 8), max_iter=200, random_state=0)
    return _predictive(net, X, y, structure, covariance, method)


def _classifier(structure: str, covariance: str, method: str, n_classes: int = 3) -> tuple:
    X, y = make_classification(
        260, n_features=6, n_informative=4, n_classes=n_classes, random_state=0
    )
    net = MLPClassifier(hidden_layer_sizes=(12,), max_iter=200, random_state=0)
    return _predictive(net, X, y, structure, covariance, method)


def _predictive(net, X, y, structure: str, covariance: str, method: str) -> tuple:
    """The network fitted on the first 150 rows, its predictive on the next 70, test rows."""
    net.fit(X[:150], y[:150])
    post = LaplacePosterior(net, structure=structure, prior_precision=1.0).fit(X[:150], y[:150])
    model = LinearizedPredictive(
        net,
        posterior=post,
        method=method,
        covariance=covariance,
        scale=1.0,
        n_samples=40,
        random_state=0,
    )
    return model.fit(X[150:220], y[150:220]), X[220 : 220 + N_TEST], y[220 : 220 + N_TEST]


def _outputs(model: LinearizedPredictive, X: np.ndarray, y: np.ndarray) -> dict:
    mean, var = model.predict_distribution(X)
    out = {"mean": mean, "var": var, "log_predictive": model.log_predictive(X, y)}
    if model.task_ == "regression":
        out["std"] = model.predict_std(X)
    else:
        out["proba"] = model.predict_proba(X)
        out["proba_seeded"] = model.predict_proba(X, random_state=3)
    return out


def _blocked_rows(monkeypatch, model, X, y, cells: int) -> tuple[dict, list[int]]:
    """Outputs with ``_BLOCK_CELLS = cells``, and the rows of every one-pass or MC block."""
    rows: list[int] = []
    block_moments = Network._block_moments
    forward_samples = Network.forward_samples

    def spy_moments(self, X, *args, **kwargs):
        rows.append(X.shape[0])
        return block_moments(self, X, *args, **kwargs)

    def spy_samples(self, X, theta):
        rows.append(X.shape[0])
        return forward_samples(self, X, theta)

    with monkeypatch.context() as patch:
        patch.setattr(network_module, "_BLOCK_CELLS", cells)
        patch.setattr(Network, "_block_moments", spy_moments)
        patch.setattr(Network, "forward_samples", spy_samples)
        out = _outputs(model, X, y)
    return out, rows


def _assert_same(blocked: dict, whole: dict) -> None:
    assert blocked.keys() == whole.keys()
    for key, value in whole.items():
        assert blocked[key].shape == value.shape, key
        np.testing.assert_allclose(blocked[key], value, rtol=RTOL, atol=ATOL, err_msg=key)


CASES = [
    ("kron", "diag", "onepass"),  # a kron posterior forces full covariances
    ("full", "full", "onepass"),
    ("diag", "diag", "onepass"),
    ("kron", "diag", "mc"),
    ("diag", "diag", "mc"),
]


@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize(("structure", "covariance", "method"), CASES)
def test_tiny_blocks_give_the_one_block_outputs(monkeypatch, task, structure, covariance, method):
    make = _regressor if task == "regression" else _classifier
    model, X, y = make(structure, covariance, method)
    whole = _outputs(model, X, y)
    for rows_per_block in (1, 5):  # 37 rows: 37 blocks; 7 blocks of 5 and one of 2
        if method == "onepass":
            width = max(X.shape[1], *(d.n_out for d in model.view_.network.dense_layers))
            per_row = width * width if covariance == "full" or structure == "kron" else width
        else:
            width = max(X.shape[1], *(d.n_out for d in model.view_.network.dense_layers))
            per_row = model.n_samples * width
        blocked, rows = _blocked_rows(monkeypatch, model, X, y, rows_per_block * per_row)
        _assert_same(blocked, whole)
        assert rows and max(rows) <= rows_per_block
        if rows_per_block == 5:
            assert 2 in rows  # the last, partial block was computed


def test_binary_classifier_mc_and_onepass_in_blocks(monkeypatch):
    """A logistic output (one logit) through both blocked paths."""
    for method in ("onepass", "mc"):
        model, X, y = _classifier("kron", "diag", method, n_classes=2)
        whole = _outputs(model, X, y)
        blocked, rows = _blocked_rows(monkeypatch, model, X, y, 1)
        _assert_same(blocked, whole)
        assert rows and max(rows) == 1


def test_row_blocks_cover_every_row_once():
    budget = network_module._BLOCK_CELLS
    for n in (0, 1, 15, 16, 17, 100, 1000, 1031):
        for per_row in (1, budget // 3, budget // 16, budget // 40, budget, 3 * budget):
            blocks = _row_blocks(n, per_row)
            rows = np.concatenate([np.arange(n)[block] for block in blocks])
            np.testing.assert_array_equal(rows, np.arange(n))
            sizes = [block.stop - block.start for block in blocks]
            assert max(sizes) == max(1, min(sizes[0], budget // per_row))
            assert max(sizes) < 16 or max(sizes) % 16 == 0  # BLAS-aligned blocks


def test_blocks_bound_memory(monkeypatch):
    """Without blocks, 2000 rows hold (2000, 32, 32) covariances (16 MB) and MC outputs
    (40, 2000, 32) (20 MB); in blocks of 2**16 cells the peak stays a few MB."""
    X, y = make_friedman1(2100, noise=0.5, random_state=0)
    net = MLPRegressor(hidden_layer_sizes=(32,), max_iter=20, random_state=0).fit(X[:100], y[:100])
    post = LaplacePosterior(net, structure="kron", prior_precision=1.0).fit(X[:100], y[:100])
    model = LinearizedPredictive(net, posterior=post, scale=1.0, n_samples=40, random_state=0)
    model.fit(X[:100], y[:100])
    monkeypatch.setattr(network_module, "_BLOCK_CELLS", 2**16)
    for method in ("onepass", "mc"):
        tracemalloc.start()
        model.predict_distribution(X[100:], method)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 6 * 2**20, (method, peak / 2**20)


def test_mc_link_in_sample_blocks_averages_the_same_draws(monkeypatch):
    """link='mc' draws its (S, K) logit noise, shared by the rows, in blocks of samples from
    one stream: the same draws as one array, averaged in another order (equal to rounding).
    A row's probabilities do not depend on the rows predicted with it (the noise was drawn
    per row, so the first rows' probabilities changed with the batch)."""
    model, X, _ = _classifier("diag", "diag", "onepass")
    model.set_params(link="mc", n_samples=30)
    mean, var = model.predict_distribution(X)
    noise = np.random.default_rng(model.seed_).standard_normal((30, 1, mean.shape[1]))
    logits = (mean + np.sqrt(var) * noise).reshape(-1, mean.shape[1])
    output = model.view_.network.output
    expected = np.exp(log_probabilities(logits, output)).reshape(30, len(X), -1).mean(axis=0)
    whole = model.predict_proba(X)
    monkeypatch.setattr(network_module, "_BLOCK_CELLS", mean.size * 4)  # blocks of 4 samples
    np.testing.assert_allclose(model.predict_proba(X), expected, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(whole, expected, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(model.predict_proba(X[:3]), whole[:3], rtol=1e-13, atol=1e-15)
    assert not np.allclose(whole, model.set_params(link="probit").predict_proba(X))


# ---- the GGN from back-propagated output gradients (review s62) -----------------------------
def _ggn_network(task: str):
    """A small fitted network of each kind, with its rows: a regressor (tanh), a binary
    classifier (one logistic logit) and a 3-class one (softmax), two hidden layers."""
    if task == "regression":
        X, y = make_friedman1(90, noise=0.5, random_state=0)
        net = MLPRegressor(hidden_layer_sizes=(7, 5), activation="tanh", max_iter=300)
    else:
        n_classes = 2 if task == "binary" else 3
        X, y = make_classification(
            90, n_features=6, n_informative=4, n_classes=n_classes, random_state=0
        )
        net = MLPClassifier(hidden_layer_sizes=(7, 5), max_iter=300)
    return net.set_params(random_state=0).fit(X, y), X, y


def _brute_force_ggn(post: LaplacePosterior, X: np.ndarray) -> tuple[np.ndarray, list]:
    """``sum_n J_n' H_n J_n`` over whole Jacobians (`output_jacobians`), row by row, and the
    Kronecker factors ``A`` (mean of the augmented layer inputs' outer products) and ``B``
    (the same sum over the bias columns of each layer)."""
    from uqconform.bayes.convert import output_jacobians
    from uqconform.bayes.network import Dense

    view = post.view_
    network = view.network
    Xt = view.transform(X)
    J = np.concatenate(list(output_jacobians(view, Xt)), axis=1)  # (K, n, P)
    f = network.forward(Xt)
    if view.task == "regression":
        H = np.full((f.shape[0], 1, 1), 1.0 / post._network_noise_variance)
    elif network.output == "logistic":
        p = 1.0 / (1.0 + np.exp(-f))
        H = (p * (1.0 - p))[:, :, None]
    else:
        p = np.exp(log_probabilities(f, "softmax"))
        H = np.einsum("nk,kl->nkl", p, np.eye(p.shape[1])) - p[:, :, None] * p[:, None, :]
    G = sum(J[:, n].T @ H[n] @ J[:, n] for n in range(Xt.shape[0]))
    factors, a, parts = [], Xt, iter(network.parameter_slices())
    for layer in network.layers:
        if isinstance(layer, Dense):
            augmented = np.hstack([a, np.ones((a.shape[0], 1))])
            part = next(parts)
            bias = slice(part.start + layer.weight.size, part.stop)
            factors.append((augmented.T @ augmented / a.shape[0], G[bias, bias]))
        a = layer.forward(a)
    return G, factors


@pytest.mark.parametrize("task", ["regression", "binary", "multiclass"])
@pytest.mark.parametrize("structure", ["diag", "kron", "last_layer", "full"])
def test_curvature_is_the_brute_force_ggn(task, structure):
    """The GGN of each structure equals ``sum_n J_n' H_n J_n`` over whole Jacobians to
    rounding (diag: its diagonal; last_layer: its last-layer block; kron: per layer the
    augmented inputs' mean outer product and the bias block)."""
    net, X, y = _ggn_network(task)
    post = LaplacePosterior(net, structure=structure, prior_precision=1.0).fit(X, y)
    G, factors = _brute_force_ggn(post, X)
    scale = np.max(np.abs(G))
    if structure == "diag":
        np.testing.assert_allclose(post.curvature_, np.diag(G), rtol=1e-12, atol=1e-13 * scale)
    elif structure == "full":
        np.testing.assert_allclose(post.curvature_, G, rtol=1e-12, atol=1e-13 * scale)
    elif structure == "last_layer":
        last = post.network_.parameter_slices()[-1]
        np.testing.assert_allclose(post.curvature_, G[last, last], rtol=1e-12, atol=1e-13 * scale)
    else:
        assert len(post.curvature_) == len(factors) == 3
        for (A, B), (A0, B0) in zip(post.curvature_, factors, strict=True):
            np.testing.assert_allclose(A, A0, rtol=1e-12, atol=1e-13 * np.max(np.abs(A0)))
            np.testing.assert_allclose(B, B0, rtol=1e-12, atol=1e-13 * scale)


@pytest.mark.parametrize("structure", ["diag", "kron", "last_layer"])
def test_curvature_needs_no_whole_jacobians(monkeypatch, structure):
    """ "diag", "kron" and "last_layer" GGNs of a scikit-learn network come from
    back-propagated output gradients: the whole per-output Jacobians (K x P per row, built
    in blocks of a few rows for a wide multi-class network: thousands of `linearize`
    calls, 40-110 times slower) are never formed. "full" still uses them."""
    from uqconform.bayes import laplace

    def refused(*args, **kwargs):
        raise AssertionError("output_jacobians called")

    net, X, y = _ggn_network("multiclass")
    expected = LaplacePosterior(net, structure=structure, prior_precision=1.0).fit(X, y)
    monkeypatch.setattr(laplace, "output_jacobians", refused)
    post = LaplacePosterior(net, structure=structure, prior_precision=1.0).fit(X, y)
    if structure == "kron":
        for got, want in zip(post.curvature_, expected.curvature_, strict=True):
            np.testing.assert_array_equal(got[1], want[1])
    else:
        np.testing.assert_array_equal(post.curvature_, expected.curvature_)
    with pytest.raises(AssertionError, match="output_jacobians called"):
        LaplacePosterior(net, structure="full", prior_precision=1.0).fit(X, y)


@pytest.mark.parametrize("task", ["regression", "multiclass"])
@pytest.mark.parametrize("structure", ["diag", "kron", "last_layer"])
def test_curvature_in_tiny_row_blocks(monkeypatch, task, structure):
    """The GGN summed over blocks of a few rows (the cell budget patched; 90 rows, a last
    partial block) is the one of a single block, to rounding: blocking bounds memory."""
    from uqconform.bayes import laplace

    net, X, y = _ggn_network(task)
    whole = LaplacePosterior(net, structure=structure, prior_precision=1.0).fit(X, y)
    monkeypatch.setattr(laplace, "CURVATURE_BLOCK_CELLS", 700)  # a handful of rows
    blocked = LaplacePosterior(net, structure=structure, prior_precision=1.0).fit(X, y)
    pairs = (
        [
            (b, w)
            for got, want in zip(blocked.curvature_, whole.curvature_, strict=True)
            for b, w in zip(got, want, strict=True)
        ]
        if structure == "kron"
        else [(blocked.curvature_, whole.curvature_)]
    )
    for got, want in pairs:
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14 * np.max(np.abs(want)))


# ---- Monte Carlo weight draws in blocks of samples (review s62) ------------------------------
@pytest.mark.parametrize("task", ["regression", "classification"])
@pytest.mark.parametrize("structure", ["diag", "kron", "full", "last_layer"])
def test_mc_weight_draws_in_blocks_are_the_one_array_draws(monkeypatch, task, structure):
    """method="mc" draws its weights block by block from one stream (it drew them all at
    once, ``(n_samples, P)`` and temporaries: 1.6 GB at the default 1000 draws for a
    (256, 256) network): the numbers of one ``sample(n_samples)`` array, and outputs in
    blocks of 3 draws (40 draws: a last block of 1) equal to those of one block."""
    from uqconform.bayes import linearized

    make = _regressor if task == "regression" else _classifier
    model, X, y = make(structure, "diag", "mc")
    whole = _outputs(model, X, y)
    theta = model.posterior_.sample(40, np.random.default_rng(model.seed_), model.scale_)
    f = model.view_.network.forward_samples(model.view_.transform(X), theta)
    mean, var = (
        (f[:, :, 0].mean(axis=0), f[:, :, 0].var(axis=0))
        if task == "regression"
        else (
            f.mean(axis=0),
            f.var(axis=0),
        )
    )
    np.testing.assert_allclose(whole["mean"], mean, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(whole["var"], var, rtol=RTOL, atol=ATOL)
    draws: list[int] = []
    forward_samples = Network.forward_samples

    def spy(self, X, theta):
        draws.append(theta.shape[0])
        return forward_samples(self, X, theta)

    monkeypatch.setattr(Network, "forward_samples", spy)
    monkeypatch.setattr(linearized, "MC_DRAW_CELLS", 3 * model.posterior_.n_parameters_)
    blocked = _outputs(model, X, y)
    _assert_same(blocked, whole)
    assert max(draws) == 3 and 1 in draws  # blocks of 3 draws, the last one of 1


def test_mc_weight_draws_bound_memory(monkeypatch):
    """1000 draws of a (64, 64) network's 4,929 weights are 39 MB at once (twice that with
    the standard normals); in blocks of 2**16 cells the peak of a 10-row MC prediction
    stays a few MB."""
    from uqconform.bayes import linearized

    X, y = make_friedman1(200, noise=0.5, random_state=0)
    net = MLPRegressor(hidden_layer_sizes=(64, 64), max_iter=5, random_state=0)
    net.fit(X[:100], y[:100])
    monkeypatch.setattr(linearized, "MC_DRAW_CELLS", 2**16)
    for structure in ("diag", "kron"):
        post = LaplacePosterior(net, structure=structure, prior_precision=1.0)
        model = LinearizedPredictive(net, posterior=post.fit(X[:100], y[:100]), scale=1.0)
        model.set_params(n_samples=1000, random_state=0).fit(X[100:150], y[100:150])
        tracemalloc.start()
        mean, var = model.predict_distribution(X[150:160], "mc")
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert np.isfinite(mean).all() and (var > 0).all()
        assert peak < 8 * 2**20, (structure, peak / 2**20)
