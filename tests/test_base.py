"""The fit / calibrate / predict state machine shared by every wrapper."""

from __future__ import annotations

import pickle
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
from conftest import Unchanged, classification_data, regression_data, thirds
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
from sklearn.utils.validation import check_is_fitted

from uqconform import (
    ConformalizedQuantileRegressor,
    ConformalPredictiveSystem,
    SplitConformalClassifier,
    SplitConformalRegressor,
)
from uqconform.quantiles import conformal_quantile

WRAPPERS = {
    "absolute": lambda: SplitConformalRegressor(Ridge(), alpha=0.1),
    "normalized": lambda: SplitConformalRegressor(
        Ridge(), alpha=0.1, conformity_score="normalized", random_state=0
    ),
    "cqr": lambda: ConformalizedQuantileRegressor(
        HistGradientBoostingRegressor(loss="quantile", max_iter=20), alpha=0.1
    ),
    "cps": lambda: ConformalPredictiveSystem(Ridge(), alpha=0.1, normalized=True, random_state=0),
    "lac": lambda: SplitConformalClassifier(LogisticRegression(), alpha=0.1),
    "aps": lambda: SplitConformalClassifier(
        LogisticRegression(), alpha=0.1, conformity_score="aps", random_state=3
    ),
}


def _data(kind):
    return classification_data(450) if kind in ("lac", "aps") else regression_data(450)


def _output(model, X, alpha=None, **kwargs):
    if isinstance(model, SplitConformalClassifier):
        return model.predict_set(X, alpha=alpha, **kwargs)
    return model.predict_interval(X, alpha=alpha, **kwargs)


@pytest.mark.parametrize("kind", WRAPPERS)
def test_fit_clones_and_calibrate_returns_self(kind):
    model = WRAPPERS[kind]()
    X, y = _data(kind)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    assert model.fit(Xf, yf) is model
    assert model.estimator_ is not model.estimator
    with pytest.raises(NotFittedError):
        check_is_fitted(model.estimator)  # the user's object is never fitted
    assert model.predict(Xt).shape == (len(Xt),)  # predict works after fit alone
    with pytest.raises(NotFittedError, match="calibrate"):
        _output(model, Xt)
    assert model.calibrate(Xc, yc) is model
    assert model.n_calibration_ == len(yc)
    assert model.n_features_in_ == X.shape[1]
    assert len(model.conformity_scores_) == len(yc)


@pytest.mark.parametrize("kind", WRAPPERS)
def test_alpha_float_vs_list_and_nested(kind):
    model = WRAPPERS[kind]()
    X, y = _data(kind)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    model.fit(Xf, yf).calibrate(Xc, yc)
    alphas = [0.05, 0.1, 0.2, 0.4]
    several = _output(model, Xt, alpha=alphas)
    assert several.shape[-1] == len(alphas)
    for j, a in enumerate(alphas):
        np.testing.assert_array_equal(_output(model, Xt, alpha=a), several[..., j])
        np.testing.assert_array_equal(_output(model, Xt, alpha=[a])[..., 0], several[..., j])
    np.testing.assert_array_equal(_output(model, Xt), _output(model, Xt, alpha=0.1))
    if several.dtype == bool:
        assert np.all(several[..., 1:] <= several[..., :-1])  # smaller alpha, bigger set
    else:
        assert np.all(several[:, 0, :] <= several[:, 1, :])
        assert np.all(several[:, 0, 1:] >= several[:, 0, :-1])
        assert np.all(several[:, 1, 1:] <= several[:, 1, :-1])


@pytest.mark.parametrize("kind", WRAPPERS)
def test_pickle_and_joblib_round_trips(kind, tmp_path):
    model = WRAPPERS[kind]()
    X, y = _data(kind)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    model.fit(Xf, yf).calibrate(Xc, yc)
    expected = _output(model, Xt, alpha=[0.1, 0.3])
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(_output(again, Xt, alpha=[0.1, 0.3]), expected)
    joblib.dump(model, tmp_path / "model.joblib")
    loaded = joblib.load(tmp_path / "model.joblib")
    np.testing.assert_array_equal(_output(loaded, Xt, alpha=[0.1, 0.3]), expected)
    np.testing.assert_array_equal(loaded.predict(Xt), model.predict(Xt))


@pytest.mark.parametrize("kind", WRAPPERS)
def test_batch_size_gives_identical_output(kind):
    X, y = _data(kind)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    whole = WRAPPERS[kind]().fit(Xf, yf).calibrate(Xc, yc)
    for batch in (1, 7, 64):
        batched = clone(whole).set_params(batch_size=batch).fit(Xf, yf).calibrate(Xc, yc)
        got, expected = _output(batched, Xt, alpha=[0.1, 0.2]), _output(whole, Xt, [0.1, 0.2])
        if expected.dtype == bool:
            np.testing.assert_array_equal(got, expected)
        else:  # BLAS may round a 1-row product differently from a 150-row one
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("batch", [0, -1, 2.5, True, "10"])
def test_bad_batch_size(batch):
    X, y = regression_data(60)
    with pytest.raises(ValueError, match="batch_size"):
        SplitConformalRegressor(batch_size=batch).fit(X, y)


@pytest.mark.parametrize("kind", WRAPPERS)
@pytest.mark.parametrize("batch", [-5, 0])
def test_bad_batch_size_set_after_calibrate(kind, batch):
    """batch_size is read at prediction: -5 ran no batch and returned the uninitialised
    result array (values like 6.9e-310, p-values of 1, full sets); 0 failed in range()."""
    X, y = _data(kind)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    model = WRAPPERS[kind]().fit(Xf, yf).calibrate(Xc, yc).set_params(batch_size=batch)
    with pytest.raises(ValueError, match="`batch_size`"):
        _output(model, Xt, alpha=[0.1, 0.2])


# ---- prefit ------------------------------------------------------------------------------
def test_prefit_is_used_as_is_and_matches_fit_then_calibrate():
    X, y = regression_data(450)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    model = Ridge().fit(Xf, yf)
    coef = model.coef_.copy()
    cp = SplitConformalRegressor(model).calibrate(Xc, yc)
    assert cp.estimator_ is model
    np.testing.assert_array_equal(model.coef_, coef)  # never refitted
    fitted = SplitConformalRegressor(Ridge()).fit(Xf, yf).calibrate(Xc, yc)
    np.testing.assert_array_equal(cp.predict_interval(Xt), fitted.predict_interval(Xt))
    np.testing.assert_array_equal(cp.predict(Xt), fitted.predict(Xt))


def test_frozen_estimator_is_not_refitted_and_survives_clone():
    X, y = classification_data(450)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    model = LogisticRegression().fit(Xf, yf)
    frozen = SplitConformalClassifier(FrozenEstimator(model))
    Xo = np.random.default_rng(0).normal(size=Xf.shape)  # noise: a refit would change it
    frozen.fit(Xo, yf[::-1]).calibrate(Xc, yc)
    reference = SplitConformalClassifier(model).calibrate(Xc, yc)
    np.testing.assert_array_equal(frozen.predict_set(Xt), reference.predict_set(Xt))
    twin = clone(frozen).calibrate(Xc, yc)  # clone keeps the fitted model: no fit needed
    np.testing.assert_array_equal(twin.predict_set(Xt), reference.predict_set(Xt))


def test_calibrating_an_unfitted_estimator_without_fit_says_what_to_do():
    X, y = regression_data(60)
    with pytest.raises(NotFittedError, match=r"fit\(X_train, y_train\)"):
        SplitConformalRegressor(Ridge()).calibrate(X, y)
    with pytest.raises(NotFittedError, match="fit"):
        SplitConformalRegressor().calibrate(X, y)
    with pytest.raises(NotFittedError):
        SplitConformalRegressor().predict(X)


def test_set_params_with_a_new_prefit_model_is_adopted_at_next_calibrate():
    X, y = regression_data(300)
    first, second = Ridge().fit(X, y), Ridge().fit(X, -y)
    cp = SplitConformalRegressor(first).calibrate(X, y)
    cp.set_params(estimator=second).calibrate(X, y)
    assert cp.estimator_ is second
    # but a model trained by fit stays in place across calibrations
    cp = SplitConformalRegressor(Ridge()).fit(X, y)
    trained = cp.estimator_
    cp.calibrate(X, y).calibrate(X[:100], y[:100])
    assert cp.estimator_ is trained


# ---- Mondrian groups ---------------------------------------------------------------------
def test_mondrian_thresholds_are_per_group():
    X, y = regression_data(900, seed=5)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    groups_c = np.where(Xc[:, 0] > 0, "wide", "narrow")
    groups_t = np.where(Xt[:, 0] > 0, "wide", "narrow")
    cp = SplitConformalRegressor(LinearRegression(), alpha=0.2).fit(Xf, yf)
    cp.calibrate(Xc, yc, groups=groups_c)
    intervals = cp.predict_interval(Xt, groups=groups_t)
    residual = np.abs(yc - cp.predict(Xc))
    for g in ("wide", "narrow"):
        q = conformal_quantile(residual[groups_c == g], 0.2)[0]
        np.testing.assert_allclose(intervals[groups_t == g, 1] - cp.predict(Xt)[groups_t == g], q)
    np.testing.assert_array_equal(cp.groups_, ["narrow", "wide"])


def test_mondrian_errors_and_unseen_groups():
    X, y = regression_data(300)
    cp = SplitConformalRegressor().fit(X, y).calibrate(X, y, groups=X[:, 0] > 0)
    with pytest.raises(ValueError, match="groups"):
        cp.predict_interval(X)
    with pytest.raises(ValueError, match="groups"):
        cp.predict_interval(X[:3], groups=[True, False])
    with pytest.warns(UserWarning, match="groups without calibration data"):
        out = cp.predict_interval(X[:4], groups=np.array([True, 2, False, 2], dtype=object))
    assert np.all(np.isinf(out[[1, 3]])) and np.all(np.isfinite(out[[0, 2]]))
    plain = SplitConformalRegressor().fit(X, y).calibrate(X, y)
    with pytest.raises(ValueError, match="groups"):
        plain.predict_interval(X, groups=np.ones(len(X)))
    with pytest.raises(ValueError, match=r"groups.*NaN"):
        SplitConformalRegressor().fit(X, y).calibrate(X, y, groups=np.full(len(X), np.nan))
    with pytest.raises(ValueError, match="groups"):
        SplitConformalRegressor().fit(X, y).calibrate(X, y, groups=np.ones(len(X) - 1))


def test_unseen_group_gives_every_class():
    X, y = classification_data(300)
    groups = np.where(X[:, 1] > 0.5, 1, 0)
    cp = SplitConformalClassifier().fit(X, y).calibrate(X, y, groups=groups)
    with pytest.warns(UserWarning, match="their sets hold every class"):
        sets = cp.predict_set(X[:5], groups=[0, 1, 7, 0, 7])
    assert sets[[2, 4]].all()


def test_tiny_calibration_set_gives_whole_space_and_warns():
    X, y = regression_data(100)
    cp = SplitConformalRegressor().fit(X, y)
    with pytest.warns(UserWarning, match="Too few calibration points") as at_calibration:
        cp.calibrate(X[:5], y[:5])  # said next to its cause, for the default alpha
    with pytest.warns(UserWarning, match="Too few calibration points") as at_prediction:
        out = cp.predict_interval(X[:3], alpha=0.1)
    # Both point at this file (the caller), not at the library's wrappers.
    assert {w.filename for w in [*at_calibration, *at_prediction]} == {__file__}
    assert np.all(out[:, 0] == -np.inf) and np.all(out[:, 1] == np.inf)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(cp.predict_interval(X[:3], alpha=0.2)).all()  # 5 >= ceil(6 * .8)
    Xc, yc = classification_data(100)
    clf = SplitConformalClassifier(alpha=0.2).fit(Xc, yc)
    with pytest.warns(UserWarning, match="Too few"):
        clf.calibrate(Xc[:3], yc[:3])
    with pytest.warns(UserWarning, match="Too few"):
        assert clf.predict_set(Xc[:4], alpha=0.05).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SplitConformalClassifier(alpha=0.2).fit(Xc, yc).calibrate(Xc[:9], yc[:9])  # 9 >= 8


# ---- inputs ------------------------------------------------------------------------------
def test_dataframe_feature_names_are_kept_and_checked():
    X, y = regression_data(300)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    cp = SplitConformalRegressor().fit(frame, y).calibrate(frame, y)
    np.testing.assert_array_equal(cp.feature_names_in_, frame.columns)
    assert cp.predict_interval(frame).shape == (300, 2)
    with pytest.raises(ValueError, match="feature names"):
        cp.predict_interval(frame[frame.columns[::-1]])
    with pytest.raises(ValueError, match="missing"):
        cp.predict_interval(frame.iloc[:, :2])
    series_y = pd.Series(y)
    SplitConformalRegressor().fit(frame, series_y).calibrate(frame, series_y)
    # prefit models contribute their own feature names
    prefit = SplitConformalRegressor(Ridge().fit(frame, y)).calibrate(frame, y)
    np.testing.assert_array_equal(prefit.feature_names_in_, frame.columns)


def test_lists_and_sparse_inputs():
    X, y = regression_data(120)
    dense = SplitConformalRegressor().fit(X, y).calibrate(X, y)
    from_lists = SplitConformalRegressor().fit(X.tolist(), y.tolist())
    from_lists.calibrate(X.tolist(), y.tolist())
    np.testing.assert_allclose(from_lists.predict_interval(X.tolist()), dense.predict_interval(X))
    for fmt in ("csr", "coo", "dok"):
        Xs = sparse.random(120, 4, density=0.5, random_state=0, format=fmt)
        cp = SplitConformalRegressor(batch_size=16).fit(Xs, y).calibrate(Xs, y)
        assert cp.predict_interval(Xs).shape == (120, 2)


@pytest.mark.parametrize("kind", WRAPPERS)
def test_inputs_are_never_modified(kind):
    X, y = _data(kind)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    groups = (Xc[:, 0] > 0).astype(int)
    groups_t = (Xt[:, 0] > 0).astype(int)
    saved = Unchanged(Xf, yf, Xc, yc, Xt, groups, groups_t)
    model = WRAPPERS[kind]().set_params(batch_size=50)
    model.fit(Xf, yf)
    saved.check()
    model.calibrate(Xc, yc, groups=groups)
    saved.check()
    _output(model, Xt, alpha=[0.1, 0.2], groups=groups_t)
    model.predict(Xt)
    saved.check()


def test_nan_in_X_is_passed_to_models_that_accept_it():
    X, y = regression_data(300)
    X_nan = X.copy()
    X_nan[::7, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        SplitConformalRegressor(LinearRegression()).fit(X_nan, y)
    fitted = SplitConformalRegressor(LinearRegression()).fit(X, y)
    with pytest.raises(ValueError, match="NaN"):
        fitted.calibrate(X_nan, y)
    cp = SplitConformalRegressor(HistGradientBoostingRegressor(max_iter=10))
    out = cp.fit(X_nan, y).calibrate(X_nan, y).predict_interval(X_nan)
    assert np.isfinite(out).all()


@pytest.mark.parametrize(
    "call,kwargs,error,match",
    [
        ("fit", {"alpha": 0.0}, ValueError, "alpha"),
        ("fit", {"alpha": 1.0}, ValueError, "alpha"),
        ("fit", {"alpha": np.nan}, ValueError, "alpha"),
        ("fit", {"alpha": "0.1"}, TypeError, "alpha"),
        ("fit", {"alpha": [0.1, 1.5]}, ValueError, "alpha"),
        ("calibrate", {"alpha": -0.5}, ValueError, "alpha"),
        ("calibrate", {"alpha": None}, TypeError, "alpha"),
    ],
)
def test_bad_constructor_alpha(call, kwargs, error, match):
    X, y = regression_data(90)
    model = Ridge().fit(X, y)
    cp = SplitConformalRegressor(model, **kwargs)
    with pytest.raises(error, match=match):
        cp.fit(X, y) if call == "fit" else cp.calibrate(X, y)


@pytest.mark.parametrize(
    "alpha,error",
    [
        (0.0, ValueError),
        (1.0, ValueError),
        (np.nan, ValueError),
        ("x", TypeError),
        ([0.1, 2.0], ValueError),
        ([[0.1]], ValueError),
        (True, TypeError),
    ],
)
def test_bad_per_call_alpha(alpha, error):
    X, y = regression_data(90)
    cp = SplitConformalRegressor().fit(X, y).calibrate(X, y)
    with pytest.raises(error, match="alpha"):
        cp.predict_interval(X, alpha=alpha)
    Xc, yc = classification_data(90)
    clf = SplitConformalClassifier().fit(Xc, yc).calibrate(Xc, yc)
    with pytest.raises(error, match="alpha"):
        clf.predict_set(Xc, alpha=alpha)


def test_shape_errors_name_the_argument():
    X, y = regression_data(90)
    cp = SplitConformalRegressor().fit(X, y)
    with pytest.raises(ValueError, match="`y` has 89 entries"):
        cp.fit(X, y[:-1])
    with pytest.raises(ValueError, match="`y` has 89 entries"):
        cp.calibrate(X, y[:-1])
    with pytest.raises(ValueError, match="4 features"):
        cp.calibrate(X[:, :3], y)
    cp.calibrate(X, y)
    with pytest.raises(ValueError, match="4 features"):
        cp.predict_interval(np.ones((3, 5)))
    with pytest.raises(ValueError, match="Reshape"):
        cp.predict(X[0])
    with pytest.raises(ValueError, match="`X` has no rows"):
        cp.calibrate(X[:0], y[:0])
    for empty in ([], ()):  # scikit-learn's own check raised IndexError on these
        with pytest.raises(ValueError, match="`X` has no rows"):
            cp.predict_interval(empty)
    with pytest.raises(ValueError, match="`X` is None"):
        cp.calibrate(None, y)
    with pytest.raises(ValueError, match="requires y"):
        SplitConformalRegressor().fit(X, None)
    with pytest.warns(DataConversionWarning, match="column-vector"):
        cp.calibrate(X, y[:, None])


# ---- hypothesis: permutation of the calibration set ----------------------------------------
@settings(max_examples=25, deadline=None)
@given(st.randoms(use_true_random=False), st.sampled_from(["absolute", "lac", "aps"]))
def test_calibration_order_does_not_matter(random, kind):
    X, y = _data(kind)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    model = WRAPPERS[kind]()
    if kind == "aps":  # randomised: the draw of a calibration row must follow the row
        model.set_params(randomized=False)
    model.fit(Xf, yf)
    order = list(range(len(yc)))
    random.shuffle(order)
    first = _output(clone(model).fit(Xf, yf).calibrate(Xc, yc), Xt, alpha=[0.1, 0.3])
    second = _output(model.calibrate(Xc[order], yc[order]), Xt, alpha=[0.1, 0.3])
    np.testing.assert_array_equal(first, second)


@settings(max_examples=15, deadline=None)
@given(
    st.sampled_from(sorted(WRAPPERS)),
    st.lists(st.floats(0.02, 0.8), min_size=1, max_size=3),
    st.integers(0, 2**31 - 1),
)
def test_pickle_round_trip_keeps_every_prediction(kind, alphas, seed):
    X, y = _data(kind)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    model = WRAPPERS[kind]().set_params(random_state=seed).fit(Xf, yf).calibrate(Xc, yc)
    loaded = pickle.loads(pickle.dumps(model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        np.testing.assert_array_equal(_output(loaded, Xt, alphas), _output(model, Xt, alphas))
    assert loaded.get_params(deep=False).keys() == model.get_params(deep=False).keys()


@pytest.mark.parametrize("seed", [2**32, -1, 1.5])
def test_random_state_outside_numpy_seeds_is_named(seed):
    X, y = regression_data(60, seed=0)
    with pytest.raises(ValueError, match=r"`random_state` must be None, an int in \[0, 2\*\*32\)"):
        SplitConformalRegressor(random_state=seed).fit(X, y)


def test_weighted_calibration_names_the_strata_with_too_few_rows():
    """Shift review: with a `likelihood_ratio` (even one of exactly 1 everywhere), a
    Mondrian group of 5 rows or a class without calibration rows was never named: calibrate
    said nothing, and prediction blamed the weights of the rows it left unbounded."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))
    y = X[:, 0] + rng.normal(size=400)
    groups = np.where(np.arange(400) < 5, "small", "big")
    model = Ridge().fit(X, y)
    uniform = lambda Z: np.ones(len(Z))  # noqa: E731
    weighted = SplitConformalRegressor(model, likelihood_ratio=uniform)
    match = (
        r"Too few calibration points for alpha=0.1 in group 'small' \(5 points\).*"
        r"unless `likelihood_ratio` gives the test row far less weight"
    )
    with pytest.warns(UserWarning, match=match):
        weighted.calibrate(X, y, groups=groups)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # enough rows in every group: no warning
        weighted.calibrate(X, y, groups=np.where(np.arange(400) < 50, "small", "big"))
    labels = np.arange(400) % 3
    classifier = LogisticRegression().fit(X, labels)
    per_class = SplitConformalClassifier(
        classifier, class_conditional=True, likelihood_ratio=uniform
    )
    with pytest.warns(
        UserWarning, match=r"in class 2 \(no calibration points\).*threshold is infinite\)\.$"
    ):
        per_class.calibrate(X[labels < 2], labels[labels < 2])


class _Settings:
    """A stand-in for a wrapper: the parameters its calibration depends on."""

    _calibration_params = ("grid", "nested", "levels", "model", "scale")

    def __init__(self, **params):
        self.__dict__.update(params)


def test_list_and_array_settings_changed_in_place_are_refused():
    """Review finding: list and array settings were recorded by reference, so a change in
    place (``grid[:] = ...``) compared the object with itself and was never refused."""
    from uqconform.base import check_calibration_settings, record_calibration_settings

    estimator = Ridge()
    model = _Settings(
        grid=[0.1, 0.2],
        nested=[[1, 2], (3, [4])],
        levels=np.array([0.1, np.nan]),  # NaN still equals NaN
        model=estimator,
        scale=(1.0, 2.0),
    )
    record_calibration_settings(model)
    check_calibration_settings(model, "predict")  # nothing changed
    model.grid[0] = 0.5
    with pytest.raises(
        NotFittedError, match=r"parameters changed since calibrate .*grid=\[0.1, 0.2\]"
    ):
        check_calibration_settings(model, "predict")
    model.grid[0] = 0.1
    model.nested[1][1].append(5)
    with pytest.raises(NotFittedError, match=r"nested=\[\[1, 2\], \(3, \[4\]\)\]"):
        check_calibration_settings(model, "predict")
    model.nested[1][1].pop()
    model.levels[0] = 0.3
    with pytest.raises(NotFittedError, match=r"levels=array\(\[0.1, nan\]\)"):
        check_calibration_settings(model, "predict")
    model.levels[0] = 0.1
    check_calibration_settings(model, "predict")  # back to the recorded values
    model.grid = (0.1, 0.2)  # an equal value in another container is the same setting
    check_calibration_settings(model, "predict")
    model.nested = [[1, 2], (3, [4])]
    check_calibration_settings(model, "predict")
    with_nan = _Settings(grid=[0.1, float("nan")], nested=(), levels=(), model=None, scale=())
    record_calibration_settings(with_nan)
    with_nan.grid = [0.1, float("nan")]  # another NaN object, as in a pickled copy
    check_calibration_settings(with_nan, "predict")
    ragged = _Settings(
        grid=[[float("nan"), 1.0], [2.0]], nested=(), levels=(), model=None, scale=()
    )
    record_calibration_settings(ragged)
    ragged.grid = [[float("nan"), 1.0], [2.0]]  # ragged and nested (diffrev12)
    check_calibration_settings(ragged, "predict")
    ragged.grid = [[float("nan"), 1.0], [3.0]]
    with pytest.raises(NotFittedError, match="parameters changed since calibrate"):
        check_calibration_settings(ragged, "predict")
    # an estimator is still compared by identity and parameters, never copied
    model.model.set_params(alpha=3.0)
    with pytest.raises(NotFittedError, match=r"set in place since: now alpha=3\.0"):
        check_calibration_settings(model, "predict")
    model.model.set_params(alpha=1.0)
    check_calibration_settings(model, "predict")  # its parameters set back
    model.model = clone(estimator)  # an equal new object: told apart from the one used
    with pytest.raises(
        NotFittedError,
        match=r"since calibrate .*; now another object that prints the same \(compared by id",
    ):
        check_calibration_settings(model, "predict")
    model.model = estimator
    model.grid = np.arange(1000.0)  # differs from the recorded list where its text is cut
    record_calibration_settings(model)
    model.grid = np.arange(1000.0)
    model.grid[500] = -1.0
    with pytest.raises(NotFittedError, match="; now a value that differs where this text is cut"):
        check_calibration_settings(model, "predict")


# ---- fitted models trained again after calibrate -------------------------------------------
@pytest.mark.parametrize("Model", [Ridge, LinearRegression])
def test_a_changed_intercept_after_calibrate_is_refused(Model):
    """User review: a fitted linear model's ``intercept_`` changed after calibrate (a bias
    correction in place, or a refit on y + 0.5, which leaves ``coef_`` bit-identical) was
    not refused: the digest left scalar attributes out, and coverage fell from 0.89 to 0.74
    at 0.90. An unchanged model still predicts, also after a pickle round-trip."""
    X, y = regression_data(450)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    model = Model().fit(Xf, yf)
    cp = SplitConformalRegressor(model, alpha=0.1).calibrate(Xc, yc)
    reference = cp.predict_interval(Xt)
    np.testing.assert_array_equal(cp.predict_interval(Xt), reference)  # nothing changed
    copy = pickle.loads(pickle.dumps(cp))
    np.testing.assert_array_equal(copy.predict_interval(Xt), reference)
    intercept = model.intercept_
    model.intercept_ = intercept + 1.0  # a bias correction in place
    with pytest.raises(NotFittedError, match=r"changed since calibrate \(it was trained again"):
        cp.predict_interval(Xt)
    model.intercept_ = intercept  # back to the calibrated model
    np.testing.assert_array_equal(cp.predict_interval(Xt), reference)
    coef = model.coef_.copy()
    model.fit(Xf, yf + 0.5)  # refitted on a shifted target: the intercept moves
    model.coef_ = coef  # and coef_ as before, bit for bit (as on the review's data)
    with pytest.raises(NotFittedError, match=r"changed since calibrate \(it was trained again"):
        cp.predict_interval(Xt)


def test_an_older_builds_digest_without_scalars_still_predicts():
    """A wrapper pickled by the previous build carries a "d2" digest that left float
    scalars out: loaded here it predicts without a warning (not "trained again"), and a
    retrained model is still refused; an untagged (older) digest only warns."""
    from uqconform._version import _STATE_KEY, __version__
    from uqconform.linearize import parameter_digest

    X, y = regression_data(450)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    model = Ridge().fit(Xf, yf)
    cp = SplitConformalRegressor(model, alpha=0.1).calibrate(Xc, yc)
    reference = cp.predict_interval(Xt)
    old = parameter_digest([model], arrays_only=True, like="d2:")  # as the older build
    assert old.startswith("d2:") and old != cp._adopted_digest
    state = cp.__getstate__()
    state["_adopted_digest"] = old
    state[_STATE_KEY] = __version__
    loaded = type(cp).__new__(type(cp))
    loaded.__setstate__(pickle.loads(pickle.dumps(state)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(loaded.predict_interval(Xt), reference)
    loaded.estimator_.fit(Xf, -yf)
    with pytest.raises(NotFittedError, match=r"changed since calibrate \(it was trained again"):
        loaded.predict_interval(Xt)
    state["_adopted_digest"] = "0" * 64  # an untagged digest that differs: a warning
    loaded.__setstate__(pickle.loads(pickle.dumps(state)))
    with pytest.warns(UserWarning, match="an older build of uqconform recorded"):
        loaded.predict_interval(Xt)


def test_a_nearest_neighbours_model_trained_again_in_place_is_refused():
    """regr review (stop 57, repro_knn_retrained.py): a fitted k-NN model (point model or
    difficulty model) retrained in place after calibrate kept its digest (it learns only
    private arrays, ``_fit_X`` and ``_y``): coverage fell from 0.91 to 0.34 without a
    word. A digest an older build recorded ("d3", without those arrays) still predicts
    without a warning."""
    from sklearn.neighbors import KNeighborsRegressor

    from uqconform._version import _STATE_KEY, __version__
    from uqconform.linearize import parameter_digest

    X, y = regression_data(450)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    point = KNeighborsRegressor(10).fit(Xf, yf)
    cp = SplitConformalRegressor(point, alpha=0.1).calibrate(Xc, yc)
    reference = cp.predict_interval(Xt)
    state = cp.__getstate__()
    point.fit(Xf, -yf)
    with pytest.raises(NotFittedError, match=r"changed since calibrate \(it was trained again"):
        cp.predict_interval(Xt)
    # the difficulty model given fitted
    spread = KNeighborsRegressor(10).fit(Xf, np.abs(yf - yf.mean()))
    model = Ridge().fit(Xf, yf)
    normalized = SplitConformalRegressor(
        model, conformity_score="normalized", difficulty_estimator=spread
    ).calibrate(Xc, yc)
    normalized.predict_interval(Xt)
    spread.fit(Xf, np.abs(yf - yf.mean()) / 10)
    with pytest.raises(NotFittedError, match=r"`difficulty_estimator`\) changed since"):
        normalized.predict_interval(Xt)
    # a wrapper pickled by the previous build (a "d3" digest) predicts without a warning
    point.fit(Xf, yf)
    old = parameter_digest([point], arrays_only=True, like="d3:")
    assert old.startswith("d3:") and old != state["_adopted_digest"]
    state["_adopted_digest"] = old
    state[_STATE_KEY] = __version__
    loaded = type(cp).__new__(type(cp))
    loaded.__setstate__(pickle.loads(pickle.dumps(state)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(loaded.predict_interval(Xt), reference)


# ---- FrozenEstimator at fit ------------------------------------------------------------------
@pytest.mark.parametrize("Wrapper", [SplitConformalRegressor, ConformalPredictiveSystem])
def test_fit_checks_x_against_the_frozen_models_features(Wrapper):
    """API review: fit with a FrozenEstimator recorded the features of whatever X it got
    (3 of the model's 4, or its columns reordered), and every later call failed with
    contradictory messages. Now fit refuses them, naming `X`; the right X still works."""
    X, y = regression_data(450)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    columns = list("abcd")
    frame = pd.DataFrame(Xf, columns=columns)
    model = Ridge().fit(frame, yf)
    with pytest.raises(ValueError, match=r"fit: `X` has 3 features, but the frozen Ridge .* 4"):
        Wrapper(FrozenEstimator(model)).fit(Xf[:, :3], yf)
    with pytest.raises(ValueError, match=r"fit: `X` has the columns \['d', 'c', 'b', 'a'\], but"):
        Wrapper(FrozenEstimator(model)).fit(frame[columns[::-1]], yf)
    cp = Wrapper(FrozenEstimator(model)).fit(frame, yf)
    cp.calibrate(pd.DataFrame(Xc, columns=columns), yc)
    assert list(cp.feature_names_in_) == columns and cp.n_features_in_ == 4
    reference = Wrapper(model).calibrate(pd.DataFrame(Xc, columns=columns), yc)
    Xt = pd.DataFrame(Xt, columns=columns)
    np.testing.assert_array_equal(cp.predict_interval(Xt), reference.predict_interval(Xt))
    unnamed = Ridge().fit(Xf, yf)  # fitted on an array: only the width is checked
    with pytest.raises(ValueError, match=r"`X` has 3 features, but the frozen Ridge"):
        Wrapper(FrozenEstimator(unnamed)).fit(Xf[:, :3], yf)
    Wrapper(FrozenEstimator(unnamed)).fit(Xf, yf).calibrate(Xc, yc)


def test_fit_checks_x_against_every_frozen_model_of_a_pair_or_a_region():
    """diffrev13: CQR's pair of FrozenEstimators and a multi-output region around one took
    an X of the wrong width or column order at fit (scikit-learn's message at calibrate)."""
    from sklearn.linear_model import QuantileRegressor

    from uqconform import ConformalizedQuantileRegressor, EllipsoidalConformalRegressor

    X, y = regression_data(300)
    frame = pd.DataFrame(X, columns=list("abcd"))
    low, high = (
        QuantileRegressor(quantile=q, alpha=0.0).fit(frame[:100], y[:100]) for q in (0.05, 0.95)
    )
    pair = (FrozenEstimator(low), FrozenEstimator(high))
    with pytest.raises(ValueError, match=r"fit: `X` has 2 features, but the frozen Quantile"):
        ConformalizedQuantileRegressor(pair).fit(X[:, :2], y)
    narrow_upper = (FrozenEstimator(low), FrozenEstimator(clone(high).fit(frame[list("abc")], y)))
    with pytest.raises(ValueError, match=r"QuantileRegressor, the upper one, \(fit does not"):
        ConformalizedQuantileRegressor(narrow_upper).fit(frame, y)  # diffrev14: which one
    with pytest.raises(ValueError, match=r"fit: `X` has the columns \['d', 'c', 'b', 'a'\]"):
        ConformalizedQuantileRegressor(pair).fit(frame[list("dcba")], y)
    ConformalizedQuantileRegressor(pair).fit(frame[:100], y[:100]).calibrate(frame[100:], y[100:])
    Y = np.c_[y, 2 * y]
    region_model = Ridge().fit(frame[:100], Y[:100])
    with pytest.raises(ValueError, match=r"fit: `X` has 3 features, but the frozen Ridge"):
        EllipsoidalConformalRegressor(FrozenEstimator(region_model)).fit(X[:, :3], Y)


def test_a_setting_changed_after_calibrate_only_says_since_calibrate():
    """diffrev13: around a fitted model adopted by calibrate (fit never ran), a changed
    setting was said to have "changed since fit"."""
    from uqconform import EllipsoidalConformalRegressor

    X, y = regression_data(300)
    Y = np.c_[y, 2 * y]
    model = Ridge().fit(X[:100], Y[:100])
    region = EllipsoidalConformalRegressor(model, random_state=0).calibrate(X[100:200], Y[100:200])
    region.set_params(random_state=1)
    with pytest.raises(NotFittedError, match="parameters changed since calibrate"):
        region.predict_set(X[200:])


def test_fit_checks_x_against_a_frozen_classifiers_features():
    X, y = classification_data(450)
    model = LogisticRegression().fit(X[:150], y[:150])
    with pytest.raises(ValueError, match=r"SplitConformalClassifier.fit: `X` has 1 feature,"):
        SplitConformalClassifier(FrozenEstimator(model)).fit(X[:150, :1], y[:150])
    cp = SplitConformalClassifier(FrozenEstimator(model)).fit(X[:150], y[:150])
    assert cp.calibrate(X[150:300], y[150:300]).n_features_in_ == X.shape[1]


def test_a_model_that_caches_arrays_at_predict_and_other_fit_parameters_are_not_refused():
    """diffrev23 (stop 57): a user's model keeping a private array at predict (a cache)
    was refused as retrained at the second prediction once private arrays were hashed (of
    scikit-learn's own models only now, as a k-NN's); a fit parameter that is not a row
    weight (a validation frame of X's length) was row-checked and refused."""
    from sklearn.base import BaseEstimator, RegressorMixin

    from uqconform import CrossConformalRegressor

    class CachingRidge(Ridge):
        def predict(self, X):
            self._last = super().predict(X).copy()
            return self._last

    class TakesValidation(RegressorMixin, BaseEstimator):
        def fit(self, X, y, X_val=None):
            self.coef_ = np.linalg.lstsq(np.asarray(X), y, rcond=None)[0]
            return self

        def predict(self, X):
            return np.asarray(X) @ self.coef_

    X, y = regression_data(450)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cp = SplitConformalRegressor(CachingRidge().fit(Xf, yf)).calibrate(Xc, yc)
        first = cp.predict_interval(Xt[:5])
        cp.predict_interval(Xt[5:])
        np.testing.assert_array_equal(cp.predict_interval(Xt[:5]), first)
        cross = CrossConformalRegressor(CachingRidge(), cv=3).fit(Xf, yf)
        cross.predict_interval(Xt[:5])
        cross.predict_interval(Xt[5:])
        frame = pd.DataFrame(Xf)
        shuffled = frame.sample(frac=1.0, random_state=0)  # passed on as it is, not paired
        SplitConformalRegressor(TakesValidation()).fit(frame, yf, X_val=shuffled)


class _StoredProbabilities(LogisticRegression):
    """A head whose probabilities are stored rows (the PathMNIST pattern): its repr prints
    the whole array."""

    def __init__(self, proba=None):
        self.proba = proba

    def fit(self, X=None, y=None):
        self.classes_ = np.arange(self.proba.shape[1])
        return self

    def predict_proba(self, X):
        return self.proba[np.asarray(X)[:, 0].astype(int)]


def test_a_changed_setting_holding_arrays_is_named_in_one_short_line():
    # mdim review: set_params(estimator=other heads) after calibrate printed every
    # stored probability of the old heads (3,773 characters over 61 lines)
    from uqconform.classification import EnsembleConformalClassifier

    rng = np.random.default_rng(0)
    X, y = np.arange(300.0)[:, None], rng.integers(0, 4, 300)

    def heads():
        return [_StoredProbabilities(rng.dirichlet(np.ones(4), 300)).fit() for _ in range(3)]

    model = EnsembleConformalClassifier(heads(), alpha=0.1).calibrate(X, y)
    model.set_params(estimator=heads())
    with pytest.raises(NotFittedError) as raised:
        model.predict_set(X)
    message = str(raised.value)
    assert (
        "it used estimator=[3 items: _StoredProbabilities]; now a value that differs where "
        "this text is cut); call calibrate(" in message
    )
    assert "\n" not in message and len(message) < 250, message


def test_a_frozen_model_set_in_place_is_refused_as_the_same_model_given_bare():
    """User review (stop 62): a FrozenEstimator's get_params ignores deep, so the frozen
    model's settings were not recorded: a frozen k-NN's n_neighbors changed in place after
    calibrate (predictions changed at once) gave coverage 0.58 for 0.91 silently, where
    the same k-NN given bare was refused. Also inside a pipeline, and as a difficulty model."""
    from sklearn.neighbors import KNeighborsRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = regression_data(400, seed=0)
    for wrap in (
        FrozenEstimator,
        lambda knn: make_pipeline(StandardScaler(), FrozenEstimator(knn)),
        lambda knn: FrozenEstimator(make_pipeline(StandardScaler(), knn).fit(X[:200], y[:200])),
    ):
        knn = KNeighborsRegressor().fit(X[:200], y[:200])
        model = SplitConformalRegressor(wrap(knn)).fit(X[:200], y[:200])
        model.calibrate(X[200:300], y[200:300])
        model.predict_interval(X[300:])
        knn.set_params(n_jobs=2)  # how it runs, not what it predicts: no new calibration
        model.predict_interval(X[300:])
        knn.set_params(n_neighbors=50)
        with pytest.raises(NotFittedError, match=r"since: now \S*n_neighbors=50\)"):
            model.predict_interval(X[300:])
    difficulty = KNeighborsRegressor(50).fit(X[:200], np.abs(y[:200]))
    model = SplitConformalRegressor(
        LinearRegression().fit(X[:200], y[:200]),
        conformity_score="normalized",
        difficulty_estimator=FrozenEstimator(difficulty),
    ).calibrate(X[200:300], y[200:300])
    difficulty.set_params(n_neighbors=150)
    with pytest.raises(NotFittedError, match=r"estimator__n_neighbors=150"):
        model.predict_interval(X[300:])


def test_models_in_a_list_or_pair_set_in_place_are_refused_and_old_records_still_predict():
    """Diff review 46: models given as a list or tuple (fitted heads, RPS partition models,
    a CQR quantile pair) were compared by identity only: a head's n_neighbors changed in
    place after calibrate moved coverage 0.86 -> 0.65 silently; and a wrapper pickled
    before frozen models' parameters were recorded refused every prediction."""
    from sklearn.neighbors import KNeighborsRegressor

    from uqconform import ConformalizedQuantileRegressor

    X, y = regression_data(400, seed=1)
    for wrap in (lambda model: model, FrozenEstimator):
        pair = [KNeighborsRegressor(20).fit(X[:200], y[:200]) for _ in range(2)]
        model = ConformalizedQuantileRegressor(tuple(wrap(m) for m in pair))
        model.calibrate(X[200:300], y[200:300]).predict_interval(X[300:])
        pair[0].set_params(n_jobs=2)  # how it runs: not a change
        model.predict_interval(X[300:])
        pair[0].set_params(n_neighbors=1)
        with pytest.raises(NotFittedError, match=r"since: now \S*n_neighbors=1\)"):
            model.predict_interval(X[300:])
    # a record of an older build: without the frozen model's parameters, and unmarked
    knn = KNeighborsRegressor().fit(X[:200], y[:200])
    model = SplitConformalRegressor(FrozenEstimator(knn)).calibrate(X[200:300], y[200:300])
    expected = model.predict_interval(X[300:])
    state = model._calibrate_settings["estimator"]
    state.params = {k: v for k, v in state.params.items() if not k.startswith("estimator__")}
    del state.frozen_inner
    np.testing.assert_array_equal(
        pickle.loads(pickle.dumps(model)).predict_interval(X[300:]), expected
    )
