"""ConformalizedQuantileRegressor: single quantile model, pairs, symmetric and asymmetric."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import regression_data, strongly_heteroscedastic, thirds
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingRegressor
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import QuantileRegressor, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.validation import check_is_fitted

from uqconform import ConformalizedQuantileRegressor, SplitConformalRegressor
from uqconform.evaluation import coverage_bounds
from uqconform.quantiles import conformal_quantile
from uqconform.regression import QuantileBand


def _hgb(**kw):
    return HistGradientBoostingRegressor(loss="quantile", max_iter=30, random_state=0, **kw)


def _split(n=600, seed=0):
    return thirds(*regression_data(n, seed=seed))


@pytest.mark.parametrize(
    "estimator,param",
    [
        (_hgb(), "quantile"),
        (GradientBoostingRegressor(loss="quantile", n_estimators=20), "alpha"),
        (make_pipeline(StandardScaler(), QuantileRegressor(alpha=0.0)), None),
    ],
)
def test_single_quantile_model_is_fitted_at_both_levels(estimator, param):
    (Xf, yf), (Xc, yc), (Xt, _) = _split()
    cqr = ConformalizedQuantileRegressor(estimator, alpha=0.2).fit(Xf, yf)
    band = cqr.estimator_
    if param is None:
        levels = band.lower[-1].quantile, band.upper[-1].quantile
    else:
        levels = band.lower.get_params()[param], band.upper.get_params()[param]
    assert levels == pytest.approx((0.1, 0.9))
    with pytest.raises(NotFittedError):
        check_is_fitted(estimator)  # the user's model is untouched
    cqr.calibrate(Xc, yc)
    lo, hi = band.lower.predict(Xc), band.upper.predict(Xc)
    q = conformal_quantile(np.maximum(lo - yc, yc - hi), 0.2)[0]
    out = cqr.predict_interval(Xt)
    raw = band.predict(Xt)
    expected = np.c_[raw[:, 0] - q, raw[:, 1] + q]
    fine = expected[:, 0] <= expected[:, 1]
    np.testing.assert_allclose(out[fine], expected[fine])
    assert np.all(out[:, 0] <= out[:, 1])
    np.testing.assert_allclose(cqr.predict(Xt), raw.mean(axis=1))


def test_asymmetric_calibrates_each_side_at_half_alpha():
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=1)
    cqr = ConformalizedQuantileRegressor(_hgb(), alpha=0.2, symmetric=False).fit(Xf, yf)
    cqr.calibrate(Xc, yc)
    lo, hi = cqr.estimator_.lower.predict(Xc), cqr.estimator_.upper.predict(Xc)
    q_low = conformal_quantile(lo - yc, 0.1)[0]
    q_high = conformal_quantile(yc - hi, 0.1)[0]
    raw = cqr.estimator_.predict(Xt)
    out = cqr.predict_interval(Xt)
    fine = raw[:, 0] - q_low <= raw[:, 1] + q_high
    np.testing.assert_allclose(out[fine, 0], raw[fine, 0] - q_low)
    np.testing.assert_allclose(out[fine, 1], raw[fine, 1] + q_high)
    assert cqr.conformity_scores_.shape == (len(yc), 2)


def test_pair_of_unfitted_models_is_cloned_and_fitted():
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=2)
    lower, upper = _hgb(quantile=0.05), _hgb(quantile=0.95)
    cqr = ConformalizedQuantileRegressor((lower, upper)).fit(Xf, yf).calibrate(Xc, yc)
    assert cqr.estimator_.lower is not lower
    with pytest.raises(NotFittedError):
        check_is_fitted(lower)
    assert cqr.estimator_.lower.quantile == 0.05  # the pair's own levels are kept
    single = ConformalizedQuantileRegressor(_hgb(), alpha=0.1).fit(Xf, yf).calibrate(Xc, yc)
    np.testing.assert_allclose(cqr.predict_interval(Xt), single.predict_interval(Xt))


@pytest.mark.parametrize("frozen", [False, True])
def test_pair_of_fitted_models_is_used_as_is(frozen):
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=3)
    lower, upper = _hgb(quantile=0.05).fit(Xf, yf), _hgb(quantile=0.95).fit(Xf, yf)
    pair = (FrozenEstimator(lower), FrozenEstimator(upper)) if frozen else (lower, upper)
    cqr = ConformalizedQuantileRegressor(pair)
    if frozen:
        cqr.fit(Xf[::-1], yf)  # a no-op for frozen models
    cqr.calibrate(Xc, yc)
    if not frozen:
        assert cqr.estimator_.lower is lower and cqr.estimator_.upper is upper
    fitted = ConformalizedQuantileRegressor((_hgb(quantile=0.05), _hgb(quantile=0.95)))
    fitted.fit(Xf, yf).calibrate(Xc, yc)
    np.testing.assert_array_equal(cqr.predict_interval(Xt), fitted.predict_interval(Xt))


def test_a_pair_of_models_predicting_columns_is_read_as_one_quantile_each():
    """Review s64: a fitted pair whose models predict a column (n, 1), as Keras models do,
    was refused as "a single fitted model gives one quantile: pass a pair"."""

    class Column(RegressorMixin, BaseEstimator):
        def __init__(self, model):
            self.model = model

        def fit(self, X, y):
            self.model_ = self.model.fit(X, y)
            return self

        def predict(self, X):
            return self.model_.predict(X)[:, None]

    X, y = regression_data(300)
    flat = [QuantileRegressor(quantile=q, alpha=0).fit(X[:100], y[:100]) for q in (0.05, 0.95)]
    columns = [Column(model).fit(X[:100], y[:100]) for model in flat]
    intervals = [
        ConformalizedQuantileRegressor(tuple(pair)).calibrate(X[100:200], y[100:200])
        for pair in (flat, columns)
    ]
    np.testing.assert_array_equal(
        intervals[1].predict_interval(X[200:]), intervals[0].predict_interval(X[200:])
    )


def test_a_pair_given_as_upper_lower_is_named_and_the_right_order_is_quiet(recwarn):
    (Xf, yf), (Xc, yc), _ = _split(seed=4)
    lower, upper = _hgb(quantile=0.05).fit(Xf, yf), _hgb(quantile=0.95).fit(Xf, yf)
    ConformalizedQuantileRegressor((lower, upper)).calibrate(Xc, yc)
    assert not [w for w in recwarn if "(upper, lower)" in str(w.message)]
    with pytest.warns(UserWarning, match=r"lower quantile model predicts above the upper"):
        ConformalizedQuantileRegressor((upper, lower)).calibrate(Xc, yc)


def test_unfitted_pair_without_fit_raises():
    _, (Xc, yc), _ = _split()
    with pytest.raises(NotFittedError, match="fit"):
        ConformalizedQuantileRegressor((_hgb(quantile=0.1), _hgb(quantile=0.9))).calibrate(Xc, yc)


class _XGBoostStyleQuantile(RegressorMixin, BaseEstimator):
    """XGBoost's way: `objective` in the signature, `quantile_alpha` in **kwargs, listed by
    get_params only once set (as xgboost.XGBRegressor does); a linear quantile fit."""

    def __init__(self, objective="reg:quantileerror", **kwargs):
        self.objective = objective
        self.kwargs = kwargs

    def get_params(self, deep=True):
        return {**super().get_params(deep), **self.kwargs}

    def set_params(self, **params):
        for name, value in params.items():
            if name == "objective":
                self.objective = value
            else:
                self.kwargs[name] = value
        return self

    def fit(self, X, y):
        quantile = self.kwargs.get("quantile_alpha", 0.5)
        self.model_ = QuantileRegressor(quantile=quantile, alpha=0).fit(X, y)
        return self

    def predict(self, X):
        return self.model_.predict(X)


def test_quantile_models_named_the_xgboost_way_are_accepted():
    """puncc #57 (CQR on XGBoost): objective='reg:quantileerror' is a quantile loss and
    quantile_alpha its level, found even when XGBoost does not list it yet; a
    squared-error objective is refused naming `objective`."""
    (Xf, yf), (Xc, yc), (Xt, _) = _split()
    assert "quantile_alpha" not in _XGBoostStyleQuantile().get_params()
    found = ConformalizedQuantileRegressor(_XGBoostStyleQuantile(), alpha=0.2)
    given = ConformalizedQuantileRegressor(
        _XGBoostStyleQuantile(), alpha=0.2, quantile_param="quantile_alpha"
    )
    for cqr in (found, given):
        cqr.fit(Xf[:300], yf[:300]).calibrate(Xc, yc)
        band = cqr.estimator_
        assert [m.kwargs["quantile_alpha"] for m in (band.lower, band.upper)] == [0.1, 0.9]
    np.testing.assert_array_equal(found.predict_interval(Xt), given.predict_interval(Xt))
    squared = _XGBoostStyleQuantile("reg:squarederror")
    with pytest.raises(ValueError, match=r"objective='reg:squarederror'.*set `objective`"):
        ConformalizedQuantileRegressor(squared, quantile_param="quantile_alpha").fit(Xf, yf)
    with pytest.raises(ValueError, match=r"objective='reg:squarederror'.*set `objective`"):
        ConformalizedQuantileRegressor(squared).fit(Xf, yf)  # the loss is what to change
    with pytest.raises(ValueError, match="'level' is not a parameter of Ridge"):
        ConformalizedQuantileRegressor(Ridge(), quantile_param="level").fit(Xf, yf)


def test_bad_estimators_are_explained():
    (Xf, yf), (Xc, yc), _ = _split()
    with pytest.raises(ValueError, match="loss='quantile'"):
        ConformalizedQuantileRegressor(HistGradientBoostingRegressor()).fit(Xf, yf)
    with pytest.raises(ValueError, match="pair"):
        ConformalizedQuantileRegressor((_hgb(), _hgb(), _hgb())).fit(Xf, yf)
    with pytest.raises(ValueError, match="pair"):
        ConformalizedQuantileRegressor(FrozenEstimator(_hgb(quantile=0.5).fit(Xf, yf))).fit(Xf, yf)
    with pytest.raises(ValueError, match=r"\(n, 2\)"):
        ConformalizedQuantileRegressor(_hgb(quantile=0.5).fit(Xf, yf)).calibrate(Xc, yc)
    with pytest.raises(ValueError, match="quantile_param"):
        ConformalizedQuantileRegressor(_hgb(), quantile_param="nope").fit(Xf, yf)
    # review finding: a GradientBoostingRegressor with a mean loss was asked for
    # `quantile_param` (its level parameter `alpha` is found once the loss is a quantile one)
    for loss in ("squared_error", "huber"):
        with pytest.raises(ValueError, match=rf"loss='{loss}'; CQR needs quantile.*set `loss`"):
            ConformalizedQuantileRegressor(GradientBoostingRegressor(loss=loss)).fit(Xf, yf)
    # ... and `quantile_param` was ignored beside a pair of models
    pair = (_hgb(quantile=0.05), _hgb(quantile=0.95))
    with pytest.raises(ValueError, match=r"`quantile_param` \('quantile'\).*leave"):
        ConformalizedQuantileRegressor(pair, quantile_param="quantile").fit(Xf, yf)
    with pytest.raises(ValueError, match=r"a pair \(lower, upper\) or a QuantileBand keeps"):
        ConformalizedQuantileRegressor(QuantileBand(*pair), quantile_param="quantile").fit(Xf, yf)
    # a mean model with no loss to set: named as such, with every remedy
    expected = r"Ridge has no quantile .*`quantile_param`.*conformity_score='normalized'"
    with pytest.raises(ValueError, match=expected):
        ConformalizedQuantileRegressor(Ridge()).fit(Xf, yf)


def test_cqr_is_narrower_than_absolute_split_cp_on_heteroscedastic_data():
    """CQR's claim: quantile models follow the noise scale, so on heteroscedastic data its
    intervals are narrower on average than split CP's constant width at the same level (here
    around the true linear mean, split CP's best case). Pooled over 8 fresh data sets; both
    pooled coverages are first checked against the split-CP law, so the widths are compared
    at valid coverage."""
    repeats, n = 8, 900
    widths = {"cqr": [], "absolute": []}
    hits = {"cqr": [], "absolute": []}
    for seed in range(repeats):
        (Xf, yf), (Xc, yc), (Xt, yt) = thirds(*strongly_heteroscedastic(n, [7, seed]))
        models = {
            "cqr": ConformalizedQuantileRegressor(
                HistGradientBoostingRegressor(
                    loss="quantile", max_iter=50, max_depth=2, random_state=0
                ),
                alpha=0.1,
            ),
            "absolute": SplitConformalRegressor(Ridge(), alpha=0.1),
        }
        for name, model in models.items():
            out = model.fit(Xf, yf).calibrate(Xc, yc).predict_interval(Xt)
            assert model.n_calibration_ == n // 3
            widths[name].append(np.mean(out[:, 1] - out[:, 0]))
            hits[name].append(np.mean((out[:, 0] <= yt) & (yt <= out[:, 1])))
    low, high = coverage_bounds(n // 3, 0.1, n // 3, confidence=0.999, n_repeats=repeats)
    for name, covered in hits.items():
        assert low <= np.mean(covered) <= high, f"{name}: coverage {np.mean(covered):.4f}"
    cqr, absolute = np.mean(widths["cqr"]), np.mean(widths["absolute"])
    assert cqr < absolute, f"CQR {cqr:.3f} vs absolute split CP {absolute:.3f}"


class _Band(RegressorMixin, BaseEstimator):
    """A fixed 'quantile model' ``sign * |x0| * width``, to build crossing bands."""

    def __init__(self, sign=1.0):
        self.sign = sign

    def fit(self, X, y):
        self.fitted_ = True
        return self

    def predict(self, X):
        return self.sign * np.abs(np.asarray(X)[:, 0])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**16), st.booleans())
def test_intervals_are_ordered_and_nested_even_when_corrections_cross(seed, symmetric):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(200, 1))
    y = rng.normal(scale=0.3, size=200)  # the band +-|x| is far too wide: corrections < 0
    cqr = ConformalizedQuantileRegressor((_Band(-1.0), _Band(1.0)), symmetric=symmetric).fit(X, y)
    cqr.calibrate(X[:100], y[:100])
    out = cqr.predict_interval(X[100:], alpha=[0.05, 0.1, 0.3, 0.6])
    assert np.all(out[:, 0] <= out[:, 1])
    nonempty = out[:, 0, :] < out[:, 1, :]
    for j in range(3):  # among non-degenerate intervals, smaller alpha contains larger
        both = nonempty[:, j + 1]
        assert np.all(out[both, 0, j] <= out[both, 0, j + 1])
        assert np.all(out[both, 1, j] >= out[both, 1, j + 1])


def test_empty_sets_of_an_over_wide_band_stay_nested():
    """Asymmetric corrections that cross an over-wide prefit band: the empty sets' points
    lie inside the smaller levels' intervals (they sat at the crossed interval's centre,
    which moves with alpha: 24 of 200 rows were not nested)."""
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import QuantileRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 1))
    y = X[:, 0] + 0.3 * rng.normal(size=400)
    low = QuantileRegressor(quantile=0.01, alpha=0.0, solver="highs").fit(X[:200], y[:200] - 1)
    high = QuantileRegressor(quantile=0.99, alpha=0.0, solver="highs").fit(X[:200], y[:200] + 1)
    cqr = ConformalizedQuantileRegressor(
        (FrozenEstimator(low), FrozenEstimator(high)), symmetric=False
    ).calibrate(X[200:300], y[200:300])
    levels = [0.05, 0.3, 0.6, 0.9]
    out = cqr.predict_interval(X[300:], alpha=levels)
    assert (out[:, 0, :] <= out[:, 1, :]).all()
    assert (out[:, 0, 1:] >= out[:, 0, :-1] - 1e-12).all()  # larger alpha: inside
    assert (out[:, 1, 1:] <= out[:, 1, :-1] + 1e-12).all()
    assert (out[:, 0, -1] == out[:, 1, -1]).any()  # some sets are empty (the case tested)


def test_nan_goes_to_pipelines_that_impute_and_a_refusing_model_is_named():
    """CQR refused NaN for every Pipeline (scikit-learn's tags refuse it for any Pipeline,
    and the band copied them), also the imputing one its own message advised, and named
    its internal band; now the band takes NaN unless one of its models refuses it."""
    from sklearn.impute import SimpleImputer

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] + rng.normal(size=300)
    X[::7, 1] = np.nan

    def imputing(level):
        return make_pipeline(SimpleImputer(), QuantileRegressor(quantile=level, alpha=0))

    pair = ConformalizedQuantileRegressor((imputing(0.05), imputing(0.95)), alpha=0.1)
    intervals = (
        pair.fit(X[:150], y[:150]).calibrate(X[150:250], y[150:250]).predict_interval(X[250:])
    )
    assert np.isfinite(intervals).all() and (intervals[:, 0] <= intervals[:, 1]).all()
    refusing = ConformalizedQuantileRegressor(GradientBoostingRegressor(loss="quantile"))
    with pytest.raises(ValueError, match="`X` contains NaN and GradientBoostingRegressor"):
        refusing.fit(X[:150], y[:150])


def test_generator_seed_is_not_drawn_by_harmless_calls():
    """The default model drew its seed from the user's Generator whenever it was built,
    which get_tags and the parameter checks do: the same seed then gave other numbers."""
    from sklearn.utils import get_tags

    from uqconform import ConformalizedQuantileRegressor

    rng = np.random.default_rng(5)
    before = rng.bit_generator.state
    get_tags(ConformalizedQuantileRegressor(random_state=rng))
    assert rng.bit_generator.state == before
    X, y = regression_data(200)

    def seed_after(prepare):
        model = ConformalizedQuantileRegressor(random_state=np.random.default_rng(42))
        prepare(model)
        return model.fit(X, y).estimator_.lower.random_state

    assert seed_after(lambda m: None) == seed_after(get_tags) is not None
    # the same with a legacy RandomState (determinism review, stop 58: it was drawn from)
    legacy = np.random.RandomState(5)
    before_legacy = legacy.get_state()[1].copy()
    get_tags(ConformalizedQuantileRegressor(random_state=legacy))
    np.testing.assert_array_equal(legacy.get_state()[1], before_legacy)

    def legacy_seed_after(prepare):
        model = ConformalizedQuantileRegressor(random_state=np.random.RandomState(42))
        prepare(model)
        return model.fit(X, y).estimator_.lower.random_state

    assert legacy_seed_after(lambda m: None) == legacy_seed_after(get_tags) is not None


def test_quantile_band_fit_trains_clones_and_leaves_the_given_models_alone():
    """QuantileBand.fit trained the user's `lower` and `upper` in place (stop 57): it
    trains clones, `lower_` and `upper_`, which predict reads; CQR is unchanged."""
    import warnings

    from sklearn.base import clone
    from sklearn.utils.estimator_checks import check_estimators_overwrite_params

    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=4)
    lo, hi = _hgb(quantile=0.05), _hgb(quantile=0.95)
    band = QuantileBand(lo, hi).fit(Xf, yf)
    assert band.lower is lo and band.upper is hi
    for model in (lo, hi):
        with pytest.raises(NotFittedError):
            check_is_fitted(model)
    expected = np.c_[clone(lo).fit(Xf, yf).predict(Xt), clone(hi).fit(Xf, yf).predict(Xt)]
    np.testing.assert_array_equal(band.predict(Xt), expected)
    np.testing.assert_array_equal(band.lower_.predict(Xt), expected[:, 0])
    assert band.n_features_in_ == Xf.shape[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimators_overwrite_params(
            "QuantileBand", QuantileBand(_hgb(quantile=0.1), _hgb(quantile=0.9))
        )
    for method in (QuantileBand.fit, QuantileBand.predict):
        assert "Parameters\n" in (method.__doc__ or "") and "Returns\n" in method.__doc__
    # CQR around the band: the user's models untouched, the intervals those of its clones
    cqr = ConformalizedQuantileRegressor(QuantileBand(lo, hi)).fit(Xf, yf).calibrate(Xc, yc)
    with pytest.raises(NotFittedError):
        check_is_fitted(lo)
    lower, upper = clone(lo).fit(Xf, yf), clone(hi).fit(Xf, yf)
    q = conformal_quantile(np.maximum(lower.predict(Xc) - yc, yc - upper.predict(Xc)), 0.1)[0]
    out = cqr.predict_interval(Xt)
    np.testing.assert_allclose(out, np.c_[expected[:, 0] - q, expected[:, 1] + q])
    np.testing.assert_array_equal(cqr.estimator_.lower.predict(Xt), expected[:, 0])
    # a band of fitted models is used as is, without fit
    fitted = QuantileBand(lower, upper)
    np.testing.assert_array_equal(fitted.predict(Xt), expected)
    prefit = ConformalizedQuantileRegressor(fitted).calibrate(Xc, yc)
    np.testing.assert_array_equal(prefit.predict_interval(Xt), out)
    # a band trained by its own fit is adopted by calibrate (diffrev20/21: it was refused
    # as unfitted, its `lower` and `upper` being the untouched given models)
    adopted = ConformalizedQuantileRegressor(band).calibrate(Xc, yc)
    np.testing.assert_allclose(adopted.predict_interval(Xt), out)
    # ... and CQR's fit trains the band's given models as they are set now, not the clones
    # its earlier fit trained (diffrev22)
    band.set_params(lower=_hgb(quantile=0.1), upper=_hgb(quantile=0.9))
    refit = ConformalizedQuantileRegressor(band).fit(Xf, yf)
    assert (refit.estimator_.lower.quantile, refit.estimator_.upper.quantile) == (0.1, 0.9)


@pytest.mark.parametrize("value", [3, ["quantile"], 0.5])
def test_quantile_param_that_is_not_a_name_is_refused_by_name(value):
    (Xf, yf), _, _ = _split()
    with pytest.raises(TypeError, match=r"`quantile_param` must be None or the name"):
        ConformalizedQuantileRegressor(_hgb(), quantile_param=value).fit(Xf, yf)
