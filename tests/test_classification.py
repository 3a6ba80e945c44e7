"""SplitConformalClassifier: LAC, APS, RAPS, top-k, class-conditional, labels, seeds."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import classification_data, thirds
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.datasets import load_digits, load_iris
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression, Ridge, RidgeClassifier
from sklearn.svm import SVC

from uqconform import CrossConformalClassifier, SplitConformalClassifier
from uqconform.evaluation import coverage_bounds
from uqconform.quantiles import conformal_quantile
from uqconform.scores import ClassificationScore, SAPSScore


def _split(n=600, seed=0, **kw):
    return thirds(*classification_data(n, seed=seed, **kw))


def test_lac_sets_by_hand_with_string_labels_in_classes_order():
    # labels whose sorted order differs from first-appearance order
    (Xf, yf), (Xc, yc), (Xt, _) = _split(labels=("zebra", "ant", "moose"))
    cp = SplitConformalClassifier(LogisticRegression(), alpha=0.1).fit(Xf, yf)
    cp.calibrate(Xc, yc)
    np.testing.assert_array_equal(cp.classes_, ["ant", "moose", "zebra"])
    proba_c = cp.predict_proba(Xc)
    true_col = np.searchsorted(cp.classes_, yc)
    q = conformal_quantile(1 - proba_c[np.arange(len(yc)), true_col], 0.1)[0]
    sets = cp.predict_set(Xt)
    assert sets.shape == (len(Xt), 3) and sets.dtype == bool
    np.testing.assert_array_equal(sets, 1 - cp.predict_proba(Xt) <= q)
    # column j is the label classes_[j]
    model = LogisticRegression().fit(Xf, yf)
    np.testing.assert_array_equal(cp.predict(Xt), model.predict(Xt))
    top = cp.classes_[np.argmax(cp.predict_proba(Xt), axis=1)]
    has_top = sets[np.arange(len(Xt)), np.searchsorted(cp.classes_, top)]
    assert has_top[sets.any(axis=1)].all()


def test_integer_labels_not_starting_at_zero():
    X, y = classification_data(450, labels=(10, 20, 30))
    (Xf, yf), (Xc, yc), (Xt, _) = thirds(X, y)
    cp = SplitConformalClassifier(alpha=0.2).fit(Xf, yf).calibrate(Xc, yc)
    np.testing.assert_array_equal(cp.classes_, [10, 20, 30])
    # LAC by hand: the true label's column is found by value, not by label - 10 etc.
    proba_c = cp.predict_proba(Xc)
    true_col = np.searchsorted(cp.classes_, yc)
    q = conformal_quantile(1 - proba_c[np.arange(len(yc)), true_col], 0.2)[0]
    np.testing.assert_array_equal(cp.predict_set(Xt), 1 - cp.predict_proba(Xt) <= q)


def test_class_conditional_thresholds_are_per_class():
    (Xf, yf), (Xc, yc), (Xt, _) = _split(900, seed=1)
    cp = SplitConformalClassifier(alpha=0.2, class_conditional=True).fit(Xf, yf)
    cp.calibrate(Xc, yc)
    proba_c, proba_t = cp.predict_proba(Xc), cp.predict_proba(Xt)
    sets = cp.predict_set(Xt)
    for j, label in enumerate(cp.classes_):
        q = conformal_quantile(1 - proba_c[yc == label, j], 0.2)[0]
        np.testing.assert_array_equal(sets[:, j], 1 - proba_t[:, j] <= q)


def test_class_conditional_with_a_rare_class_warns_and_includes_it():
    (Xf, yf), (Xc, yc), (Xt, _) = _split(600, seed=2)
    keep = (yc != "emu") | (np.cumsum(yc == "emu") <= 3)  # 3 calibration points of "emu"
    cp = SplitConformalClassifier(alpha=0.1, class_conditional=True).fit(Xf, yf)
    cp.calibrate(Xc[keep], yc[keep])
    with pytest.warns(UserWarning, match=r"class 'emu'.*every prediction set \(its"):
        sets = cp.predict_set(Xt)
    assert sets[:, list(cp.classes_).index("emu")].all()
    # With groups, only that group's rows hold the class (the warning said every set):
    # group "b" gets 2 of the "emu" points, group "a" the others.
    groups = np.where(np.arange(len(yc)) % 2 == 0, "a", "b")
    emu_rows = np.flatnonzero(yc == "emu")
    groups[emu_rows] = "a"
    groups[emu_rows[:2]] = "b"
    test_groups = np.where(np.arange(len(Xt)) % 2 == 0, "a", "b")
    with pytest.warns(UserWarning, match=r"group 'b' / class 'emu' \(2 points\).* of that group"):
        cp.calibrate(Xc, yc, groups=groups)
    emu = cp.predict_set(Xt, groups=test_groups)[:, list(cp.classes_).index("emu")]
    assert emu[test_groups == "b"].all() and not emu[test_groups == "a"].all()


@pytest.mark.parametrize("score", ["aps", "raps"])
def test_randomised_sets_depend_only_on_the_seed(score):
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=3)

    def sets(seed, **kw):
        cp = SplitConformalClassifier(conformity_score=score, random_state=seed, **kw)
        return cp.fit(Xf, yf).calibrate(Xc, yc).predict_set(Xt, alpha=[0.1, 0.3])

    first = sets(0)
    np.testing.assert_array_equal(first, sets(0))
    np.testing.assert_array_equal(first, sets(0, batch_size=9))
    assert not np.array_equal(first, sets(1))
    # a Generator seed: two fresh generators with one seed give the same sets
    from_generator = sets(np.random.default_rng(0))
    np.testing.assert_array_equal(from_generator, sets(np.random.default_rng(0)))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_seeded_randomised_sets_one_row_per_call_keep_coverage(seed):
    """A seeded model predicting one row per call must not reuse one uniform for every row
    (regression test: the prediction stream restarted at each call, and the coverage of a
    row-by-row run was 0.61 to 0.98 at nominal 0.90)."""
    (Xf, yf), (Xc, yc), (Xt, yt) = _digits()
    cp = SplitConformalClassifier(
        LogisticRegression(C=0.05, max_iter=2000), alpha=0.1, conformity_score="aps",
        random_state=seed,
    ).fit(Xf, yf).calibrate(Xc, yc)  # fmt: skip
    single = np.vstack([cp.predict_set(Xt[i : i + 1]) for i in range(len(yt))])
    covered = single[np.arange(len(yt)), np.searchsorted(cp.classes_, yt)].mean()
    low, high = coverage_bounds(len(yc), 0.1, len(yt), confidence=0.999)
    assert low <= covered <= high
    # predicting the same rows again gives the same sets: predictions depend on the input
    np.testing.assert_array_equal(
        single[:5], np.vstack([cp.predict_set(Xt[i : i + 1]) for i in range(5)])
    )


@pytest.mark.parametrize("score", ["aps", "raps", "saps"])
def test_randomised_sets_depend_on_the_numbers_not_their_dtype(score):
    """The rows are hashed into the seed by value: int, float32, object and nullable
    containers of the same numbers draw the same noise (8-12 of 30 sets differed)."""
    X, y = load_digits(return_X_y=True)  # integer pixel values, held as float64
    cp = SplitConformalClassifier(
        LogisticRegression(C=0.05, max_iter=2000), conformity_score=score, random_state=0
    ).fit(X[:600], y[:600]).calibrate(X[600:1200], y[600:1200])  # fmt: skip
    test = X[1200:1260]
    sets = cp.predict_set(test)
    frame = pd.DataFrame(test.astype(np.int64))
    for same in (test.astype(np.int64), test.astype(np.float32), test.astype(object),
                 frame.astype("Int64"), frame.astype("Float64")):  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # feature names of a frame after an array fit
            np.testing.assert_array_equal(cp.predict_set(same), sets)


def test_non_randomised_aps_needs_no_seed_and_covers_the_top_label():
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=4)
    a = SplitConformalClassifier(conformity_score="aps", randomized=False).fit(Xf, yf)
    b = SplitConformalClassifier(conformity_score="aps", randomized=False).fit(Xf, yf)
    sa, sb = a.calibrate(Xc, yc).predict_set(Xt), b.calibrate(Xc, yc).predict_set(Xt)
    np.testing.assert_array_equal(sa, sb)
    assert sa.sum(axis=1).min() >= 1  # the label crossing the threshold is kept: never empty
    proba_c = a.predict_proba(Xc)
    column = np.searchsorted(a.classes_, yc)
    order = np.argsort(-proba_c, axis=1, kind="stable")
    ranked = np.take_along_axis(proba_c, order, axis=1)
    rank = np.argsort(order, axis=1)[np.arange(len(yc)), column]
    score = np.cumsum(ranked, axis=1)[np.arange(len(yc)), rank]
    q = conformal_quantile(score, 0.1)[0]
    proba_t = a.predict_proba(Xt)
    order_t = np.argsort(-proba_t, axis=1, kind="stable")
    above = np.cumsum(np.take_along_axis(proba_t, order_t, axis=1), axis=1) - np.take_along_axis(
        proba_t, order_t, axis=1
    )
    expected = np.zeros_like(sa)
    np.put_along_axis(expected, order_t, above <= q, axis=1)
    np.testing.assert_array_equal(sa, expected)


def _digits():
    X, y = load_digits(return_X_y=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    X, y = X[order] / 16, y[order]
    return (X[:600], y[:600]), (X[600:1200], y[600:1200]), (X[1200:], y[1200:])


def test_topk_sets_have_constant_size():
    (Xf, yf), (Xc, yc), (Xt, _) = _digits()
    cp = SplitConformalClassifier(LogisticRegression(max_iter=500), conformity_score="topk")
    sets = cp.fit(Xf, yf).calibrate(Xc, yc).predict_set(Xt, alpha=[0.01, 0.05, 0.2])
    sizes = sets.sum(axis=1)
    assert np.all(sizes == sizes[0])
    rank = (
        np.argsort(np.argsort(-cp.predict_proba(Xc), axis=1), axis=1)[np.arange(len(yc)), yc] + 1
    )
    for j, a in enumerate((0.01, 0.05, 0.2)):
        assert sizes[0, j] == conformal_quantile(rank.astype(float), a)[0]


def test_raps_penalty_bounds_the_set_size():
    (Xf, yf), (Xc, yc), (Xt, _) = _digits()
    model = LogisticRegression(max_iter=500)
    aps = SplitConformalClassifier(model, conformity_score="aps", random_state=0)
    raps0 = SplitConformalClassifier(
        model, conformity_score="raps", lambda_reg=0.0, random_state=0
    )
    heavy = SplitConformalClassifier(
        model, conformity_score="raps", k_reg=2, lambda_reg=10.0, random_state=0, alpha=0.1
    )
    a = aps.fit(Xf, yf).calibrate(Xc, yc).predict_set(Xt)
    np.testing.assert_array_equal(raps0.fit(Xf, yf).calibrate(Xc, yc).predict_set(Xt), a)
    h = heavy.fit(Xf, yf).calibrate(Xc, yc).predict_set(Xt)
    # the true label is outside the top 2 for far fewer than 10% of calibration rows, so
    # the threshold stays below the first penalty step: no set holds more than 2 labels
    assert h.sum(axis=1).max() <= 2
    assert h.sum(axis=1).mean() <= a.sum(axis=1).mean()


def test_dataframe_input_and_predict_proba():
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=5)
    frame = lambda X: pd.DataFrame(X, columns=["u", "v"])  # noqa: E731
    cp = SplitConformalClassifier().fit(frame(Xf), yf).calibrate(frame(Xc), pd.Series(yc))
    np.testing.assert_array_equal(cp.feature_names_in_, ["u", "v"])
    sets = cp.predict_set(frame(Xt))
    plain = SplitConformalClassifier().fit(Xf, yf).calibrate(Xc, yc).predict_set(Xt)
    np.testing.assert_array_equal(sets, plain)
    with pytest.raises(ValueError, match="feature names"):
        cp.predict_set(frame(Xt)[["v", "u"]])


def test_calibration_labels_the_model_never_saw():
    (Xf, yf), (Xc, yc), _ = _split()
    cp = SplitConformalClassifier().fit(Xf, yf)
    yb = yc.copy().astype(object)
    yb[:2] = "yak"
    with pytest.raises(ValueError, match=r"`y` contains labels the model never saw.*yak"):
        cp.calibrate(Xc, yb)
    with pytest.raises(ValueError, match="never saw"):
        cp.calibrate(Xc, np.zeros(len(yc), dtype=int))


def test_bad_inputs_name_the_argument():
    (Xf, yf), (Xc, yc), (Xt, _) = _split()
    with pytest.raises(TypeError, match="predict_proba"):
        SplitConformalClassifier(SVC()).fit(Xf, yf)
    with pytest.raises(TypeError, match="predict_proba"):
        SplitConformalClassifier(RidgeClassifier().fit(Xf, yf)).calibrate(Xc, yc)
    assert not hasattr(SplitConformalClassifier(RidgeClassifier()), "predict_proba")
    with pytest.raises(ValueError, match="conformity_score"):
        SplitConformalClassifier(conformity_score="absolute").fit(Xf, yf)
    with pytest.raises(ValueError, match="k_reg"):
        SplitConformalClassifier(conformity_score="raps", k_reg=-1).fit(Xf, yf)
    with pytest.raises(ValueError, match="k_reg"):
        SplitConformalClassifier(conformity_score="raps", k_reg="2").fit(Xf, yf)
    with pytest.raises(ValueError, match="lambda_reg"):
        SplitConformalClassifier(conformity_score="raps", lambda_reg=np.nan).fit(Xf, yf)
    yn = np.arange(len(yf), dtype=float) % 3
    yn[0] = np.nan
    with pytest.raises(ValueError, match="`y` contains NaN"):
        SplitConformalClassifier().fit(Xf, yn)
    with pytest.raises(ValueError, match="`y` has"):
        SplitConformalClassifier().fit(Xf, yf[:-2])
    with pytest.raises(ValueError, match="`y` must be 1-D"):
        SplitConformalClassifier().fit(Xf, np.c_[yf, yf])
    cp = SplitConformalClassifier().fit(Xf, yf)
    with pytest.raises(NotFittedError, match="calibrate"):
        cp.predict_set(Xt)
    with pytest.raises(NotFittedError):
        SplitConformalClassifier().predict_set(Xt)
    with pytest.raises(NotFittedError, match="fit"):
        SplitConformalClassifier(LogisticRegression()).calibrate(Xc, yc)
    with pytest.raises(ValueError, match="3 features"):
        cp.calibrate(Xc, yc).predict_set(np.c_[Xt, Xt[:, 0]])


@settings(max_examples=20, deadline=None)
@given(
    st.sampled_from(["lac", "aps", "raps", "topk"]),
    st.booleans(),
    st.lists(st.floats(0.01, 0.9), min_size=2, max_size=5),
    st.integers(0, 1000),
)
def test_sets_are_nested_in_alpha(score, class_conditional, alphas, seed):
    (Xf, yf), (Xc, yc), (Xt, _) = _split(300, seed=seed % 7)
    cp = SplitConformalClassifier(
        conformity_score=score, class_conditional=class_conditional, random_state=seed
    )
    alphas = np.sort(alphas)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # small alphas: too few points
        sets = cp.fit(Xf, yf).calibrate(Xc, yc).predict_set(Xt, alpha=alphas)
    assert np.all(sets[..., 1:] <= sets[..., :-1])


def test_groups_and_class_conditional_combine_into_group_by_class_thresholds():
    (Xf, yf), (Xc, yc), (Xt, _) = _split(1200, seed=6)
    gc, gt = (Xc[:, 0] > 0.5).astype(int), (Xt[:, 0] > 0.5).astype(int)
    cp = SplitConformalClassifier(alpha=0.2, class_conditional=True).fit(Xf, yf)
    sets = cp.calibrate(Xc, yc, groups=gc).predict_set(Xt, groups=gt)
    proba_c, proba_t = cp.predict_proba(Xc), cp.predict_proba(Xt)
    for g in (0, 1):
        for j, label in enumerate(cp.classes_):
            rows = (gc == g) & (yc == label)
            q = conformal_quantile(1 - proba_c[rows, j], 0.2)[0]
            np.testing.assert_array_equal(sets[gt == g, j], 1 - proba_t[gt == g, j] <= q)


def test_saps_weight_reaches_the_score():
    (Xf, yf), (Xc, yc), _ = _split(seed=5)
    for weight in (0.05, 1.0):
        cp = SplitConformalClassifier(
            conformity_score="saps", saps_weight=weight, randomized=False
        ).fit(Xf, yf)
        cp.calibrate(Xc, yc)
        by_hand = SAPSScore(weight=weight, randomized=False).scores(cp.predict_proba(Xc))
        true_col = np.searchsorted(cp.classes_, yc)
        np.testing.assert_allclose(cp.conformity_scores_, by_hand[np.arange(len(yc)), true_col])
    with pytest.raises(ValueError, match="`saps_weight`"):
        SplitConformalClassifier(conformity_score="saps", saps_weight=-0.1).fit(Xf, yf)


class ExtraColumn(SAPSScore):
    """A user mistake: one score column too many."""

    def set_scores(self, proba, u=None):
        scores = super().set_scores(proba, u)
        return np.c_[scores, scores[:, :1]]


@pytest.mark.parametrize("batch_size", [None, 10])
def test_user_score_with_a_wrong_set_score_shape_is_named(batch_size):
    X, y = classification_data(300, seed=3)
    cp = SplitConformalClassifier(conformity_score=ExtraColumn(), batch_size=batch_size)
    cp.fit(X[:150], y[:150]).calibrate(X[150:250], y[150:250])
    with pytest.raises(ValueError, match=r"ExtraColumn.*set_scores must return .* shape"):
        cp.predict_set(X[250:])


class TopProbabilityOnly(ClassificationScore):
    """A user mistake: one score per row instead of one per row and class."""

    def scores(self, proba, u=None):
        return 1.0 - proba.max(axis=1)


class NaNForFirstRow(ClassificationScore):
    def scores(self, proba, u=None):
        values = 1.0 - proba
        values[0] = np.nan
        return values


@pytest.mark.parametrize(
    "score, expected",
    [
        (TopProbabilityOnly(), r"TopProbabilityOnly\(\)\.scores must return .*got \(100,\)"),
        (NaNForFirstRow(), r"NaNForFirstRow\(\)\.scores returned NaN for 1 row"),
    ],
    ids=["shape", "nan"],
)
def test_user_score_values_are_checked_at_calibration(score, expected):
    X, y = classification_data(300, seed=3)
    cp = SplitConformalClassifier(conformity_score=score).fit(X[:150], y[:150])
    with pytest.raises(ValueError, match=expected):
        cp.calibrate(X[150:250], y[150:250])


class NaNForSevenRows(ClassificationScore):
    """Fine at calibration; NaN when asked about exactly seven rows (a prediction)."""

    def scores(self, proba, u=None):
        values = 1.0 - proba
        if proba.shape[0] == 7:
            values[3] = np.nan
        return values


@pytest.mark.parametrize("wrapper", [SplitConformalClassifier, CrossConformalClassifier])
def test_user_score_nan_at_prediction_is_refused_not_an_empty_set(wrapper):
    """NaN set scores gave empty sets (counted as misses) without a word."""
    X, y = classification_data(300, seed=3)
    cp = wrapper(conformity_score=NaNForSevenRows())
    cp = (
        cp.fit(X[:150], y[:150])
        if wrapper is CrossConformalClassifier
        else (cp.fit(X[:150], y[:150]).calibrate(X[150:250], y[150:250]))
    )
    with pytest.raises(ValueError, match=r"NaNForSevenRows\(\)\.(set_)?scores returned NaN"):
        cp.predict_set(X[250:257])


def test_class_conditional_strata_do_not_share_memory_with_the_labels():
    X, y = classification_data(300, seed=4)
    labels = np.searchsorted(np.unique(y), y).astype(np.intp)  # 0..K-1: their own index
    cp = SplitConformalClassifier(class_conditional=True).fit(X[:150], labels[:150])
    y_cal = labels[150:].copy()
    cp.calibrate(X[150:], y_cal)
    strata = cp.calibration_strata_.copy()
    y_cal[:] = 0  # the user reuses their array
    np.testing.assert_array_equal(cp.calibration_strata_, strata)


def test_calibration_uniforms_follow_the_calibration_rows():
    """With the seed alone, every calibration set of n rows drew the same n uniforms: a
    fixed seed then biased coverage over fresh data (0.887 to 0.936 across seeds at n = 30,
    nominal 0.9). The rows enter the seed, as they do at prediction."""
    (Xf, yf), (Xc, yc), _ = _digits()
    cp = SplitConformalClassifier(
        LogisticRegression(C=0.05, max_iter=2000), conformity_score="aps", random_state=0
    ).fit(Xf, yf)

    def uniforms(rows):
        cp.calibrate(Xc[rows], yc[rows])
        proba = cp.predict_proba(Xc[rows])
        column = np.searchsorted(cp.classes_, yc[rows])
        order = np.argsort(-proba, axis=1, kind="stable")
        rank = np.argsort(order, axis=1)[np.arange(len(rows)), column]
        before = np.take_along_axis(proba, order, axis=1).cumsum(axis=1)
        p_true = proba[np.arange(len(rows)), column]
        below = before[np.arange(len(rows)), rank] - p_true
        return (cp.conformity_scores_ - below) / p_true

    first, second = uniforms(np.arange(100)), uniforms(np.arange(100, 200))
    assert np.all((first >= -1e-9) & (first <= 1 + 1e-9))
    assert not np.allclose(first, second)  # other rows, other draws
    np.testing.assert_array_equal(uniforms(np.arange(100)), first)  # same rows, same draws


@pytest.mark.parametrize("score", ["lac", "aps", "raps", "saps", "topk"])
@pytest.mark.parametrize("class_conditional", [False, True])
def test_pvalues_above_alpha_are_the_sets(score, class_conditional):
    """crepes #13 / #19: p-values for classification. The sets at any level are the classes
    whose p-value exceeds it (199 calibration rows: (n + 1) alpha is an integer at 0.1 and
    0.2), with groups, in batches and with the randomised scores' draws."""
    (Xf, yf), (Xc, yc), (Xt, yt) = _split(900, seed=8)
    Xc, yc = Xc[:199], yc[:199]
    gc, gt = (Xc[:, 0] > 0).astype(int), (Xt[:, 0] > 0).astype(int)
    cp = SplitConformalClassifier(
        conformity_score=score,
        class_conditional=class_conditional,
        batch_size=7,
        random_state=0,
    ).fit(Xf, yf)
    for groups, test_groups in ((None, None), (gc, gt)):
        cp.calibrate(Xc, yc, groups=groups)
        p = cp.predict_pvalue(Xt, groups=test_groups)
        assert p.shape == (len(Xt), len(cp.classes_)) and ((p > 0) & (p <= 1)).all()
        alphas = [0.05, 0.1, 0.2, 0.3]
        sets = cp.predict_set(Xt, alpha=alphas, groups=test_groups)
        for j, alpha in enumerate(alphas):
            np.testing.assert_array_equal(p > alpha, sets[..., j])
        true = p[np.arange(len(yt)), np.searchsorted(cp.classes_, yt)]
        # The true label's p-value exceeds alpha as often as split conformal covers, within
        # each calibration stratum (the group, and the class when class-conditional); one
        # 1% false-alarm budget over every check. Top-k's ranks tie: its p-values are
        # conservative, so only the lower end applies.
        cal_strata = np.c_[
            gc if groups is not None else np.zeros(len(yc)),
            yc if class_conditional else np.zeros(len(yc)),
        ]
        test_strata = np.c_[
            gt if groups is not None else np.zeros(len(yt)),
            yt if class_conditional else np.zeros(len(yt)),
        ]
        strata = np.unique(test_strata, axis=0)
        confidence = 1 - 0.01 / (len(strata) * len(alphas))
        for stratum in strata:
            rows = (test_strata == stratum).all(axis=1)
            n_cal = int((cal_strata == stratum).all(axis=1).sum())
            bounds = coverage_bounds(n_cal, alphas, int(rows.sum()), confidence=confidence)
            covered = (true[rows, None] > np.array(alphas)).mean(axis=0)
            assert (covered >= bounds[:, 0]).all(), (stratum, covered, bounds)
            if score != "topk":
                assert (covered <= bounds[:, 1]).all(), (stratum, covered, bounds)
        if score == "lac":  # every p-value against its definition, written here
            cal_scores = (
                1 - cp.predict_proba(Xc)[np.arange(len(yc)), np.searchsorted(cp.classes_, yc)]
            )
            test_scores = 1 - cp.predict_proba(Xt)
            expected = np.empty_like(p)
            for k, label in enumerate(cp.classes_):
                row_strata = np.c_[
                    test_strata[:, 0], np.full(len(yt), label if class_conditional else 0)
                ]
                for stratum in np.unique(row_strata, axis=0):
                    rows = (row_strata == stratum).all(axis=1)
                    mine = np.sort(cal_scores[(cal_strata == stratum).all(axis=1)])
                    at_least = mine.size - np.searchsorted(mine, test_scores[rows, k], side="left")
                    expected[rows, k] = (1 + at_least) / (mine.size + 1)
            np.testing.assert_allclose(p, expected, rtol=0, atol=1e-12)


def test_pvalues_of_an_uncalibrated_group_are_one_and_inputs_are_checked():
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=9)
    cp = SplitConformalClassifier(random_state=0).fit(Xf, yf)
    with pytest.raises(NotFittedError, match="predict_pvalue needs calibration"):
        cp.predict_pvalue(Xt)
    cp.calibrate(Xc, yc, groups=np.zeros(len(yc), int))
    with pytest.warns(UserWarning, match="groups without calibration data"):
        p = cp.predict_pvalue(Xt, groups=np.r_[np.zeros(len(Xt) - 3, int), [7, 7, 7]])
    assert (p[-3:] == 1).all() and (p[:-3] < 1).any()
    with pytest.raises(ValueError, match="groups"):
        cp.predict_pvalue(Xt)
    with pytest.raises(ValueError, match="features"):
        cp.predict_pvalue(Xt[:, :1])


class _IntegerRank(SAPSScore):
    """A user score returning integers: each label's rank by probability (0: the top)."""

    def scores(self, proba, u=None):
        return np.argsort(np.argsort(-proba, axis=1), axis=1)

    def set_scores(self, proba, u=None):
        return self.scores(proba)

    def label_scores(self, proba, labels, u=None):
        return self.scores(proba)[np.arange(len(labels)), labels]


def test_pvalues_are_fractions_for_a_score_of_integers():
    """p-values took the dtype of the scores: a user score of integers gave 0 / 1."""
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=10)
    cp = SplitConformalClassifier(conformity_score=_IntegerRank()).fit(Xf, yf)
    p = cp.calibrate(Xc, yc).predict_pvalue(Xt)
    assert p.dtype == float and ((p > 0) & (p < 1)).any()
    for alpha in (0.05, 0.2, 0.5):
        np.testing.assert_array_equal(p > alpha, cp.predict_set(Xt, alpha=alpha))


def test_smoothed_pvalues_cover_exactly_despite_ties():
    """A depth-2 tree gives four probability vectors, so LAC scores tie heavily: the plain
    p-values are conservative (coverage above the law's upper end), the smoothed ones
    follow the split-CP coverage law exactly, at several levels, pooled over resplits."""
    from sklearn.tree import DecisionTreeClassifier

    X, y = classification_data(4000, seed=11)
    model = DecisionTreeClassifier(max_depth=2, random_state=0).fit(X[:1000], y[:1000])
    pool_X, pool_y = X[1000:], y[1000:]
    n_cal, n_test, repeats = 200, 500, 30
    alphas = np.array([0.1, 0.2])
    hits = {False: [], True: []}
    rng = np.random.default_rng(0)
    for r in range(repeats):
        order = rng.permutation(len(pool_y))
        cal, test = order[:n_cal], order[n_cal : n_cal + n_test]
        cp = SplitConformalClassifier(FrozenEstimator(model), random_state=r)
        cp.calibrate(pool_X[cal], pool_y[cal])
        for smooth in (False, True):
            p = cp.predict_pvalue(pool_X[test], smooth=smooth)
            true = p[np.arange(n_test), np.searchsorted(cp.classes_, pool_y[test])]
            hits[smooth].append(true[:, None] > alphas)
    bounds = coverage_bounds(n_cal, alphas, n_test, confidence=0.999, n_repeats=repeats)
    smoothed, plain = (np.concatenate(hits[s]).mean(axis=0) for s in (True, False))
    assert ((bounds[:, 0] <= smoothed) & (smoothed <= bounds[:, 1])).all(), smoothed
    assert (plain > bounds[:, 1]).all(), plain  # ties make the plain p-values conservative
    first, again = (
        SplitConformalClassifier(FrozenEstimator(model), random_state=3)
        .calibrate(pool_X[:200], pool_y[:200])
        .predict_pvalue(pool_X[200:300], smooth=True)
        for _ in range(2)
    )
    np.testing.assert_array_equal(first, again)
    with pytest.raises(ValueError, match="`smooth` must be True or False"):
        cp.predict_pvalue(pool_X[:5], smooth="yes")


def test_smoothed_pvalues_of_empty_strata_and_with_a_generator():
    """A review found: a class without calibration rows in a group got p = u when smoothed
    (1 unsmoothed, and its sets hold it); with a Generator, APS draws and tie draws
    interleaved batch by batch, so the result depended on batch_size."""
    (Xf, yf), (Xc, yc), (Xt, _) = _split(900, seed=12)
    groups = np.where(np.arange(len(yc)) % 2 == 0, "a", "b")
    keep = ~((groups == "b") & (yc == "emu"))  # group b has no "emu" calibration row
    cp = SplitConformalClassifier(class_conditional=True, random_state=0).fit(Xf, yf)
    with pytest.warns(UserWarning, match="Too few"):
        cp.calibrate(Xc[keep], yc[keep], groups=groups[keep])
    test_groups = np.where(np.arange(len(Xt)) % 2 == 0, "a", "b")
    emu = list(cp.classes_).index("emu")
    for smooth in (False, True):
        p = cp.predict_pvalue(Xt, groups=test_groups, smooth=smooth)
        assert (p[test_groups == "b", emu] == 1).all()
        assert (p[test_groups == "a", emu] < 1).any()

    def smoothed(batch_size):
        model = SplitConformalClassifier(
            conformity_score="aps", random_state=np.random.default_rng(5), batch_size=batch_size
        ).fit(Xf, yf)
        return model.calibrate(Xc, yc).predict_pvalue(Xt, smooth=True)

    np.testing.assert_array_equal(smoothed(None), smoothed(7))


def test_labels_of_another_type_than_the_classes_are_unknown_labels():
    """A model fitted on a pandas column of strings (object classes_) calibrated with
    integer-encoded labels: the unknown-label message, not numpy's TypeError from
    comparing str and int."""
    import pandas as pd

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    labels = pd.Series(np.where(X[:, 0] > 0, "yes", "no"), dtype=object)
    model = LogisticRegression().fit(X[:100], labels[:100])
    assert model.classes_.dtype == object
    with pytest.raises(ValueError, match=r"never saw during fit: \[0, 1\]"):
        SplitConformalClassifier(model).calibrate(X[100:], (labels[100:] == "yes").astype(int))


def test_unseen_label_messages_summarise_long_class_lists():
    """With 30 classes the message listed every one, and more than five unseen labels
    ended in four dots ("... ." after the list; user review)."""
    from uqconform.evaluation import coverage

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = np.arange(400) % 30
    cp = SplitConformalClassifier(LogisticRegression(max_iter=50)).fit(X[:200], y[:200])
    cp.calibrate(X[200:], y[200:])
    unseen = y[:50] + 100  # 30 unseen labels
    expected = r"\[100, 101, 102, 103, 104, \.\.\. \(30 in all\)\]\. Known classes: \[0, 1,"
    with pytest.raises(ValueError, match=expected) as caught:
        cp.calibrate(X[:50], unseen)
    text = str(caught.value)
    assert "(30 in all)]." in text and "...." not in text and "29" not in text
    sets = cp.predict_set(X[:50], alpha=0.1)
    with pytest.raises(ValueError) as caught:
        coverage(unseen, sets, classes=cp.classes_)
    text = str(caught.value)
    assert "labels not in `classes`: [100, 101, 102, 103, 104, ... (30 in all)]" in text
    assert "`classes`: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ... (30 in all)]." in text


def test_a_score_object_changed_in_place_asks_for_a_new_calibration():
    # the object was recorded by identity: lambda_reg set on it after calibrate took
    # coverage from 0.89 to 0.36 without a word (set_params of the same change was refused)
    from uqconform import CrossConformalClassifier
    from uqconform.scores import RAPSScore

    X, y = load_digits(return_X_y=True)
    X = X / 16
    for make in (SplitConformalClassifier, CrossConformalClassifier):
        score = RAPSScore(k_reg=0, lambda_reg=0.0)
        model = make(LogisticRegression(max_iter=500), conformity_score=score, random_state=0)
        if make is SplitConformalClassifier:
            model.fit(X[:600], y[:600]).calibrate(X[600:1200], y[600:1200])
        else:
            model.fit(X[:600], y[:600])
        before = model.predict_set(X[1200:1300])
        score.lambda_reg = 0.5
        with pytest.raises(NotFittedError, match="changed since"):
            model.predict_set(X[1200:1300])
        score.lambda_reg = 0.0  # back as it was: the same setting
        np.testing.assert_array_equal(model.predict_set(X[1200:1300]), before)
        # an equal new object is the same setting
        model.set_params(conformity_score=RAPSScore(k_reg=0, lambda_reg=0.0))
        np.testing.assert_array_equal(model.predict_set(X[1200:1300]), before)


def test_non_randomised_saps_keeps_the_top_label():
    # with u = 1 alone the rows the model is surest about got empty sets (2-16% on digits)
    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order] / 16, y[order]
    model = LogisticRegression(max_iter=2000).fit(X[:600], y[:600])
    for alpha in (0.05, 0.2):
        cp = SplitConformalClassifier(
            FrozenEstimator(model), alpha=alpha, conformity_score="saps", randomized=False
        ).calibrate(X[600:1100], y[600:1100])
        sets = cp.predict_set(X[1100:])
        assert sets.any(axis=1).all()
        assert sets[np.arange(len(sets)), model.predict_proba(X[1100:]).argmax(axis=1)].all()
        assert sets[np.arange(len(sets)), y[1100:]].mean() >= 1 - alpha


def test_settings_a_score_object_would_ignore_are_refused():
    from uqconform.scores import APSScore

    X, y = load_digits(return_X_y=True)
    model = SplitConformalClassifier(
        LogisticRegression(max_iter=300), conformity_score=APSScore(), randomized=False
    )
    with pytest.raises(ValueError, match=r"randomized=False would be ignored"):
        model.fit(X[:300] / 16, y[:300]).calibrate(X[300:600] / 16, y[300:600])


def test_fit_on_one_class_names_y():
    # it failed with the model's own message ("This solver needs samples of at least 2
    # classes"), which does not name the argument
    with pytest.raises(ValueError, match=r"`y` holds one class \(\[3\]\)"):
        SplitConformalClassifier().fit(np.ones((6, 2)), np.full(6, 3))


class LogitsAsProbabilities(ClassifierMixin, BaseEstimator):
    """A common mistake with deep-learning models: predict_proba returns logits."""

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, X):
        X = np.asarray(X)
        return 3.0 * np.column_stack([X[:, 0], X[:, 1], X[:, 0] - X[:, 1]])


@pytest.mark.parametrize("score", ["lac", "aps", "saps"])
def test_logits_given_as_probabilities_are_refused(score):
    """APS and SAPS read them as probability mass and gave sets with no warning."""
    X, y = classification_data(300, seed=3)
    cp = SplitConformalClassifier(LogitsAsProbabilities(), conformity_score=score)
    cp.fit(X[:150], y[:150])
    with pytest.raises(ValueError, match=r"predict_proba gave values outside \[0, 1\].*softmax"):
        cp.calibrate(X[150:250], y[150:250])


def test_an_infinite_classification_score_is_not_called_an_overflow_of_the_target():
    """-log p at a probability of 0 is infinite by design; the calibrate warning spoke of
    the target overflowing near 1e308 and asked to rescale it (diff review)."""
    from sklearn.tree import DecisionTreeClassifier

    from uqconform.scores.classification import ClassificationScore

    class NegativeLog(ClassificationScore):
        def scores(self, proba, u=None):
            with np.errstate(divide="ignore"):
                return -np.log(proba)

    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    tree = DecisionTreeClassifier(max_depth=1, random_state=0).fit(X[:50], y[:50])
    model = SplitConformalClassifier(tree, conformity_score=NegativeLog())
    with pytest.warns(
        UserWarning, match=r"calibration scores are infinite \(e.g. -log p"
    ) as caught:
        model.calibrate(X[50:], y[50:])
    assert not any("1e308" in str(w.message) for w in caught)


@pytest.mark.parametrize("frozen", [False, True])
def test_a_prefit_model_trained_again_after_calibrate_is_refused(frozen):
    """Review finding: a fitted model adopted by calibrate and trained again in place kept
    the old calibration silently (coverage 0.60 at 0.90 over 50 seeds), or failed with a
    numpy broadcast error when its number of classes changed."""
    import pickle

    from uqconform import SplitConformalRegressor

    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, 600)
    X = np.array([[0, 0], [1.2, 0], [0, 1.2], [3, 3]])[y] + rng.normal(size=(600, 2))
    model = LogisticRegression().fit(X[:200], y[:200])
    wrapper = SplitConformalClassifier(FrozenEstimator(model) if frozen else model)
    wrapper.calibrate(X[200:400], y[200:400])
    reference = wrapper.predict_set(X[400:])
    copy = pickle.loads(pickle.dumps(wrapper))  # a pickled copy is the same model
    np.testing.assert_array_equal(copy.predict_set(X[400:]), reference)
    model.predict_proba(X[400:])  # using the model does not change it
    np.testing.assert_array_equal(wrapper.predict_set(X[400:]), reference)
    for labels in (y[:200][::-1], np.minimum(y[:200], 2)):  # other data; three classes
        model.fit(X[:200], labels)
        for method in ("predict_set", "predict_pvalue"):
            with pytest.raises(
                NotFittedError, match=r"changed since calibrate \(it was trained again"
            ):
                getattr(wrapper, method)(X[400:])
    wrapper.calibrate(X[200:400], np.minimum(y[200:400], 2))  # recalibrated: usable again
    assert wrapper.predict_set(X[400:]).shape == (200, 3)
    regressor = Ridge().fit(X[:200], y[:200])
    split = SplitConformalRegressor(regressor).calibrate(X[200:400], y[200:400])
    regressor.fit(X[:200], -y[:200])
    with pytest.raises(NotFittedError, match=r"changed since calibrate \(it was trained again"):
        split.predict_interval(X[400:])
    # a model the wrapper fitted itself is its own clone: the user's copy is not read
    own = (
        SplitConformalRegressor(regressor).fit(X[:200], y[:200]).calibrate(X[200:400], y[200:400])
    )
    regressor.fit(X[:200], y[:200])
    assert own.predict_interval(X[400:]).shape == (200, 2)


def test_an_infinite_raps_penalty_is_named_in_the_warning():
    """Review finding: `lambda_reg=1e308` overflowed every RAPS score to inf, and the
    warning spoke only of -log p at a probability of 0."""
    X, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=1000).fit(X[::2], y[::2])
    wrapper = SplitConformalClassifier(model, conformity_score="raps", lambda_reg=1e308)
    labels = np.random.default_rng(0).permutation(y[1::2])  # true labels often ranked low
    with pytest.warns(UserWarning, match=r"infinite \(.*a huge RAPS `lambda_reg`"):
        with np.errstate(over="ignore"):
            wrapper.calibrate(X[1::2], labels)


@pytest.mark.parametrize("kind", ["venn_abers", "bincp", "mean_smoothing", "rps", "multidim"])
def test_prefit_models_trained_again_after_calibrate_are_refused_by_every_wrapper(kind):
    """Review finding (stop 50): the retrained-model check covered the split wrappers but
    not the wrappers that adopt models by other paths (Venn-Abers, BinCP and mean
    smoothing, RPS's and the multi-dimensional scores' lists of fitted models): their old
    calibration was kept silently."""
    from uqconform.classification import (
        BinarizedSmoothedClassifier,
        MeanSmoothedClassifier,
        MultiDimScoreClassifier,
        ReliablePredictionSets,
        VennAbersCalibrator,
    )

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    X = np.array([[0, 0], [4, 0], [0, 4]])[y] + rng.normal(size=(600, 2))
    models = [LogisticRegression(C=c).fit(X[:200], y[:200]) for c in (1.0, 0.3, 3.0)]
    wrapper, method = {
        "venn_abers": (VennAbersCalibrator(models[0]), "predict_proba"),
        "bincp": (
            BinarizedSmoothedClassifier(models[0], n_samples=64, random_state=0),
            "predict_set",
        ),
        "mean_smoothing": (
            MeanSmoothedClassifier(models[0], sigma=0.05, n_samples=500, random_state=0),
            "predict_set",
        ),
        "rps": (ReliablePredictionSets(models, k_calib=2), "predict_set"),
        "multidim": (MultiDimScoreClassifier(models, random_state=0), "predict_set"),
    }[kind]
    wrapper.calibrate(X[200:400], y[200:400])
    reference = getattr(wrapper, method)(X[400:])
    models[0].predict_proba(X[400:])  # using a model does not change it
    np.testing.assert_array_equal(getattr(wrapper, method)(X[400:]), reference)
    models[0].fit(X[:200], y[:200][::-1])  # the user trains it again on other labels
    with pytest.raises(NotFittedError, match=r"changed since calibrate \(it was trained again"):
        getattr(wrapper, method)(X[400:])
    wrapper.calibrate(X[200:400], y[200:400])  # recalibrated: usable again
    assert getattr(wrapper, method)(X[400:]).shape[0] == 200


def test_models_pickled_by_an_older_build_predict_after_the_upgrade():
    """Review finding (diffrev4, diffrev6): a digest stored by the previous build (which
    hashed other things) made every such pickle refuse to predict ("trained again"), and a
    MultiDimScoreClassifier pickled with `_heads_adopted` crashed. An older digest (no
    scheme tag) that differs gives a warning, not a refusal; one that agrees, nothing;
    renamed attributes are carried over on loading."""
    import pickle
    import warnings

    from uqconform._version import _STATE_KEY
    from uqconform.classification import MultiDimScoreClassifier

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 600)
    X = np.array([[0, 0], [4, 0], [0, 4]])[y] + rng.normal(size=(600, 2))
    heads = [LogisticRegression(C=c).fit(X[:200], y[:200]) for c in (1.0, 0.3)]
    split = SplitConformalClassifier(FrozenEstimator(heads[0])).calibrate(X[200:400], y[200:400])
    multidim = MultiDimScoreClassifier(heads, random_state=0).calibrate(X[200:400], y[200:400])
    for model in (split, multidim):
        reference = model.predict_set(X[400:])
        for untagged, expected in [("0" * 64, 1), (model._adopted_digest.partition(":")[2], 0)]:
            state = model.__getstate__()
            state["_adopted_digest"] = untagged  # an older build's digest: no scheme tag
            if model is multidim:
                state["_heads_adopted"] = state.pop("_estimator_adopted")  # the older name
            state[_STATE_KEY] = "0.0.0"
            old = type(model).__new__(type(model))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the version warning
                old.__setstate__(pickle.loads(pickle.dumps(state)))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                np.testing.assert_array_equal(old.predict_set(X[400:]), reference)
            older = [w for w in caught if "an older build of uqconform" in str(w.message)]
            assert bool(older) == bool(expected)


def test_unseen_group_warnings_speak_of_classes_and_pvalues():
    """A review found the regression wording, "their sets are the whole output space", for
    rows of groups unseen at calibration, in predict_set and predict_pvalue alike."""
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=3)
    cp = SplitConformalClassifier(random_state=0).fit(Xf, yf)
    cp.calibrate(Xc, yc, groups=np.arange(len(yc)) % 2)
    groups = np.r_[np.zeros(len(Xt) - 1, int), 5]
    with pytest.warns(UserWarning, match="groups without calibration") as record:
        sets = cp.predict_set(Xt, groups=groups)
    assert sets[-1].all()
    with pytest.warns(UserWarning, match="groups without calibration") as record_p:
        p = cp.predict_pvalue(Xt, groups=groups)
    assert (p[-1] == 1).all()
    (message,) = [str(w.message) for w in record if "without calibration" in str(w.message)]
    (message_p,) = [str(w.message) for w in record_p if "without calibration" in str(w.message)]
    for text in (message, message_p):
        assert text.endswith("their sets hold every class (p-value 1 for every class).")


def _hints_at_binning(caught) -> bool:
    return any("alone in their group" in str(w.message) for w in caught)


def test_continuous_groups_get_a_hint_to_bin_them():
    """A float feature passed as `groups` puts every calibration row alone in its group:
    the warning listed groups without saying what was wrong."""
    (Xf, yf), (Xc, yc), _ = _split(seed=4)
    values = np.random.default_rng(4).normal(size=len(yc))
    cp = SplitConformalClassifier(random_state=0).fit(Xf, yf)
    with pytest.warns(UserWarning) as caught:
        cp.calibrate(Xc, yc, groups=values)
    (hint,) = [str(w.message) for w in caught if "alone in their group" in str(w.message)]
    assert f"`groups` puts {len(yc)} of the {len(yc)} calibration rows alone" in hint
    assert "np.digitize" in hint and "pandas.cut" in hint
    assert "identifiers of units: merge them" in hint
    # binned, the groups are groups: no hint
    for groups in (np.digitize(values, [-0.5, 0.5]), np.where(values > 0, "a", "b")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cp.calibrate(Xc, yc, groups=groups)
        assert not _hints_at_binning(caught)
    # more than half of the rows alone: the hint; half of them or fewer: none
    n = len(yc)
    for alone, hinted in ((n // 2 + 1, True), (n // 2, False)):
        groups = np.r_[np.arange(alone), np.full(n - alone, -1)].astype(float)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cp.calibrate(Xc, yc, groups=groups)
        assert _hints_at_binning(caught) == hinted


def test_float_labels_with_a_fractional_part_are_refused_naming_y():
    """Labels 0.5, 1.5, 2.5 reached scikit-learn's "Unknown label type: continuous"."""
    from uqconform.classification import EnsembleConformalClassifier

    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=5, labels=(0, 1, 2))
    for make in (SplitConformalClassifier, EnsembleConformalClassifier):
        with pytest.raises(ValueError, match=r"`y` holds float labels with a fractional part"):
            make(random_state=0).fit(Xf, yf + 0.5)
        with pytest.raises(ValueError, match=r"\[0\.5, 1\.5, 2\.5\].*y\.astype\(str\)"):
            make(random_state=0).fit(Xf, yf + 0.5)
    # integer-valued floats are class labels as before: the same sets as the integers
    as_int = SplitConformalClassifier(random_state=0).fit(Xf, yf).calibrate(Xc, yc)
    as_float = SplitConformalClassifier(random_state=0).fit(Xf, yf.astype(float))
    as_float.calibrate(Xc, yc.astype(float))
    np.testing.assert_array_equal(as_float.predict_set(Xt), as_int.predict_set(Xt))
    # a fitted model whose classes are such floats is calibrated as before
    model = LogisticRegression().fit(Xf, yf)
    model.classes_ = model.classes_ + 0.5
    sets = SplitConformalClassifier(model).calibrate(Xc, yc + 0.5).predict_set(Xt)
    np.testing.assert_array_equal(sets, as_int.predict_set(Xt))


@pytest.mark.parametrize("wrapper", ["split", "cross", "ensemble"])
def test_a_score_class_instead_of_an_instance_says_to_instantiate_it(wrapper):
    from uqconform.classification import EnsembleConformalClassifier
    from uqconform.scores import APSScore

    make = {
        "split": SplitConformalClassifier,
        "cross": CrossConformalClassifier,
        "ensemble": EnsembleConformalClassifier,
    }[wrapper]
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=6)
    with pytest.raises(
        TypeError, match=r"is the class APSScore: pass an instance, e\.g\. APSScore\(\)"
    ):
        make(conformity_score=APSScore).fit(Xf, yf)
    if wrapper == "ensemble":  # a score object is used, as its docstring now says
        by_object = make(n_heads=2, conformity_score=APSScore(randomized=False), random_state=0)
        by_name = make(n_heads=2, conformity_score="aps", randomized=False, random_state=0)
        np.testing.assert_array_equal(
            by_object.fit(Xf, yf).calibrate(Xc, yc).predict_set(Xt),
            by_name.fit(Xf, yf).calibrate(Xc, yc).predict_set(Xt),
        )


def test_identical_rows_one_per_call_share_a_draw_only_with_an_int_seed():
    """The documented behaviour of `random_state` for rows predicted one per call: an int
    seed gives identical rows the same draw; None and a Generator draw afresh."""
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=7)
    row = Xt[:1]
    for seed, shared in ((0, True), (None, False), (np.random.default_rng(0), False)):
        cp = SplitConformalClassifier(conformity_score="aps", random_state=seed).fit(Xf, yf)
        cp.calibrate(Xc, yc)
        draws = {tuple(cp.predict_pvalue(row, smooth=True)[0]) for _ in range(5)}
        assert (len(draws) == 1) == shared


def test_a_model_whose_classes_repeat_a_label_is_refused():
    """Review finding (stop 52): an external model with classes_ ['a', 'b', 'b'] for
    three probability columns was accepted, and a set holding column 2 read as 'b'."""

    class External:
        classes_ = np.array(["a", "b", "b"])

        def fit(self, X, y):
            return self

        def predict_proba(self, X):
            return np.full((len(X), 3), 1 / 3)

    X = np.random.default_rng(0).normal(size=(30, 2))
    y = np.array(["a", "b", "c"] * 10)
    with pytest.raises(ValueError, match=r"`estimator`'s `classes_` repeats a label"):
        SplitConformalClassifier(External()).calibrate(X, y)


def test_calibrate_names_the_unfitted_head_of_an_ensemble():
    """Review finding (s54 t53): with a list of heads, one of them unfitted, calibrate
    said `estimator` is not fitted and to call fit, which then said "Head 1 of
    `estimator` is not fitted": calibrate now says which head, as fit does."""
    from uqconform.classification import EnsembleConformalClassifier

    (Xf, yf), (Xc, yc), _ = _split(seed=8)
    heads = [LogisticRegression().fit(Xf, yf), LogisticRegression()]
    with pytest.raises(NotFittedError, match=r"head 1 of `estimator` is not fitted: pass fit"):
        EnsembleConformalClassifier(heads).calibrate(Xc, yc)
    with pytest.raises(NotFittedError, match=r"Head 1 of `estimator` is not fitted"):
        EnsembleConformalClassifier(heads).fit(Xf, yf)
    # a single unfitted model keeps the message that says to call fit
    with pytest.raises(NotFittedError, match=r"`estimator` is not fitted\. Either call fit"):
        SplitConformalClassifier(LogisticRegression()).calibrate(Xc, yc)


@pytest.mark.parametrize(
    "settings",
    [
        {"conformity_score": "raps", "lambda_reg": 1e308},
        {"conformity_score": "saps", "saps_weight": 1e308},
    ],
)
def test_overflowing_score_settings_warn_once_without_numpy_overflow_warnings(settings):
    """Review finding (s54 t39): a RAPS `lambda_reg` or SAPS `saps_weight` near the float
    limit leaked numpy's "overflow encountered in multiply" next to the library's own
    warning of infinite calibration scores."""
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=9, n=300)
    model = FrozenEstimator(LogisticRegression().fit(Xf, yf))
    cp = SplitConformalClassifier(model, random_state=0, **settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cp.calibrate(Xc, yc)
        cp.predict_set(Xt)
        cp.predict_pvalue(Xt)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [
        str(w.message) for w in caught
    ]
    infinite = [w for w in caught if "calibration scores are infinite" in str(w.message)]
    assert len(infinite) == 1


def test_too_few_calibration_points_says_how_many_are_needed():
    """Review finding (s54 t44, t34): the warning gave the rule ceil((n + 1)(1 - alpha)) <=
    n instead of the count it asks for, and said "(0 points)", "(1 points)"."""
    (Xf, yf), (Xc, yc), _ = _split(seed=10, labels=("a", "b", "c"))
    model = FrozenEstimator(LogisticRegression().fit(Xf, yf))
    keep = yc != "c"
    cp = SplitConformalClassifier(model, class_conditional=True)
    with pytest.warns(
        UserWarning,
        match=r"^Too few calibration points for alpha=0\.1 in class 'c' \(no calibration "
        r"points\): at least 9 points are needed, so that class is in every prediction set",
    ):
        cp.calibrate(Xc[keep], yc[keep])
    with pytest.warns(
        UserWarning,
        match=r"in the calibration set \(1 point\): at least 9 points are needed, so those",
    ):
        SplitConformalClassifier(model).calibrate(Xc[:1], yc[:1])
    # several levels: the count each needs, the smallest level (most points) first
    with pytest.warns(
        UserWarning,
        match=r"alpha=\[0\.1, 0\.05\] in the calibration set \(5 points\): at least 19 points "
        r"are needed at alpha=0\.05, 9 at alpha=0\.1, so",
    ):
        SplitConformalClassifier(model, alpha=[0.1, 0.05]).calibrate(Xc[:5], yc[:5])
    # several strata and levels: each is short only where a level needs more (diffrev11:
    # the text read as if every stratum listed were short at every level)
    groups = np.where(np.arange(20) < 15, "a", "b")
    with pytest.warns(
        UserWarning,
        match=r"group 'a' \(15 points\), group 'b' \(5 points\): at least 19 points are "
        r"needed at alpha=0\.05, 9 at alpha=0\.1 \(each is short at the levels needing more "
        r"points than it has\), so",
    ):
        SplitConformalClassifier(model, alpha=[0.1, 0.05]).calibrate(
            Xc[:20], yc[:20], groups=groups
        )


def test_none_in_an_object_x_is_reported_as_missing_values():
    """Review finding (s54 t34): an object X holding None reached scikit-learn's long
    "Input X contains NaN" message, while a float NaN got the library's own."""
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=11)
    cp = SplitConformalClassifier(LogisticRegression()).fit(Xf, yf).calibrate(Xc, yc)
    rows = Xt[:3].astype(object)
    rows[1, 0] = None
    message = r"^`X` contains NaN and LogisticRegression does not accept missing values"
    with pytest.raises(ValueError, match=message):
        cp.predict_set(rows)
    with pytest.raises(ValueError, match=message):
        cp.predict_set(rows.tolist())
    frame = pd.DataFrame(Xf).astype(object)
    frame.iloc[4, 1] = None
    with pytest.raises(ValueError, match=message):
        SplitConformalClassifier(LogisticRegression()).fit(frame, yf)
    # objects without missing values (numbers stored as objects) pass as before
    np.testing.assert_array_equal(cp.predict_set(Xt[:3].astype(object)), cp.predict_set(Xt[:3]))


def test_a_torch_predict_proba_that_requires_grad_is_detached():
    """Review finding (s54 t46): a model whose predict_proba returns a torch tensor that
    requires grad got torch's bare RuntimeError ("Use tensor.detach()")."""
    torch = pytest.importorskip("torch")
    (Xf, _), (Xc, yc), (Xt, yt) = _split(seed=12, labels=(0, 1, 2))
    torch.manual_seed(0)
    net = torch.nn.Linear(Xf.shape[1], 3)

    class TorchClassifier:
        classes_ = np.arange(3)

        def __init__(self, detach):
            self.detach = detach

        def predict_proba(self, X):
            out = torch.softmax(net(torch.as_tensor(np.asarray(X, dtype=np.float32))), 1)
            return out.detach() if self.detach else out

    sets = {}
    for detach in (True, False):
        cp = SplitConformalClassifier(
            TorchClassifier(detach), conformity_score="aps", random_state=0
        )
        sets[detach] = cp.calibrate(Xc, yc).predict_set(Xt)
    np.testing.assert_array_equal(sets[False], sets[True])
    low, _ = coverage_bounds(len(yc), 0.1, len(yt), confidence=0.999)
    assert sets[False][np.arange(len(yt)), yt].mean() >= low  # the law holds for any model


def test_the_empty_set_figures_of_randomized_name_their_class_geometry():
    """Review finding (s54 F4): the `randomized` docstring quoted 0.95% / 0.73% / 0.43%
    empty sets for "4 Gaussian classes" without the geometry; they hold for four class
    means on a square (with other geometries about 1-2%), as docs/methods/split.md says."""
    from pathlib import Path

    doc = " ".join(SplitConformalClassifier.__doc__.split())
    page = " ".join((Path(__file__).parents[1] / "docs/methods/split.md").read_text().split())
    assert "four fixed class means on a square" in page
    assert "make_gaussian_classification" in page
    assert "at accuracy 0.7 depending on the class geometry" in page
    # (review s64) the docstring quoted other figures for the same runs: it now points to
    # the page, which holds the one set of figures with its set-up
    assert "at accuracy 0.7, depending on the class geometry" in doc
    assert "docs/methods/split.md" in doc and "0.95%" not in doc


def test_ensemble_fit_with_fitted_heads_checks_x_and_y_and_says_it_trains_nothing():
    """clf review (stop 56): fit(X, y) with a list of fitted heads ignored X and y silently
    (n_heads and diversity unused), then calibrate refused the right X ("expecting 2"
    features, from fit's wrong X) or fit's own labels ("never saw during fit")."""
    from uqconform.classification import EnsembleConformalClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = np.argmax(X @ rng.normal(size=(3, 3)) + rng.normal(size=(600, 3)), axis=1)
    heads = [LogisticRegression(C=c).fit(X[:100], y[:100]) for c in (0.1, 1.0)]
    model = EnsembleConformalClassifier(heads, n_heads=7, random_state=0)
    with pytest.raises(ValueError, match=r"`X` has 2 features, but the fitted heads take 3"):
        model.fit(X[100:300, :2], y[100:300])
    with pytest.raises(ValueError, match=r"`y` holds labels .* never saw: \['a', 'b'\]"):
        model.fit(X[100:300], np.where(y[100:300] > 0, "a", "b"))
    with pytest.raises(ValueError, match=r"`y` holds booleans .*fit does not train"):
        model.fit(X[100:300], y[100:300] > 0)  # calibrate refuses them too (diffrev17)
    with pytest.warns(UserWarning, match=r"list of 2 fitted heads: fit trains nothing"):
        model.fit(X[100:300], y[100:300])
    model.calibrate(X[300:500], y[300:500])
    assert model.predict_set(X[500:]).shape == (100, 3)


def test_a_missing_value_in_a_nullable_probability_frame_is_named_by_row():
    """Review finding (s60 outfix 2): a model whose predict_proba returns a frame of nullable
    Float64 columns (labelled by class, in an order of its own) with a pd.NA gave numpy's
    bare "float() argument must be ... not 'NAType'" instead of the NaN message naming the
    row; without the NA the frame gives the array model's sets."""
    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=13, labels=(0, 1, 2))
    inner = LogisticRegression().fit(Xf, yf)

    class FrameModel:
        classes_ = np.arange(3)

        def __init__(self, hole, dtype="Float64"):
            self.hole, self.dtype = hole, dtype

        def predict_proba(self, X):
            frame = pd.DataFrame(inner.predict_proba(X), columns=[0, 1, 2])[[2, 0, 1]]
            frame = frame.astype(self.dtype)
            if self.hole:
                frame.iloc[3, 1] = pd.NA
            return frame

    reference = SplitConformalClassifier(inner).calibrate(Xc, yc).predict_set(Xt)
    sets = SplitConformalClassifier(FrameModel(False)).calibrate(Xc, yc).predict_set(Xt)
    np.testing.assert_array_equal(sets, reference)
    for dtype in ("Float64", object):  # pd.NA in an object column too
        cp = SplitConformalClassifier(FrameModel(True, dtype))
        with pytest.raises(
            ValueError,
            match=r"\(FrameModel\) predict_proba gave NaN or infinite probabilities on 1 row "
            r"of `X` \(first: row 3\)",
        ):
            cp.calibrate(Xc, yc)


def test_integer_labels_held_as_objects_train_as_integers():
    """Review s63: a Series of integers with dtype object got scikit-learn's "Unknown label
    type: unknown ... continuous values" from every classification wrapper (naming no
    argument), while the metrics read the same labels as integers."""
    import pandas as pd
    from sklearn.neighbors import KNeighborsClassifier

    from uqconform import (
        BinarizedSmoothedClassifier,
        ReliablePredictionSets,
        VennAbersCalibrator,
    )

    rng = np.random.default_rng(15)
    X = rng.normal(size=(300, 2))
    labels = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
    as_objects = pd.Series(labels, dtype=object)
    makers = [
        lambda: SplitConformalClassifier(LogisticRegression(), random_state=0),
        lambda: CrossConformalClassifier(LogisticRegression(), random_state=0),
        lambda: ReliablePredictionSets(KNeighborsClassifier(), k_train=2, k_calib=2),
        lambda: BinarizedSmoothedClassifier(LogisticRegression(), n_samples=60, random_state=0),
    ]
    for make in makers:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = make().fit(X[:200], labels[:200])
            model = make().fit(X[:200], as_objects[:200])
            if hasattr(model, "calibrate"):
                expected.calibrate(X[200:], labels[200:])
                model.calibrate(X[200:], as_objects[200:])
            assert model.classes_.dtype.kind == "i"
            np.testing.assert_array_equal(model.predict_set(X), expected.predict_set(X))
    binary = pd.Series((X[:, 0] > 0).astype(int), dtype=object)
    venn = VennAbersCalibrator(LogisticRegression()).fit(X[:200], binary[:200])
    venn.calibrate(X[200:], binary[200:])
    np.testing.assert_array_equal(venn.classes_, [0, 1])
    # labels in int64 against classes in uint64 (or the reverse) above 2**53: numpy compared
    # them as floats and refused calibration labels that are classes (diffrev47, stop 63)
    big = (2**60 + labels).astype(np.uint64)
    model = SplitConformalClassifier(LogisticRegression()).fit(X[:200], big[:200])
    assert model.classes_.dtype == np.uint64
    expected = model.calibrate(X[200:], big[200:]).predict_pvalue(X)
    for same in (big.astype(np.int64), pd.Series(big.astype(np.int64), dtype=object)):
        pvalues = model.calibrate(X[200:], same[200:]).predict_pvalue(X)
        np.testing.assert_array_equal(pvalues, expected)
    # booleans and whole floats held as objects train too; integers beyond int64 are named
    for objects in ((labels > 0).astype(object), labels.astype(float).astype(object)):
        expected = SplitConformalClassifier(LogisticRegression()).fit(X, objects.tolist())
        model = SplitConformalClassifier(LogisticRegression()).fit(X, objects)
        np.testing.assert_array_equal(model.classes_, expected.classes_)
    huge = np.array([2**64, 2**64 + 1] * 150, dtype=object)
    with pytest.raises(ValueError, match=r"`y` holds integers beyond the int64 and uint64"):
        SplitConformalClassifier(LogisticRegression()).fit(X, huge)
    from uqconform._validation import check_class_labels

    assert check_class_labels(huge, 300).dtype == object  # at calibrate: kept as given
    # (diffrev48) uint64 values held as objects train as uint64; integers mixed with floats
    # stay objects (2**53 + 1 has no float64: read as floats, rows paired wrongly); an
    # infinite label held as an object is named as a float64 one is
    assert check_class_labels(np.array([2**63 + 1, 2**63 + 2], dtype=object), 2).dtype == "u8"
    mixed = np.array([2**53 + 1, 2**53, float(2**53)], dtype=object)
    assert check_class_labels(mixed, 3).tolist() == [2**53 + 1, 2**53, 2**53]
    assert check_class_labels(mixed, 3).dtype == object
    with pytest.raises(ValueError, match=r"`y` contains infinite labels"):
        check_class_labels(np.array([0.0, np.inf, 1.0], dtype=object), 3, training=True)


def test_a_seed_changed_after_calibrate_is_refused_for_randomised_scores():
    """Review s65: the calibration's uniforms kept the old seed, so the sets matched no
    fresh model with the new one (111 of 2,000 rows differed for APS)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 3))
    y = (X[:, 0] + 0.7 * rng.normal(size=900) > 0).astype(int) + (X[:, 1] > 0.3)
    for score, randomized in (("aps", True), ("lac", True), ("aps", False)):
        model = SplitConformalClassifier(  # a seeded model: fit does not use the wrapper's
            LogisticRegression(random_state=1),
            conformity_score=score,
            randomized=randomized,
            random_state=0,
        )
        model.fit(X[:300], y[:300]).calibrate(X[300:600], y[300:600]).set_params(random_state=5)
        if score == "aps" and randomized:
            with pytest.raises(NotFittedError, match=r"it used random_state=0.*calibrate"):
                model.predict_set(X[600:])
        else:  # no draws at calibrate: the seed is free to change
            assert model.predict_set(X[600:]).shape == (300, 3)


def test_a_seed_changed_after_calibrate_is_refused_by_the_multi_dim_model():
    """Diff review 55: its calibration split draws with the seed, which was not recorded
    (101 of 400 rows then differed from a fresh model)."""
    from uqconform.classification import MultiDimScoreClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 3))
    y = (X[:, 0] + 0.7 * rng.normal(size=900) > 0).astype(int) + (X[:, 1] > 0.3)
    model = MultiDimScoreClassifier(LogisticRegression(), n_heads=3, random_state=0)
    model.fit(X[:300], y[:300]).calibrate(X[300:600], y[300:600]).set_params(random_state=5)
    with pytest.raises(NotFittedError, match=r"random_state=0.*calibrate"):
        model.predict_set(X[600:])
