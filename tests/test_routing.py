"""scikit-learn metadata routing: ``fit`` parameters reach the wrapped model as it asked.

With routing on, each wrapper must deliver ``sample_weight`` to the model that requested it
(so the fitted model equals the one trained with routing off), refuse metadata nobody
requested, honour aliases, and work inside ``cross_validate`` / ``GridSearchCV``.
"""

from __future__ import annotations

import numpy as np
import pytest
import sklearn
from conftest import regression_data
from sklearn.base import clone
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestRegressor
from sklearn.exceptions import UnsetMetadataPassedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import BayesianRidge, LogisticRegression, QuantileRegressor, Ridge
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.neighbors import KNeighborsRegressor
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from uqconform.classification import (
    BinarizedSmoothedClassifier,
    EnsembleConformalClassifier,
    MultiDimScoreClassifier,
    SplitConformalClassifier,
)
from uqconform.multioutput import EllipsoidalConformalRegressor
from uqconform.regression import (
    ApproximateFullConformalRegressor,
    ConformalizedQuantileRegressor,
    SplitConformalRegressor,
)
from uqconform.timeseries import EnbPI

N = 240
WEIGHTS = np.random.default_rng(1).uniform(0.2, 3.0, N)
X_REG, Y_REG = regression_data(n=N, seed=0)
X_CLF, Y_CLF = make_classification(N, 6, n_informative=4, n_classes=3, random_state=0)
Y_TWO = np.c_[Y_REG, Y_REG + np.random.default_rng(2).normal(size=N)]


def _ridge():
    return Ridge(alpha=1.0)


def _logistic():
    return LogisticRegression(max_iter=500)


# (name, wrapper factory taking the inner model, inner model factory, X, y, output method)
WRAPPERS = [
    ("split", lambda m: SplitConformalRegressor(m), _ridge, X_REG, Y_REG, "predict"),
    (
        "split-normalized",
        lambda m: SplitConformalRegressor(m, conformity_score="normalized", random_state=0),
        _ridge,
        X_REG,
        Y_REG,
        "predict",
    ),
    (
        "cqr",
        lambda m: ConformalizedQuantileRegressor(m),
        lambda: QuantileRegressor(alpha=0.0),
        X_REG,
        Y_REG,
        "predict",
    ),
    (
        "classifier",
        lambda m: SplitConformalClassifier(m),
        _logistic,
        X_CLF,
        Y_CLF,
        "predict_proba",
    ),
    (
        "ensemble",
        lambda m: EnsembleConformalClassifier(m, n_heads=2, random_state=0),
        _logistic,
        X_CLF,
        Y_CLF,
        "predict_proba",
    ),
    (
        "multidim",
        lambda m: MultiDimScoreClassifier(m, n_heads=2, random_state=0),
        _logistic,
        X_CLF,
        Y_CLF,
        "predict_proba",
    ),
    (
        "bincp",
        lambda m: BinarizedSmoothedClassifier(m, random_state=0),
        _logistic,
        X_CLF,
        Y_CLF,
        "predict_proba",
    ),
    (
        "enbpi",
        lambda m: EnbPI(m, n_bootstrap=10, random_state=0),
        _ridge,
        X_REG,
        Y_REG,
        "predict",
    ),
    (
        "ellipsoid",
        lambda m: EllipsoidalConformalRegressor(m),
        _ridge,
        X_REG,
        Y_TWO,
        "predict",
    ),
]
IDS = [case[0] for case in WRAPPERS]


def _output(model, method, X):
    if method == "predict_proba" and not hasattr(model, "predict_proba"):
        method = "predict"
    return np.asarray(getattr(model, method)(X), dtype=float)


@pytest.mark.parametrize(("name", "wrap", "inner", "X", "y", "method"), WRAPPERS, ids=IDS)
def test_routed_weights_train_the_same_model(name, wrap, inner, X, y, method):
    unrouted = wrap(inner()).fit(X, y, sample_weight=WEIGHTS)
    unweighted = wrap(inner()).fit(X, y)
    with sklearn.config_context(enable_metadata_routing=True):
        routed = wrap(inner().set_fit_request(sample_weight=True))
        routed.fit(X, y, sample_weight=WEIGHTS)
        aliased = wrap(inner().set_fit_request(sample_weight="w"))
        aliased.fit(X, y, w=WEIGHTS)
        routed_out = _output(routed, method, X)
        aliased_out = _output(aliased, method, X)
    expected = _output(unrouted, method, X)
    np.testing.assert_array_equal(routed_out, expected)
    np.testing.assert_array_equal(aliased_out, expected)
    assert not np.allclose(_output(unweighted, method, X), expected)  # the weights mattered


@pytest.mark.parametrize(("name", "wrap", "inner", "X", "y", "method"), WRAPPERS, ids=IDS)
def test_unrequested_metadata_is_refused(name, wrap, inner, X, y, method):
    with sklearn.config_context(enable_metadata_routing=True):
        with pytest.raises(UnsetMetadataPassedError, match="sample_weight"):
            wrap(inner()).fit(X, y, sample_weight=WEIGHTS)
        with pytest.raises(TypeError, match="not routed to any object"):  # declined
            wrap(inner().set_fit_request(sample_weight=False)).fit(X, y, sample_weight=WEIGHTS)


def test_cross_validate_and_grid_search_route_weights():
    cv = KFold(3, shuffle=True, random_state=0)
    plain = cross_validate(
        SplitConformalRegressor(_ridge()), X_REG, Y_REG, params={"sample_weight": WEIGHTS}, cv=cv
    )
    with sklearn.config_context(enable_metadata_routing=True):
        model = SplitConformalRegressor(_ridge().set_fit_request(sample_weight=True))
        model.set_score_request(sample_weight=False)
        routed = cross_validate(model, X_REG, Y_REG, params={"sample_weight": WEIGHTS}, cv=cv)
        search = GridSearchCV(model, {"estimator__alpha": [0.1, 10.0]}, cv=cv)
        search.fit(X_REG, Y_REG, sample_weight=WEIGHTS)
    np.testing.assert_array_equal(routed["test_score"], plain["test_score"])
    assert search.best_estimator_.estimator_.alpha in (0.1, 10.0)


def test_an_aliased_pipeline_step_inside_the_wrapper_inside_cross_validate():
    """The wrapper must declare its routing for cross_validate to pass an alias on; the
    normalized score's out-of-fold residuals see the same weights as the model."""
    cv = KFold(3, shuffle=True, random_state=0)

    def wrapper(step):
        pipe = make_pipeline(StandardScaler(), step)
        return SplitConformalRegressor(pipe, conformity_score="normalized", random_state=0)

    plain = cross_validate(
        wrapper(_ridge()), X_REG, Y_REG, params={"ridge__sample_weight": WEIGHTS}, cv=cv
    )
    with sklearn.config_context(enable_metadata_routing=True):
        model = wrapper(_ridge().set_fit_request(sample_weight="w"))
        model.set_score_request(sample_weight=False)
        routed = cross_validate(model, X_REG, Y_REG, params={"w": WEIGHTS}, cv=cv)
    np.testing.assert_array_equal(routed["test_score"], plain["test_score"])


def test_each_quantile_model_gets_its_own_alias():
    low = QuantileRegressor(quantile=0.05, alpha=0.0)
    high = QuantileRegressor(quantile=0.95, alpha=0.0)
    other = np.random.default_rng(5).uniform(0.2, 3.0, N)
    lower = clone(low).fit(X_REG, Y_REG, sample_weight=WEIGHTS)
    upper = clone(high).fit(X_REG, Y_REG, sample_weight=other)
    with sklearn.config_context(enable_metadata_routing=True):
        pair = (
            clone(low).set_fit_request(sample_weight="w_low"),
            clone(high).set_fit_request(sample_weight="w_high"),
        )
        model = ConformalizedQuantileRegressor(pair).fit(X_REG, Y_REG, w_low=WEIGHTS, w_high=other)
    np.testing.assert_array_equal(model.estimator_.lower.coef_, lower.coef_)
    np.testing.assert_array_equal(model.estimator_.upper.coef_, upper.coef_)


def test_metadata_routing_lists_the_model_requests():
    with sklearn.config_context(enable_metadata_routing=True):
        model = SplitConformalRegressor(_ridge().set_fit_request(sample_weight=True))
        routing = model.get_metadata_routing()
        assert routing.consumes("fit", ["sample_weight", "other"]) == {"sample_weight"}
        band = ConformalizedQuantileRegressor(
            (
                QuantileRegressor(quantile=0.05, alpha=0).set_fit_request(sample_weight=True),
                QuantileRegressor(quantile=0.95, alpha=0).set_fit_request(sample_weight=True),
            )
        )
        assert band.get_metadata_routing().consumes("fit", ["sample_weight"]) == {"sample_weight"}


def test_fit_params_with_a_frozen_model_are_refused():
    fitted = _ridge().fit(X_REG, Y_REG)
    with pytest.raises(ValueError, match=r"\['sample_weight'\].*FrozenEstimator"):
        SplitConformalRegressor(FrozenEstimator(fitted)).fit(X_REG, Y_REG, sample_weight=WEIGHTS)
    with pytest.raises(ValueError, match=r"\['sample_weight'\].*FrozenEstimator"):
        EllipsoidalConformalRegressor(FrozenEstimator(fitted)).fit(
            X_REG, np.c_[Y_REG, Y_REG], sample_weight=WEIGHTS
        )
    with pytest.raises(ValueError, match=r"\['sample_weight'\].*FrozenEstimator"):
        EnbPI(FrozenEstimator(fitted), n_bootstrap=10).fit(X_REG, Y_REG, sample_weight=WEIGHTS)
    classifier = FrozenEstimator(_logistic().fit(X_CLF, Y_CLF))
    with pytest.raises(ValueError, match=r"\['sample_weight'\].*FrozenEstimator"):
        MultiDimScoreClassifier(classifier, n_heads=2, diversity="bootstrap").fit(
            X_CLF, Y_CLF, sample_weight=WEIGHTS
        )
    quantiles = (FrozenEstimator(_ridge().fit(X_REG, Y_REG)),) * 2
    with pytest.raises(ValueError, match=r"\['sample_weight'\].*FrozenEstimator"):
        ConformalizedQuantileRegressor(quantiles).fit(X_REG, Y_REG, sample_weight=WEIGHTS)
    net = MLPRegressor(hidden_layer_sizes=(4,), max_iter=2000, random_state=0)
    net = net.fit(X_REG, Y_REG)
    with pytest.raises(ValueError, match=r"\['max_fun'\].*FrozenEstimator"):
        ApproximateFullConformalRegressor(FrozenEstimator(net)).fit(X_REG, Y_REG, max_fun=3)


@pytest.mark.parametrize("where", ["model", "pipeline", "search"])
def test_acp_refuses_routed_sample_weight(where):
    with sklearn.config_context(enable_metadata_routing=True):
        ridge = _ridge().set_fit_request(sample_weight="w")
        if where == "pipeline":
            ridge = make_pipeline(StandardScaler().set_fit_request(sample_weight=False), ridge)
        elif where == "search":
            ridge = GridSearchCV(ridge, {"alpha": [0.1, 1.0]}, cv=3)
        with pytest.raises(ValueError, match="`sample_weight` is not supported"):
            ApproximateFullConformalRegressor(ridge).fit(X_REG, Y_REG, w=WEIGHTS)


def test_a_pipeline_difficulty_model_gives_its_spread_with_routing_on():
    """``predict(X, return_std=True)`` through a Pipeline needs a request under routing:
    the spread of the last step is asked for directly, so routing changes nothing."""
    spread = make_pipeline(StandardScaler(), BayesianRidge()).fit(X_REG[:80], Y_REG[:80])

    def intervals():
        cp = SplitConformalRegressor(
            _ridge(), conformity_score="normalized", difficulty_estimator=spread
        )
        cp.fit(X_REG[:80], Y_REG[:80]).calibrate(X_REG[80:200], Y_REG[80:200])
        return cp.predict_interval(X_REG[200:])

    plain = intervals()
    with sklearn.config_context(enable_metadata_routing=True):
        routed = intervals()
    np.testing.assert_array_equal(routed, plain)
    _, std = spread[-1].predict(spread[0].transform(X_REG[200:]), return_std=True)
    assert np.ptp(np.diff(plain, axis=1)[:, 0] / std) < 1e-9  # widths follow the std


class _RecordingForest(RandomForestRegressor):
    """A difficulty model that records the weights its fit got."""

    def fit(self, X, y, sample_weight=None):
        self.weights_seen_ = sample_weight
        return super().fit(X, y, sample_weight=sample_weight)


def test_a_given_difficulty_model_gets_the_weights_it_takes():
    """The weights reach a given difficulty model: with routing off when its fit takes
    them (a warning when it cannot), with routing on when it requested them, also when
    the point model declined them."""
    X, y = X_REG[:120], Y_REG[:120]

    def fitted(point, difficulty):
        model = SplitConformalRegressor(
            point, conformity_score="normalized", difficulty_estimator=difficulty, random_state=0
        )
        return model.fit(X, y, sample_weight=WEIGHTS[:120]).difficulty_estimator_

    seen = fitted(_ridge(), _RecordingForest(n_estimators=5)).weights_seen_
    np.testing.assert_array_equal(seen, WEIGHTS[:120])
    with pytest.warns(UserWarning, match="`difficulty_estimator` \\(KNeighborsRegressor\\)"):
        fitted(_ridge(), KNeighborsRegressor())
    with sklearn.config_context(enable_metadata_routing=True):
        declined = _ridge().set_fit_request(sample_weight=False)
        requested = _RecordingForest(n_estimators=5).set_fit_request(sample_weight=True)
        seen = fitted(declined, requested).weights_seen_
        np.testing.assert_array_equal(seen, WEIGHTS[:120])
        router = SplitConformalRegressor(
            declined, conformity_score="normalized", difficulty_estimator=requested
        ).get_metadata_routing()
        assert "difficulty_estimator" in router._route_mappings
        ignored = _RecordingForest(n_estimators=5).set_fit_request(sample_weight=False)
        requested_point = _ridge().set_fit_request(sample_weight=True)
        assert fitted(requested_point, ignored).weights_seen_ is None
