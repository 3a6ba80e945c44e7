"""Reliable prediction sets (RPS): thresholds, coverage, certificates, bad input."""

from __future__ import annotations

import copy
import functools
import itertools
import pickle
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import sklearn
from conftest import Unchanged
from scipy import optimize, special, stats
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.datasets import load_digits, load_iris
from sklearn.exceptions import NotFittedError, UnsetMetadataPassedError
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from uqconform.classification import SplitConformalClassifier
from uqconform.classification import rps as rps_module
from uqconform.classification.rps import (
    ReliablePredictionSets,
    _smoothed,
    _target_bounds,
    hash_partition,
    majority_coverage,
    majority_coverage_bounds,
    majority_threshold,
    minimum_partition_size,
    partition_rank,
)
from uqconform.datasets import make_gaussian_classification
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


@pytest.fixture(scope="module")
def probability_pool():
    """One logistic regression, trained once on 700 digits, and the 1097 others to resplit.

    Used with ``k_train=1`` (the model passed as a fitted list): the score is the model's
    probability of the label, continuous, and the model is the one split CP would use.
    """
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    order = np.random.default_rng(1).permutation(len(y))
    fit, pool = order[:700], order[700:]
    model = LogisticRegression(max_iter=1000).fit(X[fit], y[fit])
    return model, X[pool], y[pool]


def _resplit(pool, split: int, n_calibration: int = 600):
    """Calibration and test rows of the pool, shuffled by ``split``."""
    _, X, y = pool
    order = np.random.default_rng([8, split]).permutation(len(y))
    cal, test = order[:n_calibration], order[n_calibration:]
    return X[cal], y[cal], X[test], y[test]


# ---- the law of the majority set's coverage --------------------------------------------------
# For continuous scores, in the quantile scale u of the score law: calibration partition i
# keeps the true label when the test point's u is at least U_i, the r_i-th smallest of n_i
# uniforms, U_i ~ Beta(r_i, n_i - r_i + 1) (U_i = 0 for rank 0), independent across
# partitions; the majority keeps it when u >= V, the (tau + 1)-th smallest U_i. Given the
# calibration data the coverage is 1 - V, so a test set of m rows covers Binomial(m, 1 - V)
# of them, and E[1 - V] is `majority_coverage`. With one partition and tau = 0 this is the
# split-CP law of `coverage_bounds`.
def _miscoverage_cdf(sizes, ranks, tau: int, v: np.ndarray) -> np.ndarray:
    """``P(V <= v)``: more than ``tau`` of the ``U_i`` are at most ``v`` (Poisson-binomial)."""
    law = np.zeros((v.size, len(sizes) + 1))
    law[:, 0] = 1.0
    for n, r in zip(sizes, ranks, strict=True):  # a loop over partitions
        p = special.betainc(r, n - r + 1, v)[:, None] if r > 0 else np.ones((v.size, 1))
        law[:, 1:] = law[:, 1:] * (1 - p) + law[:, :-1] * p
        law[:, 0] *= 1 - p[:, 0]
    return law[:, tau + 1 :].sum(axis=1)


def _covered_count_pmf(sizes, ranks, tau: int, n_test: int, nodes: int = 2048) -> np.ndarray:
    """Law of the number of covered test rows for one calibration draw: ``Binomial(n_test,
    1 - V)`` mixed over the law of ``V``, on a fine grid over its support."""
    sizes, ranks = np.asarray(sizes), np.asarray(ranks)
    active = ranks > 0
    law = stats.beta(ranks[active], sizes[active] - ranks[active] + 1)
    support = np.linspace(law.ppf(1e-13).min(), law.isf(1e-13).max(), nodes)
    edges = np.concatenate([[0.0], support])
    cdf = _miscoverage_cdf(sizes, ranks, tau, edges)
    mass, middle = np.clip(np.diff(cdf), 0, None), (edges[:-1] + edges[1:]) / 2
    pmf = mass @ stats.binom.pmf(np.arange(n_test + 1)[None, :], n_test, 1 - middle[:, None])
    pmf[-1] += cdf[0]  # V = 0: more than tau partitions keep every label
    return pmf / pmf.sum()


def _pooled_bounds(pmfs, confidence: float = 0.99) -> tuple[float, float]:
    """Central ``confidence`` interval of the coverage pooled over independent resplits
    (their counts convolved), with the conventions of `coverage_bounds`."""
    pooled = functools.reduce(np.convolve, pmfs)
    cdf = np.cumsum(pooled / pooled.sum())
    total, tail = pooled.size - 1, (1 - confidence) / 2
    low, high = np.searchsorted(cdf, tail), np.searchsorted(cdf, 1 - tail)
    return int(low) / total, min(int(high), total) / total


def test_majority_law_is_split_cp_for_one_partition_and_has_the_formula_mean():
    n, m = 600, 497
    rank = partition_rank(n, 1, ALPHA, "exact")
    assert rank == 60  # one partition: the textbook rank floor((n + 1) alpha)
    pmf = _covered_count_pmf([n], [rank], 0, m)
    for repeats in (1, 10):
        expected = coverage_bounds(n, ALPHA, m, 0.99, n_repeats=repeats)
        assert _pooled_bounds([pmf] * repeats) == pytest.approx(expected, abs=1 / (m * repeats))
    sizes, ranks, tau = [125, 118, 107, 138, 112], [11, 10, 9, 12, 9], 3
    pmf = _covered_count_pmf(sizes, ranks, tau, m)
    mean = pmf @ np.arange(m + 1) / m
    assert mean == pytest.approx(majority_coverage(sizes, ranks, tau), abs=1e-6)


def test_the_votes_tail_and_transitions_are_those_of_the_plain_recursion():
    """Review finding (rps_profile): the quadrature of `majority_coverage` was a large share
    of a `calibrate`. It now updates only the vote columns that can be nonzero and reads the Beta
    quantiles without freezing a distribution: the same values, bit for bit, as the
    recursion over every column (`_miscoverage_cdf`) and a frozen `stats.beta`."""
    rng = np.random.default_rng(7)
    u = np.sort(rng.uniform(size=400))
    for k in (1, 5, 22, 40):
        sizes = rng.integers(1, 400, size=k)
        ranks = rng.integers(0, sizes + 1)
        ranks[0] = 0  # a partition that keeps every label
        for tau in {0, k // 2, k - 1}:
            tail = rps_module._votes_above(u, sizes, ranks, tau)
            np.testing.assert_array_equal(tail, _miscoverage_cdf(sizes, ranks, tau, u))
        for n, r in zip(sizes[1:], ranks[1:], strict=True):
            law = stats.beta(r, n - r + 1) if r > 0 else None
            expected = (float(law.ppf(1e-13)), float(law.isf(1e-13))) if law else (0.0, 0.0)
            assert rps_module._transition(int(n), int(r)) == expected


def test_majority_coverage_bounds_follow_the_law_of_the_majority_set():
    """The library's pooled law against this file's and against a simulation of ``V``."""
    rng = np.random.default_rng(5)
    m, tau = 300, 7
    sizes = rng.integers(40, 80, size=(3, 10))
    ranks = np.array([[partition_rank(int(n), 10, ALPHA, "exact") for n in row] for row in sizes])
    low, high = majority_coverage_bounds(sizes, ranks, tau, m)
    pmfs = [_covered_count_pmf(n, r, tau, m) for n, r in zip(sizes, ranks, strict=True)]
    assert (low, high) == pytest.approx(_pooled_bounds(pmfs), abs=1 / (3 * m))
    # simulated: V is the (tau + 1)-th smallest partition threshold in the quantile scale
    draws = 200_000
    counts = np.zeros(draws)
    for n, r in zip(sizes, ranks, strict=True):  # a loop over resplits
        thresholds = rng.beta(r, n - r + 1, size=(draws, r.size))
        v = np.sort(thresholds, axis=1)[:, tau]
        counts += rng.binomial(m, 1 - v)
    simulated = np.quantile(counts / (3 * m), [0.005, 0.995])
    np.testing.assert_allclose([low, high], simulated, atol=2 / (3 * m))
    with pytest.raises(ValueError, match="one entry per partition"):
        majority_coverage_bounds(sizes, ranks[:, :5], tau, m)
    # review findings: a threshold no label can pass gave (0.14, 0.36); fractions truncated
    assert majority_coverage_bounds([60] * 10, [5] * 10, 10, 100) == (0.0, 0.0)
    with pytest.raises(ValueError, match="`sizes` must be whole numbers"):
        majority_coverage_bounds([60.7] * 10, [5] * 10, 7, 100)


def test_the_binomial_mixture_in_log_space_equals_scipys_pmfs():
    """The bounds' mixture of binomials (log space, in blocks of cells) against scipy's pmf,
    with success 0 and 1 and cells without mass; 4001 counts make blocks of 999 cells."""
    rng = np.random.default_rng(3)
    for n_test, cells in ((1, 5), (37, 300), (4000, 2500)):
        success = np.concatenate([[0.0, 1.0], rng.uniform(size=cells - 2)])
        mass = rng.dirichlet(np.ones(cells)) * (rng.uniform(size=cells) > 0.2)
        expected = mass @ stats.binom.pmf(np.arange(n_test + 1), n_test, success[:, None])
        got = rps_module._binomial_mixture(mass, success, n_test)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-15)


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
    # Continuous scores: the formula is the exact coverage; check it by simulation. The
    # replications are independent, so the count of covered ones is Binomial(reps, expected).
    rng = np.random.default_rng(0)
    sizes, reps = np.array([12, 20, 15]), 20000
    ranks = np.array([2, 3, 1])
    tau = 1
    expected = majority_coverage(sizes, ranks, tau)
    votes = np.zeros(reps, dtype=int)
    test = rng.random(reps)
    for n, r in zip(sizes, ranks, strict=True):
        scores = np.sort(rng.random((reps, n)), axis=1)
        votes += test >= scores[:, r - 1]
    low, high = stats.binom.ppf([5e-4, 1 - 5e-4], reps, expected)
    assert low <= (votes > tau).sum() <= high


@pytest.mark.parametrize(("n", "k", "level"), [(45, 22, 0.1), (100, 10, 0.1), (200, 5, 0.05)])
def test_exact_rank_is_the_largest_valid_rank(n, k, level):
    tau = majority_threshold(k, level)
    rank = partition_rank(n, k, level, "exact")
    assert majority_coverage([n] * k, [rank] * k, tau) >= 1 - level
    assert majority_coverage([n] * k, [rank + 1] * k, tau) < 1 - level


def test_paper_rank_is_one_below_the_textbook_rank():
    assert partition_rank(1000, 22, 0.1, "paper") == 99  # the 99th smallest, not the 100th
    assert partition_rank(9, 5, 0.1, "paper") == 1  # clipped at the smallest score


def test_hash_partition_refuses_rows_that_are_not_2d():
    """3-D input hashed only each row's first slice; None gave a bare TypeError."""
    for X in (np.zeros((4, 2, 2)), None):
        with pytest.raises(ValueError, match=r"`X` must be a 2-D array of rows"):
            hash_partition(X, 3)


def test_paper_rank_of_a_partition_below_the_minimum_is_zero():
    """Partitions smaller than minimum_scores(alpha) got rank 1 (their smallest score as
    threshold) instead of voting for every label: 30 rows in 5 partitions covered 0.79 at
    nominal 0.90, and an empty partition made predict_set fail on alpha."""
    ranks = [partition_rank(n, 5, 0.1, "paper") for n in range(12)]
    assert ranks == [0] * 9 + [1] * 3
    assert majority_coverage([6] * 5, [0] * 5, majority_threshold(5, 0.1)) == 1.0
    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    model = ReliablePredictionSets(
        LogisticRegression(max_iter=500), k_train=1, k_calib=40, coverage="paper", alpha=0.1
    )
    with pytest.warns(UserWarning):  # partitions below the minimum are named
        model.fit(X[:100], y[:100]).calibrate(X[100:125], y[100:125])
    assert model.predict_set(X[125:]).all()  # every partition votes for every label


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


def test_permuted_votes_give_a_label_the_same_score_to_the_bit():
    """Vote scores are discrete, so a test score often ties a partition threshold exactly;
    the softmax denominator summed in label order broke such ties by one ulp (counts
    [2,2,1,0,2,1,0,3,2,2] and [2,0,2,1,2,2,0,3,2,1], k_train 15: label 0's score and
    label 2's differed), leaving a label out that exact arithmetic keeps."""
    rng = np.random.default_rng(5)
    counts = rng.integers(0, 4, size=(400, 10))
    order = np.argsort(rng.random(counts.shape), axis=1)
    permuted = np.take_along_axis(counts, order, axis=1)
    for kind in ("vote_softmax", "vote"):
        scores = _smoothed(counts, 15, kind)
        moved = np.take_along_axis(_smoothed(permuted, 15, kind), np.argsort(order, axis=1), 1)
        np.testing.assert_array_equal(scores, moved)
    example = np.array([[2, 2, 1, 0, 2, 1, 0, 3, 2, 2], [2, 0, 2, 1, 2, 2, 0, 3, 2, 1]])
    scores = _smoothed(example, 15, "vote_softmax")
    assert scores[0, 0] == scores[1, 2]
    # the worst-case bounds use the same sum: with no vote changed they are the scores
    low, high = _target_bounds(example, np.array([0, 2]), 0, 15, "vote_softmax")
    np.testing.assert_array_equal(low, [scores[0, 0], scores[1, 2]])
    np.testing.assert_array_equal(high, low)


def _greedy_bounds(counts, target, radius, k_train, kind):
    """The former `_target_bounds`, kept as the oracle: the greedy moves one vote at a time
    (a loop over the radius), ties to the lowest label as np.argmax / np.argmin break them.
    ``target`` (n,), or (n, T) through a loop over its columns, as `_test_bounds` did."""
    if np.ndim(target) == 2:
        bounds = [_greedy_bounds(counts, column, radius, k_train, kind) for column in target.T]
        return tuple(np.stack([b[i] for b in bounds], axis=1) for i in (0, 1))
    n, k = counts.shape
    rows = np.arange(n)
    high = counts.astype(np.int64)  # a copy
    low = counts.astype(np.int64)
    if radius == 0:
        scores = _smoothed(high, k_train, kind)[rows, target]
        return scores, scores.copy()
    others = np.ones((n, k), dtype=bool)
    others[rows, target] = False
    for _ in range(radius):  # a loop over the radius, vectorised over rows
        abstain = k_train - high.sum(axis=1)
        competitor = np.where(others, high, -1)
        strongest = np.argmax(competitor, axis=1)
        from_competitor = competitor[rows, strongest] > 0
        moved = from_competitor | (abstain > 0)
        high[rows[from_competitor], strongest[from_competitor]] -= 1
        high[rows[moved], target[moved]] += 1
    strongest = np.argmax(np.where(others, low, -1), axis=1)
    taken = np.minimum(low[rows, target], radius)
    low[rows, target] -= taken
    left = radius - taken
    from_abstain = np.minimum(left, k_train - counts.sum(axis=1))
    low[rows, strongest] += taken + from_abstain
    left -= from_abstain
    donors = others.copy()
    donors[rows, strongest] = False
    for _ in range(int(left.max(initial=0))):  # weakest competitors, one vote at a time
        candidate = np.where(donors & (low > 0), low, np.iinfo(np.int64).max)
        weakest = np.argmin(candidate, axis=1)
        move = (left > 0) & (candidate[rows, weakest] < np.iinfo(np.int64).max)
        low[rows[move], weakest[move]] -= 1
        low[rows[move], strongest[move]] += 1
        left -= move
    return (
        _smoothed(low, k_train, kind)[rows, target],
        _smoothed(high, k_train, kind)[rows, target],
    )


def _random_votes(rng, n_rows: int, n_labels: int, k_train: int) -> np.ndarray:
    """Vote counts (n_rows, n_labels), C-ordered as `vote_counts` gives them: concentrated or
    spread votes, some abstaining models, heavy ties, rows with no vote or no abstention."""
    spread = rng.choice([0.05, 0.5, 5.0])
    shares = rng.dirichlet(np.full(n_labels + 1, spread), size=n_rows)  # last: abstain
    counts = np.stack([rng.multinomial(k_train, share) for share in shares])[:, :n_labels]
    style = rng.integers(4)
    if style == 1:  # heavy ties: few distinct counts
        counts = np.minimum(counts, rng.integers(0, 3))
    elif style == 2:  # no abstaining model
        counts[:, rng.integers(n_labels)] += k_train - counts.sum(axis=1)
    elif style == 3:  # every label equal
        counts[:] = k_train // n_labels
    counts[rng.random(n_rows) < 0.15] = 0  # every model abstains
    return np.ascontiguousarray(counts)


def test_target_bounds_equal_the_greedy_moves_bit_for_bit(monkeypatch):
    """The vote configurations are computed directly, not vote by vote: the floats must be
    those of the greedy moves exactly (np.array_equal), per-row targets and every label."""
    rng = np.random.default_rng(7)
    compared = 0
    for case in range(150):
        # small blocks for a third of the cases: windows differ from block to block
        monkeypatch.setattr(rps_module, "_BLOCK_SIZE", 1 << 19 if case % 3 else 64)
        n_labels = int(rng.integers(2, 13)) if case % 20 else int(rng.integers(13, 41))
        k_train = int(rng.integers(1, 13)) if case % 20 else int(rng.integers(20, 61))
        n_rows = int(rng.integers(1, 30))
        counts = _random_votes(rng, n_rows, n_labels, k_train)
        every = np.broadcast_to(np.arange(n_labels), counts.shape)
        largest = int(counts.max(initial=0))
        radii = {0, 1, 2, int(rng.integers(1, 8)), largest + 1, k_train, k_train + 3}
        for radius, kind in itertools.product(sorted(radii), ("vote_softmax", "vote")):
            target = rng.integers(0, n_labels, size=n_rows)
            for targets in (target, every):
                expected = _greedy_bounds(counts, targets, radius, k_train, kind)
                got = _target_bounds(counts, targets, radius, k_train, kind)
                assert got[0].shape == got[1].shape == targets.shape
                assert np.array_equal(got[0], expected[0]), (counts, targets, radius, kind)
                assert np.array_equal(got[1], expected[1]), (counts, targets, radius, kind)
                compared += 2 * targets.size
    assert compared > 50_000
    # a radius beyond every vote and abstention changes nothing more (and is not looped)
    counts = _random_votes(np.random.default_rng(8), 50, 6, 9)
    every = np.broadcast_to(np.arange(6), counts.shape)
    for kind in ("vote_softmax", "vote"):
        huge = _target_bounds(counts, every, 10**15, 9, kind)
        for got, expected in zip(huge, _greedy_bounds(counts, every, 9, 9, kind), strict=True):
            assert np.array_equal(got, expected)


@pytest.mark.parametrize("score", ["vote_softmax", "vote"])
def test_certificates_equal_those_of_the_greedy_moves(score, fitted, digits, monkeypatch):
    """End to end: bounds, certificates and reliability curves of the direct computation
    are those of the former vote-by-vote greedy moves, exactly."""
    _, _, X_cal, y_cal, X_test, _ = digits
    model = copy.deepcopy(fitted).set_params(conformity_score=score).calibrate(X_cal, y_cal)
    radii = [0, 1, 2, 3, 5, 8]

    def run():
        votes = model._test_votes(X_test)
        out = {
            f"{name}{r}": value
            for r in radii
            for name, value in zip(
                ("scores", "low", "high"), model._test_bounds(votes, r), strict=True
            )
        }
        for r in radii:
            _, lowest, highest = model._partition_thresholds(model.partition_ranks_, r)
            out[f"thresholds{r}"] = np.stack([lowest, highest])
            for r_calib in (0, 1):
                for key, value in model.certify(X_test, r_train=r, r_calib=r_calib).items():
                    out[f"{key}{r}-{r_calib}"] = value
        for poisoned in ("training", "both"):
            curve = model.reliability_curve(X_test, radii, poisoned=poisoned)
            out.update({f"{key}-{poisoned}": value for key, value in curve.items()})
        return out

    direct = run()
    monkeypatch.setattr(rps_module, "_target_bounds", _greedy_bounds)
    model.__dict__.pop("_threshold_cache")  # the thresholds are kept per calibration
    greedy = run()
    assert direct.keys() == greedy.keys()
    for key, value in direct.items():
        assert np.array_equal(value, greedy[key]), key
    assert not direct["robust3-0"].all() and direct["robust1-0"].any()  # not trivial


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


def _calibrated(source: str, mode: str, fitted, digits, probability_pool):
    """A calibrated model with vote scores (the ``fitted`` fixture) or probability scores
    (``k_train=1``), with its calibration and test features and labels."""
    if source == "votes":
        _, _, X_cal, y_cal, X_test, _ = digits
        model = copy.deepcopy(fitted).set_params(coverage=mode)
    else:
        X_cal, y_cal, X_test, _ = _resplit(probability_pool, 0)
        model = ReliablePredictionSets([probability_pool[0]], k_calib=5, coverage=mode, salt=3)
    return model.calibrate(X_cal, y_cal), X_cal, y_cal, X_test


@pytest.mark.parametrize("source", ["votes", "probabilities"])
@pytest.mark.parametrize("mode", ["exact", "paper"])
def test_thresholds_follow_partition_rank_and_sets_are_the_majority(
    mode, source, fitted, digits, probability_pool
):
    # Every piece recomputed from its definition: the hash partitions, the rank of
    # `partition_rank` for each partition's own size, the rank-th smallest calibration score
    # of the partition, its set, and the majority of those sets (more than tau votes).
    rps, X_cal, y_cal, X_test = _calibrated(source, mode, fitted, digits, probability_pool)
    k = rps.k_calib
    part = hash_partition(X_cal, k, rps.salt)
    np.testing.assert_array_equal(rps.calibration_partition_, part)
    np.testing.assert_array_equal(rps.partition_sizes_, np.bincount(part, minlength=k))
    scores = rps.predict_scores(X_cal)[np.arange(len(y_cal)), y_cal]
    np.testing.assert_array_equal(rps.conformity_scores_, scores)
    test_scores = rps.predict_scores(X_test)
    for level in (ALPHA, 0.2):  # the constructor's level, and one passed at prediction
        ranks = [partition_rank(n, k, level, mode) for n in rps.partition_sizes_]
        thresholds = np.array(
            [np.sort(scores[part == i])[r - 1] if r > 0 else -np.inf for i, r in enumerate(ranks)]
        )
        tau = majority_threshold(k, level)
        partition_sets = test_scores[:, :, None] >= thresholds[None, None, :]
        np.testing.assert_array_equal(rps.partition_sets(X_test, alpha=level), partition_sets)
        majority = partition_sets.sum(axis=2) > tau
        np.testing.assert_array_equal(rps.predict_set(X_test, alpha=level), majority)
        if level == ALPHA:
            np.testing.assert_array_equal(rps.partition_ranks_, ranks)
            np.testing.assert_array_equal(rps.partition_thresholds_, thresholds)
            np.testing.assert_array_equal(rps.partition_sets(X_test), partition_sets)
            np.testing.assert_array_equal(rps.predict_set(X_test), majority)
            assert rps.majority_threshold_ == tau
            assert rps.majority_coverage_ == majority_coverage(rps.partition_sizes_, ranks, tau)


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


def test_integer_salts_of_any_size_up_to_64_bytes():
    """Review finding: an integer salt outside [-2**127, 2**127) (``secrets.randbits(256)``,
    as a secret salt) failed with a bare "OverflowError: int too big to convert", though
    str and bytes salts are accepted up to 64 bytes."""
    X = np.random.default_rng(0).normal(size=(200, 3))
    y = np.arange(200) % 2
    # the salts accepted before keep their key (16 bytes, little-endian, signed): their
    # partitions do not move
    for salt in (0, 1, -1, 12345, np.int64(-7), 2**64 + 3, 2**127 - 1, -(2**127)):
        before = int(salt).to_bytes(16, "little", signed=True)
        np.testing.assert_array_equal(hash_partition(X, 7, salt), hash_partition(X, 7, before))
    large = (2**127, -(2**127) - 1, 2**255 + 12345, 2**511 - 1, -(2**511))
    partitions = {tuple(hash_partition(X, 7, salt).tolist()) for salt in large}
    assert len(partitions) == len(large)  # five keys, five partitions
    assert tuple(hash_partition(X, 7, 2**127 - 1).tolist()) not in partitions
    model = ReliablePredictionSets(k_train=2, k_calib=2, salt=2**255 + 12345)
    model.fit(X[:100], y[:100]).calibrate(X[100:], y[100:])
    np.testing.assert_array_equal(
        model.partition_sets(X).sum(axis=2) > model.majority_threshold_, model.predict_set(X)
    )
    for salt in (2**511, -(2**511) - 1, 2**1000):
        with pytest.raises(ValueError, match=r"`salt`.*64 bytes.*-2\*\*511"):
            hash_partition(X, 7, salt)
        with pytest.raises(ValueError, match=r"`salt`.*64 bytes"):
            ReliablePredictionSets(salt=salt).fit(X, y)


def test_mixed_tables_hash_their_number_columns_whatever_their_dtype():
    """Beside a text column, an Int64 or boolean column and the same values as float64 give
    the same partitions and digests (rows went through repr: 16% of partitions agreed);
    the split wrappers' row digests (randomised scores, the training-rows warning) alike."""
    from uqconform._rows import rows_digest

    rng = np.random.default_rng(0)
    numbers = rng.integers(-5, 6, size=200)
    text = rng.choice(["a", "b", "c"], size=200)
    flags = rng.random(200) < 0.5
    nullable = pd.DataFrame(
        {"t": text, "n": pd.array(numbers, dtype="Int64"), "f": pd.array(flags, dtype="boolean")}
    )
    nullable.loc[3, "n"] = pd.NA
    plain = pd.DataFrame({"t": text, "n": numbers.astype(float), "f": flags.astype(float)})
    plain.loc[3, "n"] = np.nan
    plain.index = plain.index + 1000  # the index is not part of a row
    np.testing.assert_array_equal(hash_partition(nullable, 7), hash_partition(plain, 7))
    assert rows_digest(nullable) == rows_digest(plain)
    changed = plain.assign(n=plain["n"] + 1)
    assert rows_digest(changed) != rows_digest(plain)
    assert (hash_partition(changed, 7) != hash_partition(plain, 7)).any()


def test_hash_partition_reads_the_numbers_whatever_their_container():
    """Nullable pandas columns and object arrays of numbers hash as their float64 values
    (they went through repr: 37% of rows kept their partition with an Int64 frame)."""
    X = np.random.default_rng(0).integers(-5, 6, size=(200, 3))
    part = hash_partition(X.astype(float), 7)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    for same in (X, X.astype(object), frame.astype("Int64"), frame.astype("Float64"),
                 X.astype(np.float32), X.astype(float).tolist()):  # fmt: skip
        np.testing.assert_array_equal(hash_partition(same, 7), part)
    with_na = frame.astype("Float64")
    with_na.iloc[0, 0] = pd.NA
    nan_rows = X.astype(float)
    nan_rows[0, 0] = np.nan
    np.testing.assert_array_equal(hash_partition(with_na, 7), hash_partition(nan_rows, 7))
    strings = hash_partition(X.astype(str), 7)  # text is hashed as text, not as numbers
    assert strings.shape == part.shape and (strings != part).any()


def test_a_rows_partition_depends_on_its_own_values_alone():
    """Review s64: the hash's encoding was chosen for the whole table, so one inserted row
    with a text, boolean or Decimal cell in a float column sent every row through repr
    (173 of 200 rows moved; certified-robust sets changed under one poisoned row)."""
    from decimal import Decimal

    X = np.random.default_rng(0).normal(size=(200, 3))
    part = hash_partition(X, 7)
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    for cell in ("n/a", True, Decimal("0.5"), "3", 1j):
        odd = pd.DataFrame({"a": [cell], "b": [0.0], "c": [0.0]}, dtype=object)
        poisoned = pd.concat([frame, odd], ignore_index=True)
        np.testing.assert_array_equal(hash_partition(poisoned, 7)[:200], part)
        rows = np.vstack([X.astype(object), np.array([[cell, 0.0, 0.0]], dtype=object)])
        np.testing.assert_array_equal(hash_partition(rows, 7)[:200], part)
    # (diff review 51) beside a text column too: one odd cell in a number column made it a
    # column of objects, and every text row's repr then read its numbers as ints
    mixed_frame = frame.assign(city=np.where(X[:, 0] > 0, "paris", "oslo"))
    part = hash_partition(mixed_frame, 7)
    for cell in ("n/a", True, Decimal("0.5")):
        odd = pd.DataFrame({"a": [cell], "b": [0.0], "c": [0.0], "city": ["rome"]})
        poisoned = pd.concat([mixed_frame, odd.astype(object)], ignore_index=True)
        np.testing.assert_array_equal(hash_partition(poisoned, 7)[:200], part)
    np.testing.assert_array_equal(hash_partition(mixed_frame.to_numpy(), 7), part)
    assert hash_partition(np.array([[2**1100, "x"]], dtype=object), 7).shape == (1,)
    # a row of numbers (or missing values) among text rows hashes as in a table of numbers
    mixed = np.array([[1.5, -0.0], ["x", 2.0], [None, 3.0]], dtype=object)
    expected = hash_partition(np.array([[1.5, 0.0], [np.nan, 3.0]]), 1_000_003)
    np.testing.assert_array_equal(hash_partition(mixed, 1_000_003)[[0, 2]], expected)


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


@pytest.mark.filterwarnings("ignore:.*calibration partitions have fewer than")
def test_majority_coverage_is_computed_once_per_calibration_and_level(fitted, digits, monkeypatch):
    """Review finding (rps_majority_coverage_access): `majority_coverage_` ran its
    quadrature at every read (0.4-1.2 s with 40 partitions of about 100 rows, as long as
    the rest of a `calibrate`, which read it twice when it warned). It is kept per
    calibration and level now: the same value as the formula's, recomputed after a new
    calibration, a changed setting (alpha, coverage, k_calib) and a pickle round trip."""
    _, _, X_cal, y_cal, _, _ = digits
    calls = []

    def counted(*args, **kwargs):
        calls.append(args)
        return majority_coverage(*args, **kwargs)

    def formula(model):
        return majority_coverage(
            model.partition_sizes_, model.partition_ranks_, model.majority_threshold_
        )

    monkeypatch.setattr(rps_module, "majority_coverage", counted)
    model = copy.deepcopy(fitted)
    model.calibrate(X_cal, y_cal)
    assert len(calls) == 1  # calibrate's check
    values = [model.majority_coverage_ for _ in range(3)]
    assert len(calls) == 1
    assert values == [formula(model)] * 3  # bit for bit
    assert isinstance(values[0], float)
    model.set_params(alpha=0.2)  # another level: computed for it
    assert model.majority_coverage_ == formula(model) != values[0]
    assert len(calls) == 2
    model.set_params(alpha=ALPHA)  # back: the kept value
    assert model.majority_coverage_ == values[0]
    assert len(calls) == 2
    for name, value in (("coverage", "paper"), ("k_calib", 4)):  # settings it depends on
        before = len(calls)
        changed = model.set_params(**{name: value}).majority_coverage_
        assert changed == formula(model) != values[0]
        assert len(calls) == before + 1
        model.set_params(**{name: fitted.get_params()[name]})
    calls.clear()
    model.calibrate(X_cal, y_cal)  # a new calibration, even of the same rows: computed again
    assert model.majority_coverage_ == values[0]
    assert len(calls) == 1
    model.calibrate(X_cal[:300], y_cal[:300])
    assert model.majority_coverage_ == formula(model) != values[0]
    assert len(calls) == 2
    loaded = pickle.loads(pickle.dumps(model))  # computed by the version that loads it
    assert loaded.majority_coverage_ == model.majority_coverage_
    assert len(calls) == 3
    # calibrate's warning reads the value twice: one computation
    paper = ReliablePredictionSets([fitted.estimators_[0]], k_calib=40, coverage="paper")
    calls.clear()
    with pytest.warns(UserWarning, match=r"covers 0\.\d+ < 1 - alpha"):
        paper.calibrate(X_cal, y_cal)
    assert paper.majority_coverage_ == formula(paper) < 1 - ALPHA
    assert len(calls) == 1


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
@pytest.mark.parametrize("mode", ["exact", "paper"])
def test_clean_coverage_follows_the_majority_law(mode, probability_pool):
    """Pooled coverage lies inside the central 99.9% interval of its law, on both sides.

    With ``k_train=1`` the score is the model's probability, continuous, so the law of the
    majority set's coverage (above) is exact, not a bound. Given the trained model, the
    calibration / test resplits of the pool are independent draws from it: conformal sets
    depend on the ranks of the scores only, and the salt (hence the hash partition) changes
    with the split. The law is built from `hash_partition` and `partition_rank`, not from the
    model's attributes, so a wrong rank moves the coverage out of it (halving the ranks
    moves the mean from about 0.90 to about 0.95, many standard errors).
    """
    model = probability_pool[0]
    k, resplits = 5, 10
    tau = majority_threshold(k, ALPHA)
    covered, n_test, pmfs = 0, 0, []
    for split in range(resplits):
        X_cal, y_cal, X_test, y_test = _resplit(probability_pool, split)
        rps = ReliablePredictionSets([model], k_calib=k, coverage=mode, salt=split)
        sets = rps.calibrate(X_cal, y_cal).predict_set(X_test)
        n_test = len(y_test)
        covered += int(sets[np.arange(n_test), y_test].sum())
        sizes = np.bincount(hash_partition(X_cal, k, split), minlength=k)
        ranks = [partition_rank(n, k, ALPHA, mode) for n in sizes]
        pmfs.append(_covered_count_pmf(sizes, ranks, tau, n_test))
        mean = pmfs[-1] @ np.arange(n_test + 1) / n_test
        assert rps.majority_coverage_ == pytest.approx(mean, abs=1e-6)
    low, high = _pooled_bounds(pmfs, confidence=0.999)
    assert low <= covered / (n_test * resplits) <= high


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["exact", "paper"])
def test_clean_coverage_over_seeds(mode):
    """Vote scores (``k_train=3``), pooled over seeds: one-sided, against the majority law.

    Vote scores tie, and a tie with a threshold only adds the label: jittering the scores
    by less than their smallest gap gives sets inside these, whose coverage follows the
    continuous law exactly. So the law's lower end is a valid bound (the tightest one that
    holds whatever the ties), but nothing bounds the coverage from above.
    """
    X, y = load_digits(return_X_y=True)
    covered, n_test, pmfs = 0, 0, []
    seeds, k = range(8), 5
    tau = majority_threshold(k, ALPHA)
    for seed in seeds:
        order = np.random.default_rng(seed).permutation(len(y))
        fit, cal, test = order[:700], order[700:1300], order[1300:]
        model = ReliablePredictionSets(
            LogisticRegression(max_iter=200), k_train=3, k_calib=k, coverage=mode, salt=seed
        )
        sets = model.fit(X[fit], y[fit]).calibrate(X[cal], y[cal]).predict_set(X[test])
        covered += int(sets[np.arange(test.size), y[test]].sum())
        n_test = test.size
        sizes = np.bincount(hash_partition(X[cal], k, seed), minlength=k)
        ranks = [partition_rank(n, k, ALPHA, mode) for n in sizes]
        pmfs.append(_covered_count_pmf(sizes, ranks, tau, n_test))
    lower, _ = _pooled_bounds(pmfs)
    assert covered / (n_test * len(seeds)) >= lower


# ---- efficiency ------------------------------------------------------------------------------
def test_exact_rank_is_the_most_efficient_valid_rank(probability_pool):
    """A higher rank is a higher threshold, hence a smaller set (same scores). The exact rank
    is the largest one the formula allows, so the exact sets are inside the published
    rule's wherever the published rank is valid, and larger only where it is not.

    Which case holds depends on ``k_calib`` and the partition size (not on the data): with
    ``k_calib=3`` (partitions of about 200) every exact rank is above the published one, so
    the exact sets are the smaller; with ``k_calib=5`` (about 120) the published rank is the
    higher, and its formula coverage at that size is below ``1 - alpha``.
    """
    model = probability_pool[0]
    X_cal, y_cal, X_test, _ = _resplit(probability_pool, 0)
    for k in (3, 5):
        tau = majority_threshold(k, ALPHA)
        exact, paper = (
            ReliablePredictionSets([model], k_calib=k, coverage=mode).calibrate(X_cal, y_cal)
            for mode in ("exact", "paper")
        )
        r_exact, r_paper = exact.partition_ranks_, paper.partition_ranks_
        in_exact, in_paper = exact.partition_sets(X_test), paper.partition_sets(X_test)
        for i, n in enumerate(exact.partition_sizes_):
            if r_exact[i] >= r_paper[i]:
                assert (in_exact[..., i] <= in_paper[..., i]).all()
            else:
                assert (in_exact[..., i] >= in_paper[..., i]).all()
                assert majority_coverage([n] * k, [r_paper[i]] * k, tau) < 1 - ALPHA
        sets_exact, sets_paper = exact.predict_set(X_test), paper.predict_set(X_test)
        if k == 3:
            assert (r_exact > r_paper).all()
            assert (sets_exact <= sets_paper).all()
            assert sets_exact.sum(axis=1).mean() <= sets_paper.sum(axis=1).mean()
        else:
            assert (r_exact < r_paper).any() and (r_exact <= r_paper).all()
            assert (sets_exact >= sets_paper).all()


def test_price_of_the_vote_against_split_cp_on_the_same_model(probability_pool):
    """RPS costs split CP at most a level: its sets are inside those of split CP (LAC) on the
    same model at a level ``alpha'`` set by the two coverage laws, with probability >= 99%.

    With ``k_train=1`` both methods use one model trained on all the training data and keep
    the labels whose probability clears a threshold: RPS's is the ``(tau + 1)``-th smallest
    partition threshold, at ``V`` in the quantile scale (the law above); split CP's at level
    ``alpha'`` is the ``l'``-th smallest of all ``n`` calibration probabilities,
    ``l' = floor((n + 1) alpha')``, at ``Beta(l', n + 1 - l')``. RPS's set is inside split
    CP's when its threshold is the higher. The only price of RPS is then the vote over
    smaller calibration sets, and set sizes have no distribution-free ratio, so the bound is
    a level: ``l'`` is the largest rank whose threshold exceeds the 0.5% quantile of ``V``
    with probability at most 0.5%, and the inclusion fails with probability at most 1%.
    """
    model = probability_pool[0]
    X_cal, y_cal, X_test, _ = _resplit(probability_pool, 0)
    k, n = 5, len(y_cal)
    tau = majority_threshold(k, ALPHA)
    rps = ReliablePredictionSets([model], k_calib=k).calibrate(X_cal, y_cal)
    sizes = np.bincount(hash_partition(X_cal, k, 0), minlength=k)
    ranks = [partition_rank(size, k, ALPHA) for size in sizes]
    v_low = optimize.brentq(
        lambda v: _miscoverage_cdf(sizes, ranks, tau, np.array([v]))[0] - 0.005, 0.0, 1.0
    )
    candidates = np.arange(1, n + 1)
    rank = int(candidates[stats.beta.sf(v_low, candidates, n + 1 - candidates) <= 0.005].max())
    level = (rank + 0.5) / (n + 1)  # floor((n + 1) level) = rank
    lac = SplitConformalClassifier(model, alpha=ALPHA).calibrate(X_cal, y_cal)
    lac_sets, rps_sets = lac.predict_set(X_test, alpha=level), rps.predict_set(X_test)
    assert (rps_sets <= lac_sets).all()
    assert rps_sets.sum(axis=1).mean() <= lac_sets.sum(axis=1).mean()
    assert not lac_sets.all()  # the comparison is not with the full label set


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
                strategy="concentrated", order=scores, random_state=radius,
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
    # exact coverage with 40 partitions needs 18 points each (rank 0 below: every label)
    assert minimum_partition_size(40, 0.1, "exact") == 18
    assert partition_rank(17, 40, 0.1, "exact") == 0 < partition_rank(18, 40, 0.1, "exact")
    # calibrate warns (the API's rule for too few points) and the small partitions vote
    # for every label; it raised before, so a multi-level call failed as a whole
    with pytest.warns(UserWarning, match="fewer than the 18 points"):
        model.calibrate(X_cal[:200], y_cal[:200])
    assert model.predict_set(X_test).all()  # 200 rows in 40 partitions: every one small
    with pytest.raises(ValueError, match="needs at least 18"):
        model.certify(X_test)
    model.set_params(k_calib=5).calibrate(X_cal, y_cal)
    smallest = int(model.partition_sizes_.min())
    with pytest.raises(ValueError, match=f"needs at least {smallest + 1}"):
        model.certify(X_test, r_calib=smallest - 9 + 1)  # minimum_scores(0.1) = 9
    with pytest.raises(ValueError, match="needs at least"):
        model.reliability_curve(X_test, [0, smallest])


def test_a_level_set_after_calibrate_warns_about_small_partitions_too(digits):
    """Robust review (stop 62): partitions too small for a level set by
    `set_params(alpha=...)` after calibrate voted for every label silently, where the same
    level given to `predict_set` warned."""
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    model = ReliablePredictionSets(LogisticRegression(max_iter=300), k_train=2, k_calib=10)
    model.fit(X_fit, y_fit)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 300 rows in 10 partitions suffice at 0.1
        model.calibrate(X_cal[:300], y_cal[:300])
        model.predict_set(X_test, alpha=0.2)  # a larger level needs fewer points
    needed = minimum_partition_size(10, 0.05, "exact")
    assert (model.partition_sizes_ < needed).any()
    with pytest.warns(UserWarning, match=f"fewer than the {needed} points"):
        given = model.predict_set(X_test, alpha=0.05)
    model.set_params(alpha=0.05)
    with pytest.warns(UserWarning, match=f"fewer than the {needed} points"):
        np.testing.assert_array_equal(model.predict_set(X_test), given)
    with pytest.warns(UserWarning, match=f"fewer than the {needed} points"):
        model.partition_sets(X_test)


def test_a_partition_model_failing_on_its_few_rows_is_named(digits):
    """Robust review (stop 62): a model that needs more rows than a partition holds got
    scikit-learn's bare message (a k-NN's at calibrate, "n_samples_fit = 4" among 300
    rows; an inner validation split's at fit)."""
    X_fit, y_fit, X_cal, y_cal, _, _ = digits
    knn = ReliablePredictionSets(KNeighborsClassifier(n_neighbors=5), k_train=40, k_calib=5)
    knn.fit(X_fit[:300], y_fit[:300])
    with pytest.raises(
        ValueError,
        match=r"^The model of training partition \d+ \(\d training rows\) of k_train=40 "
        r"failed: Expected n_neighbors <= n_samples_fit.*\. Each partition's model trains",
    ):
        knn.calibrate(X_cal, y_cal)
    from sklearn.neural_network import MLPClassifier

    early = ReliablePredictionSets(MLPClassifier(early_stopping=True), k_train=40, k_calib=5)
    with pytest.raises(
        ValueError,
        # scikit-learn's own words: "validation set is too small", or under 1.6 those of
        # its stratified split ("least populated class")
        match=r"training partition \d+ \(\d+ training rows\) of k_train=40 failed: "
        r"(The validation set is too small|The least populated class)",
    ):
        early.fit(X_fit[:300], y_fit[:300])
    # (diff review 43) a model's own parameter error keeps its class and text; adopted
    # models are the user's own: their errors are not about partitions
    from sklearn.utils._param_validation import InvalidParameterError

    with pytest.raises(InvalidParameterError, match=r"^The 'C' parameter"):
        ReliablePredictionSets(LogisticRegression(C=-1.0), k_train=2).fit(X_fit, y_fit)
    adopted = ReliablePredictionSets(list(knn.estimators_), k_calib=5)
    with pytest.raises(ValueError, match=r"^Expected n_neighbors <= n_samples_fit"):
        adopted.calibrate(X_cal, y_cal)
    # (review s64) with k_train=1 the one partition is the whole training set: no advice
    # to use a smaller k_train; otherwise the data is named as the other possible cause
    from sklearn.base import BaseEstimator, ClassifierMixin

    class Failing(ClassifierMixin, BaseEstimator):
        def fit(self, X, y):
            raise ValueError("the data has a column of NaN only")

        def predict(self, X):  # never reached
            raise NotImplementedError

    with pytest.raises(ValueError, match=r"k_train=1 failed: .*NaN only\. With k_train=1 it "):
        ReliablePredictionSets(Failing(), k_train=1).fit(X_fit, y_fit)
    with pytest.raises(ValueError, match=r"the whole training set, the data is the cause"):
        ReliablePredictionSets(Failing(), k_train=2).fit(X_fit, y_fit)


def test_a_certificate_survives_deletions_that_shrink_a_partition_below_its_minimum(digits):
    """With a partition at its minimum, certify(r_calib=1) holds: deleting one of its
    points makes calibrate warn and give it rank 0 (it votes for every label), and the
    certified rows keep their sets. calibrate used to refuse the attacked data."""
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    model = ReliablePredictionSets(k_train=1, k_calib=10, random_state=0).fit(X_fit, y_fit)
    model.calibrate(X_cal, y_cal)
    sizes, partition = model.partition_sizes_, model.calibration_partition_
    smallest = int(np.argmin(sizes))
    keep = np.ones(len(y_cal), dtype=bool)  # trim the smallest partition to the minimum
    rows = np.flatnonzero(partition == smallest)
    keep[rows[: max(int(sizes[smallest]) - minimum_partition_size(10, 0.1, "exact"), 0)]] = False
    model.calibrate(X_cal[keep], y_cal[keep])
    sets = model.predict_set(X_test)
    certified = model.certify(X_test, r_calib=1)["robust"]
    assert certified.any()
    drop = keep.copy()
    drop[np.flatnonzero((partition == smallest) & keep)[0]] = False  # one deletion
    attacked = copy.deepcopy(model)
    with pytest.warns(UserWarning, match="fewer than"):
        attacked.calibrate(X_cal[drop], y_cal[drop])
    after = attacked.predict_set(X_test)
    np.testing.assert_array_equal(after[certified], sets[certified])


def test_public_helpers_refuse_impossible_inputs_and_radii_are_named_as_given(digits):
    """majority_coverage gave 0.0148 for 5 votes out of 2 partitions and 0.80 for a
    threshold of -3; reliability_curve blamed the valid 0 in [0, 1, 2.5]."""
    assert majority_coverage([10, 10], [3, 3], 5) == 0.0  # no label gets 6 votes of 2
    with pytest.raises(ValueError, match="`threshold`"):
        majority_coverage([10, 10], [3, 3], -3)
    with pytest.raises(ValueError, match="`ranks`"):
        majority_coverage([10, 10], [3, 11], 0)
    with pytest.raises(ValueError, match="`k_calib`"):
        partition_rank(50, 3.7, 0.1)
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    model = ReliablePredictionSets(k_train=2, k_calib=5, random_state=0).fit(X_fit, y_fit)
    model.calibrate(X_cal, y_cal)
    with pytest.raises(ValueError, match=r"got 2\.5"):
        model.reliability_curve(X_test, [0, 1, 2.5])
    with pytest.raises(ValueError, match="got True"):
        model.reliability_curve(X_test, [True, 2])


def test_small_partitions_of_distinct_rows_do_not_warn_of_repeats():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(330, 3)), np.tile([0, 1, 2], 110)
    model = ReliablePredictionSets(k_train=3, k_calib=10, alpha=0.5, coverage="paper")
    model.fit(X[:300], y[:300])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 30 distinct rows, 3 per partition: no repeats
        model.calibrate(X[300:], y[300:])


def test_attributes_follow_alpha_changed_after_calibration(digits):
    """set_params(alpha=...) moves the sets; the thresholds and votes reported beside them
    (and worst_partitions, which reads them) stayed at the old level."""
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    model = ReliablePredictionSets(k_train=2, k_calib=5, random_state=0).fit(X_fit, y_fit)
    model.calibrate(X_cal, y_cal).set_params(alpha=0.2)
    assert model.majority_threshold_ == majority_threshold(5, 0.2)
    ranks = [partition_rank(n, 5, 0.2, "exact") for n in model.partition_sizes_]
    np.testing.assert_array_equal(model.partition_ranks_, ranks)
    votes = model.partition_sets(X_test).sum(axis=2)
    np.testing.assert_array_equal(model.predict_set(X_test), votes > model.majority_threshold_)


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


def test_parameters_changed_after_calibrate_need_a_new_calibration(digits):
    """Regression test: set_params(k_calib=...) without calibrate gave empty sets, and a new
    conformity_score mixed two scores."""
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    model = ReliablePredictionSets(k_train=2, k_calib=5, random_state=0).fit(X_fit, y_fit)
    sets = model.calibrate(X_cal, y_cal).predict_set(X_test)
    for change in ({"k_calib": 4}, {"conformity_score": "vote"}):
        model.set_params(**change)
        with pytest.raises(NotFittedError, match=r"predict_set: .*changed since calibrate"):
            model.predict_set(X_test)  # it named "prediction"
        model.calibrate(X_cal, y_cal).predict_set(X_test)  # a new calibration is fine
        model.set_params(k_calib=5, conformity_score="vote_softmax").calibrate(X_cal, y_cal)
    np.testing.assert_array_equal(model.predict_set(X_test), sets)


def test_votes_reached_count_the_thresholds_at_or_below_each_score():
    # a binary search replaces the (n, K, k_calib) comparison: ties count (score >= threshold)
    from uqconform.classification.rps import _votes_reached

    rng = np.random.default_rng(2)
    thresholds = np.append(np.round(rng.random(9), 1), np.inf)  # ties and an infinite one
    scores = np.round(rng.random((40, 6)), 1)
    scores[0, 0] = np.inf
    expected = (scores[:, :, None] >= thresholds[None, None, :]).sum(axis=2)
    np.testing.assert_array_equal(_votes_reached(scores, thresholds), expected)


def test_one_label_loses_the_votes_taken_from_it():
    """With a single label there is no competitor: changed votes leave it for no label (the
    greedy reference gave them back, so its lowest 'vote' score was too high)."""
    counts = np.array([[0], [3], [5]])
    low, high = _target_bounds(counts, np.zeros(3, dtype=int), 2, 5, "vote")
    np.testing.assert_array_equal(low, [0.0, 0.2, 0.6])
    np.testing.assert_array_equal(high, [0.4, 1.0, 1.0])
    low, high = _target_bounds(counts, np.zeros(3, dtype=int), 2, 5, "vote_softmax")
    np.testing.assert_array_equal(low, np.ones(3))  # the only label: softmax share 1
    np.testing.assert_array_equal(high, np.ones(3))


def test_repeated_feature_rows_are_reported_at_calibration():
    """Equal rows share a hash partition: with few distinct rows the partitions are not
    random samples and coverage can fail (a review: 0.86 at nominal 0.90 with 20 distinct
    values in 600 rows), so calibrate warns; nearly distinct rows do not warn."""
    import warnings

    rng = np.random.default_rng(0)
    for distinct, warns in ((20, True), (200, False)):
        X = rng.integers(0, distinct, (1200, 1)).astype(float)
        y = (X[:, 0] + rng.integers(0, 3, 1200)) % 3
        model = ReliablePredictionSets(k_train=1, k_calib=5).fit(X[:600], y[:600])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.calibrate(X[600:], y[600:])
        said = [w for w in caught if "distinct feature rows" in str(w.message)]
        assert bool(said) == warns, distinct


def test_certificates_row_by_row_equal_one_call_and_follow_a_new_calibration(fitted, digits):
    """The partition thresholds and their bounds are kept per calibration (a one-row
    certify no longer re-reads every calibration score): row-by-row calls give the batch's
    certificates, and a new calibration replaces them."""
    _, _, X_cal, y_cal, X_test, _ = digits
    model = copy.deepcopy(fitted).calibrate(X_cal, y_cal)
    batch = model.certify(X_test[:20], r_train=2, r_calib=1)
    rows = [model.certify(X_test[i : i + 1], r_train=2, r_calib=1) for i in range(20)]
    for key, value in batch.items():
        np.testing.assert_array_equal(np.concatenate([row[key] for row in rows]), value)
    # the same rows with other labels: the same partitions and ranks, other scores
    shuffled = np.random.default_rng(0).permutation(y_cal)
    model.calibrate(X_cal, shuffled)
    fresh = copy.deepcopy(fitted).calibrate(X_cal, shuffled)
    np.testing.assert_array_equal(model.partition_ranks_, fresh.partition_ranks_)
    for r_train in (0, 2):
        again, expected = model.certify(X_test, r_train=r_train), fresh.certify(X_test, r_train)
        for key in expected:
            np.testing.assert_array_equal(again[key], expected[key])
        np.testing.assert_array_equal(model.predict_set(X_test), fresh.predict_set(X_test))


def test_regressors_and_random_generators_are_refused_at_fit_and_first_alpha_by_default():
    """A regressor failed at calibrate with an AttributeError (classes_); a Generator seed
    gave each fit new models, against the certificates' premise; with several constructor
    levels the one-level methods use the first, as documented."""
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(int)
    with pytest.raises(TypeError, match=r"needs a classifier as `estimator`.*Ridge"):
        ReliablePredictionSets(Ridge(), k_train=3).fit(X, y)
    with pytest.raises(ValueError, match="`random_state` must be an int or None"):
        ReliablePredictionSets(k_train=3, random_state=np.random.default_rng(0)).fit(X, y)
    # review finding: a negative seed's message offered the generators refused above
    with pytest.raises(ValueError, match=r"must be None or an int in \[0, 2\*\*32\), got -1\.$"):
        ReliablePredictionSets(k_train=3, random_state=-1).fit(X, y)
    both = ReliablePredictionSets(k_train=3, k_calib=3, alpha=[0.2, 0.1], random_state=0)
    both.fit(X[:150], y[:150]).calibrate(X[150:], y[150:])
    first = clone(both).set_params(alpha=0.2).fit(X[:150], y[:150]).calibrate(X[150:], y[150:])
    np.testing.assert_array_equal(both.partition_sets(X[:20]), first.partition_sets(X[:20]))
    for key, value in both.certify(X[:20], r_calib=1).items():
        np.testing.assert_array_equal(value, first.certify(X[:20], r_calib=1)[key])
    with pytest.raises(ValueError, match="single level here"):
        both.partition_sets(X[:20], alpha=[0.2, 0.1])


def test_nan_probabilities_are_refused_not_certified():
    """Review finding: with k_train=1 a NaN probability ranked above every threshold, so the
    row got every label, certified robust."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 2))
    y = (X[:, 0] > 0).astype(int)
    fitted = LogisticRegression().fit(X, y)

    class NaNBeyond:  # a fitted model whose probabilities overflow to NaN on some rows
        classes_ = fitted.classes_

        def predict(self, X):
            return fitted.predict(X)

        def predict_proba(self, X):
            proba = fitted.predict_proba(X)
            proba[np.asarray(X)[:, 0] > 1.5] = np.nan
            return proba

        def __sklearn_is_fitted__(self):
            return True

    inside = X[:, 0] <= 1.5
    model = ReliablePredictionSets([NaNBeyond()], k_calib=5).calibrate(X[inside], y[inside])
    message = r"NaNBeyond\) predict_proba gave NaN or infinite probabilities"
    for method in (model.predict_set, model.predict_scores):
        with pytest.raises(ValueError, match=message + r" on 1 row of `X` \(first: row 0\)"):
            method([[2.0, 0.0], [0.5, 0.0]])
    with pytest.raises(ValueError, match=message):
        ReliablePredictionSets([NaNBeyond()], k_calib=5).calibrate(X, y)


def test_a_frozen_model_is_refused_for_several_training_partitions(digits):
    """Review finding: clone() returns a FrozenEstimator itself, so every partition held
    the same model while the training partition sizes were reported as if trained."""
    from sklearn.frozen import FrozenEstimator

    X, y = digits[0][:400], digits[1][:400]
    frozen = FrozenEstimator(LogisticRegression(max_iter=200).fit(X, y))
    with pytest.raises(ValueError, match=r"FrozenEstimator, which fit cannot train.*k_train=10"):
        ReliablePredictionSets(frozen, k_train=10).fit(X, y)
    one = ReliablePredictionSets(frozen, k_train=1, k_calib=5).fit(X, y)
    assert one.calibrate(X, y).predict_set(X[:5]).shape == (5, 10)
    # inside a pipeline too (the diff review), while a frozen preprocessing step is fine
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    with pytest.raises(ValueError, match=r"FrozenEstimator, which fit cannot train"):
        ReliablePredictionSets(make_pipeline(StandardScaler(), frozen), k_train=3).fit(X, y)
    scaler = FrozenEstimator(StandardScaler().fit(X))
    trained = make_pipeline(scaler, LogisticRegression(max_iter=200))
    models = ReliablePredictionSets(trained, k_train=3).fit(X, y).estimators_
    assert len({id(model[-1]) for model in models}) == 3


def test_a_clone_of_a_prefit_list_names_the_frozen_remedy(digits):
    models = [LogisticRegression(max_iter=200).fit(digits[0][:300], digits[1][:300])]
    with pytest.raises(NotFittedError, match=r"clones the listed models unfitted.*Frozen"):
        clone(ReliablePredictionSets(models, k_calib=5)).calibrate(digits[0], digits[1])


def test_the_paper_rule_warns_when_its_formula_falls_below_the_level(digits):
    """coverage="paper" was described as about 1 - alpha, and calibrate said nothing when
    its formula fell below (0.85 with 10 partitions of 9 points at alpha 0.1; a review
    measured 0.87 pooled on digits with 40 partitions); only the exact mode warned."""
    X_fit, y_fit, X_cal, y_cal, _, _ = digits
    paper = ReliablePredictionSets(
        LogisticRegression(max_iter=300), k_train=1, k_calib=40, coverage="paper"
    ).fit(X_fit, y_fit)
    with pytest.warns(UserWarning, match=r"With coverage='paper' .* covers 0\.\d+ < 1 - alpha"):
        paper.calibrate(X_cal, y_cal)
    assert paper.majority_coverage_ < 0.9
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paper.set_params(coverage="exact").calibrate(X_cal, y_cal)
    assert not [w for w in caught if "< 1 - alpha" in str(w.message)]
    assert paper.majority_coverage_ >= 0.9


def test_the_formula_check_is_rerun_for_a_level_set_after_calibrate(digits):
    """Stop 63: calibrate checked the coverage formula at its own level only; a level set by
    set_params(alpha=...) or given to a call after it (the paper rule at 0.1: 0.88 < 0.90)
    was used silently. Now each new level is checked once."""
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    model = ReliablePredictionSets(
        LogisticRegression(max_iter=300), k_train=1, k_calib=40, coverage="paper", alpha=0.3
    ).fit(X_fit, y_fit)

    def formula_warnings(call):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        return [str(w.message) for w in caught if "by the coverage formula" in str(w.message)]

    assert formula_warnings(lambda: model.calibrate(X_cal, y_cal)) == []  # 0.3: holds
    assert model.majority_coverage_ >= 0.7
    for call in (
        lambda: model.predict_set(X_test, alpha=0.1),
        lambda: model.partition_sets(X_test, alpha=0.1),
        lambda: model.set_params(alpha=0.1).predict_set(X_test),
    ):
        model.set_params(alpha=0.3).calibrate(X_cal, y_cal)
        (message,) = formula_warnings(call)
        assert re.search(r"coverage='paper'.* covers 0\.\d+ < 1 - alpha = 0\.9000", message)
        assert formula_warnings(call) == []  # once per level
    assert model.majority_coverage_ < 0.9


def test_nan_in_x_is_named_before_a_model_that_refuses_it():
    """Review finding (docsB): RPS let scikit-learn's "Input X contains NaN" through, where
    the other classifiers name the model and the remedy; a model that takes NaN still
    gets it."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] > 0).astype(int)
    holed = X.copy()
    holed[[3, 150, 250], 0] = np.nan
    fitted = ReliablePredictionSets(LogisticRegression(), k_train=2, k_calib=2).fit(
        X[:100], y[:100]
    )
    listed = ReliablePredictionSets([LogisticRegression().fit(X[:100], y[:100])], k_calib=2)
    calls = (
        lambda: ReliablePredictionSets(LogisticRegression(), k_train=2).fit(holed, y),
        lambda: fitted.calibrate(holed[100:], y[100:]),
        lambda: listed.calibrate(holed, y),
    )
    for call in calls:
        with pytest.raises(ValueError, match="`X` contains NaN and LogisticRegression does not"):
            call()
    tolerant = ReliablePredictionSets(HistGradientBoostingClassifier(max_iter=5), k_train=2)
    tolerant.fit(holed[:200], y[:200]).calibrate(holed[200:], y[200:])
    assert tolerant.predict_set(holed[:5]).shape == (5, 2)
    # partitions of one class get a constant stand-in model: not the one asked about NaN
    # (diffrev6: 8 of 20 seeds named a private `_ConstantClassifier`)
    rare = (np.arange(300) % 20 == 0).astype(int)
    many = ReliablePredictionSets(HistGradientBoostingClassifier(max_iter=5), k_train=100)
    many.fit(holed[:200], rare[:200]).calibrate(holed[200:], rare[200:])
    assert type(many.estimators_[0]).__name__ == "_ConstantClassifier"


def test_fitted_models_are_checked_against_the_fit_data_and_each_other(fitted, digits):
    """Review finding: with a list of fitted models, fit("garbage", [1, 2]) succeeded (X and
    y never read), and models with int and str labels gave classes_ ['0', ..., 'a', ...],
    calibrate then blaming `y`."""
    X_fit, y_fit, X_cal, y_cal, _, _ = digits
    models = list(fitted.estimators_)
    prefit = ReliablePredictionSets(models, k_calib=5)
    with pytest.raises(ValueError, match="`X` must be 2-D"):
        prefit.fit("garbage", [1, 2])
    with pytest.raises(ValueError, match="but model 0 of `estimator` was fitted on 64"):
        prefit.fit(X_fit[:, :10], y_fit)  # the purpose-built message, not scikit-learn's
    with pytest.raises(ValueError, match=r"`y` contains labels .*\[100"):
        prefit.fit(X_fit, y_fit + 100)
    narrow = LogisticRegression(max_iter=1000).fit(X_fit[:200, :10] / 16, y_fit[:200])
    with pytest.raises(ValueError, match="model 1 of `estimator` was fitted on 10"):
        ReliablePredictionSets([models[0], narrow], k_calib=5).fit(X_fit, y_fit)
    assert prefit.fit(X_fit, y_fit).classes_.tolist() == np.unique(y_fit).tolist()
    named = LogisticRegression(max_iter=1000).fit(X_fit[:200] / 16, y_fit[:200].astype(str))
    mixed = ReliablePredictionSets([models[0], named], k_calib=5)
    for call in (mixed.fit, mixed.calibrate):
        with pytest.raises(ValueError, match="`estimator` have labels of different kinds"):
            call(X_cal, y_cal)


def test_public_helpers_take_one_level_and_whole_numbers():
    """Review finding: majority_threshold and partition_rank used the first of several
    levels, minimum_partition_size failed with "unhashable type: 'list'", and
    majority_coverage truncated a rank of 9.7 to 9."""
    calls = (
        lambda level: majority_threshold(10, level),
        lambda level: partition_rank(100, 10, level),
        lambda level: minimum_partition_size(10, level, "exact"),
    )
    for call in calls:
        with pytest.raises(ValueError, match=r"`alpha` must be a single level.*0\.2"):
            call([0.1, 0.2])
        assert call([0.2]) == call(0.2)  # one level in a list is that level
    with pytest.raises(ValueError, match="`coverage` must be one of"):
        minimum_partition_size(10, 0.1, "textbook")
    for sizes, ranks, name in (
        ([100] * 10, [9.7] * 10, "ranks"),
        ([99.5] * 10, [9] * 10, "sizes"),
    ):
        with pytest.raises(ValueError, match=f"`{name}` must be whole numbers"):
            majority_coverage(sizes, ranks, 7)
    assert majority_coverage([100.0] * 10, [9.0] * 10, 7) == majority_coverage(
        [100] * 10, [9] * 10, 7
    )


def _training_warnings(call):
    """What ``call()`` returns, and the texts of the warnings it gave about the training
    certificate of models given fitted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    texts = [str(w.message) for w in caught if "disjoint training partitions" in str(w.message)]
    return result, texts


def test_training_certificates_of_models_given_fitted_warn_of_their_assumption(fitted, digits):
    """Review finding (stop 56): models given fitted were certified against training
    poisoning as if each training row reached one model. 20 one-nearest-neighbour models
    on overlapping random halves: certify(r_train=1) certified 34 of 200 rows, and one
    inserted training row (it reaches every model) changed all 34 sets, without a word.
    Nothing can check how the models were trained: every use of a training radius warns,
    once per call."""
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    bags = [np.random.default_rng(j).permutation(len(y_fit))[:400] for j in range(8)]
    models = [KNeighborsClassifier(1).fit(X_fit[b], y_fit[b]) for b in bags]
    adopted = ReliablePredictionSets(models, k_calib=5).calibrate(X_cal, y_cal)
    texts = _training_warnings(lambda: adopted.certify(X_test, r_train=1))[1]
    assert len(texts) == 1 and "hash_partition" in texts[0] and "r_calib" in texts[0]
    curve = lambda: adopted.reliability_curve(X_test, [0, 1, 2], poisoned="both")  # noqa: E731
    assert len(_training_warnings(curve)[1]) == 1
    assert len(_training_warnings(lambda: worst_partitions(adopted, X_test, "training"))[1]) == 1
    # no training radius, or models RPS trained on its own partitions: nothing to say
    for call in (
        lambda: adopted.certify(X_test, r_calib=1),
        lambda: adopted.reliability_curve(X_test, [0, 1], poisoned="calibration"),
        lambda: worst_partitions(adopted, X_test),
        lambda: fitted.certify(X_test, r_train=1),
        lambda: fitted.reliability_curve(X_test, [1], poisoned="training"),
    ):
        assert _training_warnings(call)[1] == []


def test_a_partly_unfitted_list_is_not_taken_for_a_clone(digits):
    """Review finding (stop 55): the refusal of an unfitted model in `estimator` always
    blamed a clone, even when the list also held fitted models (which a clone unfits)."""
    X_fit, y_fit, X_cal, y_cal, _, _ = digits
    trained = LogisticRegression(max_iter=200).fit(X_fit[:300], y_fit[:300])
    with pytest.raises(NotFittedError, match="Model 1 of `estimator` is not fitted") as raised:
        ReliablePredictionSets([trained, LogisticRegression()], k_calib=5).calibrate(X_cal, y_cal)
    assert "clone" not in str(raised.value).replace("to be cloned", "")
    with pytest.raises(NotFittedError, match="clones the listed models unfitted"):
        ReliablePredictionSets([LogisticRegression()] * 2, k_calib=5).calibrate(X_cal, y_cal)


def test_sample_weight_reaches_each_partition_model_on_its_rows(digits):
    """Review finding (stop 55): fit(X, y, sample_weight=w) failed with Python's bare
    "unexpected keyword argument". Fit parameters go to each partition's model as the other
    ensembles route them: per-row ones on the partition's rows."""
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    weights = np.random.default_rng(3).uniform(0.2, 3.0, len(y_fit))
    guard = Unchanged(X_fit, y_fit, weights)
    model = ReliablePredictionSets(LogisticRegression(max_iter=300), k_train=3, k_calib=5)
    weighted = clone(model).fit(X_fit, y_fit, sample_weight=weights)
    guard.check()
    digests = rps_module.row_digests(X_fit, 0)
    part = hash_partition(X_fit, 3)
    for i, member in enumerate(weighted.estimators_):
        rows = np.flatnonzero(part == i)
        rows = rows[np.lexsort((y_fit[rows], digests[rows, 1], digests[rows, 0]))]
        alone = LogisticRegression(max_iter=300).fit(
            X_fit[rows], y_fit[rows], sample_weight=weights[rows]
        )
        np.testing.assert_array_equal(member.coef_, alone.coef_)
    plain = clone(model).fit(X_fit, y_fit)
    assert not np.array_equal(plain.estimators_[0].coef_, weighted.estimators_[0].coef_)
    shuffle = np.random.default_rng(4).permutation(len(y_fit))
    moved = clone(model).fit(X_fit[shuffle], y_fit[shuffle], sample_weight=weights[shuffle])
    weighted.calibrate(X_cal, y_cal)
    moved.calibrate(X_cal, y_cal)
    np.testing.assert_array_equal(moved.predict_set(X_test), weighted.predict_set(X_test))
    with pytest.raises(ValueError, match=r"`sample_weight` has 5 entries but X has 800 rows"):
        clone(model).fit(X_fit, y_fit, sample_weight=weights[:5])
    with pytest.raises(ValueError, match=r"fit parameters \['sample_weight'\] were given"):
        ReliablePredictionSets(list(plain.estimators_)).fit(X_fit, y_fit, sample_weight=weights)
    with sklearn.config_context(enable_metadata_routing=True):
        asked = LogisticRegression(max_iter=300).set_fit_request(sample_weight=True)
        routed = clone(model).set_params(estimator=asked)
        routed.fit(X_fit, y_fit, sample_weight=weights)
        with pytest.raises(UnsetMetadataPassedError):
            clone(model).fit(X_fit, y_fit, sample_weight=weights)
    for ours, theirs in zip(routed.estimators_, weighted.estimators_, strict=True):
        np.testing.assert_array_equal(ours.coef_, theirs.coef_)


def test_a_two_dimensional_sample_weight_names_the_rows_of_x():
    """diffrev17 (stop 56): a (n, 1) sample_weight passed the length check and the
    partition model's error named one partition's size (145), not X's rows (600)."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] > 0).astype(int)
    model = ReliablePredictionSets(LogisticRegression(), k_train=4, k_calib=3)
    message = r"`sample_weight` must be 1-D \(one weight per row of X: 600\)"
    with pytest.raises(ValueError, match=message):
        model.fit(X, y, sample_weight=np.ones((600, 1)))


@pytest.mark.parametrize("estimator", ["ridge", 3])
def test_an_estimator_that_is_not_a_model_is_named(estimator):
    """API review (stop 57): a string or a number as `estimator` gave scikit-learn's long
    "'str' object has no attribute '__sklearn_tags__'", naming no argument."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 3)), np.tile([0, 1], 30)
    name = type(estimator).__name__
    with pytest.raises(TypeError, match=rf"`estimator` \({name}\) has no `fit` or `predict`"):
        ReliablePredictionSets(estimator, k_train=2, k_calib=2).fit(X, y)


def test_fractional_float_labels_get_the_class_names_hint():
    """API review (stop 57): float labels such as 0.5 and 1.5 gave scikit-learn's "Unknown
    label type: continuous", not the hint the other classifiers give."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 3)), np.tile([0.5, 1.5], 30)
    message = r"`y` holds float labels with a fractional part .*y\.astype\(str\)"
    with pytest.raises(ValueError, match=message):
        ReliablePredictionSets(k_train=2, k_calib=2).fit(X, y)


# ---- the label set (`classes`) ----------------------------------------------------------------
class _Lookup(ClassifierMixin, BaseEstimator):
    """A partition model given as a table: row id (the one feature) -> its vote."""

    def __init__(self, table=None, labels=(0, 1, 2, 3)):
        self.table = table
        self.labels = labels

    def fit(self, X=None, y=None):
        self.classes_ = np.asarray(self.labels)
        self.n_features_in_ = 1
        return self

    def predict(self, X):
        return np.array([self.table[int(v)] for v in np.asarray(X)[:, 0]])


def _lookup_votes(model: int) -> dict[int, int]:
    """Votes of model ``model`` of 20: calibration rows 0..8, row 0 (label 1) the threshold
    row (18 votes for 0, 2 for 1), rows 1..8 (label 0) unanimous; test row 100: [8, 6, 3, 3]."""
    table = dict.fromkeys(range(1, 9), 0)
    table[0] = 0 if model <= 17 else 1
    table[100] = (
        2 if model == 0 else 0 if model <= 8 else 1 if model <= 14 else 2 if model <= 16 else 3
    )
    return table


def test_a_new_training_label_is_outside_the_certificates_unless_classes_fixes_it():
    """Review finding (stop 60): with the default vote_softmax score, one poisoned training
    point carrying a label no other training row has adds a class (``classes_`` was always
    the training labels), so every row's softmax denominator gains an exp(0) term; a label
    left a set certified coverage reliable at r_train=1. `classes` fixes the label set: a
    training label outside it is refused, a label with no votes keeps its term."""
    X_cal, y_cal = np.arange(9.0)[:, None], np.array([1] + [0] * 8)
    X_test = np.array([[100.0]])
    changed = _lookup_votes(0)
    changed[100], changed[0] = 0, 1  # the poisoned partition's model: two votes change
    clean = [_Lookup(_lookup_votes(m)).fit() for m in range(20)]
    with_new_label = [_Lookup(changed, labels=(0, 1, 2, 3, 4)).fit(), *clean[1:]]
    same_labels = [_Lookup(changed).fit(), *clean[1:]]

    def calibrated(models, **params):
        model = ReliablePredictionSets(models, k_calib=1, alpha=0.1, **params)
        return model.calibrate(X_cal, y_cal)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # models given fitted: r_train warns
        before = calibrated(clean)
        certified = before.certify(X_test, r_train=1)
        fixed = calibrated(clean, classes=[0, 1, 2, 3])
        fixed_certified = fixed.certify(X_test, r_train=1)
        wider = calibrated(clean, classes=[0, 1, 2, 3, 4])
        wider_certified = wider.certify(X_test, r_train=1)
    assert before.vote_counts(X_test).tolist() == [[8, 6, 3, 3]]
    assert before.predict_set(X_test).tolist() == [[True] * 4]
    assert certified["coverage_reliable"].tolist() == [True]
    # the failure mode without `classes`: the new label moves an old one out of the set
    after = calibrated(with_new_label)
    assert after.classes_.tolist() == [0, 1, 2, 3, 4]
    assert after.predict_set(X_test)[:, :4].tolist() == [[True, True, False, True]]
    # limited to a changed label set: the same vote changes among labels 0..3 keep the set
    assert calibrated(same_labels).predict_set(X_test).tolist() == [[True] * 4]
    # `classes` as the training labels: the same sets and certificates, and the poisoned
    # model's new label is refused instead of reshaping every score
    assert fixed.classes_.tolist() == [0, 1, 2, 3]
    np.testing.assert_array_equal(fixed.predict_set(X_test), before.predict_set(X_test))
    assert fixed_certified == certified
    with pytest.raises(ValueError, match=r"Model 0 of `estimator` knows labels outside `classes`"):
        calibrated(with_new_label, classes=[0, 1, 2, 3])
    # `classes` with room for label 4: its column stays in every score (no votes, exp(0)),
    # the row is not certified, and the poisoned models do change its set
    assert wider.vote_counts(X_test).tolist() == [[8, 6, 3, 3, 0]]
    expected = rps_module._smoothed(np.array([[8, 6, 3, 3, 0]]), 20, "vote_softmax")
    np.testing.assert_array_equal(wider.predict_scores(X_test), expected)
    assert wider_certified["coverage_reliable"].tolist() == [False]
    poisoned = calibrated(with_new_label, classes=[0, 1, 2, 3, 4])
    assert poisoned.predict_set(X_test).tolist() == [[True, True, False, True, False]]


def test_classes_keeps_training_certificates_when_a_point_gets_a_new_label():
    """End to end (review finding, stop 60): four Gaussian classes, one training row
    relabelled to a label no other row has (4). Without `classes`, label 4 joined all 258
    sets certified size reliable at r_train=1; with `classes` holding label 4 from the
    start, no certified set changes; with `classes` the training labels, the relabelled row
    is refused, naming `classes`."""
    X, y, _ = make_gaussian_classification(1000, n_classes=4, separation=1.0, random_state=0)
    X_fit, y_fit, X_cal, y_cal, X_test = X[:400], y[:400], X[400:600], y[400:600], X[600:]
    model = ReliablePredictionSets(
        LogisticRegression(max_iter=500), k_train=10, k_calib=5, random_state=0
    )
    base = model.fit(X_fit, y_fit).calibrate(X_cal, y_cal)
    same = clone(model).set_params(classes=[3, 1, 0, 2]).fit(X_fit, y_fit)
    same.calibrate(X_cal, y_cal)
    assert same.classes_.tolist() == [0, 1, 2, 3]
    np.testing.assert_array_equal(same.predict_set(X_test), base.predict_set(X_test))
    certified = base.certify(X_test, r_train=1)
    for key, value in same.certify(X_test, r_train=1).items():
        np.testing.assert_array_equal(value, certified[key])
    poisoned_y = y_fit.copy()
    poisoned_y[0] = 4
    with pytest.raises(ValueError, match=r"`y` contains labels outside `classes`: \[4\]"):
        clone(same).fit(X_fit, poisoned_y)
    # the failure mode without `classes`: the new label joins certified sets
    sets = np.zeros((len(X_test), 5), dtype=bool)
    sets[:, :4] = base.predict_set(X_test)
    after = clone(base).fit(X_fit, poisoned_y).calibrate(X_cal, y_cal).predict_set(X_test)
    assert after.shape == sets.shape and _violations(sets, after, certified) > 0
    # `classes` with room for label 4 from the start: its column (no votes) is in every
    # score, the certificates account for it, and no certified set changes
    wide = clone(model).set_params(classes=range(5)).fit(X_fit, y_fit)
    wide.calibrate(X_cal, y_cal)
    sets, certified = wide.predict_set(X_test), wide.certify(X_test, r_train=1)
    assert wide.vote_counts(X_test)[:, 4].max() == 0
    assert certified["size_reliable"].sum() > 0 and certified["coverage_reliable"].sum() > 0
    for row in (0, 1):
        poisoned_y = y_fit.copy()
        poisoned_y[row] = 4
        after = clone(wide).fit(X_fit, poisoned_y).calibrate(X_cal, y_cal).predict_set(X_test)
        assert after.shape == sets.shape and _violations(sets, after, certified) == 0


@pytest.mark.parametrize(
    ("classes", "message"),
    [
        (3, r"`classes` must be a 1-D sequence of labels"),
        ("abc", r"`classes` must be a 1-D sequence of labels"),
        ([[0, 1]], r"`classes` must be a 1-D sequence of labels"),
        ([0], r"`classes` holds one class"),
        ([0, 1, 1, 2], r"`classes` must hold each label once.*\[1\]"),
        ([0, None, 1], r"^`classes` lists the labels, and \[None\] cannot be one: leave it out"),
        ([0.0, np.nan, 1.0], r"^`classes` lists the labels, and \[nan\] cannot be one"),
        ([0.0, np.inf, 1.0], r"^`classes` lists the labels, and \[inf\] cannot be one"),
        ([0, "1", 2], r"`classes` mixes label types"),
    ],
)
def test_bad_classes_are_named(classes, message):
    X, y = np.random.default_rng(0).normal(size=(60, 3)), np.tile([0, 1], 30)
    with pytest.raises(ValueError, match=message):
        ReliablePredictionSets(k_train=2, k_calib=2, classes=classes).fit(X, y)


def test_calibration_labels_outside_classes_name_classes(digits):
    X_fit, y_fit, X_cal, y_cal, X_test, _ = digits
    model = ReliablePredictionSets(k_train=2, k_calib=2, classes=np.arange(10), random_state=0)
    model.fit(X_fit, y_fit)
    with pytest.raises(ValueError, match=r"`y` contains labels outside `classes`: \[11\]"):
        model.calibrate(X_cal, np.where(y_cal == 3, 11, y_cal))
    # a label of `classes` that no training row has is a valid calibration label
    named = np.array(list("abcdefghij"))
    letters = ReliablePredictionSets(k_train=2, k_calib=2, classes=[*named, "z"])
    letters.fit(X_fit, named[y_fit]).calibrate(X_cal[:-1], np.append(named[y_cal[:-2]], "z"))
    assert letters.classes_.tolist() == [*named, "z"]
    assert letters.predict_set(X_test).shape == (len(X_test), 11)


def _three_classes(n=900):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 3))
    y = np.digitize(X[:, 0] + 0.5 * rng.standard_normal(n), [-0.7, 0.7])
    return X[:600], y[:600], X[600:], y[600:]


@pytest.mark.parametrize(
    "change", [{"classes": [0, 1, 2, 3]}, {"classes": ["a", "b", "c"]}, {"k_train": 12}]
)
def test_classes_or_k_train_changed_after_fit_need_a_new_fit(change):
    """Regression test (diff review of 26a7ddb): set_params(classes=...) or k_train after fit
    was accepted silently (predict_set gave the old columns), and a later calibrate named
    the old classes_ as `classes`."""
    X_fit, y_fit, X_cal, y_cal = _three_classes()
    model = ReliablePredictionSets(LogisticRegression(), k_train=10, k_calib=5, random_state=0)
    model.fit(X_fit, y_fit).calibrate(X_cal, y_cal)
    model.set_params(classes=None, k_train=10)  # the values fit used: nothing changed
    sets = model.predict_set(X_cal)
    model.set_params(**change)
    ((name, value),) = change.items()
    used = r"classes=None" if name == "classes" else r"k_train=10"
    for method, call in [
        ("predict_set", lambda: model.predict_set(X_cal)),
        ("certify", lambda: model.certify(X_cal)),
        ("predict_scores", lambda: model.predict_scores(X_cal)),
        ("predict", lambda: model.predict(X_cal)),
        ("vote_counts", lambda: model.vote_counts(X_cal)),
        ("calibrate", lambda: model.calibrate(X_cal, y_cal)),
    ]:
        with pytest.raises(
            NotFittedError,
            match=rf"{method}: parameters changed since fit \(it used {used}\)"
            r"; call fit\(X, y\)",
        ):
            call()
    model.set_params(**{name: None if name == "classes" else 10})
    np.testing.assert_array_equal(model.predict_set(X_cal), sets)  # set back: accepted
    model.set_params(**change)
    if name == "classes":  # the labels as named in `classes` (the same for [0, 1, 2, 3])
        y_fit, y_cal = np.asarray(value)[y_fit], np.asarray(value)[y_cal]
    refit = model.fit(X_fit, y_fit).calibrate(X_cal, y_cal)  # a new fit: accepted
    width = len(value) if name == "classes" else 3
    assert refit.predict_set(X_cal).shape == (len(X_cal), width)


@pytest.mark.parametrize(
    "change", [{"estimator__C": 0.01}, {"estimator": "tree"}, {"estimator": "equal"}]
)
def test_an_estimator_changed_after_fit_needs_a_new_fit(change):
    # diff review 35: the partition models kept the old estimator's sets and certificates
    # after set_params(estimator=...) and a new calibrate, silently; an equal new object
    # is a change too (models are compared by identity), which the message says
    from sklearn.tree import DecisionTreeClassifier

    said = "prints the same" if change == {"estimator": "equal"} else ""
    if change == {"estimator": "tree"}:
        change = {"estimator": DecisionTreeClassifier(max_depth=1)}
    elif change == {"estimator": "equal"}:
        change = {"estimator": LogisticRegression()}
    X_fit, y_fit, X_cal, y_cal = _three_classes()
    model = ReliablePredictionSets(LogisticRegression(), k_train=10, k_calib=5, random_state=0)
    model.fit(X_fit, y_fit).calibrate(X_cal, y_cal)
    model.set_params(**change)
    for call in (lambda: model.predict_set(X_cal), lambda: model.calibrate(X_cal, y_cal)):
        with pytest.raises(
            NotFittedError, match=rf"parameters changed since fit.*estimator.*{said}"
        ):
            call()
    model.fit(X_fit, y_fit).calibrate(X_cal, y_cal)  # a new fit: accepted
    assert model.predict_set(X_cal).shape == (len(X_cal), 3)


def test_classes_changed_after_calibrating_fitted_models_need_a_new_calibration():
    # a list of fitted models: calibrate adopts them again and reads `classes` then
    X_fit, y_fit, X_cal, y_cal = _three_classes()
    models = [LogisticRegression().fit(X_fit[i::3], y_fit[i::3]) for i in range(3)]
    model = ReliablePredictionSets(models, k_calib=5).fit(X_fit, y_fit)
    model.set_params(k_train=4)  # unused with fitted models: no new fit needed
    model.calibrate(X_cal, y_cal).predict_set(X_cal)
    model.set_params(classes=[0, 1, 2, 3])
    with pytest.raises(NotFittedError, match=r"predict_set: parameters changed since calibrate"):
        model.predict_set(X_cal)
    assert model.calibrate(X_cal, y_cal).predict_set(X_cal).shape == (len(X_cal), 4)


def test_classes_changed_after_fit_in_an_older_pickle_are_named():
    """A model pickled before the fit settings were recorded is not refused, but a
    calibration label outside the label set fit used names that set and the new `classes`
    (the message printed the old classes_ as `classes`)."""
    X_fit, y_fit, X_cal, y_cal = _three_classes()
    model = ReliablePredictionSets(LogisticRegression(), k_train=10, k_calib=5, random_state=0)
    model.fit(X_fit, y_fit)
    older = pickle.loads(pickle.dumps(model))
    older.__dict__.pop("_fit_settings", None)  # what older builds did not record
    older.set_params(classes=[0, 1, 2, 3])
    older.calibrate(X_cal, y_cal)  # no record, no check: the old label set stays
    assert older.predict_set(X_cal).shape == (len(X_cal), 3)
    y_new = y_cal.copy()
    y_new[:5] = 3
    with pytest.raises(
        ValueError,
        match=r"`y` contains labels outside the label set fit used \(\[0, 1, 2\]\): \[3\]\. "
        r"`classes` \(\[0, 1, 2, 3\]\) changed since fit: call fit\(X, y\) again",
    ):
        older.calibrate(X_cal, y_new)


def test_evaluate_judges_rps_by_the_majority_sets_own_coverage_law(fitted, digits):
    """Review s65: `evaluate` judged RPS by split CP's law over all calibration rows, which
    is narrower than the majority set's: a valid RPS read "BELOW" 2-3 times as often as
    ``confidence`` allows (17 of 1,500 runs against at most 7.5)."""
    from uqconform.evaluation import evaluate

    *_, X_test, y_test = digits
    report = evaluate(fitted, X_test, y_test, alpha=[0.1, 0.2], confidence=0.99)
    sizes = np.asarray(fitted.partition_sizes_)
    for row, level in zip(report.rows, (0.1, 0.2), strict=True):
        ranks = fitted._ranks(level)
        expected = majority_coverage_bounds(
            sizes, ranks, majority_threshold(5, level), len(y_test), 0.99
        )
        assert (row["bound_low"], row["bound_high"]) == pytest.approx(expected, rel=1e-12)
        split = coverage_bounds(fitted.n_calibration_, level, len(y_test), 0.99)
        assert row["bound_low"] < split[0] and row["bound_high"] > split[1]


def test_a_frame_with_a_date_column_its_pipeline_reads_is_accepted():
    """Review s65: RPS checked a DataFrame as one numpy array, and a float column beside
    a datetime column has no common dtype: numpy's DTypePromotionError at fit, where every
    other wrapper passed the frame to the pipeline that reads the dates."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    rng = np.random.default_rng(0)
    n = 200
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "when": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 365, n), "D"),
        }
    )
    y = (X["a"] > 0).astype(int)

    def numbers(frame):
        return np.c_[frame["a"].to_numpy(), frame["when"].dt.day_of_year.to_numpy()]

    model = make_pipeline(FunctionTransformer(numbers), LogisticRegression())
    rps = ReliablePredictionSets(model, k_train=2, k_calib=2, random_state=0)
    rps.fit(X.iloc[:100], y.iloc[:100]).calibrate(X.iloc[100:160], y.iloc[100:160])
    assert rps.predict_set(X.iloc[160:]).shape == (40, 2)


def test_an_unseen_label_at_calibrate_names_the_classes_parameter(digits):
    """Review s65: the refusal did not say that `classes=[...]` accepts exactly this."""
    X_fit, y_fit, X_cal, y_cal, _, _ = digits
    keep = y_fit != 9
    model = ReliablePredictionSets(LogisticRegression(max_iter=300), k_train=2, k_calib=2)
    model.fit(X_fit[keep], y_fit[keep])
    with pytest.raises(ValueError, match=r"never saw during fit: \[9\].*classes=\[\.\.\.\]"):
        model.calibrate(X_cal, y_cal)


def test_rps_refusals_of_text_labels_and_of_a_frame_without_columns(digits):
    """Diff review 55: text labels for integer classes were also told to declare
    `classes=`; a DataFrame without columns failed with a bare IndexError."""
    X_fit, y_fit, X_cal, y_cal, _, _ = digits
    model = ReliablePredictionSets(LogisticRegression(max_iter=300), k_train=2, k_calib=2)
    model.fit(X_fit, y_fit)
    with pytest.raises(ValueError, match=r"astype\(int\)") as error:
        model.calibrate(X_cal, y_cal.astype(str))
    assert "classes=" not in str(error.value)
    with pytest.raises(ValueError, match="`X` has no columns"):
        ReliablePredictionSets(LogisticRegression()).fit(pd.DataFrame(index=range(20)), y_fit[:20])


def test_evaluate_judges_a_paper_rank_rps_by_the_exact_ranks_law(fitted, digits):
    """Diff review 54: the paper rule's own (sub-nominal) law let it never read BELOW."""
    from sklearn.base import clone as clone_model

    from uqconform.evaluation import evaluate

    X_fit, y_fit, X_cal, y_cal, X_test, y_test = digits
    paper = clone_model(fitted).set_params(coverage="paper").fit(X_fit, y_fit)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        paper.calibrate(X_cal, y_cal)
        row = evaluate(paper, X_test, y_test, alpha=0.1, confidence=0.99).rows[0]
    sizes = np.asarray(paper.partition_sizes_)
    exact_ranks = [partition_rank(int(n), 5, 0.1, "exact") for n in sizes]
    expected = majority_coverage_bounds(
        sizes, exact_ranks, majority_threshold(5, 0.1), len(y_test)
    )
    assert (row["bound_low"], row["bound_high"]) == pytest.approx(expected, rel=1e-12)
