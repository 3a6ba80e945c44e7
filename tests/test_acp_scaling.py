"""Full-CP prediction in batches of test rows: the same results as in one batch, warnings
once per call, and the leverage-only computation of ``predict_std``."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.neural_network import MLPRegressor

from uqconform.regression import full
from uqconform.regression.acp import ApproximateFullConformalRegressor
from uqconform.regression.crr import LinearConfidenceMachine
from uqconform.regression.full import FullConformalRidge

ROWS_PER_CHUNK = 7
N_TEST = 30  # four chunks of 7 rows and a last partial chunk of 2


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, np.tanh(X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=n)


@pytest.fixture(scope="module")
def network() -> MLPRegressor:
    X, y = _data(60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence at a small max_iter is not the point
        return MLPRegressor(
            hidden_layer_sizes=(5,),
            activation="tanh",
            solver="lbfgs",
            max_iter=200,
            random_state=0,
        ).fit(X, y)


def _tiny_chunks(monkeypatch: pytest.MonkeyPatch, model) -> None:
    """Batches of ``ROWS_PER_CHUNK`` test rows, for features and coefficients alike."""
    n_features = model.machine_.n_features
    monkeypatch.setattr(full, "_FEATURE_CELLS", ROWS_PER_CHUNK * n_features)
    monkeypatch.setattr(full, "_CELLS_PER_BATCH", 10**9)


def _outputs(model, X: np.ndarray) -> dict[str, object]:
    """Every prediction method of a full-CP regressor on ``X``."""
    out = {
        "predict": model.predict(X),
        "interval": model.predict_interval(X, alpha=[0.1, 0.3]),
        "pvalue": model.predict_pvalue(X, np.linspace(-2.0, 2.0, 5)),
        "pvalue_each": model.predict_pvalue(X, model.predict(X) + 0.3),
        "union": model.predict_set(X, alpha=0.2, union=True),
    }
    if hasattr(model, "predict_std"):
        out["std"] = model.predict_std(X)
    return out


def _assert_same(chunked: dict, whole: dict) -> None:
    assert chunked.keys() == whole.keys()
    for name in whole:
        if name == "union":
            assert len(chunked[name]) == len(whole[name])
            for got, expected in zip(chunked[name], whole[name], strict=True):
                np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
        else:
            np.testing.assert_allclose(chunked[name], whole[name], rtol=1e-12, atol=1e-12)


def _fitted_models(network: MLPRegressor) -> dict[str, object]:
    X, y = _data(60, seed=1)
    X_cal, y_cal = _data(40, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # high-leverage warnings of a small calibration set
        return {
            "ridge": FullConformalRidge(Ridge(alpha=1.0)).fit(X, y),
            "ridge-fast": FullConformalRidge(conformity_score="deleted", algorithm="fast").fit(
                X, y
            ),
            "acp-mlp": ApproximateFullConformalRegressor(FrozenEstimator(network)).fit(X, y),
            "acp-mlp-refine": ApproximateFullConformalRegressor(
                FrozenEstimator(network), conformity_score="standard", algorithm="fast"
            ).calibrate(X_cal, y_cal),
            "acp-last-layer": ApproximateFullConformalRegressor(
                FrozenEstimator(network), curvature="last_layer", conformity_score="deleted"
            ).fit(X, y),
        }


@pytest.mark.parametrize(
    "name", ["ridge", "ridge-fast", "acp-mlp", "acp-mlp-refine", "acp-last-layer"]
)
def test_chunked_prediction_equals_one_chunk(monkeypatch, network, name):
    model = _fitted_models(network)[name]
    X_test, _ = _data(N_TEST, seed=3)
    whole = _outputs(model, X_test)
    _tiny_chunks(monkeypatch, model)
    sizes: list[int] = []
    features_of = type(model)._test_features

    def spy(self, X):
        sizes.append(X.shape[0])
        return features_of(self, X)

    monkeypatch.setattr(type(model), "_test_features", spy)
    chunked = _outputs(model, X_test)
    _assert_same(chunked, whole)
    # every batched call went through chunks of 7 rows, the last one partial (the ridge's
    # predict takes X in one go: its features are X itself)
    batched = [size for size in sizes if size != N_TEST or name.startswith("acp")]
    assert len(batched) > 5 and batched == [7, 7, 7, 7, 2] * (len(batched) // 5)


def test_batch_size_sets_the_chunks(monkeypatch, network):
    model = _fitted_models(network)["acp-mlp"]
    X_test, _ = _data(N_TEST, seed=3)
    whole = _outputs(model, X_test)
    model.set_params(batch_size=4)
    sizes: list[int] = []
    features_of = type(model)._test_features
    monkeypatch.setattr(
        type(model), "_test_features", lambda self, X: sizes.append(len(X)) or features_of(self, X)
    )
    _assert_same(_outputs(model, X_test), whole)
    assert sizes[:8] == [4] * 7 + [2]


def test_chunked_calls_warn_once_for_unpinned_rows_and_too_few_points(monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20, 3))
    X, y = np.c_[x, x[:, 0]], x @ [1.0, 2.0, 3.0] + rng.normal(size=20)
    model = FullConformalRidge(LinearRegression(fit_intercept=False)).fit(X, y)
    assert model.machine_.singular
    X_test = rng.normal(size=(N_TEST, 4))  # every row outside the span
    _tiny_chunks(monkeypatch, model)
    calls = {
        "interval": lambda: model.predict_interval(X_test, alpha=0.01),
        "union": lambda: model.predict_set(X_test, alpha=0.01, union=True),
        "pvalue": lambda: model.predict_pvalue(X_test, [0.0, 1.0]),
    }
    for name, call in calls.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        messages = [str(item.message) for item in caught]
        assert sum("outside the span" in text for text in messages) == 1, name
        assert f"{N_TEST} test rows lie outside the span" in " ".join(messages), name
        expected_too_few = 0 if name == "pvalue" else 1  # 0.01 < 1 / (20 + 1)
        assert sum("too few" in text.lower() for text in messages) == expected_too_few, name


@pytest.mark.parametrize("penalty", [1.0, 1e-8])
def test_test_leverage_is_the_diagonal_of_the_full_computation(penalty):
    rng = np.random.default_rng(0)
    features = rng.normal(size=(50, 6))
    machine = LinearConfidenceMachine(features, np.full(6, penalty))
    test_features = rng.normal(size=(13, 6))
    leverage = machine.test_leverage(test_features)
    h_test, _ = machine.test_leverages(test_features)
    sigma = np.linalg.inv(features.T @ features + penalty * np.eye(6))
    np.testing.assert_allclose(leverage, h_test, rtol=1e-12)
    np.testing.assert_allclose(
        leverage, np.diag(test_features @ sigma @ test_features.T), rtol=1e-10
    )
    with pytest.raises(ValueError, match="NaN or infinite"):
        machine.test_leverage(np.full((1, 6), np.nan))


def test_predict_std_uses_the_leverage_only(monkeypatch, network):
    model = _fitted_models(network)["acp-mlp"]
    X_test, _ = _data(N_TEST, seed=3)
    features, _ = model._test_features(model._test_input(X_test, "predict_std"))
    h_test, _ = model.machine_.test_leverages(features)

    def refuse(self, test_features):
        raise AssertionError("predict_std must not form the (m, n) cross leverages")

    monkeypatch.setattr(LinearConfidenceMachine, "test_leverages", refuse)
    np.testing.assert_allclose(
        model.predict_std(X_test), model.noise_ * np.sqrt(1.0 + h_test), rtol=1e-12
    )
