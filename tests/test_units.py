"""Intervals follow the units of the data: ``y`` times ``c`` gives intervals times ``c``, and
``X`` times ``c`` the same intervals, whenever the wrapped model is itself equivariant.

Each test is a regression test for a fixed bound or floor in absolute units (the time
series have theirs in ``test_timeseries_usability.py``). Differences at the level of the
outward rounding (2**-50 of the ends) are expected, hence the relative tolerance.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.neural_network import MLPRegressor

from uqconform.bayes import LinearizedPredictive
from uqconform.regression import (
    ApproximateFullConformalRegressor,
    FullConformalRidge,
    SplitConformalRegressor,
)

RTOL = 1e-9


def linear_data(n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = X @ [1.0, 2.0, -1.0] + (0.3 + np.abs(X[:, 0])) * rng.normal(size=n)
    return X, y


def intervals_without_warnings(model, X, y, n_fit=200):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        return model.fit(X[:n_fit], y[:n_fit]).predict_interval(X[n_fit:])


@pytest.mark.parametrize("unit", [1e-6, 1e7, 2.0**-1000, 2.0**600])
@pytest.mark.parametrize(
    "make",
    [
        lambda: FullConformalRidge(LinearRegression(), alpha=0.1),
        lambda: ApproximateFullConformalRegressor(LinearRegression(), alpha=0.1),
    ],
    ids=["FullConformalRidge", "ACP-GN"],
)
def test_full_cp_of_a_linear_model_ignores_the_units_of_X(make, unit):
    """Regression test: the singularity test compared Cholesky pivots of features in
    different units (an intercept column of ones beside X in micrometres), declared a
    well-posed system singular, and gave 35 of 100 test rows infinite intervals at
    X x 1e-6 (6 at X x 1e7), with a warning; the Gram matrix underflowed at X x 2**-1000
    (a LinAlgError) and overflowed at X x 2**600."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 1))
    y = 2 * X[:, 0] + rng.normal(size=300)
    expected = intervals_without_warnings(make(), X, y)
    np.testing.assert_allclose(
        intervals_without_warnings(make(), X * unit, y), expected, rtol=RTOL
    )


@pytest.mark.parametrize("refine", [False, True], ids=["full", "split+refine"])
def test_acp_bias_prior_ignores_the_units_of_the_other_parameters(refine):
    """Regression test: the bias's small prior was 1e-10 times the average curvature of
    every parameter, so X in larger units pinned the intercept harder (intervals moved by
    1.5% of their width at X x 1e5, 5% with split+refine)."""
    X, y = linear_data(500)
    X = X + 1.0

    def intervals(features):
        model = ApproximateFullConformalRegressor(LinearRegression(), alpha=0.1)
        model.fit(features[:200], y[:200])
        if refine:
            model.calibrate(features[200:400], y[200:400])
        return model.predict_interval(features[400:])

    np.testing.assert_allclose(intervals(X * 1e5), intervals(X), rtol=RTOL)


def test_acp_noise_follows_the_units_of_y():
    """Regression test: the RMS residual was floored at an absolute 1e-12 (noise_ and
    predict_std 99 times too large at y x 1e-14)."""
    X, y = linear_data()
    base = ApproximateFullConformalRegressor(LinearRegression()).fit(X[:200], y[:200])
    small = ApproximateFullConformalRegressor(LinearRegression()).fit(X[:200], y[:200] * 1e-14)
    assert small.noise_ == pytest.approx(base.noise_ * 1e-14, rel=RTOL, abs=0)
    np.testing.assert_allclose(
        small.predict_std(X[200:]), base.predict_std(X[200:]) * 1e-14, rtol=RTOL
    )


class _SpreadModel:
    """A fitted difficulty model: ``predict_std`` from a linear fit of |residuals| on |X|."""

    def __init__(self, X, absolute_residuals):
        self.model = LinearRegression().fit(np.abs(X), absolute_residuals)

    def predict_std(self, X):
        return np.maximum(self.model.predict(np.abs(X)), 0.0)


@pytest.mark.parametrize("unit", [1e-14, 2.0**-60])
def test_prefit_difficulty_is_not_floored_in_absolute_units(unit):
    """Regression test: without fit, every spread was floored at 1e-12, so with y in small
    units every row had the floor and the intervals lost their shape (max/min width 103 at
    y x 1, 1 at y x 1e-14)."""
    X, y = linear_data(900)

    def intervals(target):
        point = LinearRegression().fit(X[:400], target[:400])
        spread = _SpreadModel(X[:400], np.abs(target[:400] - point.predict(X[:400])))
        model = SplitConformalRegressor(
            point, alpha=0.1, conformity_score="normalized", difficulty_estimator=spread
        )
        return model.calibrate(X[400:800], target[400:800]).predict_interval(X[800:])

    np.testing.assert_allclose(intervals(y * unit), intervals(y) * unit, rtol=RTOL)


def test_bayesian_noise_follows_the_units_of_y():
    """Regression test: the validation mean squared residual was floored at an absolute
    1e-12, so a network whose outputs are in small units got a noise 6e16 times too large at
    y x 1e-14. The same network in other units: its last layer times ``c``."""
    X, y = linear_data(400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        network = MLPRegressor(
            hidden_layer_sizes=(8,), solver="lbfgs", max_iter=300, alpha=1.0, random_state=0
        ).fit(X[:200], y[:200])
    small = copy.deepcopy(network)
    small.coefs_[-1] = small.coefs_[-1] * 1e-14
    small.intercepts_[-1] = small.intercepts_[-1] * 1e-14
    base = LinearizedPredictive(network, random_state=0).fit(X[200:300], y[200:300])
    scaled = LinearizedPredictive(small, random_state=0).fit(X[200:300], y[200:300] * 1e-14)
    assert scaled.noise_variance_ == pytest.approx(base.noise_variance_ * 1e-28, rel=1e-6, abs=0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: FullConformalRidge(Ridge(alpha=1.0), alpha=0.1),
        lambda: ApproximateFullConformalRegressor(Ridge(alpha=1.0), alpha=0.1),
    ],
    ids=["FullConformalRidge", "ACP-GN"],
)
def test_a_penalty_that_dominates_tiny_features_gives_its_limit(make):
    """Regression test: with features below 1e-155 and a ridge penalty, the penalty over
    the column's squared scale overflowed and the whole machine turned NaN (NaN intervals
    for full CP, zero-width ones for ACP-GN). In that regime the penalty pins every
    coefficient at 0, so the intervals are those of the intercept-only fit at any scale."""
    X, y = linear_data()
    limit = make().fit(X[:200] * 1e-150, y[:200]).predict_interval(X[200:] * 1e-150)
    bounds = make().fit(X[:200] * 1e-200, y[:200]).predict_interval(X[200:] * 1e-200)
    assert np.isfinite(bounds).all() and (bounds[:, 1] - bounds[:, 0] > 0).all()
    np.testing.assert_allclose(bounds, limit, rtol=RTOL)
