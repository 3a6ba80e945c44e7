"""Models outside scikit-learn (a LightGBM Booster, a torch or Keras model behind a small
class): ``calibrate`` without ``fit`` takes them as fitted, and gives exactly the sets of
the same predictions from a scikit-learn model; ``fit`` and missing labels say what to do."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LinearRegression, LogisticRegression, QuantileRegressor

from uqconform.classification import (
    EnsembleConformalClassifier,
    SplitConformalClassifier,
    VennAbersCalibrator,
)
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
        TypeError, match=r"`estimator` \(Predictor\) is not a scikit-learn .*\.calibrate"
    ):
        SplitConformalRegressor(Predictor(model)).fit(X[:200], y[:200])
    # the advice is the wrapper's own call, not a list of other classes (stop 59's review)
    with pytest.raises(TypeError, match=r"skip fit: SplitConformalClassifier\(model\)\.calib"):
        SplitConformalClassifier(
            ProbabilityModel(LogisticRegression().fit(X[:200], labels[:200]))
        ).fit(X[:200], labels[:200])
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

    named = r"`estimator` predicted NaN or infinite values on 1 calibration rows \(first: row 5\)"
    with pytest.raises(ValueError, match=named):
        SplitConformalRegressor(Broken()).calibrate(X[:100], y[:100])


def test_frozen_foreign_models_and_lists_of_them_work_as_the_models_themselves(data):
    from sklearn.frozen import FrozenEstimator

    from uqconform.classification import ReliablePredictionSets

    X, y, labels, _ = data
    model = LinearRegression().fit(X[:200], y[:200])
    np.testing.assert_array_equal(
        SplitConformalRegressor(FrozenEstimator(Predictor(model)))
        .calibrate(X[200:300], y[200:300])
        .predict_interval(X[300:]),
        SplitConformalRegressor(model).calibrate(X[200:300], y[200:300]).predict_interval(X[300:]),
    )
    heads = [LogisticRegression(C=c).fit(X[:200], labels[:200]) for c in (0.1, 1.0)]

    class WithPredict(ProbabilityModel):
        def predict(self, X):
            return self.model.predict(X)

    foreign = ReliablePredictionSets([WithPredict(h) for h in heads], k_calib=3, random_state=0)
    native = ReliablePredictionSets(heads, k_calib=3, random_state=0)
    np.testing.assert_array_equal(
        foreign.calibrate(X[200:300], labels[200:300]).predict_set(X[300:]),
        native.calibrate(X[200:300], labels[200:300]).predict_set(X[300:]),
    )
    # a classifier seen only through predict_proba and classes_ still predicts labels
    only_proba = SplitConformalClassifier(ProbabilityModel(heads[1]))
    only_proba.calibrate(X[200:300], labels[200:300])
    np.testing.assert_array_equal(only_proba.predict(X[300:]), heads[1].predict(X[300:]))


def test_foreign_models_with_the_wrong_output_or_trained_here_are_named(data):
    from uqconform.timeseries import EnbPI

    X, y, labels, _ = data
    binary = labels[:300] > 0
    model = LogisticRegression().fit(X[:200], binary[:200])

    class Sigmoid(ProbabilityModel):  # a Keras sigmoid: P(class 1) only
        def predict_proba(self, X):
            return self.model.predict_proba(X)[:, 1:]

    with pytest.raises(ValueError, match=r"returned shape \(100, 1\).*np.column_stack"):
        SplitConformalClassifier(Sigmoid(model)).calibrate(X[200:300], binary[200:300])
    unlabelled = ProbabilityModel(model, with_classes=False)
    with pytest.raises(
        AttributeError, match=r"`estimator` \(ProbabilityModel\) has no `classes_`"
    ):
        EnsembleConformalClassifier([unlabelled]).calibrate(X[200:300], binary[200:300])
    foreign = Predictor(LinearRegression().fit(X[:200], y[:200]))
    for call in (
        lambda: ConformalizedQuantileRegressor(foreign).fit(X[:200], y[:200]),
        lambda: ConformalizedQuantileRegressor((foreign, foreign)).fit(X[:200], y[:200]),
        lambda: EnbPI(foreign, n_bootstrap=3).fit(X[:200], y[:200]),
    ):
        with pytest.raises(TypeError, match=r"`estimator` \(Predictor\) is not a scikit-learn"):
            call()


def test_non_finite_band_is_named_by_its_row(data):
    X, y, _, _ = data

    class Upper:
        def predict(self, X):
            out = X[:, 0] + 1.0
            out[5] = np.inf
            return out

    class Lower:
        def predict(self, X):
            return X[:, 0] - 1.0

    with pytest.raises(ValueError, match=r"on 1 calibration rows \(first: row 5\)"):
        ConformalizedQuantileRegressor((Lower(), Upper())).calibrate(X[:100], y[:100])


def test_broken_outputs_of_foreign_models_are_named(data):
    X, y, labels, _ = data
    model = LinearRegression().fit(X[:200], y[:200])

    class Short(Predictor):
        def predict(self, X):
            return self.model.predict(X)[:-1]

    class NanSpread(Predictor):
        def predict(self, X):
            out = np.abs(self.model.predict(X)) + 1.0
            out[3] = np.nan
            return out

    class NanProba(ProbabilityModel):
        def predict_proba(self, X):
            proba = self.model.predict_proba(X)
            proba[7] = np.nan
            return proba

    with pytest.raises(ValueError, match=r"`estimator` predicted 99 values for 100 calibration"):
        SplitConformalRegressor(Short(model)).calibrate(X[200:300], y[200:300])
    with pytest.raises(ValueError, match=r"`difficulty_estimator` gave NaN .* \(first: row 3\)"):
        SplitConformalRegressor(
            model, conformity_score="normalized", difficulty_estimator=NanSpread(model)
        ).calibrate(X[200:300], y[200:300])
    clf = LogisticRegression().fit(X[:200], labels[:200])
    with pytest.raises(
        ValueError, match=r"NaN or infinite probabilities on 1 row of `X` \(first: row 7\)"
    ):
        SplitConformalClassifier(NanProba(clf)).calibrate(X[200:300], labels[200:300])


class NaNAbove(Predictor):
    """Predicts NaN (or ``fill``) wherever the first feature exceeds ``limit``; one or two
    outputs."""

    def __init__(self, model, limit, fill=np.nan):
        super().__init__(model)
        self.limit, self.fill = limit, fill

    def predict(self, X):
        out = np.asarray(self.model.predict(X), dtype=float).copy()
        out[np.asarray(X)[:, 0] > self.limit] = self.fill
        return out


def test_non_finite_predictions_at_prediction_time_are_named_by_their_row_of_X(data):
    X, y, _, Y = data
    X_test = X[300:310].copy()
    X_test[[4, 7], 0] = 10.0  # the model fails on these rows only
    model = LinearRegression().fit(X[:200], y[:200])
    spread = LinearRegression().fit(X[:200], np.abs(y[:200]) + 0.1)
    band = (LinearRegression().fit(X[:200], y[:200] - 1), LinearRegression().fit(X[:200], y[:200]))
    calib = X[200:300]
    for fill in (np.nan, np.inf):
        broken = NaNAbove(model, limit=9.0, fill=fill)
        cases = {
            "`estimator` predicted": SplitConformalRegressor(broken, batch_size=3),
            "`difficulty_estimator` gave": SplitConformalRegressor(
                model,
                conformity_score="normalized",
                difficulty_estimator=NaNAbove(spread, 9.0, fill),
            ),
            "`estimator` predicted ": ConformalizedQuantileRegressor((band[0], broken)),
        }
        for what, wrapper in cases.items():
            wrapper.calibrate(calib, y[200:300])  # finite on every calibration row
            # in batches of 3 rows, row 4 of X is row 1 of the second batch (named as row 4;
            # the batches after it are not predicted); one batch sees both bad rows
            count = "at least 1" if wrapper.batch_size == 3 else "2"
            pattern = rf"{what}.* on {count} rows of `X` \(first: row 4\)"
            with pytest.raises(ValueError, match=pattern):
                wrapper.predict_interval(X_test)
            assert np.isfinite(wrapper.predict_interval(X_test[:4])).all()
    multi = LinearRegression().fit(X[:200], Y[:200])
    region = EllipsoidalConformalRegressor(NaNAbove(multi, limit=9.0)).calibrate(calib, Y[200:300])
    with pytest.raises(
        ValueError, match=r"predicted NaN or infinite .* 2 rows of `X` \(first: row 4"
    ):
        region.predict_interval(X_test)


def test_non_finite_calibration_predictions_of_a_multi_output_model_are_named(data):
    X, _, _, Y = data
    multi = LinearRegression().fit(X[:200], Y[:200])
    calib = X[200:300].copy()
    calib[37, 0] = 10.0
    # the prefit ellipse learns its shape on one random half of the calibration rows and
    # scores the other half: row 37 is named as row 37 of `X` whichever half it fell in
    for seed in range(4):
        with pytest.raises(ValueError, match=r"on 1 row of `X` \(first: row 37\)"):
            EllipsoidalConformalRegressor(NaNAbove(multi, limit=9.0), random_state=seed).calibrate(
                calib, Y[200:300]
            )


def test_non_finite_errors_survive_pickling_and_name_the_row_of_x_in_batches(data):
    """The error reaches the parent process from a joblib worker (it pickles), and a
    classifier predicting in batches names the row of X, not of the batch."""
    import copy

    X, _, labels, _ = data
    clf = LogisticRegression().fit(X[:200], labels[:200])

    class NaNProbaAbove(ProbabilityModel):
        def predict_proba(self, X):
            out = self.model.predict_proba(X).copy()
            out[np.asarray(X)[:, 0] > 9.0] = np.nan
            return out

    wrapper = SplitConformalClassifier(NaNProbaAbove(clf), batch_size=5)
    wrapper.calibrate(X[200:300], labels[200:300])
    X_test = X[300:320].copy()
    X_test[[13, 17], 0] = 10.0
    with pytest.raises(ValueError, match=r"on at least 1 rows of `X` \(first: row 13\)") as info:
        wrapper.predict_set(X_test)
    for copied in (pickle.loads(pickle.dumps(info.value)), copy.copy(info.value)):
        assert type(copied) is type(info.value) and str(copied) == str(info.value)


class ScaledProbabilityModel(ProbabilityModel):
    """Probabilities times ``factor``, or over their row's largest (``factor="max"``: every
    value at most 1, rows summing above 1, like per-class sigmoids), in ``dtype``."""

    def __init__(self, model, factor=1.0, dtype=np.float64):
        super().__init__(model)
        self.factor, self.dtype = factor, dtype

    def predict_proba(self, X):
        proba = self.model.predict_proba(X)
        if self.factor == "max":
            return proba / proba.max(axis=1, keepdims=True)
        return (self.factor * proba).astype(self.dtype)


def test_probabilities_not_summing_to_one_warn_once_and_logits_are_refused(data):
    X, _, labels, _ = data
    head = LogisticRegression().fit(X[:200], labels[:200])
    for factor in (0.5, "max", 0.0):  # a half, sigmoid-like, all-zero rows
        for score in ("lac", "aps", "raps", "saps"):
            model = SplitConformalClassifier(
                ScaledProbabilityModel(head, factor), conformity_score=score
            )
            with pytest.warns(UserWarning, match=r"predict_proba gives rows that do not sum"):
                model.calibrate(X[200:300], labels[200:300])
    # one message however many batches, folds or heads read the model (the same text on
    # every call, so Python shows it once per line); none where sums do not matter
    scaled = SplitConformalClassifier(ScaledProbabilityModel(head, 0.5), batch_size=10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        scaled.calibrate(X[200:300], labels[200:300]).predict_set(X[300:])
    assert sum("do not sum to 1" in str(w.message) for w in caught) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        SplitConformalClassifier(
            ScaledProbabilityModel(head, 0.5), conformity_score="topk"
        ).calibrate(X[200:300], labels[200:300]).predict_set(X[300:])
        # Venn-Abers reads each column as a one-vs-rest score
        VennAbersCalibrator(ScaledProbabilityModel(head, 0.5)).calibrate(
            X[200:300], labels[200:300]
        ).predict_proba(X[300:])
    with pytest.raises(ValueError, match=r"outside \[0, 1\].*apply a softmax"):
        SplitConformalClassifier(ScaledProbabilityModel(head, 2.0)).calibrate(
            X[200:300], labels[200:300]
        )
    with warnings.catch_warnings():  # float32 rounding of a proper distribution is fine
        warnings.simplefilter("error")
        SplitConformalClassifier(
            ScaledProbabilityModel(head, dtype=np.float32), conformity_score="aps"
        ).calibrate(X[200:300], labels[200:300]).predict_set(X[300:])


class LabelledFrameModel:
    """A fitted classifier whose ``predict_proba`` is a DataFrame with class-labelled columns
    in another order than its ``classes_`` (AutoML wrappers return such frames)."""

    def __init__(self, model, columns=None):
        self.model = model
        self.classes_ = model.classes_[::-1]  # its own label order
        self.columns = model.classes_ if columns is None else columns

    def predict_proba(self, X):
        import pandas as pd

        return pd.DataFrame(self.model.predict_proba(X), columns=self.columns)


class ReversedProbabilityModel(LabelledFrameModel):
    """The same probabilities as an array in the order of ``classes_``."""

    def predict_proba(self, X):
        return self.model.predict_proba(X)[:, ::-1]


def test_labelled_probability_frame_is_read_by_its_column_labels(data):
    from uqconform.classification import CrossConformalClassifier

    X, _, labels, _ = data
    names = np.array(["cat", "dog", "eel"])[labels]
    head = LogisticRegression().fit(X[:200], names[:200])
    framed = SplitConformalClassifier(LabelledFrameModel(head), alpha=0.1)
    framed.calibrate(X[200:300], names[200:300])
    plain = SplitConformalClassifier(ReversedProbabilityModel(head), alpha=0.1)
    plain.calibrate(X[200:300], names[200:300])
    np.testing.assert_array_equal(framed.classes_, ["eel", "dog", "cat"])
    np.testing.assert_array_equal(framed.predict_set(X[300:]), plain.predict_set(X[300:]))
    np.testing.assert_array_equal(framed.conformity_scores_, plain.conformity_scores_)
    # the wrapper's own probabilities and its argmax (the models have no predict): by label
    np.testing.assert_array_equal(framed.predict_proba(X[300:]), plain.predict_proba(X[300:]))
    np.testing.assert_array_equal(framed.predict(X[300:]), plain.predict(X[300:]))
    np.testing.assert_array_equal(framed.predict(X[300:]), head.predict(X[300:]))
    # fold models: the same reading
    folds = [(np.arange(150), np.arange(150, 300)), (np.arange(150, 300), np.arange(150))]

    class Trainable(ClassifierMixin, BaseEstimator):
        def __init__(self, frame=True):
            self.frame = frame

        def fit(self, X, y):
            head = LogisticRegression().fit(X, y)
            model = LabelledFrameModel if self.frame else ReversedProbabilityModel
            self.model_, self.classes_ = model(head), head.classes_[::-1]
            return self

        def predict_proba(self, X):
            return self.model_.predict_proba(X)

    sets = [
        CrossConformalClassifier(Trainable(frame), cv=folds)
        .fit(X[:300], names[:300])
        .predict_set(X[300:])
        for frame in (True, False)
    ]
    np.testing.assert_array_equal(sets[0], sets[1])

    # columns naming no class ('p0', ...): read by position, as the same array is
    # (diffrev23: refusing them broke frames that worked before)
    class PlainArray(LabelledFrameModel):
        def predict_proba(self, X):
            return self.model.predict_proba(X)

    by_position = [
        SplitConformalClassifier(model).calibrate(X[200:300], names[200:300]).predict_set(X[300:])
        for model in (LabelledFrameModel(head, columns=["p0", "p1", "p2"]), PlainArray(head))
    ]
    np.testing.assert_array_equal(by_position[0], by_position[1])


def test_swapped_constructor_arguments_name_the_first_argument(data):
    X, y, _, _ = data
    for first in (0.1, "0.1"):
        with pytest.raises(TypeError, match=r"first argument is the model.*alpha="):
            SplitConformalRegressor(first, LinearRegression()).fit(X[:200], y[:200])
    with pytest.raises(TypeError) as error:  # an object that is neither: no such hint
        SplitConformalRegressor(object()).fit(X[:200], y[:200])
    assert "first argument" not in str(error.value)


def test_calibration_labels_of_another_type_say_how_to_convert(data):
    X, _, labels, _ = data
    text = SplitConformalClassifier(LogisticRegression()).fit(X[:200], labels[:200].astype(str))
    with pytest.raises(
        ValueError, match=r"numbers where the model's classes are text.*y\.astype\(str\)"
    ):
        text.calibrate(X[200:300], labels[200:300])
    with pytest.raises(ValueError, match=r"bytes.*decode.*y\.astype\(str\)"):
        text.calibrate(X[200:300], labels[200:300].astype("S1"))
    numbers = SplitConformalClassifier(LogisticRegression()).fit(X[:200], labels[:200])
    with pytest.raises(
        ValueError, match=r"text where the model's classes are numbers.*y\.astype\(int\)"
    ):
        numbers.calibrate(X[200:300], labels[200:300].astype(str))
    with pytest.raises(ValueError) as error:  # labels that are simply unknown: no hint
        text.calibrate(X[200:300], np.char.add(labels[200:300].astype(str), " "))
    assert "astype" not in str(error.value) and "never saw" in str(error.value)


def test_evaluate_with_swapped_test_arguments_says_so(data):
    from uqconform.evaluation import evaluate

    X, y, labels, _ = data
    regressor = SplitConformalRegressor(LinearRegression()).fit(X[:200], y[:200])
    regressor.calibrate(X[200:300], y[200:300])
    with pytest.raises(ValueError, match=r"swapped.*evaluate\(model, X_test, y_test\)"):
        evaluate(regressor, y[300:], X[300:])
    classifier = SplitConformalClassifier(LogisticRegression()).fit(X[:200], labels[:200])
    classifier.calibrate(X[200:300], labels[200:300])
    with pytest.raises(ValueError, match=r"swapped.*evaluate\(model, X_test, y_test\)"):
        evaluate(classifier, labels[300:], X[300:])
    with pytest.raises(ValueError) as error:  # a real 2-D target, not a swap: no hint
        evaluate(regressor, X[300:], np.c_[y[300:], y[300:]])
    assert "swapped" not in str(error.value)


def test_a_sparse_probability_matrix_is_read_as_its_dense_rows(data):
    # diffrev24: a prefit model whose predict_proba returns a scipy sparse matrix failed
    # with numpy's "setting an array element with a sequence" (calibrate, predict_proba)
    from scipy import sparse

    X, _, labels, _ = data
    head = LogisticRegression().fit(X[:200], labels[:200])

    class SparseOutput:
        classes_ = head.classes_

        def predict_proba(self, X):
            return sparse.csr_matrix(head.predict_proba(X))

    dense = SplitConformalClassifier(head).calibrate(X[200:300], labels[200:300])
    sparse_model = SplitConformalClassifier(SparseOutput()).calibrate(X[200:300], labels[200:300])
    np.testing.assert_array_equal(sparse_model.predict_set(X[300:]), dense.predict_set(X[300:]))
    np.testing.assert_array_equal(sparse_model.predict_proba(X[300:]), head.predict_proba(X[300:]))
    np.testing.assert_array_equal(sparse_model.predict(X[300:]), head.predict(X[300:]))
