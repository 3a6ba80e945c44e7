"""Models outside scikit-learn (a LightGBM Booster, a torch or Keras model behind a small
class): ``calibrate`` without ``fit`` takes them as fitted, and gives exactly the sets of
the same predictions from a scikit-learn model; ``fit`` and missing labels say what to do."""

import pickle

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression, QuantileRegressor

from uqconform.classification import EnsembleConformalClassifier, SplitConformalClassifier
from uqconform.multioutput import EllipsoidalConformalRegressor
from uqconform.regression import ConformalizedQuantileRegressor, SplitConformalRegressor


class Predictor:
    """A fitted model seen only through ``predict`` (no get_params, no tags)."""

    def __init__(self, model):
        self.model = model

    def predict(self, X):
        return self.model.predict(X)


class TrainablePredictor(Predictor):
    """Has ``fit`` (like a Keras model) but is still not a scikit-learn estimator."""

    def fit(self, X, y):
        raise AssertionError("a model adopted by calibrate is never trained")


class ProbabilityModel:
    """A fitted classifier seen through ``predict_proba``, with or without ``classes_``."""

    def __init__(self, model, with_classes=True):
        self.model = model
        if with_classes:
            self.classes_ = model.classes_

    def predict_proba(self, X):
        return self.model.predict_proba(X)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = X @ np.array([1.0, -0.5, 0.2]) + rng.normal(scale=0.5 + np.abs(X[:, 0]), size=400)
    labels = np.digitize(y, [-1.0, 1.0])
    Y = np.c_[y, X[:, 1] + rng.normal(size=400)]
    return X, y, labels, Y


def test_regressor_outside_sklearn_gives_the_sets_of_the_same_predictions(data):
    X, y, _, _ = data
    model = LinearRegression().fit(X[:200], y[:200])
    spread = LinearRegression().fit(X[:200], np.abs(y[:200] - model.predict(X[:200])) + 0.1)
    for wrapper in (Predictor, TrainablePredictor):
        foreign = SplitConformalRegressor(
            wrapper(model), conformity_score="normalized", difficulty_estimator=wrapper(spread)
        ).calibrate(X[200:300], y[200:300])
        native = SplitConformalRegressor(
            model, conformity_score="normalized", difficulty_estimator=spread
        ).calibrate(X[200:300], y[200:300])
        np.testing.assert_array_equal(
            foreign.predict_interval(X[300:]), native.predict_interval(X[300:])
        )
        again = pickle.loads(pickle.dumps(foreign))
        np.testing.assert_array_equal(
            again.predict_interval(X[300:]), foreign.predict_interval(X[300:])
        )


def test_quantile_pair_and_regions_outside_sklearn(data):
    X, y, _, Y = data
    pair = [QuantileRegressor(quantile=q, alpha=0.0).fit(X[:200], y[:200]) for q in (0.05, 0.95)]
    foreign = ConformalizedQuantileRegressor(tuple(Predictor(m) for m in pair))
    native = ConformalizedQuantileRegressor(tuple(pair))
    np.testing.assert_array_equal(
        foreign.calibrate(X[200:300], y[200:300]).predict_interval(X[300:]),
        native.calibrate(X[200:300], y[200:300]).predict_interval(X[300:]),
    )
    multi = LinearRegression().fit(X[:200], Y[:200])
    foreign_region = EllipsoidalConformalRegressor(Predictor(multi), random_state=0).calibrate(
        X[200:300], Y[200:300]
    )
    native_region = EllipsoidalConformalRegressor(multi, random_state=0).calibrate(
        X[200:300], Y[200:300]
    )
    np.testing.assert_array_equal(
        foreign_region.predict_set(X[300:]).bounding_box(),
        native_region.predict_set(X[300:]).bounding_box(),
    )


def test_classifier_outside_sklearn_gives_the_sets_of_the_same_probabilities(data):
    X, _, labels, _ = data
    heads = [LogisticRegression(C=c).fit(X[:200], labels[:200]) for c in (0.1, 1.0)]
    foreign = SplitConformalClassifier(
        ProbabilityModel(heads[0]), conformity_score="aps", random_state=0
    )
    native = SplitConformalClassifier(heads[0], conformity_score="aps", random_state=0)
    np.testing.assert_array_equal(
        foreign.calibrate(X[200:300], labels[200:300]).predict_set(X[300:]),
        native.calibrate(X[200:300], labels[200:300]).predict_set(X[300:]),
    )
    foreign_heads = EnsembleConformalClassifier([ProbabilityModel(h) for h in heads])
    native_heads = EnsembleConformalClassifier(heads)
    np.testing.assert_array_equal(
        foreign_heads.calibrate(X[200:300], labels[200:300]).predict_set(X[300:]),
        native_heads.calibrate(X[200:300], labels[200:300]).predict_set(X[300:]),
    )


def test_fit_and_missing_classes_say_what_to_do(data):
    X, y, labels, _ = data
    model = LinearRegression().fit(X[:200], y[:200])
    with pytest.raises(
        TypeError, match=r"`estimator` \(Predictor\) is not a scikit-learn .* calibrate"
    ):
        SplitConformalRegressor(Predictor(model)).fit(X[:200], y[:200])
    unlabelled = ProbabilityModel(
        LogisticRegression().fit(X[:200], labels[:200]), with_classes=False
    )
    with pytest.raises(
        AttributeError, match=r"`estimator` \(ProbabilityModel\) has no `classes_`"
    ):
        SplitConformalClassifier(unlabelled).calibrate(X[200:300], labels[200:300])


def test_non_finite_calibration_predictions_are_named(data):
    X, y, _, _ = data

    class Broken:
        def predict(self, X):
            out = X[:, 0].copy()
            out[5] = np.nan
            return out

    with pytest.raises(ValueError, match=r"`estimator` predicted 1 NaN or infinite .* row 5"):
        SplitConformalRegressor(Broken()).calibrate(X[:100], y[:100])
