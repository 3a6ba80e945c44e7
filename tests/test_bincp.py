"""BinCP (binarised randomised smoothing, one certificate) and the mean-bounding baseline.

The certificate is checked where it is exact: for a linear classifier the smoothed
probability of a class is ``Phi(margin / (sigma ||w||))`` in closed form, and the shift of norm
``r`` against ``w`` lowers it to exactly ``Phi(Phi^{-1}(p) - r / sigma)``. Coverage is checked the
way the other wrappers are: a fixed model, ``R`` calibration/test resplits, pooled coverage at
least the lower end of `coverage_bounds` (BinCP is conservative, so only the lower end applies),
here for test inputs moved by random, worst-of-k and gradient (worst-case for this model)
perturbations of the certified radius.
"""

from __future__ import annotations

import pickle
import re
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import Unchanged
from scipy import stats
from sklearn.datasets import load_iris
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from statsmodels.stats.proportion import proportion_confint

from uqconform.classification.bincp import (
    BinarizedSmoothedClassifier,
    MeanSmoothedClassifier,
    certified_probability,
    clopper_pearson_lower,
    clopper_pearson_upper,
)
from uqconform.evaluation import coverage_bounds
from uqconform.evaluation.perturbation import random_l2_perturbation, worst_of_k_perturbation

CENTRES = np.array([[0.0, 0.0], [1.5, 0.0], [0.0, 1.5]])
N_CAL, N_TEST, R = 250, 400, 8


def blobs(n, seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return CENTRES[y] + 0.6 * rng.normal(size=(n, 2)), y


@pytest.fixture(scope="module")
def problem():
    X, y = blobs(2400, 0)
    model = LogisticRegression().fit(X[:800], y[:800])
    return model, X[800:], y[800:]


def gradient_attack(model, X, y, r):
    """Shift of norm r along minus the gradient of the true label's probability (linear)."""
    p = model.predict_proba(X)
    W = model.coef_
    rows = np.arange(len(y))
    g = p[rows, y][:, None] * (W[y] - p @ W)
    return X - r * g / np.linalg.norm(g, axis=1, keepdims=True)


def split(X, y, seed):
    order = np.random.default_rng(seed).permutation(len(y))
    cal, test = order[:N_CAL], order[N_CAL : N_CAL + N_TEST]
    return X[cal], y[cal], X[test], y[test]


# ---- the certificate ------------------------------------------------------------------------
def test_certified_probability_is_exact_for_a_linear_classifier():
    sigma, d = 0.4, 5
    rng = np.random.default_rng(1)
    w, b = rng.normal(size=d), 0.3
    x = rng.normal(size=(50, d))
    unit = w / np.linalg.norm(w)

    def smoothed(points):  # P_eps[w.(x + eps) + b >= 0], closed form
        return stats.norm.cdf((points @ w + b) / (sigma * np.linalg.norm(w)))

    p = smoothed(x)
    for r in (0.0, 0.1, 0.5, 1.3):
        worst = smoothed(x - r * unit)  # the shift against w: the certificate is tight
        np.testing.assert_allclose(certified_probability(p, r, sigma), worst, rtol=1e-8)
        other = x + r * random_l2_perturbation(np.zeros_like(x), 1.0, random_state=int(10 * r))
        assert (smoothed(other) >= certified_probability(p, r, sigma) - 1e-12).all()
    # and a direct Monte Carlo estimate of the shifted probability agrees with the formula
    m = 20000
    eps = sigma * rng.normal(size=(m, d))
    point = x[:3] - 0.5 * unit
    hits = ((point[:, None, :] + eps) @ w + b >= 0).sum(axis=1)
    low, high = proportion_confint(hits, m, alpha=1e-4, method="beta")
    target = certified_probability(p[:3], 0.5, sigma)
    assert ((low <= target) & (target <= high)).all()


def test_clopper_pearson_bounds_match_statsmodels_one_sided():
    n, level = 150, 0.001 / 210
    k = np.arange(n + 1)
    low, high = proportion_confint(k, n, alpha=2 * level, method="beta")
    np.testing.assert_allclose(clopper_pearson_lower(k, n, level), np.nan_to_num(low), atol=1e-9)
    np.testing.assert_allclose(
        clopper_pearson_upper(k, n, level), np.nan_to_num(high, nan=1.0), atol=1e-9
    )
    # review finding: fractional counts gave numbers (0.060 for 2.5 successes in 10)
    with pytest.raises(ValueError, match="`successes` must be whole counts"):
        clopper_pearson_lower(2.5, 10, 0.05)
    with pytest.raises(ValueError, match="`n` must be a whole number of trials"):
        clopper_pearson_upper(1, 2.5, 0.05)


@pytest.mark.parametrize("p_true", [0.05, 0.4, 0.93])
def test_clopper_pearson_directions_fail_with_at_most_their_level(p_true):
    n, level = 60, 0.02
    k = np.arange(n + 1)
    pmf = stats.binom.pmf(k, n, p_true)
    lower, upper = clopper_pearson_lower(k, n, level), clopper_pearson_upper(k, n, level)
    assert (lower <= k / n).all() and (upper >= k / n).all()
    assert pmf[lower > p_true].sum() <= level  # the lower bound overshoots rarely
    assert pmf[upper < p_true].sum() <= level  # the upper bound undershoots rarely


def test_calibration_uses_lower_and_test_uses_upper_bounds(problem):
    model, X, y = problem
    cp = BinarizedSmoothedClassifier(model, mode="tau", tau=0.5, random_state=0)
    cp.calibrate(X[:200], y[:200])
    level, m = cp.failure_level_, cp.n_samples
    samples = np.random.default_rng(0).random((40, m))
    hits = (samples >= 0.5).sum(axis=1)
    np.testing.assert_allclose(
        cp._calibration_statistic(samples, level), clopper_pearson_lower(hits, m, level)
    )
    assert (cp._calibration_statistic(samples, level) <= hits / m).all()
    upper = cp._test_statistic(samples[:, :, None], cp.threshold_)[:, 0]
    np.testing.assert_allclose(upper, clopper_pearson_upper(hits, m, level))
    assert (upper >= hits / m).all()


@pytest.mark.parametrize("m", [50, 150, 1000])
def test_base_probability_is_the_one_sided_clopper_pearson_bound(problem, m):
    """At least k = ceil(p m) of the m samples reach the calibrated threshold by
    construction; the base probability is the one-sided Clopper-Pearson lower bound of k
    successes in m at the failure level, the Beta(k, m - k + 1) quantile (statsmodels'
    two-sided "beta" interval at twice the level has the same lower end)."""
    model, X, y = problem
    # 207 calibration points + 3 classes: each bound fails with probability eta / 210
    cp = BinarizedSmoothedClassifier(model, n_samples=m, p=0.6, eta=1e-3, random_state=0)
    cp.calibrate(X[:207], y[:207])
    level = 1e-3 / 210
    assert cp.failure_level_ == pytest.approx(level)
    k = int(np.ceil(0.6 * m - 1e-9))
    expected = stats.beta.ppf(level, k, m - k + 1)
    assert proportion_confint(k, m, alpha=2 * level, method="beta")[0] == pytest.approx(expected)
    assert cp.base_probability_ == pytest.approx(expected, rel=1e-9)
    for r in (0.06, 0.12, 0.25):
        closed = stats.norm.cdf(stats.norm.ppf(cp.base_probability_) - r / cp.sigma)
        assert cp.certified_probability(r) == pytest.approx(closed, rel=1e-12)


def test_threshold_is_the_conformal_quantile_of_lambda(problem):
    model, X, y = problem
    cp = BinarizedSmoothedClassifier(model, n_samples=40, p=0.75, alpha=0.1, random_state=3)
    cp.calibrate(X[:99], y[:99])
    rank = int(np.floor(100 * (0.1 - cp.eta)))  # conformity rank at alpha - eta
    assert cp.threshold_ == np.sort(cp.conformity_scores_)[rank - 1]


# ---- validity under perturbations -----------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "radius"),
    [
        ({"mode": "p"}, 0.25),
        ({"mode": "tau", "tau": 0.1}, 0.25),
        ({"conformity_score": "aps", "p": 0.8}, 0.15),
    ],
)
def test_coverage_under_perturbations_of_the_certified_radius(problem, params, radius):
    model, X, y = problem
    alpha = 0.1
    covered = {"random": 0, "worst-of-k": 0, "gradient": 0}
    for seed in range(R):
        X_cal, y_cal, X_test, y_test = split(X, y, seed)
        cp = BinarizedSmoothedClassifier(
            model,
            sigma=0.5,
            n_samples=100,
            radius=radius,
            alpha=alpha,
            random_state=seed,
            **params,
        ).calibrate(X_cal, y_cal)
        attacks = {
            "random": random_l2_perturbation(X_test, radius, random_state=seed),
            "worst-of-k": worst_of_k_perturbation(
                X_test, y_test, radius, model, k=16, random_state=seed
            ),
            "gradient": gradient_attack(model, X_test, y_test, radius),
        }
        for name, moved in attacks.items():
            sets = cp.predict_set(moved)
            assert sets.sum(axis=1).mean() < 3  # informative, so coverage is not trivial
            covered[name] += int(sets[np.arange(N_TEST), y_test].sum())
    low, _ = coverage_bounds(N_CAL, alpha, N_TEST, confidence=0.999, n_repeats=R)
    for name, count in covered.items():
        assert count / (R * N_TEST) >= low, name


def test_coverage_when_the_attack_targets_the_robust_set_itself(problem):
    model, X, y = problem
    alpha, radius, repeats, n_test = 0.1, 0.25, 3, 200
    covered = 0
    for seed in range(repeats):
        X_cal, y_cal, X_test, y_test = split(X, y, seed)
        X_test, y_test = X_test[:n_test], y_test[:n_test]
        cp = BinarizedSmoothedClassifier(
            model, sigma=0.5, n_samples=80, p=0.8, radius=radius, random_state=seed
        ).calibrate(X_cal, y_cal)
        moved = worst_of_k_perturbation(
            X_test,
            y_test,
            radius,
            lambda Z, cp=cp: -cp.certified_radius(Z),
            classes=cp.classes_,
            k=8,
            random_state=seed,
        )
        sets = cp.predict_set(moved)
        assert sets.sum(axis=1).mean() < 3
        covered += int(sets[np.arange(n_test), y_test].sum())
    low, _ = coverage_bounds(N_CAL, alpha, n_test, confidence=0.999, n_repeats=repeats)
    assert covered / (repeats * n_test) >= low


def test_mean_baseline_covers_under_attack_but_needs_many_more_samples(problem):
    model, X, y = problem
    alpha, radius = 0.1, 0.2
    covered, sizes = 0, {}
    for seed in range(3):
        X_cal, y_cal, X_test, y_test = split(X, y, seed)
        moved = gradient_attack(model, X_test, y_test, radius)
        shared = {"sigma": 0.5, "radius": radius, "random_state": seed}
        for m in (150, 1000, 3000):
            for cls in (BinarizedSmoothedClassifier, MeanSmoothedClassifier):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # trivial sets at m = 150
                    model_m = cls(model, n_samples=m, **shared).calibrate(X_cal, y_cal)
                    sets = model_m.predict_set(moved)
                sizes.setdefault((cls, m), []).append(sets.sum(axis=1).mean())
                if cls is MeanSmoothedClassifier and m == 3000:
                    covered += int(sets[np.arange(N_TEST), y_test].sum())
    low, _ = coverage_bounds(N_CAL, alpha, N_TEST, confidence=0.999, n_repeats=3)
    assert covered / (3 * N_TEST) >= low
    size = {key: np.mean(values) for key, values in sizes.items()}
    binary, mean = BinarizedSmoothedClassifier, MeanSmoothedClassifier
    assert size[mean, 150] == 3 > size[binary, 150]  # the Hoeffding margin eats the budget
    assert size[binary, 1000] < size[mean, 1000] and size[binary, 3000] < size[mean, 3000] < 3


# ---- behaviour ------------------------------------------------------------------------------
def test_sets_grow_with_radius_and_match_certified_radius(problem):
    model, X, y = problem
    cp = BinarizedSmoothedClassifier(model, sigma=0.5, random_state=0).calibrate(X[:300], y[:300])
    radii = cp.certified_radius(X[300:400])
    assert radii.shape == (100, 3) and (radii >= 0).all()
    previous = None
    for r in (0.0, 0.1, 0.2, 0.3):
        sets = cp.predict_set(X[300:400], radius=r)
        np.testing.assert_array_equal(sets, radii <= r)
        if previous is not None:
            assert (sets >= previous).all()
        previous = sets
    assert cp.predict_set(X[300:400]).any(axis=1).all()


def test_alpha_override_is_nested_and_matches_a_recalibration(problem):
    model, X, y = problem
    cp = BinarizedSmoothedClassifier(model, sigma=0.5, radius=0.1, random_state=0)
    cp.calibrate(X[:300], y[:300])
    sets = cp.predict_set(X[300:400], alpha=[0.05, 0.1, 0.2])
    assert sets.shape == (100, 3, 3)
    assert (sets[..., 0] >= sets[..., 1]).all() and (sets[..., 1] >= sets[..., 2]).all()
    np.testing.assert_array_equal(sets[..., 1], cp.predict_set(X[300:400]))
    other = BinarizedSmoothedClassifier(model, sigma=0.5, radius=0.1, alpha=0.2, random_state=0)
    other.calibrate(X[:300], y[:300])
    np.testing.assert_array_equal(sets[..., 2], other.predict_set(X[300:400]))
    assert cp.certified_probability(alpha=0.2) == other.certified_probability()
    # the second positional argument is alpha, as for every classifier (it was radius)
    np.testing.assert_array_equal(cp.predict_set(X[300:400], 0.2), sets[..., 2])
    with pytest.raises(TypeError):
        cp.predict_set(X[300:400], 0.2, 0.1)  # radius is keyword-only
    radii = cp.certified_radius(X[300:400], alpha=[0.05, 0.2])
    np.testing.assert_array_equal(radii[..., 1], other.certified_radius(X[300:400]))
    with pytest.raises(ValueError, match="`alpha` must exceed eta"):
        cp.predict_set(X[:5], alpha=0.0005)


@pytest.mark.parametrize("cls", [BinarizedSmoothedClassifier, MeanSmoothedClassifier])
def test_set_params_alpha_after_calibrate_takes_effect(problem, cls):
    """alpha is a prediction setting: changing it after calibrate must not keep the old
    level's threshold, base probability or largest radius."""
    model, X, y = problem
    params = dict(sigma=0.5, radius=0.1, random_state=0)
    if cls is MeanSmoothedClassifier:
        params["n_samples"] = 2000
    cp = cls(model, alpha=0.05, **params).calibrate(X[:300], y[:300])
    cp.set_params(alpha=0.3)
    fresh = cls(model, alpha=0.3, **params).calibrate(X[:300], y[:300])
    np.testing.assert_array_equal(cp.predict_set(X[300:400]), fresh.predict_set(X[300:400]))
    assert cp.certified_probability() == fresh.certified_probability()
    assert cp.max_radius_ == fresh.max_radius_
    assert cp.base_probability_ == fresh.base_probability_
    sets_05 = cls(model, alpha=0.05, **params).calibrate(X[:300], y[:300]).predict_set(X[300:400])
    back = cp.set_params(alpha=0.05).predict_set(X[300:400])
    np.testing.assert_array_equal(back, sets_05)
    assert back.sum() > fresh.predict_set(X[300:400]).sum()  # the level really changed
    with pytest.raises(ValueError, match="`alpha` must exceed eta"):
        cp.set_params(alpha=0.0005).predict_set(X[:5])
    cp.set_params(alpha=[0.05, 0.3])  # several levels: no single threshold, hasattr says so
    assert not hasattr(cp, "threshold_")
    with pytest.raises(AttributeError, match="`max_radius_` is defined for a single `alpha`"):
        cp.max_radius_  # noqa: B018
    with pytest.raises(ValueError, match="`alpha` must be a single float in"):
        cp.predict_set(X[300:400])  # as fit and calibrate refuse it
    assert cp.predict_set(X[300:400], alpha=[0.05, 0.3]).shape == (100, len(cp.classes_), 2)
    with pytest.raises(ValueError, match="`alpha` must be a single float here"):
        cp.certified_probability()
    # the constructor's refusal says where several levels go (api review: it gave no reason
    # while predict_set takes several)
    with pytest.raises(ValueError, match=r"fixes threshold_ and max_radius_.*predict_set\(X"):
        type(cp)(model, alpha=[0.05, 0.3]).fit(X[:200], y[:200])


def test_too_few_calibration_points_give_every_class_with_a_warning(problem):
    model, X, y = problem
    cp = BinarizedSmoothedClassifier(model, random_state=0)
    # the user's level in the message, with the level the quantile is taken at
    with pytest.warns(UserWarning, match=r"too few for alpha=0\.1 \(the quantile is taken at"):
        cp.calibrate(X[:8], y[:8])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said at calibrate, not again (nor blamed on sigma)
        assert cp.predict_set(X[8:20]).all()


def test_trivial_sets_beyond_the_largest_certifiable_radius_warn(problem):
    model, X, y = problem
    cp = BinarizedSmoothedClassifier(model, n_samples=60, random_state=0).calibrate(
        X[:300], y[:300]
    )
    assert 0 < cp.max_radius_ < np.inf
    with pytest.warns(UserWarning, match="largest certifiable radius"):
        sets = cp.predict_set(X[:50], radius=cp.max_radius_ * 1.01)
    assert sets.all()


def test_more_samples_give_smaller_sets(problem):
    model, X, y = problem
    sizes = []
    for m in (50, 200):
        cp = BinarizedSmoothedClassifier(model, sigma=0.5, n_samples=m, p=0.8, random_state=0)
        cp.calibrate(X[:400], y[:400])
        sizes.append(cp.predict_set(X[400:900], radius=0.2).sum(axis=1).mean())
    assert sizes[1] < sizes[0]


def test_same_seed_same_sets_any_batch_size_and_inputs_unchanged(problem):
    model, X, y = problem
    X_cal, y_cal, X_test = X[:150].copy(), y[:150].copy(), X[150:230].copy()
    guard = Unchanged(X_cal, y_cal, X_test)
    runs = []
    for batch in (None, 7):
        cp = BinarizedSmoothedClassifier(
            model, conformity_score="aps", batch_size=batch, random_state=5
        ).calibrate(X_cal, y_cal)
        runs.append((cp.threshold_, cp.predict_set(X_test, radius=0.1)))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    # a Generator too: its noise and APS uniforms were one stream interleaved by batch
    seeded = [
        BinarizedSmoothedClassifier(
            model, conformity_score="aps", batch_size=batch, random_state=np.random.default_rng(5)
        ).calibrate(X_cal, y_cal)
        for batch in (None, 7)
    ]
    assert seeded[0].threshold_ == seeded[1].threshold_
    np.testing.assert_array_equal(runs[0][1], cp.predict_set(X_test, radius=0.1))
    guard.check()
    other = BinarizedSmoothedClassifier(model, conformity_score="aps", random_state=6)
    assert other.calibrate(X_cal, y_cal).threshold_ != runs[0][0]


def test_a_generator_seed_draws_on_its_state_like_every_wrapper(problem):
    """Determinism review: a Generator seeded the noise by `spawn`, which reads its seed
    sequence and a counter instead of its state: restoring the state (to replay a run)
    gave other sets (14 of 300 entries), and under numpy 1.x, whose pickles drop the seed
    sequence, a pickle round trip gave other sets (33 of 900)."""
    model, X, y = problem
    X_cal, y_cal, X_test = X[:150], y[:150], X[150:230]
    rng = np.random.default_rng(5)
    state = rng.bit_generator.state
    runs = []
    for _ in range(2):
        rng.bit_generator.state = state  # a replay from the same state
        cp = BinarizedSmoothedClassifier(model, conformity_score="aps", random_state=rng)
        cp.calibrate(X_cal, y_cal)
        runs.append((cp.conformity_scores_, cp.predict_set(X_test, radius=0.1)))
        restored = pickle.loads(pickle.dumps(cp))
        np.testing.assert_array_equal(
            restored.predict_set(X_test, radius=0.1), cp.predict_set(X_test, radius=0.1)
        )
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    # and the state moves on: a second call draws other noise, as documented
    assert not np.array_equal(cp.calibrate(X_cal, y_cal).conformity_scores_, runs[1][0])


def test_calibration_noise_is_tied_to_the_calibration_rows(problem):
    """A fixed seed must not pair the same noise with every calibration set (coverage
    given the seed would then differ from nominal): changing one calibration row changes
    the noise every other row gets, while the same rows give the same scores again."""
    model, X, y = problem
    X_cal, y_cal = X[:100].copy(), y[:100]
    cp = BinarizedSmoothedClassifier(model, conformity_score="aps", random_state=0)
    scores = cp.calibrate(X_cal, y_cal).conformity_scores_.copy()
    np.testing.assert_array_equal(cp.calibrate(X_cal, y_cal).conformity_scores_, scores)
    X_cal[0] += 1.0
    moved = cp.calibrate(X_cal, y_cal).conformity_scores_
    assert not np.array_equal(moved[1:], scores[1:])


def test_fit_with_noise_augmentation(problem):
    _, X, y = problem
    X_fit, y_fit = X[:300].copy(), y[:300].copy()
    guard = Unchanged(X_fit, y_fit)
    weights = np.ones(300)
    cp = BinarizedSmoothedClassifier(sigma=0.5, random_state=0)
    cp.fit(X_fit, y_fit, augment=3, sample_weight=weights)
    again = BinarizedSmoothedClassifier(sigma=0.5, random_state=0).fit(X_fit, y_fit, augment=3)
    clean = BinarizedSmoothedClassifier(sigma=0.5, random_state=0).fit(X_fit, y_fit)
    np.testing.assert_allclose(cp.estimator_.coef_, again.estimator_.coef_)
    assert not np.allclose(cp.estimator_.coef_, clean.estimator_.coef_)
    # noise shrinks a linear model's weights (it acts as a ridge penalty)
    assert np.linalg.norm(cp.estimator_.coef_) < np.linalg.norm(clean.estimator_.coef_)
    guard.check()
    with pytest.raises(ValueError, match="augment"):
        cp.fit(X_fit, y_fit, augment=-1)


@pytest.mark.parametrize("smoothed", [MeanSmoothedClassifier, BinarizedSmoothedClassifier])
def test_augmented_fit_checks_weights_rows_and_refuses_a_frozen_model(problem, smoothed):
    """Robust review (stop 62): with `augment` > 0 a weight Series in another row order was
    repeated by position (62 of 150 sets changed; `augment=0` refused it), and a
    FrozenEstimator trained on no noisy copy, silently."""
    from sklearn.frozen import FrozenEstimator

    model, X, y = problem
    frame = pd.DataFrame(X[:300], columns=["u", "v"])
    weights = pd.Series(np.linspace(0.5, 2.0, 300), index=frame.index)[::-1]
    for target in (y[:300], pd.Series(y[:300])):  # rows named by X, or by y beside an array
        for features in (frame, frame.to_numpy()):
            if isinstance(target, np.ndarray) and isinstance(features, np.ndarray):
                continue  # nothing to pair by
            for augment in (0, 2):
                with pytest.raises(ValueError, match=r"`sample_weight` is indexed by the row"):
                    smoothed(random_state=0).fit(
                        features, target, augment=augment, sample_weight=weights
                    )
    in_order = smoothed(random_state=0).fit(
        frame, y[:300], augment=2, sample_weight=weights.sort_index()
    )
    as_array = smoothed(random_state=0).fit(
        frame, y[:300], augment=2, sample_weight=weights.sort_index().to_numpy()
    )
    np.testing.assert_array_equal(in_order.estimator_.coef_, as_array.estimator_.coef_)
    with pytest.raises(ValueError, match=r"`augment=2` asks to train on noisy copies, but"):
        smoothed(FrozenEstimator(model)).fit(X[:300], y[:300], augment=2)
    smoothed(FrozenEstimator(model)).fit(X[:300], y[:300])  # augment=0: used as it is


def test_string_labels_and_dataframes(problem):
    _, X, y = problem
    names = np.array(["a", "b", "c"])[y]
    frame = pd.DataFrame(X, columns=["u", "v"])
    cp = BinarizedSmoothedClassifier(random_state=0).fit(frame[:300], names[:300], augment=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no feature-name warnings from the model
        sets = cp.calibrate(frame[300:600], names[300:600]).predict_set(frame[600:700])
    assert cp.classes_.tolist() == ["a", "b", "c"] and sets.shape == (100, 3)


def test_pickle_round_trip_gives_identical_sets(problem):
    model, X, y = problem
    for cls in (BinarizedSmoothedClassifier, MeanSmoothedClassifier):
        cp = cls(model, n_samples=2000, radius=0.05, random_state=0).calibrate(X[:200], y[:200])
        restored = pickle.loads(pickle.dumps(cp))
        np.testing.assert_array_equal(restored.predict_set(X[200:260]), cp.predict_set(X[200:260]))


# ---- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"sigma": 0.0}, "`sigma`"),
        ({"sigma": -1.0}, "`sigma`"),
        ({"radius": -0.1}, "`radius`"),
        ({"alpha": 1.5}, "`alpha`"),
        ({"alpha": 0.0}, "`alpha`"),
        ({"eta": 0.2}, "`eta`"),
        ({"n_samples": 0}, "`n_samples`"),
        ({"mode": "q"}, "`mode`"),
        ({"p": 1.0}, "`p`"),
        ({"mode": "tau", "tau": 0.0}, "`tau`"),
        ({"mode": "tau", "tau": 1.5}, "`tau`"),
        ({"mode": "tau", "tau": float("nan")}, "`tau`"),
        ({"conformity_score": "lac"}, "`conformity_score`"),
        ({"batch_size": 0}, "`batch_size`"),
    ],
)
def test_bad_parameters_name_the_argument(problem, params, match):
    model, X, y = problem
    with pytest.raises(ValueError, match=re.escape(match)):
        BinarizedSmoothedClassifier(model, **params).calibrate(X[:100], y[:100])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: certified_probability(0.6, 0.5, -0.25), "`sigma`"),
        (lambda: certified_probability(0.6, 0.5, 0.0), "`sigma`"),
        (lambda: certified_probability(0.6, -0.5, 0.25), "`radius`"),
        (lambda: certified_probability(np.nan, 0.5, 0.25), "`p`"),  # was NaN
        (lambda: certified_probability([0.2, 1.5], 0.5, 0.25), "`p`"),  # was clipped to 1
        (lambda: clopper_pearson_lower(5, 10, 1.5), "`level`"),
        (lambda: clopper_pearson_upper(5, 10, 0.0), "`level`"),
        (lambda: clopper_pearson_lower(11, 10, 0.05), "`successes`"),
        (lambda: clopper_pearson_upper(-1, 10, 0.05), "`successes`"),
    ],
)
def test_public_bounds_refuse_what_they_cannot_bound(call, match):
    """A negative sigma flipped the sign (a bound above p), sigma 0 divided by zero, and
    levels or counts out of range gave NaN."""
    with pytest.raises(ValueError, match=re.escape(match)):
        call()


def test_too_few_samples_for_eta_names_the_minimum(problem):
    model, X, y = problem
    cp = BinarizedSmoothedClassifier(model, n_samples=20, eta=1e-3)
    with pytest.raises(ValueError, match=r"n_samples >= (\d+)") as error:
        cp.calibrate(X[:207], y[:207])
    minimum = int(re.search(r"n_samples >= (\d+)", str(error.value)).group(1))
    cp.set_params(n_samples=minimum).calibrate(X[:207], y[:207])  # the minimum works
    assert cp.max_radius_ > 0
    with pytest.raises(ValueError, match="n_samples"):
        MeanSmoothedClassifier(model, n_samples=20).calibrate(X[:207], y[:207])
    # p so small that no count up to 2**20 helps: it said "Use n_samples >= 1048576"
    tiny = BinarizedSmoothedClassifier(model, p=1e-7, n_samples=100)
    with pytest.raises(ValueError, match=r"No n_samples up to 2\*\*20 is enough"):
        tiny.calibrate(X[:150], y[:150])


def test_every_count_from_the_advised_minimum_is_accepted_and_informative():
    """With mode="p" the rounding of ceil(p m) makes the radius-0 test go back and forth:
    on iris (p = 0.7) 29 samples were informative, 30 not, 31 again. The advice named 29
    and 30 was accepted with sets holding every class; now 30 is refused and the advice
    is the count from which every larger one works."""
    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(150)
    train, calibration = order[:50], order[50:120]
    fitted = BinarizedSmoothedClassifier(sigma=0.25, p=0.7, random_state=0)
    fitted.fit(X[train], y[train], augment=4)
    model = BinarizedSmoothedClassifier(fitted.estimator_, sigma=0.25, p=0.7, random_state=0)
    with pytest.raises(ValueError, match=r"n_samples >= (\d+)") as error:
        model.set_params(n_samples=30).calibrate(X[calibration], y[calibration])
    minimum = int(re.search(r"n_samples >= (\d+)", str(error.value)).group(1))
    for count in range(minimum, minimum + 10):
        model.set_params(n_samples=count).calibrate(X[calibration], y[calibration])
        assert model.max_radius_ > 0, count


def test_wrong_call_order_unseen_labels_and_bad_inputs(problem):
    model, X, y = problem
    with pytest.raises(NotFittedError, match="fit"):
        BinarizedSmoothedClassifier(LogisticRegression()).calibrate(X[:100], y[:100])
    cp = BinarizedSmoothedClassifier(model)
    with pytest.raises(NotFittedError, match=r"predict_set needs a fitted model and calib"):
        cp.predict_set(X[:5])  # a fitted model given: "Call 'fit'" alone misled
    cp.fit(X[:300], y[:300])
    with pytest.raises(NotFittedError, match="calibrate"):
        cp.predict_set(X[:5])
    with pytest.raises(NotFittedError, match="calibrate"):
        cp.certified_radius(X[:5])
    with pytest.raises(ValueError, match="never saw"):
        cp.calibrate(X[:100], np.where(y[:100] == 2, 7, y[:100]))
    cp.calibrate(X[300:500], y[300:500])
    with pytest.raises(ValueError, match="`radius`"):
        cp.predict_set(X[:5], radius=-1.0)
    bad = X[:5].copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        cp.predict_set(bad)
    with pytest.raises(ValueError, match="features"):
        cp.predict_set(X[:5, :1])


def test_changed_smoothing_needs_a_new_calibration(problem):
    from sklearn.exceptions import NotFittedError

    model, X, y = problem
    cp = BinarizedSmoothedClassifier(model, sigma=0.5, random_state=0).calibrate(X[:300], y[:300])
    sets = cp.predict_set(X[300:350])
    radius = cp.max_radius_
    cp.set_params(sigma=2.0)
    with pytest.raises(NotFittedError, match="changed since calibrate"):
        cp.predict_set(X[300:350])
    with pytest.raises(NotFittedError, match=r"max_radius_: .*changed since calibrate"):
        cp.max_radius_  # noqa: B018 (a read that must refuse)
    cp.set_params(sigma=0.5)
    np.testing.assert_array_equal(cp.predict_set(X[300:350]), sets)
    assert cp.max_radius_ == radius
    assert cp.set_params(radius=0.1).predict_set(X[300:350]).shape == sets.shape  # per call


@pytest.mark.parametrize("augment", [0, 2])
def test_nan_is_refused_at_fit_even_around_a_nan_aware_model(augment):
    """The smoothing noise is added to every feature, so X must be finite: a model that
    handles NaN does not change that, and the refusal comes at fit, not first at calibrate."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = (X[:, 0] > 0).astype(int)
    X[::7, 1] = np.nan
    model = BinarizedSmoothedClassifier(HistGradientBoostingClassifier(max_iter=5))
    assert model.__sklearn_tags__().input_tags.allow_nan is False
    with pytest.raises(ValueError, match="finite numeric array for randomised smoothing"):
        model.fit(X, y, augment=augment)


@pytest.mark.parametrize("augment", [0, 2])
def test_non_numeric_x_is_a_type_error_naming_x_on_every_fit_path(augment):
    X = [{"a": 1.0}] * 40
    y = np.arange(40) % 2
    with pytest.raises(TypeError, match=r"`X` must be numeric for randomised smoothing"):
        BinarizedSmoothedClassifier().fit(X, y, augment=augment)


@pytest.mark.parametrize(
    "changed",
    [
        {"radius": np.nan},
        {"radius": -0.2},
        {"radius": "0.1"},
        {"batch_size": -5},
        {"batch_size": 0},
    ],
)
def test_prediction_settings_changed_after_calibrate_are_checked(problem, changed):
    """``radius`` and ``batch_size`` are read at prediction (set_params after calibrate is
    the documented use): bad values are refused there too. Before, radius=nan gave empty
    sets, a negative radius sets below the nominal level, and batch_size=-5 returned
    uninitialised memory."""
    model, X, y = problem
    cp = BinarizedSmoothedClassifier(model, n_samples=60, random_state=0).calibrate(
        X[:300], y[:300]
    )
    cp.set_params(**changed)
    name = next(iter(changed))
    with pytest.raises(ValueError, match=f"`{name}`"):
        cp.predict_set(X[300:310])
    if name == "radius":
        with pytest.raises(ValueError, match="`radius`"):
            cp.certified_probability()
        # rows passed where the radius goes: summarised, the right method named (the
        # message printed every row, 20,494 characters for 200 rows)
        with pytest.raises(
            ValueError, match=r"shape \(200, 2\)\): .*certified_radius takes X"
        ) as e:
            cp.certified_probability(np.tile(X[300:310], (20, 1)))
        assert len(str(e.value)) < 400
    else:
        with pytest.raises(ValueError, match="`batch_size`"):
            cp.certified_radius(X[300:310])


def test_at_exactly_the_largest_certifiable_radius_every_set_is_full():
    """At r = max_radius_ a label with no hit can sit a rounding error below the radius-r
    probability: the sets are still full, and certified_radius agrees (review case)."""
    rng = np.random.default_rng(0)
    means = np.array([[0.0, 0.0], [1.5, 0.0], [0.0, 1.5]])

    def draw(n):
        y = rng.integers(3, size=n)
        return means[y] + 0.6 * rng.normal(size=(n, 2)), y

    (X_fit, y_fit), (X_cal, y_cal), (X_test, _) = draw(400), draw(250), draw(200)
    model = LogisticRegression().fit(X_fit, y_fit)
    cp = BinarizedSmoothedClassifier(model, n_samples=150, random_state=3)
    cp.calibrate(X_cal, y_cal)
    r = cp.max_radius_
    with pytest.warns(UserWarning, match="largest certifiable radius"):
        sets = cp.predict_set(X_test, radius=r)
    assert sets.all()
    radii = cp.certified_radius(X_test)
    assert radii.max() <= r
    np.testing.assert_array_equal(sets, radii <= r)


def test_a_calibration_that_certifies_no_radius_says_why_at_calibrate():
    """Review finding: with mode='tau' and a tau the model's true-label scores do not reach
    under the noise, every set held every class at every radius, calibrate was silent and
    predict_set blamed sigma and n_samples."""
    from uqconform.datasets import make_gaussian_classification

    X, y, _ = make_gaussian_classification(
        1500, n_classes=3, n_features=4, separation=1.2, random_state=1
    )
    model = LogisticRegression().fit(X[:500], y[:500])
    with pytest.warns(UserWarning, match=r"every set holds every class.*tau=0.4.*smaller tau"):
        high = BinarizedSmoothedClassifier(model, mode="tau", tau=0.4, random_state=3)
        high.calibrate(X[500:800], y[500:800])
    assert high.max_radius_ == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once, at calibrate
        assert high.predict_set(X[800:]).all()
        low = BinarizedSmoothedClassifier(model, mode="tau", tau=0.1, random_state=3)
        low.calibrate(X[500:800], y[500:800])  # certifies a radius: nothing to say
    assert low.max_radius_ > 0 and not low.predict_set(X[800:]).all()


def test_the_mean_baseline_names_n_samples_when_its_margin_leaves_no_radius():
    """Review finding (docsB): with too few noisy copies the mean baseline's Hoeffding
    margin (0.36 at 50) exceeded p*, and the warning said "use a smaller sigma", which
    does not help; more `n_samples` does."""
    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order] / X.max(axis=0), y[order]
    model = LogisticRegression(max_iter=1000).fit(X[:50], y[:50])
    with pytest.warns(UserWarning, match=r"Hoeffding margin of n_samples=60 .*use more n_samples"):
        MeanSmoothedClassifier(model, n_samples=60, random_state=0).calibrate(X[50:], y[50:])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        more = MeanSmoothedClassifier(model, n_samples=2000, random_state=0)
        assert more.calibrate(X[50:], y[50:]).max_radius_ > 0


@pytest.mark.parametrize("smoothed", [MeanSmoothedClassifier, BinarizedSmoothedClassifier])
@pytest.mark.parametrize("augment", [0, 2])
def test_fractional_float_labels_get_the_class_names_hint(smoothed, augment):
    """API review (stop 57): float labels such as 0.5 and 1.5 gave scikit-learn's "Unknown
    label type: continuous", not the hint the other classifiers give."""
    X, y = blobs(60, 0)
    message = r"`y` holds float labels with a fractional part .*y\.astype\(str\)"
    with pytest.raises(ValueError, match=message):
        smoothed(LogisticRegression()).fit(X, y + 0.5, augment=augment)


@pytest.mark.parametrize("smoothed", [MeanSmoothedClassifier, BinarizedSmoothedClassifier])
@pytest.mark.parametrize(
    "bad, error, remedy",
    [
        (np.inf, ValueError, r"infinity.*replace or clip the infinite values"),
        ("red", ValueError, r"could not convert.*encode text or categories"),
        ({"a": 1.0}, TypeError, r"dict.*encode text or categories"),
    ],
)
def test_infinite_or_text_x_gets_a_remedy(smoothed, bad, error, remedy):
    """Review finding (docsB, stop 57): infinity in X gave "`X` must be a finite numeric
    array for randomised smoothing (Input contains infinity ...)" with no remedy, and text
    or objects kept numpy's message without saying to encode them before the wrapper."""
    X, y = blobs(60, 0)
    X = X.astype(object)
    X[5, 1] = bad
    model = LogisticRegression().fit(*blobs(60, 1))
    message = rf"`X` must be .*for randomised smoothing .*{remedy}"
    with pytest.raises(error, match=message):
        smoothed(LogisticRegression()).fit(X, y)
    with pytest.raises(error, match=message):
        smoothed(model).calibrate(X, y)


@pytest.mark.parametrize("smoothed", [MeanSmoothedClassifier, BinarizedSmoothedClassifier])
@pytest.mark.parametrize("augment", [0, 2])
def test_a_one_dimensional_x_at_fit_gets_the_short_two_d_message(smoothed, augment):
    """Diff-review finding (diffrev22, stop 57): fit(X[:, 0], y) gave a 5,127-character
    message printing scikit-learn's `array=[...]`, and fit(y, X) no "Were X and y
    swapped?"; a 1-D X is refused with the library's 2-D message, and other refusals of
    check_array keep only its first line (never the array)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] > 0).astype(int)
    cases = [
        ((X[:, 0], y), r"^`X` must be 2-D \(one row per sample\), got a 1-D array of shape"),
        ((y, X), r"^`X` must be 2-D .*Were X and y swapped\? fit\(X, y\)"),
        # numbers held as objects pass the 2-D check and reach check_array
        ((X[:, 0].astype(object), y), r"^`X` must be .*for randomised smoothing \(Expected 2D"),
    ]
    for args, pattern in cases:
        with pytest.raises(ValueError, match=pattern) as caught:
            smoothed(LogisticRegression()).fit(*args, augment=augment)
        message = str(caught.value)
        assert "array=" not in message and "\n" not in message and len(message) < 400


@pytest.mark.parametrize("smoothed", [MeanSmoothedClassifier, BinarizedSmoothedClassifier])
@pytest.mark.parametrize("augment", [0, 2])
def test_a_frozen_model_takes_fit_rows_of_one_class(smoothed, augment):
    """Diff-review finding (diffrev22, stop 57): around a FrozenEstimator, fit rows of
    one class were refused ("`y` holds one class"), though a frozen model trains nothing
    (a61c110 accepted them); a model that fit trains still needs two classes."""
    from sklearn.frozen import FrozenEstimator

    X, y = blobs(400, 3)
    base = LogisticRegression().fit(X[:200], y[:200])
    one = np.zeros(40, dtype=int)
    cp = smoothed(FrozenEstimator(base), n_samples=500, random_state=0)
    if augment:  # noisy copies cannot train a frozen model (stop 62): refused first
        with pytest.raises(ValueError, match=r"holds a FrozenEstimator, whose fit trains"):
            cp.fit(X[:40], one, augment=augment)
    cp.fit(X[:40], one).calibrate(X[200:350], y[200:350])
    assert cp.predict_set(X[350:355]).shape == (5, 3)
    assert np.array_equal(cp.classes_, [0, 1, 2])  # the frozen model's, not the fit rows'
    with pytest.raises(ValueError, match=r"`y` holds one class \(\[0\]\)"):
        smoothed(LogisticRegression()).fit(X[:40], one, augment=augment)


def test_a_model_changed_after_fit_is_refused_at_prediction():
    """Diff review 56: prediction checked the calibration settings only, so a model set
    after fit and calibrate was accepted while the one fit trained kept predicting."""
    from sklearn.tree import DecisionTreeClassifier

    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(150)
    X, y = X[order], y[order]
    for cls in (BinarizedSmoothedClassifier, MeanSmoothedClassifier):
        cp = cls(DecisionTreeClassifier(random_state=0), n_samples=60, random_state=0)
        cp.fit(X[:60], y[:60]).calibrate(X[60:120], y[60:120])
        cp.set_params(estimator=LogisticRegression())
        with pytest.raises(NotFittedError, match="changed since fit"):
            cp.predict_set(X[120:])
