"""The single conformal quantile: ranks, conventions, weights, levels, invariants."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from uqconform.quantiles import (
    check_alpha,
    check_call_alpha,
    check_single_alpha,
    conformal_quantile,
    conformal_rank,
    count_text,
    effective_sample_size,
    minimum_scores,
    weighted_quantile,
)

finite_scores = arrays(
    np.float64,
    st.integers(1, 60),
    elements=st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
)
levels = st.floats(0.01, 0.99)


@pytest.mark.parametrize("n", [1, 9, 19, 99, 100, 1000])
@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1, 0.2, 0.5, 0.9])
def test_rank_is_ceil_n_plus_one_times_one_minus_alpha(n, alpha):
    # exact rational arithmetic for the reference, so 90.00000000000001 is not an issue
    from fractions import Fraction

    expected = math.ceil((n + 1) * (1 - Fraction(str(alpha))))
    assert conformal_rank(n, alpha)[0] == expected
    assert conformal_rank(n, alpha, kind="conformity")[0] == math.floor(
        (n + 1) * Fraction(str(alpha))
    )


@pytest.mark.parametrize("n,alpha", [(99, 0.1), (19, 0.05), (200, 0.2), (50, 0.3), (7, 0.5)])
def test_threshold_is_the_rank_th_smallest_score(n, alpha):
    rng = np.random.default_rng(n)
    scores = rng.normal(size=n)
    k = conformal_rank(n, alpha)[0]
    assert conformal_quantile(scores, alpha)[0] == np.sort(scores)[k - 1]
    # exactly k of the n scores are <= the threshold (no ties)
    assert (scores <= conformal_quantile(scores, alpha)[0]).sum() == k


def _large_score_arrays():
    """Score arrays above the bracketed-selection size, including orders that defeat a
    strided sample (sorted, reversed, period of the stride) and heavy ties / infinities."""
    rng = np.random.default_rng(0)
    n = 30_011
    normal = rng.normal(size=n)
    periodic = np.tile(np.r_[np.full(1, 100.0), np.zeros(15)], n // 16 + 1)[:n]
    ties = rng.integers(0, 3, size=n).astype(float)
    with_inf = normal.copy()
    with_inf[rng.choice(n, 5_000, replace=False)] = np.inf
    return {
        "normal": normal,
        "sorted": np.sort(normal),
        "reversed": np.sort(normal)[::-1].copy(),
        "stride-periodic": periodic,
        "three values": ties,
        "infinities": with_inf,
    }


@pytest.mark.parametrize("name", list(_large_score_arrays()))
@pytest.mark.parametrize("alphas", [[0.1], [0.001, 0.5, 0.999], [0.2, 0.2000001], [0.3, 0.6]])
def test_large_score_arrays_give_the_exact_order_statistic(name, alphas):
    scores = _large_score_arrays()[name]
    ranks = conformal_rank(scores.size, alphas)
    expected = np.sort(scores)[ranks - 1]
    np.testing.assert_array_equal(conformal_quantile(scores, alphas), expected)
    np.testing.assert_array_equal(
        conformal_quantile(scores, alphas, kind="conformity"),
        np.sort(scores)[conformal_rank(scores.size, alphas, kind="conformity") - 1],
    )


def test_too_few_scores_gives_inf_and_warns():
    scores = np.arange(8.0)  # alpha=0.1 needs n >= 9
    with pytest.warns(UserWarning, match="too few"):
        assert conformal_quantile(scores, 0.1)[0] == np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert conformal_quantile(np.arange(9.0), 0.1)[0] == 8.0  # rank 9 of 9: finite
        assert conformal_quantile(scores, 0.1, warn=False)[0] == np.inf


def test_empty_scores_give_inf():
    with pytest.warns(UserWarning, match=r"Only 0 scores.*alpha=0\.5 \(at least 1 are"):
        assert conformal_quantile(np.array([]), 0.5)[0] == np.inf


@pytest.mark.parametrize("n", [1, 19, 99, 10_000])
def test_levels_a_hair_from_0_or_1_keep_ranks_exact_arithmetic_gives(n):
    """Review finding: the rank tolerance carried alpha = 1 - 1e-11 to the conformity rank
    n + 1 (exact: n) and alpha = 1 - 1e-15 to the nonconformity rank 0 (exact: 1): CV+
    and J+aB raised numpy's "kth out of bounds", full CP returned empty sets."""
    near_one = [1 - 1e-11, 1 - 1e-15, np.nextafter(1.0, 0.0)]
    near_zero = [1e-15, 5e-324]
    assert conformal_rank(n, near_one).tolist() == [1, 1, 1]
    assert conformal_rank(n, near_one, kind="conformity").tolist() == [n, n, n]
    assert conformal_rank(n, near_zero).tolist() == [n + 1, n + 1]
    assert conformal_rank(n, near_zero, kind="conformity").tolist() == [0, 0]


def test_cross_and_full_predict_at_a_level_a_hair_below_one():
    from sklearn.linear_model import LinearRegression, Ridge

    from uqconform.regression import (
        CrossConformalRegressor,
        FullConformalRidge,
        JackknifeAfterBootstrapRegressor,
    )

    rng = np.random.default_rng(0)
    X = rng.normal(size=(99, 2))
    y = X[:, 0] + rng.normal(size=99)
    for model in (
        CrossConformalRegressor(LinearRegression(), random_state=0),
        JackknifeAfterBootstrapRegressor(LinearRegression(), random_state=0),
        FullConformalRidge(Ridge()),
    ):
        model.fit(X, y)
        wide, narrow = model.predict_interval(X[:3], alpha=[0.5, 1 - 1e-11]).transpose(2, 0, 1)
        assert np.isfinite(narrow).all() and np.all(narrow[:, 0] <= narrow[:, 1])
        assert np.all(wide[:, 0] <= narrow[:, 0]) and np.all(narrow[:, 1] <= wide[:, 1])


def test_conformity_convention_is_floor_rank_and_negation():
    rng = np.random.default_rng(1)
    scores = rng.uniform(size=49)
    for alpha in (0.02, 0.1, 0.3):
        k = math.floor(50 * alpha + 1e-12)
        expected = np.sort(scores)[k - 1]
        assert conformal_quantile(scores, alpha, kind="conformity")[0] == expected
        assert (
            conformal_quantile(scores, alpha, kind="conformity")[0]
            == -conformal_quantile(-scores, alpha)[0]
        )
    # floor(50 * 0.01) = 0: rank 0 needs at least 1 / 0.01 - 1 = 99 scores
    with pytest.warns(UserWarning, match=r"Only 49 scores.*alpha=0\.01 \(at least 99 are"):
        assert conformal_quantile(scores, 0.01, kind="conformity")[0] == -np.inf


def test_alpha_float_and_singleton_list_are_identical():
    scores = np.random.default_rng(2).exponential(size=123)
    for alpha in (0.05, 0.1, 0.37):
        np.testing.assert_array_equal(
            conformal_quantile(scores, alpha), conformal_quantile(scores, [alpha])
        )
    several = conformal_quantile(scores, [0.05, 0.1, 0.37])
    singles = [conformal_quantile(scores, a)[0] for a in (0.05, 0.1, 0.37)]
    np.testing.assert_array_equal(several, singles)


@settings(max_examples=100, deadline=None)
@given(finite_scores, st.lists(levels, min_size=1, max_size=4))
def test_unit_weights_equal_unweighted(scores, alphas):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        np.testing.assert_array_equal(
            conformal_quantile(scores, alphas, weights=np.ones(scores.size)),
            conformal_quantile(scores, alphas),
        )
        np.testing.assert_array_equal(
            conformal_quantile(scores, alphas, kind="conformity", weights=np.ones(scores.size)),
            conformal_quantile(scores, alphas, kind="conformity"),
        )


def test_zero_weights_drop_points_and_2d_weights_are_rowwise():
    rng = np.random.default_rng(3)
    scores = rng.normal(size=40)
    weights = np.stack([np.ones(40), np.r_[np.ones(20), np.zeros(20)], rng.uniform(size=40)])
    alphas = [0.1, 0.25]
    table = conformal_quantile(scores, alphas, weights=weights)
    assert table.shape == (3, 2)
    for row in range(3):
        np.testing.assert_array_equal(
            table[row], conformal_quantile(scores, alphas, weights=weights[row])
        )
    np.testing.assert_array_equal(table[1], conformal_quantile(scores[:20], alphas))
    np.testing.assert_array_equal(table[0], conformal_quantile(scores, alphas))


def test_weighted_threshold_by_hand_and_test_weight():
    scores = np.array([3.0, 1.0, 2.0, 4.0])
    weights = np.array([1.0, 2.0, 1.0, 1.0])
    # sorted 1 (w2), 2 (w1), 3 (w1), 4 (w1), +inf (w_test=1): total 6
    # cumulative 2/6, 3/6, 4/6, 5/6, 1 -> 1 - alpha = 0.5 reached at 2.0
    assert conformal_quantile(scores, 0.5, weights=weights)[0] == 2.0
    assert conformal_quantile(scores, 1 / 3, weights=weights)[0] == 3.0
    # a heavy test point pushes the threshold to +inf
    # (its share, 10 / 15, is named: the warning is about weight mass, not the score count)
    share = r"alpha=0\.2: the test point carries 0\.667 of the total weight"
    with pytest.warns(UserWarning, match=share):
        assert conformal_quantile(scores, 0.2, weights=weights, test_weight=10.0)[0] == np.inf
    rows = r"carries 0\.667 of the total weight \(1 of 2 rows of `weights`\)"
    with pytest.warns(UserWarning, match=rows):
        conformal_quantile(scores, 0.2, weights=[weights, 10 * weights], test_weight=10.0)


def test_infinite_test_weight_gives_the_whole_space_for_its_row_only():
    # the wrappers accept an infinite density ratio (a test point off the calibration
    # support); the quantile must agree instead of refusing it
    scores = np.array([3.0, 1.0, 2.0, 4.0])
    weights = np.ones((2, 4))
    with pytest.warns(UserWarning, match=r"carries 1 of the total weight \(1 of 2 rows"):
        thresholds = conformal_quantile(scores, 0.5, weights=weights, test_weight=[np.inf, 1.0])
    assert thresholds[0, 0] == np.inf
    assert thresholds[1, 0] == conformal_quantile(scores, 0.5)[0]
    for bad in (np.nan, -1.0):
        with pytest.raises(ValueError, match="test_weight"):
            conformal_quantile(scores, 0.5, weights=weights[0], test_weight=bad)
    # a 2-D test weight beside 1-D weights: one entry per test row, not "per row of weights"
    with pytest.raises(ValueError, match=r"one entry per test row \(1-D\), got shape \(1, 1\)"):
        conformal_quantile(scores, 0.5, weights=weights[0], test_weight=[[1.0]])
    with pytest.raises(
        ValueError, match=r"one entry per row of `weights` \(2\), got shape \(3,\)"
    ):
        conformal_quantile(scores, 0.5, weights=weights, test_weight=[1.0, 1.0, 1.0])


@pytest.mark.parametrize("n", [7, 3000])  # 3000 scores: the test rows go in several chunks
def test_shared_weights_with_one_test_weight_per_row_equal_repeated_weights(n):
    # covariate-shift CP: the calibration weights are w(x_i) for every test point, and each
    # test point brings its own w(x); repeating the weights per row gives the same numbers
    rng = np.random.default_rng(n)
    scores, weights = rng.normal(size=n), rng.exponential(size=n)
    test_weights = rng.exponential(size=800) * 3
    test_weights[[3, 4]] = np.inf, 0.0
    before = test_weights.copy()
    with pytest.warns(UserWarning, match=r" of 800 rows of `test_weight`\)"):
        shared = conformal_quantile(scores, [0.1, 0.3], weights=weights, test_weight=test_weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the infinite row, warned about above
        repeated = conformal_quantile(
            scores, [0.1, 0.3], weights=np.tile(weights, (800, 1)), test_weight=test_weights
        )
        conformity = conformal_quantile(
            scores, 0.2, kind="conformity", weights=weights, test_weight=test_weights
        )
        one_by_one = [
            conformal_quantile(scores, [0.1, 0.3], weights=weights, test_weight=test_weights[i])
            for i in (0, 3, 4, 799)
        ]
    np.testing.assert_array_equal(shared, repeated)
    np.testing.assert_array_equal(shared[[0, 3, 4, 799]], np.array(one_by_one))
    assert shared.shape == (800, 2) and conformity.shape == (800, 1)
    assert np.isinf(shared[3]).all() and np.isinf(conformity[3]).all()
    np.testing.assert_array_equal(test_weights, before)  # the caller's array is untouched


@pytest.mark.parametrize(
    "weights,match",
    [([1.0, -1.0, 1.0], "non-negative"), ([1.0, np.nan, 1.0], "finite"), ([1.0, 1.0], "shape")],
)
def test_bad_weights(weights, match):
    with pytest.raises(ValueError, match=match):
        conformal_quantile([1.0, 2.0, 3.0], 0.5, weights=weights)


@pytest.mark.parametrize(
    "weights,match",
    [
        (["a", "b", "c"], r"`weights` must be real numbers, got \['a', 'b', 'c'\]"),
        ([1, 1j, 1], r"`weights` holds complex numbers"),
        ([[1, 1, 1], [1, 1]], r"`weights` holds rows of different lengths"),
        ([1, None, 1], r"`weights` has missing entries"),
        ([True, False, True], r"`weights` must be real numbers.*astype\(float\)"),
    ],
)
@pytest.mark.parametrize("function", ["conformal_quantile", "weighted_quantile"])
def test_weights_that_are_not_real_numbers_are_named(weights, match, function):
    """Shift review (stop 59): non-numeric, complex or ragged `weights` got numpy's messages
    ("could not convert string to float", "float() argument must be ... not 'complex'",
    "inhomogeneous shape") from both functions; they are read as `test_weight` is."""
    scores = [0.1, 0.5, 0.9]
    with pytest.raises(ValueError, match=match):
        if function == "conformal_quantile":
            conformal_quantile(scores, 0.1, weights=weights)
        else:
            weighted_quantile(scores, weights, 0.5)


def test_weighted_thresholds_one_test_row_tiny_weights_and_rows_without_weight():
    """shift review: a 1-D `test_weight` of one entry gives one row of thresholds (it gave
    the levels alone); weights of 5e-324 give the thresholds of unit weights (they were
    summed on the subnormal grid: one score too low); a row whose weights and test weight
    are all zero gets the whole space with a warning naming it (the whole call raised)."""
    scores = np.arange(1.0, 10.0)
    one = conformal_quantile(scores, [0.15, 0.25], weights=np.ones(9), test_weight=[1.0])
    assert one.shape == (1, 2)
    np.testing.assert_array_equal(one[0], conformal_quantile(scores, [0.15, 0.25]))
    for alpha in (0.05, 0.15, 0.25, 0.35):
        tiny = np.full(9, 5e-324)
        np.testing.assert_array_equal(
            conformal_quantile(scores, alpha, weights=tiny, test_weight=5e-324),
            conformal_quantile(scores, alpha, weights=np.ones(9), warn=False),
        )
    for weights, test_weight in (
        ([0.0, 0.0, 0.0], [0.0, 1.0]),
        ([[0.0] * 3, [1.0] * 3], [0.0, 1.0]),
    ):
        with pytest.warns(UserWarning, match=r"sum to zero \(1 of 2 rows"):
            rows = conformal_quantile(
                [1.0, 2.0, 3.0], 0.5, weights=weights, test_weight=test_weight
            )
        assert np.isinf(rows[0]).all()
    # no calibration weight and a test weight so small that its share of the level
    # underflowed: the test point still carries all the weight (regr review: 0.3)
    with pytest.warns(UserWarning, match="too little mass"):
        lone = conformal_quantile([0.3, 0.7, 1.2], 0.5, weights=np.zeros(3), test_weight=5e-324)
    assert np.isinf(lone).all()
    with pytest.warns(UserWarning, match="sum to zero: no threshold"):
        assert np.isinf(
            conformal_quantile([1.0, 2.0], 0.5, weights=[0.0, 0.0], test_weight=0.0)
        ).all()


@pytest.mark.parametrize("alpha", [0, 1, -0.1, 1.5, np.nan, [0.1, 1.0], [0.1, np.nan]])
def test_alpha_outside_unit_interval_is_rejected(alpha):
    with pytest.raises(ValueError, match="alpha"):
        check_alpha(alpha)
    with pytest.raises(ValueError, match="alpha"):
        conformal_quantile([1.0, 2.0], alpha)


@pytest.mark.parametrize(
    "alpha",
    ["0.1", None, True, {"a": 1}, object(), ["0.1"], [True], [0.1, "0.2"], np.ma.array([0.1])],
)
def test_alpha_of_wrong_type_is_rejected(alpha):
    # numeric text is text inside a list too (["0.1"] was read as 0.1 before)
    with pytest.raises(TypeError, match="alpha"):
        check_alpha(alpha)


def test_targets_passed_as_alpha_get_a_short_message_that_says_so():
    """Targets passed where a prediction call takes alpha: the message listed every
    value (over 1,000 characters for 142 rows) and did not say what went wrong."""
    targets = np.linspace(1.5, 100.0, 200)
    with pytest.raises(ValueError) as caught:
        check_call_alpha(targets, 0.1)
    text = str(caught.value)
    assert len(text) < 300, text
    assert "and 195 more, of 200 levels" in text and "were targets passed" in text
    with pytest.raises(ValueError) as caught:  # a few levels: no guess about targets
        check_call_alpha([0.1, 1.5], 0.1)
    assert "targets" not in str(caught.value) and "[1.5]" in str(caught.value)


def test_functions_of_one_level_share_one_check_and_one_message():
    """The "one level only" refusal was written five times with four wordings (and the
    risk p-value's showed a 200-entry array whole); a single number out of range read as a
    list ("got [1.5]")."""
    from uqconform.classification.risk import hoeffding_bentkus_pvalue
    from uqconform.classification.rps import majority_threshold
    from uqconform.evaluation import coverage_count_pmf

    assert check_single_alpha(0.25) == 0.25 and isinstance(check_single_alpha(0.25), float)
    assert check_single_alpha([0.25]) == 0.25  # one level in a list is that level
    calls = {
        "minimum_scores": lambda a: minimum_scores(a),
        "coverage_count_pmf": lambda a: coverage_count_pmf(19, a, 10),
        "hoeffding_bentkus_pvalue": lambda a: hoeffding_bentkus_pvalue(0.1, 100, a),
        "majority_threshold": lambda a: majority_threshold(5, a),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=r"^`alpha` must be a single level in \(0, 1\) here"):
            call(np.full(200, 0.1))
        with pytest.raises(ValueError) as caught:
            call(np.full(200, 0.1))
        assert len(str(caught.value)) < 200, name
        with pytest.raises(ValueError, match=r"between 0 and 1 .*; got 1\.5\.$"):
            call(1.5)
    with pytest.raises(ValueError, match=r"between 0 and 1 .*; got \[1\.5\]\.$"):
        check_alpha([0.1, 1.5])  # a sequence keeps its list
    for name, call in calls.items():  # one level in a list, a tuple or a Series: that level
        for one in ([0.2], (0.2,), pd.Series([0.2]), np.float64(0.2), np.array(0.2)):
            np.testing.assert_array_equal(call(one), call(0.2), err_msg=name)


def test_targets_passed_as_alpha_on_few_rows_get_the_hint_when_they_cannot_be_levels():
    """On 10 rows or fewer the hint was never given (user review): text labels or numbers
    outside (0, 1), one per row of `X`, are targets passed where `alpha` goes; numbers in
    (0, 1) stay levels (they may be meant as such)."""
    X = np.zeros((5, 2))
    hint = "were targets passed there"
    with pytest.raises(TypeError, match=hint):
        check_call_alpha(np.array(["a", "b", "a", "b", "a"]), 0.1, X)
    with pytest.raises(ValueError, match=hint):
        check_call_alpha(np.arange(1.0, 6.0), 0.1, X)
    with pytest.raises(ValueError) as caught:  # not one per row: no guess
        check_call_alpha([0.1, 2.0], 0.1, X)
    assert hint not in str(caught.value)
    assert check_call_alpha(np.full(5, 0.1), 0.1, X).size == 5
    with pytest.raises(TypeError) as caught:  # a long text array is summarised
        check_call_alpha(np.array(["label"] * 200), 0.1, np.zeros((150, 1)))
    assert len(str(caught.value)) < 300 and hint in str(caught.value)


def test_alpha_shape_errors_name_argument():
    with pytest.raises(ValueError, match="level"):
        check_alpha([[0.1, 0.2]], name="level")
    with pytest.raises(ValueError, match=r"alpha.*empty"):
        check_alpha([])


def test_bad_scores_and_kind():
    with pytest.raises(ValueError, match="NaN"):
        conformal_quantile([1.0, np.nan], 0.5)
    with pytest.raises(ValueError, match="1-D"):
        conformal_quantile(np.ones((2, 2)), 0.5)
    with pytest.raises(ValueError, match="kind"):
        conformal_quantile([1.0], 0.5, kind="other")
    with pytest.raises(ValueError, match="kind"):
        conformal_rank(3, 0.5, kind="other")


def test_weighted_quantile_at_zero_is_the_smallest_value_of_positive_weight():
    values, weights = [-100.0, 1.0, 2.0, 3.0], [0.0, 1.0, 1.0, 1.0]
    np.testing.assert_array_equal(weighted_quantile(values, weights, [0.0, 1e-12]), [1.0, 1.0])
    assert weighted_quantile(values, weights, 1 / 3)[0] == 1.0
    assert weighted_quantile(values, weights, 0.34)[0] == 2.0


def test_weighted_quantile_matches_inverted_cdf():
    rng = np.random.default_rng(4)
    values = rng.normal(size=57)
    for q in (0.0, 0.1, 0.5, 0.93, 1.0):
        expected = np.quantile(values, q, method="inverted_cdf")
        assert weighted_quantile(values, np.ones(57), q)[0] == expected
    with pytest.raises(ValueError, match="`q`"):
        weighted_quantile(values, np.ones(57), 1.5)


# ---- invariants (hypothesis) -------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(finite_scores, st.lists(levels, min_size=2, max_size=6), st.randoms())
def test_threshold_is_permutation_invariant(scores, alphas, random):
    permuted = scores.copy()
    random.shuffle(permuted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        np.testing.assert_array_equal(
            conformal_quantile(scores, alphas), conformal_quantile(permuted, alphas)
        )


@settings(max_examples=100, deadline=None)
@given(finite_scores, st.lists(levels, min_size=2, max_size=6))
def test_threshold_is_monotone_in_alpha(scores, alphas):
    alphas = np.sort(alphas)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        thresholds = conformal_quantile(scores, alphas)
        weighted = conformal_quantile(scores, alphas, weights=np.linspace(0.5, 2.0, scores.size))
    # a larger miscoverage never raises the threshold: sets are nested in alpha
    assert np.all(thresholds[1:] <= thresholds[:-1])
    assert np.all(weighted[1:] <= weighted[:-1])


def test_rowwise_weighted_quantile_does_not_depend_on_the_row_position():
    # Identical rows must give identical thresholds, however many rows there are.
    scores = np.array([1.0, 2.0, 3.0, 4.0])
    weights = np.tile([0.3, 0.3, 0.3 - 4e-10, 0.1], (50_000, 1))
    thresholds = conformal_quantile(scores, 0.1, weights=weights, test_weight=0.0)
    assert np.unique(thresholds).size == 1


def test_weights_whose_sum_overflows_give_the_thresholds_of_their_ratios():
    """Each weight finite, their sum infinite (unnormalised likelihood ratios such as
    exp(700)): the cumulative shares became 0 or NaN and the threshold came out far too
    small (3 instead of 8), with only numpy's RuntimeWarning."""
    scores = np.arange(10.0)
    for scale in (5e307, np.exp(700.0)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            big = conformal_quantile(scores, 0.2, weights=np.full(10, scale), test_weight=scale)
            quantile = weighted_quantile(scores, np.full((2, 10), scale), 0.8)
        unit = conformal_quantile(scores, 0.2, weights=np.ones(10), test_weight=1.0)
        np.testing.assert_array_equal(big, unit)
        np.testing.assert_array_equal(quantile, weighted_quantile(scores, np.ones((2, 10)), 0.8))


def test_effective_sample_size_is_kish_and_scale_free():
    rng = np.random.default_rng(0)
    w = rng.exponential(size=50)
    by_hand = w.sum() ** 2 / np.sum(w**2)
    assert effective_sample_size(w) == pytest.approx(by_hand, rel=1e-12)
    # no overflow for huge weights, no underflow for tiny ones
    assert effective_sample_size(w * 1e300) == pytest.approx(by_hand, rel=1e-12)
    assert effective_sample_size(w * 1e-300) == pytest.approx(by_hand, rel=1e-12)
    assert effective_sample_size(np.ones(7)) == pytest.approx(7.0)
    for bad in ([1.0, np.nan], [1.0, -1.0], [0.0, 0.0], [[1.0, 2.0]], [1.0, np.inf]):
        with pytest.raises(ValueError, match="`weights`"):
            effective_sample_size(bad)


def test_counts_in_too_few_warnings_are_short_at_tiny_levels():
    """Second read: the 301-digit count fixed in the time-series warning was printed by
    the shared too-few warning (full CP here) at alpha = 1e-300."""
    from uqconform import FullConformalRidge

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = X[:, 0] + rng.normal(size=30)
    with pytest.warns(UserWarning, match=r"\(at least 1e\+300 are needed\)"):
        FullConformalRidge().fit(X, y).predict_interval(X[:2], alpha=1e-300)


def test_minimum_scores_is_the_fewest_scores_the_rank_rule_makes_finite():
    """regr review (stop 54): for levels a hair below 1 / k (within the rank tolerance)
    `minimum_scores` gave one more than the fewest scores `conformal_rank` makes finite
    (201 at alpha 0.0049751243780846, where 200 scores give a finite threshold)."""
    rng = np.random.default_rng(0)
    k = rng.integers(2, 5000, 500)
    near = [1 / k, np.nextafter(1 / k, 0), (1 - 5e-10) / k, (1 + 5e-10) / k]
    levels = np.concatenate([*near, rng.uniform(1e-4, 1, 500)])
    for level in levels[levels < 1]:
        count = minimum_scores(level)
        assert conformal_rank(count, level)[0] <= count, level
        assert count == 0 or conformal_rank(count - 1, level)[0] > count - 1, level
    assert minimum_scores(0.0049751243780846) == 200
    # tiny levels: the rule's own effective level, not a step at a time from 1 / a - 1
    # (diffrev11: minimum_scores(1e-12) ran ten minutes, blocking every calibrate)
    for level in (1e-9, 1e-11, 1e-12, 1e-13, 1e-15):
        count = minimum_scores(level)
        assert conformal_rank(count, level)[0] <= count < conformal_rank(count - 1, level)[0] + 1
        assert conformal_rank(count - 1, level)[0] > count - 1
    assert count_text(minimum_scores(5e-324)) == "2.02e+323"  # an OverflowError before


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([1, 2.5], [1.0, 2.5]),
        ([[0.1, 0.2], [0.3, 0.4]], [[0.1, 0.2], [0.3, 0.4]]),
        (np.array([1, 2], dtype=object), [1.0, 2.0]),
        ([np.float32(0.5), np.int64(2), 3], [0.5, 2.0, 3.0]),
        ([__import__("fractions").Fraction(1, 4)], [0.25]),
        (pd.Series([0.1, 0.2]), [0.1, 0.2]),
        (0.5, 0.5),
        (np.float64(0.5), 0.5),
        ([], []),
        (["0.5"], None),
        ([True, 0.5], None),
        ([np.True_, 0.5], None),
        ([0.1, "0.2"], None),
        ([0.1, None], None),
        ([1.0, 1j], None),
        ([__import__("decimal").Decimal(1)], None),
        (np.ma.masked_array([1.0, 2.0]), None),
        ([[1.0, 2.0], [1.0]], None),
        (True, None),
        ("0.5", None),
        (np.array([np.datetime64("2020-01-01")]), None),
        (pd.array([0.5, pd.NA], dtype="Float64"), None),
    ],
)
def test_real_values_accepts_and_refuses_as_before(value, expected):
    """Diff review (ec1b546): `real_values` checked list entries one by one (~2 us each:
    weighted_quantile on a 30,000-entry list went from 9.2 to 73.5 ms); it checks the set
    of entry types now, with the same outcomes (its doctests' cases and more)."""
    from uqconform._validation import real_values

    result = real_values(value)
    if expected is None:
        assert result is None
    else:
        assert result is not None and result.dtype == float
        np.testing.assert_array_equal(result, np.asarray(expected, dtype=float))


@pytest.mark.parametrize("mask", [False, [0, 0, 1, 0]])
def test_masked_weights_are_told_what_to_pass(mask):
    """Diff review (ec1b546): a masked array of floats was told "must be real numbers"."""
    weights = np.ma.masked_array([1.0, 1.0, 1.0, 2.0], mask=mask)
    for call in (
        lambda: weighted_quantile([1.0, 2.0, 3.0, 4.0], weights, 0.5),
        lambda: conformal_quantile([1.0, 2.0, 3.0, 4.0], 0.4, weights=weights, warn=False),
    ):
        with pytest.raises(ValueError, match=r"`weights` is a masked array") as info:
            call()
        assert "weights.filled(0)" in str(info.value)
        assert "must be real numbers" not in str(info.value)


def test_decimal_weights_are_told_to_convert_with_float():
    """Diff review (ec1b546): Decimal weights were told "must be real numbers"."""
    from decimal import Decimal

    with pytest.raises(ValueError, match=r"`weights` holds Decimal numbers.*convert with float"):
        weighted_quantile([1.0, 2.0, 3.0, 4.0], [Decimal(1)] * 4, 0.5)
    with pytest.raises(ValueError, match=r"`weights` holds Decimal numbers.*convert with float"):
        conformal_quantile([1.0, 2.0], 0.4, weights=np.array([Decimal(1)] * 2), warn=False)


def _exact_weighted_threshold(scores, weights, test_weight, alpha):
    """The weighted conformal threshold in exact fractions: the smallest score whose
    cumulative weight reaches ``(1 - alpha)`` of the total with the test point's mass
    (which sits at +inf), ``inf`` when none does."""
    from fractions import Fraction

    if np.isinf(test_weight):
        return np.inf
    mass = sum(Fraction(w) for w in weights) + Fraction(test_weight)
    if mass == 0:
        return np.inf
    target = (1 - Fraction(alpha).limit_denominator(1000)) * mass  # 1/3 as meant
    for value in sorted(set(scores)):
        reached = sum(Fraction(w) for w, s in zip(weights, scores, strict=True) if s <= value)
        if reached >= target:
            return value
    return np.inf


def test_weighted_conformal_quantile_against_exact_fractions():
    """Shift review (stop 61): the weighted threshold was checked on hand-picked cases only.
    Random small problems with tied scores, zero weights, test weights of 0 and +inf and
    levels such as 1/3, on the shared, per-row and scalar test-weight paths."""
    rng = np.random.default_rng(0)
    warnings.simplefilter("ignore")  # (all-zero weights and infinite test weights warn)
    for _ in range(400):
        n = int(rng.integers(1, 15))
        if rng.random() < 0.6:
            scores = rng.integers(0, 5, n).astype(float)  # ties
        else:
            scores = rng.normal(size=n)
        if rng.random() < 0.7:
            weights = rng.choice([0.0, 0.5, 1.0, 2.0, 3.0, 0.125], n)  # zeros
        else:
            weights = rng.exponential(size=n)
        test_weights = rng.choice([0.0, 0.125, 1.0, 3.0, np.inf, 0.75], 4)
        alpha = float(rng.choice([0.1, 0.2, 0.25, 0.3, 0.5, 1 / 3]))
        expected = [_exact_weighted_threshold(scores, weights, t, alpha) for t in test_weights]
        shared = conformal_quantile(scores, alpha, weights=weights, test_weight=test_weights)
        per_row = conformal_quantile(
            scores, alpha, weights=np.tile(weights, (4, 1)), test_weight=test_weights
        )
        alone = [conformal_quantile(scores, alpha, weights=weights, test_weight=t)[0]
                 for t in test_weights]  # fmt: skip
        for got in (shared[:, 0], per_row[:, 0], np.asarray(alone)):
            np.testing.assert_array_equal(got, expected)
