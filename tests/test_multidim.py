"""Multi-dimensional scores (cells, learned aggregation), HeadEnsemble and the plain ensemble.

Coverage is checked the way ``test_validity.py`` does it: the heads are fixed, a pool of rows
is resplit ``R`` times into calibration and test points, and the pooled coverage must lie in
:func:`uqconform.evaluation.coverage_bounds` (confidence 0.999, fixed seeds). The cell score
(the prefix length) is discrete, so only the lower bound applies to ``"cells"``; the
ensemble's scores are continuous, and so is the learned score with the fixture's several
heads (a tree model's score ties with one or two heads), so both bounds apply to them. The
unit tests use a synthetic multi-head fixture: heads that return stored Dirichlet
probabilities around a latent class (head-specific noise), looked up by ``X[:, 0]``.
"""

from __future__ import annotations

import functools
import pickle
import re
import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import KNeighborsClassifier

from uqconform.classification import (
    EnsembleConformalClassifier,
    HeadEnsemble,
    MultiDimScoreClassifier,
    SplitConformalClassifier,
)
from uqconform.evaluation import coverage_bounds
from uqconform.quantiles import conformal_quantile, conformal_rank

R = 20  # resplits per coverage check
CONFIDENCE = 0.999
ALPHAS = [0.05, 0.1]
N_CAL, N_TEST = 600, 1000
SCORES = ["lac", "aps", "raps", "saps"]


# ---- the synthetic multi-head fixture -------------------------------------------------------
class StoredProba(ClassifierMixin, BaseEstimator):
    """A 'fitted head' whose probabilities are rows of a stored array, indexed by X[:, 0]."""

    def __init__(self, proba=None, classes=None):
        self.proba = proba
        self.classes = classes

    def fit(self, X=None, y=None):
        k = self.proba.shape[1]
        self.classes_ = np.arange(k) if self.classes is None else np.asarray(self.classes)
        return self

    def predict_proba(self, X):
        return self.proba[np.asarray(X)[:, 0].astype(int)]


class MeanOfHeads(ClassifierMixin, BaseEstimator):
    """One fitted classifier returning the mean probability of fitted heads."""

    def __init__(self, heads=None):
        self.heads = heads

    def fit(self, X=None, y=None):
        self.classes_ = self.heads[0].classes_
        return self

    def predict_proba(self, X):
        return np.stack([head.predict_proba(X) for head in self.heads]).mean(axis=0)


@functools.cache
def synthetic(n=2000, k=10, h=5, seed=0):
    """(X, y, heads): Dirichlet probabilities around the latent class, independent per head.

    Every row has a difficulty (mass on its class) and a confusing class shared by the heads;
    the Dirichlet draw is the head-specific noise. Heads are about 63% accurate, their mean
    about 77%.
    """
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    confuser = (y + rng.integers(1, k, n)) % k
    rows = np.arange(n)
    concentration = np.full((n, k), 0.3)
    concentration[rows, y] += rng.gamma(1.5, 2.0, n)
    concentration[rows, confuser] += rng.gamma(1.0, 1.0, n)
    proba = rng.gamma(concentration[None], size=(h, n, k))  # Dirichlet, by normalised gammas
    proba = np.maximum(proba, 1e-12)
    proba /= proba.sum(axis=-1, keepdims=True)
    X = np.arange(n, dtype=float)[:, None]
    return X, y, tuple(StoredProba(p).fit() for p in proba)


def pooled(model, X, y, alphas=ALPHAS, n_cal=N_CAL, n_test=N_TEST, seed=0):
    """Pooled coverage (k,), mean set size (k,) and calibration-part size over R resplits."""
    hits = np.zeros(len(alphas))
    sizes = np.zeros(len(alphas))
    for r in range(R):
        order = np.random.default_rng([seed, r]).permutation(len(y))
        cal, test = order[:n_cal], order[n_cal : n_cal + n_test]
        model.set_params(random_state=1000 * seed + r)
        model.calibrate(X[cal], y[cal])
        sets = model.predict_set(X[test], alpha=alphas)
        hits += sets[np.arange(n_test), y[test]].sum(axis=0)
        sizes += sets.sum(axis=1).mean(axis=0)
    return hits / (R * n_test), sizes / R, model.n_calibration_


def assert_valid(coverage, n_cal, n_test=N_TEST, alphas=ALPHAS, lower_only=False, repeats=R):
    bounds = coverage_bounds(n_cal, alphas, n_test, confidence=CONFIDENCE, n_repeats=repeats)
    for c, (low, high), a in zip(coverage, bounds, alphas, strict=True):
        assert c >= low, f"alpha={a}: coverage {c:.4f} below the valid range [{low}, {high}]"
        if not lower_only:
            assert c <= high, f"alpha={a}: coverage {c:.4f} above the valid range [{low}, {high}]"


def covers(sets, y):
    return sets[np.arange(len(y)), y]


# ---- coverage on the synthetic heads --------------------------------------------------------
@pytest.mark.parametrize("base_score", SCORES)
def test_cells_coverage_lower_bound(base_score):
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(list(heads), base_score=base_score, alpha=ALPHAS)
    coverage, _, n_recal = pooled(model, X, y)
    assert n_recal == N_CAL // 2
    assert_valid(coverage, n_recal, lower_only=True)


@pytest.mark.parametrize(
    "base_score",
    # A gradient-boosted aggregator per resplit: two scores in the fast part, two slow.
    ["lac", "saps", *(pytest.param(s, marks=pytest.mark.slow) for s in ("aps", "raps"))],
)
def test_learned_coverage_two_sided(base_score):
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(
        list(heads), base_score=base_score, calibration="learned", alpha=ALPHAS
    )
    coverage, _, n_recal = pooled(model, X, y, seed=1)
    assert_valid(coverage, n_recal)


@pytest.mark.parametrize("n_heads", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_learned_coverage_two_sided_with_few_heads(n_heads):
    """Diff review 51 (stop 64): the tie-break is for one or two heads, where the learned
    score tied and covered above the law's upper end (one head, LAC: 0.926 at 0.90)."""
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(
        list(heads)[:n_heads], calibration="learned", alpha=ALPHAS, fill_empty=False
    )
    coverage, _, n_recal = pooled(model, X, y, seed=1)
    assert_valid(coverage, n_recal)


def test_learned_sets_keep_every_label_that_dominates_a_kept_one():
    """A label that every head scores at least as well as a kept label is kept (the
    aggregator is monotone); measured before: 18% of synthetic rows broke this."""
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(
        list(heads), calibration="learned", fill_empty=False, random_state=0
    )
    model.calibrate(X[:N_CAL], y[:N_CAL])
    test = X[N_CAL : N_CAL + 300]
    vectors, sets = model.score_vectors(test), model.predict_set(test)  # (n, K, H), (n, K)
    # dominates[i, a, b]: label a scores no worse than label b under every head on row i
    dominates = (vectors[:, :, None, :] <= vectors[:, None, :, :]).all(axis=-1)
    dropped_though_dominating = dominates & ~sets[:, :, None] & sets[:, None, :]
    assert sets.any() and dominates.sum() > 10 * len(test)  # the check has cases to judge
    assert sets.sum(axis=1).mean() < 3  # small sets: a wrong-signed constraint keeps all
    assert not dropped_though_dominating.any()


def test_learned_score_breaks_its_ties_by_the_mean_head_score():
    """Review s64: the aggregator's probability is piecewise constant, so with one head
    (or alike heads) most calibration scores tied and the sets over-covered (five
    near-identical heads: 0.926 at nominal 0.90, sets 13% larger). Ties now go by the heads'
    mean score: with one head the learned score orders labels as the base score does. A
    model calibrated before keeps the score its thresholds were computed on."""
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(
        list(heads)[:1], calibration="learned", fill_empty=False, random_state=0
    )
    model.calibrate(X[:N_CAL], y[:N_CAL])
    vectors = model.score_vectors(X[N_CAL:])  # (n, K, 1)
    learned = model._scalar_scores(vectors)
    # the base score's order (labels whose base scores differ by less than float64's
    # resolution of the sum, about 1e-7 near the top, tie)
    order = np.lexsort((vectors.ravel(), learned.ravel()))
    assert (np.diff(vectors.ravel()[order]) >= 0).all()
    scores = model.conformity_scores_
    assert np.unique(scores).size == scores.size  # none tied (3 to 7% distinct before)
    del model.__dict__["_tie_break"]  # as unpickled from before: probability alone
    untied = model._scalar_scores(vectors)
    assert np.unique(untied).size < 0.2 * untied.size
    np.testing.assert_allclose(untied, learned, atol=1e-8)


def test_fill_empty_keeps_labels_with_identical_score_vectors_together():
    """kNN-like heads tie two labels at 0.5 under every head: an empty set was filled with
    the first of them only (a review: every such row)."""
    rng = np.random.default_rng(0)
    n, k = 3000, 4
    y = rng.integers(0, k, n)
    probas = []
    for _ in range(3):  # four neighbours' votes: probabilities in quarters
        votes = np.where(rng.random((n, 4)) < 0.55, y[:, None], rng.integers(0, k, (n, 4)))
        probas.append(np.stack([(votes == c).mean(axis=1) for c in range(k)], axis=1))
    probas = np.stack(probas)
    probas[:, 2800:] = [0.5, 0.5, 0.0, 0.0]
    X = np.arange(n, dtype=float)[:, None]
    heads = [StoredProba(p).fit() for p in probas]
    model = MultiDimScoreClassifier(
        heads, calibration="learned", fill_empty=True, alpha=0.2, random_state=0
    ).calibrate(X[:2000], y[:2000])
    sets = model.predict_set(X[2800:])
    assert sets[:, :2].any(axis=1).all()  # the cases the check is about
    np.testing.assert_array_equal(sets[:, 0], sets[:, 1])


@pytest.mark.parametrize("score", ["lac", "aps"])
def test_ensemble_coverage_two_sided(score):
    X, y, heads = synthetic()
    model = EnsembleConformalClassifier(list(heads), conformity_score=score, alpha=ALPHAS)
    coverage, _, n_cal = pooled(model, X, y, seed=2)
    assert n_cal == N_CAL
    assert_valid(coverage, n_cal)


def test_saps_split_conformal_coverage_two_sided():
    X, y, heads = synthetic()
    model = SplitConformalClassifier(heads[0], conformity_score="saps", alpha=ALPHAS)
    coverage, _, n_cal = pooled(model, X, y, seed=3)
    assert_valid(coverage, n_cal)


def test_one_head_reduces_to_a_valid_scalar_method():
    X, y, heads = synthetic()
    cells = MultiDimScoreClassifier([heads[0]], alpha=ALPHAS)
    coverage, _, n_recal = pooled(cells, X, y, seed=4)
    assert cells.score_vectors(X[:3]).shape == (3, 10, 1)
    # One axis: the cells are intervals ranked by purity, and their prefix length is a
    # discrete score (a review found about half of the recalibration scores distinct), so
    # only the lower bound applies.
    assert_valid(coverage, n_recal, lower_only=True)
    # One head, one LAC axis, fitted heads: the plain ensemble is split CP on that head.
    plain = EnsembleConformalClassifier([heads[0]], alpha=ALPHAS, random_state=0)
    split = SplitConformalClassifier(heads[0], alpha=ALPHAS, random_state=0)
    plain.calibrate(X[:N_CAL], y[:N_CAL])
    split.calibrate(X[:N_CAL], y[:N_CAL])
    np.testing.assert_array_equal(
        plain.predict_set(X[N_CAL:], alpha=ALPHAS), split.predict_set(X[N_CAL:], alpha=ALPHAS)
    )
    # review finding: one fitted model, not in a list, silently ignored n_heads=5
    alone = EnsembleConformalClassifier(heads[0], n_heads=5, alpha=ALPHAS, random_state=0)
    with pytest.warns(UserWarning, match=r"adopted one fitted model.*train 5 heads"):
        alone.calibrate(X[:N_CAL], y[:N_CAL])
    np.testing.assert_array_equal(
        alone.predict_set(X[N_CAL:], alpha=ALPHAS), split.predict_set(X[N_CAL:], alpha=ALPHAS)
    )


def test_set_size_decreases_with_the_number_of_heads():
    X, y, heads = synthetic()
    mean_size = {}
    for h in (1, 5):
        model = MultiDimScoreClassifier(list(heads[:h]), alpha=0.1)
        sizes = []
        for seed in range(5):
            order = np.random.default_rng([9, seed]).permutation(len(y))
            model.set_params(random_state=seed).calibrate(X[order[:N_CAL]], y[order[:N_CAL]])
            sizes.append(model.predict_set(X[order[N_CAL:]]).sum(axis=1).mean())
        mean_size[h] = np.mean(sizes)
    assert mean_size[5] < 0.75 * mean_size[1], mean_size  # measured: about 1.8 vs 3.7


def test_warm_start_of_one_level_does_not_enlarge_another():
    """Calibrating several levels at once gives each level its own sets (regression test:
    the warm start of the smallest level used to apply to every level)."""
    X, y, heads = synthetic()
    both = MultiDimScoreClassifier(list(heads), alpha=[0.05, 0.1], random_state=0)
    one = MultiDimScoreClassifier(list(heads), alpha=0.1, random_state=0)
    both.calibrate(X[:N_CAL], y[:N_CAL])
    one.calibrate(X[:N_CAL], y[:N_CAL])
    np.testing.assert_array_equal(
        both.predict_set(X[N_CAL:], alpha=0.1), one.predict_set(X[N_CAL:])
    )
    assert both.cells_["warm_start"] >= one.cells_["warm_start"]


def test_cells_kept_is_the_prefix_that_decides_the_sets():
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(list(heads), alpha=[0.05, 0.1], random_state=0)
    model.calibrate(X[:N_CAL], y[:N_CAL])
    kept = model.cells_kept()
    assert kept.shape == (2,) and kept[0] >= kept[1]
    assert model.cells_kept(0.1) == kept[1]
    # a label is in the set exactly when its scalar score (prefix length) is <= cells_kept,
    # or it is the best label of a row whose set would otherwise be empty
    scores = model._scalar_scores(model.score_vectors(X[N_CAL:]))
    for level, m in zip([0.05, 0.1], kept, strict=True):
        sets = model.predict_set(X[N_CAL:], alpha=level)
        nonempty = (scores <= m).any(axis=1)
        np.testing.assert_array_equal(sets[nonempty], (scores <= m)[nonempty])
    # at least the warm start, and the calibrated rank otherwise
    assert kept[1] >= model._warm_start(0.1)
    learned = MultiDimScoreClassifier(list(heads), calibration="learned", random_state=0)
    learned.calibrate(X[:N_CAL], y[:N_CAL])
    with pytest.raises(ValueError, match="calibration='cells'"):
        learned.cells_kept()
    with pytest.raises(NotFittedError):
        MultiDimScoreClassifier(list(heads)).cells_kept()


def test_warm_start_counts_the_vectors_the_region_accepts_with_two_neighbours():
    """With n_neighbors=2 a vector joins the region of the first m cells when either of its
    two nearest centres is among them, so that region accepts more vectors than its cells
    hold. The warm start took the cells whose true counts reach ceil((m + 1)(1 - alpha))
    whatever n_neighbors, and bound on most calibrations (here 30%, 60% and 75% of them at
    alpha = 0.05, 0.1 and 0.2), lifting the coverage at 0.2 above the split-CP law.
    Counted through the region, it binds on 10 to 25% of them (one neighbour: 5 to 15%),
    and the coverage stays inside the law."""
    X, y, heads = synthetic()
    alphas = [0.05, 0.1, 0.2]
    model = MultiDimScoreClassifier(list(heads), n_neighbors=2, alpha=alphas, fill_empty=False)
    hits, binds = np.zeros(len(alphas)), np.zeros(len(alphas))
    for r in range(R):
        order = np.random.default_rng([0, r]).permutation(len(y))
        cal, test = order[:N_CAL], order[N_CAL : N_CAL + N_TEST]
        model.set_params(random_state=r).calibrate(X[cal], y[cal])
        hits += covers(model.predict_set(X[test]), y[test]).mean(axis=0)
        calibrated = conformal_quantile(model.conformity_scores_, alphas, warn=False)
        binds += model.cells_kept() > calibrated  # the warm start, not the calibration, decided
    assert (binds / R <= 0.3).all(), binds / R
    # fill_empty=False and as many centres as cells-part rows: few ties at the threshold,
    # so both ends of the law apply
    assert_valid(hits / R, model.n_calibration_, alphas=alphas)


def test_warm_start_with_one_neighbour_is_the_official_cumulative_count():
    """With n_neighbors=1 a cells-part true vector is accepted exactly when its own cell is
    in the prefix, so the warm start is the official code's: the ranked cells taken while
    their cumulative true counts stay within ceil((m + 1)(1 - alpha)), m centres (here with
    repeated true vectors, i.e. cells holding several of them)."""
    X, y, heads = synthetic()
    repeated = np.repeat(np.arange(150), 4)  # every row four times: duplicate LAC centres
    model = MultiDimScoreClassifier(list(heads), random_state=0)
    model.calibrate(X[repeated], y[repeated])
    cells = model.cells_
    assert (cells["true_counts"] > 1).any()  # the case the check is about
    counts = np.cumsum(cells["true_counts"][np.argsort(cells["rank"])])
    for level in (0.02, 0.05, 0.1, 0.2, 0.5):
        target = conformal_rank(counts.size, level)[0]
        assert model._warm_start(level) == np.sum(counts <= target)
    # a model pickled before the accepted counts were stored predicts as it did
    sets = model.predict_set(X[:50], alpha=[0.05, 0.2])
    old = pickle.loads(pickle.dumps(model))
    del old.cells_["true_accepted"]
    np.testing.assert_array_equal(old.predict_set(X[:50], alpha=[0.05, 0.2]), sets)


def test_ensemble_equals_split_cp_on_the_mean_probability():
    X, y, heads = synthetic()
    for score in ("lac", "aps", "raps", "saps"):
        ensemble = EnsembleConformalClassifier(list(heads), conformity_score=score, random_state=3)
        split = SplitConformalClassifier(
            MeanOfHeads(list(heads)).fit(), conformity_score=score, random_state=3
        )
        ensemble.calibrate(X[:N_CAL], y[:N_CAL])
        split.calibrate(X[:N_CAL], y[:N_CAL])
        np.testing.assert_array_equal(
            ensemble.predict_set(X[N_CAL:]), split.predict_set(X[N_CAL:])
        )


# ---- fitted heads: determinism, shapes, diversity -------------------------------------------
@functools.cache
def tabular(n=900, seed=0):
    X, y = make_classification(
        n_samples=n, n_features=8, n_informative=5, n_classes=4, class_sep=0.8, random_state=seed
    )
    return X[:300], y[:300], X[300:600], y[300:600], X[600:], y[600:]


@pytest.mark.parametrize("calibration", ["cells", "learned"])
def test_same_seed_same_sets_other_seed_other_sets(calibration):
    Xf, yf, Xc, yc, Xt, _ = tabular()

    def sets(seed):
        model = MultiDimScoreClassifier(
            n_heads=3, base_score="aps", calibration=calibration, random_state=seed
        )
        return model.fit(Xf, yf).calibrate(Xc, yc).predict_set(Xt), model

    first, model = sets(0)
    again, _ = sets(0)
    other, _ = sets(1)
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, model.predict_set(Xt))  # repeated calls agree
    assert (first != other).any()


def test_score_vectors_shape_and_columns():
    Xf, yf, _, _, Xt, _ = tabular()
    model = MultiDimScoreClassifier(n_heads=3, random_state=0).fit(Xf, yf)
    vectors = model.score_vectors(Xt[:7])
    assert vectors.shape == (7, 4, 3)
    head_proba = model.estimator_.head_probabilities(Xt[:7])
    np.testing.assert_allclose(vectors, np.moveaxis(1 - head_proba, 0, -1))  # LAC per head
    np.testing.assert_allclose(model.predict_proba(Xt[:7]), head_proba.mean(axis=0))


def test_head_ensemble_bootstrap_keeps_every_class():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = np.where(np.arange(200) < 2, "rare", np.where(np.arange(200) % 2, "a", "b"))
    heads = HeadEnsemble(n_heads=20, diversity="bootstrap", random_state=0).fit(X, y)
    for head in heads.heads_:  # a plain bootstrap drops 'rare' in about 13% of the heads
        np.testing.assert_array_equal(head.classes_, ["a", "b", "rare"])
    coefs = np.stack([head.coef_ for head in heads.heads_])
    assert not np.allclose(coefs[0], coefs[1])  # the resamples differ
    assert heads.head_probabilities(X[:5]).shape == (20, 5, 3)


def test_head_ensemble_subspace_uses_feature_subsets():
    Xf, yf, *_ = tabular()
    heads = HeadEnsemble(n_heads=4, diversity="subspace", random_state=0).fit(Xf, yf)
    subsets = heads.feature_subsets_
    assert all(len(s) == round(0.7 * 8) and len(np.unique(s)) == len(s) for s in subsets)
    assert len({tuple(s) for s in subsets}) > 1
    for head, subset in zip(heads.heads_, subsets, strict=True):
        assert head.n_features_in_ == len(subset)
    assert heads.predict_proba(Xf[:5]).shape == (5, 4)


def test_head_ensemble_seeds_needs_random_state():
    Xf, yf, *_ = tabular()
    forest = RandomForestClassifier(n_estimators=5)
    heads = HeadEnsemble(forest, n_heads=3, diversity="seeds", random_state=0).fit(Xf, yf)
    seeds = {head.random_state for head in heads.heads_}
    assert len(seeds) == 3
    with pytest.raises(ValueError, match="random_state"):
        HeadEnsemble(KNeighborsClassifier(), n_heads=2, diversity="seeds").fit(Xf, yf)


def test_head_ensemble_adopts_fitted_heads_and_checks_classes():
    _, _, heads = synthetic()
    ensemble = HeadEnsemble(list(heads[:3])).fit(None, None)
    assert all(a is b for a, b in zip(ensemble.heads_, heads[:3], strict=True))
    other = StoredProba(heads[0].proba, classes=np.arange(1, 11)).fit()
    with pytest.raises(ValueError, match="different `classes_`"):
        HeadEnsemble([heads[0], other]).fit(None, None)
    with pytest.raises(ValueError, match="different `classes_`"):
        MultiDimScoreClassifier([heads[0], other]).calibrate(np.zeros((50, 1)), np.zeros(50))
    with pytest.raises(ValueError, match="different `classes_`"):
        EnsembleConformalClassifier([heads[0], other]).calibrate(np.zeros((50, 1)), np.zeros(50))


# ---- persistence and plotting ---------------------------------------------------------------
@pytest.mark.parametrize("calibration", ["cells", "learned"])
def test_pickle_round_trip_gives_identical_sets(calibration):
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(
        list(heads), base_score="raps", calibration=calibration, n_neighbors=3, random_state=0
    ).calibrate(X[:N_CAL], y[:N_CAL])
    expected = model.predict_set(X[N_CAL:])
    assert "_tree" not in model.__getstate__()
    restored = pickle.loads(pickle.dumps(model))
    assert "_tree" not in restored.__dict__
    np.testing.assert_array_equal(restored.predict_set(X[N_CAL:]), expected)


@pytest.mark.parametrize("diversity", ["bootstrap", "subspace"])
def test_head_ensemble_same_seed_same_heads_and_pickle(diversity):
    Xf, yf, _, _, Xt, _ = tabular()

    def proba(seed):
        heads = HeadEnsemble(n_heads=3, diversity=diversity, random_state=seed).fit(Xf, yf)
        return heads.head_probabilities(Xt), heads

    first, heads = proba(0)
    np.testing.assert_array_equal(first, proba(0)[0])
    assert not np.array_equal(first, proba(1)[0])
    restored = pickle.loads(pickle.dumps(heads))
    np.testing.assert_array_equal(restored.head_probabilities(Xt), first)


def test_ensemble_classifier_same_seed_same_sets_and_pickle():
    Xf, yf, Xc, yc, Xt, _ = tabular()

    def fitted(seed):
        model = EnsembleConformalClassifier(n_heads=3, conformity_score="aps", random_state=seed)
        return model.fit(Xf, yf).calibrate(Xc, yc)

    model = fitted(0)
    first = model.predict_set(Xt, alpha=[0.1, 0.2])
    np.testing.assert_array_equal(first, fitted(0).predict_set(Xt, alpha=[0.1, 0.2]))
    assert not np.array_equal(first, fitted(1).predict_set(Xt, alpha=[0.1, 0.2]))
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict_set(Xt, alpha=[0.1, 0.2]), first)


def test_plot_cells_runs():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(list(heads), random_state=0).calibrate(X[:300], y[:300])
    fig, ax = plt.subplots()
    try:
        assert model.plot_cells(X[300:500], y[300:500], heads=(0, 2), ax=ax) is ax
        assert ax.get_xlabel() == "score of head 0"
        for bad in ((0, 0), (0, len(heads)), (1,), 3):
            with pytest.raises(ValueError, match="`heads` must be two distinct"):
                model.plot_cells(X[300:500], y[300:500], heads=bad, ax=ax)
    finally:
        plt.close(fig)


# ---- bad input ------------------------------------------------------------------------------
def test_bad_n_heads():
    Xf, yf, *_ = tabular()
    for model in (
        MultiDimScoreClassifier(n_heads=0),
        EnsembleConformalClassifier(n_heads=0),
        HeadEnsemble(n_heads=0),
    ):
        with pytest.raises(ValueError, match="n_heads"):
            model.fit(Xf, yf)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"base_score": "thr"}, "base_score"),
        ({"calibration": "kde"}, "calibration"),
        ({"cells_fraction": 0.0}, "cells_fraction"),
        ({"cells_fraction": 1.0}, "cells_fraction"),
        ({"cells_fraction": 1.5}, "cells_fraction"),
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 1.0}, "alpha"),
        ({"alpha": [0.1, 1.2]}, "alpha"),
    ],
)
def test_bad_parameters(params, match):
    X, y, heads = synthetic()
    with pytest.raises(ValueError, match=match):
        MultiDimScoreClassifier(list(heads), **params).calibrate(X[:N_CAL], y[:N_CAL])
    Xf, yf, *_ = tabular()
    with pytest.raises(ValueError, match=match):
        MultiDimScoreClassifier(**params).fit(Xf, yf)


@pytest.mark.parametrize(("alpha", "fraction"), [(0.1, 0.5), (0.05, 0.3), (0.2, 0.9)])
def test_too_few_calibration_points_names_the_minimum(alpha, fraction):
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(list(heads), alpha=alpha, cells_fraction=fraction)
    with pytest.warns(UserWarning, match="too few") as caught:
        model.calibrate(X[:5], y[:5])
    assert model.predict_set(X[100:110]).all()  # the contract: the whole label space
    minimum = int(re.search(r"give at least (\d+)", str(caught[0].message)).group(1))
    with warnings.catch_warnings(record=True) as enough:
        warnings.simplefilter("always")
        model.calibrate(X[:minimum], y[:minimum])  # enough for the level: not "too few"
    # (it may still warn that vectors beyond every cell cap leave every set full)
    assert not [w for w in enough if "too few" in str(w.message)]
    with pytest.warns(UserWarning, match=f"give at least {minimum} "):
        model.calibrate(X[: minimum - 1], y[: minimum - 1])


def test_no_point_left_to_calibrate_is_an_error():
    X, y, heads = synthetic()
    with pytest.raises(ValueError, match="too few"):
        MultiDimScoreClassifier(list(heads), cells_fraction=0.5).calibrate(X[:1], y[:1])


def test_calibrate_before_fit_with_an_unfitted_estimator():
    Xf, yf, *_ = tabular()
    for model in (
        MultiDimScoreClassifier(LogisticRegression()),
        MultiDimScoreClassifier([LogisticRegression(), LogisticRegression()]),
        EnsembleConformalClassifier(LogisticRegression()),
        EnsembleConformalClassifier([LogisticRegression()]),
        EnsembleConformalClassifier(),
    ):
        with pytest.raises(NotFittedError):
            model.calibrate(Xf, yf)
    with pytest.raises(NotFittedError):
        MultiDimScoreClassifier().predict_set(Xf)
    # one fitted model was told "calibrate was called before fit" (stop 59's API review)
    fitted = LogisticRegression().fit(Xf, yf)
    with pytest.raises(NotFittedError, match=r"one model \(LogisticRegression\), not a list"):
        MultiDimScoreClassifier(fitted, n_heads=3).calibrate(Xf, yf)
    with pytest.raises(
        NotFittedError, match=r"^MultiDimScoreClassifier\.calibrate was called before fit"
    ):
        MultiDimScoreClassifier().calibrate(Xf, yf)


def test_unseen_labels_at_calibration():
    X, y, heads = synthetic()
    labels = y[:N_CAL].copy()
    labels[3] = 99
    with pytest.raises(ValueError, match="never saw"):
        MultiDimScoreClassifier(list(heads)).calibrate(X[:N_CAL], labels)
    with pytest.raises(ValueError, match="never saw"):
        EnsembleConformalClassifier(list(heads)).calibrate(X[:N_CAL], labels)


# ---- PathMNIST (the official head outputs), alpha = 0.01 -------------------------------------
@functools.cache
def pathmnist():
    from importlib.resources import files

    with files("uqconform.data").joinpath("pathmnist_heads.npz").open("rb") as handle:
        data = np.load(handle)
        proba, target = data["probs"][:, :, :9].astype(float), data["target"]
    proba /= proba.sum(axis=-1, keepdims=True)  # 9 classes: drop the empty 10th column
    X = np.arange(target.size, dtype=float)[:, None]
    return X, target, tuple(StoredProba(p).fit() for p in proba)


@pytest.mark.slow
def test_pathmnist_alpha_001_coverage_and_set_sizes():
    """The §3.8a protocol: 60/40 calibration/test, 3 splits, alpha = 0.01, 7 heads.

    Measured on these three splits (coverage / mean size): single head LAC 0.990 / 7.37,
    single head RAPS 0.992 / 7.51; cells on LAC vectors 0.991 / 2.32 (1.76 to 2.92 per split);
    LAC on the mean probability 0.991 / 1.57; learned aggregation (before it was made
    monotone) 0.991 / 1.87. Cells on RAPS
    vectors: 0.991 / 4.61 here (about 4.0 on the lead's splits), above the 3.7 the issue asked
    for, so only "smaller than single-head RAPS" is asserted for it. The issue's targets are
    judged by the benchmark over twenty splits (a three-split mean of the cells varies too
    much: 1.76 to 2.92 per split here); the sizes here are judged against the single-head
    baseline (every multi-head method below half its mean size), not against thresholds
    placed just above the measured values.
    """
    X, y, heads = pathmnist()
    n_cal = int(0.6 * y.size)
    n_test = y.size - n_cal
    models = {
        "single_lac": SplitConformalClassifier(heads[0], alpha=0.01),
        "single_raps": SplitConformalClassifier(
            heads[0], conformity_score="raps", k_reg=5, lambda_reg=0.05, alpha=0.01
        ),
        "cells_lac": MultiDimScoreClassifier(list(heads), alpha=0.01),
        "cells_raps": MultiDimScoreClassifier(list(heads), base_score="raps", alpha=0.01),
        "learned_lac": MultiDimScoreClassifier(list(heads), calibration="learned", alpha=0.01),
        "ensemble_lac": EnsembleConformalClassifier(list(heads), alpha=0.01),
    }
    repeats = 3
    coverage = dict.fromkeys(models, 0.0)
    size = dict.fromkeys(models, 0.0)
    n_scores = {}
    for r in range(repeats):
        order = np.random.default_rng([11, r]).permutation(y.size)
        cal, test = order[:n_cal], order[n_cal:]
        for name, model in models.items():
            sets = model.set_params(random_state=r).calibrate(X[cal], y[cal]).predict_set(X[test])
            coverage[name] += covers(sets, y[test]).mean() / repeats
            size[name] += sets.sum(axis=1).mean() / repeats
            n_scores[name] = model.n_calibration_
    for name in models:
        low, _ = coverage_bounds(
            n_scores[name], 0.01, n_test, confidence=CONFIDENCE, n_repeats=repeats
        )
        assert coverage[name] >= low, (name, coverage[name], low)
    for name in ("cells_lac", "learned_lac", "ensemble_lac"):  # measured 0.21 to 0.31
        assert size[name] < 0.5 * size["single_lac"], (name, size)
    assert size["cells_raps"] < size["single_raps"], size  # measured about 4.6 vs 7.5


def test_seed_diversity_reaches_a_pipeline_step():
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    pipeline = make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=5))
    heads = HeadEnsemble(pipeline, n_heads=3, diversity="seeds", random_state=0).fit(X, y)
    seeds = [head[-1].random_state for head in heads.heads_]
    assert len(set(seeds)) == 3 and all(isinstance(s, int) for s in seeds)


def test_multidim_walkthrough_fixes():
    """Regression tests from a user walkthrough of the multi-dimensional scores."""
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(list(heads), base_score="aps", random_state=0)
    model.calibrate(X[:N_CAL], y[:N_CAL])
    sets = model.predict_set(X[N_CAL:])
    # a setting the calibration depends on changed: predicting needs a new calibrate
    model.set_params(base_score="lac")
    with pytest.raises(NotFittedError, match="changed since calibrate"):
        model.predict_set(X[N_CAL:])
    model.set_params(base_score="aps")
    np.testing.assert_array_equal(model.predict_set(X[N_CAL:]), sets)
    # fill_empty=False keeps the calibrated (possibly empty) sets of the plain score; True
    # calibrates with the fill label, in every set: switching needs no new calibrate
    model.set_params(fill_empty=False)
    raw = model.predict_set(X[N_CAL:])
    assert (sets.sum(axis=1) >= 1).all() and raw.shape == sets.shape
    np.testing.assert_array_equal(model.set_params(fill_empty=True).predict_set(X[N_CAL:]), sets)
    # a tiny cells_fraction names its minimum at once (the search used to step by one)
    tiny = MultiDimScoreClassifier(list(heads), cells_fraction=1e-9, random_state=0)
    with pytest.raises(ValueError, match="at least 1000000000 calibration points"):
        tiny.calibrate(X[:50], y[:50])
    # heads given as a list are re-read at calibrate after set_params, even after fit
    listed = MultiDimScoreClassifier(list(heads[:2]), random_state=0).fit(X[:10], y[:10])
    listed.set_params(estimator=list(heads)).calibrate(X[:N_CAL], y[:N_CAL])
    assert len(listed.estimator_.heads_) == len(heads)


def test_seed_diversity_warns_when_the_heads_are_identical():
    X, y = make_classification(300, n_features=6, n_informative=4, n_classes=3, random_state=0)
    with pytest.warns(UserWarning, match="identical heads"):
        HeadEnsemble(LogisticRegression(), n_heads=3, diversity="seeds", random_state=0).fit(X, y)


def test_more_neighbours_than_centres_warns():
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(list(heads), n_neighbors=10_000, random_state=0)
    with pytest.warns(UserWarning, match="more than the"):
        model.calibrate(X[:N_CAL], y[:N_CAL])


@pytest.mark.parametrize("base_score", ["lac", "aps"])
def test_predict_set_in_blocks_equals_one_block(base_score, monkeypatch):
    # predict_set scores the rows block by block with the draws of score_vectors made once:
    # tiny blocks (the last one partial) give the sets of one block
    from uqconform.classification import multidim

    rng = np.random.default_rng(5)
    X = rng.normal(size=(900, 4))
    y = (np.abs(X[:, 0] * 3 + X[:, 1]) * 2).astype(int) % 5
    model = MultiDimScoreClassifier(
        LogisticRegression(max_iter=300), n_heads=3, base_score=base_score, random_state=0
    ).fit(X[:300], y[:300])
    model.calibrate(X[300:600], y[300:600])
    whole = model.predict_set(X[600:], alpha=[0.05, 0.2])
    monkeypatch.setattr(multidim, "_PREDICT_CELLS", 5 * 3 * 7)  # 7 rows per block
    np.testing.assert_array_equal(model.predict_set(X[600:], alpha=[0.05, 0.2]), whole)
    # a sparse format without row slicing is converted, not refused (sparse rows seed
    # the randomised scores by their stored values, so compare with CSR, not dense)
    csr, coo = sparse.csr_matrix(X[600:]), sparse.coo_matrix(X[600:])
    np.testing.assert_array_equal(
        model.predict_set(coo, alpha=[0.05, 0.2]), model.predict_set(csr, alpha=[0.05, 0.2])
    )
    scores = model._scalar_scores(model.score_vectors(X[600:]))
    thresholds = model._thresholds(np.array([0.05, 0.2]))
    # each set holds every label scored within its threshold (plus, if empty, the best one)
    for level in range(2):
        assert (whole[..., level] >= (scores <= thresholds[level])).all()


@pytest.mark.parametrize("fmt", ["coo", "dia", "bsr"])
@pytest.mark.parametrize("diversity", ["bootstrap", "subspace"])
def test_every_sparse_format_gives_the_csr_sets(fmt, diversity):
    """COO, DIA and BSR matrices cannot be indexed: the heads index a CSR view (fit and
    prediction), so every format gives the sets of the CSR matrix."""
    from uqconform.classification import EnsembleConformalClassifier

    X, y = make_classification(120, 6, n_informative=4, n_classes=3, random_state=0)
    csr = sparse.csr_matrix(np.where(np.abs(X) > 0.5, X, 0.0))
    for cls in (MultiDimScoreClassifier, EnsembleConformalClassifier):
        sets = {}
        for name, matrix in (("csr", csr), (fmt, csr.asformat(fmt))):
            model = cls(n_heads=2, diversity=diversity, random_state=0)
            sets[name] = model.fit(matrix, y).calibrate(matrix, y).predict_set(matrix)
        np.testing.assert_array_equal(sets[fmt], sets["csr"])


def test_texts_through_a_vectorising_pipeline():
    """A list of texts has no columns: bootstrap and seed heads work (as for the split
    classifier), column subspaces are refused with the reason (was an AttributeError)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    from uqconform.classification import EnsembleConformalClassifier

    rng = np.random.default_rng(0)
    words = np.array(["good", "bad", "fine", "awful", "great", "poor"])
    docs = [" ".join(rng.choice(words, 5)) for _ in range(300)]
    y = np.array([sum(w in ("good", "fine", "great") for w in d.split()) >= 3 for d in docs])
    text_model = make_pipeline(TfidfVectorizer(), LogisticRegression())
    for cls in (EnsembleConformalClassifier, MultiDimScoreClassifier):
        model = cls(text_model, n_heads=2, random_state=0).fit(docs[:200], y[:200])
        sets = model.calibrate(docs[200:250], y[200:250]).predict_set(docs[250:])
        assert sets.shape == (50, 2) and sets.dtype == bool
        with pytest.raises(ValueError, match=r"subspace.*has none"):
            cls(text_model, n_heads=2, diversity="subspace").fit(docs[:200], y[:200])


def test_too_few_points_for_a_level_names_the_classification_outcome():
    """The warning said "(an infinite interval, or every class)" for a classifier."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] > 0).astype(int)
    heads = [LogisticRegression(C=c).fit(X[:150], y[:150]) for c in (0.1, 1.0)]
    model = MultiDimScoreClassifier(heads, calibration="cells", random_state=0)
    model.calibrate(X[150:190], y[150:190])  # 20 points calibrate the cells' level
    # the calibration size to give (as calibrate names it), not the calibration part's
    with pytest.warns(UserWarning, match=r"give at least 197 calibration points\. Every set"):
        sets = model.predict_set(X[190:], alpha=0.01)
    assert sets.all()


def test_vectors_beyond_every_cap_that_fill_every_set_are_reported():
    """With enough calibration rows for the level, more calibration vectors beyond every
    cell cap than the level leaves out made every set hold every class silently (6 of 20
    resplits with 5 heads, 400 rows, alpha 0.02 in a review)."""
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(list(heads), alpha=0.1, cells_fraction=0.5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.calibrate(X[:40], y[:40])
    scores = model.conformity_scores_
    level = 0.1
    expect = np.isinf(conformal_quantile(scores, level, warn=False))[0]
    assert expect  # this set-up has 2 of 20 vectors beyond the caps: the 19th is infinite
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sets = model.predict_set(X[100:140], alpha=level)
    reported = [w for w in caught if "beyond every cell cap" in str(w.message)]
    assert bool(reported) == bool(expect)
    if expect:
        assert sets.all()
        message = str(reported[0].message)
        assert f"{int(np.isinf(scores).sum())} of the {scores.size}" in message
        # what the level leaves out, and the cure: a cells part of at least 4 n_heads / alpha
        # rows and twice its size (at n_heads / alpha about half the calibration sets fail)
        # (n - ceil((n + 1)(1 - alpha)) = 1 of 20: floor(alpha (n + 1)) = 2 was printed,
        # although 2 vectors beyond the caps already fill every set; fixB review)
        assert "n - ceil((n + 1)(1 - alpha)) = 1 of them" in message
        least = int(np.ceil(4 * len(heads) / level))
        cells_rows = max(least, 2 * model.n_cells_)
        assert model.n_cells_ == 20
        advice = (
            f"(now 20 rows) at least 4 n_heads / alpha = {least} rows and at least twice its "
            f"size, {cells_rows} rows (about {2 * cells_rows} calibration"
        )
        assert advice in message


def test_the_beyond_caps_warning_prints_one_level_as_a_number():
    """With a scalar alpha=0.1 the warning read "At alpha=[0.1] ...: 1 of the 9
    recalibration score vectors lie beyond" (a one-level list, and the plural verb)."""
    X, y, heads = synthetic()
    # without the fill: its label (in every set) can be a vector beyond every cap
    model = MultiDimScoreClassifier(list(heads), alpha=0.1, fill_empty=False, random_state=0)
    one = r"At alpha=0\.1 every set holds every class: 1 of the 9 recalibration score vectors lies"
    with pytest.warns(UserWarning, match=one):
        model.calibrate(X[18:36], y[18:36])  # 9 cells rows, 9 recalibration rows, 1 beyond
    assert model.n_calibration_ == 9
    assert int(np.isinf(model.conformity_scores_).sum()) == 1
    # several levels still read as a list, and several vectors take the plural
    model = MultiDimScoreClassifier(
        list(heads), alpha=[0.1, 0.2], fill_empty=False, random_state=1
    )
    two = r"At alpha=\[0\.1, 0\.2\] every set holds every class: 2 of the 9 recalibration score"
    with pytest.warns(UserWarning, match=two + " vectors lie beyond"):
        model.calibrate(X[36:54], y[36:54])


def test_the_cure_for_vectors_beyond_every_cap_never_names_the_size_given():
    """The advice named a size at or below the one given (500 rows with 5 heads at alpha
    0.02, given 500 or 1,000), where every set was still full in 20 or 8 of 40 resplits."""
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(list(heads), alpha=0.1, cells_fraction=0.5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.calibrate(X[:40], y[:40])
    model.n_cells_ = 1000  # as if the cells part had been large already
    with pytest.warns(UserWarning, match=r"\(now 1000 rows\).* 2000 rows \(about 4000 cal"):
        model.predict_set(X[100:140], alpha=0.1)


def test_filled_empty_sets_break_ties_by_the_heads_mean_score():
    """An empty set gets its best-scored label; tied prefix lengths went to the first
    class (class 0 filled 26 times where it was the truth 10 times, in a review)."""
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(list(heads), alpha=0.3, random_state=0).calibrate(
        X[:300], y[:300]
    )
    rows = X[300:]
    vectors = model.score_vectors(rows, rng=model._rng(1, content=rows))
    scores = model._scalar_scores(vectors)
    threshold = model._thresholds(np.array([0.3]))[0]
    empty = ~(scores <= threshold).any(axis=1)
    best = scores[empty].min(axis=1, keepdims=True)
    assert ((scores[empty] == best).sum(axis=1) > 1).any()  # ties to break
    sets = model.predict_set(rows)
    filled = sets[empty]
    assert (filled.sum(axis=1) == 1).all()
    best = scores[empty].min(axis=1, keepdims=True)
    candidates = scores[empty] == best
    mean = np.where(candidates, vectors[empty].mean(axis=2), np.inf)
    np.testing.assert_array_equal(filled.argmax(axis=1), mean.argmin(axis=1))


def test_the_ensemble_heads_follow_a_seeded_generator():
    """A Generator as random_state seeded only the draws, not the heads (they were fitted
    with random_state=None), so two runs from default_rng(0) differed."""
    Xf, yf, Xc, yc, Xt, _ = tabular()

    def run():
        model = EnsembleConformalClassifier(
            LogisticRegression(max_iter=300), n_heads=3, random_state=np.random.default_rng(0)
        )
        return model.fit(Xf, yf).calibrate(Xc, yc).predict_set(Xt)

    np.testing.assert_array_equal(run(), run())


def test_fit_with_fitted_heads_checks_x_against_them():
    """fit(X, y) with a list of fitted heads recorded X's feature count without checking
    it: a wrong X surfaced only at calibrate, as a mismatch with the wrapper itself."""
    X, y, *_ = tabular()
    heads = [LogisticRegression(C=c, max_iter=500).fit(X, y) for c in (0.1, 1.0)]
    model = MultiDimScoreClassifier(heads)
    wide = np.hstack([X, X])
    with pytest.raises(ValueError, match=r"`X` has \d+ features, but the fitted heads take"):
        model.fit(wide, y)
    assert not hasattr(model, "estimator_")  # the failed fit left no state
    assert model.fit(X, y).n_features_in_ == X.shape[1]


def test_one_class_is_refused_before_the_heads_train():
    """The heads' own solver error (LogisticRegression's) came out before."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    with pytest.raises(ValueError, match=r"`y` holds one class \(\[0\]\): at least two"):
        MultiDimScoreClassifier(n_heads=2, random_state=0).fit(X, np.zeros(60, dtype=int))


def test_nan_in_x_is_refused_naming_x_and_the_head_model():
    """scikit-learn's own message came out of the heads, naming neither argument nor model
    in the wrapper's terms; a model that takes NaN still trains and predicts."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y, *_ = tabular()
    holed = X.copy()
    holed[3, 0] = np.nan
    match = r"`X` contains NaN and LogisticRegression does not accept missing values"
    with pytest.raises(ValueError, match=match):
        MultiDimScoreClassifier(n_heads=2, random_state=0).fit(holed, y)
    model = MultiDimScoreClassifier(n_heads=2, random_state=0).fit(X, y)
    for call in (model.calibrate, lambda rows, _: model.predict_proba(rows)):
        with pytest.raises(ValueError, match=match):
            call(holed, y)
    model.calibrate(X, y)
    with pytest.raises(ValueError, match=match):
        model.predict_set(holed)
    heads = [LogisticRegression(max_iter=500).fit(X, y), RandomForestClassifier(5).fit(X, y)]
    with pytest.raises(ValueError, match=match):
        MultiDimScoreClassifier(heads[::-1]).calibrate(holed, y)
    tolerant = HistGradientBoostingClassifier(max_iter=5)
    sets = MultiDimScoreClassifier(tolerant, n_heads=2, random_state=0).fit(holed, y)
    assert sets.calibrate(holed, y).predict_set(holed).shape == (len(y), len(np.unique(y)))


def test_head_ensemble_fit_refuses_nan_in_x_naming_x_and_the_model():
    """HeadEnsemble.fit printed scikit-learn's eight-line 'Input X contains NaN' where
    MultiDimScoreClassifier.fit gave the library's message; a model taking NaN still fits."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y, *_ = tabular()
    holed = X.copy()
    holed[3, 0] = np.nan
    match = r"^`X` contains NaN and LogisticRegression does not accept missing values"
    with pytest.raises(ValueError, match=match):
        HeadEnsemble(n_heads=2, random_state=0).fit(holed, y)
    tolerant = HeadEnsemble(HistGradientBoostingClassifier(max_iter=5), n_heads=2, random_state=0)
    assert tolerant.fit(holed, y).head_probabilities(holed).shape == (2, len(y), 4)


def test_seed_diversity_warning_does_not_call_a_tree_a_deterministic_solver():
    """A tree uses its random_state (ties between splits); it only gave identical heads on
    this data, and the warning said 'a deterministic solver'."""
    from sklearn.tree import DecisionTreeClassifier

    X, y = make_classification(300, n_features=6, n_informative=4, n_classes=3, random_state=0)
    heads = HeadEnsemble(DecisionTreeClassifier(), n_heads=3, diversity="seeds", random_state=0)
    with pytest.warns(UserWarning, match="identical heads") as caught:
        heads.fit(X, y)
    message = str(caught[0].message)
    assert "deterministic solver" not in message
    assert "output did not change with the seeds given to its random_state here" in message


def test_prefit_heads_refuse_x_with_other_columns_under_this_class_name():
    """Without fit, a feature-count mismatch was reported by HeadEnsemble, a class the user
    never created."""
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    X, y = load_iris(return_X_y=True)
    heads = [LogisticRegression(C=c, max_iter=500).fit(X[::2], y[::2]) for c in (0.1, 1.0)]
    model = MultiDimScoreClassifier(heads, random_state=0)
    message = r"`X` has 3 features, but the fitted heads of this MultiDimScoreClassifier take 4"
    with pytest.raises(ValueError, match=message):
        model.calibrate(X[1::2, :3], y[1::2])
    model.calibrate(X[1::2], y[1::2])  # and at prediction (a review found HeadEnsemble there)
    for predict in (model.predict_set, model.predict_proba, model.score_vectors):
        with pytest.raises(ValueError, match=message):
            predict(X[:5, :3])
    # a 3-D X too (a later review found HeadEnsemble named again), with where features count
    with pytest.raises(ValueError, match=r"has 1 features, but the fitted heads of this Multi"):
        model.predict_set(X[:5, None, :])
    with pytest.raises(ValueError, match=r"3-D array of shape \(5, 1, 4\).*second axis"):
        model.predict_set(X[:5, None, :])


def test_parameters_of_the_heads_changed_after_fit_are_not_ignored():
    """Review finding: after fit, `set_params(estimator=<fitted heads>)`, `n_heads` or
    `diversity` left calibrate on the heads fit had trained, silently (the plain ensemble
    refused). Fitted heads set afterwards are now used; a changed recipe asks for fit."""
    from sklearn.datasets import load_digits

    from uqconform.classification import HeadEnsemble

    X, y = load_digits(return_X_y=True)
    other = HeadEnsemble(n_heads=2, random_state=9).fit(X[:300], y[:300]).heads_
    model = MultiDimScoreClassifier(n_heads=3, random_state=0).fit(X[:600], y[:600])
    model.set_params(estimator=list(other)).calibrate(X[600:1200], y[600:1200])
    assert [id(head) for head in model.estimator_.heads_] == [id(head) for head in other]
    assert model.predict_set(X[1200:]).shape == (len(y) - 1200, 10)
    for change in ({"n_heads": 2}, {"diversity": "subspace"}):
        model = MultiDimScoreClassifier(n_heads=3, random_state=0).fit(X[:600], y[:600])
        with pytest.raises(NotFittedError, match=r"calibrate: parameters changed since fit"):
            model.set_params(**change).calibrate(X[600:1200], y[600:1200])


def test_fitted_heads_taking_different_columns_are_refused_at_adoption():
    """Review finding (stop 52): heads fitted on 5 and on 3 features got scikit-learn's
    message naming neither head, or a message true of the first head only, depending on
    their order."""
    from sklearn.linear_model import LogisticRegression

    from uqconform.classification import MultiDimScoreClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    y = (X[:, 0] > 0).astype(int)
    wide, narrow = LogisticRegression().fit(X, y), LogisticRegression().fit(X[:, :3], y)
    for heads in ([wide, narrow], [narrow, wide]):
        with pytest.raises(ValueError, match=r"heads of `estimator` take different numbers"):
            MultiDimScoreClassifier(heads).fit(X, y)


def test_stored_probabilities_passed_as_a_model_are_named_as_such():
    """mdim review: an array of probabilities passed as `estimator` (or as a head) got the
    generic "no predict_proba" refusal about LinearSVC and Keras models."""
    from uqconform import SplitConformalClassifier

    probabilities = np.random.default_rng(0).dirichlet(np.ones(3), size=50)
    X, y = np.zeros((50, 2)), np.zeros(50, int)
    match = r"is an array of shape \(50, 3\), not a model: to use stored probabilities"
    for call in (
        lambda: MultiDimScoreClassifier(probabilities).calibrate(X, y),
        lambda: MultiDimScoreClassifier([probabilities, probabilities]).calibrate(X, y),
        lambda: SplitConformalClassifier(probabilities).calibrate(X, y),
        lambda: SplitConformalClassifier(probabilities.tolist()).calibrate(X, y),  # diffrev10
    ):
        with pytest.raises(TypeError, match=match):
            call()


# ---- the calibrated fill of empty sets (mdim review, stop 56) -------------------------------
def post_hoc_fill(model, X):
    """The sets of a model calibrated before the calibrated fill: the calibrated sets of the
    plain scalar score, an empty one given the label(s) of lowest scalar score (ties: lowest
    mean base score over the heads)."""
    alpha = model.alpha
    model.set_params(fill_empty=False)
    raw = model.predict_set(X, alpha=alpha)
    model.set_params(fill_empty=True)
    vectors = model.score_vectors(X)
    scores = model._scalar_scores(vectors)
    lowest = scores == scores.min(axis=1, keepdims=True)
    tie_break = np.where(lowest, vectors.mean(axis=2), np.inf)
    fill = lowest & (tie_break == tie_break.min(axis=1, keepdims=True))
    return raw, np.where(raw.any(axis=1, keepdims=True), raw, fill[..., None])


@pytest.mark.parametrize("calibration", ["cells", "learned"])
def test_calibrated_fill_covers_inside_the_law_with_smaller_sets_than_the_post_hoc_fill(
    calibration,
):
    """fill_empty=True gave an empty set its best-scored label after the threshold: the
    sets covered above the split-CP law (here about 0.84 at nominal 0.8) and were larger
    than needed. The fill label is now part of the calibrated score (-inf), so the coverage
    lies inside the law at both ends, no set is empty, and the sets are smaller than those
    of the post-hoc fill (a model calibrated by an older version), resplit by resplit."""
    X, y, heads = synthetic()
    alphas = [0.1, 0.2]
    model = MultiDimScoreClassifier(list(heads), calibration=calibration, alpha=alphas)
    hits, size_change = np.zeros(len(alphas)), np.zeros((R, len(alphas)))
    for r in range(R):
        order = np.random.default_rng([5, r]).permutation(len(y))
        cal, test = order[:N_CAL], order[N_CAL : N_CAL + N_TEST]
        model.set_params(random_state=r).calibrate(X[cal], y[cal])
        sets = model.predict_set(X[test])
        assert sets.any(axis=1).all()  # no empty set
        hits += covers(sets, y[test]).mean(axis=0)
        old = pickle.loads(pickle.dumps(model))
        old.__dict__.pop("_true_is_fill", None)  # as calibrated by an older version
        size_change[r] = sets.sum(axis=1).mean(axis=0) - old.predict_set(X[test]).sum(axis=1).mean(
            axis=0
        )
    assert_valid(hits / R, model.n_calibration_, alphas=alphas)
    assert (size_change.mean(axis=0) < 0).all(), size_change.mean(axis=0)


@pytest.mark.parametrize("calibration", ["cells", "learned"])
def test_a_model_calibrated_before_the_calibrated_fill_keeps_its_post_hoc_fill(calibration):
    """A pickle of an older version (no `_true_is_fill`) predicts as it did: the calibrated
    sets of the plain score, an empty one filled after the threshold; a new calibration
    gives other sets."""
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(
        list(heads), calibration=calibration, alpha=[0.1, 0.2], random_state=0
    ).calibrate(X[:N_CAL], y[:N_CAL])
    test = X[N_CAL:]
    old = pickle.loads(pickle.dumps(model))
    old.__dict__.pop("_true_is_fill", None)  # what an older version pickled
    raw, expected = post_hoc_fill(old, test)
    assert (~raw.any(axis=1)).any()  # empty sets to fill: the case the check is about
    np.testing.assert_array_equal(old.predict_set(test), expected)
    assert not np.array_equal(model.predict_set(test), expected)


def test_fitted_heads_with_differently_ordered_column_names_are_refused_at_adoption():
    """mdim review (stop 56): heads fitted on DataFrames whose columns came in other orders
    were adopted (same n_features_in_), and calibrate failed with scikit-learn's message
    naming neither head."""
    pd = pytest.importorskip("pandas")
    X, y = make_classification(600, 4, n_informative=3, n_redundant=0, n_classes=3, random_state=0)
    frame = pd.DataFrame(X, columns=list("abcd"))
    first = LogisticRegression().fit(frame[:300], y[:300])
    other = LogisticRegression().fit(frame[:300][list("badc")], y[:300])
    message = (
        r"different columns.*head 0 on \['a', 'b', 'c', 'd'\].*"
        r"head 1 on \['b', 'a', 'd', 'c'\]"
    )
    for fitted in ([first, other], [first, first, other]):
        with pytest.raises(ValueError, match=message if len(fitted) == 2 else "head 2 on"):
            MultiDimScoreClassifier(fitted, random_state=0).calibrate(frame[300:], y[300:])
    with pytest.raises(ValueError, match=message):
        HeadEnsemble([first, other]).fit(None, None)
    # the same names in the same order are adopted
    same = LogisticRegression(C=0.5).fit(frame[:300], y[:300])
    MultiDimScoreClassifier([first, same], random_state=0).calibrate(frame[300:], y[300:])
    # a head fitted on an array beside one fitted on a DataFrame (diffrev15): its column
    # order cannot be checked
    bare = LogisticRegression().fit(X[:300], y[:300])
    with pytest.raises(ValueError, match=r"head 1 on an array without column names"):
        MultiDimScoreClassifier([first, bare], random_state=0).calibrate(frame[300:], y[300:])


def test_x_of_more_than_two_dimensions_is_refused_before_fitted_heads_see_it():
    """mdim review (stop 56): a 3-D X whose second axis matched the fitted heads' features
    reached them, and calibrate (or predict_set) failed with scikit-learn's "Found array
    with dim 3"."""
    X, y = make_classification(600, 8, n_informative=5, n_classes=3, random_state=3)
    heads = HeadEnsemble(LogisticRegression(), n_heads=2, random_state=0).fit(X[:200], y[:200])
    model = MultiDimScoreClassifier(heads.heads_, random_state=0)
    message = r"`X` is a 3-D array of shape \(200, 8, 1\).*2-D `X`"
    with pytest.raises(ValueError, match=message):
        model.calibrate(X[200:400, :, None], y[200:400])
    model.calibrate(X[200:400], y[200:400])
    for predict in (model.predict_set, model.predict_proba, model.score_vectors):
        with pytest.raises(ValueError, match=message):
            predict(X[400:, :, None])
    # heads trained by fit as well (diffrev15: only adopted heads were checked)
    trained = MultiDimScoreClassifier(LogisticRegression(), n_heads=2, random_state=0)
    trained.fit(X[:200], y[:200])
    with pytest.raises(ValueError, match=message):
        trained.calibrate(X[200:400, :, None], y[200:400])
    trained.calibrate(X[200:400], y[200:400])
    for predict in (trained.predict_set, trained.predict_proba, trained.score_vectors):
        with pytest.raises(ValueError, match=r"`X` is a 3-D array of shape \(200, 8, 1\)"):
            predict(X[400:, :, None])


def test_a_fill_label_that_reaches_the_level_alone_is_not_reported_beyond_the_caps():
    """With the calibrated fill the threshold is -inf when the recalibration rows' fill
    labels alone reach the level (here 82% of them are the true label, at alpha 0.3): every
    set is the fill label, and no warning may say that every set holds every class."""
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(list(heads), alpha=0.3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning fails the test
        model.calibrate(X[:N_CAL], y[:N_CAL])
        sets = model.predict_set(X[N_CAL:])
        kept = model.cells_kept()
    assert model._true_is_fill.mean() > 0.7  # the case the check is about
    assert (sets.sum(axis=1) >= 1).all() and sets.sum(axis=1).mean() < 1.05
    assert kept < len(model.cells_["centres"])


@pytest.mark.parametrize("wrapper", [MultiDimScoreClassifier, EnsembleConformalClassifier])
def test_fit_of_a_frozen_model_warns_that_the_heads_are_identical(wrapper):
    """fit clones a FrozenEstimator as itself: the n_heads heads are one model, copied
    (stop 57), which fit says; a frozen preprocessing step before a trainable classifier
    still gives diverse heads, without the warning."""
    from sklearn.frozen import FrozenEstimator
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = make_classification(300, n_features=6, n_informative=4, n_classes=3, random_state=0)
    fitted = LogisticRegression().fit(X, y)
    for estimator in (FrozenEstimator(fitted), make_pipeline(FrozenEstimator(fitted))):
        with pytest.warns(UserWarning, match="identical.*list of fitted heads"):
            model = wrapper(estimator, n_heads=3, random_state=0).fit(X, y)
        proba = model.estimator_.head_probabilities(X[:20])
        assert np.array_equal(proba[0], proba[1])  # what the warning says
    scaler = FrozenEstimator(StandardScaler().fit(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning fails the test
        wrapper(make_pipeline(scaler, LogisticRegression()), n_heads=3, random_state=0).fit(X, y)


def _openmp_threads():
    from threadpoolctl import threadpool_info

    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "openmp")


def test_the_aggregator_runs_on_one_thread_then_on_n_jobs_threads(monkeypatch):
    """The caller's OpenMP threads made a learned calibrate 15 to 23 times slower on a busy
    2-core machine at 300 rows, 8 to 9 times at 20,000 rows x 50 classes: the aggregator
    fits and predicts on one thread below ``_ONE_THREAD_VECTORS`` score vectors whatever
    ``n_jobs`` says, and from there on ``n_jobs`` threads (one by default), whatever the
    caller's pool (the same sets)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits

    from uqconform.classification import multidim

    seen = []

    class Recording(HistGradientBoostingClassifier):
        def fit(self, X, y, sample_weight=None):
            seen.append(("fit", _openmp_threads()))
            # a few trees: two OpenMP threads on a busy 2-core machine spin-wait, and the
            # default 100 iterations took minutes of CPU there (the threads are the point)
            self.max_iter = 3
            return super().fit(X, y, sample_weight)

        def predict_proba(self, X):
            seen.append(("predict_proba", _openmp_threads()))
            return super().predict_proba(X)

    monkeypatch.setattr(multidim, "HistGradientBoostingClassifier", Recording)
    X, y, heads = synthetic()  # 10 classes: 1,500 vectors in each part, 2,000 predicted
    model = MultiDimScoreClassifier(list(heads), calibration="learned", random_state=0)
    monkeypatch.setattr(multidim, "_ONE_THREAD_VECTORS", 1_000)
    with threadpool_limits(2, user_api="openmp"):  # n_jobs=None: one thread at any size
        sets = model.calibrate(X[:300], y[:300]).predict_set(X[300:500])
    assert seen == [("fit", 1), ("predict_proba", 1), ("predict_proba", 1)]
    seen.clear()
    model.set_params(n_jobs=2)
    with threadpool_limits(1, user_api="openmp"):  # 1,500 vectors, then 1,500 and 500
        model.calibrate(X[:300], y[:300])
        np.testing.assert_array_equal(model.predict_set(X[300:350]), sets[:50])
    assert seen == [("fit", 2), ("predict_proba", 2), ("predict_proba", 1)]
    seen.clear()
    # (review s64) the threads are chosen for the call, not for each block of rows: with
    # many heads the blocks held fewer vectors than the threshold, and all ran on one
    monkeypatch.setattr(multidim, "_PREDICT_CELLS", 2_000)  # blocks of 40 rows: 400 vectors
    with threadpool_limits(1, user_api="openmp"):  # 2,000 vectors in the call
        np.testing.assert_array_equal(model.predict_set(X[300:500]), sets)
    assert seen == [("predict_proba", 2)] * 5
    seen.clear()
    monkeypatch.setattr(multidim, "_PREDICT_CELLS", 2**20)
    monkeypatch.setattr(multidim, "_ONE_THREAD_VECTORS", 50_000)  # below it: one thread
    model.calibrate(X[:300], y[:300]).predict_set(X[300:350])
    assert seen == [("fit", 1), ("predict_proba", 1), ("predict_proba", 1)]


def test_a_bad_n_jobs_is_named_however_the_heads_are_given():
    """Review s64: around a fitted HeadEnsemble `n_jobs` was not checked: accepted on small
    data, joblib's TypeError after the whole calibration on large data."""
    Xf, yf, Xc, yc, *_ = _head_ensemble_data()
    fitted = HeadEnsemble(n_heads=3, random_state=0).fit(Xf, yf)
    for bad in ("two", 2.5, 0):
        for estimator in (fitted, fitted.heads_):
            model = MultiDimScoreClassifier(estimator, calibration="learned", n_jobs=bad)
            with pytest.raises(ValueError, match=r"`n_jobs` must be None or a non-zero int"):
                model.calibrate(Xc, yc)
    with pytest.raises(ValueError, match=r"`verbose`"):
        MultiDimScoreClassifier(fitted, verbose="yes").calibrate(Xc, yc)


def test_calibrate_with_one_neighbour_queries_every_score_vector_once(monkeypatch):
    # the cells part's false-label vectors were searched twice (impurity, then the scalar
    # scores), about a fifth of calibrate at 20,000 rows x 50 classes
    from scipy.spatial import cKDTree

    from uqconform.classification import multidim

    queried = []

    class CountingTree:
        """A k-d tree that records how many vectors each query asks about."""

        def __init__(self, data):
            self.tree = cKDTree(data)

        def query(self, x, k=1):
            queried.append(len(x))
            return self.tree.query(x, k=k)

    monkeypatch.setattr(multidim, "cKDTree", CountingTree)
    X, y, heads = synthetic()
    model = MultiDimScoreClassifier(list(heads), random_state=0).calibrate(X[:600], y[:600])
    assert sum(queried) == 600 * 10
    assert model.cells_["false_counts"].sum() == 300 * 9


class _PreviousCells(MultiDimScoreClassifier):
    """The cells as built before the one query: the false-label vectors searched for the
    impurity, then every vector of the cells part again for the scalar scores."""

    def _build_cells(self, vectors, labels, levels):
        from scipy.spatial import cKDTree

        n, k, _ = vectors.shape
        true = vectors[np.arange(n), labels]
        centres, counts = np.unique(true, axis=0, return_counts=True)
        false_mask = np.ones((n, k), dtype=bool)
        false_mask[np.arange(n), labels] = False
        tree = cKDTree(centres)
        _, nearest = tree.query(vectors[false_mask], k=1)
        false_counts = np.bincount(nearest, minlength=centres.shape[0])
        impurity = (false_counts + counts) / counts
        ranking = np.lexsort(
            (np.arange(centres.shape[0]), np.linalg.norm(centres, axis=1), impurity)
        )
        rank = np.empty(centres.shape[0], dtype=np.int64)
        rank[ranking] = np.arange(1, centres.shape[0] + 1)
        limits = np.maximum.accumulate(centres[ranking], axis=0)
        self.cells_ = {
            "centres": centres,
            "rank": rank,
            "limits": limits,
            "true_counts": counts,
            "false_counts": false_counts,
        }
        self._tree = tree
        scores = self._scalar_scores(vectors)
        own = scores[np.arange(n), labels]
        filled = np.where(self._fill_labels(scores, vectors)[np.arange(n), labels], -np.inf, own)
        prefixes = np.arange(1, centres.shape[0] + 1)
        self.cells_["true_accepted"] = np.searchsorted(np.sort(own), prefixes, side="right")
        self.cells_["true_accepted_filled"] = np.searchsorted(
            np.sort(filled), prefixes, side="right"
        )
        self.cells_["warm_start"] = self._warm_start(
            float(levels.min()), filled=bool(self.fill_empty)
        )


@pytest.mark.parametrize("n_neighbors", [1, 2, 3])
@pytest.mark.parametrize("base_score", ["lac", "saps"])
def test_one_query_gives_the_cells_and_sets_of_the_previous_two(base_score, n_neighbors):
    alphas = [0.05, 0.1, 0.2]
    for seed in range(3):
        X, y, heads = synthetic(n=1200, k=8, h=4, seed=seed)
        for fill in (True, False):
            settings = dict(
                base_score=base_score, n_neighbors=n_neighbors, fill_empty=fill, alpha=alphas
            )
            new = MultiDimScoreClassifier(list(heads), random_state=seed, **settings)
            old = _PreviousCells(list(heads), random_state=seed, **settings)
            for model in (new, old):
                model.calibrate(X[:600], y[:600])
            assert new.cells_.keys() == old.cells_.keys()
            for name, value in old.cells_.items():
                np.testing.assert_array_equal(new.cells_[name], value, err_msg=name)
            np.testing.assert_array_equal(new.conformity_scores_, old.conformity_scores_)
            np.testing.assert_array_equal(new._true_is_fill, old._true_is_fill)
            np.testing.assert_array_equal(new.predict_set(X[600:]), old.predict_set(X[600:]))


# ---- a fitted HeadEnsemble as `estimator`, subspace heads, call order (review s62) -----------
def _head_ensemble_data():
    X, y = make_classification(900, 5, n_informative=3, n_redundant=0, n_classes=3, random_state=0)
    return X[:300], y[:300], X[300:600], y[300:600], X[600:], y[600:]


@pytest.mark.parametrize("diversity", ["bootstrap", "subspace"])
@pytest.mark.parametrize("frozen", [False, True])
def test_a_fitted_head_ensemble_is_adopted_at_calibrate_with_its_own_columns(diversity, frozen):
    """Review s62: MultiDimScoreClassifier(<fitted HeadEnsemble>).calibrate raised "Call
    fit(X_train, y_train) to train heads from it" while EnsembleConformalClassifier took it;
    subspace heads (each reading its own columns) could not be passed at all."""
    from sklearn.frozen import FrozenEstimator

    Xf, yf, Xc, yc, Xt, yt = _head_ensemble_data()
    heads = HeadEnsemble(n_heads=4, diversity=diversity, random_state=0).fit(Xf, yf)
    estimator = FrozenEstimator(heads) if frozen else heads
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # adopted silently, as the plain ensemble does
        model = MultiDimScoreClassifier(estimator, random_state=0).calibrate(Xc, yc)
    assert model.estimator_ is heads
    # each head's vector is taken on its own columns
    expected = np.moveaxis(1 - heads.head_probabilities(Xt), 0, -1)  # LAC per head
    np.testing.assert_allclose(model.score_vectors(Xt), expected)
    np.testing.assert_allclose(model.predict_proba(Xt), heads.predict_proba(Xt))
    sets = model.predict_set(Xt)
    assert sets.shape == (len(yt), 3) and sets[np.arange(len(yt)), yt].mean() > 0.8
    if diversity == "bootstrap":  # the same sets as its list of heads
        as_list = MultiDimScoreClassifier(list(heads.heads_), random_state=0).calibrate(Xc, yc)
        np.testing.assert_array_equal(sets, as_list.predict_set(Xt))
    with pytest.raises(ValueError, match=r"`X` has 3 features, but the fitted heads of this Mu"):
        model.predict_set(Xt[:, :3])
    ensemble = EnsembleConformalClassifier(estimator, random_state=0).calibrate(Xc, yc)
    np.testing.assert_allclose(ensemble.predict_proba(Xt), model.predict_proba(Xt))


def test_fit_refuses_a_head_ensemble_and_calibrate_an_unfitted_one():
    """Review s62: fit(X, y) around a HeadEnsemble trained n_heads HeadEnsembles (heads that
    are averages of heads), silently."""
    Xf, yf, Xc, yc, *_ = _head_ensemble_data()
    fitted = HeadEnsemble(n_heads=4, random_state=0).fit(Xf, yf)
    for estimator in (HeadEnsemble(n_heads=4), fitted):
        for wrapper in (MultiDimScoreClassifier, EnsembleConformalClassifier):  # (stop 63)
            with pytest.raises(ValueError, match=r"`estimator` is a HeadEnsemble.*unfitted cl"):
                wrapper(estimator, n_heads=3).fit(Xf, yf)
    with pytest.raises(ValueError, match=r"pass it fitted.*to calibrate\(X_calib, y_calib\)"):
        MultiDimScoreClassifier(fitted).fit(Xf, yf)
    for wrapper in (MultiDimScoreClassifier, EnsembleConformalClassifier):
        with pytest.raises(NotFittedError, match=r"unfitted HeadEnsemble.*fit it first") as info:
            wrapper(HeadEnsemble(n_heads=4)).calibrate(Xc, yc)
        assert str(info.value).count("called before fit") == 1
        with pytest.raises(ValueError, match=r"frozen HeadEnsemble, which .*fit does not train"):
            wrapper(FrozenEstimator(fitted)).fit(Xf, yf)
        # a fitted HeadEnsemble set after fit trained other heads is used, as a list is (the
        # plain ensemble asked for a new fit, whose refusal sent back to calibrate: stop 63)
        model = wrapper(n_heads=2, random_state=0).fit(Xf, yf)
        model.set_params(estimator=fitted).calibrate(Xc, yc)
        assert model.estimator_ is fitted


def test_the_heads_of_a_subspace_ensemble_given_as_a_list_name_the_head_ensemble_route():
    """Review s62: `he.heads_` of a subspace HeadEnsemble got "`X` has 5 features, but the
    fitted heads ... take 4" with no way out named."""
    Xf, yf, Xc, yc, *_ = _head_ensemble_data()
    heads = HeadEnsemble(n_heads=3, diversity="subspace", random_state=0).fit(Xf, yf)
    with pytest.raises(ValueError, match=r"take 4.*pass the fitted HeadEnsemble itself"):
        MultiDimScoreClassifier(heads.heads_, random_state=0).calibrate(Xc, yc)


def _column_frame(n=600, seed=0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "c": rng.choice(["x", "y", "z"], n),
            "d": rng.normal(size=n),
        }
    )
    y = (frame.a + (frame.c == "x") + rng.normal(size=n) > 0.5).astype(int)
    return frame, y


@pytest.mark.parametrize("by", ["names", "positions"])
@pytest.mark.parametrize("wrapper", [MultiDimScoreClassifier, EnsembleConformalClassifier])
def test_subspace_heads_around_a_column_selecting_pipeline_say_why_they_fail(wrapper, by):
    """Review s62: diversity='subspace' around a ColumnTransformer failed with scikit-learn's
    "Some column names are not columns of the dataframe" or "could not convert string to
    float", nothing saying that each head sees a subset of the columns."""
    from sklearn.compose import make_column_transformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    frame, y = _column_frame()
    if by == "names":
        columns = make_column_transformer(
            (StandardScaler(), ["a", "b", "d"]), (OneHotEncoder(), ["c"])
        )
        original = r"not (a column|columns) of the dataframe"  # (scikit-learn 1.6: "a column")
    else:
        columns = make_column_transformer((OneHotEncoder(), [2]), remainder=StandardScaler())
        original = "could not convert string to float"
    pipe = make_pipeline(columns, LogisticRegression())
    model = wrapper(pipe, n_heads=3, diversity="subspace", random_state=0)
    with pytest.raises(ValueError, match=r"Head \d of diversity='subspace' failed") as caught:
        model.fit(frame[:300], y[:300])
    message = str(caught.value)
    assert "random subset of 3 of the 4 columns" in message
    assert re.search(r"\['\w', '\w', '\w'\]", message)  # the head's columns, by name
    assert "diversity='bootstrap' or 'seeds'" in message and re.search(original, message)
    assert re.search(original, str(caught.value.__cause__))  # the original error, chained
    wrapper(pipe, n_heads=3, diversity="bootstrap", random_state=0).fit(frame[:300], y[:300])


def test_the_subspace_fraction_is_documented_and_another_one_goes_through_head_ensemble():
    """Review s62: `subspace_fraction` exists on HeadEnsemble only; the wrappers use 0.7
    without saying so."""
    X, y = make_classification(900, 10, n_informative=5, n_classes=3, random_state=0)
    for wrapper in (MultiDimScoreClassifier, EnsembleConformalClassifier):
        assert "70% of the columns" in " ".join(wrapper.__doc__.split())
        model = wrapper(n_heads=3, diversity="subspace", random_state=0).fit(X[:300], y[:300])
        assert [len(s) for s in model.estimator_.feature_subsets_] == [7, 7, 7]
        heads = HeadEnsemble(
            n_heads=3, diversity="subspace", subspace_fraction=0.4, random_state=0
        ).fit(X[:300], y[:300])
        model = wrapper(heads, random_state=0).calibrate(X[300:600], y[300:600])
        assert [len(s) for s in model.estimator_.feature_subsets_] == [4, 4, 4]
        assert model.predict_set(X[600:]).shape == (300, 3)


@pytest.mark.parametrize("method", ["predict", "predict_proba", "score_vectors"])
def test_predicting_before_any_call_names_fit_or_calibrate_alone(method):
    """Review s62: with fitted heads given and nothing called, these got scikit-learn's
    "not fitted yet. Call 'fit'" where the plain ensemble's predict names calibrate too."""
    X, _, heads = synthetic()
    message = (
        f"MultiDimScoreClassifier.{method} needs fit(X, y) (or calibrate(X_calib, y_calib) "
        "alone around a fitted `estimator`) first."
    )
    with pytest.raises(NotFittedError, match=re.escape(message)):
        getattr(MultiDimScoreClassifier(list(heads)), method)(X[:3])


def test_a_subspace_head_error_unrelated_to_columns_keeps_its_class():
    """Diff review 44: every failure of a subspace head became a ValueError blaming the
    columns (scikit-learn's parameter error, a MemoryError, a warning raised as an error)."""
    from sklearn.utils._param_validation import InvalidParameterError

    X, y = make_classification(300, 5, n_informative=3, n_redundant=0, random_state=0)
    for diversity in ("bootstrap", "subspace"):
        model = MultiDimScoreClassifier(
            LogisticRegression(C=-1.0), n_heads=2, diversity=diversity, random_state=0
        )
        with pytest.raises(InvalidParameterError, match=r"^The 'C' parameter"):
            model.fit(X, y)


@pytest.mark.parametrize("kind", ["list", "ensemble"])
def test_heads_adopted_after_a_fit_forget_what_fit_recorded_of_its_rows(kind):
    """Diff review 44: calibrate adopting fitted heads after a fit that trained others kept
    that fit's feature count and training rows: heads over 8 columns after a fit on 5 were
    refused ("expecting 5 features"), and calibrating on the discarded fit's rows warned
    that they were the training rows; around a HeadEnsemble `n_heads=0` was checked too."""
    X, y = make_classification(
        1500, 8, n_informative=3, n_redundant=0, n_classes=3, random_state=0
    )
    if kind == "list":
        heads: object = [LogisticRegression().fit(X[600:900], y[600:900]) for _ in range(2)]
    else:
        heads = HeadEnsemble(n_heads=3, random_state=0).fit(X[600:900], y[600:900])
    model = MultiDimScoreClassifier(n_heads=3, random_state=0).fit(X[:300, :5], y[:300])
    model.set_params(estimator=heads).calibrate(X[300:600], y[300:600])
    assert model.predict_set(X[900:]).shape == (600, 3)
    model = MultiDimScoreClassifier(n_heads=3, random_state=0).fit(X[:300], y[:300])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the adopted heads never saw these rows
        model.set_params(estimator=heads).calibrate(X[:300], y[:300])
    if kind == "ensemble":  # parameters of heads it does not make are not checked
        MultiDimScoreClassifier(heads, n_heads=0, diversity="rows").calibrate(X[:300], y[:300])


def test_both_head_wrappers_adopt_heads_set_after_fit_by_one_rule():
    """Review s63: the wrappers differed on heads set after fit (the plain ensemble asked
    for a new fit for a list holding an unfitted head or an unfitted HeadEnsemble, where
    MultiDim named the head), and both said "calibrate was called before fit" after a fit."""
    Xf, yf, Xc, yc, *_ = _head_ensemble_data()
    heads = [LogisticRegression(C=c).fit(Xf, yf) for c in (0.1, 1.0)]
    cases = [
        ([*heads, LogisticRegression()], r"set after fit, as given, and head 2 of `estimator`"),
        (HeadEnsemble(n_heads=2), r"set after fit, as given, and `estimator` is an unfitted He"),
        (heads[0], r"parameters changed since fit"),  # one model: a changed parameter
    ]
    for wrapper in (MultiDimScoreClassifier, EnsembleConformalClassifier):
        for estimator, message in cases:
            model = wrapper(n_heads=2, random_state=0).fit(Xf, yf)
            with pytest.raises(NotFittedError, match=message) as info:
                model.set_params(estimator=estimator).calibrate(Xc, yc)
            assert "called before fit" not in str(info.value)
        model = wrapper(n_heads=2, random_state=0).fit(Xf, yf)
        model.set_params(estimator=heads).calibrate(Xc, yc)
        assert model.estimator_.heads_ == heads
        with pytest.raises(NotFittedError) as info:  # adopted heads, then one unfitted model
            model.set_params(estimator=LogisticRegression()).calibrate(Xc, yc)
        assert "called before fit" not in str(info.value)
        assert "fit(X_train, y_train)" in str(info.value)


def test_bootstrap_heads_do_not_depend_on_the_names_of_the_classes():
    """Review s65: the stratified bootstrap gave each class the draws of its place in the
    label-sorted rows, so renaming the classes moved 239 of 800 multi-dim sets."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 4))
    codes = (X[:, 0] + 0.5 * rng.normal(size=1200) > 0).astype(int) + (X[:, 1] > 0.5)
    names = np.array(["zeta", "alpha", "mid"])  # code 0 -> "zeta": another sorted order
    sets = []
    for y in (codes, names[codes]):
        model = MultiDimScoreClassifier(LogisticRegression(), n_heads=3, random_state=0)
        model.fit(X[:400], y[:400]).calibrate(X[400:800], y[400:800])
        sets.append(model.predict_set(X[800:]))
    # the named model's column j is the class sorted(names)[j]: its code's column
    code_of_column = [list(names).index(name) for name in sorted(names)]
    np.testing.assert_array_equal(sets[1], sets[0][:, code_of_column])
