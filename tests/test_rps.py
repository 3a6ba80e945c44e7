"""Reliable prediction sets (RPS): thresholds, coverage, certificates, bad input."""

from __future__ import annotations

import copy
import itertools
import pickle

import numpy as np
import pandas as pd
import pytest
from conftest import Unchanged
from sklearn.base import clone
from sklearn.datasets import load_digits, load_iris
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from uqconform.classification.rps import (
    ReliablePredictionSets,
    _smoothed,
    _target_bounds,
    hash_partition,
    majority_coverage,
    majority_threshold,
    partition_rank,
)
from uqconform.evaluation import coverage_bounds
from uqconform.evaluation.poisoning import (
    delete_points,
    flip_labels,
    insert_points,
    worst_partitions,
)

ALPHA = 0.1


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    fit, cal, test = order[:800], order[800:1400], order[1400:]
    return X[fit], y[fit], X[cal], y[cal], X[test], y[test]


@pytest.fixture(scope="module")
def fitted(digits):
    X_fit, y_fit, X_cal, y_cal, _, _ = digits
    model = ReliablePredictionSets(
        LogisticRegression(max_iter=300), k_train=5, k_calib=5, random_state=0
    )
    return model.fit(X_fit, y_fit).calibrate(X_cal, y_cal)


# ---- the majority threshold and the coverage formula -----------------------------------------
def test_threshold_table_of_the_spec():
    # Section 2.4 of the methods note: tau at alpha 0.10 and 0.05.
    k = (2, 3, 5, 8, 10, 15, 20, 22, 25, 30, 40)
    at_10 = (0, 1, 3, 5, 7, 11, 15, 17, 20, 24, 33)
    at_05 = (0, 1, 3, 5, 7, 12, 16, 18, 21, 25, 35)
    assert tuple(majority_threshold(c, 0.10) for c in k) == at_10
    assert tuple(majority_threshold(c, 0.05) for c in k) == at_05
    assert majority_threshold(1, 0.05) == 0  # BinomCDF(0; 1, 0.95) = 0.05 + 4e-17


def test_threshold_is_the_binomial_rule():
    from scipy import stats

    for k, level in itertools.product(range(1, 45), (0.02, 0.1, 0.3)):
        tau = majority_threshold(k, level)
        assert stats.binom.cdf(tau, k, 1 - level) <= level + 1e-12
        assert tau == k or stats.binom.cdf(tau + 1, k, 1 - level) > level


def test_coverage_formula_matches_the_spec_table():
    # Section 2.6: (n_cal, k_calib, alpha) -> majority coverage of the published rule.
    table = {
        (1000, 22, 0.10): 0.908,
        (1000, 40, 0.10): 0.930,
        (1000, 10, 0.10): 0.894,
        (1000, 5, 0.10): 0.896,
        (5000, 40, 0.10): 0.888,
        (1000, 22, 0.05): 0.960,
    }
    for (n, k, level), expected in table.items():
        size = n // k
        rank = partition_rank(size, k, level, "paper")
        value = majority_coverage([size] * k, [rank] * k, majority_threshold(k, level))
        assert round(value, 3) == expected


def test_coverage_formula_against_simulation():
    # Continuous scores: the formula is the exact coverage; check it by simulation.
    rng = np.random.default_rng(0)
    sizes, k, reps = np.array([12, 20, 15]), 3, 20000
    ranks = np.array([2, 3, 1])
    tau = 1
    expected = majority_coverage(sizes, ranks, tau)
    votes = np.zeros(reps, dtype=int)
    test = rng.random(reps)
    for n, r in zip(sizes, ranks, strict=True):
        scores = np.sort(rng.random((reps, n)), axis=1)
        votes += test >= scores[:, r - 1]
    observed = (votes > tau).mean()
    se = np.sqrt(expected * (1 - expected) / reps)
    assert abs(observed - expected) < 4.5 * se
    assert k == sizes.size


@pytest.mark.parametrize(("n", "k", "level"), [(45, 22, 0.1), (100, 10, 0.1), (200, 5, 0.05)])
def test_exact_rank_is_the_largest_valid_rank(n, k, level):
    tau = majority_threshold(k, level)
    rank = partition_rank(n, k, level, "exact")
    assert majority_coverage([n] * k, [rank] * k, tau) >= 1 - level
    assert majority_coverage([n] * k, [rank + 1] * k, tau) < 1 - level


def test_paper_rank_is_one_below_the_textbook_rank():
    assert partition_rank(1000, 22, 0.1, "paper") == 99  # the 99th smallest, not the 100th
    assert partition_rank(9, 5, 0.1, "paper") == 1  # clipped at the smallest score


# ---- worst-case votes ------------------------------------------------------------------------
def test_vote_bounds_are_exact_against_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(60):
        k_train, n_labels, radius = int(rng.integers(1, 5)), int(rng.integers(2, 4)), 2
        states = rng.integers(-1, n_labels, size=k_train)  # -1: abstaining model
        counts = np.array([[np.sum(states == c) for c in range(n_labels)]])
        for kind, target in itertools.product(("vote_softmax", "vote"), range(n_labels)):
            low, high = _target_bounds(counts, np.array([target]), radius, k_train, kind)
            reachable = []
            for m in range(min(radius, k_train) + 1):
                for who in itertools.combinations(range(k_train), m):
                    for new in itertools.product(range(-1, n_labels), repeat=m):
                        changed = states.copy()
                        changed[list(who)] = new
                        c = np.array([[np.sum(changed == j) for j in range(n_labels)]])
                        reachable.append(_smoothed(c, k_train, kind)[0, target])
            assert low[0] == pytest.approx(min(reachable), abs=1e-12)
            assert high[0] == pytest.approx(max(reachable), abs=1e-12)


# ---- predictions -----------------------------------------------------------------------------
def test_sets_shape_and_levels(fitted, digits):
    X_test = digits[4]
    sets = fitted.predict_set(X_test)
    assert sets.shape == (len(X_test), 10) and sets.dtype == bool
    several = fitted.predict_set(X_test, alpha=[0.05, 0.1, 0.3])
    assert several.shape == (len(X_test), 10, 3)
    np.testing.assert_array_equal(several[..., 1], sets)
    assert (several[..., 0] >= several[..., 2]).all()  # nested in alpha
    assert fitted.majority_threshold_ == 3 and fitted.partition_sizes_.sum() == 600


def test_row_order_and_seed_do_not_matter(digits):
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    base = DecisionTreeClassifier(max_depth=6)  # uses random_state: set per partition
    first = ReliablePredictionSets(base, k_train=4, k_calib=5, random_state=3)
    sets = first.fit(X_fit, y_fit).calibrate(X_cal, y_cal).predict_set(X_test)
    again = clone(first).fit(X_fit, y_fit).calibrate(X_cal, y_cal).predict_set(X_test)
    np.testing.assert_array_equal(sets, again)
    shuffle = np.random.default_rng(5).permutation(len(y_fit))
    shuffle_cal = np.random.default_rng(6).permutation(len(y_cal))
    permuted = clone(first).fit(X_fit[shuffle], y_fit[shuffle])
    permuted.calibrate(X_cal[shuffle_cal], y_cal[shuffle_cal])
    np.testing.assert_array_equal(permuted.predict_set(X_test), sets)


def test_hash_partition_properties():
    X = np.random.default_rng(0).normal(size=(200, 3))
    part = hash_partition(X, 7)
    assert part.min() >= 0 and part.max() < 7 and np.unique(part).size == 7
    np.testing.assert_array_equal(hash_partition(X[::-1], 7), part[::-1])
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    np.testing.assert_array_equal(hash_partition(frame, 7), part)
    assert (hash_partition(X, 7, salt="other") != part).any()
    np.testing.assert_array_equal(hash_partition(-0.0 * np.ones((1, 3)), 7),
                                  hash_partition(np.zeros((1, 3)), 7))  # fmt: skip


def test_partitions_missing_classes_are_handled():
    X, y = load_iris(return_X_y=True)
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    # 60 training partitions of ~1 row: many lack classes, some have one label or none.
    model = ReliablePredictionSets(k_train=60, k_calib=3, alpha=0.2)
    with pytest.warns(UserWarning, match="empty"):
        model.fit(X[::2], labels[::2])
    known = [np.asarray(m.classes_).size for m in model.estimators_]
    assert min(known) < 3
    model.calibrate(X[1::2], labels[1::2])
    assert model.predict_set(X[1::2]).shape == (75, 3)
    # Fitted models knowing different labels: mapped into the union, in its order.
    two = LogisticRegression(max_iter=1000).fit(X[y < 2], labels[y < 2])
    three = LogisticRegression(max_iter=1000).fit(X, labels)
    prefit = ReliablePredictionSets([two, three], k_calib=2, alpha=0.2)
    prefit.calibrate(X, labels)
    assert prefit.classes_.tolist() == labels[[0, 50, 100]].tolist()
    votes = prefit.vote_counts(X)
    assert votes.sum(axis=1).tolist() == [2] * 150
    assert votes[y == 2, 2].max() == 1  # only the three-label model can vote "virginica"


def test_prefit_models_give_the_same_sets(fitted, digits):
    _, _, X_cal, y_cal, X_test, _ = digits
    prefit = ReliablePredictionSets(list(fitted.estimators_), k_calib=5)
    prefit.calibrate(X_cal, y_cal)
    np.testing.assert_array_equal(prefit.predict_set(X_test), fitted.predict_set(X_test))


def test_pickle_round_trip(fitted, digits):
    X_test = digits[4]
    loaded = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(loaded.predict_set(X_test), fitted.predict_set(X_test))
    np.testing.assert_array_equal(
        loaded.certify(X_test, r_calib=1)["robust"], fitted.certify(X_test, r_calib=1)["robust"]
    )


def test_inputs_are_not_modified(digits):
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    X_fit, X_cal, X_test = X_fit.copy(), X_cal.copy(), X_test.copy()
    X_fit[0, 0] = -0.0
    guard = Unchanged(X_fit, y_fit, X_cal, y_cal, X_test)
    model = ReliablePredictionSets(k_train=2, k_calib=2).fit(X_fit, y_fit)
    model.calibrate(X_cal, y_cal).predict_set(X_test)
    model.certify(X_test, r_train=1, r_calib=1)
    guard.check()
    assert np.signbit(X_fit[0, 0])


def test_sklearn_protocol(fitted, digits):
    params = fitted.get_params()
    assert params["conformity_score"] == "vote_softmax" and params["k_train"] == 5
    X_test, y_test = digits[4], digits[5]
    assert 0.8 < fitted.score(X_test, y_test) <= 1  # ClassifierMixin.score: accuracy
    assert not hasattr(clone(fitted), "estimators_")


# ---- parallel backends ---------------------------------------------------------------------
def test_same_sets_for_any_number_of_jobs_and_dask(digits):
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    model = ReliablePredictionSets(KNeighborsClassifier(3), k_train=4, k_calib=5)
    sets = {}
    for n_jobs in (1, -1):
        rps = clone(model).set_params(n_jobs=n_jobs).fit(X_fit, y_fit)
        sets[n_jobs] = rps.calibrate(X_cal, y_cal).predict_set(X_test)
    distributed = pytest.importorskip("dask.distributed")
    from joblib import parallel_config

    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
        parallel_config(backend="dask"),
    ):
        rps = clone(model).fit(X_fit, y_fit)
    sets["dask"] = rps.calibrate(X_cal, y_cal).predict_set(X_test)
    np.testing.assert_array_equal(sets[1], sets[-1])
    np.testing.assert_array_equal(sets[1], sets["dask"])


# ---- coverage ----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["exact", "paper"])
def test_clean_coverage_over_seeds(mode):
    X, y = load_digits(return_X_y=True)
    covered, n_test, smallest = 0.0, 0, np.inf
    seeds = range(8)
    for seed in seeds:
        order = np.random.default_rng(seed).permutation(len(y))
        fit, cal, test = order[:700], order[700:1300], order[1300:]
        model = ReliablePredictionSets(
            LogisticRegression(max_iter=200), k_train=3, k_calib=5, coverage=mode, salt=seed
        )
        sets = model.fit(X[fit], y[fit]).calibrate(X[cal], y[cal]).predict_set(X[test])
        covered += sets[np.arange(test.size), y[test]].sum()
        n_test = test.size
        smallest = min(smallest, model.partition_sizes_.min())
    pooled = covered / (n_test * len(seeds))
    # The law of one partition's split-CP coverage (wider than the majority's).
    lower, _ = coverage_bounds(int(smallest), ALPHA, n_test, 0.99, n_repeats=len(seeds))
    assert pooled >= lower


# ---- certificates ----------------------------------------------------------------------------
def test_certificates_trivial_at_radius_zero_and_monotone(fitted, digits):
    X_test = digits[4]
    zero = fitted.certify(X_test)
    assert all(v.all() for v in zero.values())
    previous = zero
    for radius in range(1, 4):
        now = fitted.certify(X_test, r_train=radius, r_calib=radius)
        for key in now:
            assert not (now[key] & ~previous[key]).any()  # certified at r => at r - 1
        np.testing.assert_array_equal(
            now["robust"], now["coverage_reliable"] & now["size_reliable"]
        )
        previous = now


def test_radius_limits_of_the_spec(digits):
    # Section 2.8: coverage reliable needs count >= tau + r + 1 <= k_calib, size reliable
    # needs count <= tau - r; beyond, only empty (resp. full) sets qualify.
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    model = ReliablePredictionSets(k_train=1, k_calib=5, alpha=0.3).fit(X_fit, y_fit)
    model.calibrate(X_cal, y_cal)
    sets = model.predict_set(X_test)
    tau = model.majority_threshold_
    curve = model.reliability_curve(X_test, range(0, tau + 2))
    assert curve["radius"].tolist() == list(range(0, tau + 2))
    for radius in range(0, tau + 2):
        certified = model.certify(X_test, r_calib=radius)
        if radius > 5 - tau - 1:
            np.testing.assert_array_equal(certified["coverage_reliable"], ~sets.any(axis=1))
        if radius > tau:
            np.testing.assert_array_equal(certified["size_reliable"], sets.all(axis=1))
        assert curve["robust"][radius] == certified["robust"].mean()
    # With one training model nothing survives a poisoned training point but trivial sets.
    trained = model.certify(X_test, r_train=1)
    assert not (trained["coverage_reliable"] & sets.any(axis=1)).any()


def _violations(before, after, certified) -> int:
    moved = (before != after).any(axis=1)
    lost = (before & ~after).any(axis=1)
    gained = (after & ~before).any(axis=1)
    return int(
        (moved & certified["robust"]).sum()
        + (lost & certified["coverage_reliable"]).sum()
        + (gained & certified["size_reliable"]).sum()
    )


def test_certificates_are_sound_under_simulated_poisoning(fitted, digits):
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    sets = fitted.predict_set(X_test)
    scores = fitted.predict_scores(X_cal)[np.arange(len(y_cal)), y_cal]
    changed = 0
    for radius in (1, 2):
        certified = fitted.certify(X_test, r_calib=radius)
        part = hash_partition(X_cal, 5, fitted.salt)
        worst = worst_partitions(fitted, X_test, "calibration")
        attacks = [
            flip_labels(X_cal, y_cal, radius, random_state=radius),
            flip_labels(
                X_cal, y_cal, radius, partitions=part, target=worst,
                strategy="concentrated", order=scores,
            ),
            insert_points(X_cal, y_cal, radius, partitions=part, target=worst, strategy="spread",
                          order=-scores, random_state=0),
            delete_points(X_cal, y_cal, radius, partitions=part, target=worst,
                          strategy="concentrated", order=scores),
        ]  # fmt: skip
        for X_new, y_new in attacks:
            after = copy.deepcopy(fitted).calibrate(X_new, y_new).predict_set(X_test)
            assert _violations(sets, after, certified) == 0
            changed += int((after != sets).any(axis=1).sum())
        certified = fitted.certify(X_test, r_train=radius)
        top = fitted.predict(X_test)
        runner_up = fitted.classes_[np.argsort(fitted.predict_scores(X_test), axis=1)[:, -2]]
        attacks = [
            flip_labels(X_fit, y_fit, radius, random_state=radius),
            insert_points(X_fit, y_fit, radius, source=(X_test, top), new_labels=runner_up,
                          order=certified["robust"].astype(float), random_state=0),
        ]  # fmt: skip
        for X_new, y_new in attacks:
            after = clone(fitted).fit(X_new, y_new).calibrate(X_cal, y_cal).predict_set(X_test)
            assert _violations(sets, after, certified) == 0
            changed += int((after != sets).any(axis=1).sum())
    assert changed > 0  # the attacks do change the sets that are not certified


# ---- bad input -------------------------------------------------------------------------------
def test_partitions_too_small_name_the_minimum(digits):
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    model = ReliablePredictionSets(k_train=2, k_calib=40).fit(X_fit, y_fit)
    with pytest.raises(ValueError, match="needs at least 9"):
        model.calibrate(X_cal[:200], y_cal[:200])
    model.set_params(k_calib=5).calibrate(X_cal, y_cal)
    smallest = int(model.partition_sizes_.min())
    with pytest.raises(ValueError, match=f"needs at least {smallest + 1}"):
        model.certify(X_test, r_calib=smallest - 9 + 1)
    with pytest.raises(ValueError, match="needs at least"):
        model.reliability_curve(X_test, [0, smallest])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"k_train": 0}, "k_train"),
        ({"k_calib": 0}, "k_calib"),
        ({"k_train": 2.5}, "k_train"),
        ({"alpha": 1.5}, "alpha"),
        ({"conformity_score": "lac"}, "conformity_score"),
        ({"coverage": "approx"}, "coverage"),
        ({"salt": 1.5}, "salt"),
    ],
)
def test_bad_parameters(params, message, digits):
    X_fit, y_fit = digits[0], digits[1]
    with pytest.raises((ValueError, TypeError), match=message):
        ReliablePredictionSets(**params).fit(X_fit, y_fit)


def test_bad_calls(fitted, digits):
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    with pytest.raises(ValueError, match="r_calib"):
        fitted.certify(X_test, r_calib=-1)
    with pytest.raises(ValueError, match="r_train"):
        fitted.certify(X_test, r_train=-2)
    with pytest.raises(ValueError, match="never saw"):
        copy.deepcopy(fitted).calibrate(X_cal, np.where(y_cal == 3, 11, y_cal))
    with pytest.raises(NotFittedError, match="before fit"):
        ReliablePredictionSets().calibrate(X_cal, y_cal)
    with pytest.raises(NotFittedError, match="calibrate"):
        ReliablePredictionSets(k_train=2).fit(X_fit, y_fit).predict_set(X_test)
    with pytest.raises(ValueError, match="NaN"):
        ReliablePredictionSets().fit(X_fit, np.where(y_fit == 1, np.nan, y_fit))
    with pytest.raises(ValueError, match="features"):
        fitted.predict_set(X_test[:, :10])
    with pytest.raises(ValueError, match="one class"):
        ReliablePredictionSets().fit(X_fit[:5], np.zeros(5))
    with pytest.raises(ValueError, match="poisoned"):
        fitted.reliability_curve(X_test, [1], poisoned="test")
    with pytest.raises(NotFittedError, match="not fitted"):
        ReliablePredictionSets([LogisticRegression()]).calibrate(X_cal, y_cal)


@parametrize_with_checks([ReliablePredictionSets(k_train=2, k_calib=1)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
