"""Score objects: each score and its inverse agree; classification scores by definition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from uqconform.scores import (
    AbsoluteScore,
    APSScore,
    ClassificationScore,
    CQRScore,
    LACScore,
    NormalizedScore,
    RAPSScore,
    RegressionScore,
    SAPSScore,
    SignedResidualScore,
    TopKScore,
    get_classification_score,
    get_regression_score,
)
from uqconform.scores import classification as classification_scores

values = st.floats(-100, 100, allow_nan=False)


@settings(max_examples=80, deadline=None)
@given(
    arrays(np.float64, 20, elements=values),
    arrays(np.float64, 20, elements=values),
    arrays(np.float64, 20, elements=st.floats(0.01, 10)),
    st.floats(0, 50),
)
def test_symmetric_scores_invert_exactly(y, pred, difficulty, q):
    """``y`` lies in ``inverse(pred, q)`` iff ``score(y, pred) <= q`` (up to rounding)."""
    for score, d in ((AbsoluteScore(), None), (NormalizedScore(), difficulty)):
        s = score.score(y, pred, d)
        box = score.inverse(pred, np.full((20, 1), q), d)
        inside = (box[:, 0] <= y) & (y <= box[:, 1])
        clear = np.abs(s - q) > 1e-9 * (1 + np.abs(q))  # skip rounding-boundary cases
        np.testing.assert_array_equal(inside[clear], (s <= q)[clear])
        assert np.all(box[:, 0] <= box[:, 1])


@settings(max_examples=80, deadline=None)
@given(
    arrays(np.float64, 20, elements=values),
    arrays(np.float64, (20, 2), elements=values),
    st.floats(-5, 50),
    st.floats(-5, 50),
)
def test_cqr_score_inverts(y, band, q_low, q_high):
    band = np.sort(band, axis=1)
    symmetric = CQRScore()
    s = symmetric.score(y, band)
    box = symmetric.inverse(band, np.full((20, 1), q_low))
    inside = (box[:, 0] <= y) & (y <= box[:, 1])
    clear = np.abs(s - q_low) > 1e-9 * (1 + abs(q_low))
    np.testing.assert_array_equal(inside[clear], (s <= q_low)[clear])

    asymmetric = CQRScore(symmetric=False)
    sides = asymmetric.score(y, band)
    assert sides.shape == (20, 2) and asymmetric.n_components == 2
    box = asymmetric.inverse(band, np.tile([q_low, q_high], (20, 1)))
    inside = (box[:, 0] <= y) & (y <= box[:, 1])
    accepted = (sides[:, 0] <= q_low) & (sides[:, 1] <= q_high)
    clear = (np.abs(sides[:, 0] - q_low) > 1e-9 * (1 + abs(q_low))) & (
        np.abs(sides[:, 1] - q_high) > 1e-9 * (1 + abs(q_high))
    )
    np.testing.assert_array_equal(inside[clear], accepted[clear])


def _probabilities(n=50, k=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(k) * 0.7, size=n)


def test_lac_is_one_minus_probability():
    proba = _probabilities()
    np.testing.assert_allclose(LACScore().scores(proba), 1 - proba)


def test_aps_definition():
    proba = _probabilities()
    u = np.random.default_rng(1).uniform(size=len(proba))
    plain = APSScore(randomized=False).scores(proba)
    randomised = APSScore().scores(proba, u)
    for i in range(len(proba)):
        for j in range(proba.shape[1]):
            above = proba[i][proba[i] > proba[i, j]].sum()
            assert plain[i, j] == pytest.approx(above + proba[i, j])
            assert randomised[i, j] == pytest.approx(above + u[i] * proba[i, j])
    # u = 1 is the non-randomised score; the top label's plain score is its probability
    np.testing.assert_allclose(APSScore().scores(proba, np.ones(len(proba))), plain)
    np.testing.assert_allclose(plain.min(axis=1), proba.max(axis=1))


def test_raps_adds_rank_penalty_and_reduces_to_aps():
    proba = _probabilities(seed=2)
    u = np.random.default_rng(3).uniform(size=len(proba))
    np.testing.assert_allclose(
        RAPSScore(lambda_reg=0.0).scores(proba, u), APSScore().scores(proba, u)
    )
    ranks = TopKScore().scores(proba)
    expected = APSScore().scores(proba, u) + 0.3 * np.maximum(ranks - 2, 0)
    np.testing.assert_allclose(RAPSScore(k_reg=2, lambda_reg=0.3).scores(proba, u), expected)


def test_topk_ranks_are_a_permutation_ordered_by_probability():
    proba = _probabilities(seed=4)
    ranks = TopKScore().scores(proba)
    np.testing.assert_array_equal(np.sort(ranks, axis=1), np.tile(np.arange(1.0, 6), (50, 1)))
    order = np.argsort(ranks, axis=1)
    sorted_p = np.take_along_axis(proba, order, axis=1)
    assert np.all(np.diff(sorted_p, axis=1) <= 0)


def test_set_scores_of_non_randomised_aps_exclude_the_own_mass():
    proba = _probabilities(seed=6)
    plain = APSScore(randomized=False)
    np.testing.assert_allclose(plain.set_scores(proba), plain.scores(proba) - proba)
    assert np.all(plain.set_scores(proba).min(axis=1) == 0)  # the top label is always kept
    raps = RAPSScore(k_reg=0, lambda_reg=0.1, randomized=False)
    np.testing.assert_allclose(raps.set_scores(proba), raps.scores(proba) - proba)
    u = np.random.default_rng(7).uniform(size=len(proba))
    for score in (APSScore(), RAPSScore(), LACScore(), TopKScore()):
        np.testing.assert_array_equal(score.set_scores(proba, u), score.scores(proba, u))


def test_mass_ranked_above_equals_the_previous_labels_score_to_the_bit():
    """Leaf-count probabilities [6/7, 1/7]: the mass above label 1 is 6/7, the score of
    label 0; computed as 1 - 1/7 it was one ulp larger, so a calibration score of 6/7 no
    longer counted as reaching it (p-value 0.048 instead of 1 on 20 such rows)."""
    from uqconform import SplitConformalClassifier

    class Leaf:  # a fitted model whose probabilities are leaf counts
        classes_ = np.array([0, 1])

        def fit(self, X, y):
            return self

        def predict_proba(self, X):
            return np.tile([6 / 7, 1 / 7], (len(X), 1))

    proba = np.array([[6 / 7, 1 / 7]])
    for score in (APSScore(randomized=False), RAPSScore(randomized=False, lambda_reg=0.0)):
        inclusive, above = score.scores(proba), score.set_scores(proba)
        assert above[0, 1] == inclusive[0, 0]
    X, y = np.zeros((20, 1)), np.zeros(20, dtype=int)
    cp = SplitConformalClassifier(Leaf(), conformity_score="aps", randomized=False)
    assert cp.calibrate(X, y).predict_pvalue(X[:1])[0, 1] == 1.0


@pytest.mark.parametrize("score", [APSScore(randomized=False), RAPSScore(randomized=False)])
def test_cumulative_scores_increase_with_rank(score):
    proba = _probabilities(seed=5)
    order = np.argsort(-proba, axis=1, kind="stable")
    s = np.take_along_axis(score.scores(proba), order, axis=1)
    assert np.all(np.diff(s, axis=1) >= 0)


def test_resolvers():
    assert isinstance(get_regression_score("absolute"), AbsoluteScore)
    assert isinstance(get_regression_score("normalized"), NormalizedScore)
    mine = CQRScore(symmetric=False)
    assert get_regression_score(mine) is mine
    assert isinstance(get_classification_score("lac"), LACScore)
    assert get_classification_score("aps", randomized=False).randomized is False
    raps = get_classification_score("raps", k_reg=3, lambda_reg=0.5)
    assert (raps.k_reg, raps.lambda_reg) == (3, 0.5)
    assert isinstance(get_classification_score("topk"), TopKScore)
    top = TopKScore()
    assert get_classification_score(top) is top
    assert "RAPSScore" in repr(raps) and "symmetric=False" in repr(mine)


@pytest.mark.parametrize("name", ["abs", "lac", None, 3])
def test_unknown_regression_score_names_the_argument(name):
    with pytest.raises(ValueError, match="conformity_score"):
        get_regression_score(name)


@pytest.mark.parametrize("name", ["LAC", "absolute", None])
def test_unknown_classification_score_names_the_argument(name):
    with pytest.raises(ValueError, match="conformity_score"):
        get_classification_score(name)


def test_abstract_bases_need_both_functions():
    class Half(RegressionScore):
        def score(self, y, y_pred, difficulty=None):
            return y

    with pytest.raises(TypeError, match="abstract method inverse"):
        Half()
    with pytest.raises(TypeError, match="abstract method scores"):
        ClassificationScore()


@pytest.mark.parametrize(
    "score",
    [
        LACScore(),
        APSScore(),
        APSScore(randomized=False),
        RAPSScore(),
        SAPSScore(),
        SAPSScore(randomized=False),
        TopKScore(),
    ],
    ids=repr,
)
def test_label_scores_equal_the_label_column_of_scores(score):
    rng = np.random.default_rng(3)
    proba = rng.dirichlet(np.ones(6), size=200)
    labels = rng.integers(0, 6, size=200)
    u = rng.random(200)
    expected = score.scores(proba, u)[np.arange(200), labels]
    np.testing.assert_array_equal(score.label_scores(proba, labels, u), expected)


@pytest.mark.parametrize("score", [APSScore(), RAPSScore(), SAPSScore(), TopKScore()], ids=repr)
def test_label_scores_in_blocks_equal_one_block(score, monkeypatch):
    # calibration computes the scores block by block (bounded memory at 1e6 rows); blocks of
    # 7 rows (42 cells), the last one partial, must give the scores of one whole block
    rng = np.random.default_rng(4)
    proba = rng.dirichlet(np.ones(6), size=200)
    labels = rng.integers(0, 6, size=200)
    u = rng.random(200)
    expected = score.label_scores(proba, labels, u)
    monkeypatch.setattr(classification_scores, "_LABEL_SCORE_CELLS", 42)
    np.testing.assert_array_equal(score.label_scores(proba, labels, u), expected)


def test_tied_labels_are_ranked_in_column_order_on_every_machine():
    """numpy's default argsort orders ties as its (CPU-dependent) quicksort does, which
    made RAPS, SAPS and top-k scores of tied labels, and so a seed's sets, depend on the
    machine; tied labels now rank in column order."""
    proba = np.round(np.random.default_rng(0).random((200, 10)), 1)  # many ties
    ranks = TopKScore().scores(proba)
    order = np.argsort(-proba, axis=1, kind="stable")
    expected = np.empty_like(ranks)
    np.put_along_axis(expected, order, np.arange(1.0, 11.0)[None, :], axis=1)
    np.testing.assert_array_equal(ranks, expected)


def test_labels_of_probability_zero_tie_exactly_across_rows():
    """The cumulative mass of every label up to one of probability 0 is 1 in exact
    arithmetic; in floating point it is 1 - 1.1e-16 in one row and 1 in the next, and
    which calibration score counted against which test score was left to the last digit."""
    proba = np.array([[0.1, 0.2, 0.7, 0.0], [0.3, 0.3, 0.4, 0.0]])
    for score in (APSScore(randomized=False), RAPSScore(randomized=False)):
        zero_label = score.scores(proba)[:, 3]
        assert zero_label[0] == zero_label[1], score


@pytest.mark.parametrize(
    "score,name",
    [
        (RAPSScore(k_reg=-1), "RAPSScore.k_reg"),
        (RAPSScore(k_reg=2.5), "RAPSScore.k_reg"),
        (RAPSScore(lambda_reg=-5.0), "RAPSScore.lambda_reg"),
        (SAPSScore(weight=-1.0), "SAPSScore.weight"),
        (SAPSScore(weight=float("nan")), "SAPSScore.weight"),
        (APSScore(randomized="no"), "APSScore.randomized"),  # a string is not read as True
        (RAPSScore(randomized=None), "RAPSScore.randomized"),
    ],
)
def test_score_objects_with_impossible_settings_are_refused_by_the_wrappers(score, name):
    # the string route refused these; an object given as conformity_score ran with them
    from sklearn.datasets import load_iris

    from uqconform import SplitConformalClassifier

    X, y = load_iris(return_X_y=True)
    cp = SplitConformalClassifier(conformity_score=score, random_state=0)
    with pytest.raises(ValueError, match=rf"`{name}` must be"):
        cp.fit(X[::2], y[::2]).calibrate(X[1::2], y[1::2])


def test_regression_score_settings_are_checked_and_followed_when_set_later():
    with pytest.raises(ValueError, match=r"`CQRScore\.symmetric` must be True or False"):
        get_regression_score(CQRScore(symmetric="no"))
    with pytest.raises(ValueError, match=r"`SignedResidualScore\.normalized` must be"):
        get_regression_score(SignedResidualScore(normalized=1))
    score = CQRScore()
    score.symmetric = False  # two sides, two thresholds
    assert score.n_components == 2
    signed = SignedResidualScore()
    signed.normalized = True
    assert signed.needs_difficulty


# ---- direct calls: inputs checked by one shared check --------------------------------------
_P3 = np.array([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1], [0.25, 0.25, 0.5]])
_U3 = np.array([0.5, 0.25, 1.0])
_LABELS3 = np.array([2, 0, 1])
_EVERY_SCORE = [
    LACScore(),
    APSScore(),
    APSScore(randomized=False),
    RAPSScore(),
    RAPSScore(randomized=False),
    SAPSScore(),
    SAPSScore(randomized=False),
    TopKScore(),
]
_RANDOMISED = [APSScore(), RAPSScore(k_reg=0, lambda_reg=0.1), SAPSScore(weight=0.5)]


def _call(score, method, proba, u, labels=_LABELS3):
    if method == "label_scores":
        return score.label_scores(proba, labels, u)
    return getattr(score, method)(proba, u)


@pytest.mark.parametrize("method", ["scores", "set_scores", "label_scores"])
@pytest.mark.parametrize("score", _RANDOMISED, ids=repr)
def test_randomised_scores_without_u_are_refused_naming_u(score, method):
    """Review finding: a randomised APS, RAPS or SAPS score called directly without ``u``
    raised ``TypeError: 'NoneType' object is not subscriptable``; it now says that ``u`` is
    missing and how to draw it."""
    with pytest.raises(ValueError, match=r"`u` is missing: .*u = rng\.uniform\(size=3\)"):
        _call(score, method, _P3, None)


@pytest.mark.parametrize("method", ["scores", "set_scores", "label_scores"])
@pytest.mark.parametrize("score", _RANDOMISED, ids=repr)
@pytest.mark.parametrize(
    "u,message",
    [
        (np.array([0.5]), r"shape \(3,\), got shape \(1,\).*u = rng\.uniform\(size=3\)"),
        (np.array([0.5, 0.2]), r"shape \(3,\), got shape \(2,\)"),
        (np.array([0.5, 0.2, 0.1, 0.3]), r"shape \(3,\), got shape \(4,\)"),
        (np.full((3, 1), 0.5), r"shape \(3,\), got shape \(3, 1\)"),
        (np.array(["a", "b", "c"]), r"shape \(3,\), got shape \(3,\) and dtype <U1"),
        (np.array([0.5, 1.5, 0.2]), r"in \[0, 1\].*got 1\.5 at row 1"),
        (np.array([0.5, 0.2, -0.1]), r"in \[0, 1\].*got -0\.1 at row 2"),
        (np.array([np.nan, 0.2, 0.1]), r"in \[0, 1\].*got nan at row 0"),
    ],
    ids=["one draw", "short", "long", "2-D", "text", "above 1", "below 0", "NaN"],
)
def test_u_not_one_draw_in_0_1_per_row_is_refused(score, method, u, message):
    """Review finding: ``u`` of length 1 was broadcast to every row (one draw shared by
    all rows, silently), ``u`` of another length failed with numpy's broadcast error, and
    values outside [0, 1] were used; each is now refused naming ``u``."""
    with pytest.raises(ValueError, match=rf"`u` must .*{message}"):
        _call(score, method, _P3, u)


@pytest.mark.parametrize("method", ["scores", "set_scores", "label_scores"])
@pytest.mark.parametrize("score", _EVERY_SCORE, ids=repr)
@pytest.mark.parametrize(
    "proba,message",
    [
        (np.array([0.2, 0.8, 0.0]), r"got shape \(3,\) and dtype float64 \(one row: pass"),
        (np.ones((3, 3, 1)) / 3, r"got shape \(3, 3, 1\)"),
        (np.array([["a", "b", "c"]] * 3), r"got shape \(3, 3\) and dtype <U1"),
        (np.ones((3, 3), dtype=bool), r"got shape \(3, 3\) and dtype bool"),
    ],
    ids=["1-D", "3-D", "text", "bool"],
)
def test_proba_not_a_2d_array_of_numbers_is_refused(score, method, proba, message):
    """Review finding: a 1-D ``proba`` given to a score failed with numpy's AxisError (or
    was read as something else); every score of the module now refuses it naming
    ``proba`` and the shape it got."""
    with pytest.raises(ValueError, match=rf"`proba` must be a 2-D array of numbers.*{message}"):
        _call(score, method, proba, _U3)


@pytest.mark.parametrize("score", _EVERY_SCORE, ids=repr)
def test_labels_are_read_with_asarray_and_checked_as_column_indices(score):
    """Review finding: ``LACScore().label_scores(P, [1, 0])`` failed with ``TypeError: list
    indices must be integers``, and a label out of range failed with numpy's IndexError
    (or, negative, scored another column silently). A list now gives the numbers of an
    array; labels that are not integer column indices, one per row, are refused."""
    expected = score.label_scores(_P3, _LABELS3, _U3)
    np.testing.assert_array_equal(score.label_scores(_P3, _LABELS3.tolist(), _U3), expected)
    wrong = [
        (np.array([2, 0, 5]), r"in \[0, 3\), got 5 at row 2"),
        (np.array([2, -1, 0]), r"in \[0, 3\), got -1 at row 1"),
        (np.array([2.0, 0.0, 1.0]), r"integer column indices.*dtype float64"),
        (np.array([True, False, True]), r"integer column indices.*dtype bool"),
        (np.array([2, 0]), r"one per row \(shape \(3,\)\), got shape \(2,\)"),
        (np.array([[2], [0], [1]]), r"got shape \(3, 1\)"),
    ]
    for labels, message in wrong:
        with pytest.raises(ValueError, match=rf"`labels` must be .*{message}"):
            score.label_scores(_P3, labels, _U3)


@pytest.mark.parametrize("method", ["scores", "set_scores", "label_scores"])
@pytest.mark.parametrize(
    "score,name",
    [
        (APSScore(randomized="no"), "APSScore.randomized"),  # was read as True
        (RAPSScore(randomized=None), "RAPSScore.randomized"),
        (RAPSScore(k_reg=-1), "RAPSScore.k_reg"),
        (RAPSScore(lambda_reg=-5.0), "RAPSScore.lambda_reg"),
        (SAPSScore(randomized=1), "SAPSScore.randomized"),
        (SAPSScore(weight=float("nan")), "SAPSScore.weight"),
    ],
    ids=repr,
)
def test_impossible_settings_are_refused_when_a_score_is_called_directly(score, method, name):
    """Review finding: ``APSScore(randomized="no")`` called directly scored as randomised
    (its settings were checked only inside the wrappers); the score's own methods now
    check them at each use, naming the setting. Construction still accepts them, so a
    wrapper holding such a score clones and gives its parameters as scikit-learn expects
    and refuses the score at ``calibrate``."""
    from sklearn.base import clone

    from uqconform import SplitConformalClassifier

    cp = SplitConformalClassifier(conformity_score=score)
    assert clone(cp).get_params()["conformity_score"].__dict__ == score.__dict__
    with pytest.raises(ValueError, match=rf"`{name}` must be"):
        _call(score, method, _P3, _U3)


def test_a_setting_changed_in_place_is_checked_at_the_next_call():
    """Review finding: settings were checked only by the wrappers; a score called directly
    after ``score.randomized = "no"`` went on as randomised. Each call checks them."""
    score = APSScore()
    score.scores(_P3, _U3)
    score.randomized = "no"
    with pytest.raises(ValueError, match=r"`APSScore\.randomized` must be True or False"):
        score.scores(_P3, _U3)


def test_valid_direct_calls_give_the_numbers_of_before():
    """Review finding: the checks added to direct calls must not change a valid call's
    numbers: these are the values of the scores before the checks, to the bit. Arrays
    of another kind (lists) give the same numbers; a score that is not randomised ignores
    ``u``; one row takes a ``u`` of length 1, as the docstrings show."""
    aps, raps = APSScore(), RAPSScore(k_reg=1, lambda_reg=0.1, randomized=False)
    saps = SAPSScore(weight=0.5)
    third, two_thirds = 0.15000000000000002, 0.6749999999999999
    expected_aps = [[0.9, 0.25, 0.65], [third, two_thirds, 0.925], [0.75, 1.0, 0.5]]
    np.testing.assert_array_equal(aps.scores(_P3, _U3), expected_aps)
    np.testing.assert_array_equal(aps.set_scores(_P3, _U3), expected_aps)
    np.testing.assert_array_equal(aps.label_scores(_P3, _LABELS3, _U3), [0.65, third, 1.0])
    expected_raps = [[1.2, 0.5, 0.9], [0.6, 0.9999999999999999, 1.2], [0.85, 1.2, 0.5]]
    np.testing.assert_array_equal(raps.scores(_P3), expected_raps)
    np.testing.assert_array_equal(raps.scores(_P3, _U3), expected_raps)  # u not read
    np.testing.assert_array_equal(
        raps.set_scores(_P3), [[1.0, 0.0, 0.6], [0.0, 0.7, 1.0999999999999999], [0.6, 0.95, 0.0]]
    )
    np.testing.assert_array_equal(raps.label_scores(_P3, _LABELS3), [0.9, 0.6, 1.2])
    expected_saps = [[1.25, 0.25, 0.75], [0.15, 0.725, 1.225], [1.0, 1.5, 0.5]]
    np.testing.assert_array_equal(saps.scores(_P3, _U3), expected_saps)
    np.testing.assert_array_equal(saps.label_scores(_P3, _LABELS3, _U3), [0.75, 0.15, 1.5])
    np.testing.assert_array_equal(
        SAPSScore(weight=0.5, randomized=False).set_scores(_P3),
        [[1.5, 0.0, 1.0], [0.0, 1.1, 1.6], [1.0, 1.5, 0.0]],
    )
    np.testing.assert_array_equal(TopKScore().label_scores(_P3, _LABELS3), [2.0, 1.0, 3.0])
    np.testing.assert_array_equal(LACScore().label_scores(_P3, _LABELS3), [0.7, 0.4, 0.75])
    np.testing.assert_array_equal(
        aps.scores(np.array([[0.2, 0.5, 0.3]]), np.array([0.5])), [[0.9, 0.25, 0.65]]
    )
    integer_draws = aps.scores(_P3, np.array([0, 1, 1]))  # integers are numbers in [0, 1]
    expected_integer = [[0.8, 0.0, 0.5], [0.6, 0.8999999999999999, 1.0], [0.75, 1.0, 0.5]]
    np.testing.assert_array_equal(integer_draws, expected_integer)
    for score in _EVERY_SCORE:  # lists give the numbers of arrays
        np.testing.assert_array_equal(
            score.set_scores(_P3.tolist(), _U3.tolist()), score.set_scores(_P3, _U3)
        )


def test_a_saps_weight_of_zero_is_refused_with_what_it_would_do():
    """clf review (stop 56): weight 0 was accepted, and every label below the top scored
    the top probability: sets of the top label alone or of every label."""
    from uqconform.scores.classification import get_classification_score

    with pytest.raises(ValueError, match=r"`SAPSScore.weight` must be > 0, got 0: .*alone"):
        SAPSScore(weight=0).check_settings()
    with pytest.raises(ValueError, match=r"`saps_weight` must be > 0, got 0"):
        get_classification_score("saps", saps_weight=0.0)
    SAPSScore(weight=1e-3).check_settings()  # small but positive: the user's choice


def test_a_wrapper_setting_that_agrees_with_the_score_object_is_not_refused():
    """clf review (stop 56): APSScore(False) with randomized=False was refused as "would be
    ignored", though both say the same; a setting that differs is still refused."""
    from uqconform.scores.classification import get_classification_score

    assert get_classification_score(APSScore(False), randomized=False).randomized is False
    assert get_classification_score(RAPSScore(k_reg=2), k_reg=2).k_reg == 2
    with pytest.raises(ValueError, match=r"k_reg=3 would be ignored"):
        get_classification_score(RAPSScore(k_reg=2), k_reg=3)
    with pytest.raises(ValueError, match=r"randomized=False would be ignored"):
        get_classification_score(APSScore(True), randomized=False)
