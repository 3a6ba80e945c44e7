"""scikit-learn's estimator checks for `LinearizedPredictive` (regressor and classifier).

`LaplacePosterior` is not checked here: it is not a predictor but the posterior of an
already fitted network (its `fit` never trains the network and takes validation rows), so the
generic checks, which fit on data of their own shapes, cannot apply to it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import is_classifier, is_regressor
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from uqconform.bayes import LinearizedPredictive

# Small networks; enough iterations for the checks' accuracy floors (R^2 > 0.5, accuracy
# > 0.83 on their toy data), which the bare MLPs need too.
REGRESSOR = LinearizedPredictive(
    MLPRegressor(hidden_layer_sizes=(8,), max_iter=500, random_state=0), random_state=0
)
CLASSIFIER = LinearizedPredictive(
    MLPClassifier(hidden_layer_sizes=(8,), max_iter=200, random_state=0), random_state=0
)


@parametrize_with_checks([REGRESSOR, CLASSIFIER])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def test_estimator_type_follows_the_network():
    assert is_regressor(REGRESSOR) and not is_classifier(REGRESSOR)
    assert is_classifier(CLASSIFIER) and not is_regressor(CLASSIFIER)
    # only the methods that make sense exist (duck typing, e.g. for the conformal bridge)
    assert not hasattr(REGRESSOR, "predict_proba")
    assert hasattr(REGRESSOR, "predict_std") and hasattr(REGRESSOR, "predict_interval")
    assert hasattr(CLASSIFIER, "predict_proba")
    assert not hasattr(CLASSIFIER, "predict_std")
    assert not hasattr(CLASSIFIER, "predict_interval")


def test_sparse_input_gives_the_dense_predictions():
    from scipy import sparse

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    X[X < 0.3] = 0.0
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=120)
    dense = LinearizedPredictive(REGRESSOR.estimator, random_state=0).fit(X, y)
    coo = sparse.coo_array(X)
    fitted = LinearizedPredictive(REGRESSOR.estimator, random_state=0).fit(coo, y)
    # the network trains on sparse X with sparse products: equal up to rounding
    np.testing.assert_allclose(
        fitted.predict_std(sparse.csr_array(X)), dense.predict_std(X), rtol=1e-6
    )
    np.testing.assert_allclose(fitted.scale_, dense.scale_, rtol=1e-6)


def test_one_class_and_one_row_messages():
    X = np.arange(20.0).reshape(10, 2)
    with pytest.raises(ValueError, match="one class"):
        LinearizedPredictive(CLASSIFIER.estimator).fit(X, np.zeros(10))
    with pytest.raises(ValueError, match="n_samples=1"):
        LinearizedPredictive(REGRESSOR.estimator).fit(X[:1], np.zeros(1))


def _labels(kind):
    if kind == "mixed int and str":
        return np.array([0, "a"] * 40, dtype=object)
    labels = np.array(["a", "b", "c"], dtype=object)[np.arange(80) % 3]
    labels[3] = None
    return labels


@pytest.mark.parametrize(
    ("kind", "match"),
    [
        ("mixed int and str", r"`y` mixes label types \(int, str\)"),
        ("a None label", r"`y` contains missing \(None or NaN\) labels"),
    ],
)
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_classifier_labels_use_the_library_checks(kind, match):
    X = np.random.default_rng(0).normal(size=(80, 3))
    with pytest.raises(ValueError, match=match):
        LinearizedPredictive(CLASSIFIER.estimator).fit(X, _labels(kind))
    fitted = LinearizedPredictive(CLASSIFIER.estimator, random_state=0)
    fitted.fit(X, np.arange(80) % 3)
    with pytest.raises(ValueError, match=match):
        fitted.log_predictive(X, _labels(kind))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_text_targets_are_refused_with_the_conversion_named():
    """Numeric text was read as numbers here while the evaluation module refused it."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=120)
    with pytest.raises(ValueError, match=r"numbers written as text.*astype\(float\)"):
        LinearizedPredictive(REGRESSOR.estimator, random_state=0).fit(X, y.astype(str))
    with pytest.raises(ValueError, match="`y` must be numeric"):
        LinearizedPredictive(REGRESSOR.estimator).fit(X, np.full(120, "a"))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize(
    ("task", "method"),
    [
        ("regressor", "predict"),
        ("regressor", "predict_distribution"),
        ("regressor", "predict_std"),
        ("classifier", "predict"),
        ("classifier", "predict_distribution"),
        ("classifier", "predict_proba"),
    ],
)
@pytest.mark.parametrize(("rows", "match"), [("none", "`X` has no rows"), ("None", "`X` is None")])
def test_predicting_without_rows_names_X(task, method, rows, match):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 3))
    if task == "regressor":
        model = LinearizedPredictive(REGRESSOR.estimator, random_state=0).fit(X, X[:, 0])
    else:
        model = LinearizedPredictive(CLASSIFIER.estimator, random_state=0).fit(X, X[:, 0] > 0)
    with pytest.raises(ValueError, match=match):
        getattr(model, method)(X[:0] if rows == "none" else None)
    if method == "predict_distribution":
        with pytest.raises(ValueError, match=match):
            model.predict_distribution(X[:0] if rows == "none" else None, "mc")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_n_features_in_counts_the_columns_before_the_pipeline():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PolynomialFeatures

    X = np.random.default_rng(0).normal(size=(90, 3))
    net = make_pipeline(PolynomialFeatures(2), REGRESSOR.estimator)
    model = LinearizedPredictive(net, random_state=0).fit(X, X[:, 0])
    assert model.n_features_in_ == 3  # the network itself sees 9 columns
    assert model.predict(X[:4]).shape == (4,)
    with pytest.raises(ValueError, match="3 features"):
        model.predict(X[:4, :2])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_pipeline_refitted_in_place_is_refused():
    """The view held the pipeline's live scaler: refitting the same pipeline object on
    other data fed the new scaling into the old network (predictions matched neither).
    Then the predictive kept the old pipeline silently (review, stop 56): now refused
    until fit runs again."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=120)
    network = MLPRegressor(hidden_layer_sizes=(6,), max_iter=300, random_state=0)
    pipeline = make_pipeline(StandardScaler(), network).fit(X, y)
    predictive = LinearizedPredictive(pipeline, random_state=0).fit(X, y)
    before = predictive.predict(X[:5])
    np.testing.assert_allclose(before, pipeline.predict(X[:5]), rtol=1e-10)
    pipeline.fit(3.0 * X + 1.0, -y)  # the same object, refitted
    with pytest.raises(NotFittedError, match=r"predict: .*changed since fit.*fit\(X, y\)"):
        predictive.predict(X[:5])
    after = predictive.fit(3.0 * X + 1.0, -y).predict(3.0 * X[:5] + 1.0)
    np.testing.assert_allclose(after, pipeline.predict(3.0 * X[:5] + 1.0), rtol=1e-10)


def test_the_scale_search_reaches_both_ends_of_its_range():
    from uqconform.bayes.linearized import _minimise_log_scale

    # the grid step (3) does not divide [-20, 12]: the top end was never searched (e^10 max)
    assert _minimise_log_scale(lambda s: -s, -20.0, 12.0) == pytest.approx(12.0, abs=1e-3)
    assert _minimise_log_scale(lambda s: s, -20.0, 12.0) == pytest.approx(-20.0, abs=1e-3)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_include_noise_is_refused_for_a_classifier():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    labels = (X[:, 0] > 0).astype(int)
    network = MLPClassifier(hidden_layer_sizes=(4,), max_iter=200, random_state=0)
    predictive = LinearizedPredictive(network, random_state=0).fit(X, labels)
    with pytest.raises(TypeError, match="`include_noise` adds the regression noise"):
        predictive.predict_distribution(X[:3], include_noise=True)  # was silently ignored


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_class_held_out_whole_for_the_scale_is_named():
    """A class with one row that lands in the validation split: the network never sees
    it, and the error said `y` held a label the model never saw, which contradicts y."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    labels = (X[:, 0] > 0).astype(int)
    validation_row = np.random.default_rng(0).permutation(80)[0]  # fit's split, seed 0
    labels[validation_row] = 7
    network = MLPClassifier(hidden_layer_sizes=(4,), max_iter=200, random_state=0)
    with pytest.raises(ValueError, match=r"class\(es\) \[7\] of `y` fell only in the"):
        LinearizedPredictive(network, random_state=0).fit(X, labels)


@pytest.mark.skipif(
    "loss" not in MLPRegressor().get_params(), reason="MLPRegressor(loss=...) needs sklearn 1.7"
)
def test_a_poisson_network_is_refused_before_training():
    X = np.random.default_rng(0).uniform(size=(40, 2))
    network = MLPRegressor(loss="poisson", hidden_layer_sizes=(3,), max_iter=5)
    with pytest.raises(TypeError, match=r"MLPRegressor\(loss='poisson'\) has a non-identity"):
        LinearizedPredictive(network).fit(X, X[:, 0] + 0.1)
    assert not hasattr(network, "coefs_")  # nothing trained


@pytest.mark.skipif(
    "loss" not in MLPRegressor().get_params(), reason="MLPRegressor(loss=...) needs sklearn 1.7"
)
def test_layer_sizes_given_positionally_are_named_as_a_loss_not_an_exp_output():
    """Review s63: MLPRegressor((8,)) sets loss=(8,) in scikit-learn >= 1.7; the Bayes and
    ACP-GN wrappers said the network had an exponential output (in two exception classes)."""
    from uqconform.regression import ApproximateFullConformalRegressor

    X = np.random.default_rng(0).uniform(size=(40, 2))
    message = r"MLPRegressor\(loss=\(8,\)\): `loss` must be 'squared_error'.*hidden_layer_siz"
    for wrapper in (LinearizedPredictive, ApproximateFullConformalRegressor):
        with pytest.raises(ValueError, match=message):
            wrapper(MLPRegressor((8,))).fit(X, X[:, 0])
    with pytest.raises(ValueError, match=r"loss='squared_eror'\): `loss` must be 'squared_e"):
        LinearizedPredictive(MLPRegressor(loss="squared_eror")).fit(X, X[:, 0])


def test_a_trained_network_gets_its_noise_from_every_held_out_row():
    """Review finding: fitted on held-out rows without a posterior, the noise came from the
    quarter kept for the prior and the scale (38 of 150 rows); none of the rows trained the
    network, so all of them set it (a network trained by fit keeps the held-out part)."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(450, 1))
    y = np.sin(1.5 * X[:, 0]) + 0.3 * rng.normal(size=450)
    network = MLPRegressor(
        hidden_layer_sizes=(16,), solver="lbfgs", alpha=1e-3, max_iter=500, random_state=0
    ).fit(X[:300], y[:300])
    predictive = LinearizedPredictive(network, random_state=0).fit(X[300:], y[300:])
    residual = y[300:] - network.predict(X[300:])
    assert predictive.noise_variance_ == pytest.approx(np.mean(residual**2), rel=1e-9)
    trained_here = LinearizedPredictive(
        MLPRegressor(hidden_layer_sizes=(16,), solver="lbfgs", max_iter=500, random_state=0),
        random_state=0,
    ).fit(X[:300], y[:300])
    held_out = np.sort(np.random.default_rng(trained_here.seed_).permutation(300)[:75])
    own = y[held_out] - trained_here.estimator_.predict(X[held_out])
    assert trained_here.noise_variance_ == pytest.approx(np.mean(own**2), rel=1e-9)
