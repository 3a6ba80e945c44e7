"""CONTRA and ResidualCONTRA (uqconform.multioutput.contra).

Coverage is checked the way ``test_multidim.py`` does it: the flow is trained once, a pool of
rows is resplit ``R`` times into calibration and test rows, and the pooled coverage must lie
in `uqconform.evaluation.coverage_bounds` (confidence 0.999, fixed seeds). Coverage holds for
any trained flow, so the flows here are tiny and trained for a few epochs; only the
efficiency test trains a (still small) flow well enough to beat the ellipsoid and the box.
"""

from __future__ import annotations

import pickle
import sys
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.ensemble import BaggingRegressor, RandomForestRegressor
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.model_selection import GroupKFold, TimeSeriesSplit, train_test_split
from sklearn.utils.estimator_checks import parametrize_with_checks

torch = pytest.importorskip("torch")
pytest.importorskip("nflows")

from uqconform.evaluation import coverage, coverage_bounds, mean_volume  # noqa: E402
from uqconform.multioutput.baselines import (  # noqa: E402
    EllipsoidalConformalRegressor,
    RectangularConformalRegressor,
)
from uqconform.multioutput.contra import CONTRA, ResidualCONTRA  # noqa: E402
from uqconform.regions import PredictionRegion  # noqa: E402

TINY = {"n_blocks": 2, "hidden_features": 8, "max_epochs": 5, "batch_size": 64}
R = 20
N_CAL, N_TEST = 300, 500
CONFIDENCE = 0.999


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def banana(n, seed=0):
    """Curved y | x: a parabola whose vertex moves with x."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 2))
    t = rng.normal(size=n)
    Y = np.c_[
        t + X[:, 1] + 0.1 * rng.normal(size=n),
        t**2 + 0.5 * X[:, 0] + 0.1 * rng.normal(size=n),
    ]
    return X, Y


def assert_coverage_follows_the_law(model, Y_test, region):
    """One calibration set, one test set: the coverage count is Beta-Binomial (continuous
    scores), so both ends of `coverage_bounds` apply."""
    low, high = coverage_bounds(
        model.n_calibration_, model.alpha, len(Y_test), confidence=CONFIDENCE
    )
    observed = coverage(Y_test, region)
    assert low <= observed <= high, f"coverage {observed:.4f} outside [{low:.4f}, {high:.4f}]"


@pytest.fixture(scope="module")
def data():
    return banana(1600)  # 400 fit rows, a pool of 1200 for the resplits


@pytest.fixture(scope="module")
def fitted(data):
    X, Y = data
    models = {
        "contra": CONTRA(random_state=0, **TINY),
        "contra-spline": CONTRA(flow="spline", random_state=0, **TINY),
        "oof": ResidualCONTRA(Ridge(), random_state=0, **TINY),
        "conditional": ResidualCONTRA(Ridge(), conditional=True, random_state=0, **TINY),
        "split": ResidualCONTRA(Ridge(), residuals="split", random_state=0, **TINY),
        "oob": ResidualCONTRA(
            RandomForestRegressor(20, oob_score=True, max_depth=4, random_state=0),
            residuals="oob",
            random_state=0,
            **TINY,
        ),
    }
    return {name: model.fit(X[:400], Y[:400]) for name, model in models.items()}


# ---- validity ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["contra", "contra-spline", "oof", "conditional", "split", "oob"])
def test_coverage_over_resplits_is_within_bounds(fitted, data, name):
    X, Y = data
    model = pickle.loads(pickle.dumps(fitted[name]))  # a copy: calibration changes state
    pool_X, pool_Y = X[400:], Y[400:]
    rng = np.random.default_rng(1)
    covered = []
    for _ in range(R):  # resplits of the pool: each calibrates and tests the same flow
        order = rng.permutation(pool_Y.shape[0])
        cal, test = order[:N_CAL], order[N_CAL : N_CAL + N_TEST]
        model.calibrate(pool_X[cal], pool_Y[cal])
        covered.append(coverage(pool_Y[test], model.predict_set(pool_X[test])))
    low, high = coverage_bounds(N_CAL, 0.1, N_TEST, confidence=CONFIDENCE, n_repeats=R)
    assert low <= np.mean(covered) <= high


def test_prefit_estimator_trains_the_flow_on_half_the_calibration_rows(data):
    X, Y = data
    ridge = Ridge().fit(X[:400], Y[:400])
    model = ResidualCONTRA(ridge, random_state=0, **TINY).calibrate(X[400:1000], Y[400:1000])
    assert model.n_calibration_ == 300 and model.estimator_ is ridge
    assert_coverage_follows_the_law(model, Y[1000:], model.predict_set(X[1000:]))
    frozen = ResidualCONTRA(FrozenEstimator(ridge), random_state=0, **TINY)
    frozen.fit(X[400:800], Y[400:800]).calibrate(X[800:1100], Y[800:1100])
    assert frozen.n_calibration_ == 300
    np.testing.assert_array_equal(frozen.predict(X[:5]), ridge.predict(X[:5]))
    assert_coverage_follows_the_law(frozen, Y[1100:], frozen.predict_set(X[1100:]))


# ---- the region -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["contra", "contra-spline", "oof", "conditional"])
def test_boundary_points_score_exactly_the_radius(fitted, data, name):
    X, Y = data
    model = fitted[name].calibrate(X[400:700], Y[400:700])
    region = model.predict_set(X[-6:])
    assert isinstance(region, PredictionRegion)
    boundary = region.boundary(n_points=12)
    for j in range(0, 12, 3):
        scores = model.nonconformity(X[-6:], boundary[:, j])
        np.testing.assert_allclose(scores, model.radius_, rtol=1e-4)
    centre = model.predict(X[-6:])
    assert region.contains(centre).all()  # the image of the latent origin


def test_predict_interval_searches_the_number_of_points_it_is_given(fitted, data):
    """`n_points` reaches the flow's bounding-box search: the box of 64 angles (each
    extreme refined between its neighbours) is `bounding_box(64)`, not the default's."""
    X, Y = data
    model = fitted["contra"].calibrate(X[400:700], Y[400:700])
    coarse = model.predict_interval(X[-6:], n_points=64)
    np.testing.assert_array_equal(coarse, model.predict_set(X[-6:]).bounding_box(64))
    default = model.predict_interval(X[-6:])
    np.testing.assert_array_equal(default, model.predict_set(X[-6:]).bounding_box())
    assert (coarse != default).any()
    both = model.predict_interval(X[-6:], alpha=[0.1, 0.2], n_points=64)
    np.testing.assert_array_equal(both[..., 0], coarse)
    with pytest.raises(ValueError, match="n_points"):
        model.predict_interval(X[-6:], n_points=3)


def test_unconditional_residual_regions_are_translates(fitted, data):
    X, Y = data
    model = fitted["oof"].calibrate(X[400:700], Y[400:700])
    boundary = model.predict_set(X[-2:]).boundary(n_points=16)
    shift = model.predict(X[-1:]) - model.predict(X[-2:-1])
    np.testing.assert_allclose(boundary[1] - boundary[0], np.tile(shift, (16, 1)), atol=1e-5)


def test_chi_diagnostic(fitted, data):
    """A perfect flow's latent code is N(0, I_d): its l2 norm follows chi(d), whose
    1 - alpha quantile is the radius. For d = 2 (Rayleigh) it is sqrt(-2 log alpha)."""
    X, Y = data
    alphas = np.array([0.1, 0.2])
    model = fitted["contra"].set_params(alpha=alphas.tolist())
    model.calibrate(X[400:700], Y[400:700])
    report = model.chi_diagnostic()
    d = Y.shape[1]
    expected = stats.chi.ppf(1 - alphas, df=d)
    assert model.norm == "l2" and d == 2
    np.testing.assert_allclose(expected, np.sqrt(-2 * np.log(alphas)), rtol=1e-12)
    np.testing.assert_allclose(report["chi_quantile"], expected, rtol=1e-12)
    np.testing.assert_array_equal(report["radius"], model.radius_)
    np.testing.assert_allclose(report["ratio"], model.radius_ / model.chi_quantile_)
    model.set_params(alpha=0.1)


def test_flow_regions_are_smaller_than_ellipses_and_boxes_on_curved_data():
    X, Y = banana(2500, seed=3)
    fit, cal, test = slice(0, 1500), slice(1500, 2000), slice(2000, 2500)
    contra = CONTRA(n_blocks=3, hidden_features=32, max_epochs=40, random_state=0)
    contra.fit(X[fit], Y[fit]).calibrate(X[cal], Y[cal])
    sizes = {}
    for name, model in {
        "contra": contra,
        "ellipse": EllipsoidalConformalRegressor(LinearRegression(), random_state=0),
        "box": RectangularConformalRegressor(LinearRegression(), random_state=0),
    }.items():
        model.fit(X[fit], Y[fit]).calibrate(X[cal], Y[cal])
        region = model.predict_set(X[test])
        assert_coverage_follows_the_law(model, Y[test], region)
        sizes[name] = mean_volume(region[:100], n_samples=300, random_state=0)
    assert sizes["contra"] < 0.8 * min(sizes["ellipse"], sizes["box"])


def test_residual_flow_regions_are_smaller_than_ellipses_around_the_same_model():
    """ResidualCONTRA's claim: around the same point model, a flow learns the shape of the
    residuals, so on curved residuals (the banana: a linear model leaves ``(t, t**2)``) its
    regions are smaller than the ellipse's. The factor 0.8 is the issue's target for a flow
    on curved data (``CURVED_TARGET`` of the multioutput benchmark, set for CONTRA on the
    banana, moons and mixture problems, as in the test above); the residual flow sees the
    same curved shape here. Pooled over 3 fresh
    data sets; both coverages are first checked against the pooled split-CP law, so the
    volumes are compared at valid coverage."""
    repeats, n_fit, n_cal, n_test = 3, 1000, 300, 300
    volumes = {"flow": [], "ellipse": []}
    hits = {"flow": [], "ellipse": []}
    for r in range(repeats):
        X, Y = banana(n_fit + n_cal + n_test, seed=[7, r])
        fit, cal, test = slice(0, n_fit), slice(n_fit, n_fit + n_cal), slice(n_fit + n_cal, None)
        models = {
            "flow": ResidualCONTRA(
                LinearRegression(), n_blocks=2, hidden_features=16, max_epochs=40, random_state=r
            ),
            "ellipse": EllipsoidalConformalRegressor(LinearRegression(), random_state=r),
        }
        for name, model in models.items():
            region = model.fit(X[fit], Y[fit]).calibrate(X[cal], Y[cal]).predict_set(X[test])
            assert model.n_calibration_ == n_cal
            hits[name].append(coverage(Y[test], region))
            volumes[name].append(mean_volume(region[:100], n_samples=300, random_state=0))
    low, high = coverage_bounds(n_cal, 0.1, n_test, confidence=CONFIDENCE, n_repeats=repeats)
    for name, covered in hits.items():
        assert low <= np.mean(covered) <= high, f"{name}: coverage {np.mean(covered):.4f}"
    flow, ellipse = np.mean(volumes["flow"]), np.mean(volumes["ellipse"])
    assert flow < 0.8 * ellipse, f"flow {flow:.3f} vs ellipse {ellipse:.3f}"


# ---- reproducibility and persistence ---------------------------------------------------------
@pytest.mark.parametrize("cls", [CONTRA, ResidualCONTRA])
def test_same_seed_same_regions(data, cls):
    X, Y = data
    first, second, other = (
        cls(random_state=seed, **TINY).fit(X[:300], Y[:300]).calibrate(X[300:500], Y[300:500])
        for seed in (5, 5, 6)
    )
    np.testing.assert_array_equal(first.conformity_scores_, second.conformity_scores_)
    np.testing.assert_array_equal(
        first.predict_set(X[-4:]).boundary(8), second.predict_set(X[-4:]).boundary(8)
    )
    assert not np.allclose(first.conformity_scores_, other.conformity_scores_)


@pytest.mark.parametrize("name", ["contra", "conditional", "oob"])
def test_pickle_round_trip(fitted, data, name):
    X, Y = data
    model = fitted[name].calibrate(X[400:700], Y[400:700])
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(loaded.predict(X[-5:]), model.predict(X[-5:]))
    np.testing.assert_array_equal(
        loaded.predict_set(X[-5:]).boundary(8), model.predict_set(X[-5:]).boundary(8)
    )
    np.testing.assert_array_equal(
        loaded.nonconformity(X[-5:], Y[-5:]), model.nonconformity(X[-5:], Y[-5:])
    )


def test_inputs_are_not_modified(data):
    X, Y = data[0][:300].copy(), data[1][:300].copy()
    X0, Y0 = X.copy(), Y.copy()
    model = CONTRA(random_state=0, **TINY).fit(X, Y).calibrate(X, Y)
    model.predict_set(X).contains(Y)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(Y, Y0)


# ---- scikit-learn conventions ---------------------------------------------------------------
def expected_failed_checks(estimator):
    if isinstance(estimator, CONTRA):  # ResidualCONTRA predicts with its LinearRegression
        reason = "a flow trained for 2 epochs (to keep the checks fast) is a poor point predictor"
        return {"check_regressors_train": reason}
    return {}


@pytest.mark.filterwarnings("ignore:`Y` has a single output:UserWarning")
@parametrize_with_checks(
    [
        CONTRA(random_state=0, **{**TINY, "n_blocks": 1, "max_epochs": 2}),
        ResidualCONTRA(random_state=0, cv=2, **{**TINY, "n_blocks": 1, "max_epochs": 2}),
    ],
    expected_failed_checks=expected_failed_checks,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_torch_settings_of_the_caller_are_restored(data):
    X, Y = data
    torch.set_num_threads(2)
    state = torch.get_rng_state()
    CONTRA(random_state=0, **TINY).fit(X[:200], Y[:200])
    assert torch.get_num_threads() == 2
    assert torch.equal(torch.get_rng_state(), state)


# ---- bad input ----------------------------------------------------------------------------------
def test_one_output_works_and_warns(data):
    X, Y = data
    with pytest.warns(UserWarning, match="single output"):
        model = CONTRA(random_state=0, **TINY).fit(X[:300], Y[:300, :1])
    model.calibrate(X[300:600], Y[300:600, 0])
    region = model.predict_set(X[600:])
    assert region.dim == 1 and model.n_calibration_ == 300
    assert_coverage_follows_the_law(model, Y[600:, :1], region)
    assert model.predict_interval(X[600:]).shape == (X.shape[0] - 600, 1, 2)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_targets_are_rejected(data, bad):
    X, Y = data[0][:100], data[1][:100].copy()
    Y[7, 1] = bad
    with pytest.raises(ValueError, match="`Y` contains 1 NaN or infinite value "):
        CONTRA(**TINY).fit(X, Y)
    model = ResidualCONTRA(**TINY, random_state=0).fit(X[:50], data[1][:50])
    with pytest.raises(ValueError, match="`Y` contains"):
        model.calibrate(X, Y)


def test_residual_folds_must_partition_the_fit_rows(data):
    X, Y = data[0][:100], data[1][:100]
    with pytest.raises(ValueError, match=r"`cv` \(TimeSeriesSplit\) must hold every fit row"):
        ResidualCONTRA(cv=TimeSeriesSplit(3), **TINY).fit(X, Y)


def test_output_dimension_must_match(fitted, data):
    X, Y = data
    model = fitted["contra"]
    with pytest.raises(ValueError, match="3 outputs but the model was fitted with 2"):
        model.calibrate(X[:10], np.c_[Y[:10], Y[:10, 0]])
    model.calibrate(X[400:700], Y[400:700])
    with pytest.raises(ValueError, match="features"):
        model.predict_set(X[:5, :1])
    with pytest.raises(ValueError, match=r"`Y` must have shape \(5, 2\)"):
        model.predict_set(X[:5]).contains(Y[:5, :1])


def test_calibrate_before_fit(data):
    X, Y = data
    with pytest.raises(NotFittedError, match="fit"):
        CONTRA(**TINY).calibrate(X[:50], Y[:50])
    with pytest.raises(NotFittedError, match="fit"):
        CONTRA(**TINY).predict(X[:5])


def test_conditional_changed_since_fit_needs_a_new_fit(fitted, data):
    X, Y = data
    model = clone(fitted["conditional"]).fit(X[:400], Y[:400]).calibrate(X[400:600], Y[400:600])
    model.set_params(conditional=False)  # the flow was trained with X as context
    with pytest.raises(NotFittedError, match=r"conditional=True\); call fit"):
        model.predict_set(X[600:610])
    with pytest.raises(NotFittedError, match="changed since fit"):
        model.calibrate(X[400:600], Y[400:600])
    model.set_params(conditional=True)
    assert len(model.predict_set(X[600:610])) == 10


def test_tiny_calibration_set_gives_the_whole_space(fitted, data):
    X, Y = data
    with pytest.warns(UserWarning, match="Too few calibration points"):
        model = fitted["contra"].calibrate(X[400:405], Y[400:405])
    with pytest.warns(UserWarning, match="Too few calibration points"):
        region = model.predict_set(X[:3])
    assert np.isinf(model.radius_)
    assert region.contains(Y[:3] + 1e6).all()
    np.testing.assert_array_equal(region.volume(), np.inf)


def test_missing_torch_names_the_flows_extra(data, monkeypatch):
    X, Y = data
    monkeypatch.setitem(sys.modules, "torch", None)
    for model in (CONTRA(), ResidualCONTRA()):
        with pytest.raises(ImportError, match=r'pip install "uqconform\[flows\]"'):
            model.fit(X[:50], Y[:50])


def test_divergence_is_a_clear_error(data):
    X, Y = data
    with pytest.raises(RuntimeError, match=r"diverged.*smaller learning_rate"):
        CONTRA(**{**TINY, "learning_rate": 1e6}, random_state=0).fit(X[:200], Y[:200])


@pytest.mark.parametrize(
    ("cls", "params", "message"),
    [
        (CONTRA, {"flow": "glow"}, "'flow' parameter of CONTRA"),
        (CONTRA, {"n_blocks": 0}, "'n_blocks' parameter"),
        (CONTRA, {"learning_rate": -1.0}, "'learning_rate' parameter"),
        (CONTRA, {"validation_fraction": 1.0}, "'validation_fraction' parameter"),
        (CONTRA, {"alpha": 1.5}, "alpha"),
        (CONTRA, {"device": "no-such-device"}, "`device`"),
        (ResidualCONTRA, {"residuals": "loo"}, "'residuals' parameter of ResidualCONTRA"),
        (ResidualCONTRA, {"split_size": 1.0}, "'split_size' parameter"),
        (ResidualCONTRA, {"cv": 1}, "'cv' parameter"),
    ],
)
def test_bad_parameters_name_the_argument(data, cls, params, message):
    X, Y = data
    with pytest.raises(ValueError, match=message):
        cls(**params).fit(X[:50], Y[:50])


def test_oob_needs_an_out_of_bag_model(data):
    X, Y = data
    with pytest.raises(ValueError, match="oob_score=True"):
        ResidualCONTRA(Ridge(), residuals="oob", **TINY).fit(X[:50], Y[:50])
    # scikit-learn's bagging has no multi-output OOB predictions: named before fitting
    bagging = BaggingRegressor(oob_score=True)
    with pytest.raises(ValueError, match="BaggingRegressor computes out-of-bag predictions for"):
        ResidualCONTRA(bagging, residuals="oob", **TINY).fit(X[:50], Y[:50])
    # cv=None would be cross_val_predict's unshuffled 5 folds: refused, not reinterpreted
    with pytest.raises(ValueError, match="`cv` must be an int or a cross-validation splitter"):
        ResidualCONTRA(Ridge(), cv=None, **TINY).fit(X[:50], Y[:50])


def test_rows_without_an_out_of_bag_prediction_are_left_out(data):
    """scikit-learn fills them with 0 (not NaN): a residual Y - 0 would distort the flow
    (regression test: the rows were used, with no warning from uqconform)."""
    X, Y = data
    forest = RandomForestRegressor(3, oob_score=True, random_state=0)
    in_every_sample = np.ones(400, dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's own warning about the OOB rows
        for rows in clone(forest).fit(X[:400], Y[:400]).estimators_samples_:
            in_every_sample &= np.isin(np.arange(400), rows)
    missing = int(in_every_sample.sum())
    assert missing > 0  # the fixture does have such rows
    with pytest.warns(UserWarning, match=f"^{missing} fit rows have no out-of-bag prediction"):
        ResidualCONTRA(forest, residuals="oob", random_state=0, **TINY).fit(X[:400], Y[:400])


def test_non_numeric_features_are_refused_with_a_clear_message(data):
    _, Y = data
    words = np.array([["a", "b"]] * 50, dtype=object)
    with pytest.raises(ValueError, match="numeric"):
        CONTRA(**TINY).fit(words, Y[:50])
    from scipy import sparse

    X = data[0]
    with pytest.raises(
        TypeError, match=r"dense features X: convert a sparse matrix with X\.toarray"
    ):
        CONTRA(**TINY).fit(sparse.csr_matrix(X[:50]), Y[:50])  # was "encode or impute X"


def test_verbose_shows_a_progress_bar(data, capsys):
    X, Y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        CONTRA(**{**TINY, "max_epochs": 2}, verbose=True, random_state=0).fit(X[:100], Y[:100])
    assert "CONTRA flow" in capsys.readouterr().err


def test_split_residuals_weigh_the_model_rows_only(data):
    """With residuals='split' the model trains on part of the fit rows: per-row fit
    parameters are taken on the same rows (other ones pass as given)."""
    X, Y = data[0][:120], data[1][:120]
    weights = np.random.default_rng(3).uniform(0.5, 2.0, 120)
    model = ResidualCONTRA(Ridge(), residuals="split", random_state=0, **TINY)
    model.fit(X, Y, sample_weight=weights)
    rows = np.arange(120)
    model_rows = np.sort(train_test_split(rows, test_size=model.split_size, random_state=0)[0])
    expected = Ridge().fit(X[model_rows], Y[model_rows], sample_weight=weights[model_rows])
    np.testing.assert_array_equal(model.estimator_.coef_, expected.coef_)


def test_messages_from_a_multi_output_audit():
    """The start kept by CONTRA on small data ignores X, with a warning; CUDA on a torch
    without it, NaN in CONTRA's X, a Bonferroni box short of calibration rows, and a
    changed ``n_neighbors`` each get a message that names the real cause."""
    import torch

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3))
    Y = X[:, :2] * 3 + rng.normal(size=(1000, 2))
    with pytest.warns(UserWarning, match=r"CONTRA kept its untrained start \(20 fit rows"):
        small = CONTRA(n_blocks=1, hidden_features=8, max_epochs=20, random_state=0)
        small.fit(X[:20], Y[:20])
    centres = small.predict(X[:5])
    np.testing.assert_allclose(centres, np.broadcast_to(centres[0], centres.shape), atol=1e-6)
    # two fit rows: one validation row let a flow trained on the other replace the start
    # without the one-standard-error test, and regions 1e5 times the data's spread came
    # without a word; now the rank is named and the start kept
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tiny = CONTRA(n_blocks=1, hidden_features=8, max_epochs=5, random_state=0)
        tiny.fit(X[:2], Y[:2])
    messages = [str(w.message) for w in caught]
    assert any("2 rows that train the flow span only 1 of the 2" in m for m in messages)
    assert any("kept its untrained start (2 fit rows" in m for m in messages)
    assert tiny.flow_.history["best_epoch"] == 0
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"`device`='cuda'.*no CUDA device"):
            CONTRA(max_epochs=1, device="cuda").fit(X[:100], Y[:100])
    X_nan = X[:100].copy()
    X_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="impute them in X before fit, calibrate and"):
        CONTRA(max_epochs=1).fit(X_nan, Y[:100])
    box = RectangularConformalRegressor(Ridge(), bonferroni=True).fit(X[:400], Y[:400])
    with pytest.warns(UserWarning, match=r"alpha=0.1 \(each of the score's 2 columns at "
                      r"alpha / 2 = 0.05\).*at least 19 points are needed"):  # fmt: skip
        box.calibrate(X[400:415], Y[400:415])
    local = EllipsoidalConformalRegressor(Ridge(), covariance="local", random_state=0)
    local.fit(X[:400], Y[:400]).set_params(n_neighbors=5)
    with pytest.raises(NotFittedError, match=r"it used n_neighbors=50"):
        local.calibrate(X[400:700], Y[400:700])


def test_residual_contra_warns_when_it_keeps_its_gaussian_start():
    """A residual flow that beats no trained state keeps its Gaussian start, the Gaussian fit
    of the residuals, which fit says (it was silent). Review finding: the warning said the
    regions were then the ellipses of EllipsoidalConformalRegressor; those are centred on
    the prediction and shaped by the second moment about 0, the start on the residuals'
    mean with their centred covariance (the same only when the residuals average 0)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    Y = X * 3 + rng.normal(size=(30, 2))
    model = ResidualCONTRA(LinearRegression(), n_blocks=1, hidden_features=8, max_epochs=5,
                           random_state=0)  # fmt: skip
    with pytest.warns(
        UserWarning, match=r"ResidualCONTRA kept its untrained start \(30 resid"
    ) as record:
        model.fit(X, Y)
    (message,) = [str(w.message) for w in record if "untrained start" in str(w.message)]
    assert "the prediction plus the residuals' mean" in message
    assert "centred covariance" in message and "regions are the ellipses" not in message
    assert model.flow_.history["best_epoch"] == 0


def test_residual_contra_refuses_a_group_splitter_as_cv_by_name():
    """Review finding: a group splitter as `cv` gave scikit-learn's bare "The 'groups'
    parameter should not be None." (and with fit(X, Y, groups=g): "Ridge.fit() got an
    unexpected keyword argument 'groups'"); SplitConformalRegressor names `cv`."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    Y = X[:, :2] + rng.normal(size=(120, 2))
    model = ResidualCONTRA(Ridge(), cv=GroupKFold(3), random_state=0, **TINY)
    for kwargs in ({}, {"groups": np.arange(120) % 10}):
        with pytest.raises(ValueError, match=r"`cv` \(GroupKFold\) splits by group, but fit"):
            model.fit(X, Y, **kwargs)
    assert not hasattr(model, "estimator_")  # refused before the model is fitted
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a tiny flow may keep its start
        model.set_params(residuals="split").fit(X, Y)  # no folds there: cv is not read


@pytest.mark.parametrize(
    "name, change",
    [
        ("oof", {"estimator__alpha": 1e4}),
        ("oof", {"estimator": LinearRegression()}),
        ("oof", {"cv": 3}),
        ("split", {"split_size": 0.5}),
        ("oof", {"residuals": "split"}),
        ("oof", {"random_state": 1}),
        ("oof", {"n_blocks": 1}),
        ("contra", {"hidden_features": 4}),
        ("contra", {"max_epochs": 2}),
    ],
)
def test_a_model_or_flow_changed_since_fit_asks_for_a_new_fit(fitted, data, name, change):
    """API review: set_params(estimator=...) or set_params(estimator__alpha=...) after fit
    was ignored: calibrate and predict_set used the old Ridge(alpha=1.0) and its flow
    without a word (the single-model wrappers ask for a new fit); so were the residuals'
    source and the flow's settings."""
    X, Y = data
    model = clone(fitted[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a tiny flow may keep its start
        model.fit(X[:400], Y[:400]).calibrate(X[400:600], Y[400:600])
    model.set_params(**change)
    with pytest.raises(NotFittedError, match=r"changed since fit .*call fit\(X, y\) and"):
        model.calibrate(X[400:600], Y[400:600])
    with pytest.raises(NotFittedError, match="changed since fit"):
        model.predict_set(X[600:610])


def test_flow_settings_fit_did_not_read_need_no_new_fit(fitted, data):
    """The other side of the finding above: the level, the device, the progress bar, the
    threads, and the folds of a split need no new fit; a fitted model adopted by
    calibrate asks for a new calibration only."""
    X, Y = data
    model = clone(fitted["split"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # a tiny flow may keep its start
        model.fit(X[:400], Y[:400]).calibrate(X[400:600], Y[400:600])
        model.set_params(alpha=0.2, device="cpu", verbose=False, n_jobs=2, cv=3)
        assert len(model.predict_set(X[600:610])) == 10
        adopted = ResidualCONTRA(Ridge().fit(X[:400], Y[:400]), random_state=0, **TINY)
        adopted.calibrate(X[400:700], Y[400:700]).set_params(split_size=0.5)
        assert len(adopted.predict_set(X[700:710])) == 10
        other = Ridge(alpha=1e4).fit(X[:400], Y[:400])
        adopted.set_params(estimator=other)
        with pytest.raises(NotFittedError, match=r"changed since .*call calibrate\(X_calib"):
            adopted.predict_set(X[700:710])
        assert adopted.calibrate(X[400:700], Y[400:700]).estimator_ is other


def test_the_point_that_set_the_radius_is_inside_its_region_predicted_alone():
    """mo review (stop 56): on a discrete target many scores tie at the radius, and a flow's
    float32 pass rounds one row differently from a batch: the calibration row whose score
    is the radius, predicted alone, fell outside its own closed region (test coverage 0.84
    one row per call, 1.00 in one batch, at nominal 0.90)."""
    atoms = np.array([[0.0, 0.0], [1.0, 0.3]])
    rng = np.random.default_rng([31, 4])
    X = np.zeros((699, 1))
    Y = atoms[rng.choice(2, 699, p=[0.85, 0.15])]
    model = CONTRA(
        alpha=0.1, flow="spline", n_blocks=2, hidden_features=8, max_epochs=10, random_state=4
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X[:300], Y[:300]).calibrate(X[300:399], Y[300:399])
    at_radius = np.flatnonzero(model.conformity_scores_ == model.radius_)
    assert at_radius.size  # the radius is a calibration row's score
    for j in at_radius[:5]:
        row = slice(300 + j, 301 + j)
        assert model.predict_set(X[row]).contains(Y[row])[0]
    alone = [model.predict_set(X[i : i + 1]).contains(Y[i : i + 1])[0] for i in range(399, 460)]
    batch = model.predict_set(X[399:460]).contains(Y[399:460])
    assert np.array_equal(alone, batch)


def test_flow_regions_keep_their_rows_when_the_caller_refills_x():
    """Review s64: a flow region held the caller's own float64 X, so refilling that array
    with the next batch moved regions already returned (coverage 0.93 -> 0.55)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 1))
    Y = np.c_[X[:, 0], X[:, 0] ** 2] + 0.3 * rng.normal(size=(300, 2))
    for model in (
        CONTRA(random_state=0, **{**TINY, "n_blocks": 1, "max_epochs": 2}),
        ResidualCONTRA(LinearRegression(), conditional=True, random_state=0, **TINY),
    ):
        model.fit(X[:150], Y[:150]).calibrate(X[150:250], Y[150:250])
        batch = X[250:].copy()
        region = model.predict_set(batch)
        before = region.contains(Y[250:]), region.latent(Y[250:])
        batch[:] = rng.normal(size=batch.shape)  # the next batch, in the same array
        np.testing.assert_array_equal(region.contains(Y[250:]), before[0])
        np.testing.assert_array_equal(region.latent(Y[250:]), before[1])


def test_a_split_of_fewer_than_three_fit_rows_is_named():
    """Review s64: with 1 or 2 fit rows the message asked for a split_size "above 1 and at
    most 0" (an empty range)."""
    X, Y = np.arange(4.0).reshape(2, 2), np.arange(4.0).reshape(2, 2)
    model = ResidualCONTRA(LinearRegression(), residuals="split")
    for n in (1, 2):
        with pytest.raises(ValueError, match=rf"needs at least 3 fit rows .*got {n}"):
            model.fit(X[:n], Y[:n])


@pytest.mark.parametrize("split_size", [0.001, 0.999])
def test_a_split_size_that_leaves_too_few_rows_is_named(split_size):
    """mo review (stop 57, split_size.py): split_size=0.999 got scikit-learn's "test_size
    ... train set will be empty", 0.001 "A flow needs at least 2 rows" after a warning of
    "1 rows" spanning 1 of 2 directions; neither named `split_size`."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 1))
    Y = np.c_[X[:, 0], -X[:, 0]] + rng.normal(size=(200, 2))
    model = ResidualCONTRA(LinearRegression(), residuals="split", split_size=split_size)
    with pytest.raises(ValueError, match=r"`split_size`=.* of 200 fit rows leaves .*above 0\.005"):
        model.fit(X, Y)
