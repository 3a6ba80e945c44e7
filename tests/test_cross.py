"""Cross-conformal regression (CV+, jackknife+, min-max): exact against brute force and
MAPIE, its guarantees over resplits, its width against split CP, bad input."""

from __future__ import annotations

import pickle
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import ttest_rel
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import Ridge
from sklearn.model_selection import (
    GroupKFold,
    KFold,
    LeaveOneOut,
    ShuffleSplit,
    TimeSeriesSplit,
)
from sklearn.tree import DecisionTreeRegressor

from uqconform import CrossVennAbersCalibrator
from uqconform.evaluation import coverage_bounds
from uqconform.regression import CrossConformalRegressor, SplitConformalRegressor


def _linear(n: int, seed: int, d: int = 5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ np.linspace(1.0, -1.0, d) + rng.normal(size=n)


def _brute_force(X, y, X_test, splits, alpha, method):
    """The intervals by the paper's definitions, one test row and one fold at a time."""
    n, model = len(y), Ridge(1.0)
    models, fold, residual = [], np.empty(n, int), np.empty(n)
    for k, (train, test) in enumerate(splits):
        fitted = clone(model).fit(X[train], y[train])
        models.append(fitted)
        fold[test] = k
        residual[test] = np.abs(y[test] - fitted.predict(X[test]))
    out = []
    for x in X_test:
        centre = np.array([m.predict(x[None])[0] for m in models])
        if method == "plus":
            lows = np.sort(centre[fold] - residual)
            highs = np.sort(centre[fold] + residual)
            k_low = int(np.floor(alpha * (n + 1)))
            k_high = int(np.ceil((1 - alpha) * (n + 1)))
            low = lows[k_low - 1] if k_low >= 1 else -np.inf
            high = highs[k_high - 1] if k_high <= n else np.inf
        else:
            k_high = int(np.ceil((1 - alpha) * (n + 1)))
            q = np.sort(residual)[k_high - 1] if k_high <= n else np.inf
            low, high = centre.min() - q, centre.max() + q
        out.append((low, high))
    return np.array(out)


@pytest.mark.parametrize("method", ["plus", "minmax"])
@pytest.mark.parametrize("cv", [KFold(4, shuffle=True, random_state=1), LeaveOneOut()])
def test_intervals_equal_the_brute_force_definition(method, cv):
    """Uneven folds (23 rows in 4) and jackknife+ (leave-one-out), two levels at once."""
    X, y = _linear(23, 0)
    X_test, _ = _linear(7, 1)
    alphas = [0.1, 0.25]
    model = CrossConformalRegressor(Ridge(1.0), alpha=alphas, method=method, cv=cv).fit(X, y)
    got = model.predict_interval(X_test)
    splits = list(cv.split(X))
    for j, alpha in enumerate(alphas):
        expected = _brute_force(X, y, X_test, splits, alpha, method)
        np.testing.assert_allclose(got[:, :, j], expected, rtol=1e-12, atol=1e-12)
        assert (got[:, 0, j] <= expected[:, 0]).all() and (got[:, 1, j] >= expected[:, 1]).all()


def test_batches_and_one_level_give_the_same_intervals():
    X, y = _linear(60, 0)
    X_test, _ = _linear(25, 1)
    whole = CrossConformalRegressor(alpha=[0.1, 0.3], random_state=0).fit(X, y)
    batched = clone(whole).set_params(batch_size=4).fit(X, y)
    np.testing.assert_array_equal(whole.predict_interval(X_test), batched.predict_interval(X_test))
    np.testing.assert_array_equal(
        whole.predict_interval(X_test, alpha=0.3), whole.predict_interval(X_test)[:, :, 1]
    )


@pytest.mark.parametrize("method", ["plus", "minmax"])
def test_equals_mapie_cross_conformal_regressor(method):
    """MAPIE's CrossConformalRegressor on the same folds and model: the same intervals
    (up to our outward rounding) and the same point prediction."""
    mapie = pytest.importorskip("mapie.regression")
    X, y = _linear(150, 0, d=8)
    X_test, _ = _linear(40, 1, d=8)
    cv = KFold(5, shuffle=True, random_state=0)
    ours = CrossConformalRegressor(Ridge(), alpha=[0.1, 0.2], method=method, cv=cv).fit(X, y)
    theirs = mapie.CrossConformalRegressor(
        Ridge(), confidence_level=[0.9, 0.8], method=method, cv=cv
    ).fit_conformalize(X, y)
    point, intervals = theirs.predict_interval(X_test)
    np.testing.assert_allclose(ours.predict_interval(X_test), intervals, atol=1e-10)
    np.testing.assert_allclose(ours.predict(X_test), point, atol=1e-10)


def _coverage(make_model, n, n_test, repeats, alpha, seed0=0):
    covered = np.empty(repeats)
    for seed in range(repeats):
        X, y = _linear(n + n_test, seed0 + seed)
        model = make_model(seed).fit(X[:n], y[:n])
        low, high = model.predict_interval(X[n:], alpha=alpha).T
        covered[seed] = np.mean((low <= y[n:]) & (y[n:] <= high))
    return covered.mean()


def test_guarantees_hold_over_resplits_and_the_check_can_fail():
    """Pooled coverage over 150 resplits against each method's guaranteed level (the
    lower end of the coverage law at that level): jackknife+ and CV+ at ``1 - 2 alpha``
    (CV+ minus its small-fold term), min-max at ``1 - alpha``. The same check flags
    intervals built from in-sample residuals of a deep tree."""
    n, n_test, repeats, alpha = 40, 40, 150, 0.1
    k = 5
    cv_term = min(2 * (1 - 1 / k) / (n / k + 1), (1 - k / n) / (k + 1))
    for method, cv, guaranteed in [
        ("plus", k, 2 * alpha + cv_term),
        ("plus", LeaveOneOut(), 2 * alpha),
        ("minmax", k, alpha),
    ]:

        def make(seed, method=method, cv=cv):
            return CrossConformalRegressor(
                DecisionTreeRegressor(max_depth=3), method=method, cv=cv, random_state=seed
            )

        observed = _coverage(make, n, n_test, repeats, alpha)
        low, _ = coverage_bounds(n, guaranteed, n_test, n_repeats=repeats)
        assert observed >= low, (method, cv, observed, low)
        # and it is not trivially wide: the typical coverage sits near 1 - alpha
        assert observed <= 0.99, (method, cv, observed)

    class _InSample:  # the tree's training residuals: far too small
        def __init__(self, seed):
            self.model = DecisionTreeRegressor(random_state=seed)

        def fit(self, X, y):
            self.model.fit(X, y)
            self.radius = np.quantile(np.abs(y - self.model.predict(X)), 1 - alpha)
            return self

        def predict_interval(self, X, alpha):
            centre = self.model.predict(X)
            return np.column_stack([centre - self.radius, centre + self.radius])

    observed = _coverage(_InSample, n, n_test, repeats, alpha)
    low, _ = coverage_bounds(n, alpha, n_test, n_repeats=repeats)
    assert observed < low


def test_narrower_than_split_conformal_on_small_data():
    """Every row trains and calibrates: on 60 rows with 10 features CV+ intervals are
    narrower than split CP's, which trains on 30 and calibrates on 30 (50 resplits;
    measured 0.91x), at no lower coverage."""
    n, n_test, repeats = 60, 200, 50
    width = {"cv+": [], "split": []}
    covered = {"cv+": [], "split": []}
    for seed in range(repeats):
        X, y = _linear(n + n_test, seed, d=10)
        test = slice(n, None)
        models = {
            "cv+": CrossConformalRegressor(cv=10, random_state=seed).fit(X[:n], y[:n]),
            "split": SplitConformalRegressor().fit(X[:30], y[:30]).calibrate(X[30:n], y[30:n]),
        }
        for name, model in models.items():
            low, high = model.predict_interval(X[test]).T
            width[name].append(np.mean(high - low))
            covered[name].append(np.mean((low <= y[test]) & (y[test] <= high)))
    # paired one-sided t-tests at 1% over the resplits: narrower, and coverage no more than
    # two points below split CP's (the claim's margin)
    narrower = ttest_rel(width["cv+"], width["split"], alternative="less")
    assert narrower.pvalue < 0.01, (np.mean(width["cv+"]) / np.mean(width["split"]), narrower)
    not_lower = ttest_rel(np.add(covered["cv+"], 0.02), covered["split"], alternative="greater")
    assert not_lower.pvalue < 0.01, (np.mean(covered["cv+"]), np.mean(covered["split"]))


def test_minmax_is_wider_than_plus():
    X, y = _linear(80, 0)
    X_test, _ = _linear(50, 1)
    plus = CrossConformalRegressor(random_state=0).fit(X, y).predict_interval(X_test)
    minmax = CrossConformalRegressor(method="minmax", random_state=0).fit(X, y)
    wide = minmax.predict_interval(X_test)
    assert (wide[:, 0] <= plus[:, 0] + 1e-12).all() and (wide[:, 1] >= plus[:, 1] - 1e-12).all()


def test_too_few_rows_give_infinite_intervals_with_a_warning():
    """Warned at fit, next to the cause, and at prediction for the levels asked for."""
    X, y = _linear(8, 0)
    with pytest.warns(UserWarning, match=r"Only 8 scores.*alpha=0.1.*an infinite interval"):
        model = CrossConformalRegressor(cv=4).fit(X, y)
    for method in ("plus", "minmax"):
        model.set_params(method=method)
        with pytest.warns(UserWarning, match="too few.*an infinite interval"):
            intervals = model.predict_interval(X[:3], alpha=0.1)
        assert np.isinf(intervals).all()
    assert np.isfinite(model.predict_interval(X[:3], alpha=0.3)).all()
    # review finding: the fit warning listed every level, the finite ones too
    with pytest.warns(UserWarning, match=r"too few for alpha=0\.1 \("):
        CrossConformalRegressor(cv=4, alpha=[0.1, 0.3]).fit(X, y)


def test_seeds_jobs_pickle_and_inputs():
    X, y = _linear(50, 0)
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    before = frame.copy(), y.copy()
    model = CrossConformalRegressor(DecisionTreeRegressor(), random_state=3).fit(frame, y)
    intervals = model.predict_interval(frame)
    again = CrossConformalRegressor(DecisionTreeRegressor(), random_state=3, n_jobs=2)
    np.testing.assert_array_equal(again.fit(frame, y).predict_interval(frame), intervals)
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(loaded.predict_interval(frame), intervals)
    pd.testing.assert_frame_equal(frame, before[0])
    np.testing.assert_array_equal(y, before[1])
    assert list(model.feature_names_in_) == list(frame.columns)
    with pytest.warns(UserWarning, match="feature names"):
        model.predict_interval(X)
    different = CrossConformalRegressor(DecisionTreeRegressor(), random_state=4).fit(frame, y)
    assert not np.array_equal(different.predict_interval(frame), intervals)


def test_per_row_fit_parameters_follow_the_fold_rows():
    X, y = _linear(40, 0)
    weights = np.random.default_rng(0).uniform(0.5, 2.0, 40)
    cv = KFold(4)
    model = CrossConformalRegressor(Ridge(), cv=cv).fit(X, y, sample_weight=weights)
    for fitted, (train, _) in zip(model.estimators_, cv.split(X), strict=True):
        manual = Ridge().fit(X[train], y[train], sample_weight=weights[train])
        np.testing.assert_allclose(fitted.coef_, manual.coef_)


def test_group_folds():
    X, y = _linear(40, 0)
    groups = np.repeat(np.arange(8), 5)
    model = CrossConformalRegressor(cv=GroupKFold(4)).fit(X, y, groups=groups)
    for k in range(4):  # every group lies in one fold
        assert np.unique(groups[model.fold_index_ == k]).size == 2
    # an int cv makes KFold folds, which would ignore the groups: refused, naming both
    with pytest.raises(ValueError, match=r"`groups` was given with `cv`=4.*GroupKFold\(4\)"):
        CrossConformalRegressor(cv=4).fit(X, y, groups=groups)
    with pytest.raises(ValueError, match=r"`cv` \(KFold\) does not read it"):
        CrossConformalRegressor(cv=KFold(4)).fit(X, y, groups=groups)


def test_bad_input_is_refused_with_a_message_naming_it():
    X, y = _linear(30, 0)
    cases = [
        ({"cv": 1}, "`cv` must be an int >= 2"),
        ({"cv": True}, "`cv` must be an int >= 2"),
        ({"cv": "loo"}, "`cv` must be an int >= 2"),
        ({"cv": 31}, "at least 31 rows; X has 30"),
        # the splitters suggested work for a regressor (StratifiedKFold needs classes)
        ({"cv": ShuffleSplit(3, random_state=0)}, r"`cv` .ShuffleSplit.*\(use KFold, GroupKFold"),
        ({"cv": TimeSeriesSplit(3)}, r"`cv` .TimeSeriesSplit.*\(KFold, GroupKFold, LeaveOneOut\)"),
        ({"method": "base"}, "`method` must be one of"),
        ({"alpha": 1.5}, "alpha"),
        ({"alpha": 0}, "alpha"),
        ({"estimator": FrozenEstimator(Ridge().fit(X, y))}, "FrozenEstimator"),
    ]
    for params, message in cases:
        with pytest.raises(ValueError, match=message):
            CrossConformalRegressor(**params).fit(X, y)
    bad_y = y.copy()
    bad_y[3] = np.nan
    with pytest.raises(ValueError, match="`y` contains 1 NaN"):
        CrossConformalRegressor().fit(X, bad_y)
    with pytest.raises(ValueError, match="`y` has 29 entries"):
        CrossConformalRegressor().fit(X, y[:-1])
    # named with the data's length, not a fold's (the model would say 24)
    with pytest.raises(ValueError, match="`sample_weight` has 29 entries but X has 30 rows"):
        CrossConformalRegressor(Ridge()).fit(X, y, sample_weight=np.ones(29))
    bad_X = X.copy()
    bad_X[2, 1] = np.nan
    with pytest.raises(ValueError, match="`X` contains NaN and LinearRegression"):
        CrossConformalRegressor().fit(bad_X, y)
    unfitted = CrossConformalRegressor()
    for call in (unfitted.predict, unfitted.predict_interval):
        with pytest.raises(NotFittedError, match="call fit"):
            call(X)
    fitted = CrossConformalRegressor().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        fitted.predict_interval(X[:, :3])
    with pytest.raises(ValueError, match="`X` contains NaN"):
        fitted.predict_interval(bad_X)
    with pytest.raises(ValueError, match="alpha"):
        fitted.predict_interval(X, alpha=-0.1)


def test_predict_set_is_predict_interval():
    X, y = _linear(40, 0)
    model = CrossConformalRegressor().fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(model.predict_set(X, 0.2), model.predict_interval(X, 0.2))


def test_parameters_changed_after_fit():
    """``method`` and ``alpha`` are read at prediction (both methods use the same fit);
    a new ``cv``, ``estimator`` or ``random_state`` asks for a new fit."""
    X, y = _linear(40, 0)
    model = CrossConformalRegressor(random_state=0).fit(X, y)
    minmax = CrossConformalRegressor(method="minmax", random_state=0).fit(X, y)
    model.set_params(method="minmax")
    np.testing.assert_array_equal(model.predict_interval(X), minmax.predict_interval(X))
    for params in ({"cv": 3}, {"estimator": Ridge()}, {"random_state": 1}):
        changed = clone(model).set_params(random_state=0).fit(X, y).set_params(**params)
        with pytest.raises(NotFittedError, match=r"changed since fit.*call fit\(X, y\)"):
            changed.predict_interval(X)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"batch_size": -5}, "`batch_size`"),
        ({"batch_size": 2.5}, "`batch_size`"),
        ({"method": "min-max"}, "`method`"),
        ({"method": None}, "`method`"),
    ],
)
def test_settings_read_at_prediction_are_checked_there(params, match):
    """batch_size=-5 set after fit ran no batch and returned the uninitialised result
    array (lower ends above upper ones; p-values up to 5e16); a misspelt method gave CV+."""
    from uqconform.classification import CrossConformalClassifier

    X, y = _linear(40, 0)
    model = CrossConformalRegressor(random_state=0).fit(X, y).set_params(**params)
    with pytest.raises(ValueError, match=re.escape(match)):
        model.predict_interval(X)
    if "batch_size" in params:
        labels = (y > np.median(y)).astype(int)
        classifier = CrossConformalClassifier(random_state=0).fit(X, labels)
        with pytest.raises(ValueError, match=re.escape(match)):
            classifier.set_params(**params).predict_pvalue(X)


class _RecordsRows(Ridge):
    """Ridge on the features after the first column, which holds the row's id: the
    fitted model records which rows its sample held."""

    def fit(self, X, y, sample_weight=None):
        self.seen_ = set(np.asarray(X)[:, 0].astype(int).tolist())
        return super().fit(np.asarray(X)[:, 1:], y)

    def predict(self, X):
        return super().predict(np.asarray(X)[:, 1:])


@pytest.mark.parametrize("method", ["plus", "minmax"])
def test_jackknife_after_bootstrap_equals_its_definition(method):
    """Kim, Xu and Barber (2020), from the models' own record of their samples: row i's
    centre is the mean of the models that left it out; rows held by every sample are not
    scored (warned)."""
    from uqconform.regression import JackknifeAfterBootstrapRegressor

    features, y = _linear(25, 0)
    X = np.column_stack([np.arange(25), features])
    X_test = np.column_stack([np.full(6, -1), _linear(6, 1)[0]])
    alphas = [0.1, 0.3]
    model = JackknifeAfterBootstrapRegressor(
        _RecordsRows(), alpha=alphas, method=method, n_bootstrap=4, random_state=2
    )
    with pytest.warns(UserWarning, match="drawn into every one of the 4 bootstrap samples"):
        model.fit(X, y)
    seen = np.array([[i in m.seen_ for m in model.estimators_] for i in range(25)])
    scored = np.flatnonzero(~seen.all(axis=1))
    np.testing.assert_array_equal(model.scored_rows_, scored)
    train_pred = np.column_stack([m.predict(X) for m in model.estimators_])
    test_pred = np.column_stack([m.predict(X_test) for m in model.estimators_])
    centre_train = np.array([train_pred[i, ~seen[i]].mean() for i in scored])
    residual = np.abs(y[scored] - centre_train)
    centres = np.array([[row[~seen[i]].mean() for i in scored] for row in test_pred])
    n = scored.size
    got = model.predict_interval(X_test)
    for j, alpha in enumerate(alphas):
        k_high = int(np.ceil((1 - alpha) * (n + 1)))
        if method == "plus":
            k_low = int(np.floor(alpha * (n + 1)))
            low = np.sort(centres - residual, axis=1)[:, k_low - 1]
            high = np.sort(centres + residual, axis=1)[:, k_high - 1]
        else:
            q = np.sort(residual)[k_high - 1]
            low, high = centres.min(axis=1) - q, centres.max(axis=1) + q
        np.testing.assert_allclose(got[:, 0, j], low, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(got[:, 1, j], high, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.predict(X_test), centres.mean(axis=1), rtol=1e-12)


def test_jackknife_after_bootstrap_covers_over_resplits():
    """Pooled coverage over 150 resplits at least the guaranteed 1 - 2 alpha (the lower end
    of the law at that level), near 1 - alpha in practice, with trees."""
    from uqconform.regression import JackknifeAfterBootstrapRegressor

    n, n_test, repeats, alpha = 40, 40, 150, 0.1

    def make(seed):
        return JackknifeAfterBootstrapRegressor(
            DecisionTreeRegressor(max_depth=3), n_bootstrap=20, random_state=seed
        )

    observed = _coverage(make, n, n_test, repeats, alpha)
    low, _ = coverage_bounds(n, 2 * alpha, n_test, n_repeats=repeats)
    assert low <= observed, (observed, low)
    # measured 0.914: near nominal, not only the floor (the lower end of split CP's law at
    # alpha itself, the coverage the docs say it reaches in practice)
    nominal_low, _ = coverage_bounds(n, alpha, n_test, n_repeats=repeats)
    assert observed >= nominal_low, (observed, nominal_low)


def test_jackknife_after_bootstrap_input_seeds_and_pickle():
    from uqconform.regression import JackknifeAfterBootstrapRegressor

    X, y = _linear(40, 0)
    for bad in (1, 0, 2.5, True, "30"):
        with pytest.raises(ValueError, match="n_bootstrap"):
            JackknifeAfterBootstrapRegressor(n_bootstrap=bad).fit(X, y)
    with pytest.raises(ValueError, match="1 sample"):
        JackknifeAfterBootstrapRegressor(n_bootstrap=3).fit(X[:1], y[:1])
    # not silently ignored; the message names this class (it named CrossConformalRegressor)
    with pytest.raises(ValueError, match="JackknifeAfterBootstrapRegressor takes no `groups`"):
        JackknifeAfterBootstrapRegressor().fit(X, y, groups=np.arange(40) % 4)
    with pytest.raises(NotFittedError, match="call fit"):
        JackknifeAfterBootstrapRegressor().predict_interval(X)
    model = JackknifeAfterBootstrapRegressor(DecisionTreeRegressor(), random_state=0)
    intervals = model.fit(X, y).predict_interval(X)
    again = JackknifeAfterBootstrapRegressor(DecisionTreeRegressor(), random_state=0, n_jobs=2)
    np.testing.assert_array_equal(again.fit(X, y).predict_interval(X), intervals)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(model)).predict_interval(X), intervals)
    other = JackknifeAfterBootstrapRegressor(DecisionTreeRegressor(), random_state=1)
    assert not np.array_equal(other.fit(X, y).predict_interval(X), intervals)
    model.set_params(n_bootstrap=10)
    with pytest.raises(NotFittedError, match="changed since fit"):
        model.predict_interval(X)


def test_jab_fits_when_a_bootstrap_sample_draws_every_row():
    """A bootstrap sample holding every row has no out-of-bag rows: its model was asked
    to predict 0 rows and scikit-learn refused (285 of 300 seeds failed at n = 4)."""
    from uqconform.regression import JackknifeAfterBootstrapRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(4, 2))
    y = X[:, 0] + rng.normal(size=4)
    fitted = 0
    for seed in range(20):
        model = JackknifeAfterBootstrapRegressor(Ridge(), n_bootstrap=30, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # too few rows for the level: infinite ends
            model.fit(X, y)
        full = [rows.size == 0 for rows in _out_of_bag_rows(model)]
        fitted += any(full)
        assert np.isfinite(model.predict(X)).all()
    assert fitted  # some seeds drew a sample holding every row


def _out_of_bag_rows(model):
    weights = np.zeros((4, len(model.estimators_)))
    weights[model.scored_rows_] = model.oob_weights_
    return [np.flatnonzero(column > 0) for column in weights.T]


def test_nan_predictions_name_the_row_of_x_and_equal_splitters_are_the_same_setting():
    """J+aB named the position among the scored rows, not the row of X, and its models
    "fold models"; an equal new KFold was refused as a changed setting while a change in
    place passed."""
    from uqconform.regression import JackknifeAfterBootstrapRegressor

    class NaNAtRow(Ridge):
        def predict(self, X):
            out = super().predict(X)
            return np.where(np.isclose(np.asarray(X)[:, 0], 5.0), np.nan, out)

    X = np.column_stack([np.arange(30.0), np.random.default_rng(0).normal(size=30)])
    y = X[:, 1]
    model = JackknifeAfterBootstrapRegressor(NaNAtRow(), n_bootstrap=3, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(
            ValueError, match=r"bootstrap models .* on 1 row of `X` \(first: row 5\)"
        ):
            model.fit(X, y)
    cross = CrossConformalRegressor(Ridge(), cv=KFold(5)).fit(X, y)
    cross.set_params(cv=KFold(5))  # an equal splitter: the same setting
    assert cross.predict_interval(X[:2]).shape == (2, 2)
    cross.cv.n_splits = 3  # changed in place: another setting
    with pytest.raises(NotFittedError, match="parameters changed since fit"):
        cross.predict_interval(X[:2])


@pytest.mark.parametrize("rounded", [False, True])
def test_cv_plus_ends_from_the_folds_sorted_scores_equal_the_full_selection(rounded, monkeypatch):
    """With few folds and many rows the ends are searched in each fold's sorted scores
    instead of selected among all n shifted scores per test row (7-9x faster from 20,000
    rows): the same floats, ties across folds and the extreme ranks included."""
    from uqconform.regression import cross as cross_module

    rng = np.random.default_rng(3)
    X = rng.normal(size=(301, 3))
    y = X.sum(axis=1) + rng.normal(size=301)
    y = np.round(y, 1) if rounded else y
    model = CrossConformalRegressor(Ridge(), cv=7).fit(X, y)
    predictions = model._fold_predictions(rng.normal(size=(150, 3)))
    predictions = np.round(predictions, 1) if rounded else predictions
    levels = np.array([1.5 / 302, 0.05, 0.1, 0.5, 0.99])  # lower rank 1, upper rank n
    ends = {}
    for factor in (0.0, np.inf):  # always search the folds, never
        monkeypatch.setattr(cross_module, "_FOLD_SEARCH_FACTOR", factor)
        assert model._searches_folds(7) == (factor == 0.0)
        ends[factor] = model._plus_ends(predictions, levels)
    np.testing.assert_array_equal(ends[0.0][0], ends[np.inf][0])
    np.testing.assert_array_equal(ends[0.0][1], ends[np.inf][1])
    assert np.isfinite(ends[0.0][0]).all() and np.isfinite(ends[0.0][1]).all()


@pytest.mark.parametrize(("n", "searches"), [(2_000, False), (20_000, True)])
def test_cv_plus_searches_the_folds_where_that_was_timed_faster(n, searches):
    """Ten folds: the fold search took 0.26 s against the full selection's 0.69 s for
    2,000 test rows at n = 20,000 (one quiet core), and 0.21 s against 0.10 s at n = 2,000;
    the switch must pick the faster path at both."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    model = CrossConformalRegressor(Ridge(), cv=10).fit(X, X[:, 0])
    assert model._searches_folds(10) == searches
    # ten levels at once: the selection's single pass wins (diff review 37: 6.5 s against
    # the search's 7.8 s at n = 20,000); four: the search (diff review 41: 1.0 s and 2.2 s)
    assert not model._searches_folds(10, n_levels=10)
    assert model._searches_folds(10, n_levels=4) == searches


def test_levels_above_one_half_never_give_lower_above_upper_and_stay_nested():
    """Above alpha = 0.5 the CV+ lower rank passes the upper one: with spread-out fold
    models 112 of 200 rows had lower > upper at alpha 0.9 (an empty CV+ set). It is now a
    zero-width interval inside the next wider level's."""
    from uqconform.regression import JackknifeAfterBootstrapRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = X[:, 0] + rng.normal(size=60)
    test = rng.normal(size=(200, 3))
    levels = [0.9, 0.1, 0.6, 0.8, 0.3]
    tree = DecisionTreeRegressor(random_state=0)
    for model in (
        CrossConformalRegressor(tree, cv=5, random_state=0),
        JackknifeAfterBootstrapRegressor(tree, n_bootstrap=20, random_state=0),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # levels above 0.5 look like coverage levels
            intervals = model.fit(X, y).predict_interval(test, alpha=levels)
        assert (intervals[:, 0] <= intervals[:, 1]).all()
        order = np.argsort(levels)  # widest first: each interval inside the previous one
        lows, highs = intervals[:, 0, order], intervals[:, 1, order]
        assert (np.diff(lows, axis=1) >= 0).all() and (np.diff(highs, axis=1) <= 0).all()


def test_a_group_splitter_without_groups_or_with_too_few_is_named():
    """scikit-learn's messages came out: "The 'groups' parameter should not be None" and
    "inconsistent numbers of samples: [40, 40, 30]", naming neither fit's argument."""
    rng = np.random.default_rng(0)
    X, y, groups = rng.normal(size=(40, 2)), rng.normal(size=40), rng.integers(0, 5, 40)
    model = CrossConformalRegressor(Ridge(), cv=GroupKFold(4))
    with pytest.raises(ValueError, match=r"splits by group: pass the group of every training"):
        model.fit(X, y)
    with pytest.raises(ValueError, match=r"`groups` has 30 entries but X has 40 rows"):
        model.fit(X, y, groups=groups[:30])
    assert np.isfinite(model.fit(X, y, groups=groups).predict_interval(X)).all()


def test_a_fold_without_test_rows_is_refused_naming_cv():
    """A splitter with an empty fold crashed the fold search (an IndexError) and the
    models' own fit on zero rows."""

    class WithAnEmptyFold:
        def get_n_splits(self, X=None, y=None, groups=None):
            return 3

        def split(self, X, y=None, groups=None):
            rows = np.arange(len(X))
            yield rows[: len(X) // 2], rows[len(X) // 2 :]
            yield rows[len(X) // 2 :], rows[: len(X) // 2]
            yield rows, rows[:0]

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 2)), rng.normal(size=60)
    with pytest.raises(ValueError, match=r"gives a fold without test rows"):
        CrossConformalRegressor(Ridge(), cv=WithAnEmptyFold()).fit(X, y)


class _DropsARow(Ridge):
    """A regressor whose predictions miss the last row (once ``short`` is set)."""

    def __init__(self, alpha=1.0, short=True):
        super().__init__(alpha=alpha)
        self.short = short

    def predict(self, X):
        predicted = super().predict(X)
        return predicted[:-1] if self.short else predicted


@pytest.mark.parametrize("method", ["cv+", "jackknife+ab"])
def test_a_model_giving_too_few_predictions_is_refused_by_name(method):
    from uqconform.regression import JackknifeAfterBootstrapRegressor

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(80, 2)), rng.normal(size=80)

    def wrapper(short):
        if method == "cv+":
            return CrossConformalRegressor(_DropsARow(short=short), cv=4, random_state=0)
        return JackknifeAfterBootstrapRegressor(
            _DropsARow(short=short), n_bootstrap=10, random_state=0
        )

    with pytest.raises(ValueError, match=r"`estimator` \(a fitted copy\) gave .* predictions"):
        wrapper(short=True).fit(X, y)
    model = wrapper(short=False).fit(X, y)
    for fitted in model.estimators_:
        fitted.short = True  # now short at prediction time too
    with pytest.raises(ValueError, match="gave 9 predictions for 10 rows of `X`"):
        model.predict_interval(X[:10])


def test_calibrate_is_not_a_step_and_says_what_to_do():
    from uqconform.classification import CrossConformalClassifier
    from uqconform.regression import JackknifeAfterBootstrapRegressor

    X, y = _linear(30, 0)
    wrappers = {
        CrossConformalRegressor: "SplitConformalRegressor",
        JackknifeAfterBootstrapRegressor: "SplitConformalRegressor",
        CrossConformalClassifier: "SplitConformalClassifier",
        CrossVennAbersCalibrator: "VennAbersCalibrator",
    }
    for wrapper, alternative in wrappers.items():
        model = wrapper()
        assert not hasattr(model, "calibrate")
        with pytest.raises(AttributeError, match=f"no `calibrate` step.*{alternative}"):
            model.calibrate(X, y)
    # J+aB's message describes bootstrap models, not folds
    with pytest.raises(AttributeError, match="bootstrap samples") as caught:
        JackknifeAfterBootstrapRegressor().calibrate(X, y)
    assert "fold" not in str(caught.value)
    # fit alone is the whole calibration: intervals follow without it
    assert CrossConformalRegressor().fit(X, y).predict_interval(X[:2]).shape == (2, 2)


def test_a_list_of_train_test_pairs_is_accepted_as_folds():
    """scikit-learn accepts an iterable of (train, test) pairs as `cv`; the cross wrappers
    refused it (va review). The pairs are checked as a partition like any splitter."""
    X, y = _linear(60, 0)
    splitter = KFold(3, shuffle=True, random_state=0)
    pairs = list(splitter.split(X))
    by_pairs = CrossConformalRegressor(cv=pairs).fit(X, y).predict_interval(X[:5])
    by_splitter = CrossConformalRegressor(cv=splitter).fit(X, y).predict_interval(X[:5])
    np.testing.assert_array_equal(by_pairs, by_splitter)
    labels = (y > np.median(y)).astype(int)
    venn = CrossVennAbersCalibrator(cv=pairs).fit(X, labels).predict_proba(X[:5])
    np.testing.assert_array_equal(
        venn, CrossVennAbersCalibrator(cv=splitter).fit(X, labels).predict_proba(X[:5])
    )
    with pytest.raises(ValueError, match=r"`cv` \(list\) must hold every row out exactly once"):
        CrossConformalRegressor(cv=pairs[:2]).fit(X, y)
    with pytest.raises(ValueError, match="already fixes the folds"):
        CrossConformalRegressor(cv=pairs).fit(X, y, groups=np.arange(60) % 3)
    # folds read as other rows, or used up, are named (diff review)
    masks = [(np.isin(np.arange(60), tr), np.isin(np.arange(60), te)) for tr, te in pairs]
    with pytest.raises(ValueError, match=r"fold 0 holds bool entries: .*np.flatnonzero"):
        CrossConformalRegressor(cv=masks).fit(X, y)
    with pytest.raises(ValueError, match=r"fold 0 holds float64 entries"):
        CrossConformalRegressor(cv=[(tr + 0.4, te) for tr, te in pairs]).fit(X, y)
    with pytest.raises(ValueError, match=r"fold \d has a row index outside 0\.\.59"):
        CrossConformalRegressor(cv=[(tr + 2, te) for tr, te in pairs]).fit(X, y)
    with pytest.raises(ValueError, match=r"iterator of splits.*list\(cv\)"):
        CrossConformalRegressor(cv=splitter.split(X)).fit(X, y)
    # (review s64) the normalized score's out-of-fold residuals, the predictive system's
    # and the multi-output shapes': a second fit found the iterator used up (numpy's
    # "need at least one array to concatenate")
    from uqconform.multioutput import EllipsoidalConformalRegressor
    from uqconform.regression import ConformalPredictiveSystem, SplitConformalRegressor

    for make in (
        lambda cv: SplitConformalRegressor(conformity_score="normalized", cv=cv),
        lambda cv: ConformalPredictiveSystem(normalized=True, cv=cv),
    ):
        with pytest.raises(ValueError, match=r"iterator of splits.*list\(cv\)"):
            make(splitter.split(X)).fit(X, y)
        make(list(splitter.split(X))).fit(X, y).fit(X, y)  # a list: any number of fits
    shapes = EllipsoidalConformalRegressor(covariance="local", cv=splitter.split(X))
    with pytest.raises(ValueError, match=r"iterator of splits.*list\(cv\)"):
        shapes.fit(X, np.c_[y, -y])


def test_folds_that_train_on_a_row_twice_and_skip_another_are_refused():
    """Regression review (stop 62): a fold training on row 2 twice and never on row 3
    (outside its test rows) kept the sizes and passed the partition check, so its model
    trained on another sample than the complement CV+ rests on; a test part holding a row
    twice and leaving another out passed too."""
    X, y = _linear(10, 0)
    skip = [
        (np.array([2, 2, 4, 5, 6, 7, 8, 9]), np.array([0, 1])),  # row 3 in neither part
        (np.array([0, 1, 5, 6, 7, 8, 9]), np.array([2, 3, 4])),
        (np.array([0, 1, 2, 3, 4]), np.array([5, 6, 7, 8, 9])),
    ]
    twice = [
        (np.array([3, 4, 5, 6, 7, 8, 9]), np.array([0, 0, 1])),  # row 2 in neither part
        (np.array([0, 1]), np.array([2, 3, 4, 5, 6, 7, 8, 9])),
    ]

    class Listed:  # the same folds from a splitter object
        def __init__(self, folds):
            self.folds = folds

        def get_n_splits(self, *args, **kwargs):
            return len(self.folds)

        def split(self, X, y=None, groups=None):
            yield from self.folds

    from uqconform.classification import CrossConformalClassifier

    labels = (y > np.median(y)).astype(int)
    for folds in (skip, twice):
        for cv in (folds, Listed(folds)):
            with pytest.raises(ValueError, match=r"trains a fold on rows other than all those"):
                CrossConformalRegressor(cv=cv).fit(X, y)
            with pytest.raises(ValueError, match=r"trains a fold on rows other than all those"):
                CrossConformalClassifier(cv=cv).fit(X, labels)


def test_per_row_fit_parameters_in_another_row_order_are_refused_by_name():
    """Review finding (s57 user): a pandas ``sample_weight`` indexed by X's labels in
    another order was paired by position (the fold models learnt another problem's
    coefficients) while ``y`` in that order is refused; a routed name too, and the
    Series in X's order still fits as the numpy weights do."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from uqconform.classification import CrossConformalClassifier
    from uqconform.regression import JackknifeAfterBootstrapRegressor

    X_values, y = _linear(60, 0, d=2)
    X = pd.DataFrame(X_values, columns=["a", "b"], index=np.arange(100, 160))
    weights = pd.Series(np.random.default_rng(1).uniform(0.5, 2.0, 60), index=X.index)
    shuffled = weights.sample(frac=1, random_state=0)
    kept = shuffled.copy()
    labels = (y > np.median(y)).astype(int)
    cases = [
        (CrossConformalRegressor(Ridge(), random_state=0), y, "sample_weight"),
        (
            JackknifeAfterBootstrapRegressor(Ridge(), n_bootstrap=10, random_state=0),
            y,
            "sample_weight",
        ),
        (CrossConformalClassifier(random_state=0), labels, "sample_weight"),
        (
            CrossConformalRegressor(make_pipeline(StandardScaler(), Ridge()), random_state=0),
            y,
            "ridge__sample_weight",
        ),
    ]
    for model, target, name in cases:
        with pytest.raises(
            ValueError,
            match=rf"`{name}` is indexed by the row labels of `X` "
            r"in another order.*\.reindex\(X\.index\)",
        ):
            model.fit(X, target, **{name: shuffled})
        pd.testing.assert_series_equal(shuffled, kept)  # the input is left as it was
    by_label = CrossConformalRegressor(Ridge(), random_state=0).fit(X, y, sample_weight=weights)
    by_position = CrossConformalRegressor(Ridge(), random_state=0).fit(
        X_values, y, sample_weight=weights.to_numpy()
    )
    for fitted, manual in zip(by_label.estimators_, by_position.estimators_, strict=True):
        np.testing.assert_allclose(fitted.coef_, manual.coef_)


def test_an_unseeded_shuffling_splitter_is_seeded_by_the_wrappers_seed():
    # determinism review (stop 58): random_state=0 with cv=KFold(5, shuffle=True) gave other
    # intervals at every run; the user's splitter is left as it was
    rng = np.random.default_rng(4)
    X = rng.normal(size=(120, 3))
    y = X @ [1.0, -1.0, 0.5] + rng.normal(size=120)
    splitter = KFold(5, shuffle=True)
    runs = [
        CrossConformalRegressor(Ridge(), cv=splitter, random_state=0).fit(X[:100], y[:100])
        for _ in range(2)
    ]
    np.testing.assert_array_equal(
        runs[0].predict_interval(X[100:]), runs[1].predict_interval(X[100:])
    )
    assert splitter.random_state is None  # a seeded copy was used
    normalized = [
        SplitConformalRegressor(
            Ridge(), conformity_score="normalized", cv=KFold(3, shuffle=True), random_state=0
        )
        .fit(X[:60], y[:60])
        .calibrate(X[60:100], y[60:100])
        .predict_interval(X[100:])
        for _ in range(2)
    ]
    np.testing.assert_array_equal(normalized[0], normalized[1])


def test_a_splitter_that_cannot_be_copied_is_used_as_given():
    # diffrev25: seeding a copy of an unseeded shuffling splitter crashed fits that ran
    # before when the splitter cannot be deep-copied (it holds a lock)
    import threading

    from sklearn.model_selection import KFold

    class LockedKFold(KFold):
        def __init__(self, n_splits=5, *, shuffle=False, random_state=None):
            super().__init__(n_splits, shuffle=shuffle, random_state=random_state)
            self.lock = threading.Lock()

    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 2))
    y = X[:, 0] + rng.normal(size=60)
    splitter = LockedKFold(3, shuffle=True)
    model = CrossConformalRegressor(Ridge(), cv=splitter, random_state=0).fit(X[:50], y[:50])
    assert model.predict_interval(X[50:]).shape == (10, 2)
