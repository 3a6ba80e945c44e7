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
