"""Sequential conformal prediction for time series: KOWCPI, EnbPI, SPCI.

Unit tests of the reweighted Nadaraya-Watson (RNW) weights against their defining
properties (normalisation, the empirical-likelihood moment condition, the plain-NW and
flat-kernel limits, statsmodels' local-constant regression), of the online protocol, and
of input validation. Coverage: exact law where one exists (EnbPI with a fixed hold-out
block is split conformal), binomial standard errors or an empirical band otherwise
(KOWCPI and SPCI have no finite-sample guarantee). Everything is seeded.
"""

from __future__ import annotations

import inspect
import math
import pickle
import warnings

import joblib
import numpy as np
import pytest
from conftest import Unchanged
from scipy import optimize
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.dummy import DummyRegressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression

from uqconform.evaluation import coverage_bounds
from uqconform.quantiles import conformal_rank, weighted_quantile
from uqconform.timeseries import KOWCPI, SPCI, EnbPI, rolling_coverage
from uqconform.timeseries.base import minimum_effective_size, residual_offsets
from uqconform.timeseries.conditional import (
    adjustment_lambda,
    kernel_values,
    lagged_pairs,
    reweighted_nadaraya_watson,
)
from uqconform.timeseries.kowcpi import aic_bandwidth

KERNELS = ["epanechnikov", "gaussian"]
CONSTRAINTS = ["first", "all"]


# ---- data ----------------------------------------------------------------------------------
def iid_series(n: int, seed: int):
    """y = linear + N(0, 1): i.i.d. residuals for a linear model."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, X @ [1.0, -1.0] + rng.normal(size=n)


def state_space(n: int, seed: int):
    """SPCI simulation: Y_t = 0.9 Y_{t-1} + e_t, e_t = 0.9 e_{t-1} + v_t, v_t ~ N(0, 0.1).

    The feature is Y_{t-1}: a linear model cannot see the dependence of e, so its residuals
    are strongly autocorrelated.
    """
    rng = np.random.default_rng(seed)
    v = rng.normal(scale=np.sqrt(0.1), size=n + 100)
    e, Y = np.zeros(n + 100), np.zeros(n + 100)
    for t in range(1, n + 100):  # a recursion over time
        e[t] = 0.9 * e[t - 1] + v[t]
        Y[t] = 0.9 * Y[t - 1] + e[t]
    return Y[99:-1, None], Y[100:]


def seasonal_ar1(n: int, seed: int):
    """Period-12 season (known to the linear model) plus AR(1) noise with coefficient 0.6."""
    rng = np.random.default_rng(seed)
    xi, e = rng.normal(size=n), np.zeros(n)
    for t in range(1, n):  # a recursion over time
        e[t] = 0.6 * e[t - 1] + xi[t]
    t = np.arange(n)
    X = np.column_stack([np.sin(2 * np.pi * t / 12), np.cos(2 * np.pi * t / 12)])
    return X, 2.0 * X[:, 0] + e


class FirstColumn(RegressorMixin, BaseEstimator):
    """Predicts the first feature (no fitting): residuals are known exactly."""

    def fit(self, X, y):
        self.n_features_in_ = np.asarray(X).shape[1]
        return self

    def predict(self, X):
        return np.asarray(X, dtype=float)[:, 0]


def covered(intervals, y):
    return (intervals[:, 0] <= y) & (y <= intervals[:, 1])


def small_models():
    return {
        "KOWCPI": KOWCPI(LinearRegression(), window=2, n_bootstrap=8, random_state=0),
        "EnbPI": EnbPI(LinearRegression(), n_bootstrap=8, memory=200, random_state=0),
        "SPCI": SPCI(LinearRegression(), window=3, n_bootstrap=8, memory=150, random_state=0),
    }


@pytest.fixture(params=["KOWCPI", "EnbPI", "SPCI"])
def fitted(request):
    X, y = iid_series(330, 1)
    model = small_models()[request.param].fit(X[:300], y[:300])
    return model, X[300:], y[300:]


def random_windows(seed: int, n: int = 80, w: int = 2):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, w)), rng.normal(scale=0.5, size=w)


# ---- lagged pairs and window order ---------------------------------------------------------
def test_lagged_pairs_newest_first():
    windows, targets, query = lagged_pairs(np.arange(5.0), 2)
    assert windows.tolist() == [[1.0, 0.0], [2.0, 1.0], [3.0, 2.0]]
    assert targets.tolist() == [2.0, 3.0, 4.0]
    assert query.tolist() == [4.0, 3.0]
    # in general: windows[i, j] = e[i + w - 1 - j], the newest residual in column 0
    e = np.random.default_rng(0).normal(size=30)
    windows, targets, query = lagged_pairs(e, 4)
    for i in range(windows.shape[0]):  # a loop over pairs, to spell the definition out
        np.testing.assert_array_equal(windows[i], e[i : i + 4][::-1])
        assert targets[i] == e[i + 4]
    np.testing.assert_array_equal(query, e[-4:][::-1])


def test_lagged_pairs_too_short_names_both_lengths():
    with pytest.raises(ValueError, match=r"has 3 values.*`window`=3.*at least 4"):
        lagged_pairs(np.zeros(3), 3)


def test_reversing_the_window_changes_rnw_weights():
    """The moment condition uses the newest residual only: the order matters when w > 1."""
    windows, query = random_windows(3, n=120, w=3)
    forward = reweighted_nadaraya_watson(windows, query, 1.0)
    backward = reweighted_nadaraya_watson(windows[:, ::-1], query[::-1], 1.0)
    assert forward.feasible and backward.feasible
    assert np.abs(forward.weights - backward.weights).max() > 1e-3
    # plain NW is a function of distances only, hence order-free
    plain = [reweighted_nadaraya_watson(W, q, 1.0, adjust=False).weights for W, q in
             ((windows, query), (windows[:, ::-1], query[::-1]))]  # fmt: skip
    np.testing.assert_allclose(plain[0], plain[1], rtol=1e-12)
    # w = 1: nothing to reverse
    one = reweighted_nadaraya_watson(windows[:, :1], query[:1], 1.0).weights
    np.testing.assert_array_equal(
        one, reweighted_nadaraya_watson(windows[:, :1][:, ::-1], query[:1][::-1], 1.0).weights
    )


# ---- RNW weights ---------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", KERNELS)
def test_plain_nw_is_the_normalised_kernel(kernel):
    """(a) lambda = 0: adjust=False gives the kernel weights normalised."""
    windows, query = random_windows(0)
    result = reweighted_nadaraya_watson(windows, query, 2.0, kernel=kernel, adjust=False)
    values = kernel_values(np.linalg.norm(windows - query, axis=1) / 2.0, kernel)
    np.testing.assert_allclose(result.weights, values / values.sum(), rtol=1e-12)
    assert result.feasible and result.bandwidth == 2.0


@pytest.mark.parametrize("kernel", KERNELS)
def test_rnw_equals_nw_when_the_moment_condition_holds_at_zero(kernel):
    """(a) Windows symmetric about the query in the first coordinate: lambda = 0."""
    rng = np.random.default_rng(1)
    offsets = rng.uniform(0.1, 1.0, size=12)
    query = np.array([0.3, -0.2])
    second = rng.normal(size=12)
    windows = np.column_stack([np.r_[offsets, -offsets] + query[0], np.r_[second, second]])
    lam, feasible = adjustment_lambda(
        (windows[:, 0] - query[0])
        * kernel_values(np.linalg.norm(windows - query, axis=1) / 3.0, kernel)
    )
    assert feasible and abs(lam) < 1e-12
    rnw = reweighted_nadaraya_watson(windows, query, 3.0, kernel=kernel)
    nw = reweighted_nadaraya_watson(windows, query, 3.0, kernel=kernel, adjust=False)
    np.testing.assert_allclose(rnw.weights, nw.weights, rtol=1e-10)


def test_all_zero_moments_are_feasible_and_one_sign_is_not():
    """Every z = 0 (discrete residuals equal to the query): lambda = 0 meets the moment
    condition exactly, so the step is not counted as infeasible (100 of 100 were)."""
    assert adjustment_lambda(np.zeros(7)) == (0.0, True)
    assert adjustment_lambda(np.array([0.0, 1.0, 2.0])) == (0.0, False)
    assert adjustment_lambda(np.array([0.0, -1.0])) == (0.0, False)


@pytest.mark.parametrize("seed", range(5))
def test_adjustment_weights_at_the_solution(seed):
    """(b) p_i = 1 / (n (1 + lambda z_i)) sums to one and sum p_i z_i = 0; lambda agrees
    with a direct minimisation of -sum log(1 + lambda z_i) over the feasible interval."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=50) * (rng.uniform(size=50) < 0.7)  # some exact zeros (no kernel)
    lam, feasible = adjustment_lambda(z)
    assert feasible
    for active in (z, z[z != 0]):  # with or without the zero-kernel points
        p = 1.0 / (active.size * (1.0 + lam * active))
        assert (p > 0).all()
        np.testing.assert_allclose(p.sum(), 1.0, rtol=1e-12)
        assert abs(np.sum(p * active)) <= 1e-12 * np.abs(active).sum()
    low, high = -1.0 / z.max(), -1.0 / z.min()
    direct = optimize.minimize_scalar(
        lambda t: -np.sum(np.log1p(t * z)),
        bounds=(low + 1e-9 * (high - low), high - 1e-9 * (high - low)),
        method="bounded",
        options={"xatol": 1e-12},
    )
    np.testing.assert_allclose(lam, direct.x, atol=1e-6 * (high - low))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("constraint", CONSTRAINTS)
@pytest.mark.parametrize("seed", range(4))
def test_weights_are_a_distribution_and_satisfy_the_moments(kernel, constraint, seed):
    """(c) Non-negative, summing to one; the moment condition sum_i W_i (X_i - x) = 0 on the
    newest coordinate ("first") or on all of them ("all") whenever it was solvable."""
    windows, query = random_windows(seed, n=150, w=3)
    result = reweighted_nadaraya_watson(windows, query, 1.0, kernel=kernel, constraint=constraint)
    assert (result.weights >= 0).all()
    np.testing.assert_allclose(result.weights.sum(), 1.0, rtol=1e-12)
    assert result.feasible
    moments = result.weights @ (windows - query)
    scale = np.abs(windows - query).max()
    checked = moments[:1] if constraint == "first" else moments
    assert np.abs(checked).max() <= 1e-8 * scale
    if constraint == "first":  # only the first: the others are not forced to zero
        assert np.abs(moments[1:]).max() > 1e-6


def test_constraint_all_equals_first_for_one_lag():
    windows, query = random_windows(2, w=1)
    first = reweighted_nadaraya_watson(windows, query, 1.0, constraint="first")
    every = reweighted_nadaraya_watson(windows, query, 1.0, constraint="all")
    np.testing.assert_allclose(first.weights, every.weights, rtol=1e-8, atol=1e-14)


def test_subnormal_kernel_values_keep_the_reweighting():
    """A tiny Gaussian bandwidth leaves only subnormal kernel values: -1 / z overflowed and
    the step fell back to plain Nadaraya-Watson (a zero-width interval in a review) though
    the moment condition is solvable; the weights do not depend on the scale of z."""
    from uqconform.timeseries.conditional import _combined

    difference = np.array([[-1.0], [0.5], [2.0], [-0.3]])
    for tiny in (np.array([1e-310, 2e-310, 1e-310, 3e-310]),  # every value subnormal
                 np.array([1e-322, 2e-322, 1e-322, 3e-322]),  # products underflow
                 np.array([1e-300, 5e-324, 2e-300, 1e-300])):  # fmt: skip
        for constraint in ("first", "all"):  # with one lag "all" is "first"
            weights, feasible = _combined(difference, tiny, True, constraint)
            reference, _ = _combined(difference, tiny / tiny.max(), True, constraint)
            assert feasible
            np.testing.assert_allclose(weights, reference, rtol=1e-12)
            assert abs(weights @ difference[:, 0]) <= 1e-12  # the moment condition holds
    # normal values beside one subnormal on the other side (a review's zero-width step)
    difference = np.array([[0.5], [2.0], [-1.0]])
    values = np.array([1e-25, 2e-25, 1e-320])
    weights, feasible = _combined(difference, values, True, "first")
    reference, _ = _combined(difference, values * 1e25, True, "first")
    assert feasible
    np.testing.assert_allclose(weights, reference, rtol=1e-9)


@pytest.mark.parametrize("constraint", CONSTRAINTS)
def test_infeasible_lambda_falls_back_to_plain_nw(constraint):
    """Query beyond the cloud in every coordinate: all z of one sign, no solution."""
    windows, _ = random_windows(4, n=60, w=2)
    query = windows.max(axis=0) + 0.1
    z = (windows[:, 0] - query[0]) * kernel_values(
        np.linalg.norm(windows - query, axis=1), "gaussian"
    )
    assert adjustment_lambda(z) == (0.0, False)
    rnw = reweighted_nadaraya_watson(windows, query, 1.0, kernel="gaussian", constraint=constraint)
    nw = reweighted_nadaraya_watson(windows, query, 1.0, kernel="gaussian", adjust=False)
    assert not rnw.feasible
    np.testing.assert_array_equal(rnw.weights, nw.weights)


def test_empty_epanechnikov_neighbourhood_widens_the_bandwidth():
    windows = np.linspace(0.0, 1.0, 40)[:, None]
    query = np.array([5.0])  # every window is more than h = 0.1 away
    result = reweighted_nadaraya_watson(windows, query, 0.1, adjust=False, min_points=10)
    assert result.bandwidth > 0.1
    # distances 4..5: doubling 0.1 six times (6.4) is the first radius reaching 10 windows
    assert result.bandwidth == 0.1 * 2**6
    assert np.count_nonzero(result.weights) >= 10
    assert np.isfinite(result.weights).all() and result.weights.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("kernel", ["epanechnikov", "gaussian"])
def test_a_bandwidth_far_below_the_distances_still_finds_its_neighbours(kernel):
    """Review finding: 60 doublings of h = 1e-20 (or a Gaussian kernel underflowing at
    1e-30) left every kernel value 0, and KOWCPI crashed with a message about `weights`."""
    windows = np.linspace(0.0, 1.0, 40)[:, None]
    query = np.array([5.0])
    result = reweighted_nadaraya_watson(windows, query, 1e-300, kernel=kernel, min_points=10)
    assert np.count_nonzero(result.weights) >= 10
    assert np.isfinite(result.weights).all() and result.weights.sum() == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=200)
    model = KOWCPI(LinearRegression(), window=2, bandwidth=1e-30, kernel=kernel, n_bootstrap=10)
    intervals = model.fit(X[:150], y[:150]).predict_interval(X[150:], y=y[150:])
    assert np.isfinite(intervals).all()


def test_flat_kernel_limit_is_the_empirical_quantile():
    """(d) Huge bandwidth, lambda = 0: uniform weights, the unconditional empirical
    (inverse-CDF) quantiles of the targets: the EnbPI limit."""
    e = np.random.default_rng(5).standard_t(3, size=201)
    windows, targets, query = lagged_pairs(e, 3)
    for kernel in KERNELS:
        weights = reweighted_nadaraya_watson(
            windows, query, 1e12, kernel=kernel, adjust=False
        ).weights
        np.testing.assert_array_equal(weights, np.full(targets.size, 1 / targets.size))
        levels = np.array([0.0, 0.05, 0.1, 0.5, 0.9, 0.95, 1.0])
        np.testing.assert_array_equal(
            weighted_quantile(targets, weights, levels),
            np.quantile(targets, levels, method="inverted_cdf"),
        )


@pytest.mark.parametrize("finite_sample", [False, True])
def test_flat_kernel_kowcpi_is_enbpi(finite_sample):
    """(d) at the estimator level: same residuals, same intervals, step by step (with the
    plain and with the conformal quantiles)."""
    X, y = iid_series(700, 3)
    common = dict(
        estimator=LinearRegression(), n_bootstrap=6, random_state=2, finite_sample=finite_sample
    )
    kow = KOWCPI(window=1, bandwidth=1e12, reweight=False, memory=301, **common)
    enb = EnbPI(memory=300, **common)
    a = kow.fit(X[:400], y[:400]).predict_interval(X[400:], y=y[400:])
    b = enb.fit(X[:400], y[:400]).predict_interval(X[400:], y=y[400:])
    np.testing.assert_array_equal(a, b)


def test_plain_nw_mean_matches_statsmodels():
    """(f) statsmodels' local-constant KernelReg with a Gaussian product kernel of
    per-coordinate standard deviation h is exp(-|u|^2 / (2 h^2)): our Gaussian kernel at
    bandwidth h (statsmodels' ``bw`` is that standard deviation, one per coordinate)."""
    kernel_reg = pytest.importorskip("statsmodels.nonparametric.kernel_regression")
    e = np.random.default_rng(6).normal(size=300)
    e[1:] += 0.6 * e[:-1]
    windows, targets, _ = lagged_pairs(e, 2)
    h = 0.4
    # ``rng`` (statsmodels >= 0.15, which warns without it) seeds nothing: bw is given
    seeded = "rng" in inspect.signature(kernel_reg.KernelReg).parameters
    model = kernel_reg.KernelReg(
        targets,
        windows,
        var_type="cc",
        reg_type="lc",
        bw=[h, h],
        **({"rng": np.random.default_rng(0)} if seeded else {}),
    )
    queries = np.random.default_rng(7).normal(size=(5, 2))
    expected, _ = model.fit(queries)
    ours = [
        reweighted_nadaraya_watson(windows, q, h, kernel="gaussian", adjust=False).weights
        @ targets
        for q in queries
    ]
    np.testing.assert_allclose(ours, expected, rtol=1e-10)


def test_aic_bandwidth_is_larger_for_noisier_data():
    rng = np.random.default_rng(8)
    windows = rng.uniform(-2, 2, size=(400, 1))
    signal = np.sin(2 * windows[:, 0])
    noise = rng.normal(size=400)
    quiet = aic_bandwidth(windows, signal + 0.05 * noise, "gaussian")
    noisy = aic_bandwidth(windows, signal + 2.0 * noise, "gaussian")
    assert quiet < noisy


def test_aic_bandwidth_with_no_scorable_candidate_takes_the_default_and_warns():
    """Three pairs leave no degrees of freedom for any candidate: the smallest candidate
    (0.05, the most extreme) was returned without a word."""
    rng = np.random.default_rng(0)
    with pytest.warns(UserWarning, match="No bandwidth could be scored by the AIC on 3"):
        chosen = aic_bandwidth(rng.normal(size=(3, 2)), rng.normal(size=3), "epanechnikov")
    assert chosen == KOWCPI().get_params()["bandwidth"]
    with pytest.warns(UserWarning, match=r"bandwidth 1 is used"):  # 0.3 not a candidate
        windows, targets = rng.normal(size=(3, 2)), rng.normal(size=3)
        assert aic_bandwidth(windows, targets, "gaussian", (1.0, 2.0)) == 1.0


def test_aic_bandwidth_on_a_short_history_names_the_tuning_not_a_window_never_set():
    """With `window="auto"` the AIC pairs of window 10 were built first: "`window`=10 needs
    at least 11", a window the user never set; now the tuning's own message."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the short-history warnings
        with pytest.raises(ValueError, match=r"tuning `window`='auto'"):
            KOWCPI(LinearRegression(), bandwidth="aic", n_bootstrap=10, random_state=0).fit(X, y)


# ---- estimator-level behaviour ------------------------------------------------------------
def test_window_auto_picks_a_candidate_and_records_tuning():
    X, y = seasonal_ar1(700, 0)
    model = KOWCPI(LinearRegression(), n_bootstrap=8, random_state=0).fit(X[:600], y[:600])
    windows = [r["window"] for r in model.tuning_results_]
    assert windows == [1, 2, 3, 5, 10]
    assert model.window_ in windows
    assert set(model.tuning_results_[0]) == {"window", "bandwidth", "coverage", "width"}
    chosen = next(r for r in model.tuning_results_ if r["window"] == model.window_)
    reaching = [r for r in model.tuning_results_ if r["coverage"] >= 0.9]
    if reaching:  # the narrowest window reaching the target coverage
        assert chosen["width"] == min(r["width"] for r in reaching)
    assert model.predict_interval(X[600:], y=y[600:]).shape == (100, 2)


def test_bandwidth_aic_works():
    X, y = seasonal_ar1(500, 1)
    model = KOWCPI(LinearRegression(), window=2, bandwidth="aic", n_bootstrap=8, random_state=0)
    model.fit(X[:400], y[:400])
    assert model.bandwidth_ in (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
    out = model.predict_interval(X[400:], y=y[400:])
    assert np.isfinite(out).all() and (out[:, 0] <= out[:, 1]).all()


def test_infeasible_steps_are_counted():
    """Residuals = y exactly (constant-zero model, hold-out residuals): a new maximum as the
    latest residual makes every z_i <= 0 at the next step."""
    rng = np.random.default_rng(9)
    y = rng.normal(size=200)
    X = np.zeros((200, 1))
    model = KOWCPI(
        DummyRegressor(strategy="constant", constant=0.0), window=1, residuals="holdout"
    ).fit(X[:150], y[:150])
    assert model.n_infeasible_ == 0
    model.update(X[:1], [10.0])  # a new maximum
    model.predict_interval(X[:1])
    assert model.n_infeasible_ == 1
    model.update(X[:1], [0.0])  # a typical value
    model.predict_interval(X[:1])
    assert model.n_infeasible_ == 1


def test_online_protocol_step_by_step(fitted):
    model, X, y = fitted
    stepwise = pickle.loads(pickle.dumps(model))
    batch = model.predict_interval(X, y=y)
    steps = []
    for t in range(len(y)):  # the protocol spelled out
        steps.append(stepwise.predict_interval(X[t : t + 1])[0])
        stepwise.update(X[t : t + 1], y[t : t + 1])
    # equal up to rounding: the model predicts one row or a block (different BLAS calls)
    np.testing.assert_allclose(batch, np.array(steps), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.memory_, stepwise.memory_, rtol=1e-12, atol=1e-12)
    assert model.n_steps_ == stepwise.n_steps_ == len(y)


def test_predict_set_is_predict_interval(fitted):
    """The native set of a scalar regressor, as for the split wrappers; online with y."""
    model, X, y = fitted
    twin = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(model.predict_set(X, alpha=[0.1, 0.2]),
                                  twin.predict_interval(X, alpha=[0.1, 0.2]))  # fmt: skip
    np.testing.assert_array_equal(model.predict_set(X, y=y), twin.predict_interval(X, y=y))
    with pytest.raises(TypeError):  # y is keyword only: predict_set(X, 0.5) is alpha = 0.5
        model.predict_set(X, 0.1, y)
    # y and alpha are keyword only in predict_interval: the message says which to write
    # (it was Python's "takes 2 positional arguments but 3 were given")
    message = r"keyword only, got 1 more positional value\(s\): 0.05\. Write predict_interval"
    with pytest.raises(TypeError, match=message):
        model.predict_interval(X, 0.05)
    assert model.n_steps_ == twin.n_steps_ == len(y)


def test_a_missing_y_is_named_in_fit_and_update(fitted):
    model, X, _ = fitted
    for call in (lambda: clone(model).fit(X, None), lambda: model.update(X[:1], None)):
        with pytest.raises(ValueError, match="requires y to be passed"):
            call()


def test_without_y_rows_share_the_offsets(fitted):
    model, X, _ = fitted
    before = model.memory_.copy()
    out = model.predict_interval(X)
    offsets = out - model.predict(X)[:, None]
    np.testing.assert_allclose(offsets, np.broadcast_to(offsets[0], offsets.shape), atol=1e-12)
    np.testing.assert_array_equal(model.memory_, before)  # nothing absorbed


def test_memory_keeps_the_last_residuals():
    X, y = iid_series(400, 2)
    model = EnbPI(LinearRegression(), n_bootstrap=5, memory=50, random_state=0)
    model.fit(X[:300], y[:300])
    np.testing.assert_array_equal(model.memory_, model.fit_residuals_[-50:])
    model.update(X[300:320], y[300:320])
    new = y[300:320] - model.predict(X[300:320])
    np.testing.assert_allclose(model.memory_, np.r_[model.fit_residuals_[-30:], new])
    assert model.memory_.shape == (50,)
    model.predict_interval(X[320:], y=y[320:])
    assert model.memory_.shape == (50,)


def test_rolling_coverage():
    assert rolling_coverage([1, 0, 1, 1], window=2).tolist() == [1.0, 0.5, 0.5, 1.0]
    hits = np.random.default_rng(0).uniform(size=100) < 0.9
    rolled = rolling_coverage(hits, window=10)
    for t in range(100):  # definition
        assert rolled[t] == pytest.approx(hits[max(0, t - 9) : t + 1].mean())
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="window"):
            rolling_coverage(hits, window=bad)
    with pytest.raises(ValueError, match="1-D"):
        rolling_coverage(np.ones((2, 2)))


def test_several_levels_are_nested(fitted):
    model, X, y = fitted
    alphas = [0.3, 0.05, 0.1, 0.2]
    out = model.predict_interval(X, y=y, alpha=alphas)
    assert out.shape == (len(y), 2, 4)
    order = np.argsort(alphas)  # 0.05 (widest) first
    lower, upper = out[:, 0, order], out[:, 1, order]
    assert (np.diff(lower, axis=1) >= 0).all() and (np.diff(upper, axis=1) <= 0).all()


def test_nesting_is_enforced_for_kowcpi_with_heavy_tails():
    """The beta search alone gives crossing intervals here (found while writing the tests)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 2))
    y = X @ [1, -1] + rng.standard_t(2, size=600)
    model = KOWCPI(LinearRegression(), window=2, n_bootstrap=8, random_state=0)
    out = model.fit(X[:400], y[:400]).predict_interval(X[400:], y=y[400:], alpha=[0.05, 0.1, 0.2])
    assert (np.diff(out[:, 0], axis=1) >= 0).all() and (np.diff(out[:, 1], axis=1) <= 0).all()


def test_a_multi_level_call_widens_a_level_only_to_nest_it():
    """KOWCPI's effective-size floor depends on the level: each level gets its own weights
    (the smallest level's floor used to widen the alpha = 0.2 interval by 22%)."""
    t = np.arange(260)
    rng = np.random.default_rng(0)
    s = np.sin(t / 8) * 10 + rng.normal(size=260)
    X = np.c_[s[2:-18], s[1:-19], s[:-20], t[:-20] / 100][:240]
    y = s[3:243]
    model = KOWCPI(LinearRegression(), n_bootstrap=5, random_state=0).fit(X[:160], y[:160])
    wide, narrow = (model.predict_interval(X[160:], alpha=a) for a in (0.1, 0.2))
    both = model.predict_interval(X[160:], alpha=[0.2, 0.1])
    np.testing.assert_allclose(both[..., 0], narrow)  # the larger level: as asked alone
    hull = np.c_[np.minimum(wide[:, 0], narrow[:, 0]), np.maximum(wide[:, 1], narrow[:, 1])]
    np.testing.assert_allclose(both[..., 1], hull)
    assert np.diff(narrow).mean() < np.diff(wide).mean()


@pytest.mark.parametrize("name", ["EnbPI", "SPCI"])
def test_separate_calls_nest_only_without_the_beta_search(name):
    """Each level searches its own beta, so separate calls at two levels need not nest
    (found by an audit; documented). With beta_grid=1 the intervals are central and
    separate calls nest, as the docs say."""
    rng = np.random.default_rng(0)
    t = np.arange(400)
    X = np.c_[np.sin(t / 10), np.cos(t / 15), rng.normal(size=400)]
    noise = np.zeros(400)
    for i in range(1, 400):  # AR(1) residuals, a recursion over time
        noise[i] = 0.6 * noise[i - 1] + rng.normal()
    y = X @ [2.0, -1.0, 0.5] + noise
    crossings = {}
    for grid in (5, 1):
        model = small_models()[name].set_params(beta_grid=grid).fit(X[:300], y[:300])
        crossings[grid] = 0
        for pair in ((0.1, 0.2), (0.2, 0.3)):
            wide, narrow = (
                pickle.loads(pickle.dumps(model)).predict_interval(X[300:], y=y[300:], alpha=a)
                for a in pair
            )
            crossings[grid] += np.sum((wide[:, 0] > narrow[:, 0]) | (narrow[:, 1] > wide[:, 1]))
    assert crossings[1] == 0 and crossings[5] > 0


@pytest.mark.parametrize("name", ["KOWCPI", "EnbPI", "SPCI"])
def test_reproducible_parallel_and_pickled(name):
    X, y = iid_series(260, 4)
    runs = []
    for n_jobs in (1, 2, 1):
        model = small_models()[name].set_params(n_jobs=n_jobs, random_state=7)
        runs.append(model.fit(X[:220], y[:220]).predict_interval(X[220:], y=y[220:]))
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
    model = small_models()[name].set_params(random_state=7).fit(X[:220], y[:220])
    clone = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(
        model.predict_interval(X[220:], y=y[220:]), clone.predict_interval(X[220:], y=y[220:])
    )


def test_dask_backend_gives_the_same_intervals():
    distributed = pytest.importorskip("distributed")
    X, y = iid_series(260, 5)
    model = EnbPI(LinearRegression(), n_bootstrap=6, random_state=3)
    local = model.fit(X[:220], y[:220]).predict_interval(X[220:], y=y[220:])
    with (
        distributed.Client(processes=False, n_workers=1, threads_per_worker=2) as _,
        joblib.parallel_config(backend="dask"),
    ):
        remote = model.fit(X[:220], y[:220]).predict_interval(X[220:], y=y[220:])
    np.testing.assert_array_equal(local, remote)


@pytest.mark.parametrize("name", ["KOWCPI", "EnbPI", "SPCI"])
def test_holdout_residuals(name):
    X, y = iid_series(300, 6)
    model = small_models()[name].set_params(residuals="holdout", holdout_fraction=0.7)
    model.fit(X[:250], y[:250])
    assert len(model.source_.models) == 1
    np.testing.assert_allclose(
        model.fit_residuals_, y[75:250] - model.source_.models[0].predict(X[75:250])
    )
    assert model.predict_interval(X[250:], y=y[250:]).shape == (50, 2)


# ---- coverage -------------------------------------------------------------------------------
def test_enbpi_holdout_follows_the_split_conformal_law():
    """(e) i.i.d. data, a hold-out block and no updating: the residual memory is a fixed
    calibration set exchangeable with the test residuals, and with one beta (alpha / 2) the
    interval runs between order statistics k_lo = ceil(n alpha / 2) and
    k_hi = ceil(n (1 - alpha / 2)) of the n residuals. A new residual lands there with
    probability (k_hi - k_lo) / (n + 1): the split-conformal law with rank k_hi - k_lo, which
    ``coverage_bounds`` gives at alpha' = 1 - (k_hi - k_lo) / (n + 1), pooled over seeds."""
    n_fit, n_cal, n_test, seeds, alpha = 100, 199, 300, 20, 0.1
    hits = []
    for seed in range(seeds):  # independent data sets
        X, y = iid_series(n_fit + n_cal + n_test, 100 + seed)
        model = EnbPI(
            LinearRegression(), residuals="holdout", holdout_fraction=n_cal / (n_fit + n_cal),
            memory=None, beta_grid=1, alpha=alpha,
        ).fit(X[: n_fit + n_cal], y[: n_fit + n_cal])  # fmt: skip
        assert model.memory_.size == n_cal
        out = model.predict_interval(X[n_fit + n_cal :])
        hits.append(covered(out, y[n_fit + n_cal :]).mean())
    k = int(np.ceil(n_cal * (1 - alpha / 2))) - int(np.ceil(n_cal * alpha / 2))
    low, high = coverage_bounds(n_cal, 1 - k / (n_cal + 1), n_test, 0.999, n_repeats=seeds)
    assert low <= np.mean(hits) <= high


def _pooled_coverage(model, generator, n_fit, n_test, seeds):
    """Pooled coverage and mean width of `_online_runs`."""
    runs = _online_runs(model, generator, n_fit, n_test, seeds)
    return tuple(float(np.concatenate([run[k] for run in runs]).mean()) for k in (0, 1))


@pytest.mark.parametrize(
    "name",
    ["KOWCPI", "EnbPI", pytest.param("SPCI", marks=pytest.mark.slow)],
)
def test_iid_coverage_within_three_standard_errors(name):
    """(e) i.i.d. residuals: coverage close to 0.9. No finite-sample law for the online
    methods (the memory slides, the beta search picks the narrowest of its intervals and
    KOWCPI/SPCI weight their neighbours), so the band is 3 binomial standard errors of the
    pooled number of steps: a statement about the bias, not a guarantee. KOWCPI runs at its
    default bandwidth (0.3): with ``finite_sample=False`` (plain weighted quantiles of its
    ~250 effective residuals and the width-minimising beta search) it gives 0.880 here,
    below the band; the conformal ends give 0.900."""
    models = {
        "KOWCPI": KOWCPI(LinearRegression(), window=1, n_bootstrap=10),
        "EnbPI": EnbPI(LinearRegression(), n_bootstrap=10),
        "SPCI": SPCI(LinearRegression(), window=2, n_bootstrap=10, memory=300, beta_grid=1),
    }
    n_test = 200 if name == "SPCI" else 1000
    coverage, _ = _pooled_coverage(models[name], iid_series, 600, n_test, range(5))
    se = np.sqrt(0.9 * 0.1 / (5 * n_test))
    assert abs(coverage - 0.9) < 3 * se


def _online_runs(model, generator, n_fit, n_test, seeds):
    """Per seed (independent series): hits, widths and KOWCPI-style effective sizes."""
    runs = []
    for seed in seeds:
        X, y = generator(n_fit + n_test, seed)
        model.set_params(random_state=seed).fit(X[:n_fit], y[:n_fit])
        out = model.predict_interval(X[n_fit:], y=y[n_fit:])
        hits, widths = covered(out, y[n_fit:]), out[:, 1] - out[:, 0]
        runs.append((hits, widths, model.effective_sample_sizes_))
    return runs


def _batch_means_se(hits_per_series, batch=100):
    """Standard error of the pooled coverage from means of consecutive blocks of steps:
    hits of an online method are dependent (shared memory, autocorrelated residuals), so
    the binomial standard error would be too small; blocks of 100 steps are nearly
    independent of each other for these generators."""
    means = np.concatenate([h[: h.size // batch * batch].reshape(-1, batch).mean(axis=1)
                            for h in hits_per_series])  # fmt: skip
    return float(means.std(ddof=1) / np.sqrt(means.size))


@pytest.mark.slow
@pytest.mark.parametrize("generator", [state_space, seasonal_ar1])
def test_synthetic_coverage_and_kowcpi_narrower_than_enbpi(generator):
    """§1.12: dependent residuals, 5 seeds of 2,000 online steps. KOWCPI has no
    finite-sample guarantee; its conformal ends target 0.9 within a fraction of a point
    (0.898 +- 0.0007 over 800 AR(0.6) seeds in a review, window 1) and over-cover by at
    most the test point's weight share, min(2 / (n_eff + 1), alpha) per step: the pooled
    coverage must lie in [0.9, 0.9 + mean share], widened by 3.5
    batch-means standard errors (measured: 0.896-0.901; the published algorithm,
    ``finite_sample=False``, gives 0.876-0.881 and fails the lower end). KOWCPI conditions
    on the last residual, so it is narrower than EnbPI, which ignores the dependence; EnbPI
    itself has no guarantee here (it under-covers a little, 0.885-0.888), so its coverage
    is not asserted: at a lower coverage it could only look narrower, not wider."""
    kow = _online_runs(
        KOWCPI(LinearRegression(), window=1, n_bootstrap=20, memory=1000),
        generator, 1000, 2000, range(5),
    )  # fmt: skip
    enb = _online_runs(EnbPI(LinearRegression(), n_bootstrap=20), generator, 1000, 2000, range(5))
    hits = [run[0] for run in kow]
    coverage_kow = float(np.concatenate(hits).mean())
    se = _batch_means_se(hits)
    share = np.minimum(2 / (np.concatenate([run[2] for run in kow]) + 1), 0.1).mean()
    assert 0.9 - 3.5 * se <= coverage_kow <= 0.9 + share + 3.5 * se, (coverage_kow, se, share)
    width_kow = np.concatenate([run[1] for run in kow]).mean()
    width_enb = np.concatenate([run[1] for run in enb]).mean()
    assert width_kow < 0.9 * width_enb


def test_spci_issues_the_same_interval_again_whatever_its_seed():
    # with random_state=None each step's forest was unseeded: asking twice gave two
    # intervals, and predict_interval(X, y=y) judged a miss on one the user never saw; a
    # seed near 2**32 overflowed the forest's at the next steps
    X, y = state_space(160, seed=0)
    for seed in (None, 2**32 - 1):
        model = SPCI(LinearRegression(), window=3, n_bootstrap=5, memory=100, random_state=seed)
        model.fit(X[:120], y[:120])
        first = model.predict_interval(X[120:121])
        np.testing.assert_array_equal(model.predict_interval(X[120:121]), first)
        np.testing.assert_array_equal(model.predict_interval(X[120:121], y=y[120:121]), first)
        model.predict_interval(X[121:126], y=y[121:126])  # steps past 2**32: no overflow
        assert model.n_steps_ == 6
    fits = [
        SPCI(LinearRegression(), window=3, n_bootstrap=5, memory=100)
        .fit(X[:120], y[:120])
        .predict_interval(X[120:140], y=y[120:140])
        for _ in range(2)
    ]
    assert not np.array_equal(*fits)  # still random across fits without a seed
    model.__dict__["_forest_seed"] = None  # as pickled by an older build: still predicts
    assert np.isfinite(model.predict_interval(X[126:127])).all()


def test_spci_is_narrower_than_enbpi_on_autocorrelated_residuals():
    """SPCI's claim over EnbPI: it regresses the next residual's quantiles on the last
    ``window`` residuals, so when the residuals are autocorrelated (``state_space``: AR(1)
    noise with coefficient 0.9, which a linear model on Y_{t-1} cannot remove) its intervals
    are narrower than EnbPI's, which use the residuals' marginal quantiles. 3 series of 100
    online steps (SPCI refits a forest at each step). Neither method has a finite-sample
    law; their coverage on this generator is checked in the slow tests above and below."""
    spci = SPCI(LinearRegression(), window=5, n_bootstrap=10, memory=300)
    enbpi = EnbPI(LinearRegression(), n_bootstrap=10)
    _, spci_width = _pooled_coverage(spci, state_space, 600, 100, range(3))
    _, enbpi_width = _pooled_coverage(enbpi, state_space, 600, 100, range(3))
    assert spci_width < enbpi_width, f"SPCI {spci_width:.3f} vs EnbPI {enbpi_width:.3f}"


@pytest.mark.slow
@pytest.mark.parametrize("generator", [state_space, seasonal_ar1])
def test_synthetic_coverage_spci(generator):
    """As above for SPCI, 5 seeds of 400 steps (a forest is refitted at every step). SPCI
    has plain weighted quantiles (no conformal ends), so the band is symmetric: no bias
    beyond 3.5 batch-means standard errors (measured: 0.906 +- 0.007 on state_space,
    0.891 +- 0.009 on seasonal_ar1)."""
    spci = SPCI(LinearRegression(), window=5, n_bootstrap=20, memory=500)
    hits = [run[0] for run in _online_runs(spci, generator, 1000, 400, range(5))]
    coverage, se = float(np.concatenate(hits).mean()), _batch_means_se(hits)
    assert abs(coverage - 0.9) <= 3.5 * se, (coverage, se)


# ---- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cls", "params", "match"),
    [
        (KOWCPI, {"window": 0}, "window"),
        (KOWCPI, {"window": "big"}, "window"),
        (KOWCPI, {"window": 2.0}, "window"),
        (KOWCPI, {"bandwidth": 0.0}, "bandwidth"),
        (KOWCPI, {"bandwidth": np.nan}, "bandwidth"),
        (KOWCPI, {"bandwidth": "silverman"}, "bandwidth"),
        (KOWCPI, {"bandwidth": None}, "bandwidth"),
        (KOWCPI, {"kernel": "box"}, "kernel"),
        (KOWCPI, {"constraint": "some"}, "constraint"),
        (KOWCPI, {"tune_fraction": 1.0}, "tune_fraction"),
        (KOWCPI, {"beta_grid": 0}, "beta_grid"),
        (KOWCPI, {"beta_grid": [0.2, 1.5]}, "beta_grid"),
        (KOWCPI, {"beta_grid": []}, "beta_grid"),
        (KOWCPI, {"beta_grid": [[0.0, 1.0]]}, "beta_grid"),
        (EnbPI, {"beta_grid": 1.0}, "beta_grid"),  # a count or the fraction 1? (review s65)
        (KOWCPI, {"beta_grid": np.float64(0.5)}, r"\[0.5\] for that one fraction"),
        (EnbPI, {"memory": 1}, "memory"),
        (EnbPI, {"memory": 10.5}, "memory"),
        (EnbPI, {"n_bootstrap": 1}, "n_bootstrap"),
        (EnbPI, {"n_bootstrap": True}, "n_bootstrap"),
        (EnbPI, {"residuals": "oob"}, "residuals"),
        (EnbPI, {"holdout_fraction": 0.0}, "holdout_fraction"),
        (EnbPI, {"holdout_fraction": "half"}, "holdout_fraction"),
        (EnbPI, {"alpha": 1.0}, "alpha"),
        (EnbPI, {"alpha": [0.1, 0.0]}, "alpha"),
        (SPCI, {"window": 0}, "window"),
        (SPCI, {"n_trees": 0}, "n_trees"),
        (SPCI, {"max_depth": -1}, "max_depth"),
    ],
)
def test_invalid_parameters(cls, params, match):
    X, y = iid_series(200, 0)
    with pytest.raises(ValueError, match=match):
        cls(LinearRegression(), **params).fit(X, y)


@pytest.mark.parametrize(
    ("model", "needed"),
    [
        (KOWCPI(LinearRegression(), window=5, memory=5, n_bootstrap=4), 6),
        (SPCI(LinearRegression(), window=100, n_bootstrap=4), 101),
    ],
)
def test_history_too_short_for_the_window(model, needed):
    X, y = iid_series(80, 0)
    have = 5 if needed == 6 else 80
    with pytest.raises(ValueError, match=rf"has {have} values.*at least {needed}"):
        model.fit(X, y)


def test_predict_before_fit():
    X, _ = iid_series(10, 0)
    for model in small_models().values():  # a loop over methods
        for call in (model.predict_interval, model.predict):
            with pytest.raises(NotFittedError):
                call(X)
        with pytest.raises(NotFittedError):
            model.update(X, np.zeros(10))


def test_bad_series(fitted):
    model, X, y = fitted
    memory = model.memory_.copy()
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.update(X, bad)
    with pytest.raises(ValueError, match="NaN"):
        model.predict_interval(X, y=bad)
    with pytest.raises(ValueError, match="entries"):
        model.update(X[:5], y[:4])
    with pytest.raises(ValueError, match="entries"):
        model.predict_interval(X[:5], y=y[:6])
    with pytest.raises(ValueError, match="alpha"):
        model.predict_interval(X, alpha=0.0)
    with pytest.raises(ValueError, match="alpha"):
        model.predict_interval(X, alpha=[0.1, 1.2])
    with pytest.raises(ValueError, match="features"):
        model.predict_interval(np.c_[X, X])
    np.testing.assert_array_equal(model.memory_, memory)  # failed calls absorbed nothing
    Xf, yf = iid_series(100, 0)
    yf[10] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        type(model)(LinearRegression(), n_bootstrap=4).fit(Xf, yf)


class NanFirstColumn(FirstColumn):
    """FirstColumn that declares NaN support (and returns NaN for a row with NaN first)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags


def test_non_finite_residuals_are_refused():
    X, y = iid_series(200, 0)
    X[:, 0] = y + np.random.default_rng(0).normal(size=200)  # FirstColumn is a fair model
    model = EnbPI(NanFirstColumn(), residuals="holdout").fit(X[:150], y[:150])
    memory = model.memory_.copy()
    X_bad = X[150:].copy()
    X_bad[7, 0] = np.nan  # allowed in X (some models handle NaN), but this one returns NaN
    with pytest.raises(ValueError, match="not finite"):
        model.update(X_bad, y[150:])
    with pytest.raises(ValueError, match="not finite"):
        model.predict_interval(X_bad, y=y[150:])
    np.testing.assert_array_equal(model.memory_, memory)
    X_fit = X[:150].copy()
    X_fit[140, 0] = np.nan
    with pytest.raises(ValueError, match="not finite"):
        EnbPI(NanFirstColumn(), residuals="holdout").fit(X_fit, y[:150])
    # a model that declares no NaN support is refused by name before it predicts
    with pytest.raises(ValueError, match="`X` contains NaN and FirstColumn does not accept"):
        EnbPI(FirstColumn(), residuals="holdout").fit(X_fit, y[:150])


def test_inputs_are_not_modified(fitted):
    model, X, y = fitted
    guard = Unchanged(X, y)
    model.predict_interval(X, y=y, alpha=[0.1, 0.2])
    model.update(X, y)
    model.predict_interval(X)
    guard.check()
    X2, y2 = iid_series(300, 9)
    guard = Unchanged(X2, y2)
    KOWCPI(LinearRegression(), n_bootstrap=4, random_state=0).fit(X2, y2)
    guard.check()


def test_beta_zero_uses_only_weighted_residuals():
    """Q_0 is the smallest residual with positive weight, not the smallest in memory."""
    from uqconform.timeseries.base import residual_offsets

    targets = np.array([-100.0, -1.0, 0.0, 1.0, 2.0])
    weights = np.array([0.0, 0.25, 0.25, 0.25, 0.25])
    lower, upper = residual_offsets(targets, weights, np.array([0.5]), np.array([0.0]))[:, 0]
    assert (lower, upper) == (-1.0, 0.0)


@pytest.mark.parametrize(
    ("seed", "some_reach_the_target"),
    [(5, False), (3, True)],  # seed 5: 0 of 20 settings reach 0.9; seed 3: 6 of 20 do
)
def test_auto_bandwidth_tunes_window_and_bandwidth_together(seed, some_reach_the_target):
    """The rule of ``_tune``: the narrowest setting whose tuning coverage reaches
    ``1 - alpha``; if none does, the highest coverage, ties broken by the narrowest. Each
    seed is chosen so that the rule's answer differs from the obvious wrong ones (the
    narrowest setting overall, the widest among the ties, the highest coverage)."""
    X, y = iid_series(500, seed)
    model = KOWCPI(LinearRegression(), bandwidth="auto", n_bootstrap=10, random_state=0)
    model.fit(X, y)
    rows = model.tuning_results_
    tried = [(r["window"], r["bandwidth"]) for r in rows]
    assert len(tried) == len(set(tried)) == 20  # 5 windows x 4 bandwidths
    assert {0.3, 0.5, 1.0, 2.0} == {h for _, h in tried}
    chosen = rows[tried.index((model.window_, model.bandwidth_))]
    narrowest = min(rows, key=lambda r: r["width"])
    passing = [r for r in rows if r["coverage"] >= 0.9]
    if some_reach_the_target:
        assert 0 < len(passing) < len(rows)
        assert chosen["coverage"] >= 0.9
        assert chosen["width"] == min(r["width"] for r in passing)
        # the narrowest setting overall falls short, and the best-covering one is wider
        assert narrowest["coverage"] < 0.9
        assert max(r["coverage"] for r in rows) > chosen["coverage"]
    else:
        assert passing == []
        best = max(r["coverage"] for r in rows)
        ties = [r for r in rows if r["coverage"] == best]
        assert chosen["coverage"] == best
        assert chosen["width"] == min(r["width"] for r in ties)
        # several settings tie at the best coverage, with different widths, and the
        # narrowest setting overall covers less
        assert len({r["width"] for r in ties}) > 1
        assert narrowest["coverage"] < best


# ---- finite-sample (conformal) ends and the effective-sample-size floor ------------------
@pytest.mark.parametrize("n", [19, 40, 99, 250])
@pytest.mark.parametrize("beta", [0.02, 0.05, 0.08])
def test_finite_sample_equal_weights_are_split_conformal_ranks(n, beta):
    """Equal weights: the ends are the k-th and (k + m)-th order statistics with
    k = floor((n + 1) beta) and m = ceil((n + 1)(1 - alpha)), split conformal's exact
    two-sided interval (beta clipped so that k >= 1)."""
    values = np.random.default_rng(n).normal(size=n)
    ordered = np.sort(values)
    alpha = 0.1
    lower, upper = residual_offsets(
        values, np.full(n, 1 / n), np.array([alpha]), np.array([beta / alpha]), True
    )[:, 0]
    k = max(conformal_rank(n, beta, kind="conformity")[0], 1)
    m = conformal_rank(n, alpha)[0]
    k = min(k, n - m)
    assert (lower, upper) == (ordered[k - 1], ordered[k + m - 1])


@pytest.mark.parametrize("law", ["uniform", "normal"])
def test_finite_sample_beta_search_keeps_the_guarantee_with_equal_weights(law):
    """The narrowest of several beta chosen on the residuals plus the new one (full
    conformal over the choice) misses a new exchangeable residual with probability
    1 - m / (n + 1) <= alpha. Choosing on the stored residuals alone covered 0.879
    (uniform) and 0.885 (normal) here, against 0.902: a symmetric law, where every
    beta is about as wide and the search chases noise."""
    rng = np.random.default_rng(11)
    n, repeats, alpha = 50, 4000, 0.1
    draw = rng.uniform if law == "uniform" else rng.standard_normal
    residuals = draw(size=(repeats, n + 1))
    weights, grid = np.full(n, 1 / n), np.linspace(0, 1, 5)
    ends = np.array(
        [residual_offsets(r[:n], weights, np.array([alpha]), grid, True)[:, 0] for r in residuals]
    )
    covered = (ends[:, 0] <= residuals[:, n]) & (residuals[:, n] <= ends[:, 1])
    low, high = coverage_bounds(n, alpha, 1, n_repeats=repeats)
    assert low <= covered.mean() <= high


def test_finite_sample_beta_search_breaks_width_ties_by_the_first_beta():
    """Tied residuals: with r = 2 the sample is [0,0,1,1,1,2,2,2], and the windows [0, 1]
    and [1, 2] are as wide; the first beta wins, so 2 is not covered (a review found the
    interval reaching 2)."""
    values = np.array([0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 2.0])
    ends = residual_offsets(values, np.full(7, 1 / 7), np.array([0.5]), np.array([0.0, 1.0]), True)
    assert ends[:, 0].tolist() == [0.0, 1.0]


def _narrowest_window_covers(values, r, alpha, fractions):
    """Brute force of the finite-sample rule for equal weights: with ``r`` added, the
    window of ``ceil((n + 1)(1 - alpha))`` points starting at ``floor(beta (n + 1))`` (beta
    clipped to [1/(n+1), alpha - 1/(n+1)]) for each ``beta = fraction * alpha``; the
    narrowest (the first among equals) must hold ``r``."""
    sample, total = np.sort(np.append(values, r)), values.size + 1
    size = math.ceil(total * (1 - alpha) - 1e-9)
    best = None
    for fraction in fractions:
        beta = min(max(fraction * alpha, 1 / total), alpha - 1 / total)
        start = math.floor(beta * total + 1e-9)
        end = start + size - 1
        width = sample[end] - sample[start] if end < total else math.inf
        if best is None or width < best[0]:
            best = (width, sample[start], sample[end] if end < total else math.inf)
    return best[1] <= r <= best[2]


def test_finite_sample_windows_of_one_residual_match_brute_force():
    """Review finding: at a level where the window holds one point (m = 1: alpha 0.9 with
    up to 8 residuals, or the high working levels ACI reaches on count series) the rule
    raised numpy's "zero-size array" error and stopped the stream; it was 110 of 1,500
    random cases. A window of r alone has width 0 whatever r is."""
    rng = np.random.default_rng(5)
    for _ in range(150):
        n = int(rng.integers(2, 9))
        alpha = float(rng.choice([0.8, 0.9, 0.95]))
        fractions = np.linspace(0, 1, int(rng.integers(1, 6)))
        values = np.sort(rng.integers(0, 4, n).astype(float) if rng.random() < 0.5 else
                         rng.normal(size=n))  # fmt: skip
        lower, upper = residual_offsets(
            values, np.full(n, 1 / n), np.array([alpha]), fractions, True
        )[:, 0]
        if 1 / (n + 1) > alpha / 2:  # too few residuals: the whole line
            assert (lower, upper) == (-np.inf, np.inf)
            continue
        span = values[-1] - values[0] + 1.0
        grid = np.unique(np.concatenate(
            [np.linspace(values[0] - span, values[-1] + span, 4001), values]
        ))  # fmt: skip
        covered = grid[[_narrowest_window_covers(values, r, alpha, fractions) for r in grid]]
        step = np.diff(grid).max()
        assert covered.min() - step <= lower <= covered.min() + 1e-12
        assert covered.max() - 1e-12 <= upper <= covered.max() + step


def test_finite_sample_beta_search_keeps_the_width_gain_on_skewed_residuals():
    """On skewed residuals the full-conformal search keeps most of the width the search
    gains over equal tails (beta = alpha / 2)."""
    rng = np.random.default_rng(12)
    n, alpha = 200, 0.1
    widths = []
    for residuals in rng.lognormal(size=(200, n)):
        weights = np.full(n, 1 / n)
        for grid in (np.linspace(0, 1, 5), np.array([0.5])):
            lower, upper = residual_offsets(residuals, weights, np.array([alpha]), grid, True)
            widths.append(upper[0] - lower[0])
    searched, equal_tails = np.mean(widths[::2]), np.mean(widths[1::2])
    assert searched < 0.8 * equal_tails


def test_finite_sample_ends_are_wider_and_beta_is_clipped():
    values = np.random.default_rng(0).normal(size=60)
    weights = np.random.default_rng(1).uniform(size=60)
    weights /= weights.sum()
    grid = np.linspace(0, 1, 5)
    plain = residual_offsets(values, weights, np.array([0.1]), grid)[:, 0]
    conformal = residual_offsets(values, weights, np.array([0.1]), grid, True)[:, 0]
    assert conformal[0] <= plain[0] and conformal[1] >= plain[1]
    assert np.isfinite(conformal).all()
    # beta = 0 becomes the new residual's share: the lower end is the smallest residual
    share = np.sum(weights**2) / (1 + np.sum(weights**2))
    lower, upper = residual_offsets(values, weights, np.array([0.1]), np.array([0.0]), True)
    assert lower[0] == values.min()
    expected = residual_offsets(values, weights, np.array([0.1]), np.array([share / 0.1]), True)
    np.testing.assert_array_equal(np.r_[lower, upper], expected.ravel())
    # too few effective residuals for alpha: an infinite interval
    few = residual_offsets(values[:10], np.full(10, 0.1), np.array([0.1]), grid, True)
    assert np.isinf(few).all()


def test_minimum_effective_size():
    assert minimum_effective_size(np.array([0.1])) == 19  # 2 / 0.1 - 1
    assert minimum_effective_size(np.array([0.2, 0.05])) == 39
    values = np.arange(19.0)
    ok = residual_offsets(values, np.full(19, 1 / 19), np.array([0.1]), np.array([0.5]), True)
    assert np.isfinite(ok).all()
    short = residual_offsets(
        values[:18], np.full(18, 1 / 18), np.array([0.1]), np.array([0.5]), True
    )
    assert np.isinf(short).all()


@pytest.mark.parametrize("kernel", KERNELS)
def test_effective_size_floor_widens_the_kernel(kernel):
    windows, query = random_windows(11, n=300, w=3)
    narrow = reweighted_nadaraya_watson(windows, query, 0.2, kernel=kernel)
    assert 1 / np.sum(narrow.weights**2) < 40
    wide = reweighted_nadaraya_watson(windows, query, 0.2, kernel=kernel, min_effective=40)
    assert wide.bandwidth > 0.2
    assert 1 / np.sum(wide.weights**2) >= 40
    np.testing.assert_allclose(wide.weights.sum(), 1.0)


def test_degenerate_adjustment_falls_back_to_plain_nw():
    """A query at the edge of the cloud: lambda near its bound piles the mass on one window;
    below the floor, plain NW weights (at the widened radius) are used and flagged."""
    windows = np.linspace(-1.0, 1.0, 200)[:, None]
    query = np.array([0.999])
    rnw = reweighted_nadaraya_watson(windows, query, 0.5)
    assert rnw.feasible and 1 / np.sum(rnw.weights**2) < 19
    floored = reweighted_nadaraya_watson(windows, query, 0.5, min_effective=19)
    plain = reweighted_nadaraya_watson(
        windows, query, floored.bandwidth, adjust=False, min_effective=0
    )
    assert not floored.feasible
    np.testing.assert_array_equal(floored.weights, plain.weights)
    assert 1 / np.sum(floored.weights**2) >= 19


def test_finite_sample_kowcpi_repairs_small_effective_samples():
    """i.i.d. residuals, window 3: the kernel keeps few effective residuals, and plain
    weighted quantiles with the narrowest beta under-cover by about 10 points. The
    conformal ends with the effective-size floor remove that bias: coverage is not below
    0.9 by more than 3 binomial standard errors of the pooled steps (a statement about the
    bias; there is no finite-sample law for the weighted online method). They are
    conservative by up to about 2 / (n_eff + 1) per step (n_eff: the recorded effective
    sample size of that step's weights), so pooled coverage stays below 0.9 plus the mean of
    that over the steps plus 3 standard errors. An end is infinite exactly when the new
    residual's share ``1 / (n_eff + 1)`` of the mass exceeds alpha / 2."""
    n_fit, n_test, seeds, alpha = 800, 400, range(3), 0.1
    common = dict(estimator=LinearRegression(), window=3, n_bootstrap=5)
    plain, _ = _pooled_coverage(
        KOWCPI(**common, finite_sample=False), iid_series, n_fit, n_test, seeds
    )
    hits, excess = [], []
    for seed in seeds:  # independent series
        X, y = iid_series(n_fit + n_test, seed)
        model = KOWCPI(**common, random_state=seed).fit(X[:n_fit], y[:n_fit])
        out = model.predict_interval(X[n_fit:], y=y[n_fit:])
        n_eff = np.asarray(model.effective_sample_sizes_)
        assert n_eff.shape == (n_test,)  # one per row given with y
        share = 1 / (n_eff + 1)
        clear = np.abs(share - alpha / 2) > 1e-6  # rows not at the rounding boundary
        np.testing.assert_array_equal(np.isinf(out).any(axis=1)[clear], (share > alpha / 2)[clear])
        hits.append(covered(out, y[n_fit:]))
        excess.append(np.minimum(2 * share, alpha))
    fixed, excess = np.concatenate(hits).mean(), np.concatenate(excess).mean()
    se = np.sqrt((1 - alpha) * alpha / (len(seeds) * n_test))
    assert plain < 1 - alpha - 3 * se
    assert 1 - alpha - 3 * se <= fixed <= 1 - alpha + excess + 3 * se


def test_too_few_residuals_give_infinite_intervals_with_a_warning():
    X, y = iid_series(120, 3)
    model = EnbPI(LinearRegression(), memory=10, n_bootstrap=4, finite_sample=True)
    with pytest.warns(UserWarning, match=r"10 residuals.* set `memory` \(now 10\) to 19"):
        model.fit(X[:100], y[:100])
    with pytest.warns(UserWarning, match="infinite"):
        out = model.predict_interval(X[100:])
    assert np.isinf(out).any(axis=1).all()


def test_finite_sample_parameter():
    X, y = iid_series(200, 0)
    with pytest.raises(ValueError, match="finite_sample"):
        KOWCPI(LinearRegression(), n_bootstrap=4, finite_sample="yes").fit(X, y)


# ---- a call that raises changes nothing ------------------------------------------------------
def _online_state(model):
    return (
        model.memory_.copy(),
        model.n_steps_,
        model.n_infeasible_,
        list(model.effective_sample_sizes_),
        model.coverage_history_.copy(),
    )


def _assert_same_state(before, after):
    for old, new in zip(before, after, strict=True):
        np.testing.assert_array_equal(new, old)


def test_an_interrupted_online_batch_changes_nothing(fitted, monkeypatch):
    """Ctrl-C at step 8 of a batch: no residual absorbed, no diagnostic kept, and giving
    the batch again yields the intervals of a model that was never interrupted."""
    model, X, y = fitted
    clean = pickle.loads(pickle.dumps(model)).predict_interval(X, y=y)
    before = _online_state(model)
    original, calls = type(model)._interval_offsets, []

    def interrupted(self, alphas, *args, **kwargs):
        calls.append(1)
        if len(calls) == 8:
            raise KeyboardInterrupt
        return original(self, alphas, *args, **kwargs)

    monkeypatch.setattr(type(model), "_interval_offsets", interrupted)
    with pytest.raises(KeyboardInterrupt):
        model.predict_interval(X, y=y)
    monkeypatch.undo()
    assert len(calls) == 8  # the batch really was cut after seven absorbed steps
    _assert_same_state(before, _online_state(model))
    np.testing.assert_array_equal(model.predict_interval(X, y=y), clean)


def test_a_warning_raised_as_an_error_changes_nothing():
    """The 'infinite intervals' warning comes after the steps; as an error it undoes them."""
    X, y = iid_series(60, 0)
    model = KOWCPI(LinearRegression(), window=1, n_bootstrap=8, random_state=0)
    model.fit(X[:12], y[:12])  # 12 residuals: too few for a finite interval at 0.1
    before = _online_state(model)
    with pytest.warns(UserWarning, match="infinite"):
        model.predict_interval(X[12:15], y=y[12:15])
    model = KOWCPI(LinearRegression(), window=1, n_bootstrap=8, random_state=0)
    model.fit(X[:12], y[:12])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match="infinite"):
            model.predict_interval(X[12:15], y=y[12:15])
    _assert_same_state(before, _online_state(model))


@pytest.mark.parametrize("name", ["KOWCPI", "SPCI"])
def test_a_failed_refit_keeps_the_previous_fit(name):
    """The refit fails in the window tuning, after the new models were trained: the old
    models, residuals and memory stay together (before, the new model was kept with the
    old memory)."""
    X, y = iid_series(340, 0)
    model = {
        "KOWCPI": KOWCPI(LinearRegression(), window=30, n_bootstrap=8, random_state=0),
        "SPCI": SPCI(LinearRegression(), window=50, n_bootstrap=8, random_state=0),
    }[name].fit(X[:300], y[:300])
    expected = model.predict_interval(X[300:305])
    with pytest.raises(ValueError, match="at least"):
        model.fit(X[300:330], 10 * y[300:330])  # 30 rows: too short for the window
    np.testing.assert_array_equal(model.predict_interval(X[300:305]), expected)
    assert model.fit_residuals_.shape[0] == 300


def test_keeps_state_on_error_cuts_appended_lists_back():
    from uqconform.base import keeps_state_on_error

    class Recorder:
        def __init__(self):
            self.history_ = [1.0]

        @keeps_state_on_error
        def step(self, fail):
            self.history_.append(2.0)  # extended in place, not rebound
            if fail:
                raise RuntimeError("stop")

    recorder = Recorder()
    kept = recorder.history_
    with pytest.raises(RuntimeError, match="stop"):
        recorder.step(fail=True)
    assert recorder.history_ is kept and recorder.history_ == [1.0]
    recorder.step(fail=False)
    assert recorder.history_ == [1.0, 2.0]


@pytest.mark.parametrize("finite_sample", [False, True])
def test_residual_offsets_do_not_depend_on_the_order_of_the_residuals(finite_sample):
    # the residuals are sorted once inside (ties and zero weights included): any order of
    # the same (residual, weight) pairs gives the same interval ends
    rng = np.random.default_rng(8)
    targets = np.round(rng.standard_t(3, size=600), 1)  # many ties
    weights = rng.random(600) * (rng.random(600) > 0.3)
    levels, grid = np.array([0.05, 0.1, 0.2]), np.linspace(0, 1, 5)
    expected = residual_offsets(targets, weights, levels, grid, finite_sample)
    assert np.isfinite(expected).all()
    for _ in range(3):
        order = rng.permutation(600)
        np.testing.assert_array_equal(
            residual_offsets(targets[order], weights[order], levels, grid, finite_sample),
            expected,
        )


@pytest.mark.parametrize("method", [EnbPI, KOWCPI])
def test_a_target_whose_residual_equals_an_offset_is_inside(method):
    """Interval ends are rounded outward: with a constant model at -0.4 and targets in
    {0, 1}, the residuals are 0.4 and 1.4, both offsets, and ``-0.4 + 1.4`` is
    ``0.9999999999999999``: without the rounding every 1 fell outside its interval."""
    from sklearn.frozen import FrozenEstimator

    y = np.random.default_rng(0).integers(0, 2, 400).astype(float)
    X = np.zeros((400, 1))
    model = FrozenEstimator(DummyRegressor(strategy="constant", constant=-0.4).fit(X, y))
    params = {"window": 2, "bandwidth": 1.0} if method is KOWCPI else {}
    cp = method(model, alpha=0.3, memory=200, **params).fit(X[:200], y[:200])
    out = cp.predict_interval(X[200:], y=y[200:])
    residuals = y[200:] + 0.4
    # every residual is one of the two offsets, so every target is inside (in exact arithmetic)
    offsets = cp._interval_offsets(np.array([0.3]))[:, 0]
    assert np.isin(residuals, offsets).all()
    assert ((out[:, 0] <= y[200:]) & (y[200:] <= out[:, 1])).all()
    assert cp.coverage_history_.all()


def test_a_time_series_interval_does_not_depend_on_the_other_rows():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(150, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=150)
    cp = EnbPI(LinearRegression(), n_bootstrap=10, random_state=0).fit(X[:120], y[:120])
    alone = cp.predict_interval(X[120:])
    far = np.r_[X[120:], [[1e12, 0.0]]]
    np.testing.assert_array_equal(cp.predict_interval(far)[:-1], alone)


def test_spci_weights_ignore_last_bit_differences_of_the_residuals():
    """A point model's prediction on one row and on a batch can differ in the last bit;
    SPCI's per-step forest split differently on residuals one ulp apart, so a stream fed
    row by row and in one call got intervals up to half their width apart (11 of 200
    memory states changed under such nudges in a review)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(350, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=350)
    model = SPCI(
        LinearRegression(), n_bootstrap=5, window=10, n_trees=5, memory=80, random_state=1
    ).fit(X[:150], y[:150])
    pick = np.random.default_rng(1).random(80) < 1 / 3
    for t in range(150, 350):  # 200 memory states of the online stream
        memory = model.memory_
        nudged = memory.copy()
        nudged[pick[: memory.size]] = np.nextafter(memory[pick[: memory.size]], np.inf)
        _, weights, _ = model._next_weights(memory, 0)
        _, again, _ = model._next_weights(nudged, 0)
        np.testing.assert_array_equal(weights, again)
        model.update(X[t : t + 1], y[t : t + 1])


def test_a_beta_grid_is_searched_in_increasing_order_whatever_its_given_order():
    """Equally wide intervals went to the first beta of the given order, so a grid and its
    reverse gave different intervals on tied residuals; duplicates are ignored."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))
    y = X @ [1.0, -1.0] + np.round(rng.normal(size=400), 0)  # integer noise: ties
    intervals = [
        EnbPI(LinearRegression(), beta_grid=grid, n_bootstrap=10, random_state=0)
        .fit(X[:300], y[:300])
        .predict_interval(X[300:])
        for grid in ([0.0, 0.25, 0.5, 0.75, 1.0], [1.0, 0.75, 0.5, 0.25, 0.0, 0.5], 5)
    ]
    np.testing.assert_array_equal(intervals[0], intervals[1])
    np.testing.assert_array_equal(intervals[0], intervals[2])


def test_an_effective_size_at_the_floor_gives_both_ends_finite():
    """With 2 / alpha whole, the kernel stops widening a hair below the floor (n_eff
    18.99999999 of 19 at alpha 0.1): the new residual's share passed the 1e-9 tolerance,
    but beta was clipped past alpha / 2 and 70% of KOWCPI's intervals at `memory=20`
    were [-inf, U] (kow review)."""
    targets = np.random.default_rng(0).standard_normal(19)
    for nudge in (0.0, 1.2e-4, 1.4e-4):  # share above alpha / 2 by 0, 7e-10, 9e-10 relative
        weights = np.ones(19)
        weights[0] += nudge
        weights /= weights.sum()
        offsets = residual_offsets(targets, weights, np.array([0.1]), np.linspace(0, 1, 5), True)
        np.testing.assert_array_equal(offsets[:, 0], [targets.min(), targets.max()])
    rng = np.random.default_rng(1)
    X = rng.normal(size=(240, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=240)
    model = KOWCPI(LinearRegression(), window=1, memory=20, n_bootstrap=10, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        intervals = model.fit(X[:120], y[:120]).predict_interval(X[120:], y=y[120:])
    assert np.isfinite(intervals).all(), np.isinf(intervals).mean(axis=0)


def test_a_tiny_bandwidth_widens_without_overflow_warnings():
    """Review finding (kow): `bandwidth=1e-300` overflowed the scaled distances (numpy's
    "overflow encountered" hundreds of times in three steps); the widened radius was
    right, and stays so."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(300, 2)), rng.normal(size=300)
    tiny = KOWCPI(LinearRegression(), bandwidth=1e-300).fit(X[:250], y[:250])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        intervals = tiny.predict_interval(X[250:255], y=y[250:255])
    assert np.isfinite(intervals).all() and (intervals[:, 1] > intervals[:, 0]).all()


def test_rows_older_than_those_absorbed_are_warned_about():
    """Review finding (user): a model fitted on the later block and fed the earlier one
    online, or fed its training rows again, absorbed them as the next steps silently."""
    import pandas as pd

    rng = np.random.default_rng(0)
    times = pd.date_range("2026-01-01", periods=400, freq="h")
    X = pd.DataFrame(rng.normal(size=(400, 2)), index=times)
    y = pd.Series(X[0] + rng.normal(size=400), index=times)
    model = EnbPI(LinearRegression(), n_bootstrap=20, random_state=0).fit(X[200:300], y[200:300])
    for rows in (slice(0, 10), slice(200, 210)):  # the earlier block; training rows again
        with pytest.warns(UserWarning, match=r"start at .* not after the latest row absorbed"):
            pickle.loads(pickle.dumps(model)).update(X[rows], y[rows])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # new rows in order; forecasts without values
        model.predict_interval(X[300:310], y=y[300:310])
        model.update(X[310:320], y[310:320])
        model.predict_interval(X[320:330])
        again = pickle.loads(pickle.dumps(model))
        # a new block of a series with several rows per time, its first at the latest time
        shared = times[[319, 320, 320, 321, 321]]
        model.update(X[320:325].set_axis(shared), y[320:325].set_axis(shared))
    with pytest.warns(UserWarning, match=r"start at .* not after the latest row absorbed"):
        again.update(X[319:320], y[319:320])  # the last row again (diffrev6)
    # forecasts (no values) of rows seen before or older: not forecasts (stop 51's user
    # review); nothing absorbed, so the next new block is not warned about
    for rows in (slice(0, 10), slice(310, 320)):
        with pytest.warns(UserWarning, match=r"not after the latest .* not forecasts"):
            again.predict_interval(X[rows])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again.predict(X[200:320])  # point predictions (fitted values) read no memory
        again.predict_interval(X[320:330], y=y[320:330])


def test_tuning_passes_over_windows_the_memory_can_never_fill():
    """kow review: with `memory=25` (19 pairs needed at alpha 0.1), window 10 leaves 15
    pairs, so every interval is infinite; its tuning coverage of 1 reached the level and it
    won over finite windows covering 0.89 (3 of 40 seeds: 100 of 100 intervals infinite)."""
    rng = np.random.default_rng(6)
    X = rng.normal(size=(700, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=700)
    model = KOWCPI(LinearRegression(), memory=25, n_bootstrap=10, random_state=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tuning block is short: close to a guess
        model.fit(X[:600], y[:600])
        intervals = model.predict_interval(X[600:], y=y[600:])
    windows = {row["window"]: row for row in model.tuning_results_}
    assert windows[10]["coverage"] == 1.0 and np.isinf(windows[10]["width"])  # the trap
    assert 25 - model.window_ >= 19
    assert np.isfinite(intervals).all()


def test_the_aic_fallback_warning_names_the_candidate_window_it_concerns():
    """kow review: with `window="auto"` the warning "bandwidth 0.3 is used" came from the
    candidate window 10, while the model went on to use window 1 with bandwidth 3.0."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))[:40]
    y = X @ [1.0, -1.0] + rng.normal(size=400)[:40]
    model = KOWCPI(LinearRegression(), bandwidth="aic", n_bootstrap=10, random_state=0)
    match = r"on 30 residual windows of length 10 \(a candidate of window='auto', used if chosen\)"
    with pytest.warns(UserWarning, match=match):
        model.fit(X, y)
    assert model.window_ != 10


def test_a_series_too_short_to_tune_is_refused_before_any_candidate_warns():
    """diffrev10: with `bandwidth="aic"` and `window="auto"` on 12 rows, fit warned that a
    candidate window's AIC fell back (and that the tuning block is short) before refusing
    the series as too short to tune."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=12)
    model = KOWCPI(LinearRegression(), bandwidth="aic", n_bootstrap=10, random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match=r"tuning `window`='auto' .* needs at least 12"):
            model.fit(X, y)
    assert not [w for w in caught if "AIC" in str(w.message) or "tuning block" in str(w.message)]


def test_aic_bandwidth_works_with_a_window_longer_than_its_2000_residual_slice():
    """kow F2: the AIC was computed on the last 2,000 residuals only, so with 2,040 fit
    rows and `window`=2020 (which a fixed bandwidth fits) it claimed "The residual history
    has 2000 values but `window`=2020 needs at least 2021". Now it takes the last
    `window` + 11 residuals; windows of 2,020 residuals are too far apart for any candidate
    bandwidth to be scored, so the AIC's fallback (0.3, with its warning) is used."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2040, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=2040)
    settings = dict(window=2020, n_bootstrap=10, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the few-pairs warning of so long a window
        KOWCPI(LinearRegression(), bandwidth=0.3, **settings).fit(X, y)
    model = KOWCPI(LinearRegression(), bandwidth="aic", **settings)
    with pytest.warns(UserWarning, match="No bandwidth could be scored by the AIC on 11 "):
        model.fit(X, y)
    assert (model.window_, model.bandwidth_) == (2020, KOWCPI().get_params()["bandwidth"])


def test_short_history_message_names_the_tuned_bandwidth_at_a_fixed_window():
    """kow F3: with `window`=1 and `bandwidth`='auto' the message said "tuning `window`=1",
    though the window is fixed and the bandwidth is what is tuned."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=12)
    model = KOWCPI(LinearRegression(), window=1, bandwidth="auto", n_bootstrap=10, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the bootstrap's short-sample warnings
        with pytest.raises(
            ValueError, match=r"tuning `bandwidth`='auto' at `window`=1 \("
        ) as info:
            model.fit(X, y)
    assert "tuning `window`=1" not in str(info.value)
