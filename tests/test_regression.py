"""SplitConformalRegressor: absolute, normalized and user scores."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import regression_data, strongly_heteroscedastic, thirds
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.exceptions import NotFittedError
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.linear_model import BayesianRidge, LinearRegression, LogisticRegression, Ridge
from sklearn.model_selection import KFold, ShuffleSplit, TimeSeriesSplit, cross_val_predict
from sklearn.neighbors import KNeighborsRegressor

from uqconform import SplitConformalRegressor
from uqconform.evaluation import coverage_bounds, mean_width
from uqconform.quantiles import conformal_quantile, minimum_scores
from uqconform.scores import AbsoluteScore, CQRScore, RegressionScore


def _split(n=600, seed=0):
    return thirds(*regression_data(n, seed=seed))


def test_absolute_interval_is_prediction_plus_minus_residual_order_statistic():
    (Xf, yf), (Xc, yc), (Xt, _) = _split()
    cp = SplitConformalRegressor(LinearRegression(), alpha=[0.1, 0.25]).fit(Xf, yf)
    cp.calibrate(Xc, yc)
    residuals = np.sort(np.abs(yc - cp.predict(Xc)))
    n = len(yc)
    out = cp.predict_interval(Xt)
    assert out.shape == (len(Xt), 2, 2)
    for j, alpha in enumerate((0.1, 0.25)):
        q = residuals[int(np.ceil((n + 1) * (1 - alpha))) - 1]
        np.testing.assert_allclose(out[:, 0, j], cp.predict(Xt) - q)
        np.testing.assert_allclose(out[:, 1, j], cp.predict(Xt) + q)
    np.testing.assert_array_equal(cp.predict_set(Xt), out)
    # the same intervals from the user's own fitted LinearRegression
    model = LinearRegression().fit(Xf, yf)
    np.testing.assert_allclose(model.predict(Xt), cp.predict(Xt))


def test_calibration_points_are_covered_at_least_at_the_rank():
    (Xf, yf), (Xc, yc), _ = _split()
    cp = SplitConformalRegressor(Ridge(), alpha=0.2).fit(Xf, yf).calibrate(Xc, yc)
    out = cp.predict_interval(Xc)
    covered = ((out[:, 0] <= yc) & (yc <= out[:, 1])).sum()
    assert covered >= np.ceil((len(yc) + 1) * 0.8)


def test_normalized_difficulty_is_fitted_out_of_fold():
    # 1-nearest neighbour interpolates: in-sample residuals are all zero, so a difficulty
    # model trained on them would predict zero everywhere.
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=1)
    cp = SplitConformalRegressor(
        KNeighborsRegressor(n_neighbors=1), conformity_score="normalized", random_state=0
    ).fit(Xf, yf)
    assert np.all(np.abs(yf - cp.estimator_.predict(Xf)) == 0)
    spread = cp.difficulty_estimator_.predict(Xt)
    assert np.median(spread) > 0.1
    # it is exactly a clone of the estimator trained on |y - out-of-fold prediction|
    oof = cross_val_predict(
        KNeighborsRegressor(n_neighbors=1), Xf, yf, cv=KFold(5, shuffle=True, random_state=0)
    )
    reference = KNeighborsRegressor(n_neighbors=1).fit(Xf, np.abs(yf - oof))
    np.testing.assert_array_equal(spread, reference.predict(Xt))
    # widths are proportional to the difficulty
    cp.calibrate(Xc, yc)
    out = cp.predict_interval(Xt)
    width = out[:, 1] - out[:, 0]
    sigma = np.maximum(spread, cp.difficulty_floor_)
    np.testing.assert_allclose(width / sigma, (width / sigma)[0])


def test_normalized_with_a_separate_unfitted_difficulty_model_uses_its_prediction():
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=2)
    cp = SplitConformalRegressor(
        Ridge(),
        conformity_score="normalized",
        difficulty_estimator=BayesianRidge(),
        cv=3,
        random_state=0,
    )
    cp.fit(Xf, yf).calibrate(Xc, yc)
    assert cp.difficulty_estimator is not cp.difficulty_estimator_
    # BayesianRidge also has a predictive std; trained on residuals, its mean is the spread
    sigma = np.maximum(cp.difficulty_estimator_.predict(Xt), cp.difficulty_floor_)
    width = np.diff(cp.predict_interval(Xt), axis=1)[:, 0]
    np.testing.assert_allclose(width / sigma, (width / sigma)[0])


def test_folds_that_are_not_a_partition_name_cv():
    (Xf, yf), _, _ = _split(seed=2)
    for cv in (TimeSeriesSplit(3), ShuffleSplit(3, random_state=0)):
        cp = SplitConformalRegressor(Ridge(), conformity_score="normalized", cv=cv)
        with pytest.raises(ValueError, match=rf"`cv` \({type(cv).__name__}\) must hold every"):
            cp.fit(Xf, yf)  # was cross_val_predict's "only works for partitions"


def test_normalized_cv_none_floats_and_group_splitters_are_refused():
    """cv=None ran scikit-learn's unshuffled 5 folds (not cv=5's shuffled ones), cv=2.0
    raised an error naming cross_val_predict, and a group splitter failed on the groups
    fit cannot take."""
    from sklearn.model_selection import GroupKFold

    (Xf, yf), _, _ = _split(seed=2)
    for cv, match in (
        (None, r"`cv` \(the folds"),
        (2.0, r"`cv` \(the folds"),
        (GroupKFold(3), r"`cv` \(GroupKFold\) splits by group"),
    ):
        cp = SplitConformalRegressor(Ridge(), conformity_score="normalized", cv=cv)
        with pytest.raises(ValueError, match=match):
            cp.fit(Xf, yf)


def test_normalized_with_prefit_gaussian_process_uses_its_std():
    X, y = regression_data(300, d=2, seed=3)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    gp = GaussianProcessRegressor(RBF() + WhiteKernel(), random_state=0).fit(Xf, yf)
    cp = SplitConformalRegressor(gp, conformity_score="normalized", difficulty_estimator=gp)
    cp.calibrate(Xc, yc)  # no fit: both models are prefit
    assert cp.estimator_ is gp and cp.difficulty_estimator_ is gp
    mean_c, std_c = gp.predict(Xc, return_std=True)
    q = conformal_quantile(np.abs(yc - mean_c) / std_c, 0.1)[0]
    mean_t, std_t = gp.predict(Xt, return_std=True)
    out = cp.predict_interval(Xt)
    np.testing.assert_allclose(out[:, 0], mean_t - q * std_t, rtol=1e-10)
    np.testing.assert_allclose(out[:, 1], mean_t + q * std_t, rtol=1e-10)


def test_any_object_with_predict_std_is_a_difficulty():
    class ConstantStd:
        def predict_std(self, X):
            return np.full(len(X), 2.0)

    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=4)
    normalized = SplitConformalRegressor(
        Ridge(), conformity_score="normalized", difficulty_estimator=ConstantStd()
    ).fit(Xf, yf)
    absolute = SplitConformalRegressor(Ridge()).fit(Xf, yf)
    np.testing.assert_allclose(
        normalized.calibrate(Xc, yc).predict_interval(Xt),
        absolute.calibrate(Xc, yc).predict_interval(Xt),
    )


def test_normalized_without_a_difficulty_model_says_what_to_do():
    (Xf, yf), (Xc, yc), _ = _split()
    cp = SplitConformalRegressor(Ridge().fit(Xf, yf), conformity_score="normalized")
    with pytest.raises(NotFittedError, match="difficulty"):
        cp.calibrate(Xc, yc)


def test_spreads_lifted_to_the_floor_are_reported_at_calibration():
    """A linear difficulty model extrapolates below zero where the noise is small: those
    rows' spreads are lifted to a tiny floor (intervals of almost no width there, and a
    threshold that widens every other interval). Calibration says how many; a k-NN
    difficulty model, an average of absolute residuals, stays positive and is quiet."""
    from sklearn.neighbors import KNeighborsRegressor

    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(3000, 2))
    y = X.sum(axis=1) + (2 * np.maximum(X[:, 0], 0) + 0.05) * rng.standard_normal(3000)
    linear = SplitConformalRegressor(Ridge(), conformity_score="normalized", random_state=0)
    linear.fit(X[:1000], y[:1000])
    lifted = np.count_nonzero(
        linear.difficulty_estimator_.predict(X[1000:2000]) <= linear.difficulty_floor_
    )
    assert lifted > 100
    with pytest.warns(UserWarning, match=rf"spreads <= \S+ on {lifted} of 1000 calibration"):
        linear.calibrate(X[1000:2000], y[1000:2000])
    knn = SplitConformalRegressor(
        Ridge(),
        conformity_score="normalized",
        difficulty_estimator=KNeighborsRegressor(50),
        random_state=0,
    ).fit(X[:1000], y[:1000])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        knn.calibrate(X[1000:2000], y[1000:2000])
    ratio = mean_width(knn.predict_interval(X[2000:])) / mean_width(
        linear.predict_interval(X[2000:])
    )
    assert ratio < 0.5  # what the warning is about: the lifted rows widen every interval
    # spreads of exactly zero where the data are noiseless are right: no warning (a review
    # found the first version of the warning firing here, advising the model in use)
    from sklearn.tree import DecisionTreeRegressor

    steps = np.floor(4 * X[:, 0]) + (X[:, 0] > 0.5) * rng.standard_normal(3000)
    noiseless = SplitConformalRegressor(
        DecisionTreeRegressor(max_depth=4, random_state=0),
        conformity_score="normalized",
        difficulty_estimator=KNeighborsRegressor(50),
        random_state=0,
    ).fit(X[:1000], steps[:1000])
    assert np.mean(noiseless._raw_spread(X[1000:2000]) == 0) > 0.2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        noiseless.calibrate(X[1000:2000], steps[1000:2000])


def pooled_width_and_coverage(make_model, repeats=8, n=900):
    """Mean width and pooled coverage at alpha = 0.1 over ``repeats`` fresh data sets, each
    split into fit / calibration / test thirds (independent repeats: the pooled law holds)."""
    widths, hits = [], []
    for seed in range(repeats):
        (Xf, yf), (Xc, yc), (Xt, yt) = thirds(*strongly_heteroscedastic(n, [7, seed]))
        model = make_model(seed).fit(Xf, yf).calibrate(Xc, yc)
        assert model.n_calibration_ == n // 3
        out = model.predict_interval(Xt, alpha=0.1)
        widths.append(np.mean(out[:, 1] - out[:, 0]))
        hits.append(np.mean((out[:, 0] <= yt) & (yt <= out[:, 1])))
    low, high = coverage_bounds(n // 3, 0.1, n - 2 * (n // 3), confidence=0.999, n_repeats=repeats)
    assert low <= np.mean(hits) <= high, f"coverage {np.mean(hits):.4f} not in [{low}, {high}]"
    return float(np.mean(widths))


def test_normalized_is_narrower_than_absolute_on_heteroscedastic_data():
    """The normalized score's claim: when the noise scale varies with x, intervals scaled by
    a learned difficulty are narrower on average than constant-width ones at the same level.
    Both are checked against the pooled split-CP law first, so the widths are compared at
    valid coverage. A constant difficulty gives exactly the absolute intervals (see
    ``test_any_object_with_predict_std_is_a_difficulty``), so the strict inequality fails
    if the difficulty is lost."""
    absolute = pooled_width_and_coverage(lambda seed: SplitConformalRegressor(Ridge()))
    normalized = pooled_width_and_coverage(
        lambda seed: SplitConformalRegressor(
            Ridge(),
            conformity_score="normalized",
            difficulty_estimator=HistGradientBoostingRegressor(max_iter=30, max_depth=2),
            random_state=seed,
        )
    )
    assert normalized < absolute, f"normalized {normalized:.3f} vs absolute {absolute:.3f}"


class LogAbsolute(RegressionScore):
    """Multiplicative intervals for a positive target."""

    def score(self, y, y_pred, difficulty=None):
        return np.abs(np.log(y) - np.log(y_pred))

    def inverse(self, y_pred, threshold, difficulty=None):
        q = threshold[:, 0]
        return np.stack([y_pred * np.exp(-q), y_pred * np.exp(q)], axis=1)


class SignedSides(RegressionScore):
    """Asymmetric: one column per side, each calibrated at alpha / 2."""

    n_components = 2

    def score(self, y, y_pred, difficulty=None):
        return np.stack([y_pred - y, y - y_pred], axis=1)

    def inverse(self, y_pred, threshold, difficulty=None):
        return np.stack([y_pred - threshold[:, 0], y_pred + threshold[:, 1]], axis=1)


def test_user_score_objects():
    X, y = regression_data(600, seed=5)
    y = np.exp(y / 4)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    cp = SplitConformalRegressor(Ridge(), conformity_score=LogAbsolute()).fit(Xf, yf)
    cp.calibrate(Xc, yc)
    pred = cp.predict(Xt)
    q = conformal_quantile(np.abs(np.log(yc) - np.log(cp.predict(Xc))), 0.1)[0]
    np.testing.assert_allclose(cp.predict_interval(Xt), np.c_[pred * np.exp(-q), pred * np.exp(q)])

    sides = SplitConformalRegressor(Ridge(), conformity_score=SignedSides()).fit(Xf, yf)
    sides.calibrate(Xc, yc)
    residual = yc - sides.predict(Xc)
    low = conformal_quantile(-residual, 0.05)[0]
    high = conformal_quantile(residual, 0.05)[0]
    out = sides.predict_interval(Xt)
    np.testing.assert_allclose(out[:, 0], sides.predict(Xt) - low)
    np.testing.assert_allclose(out[:, 1], sides.predict(Xt) + high)


class TransposedInverse(AbsoluteScore):
    """A user mistake: the inverse returns (2, n) instead of (n, 2)."""

    def inverse(self, y_pred, threshold, difficulty=None):
        return super().inverse(y_pred, threshold, difficulty).T


def test_user_score_with_a_wrong_inverse_shape_is_named():
    X, y = regression_data(300, seed=5)
    cp = SplitConformalRegressor(Ridge(), conformity_score=TransposedInverse()).fit(X, y)
    cp.calibrate(X, y)
    expected = r"TransposedInverse\(\)\.inverse must return .*\(300, 2\)"
    with pytest.raises(ValueError, match=expected):
        cp.predict_interval(X)
    with pytest.raises(ValueError, match=r"TransposedInverse"):
        cp.predict_interval(X, alpha=[0.1, 0.2])


class ShortScore(AbsoluteScore):
    """A user mistake: scores of the first five rows only."""

    def score(self, y, y_pred, difficulty=None):
        return super().score(y, y_pred, difficulty)[:5]


class TwoColumnScore(AbsoluteScore):
    """A user mistake: two columns from a score that declares one."""

    def score(self, y, y_pred, difficulty=None):
        return np.stack([y - y_pred, y_pred - y], axis=1)


class NaNScore(AbsoluteScore):
    def score(self, y, y_pred, difficulty=None):
        values = super().score(y, y_pred, difficulty)
        values[7] = np.nan
        return values


class SwappedEnds(AbsoluteScore):
    """A user mistake: [upper, lower]."""

    def inverse(self, y_pred, threshold, difficulty=None):
        return super().inverse(y_pred, threshold, difficulty)[:, ::-1]


@pytest.mark.parametrize(
    "score, expected",
    [
        (ShortScore(), r"ShortScore\(\)\.score must return .*\(300,\), got \(5,\)"),
        (TwoColumnScore(), r"TwoColumnScore\(\)\.score must return .*got \(300, 2\)"),
        (NaNScore(), r"NaNScore\(\)\.score returned NaN for 1 row\(s\) \(first: row 7\)"),
    ],
    ids=["rows", "columns", "nan"],
)
def test_user_score_values_are_checked_at_calibration(score, expected):
    X, y = regression_data(600, seed=5)
    cp = SplitConformalRegressor(Ridge(), conformity_score=score).fit(X[300:], y[300:])
    with pytest.raises(ValueError, match=expected):
        cp.calibrate(X[:300], y[:300])


class FirstRows(AbsoluteScore):
    """A user mistake that shows only on more than 250 rows."""

    def score(self, y, y_pred, difficulty=None):
        return super().score(y, y_pred, difficulty)[:250]


def test_user_score_values_are_checked_for_pvalues():
    X, y = regression_data(1000, seed=5)
    cp = SplitConformalRegressor(Ridge(), conformity_score=FirstRows()).fit(X[300:], y[300:])
    cp.calibrate(X[:250], y[:250])
    assert cp.predict_pvalue(X[:250], y[:250]).shape == (250,)
    with pytest.raises(ValueError, match=r"FirstRows\(\)\.score must return .*\(300,\)"):
        cp.predict_pvalue(X[:300], y[:300])


def test_user_score_with_swapped_ends_is_refused():
    X, y = regression_data(600, seed=5)
    cp = SplitConformalRegressor(Ridge(), conformity_score=SwappedEnds()).fit(X[300:], y[300:])
    cp.calibrate(X[:300], y[:300])
    with pytest.raises(ValueError, match=r"SwappedEnds\(\)\.inverse returned .*lower > upper"):
        cp.predict_interval(X[:300], alpha=[0.1, 0.2])


def test_quantile_band_score_on_a_point_model_points_to_cqr():
    X, y = regression_data(600, seed=5)
    cp = SplitConformalRegressor(Ridge(), conformity_score=CQRScore()).fit(X[300:], y[300:])
    with pytest.raises(ValueError, match="ConformalizedQuantileRegressor"):
        cp.calibrate(X[:300], y[:300])


def test_mondrian_regression_covers_each_group_of_calibration_rows():
    X, y = regression_data(900, seed=6)
    groups = (X[:, 0] > 0.5).astype(int)
    (Xf, yf, _), (Xc, yc, gc), (Xt, _, gt) = thirds(X, y, groups)
    cp = SplitConformalRegressor(alpha=0.2).fit(Xf, yf).calibrate(Xc, yc, groups=gc)
    pooled = SplitConformalRegressor(alpha=0.2).fit(Xf, yf).calibrate(Xc, yc)
    width = np.diff(cp.predict_interval(Xt, groups=gt), axis=1)[:, 0]
    pooled_width = np.diff(pooled.predict_interval(Xt), axis=1)[:, 0]
    # the noisy group (large |x0|) gets a wider interval than the pooled one
    assert width[gt == 1].mean() > pooled_width[0]
    assert width[gt == 0].mean() < pooled_width[0]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_y_is_rejected(bad):
    (Xf, yf), (Xc, yc), _ = _split()
    yb = yf.copy()
    yb[3] = bad
    with pytest.raises(ValueError, match="`y` contains 1 NaN or infinite"):
        SplitConformalRegressor().fit(Xf, yb)
    cp = SplitConformalRegressor().fit(Xf, yf)
    yb = yc.copy()
    yb[5] = bad
    with pytest.raises(ValueError, match="`y` contains 1 NaN or infinite"):
        cp.calibrate(Xc, yb)


def test_y_shape_and_type_errors():
    X, y = regression_data(90)
    with pytest.raises(ValueError, match="`y` must be 1-D"):
        SplitConformalRegressor().fit(X, np.c_[y, y, y])
    cp = SplitConformalRegressor().fit(X, y)
    with pytest.raises(ValueError, match="`y` must be 1-D"):
        cp.calibrate(X, np.c_[y, y, y])
    with pytest.raises(ValueError, match="`y` must be numeric"):
        cp.calibrate(X, np.array(["a"] * 90))
    # the message names the first entry that is not a number (it named none)
    labelled = y.astype(object)
    labelled[[40, 70]] = "n/a"
    with pytest.raises(ValueError, match=r"entry 40 is 'n/a' \(2 of 90 are not numbers"):
        cp.calibrate(X, labelled)
    missing = y.astype(object)
    missing[5] = pd.NA
    with pytest.raises(ValueError, match=r"entry 5 is <NA> \(1 of 90 are missing"):
        cp.calibrate(X, missing)
    with pytest.raises(ValueError, match="Complex"):
        cp.calibrate(X, y + 1j)


@pytest.mark.parametrize("name", ["abs", "lac", "Absolute", None])
def test_unknown_score_name_is_rejected_at_fit_and_calibrate(name):
    X, y = regression_data(90)
    with pytest.raises(ValueError, match="conformity_score"):
        SplitConformalRegressor(conformity_score=name).fit(X, y)
    with pytest.raises(ValueError, match="conformity_score"):
        SplitConformalRegressor(Ridge().fit(X, y), conformity_score=name).calibrate(X, y)


def test_pandas_target_and_frame_with_any_index():
    X, y = regression_data(300)
    frame = pd.DataFrame(X, columns=list("abcd"), index=np.arange(300)[::-1] * 3)
    target = pd.Series(y, index=frame.index)
    cp = SplitConformalRegressor(batch_size=32).fit(frame, target)
    cp.calibrate(frame, target)
    reference = SplitConformalRegressor().fit(X, y).calibrate(X, y)
    np.testing.assert_allclose(
        cp.predict_interval(frame), reference.predict_interval(X), rtol=1e-12, atol=1e-12
    )


def test_fit_params_are_passed_to_the_estimator():
    class Recorder(RegressorMixin, BaseEstimator):
        def fit(self, X, y, sample_weight=None):
            self.weight_ = sample_weight
            self.mean_ = float(np.mean(y))
            return self

        def predict(self, X):
            return np.full(len(X), self.mean_)

    X, y = regression_data(60)
    w = np.arange(60.0)
    cp = SplitConformalRegressor(Recorder()).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(cp.estimator_.weight_, w)


class _ColumnPredictions(LinearRegression):
    """A regressor that predicts shape (n, 1), as Keras-style models do."""

    def predict(self, X):
        return super().predict(X)[:, None]


@pytest.mark.parametrize("score", ["absolute", "normalized"])
def test_column_predictions_are_flattened_not_broadcast(score):
    """Regression test (normalized): the out-of-fold residuals y - (n, 1) became (n, n)."""
    X, y = regression_data(300)
    model = SplitConformalRegressor(_ColumnPredictions(), conformity_score=score, random_state=0)
    model.fit(X[:100], y[:100]).calibrate(X[100:200], y[100:200])
    assert model.conformity_scores_.shape == (100,)
    reference = SplitConformalRegressor(LinearRegression(), conformity_score=score, random_state=0)
    reference.fit(X[:100], y[:100])
    reference.calibrate(X[100:200], y[100:200])
    np.testing.assert_allclose(
        model.predict_interval(X[200:]), reference.predict_interval(X[200:])
    )


def test_frozen_estimator_gets_an_out_of_fold_difficulty_model():
    from sklearn.frozen import FrozenEstimator

    X, y = regression_data(400)
    fitted = LinearRegression().fit(X[:200], y[:200])
    model = SplitConformalRegressor(
        FrozenEstimator(fitted), conformity_score="normalized", random_state=0
    )
    model.fit(X[:200], y[:200])
    # The difficulty model predicts absolute residuals, not the target.
    assert not np.allclose(model.difficulty_estimator_.predict(X[200:]), fitted.predict(X[200:]))


def test_generator_seed_gives_reproducible_normalized_intervals():
    X, y = regression_data(400)

    def run():
        model = SplitConformalRegressor(
            LinearRegression(),
            conformity_score="normalized",
            random_state=np.random.default_rng(42),
        )
        return (
            model.fit(X[:200], y[:200]).calibrate(X[200:300], y[200:300]).predict_interval(X[300:])
        )

    np.testing.assert_array_equal(run(), run())


def test_prefit_difficulty_model_is_read_again_at_each_calibrate():
    X, y = regression_data(400)
    first = BayesianRidge().fit(X[:200], y[:200])
    second = BayesianRidge(alpha_init=10.0, lambda_init=10.0).fit(X[:100], y[:100])
    point = LinearRegression().fit(X[:200], y[:200])
    model = SplitConformalRegressor(
        point, conformity_score="normalized", difficulty_estimator=first
    ).calibrate(X[200:300], y[200:300])
    model.set_params(difficulty_estimator=second).calibrate(X[200:300], y[200:300])
    fresh = SplitConformalRegressor(
        point, conformity_score="normalized", difficulty_estimator=second
    ).calibrate(X[200:300], y[200:300])
    np.testing.assert_array_equal(model.predict_interval(X[300:]), fresh.predict_interval(X[300:]))


def test_group_sorting_is_stored_at_calibrate_and_dropped_by_a_plain_recalibration():
    """The per-group order of the calibration rows is computed once (it was re-sorted at
    every prediction); a model without it (pickled by an older version) predicts the same."""
    X, y = regression_data(900)
    groups = np.arange(600) % 3
    model = SplitConformalRegressor(LinearRegression()).fit(X[:300], y[:300])
    model.calibrate(X[300:900][:600], y[300:900][:600], groups=groups)
    assert "_strata_sorting" in model.__dict__
    test_groups = np.arange(100) % 3
    stored = model.predict_interval(X[:100], groups=test_groups)
    del model.__dict__["_strata_sorting"]
    np.testing.assert_array_equal(model.predict_interval(X[:100], groups=test_groups), stored)
    model.calibrate(X[300:900], y[300:900])
    assert "_strata_sorting" not in model.__dict__


def test_threshold_table_is_reused_only_for_the_same_calibration_and_levels(monkeypatch):
    """Thresholds are kept for the next call at the same levels; a new calibration or new
    levels recompute them, and the too-few warning repeats at every call."""
    quantile_calls = []
    compute = SplitConformalRegressor._compute_threshold_table

    def counted(self, alphas):
        quantile_calls.append(1)
        return compute(self, alphas)

    monkeypatch.setattr(SplitConformalRegressor, "_compute_threshold_table", counted)
    X, y = regression_data(900)
    groups = np.arange(400) % 4
    model = SplitConformalRegressor(LinearRegression()).fit(X[:300], y[:300])
    model.calibrate(X[300:700], y[300:700], groups=groups)
    first = model.predict_interval(X[:50], groups=np.arange(50) % 4)
    assert len(quantile_calls) == 1  # at calibrate, for the default level
    np.testing.assert_array_equal(model.predict_interval(X[:50], groups=np.arange(50) % 4), first)
    assert len(quantile_calls) == 1  # the same levels: the kept table
    wider = model.predict_interval(X[:50], alpha=0.05, groups=np.arange(50) % 4)
    assert (wider[:, 1] - wider[:, 0] > first[:, 1] - first[:, 0]).all()
    assert len(quantile_calls) == 2  # a new level: computed anew
    # recalibrated on other rows: equal to a fresh model, not to the kept table
    model.calibrate(X[500:900], y[500:900], groups=groups)
    fresh = SplitConformalRegressor(LinearRegression()).fit(X[:300], y[:300])
    fresh.calibrate(X[500:900], y[500:900], groups=groups)
    np.testing.assert_array_equal(
        model.predict_interval(X[:50], groups=np.arange(50) % 4),
        fresh.predict_interval(X[:50], groups=np.arange(50) % 4),
    )
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(
        restored.predict_interval(X[:50], groups=np.arange(50) % 4),
        fresh.predict_interval(X[:50], groups=np.arange(50) % 4),
    )
    # 100 points per group cannot give alpha = 0.005: a warning at each call, not the first
    for _ in range(2):
        with pytest.warns(UserWarning, match="Too few calibration points"):
            model.predict_interval(X[:5], alpha=0.005, groups=np.arange(5) % 4)


def test_a_score_object_is_named_as_given_in_the_difficulty_messages():
    """Review s64: SignedResidualScore(normalized=True) was told that
    "conformity_score='normalized' needs a difficulty estimate", a setting never passed."""
    from uqconform.scores import SignedResidualScore

    X, y = regression_data(300)
    fitted = LinearRegression().fit(X[:100], y[:100])
    signed = SplitConformalRegressor(fitted, conformity_score=SignedResidualScore(normalized=True))
    with pytest.raises(
        NotFittedError, match=r"^conformity_score=SignedResidualScore\(normalized=True\) needs"
    ):
        signed.calibrate(X[100:200], y[100:200])
    plain = SplitConformalRegressor(
        LinearRegression(),
        conformity_score=SignedResidualScore(normalized=False),
        difficulty_estimator=Ridge(),
    )
    with pytest.warns(
        UserWarning, match=r"\(conformity_score=SignedResidualScore\(normalized=True"
    ):
        plain.fit(X[:100], y[:100])


def test_a_difficulty_estimator_the_score_does_not_use_is_reported():
    X, y = regression_data(200)
    model = SplitConformalRegressor(LinearRegression(), difficulty_estimator=BayesianRidge())
    prefit = SplitConformalRegressor(
        LinearRegression().fit(X[:100], y[:100]), difficulty_estimator=BayesianRidge()
    )
    for run in (
        lambda: model.fit(X[:100], y[:100]).calibrate(X[100:], y[100:]),
        lambda: prefit.calibrate(X[100:], y[100:]),
    ):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run()
        # once per workflow (not at fit and again at calibrate), at the caller's line
        assert [str(item.message)[:44] for item in caught] == [
            "`difficulty_estimator` is ignored: conformit"
        ]
        assert caught[0].filename == __file__
    normalized = SplitConformalRegressor(
        LinearRegression(), conformity_score="normalized", difficulty_estimator=BayesianRidge()
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        normalized.fit(X[:100], y[:100])


def test_a_target_whose_score_equals_the_threshold_is_inside():
    """Integer targets tie at the threshold: around a prediction of -0.4, the threshold 1.4
    gives the end -0.4 + 1.4, which rounds to 0.9999999999999999 and would leave out every
    y = 1 (coverage 0.78 at nominal 0.9 in a review's Monte Carlo). Ends are rounded out."""
    from sklearn.dummy import DummyRegressor

    from uqconform import ConformalizedQuantileRegressor

    X = np.zeros((40, 1))
    y = np.r_[np.zeros(20), np.ones(20)]  # scores 0.4 and 1.4 around -0.4
    model = DummyRegressor(strategy="constant", constant=-0.4).fit(X, y)
    cp = SplitConformalRegressor(model, alpha=0.1).calibrate(X, y)
    interval = cp.predict_interval(X[:1])[0]
    assert interval[0] <= -1.8 and interval[1] >= 1.0
    assert interval[1] - 1.0 < 1e-14  # a rounding margin, not a wider interval
    lower = DummyRegressor(strategy="constant", constant=-0.4).fit(X, y)
    upper = DummyRegressor(strategy="constant", constant=-0.6).fit(X, y)
    cqr = ConformalizedQuantileRegressor((lower, upper), alpha=0.1).calibrate(X, y)
    assert cqr.predict_interval(X[:1])[0, 1] >= 1.0  # score max(-0.4 - 1, 1 + 0.6) = 1.6


@pytest.mark.slow
def test_coverage_with_tied_integer_targets_over_seeds():
    """Poisson counts around a constant prediction: the scores tie, so only the lower end
    of the coverage law applies (ties can only raise coverage)."""
    from sklearn.dummy import DummyRegressor

    alpha, n_cal, n_test, repeats = 0.1, 50, 50, 400
    X = np.zeros((n_cal + n_test, 1))
    model = DummyRegressor(strategy="constant", constant=-0.4).fit(X[:2], [0.0, 1.0])
    hits = []
    for seed in range(repeats):
        y = np.random.default_rng(seed).poisson(0.5, n_cal + n_test).astype(float)
        cp = SplitConformalRegressor(model, alpha=alpha).calibrate(X[:n_cal], y[:n_cal])
        interval = cp.predict_interval(X[n_cal:])
        hits.append(np.mean((interval[:, 0] <= y[n_cal:]) & (y[n_cal:] <= interval[:, 1])))
    low, _ = coverage_bounds(n_cal, alpha, n_test, 0.99, n_repeats=repeats)
    assert np.mean(hits) >= low


class ReadOnlyInverse(AbsoluteScore):
    """A user score that returns a read-only array it keeps."""

    def inverse(self, y_pred, threshold, difficulty=None):
        self.last = super().inverse(y_pred, threshold, difficulty)
        self.last.flags.writeable = False
        return self.last


def test_one_batch_of_a_user_score_is_returned_as_a_fresh_writeable_array():
    X, y = regression_data(300, seed=8)
    score = ReadOnlyInverse()
    cp = SplitConformalRegressor(Ridge(), conformity_score=score).fit(X[:150], y[:150])
    out = cp.calibrate(X[150:250], y[150:250]).predict_interval(X[250:])
    assert out.flags.writeable and not np.shares_memory(out, score.last)


@pytest.mark.parametrize("score", ["absolute", "normalized"])
def test_a_row_interval_does_not_depend_on_the_other_rows(score):
    """Outward rounding is row by row: a far-away row in the same call (or another batch
    size) leaves every other interval bit-identical."""
    X, y = regression_data(400, seed=9)
    cp = SplitConformalRegressor(Ridge(), conformity_score=score, random_state=0)
    cp.fit(X[:200], y[:200]).calibrate(X[200:300], y[200:300])
    alone = cp.predict_interval(X[300:])
    far = np.r_[X[300:], 1e12 * np.ones((1, X.shape[1]))]
    np.testing.assert_array_equal(cp.predict_interval(far)[:-1], alone)
    np.testing.assert_array_equal(cp.set_params(batch_size=7).predict_interval(X[300:]), alone)


def test_outward_rounding_never_turns_an_end_into_nan():
    """An infinite prediction keeps its infinite ends; operands near the largest float do
    not overflow the margin."""
    from uqconform.scores.regression import interval_around

    inf = np.array([np.inf, -np.inf])
    out = interval_around(inf, inf, np.array([1e300]), np.array([1e300]))
    np.testing.assert_array_equal(out, [[np.inf, np.inf], [-np.inf, -np.inf]])
    big = interval_around(
        np.array([1e308]), np.array([1e308]), np.array([1e308]), np.array([1e308])
    )
    assert np.isfinite(big[0, 0]) and abs(big[0, 0]) < 1e295  # the exact end is 0
    whole = interval_around(
        np.array([1.0]), np.array([1.0]), np.array([np.inf]), np.array([np.inf])
    )
    np.testing.assert_array_equal(whole, [[-np.inf, np.inf]])


def test_fitted_models_swapped_after_calibrate_ask_for_calibration():
    """A fitted model or difficulty model set after calibrate was ignored silently: the
    intervals kept coming from the old one while get_params reported the new one."""
    X, y = regression_data(600)
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    model = Ridge().fit(Xf, yf)
    residuals = np.abs(yf - model.predict(Xf))
    first = KNeighborsRegressor(5).fit(Xf, residuals)
    second = KNeighborsRegressor(25).fit(Xf, residuals)
    cp = SplitConformalRegressor(
        model, conformity_score="normalized", difficulty_estimator=first
    ).calibrate(Xc, yc)
    cp.predict_interval(Xt)
    cp.set_params(difficulty_estimator=second)
    with pytest.raises(NotFittedError, match="difficulty_estimator"):
        cp.predict_interval(Xt)
    cp.calibrate(Xc, yc).predict_interval(Xt)  # calibrating again takes the new one
    plain = SplitConformalRegressor(model).calibrate(Xc, yc)
    plain.set_params(estimator=LinearRegression().fit(Xf, yf))
    with pytest.raises(NotFittedError, match="estimator"):
        plain.predict_interval(Xt)


def test_more_folds_than_rows_names_cv():
    (Xf, yf), _, _ = _split(seed=2)
    cp = SplitConformalRegressor(Ridge(), conformity_score="normalized", cv=5)
    with pytest.raises(ValueError, match="`cv`=5 folds need at least 5 rows; X has 3 samples"):
        cp.fit(Xf[:3], yf[:3])  # was scikit-learn's n_splits message


def test_a_target_transformed_difficulty_model_is_refused_by_name():
    """Review finding: a fitted TransformedTargetRegressor around a model with return_std
    forwarded it and failed inside scikit-learn ("'tuple' object has no attribute 'ndim'");
    falling back to its predict would have taken the predicted mean for a spread."""
    from sklearn.compose import TransformedTargetRegressor

    X, y = regression_data(150, seed=0)
    for inner in (GaussianProcessRegressor(alpha=0.1), BayesianRidge()):
        spread = TransformedTargetRegressor(inner).fit(X[:100], y[:100])
        model = SplitConformalRegressor(conformity_score="normalized", difficulty_estimator=spread)
        with pytest.raises(ValueError, match=r"`difficulty_estimator` \(TransformedTarget"):
            model.fit(X[:100], y[:100])  # the training spread is read at fit


def test_overflowed_calibration_scores_are_named_not_blamed_on_too_few_points():
    """Predictions of 1e308 against labels of -1e308 overflow to infinite scores: both
    warnings said "Too few calibration points" with 30 points, enough for alpha 0.1
    (va review)."""

    class Huge(RegressorMixin, BaseEstimator):
        def fit(self, X, y):
            self.n_features_in_ = X.shape[1]
            return self

        def predict(self, X):
            return np.full(len(X), 1e308)

    X = np.zeros((40, 1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = SplitConformalRegressor(Huge().fit(X, X[:, 0])).calibrate(
            X[:30], -np.full(30, 1e308)
        )
        model.predict_interval(X[30:])
    messages = [str(w.message) for w in caught]
    assert any("30 of the 30 calibration scores are infinite" in m for m in messages), messages
    assert not any("Too few calibration points" in m for m in messages), messages
    # with too few points as well, both are said (the infinite score hid the count)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        labels = np.r_[-1e308, np.zeros(4)]
        model = SplitConformalRegressor(Huge().fit(X, X[:, 0])).calibrate(X[:5], labels)
    messages = [str(w.message) for w in caught]
    assert any("1 of the 5 calibration scores are infinite" in m for m in messages), messages
    assert any("Too few calibration points" in m for m in messages), messages


def test_a_pickled_wrapper_whose_model_has_a_nan_parameter_still_predicts():
    """Review finding: SimpleImputer's missing_values=nan (or GridSearchCV's
    error_score=nan) compared unequal to itself after a pickle round-trip, so the copy
    refused to predict ("parameters changed since fit")."""
    import pickle

    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = X @ [1.0, 2.0, 0.0, 0.0] + rng.normal(size=600)
    for prefit in (False, True):
        pipeline = make_pipeline(SimpleImputer(), Ridge())
        if prefit:
            model = SplitConformalRegressor(pipeline.fit(X[:200], y[:200]))
        else:
            model = SplitConformalRegressor(pipeline).fit(X[:200], y[:200])
        model.calibrate(X[200:400], y[200:400])
        copy = pickle.loads(pickle.dumps(model))
        np.testing.assert_array_equal(
            copy.predict_interval(X[400:]), model.predict_interval(X[400:])
        )


def test_a_prefit_quantile_pair_or_difficulty_model_trained_again_is_refused():
    """Review finding (docs helper): a CQR pair given fitted (held by `QuantileBand` as
    parameters, not fitted attributes) and a difficulty model given fitted were not in the
    retrained-model digest: trained again after calibrate, the intervals changed silently."""
    from sklearn.linear_model import QuantileRegressor

    from uqconform import ConformalizedQuantileRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = X.sum(axis=1) + rng.normal(size=400)
    pair = [QuantileRegressor(quantile=q, alpha=0.0).fit(X[:200], y[:200]) for q in (0.05, 0.95)]
    cqr = ConformalizedQuantileRegressor(tuple(pair)).calibrate(X[200:], y[200:])
    model, difficulty = Ridge().fit(X[:200], y[:200]), Ridge().fit(X[:200], np.abs(y[:200]))
    normalized = SplitConformalRegressor(
        model, conformity_score="normalized", difficulty_estimator=difficulty
    ).calibrate(X[200:], y[200:])
    reference = normalized.predict_interval(X[:5])
    np.testing.assert_array_equal(normalized.predict_interval(X[:5]), reference)
    pair[0].fit(X[:200], -y[:200])
    difficulty.fit(X[:200], 3 * np.abs(y[:200]))
    for wrapper in (cqr, normalized):
        with pytest.raises(NotFittedError, match=r"changed since calibrate \(it was trained"):
            wrapper.predict_interval(X[:5])


def test_continuous_groups_get_a_hint_to_bin_them_in_regression():
    """A float feature passed as `groups` puts every calibration row alone in its group
    (clf review, stop 52): the hint to bin it is given by every split wrapper."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = X[:, 0] + rng.normal(size=200)
    model = SplitConformalRegressor(Ridge()).fit(X[:100], y[:100])
    with pytest.warns(UserWarning, match="alone in their group .* bin it"):
        model.calibrate(X[100:], y[100:], groups=X[100:, 1])
    with pytest.warns(UserWarning, match="identifiers of units: merge them"):  # string IDs
        model.calibrate(X[100:], y[100:], groups=np.arange(100).astype(str))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.calibrate(X[100:], y[100:], groups=X[100:, 1] > 0)


def test_frozen_estimator_with_a_trained_difficulty_model_says_copies_are_trained():
    """The frozen model is never refitted, but the out-of-fold residuals a trained
    difficulty model learns come from cv fresh copies of its kind: fit says so, naming
    `difficulty_estimator` (stop 57); a fitted difficulty model trains nothing, silently."""
    from sklearn.frozen import FrozenEstimator

    X, y = regression_data(400)
    fitted = LinearRegression().fit(X[:200], y[:200])
    coefficients = fitted.coef_.copy()
    for difficulty in (None, Ridge()):
        model = SplitConformalRegressor(
            FrozenEstimator(fitted), conformity_score="normalized", difficulty_estimator=difficulty
        )
        with pytest.warns(UserWarning, match=r"trains 5 copies.*fitted `difficulty_estimator`"):
            model.fit(X[:200], y[:200])
    np.testing.assert_array_equal(fitted.coef_, coefficients)  # the point model: untouched
    prefit = KNeighborsRegressor().fit(X[:200], np.abs(y[:200] - fitted.predict(X[:200])))
    model = SplitConformalRegressor(
        FrozenEstimator(fitted), conformity_score="normalized", difficulty_estimator=prefit
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning fails the test
        model.fit(X[:200], y[:200])


def test_frozen_model_outside_sklearn_names_difficulty_estimator_when_copies_are_needed():
    from sklearn.frozen import FrozenEstimator

    class Outside:
        def predict(self, X):
            return np.asarray(X)[:, 0]

    X, y = regression_data(300)
    model = SplitConformalRegressor(
        FrozenEstimator(Outside()), conformity_score="normalized", difficulty_estimator=Ridge()
    )
    with pytest.raises(
        TypeError, match=r"around Outside.*outside scikit-learn.*fitted `difficulty_estimator`"
    ):
        model.fit(X[:200], y[:200])

    class OutsideWithFit(Outside):  # scikit-learn then fails on its tags (diffrev20)
        def fit(self, X, y):
            return self

    with pytest.raises(AttributeError, match=r"around OutsideWithFit.*Call calibrate"):
        SplitConformalRegressor(FrozenEstimator(OutsideWithFit())).fit(X[:200], y[:200])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (Ridge, r"`difficulty_estimator` is the class Ridge: pass an instance, e\.g\. Ridge\(\)"),
        ("x", r"`difficulty_estimator` must be None or a regressor.*got str"),
        (3, r"`difficulty_estimator` must be None or a regressor.*got int"),
    ],
)
def test_difficulty_estimator_that_is_not_a_model_is_refused_by_name(value, message):
    X, y = regression_data(300)
    model = SplitConformalRegressor(
        Ridge(), conformity_score="normalized", difficulty_estimator=value
    )
    with pytest.raises(TypeError, match=message):
        model.fit(X[:200], y[:200])
    with pytest.raises(TypeError, match=message):  # calibrate without fit too
        SplitConformalRegressor(
            Ridge().fit(X[:200], y[:200]),
            conformity_score="normalized",
            difficulty_estimator=value,
        ).calibrate(X[200:], y[200:])


def test_conformity_score_given_as_a_class_is_refused_by_name():
    X, y = regression_data(300)
    model = SplitConformalRegressor(Ridge(), conformity_score=AbsoluteScore)
    with pytest.raises(TypeError, match=r"is the class AbsoluteScore: pass an instance"):
        model.fit(X[:200], y[:200])


def test_cqr_score_around_a_band_model_points_to_cqr():
    """regr review (stop 57, repro_cqrscore_split.py): CQRScore in SplitConformalRegressor
    around a fitted QuantileBand was told to "use uqconform.multioutput" (its (n, 2) output
    read as several outputs); a point model got the CQR hint only."""
    from sklearn.linear_model import QuantileRegressor

    from uqconform.regression import QuantileBand

    X, y = regression_data(300)
    (Xf, yf), (Xc, yc), _ = thirds(X, y)
    band = QuantileBand(
        QuantileRegressor(quantile=0.05, alpha=0.0), QuantileRegressor(quantile=0.95, alpha=0.0)
    ).fit(Xf, yf)
    for model in (band, Ridge().fit(Xf, yf)):
        wrapper = SplitConformalRegressor(model, conformity_score=CQRScore())
        with pytest.raises(ValueError, match=r"quantile band.*ConformalizedQuantile") as e:
            wrapper.calibrate(Xc, yc)
        assert "multioutput" not in str(e.value)

    class PointSubclass(SplitConformalRegressor):  # its own 1-D output (diffrev21)
        def _model_output(self, X):
            return np.asarray(self.estimator_.predict(X), dtype=float)

    with pytest.raises(ValueError, match=r"predicts one value per row.*ConformalizedQuantile"):
        PointSubclass(Ridge().fit(Xf, yf), conformity_score=CQRScore()).calibrate(Xc, yc)


# ---- Mondrian thresholds of many strata, read off one sort ---------------------------------
def _loop_threshold_table(model, alphas):
    """The thresholds and too-few strata as a loop over strata computes them, one
    `conformal_quantile` call per stratum and score column (the reference)."""
    scores = model.conformity_scores_
    scores2d = scores[:, None] if scores.ndim == 1 else scores
    c = scores2d.shape[1]
    n_groups = 1 if getattr(model, "groups_", None) is None else model.groups_.size
    n_sub = model._n_sub_strata
    table = np.full((n_groups + 1, n_sub, c, alphas.size), np.inf)
    too_few = {}
    needed = minimum_scores(float(np.min(alphas)) / c)
    strata = model.calibration_strata_
    for stratum in range(n_groups * n_sub):
        rows = np.flatnonzero(strata == stratum)
        for component in range(c):
            table[stratum // n_sub, stratum % n_sub, component] = conformal_quantile(
                scores2d[rows, component], alphas / c, warn=False
            )
        if np.isinf(table[stratum // n_sub, stratum % n_sub]).any() and (
            rows.size < needed or not np.isposinf(scores2d[rows]).any()
        ):
            too_few[stratum] = rows.size
    return table, too_few


def _many_small_groups(n_groups=1500, seed=0):
    """Integer targets (integer scores with many ties) in groups of 1 to 60 rows, some
    groups absent from calibration."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice([1, 1, 2, 3, 5, 8, 9, 12, 19, 20, 39, 60], size=n_groups)
    groups = np.repeat(np.arange(n_groups) * 3, sizes)  # labels 0, 3, 6, ...
    groups = groups[rng.permutation(groups.size)]
    X = rng.normal(size=(groups.size, 2))
    y = np.round(3 * X[:, 0] + rng.normal(size=groups.size))
    return X, y, groups


def test_many_small_mondrian_groups_get_the_per_group_thresholds_without_a_loop(monkeypatch):
    """Thousands of small groups: the thresholds are read off one sort of the scores (a
    loop over groups took seconds per new level with 20,000 groups), bit for bit those of
    `conformal_quantile` on each group's scores, at every level, with ties, groups of one
    row and groups too small for some levels (infinite thresholds, the warning)."""
    from sklearn.dummy import DummyRegressor

    import uqconform.base
    from uqconform import ConformalizedQuantileRegressor, SplitConformalClassifier

    X, y, groups = _many_small_groups()
    alphas = np.array([0.5, 0.01, 0.1, 0.25, 0.05, 0.3333333333333333, 0.9])
    split = SplitConformalRegressor(DummyRegressor(strategy="constant", constant=0.0))
    normalized = SplitConformalRegressor(
        LinearRegression(), conformity_score="normalized", random_state=0
    )
    asymmetric = ConformalizedQuantileRegressor(
        HistGradientBoostingRegressor(loss="quantile", max_iter=5), symmetric=False
    )
    labels = (y > 0).astype(int) + (y > 2)
    by_class = SplitConformalClassifier(LogisticRegression(), class_conditional=True)
    models = [
        (split, y),
        (normalized, y),
        (asymmetric, y),
        (by_class, labels),
    ]
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return conformal_quantile(*args, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for model, target in models:
            model.fit(X[:300], target[:300]).calibrate(X, target, groups=groups)
            ties = np.unique(model.conformity_scores_).size < model.conformity_scores_.size / 2
            assert ties or model is not split
            monkeypatch.setattr(uqconform.base, "conformal_quantile", counted)
            table, too_few = model._compute_threshold_table(alphas)
            monkeypatch.undo()
            expected, expected_too_few = _loop_threshold_table(model, alphas)
            assert table.tobytes() == expected.tobytes()  # bit for bit, inf included
            assert too_few == expected_too_few and list(too_few) == sorted(too_few)
            assert np.isinf(table[:-1]).any() and np.isfinite(table[:-1]).any()
            assert not calls  # no selection per group
    # a row with an infinite score: its group is not counted as short of rows
    split.conformity_scores_ = split.conformity_scores_.copy()
    split.conformity_scores_[np.flatnonzero(groups == groups[0])[0]] = np.inf
    table, too_few = split._compute_threshold_table(alphas)
    expected, expected_too_few = _loop_threshold_table(split, alphas)
    assert table.tobytes() == expected.tobytes() and too_few == expected_too_few
    # a model pickled before the group sorting was stored reads the same table
    del split.__dict__["_strata_sorting"]
    assert split._compute_threshold_table(alphas)[0].tobytes() == expected.tobytes()


def test_object_groups_are_sorted_once_per_distinct_label():
    """Review s63: groups from pandas.cut (the binning the library's own warning advises)
    were sorted whole with Python comparisons three times (50,000 rows: 2.7 s to calibrate,
    1.5 s to predict, against 0.03 s for their integer codes); now each distinct label is
    compared, with the same intervals as the codes and the same refusals."""
    import pandas as pd

    rng = np.random.default_rng(11)
    X = rng.normal(size=(4000, 2))
    y = X[:, 0] + rng.normal(size=4000)
    bins = [-np.inf, -1, -0.5, 0, 0.5, 1, np.inf]
    intervals = pd.Series(pd.cut(X[:, 1], bins))
    codes = pd.cut(X[:, 1], bins, labels=False)
    compared = []

    class Bin(str):  # text labels that count their comparisons
        def __lt__(self, other):
            compared.append(1)
            return str.__lt__(self, other)

    names = np.array([Bin(f"bin{code}") for code in range(6)], dtype=object)
    model = SplitConformalRegressor(LinearRegression()).fit(X[:1000], y[:1000])
    expected = model.calibrate(X[1000:2500], y[1000:2500], groups=codes[1000:2500])
    expected = expected.predict_interval(X[2500:], groups=codes[2500:])
    for groups in (intervals, names[codes]):
        compared.clear()
        model.calibrate(X[1000:2500], y[1000:2500], groups=groups[1000:2500])
        got = model.predict_interval(X[2500:], groups=groups[2500:])
        np.testing.assert_array_equal(got, expected)
        assert len(compared) < 200  # 1,500 + 1,500 rows: thousands sorted whole
    as_lists = np.empty(1500, dtype=object)  # unhashable labels: sorted whole, as before
    as_lists[:] = [[code] for code in codes[1000:2500]]
    model.calibrate(X[1000:2500], y[1000:2500], groups=as_lists)
    assert [list(group) for group in model.groups_] == [[code] for code in range(6)]
    mixed = np.array(["a", 1] * 750, dtype=object)
    with pytest.raises(ValueError, match=r"`groups` mixes label types \(int, str\)"):
        model.calibrate(X[1000:2500], y[1000:2500], groups=mixed)
    with pytest.warns(UserWarning, match=r"1 row belongs to groups without calibration data"):
        unseen = np.array([names[0]] * 9 + [Bin("other")], dtype=object)
        assert np.isinf(
            model.fit(X[:1000], y[:1000])
            .calibrate(X[1000:2500], y[1000:2500], groups=names[codes[1000:2500]])
            .predict_interval(X[:10], groups=unseen)[-1]
        ).all()


def test_few_large_mondrian_groups_keep_one_selection_per_group(monkeypatch):
    """Groups of many rows each: a selection per group is faster than sorting every row."""
    import uqconform.base

    X, y = regression_data(2400)
    groups = np.arange(2000) % 3
    model = SplitConformalRegressor(LinearRegression()).fit(X[:400], y[:400])
    model.calibrate(X[400:], y[400:], groups=groups)
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return conformal_quantile(*args, **kwargs)

    monkeypatch.setattr(uqconform.base, "conformal_quantile", counted)
    alphas = np.array([0.1, 0.01])
    table, too_few = model._compute_threshold_table(alphas)
    assert len(calls) == 3
    expected, expected_too_few = _loop_threshold_table(model, alphas)
    assert table.tobytes() == expected.tobytes() and too_few == expected_too_few == {}


def test_cps_quantiles_of_many_small_groups_equal_the_per_group_thresholds(monkeypatch):
    """The predictive system's per-group quantile thresholds, read off one sort per side,
    equal `conformal_quantile` on each group's scores (both sides, every level), and the
    too-few warning names the same groups and levels."""
    from uqconform import ConformalPredictiveSystem

    X, y, groups = _many_small_groups(seed=1)
    model = ConformalPredictiveSystem(LinearRegression()).fit(X[:300], y[:300])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.calibrate(X, y, groups=groups)
    levels = np.array([0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 2.0**-60])
    upper = levels >= 0.5
    import uqconform.quantiles

    selections = []
    select = uqconform.quantiles._kth_smallest

    def counted(values, kth):
        selections.append(1)
        return select(values, kth)

    monkeypatch.setattr(uqconform.quantiles, "_kth_smallest", counted)
    with pytest.warns(UserWarning, match="Too few calibration points") as caught:
        table = model._quantile_thresholds(levels, upper)
    monkeypatch.undo()
    assert not selections  # no selection per group
    expected = np.full(table.shape, np.inf)
    scores = model.conformity_scores_
    for group in range(model.groups_.size):
        rows = model.calibration_strata_ == group
        expected[group, 0, ~upper] = conformal_quantile(
            scores[rows, 0], levels[~upper], warn=False
        )
        miscoverage = np.minimum(1.0 - levels[upper], np.nextafter(1.0, 0.0))
        expected[group, 1, upper] = conformal_quantile(scores[rows, 1], miscoverage, warn=False)
    assert table.tobytes() == expected.tobytes()
    read = np.where(upper, expected[:-1, 1], expected[:-1, 0])
    short = np.flatnonzero(np.isinf(read).any(axis=1))
    message = str(caught[0].message)
    assert f"in {short.size} group(s) (e.g. {int(model.groups_[short[0]])!r})" in message
    named = [float(v) for v in levels[np.isinf(read).any(axis=0)]]
    assert f"quantile(s) {', '.join(repr(v) for v in named)}:" in message
