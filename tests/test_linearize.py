"""Tests for uqconform.linearize: Jacobians against finite differences, weight-decay units."""

from __future__ import annotations

import copy
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import (
    BayesianRidge,
    ElasticNet,
    HuberRegressor,
    Lasso,
    LinearRegression,
    LogisticRegression,
    PoissonRegressor,
    Ridge,
    RidgeCV,
    SGDRegressor,
)
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeRegressor

from uqconform.linearize import (
    Linearization,
    linearize,
    parameter_count,
    parameter_digest,
    weight_decay,
)


def _data(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] - 0.3 * X[:, 2] ** 2 + 0.1 * rng.normal(size=n)
    return X, y


def _mlp(activation="tanh", hidden=(5,), alpha=1e-2, max_iter=50, tol=1e-4, seed=0, **kw):
    X, y = _data(seed=seed)
    model = MLPRegressor(
        hidden_layer_sizes=hidden,
        activation=activation,
        solver="lbfgs",
        alpha=alpha,
        max_iter=max_iter,
        tol=tol,
        random_state=seed,
        **kw,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    return model, X, y


def _mlp_parameters(model):
    parts = []
    for w, b in zip(model.coefs_, model.intercepts_, strict=True):
        parts += [w.ravel(), b]
    return np.concatenate(parts)


def _mlp_with_parameters(model, theta):
    other = copy.deepcopy(model)
    start = 0
    for layer, (w, b) in enumerate(zip(model.coefs_, model.intercepts_, strict=True)):
        other.coefs_[layer] = theta[start : start + w.size].reshape(w.shape)
        start += w.size
        other.intercepts_[layer] = theta[start : start + b.size]
        start += b.size
    return other


def _finite_difference(predict, theta, eps=1e-6):
    """Central differences of predict(theta) -> (n,) in every coordinate of theta."""
    columns = []
    for k in range(theta.size):
        step = np.zeros_like(theta)
        step[k] = eps
        columns.append((predict(theta + step) - predict(theta - step)) / (2 * eps))
    return np.column_stack(columns)


def _relative_error(a, b):
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-12)


# ---------------------------------------------------------------------------------------------
# MLPRegressor
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("activation", ["identity", "logistic", "tanh", "relu"])
@pytest.mark.parametrize("hidden", [(4,), (4, 3), (3, 4, 2)])
def test_mlp_jacobian_matches_finite_differences(activation, hidden):
    model, X, _ = _mlp(activation, hidden)
    lin = linearize(model, X)
    theta = _mlp_parameters(model)
    assert lin.jacobian.shape == (len(X), theta.size) == (len(X), parameter_count(model))
    assert lin.jacobian.dtype == np.float64
    fd = _finite_difference(lambda t: _mlp_with_parameters(model, t).predict(X), theta)
    assert _relative_error(lin.jacobian, fd) < 1e-5
    np.testing.assert_allclose(lin.prediction, model.predict(X), rtol=1e-12, atol=1e-12)
    # Weights (coefs_) penalised, intercepts not, in coefs_[l].ravel(), intercepts_[l] order.
    expected = np.concatenate(
        [
            np.r_[np.ones(w.size, bool), np.zeros(b.size, bool)]
            for w, b in zip(model.coefs_, model.intercepts_, strict=True)
        ]
    )
    np.testing.assert_array_equal(lin.penalized, expected)


@pytest.mark.parametrize("hidden", [(4,), (4, 3)])
def test_mlp_last_layer_is_last_block_of_full(hidden):
    model, X, _ = _mlp("tanh", hidden)
    full = linearize(model, X)
    last = linearize(model, X, curvature="last_layer")
    p_last = model.coefs_[-1].size + model.intercepts_[-1].size
    assert last.jacobian.shape == (len(X), p_last)
    assert parameter_count(model, curvature="last_layer") == p_last
    np.testing.assert_allclose(last.jacobian, full.jacobian[:, -p_last:], rtol=0, atol=1e-14)
    np.testing.assert_array_equal(last.penalized, full.penalized[-p_last:])
    np.testing.assert_allclose(last.prediction, full.prediction)


def test_mlp_linearisation_is_first_order_taylor():
    """f(theta* + h) - f(theta*) - J h = O(|h|^2): the Jacobian is the derivative."""
    model, X, _ = _mlp("logistic", (4, 3))
    lin = linearize(model, X)
    theta = _mlp_parameters(model)
    direction = np.random.default_rng(1).normal(size=theta.size)
    errors = []
    for h in (1e-2, 1e-3):
        moved = _mlp_with_parameters(model, theta + h * direction).predict(X)
        errors.append(np.max(np.abs(moved - lin.prediction - h * lin.jacobian @ direction)))
    assert errors[1] < errors[0] / 50  # quadratic: a 10x smaller step, ~100x smaller error


def test_mlp_weight_decay_is_alpha_in_sum_of_squares_units():
    """At an lbfgs optimum, grad of sum (y-f)^2/2 + alpha/2 ||W||^2 vanishes (alpha/n does not).

    scikit-learn's lbfgs also stops on a relative decrease of 2.2e-9 in the loss (scipy's
    default ftol), so the optimum is tight to ~1e-4 relative, not to machine precision; the exact
    identity is checked against scikit-learn's own gradient below.
    """
    alpha = 2.0
    model, X, y = _mlp("tanh", (3, 2), alpha=alpha, max_iter=20000, tol=1e-12, max_fun=100000)
    assert weight_decay(model) == alpha
    lin = linearize(model, X)
    penalty = lin.penalized * _mlp_parameters(model)
    data_gradient = lin.jacobian.T @ (lin.prediction - y)
    scale = np.linalg.norm(data_gradient)
    assert scale > 0.1  # the penalty is active, so the check can tell strengths apart
    assert np.linalg.norm(data_gradient + alpha * penalty) < 1e-3 * scale
    # The per-sample reading alpha / n is clearly not stationary.
    assert np.linalg.norm(data_gradient + alpha / len(y) * penalty) > 0.5 * scale


@pytest.mark.parametrize("batch_size", [60, 100])
def test_minibatch_solvers_count_the_penalty_once_per_batch(batch_size):
    """adam takes alpha / (2 b) ||W||^2 per minibatch: an epoch settles where
    J'(f - y) + alpha (N / K) sum_k (1 / b_k) W = 0 (alpha N / B for equal batches; 240 rows
    in batches of 100 are 100, 100, 40: 3.6 alpha, not alpha N / B = 2.4 alpha)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 3))
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=240)
    model = MLPRegressor(
        hidden_layer_sizes=(4,),
        activation="tanh",
        solver="adam",
        batch_size=batch_size,
        alpha=2.0,
        learning_rate_init=3e-3,
        max_iter=1500,
        tol=0,
        n_iter_no_change=10**6,
        random_state=0,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    sizes = np.diff(np.r_[np.arange(0, 240, batch_size), 240])
    expected = 2.0 * 240 / sizes.size * np.sum(1.0 / sizes)
    assert weight_decay(model) == pytest.approx(expected, rel=1e-12)
    # the strength that makes the trained weights stationary agrees (the old reading,
    # alpha, was 3.6 or 4 times too small)
    lin = linearize(model, X)
    penalty = lin.penalized * _mlp_parameters(model)
    implied = -(penalty @ (lin.jacobian.T @ (lin.prediction - y))) / (penalty @ penalty)
    assert implied == pytest.approx(expected, rel=0.05)


def test_minibatch_rows_are_read_over_the_models_whole_training():
    # t_ counts every row since initialisation and n_iter_ only the last call: five
    # partial_fit calls on 1000 rows read as 5000 rows per epoch (factor 100, not 20)
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(1000, 3)), rng.normal(size=1000)
    model = MLPRegressor(hidden_layer_sizes=(3,), batch_size=50, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _ in range(5):
            model.partial_fit(X, y)
    assert weight_decay(model) == pytest.approx(model.alpha * 1000 / 50)


def test_parameter_digest_reads_torch_parameters_and_buffers_only():
    torch = pytest.importorskip("torch")

    class WithExtraState(torch.nn.Sequential):
        def get_extra_state(self):  # a dict in state_dict(): not a tensor
            return {"note": [0.0]}

        def set_extra_state(self, state):
            pass

    torch.manual_seed(0)
    module = WithExtraState(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 1))
    before = parameter_digest(module)
    assert parameter_digest(copy.deepcopy(module)) == before
    with torch.no_grad():
        module[0].weight[0, 0] += 1.0
    assert parameter_digest(module) != before


def test_mlp_weight_decay_matches_sklearn_backprop():
    """n x scikit-learn's training gradient == J'(f - y) + alpha * W at any parameters."""
    alpha = 0.7
    model, X, y = _mlp("relu", (4, 3), alpha=alpha, max_iter=5)
    model = copy.deepcopy(model)
    n_layers = model.n_layers_
    buffers = (
        [X] + [None] * (n_layers - 1),
        [None] * (n_layers - 1),
        [np.empty_like(w) for w in model.coefs_],
        [np.empty_like(b) for b in model.intercepts_],
    )
    try:  # private API: the code scikit-learn's solvers differentiate
        loss, coef_grads, intercept_grads = model._backprop(X, y[:, None], None, *buffers)
    except (AttributeError, TypeError) as error:
        pytest.skip(f"MLPRegressor._backprop changed: {error}")
    theirs = np.concatenate(
        [np.r_[g.ravel(), h] for g, h in zip(coef_grads, intercept_grads, strict=True)]
    )
    lin = linearize(model, X)
    residual = lin.prediction - y
    theta = _mlp_parameters(model)
    ours = lin.jacobian.T @ residual + alpha * lin.penalized * theta
    np.testing.assert_allclose(len(y) * theirs, ours, rtol=1e-10, atol=1e-12)
    expected_loss = 0.5 * residual @ residual + 0.5 * alpha * np.sum(theta[lin.penalized] ** 2)
    np.testing.assert_allclose(len(y) * loss, expected_loss, rtol=1e-12)


def test_mlp_in_pipeline_and_frozen():
    X, y = _data()
    X = 10 * X + 3
    pipe = make_pipeline(
        StandardScaler(),
        MLPRegressor(hidden_layer_sizes=(4,), activation="tanh", solver="lbfgs", random_state=0),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        pipe.fit(X, y)
    direct = linearize(pipe[-1], pipe[0].transform(X))
    for wrapped in (pipe, FrozenEstimator(pipe), make_pipeline(StandardScaler(), pipe[-1])):
        if wrapped is not pipe and not isinstance(wrapped, FrozenEstimator):
            wrapped[0].fit(X)
        lin = linearize(wrapped, X)
        np.testing.assert_allclose(lin.jacobian, direct.jacobian)
        np.testing.assert_allclose(lin.prediction, pipe.predict(X), rtol=1e-12, atol=1e-12)
    assert weight_decay(FrozenEstimator(pipe)) == pipe[-1].alpha
    assert parameter_count(pipe) == direct.jacobian.shape[1]


# ---------------------------------------------------------------------------------------------
# Linear models
# ---------------------------------------------------------------------------------------------


LINEAR_MODELS = [
    LinearRegression(),
    Ridge(alpha=2.0),
    RidgeCV(alphas=[0.1, 1.0, 10.0]),
    Lasso(alpha=0.01),
    ElasticNet(alpha=0.01),
    BayesianRidge(),
    SGDRegressor(random_state=0),
    HuberRegressor(),
]


@pytest.mark.parametrize("model", LINEAR_MODELS, ids=lambda m: type(m).__name__)
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_linear_jacobian_is_design_matrix(model, fit_intercept):
    X, y = _data()
    model = copy.deepcopy(model).set_params(fit_intercept=fit_intercept).fit(X, y)
    lin = linearize(model, X)
    assert isinstance(lin, Linearization)
    expected = np.column_stack([X, np.ones(len(X))]) if fit_intercept else X
    np.testing.assert_array_equal(lin.jacobian, expected)
    np.testing.assert_allclose(lin.prediction, model.predict(X))
    np.testing.assert_array_equal(lin.penalized, [True] * X.shape[1] + [False] * fit_intercept)
    assert parameter_count(model) == expected.shape[1]
    assert parameter_count(model, curvature="last_layer") == expected.shape[1]
    np.testing.assert_array_equal(linearize(model, X, curvature="last_layer").jacobian, expected)


def test_linear_weight_decay_values():
    X, y = _data()
    assert weight_decay(LinearRegression().fit(X, y)) == 0.0
    assert weight_decay(Ridge(alpha=2.5).fit(X, y)) == 2.5
    ridge_cv = RidgeCV(alphas=[0.1, 1.0, 10.0]).fit(X, y)
    assert weight_decay(ridge_cv) == ridge_cv.alpha_
    for model in (Lasso(), ElasticNet(), SGDRegressor(random_state=0), HuberRegressor()):
        assert weight_decay(model.fit(X, y)) is None


@pytest.mark.parametrize(
    "model",
    [Ridge(alpha=3.0), RidgeCV(alphas=[0.3, 3.0, 30.0]), BayesianRidge(), LinearRegression()],
    ids=lambda m: type(m).__name__,
)
def test_linear_weight_decay_is_stationary(model):
    """grad of sum (y - f)^2 / 2 + lam / 2 ||w||^2 is ~0 at the fitted coefficients."""
    X, y = _data()
    model = copy.deepcopy(model).fit(X, y)
    lam = weight_decay(model)
    lin = linearize(model, X)
    theta = np.r_[model.coef_, model.intercept_]
    data_gradient = lin.jacobian.T @ (lin.prediction - y)
    gradient = data_gradient + lam * lin.penalized * theta
    assert np.linalg.norm(gradient) < 1e-8 * (1 + np.linalg.norm(X.T @ y))
    if lam > 0:
        assert np.linalg.norm(data_gradient) > 1e-3  # the penalty matters


def test_linear_pipeline_and_frozen():
    X, y = _data()
    X = 5 * X - 2
    pipe = make_pipeline(StandardScaler(), Ridge(alpha=1.0)).fit(X, y)
    Z = pipe[0].transform(X)
    for wrapped in (pipe, FrozenEstimator(pipe), make_pipeline(FrozenEstimator(pipe))):
        lin = linearize(wrapped, X)
        np.testing.assert_allclose(lin.jacobian, np.column_stack([Z, np.ones(len(X))]))
        np.testing.assert_allclose(lin.prediction, pipe.predict(X))
        assert weight_decay(wrapped) == 1.0
        assert parameter_count(wrapped) == X.shape[1] + 1


def test_linear_accepts_dataframe_without_warnings():
    pd = pytest.importorskip("pandas")
    X, y = _data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    model = Ridge().fit(frame, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lin = linearize(model, frame)
    np.testing.assert_allclose(lin.jacobian[:, :3], X)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def test_unfitted_estimators_raise_not_fitted():
    X, _ = _data()
    for model in (
        Ridge(),
        MLPRegressor(hidden_layer_sizes=(3,)),
        FrozenEstimator(Ridge()),
        make_pipeline(StandardScaler(), Ridge()),
    ):
        with pytest.raises(NotFittedError):
            linearize(model, X)
        with pytest.raises(NotFittedError):
            parameter_count(model)
        with pytest.raises(NotFittedError):
            weight_decay(model)


def test_classifiers_and_unsupported_models_raise_type_error():
    X, y = _data()
    labels = (y > 0).astype(int)
    classifiers = [
        LogisticRegression().fit(X, labels),
        MLPClassifier(hidden_layer_sizes=(3,), max_iter=5, random_state=0),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        classifiers[1].fit(X, labels)
    for model in [*classifiers, FrozenEstimator(classifiers[0])]:
        with pytest.raises(TypeError, match="classifier"):
            linearize(model, X)
    tree = DecisionTreeRegressor().fit(X, y)
    for call in (lambda: linearize(tree, X), lambda: weight_decay(tree)):
        with pytest.raises(TypeError, match=r"MLPRegressor, torch\.nn\.Module"):
            call()
    with pytest.raises(TypeError, match="supported"):
        linearize("not a model", X)
    # coef_/intercept_ but a log link: [X, 1] would be the wrong Jacobian.
    with pytest.raises(TypeError, match="coef_ \\+ intercept_"):
        linearize(PoissonRegressor().fit(X, np.exp(y)), X)


def test_multi_output_raises_value_error():
    X, y = _data()
    Y = np.column_stack([y, -y])
    with pytest.raises(ValueError, match="only scalar regression"):
        linearize(Ridge().fit(X, Y), X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPRegressor(hidden_layer_sizes=(3,), solver="lbfgs", max_iter=5).fit(X, Y)
    with pytest.raises(ValueError, match="only scalar regression"):
        linearize(mlp, X)


@pytest.mark.skipif(
    "loss" not in MLPRegressor().get_params(), reason="MLPRegressor(loss=) needs sklearn 1.7"
)
def test_non_identity_mlp_output_raises():
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = MLPRegressor(
            loss="poisson", hidden_layer_sizes=(3,), solver="lbfgs", max_iter=5
        ).fit(X, np.exp(y))
    with pytest.raises(ValueError, match="output activation"):
        linearize(model, X)


def test_non_finite_jacobian_raises():
    model, X, _ = _mlp("identity", (3,))
    broken = copy.deepcopy(model)
    broken.coefs_[0][0, 0] = np.inf
    with pytest.raises(ValueError, match="non-finite Jacobian"):
        linearize(broken, X)


def test_unknown_curvature_raises():
    X, y = _data()
    model = Ridge().fit(X, y)
    with pytest.raises(ValueError, match="'full', 'last_layer'"):
        linearize(model, X, curvature="kfac")
    with pytest.raises(ValueError, match="'full', 'last_layer'"):
        parameter_count(model, curvature="diag")


def test_import_does_not_import_torch():
    code = "import sys, uqconform.linearize; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------------------------------------
# torch
# ---------------------------------------------------------------------------------------------


def _torch_mlp(torch, d=3, hidden=5, out=1, dtype=None):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(d, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, out)
    )
    return net.to(dtype or torch.float64)


def _torch_predict(torch, net, X, theta):
    other = copy.deepcopy(net)
    torch.nn.utils.vector_to_parameters(torch.as_tensor(theta), other.parameters())
    with torch.no_grad():
        return other(torch.as_tensor(X)).reshape(-1).numpy()


def test_torch_jacobian_matches_finite_differences():
    torch = pytest.importorskip("torch")
    net = _torch_mlp(torch)
    X, _ = _data()
    lin = linearize(net, X)
    theta = torch.nn.utils.parameters_to_vector(net.parameters()).detach().numpy()
    assert lin.jacobian.shape == (len(X), theta.size) == (len(X), parameter_count(net))
    fd = _finite_difference(lambda t: _torch_predict(torch, net, X, t), theta)
    assert _relative_error(lin.jacobian, fd) < 1e-5
    with torch.no_grad():
        np.testing.assert_allclose(lin.prediction, net(torch.as_tensor(X)).reshape(-1).numpy())
    sizes = [p.numel() for p in net.parameters()]
    expected = np.concatenate(
        [np.full(s, p.ndim >= 2) for s, p in zip(sizes, net.parameters(), strict=True)]
    )
    np.testing.assert_array_equal(lin.penalized, expected)
    assert weight_decay(net) is None
    assert net.training  # the module's mode is restored


def test_torch_matches_numpy_mlp_with_copied_weights():
    torch = pytest.importorskip("torch")
    model, X, _ = _mlp("tanh", (5,))
    net = _torch_mlp(torch, d=X.shape[1], hidden=5)
    with torch.no_grad():
        for linear, w, b in zip((net[0], net[2]), model.coefs_, model.intercepts_, strict=True):
            linear.weight.copy_(torch.as_tensor(w.T))  # sklearn (in, out), torch (out, in)
            linear.bias.copy_(torch.as_tensor(b))
    ours = linearize(model, X)
    theirs = linearize(net, X)
    np.testing.assert_allclose(theirs.prediction, ours.prediction, rtol=1e-12, atol=1e-12)
    # Reorder the torch weight blocks from (out, in) to sklearn's (in, out) C order.
    blocks, start, n = [], 0, len(X)
    for w, b in zip(model.coefs_, model.intercepts_, strict=True):
        n_in, n_out = w.shape
        weight = theirs.jacobian[:, start : start + w.size].reshape(n, n_out, n_in)
        blocks += [weight.transpose(0, 2, 1).reshape(n, -1)]
        blocks += [theirs.jacobian[:, start + w.size : start + w.size + b.size]]
        start += w.size + b.size
    np.testing.assert_allclose(np.hstack(blocks), ours.jacobian, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(theirs.penalized.sum(), ours.penalized.sum())


def test_torch_last_layer_and_batches(monkeypatch):
    torch = pytest.importorskip("torch")
    import uqconform.linearize as module

    net = _torch_mlp(torch)
    X, _ = _data()
    full = linearize(net, X)
    last = linearize(net, X, curvature="last_layer")
    p_last = sum(p.numel() for p in net[2].parameters())
    assert last.jacobian.shape == (len(X), p_last)
    assert parameter_count(net, curvature="last_layer") == p_last
    np.testing.assert_allclose(last.jacobian, full.jacobian[:, -p_last:], atol=1e-14)
    # Tiny batches give the same Jacobian.
    monkeypatch.setattr(module, "_TORCH_BATCH_ENTRIES", 3 * parameter_count(net))
    np.testing.assert_allclose(linearize(net, X).jacobian, full.jacobian, atol=1e-14)


def test_torch_float32_and_frozen_parameters():
    torch = pytest.importorskip("torch")
    net = _torch_mlp(torch, dtype=torch.float32)
    net[0].weight.requires_grad_(False)
    X, _ = _data()
    lin = linearize(net, X)
    n_trainable = sum(p.numel() for p in net.parameters() if p.requires_grad)
    assert lin.jacobian.shape == (len(X), n_trainable) and lin.jacobian.dtype == np.float64
    ref = linearize(_torch_mlp(torch), X).jacobian[:, net[0].weight.numel() :]
    np.testing.assert_allclose(lin.jacobian, ref, rtol=1e-4, atol=1e-5)


def test_the_parameters_are_theta_star_in_jacobian_order():
    """``J @ theta*`` is the prediction of every model linear in its parameters, and the
    torch and MLP parameter vectors are the weights as stored."""
    torch = pytest.importorskip("torch")
    X, y = _data()
    ridge = Ridge(alpha=1.0).fit(X, y)
    lin = linearize(ridge, X)
    np.testing.assert_allclose(lin.jacobian @ lin.parameters, lin.prediction, atol=1e-12)
    model, X_mlp, _ = _mlp("tanh", (5,))
    last = linearize(model, X_mlp, curvature="last_layer")
    np.testing.assert_allclose(last.jacobian @ last.parameters, last.prediction, atol=1e-12)
    full = linearize(model, X_mlp)
    stored = np.concatenate(
        [np.append(w.ravel(), b) for w, b in zip(model.coefs_, model.intercepts_, strict=True)]
    )
    np.testing.assert_array_equal(full.parameters, stored)
    net = _torch_mlp(torch)
    theta = torch.nn.utils.parameters_to_vector(net.parameters()).detach().numpy()
    np.testing.assert_array_equal(linearize(net, X).parameters, theta)


def test_torch_modules_torch_func_cannot_take_row_by_row_are_refused():
    torch = pytest.importorskip("torch")
    X, _ = _data()

    class CentresTheBatch(torch.nn.Module):  # the output of a row depends on the others
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(X.shape[1], 1)

        def forward(self, x):
            return self.linear(x - x.mean(0, keepdim=True))

    class ReadsAValue(torch.nn.Module):  # .item(): torch.func cannot trace it per row
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(X.shape[1], 1)

        def forward(self, x):
            out = self.linear(x)
            return out * 2 if out.sum().item() > 0 else out

    with pytest.raises(ValueError, match=r"CentresTheBatch gives row \d+ .* alone but"):
        linearize(CentresTheBatch().double(), X)
    with pytest.raises(ValueError, match=r"torch\.func could not differentiate ReadsAValue"):
        linearize(ReadsAValue().double(), X)


def test_torch_multi_output_raises():
    torch = pytest.importorskip("torch")
    X, _ = _data()
    with pytest.raises(ValueError, match="only scalar regression"):
        linearize(_torch_mlp(torch, out=2), X)


def test_the_digest_of_an_array_in_any_layout_survives_a_pickle():
    """Review finding (diffrev6): sampling a large array in memory order changed its
    digest over a pickle (stored in C order) for a layout neither C nor Fortran, and a
    pickled wrapper then refused to predict ("trained again")."""
    import pickle

    from uqconform.linearize import parameter_digest

    rng = np.random.default_rng(0)
    for array in (
        rng.normal(size=(40, 50, 3)).transpose(1, 0, 2),  # neither C nor F contiguous
        np.asfortranarray(rng.normal(size=(100, 60))),
        rng.normal(size=(100, 60)),
    ):
        copy = pickle.loads(pickle.dumps(array))
        before = parameter_digest([array], arrays_only=True)
        assert parameter_digest([copy], arrays_only=True) == before
        assert parameter_digest([np.ascontiguousarray(array)], arrays_only=True) == before
        changed = array.copy()
        changed[tuple(0 for _ in array.shape)] += 1.0  # the first entry is always sampled
        assert parameter_digest([changed], arrays_only=True) != before


def test_the_digest_of_several_pipelines_reads_each_of_them():
    """Found by a benchmark rerun (stop 64): the digest skipped objects whose id it had
    seen, and a Pipeline's temporary list of steps, freed after its turn, left its id to
    the next Pipeline's: a change of that head went unseen, and a model calibrated on
    Pipeline heads was refused as retrained when the ids fell otherwise."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    y = (X[:, 0] > 0).astype(int)

    def heads(last):
        return [
            make_pipeline(StandardScaler(), LogisticRegression(C=c)).fit(X, y)
            for c in (0.1, 1.0, 10.0, last)
        ]

    first, other = heads(100.0), heads(1000.0)
    digests = {parameter_digest(first, arrays_only=True) for _ in range(20)}
    assert len(digests) == 1
    assert parameter_digest(other, arrays_only=True) not in digests  # the last head read
    # a digest over Pipelines says so ("~"): one an older build recorded over Pipelines
    # may have skipped one, so a difference only warns (diff review 49: pickles of
    # Pipeline set-ups from before were refused as "trained again")
    from uqconform.linearize import digest_change

    new = digests.pop()
    assert new.startswith("d4~:")
    assert parameter_digest(first[0][-1], arrays_only=True).startswith("d4:")  # no Pipeline
    assert digest_change("d4:" + "0" * 64, new) == "maybe"
    assert digest_change("d4:" + new.partition(":")[2], new) is None
    assert digest_change("d4~:" + "0" * 64, new) == "changed"
    assert digest_change("d4:" + "0" * 64, "d4:" + "1" * 64) == "changed"
    assert parameter_digest(first, arrays_only=True, like=new) == new  # read as d4
