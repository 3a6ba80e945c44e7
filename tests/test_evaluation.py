"""uqconform.evaluation: metrics, conditional coverage, coverage law, report and plots."""

from __future__ import annotations

import copy
import json
import math
import pickle
import re
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from sklearn.linear_model import LinearRegression, LogisticRegression

from uqconform import SplitConformalClassifier, SplitConformalRegressor
from uqconform.evaluation import (
    CoverageReport,
    coverage,
    coverage_bounds,
    coverage_by_group,
    coverage_count_pmf,
    evaluate,
    mean_interval_score,
    mean_set_size,
    mean_volume,
    mean_width,
    plot_intervals,
    size_stratified_coverage,
)
from uqconform.evaluation.bounds import _pooled_count_law

# ---- toy data ---------------------------------------------------------------------------

# y:        0.5   2.0   -1.0  3.0
# interval  [0,1] [0,1] [-1,0] [0,inf]   -> covered T F T T (bounds are inclusive)
Y_REG = np.array([0.5, 2.0, -1.0, 3.0])
INTERVALS = np.array([[0.0, 1.0], [0.0, 1.0], [-1.0, 0.0], [0.0, np.inf]])
# level 2: [0,3] everywhere -> covered T T F T, widths 3
INTERVALS_K = np.stack([INTERVALS, np.tile([0.0, 3.0], (4, 1))], axis=-1)

Y_CLS = np.array([0, 1, 2, 1])
SETS = np.array(
    [
        [True, False, False],  # 0 in, size 1
        [True, False, True],  # 1 out, size 2
        [False, False, True],  # 2 in, size 1
        [True, True, True],  # 1 in, size 3
    ]
)
SETS_K = np.stack([SETS, np.ones_like(SETS)], axis=-1)  # second level: every class


class Discs:
    """A duck-typed region: row i is the disc of radius r_i around the origin."""

    def __init__(self, radius):
        self.radius = np.asarray(radius, dtype=float)
        self.calls = []

    def __len__(self):
        return self.radius.size

    def contains(self, Y):
        return np.linalg.norm(Y, axis=1) <= self.radius

    def volume(self, **kwargs):
        self.calls.append(kwargs)
        return np.pi * self.radius**2


Y_2D = np.array([[0.0, 0.5], [1.0, 1.0], [3.0, 0.0]])  # norms 0.5, 1.41, 3


def readonly(array):
    array = np.array(array)
    array.setflags(write=False)
    return array


# ---- coverage ----------------------------------------------------------------------------


def test_coverage_intervals_hand_computed():
    assert coverage(Y_REG, INTERVALS) == 0.75
    assert isinstance(coverage(Y_REG, INTERVALS), float)
    np.testing.assert_array_equal(coverage(Y_REG, INTERVALS_K), [0.75, 0.75])
    # a list of lists and a column-vector target work too
    assert coverage(Y_REG[:, None], INTERVALS.tolist()) == 0.75
    assert coverage([1, 2], np.array([[1, 1], [0, 1]])) == 0.5  # integer bounds


def test_coverage_boxes():
    boxes = np.array(
        [
            [[-1.0, 1.0], [-1.0, 1.0]],  # (0, 0.5) in
            [[0.0, 2.0], [0.0, 0.5]],  # (1, 1) out on the second axis
            [[2.0, 3.0], [-np.inf, np.inf]],  # (3, 0) in
        ]
    )
    assert coverage(Y_2D, boxes) == pytest.approx(2 / 3)
    stacked = np.stack([boxes, boxes + np.array([-10.0, 10.0])], axis=-1)
    np.testing.assert_allclose(coverage(Y_2D, stacked), [2 / 3, 1.0])


def test_coverage_sets_integer_labels():
    assert coverage(Y_CLS, SETS) == 0.75
    np.testing.assert_array_equal(coverage(Y_CLS, SETS_K), [0.75, 1.0])
    assert coverage(Y_CLS.astype(float), SETS) == 0.75  # 1.0 is label 1


def test_coverage_sets_string_labels():
    classes = np.array(["cat", "dog", "eel"])
    assert coverage(classes[Y_CLS], SETS, classes=classes) == 0.75
    assert coverage(list(classes[Y_CLS]), SETS, classes=list(classes)) == 0.75
    series = pd.Series(classes[Y_CLS], dtype="string")
    np.testing.assert_array_equal(coverage(series, SETS_K, classes=classes), [0.75, 1.0])
    # labels in a different order than the columns
    assert coverage([10, 30, 20, 30], SETS, classes=[10, 30, 20]) == 0.75


def test_nullable_and_object_containers_read_as_their_values():
    """pandas nullable columns and object arrays of numbers or booleans (what a DataFrame of
    mixed or extension dtypes gives) are read as the numbers they hold."""
    frame = pd.DataFrame(INTERVALS).astype("Float64")
    assert coverage(pd.Series(Y_REG, dtype="Float64"), frame) == coverage(Y_REG, INTERVALS)
    assert mean_width(INTERVALS.astype(object)) == mean_width(INTERVALS)
    boolean = pd.DataFrame(SETS).astype("boolean")
    assert coverage(Y_CLS, boolean) == 0.75 and mean_set_size(boolean) == mean_set_size(SETS)
    assert coverage(Y_CLS.astype(object), SETS) == 0.75  # integer labels held as objects
    boolean.iloc[0, 0] = pd.NA
    with pytest.raises(ValueError, match="`sets` holds missing values"):
        mean_set_size(boolean)


def test_coverage_regions():
    discs = Discs([1.0, 1.0, 3.0])
    assert coverage(Y_2D, discs) == pytest.approx(2 / 3)
    np.testing.assert_allclose(coverage(Y_2D, [discs, Discs([0.1, 2.0, 2.0])]), [2 / 3, 1 / 3])


def test_interval_score_matches_its_formula_row_by_row():
    rng = np.random.default_rng(3)
    y = rng.normal(size=50)
    centre = rng.normal(size=(50, 1, 2))
    half = rng.uniform(0.1, 2.0, size=(50, 1, 2))
    intervals = np.concatenate([centre - half, centre + half], axis=1)  # (50, 2, 2 levels)
    alphas = np.array([0.05, 0.3])
    expected = np.zeros(2)
    for i in range(50):  # the definition, one row and one level at a time
        for j, a in enumerate(alphas):
            lower, upper = intervals[i, :, j]
            expected[j] += (upper - lower) + 2 / a * (max(lower - y[i], 0) + max(y[i] - upper, 0))
    before = intervals.copy()
    np.testing.assert_allclose(mean_interval_score(y, intervals, alphas), expected / 50)
    np.testing.assert_array_equal(intervals, before)  # inputs never modified
    assert mean_interval_score(y, intervals[..., 1], 0.3) == pytest.approx(expected[1] / 50)
    # an unbounded interval scores inf; level 2 is [0, 3] for every row and misses y = -1
    # by 1 (weight 2 / 0.2); a degenerate [inf, inf] misses by inf
    np.testing.assert_array_equal(
        mean_interval_score(Y_REG, INTERVALS_K, [0.1, 0.2]), [np.inf, 3.0 + 10.0 * 1.0 / 4]
    )
    assert mean_interval_score([0.0], [[np.inf, np.inf]], 0.1) == math.inf


@pytest.mark.parametrize("alpha", [0.1, 0.3])
def test_interval_score_is_lowest_for_the_central_interval_of_the_true_law(alpha):
    """Properness: for y ~ N(0, 1) the best interval at level alpha is the central one,
    [q(alpha/2), q(1 - alpha/2)]: narrower, wider or shifted intervals score higher (a
    wrong miss weight, e.g. 1 / alpha, moves the optimum to [q(alpha), q(1 - alpha)])."""
    y = np.random.default_rng(0).standard_normal(200_000)
    q = stats.norm.ppf(1 - alpha / 2)

    def score(lower, upper):
        return mean_interval_score(y, np.tile([lower, upper], (y.size, 1)), alpha)

    best = score(-q, q)
    for lower, upper in (
        (-0.9 * q, 0.9 * q),
        (-1.1 * q, 1.1 * q),
        (-q - 0.1, q - 0.1),
        (-q + 0.1, q + 0.1),
    ):
        assert score(lower, upper) > best


def test_interval_score_refuses_what_is_not_intervals_at_the_given_levels():
    with pytest.raises(ValueError, match=r"`alpha` must give one level per level"):
        mean_interval_score(Y_REG, INTERVALS, [0.1, 0.2])
    with pytest.raises(ValueError, match=r"`alpha` must give one level per level"):
        mean_interval_score(Y_REG, INTERVALS_K, 0.1)
    with pytest.raises(ValueError, match=r"`alpha` must lie strictly between 0 and 1"):
        mean_interval_score(Y_REG, INTERVALS, 1.0)
    with pytest.raises(ValueError, match=r"`y_true` has 3 rows but `intervals` has 4"):
        mean_interval_score(Y_REG[:3], INTERVALS, 0.1)
    with pytest.raises(TypeError, match=r"`intervals` must hold numbers"):
        mean_interval_score(Y_REG, SETS, 0.1)
    with pytest.raises(ValueError, match=r"`y_true` contains 1 NaN"):
        mean_interval_score([0.5, np.nan, 0.0, 1.0], INTERVALS, 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # integer or 0/1 bounds are intervals here: no warning
        assert mean_interval_score([1], [[0, 2]], 0.1) == 2.0
        assert mean_interval_score([0.5, 2.0], [[0, 1], [0.0, 1.0]], 0.1) == (1 + 21) / 2


def test_interval_score_warns_for_a_level_that_reads_as_a_coverage():
    """Review s63: alpha=0.9 (meant as 90% intervals) was taken silently, and the score then
    ranked a band covering 10% best, where every wrapper warns about such a level."""
    y = np.random.default_rng(0).normal(size=400)
    wide, narrow = np.tile([-1.645, 1.645], (400, 1)), np.tile([-0.126, 0.126], (400, 1))
    with pytest.warns(UserWarning, match=r"alpha=0\.9 is the miscoverage level.*alpha=0\.1"):
        assert mean_interval_score(y, narrow, 0.9) < mean_interval_score(y, wide, 0.9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mean_interval_score(y, wide, 0.1) < mean_interval_score(y, narrow, 0.1)


def test_text_labels_of_number_classes_are_told_to_be_converted_not_dropped():
    """Review s63: evaluate told labels '1', '2' of a model with classes 1, 2 that the sets
    never hold them (drop them or refit), where calibrate names the conversion."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = (X[:, 0] > 0).astype(int) + 1
    model = SplitConformalClassifier(LogisticRegression()).fit(X[:100], y[:100])
    model.calibrate(X[100:200], y[100:200])
    as_text = y[200:].astype(str)
    with pytest.raises(ValueError, match=r"holds text where .* numbers: convert it, e\.g\. y_te"):
        evaluate(model, X[200:], as_text)
    with pytest.raises(ValueError, match=r"holds text where .* numbers: convert it"):
        coverage(as_text, model.predict_set(X[200:]), classes=model.classes_)
    with pytest.raises(ValueError, match=r"\[7\].*never hold them, so those rows can never be"):
        evaluate(model, X[200:], np.where(y[200:] == 1, 7, 2))  # truly unseen: as before
    report = evaluate(model, X[200:], as_text.astype(int))  # the advice works
    assert report.n_test == 100 and 0.5 < report.rows[0]["coverage"] <= 1.0


def test_labels_held_as_objects_are_read_as_the_wrappers_train_on_them():
    """Diff review s63: coverage(y, sets) read integers held as objects as indices but
    refused whole floats and booleans held as objects, which the wrappers train on; integers
    beyond int64 got numpy's OverflowError."""
    sets = np.array([[True, False], [False, True], [True, True]])
    for labels in ([0, 1, 1], [0.0, 1.0, 1.0], [False, True, True]):
        expected = coverage(np.array(labels), sets)
        assert coverage(pd.Series(labels, dtype=object), sets) == expected == 1.0
    huge = np.array([2**64, 0, 1], dtype=object)
    with pytest.raises(ValueError, match=r"`y_true` holds labels that are not column indices"):
        coverage(huge, sets)


def test_metric_values():
    assert mean_width(np.array([[0.0, 1.0], [1.0, 4.0]])) == 2.0
    assert mean_width(INTERVALS) == math.inf
    np.testing.assert_array_equal(mean_width(INTERVALS_K), [np.inf, 3.0])
    assert mean_width(INTERVALS[:3]) == pytest.approx(1.0)
    assert mean_width(np.array([[np.inf, np.inf]])) == 0.0  # degenerate, not NaN
    assert mean_set_size(SETS) == 1.75
    np.testing.assert_array_equal(mean_set_size(SETS_K), [1.75, 3.0])
    discs = Discs([1.0, 2.0])
    assert mean_volume(discs) == pytest.approx(2.5 * np.pi)
    np.testing.assert_allclose(mean_volume([discs, Discs([0.0, 0.0])]), [2.5 * np.pi, 0.0])
    mean_volume(discs, n_samples=10, random_state=0)
    assert discs.calls[-1] == {"n_samples": 10, "random_state": 0}


# ---- bad inputs --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("y", "prediction", "error", "match"),
    [
        (Y_REG[:3], INTERVALS, ValueError, "y_true.*3 rows.*4"),
        ([0.5, np.nan, 1.0, 2.0], INTERVALS, ValueError, "y_true.*NaN"),
        (["a", "b", "c", "d"], INTERVALS, TypeError, "y_true.*numeric"),
        (0.5, INTERVALS, ValueError, "y_true.*scalar"),
        (None, INTERVALS, ValueError, "y_true"),
        ([], np.zeros((0, 2)), ValueError, "y_true.*empty"),
        (np.zeros((4, 2)), INTERVALS, ValueError, "y_true.*1-D"),
        (Y_REG, INTERVALS[:, 0], ValueError, "prediction.*shape"),
        (Y_REG, np.zeros((4, 2, 2, 2)), ValueError, "prediction.*shape"),
        (Y_REG, INTERVALS[:, ::-1], ValueError, "prediction.*lower > upper"),
        (Y_REG, np.full((4, 2), np.nan), ValueError, "prediction.*NaN"),
        (Y_CLS, SETS.astype(int), TypeError, "prediction.*boolean"),
        (Y_CLS, SETS[:, :, None, None], ValueError, "prediction.*shape"),
        (Y_REG, np.array([["a", "b"]] * 4), TypeError, "prediction.*dtype"),
        (Y_REG, None, TypeError, "prediction"),
        (Y_CLS, SETS[:3], ValueError, "y_true.*4 rows.*3"),
        ([0, 1, 2, 3], SETS, ValueError, "y_true.*outside 0..2"),
        ([0, 1, -1, 1], SETS, ValueError, "y_true.*outside"),
        (["a", "b", "a", "b"], SETS, ValueError, "y_true.*classes="),
        ([0.0, 1.5, 2.0, 1.0], SETS, ValueError, "y_true.*classes="),
        ([0.0, np.nan, 2.0, 1.0], SETS, ValueError, "y_true.*missing"),
        (np.zeros((4, 2), dtype=int), SETS, ValueError, "y_true.*1-D"),
        (Y_2D[:, 0], Discs([1, 1, 1]), ValueError, r"y_true.*\(n, d\)"),
        (Y_2D[:2], Discs([1, 1, 1]), ValueError, "y_true.*2 rows.*3"),
        (Y_2D, [Discs([1, 1, 1]), INTERVALS], TypeError, "prediction.*mixing"),
        (Y_2D, [Discs([1, 1, 1]), Discs([1, 1])], ValueError, "prediction.*lengths"),
    ],
)
def test_coverage_rejects_bad_input(y, prediction, error, match):
    with pytest.raises(error, match=match):
        coverage(y, prediction)


def test_coverage_rejects_bad_classes():
    labels = np.array(["cat", "dog", "eel"])
    with pytest.raises(ValueError, match=r"y_true.*not in `classes`.*'fox'"):
        coverage(["cat", "fox", "eel", "dog"], SETS, classes=labels)
    with pytest.raises(ValueError, match=r"y_true.*not in `classes`"):
        coverage([0, 1, 2, 1], SETS, classes=labels)  # ints against strings
    with pytest.raises(ValueError, match=r"classes.*2 labels.*3 columns"):
        coverage(["cat"] * 4, SETS, classes=labels[:2])
    with pytest.raises(ValueError, match=r"classes.*duplicate"):
        coverage(["cat"] * 4, SETS, classes=["cat", "cat", "dog"])
    with pytest.raises(ValueError, match=r"classes.*1-D"):
        coverage(["cat"] * 4, SETS, classes=[labels])
    with pytest.raises(TypeError, match=r"classes.*boolean set"):
        coverage(Y_REG, INTERVALS, classes=[0, 1])
    with pytest.raises(ValueError, match=r"y_true.*missing"):
        coverage(np.array(["cat", None, "eel", "dog"], dtype=object), SETS, classes=labels)


def test_region_contract_is_checked():
    class BadRegion(Discs):
        def contains(self, Y):
            return np.ones(len(Y))  # floats, not bool

    with pytest.raises(TypeError, match=r"contains.*boolean"):
        coverage(Y_2D, BadRegion([1, 1, 1]))
    with pytest.raises(TypeError, match=r"region.*contains"):
        mean_volume(INTERVALS)

    class NoVolume:
        def contains(self, Y):
            return np.ones(len(Y), dtype=bool)

    with pytest.raises(TypeError, match=r"region.*volume"):
        mean_volume(NoVolume())


def test_metric_functions_reject_bad_input():
    with pytest.raises(ValueError, match=r"intervals.*shape"):
        mean_width(np.zeros(3))
    with pytest.raises(TypeError, match=r"`intervals` must hold numbers .lower, upper."):
        mean_width(SETS)
    with pytest.raises(ValueError, match=r"intervals.*lower > upper"):
        mean_width(INTERVALS[:, ::-1])
    with pytest.raises(TypeError, match=r"intervals.*boolean"):
        mean_width(np.zeros((3, 4)))  # not (n, 2)
    with pytest.raises(TypeError, match=r"sets.*boolean"):
        mean_set_size(SETS.astype(int))
    with pytest.raises(ValueError, match=r"sets.*shape"):
        mean_set_size(np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match=r"sets.*empty"):
        mean_set_size(np.ones((0, 3), dtype=bool))


def test_interval_and_set_metrics_name_each_other_when_given_the_other_kind():
    # sets passed for intervals, intervals for sets: the message names the right metric
    with pytest.raises(TypeError, match=r"boolean array \(prediction sets\? .* mean_set_size\)"):
        mean_width(SETS)
    with pytest.raises(TypeError, match=r"float64 \(intervals\? .* by mean_width\)\.$"):
        mean_set_size(INTERVALS)
    with pytest.raises(TypeError, match=r"float64 \(intervals\? .* by mean_width\)\.$"):
        mean_set_size(INTERVALS_K)
    with pytest.raises(TypeError, match=r"got dtype float64\.$"):  # (n, 3): no interval
        mean_set_size(np.full((4, 3), 0.5))
    # a binary classifier's probabilities are (n, 2) too: named as probabilities
    proba = np.array([[0.2, 0.8], [0.6, 0.4], [1.0, 0.0]])
    with pytest.raises(TypeError, match=r"\(class probabilities\? .*predict_set\)\.$"):
        mean_set_size(proba)


def test_inputs_are_not_modified():
    y, intervals, sets = readonly(Y_REG), readonly(INTERVALS_K), readonly(SETS_K)
    labels, groups = readonly(["a", "b", "c", "b"]), readonly([1, 1, 2, 2])
    before = [a.copy() for a in (y, intervals, sets, labels, groups)]
    coverage(y, intervals)
    coverage(labels, sets, classes=readonly(["a", "b", "c"]))
    mean_width(intervals)
    mean_set_size(sets)
    coverage_by_group(y, intervals, groups)
    coverage_by_group(labels, sets, groups, classes=["a", "b", "c"])
    size_stratified_coverage(y, intervals, bins=2)
    size_stratified_coverage(labels, sets, classes=["a", "b", "c"])
    for old, new in zip(before, (y, intervals, sets, labels, groups), strict=True):
        np.testing.assert_array_equal(old, new)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-5, 5, allow_nan=False), st.floats(-5, 5), st.floats(0, 5)),
        min_size=1,
        max_size=30,
    )
)
def test_interval_coverage_matches_definition(rows):
    y = np.array([r[0] for r in rows])
    lower = np.array([r[1] for r in rows])
    intervals = np.column_stack([lower, lower + np.array([r[2] for r in rows])])
    expected = np.mean([lo <= v <= hi for v, (lo, hi) in zip(y, intervals, strict=True)])
    assert coverage(y, intervals) == pytest.approx(expected)
    permutation = np.random.default_rng(0).permutation(y.size)
    assert coverage(y[permutation], intervals[permutation]) == pytest.approx(expected)


# ---- conditional coverage ----------------------------------------------------------------


def test_coverage_by_group_intervals():
    table = coverage_by_group(Y_REG, INTERVALS, groups=["b", "a", "b", "a"])
    assert list(table.index) == ["a", "b"] and table.index.name == "group"
    assert list(table.columns) == ["count", "coverage", "mean_width"]
    np.testing.assert_array_equal(table["count"], [2, 2])
    np.testing.assert_array_equal(table["coverage"], [0.5, 1.0])
    np.testing.assert_array_equal(table["mean_width"], [np.inf, 1.0])


def test_coverage_by_group_levels_and_sets():
    table = coverage_by_group(["x", "y", "z", "y"], SETS_K, [0, 0, 1, 1], classes=["x", "y", "z"])
    assert table.index.names == ["level", "group"]
    np.testing.assert_array_equal(table.loc[0, "coverage"], [0.5, 1.0])
    np.testing.assert_array_equal(table.loc[0, "mean_set_size"], [1.5, 2.0])
    np.testing.assert_array_equal(table.loc[1, "coverage"], [1.0, 1.0])
    regions = coverage_by_group(Y_2D, Discs([1.0, 1.0, 3.0]), ["p", "q", "q"])
    np.testing.assert_allclose(regions["coverage"], [1.0, 0.5])
    np.testing.assert_allclose(regions["mean_volume"], [np.pi, 5 * np.pi])


def test_coverage_by_group_rejects_bad_groups():
    with pytest.raises(ValueError, match=r"groups.*3 entries.*4"):
        coverage_by_group(Y_REG, INTERVALS, [0, 1, 2])
    with pytest.raises(ValueError, match=r"groups.*missing"):
        coverage_by_group(Y_REG, INTERVALS, [0.0, np.nan, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"groups.*1-D"):
        coverage_by_group(Y_REG, INTERVALS, np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"groups.*None"):
        coverage_by_group(Y_REG, INTERVALS, None)


def test_size_stratified_coverage_sets():
    table = size_stratified_coverage(Y_CLS, SETS)
    assert list(table.columns) == ["low", "high", "count", "coverage"]
    np.testing.assert_array_equal(table["low"], [1, 2, 3])
    np.testing.assert_array_equal(table["count"], [2, 1, 1])
    np.testing.assert_array_equal(table["coverage"], [1.0, 0.0, 1.0])
    binned = size_stratified_coverage(Y_CLS, SETS, bins=[0, 2, 4])  # [0, 2) and [2, 4]
    np.testing.assert_array_equal(binned["count"], [2, 2])
    np.testing.assert_array_equal(binned["coverage"], [1.0, 0.5])
    levels = size_stratified_coverage(Y_CLS, SETS_K)
    assert levels.index.names == ["level", "stratum"]
    assert levels.loc[1, "low"].tolist() == [3.0]


def test_strata_on_given_edges_are_the_bins_own_numbers():
    """Two methods' tables on the same edges join on `stratum` (it was renumbered from 0
    after empty bins were dropped, so stratum 0 meant [0, 1) for one and [1, 2) for the
    other)."""
    y = np.zeros(4)
    narrow = np.array([[-0.25, 0.25]] * 2 + [[-0.75, 0.75]] * 2)  # widths 0.5 and 1.5
    wide = 2 * narrow  # widths 1 and 3
    edges = [0, 1, 2, 3, 4]
    a = size_stratified_coverage(y, narrow, bins=edges)
    b = size_stratified_coverage(y, wide, bins=edges)
    assert a.index.tolist() == [0, 1] and b.index.tolist() == [1, 3]
    joined = a.join(b, lsuffix="_narrow", rsuffix="_wide", how="inner")
    assert joined.index.tolist() == [1]
    assert edges[1] <= joined["low_narrow"].item() < edges[2]
    assert edges[1] <= joined["low_wide"].item() < edges[2]


def test_size_stratified_coverage_intervals():
    y = np.arange(8.0)
    widths = np.array([1, 1, 1, 1, 4, 4, 4, 4.0])
    intervals = np.column_stack([y - widths / 2, y + widths / 2])
    intervals[[0, 1, 4]] += 10.0  # three misses: two narrow, one wide
    table = size_stratified_coverage(y, intervals, bins=2)
    np.testing.assert_array_equal(table["count"], [4, 4])
    np.testing.assert_allclose(table["coverage"], [0.5, 0.75])
    assert table["high"].iloc[0] < table["low"].iloc[1]
    default = size_stratified_coverage(y, intervals)  # 5 quantile bins, ties merged
    assert default["count"].sum() == 8 and (default["count"] > 0).all()
    one = size_stratified_coverage(y, intervals, bins=1)
    assert len(one) == 1 and one["coverage"].iloc[0] == 5 / 8
    infinite = size_stratified_coverage(Y_REG, INTERVALS, bins=2)
    assert infinite["high"].iloc[-1] == np.inf


@pytest.mark.parametrize(("n", "bins"), [(100, 5), (100, 10), (10, 5), (1000, 10), (7, 3)])
def test_quantile_bins_of_distinct_widths_hold_equal_counts(n, bins):
    """Bin i holds the rows of rank ceil((i - 1) n / bins) + 1 to ceil(i n / bins)."""
    widths = np.random.default_rng(n).permutation(np.arange(1.0, n + 1))
    intervals = np.column_stack([np.zeros(n), widths])
    table = size_stratified_coverage(np.zeros(n), intervals, bins=bins)
    ends = [-(-i * n // bins) for i in range(bins + 1)]
    np.testing.assert_array_equal(table["count"], np.diff(ends))
    np.testing.assert_array_equal(table["high"], [float(e) for e in ends[1:]])


@pytest.mark.parametrize(
    ("bins", "error", "match"),
    [
        (0, ValueError, "bins.*positive"),
        ([1.0], ValueError, "bins.*increasing"),
        ([2.0, 1.0], ValueError, "bins.*increasing"),
        ("auto", TypeError, "bins"),
        (True, TypeError, "bins"),
        ([["a"]], TypeError, "bins"),
    ],
)
def test_size_stratified_coverage_rejects_bad_bins(bins, error, match):
    with pytest.raises(error, match=match):
        size_stratified_coverage(Y_REG, INTERVALS, bins=bins)


# ---- the coverage law --------------------------------------------------------------------


def _uniform_split_cp_coverage(rng, n_calibration, alpha, n_test, n_repeats):
    """Test coverage of split CP on uniform scores, one value per independent resplit."""
    rank = math.ceil((n_calibration + 1) * (1 - alpha))  # the conformal order statistic
    calibration = np.sort(rng.random((n_repeats, n_calibration)), axis=1)
    threshold = calibration[:, rank - 1]
    return (rng.random((n_repeats, n_test)) <= threshold[:, None]).mean(axis=1)


def _assert_inside_at_the_stated_rate(counts, n_calibration, alpha, n_test, confidence, repeats):
    """``counts``: independent pooled coverage counts (``repeats`` resplits each), following
    the split-CP law exactly. The number inside ``coverage_bounds`` is Binomial(K, p), p the
    law's mass on [low, high]: at least ``confidence`` and at most that plus the mass of the
    two end counts (the law is discrete). Accept from the 5e-5 quantile of
    Binomial(K, confidence) to the 1 - 5e-5 quantile of Binomial(K, upper mass); the law's
    mass comes from the scipy Beta-Binomial reference, not from the code under test."""
    low, high = coverage_bounds(
        n_calibration, alpha, n_test, confidence=confidence, n_repeats=repeats
    )
    total = repeats * n_test
    low, high = round(low * total), round(high * total)
    inside = int(np.count_nonzero((counts >= low) & (counts <= high)))
    edges = _reference_pooled_pmf(n_calibration, alpha, n_test, repeats)[[low, high]].sum()
    lower = stats.binom.ppf(5e-5, counts.size, confidence)
    upper = stats.binom.ppf(1 - 5e-5, counts.size, min(1.0, confidence + edges))
    assert lower <= inside <= upper, (confidence, repeats, inside, lower, upper)


@pytest.mark.parametrize(("n_calibration", "alpha", "n_test"), [(100, 0.1, 200), (49, 0.2, 50)])
def test_coverage_bounds_hold_at_their_stated_rate(n_calibration, alpha, n_test):
    rng = np.random.default_rng(12345)
    observed = _uniform_split_cp_coverage(rng, n_calibration, alpha, n_test, 4000)
    counts = np.round(observed * n_test).astype(int)
    for confidence in (0.9, 0.99):
        _assert_inside_at_the_stated_rate(counts, n_calibration, alpha, n_test, confidence, 1)
    # averaging 50 resplits: the pooled law, 80 independent pooled counts
    pooled = counts.reshape(80, 50).sum(axis=1)
    _assert_inside_at_the_stated_rate(pooled, n_calibration, alpha, n_test, 0.99, 50)


def test_coverage_count_pmf_moments():
    n, alpha, m = 99, 0.1, 40
    pmf = coverage_count_pmf(n, alpha, m)
    assert pmf.shape == (m + 1,) and pmf.sum() == pytest.approx(1.0)
    expected = math.ceil((n + 1) * (1 - alpha)) / (n + 1)  # mean of Beta(n + 1 - l, l)
    assert (np.arange(m + 1) @ pmf) / m == pytest.approx(expected)
    # too few calibration points: the set is everything
    np.testing.assert_array_equal(coverage_count_pmf(5, 0.05, 3), [0, 0, 0, 1])
    # alpha within rounding of 1 (it raised a NaN conversion error, then read as empty
    # sets): the rank exact arithmetic gives, floor(11 alpha) = 10, as at alpha 0.95
    np.testing.assert_array_equal(
        coverage_count_pmf(10, 1 - 1e-12, 3), coverage_count_pmf(10, 0.95, 3)
    )
    np.testing.assert_allclose(
        coverage_count_pmf(10, 0.95, 3), stats.betabinom(3, 1, 10).pmf(range(4))
    )
    assert coverage_bounds(10, 1 - 1e-12, 5, n_repeats=2) == coverage_bounds(
        10, 0.95, 5, n_repeats=2
    )
    with pytest.raises(ValueError, match=r"n_test"):
        coverage_count_pmf(10, 0.1, 0)
    with pytest.raises(ValueError, match=r"confidence"):
        coverage_bounds(10, 0.1, 10, confidence=1.0)


# (n_calibration, alpha, n_test) with (n + 1) * alpha away from an integer: floor() is exact
POOLED_CASES = [(19, 0.13, 10), (50, 0.1, 37), (45, 0.2, 40)]


def _beta_binomial_parameters(n_calibration, alpha):
    """``(a, b)`` of the one-resplit coverage law ``Beta(n + 1 - l, l)``, ``l = floor((n+1)a)``."""
    conforming = math.floor((n_calibration + 1) * alpha)
    return n_calibration + 1 - conforming, conforming


def _reference_pooled_pmf(n_calibration, alpha, n_test, n_repeats):
    """The pooled count law written out directly: an ``n_repeats``-fold ``np.convolve``."""
    a, b = _beta_binomial_parameters(n_calibration, alpha)
    single = stats.betabinom.pmf(np.arange(n_test + 1), n_test, a, b)
    pmf = single
    for _ in range(n_repeats - 1):
        pmf = np.convolve(pmf, single)
    return pmf


@pytest.mark.parametrize("n_repeats", [2, 3])
@pytest.mark.parametrize(("n_calibration", "alpha", "n_test"), POOLED_CASES)
def test_pooled_law_is_the_convolution_of_independent_resplits(
    n_calibration, alpha, n_test, n_repeats
):
    reference = _reference_pooled_pmf(n_calibration, alpha, n_test, n_repeats)
    pmf = coverage_count_pmf(n_calibration, alpha, n_test, n_repeats)
    assert pmf.shape == (n_repeats * n_test + 1,)
    np.testing.assert_allclose(pmf, reference, rtol=0, atol=1e-12)
    # coverage_bounds(..., n_repeats) is the central interval of that law: each end is the
    # smallest count whose cumulative probability reaches its tail
    total = n_repeats * n_test
    cdf = np.cumsum(reference)
    for confidence in (0.8, 0.9, 0.99):
        low, high = coverage_bounds(
            n_calibration, alpha, n_test, confidence=confidence, n_repeats=n_repeats
        )
        for bound, level in ((low, (1 - confidence) / 2), (high, (1 + confidence) / 2)):
            count = round(bound * total)
            assert count == pytest.approx(bound * total)
            assert cdf[count] >= level
            assert count == 0 or cdf[count - 1] < level
    bounds = coverage_bounds(n_calibration, [alpha, alpha], n_test, 0.9, n_repeats=n_repeats)
    np.testing.assert_array_equal(
        bounds, [coverage_bounds(n_calibration, alpha, n_test, 0.9, n_repeats=n_repeats)] * 2
    )


@pytest.mark.parametrize(("n_calibration", "alpha", "n_test"), [(19, 0.13, 400), (500, 0.3, 200)])
def test_many_pooled_resplits_keep_the_counts_that_carry_mass(n_calibration, alpha, n_test):
    """Pooling 16 resplits spreads the law like 4 resplits' width but its support like 16:
    the ends below the FFT noise are dropped, without changing the law or the bounds."""
    n_repeats = 16
    reference = _reference_pooled_pmf(n_calibration, alpha, n_test, n_repeats)
    reference = reference / reference.sum()
    _, carried = _pooled_count_law(n_calibration, alpha, n_test, n_repeats)
    assert carried.size < n_repeats * n_test // 2  # the support is trimmed
    pmf = coverage_count_pmf(n_calibration, alpha, n_test, n_repeats)
    np.testing.assert_allclose(pmf, reference, rtol=0, atol=1e-12)
    cdf, total = np.cumsum(reference), n_repeats * n_test
    for confidence in (0.9, 0.99, 0.999999):
        low, high = coverage_bounds(n_calibration, alpha, n_test, confidence, n_repeats)
        assert round(low * total) == np.searchsorted(cdf, (1 - confidence) / 2)
        assert round(high * total) == np.searchsorted(cdf, (1 + confidence) / 2)


@pytest.mark.parametrize(
    ("n_calibration", "alpha", "n_test"),
    # many test points: the law is computed on a window around its mean (skewed, with an
    # exponential tail, at 19 calibration points; near-normal at 2,000)
    [(19, 0.13, 4000), (2000, 0.1, 6000), (500, 0.3, 3000)],
)
def test_pooled_law_on_a_window_equals_the_law_on_every_count(n_calibration, alpha, n_test):
    for n_repeats in (1, 2):
        reference = _reference_pooled_pmf(n_calibration, alpha, n_test, n_repeats)
        pmf = coverage_count_pmf(n_calibration, alpha, n_test, n_repeats)
        np.testing.assert_allclose(pmf, reference / reference.sum(), rtol=0, atol=1e-12)
        cdf = np.cumsum(reference / reference.sum())
        total = n_repeats * n_test
        low, high = coverage_bounds(n_calibration, alpha, n_test, 0.99, n_repeats=n_repeats)
        assert round(low * total) == np.searchsorted(cdf, 0.005)
        assert round(high * total) == np.searchsorted(cdf, 0.995)


@pytest.mark.parametrize(("n_calibration", "alpha", "n_test"), POOLED_CASES)
def test_pooled_law_moments_are_sums_of_the_resplit_moments(n_calibration, alpha, n_test):
    a, b = _beta_binomial_parameters(n_calibration, alpha)
    mean_one = n_test * a / (a + b)  # Beta-Binomial moments in closed form
    var_one = n_test * a * b * (a + b + n_test) / ((a + b) ** 2 * (a + b + 1))
    for n_repeats in (1, 2, 3, 50):
        pmf = coverage_count_pmf(n_calibration, alpha, n_test, n_repeats)
        counts = np.arange(pmf.size)
        mean = counts @ pmf
        assert mean == pytest.approx(n_repeats * mean_one, rel=1e-10)
        assert (counts - mean) ** 2 @ pmf == pytest.approx(n_repeats * var_one, rel=1e-8)


def test_pooled_bounds_hold_at_their_stated_rate_and_no_more():
    """Pooled 90% bounds contain the pooled coverage about 90% of the time, not far more.

    With uniform scores the simulated split-CP coverage follows the law exactly, so the
    number of the ``K`` outer repetitions whose pooled count lies inside the bounds is
    Binomial(K, p) with p the law's mass on [low, high]. For the central interval that mass
    is at least the confidence and at most the confidence plus the mass of the two end
    counts (the law is discrete). The acceptance region runs from the 5e-5 quantile of
    Binomial(K, confidence) to the 1 - 5e-5 quantile of Binomial(K, that upper mass): a
    correct implementation fails with probability below 1e-4 (and the seed is fixed).
    Bounds from a wider law, e.g. one calibration set for all ``R * n_test`` points, put
    nearly every repetition inside and fail the upper side.
    """
    n_calibration, alpha, n_test, n_repeats, outer, confidence = 45, 0.2, 40, 5, 4000, 0.9
    rng = np.random.default_rng(2024)
    rank = n_calibration + 1 - math.floor((n_calibration + 1) * alpha)  # conformal order stat
    calibration = np.sort(rng.random((outer, n_repeats, n_calibration)), axis=2)
    threshold = calibration[:, :, rank - 1]
    counts = (rng.random((outer, n_repeats, n_test)) <= threshold[:, :, None]).sum(axis=(1, 2))
    _assert_inside_at_the_stated_rate(counts, n_calibration, alpha, n_test, confidence, n_repeats)


# ---- evaluate and the report -------------------------------------------------------------


@pytest.fixture(scope="module")
def regression_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 2))
    y = X @ np.array([1.0, -2.0]) + rng.normal(size=1500)
    groups = np.where(X[:, 0] > 0, "right", "left")
    return X, y, groups


@pytest.fixture(scope="module")
def classification_data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1500, 2))
    logits = np.column_stack([X[:, 0], X[:, 1], -X[:, 0] - X[:, 1]]) * 2
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    index = (rng.random(1500)[:, None] > np.cumsum(proba, axis=1)).sum(axis=1)
    labels = np.array(["cat", "dog", "eel"])[index]
    return X, labels


def test_evaluate_regressor(regression_data):
    X, y, _ = regression_data
    model = SplitConformalRegressor(LinearRegression(), 0.1, "absolute")
    model.fit(X[:500], y[:500]).calibrate(X[500:1000], y[500:1000])
    X_test, y_test = X[1000:], y[1000:]
    X_before = X_test.copy()
    report = evaluate(model, X_test, y_test, alpha=(0.05, 0.1, 0.2))
    np.testing.assert_array_equal(X_test, X_before)
    assert isinstance(report, CoverageReport)
    assert report.task == "regression" and report.efficiency == "mean_width"
    assert report.n_calibration == 500 and report.n_test == 500
    frame = report.to_frame()
    assert len(frame) == 3
    assert {"alpha", "nominal", "coverage", "bound_low", "bound_high", "inside_bounds"} <= set(
        frame.columns
    )
    assert {"mean_width", "n_test", "time_seconds"} <= set(frame.columns)
    intervals = model.predict_interval(X_test, alpha=[0.05, 0.1, 0.2])
    np.testing.assert_allclose(frame["coverage"], coverage(y_test, intervals))
    np.testing.assert_allclose(frame["mean_width"], mean_width(intervals))
    np.testing.assert_allclose(frame["nominal"], [0.95, 0.9, 0.8])
    np.testing.assert_allclose(
        frame[["bound_low", "bound_high"]], coverage_bounds(500, [0.05, 0.1, 0.2], 500)
    )
    assert frame["inside_bounds"].all()
    assert (frame["time_seconds"] >= 0).all()
    text = str(report)
    assert "SplitConformalRegressor" in text and "mean_width" in text and "99% bounds" in text
    assert repr(report) == text
    assert len(text.splitlines()) == 5
    payload = json.loads(json.dumps(report.to_dict()))
    assert payload["levels"][1]["alpha"] == 0.1 and payload["by_group"] is None
    assert all(type(v) in (float, int, bool, str) for v in payload["levels"][0].values())


def test_report_says_which_side_of_the_bounds(regression_data):
    """Outside the bounds, the printed report tells a failure (BELOW) from a conservative
    method (above), e.g. top-k sets whose integer score over-covers."""
    X, y, _ = regression_data
    model = SplitConformalRegressor(LinearRegression(), 0.1, "absolute")
    model.fit(X[:500], y[:500]).calibrate(X[500:1000], y[500:1000])
    report = evaluate(model, X[1000:], y[1000:], alpha=0.1)
    row = report.rows[0]
    for coverage_seen, word in (
        (row["bound_low"] - 0.01, "BELOW"),
        (row["bound_high"] + 0.01, "above"),
    ):
        report.rows[0] = {**row, "coverage": coverage_seen, "inside_bounds": False}
        line = str(report).splitlines()[2]
        assert line.split()[5] == word, line


def test_a_coverage_one_point_below_its_bound_prints_below_it():
    """From 3,000 test points, 3 decimals printed a coverage one count below the lower
    bound as equal to it (0.870 [0.870, 0.926] BELOW)."""
    low, high = coverage_bounds(1000, 0.1, 3000)
    covered = math.ceil(low * 3000) - 1
    row = {"alpha": 0.1, "nominal": 0.9, "coverage": covered / 3000, "mean_width": 1.0}
    row.update(bound_low=low, bound_high=high, inside_bounds=False)
    report = CoverageReport("M", "regression", "mean_width", 3000, 1000, 0.99, 0.0, rows=[row])
    cells = str(report).replace("[", "").replace(",", "").replace("]", "").split("\n")[2]
    coverage_text, low_text = cells.split()[2:4]
    assert float(coverage_text) < float(low_text), cells
    assert cells.split()[5] == "BELOW"


@pytest.mark.parametrize("n_test", [1000, 2_000_000, 30_000_000])
def test_printed_columns_stay_aligned_with_their_headers(n_test):
    """From a million test points the decimals grew past the columns' fixed widths: the
    coverage and bounds ran into each other under shifted headers."""
    low, high = coverage_bounds(1000, 0.1, n_test)
    row = {"alpha": 0.1, "nominal": 0.9, "coverage": (low + high) / 2, "mean_width": 1.0}
    row.update(bound_low=low, bound_high=high, inside_bounds=True)
    report = CoverageReport("M", "regression", "mean_width", n_test, 1000, 0.99, 0.0, rows=[row])
    header, line = str(report).splitlines()[1:3]
    coverage_cell = line.split()[2]
    assert float(coverage_cell) == pytest.approx(row["coverage"], abs=1 / n_test)
    for title, cell in (("coverage", coverage_cell), ("bounds", "]"), ("inside", "yes")):
        assert header.index(title) + len(title) == line.index(cell) + len(cell), (header, line)


def test_a_report_built_by_hand_prints_missing_figures_as_nan():
    rows = [{"alpha": 0.1, "nominal": 0.9, "coverage": 0.88}]
    for task, efficiency in (("regression", "mean_width"), ("classification", "mean_set_size")):
        report = CoverageReport("M", task, efficiency, 10, None, 0.99, 0.01, rows=rows)
        cells = str(report).splitlines()[2].split()
        assert cells[:5] == ["0.1", "0.900", "0.880", "-", "-"]
        assert cells[5:] == ["nan"] * (3 if task == "classification" else 1)


def test_levels_are_printed_with_the_digits_they_have():
    """Review findings: levels 0.1, 0.1004 and 0.10004 all printed as 0.1; a 0-d array
    confidence was refused; plot() of hand-built rows without `nominal` raised KeyError."""
    rows = [
        {"alpha": a, "nominal": 1 - a, "coverage": 0.9, "mean_width": 1.0}
        for a in (0.1, 0.1004, 0.10004, 1 / 3)
    ]
    report = CoverageReport("M", "regression", "mean_width", 10, None, 0.99, 0.0, rows=rows)
    printed = [line.split()[:2] for line in str(report).splitlines()[2:6]]
    assert printed == [
        ["0.1", "0.900"], ["0.1004", "0.8996"], ["0.10004", "0.89996"], ["0.333", "0.667"]
    ]  # fmt: skip
    assert coverage_bounds(100, 0.1, 50, confidence=np.array(0.95)) == coverage_bounds(
        100, 0.1, 50, confidence=0.95
    )
    pytest.importorskip("matplotlib")
    bare = [{"alpha": 0.1, "coverage": 0.88, "mean_width": 1.0}]
    CoverageReport("M", "regression", "mean_width", 10, None, 0.99, 0.0, rows=bare).plot()


def test_evaluate_regressor_with_groups_and_one_level(regression_data):
    X, y, groups = regression_data
    model = SplitConformalRegressor(LinearRegression(), 0.1, "absolute")
    model.fit(X[:500], y[:500]).calibrate(X[500:1000], y[500:1000], groups=groups[500:1000])
    report = evaluate(model, X[1000:], y[1000:], alpha=0.1, groups=groups[1000:])
    assert len(report.rows) == 1 and report.rows[0]["alpha"] == 0.1
    table = report.by_group
    assert list(table.columns) == ["alpha", "group", "count", "coverage", "mean_width"]
    assert table["group"].tolist() == ["left", "right"]
    assert table["count"].sum() == 500
    intervals = model.predict_interval(X[1000:], alpha=0.1, groups=groups[1000:])
    right = groups[1000:] == "right"
    assert table["coverage"].iloc[1] == coverage(y[1000:][right], intervals[right])
    assert "per group" in str(report)
    json.dumps(report.to_dict())


def test_evaluate_classifier_with_string_labels(classification_data):
    X, labels = classification_data
    model = SplitConformalClassifier(LogisticRegression(), 0.1, "aps", random_state=0)
    model.fit(X[:500], labels[:500]).calibrate(X[500:1000], labels[500:1000])
    groups = np.where(X[1000:, 1] > 0, 1, 0)
    report = evaluate(model, X[1000:], labels[1000:], alpha=[0.1, 0.2], groups=None)
    assert report.task == "classification" and report.efficiency == "mean_set_size"
    sets = model.predict_set(X[1000:], alpha=[0.1, 0.2])
    frame = report.to_frame()
    np.testing.assert_allclose(frame["coverage"], coverage(labels[1000:], sets, model.classes_))
    np.testing.assert_allclose(frame["mean_set_size"], mean_set_size(sets))
    size = sets.sum(axis=1)
    np.testing.assert_allclose(frame["singleton_rate"], (size == 1).mean(axis=0))
    np.testing.assert_allclose(frame["empty_rate"], (size == 0).mean(axis=0))
    assert frame["inside_bounds"].all() and not frame["below_bounds"].any()
    assert "singleton" in str(report)
    # outside above (conservative) and outside below (a failure) are told apart
    topk = SplitConformalClassifier(LogisticRegression(), 0.1, "topk")
    topk.fit(X[:500], labels[:500]).calibrate(X[500:1000], labels[500:1000])
    above = evaluate(topk, X[1000:], labels[1000:], alpha=0.4).to_frame()
    assert not above["inside_bounds"][0] and not above["below_bounds"][0]
    shifted = labels[1000:].copy()
    shifted[: len(shifted) // 3] = np.roll(shifted[: len(shifted) // 3], 1)
    below = evaluate(model, X[1000:], shifted, alpha=0.1).to_frame()
    assert below["below_bounds"][0] and "BELOW" in str(evaluate(model, X[1000:], shifted, 0.1))
    # groups for a model calibrated without them: only the per-group table, checked for
    # length like any argument
    with pytest.raises(ValueError, match=r"groups"):
        evaluate(model, X[1000:], labels[1000:], groups=groups[1:])
    marginal = evaluate(model, X[1000:], labels[1000:], alpha=0.1, groups=groups)
    assert marginal.by_group["count"].tolist() == [np.sum(groups == g) for g in (0, 1)]
    with pytest.raises(ValueError, match=r"y_test.*not in `model\.classes_`"):
        evaluate(model, X[1000:1003], np.array(["cat", "fox", "eel"]))


def test_evaluate_classifier_mondrian_groups(classification_data):
    X, labels = classification_data
    groups = np.where(X[:, 1] > 0, "up", "down")
    model = SplitConformalClassifier(LogisticRegression(), 0.1, "lac")
    model.fit(X[:500], labels[:500]).calibrate(
        X[500:1000], labels[500:1000], groups=groups[500:1000]
    )
    report = evaluate(model, X[1000:], labels[1000:], alpha=(0.1, 0.2), groups=groups[1000:])
    table = report.by_group
    assert table["alpha"].tolist() == [0.1, 0.1, 0.2, 0.2]
    assert table["group"].tolist() == ["down", "up", "down", "up"]
    assert "mean_set_size" in table.columns
    json.dumps(report.to_dict())


def _convolved_bounds(calibration_sizes, test_sizes, alpha, confidence):
    law = np.ones(1)
    for n, m in zip(calibration_sizes, test_sizes, strict=True):
        law = np.convolve(law, coverage_count_pmf(n, alpha, m))
    cdf = np.cumsum(law / law.sum())
    tail = (1 - confidence) / 2
    total = sum(test_sizes)
    return np.searchsorted(cdf, tail) / total, np.searchsorted(cdf, 1 - tail) / total


def test_evaluate_judges_a_mondrian_model_by_its_strata_law(regression_data, classification_data):
    """Review finding: a Mondrian model was judged by the pooled law of all its calibration
    points, too narrow: a valid model was called BELOW up to 1.8 times too often. The exact
    law convolves the strata's beta-binomials (per group, and per true class when
    class-conditional)."""
    X, y, groups = regression_data
    model = SplitConformalRegressor(LinearRegression(), 0.1, "absolute")
    model.fit(X[:500], y[:500]).calibrate(X[500:600], y[500:600], groups=groups[500:600])
    report = evaluate(model, X[1000:], y[1000:], alpha=0.1, groups=groups[1000:])
    sizes = [np.sum(groups[500:600] == g) for g in ("left", "right")]
    tested = [np.sum(groups[1000:] == g) for g in ("left", "right")]
    expected = _convolved_bounds(sizes, tested, 0.1, 0.99)
    row = report.rows[0]
    assert (row["bound_low"], row["bound_high"]) == pytest.approx(expected, abs=0)
    pooled = coverage_bounds(100, 0.1, len(y) - 1000, confidence=0.99)
    assert tuple(pooled) != expected  # the pooled law's bounds, judged before
    X, labels = classification_data
    classifier = SplitConformalClassifier(LogisticRegression(), 0.2, "lac", class_conditional=True)
    classifier.fit(X[:500], labels[:500]).calibrate(X[500:700], labels[500:700])
    row = evaluate(classifier, X[1000:], labels[1000:], alpha=0.2).rows[0]
    classes = classifier.classes_
    sizes = [np.sum(labels[500:700] == c) for c in classes]
    tested = [np.sum(labels[1000:] == c) for c in classes]
    assert (row["bound_low"], row["bound_high"]) == pytest.approx(
        _convolved_bounds(sizes, tested, 0.2, 0.99), abs=0
    )


class _FakeRegionModel:
    """A multi-output model returning duck-typed regions, without n_calibration_."""

    def predict_set(self, X, alpha):
        return [Discs(np.full(len(X), 1.0 / a)) for a in alpha]


class _FakeIntervalModel:
    def __init__(self, shape_bug=False):
        self.shape_bug = shape_bug
        self.n_calibration_ = 99

    def predict_interval(self, X, alpha):
        n = len(X)
        if self.shape_bug:
            return np.zeros((n, 2))
        return np.stack([np.tile([-(1 - a) * 10, (1 - a) * 10], (n, 1)) for a in alpha], -1)


def test_evaluate_gives_no_verdict_for_weighted_calibration(regression_data):
    """Weighted models were judged by the unweighted law: a valid one fell below its
    99% bounds in up to 13% of resplits (shift review), reported as a failure."""
    X, y, _ = regression_data
    tilt = lambda Z: np.exp(0.5 * np.asarray(Z)[:, 0])  # noqa: E731
    weighted = SplitConformalRegressor(LinearRegression(), likelihood_ratio=tilt)
    weighted.fit(X[:300], y[:300]).calibrate(X[300:600], y[300:600])
    report = evaluate(weighted, X[600:], y[600:], alpha=(0.1, 0.2))
    assert all(row["inside_bounds"] is None and row["below_bounds"] is None for row in report.rows)
    assert all(row["bound_low"] < row["bound_high"] for row in report.rows)  # the yardstick
    assert "no verdict" in report.note and report.to_dict()["note"] == report.note
    text = str(report)
    assert "note: weighted calibration" in text and "yes" not in text and "BELOW" not in text
    plain = SplitConformalRegressor(LinearRegression()).fit(X[:300], y[:300])
    plain_report = evaluate(plain.calibrate(X[300:600], y[300:600]), X[600:], y[600:])
    assert plain_report.note is None and "note:" not in str(plain_report)
    assert all(isinstance(row["inside_bounds"], bool) for row in plain_report.rows)


def test_evaluate_gives_no_verdict_for_cross_conformal_models(regression_data):
    """CV+, jackknife+ and J+aB promise 1 - 2 alpha and have no exact law, yet the report
    judged them by split conformal's law with every training row as a calibration row
    (user review: "yes"/"BELOW" printed, although the docstring called it a yardstick)."""
    from uqconform import (
        CrossConformalClassifier,
        CrossConformalRegressor,
        JackknifeAfterBootstrapRegressor,
    )

    X, y, _ = regression_data
    for model in (
        CrossConformalRegressor(LinearRegression(), cv=3),
        JackknifeAfterBootstrapRegressor(LinearRegression(), n_bootstrap=10, random_state=0),
    ):
        model.fit(X[:300], y[:300])
        report = evaluate(model, X[600:], y[600:], alpha=(0.1, 0.2))
        assert all(r["inside_bounds"] is None and r["below_bounds"] is None for r in report.rows)
        assert all(r["bound_low"] < r["bound_high"] for r in report.rows)  # the yardstick
        text = str(report)
        assert "note: cross-conformal model" in text and "1 - 2 alpha" in text
        assert "yes" not in text and "BELOW" not in text
    labels = (y > np.median(y)).astype(int)
    classifier = CrossConformalClassifier(cv=3).fit(X[:300], labels[:300])
    report = evaluate(classifier, X[600:], labels[600:], alpha=0.1)
    assert report.rows[0]["inside_bounds"] is None and "cross-conformal" in report.note


def test_evaluate_says_why_a_model_without_a_calibration_count_gets_no_bounds():
    """FullConformalRidge's report printed "-" for bounds and verdict with no word why
    (user review)."""
    from uqconform import FullConformalRidge

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = X[:, 0] + rng.normal(size=300)
    report = evaluate(FullConformalRidge().fit(X[:200], y[:200]), X[200:], y[200:])
    assert all(np.isnan(row["bound_low"]) for row in report.rows)
    assert "no n_calibration_, so no bounds and no verdict" in str(report)
    # a Bayesian predictive is told it has no guarantee, not pointed to full conformal
    # prediction (stop 59's API review)
    from sklearn.neural_network import MLPRegressor

    from uqconform.bayes import LinearizedPredictive

    network = MLPRegressor(hidden_layer_sizes=(8,), max_iter=50, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # not converged in 50 iterations
        bayes = LinearizedPredictive(network, prior_precision=1.0).fit(X[:200], y[:200])
    note = evaluate(bayes, X[200:], y[200:]).note
    assert "Bayesian predictive has no coverage guarantee" in note and "full" not in note


def test_evaluate_multioutput_regions_and_missing_calibration_size():
    Y = np.array([[0.0, 5.0], [1.0, 0.0], [0.0, 9.0], [20.0, 0.0]])
    report = evaluate(_FakeRegionModel(), np.zeros((4, 1)), Y, alpha=(0.1, 0.2))
    frame = report.to_frame()
    np.testing.assert_allclose(frame["coverage"], [0.75, 0.5])  # radii 10 and 5
    np.testing.assert_allclose(frame["mean_volume"], [100 * np.pi, 25 * np.pi])
    assert report.task == "multioutput" and report.n_calibration is None
    assert frame["bound_low"].isna().all() and frame["inside_bounds"].isna().all()
    assert " - " in str(report)
    payload = report.to_dict()
    assert payload["n_calibration"] is None and payload["levels"][0]["inside_bounds"] is None


def test_evaluate_rejects_bad_models_and_outputs():
    X = np.zeros((3, 1))
    with pytest.raises(TypeError, match=r"model.*predict_interval nor predict_set"):
        evaluate(LinearRegression(), X, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"predict_interval.*shape"):
        evaluate(_FakeIntervalModel(shape_bug=True), X, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"y_test.*NaN"):
        evaluate(_FakeIntervalModel(), X, [1.0, np.nan, 3.0])
    with pytest.raises(ValueError, match=r"y_test.*2 rows.*3"):
        evaluate(_FakeIntervalModel(), X, [1.0, 2.0])
    with pytest.raises(ValueError, match=r"alpha"):
        evaluate(_FakeIntervalModel(), X, [1.0, 2.0, 3.0], alpha=1.5)
    with pytest.raises(ValueError, match=r"confidence"):
        evaluate(_FakeIntervalModel(), X, [1.0, 2.0, 3.0], confidence=2)
    with pytest.raises(ValueError, match=r"y_test.*None"):
        evaluate(_FakeIntervalModel(), X, None)
    report = evaluate(_FakeIntervalModel(), X, [1.0, 2.0, 30.0], alpha=0.5)
    assert report.rows[0]["coverage"] == pytest.approx(2 / 3)
    assert report.rows[0]["mean_width"] == pytest.approx(10.0)


def test_evaluate_refuses_a_multilabel_risk_controller_by_name():
    from sklearn.datasets import make_multilabel_classification

    from uqconform.classification import MultiLabelRiskController

    X, Y = make_multilabel_classification(
        n_samples=300, n_classes=4, allow_unlabeled=False, random_state=0
    )
    controller = MultiLabelRiskController(alpha=0.2).fit(X[:150], Y[:150])
    controller.calibrate(X[150:250], Y[150:250])
    for alpha in (0.1, (0.1, 0.2)):  # it read the sets as one multi-output region
        with pytest.raises(TypeError, match=r"MultiLabelRiskController.*multi-label risk"):
            evaluate(controller, X[250:], Y[250:], alpha=alpha)


def test_size_strata_refuse_one_float_for_bins_by_name():
    y, intervals = np.arange(4.0), np.c_[np.arange(4.0) - 1, np.arange(4.0) + np.arange(4.0)]
    for bins in (2.0, np.float64(3)):  # a count or one edge? (it said "edges must be ...")
        with pytest.raises(TypeError, match=r"`bins` must be .*integer number of bins"):
            size_stratified_coverage(y, intervals, bins=bins)


def test_evaluate_names_a_two_column_target_for_a_one_output_model_and_repeated_levels(
    regression_data,
):
    """Regression test: a 2-D y_test sent a one-output regressor down the multi-output
    path, which failed with a message about the shape of its own prediction; repeated
    levels gave duplicate rows."""
    X, y, _ = regression_data
    model = SplitConformalRegressor(LinearRegression()).fit(X[:500], y[:500])
    model.calibrate(X[500:1000], y[500:1000])
    for alpha in (0.1, [0.1, 0.2]):
        with pytest.raises(ValueError, match=r"`y_test` has 2 columns.*one output"):
            evaluate(model, X[1000:], np.column_stack([y[1000:], y[1000:]]), alpha=alpha)
    with pytest.raises(ValueError, match=r"`alpha` repeats a level: \[0\.1, 0\.1\]"):
        evaluate(model, X[1000:], y[1000:], alpha=[0.1, 0.1])
    one_column = evaluate(model, X[1000:], y[1000:, None], alpha=0.1)  # (n, 1) is one output
    flat = evaluate(model, X[1000:], y[1000:], alpha=0.1)
    for row in (one_column.rows[0], flat.rows[0]):
        row.pop("time_seconds")
    assert one_column.rows == flat.rows


# ---- plots -------------------------------------------------------------------------------


def test_report_plot(regression_data):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, y, _ = regression_data
    model = SplitConformalRegressor(LinearRegression(), 0.1, "absolute")
    model.fit(X[:500], y[:500]).calibrate(X[500:1000], y[500:1000])
    report = evaluate(model, X[1000:], y[1000:])
    try:
        axes = report.plot()
        assert len(axes) == 2
        assert axes[0].get_xlabel() == "nominal coverage (1 - alpha)"
        assert axes[1].get_ylabel() == "mean width"
        _, ax = plt.subplots()
        assert report.plot(ax=ax) is ax
        with pytest.raises(ValueError, match=r"ax"):
            report.plot(ax=[ax])
        infinite = evaluate(_FakeRegionModel(), np.zeros((2, 1)), np.zeros((2, 2)))
        infinite.rows[0]["mean_volume"] = math.inf
        infinite.plot()  # NaN bounds and an infinite efficiency draw without error
    finally:
        plt.close("all")


def test_plot_coverage_refuses_inverted_bounds():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from uqconform.evaluation import plot_coverage

    try:
        with pytest.raises(ValueError, match="low > high"):
            plot_coverage([0.8, 0.9], [0.8, 0.9], bounds=[[0.7, 0.85], [0.95, 0.85]])
        plot_coverage([0.8, 0.9], [0.8, 0.9], bounds=[[0.7, 0.85], [np.nan, np.nan]])
        # (2, k) bounds (coverage_bounds' rows stacked the other way) were reshaped silently
        for bad in ([[0.70, 0.90, 0.96], [0.80, 0.95, 0.99]], [0.7, 0.8, 0.9]):
            with pytest.raises(ValueError, match=r"`bounds` must have shape \(3, 2\)"):
                plot_coverage([0.8, 0.9, 0.95], [0.8, 0.9, 0.95], bounds=bad)
        plot_coverage([0.9], [0.88], bounds=[0.85, 0.95])  # one level: one pair
        with warnings.catch_warnings():  # no level measured: numpy warned "All-NaN slice"
            warnings.simplefilter("error")
            ax = plot_coverage([0.8, 0.9], [np.nan, np.nan])
        assert ax.lines[0].get_xdata().tolist() == [0.8, 1.0]  # the nominal line only
        cases = [
            (([], []), ValueError, "`nominal` is empty"),
            ((["a"], [0.9]), TypeError, "`nominal` must hold numbers"),
            (([90, 95], [0.9, 0.9]), ValueError, "`nominal`.*not percent"),
            (([0.9], [90.0]), ValueError, "`observed` holds coverages in"),
            (([0.9], [0.9], [0.85, np.inf]), ValueError, "`bounds` holds coverages in"),
        ]
        for args, error, match in cases:
            with pytest.raises(error, match=match):
                plot_coverage(*args)
    finally:
        plt.close("all")


def test_plot_efficiency_labels_infinite_points():
    """An infinite width sat at 1.1 x the largest finite one on a numeric axis, where it
    read as a number; it now carries the infinity sign."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from uqconform.evaluation import plot_efficiency

    try:
        ax = plot_efficiency([0.8, 0.9, 0.99], [1.2, 2.3, np.inf], ylabel="mean width")
        labels = [text.get_text() for text in ax.texts]
        assert labels == ["\u221e"]
        assert ax.texts[0].xy[0] == 0.99
        ax = plot_efficiency([0.8, 0.9], [1.2, 2.3])
        assert not ax.texts
        # a level not measured (NaN) is left out, not drawn as infinite
        ax = plot_efficiency([0.8, 0.9, 0.95], [1.2, np.nan, 2.0])
        assert not ax.texts and ax.get_legend() is None
        np.testing.assert_array_equal(ax.lines[0].get_xdata(), [0.8, 0.95])
        with pytest.raises(ValueError, match="`efficiency` must be non-negative"):
            plot_efficiency([0.8, 0.9], [1.2, -np.inf])
        with pytest.raises(ValueError, match=r"`nominal`.*fractions, not percent"):
            plot_efficiency([80, 90], [1.2, 2.3])
    finally:
        plt.close("all")


def test_plot_intervals():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.array([3.0, 1.0, 2.0, 0.0])
    bands = np.column_stack([x - 1, x + 1])
    bands_k = np.stack([bands, bands * 2 + np.array([-1, 1])], axis=-1)
    bands_k[0, 1, 1] = np.inf
    before = bands_k.copy()
    try:
        ax = plot_intervals(x, x + np.array([0.0, 0.5, 3.0, 0.0]), bands)
        assert len(ax.collections) == 3  # one band, covered and missed points
        ax = plot_intervals(x[:, None], None, bands_k, labels=["90%", "95%"])
        assert len(ax.collections) == 2
        np.testing.assert_array_equal(bands_k, before)
        # review finding: with one unbounded band per level the first level was taken for
        # the narrowest; points are judged against the narrow one whichever comes first
        xs = np.arange(6.0)
        ys = xs + np.array([0.0, 1.0, -1.0, 1.0, -1.0, 0.0])
        wide, narrow = np.c_[xs - 5, xs + 5], np.c_[xs - 0.5, xs + 0.5]
        wide[0] = narrow[0] = [-np.inf, np.inf]
        for levels in ([wide, narrow], [narrow, wide]):
            ax = plot_intervals(xs, ys, np.stack(levels, axis=-1))
            label = "not covered by the narrowest band"  # several levels: says which one
            missed = next(c for c in ax.collections if c.get_label() == label)
            assert len(missed.get_offsets()) == 4
        ax = plot_intervals(xs, ys, np.stack([wide, narrow], axis=-1), labels=["95%", "50%"])
        legend = {c.get_label() for c in ax.collections}
        assert {"covered (50%)", "not covered (50%)"} <= legend  # (user review)
        ax = plot_intervals(x, x, bands)  # one level: plain labels
        assert {"covered", "not covered"} <= {c.get_label() for c in ax.collections}
        with pytest.raises(ValueError, match=r"x.*1-D"):
            plot_intervals(np.zeros((4, 2)), None, bands)
        with pytest.raises(ValueError, match=r"intervals.*3 rows"):
            plot_intervals(x, None, bands[:3])
        with pytest.raises(ValueError, match=r"y.*3 entries"):
            plot_intervals(x, x[:3], bands)
        with pytest.raises(ValueError, match=r"labels"):
            plot_intervals(x, None, bands, labels=["a", "b"])
        with pytest.raises(ValueError, match=r"intervals.*lower > upper"):
            plot_intervals(x, None, bands[:, ::-1])
        with pytest.raises(ValueError, match=r"`y` contains 1 NaN"):  # was drawn as covered
            plot_intervals(x, np.array([0.0, np.nan, 1.0, 2.0]), bands)
        with pytest.raises(ValueError, match=r"`x` contains 1 NaN"):
            plot_intervals(np.array([0.0, np.nan, 1.0, 2.0]), None, bands)
        with pytest.raises(ValueError, match=r"`y` must be 1-D, got shape \(4, 2\)"):
            plot_intervals(x, bands, bands)
        # dates stay dates on the axis (they were cast to nanoseconds), NaT is named
        dates = pd.date_range("2024-01-01", periods=4, freq="D").to_numpy()
        ax = plot_intervals(dates, None, bands)
        assert ax.get_xlim()[1] < 1e6  # matplotlib's day numbers, not 1.7e18 nanoseconds
        with pytest.raises(ValueError, match=r"`x` contains 1 missing values \(NaN/NaT\)"):
            plot_intervals(np.array([*dates[:3], np.datetime64("NaT")]), None, bands)
    finally:
        plt.close("all")


def test_plotting_without_matplotlib_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    report = CoverageReport("M", "regression", "mean_width", 1, 1, 0.99, 0.0, rows=[])
    with pytest.raises(ImportError, match=r'pip install "uqconform\[plot\]"'):
        report.plot()
    with pytest.raises(ImportError, match=r'pip install "uqconform\[plot\]"'):
        plot_intervals([0.0], None, np.array([[0.0, 1.0]]))


def test_box_arrays_of_multi_output_regressors():
    """Boxes (n, d, 2) have each output's bounds on the last axis: mean_volume takes them,
    and mean_width's error on them says what to use (regression test: a misleading
    'lower > upper' message and no public box volume)."""
    rng = np.random.default_rng(0)
    lower = rng.normal(size=(50, 3))
    boxes = np.stack([lower, lower + rng.uniform(0.5, 2.0, size=(50, 3))], axis=2)
    volume = np.prod(boxes[..., 1] - boxes[..., 0], axis=1).mean()
    assert mean_volume(boxes) == pytest.approx(volume)
    # level axis last: doubling both bounds doubles each of the 3 side lengths
    two_levels = np.stack([boxes, boxes * 2], axis=3)
    np.testing.assert_allclose(mean_volume(two_levels), [volume, 2**3 * volume])
    swapped = boxes.copy()
    swapped[:, 1, :] = boxes[:, 0, :] - 5.0  # read as (n, 2, k) intervals: lower > upper
    with pytest.raises(ValueError, match="mean_volume"):
        mean_width(swapped[:, :2, :])


def test_integer_labels_without_a_zero_warn_without_classes():
    sets = np.array([[True, False, False, False]] * 4)
    with pytest.warns(UserWarning, match="labels 1..3 and no 0"):  # exactly 1..K-1
        assert coverage([1, 1, 2, 3], sets) == 0.0
    assert coverage([1, 1, 2, 3], sets, classes=[1, 2, 3, 4]) == 0.5
    # a per-class loop over 1-based classes: one label, read as a column all the same; the
    # sets hold the column before it (label - 1) on both rows, the label's column on none
    shifted = np.array([[False, True, False, False]] * 2)
    with pytest.warns(UserWarning, match=r"no label 0.*classes=model\.classes_"):
        assert coverage([2, 2], shifted) == 0.0
    with warnings.catch_warnings():  # the label's own column covers: no sign of a shift
        warnings.simplefilter("error")
        assert coverage([2, 2], np.array([[False, True, True, False]] * 2)) == 1.0
        assert coverage([2, 2], sets[:2]) == 0.0  # neither reading covers


def test_one_based_labels_on_some_rows_warn_without_classes():
    """Labels 1..K read as column indices on a subset of rows (one class's rows, a small test
    set lacking classes) gave a wrong coverage silently: 0.0 on wine's class 1, truly 0.79
    (regression test; only the labels 1..K-1 exactly warned, and K itself is refused)."""
    from sklearn.datasets import load_wine

    X, y = load_wine(return_X_y=True)
    y = y + 1  # classes 1, 2, 3, as in the UCI file
    order = np.random.default_rng(0).permutation(y.size)
    X, y = X[order], y[order]
    model = LogisticRegression(max_iter=5000)
    clf = SplitConformalClassifier(model, alpha=0.2).fit(X[:60], y[:60])
    clf.calibrate(X[60:120], y[60:120])
    sets, y_test = clf.predict_set(X[120:]), y[120:]
    one = y_test == 1
    right = coverage(y_test[one], sets[one], classes=clf.classes_)
    assert right > 0.5
    for rows in (one, y_test < 3, y_test == 2):
        with pytest.warns(
            UserWarning, match=r"no (label )?0.*classes=model\.classes_.*coverage_by_group"
        ):
            coverage(y_test[rows], sets[rows])
        with pytest.warns(UserWarning, match="no (label )?0"):
            size_stratified_coverage(y_test[rows], sets[rows])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert coverage(y_test[one], sets[one], classes=clf.classes_) == right
        # labels 0..K-1 with a 0 among them, and the positives of two classes: silent
        assert coverage(y_test - 1, sets) == coverage(y_test, sets, classes=clf.classes_)
        size_stratified_coverage(y_test - 1, sets)
        assert coverage([1, 1], np.array([[False, True], [True, False]])) == 0.5


def test_regions_with_one_output_take_a_one_dimensional_target_and_empty_ones_refuse():
    from uqconform.regions import AffineMap, PredictionRegion

    line = PredictionRegion(AffineMap(np.zeros((3, 1)), np.ones((1, 1))), 1.0)
    y = np.array([0.5, 2.0, -1.0])
    assert coverage(y, line) == coverage(y[:, None], line) == pytest.approx(2 / 3)
    plane = PredictionRegion(AffineMap(np.zeros((3, 2)), np.ones((1, 2))), 1.0)
    with pytest.raises(ValueError, match=r"shape \(n, d\) for regions"):
        coverage(y, plane)
    with pytest.raises(ValueError, match="no rows"):
        mean_volume(line[np.array([], dtype=int)])  # was NaN with numpy warnings


def test_layout_mistakes_are_named():
    """Students swap the arguments or put the levels on the middle axis."""
    y = np.zeros(10)
    intervals = np.column_stack([y - 1, y + 1])
    with pytest.raises(
        ValueError, match=r"were the arguments swapped\? .* \(y_true, prediction\)"
    ):
        coverage(intervals, y)
    levels_in_the_middle = np.stack([intervals] * 3, axis=1)  # (n, k, 2)
    with pytest.raises(TypeError, match=r"np\.moveaxis\(prediction, 1, 2\)"):
        coverage(y, levels_in_the_middle)
    assert coverage(y, np.moveaxis(levels_in_the_middle, 1, 2)).tolist() == [1.0] * 3


def test_edge_cases_from_an_evaluation_audit():
    """A box with a zero-width side is a null set even beside an infinite side (was NaN);
    float intervals with 0/1 bounds are intervals to `mean_width` (no set warning); a
    confidence too close to 1 for exact tails is refused; empty input says what is
    missing."""
    boxes = np.array([[[0.0, 0.0], [-np.inf, np.inf]], [[0.0, 1.0], [0.0, 2.0]]])  # (n, d, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy "invalid value" warning from 0 * inf
        assert mean_volume(boxes) == 1.0  # (0 + 2) / 2
        assert mean_width(np.array([[0.0, 1.0], [0.0, 1.0]])) == 1.0
    with pytest.raises(ValueError, match=r"at most 1 - 1e-12"):
        coverage_bounds(100, 0.1, 100, confidence=1 - 1e-15, n_repeats=20)
    assert coverage_bounds(100, 0.1, 100, confidence=1 - 1e-12)[0] < 0.9
    with pytest.raises(ValueError, match="`intervals` is empty: at least one row"):
        mean_width(np.zeros((0, 2)))


def test_evaluate_names_the_arguments_the_user_passed():
    from sklearn.linear_model import Ridge

    from uqconform.evaluation import evaluate
    from uqconform.regression import SplitConformalRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = X @ [1.0, 2.0] + rng.normal(size=300)
    model = SplitConformalRegressor(Ridge()).fit(X[:100], y[:100])
    model.calibrate(X[100:200], y[100:200])
    with pytest.raises(ValueError, match="`y_test` has 99 rows but `X_test` has 100"):
        evaluate(model, X[200:], y[200:299], alpha=0.1)
    with pytest.raises(ValueError, match="`groups` has 3 entries but `y_test` has 100"):
        evaluate(model, X[200:], y[200:], alpha=0.1, groups=[0, 1, 0])
    with pytest.raises(ValueError, match="`groups` has 99 entries but `y_test` has 100"):
        evaluate(model, X[200:], y[200:], alpha=0.1, groups=np.zeros((99, 1)))  # a column


def test_group_volumes_keep_nan_and_inf_apart():
    """A NaN volume gives a NaN group mean (as mean_volume), an infinite one inf."""

    class Region:
        dim = 2

        def __len__(self):
            return 4

        def contains(self, Y):
            return np.ones(len(Y), bool)

        def volume(self):
            return np.array([1.0, np.nan, 3.0, np.inf])

    table = coverage_by_group(np.zeros((4, 2)), Region(), ["a", "a", "b", "c"])
    assert math.isnan(mean_volume(Region()))
    assert math.isnan(table.loc["a", "mean_volume"])
    assert table.loc["b", "mean_volume"] == 3.0
    assert table.loc["c", "mean_volume"] == np.inf


def test_a_hand_built_report_row_below_its_bounds_prints_below():
    row = {"alpha": 0.1, "nominal": 0.9, "coverage": 0.8865, "bound_low": 0.887,
           "bound_high": 0.91, "mean_width": 1.0}  # fmt: skip
    report = CoverageReport("M", "regression", "mean_width", 2000, 1000, 0.99, 0.0, rows=[row])
    assert "BELOW" in str(report)
    report.rows[0]["coverage"] = 0.9
    assert " yes " in str(report)


def test_findings_of_the_evaluation_review_at_the_edges():
    """Review findings, each silent before: mixed-type group labels in a list merged (numpy
    read 1 and "1" as the same string), text targets were read as numbers, a billion-fold
    calibration set gave bounds off by a count, and confidence 1 - 1e-9 printed as 100%."""
    y = np.array([0.0, 1.0, 2.0, 3.0])
    intervals = np.array([[-1.0, 1.5]] * 4)
    table = coverage_by_group(y, intervals, groups=[1, "1", 2, "2"])
    assert table["count"].tolist() == [1, 1, 1, 1]
    assert [table.loc[table.index.map(repr) == repr(g), "coverage"].item() for g in
            (1, "1", 2, "2")] == [1.0, 1.0, 0.0, 0.0]  # fmt: skip
    for text in (["0", "1", "2", "5"], pd.Series(["0", "1", "2", "5"]),
                 pd.Series(["0", "1", "2", "5"], dtype="string"),
                 np.array(["0", 1, 2, 5], dtype=object)):  # fmt: skip
        with pytest.raises(TypeError, match="`y_true` must be numeric"):
            coverage(text, intervals)
    with pytest.raises(ValueError, match="`n_calibration` must be at most 1e12"):
        coverage_bounds(10**13, 0.1, 100)
    row = {"alpha": 0.1, "nominal": 0.9, "coverage": 0.9, "bound_low": 0.8,
           "bound_high": 0.95, "mean_width": 1.0}  # fmt: skip
    report = CoverageReport("M", "regression", "mean_width", 100, 1000, 1 - 1e-9, 0.0, [row])
    assert "99.9999999% bounds" in str(report)


def test_a_test_set_too_large_for_the_law_is_refused_by_name():
    """A huge ``n_test`` failed with numpy's TypeError (an integer beyond 64 bits) or ran for
    minutes on a window of a billion counts; scipy's beta-binomial spread is also wrong
    beyond 1e9 test points, so the window is sized by the moments' formulas."""
    with pytest.raises(ValueError, match=r"`n_test` x `n_repeats` must be at most 1e15"):
        coverage_bounds(100, 0.1, 10**20)
    with pytest.raises(ValueError, match=r"`n_test` x `n_repeats` must be at most 1e15"):
        coverage_bounds(100, 0.1, np.int64(2**32), n_repeats=np.int64(2**32))  # wrapped to 0
    with pytest.raises(ValueError, match=r"`n_test` = 1000000000 with `n_calibration` = 100"):
        coverage_bounds(100, 0.1, 10**9)
    with pytest.raises(ValueError, match=r"the pmf would hold more than"):
        coverage_count_pmf(100, 0.1, 10**7, n_repeats=10)
    # with many calibration points the law is narrow: a trillion test points still work,
    # and the bounds are those of the normal approximation of two independent binomials
    low, high = coverage_bounds(10**12, 0.1, 10**12)
    half = stats.norm.ppf(0.995) * math.sqrt(0.09e-12 * 2)
    assert low == pytest.approx(0.9 - half, abs=1e-9)
    assert high == pytest.approx(0.9 + half, abs=1e-9)


def test_box_volumes_refuse_the_keywords_of_monte_carlo_volumes():
    """A box array's volume is exact; ``n_samples`` and the like were silently ignored."""
    boxes = np.array([[[0.0, 1.0], [0.0, 2.0]]])
    assert mean_volume(boxes) == 2.0
    with pytest.raises(TypeError, match=r"keywords \['n_samples'\] apply to region objects"):
        mean_volume(boxes, n_samples=500)


def test_the_law_stays_exact_with_a_trillion_calibration_points_and_many_repeats():
    """scipy's beta-binomial lost digits with many calibration points (relative errors of
    5e-3 at 1e12), and the unnormalised window was raised to the power n_repeats: zero-
    width bounds at a million repeats, an IndexError at 5e7, bounds shifted by a fifth of
    their half-width at 100 test points. Against exact rational arithmetic, and the pooled
    bounds against the normal law they tend to."""
    from fractions import Fraction

    from uqconform.evaluation.bounds import _beta_binomial_pmf

    def rising(x, k):
        return math.prod(range(x, x + k))

    m = 40
    for n_calibration in (10**5, 10**9, 10**12):
        b = math.floor((n_calibration + 1) * 0.1)
        a = n_calibration + 1 - b
        exact = [
            Fraction(math.comb(m, k) * rising(a, k) * rising(b, m - k), rising(a + b, m))
            for k in range(m + 1)
        ]
        got = _beta_binomial_pmf(np.arange(m + 1), m, a, b)
        reference = np.array([float(p) for p in exact])
        kept = reference > 1e-300
        np.testing.assert_allclose(got[kept], reference[kept], rtol=1e-12)
    for n_test, n_repeats in ((10**6, 10**6), (100, 10**6), (10**4, 5 * 10**7)):
        low, high = coverage_bounds(10**12, 0.1, n_test, n_repeats=n_repeats)
        sd = math.sqrt(0.09 / (n_test * n_repeats) + 0.09 / 10**12 / n_repeats)
        half = stats.norm.ppf(0.995) * sd
        assert low == pytest.approx(0.9 - half, abs=0.02 * half + 1 / (n_test * n_repeats))
        assert high == pytest.approx(0.9 + half, abs=0.02 * half + 1 / (n_test * n_repeats))


@pytest.mark.parametrize(
    "y_true",
    [
        pd.to_datetime(["2020-01-01", "2020-01-02"]),
        pd.Series(pd.to_timedelta([1, 2], "s")),
        np.array([1 + 1j, 3]),
    ],
)
def test_dates_durations_and_complex_targets_are_refused(y_true):
    """Review finding: dates were read as nanoseconds since 1970 and complex targets lost
    their imaginary part, silently."""
    with pytest.raises(TypeError, match=r"`y_true` must be numeric.*got dtype"):
        coverage(y_true, np.array([[0.0, 2.0]] * 2))


def test_report_prints_the_efficiency_column_with_its_trailing_zeros():
    """Printed with ":.4g", set sizes read 1, 0.8 and 0.64 beside 1.000 and 0.800 in the
    singleton column, and a width 160 beside 228.9."""
    rows = [
        {"alpha": a, "nominal": 1 - a, "coverage": 0.9, "mean_set_size": size}
        for a, size in ((0.05, 1.0), (0.1, 0.8), (0.2, 0.64))
    ]
    text = str(CoverageReport("M", "classification", "mean_set_size", 10, 20, 0.99, 0.0, rows))
    sizes = [line.split()[-3] for line in text.splitlines()[2:]]
    assert sizes == ["1.000", "0.8000", "0.6400"], text


def test_report_prints_the_nominal_level_in_full_and_no_verdict_for_nan_coverage():
    """alpha 0.0025 printed its nominal level as 0.998, and a row with NaN coverage was
    called "above" its bounds."""
    rows = [
        {"alpha": 0.0025, "coverage": 0.99, "bound_low": 0.98, "bound_high": 1.0},
        {"alpha": 0.1, "coverage": math.nan, "bound_low": 0.85, "bound_high": 0.95},
        {"alpha": 1 / 3, "coverage": 0.7, "bound_low": 0.6, "bound_high": 0.75},
    ]
    lines = str(CoverageReport("M", "regression", "mean_width", 10, 20, 0.99, 0.0, rows))
    first, second, third = lines.splitlines()[2:5]
    assert first.split()[1] == "0.9975" and second.split()[1] == "0.900"
    assert third.split()[1] == "0.667"  # no short decimal holds it: 3 places, in its column
    assert "above" not in second and "BELOW" not in second and " - " in second


def test_pandas_groups_in_another_row_order_than_the_targets_are_refused():
    """Review finding: with an array `X_test`, a pandas `groups` indexed by `y_test`'s
    labels in another order was paired by position (coverage 0.770 against 0.933 aligned),
    and `coverage_by_group` swapped the groups' coverages."""
    import pandas as pd

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    groups = pd.Series(np.where(X[:, 0] > 0, "a", "b"))
    y = pd.Series(X @ [1.0, 1.0] + rng.normal(size=300) * np.where(groups == "a", 3, 0.3))
    model = SplitConformalRegressor(LinearRegression()).fit(X[:100], y[:100])
    model.calibrate(X[100:200], y[100:200], groups=groups[100:200])
    y_test, g_test = y[200:], groups[200:]
    shuffled = g_test.sample(frac=1, random_state=0)
    with pytest.raises(ValueError, match=r"`groups` is indexed by the row labels of `y_test`"):
        evaluate(model, X[200:], y_test, groups=shuffled)
    report = evaluate(model, X[200:], y_test, groups=g_test)  # aligned: fine
    intervals = model.predict_interval(X[200:], groups=g_test)
    with pytest.raises(ValueError, match=r"`groups` is indexed by the row labels of `y_true`"):
        coverage_by_group(y_test, intervals, groups=g_test[::-1])
    table = coverage_by_group(y_test, intervals, groups=g_test)
    overall = float(table["count"] @ table["coverage"]) / 100
    frame = report.to_frame()
    assert frame.loc[frame["alpha"] == model.alpha, "coverage"].item() == pytest.approx(overall)


def test_a_classifier_is_evaluated_on_one_label_per_row():
    """Review finding: one-hot or two-column labels got a message about `prediction` (the
    user passed none), and a one-column label frame was refused."""
    import pandas as pd

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    labels = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
    model = SplitConformalClassifier(LogisticRegression()).fit(X[:100], labels[:100])
    model.calibrate(X[100:200], labels[100:200])
    flat = evaluate(model, X[200:], labels[200:], alpha=0.1).to_frame()
    column = evaluate(model, X[200:], pd.DataFrame({"label": labels[200:]}), alpha=0.1)
    pd.testing.assert_frame_equal(column.to_frame().drop(columns="time_seconds"),
                                  flat.drop(columns="time_seconds"))  # fmt: skip
    with pytest.raises(ValueError, match=r"`y_test` has 3 columns.*one label per row"):
        evaluate(model, X[200:], np.eye(3, dtype=int)[labels[200:]], alpha=0.1)


def test_rows_of_an_unseen_group_are_warned_about_once():
    """Review finding (stop 50): `evaluate` printed the unseen-group warning twice, once
    from the prediction and once more from the exact law of the Mondrian coverage."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = X @ [1.0, 2.0, 3.0] + rng.normal(size=600)
    groups = rng.integers(0, 3, 600)
    model = SplitConformalRegressor(LinearRegression()).fit(X[:200], y[:200])
    model.calibrate(X[200:400], y[200:400], groups=groups[200:400])
    test_groups = groups[400:].copy()
    test_groups[:5] = 7  # no calibration row
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = evaluate(model, X[400:], y[400:], alpha=0.1, groups=test_groups)
    unseen = [w for w in caught if "without calibration data" in str(w.message)]
    assert len(unseen) == 1
    assert "5 rows belong to groups without calibration data (e.g. 7)" in str(unseen[0].message)
    assert all(row["inside_bounds"] is not None for row in report.rows)


def test_the_per_group_table_prints_levels_as_given():
    """Review finding (user): the per-group table printed alpha as 0.05000 and 0.1000."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = X @ [1.0, 2.0, 3.0] + rng.normal(size=600)
    model = SplitConformalRegressor(LinearRegression()).fit(X[:200], y[:200])
    model.calibrate(X[200:400], y[200:400])
    text = str(evaluate(model, X[400:], y[400:], alpha=[0.05, 0.1], groups=X[400:, 0] > 0))
    table = text.split("per group:\n")[1].splitlines()
    assert table[0].split() == ["alpha", "group", "count", "coverage", "mean_width"]
    assert {line.split()[0] for line in table[1:]} == {"0.05", "0.1"}


def test_evaluating_on_the_calibration_or_training_rows_is_warned_about():
    """Review finding (user): `evaluate` on the calibration rows always printed "yes" (the
    coverage there is fixed by construction) without a word."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = X @ [1.0, 2.0, 3.0] + rng.normal(size=600)
    model = SplitConformalRegressor(LinearRegression()).fit(X[:200], y[:200])
    model.calibrate(X[200:400], y[200:400])
    with pytest.warns(UserWarning, match="evaluate got the rows `model` was calibrated on"):
        evaluate(model, pd.DataFrame(X[200:400]), list(y[200:400]), alpha=0.1)
    with pytest.warns(UserWarning, match="evaluate got the rows `model` was trained on"):
        evaluate(model, X[:200], y[:200], alpha=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # held-out rows, or the calibration rows shuffled
        evaluate(model, X[400:], y[400:], alpha=0.1)
        evaluate(model, X[200:400][::-1], y[200:400][::-1], alpha=0.1)
    # CV+ and full CP calibrate on their training rows (diffrev5: no warning)
    from uqconform import CrossConformalRegressor, FullConformalRidge

    for whole in (CrossConformalRegressor(LinearRegression(), cv=3), FullConformalRidge()):
        whole.fit(X[:200], y[:200])
        with pytest.warns(UserWarning, match="evaluate got the rows `model` was trained on"):
            evaluate(whole, X[:200], y[:200], alpha=0.1)


@pytest.mark.parametrize("method", ["EnbPI", "KOWCPI"])
def test_evaluate_runs_a_time_series_model_online_on_a_copy(method):
    """Review finding (stop 52): `evaluate` called predict_interval(X_test) without `y` on a
    time-series model, so no residual was absorbed and ACI never moved (on the set-up below,
    at alpha 0.1: 0.42 coverage for EnbPI and 0.31 for KOWCPI, where the online protocol
    gives 0.89 and 0.87); it now runs the online protocol on a copy and leaves the model as
    it was."""
    from uqconform.timeseries import KOWCPI, EnbPI

    rng = np.random.default_rng(0)
    t = np.arange(700)
    X = np.c_[np.sin(t / 20), np.cos(t / 35)]
    y = X @ [1.0, -1.0] + np.where(t < 450, 0.5, 2.0) * rng.normal(size=700)  # shift at 450
    make = {
        "EnbPI": lambda: EnbPI(LinearRegression(), n_bootstrap=10, aci_gamma=0.01),
        "KOWCPI": lambda: KOWCPI(
            LinearRegression(), window=2, n_bootstrap=10, finite_sample=False, aci_gamma=0.01
        ),
    }[method]
    model = make().set_params(random_state=0).fit(X[:400], y[:400])
    untouched = copy.deepcopy(model)
    levels = [0.1, 0.2]
    report = evaluate(model, X[400:], y[400:], alpha=levels)
    online = copy.deepcopy(model).predict_interval(X[400:], y=y[400:], alpha=levels)
    assert [row["coverage"] for row in report.rows] == coverage(y[400:], online).tolist()
    offline = coverage(y[400:], copy.deepcopy(model).predict_interval(X[400:], alpha=levels))
    assert report.rows[0]["coverage"] > offline[0]  # the levels and the memory moved
    assert "online" in report.note and "copy of the model" in report.note
    # the model passed is unchanged: its state, and what it predicts next
    assert model.n_steps_ == untouched.n_steps_
    assert model.effective_sample_sizes_ == untouched.effective_sample_sizes_
    np.testing.assert_array_equal(model.memory_, untouched.memory_)
    np.testing.assert_array_equal(model.coverage_history_, untouched.coverage_history_)
    assert model.__dict__.get("aci_alphas_", {}) == untouched.__dict__.get("aci_alphas_", {})
    np.testing.assert_array_equal(
        model.predict_interval(X[400:], y=y[400:], alpha=levels),
        untouched.predict_interval(X[400:], y=y[400:], alpha=levels),
    )


def test_reports_compare_by_value_with_a_group_table_and_nan_bounds(regression_data):
    """Review finding (stop 52): `==` raised "truth value of a DataFrame is ambiguous" for a
    report with a per-group table, and a report with NaN bounds differed from its pickled
    copy."""
    X, y, groups = regression_data
    model = SplitConformalRegressor(LinearRegression()).fit(X[:300], y[:300])
    model.calibrate(X[300:600], y[300:600])
    report = evaluate(model, X[600:], y[600:], alpha=[0.1, 0.2], groups=groups[600:])
    copied = pickle.loads(pickle.dumps(report))
    assert report == copied and report == copy.deepcopy(report) and report in [copied]
    assert not report != copied
    changed = copy.deepcopy(report)
    changed.by_group.loc[0, "coverage"] += 0.5
    assert report != changed
    assert report != evaluate(model, X[600:], y[600:], alpha=[0.1, 0.2])  # no table
    rows = [{"alpha": 0.1, "coverage": 0.9, "bound_low": math.nan, "bound_high": math.nan}]
    unjudged = CoverageReport("M", "regression", "mean_width", 10, None, 0.99, 0.01, rows=rows)
    assert unjudged == pickle.loads(pickle.dumps(unjudged))
    assert unjudged != "M"
    with pytest.raises(TypeError, match="unhashable"):
        hash(report)


def test_the_dict_of_a_report_grouped_by_dates_or_periods_is_json(regression_data):
    """Review finding (stop 52): `to_dict()` kept Timestamp and Period group labels, which
    json.dumps refuses."""
    X, y, _ = regression_data
    model = SplitConformalRegressor(LinearRegression()).fit(X[:300], y[:300])
    model.calibrate(X[300:600], y[300:600])
    pick = np.random.default_rng(0).integers(0, 3, 900)
    months = pd.date_range("2024-01-01", periods=3, freq="MS")
    periods = pd.period_range("2024-01", periods=3, freq="M")
    cases = [
        (months.to_numpy()[pick], [stamp.isoformat() for stamp in months]),  # datetime64
        (np.array(list(months), dtype=object)[pick], [stamp.isoformat() for stamp in months]),
        (periods[pick], [str(period) for period in periods]),
    ]
    for groups, labels in cases:
        report = evaluate(model, X[600:], y[600:], alpha=0.1, groups=groups)
        loaded = json.loads(json.dumps(report.to_dict()))
        assert [row["group"] for row in loaded["by_group"]] == labels
        assert [row["count"] for row in loaded["by_group"]] == np.bincount(pick).tolist()


def test_plot_intervals_judges_points_by_the_level_unbounded_on_fewest_rows():
    """Review finding (stop 52): with both levels unbounded on most rows the median widths
    tied at inf and the widest level was taken for the narrowest: 8 of 8 points outside
    the narrow band were drawn as covered."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.linspace(0.0, 1.0, 20)
    y = x + 0.5
    try:
        for unbounded_narrow in (12, 11):  # as many unbounded rows as the wide level, fewer
            wide, narrow = np.c_[x - 1, x + 1], np.c_[x - 0.1, x + 0.1]
            wide[:12] = [-np.inf, np.inf]
            narrow[:unbounded_narrow] = [-np.inf, np.inf]
            outside = int(np.sum((y < narrow[:, 0]) | (y > narrow[:, 1])))
            assert outside > 0 and np.all((wide[:, 0] <= y) & (y <= wide[:, 1]))
            for levels in ([wide, narrow], [narrow, wide]):
                ax = plot_intervals(x, y, np.stack(levels, axis=-1))
                missed = next(c for c in ax.collections if c.get_label().startswith("not covered"))
                assert len(missed.get_offsets()) == outside
                plt.close("all")
    finally:
        plt.close("all")


def test_integer_sets_are_told_to_be_cast_to_bool():
    """Review finding (stop 52): mean_set_size of 0/1 integers did not say how to fix them."""
    with pytest.raises(TypeError, match=r"sets.*int.*sets\.astype\(bool\)"):
        mean_set_size(SETS.astype(int))
    with pytest.raises(TypeError, match=r"boolean array") as refused:
        mean_set_size(np.array([[0, 2], [1, 1]]))  # labels, not indicators: no such advice
    assert "astype" not in str(refused.value)


def test_a_text_confidence_is_refused_as_the_wrong_type():
    """Review finding (stop 52): confidence="0.9" was refused as out of range, not as text."""
    X = np.zeros((3, 1))
    for text in ("0.9", True):
        with pytest.raises(ValueError, match=r"confidence.*a float in \(0, 1\).*(str|bool)"):
            evaluate(_FakeIntervalModel(), X, [1.0, 2.0, 3.0], confidence=text)
    with pytest.raises(ValueError, match=r"confidence.*strictly between 0 and 1"):
        evaluate(_FakeIntervalModel(), X, [1.0, 2.0, 3.0], confidence=1.5)


def test_pooled_resplits_too_many_to_hold_are_refused_naming_n_repeats():
    """Review finding (stop 54): the window guard covered one resplit only, so 1e12 resplits
    of 100 test points ran 80 s into a bare MemoryError. The pooled window is now sized
    first and refused, with the normal law the pooled coverage follows; 1e8 resplits still
    compute, and agree with that law."""
    with pytest.raises(ValueError, match=r"`n_repeats` = 1000000000000.*n_repeats") as refused:
        coverage_bounds(100, 0.1, 100, n_repeats=10**12)
    hint = re.search(r"scipy\.stats\.norm\(([^,]+), ([^)]+)\)\.interval", str(refused.value))
    assert hint is not None
    mean, sd = float(hint.group(1)), float(hint.group(2))
    assert mean == pytest.approx(91 / 101)  # a / (a + b), the Beta law's mean
    low, high = coverage_bounds(100, 0.1, 100, n_repeats=10**8)  # 1e4 times fewer
    normal = stats.norm(mean, sd * 100).interval(0.99)
    half = (normal[1] - normal[0]) / 2
    assert low == pytest.approx(normal[0], abs=0.02 * half + 1e-10)
    assert high == pytest.approx(normal[1], abs=0.02 * half + 1e-10)
    # few resplits of a skewed Beta law are not normal (diffrev11: 1% below the normal
    # 99% interval at 2 resplits): the refusal says to simulate instead
    with pytest.raises(ValueError, match=r"2 resplits it is not yet normal") as refused:
        coverage_bounds(100, 0.1, 21_000_000, n_repeats=2)
    assert "scipy.stats.norm" not in str(refused.value)


def test_groups_with_missing_dates_or_durations_are_named_missing():
    """Review finding (stop 54): NaT in datetime64 or timedelta64 groups raised numpy's
    "'list' argument must have no negative elements" instead of naming the missing labels."""
    days = np.array(["2024-01-01", "NaT", "2024-01-02", "2024-01-01"], dtype="datetime64[ns]")
    for groups in (days, days - days[0]):
        with pytest.raises(ValueError, match=r"`groups` contains missing .*labels"):
            coverage_by_group(Y_REG, INTERVALS, groups)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = X[:, 0] + rng.normal(size=300)
    model = SplitConformalRegressor(LinearRegression()).fit(X[:100], y[:100])
    model.calibrate(X[100:200], y[100:200])
    dates = np.datetime64("2024-01-01", "ns") + rng.integers(0, 3, 100).astype("timedelta64[D]")
    dates[5] = np.datetime64("NaT")
    with pytest.raises(ValueError, match=r"`groups` contains missing .*labels"):
        evaluate(model, X[200:], y[200:], groups=dates)


def test_a_time_series_report_explains_its_missing_bounds_by_the_sequential_protocol():
    """Review finding (stop 54): a time-series model's report explained its missing bounds
    by full conformal prediction calibrating on its training rows."""
    from uqconform.timeseries import EnbPI

    rng = np.random.default_rng(0)
    t = np.arange(200)
    X = np.c_[np.sin(t / 20), np.cos(t / 35)]
    y = X @ [1.0, -1.0] + 0.5 * rng.normal(size=200)
    model = EnbPI(LinearRegression(), n_bootstrap=10, random_state=0).fit(X[:150], y[:150])
    report = evaluate(model, X[150:], y[150:], alpha=0.1)
    assert np.isnan(report.rows[0]["bound_low"]) and report.rows[0]["inside_bounds"] is None
    assert "full conformal" not in report.note and "n_calibration_" not in report.note
    assert "no exact finite-sample law" in report.note and "online" in report.note


def test_metrics_refuse_a_target_in_another_row_order_than_a_pandas_prediction():
    """evalm review: coverage(y.sort_index(), intervals_frame) paired the rows by position
    (0.52 for 1.0, silently), though both carry the same row labels; a prediction built by
    position (a fresh RangeIndex) still pairs by position, silently."""
    rng = np.random.default_rng(0)
    y = pd.Series(rng.normal(size=200), index=rng.permutation(200) + 1000)
    frame = pd.DataFrame({"lower": y - 1, "upper": y + 1})  # y's own labels
    assert coverage(y, frame) == 1.0
    with pytest.raises(ValueError, match="`y_true` is indexed by the row labels of"):
        coverage(y.sort_index(), frame)
    with pytest.raises(ValueError, match="`y_true` is indexed by the row labels of"):
        mean_interval_score(y.sort_index(), frame, 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert coverage(y, frame.reset_index(drop=True)) == 1.0


def test_set_frames_with_class_labels_as_columns_are_read_by_label():
    """Review finding (stop 55): a set DataFrame whose columns contradict `classes=` was
    read by position ({b} covered label "a"), and without `classes=` its column labels
    were not used as the classes."""
    y = np.array(["a", "a", "b", "c"])
    frame = pd.DataFrame(
        {"b": [True, False, True, False], "a": [False, True, False, False], "c": [0, 0, 0, 1]}
    ).astype(bool)
    before = frame.copy()
    classes = ["a", "b", "c"]
    assert coverage(y, frame, classes=classes) == 0.75  # row 0 is {b}: "a" is not in it
    assert coverage(y, frame) == 0.75  # the columns are the classes
    assert coverage(y, frame[classes], classes=classes) == 0.75
    groups = coverage_by_group(y, frame, groups=[0, 0, 1, 1], classes=classes)
    assert groups["coverage"].tolist() == [0.5, 1.0]
    strata = size_stratified_coverage(y, frame, classes=classes)
    assert strata["coverage"].tolist() == [0.75]
    pd.testing.assert_frame_equal(frame, before)  # aligned on a copy
    with pytest.raises(ValueError, match=r"`prediction`.*`classes`.*'b', 'a', 'c'.*'x'"):
        coverage(y, frame, classes=["a", "b", "x"])
    with pytest.raises(ValueError, match=r"`prediction`.*`classes`"):
        coverage_by_group(y, frame, groups=[0, 0, 1, 1], classes=["a", "b"])
    # default RangeIndex columns stay positional, as for arrays
    positional = pd.DataFrame(SETS)
    assert coverage(Y_CLS, positional) == coverage(Y_CLS, SETS) == 0.75
    assert coverage(np.array(["x", "y", "z", "y"]), positional, classes=["x", "y", "z"]) == 0.75


def test_set_frame_columns_that_name_no_class_stay_positional():
    """Columns that share no label with the classes (strings "0".."2" after a CSV round
    trip, a MultiIndex) are read by position, as before the by-label reading (diffrev16:
    they were refused); a MultiIndex, which names no class, with a warning (stop 57)."""
    truth = SETS[np.arange(len(Y_CLS)), Y_CLS].mean()
    named = pd.DataFrame(SETS, columns=[str(j) for j in range(SETS.shape[1])])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the classes as text, in order: silent
        assert coverage(Y_CLS, named) == truth
        assert coverage(Y_CLS, named, classes=np.arange(SETS.shape[1])) == truth
    tuples = [("set", j) for j in range(SETS.shape[1])]
    multi = pd.DataFrame(SETS, columns=pd.MultiIndex.from_tuples(tuples))
    with pytest.warns(UserWarning, match="share no label"):
        assert coverage(Y_CLS, multi) == truth
    # integer columns that are the classes in another order are read by label
    order = np.roll(np.arange(SETS.shape[1]), 1)
    assert coverage(Y_CLS, pd.DataFrame(SETS[:, order], columns=order)) == truth


def test_poor_messages_of_the_evaluation_review():
    """Review findings (stop 55): an empty list of regions got the message of an interval
    shape; mean_set_size(region) did not point to mean_volume; a region of another
    dimension than the target's columns named `Y` instead of `y_true`."""
    from uqconform.regions import AffineMap, PredictionRegion

    plane = PredictionRegion(AffineMap(np.zeros((3, 2)), np.ones((1, 2))), 1.0)
    with pytest.raises(ValueError, match="`prediction` is an empty list"):
        coverage(np.zeros((3, 2)), [])
    with pytest.raises(ValueError, match="`region` is an empty list"):
        mean_volume([])
    for region in (plane, [plane, plane], Discs([1.0, 2.0, 3.0])):
        with pytest.raises(TypeError, match="for a region use mean_volume"):
            mean_set_size(region)
    with pytest.raises(ValueError, match=r"`y_true` has 3 columns but `prediction` .* 2 outputs"):
        coverage(np.zeros((3, 3)), plane)
    with pytest.raises(ValueError, match=r"`y_true` has 3 columns but `prediction` .* 2 outputs"):
        coverage_by_group(np.zeros((3, 3)), [plane], groups=[0, 1, 1])


# ---- evaluation review, stop 57 ---------------------------------------------------------

# labelled by class in the order 2, 0, 1; read by label, no row covers its label
_FRAME_BY_CLASS = pd.DataFrame(
    {2: [True, False, False, True], 0: [False, True, False, False], 1: [False, False, True, False]}
)
_Y_BY_CLASS = np.array([0, 1, 2, 0])


def test_set_frames_whose_columns_are_the_classes_as_text_are_read_by_label():
    """Review finding (stop 57): after a CSV round trip the columns 2, 0, 1 became the text
    '2', '0', '1' and were read by position, even with classes=[0, 1, 2]: coverage 1.0
    where it is 0.0, silently."""
    frame, y = _FRAME_BY_CLASS, _Y_BY_CLASS
    truth = np.mean([frame.loc[i, label] for i, label in enumerate(y)])
    assert truth == 0.0 and coverage(y, frame) == truth
    text = frame.rename(columns=str)
    before = text.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert coverage(y, text) == truth
        assert coverage(y, text, classes=[0, 1, 2]) == truth
        assert coverage(y, text, classes=np.array([1, 2, 0])) == truth
        table = coverage_by_group(y, text, groups=[0, 0, 1, 1])
        assert table["coverage"].tolist() == [0.0, 0.0]
        # labels of one class only: its column is found by its text (by position: 0.5)
        assert coverage(np.zeros(4, int), text) == frame[0].mean() == 0.25
        # the text "0".."K-1" in default order still reads as positions, whatever classes
        named = pd.DataFrame(SETS, columns=["0", "1", "2"])
        assert coverage(Y_CLS, named) == coverage(Y_CLS, SETS)
        letters = np.array(["x", "y", "z"])[Y_CLS]
        assert coverage(letters, named, classes=["x", "y", "z"]) == coverage(Y_CLS, SETS)
    pd.testing.assert_frame_equal(text, before)
    with pytest.raises(ValueError, match=r"`prediction`.*'2', '0', '1'.*`classes`.*\[0, 1, 3\]"):
        coverage(y, text, classes=[0, 1, 3])


def test_set_frame_columns_that_share_no_label_with_the_classes_warn():
    """Review finding (stop 57): columns that name no class were read by position without
    a word (coverage 1.0 for columns 'x', 'y', 'z' with classes=[0, 1, 2]); they are still
    read by position, with a warning naming both label lists."""
    frame = _FRAME_BY_CLASS.set_axis(["x", "y", "z"], axis=1)
    by_position = np.asarray(frame)[np.arange(4), _Y_BY_CLASS].mean()
    pattern = r"`prediction` \(\['x', 'y', 'z'\]\).*`classes` \(\[0, 1, 2\]\).*position"
    with pytest.warns(UserWarning, match=pattern):
        assert coverage(_Y_BY_CLASS, frame, classes=[0, 1, 2]) == by_position == 1.0
    with pytest.warns(UserWarning, match=r"`prediction` \(\['x', 'y', 'z'\]\).*`y_true`"):
        assert coverage(_Y_BY_CLASS, frame) == 1.0
    multi = frame.set_axis(pd.MultiIndex.from_tuples([("set", j) for j in (2, 0, 1)]), axis=1)
    with pytest.warns(UserWarning, match=r"`prediction`.*share no label.*`y_true`"):
        assert coverage(_Y_BY_CLASS, multi) == 1.0


def test_coverage_docstring_states_how_set_frames_are_read():
    """Review finding (stop 57): the docstring said a frame's different labels were
    refused, while columns sharing no label were read by position silently."""
    doc = " ".join(coverage.__doc__.split())
    assert "different labels are refused" not in doc
    assert "as text" in doc and "warning" in doc


def test_pooled_window_claim_of_the_coverage_bounds_docstring():
    """Review finding (stop 57): the docstring said the pooled law was refused from 1000
    resplits of a million test points with 100 calibration points; it is from 794."""
    from uqconform.evaluation.bounds import _check_pooled_window

    _check_pooled_window(100, 0.1, 10**6, 793)
    with pytest.raises(ValueError):
        _check_pooled_window(100, 0.1, 10**6, 794)
    doc = " ".join(coverage_bounds.__doc__.split())
    assert "from about 800 resplits of a million test points" in doc


def test_evaluate_reads_an_integer_valued_calibration_count_and_names_a_bad_one():
    """Review finding (stop 57): n_calibration_ = 200.0 (or True) got the note of a model
    without one, and -5 the message of coverage_bounds' argument `n_calibration`."""
    X = np.zeros((3, 1))
    y = [1.0, 2.0, 30.0]
    model = _FakeIntervalModel()
    model.n_calibration_ = 99.0
    report = evaluate(model, X, y, alpha=0.5)
    assert report.n_calibration == 99 and isinstance(report.n_calibration, int)
    row = report.rows[0]
    assert (row["bound_low"], row["bound_high"]) == coverage_bounds(99, 0.5, 3)
    assert isinstance(row["inside_bounds"], bool) and report.note is None
    for value in (True, -5, 99.5, "99", float("nan")):
        model.n_calibration_ = value
        with pytest.raises(ValueError, match=rf"`model.n_calibration_`.*{re.escape(repr(value))}"):
            evaluate(model, X, y, alpha=0.5)


def test_coverage_by_group_keeps_the_order_of_categories():
    """Review finding (stop 57): an ordered categorical's groups came out alphabetically
    (high, low, mid), in coverage_by_group and in evaluate's table."""
    bands = pd.Categorical(
        ["low", "high", "low", "high"], categories=["low", "mid", "high"], ordered=True
    )
    expected = ["low", "high"]  # the declared order, without the unused "mid"
    for groups in (bands, pd.Series(bands)):
        table = coverage_by_group(Y_REG, INTERVALS, groups=groups)
        assert table.index.tolist() == expected
        assert table["coverage"].tolist() == [1.0, 0.5]  # rows 0, 2 and rows 1, 3
    report = evaluate(_FakeIntervalModel(), np.zeros((4, 1)), Y_REG, alpha=0.5, groups=bands)
    assert report.by_group["group"].tolist() == expected


def test_plot_intervals_refuses_x_and_y_in_other_row_orders():
    """Review finding (stop 57): pandas x and y were paired by position without a look at
    their row labels, unlike the metrics."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = pd.Series([0.0, 1.0, 2.0], index=[10, 11, 12])
    bands = np.column_stack([x - 1, x + 1])
    try:
        with pytest.raises(ValueError, match=r"`y` is indexed by the row labels of `x`"):
            plot_intervals(x, pd.Series([0.5, 1.0, 2.0], index=[12, 11, 10]), bands)
        frame = pd.DataFrame(bands, index=[12, 11, 10])
        with pytest.raises(ValueError, match=r"`intervals` is indexed by the row labels"):
            plot_intervals(x, None, frame)
        plot_intervals(x, pd.Series([0.5, 1.0, 2.0], index=[10, 11, 12]), bands)
    finally:
        plt.close("all")


# ---- diff review of the by-label reading (stop 57) ----------------------------------------


def test_default_text_columns_stay_positional_for_classes_one_to_k():
    """Diff-review finding (stop 57): pd.DataFrame(sets) after a CSV round trip (columns
    '0', '1', '2') with classes 1..3 was refused ("name classes and differ from
    `classes`"), as '1' and '2' were turned into classes 1 and 2; the text '0'..'K-1' in
    order is read by position, as the default columns it comes from."""
    frame = pd.DataFrame(SETS, columns=["0", "1", "2"])
    truth = coverage(Y_CLS, SETS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert coverage(Y_CLS + 1, frame, classes=[1, 2, 3]) == truth
        assert coverage(Y_CLS + 2, frame, classes=[2, 3, 4]) == truth
    # without classes, 1..3 are refused as column indices (not as "labels not in classes")
    with pytest.raises(ValueError, match=r"`y_true` holds labels outside 0\.\.2"):
        coverage(Y_CLS + 1, frame)


def test_set_frame_columns_that_are_the_classes_as_other_numeric_text_are_read_by_label():
    """Diff-review finding (stop 57): the columns '2.0', '0.0', '1.0' with integer labels,
    or '2', '0', '1' with float labels 0.0..2.0, were read by position with a warning
    (coverage 0.5 where it is 0.0); they are the classes written as numbers."""
    frame, y = _FRAME_BY_CLASS, _Y_BY_CLASS
    truth = np.mean([frame.loc[i, label] for i, label in enumerate(y)])
    assert truth == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        as_float_text = frame.rename(columns=lambda c: str(float(c)))
        assert coverage(y, as_float_text) == truth
        assert coverage(y, as_float_text, classes=[0, 1, 2]) == truth
        assert coverage(y.astype(float), frame.rename(columns=str)) == truth
        assert coverage(y.astype(float), frame.rename(columns=str), classes=[0.0, 1.0, 2.0]) == 0
    # a column that is no class (or two columns of one class) keeps the by-position reading
    for columns in (["2.0", "0.0", "7.0"], ["2.0", "0.0", "0.00"]):
        with pytest.warns(UserWarning, match="share no label"):
            coverage(y, frame.set_axis(columns, axis=1))


def test_set_frame_columns_of_mixed_number_texts_are_read_by_value():
    """Diff-review finding (diffrev22, stop 57): when one column was the exact text of a
    class, the others were never read by value: '3.0', '1', '2' with classes [1, 2, 3],
    ' 1', '2 ', '3', '-0.0', '1.0', '2.5' and '0', '1', '2.5' with float classes were
    refused ("name classes and differ from `classes`"), though each column is the text of
    another class."""
    rng = np.random.default_rng(0)
    sets = rng.random((60, 3)) < 0.5
    cases = [
        ([1, 2, 3], ["3.0", "1", "2"], [3, 1, 2]),
        ([1, 2, 3], [" 1", "2 ", "3"], [1, 2, 3]),
        ([0.0, 1.0, 2.5], ["-0.0", "1.0", "2.5"], [0.0, 1.0, 2.5]),
        ([0.0, 1.0, 2.5], ["0", "1", "2.5"], [0.0, 1.0, 2.5]),
    ]
    for classes, columns, truth in cases:
        y = rng.choice(classes, 60)
        expected = sets[np.arange(60), [truth.index(label) for label in y]].mean()
        frame = pd.DataFrame(sets, columns=columns)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert coverage(y, frame, classes=classes) == expected
            assert coverage(y, frame) == expected
    # two columns of one class, or a column that is no class: still refused
    for columns in (["1", "1.0", "2"], ["nan", "1", "2"]):
        with pytest.raises(ValueError, match="name classes and differ from `classes`"):
            coverage(np.ones(60, int), pd.DataFrame(sets, columns=columns), classes=[1, 2, 3])


def test_groups_and_y_are_checked_against_a_labelled_prediction_frame():
    # pandas review (stop 58): with y_true an array, groups in another order than a
    # labelled interval frame were paired by position (coverage 0.19 / 0.96 read as
    # 0.53 / 0.55); plot_intervals checked y and intervals against x only
    import matplotlib

    matplotlib.use("Agg")
    from uqconform.evaluation import plot_intervals

    rng = np.random.default_rng(0)
    index = pd.Index(rng.permutation(50) + 100)
    y = rng.normal(size=50)
    groups = pd.Series(np.where(rng.random(50) < 0.5, "a", "b"), index=index)
    intervals = pd.DataFrame({"lower": -np.ones(50), "upper": np.ones(50)}, index=index)
    aligned = coverage_by_group(y, intervals, groups)
    pd.testing.assert_frame_equal(coverage_by_group(y, intervals.to_numpy(), groups), aligned)
    with pytest.raises(ValueError, match=r"`groups` is indexed by the row labels of `prediction`"):
        coverage_by_group(y, intervals, groups.sort_index())
    with pytest.raises(ValueError, match=r"`y` is indexed by the row labels of `intervals`"):
        plot_intervals(np.arange(50.0), pd.Series(y, index=index).sort_index(), intervals)


def test_two_bound_arrays_are_refused_with_the_column_stack_hint():
    """Review (evalm): intervals given as two arrays ``(lower, upper)`` were read as two
    rows when n == 2 (coverage 1.0 for a true 0.5) and refused for other n with a message
    about set arrays; the documented form is one ``(n, 2)`` array. A tuple or list of two
    1-D arrays is refused for every n, naming np.column_stack; a (2, n) array's message
    names it too; ``(n, 2)`` arrays and nested lists of rows are read as before."""
    y = np.array([3.0, 5.5])
    lower, upper = np.array([0.0, 5.0]), np.array([1.0, 6.0])  # row 0 misses, row 1 covers
    hint = r"np\.column_stack\(\[lower, upper\]\)"
    for pair in ((lower, upper), [lower, upper], (pd.Series(lower), pd.Series(upper))):
        with pytest.raises(TypeError, match=rf"`prediction` .*two 1-D arrays.*{hint}"):
            coverage(y, pair)
        with pytest.raises(TypeError, match=rf"`intervals` .*{hint}"):
            mean_width(pair)
        with pytest.raises(TypeError, match=rf"`intervals` .*{hint}"):
            mean_interval_score(y, pair, 0.1)
        with pytest.raises(TypeError, match=rf"`prediction` .*{hint}"):
            coverage_by_group(y, pair, ["a", "b"])
    y3, lower3, upper3 = np.r_[y, 1.0], np.r_[lower, 0.0], np.r_[upper, 2.0]
    with pytest.raises(TypeError, match=rf"two 1-D arrays.*{hint}"):
        coverage(y3, (lower3, upper3))
    with pytest.raises(TypeError, match=rf"shape \(2, 3\).*{hint}"):
        coverage(y3, np.vstack([lower3, upper3]))
    with pytest.raises(TypeError, match=rf"shape \(2, 3\).*{hint}"):
        mean_width(np.vstack([lower3, upper3]))
    # the (n, 2) forms are unchanged
    assert coverage(y, np.column_stack([lower, upper])) == 0.5
    assert mean_width(np.column_stack([lower, upper])) == 1.0
    assert coverage(y, [[0.0, 1.0], [5.0, 6.0]]) == 0.5  # a nested list of rows
    assert coverage(y, np.vstack([lower, upper])) == 1.0  # an (n, 2) array: rows [0, 5], [1, 6]
    assert coverage(y3, np.column_stack([lower3, upper3])) == 2 / 3


def test_beta_binomial_pmf_is_bitwise_scipys_frozen_law():
    """The unfrozen ``stats.betabinom.pmf`` replaced a frozen law built per call (about
    1 ms each, most of evaluate's time with 2,000 Mondrian groups): same bits."""
    from uqconform.evaluation.bounds import _beta_binomial_pmf

    for n_test in (1, 2, 7, 50, 333):
        for a, b in ((1, 1), (46, 5), (9, 1), (900, 100), (9999, 3), (2, 9998)):
            counts = np.arange(n_test + 1)
            frozen = stats.betabinom(n_test, a, b).pmf(counts)
            assert np.array_equal(_beta_binomial_pmf(counts, n_test, a, b), frozen)


def test_mondrian_bounds_compute_each_distinct_stratum_law_once(monkeypatch):
    """Review (evalm): evaluate built one beta-binomial law per stratum and level; strata of
    equal calibration and test sizes share one law, now computed once per level. The
    bounds are the same bits as with scipy's frozen law built for every stratum."""
    from uqconform.evaluation import bounds as bounds_module
    from uqconform.evaluation import report as report_module

    rng = np.random.default_rng(0)
    n = 4000
    X = rng.normal(size=(n, 2))
    y = X.sum(axis=1) + rng.normal(size=n)
    groups = np.arange(n) % 100  # 100 groups: 20 calibration rows and 10 test rows each
    model = SplitConformalRegressor(LinearRegression()).fit(X[:1000], y[:1000])
    model.calibrate(X[1000:3000], y[1000:3000], groups=groups[1000:3000])
    calls = []
    law = report_module._single_count_law

    def counted(*args):
        calls.append(args)
        return law(*args)

    monkeypatch.setattr(report_module, "_single_count_law", counted)
    rows = evaluate(model, X[3000:], y[3000:], groups=groups[3000:]).rows
    assert len(calls) == 3  # one law per level (before: 100 per level)

    def frozen(counts, n_test, a, b):
        return stats.betabinom(n_test, a, b).pmf(counts)

    monkeypatch.setattr(report_module, "_single_count_law", law)
    monkeypatch.setattr(bounds_module, "_beta_binomial_pmf", frozen)
    reference = evaluate(model, X[3000:], y[3000:], groups=groups[3000:]).rows
    for row, expected in zip(rows, reference, strict=True):
        assert (row["bound_low"], row["bound_high"]) == (
            expected["bound_low"],
            expected["bound_high"],
        )


def test_evaluation_messages_name_the_arguments_and_the_set_forms(classification_data):
    """Review (evalm): no test rows were named `X` (the argument is `X_test`); a label the
    classifier never saw was said to be missing from `classes` (evaluate has none); an
    (n, 1) target, accepted with intervals, was refused with sets; ragged label lists got
    numpy's "inhomogeneous shape" error."""
    X, labels = classification_data
    classifier = SplitConformalClassifier(LogisticRegression()).fit(X[:300], labels[:300])
    classifier.calibrate(X[300:600], labels[300:600])
    with pytest.raises(ValueError, match=r"`X_test` and `y_test` have no rows"):
        evaluate(classifier, X[:0], labels[:0])
    unseen = labels[600:700].copy()
    unseen[:3] = "yak"
    with pytest.raises(
        ValueError,
        match=r"`y_test` contains labels not in `model\.classes_`: \['yak'\].*never be covered",
    ):
        evaluate(classifier, X[600:700], unseen)
    sets = np.array([[True, False], [True, True], [False, True], [True, False]])
    target = [0, 1, 1, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # squeezed silently, as for intervals
        assert coverage(pd.DataFrame({"label": target}), sets) == 0.75
        assert coverage(np.array(target)[:, None], sets) == 0.75
        table = coverage_by_group(pd.DataFrame({"label": target}), sets, ["a", "a", "b", "b"])
        assert table["coverage"].tolist() == [1.0, 0.5]
    with pytest.raises(ValueError, match=r"must be 1-D for set arrays, got shape \(4, 2\)"):
        coverage(np.zeros((4, 2), int), sets)
    with pytest.raises(ValueError, match=r"`prediction` is a ragged list.*mask\[i, row\] = True"):
        coverage([0, 2], [[0, 1], [2]])
    with pytest.raises(ValueError, match=r"`sets` is a ragged list.*boolean"):
        mean_set_size([[0, 1], [2]])


def test_a_per_class_loop_of_zero_based_labels_is_silent():
    """Review (diffrev27): the warning for integer labels lacking 0 fired on the usual
    per-class check of 0-based labels, ``coverage(y[m], sets[m])`` for the rows of class 1
    or 2 (iris). It now fires when reading each label as the column before it (label - 1)
    covers clearly more rows than the label's own column: the 1-based signature."""
    from sklearn.datasets import load_iris, load_wine

    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(y.size)
    train, calibration, test = order[:60], order[60:110], order[110:]
    model = LogisticRegression(max_iter=500).fit(X[train], y[train])
    clf = SplitConformalClassifier(model, alpha=0.1).calibrate(X[calibration], y[calibration])
    sets = clf.predict_set(X[test])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in (1, 2):
            rows = y[test] == k
            assert coverage(y[test][rows], sets[rows]) > 0.8
            size_stratified_coverage(y[test][rows], sets[rows])
    X, y = load_wine(return_X_y=True)
    order = np.random.default_rng(0).permutation(y.size)
    X, y = X[order], y[order]
    clf = SplitConformalClassifier(LogisticRegression(max_iter=5000), alpha=0.2)
    clf.fit(X[:60], y[:60]).calibrate(X[60:120], y[60:120])
    sets, y_test = clf.predict_set(X[120:]), y[120:]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in (1, 2):
            coverage(y_test[y_test == k], sets[y_test == k])
    with pytest.warns(UserWarning, match=r"coverage_by_group\(y, sets, groups=y\)"):
        coverage(y_test[y_test == 1] + 1, sets[y_test == 1])  # class 1's rows, 1-based


def test_bound_pairs_are_told_from_lists_of_rows_by_the_rows_of_y():
    """Review (diffrev27): the refusal of ``(lower, upper)`` caught lists of two rows given
    as arrays (read as rows before) and two set rows of 3 entries against 2 labels. Two
    items of n entries with n rows of y are a pair; two items of 2 entries with 2 rows are
    either reading (refused naming both); two items of 2 entries with n != 2 rows are rows."""
    rows = [np.array([0.0, 1.0]), np.array([2.0, 3.0])]
    both = r"np\.vstack\(rows\).*np\.column_stack\(\[lower, upper\]\)"
    with pytest.raises(TypeError, match=rf"`prediction` is two 1-D arrays.*{both}"):
        coverage([0.5, 2.5], rows)
    with pytest.raises(TypeError, match=rf"`intervals` is two 1-D arrays.*{both}"):
        mean_width(rows)
    assert coverage([1.5, 2.5], np.vstack(rows)) == 0.5  # rows [0, 1], [2, 3]
    assert coverage([1.5, 2.5], np.column_stack(rows)) == 1.0  # rows [0, 2], [1, 3]
    # two items of 2 entries against 3 rows: rows, as before (one row short)
    with pytest.raises(ValueError, match=r"`y_true` has 3 rows but `prediction` has 2"):
        coverage([0.5, 2.5, 9.0], rows)
    assert coverage([0.5, 2.5, 9.0], [*rows, np.array([8.0, 9.0])]) == 1.0
    # two integer rows of 3 entries against 2 labels: no pair, the set-array message
    int_rows = [np.array([1, 0, 0]), np.array([0, 1, 1])]
    with pytest.raises(TypeError, match=r"must be boolean") as info:
        coverage([0, 1], int_rows)
    assert "two 1-D arrays" not in str(info.value)
    assert "lower and upper" not in str(info.value)
    with pytest.raises(TypeError, match=r"shape \(2, 3\)") as info:
        coverage([0, 1], np.array(int_rows))  # a (2, 3) array against 2 rows: no bounds hint
    assert "lower and upper" not in str(info.value)
    assert coverage([0, 1], [row.astype(bool) for row in int_rows]) == 1.0
    # two items of 3 entries against 3 rows, or without y: the pair, as in 6d07ee9
    lower, upper = np.zeros(3), np.ones(3)
    with pytest.raises(TypeError, match=r"two 1-D arrays of 3 entries.*column_stack") as info:
        coverage([0.5, 0.5, 2.0], (lower, upper))
    assert "vstack" not in str(info.value)
    with pytest.raises(TypeError, match=r"two 1-D arrays of 3 entries.*column_stack"):
        mean_width((lower, upper))


def test_ragged_interval_lists_are_named_as_intervals():
    """Review (diffrev27): a ragged list got the label-set recipe also for intervals: two
    bound arrays of different lengths are named with their lengths, and callers taking
    intervals only say each row needs 2 entries."""
    lower, upper = np.zeros(5), np.ones(5)
    with pytest.raises(ValueError, match=r"lower has 4 entries, upper 5.*column_stack"):
        coverage(np.zeros(5), (lower[:-1], upper))
    with pytest.raises(ValueError, match=r"lower has 4 entries, upper 5") as info:
        mean_width((lower[:-1], upper))
    assert "mask" not in str(info.value)
    for call in (
        lambda: mean_width([[0.0, 1.0], [2.0]]),
        lambda: mean_interval_score([0.5, 2.0], [[0.0, 1.0], [2.0]], 0.1),
    ):
        with pytest.raises(ValueError, match=r"`intervals` .*each row needs 2 entries") as info:
            call()
        assert "mask" not in str(info.value)
    # label lists for sets keep the boolean-mask recipe
    with pytest.raises(ValueError, match=r"`prediction` is a ragged list.*mask\[i, row\] = True"):
        coverage([0, 2], [[0, 1], [2]])


# ---- volume_samples: the Monte Carlo points of evaluate's region volumes ----------------------


class _Bulge:
    """A non-affine latent map ``y = c + s z (1 + |z|^2)`` (varying Jacobian), so that a
    `PredictionRegion` on it takes a Monte Carlo volume that depends on ``n_samples``."""

    is_affine = False

    def __init__(self, center, scale):
        from uqconform.regions import AffineMap

        self.inner = AffineMap(center, scale)
        self.n_rows, self.dim = self.inner.n_rows, self.inner.dim

    def to_latent(self, Y):
        u_vec = self.inner.to_latent(Y)
        u = np.linalg.norm(u_vec, axis=-1, keepdims=True)
        root = np.sqrt(u**2 / 4 + 1 / 27)  # t + t^3 = u (Cardano)
        t = np.cbrt(u / 2 + root) + np.cbrt(u / 2 - root)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(u > 0, u_vec * t / u, 0.0)

    def from_latent(self, Z):
        return self.inner.from_latent(Z * (1 + (Z**2).sum(axis=-1, keepdims=True)))

    def log_abs_det_from_latent(self, Z):
        t2 = (Z**2).sum(axis=-1)
        radial = (Z.shape[-1] - 1) * np.log1p(t2) + np.log1p(3 * t2)
        return self.inner.log_abs_det_from_latent(Z) + radial

    def take(self, index):
        taken = _Bulge.__new__(_Bulge)
        taken.inner = self.inner.take(index)
        taken.n_rows, taken.dim = taken.inner.n_rows, taken.inner.dim
        return taken


class _KeptRegionsModel:
    """A multi-output model whose ``predict_set`` returns (and keeps) the regions that
    ``make(alpha)`` builds, one per level."""

    def __init__(self, make):
        self.make = make
        self.regions = []
        self.n_calibration_ = 100

    def predict_set(self, X, alpha):
        self.regions = [self.make(a) for a in alpha]
        return self.regions


def test_volume_samples_reach_the_volumes_of_the_regions():
    """Review (s60, evaluate_speed.py): evaluate took every row's Monte Carlo volume with the
    regions' default 2,000 points and had no way to lower it (300 CONTRA test rows: 140 s,
    4.8 s with 200 points); ``volume_samples`` is passed to ``region.volume`` as
    ``n_samples`` and said in the note."""
    from uqconform.regions import AffineMap, PredictionRegion

    rng = np.random.default_rng(0)
    n = 30
    Y = rng.normal(size=(n, 2))
    centers, scales = rng.normal(size=(n, 2)), rng.uniform(0.5, 2.0, size=(n, 2))
    # duck-typed regions: the keywords volume() is called with
    discs = _KeptRegionsModel(lambda a: Discs(np.full(n, 1.0 / a)))
    report = evaluate(discs, np.zeros((n, 1)), Y, alpha=(0.1, 0.2), volume_samples=50)
    assert [region.calls for region in discs.regions] == [[{"n_samples": 50}]] * 2
    assert report.note.startswith("mean_volume is a Monte Carlo estimate with volume_samples=50")
    assert "note: mean_volume is a Monte Carlo" in str(report)
    report = evaluate(discs, np.zeros((n, 1)), Y, alpha=(0.1, 0.2))
    assert [region.calls for region in discs.regions] == [[{}]] * 2 and report.note is None
    # a PredictionRegion of a non-affine map: evaluate's volumes are mean_volume's at k points
    bulges = _KeptRegionsModel(lambda a: PredictionRegion(_Bulge(centers, scales), 1.0 / a))
    alphas = (0.5, 0.8)
    default = evaluate(bulges, np.zeros((n, 1)), Y, alpha=alphas).to_frame()["mean_volume"]
    regions = bulges.predict_set(None, alphas)
    np.testing.assert_allclose(default, [mean_volume(r) for r in regions], rtol=1e-12)
    for k in (7, 100):
        frame = evaluate(bulges, np.zeros((n, 1)), Y, alpha=alphas, volume_samples=k).to_frame()
        expected = [mean_volume(r, n_samples=k) for r in regions]
        np.testing.assert_allclose(frame["mean_volume"], expected, rtol=1e-12)
        assert not np.allclose(frame["mean_volume"], default, rtol=1e-6, atol=0)  # it mattered
    # exact volumes (affine maps): nothing sampled, and the note says it had no effect
    ellipses = _KeptRegionsModel(lambda a: PredictionRegion(AffineMap(centers, scales), 1 / a))
    exact = evaluate(ellipses, np.zeros((n, 1)), Y, alpha=alphas, volume_samples=10)
    plain = evaluate(ellipses, np.zeros((n, 1)), Y, alpha=alphas)
    volumes = [row["mean_volume"] for row in exact.rows]
    assert volumes == [row["mean_volume"] for row in plain.rows] and plain.note is None
    np.testing.assert_allclose(volumes, [mean_volume(r) for r in ellipses.regions], rtol=1e-12)
    assert "volume_samples=10 had no effect" in exact.note and "exact" in exact.note


@pytest.mark.parametrize("value", [0, -5, 2.5, True, "200", np.float64(200.0)])
def test_volume_samples_must_be_a_positive_integer_named_as_such(value):
    with pytest.raises(ValueError, match=r"`volume_samples` must be None or a positive integer"):
        evaluate(_FakeRegionModel(), np.zeros((3, 1)), Y_2D, volume_samples=value)


def test_volume_samples_are_refused_where_they_would_have_no_effect(
    regression_data, classification_data
):
    """A classifier's set sizes and a regressor's widths are exact: a ``volume_samples``
    given for them is refused (before predicting), not silently ignored; regions whose
    volume() takes no ``n_samples`` fail at that call."""
    X, y, _ = regression_data
    regressor = SplitConformalRegressor(LinearRegression()).fit(X[:300], y[:300])
    regressor.calibrate(X[300:600], y[300:600])
    with pytest.raises(TypeError, match=r"`volume_samples` .*regression model whose mean_width"):
        evaluate(regressor, X[600:], y[600:], volume_samples=200)
    X, labels = classification_data[:2]
    classifier = SplitConformalClassifier(LogisticRegression()).fit(X[:300], labels[:300])
    classifier.calibrate(X[300:600], labels[300:600])
    with pytest.raises(TypeError, match=r"classification model whose mean_set_size is exact"):
        evaluate(classifier, X[600:], labels[600:], volume_samples=200)

    class FixedVolume(Discs):
        def volume(self):
            return np.pi * self.radius**2

    fixed = _KeptRegionsModel(lambda a: FixedVolume(np.full(3, 1.0 / a)))
    with pytest.raises(TypeError, match=r"volume\(\) got an unexpected keyword .*n_samples"):
        evaluate(fixed, np.zeros((3, 1)), Y_2D, volume_samples=200)
    assert evaluate(fixed, np.zeros((3, 1)), Y_2D).rows[0]["mean_volume"] > 0  # None: as before


def test_volume_samples_of_a_small_contra_model_are_its_monte_carlo_points(monkeypatch):
    """The CONTRA model of the review, made small: evaluate's volumes with volume_samples=k
    are ``mean_volume(model.predict_set(X), n_samples=k)``, k points drawn per row."""
    pytest.importorskip("torch")
    pytest.importorskip("nflows")
    from uqconform.multioutput import CONTRA
    from uqconform.multioutput.datasets import make_banana
    from uqconform.regions import PredictionRegion

    X, Y = make_banana(230, random_state=0)
    tiny = {"n_blocks": 2, "hidden_features": 8, "max_epochs": 1, "batch_size": 64}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # so few rows and epochs: it keeps its start
        model = CONTRA(random_state=0, **tiny).fit(X[:100], Y[:100])
    model.calibrate(X[100:200], Y[100:200])
    drawn = []
    log_volume = PredictionRegion.log_volume

    def recorded(self, n_samples=2000, *args, **kwargs):
        drawn.append(n_samples)
        return log_volume(self, n_samples, *args, **kwargs)

    monkeypatch.setattr(PredictionRegion, "log_volume", recorded)
    report = evaluate(model, X[200:], Y[200:], alpha=(0.1, 0.2), volume_samples=40)
    assert drawn == [40, 40]  # one Monte Carlo volume per level, at 40 points
    regions = model.predict_set(X[200:], [0.1, 0.2])
    expected = [mean_volume(region, n_samples=40) for region in regions]
    np.testing.assert_allclose(report.to_frame()["mean_volume"], expected, rtol=1e-12)
    assert "volume_samples=40 latent points per row" in report.note


def test_volume_samples_reach_the_by_group_table_and_volumes_are_taken_once():
    """Review (s60, vol_groups.py): with ``groups``, evaluate's by-group table took every
    volume again with the regions' default 2,000 points, whatever ``volume_samples`` was (one
    group of all rows, volume_samples=40: 8.92994 overall, 8.92517 in the table), so volume()
    ran twice per level; the table now reuses the volumes of the overall rows."""
    from uqconform.regions import PredictionRegion

    rng = np.random.default_rng(0)
    n = 30
    Y = rng.normal(size=(n, 2))
    centers, scales = rng.normal(size=(n, 2)), rng.uniform(0.5, 2.0, size=(n, 2))
    alphas = (0.5, 0.8)
    one_group = np.zeros(n, dtype=int)
    for samples in (None, 7):
        discs = _KeptRegionsModel(lambda a: Discs(np.full(n, 1.0 / a)))
        evaluate(
            discs, np.zeros((n, 1)), Y, alpha=alphas, groups=one_group, volume_samples=samples
        )
        keywords = {} if samples is None else {"n_samples": samples}
        assert [region.calls for region in discs.regions] == [[keywords]] * 2  # once a level
        bulges = _KeptRegionsModel(lambda a: PredictionRegion(_Bulge(centers, scales), 1.0 / a))
        report = evaluate(
            bulges, np.zeros((n, 1)), Y, alpha=alphas, groups=one_group, volume_samples=samples
        )
        overall = [row["mean_volume"] for row in report.rows]
        # the same volumes: equal up to the order of summation (bincount, np.mean)
        np.testing.assert_allclose(report.by_group["mean_volume"], overall, rtol=1e-12)
        assert report.by_group["group"].tolist() == [0, 0]
    # and the table of two groups holds each group's mean of the same volumes
    halves = np.repeat([0, 1], n // 2)
    bulges = _KeptRegionsModel(lambda a: PredictionRegion(_Bulge(centers, scales), 1.0 / a))
    report = evaluate(bulges, np.zeros((n, 1)), Y, alpha=alphas, groups=halves, volume_samples=7)
    volumes = np.stack([r.volume(n_samples=7) for r in bulges.regions], axis=1)
    expected = [volumes[halves == g, j].mean() for j in range(2) for g in (0, 1)]
    np.testing.assert_allclose(report.by_group["mean_volume"], expected, rtol=1e-12)


def _direct_strata_bounds(calibration_sizes, test_sizes, alphas, confidence):
    """Oracle for a Mondrian model's bounds: each stratum's covered count on all its counts
    (scipy's beta-binomial, rank ``floor((n + 1) alpha)``; every row covered when that is
    0), the strata's pmfs convolved directly (np.convolve), the central interval read off
    the cdf (the first count where it reaches each tail)."""
    tail, total = (1 - confidence) / 2, int(sum(test_sizes))
    bounds = []
    for alpha in alphas:
        law = np.ones(1)
        for n, m in zip(calibration_sizes, test_sizes, strict=True):
            rank = min(math.floor((n + 1) * alpha + 1e-9), n)
            pmf = np.zeros(m + 1)
            if rank == 0:
                pmf[m] = 1.0
            else:
                pmf = stats.betabinom.pmf(np.arange(m + 1), m, n + 1 - rank, rank)
            law = np.convolve(law, pmf)
        cdf = np.cumsum(law / law.sum())
        low, high = np.searchsorted(cdf, tail), min(np.searchsorted(cdf, 1 - tail), total)
        bounds.append((low / total, high / total))
    return np.array(bounds)


def _report_bounds(report):
    return np.array([(row["bound_low"], row["bound_high"]) for row in report.rows])


def test_mondrian_bounds_add_equal_strata_by_repeated_squaring(monkeypatch):
    """Review (evalm, many_groups_speed.py): evaluate convolved the law of every Mondrian
    stratum into the total one at a time, per level (8,000 groups: 11.5 s of bounds in a
    12.2 s evaluate, for a 0.40 s prediction). Strata of equal calibration and test sizes
    now add up by repeated squaring: 1,000 equal groups take 14 convolutions a level, not
    1,000, and the bounds are those of a direct convolution of the 1,000 laws."""
    from uqconform.evaluation import report as report_module

    rng = np.random.default_rng(0)
    n_groups, alphas = 1000, (0.05, 0.1, 0.2)
    calibration_groups = np.repeat(np.arange(n_groups), 19)
    test_groups = np.tile(np.arange(n_groups), 5)
    n_cal, n_test = calibration_groups.size, test_groups.size
    X = rng.normal(size=(200 + n_cal + n_test, 1))
    y = X[:, 0] + rng.normal(size=X.shape[0])
    model = SplitConformalRegressor(LinearRegression()).fit(X[:200], y[:200])
    model.calibrate(X[200 : 200 + n_cal], y[200 : 200 + n_cal], groups=calibration_groups)
    convolutions = []
    cut = report_module._carrying_mass  # called once on every convolved law

    def counted(first, pmf):
        convolutions.append(pmf.size)
        return cut(first, pmf)

    monkeypatch.setattr(report_module, "_carrying_mass", counted)
    report = evaluate(model, X[-n_test:], y[-n_test:], alpha=alphas, groups=test_groups)
    assert len(convolutions) <= 3 * 2 * 10  # per level: log2(1000) squarings and products
    expected = _direct_strata_bounds([19] * n_groups, [5] * n_groups, alphas, 0.99)
    assert np.array_equal(_report_bounds(report), expected)


@pytest.mark.parametrize("seed", range(6))
def test_mondrian_bounds_equal_a_direct_convolution_of_the_strata_laws(seed):
    """The bounds of a Mondrian model (groups; with unseen test groups; one group;
    class-conditional, with and without groups), with many strata of equal sizes, are those
    of a direct convolution of every stratum's full beta-binomial pmf."""
    rng = np.random.default_rng(seed)
    alphas = np.sort(rng.choice([0.02, 0.05, 0.1, 0.2, 0.3, 0.5], size=3, replace=False))
    confidence = float(rng.choice([0.9, 0.99, 0.999]))
    n_groups = [1, 1, 12, 40, 150, 400][seed]  # seed 0: one group and unseen ones
    calibration_sizes = rng.choice([3, 9, 19, 19, 19, 19, 40, 120], size=n_groups)
    test_sizes = rng.choice([0, 1, 5, 5, 5, 5, 30], size=n_groups)
    unseen_sizes = [] if seed % 2 else rng.choice([1, 7, 7], size=seed + 1).tolist()
    test_sizes[0] = max(test_sizes[0], 1)
    calibration_groups = np.repeat(np.arange(n_groups), calibration_sizes)
    test_groups = np.repeat(np.arange(n_groups + len(unseen_sizes)), [*test_sizes, *unseen_sizes])
    n_cal, n_test = calibration_groups.size, test_groups.size
    X = rng.normal(size=(200 + n_cal + n_test, 2))
    y = X.sum(axis=1) + rng.normal(size=X.shape[0])
    cal, test = slice(200, 200 + n_cal), slice(200 + n_cal, None)
    model = SplitConformalRegressor(LinearRegression()).fit(X[:200], y[:200])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # groups too small for a level; unseen groups' rows
        model.calibrate(X[cal], y[cal], groups=calibration_groups)
        report = evaluate(
            model, X[test], y[test], alpha=alphas, groups=test_groups, confidence=confidence
        )
    expected = _direct_strata_bounds(
        [*calibration_sizes, *[0] * len(unseen_sizes)],
        [*test_sizes, *unseen_sizes],
        alphas,
        confidence,
    )
    assert np.array_equal(_report_bounds(report), expected)
    # class-conditional: a stratum per group and true class (three classes, and one group)
    labels = np.digitize(X[:, 0] + rng.normal(size=X.shape[0]), [-0.5, 0.5])
    classifier = SplitConformalClassifier(LogisticRegression(), class_conditional=True)
    classifier.fit(X[:200], labels[:200])
    for calibration, tested in ((calibration_groups, test_groups), (None, None)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            classifier.calibrate(X[cal], labels[cal], groups=calibration)
            report = evaluate(
                classifier,
                X[test],
                labels[test],
                alpha=alphas,
                groups=tested,
                confidence=confidence,
            )
        cal_strata = np.zeros(n_cal, int) if calibration is None else calibration
        test_strata = np.zeros(n_test, int) if tested is None else tested
        keys = range(int(test_strata.max()) + 1)
        pairs = [
            (
                int(np.sum((cal_strata == g) & (labels[cal] == c))),
                int(np.sum((test_strata == g) & (labels[test] == c))),
            )
            for g in keys
            for c in range(3)
        ]
        pairs = [(n, m) for n, m in pairs if m]
        expected = _direct_strata_bounds(*zip(*pairs, strict=True), alphas, confidence)
        assert np.array_equal(_report_bounds(report), expected)


def test_a_hand_built_report_without_its_efficiency_column_plots():
    """Review s65: printing such a report showed nan, plotting raised KeyError."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report = CoverageReport(
        "M", "regression", "mean_width", 10, 20, 0.99, 0.01, rows=[{"alpha": 0.1, "coverage": 0.9}]
    )
    axes = report.plot()
    assert len(axes) == 2 and axes[1].get_ylabel() == "mean width"
    plt.close("all")


def test_mean_interval_score_takes_a_sequence_of_one_level_for_one_level():
    y = np.array([1.0, 2.0, 5.0])
    intervals = np.array([[0.0, 2.0], [1.0, 3.0], [0.0, 1.0]])
    assert mean_interval_score(y, intervals, alpha=[0.1]) == mean_interval_score(
        y, intervals, alpha=0.1
    )
    with pytest.raises(ValueError, match="one level per level"):
        mean_interval_score(y, intervals, alpha=[0.1, 0.2])


def test_coverage_bounds_name_the_argument_order_on_positional_slips():
    with pytest.raises(ValueError, match=r"got 20 \(a count\? pass n_repeats by keyword"):
        coverage_bounds(100, 0.1, 500, 20)
    with pytest.raises(ValueError, match=r"got 0.1 \(a level\? the order is n_calibration"):
        coverage_bounds(100, 500, 0.1)
    with pytest.raises(ValueError, match=r"got 95 \(a percentage\? pass 0.95; or a count"):
        coverage_bounds(100, 0.1, 500, 95)
    with pytest.raises(ValueError, match=r"got 99.5 \(a percentage\? pass 0.995\)"):
        coverage_bounds(100, 0.1, 500, 99.5)
