"""Multi-label risk control: conformal risk control (CRC) and RCPS (Hoeffding-Bentkus)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import Unchanged
from scipy import stats
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier
from sklearn.multioutput import MultiOutputClassifier
from sklearn.svm import LinearSVC

from uqconform import MultiLabelRiskController, SplitConformalClassifier
from uqconform.classification.risk import hoeffding_bentkus_pvalue
from uqconform.evaluation import coverage_bounds


class ColumnsAreProbabilities:
    """A fitted multi-label model from outside scikit-learn: column k of X is P(label k)."""

    def predict_proba(self, X):
        return np.asarray(X, dtype=float)


class OneLabelModel(ColumnsAreProbabilities):
    """The same as a multi-class model (rows of X sum to one)."""

    classes_ = np.arange(5)


def draw(n, rng, n_labels=6, ties=False):
    """Probabilities P (the features) and labels drawn from a distortion of them, so the
    model is miscalibrated; every row has at least one label."""
    P = rng.beta(0.6, 1.2, size=(n, n_labels))
    if ties:
        P = np.round(P * 20) / 20
    Y = rng.random((n, n_labels)) < P**0.8
    none = ~Y.any(axis=1)
    Y[none, np.argmax(P[none], axis=1)] = True
    return P, Y


def losses(sets, Y):
    """Per row: the share of true labels missed (FNR) and whether any is missed."""
    missed = (Y & ~sets).sum(axis=1)
    counts = Y.sum(axis=1)
    return np.where(counts > 0, missed / np.maximum(counts, 1), 0.0), missed > 0


def brute_force_sets(P_cal, Y_cal, P_test, alpha, risk, method, delta=0.1):
    """Try every threshold on the sorted scores; keep the smallest that meets the rule."""
    n = len(P_cal)
    candidates = np.concatenate([[-1.0], np.unique(1 - P_cal)])
    for q in candidates:  # a loop over candidate thresholds: the oracle, not the method
        fnr, miss = losses(1 - P_cal <= q, Y_cal)
        mean = (fnr if risk == "fnr" else miss).mean()
        if method == "crc":
            ok = (n * mean + 1) / (n + 1) <= alpha + 1e-12
        else:
            k = np.ceil(n * mean - 1e-9)
            a = min(mean, alpha)
            h = (a * np.log(a / alpha) if a > 0 else 0.0) + (1 - a) * np.log((1 - a) / (1 - alpha))
            p = min(np.exp(-n * h), np.e * stats.binom.cdf(k, n, alpha))
            if risk == "miscoverage":  # 0/1 losses: the exact binomial tail
                p = stats.binom.cdf(k, n, alpha)
            ok = p < delta
        if ok:
            return 1 - P_test <= q
    return np.ones_like(P_test, dtype=bool)


def controller(**params):
    return MultiLabelRiskController(ColumnsAreProbabilities(), **params)


@pytest.mark.filterwarnings("ignore:alpha=0.6 is the miscoverage level")
@pytest.mark.parametrize("risk", ["fnr", "miscoverage"])
@pytest.mark.parametrize("method", ["crc", "rcps"])
@pytest.mark.parametrize("ties", [False, True])
def test_sets_match_a_brute_force_search_over_thresholds(risk, method, ties):
    rng = np.random.default_rng(0)
    P_cal, Y_cal = draw(300, rng, ties=ties)
    P_test, _ = draw(200, rng, ties=ties)
    Y_cal[:7] = False  # rows without a label lose nothing (with a warning)
    alphas = [0.05, 0.1, 0.25, 0.6]
    with pytest.warns(UserWarning, match="7 of 300 calibration rows have no true label"):
        model = controller(risk=risk, method=method, alpha=alphas).calibrate(P_cal, Y_cal)
    sets = model.predict_set(P_test)
    for j, alpha in enumerate(alphas):
        expected = brute_force_sets(P_cal, Y_cal, P_test, alpha, risk, method)
        np.testing.assert_array_equal(sets[:, :, j], expected)


def test_crc_on_the_miscoverage_loss_is_split_conformal_lac():
    rng = np.random.default_rng(1)
    P = rng.dirichlet(np.full(5, 0.7), size=700)
    y = (rng.random(700)[:, None] > np.cumsum(P, axis=1)).sum(axis=1).clip(max=4)
    alphas = [0.02, 0.1, 0.3]
    lac = SplitConformalClassifier(OneLabelModel(), alpha=alphas).calibrate(P[:400], y[:400])
    crc = MultiLabelRiskController(OneLabelModel(), risk="miscoverage", alpha=alphas)
    crc.calibrate(P[:400], np.eye(5, dtype=int)[y[:400]])
    np.testing.assert_array_equal(crc.predict_set(P[400:]), lac.predict_set(P[400:]))


def _resplits(method, risk, alpha, n_cal, n_test, repeats, seed):
    """Per resplit: mean test FNR, mean test miscoverage and mean set size."""
    rng = np.random.default_rng(seed)
    out = np.empty((repeats, 3))
    for r in range(repeats):  # independent calibration sets
        P, Y = draw(n_cal + n_test, rng)
        model = controller(method=method, risk=risk, alpha=alpha).calibrate(P[:n_cal], Y[:n_cal])
        sets = model.predict_set(P[n_cal:])
        fnr, miss = losses(sets, Y[n_cal:])
        out[r] = fnr.mean(), miss.mean(), sets.sum(axis=1).mean()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.1, 0.2])
def test_crc_controls_the_expected_false_negative_rate(alpha):
    n_cal, repeats = 10, 1500
    crc = _resplits("crc", "fnr", alpha, n_cal, 100, repeats, seed=2)
    # E[FNR] <= alpha: a one-sided bound on the mean of the resplits' mean FNR (independent
    # and bounded), z for a false alarm of 1e-4. With so few calibration rows, leaving out
    # the (n + 1) correction (n R_n(q) <= n alpha) lands beyond the bound: measured 0.115
    # at alpha = 0.1 on this generator's Beta(1, 1) variant, against a bound of 0.109.
    z = stats.norm.ppf(1 - 1e-4)
    limit = alpha + z * crc[:, 0].std(ddof=1) / np.sqrt(repeats)
    assert crc[:, 0].mean() <= limit


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2])
def test_fnr_control_gives_smaller_sets_than_covering_every_label(alpha):
    # The simple valid baseline: sets holding every true label with probability 1 - alpha
    # keep FNR <= alpha too, with larger sets; risk control must be smaller on average.
    crc = _resplits("crc", "fnr", alpha, 200, 100, 100, seed=3)
    baseline = _resplits("crc", "miscoverage", alpha, 200, 100, 100, seed=3)
    assert crc[:, 2].mean() < baseline[:, 2].mean()
    assert baseline[:, 0].mean() < crc[:, 0].mean()  # the baseline wastes the budget


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_miscoverage_risk_covers_inside_the_coverage_law(alpha):
    n_cal, n_test, repeats = 40, 50, 300
    observed = 1 - _resplits("crc", "miscoverage", alpha, n_cal, n_test, repeats, seed=3)[:, 1]
    low, high = coverage_bounds(n_cal, alpha, n_test, confidence=0.999, n_repeats=repeats)
    assert low <= observed.mean() <= high


@pytest.mark.slow
def test_rcps_keeps_the_risk_below_alpha_with_probability_1_minus_delta():
    alpha, delta, n_cal, repeats = 0.15, 0.1, 150, 300
    rng = np.random.default_rng(4)
    P_big, Y_big = draw(40_000, rng)  # the population, to read each calibration's true risk
    exceed = {"rcps": 0, "crc": 0}
    for _ in range(repeats):  # independent calibration sets
        P, Y = draw(n_cal, rng)
        for method in exceed:
            model = controller(method=method, alpha=alpha, delta=delta).calibrate(P, Y)
            risk = losses(model.predict_set(P_big), Y_big)[0].mean()
            exceed[method] += risk > alpha
    # Binomial(repeats, <= delta) exceedances for a valid method, false alarm 1e-3
    assert exceed["rcps"] <= stats.binom.ppf(1 - 1e-3, repeats, delta)
    # ... while the expectation guarantee alone exceeds alpha about half the time
    assert exceed["crc"] > stats.binom.ppf(1 - 1e-3, repeats, delta)


@pytest.mark.parametrize("n", [20, 100, 500])
@pytest.mark.parametrize("delta", [0.05, 0.1, 0.3])
def test_hoeffding_bentkus_pvalue_is_valid_for_losses_at_the_level(n, delta):
    # 0/1 losses with mean exactly alpha (the hardest null): P(p < delta) <= delta, exactly
    alpha = 0.1
    k = np.arange(n + 1)
    p = hoeffding_bentkus_pvalue(k / n, n, alpha)
    assert stats.binom.pmf(k, n, alpha)[p < delta].sum() <= delta
    assert np.all(np.diff(p) >= 0) and p[-1] == 1.0


def test_too_few_calibration_rows_give_every_label_with_a_warning():
    rng = np.random.default_rng(5)
    P, Y = draw(30, rng)
    model = controller(alpha=0.02)
    with pytest.warns(UserWarning, match=r"Too few calibration rows .* \(n \+ 1\) alpha >= 1"):
        model.calibrate(P, Y)
    with pytest.warns(UserWarning, match="every label"):
        sets = model.predict_set(P)
    assert sets.all()


@pytest.mark.filterwarnings("ignore:alpha=0.6 is the miscoverage level")
@pytest.mark.filterwarnings("ignore:.*calibration rows have no true label")
def test_empty_sets_when_they_already_meet_the_level():
    rng = np.random.default_rng(5)
    P, Y = draw(200, rng)
    Y[::2] = False  # half the rows have no label: empty sets lose 0.5 on average
    assert not controller(alpha=0.6).calibrate(P, Y).predict_set(P).any()
    assert controller(alpha=0.45).calibrate(P, Y).predict_set(P).any()


@pytest.mark.filterwarnings("ignore:.*calibration rows have no true label")
def test_scikit_learn_models_with_list_and_array_probabilities():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(600, 4))
    Y = (X[:, :3] + rng.normal(size=(600, 3)) > 0).astype(int)
    Y[:300, 2] = 0  # a label never present in training: its probability is 0
    forest = RandomForestClassifier(n_estimators=20, random_state=0)
    model = MultiLabelRiskController(forest, random_state=0).fit(X[:300], Y[:300])
    model.calibrate(X[300:500], Y[300:500])
    proba = model.predict_proba(X[500:])
    expected = np.column_stack(
        [
            block[:, 1] if block.shape[1] == 2 else np.zeros(100)
            for block in model.estimator_.predict_proba(X[500:])
        ]
    )
    np.testing.assert_array_equal(proba, expected)
    assert model.predict_set(X[500:]).shape == (100, 3)
    np.testing.assert_array_equal(proba[:, 2], 0.0)
    Y[:300, 2] = Y[300:600, 2]
    per_label = MultiLabelRiskController(MultiOutputClassifier(LogisticRegression()))
    sets = per_label.fit(X[:300], Y[:300]).calibrate(X[300:500], Y[300:500]).predict_set(X[500:])
    default = MultiLabelRiskController().fit(X[:300], Y[:300]).calibrate(X[300:500], Y[300:500])
    assert sets.shape == default.predict_set(X[500:]).shape == (100, 3)


@pytest.mark.filterwarnings("ignore:.*calibration rows have no true label")
def test_dataframes_pickles_clones_and_unchanged_inputs():
    rng = np.random.default_rng(7)
    X = pd.DataFrame(rng.normal(size=(500, 3)), columns=["a", "b", "c"])
    Y = pd.DataFrame((X.to_numpy() + rng.normal(size=(500, 3)) > 0).astype(int))
    untouched = Unchanged(X, Y)
    model = MultiLabelRiskController(alpha=0.2, method="rcps", random_state=0)
    model.fit(X[:200], Y[:200]).calibrate(X[200:400], Y[200:400])
    sets = model.predict_set(X[400:])
    untouched.check()
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict_set(X[400:]), sets)
    twin = clone(model)
    assert twin.get_params() == model.get_params() and not hasattr(twin, "estimator_")
    np.testing.assert_array_equal(
        twin.fit(X[:200], Y[:200]).calibrate(X[200:400], Y[200:400]).predict_set(X[400:]), sets
    )


def test_tags_say_multi_label_target():
    """The controller takes a 0/1 label matrix only: its scikit-learn tags said single
    output, not multi-label (inherited). scikit-learn's estimator checks feed 1-D class
    targets, so they cannot run on it; the tests here cover clone, params and pickling."""
    tags = MultiLabelRiskController().__sklearn_tags__()
    assert tags.classifier_tags.multi_label
    assert tags.target_tags.multi_output and not tags.target_tags.single_output
    assert tags.target_tags.required


@pytest.mark.parametrize("dtype", ["Int64", "boolean", "mixed"])
def test_label_frames_with_nullable_or_mixed_columns_are_label_matrices(dtype):
    """A frame of bool and int columns, or of pandas' nullable dtypes (what
    ``convert_dtypes()`` gives), holds 0/1 labels: it was refused as dtype object."""
    rng = np.random.default_rng(9)
    X = rng.normal(size=(400, 3))
    Y = (X + rng.normal(size=(400, 3)) > 0).astype(int)
    frame = pd.DataFrame(Y, columns=["a", "b", "c"])
    frame = frame.astype(dtype) if dtype != "mixed" else frame.astype({"a": bool})
    model = MultiLabelRiskController(alpha=0.2, random_state=0).fit(X[:200], Y[:200])
    reference = clone(model).fit(X[:200], Y[:200]).calibrate(X[200:300], Y[200:300])
    sets = model.calibrate(X[200:300], frame[200:300]).predict_set(X[300:])
    np.testing.assert_array_equal(sets, reference.predict_set(X[300:]))
    missing = frame.astype("Int64" if dtype != "boolean" else "boolean")
    missing.iloc[210, 1] = pd.NA
    with pytest.raises(ValueError, match="0/1 entries"):
        model.calibrate(X[200:300], missing[200:300])


def test_mondrian_groups_are_calibrated_separately():
    rng = np.random.default_rng(8)
    P, Y = draw(600, rng)
    groups = np.where(rng.random(600) < 0.5, "a", "b")
    model = controller(alpha=0.15).calibrate(P[:400], Y[:400], groups=groups[:400])
    sets = model.predict_set(P[400:], groups=groups[400:])
    for g in ("a", "b"):
        alone = controller(alpha=0.15).calibrate(
            P[:400][groups[:400] == g], Y[:400][groups[:400] == g]
        )
        rows = groups[400:] == g
        np.testing.assert_array_equal(sets[rows], alone.predict_set(P[400:][rows]))


@pytest.mark.parametrize(
    ("params", "y", "message"),
    [
        ({"risk": "fdr"}, None, "`risk` must be one of"),
        ({"method": "lt"}, None, "`method` must be one of"),
        ({"risk": "precision"}, None, "risk='precision' needs method='ltt'"),
        ({"method": "ltt", "fwer": "holm"}, None, "`fwer` must be one of"),
        ({"method": "ltt", "thresholds": 0}, None, "`thresholds` must be at least 1"),
        (
            {"method": "ltt", "thresholds": [0.5, 1.5]},
            None,
            r"got 1\.5 \(entry 1\): drop them\.$",
        ),
        # a grid starting at 0 (MAPIE's np.arange(0, 1, 0.01)): the entry named, not the
        # whole grid printed (clf review, stop 58)
        (
            {"method": "ltt", "thresholds": np.linspace(0, 1, 101)},
            None,
            r"got 0\.0 \(entry 0\).*every set\)\.$",
        ),
        ({"method": "ltt", "thresholds": True}, None, "probabilities in"),
        ({"method": "ltt", "thresholds": [[0.3, 0.6]]}, None, "probabilities in"),
        ({"delta": 1.0}, None, "`delta` must lie strictly between 0 and 1"),
        ({"alpha": 1.5}, None, "alpha"),
        ({}, lambda Y: Y[:, 0], r"label matrix of shape \(n_samples, n_labels\)"),
        ({}, lambda Y: Y * 2, "0/1 entries"),
        ({}, lambda Y: np.where(Y, 1.0, np.nan), "0/1 entries"),
        ({}, lambda Y: Y[:-1], "rows but X has"),
        ({}, lambda Y: Y.astype(str), "0/1 entries"),
    ],
)
def test_bad_input_names_the_argument(params, y, message):
    rng = np.random.default_rng(9)
    P, Y = draw(50, rng)
    target = Y.astype(int) if y is None else y(Y.astype(int))
    with pytest.raises(ValueError, match=message):
        controller(**params).calibrate(P, target)


@pytest.mark.filterwarnings("ignore:.*calibration rows have no true label")
def test_a_changed_delta_asks_rcps_for_a_new_calibration():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(300, 3))
    Y = (X + rng.normal(size=(300, 3)) > 0).astype(int)
    model = MultiLabelRiskController(method="rcps").fit(X[:100], Y[:100])
    model.calibrate(X[100:], Y[100:]).set_params(delta=0.3)
    with pytest.raises(NotFittedError, match=r"delta=0\.1"):
        model.predict_set(X)
    ltt = MultiLabelRiskController(method="ltt").fit(X[:100], Y[:100])
    ltt.calibrate(X[100:], Y[100:]).set_params(fwer="bonferroni")
    with pytest.raises(NotFittedError, match="fwer='fixed_sequence'"):
        ltt.predict_set(X)


@pytest.mark.filterwarnings("ignore:.*calibration rows have no true label")
def test_wrong_order_and_mismatched_labels_are_refused():
    rng = np.random.default_rng(10)
    X = rng.normal(size=(300, 3))
    Y = (X + rng.normal(size=(300, 3)) > 0).astype(int)
    model = MultiLabelRiskController()
    with pytest.raises(NotFittedError, match="before fit"):
        model.calibrate(X, Y)
    model.fit(X[:100], Y[:100])
    with pytest.raises(NotFittedError, match="needs calibration"):
        model.predict_set(X)
    with pytest.raises(ValueError, match="`y` has 2 label columns but the model predicts 3"):
        model.calibrate(X[100:200], Y[100:200, :2])
    model.calibrate(X[100:200], Y[100:200])
    sets = model.predict_set(X)
    # settings conformal risk control never reads keep its calibration
    model.set_params(delta=0.3, fwer="bonferroni", thresholds=20)
    np.testing.assert_array_equal(model.predict_set(X), sets)
    model.set_params(method="rcps")
    with pytest.raises(NotFittedError, match="parameters changed since calibrate"):
        model.predict_set(X)
    with pytest.raises(TypeError, match=r"LinearSVC.*predict_proba"):
        MultiLabelRiskController(LinearSVC()).fit(X, Y)
    with pytest.raises(
        ValueError,
        match=r"`y` has 4 label columns but the estimator \(ColumnsAreProbabilities\) predicts 3",
    ):
        controller().calibrate(np.clip(X, 0, 1), np.ones((300, 4), dtype=int))
    # one label column and a plain binary classifier: the message says how to wrap it
    single = MultiLabelRiskController(LogisticRegression().fit(X[:100], Y[:100, 0]))
    with pytest.raises(
        ValueError, match=r"predicts 2 \(the classes 0 and 1.*MultiOutputClassifier"
    ):
        single.calibrate(X[100:], Y[100:, :1])


def test_rcps_needs_enough_rows_for_its_bound():
    # with no miss at all the p-value is (1 - alpha)^n: below delta = 0.1 from n = 22
    Y = np.ones((22, 6), dtype=int)
    P = np.random.default_rng(11).random((22, 6))
    with pytest.warns(UserWarning, match=r"\(1 - alpha\)\^n < delta"):
        sets = controller(method="rcps").calibrate(P[:21], Y[:21]).predict_set(0 * P)
    assert sets.all()  # an infinite threshold: even probability 0 is in
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not controller(method="rcps").calibrate(P, Y).predict_set(0 * P).any()


def test_unclear_model_output_and_ragged_labels_are_refused():
    class ListWithoutClasses:
        def predict_proba(self, X):
            return [np.ones((len(X), 1)), np.full((len(X), 2), 0.5)]

    X = np.zeros((10, 2))
    with pytest.raises(ValueError, match="no `classes_`"):
        MultiLabelRiskController(ListWithoutClasses()).calibrate(X, np.ones((10, 2), int))
    with pytest.raises(ValueError, match=r"got lists of labels.*MultiLabelBinarizer"):
        controller().calibrate(X[:2], [[0, 1], [1]])
    # a 1-D y was told to use MultiLabelBinarizer, which does not apply (docsA review)
    with pytest.raises(ValueError, match=r"shape \(10,\); for a single 0/1 label .*reshape"):
        MultiLabelRiskController().fit(X, np.arange(10) % 2)
    with pytest.raises(ValueError, match=r"SplitConformalClassifier.*label_binarize"):
        MultiLabelRiskController().fit(X, np.arange(10) % 3)
    # a pandas Series (diffrev10: TypeError "'StringDtype' object is not iterable") and
    # text classes held as objects get the same remedies
    for labels in (
        pd.Series(list("abcabcabca"), dtype="string"),
        np.array(list("abcabcabca"), dtype=object),
    ):
        with pytest.raises(ValueError, match=r"shape \(10,\); for one class per row"):
            MultiLabelRiskController().fit(X, labels)
    with pytest.raises(ValueError, match=r"for a single 0/1 label"):
        MultiLabelRiskController().fit(X, pd.Series(np.arange(10) % 2))


def test_predict_is_a_label_matrix_and_unlabelled_rows_warn():
    rng = np.random.default_rng(12)
    P, Y = draw(100, rng)
    Y[:10] = False
    with pytest.warns(UserWarning, match=r"10 of 100 .* alpha / 0.9 "):
        model = controller().calibrate(P, Y)
    np.testing.assert_array_equal(model.predict(P), (P >= 0.5).astype(int))


def brute_force_ltt(P_cal, Y_cal, P_test, alpha, risk, grid, fwer, delta=0.1):
    """Learn then test by hand: every threshold's risk and p-value from the safe end of
    the grid (the largest sets, or the smallest for precision), the FWER rule, the
    certified threshold furthest from the safe end."""
    n = len(P_cal)
    certified = []
    for t in sorted(grid, reverse=risk == "precision"):
        sets = 1 - P_cal <= 1 - t
        if risk == "precision":
            size = sets.sum(axis=1)
            loss = np.where(size > 0, (sets & ~Y_cal).sum(axis=1) / np.maximum(size, 1), 0)
        else:
            fnr, miss = losses(sets, Y_cal)
            loss = fnr if risk == "fnr" else miss.astype(float)
        mean = loss.mean()
        if risk == "miscoverage":
            p = stats.binom.cdf(np.ceil(n * mean - 1e-9), n, alpha)
        else:
            p = hoeffding_bentkus_pvalue(mean, n, alpha)
        ok = p < (delta / len(grid) if fwer == "bonferroni" else delta)
        if ok:
            certified.append(t)
        elif fwer == "fixed_sequence":
            break
    if not certified:
        return np.full(P_test.shape, risk != "precision")
    return 1 - P_test <= 1 - certified[-1]


@pytest.mark.filterwarnings("ignore:No threshold of the grid is certified")
@pytest.mark.filterwarnings("ignore:.*calibration rows have no true label")
@pytest.mark.parametrize("risk", ["fnr", "miscoverage", "precision"])
@pytest.mark.parametrize("fwer", ["fixed_sequence", "bonferroni"])
def test_learn_then_test_matches_a_brute_force_procedure(risk, fwer):
    rng = np.random.default_rng(13)
    P_cal, Y_cal = draw(400, rng, ties=True)
    P_test, _ = draw(100, rng)
    alphas = [0.05, 0.2, 0.4]
    for grid in (25, [0.07, 0.3, 0.5, 0.55, 0.9]):
        model = controller(method="ltt", risk=risk, fwer=fwer, thresholds=grid, alpha=alphas)
        sets = model.calibrate(P_cal, Y_cal).predict_set(P_test)
        values = np.arange(1, grid + 1) / grid if isinstance(grid, int) else grid
        for j, alpha in enumerate(alphas):
            expected = brute_force_ltt(P_cal, Y_cal, P_test, alpha, risk, values, fwer)
            np.testing.assert_array_equal(sets[:, :, j], expected)


@pytest.mark.slow
def test_ltt_keeps_precision_above_1_minus_alpha_with_probability_1_minus_delta():
    alpha, delta, n_cal, repeats = 0.3, 0.1, 150, 300
    rng = np.random.default_rng(14)
    P_big, Y_big = draw(40_000, rng)

    def precision_risk(sets):
        size = sets.sum(axis=1)
        false = (sets & ~Y_big).sum(axis=1)
        return np.where(size > 0, false / np.maximum(size, 1), 0).mean()

    grid = np.arange(1, 51) / 50
    risks_big = np.array([precision_risk(P_big >= t) for t in grid])
    exceed = {"ltt": 0, "no correction": 0}
    for _ in range(repeats):  # independent calibration sets
        P, Y = draw(n_cal, rng)
        model = controller(method="ltt", risk="precision", alpha=alpha, thresholds=50)
        exceed["ltt"] += precision_risk(model.calibrate(P, Y).predict_set(P_big)) > alpha
        # the naive choice: the largest sets whose calibration precision reaches 1 - alpha
        size = (P[:, :, None] >= grid).sum(axis=1)
        false = ((P[:, :, None] >= grid) & ~Y[:, :, None]).sum(axis=1)
        empirical = np.where(size > 0, false / np.maximum(size, 1), 0).mean(axis=0)
        exceed["no correction"] += risks_big[np.flatnonzero(empirical <= alpha)[0]] > alpha
    limit = stats.binom.ppf(1 - 1e-3, repeats, delta)
    assert exceed["ltt"] <= limit
    assert exceed["no correction"] > limit  # the same check rejects the naive choice


@pytest.mark.parametrize("fwer", ["fixed_sequence", "bonferroni"])
def test_the_grid_is_a_set_of_thresholds(fwer):
    # order and repeats do not matter: the fixed sequence runs from the safe end of the
    # sorted grid and Bonferroni divides delta by the number of distinct thresholds
    rng = np.random.default_rng(16)
    P, Y = draw(300, rng)
    grid = np.array([0.3, 0.5, 0.55, 0.07, 0.9])
    for risk in ("fnr", "precision"):
        sets = [
            controller(method="ltt", risk=risk, fwer=fwer, thresholds=g, alpha=0.2)
            .calibrate(P, Y)
            .predict_set(P)
            for g in (np.sort(grid), grid[::-1], [*grid, 0.5, 0.07])
        ]
        np.testing.assert_array_equal(sets[0], sets[1])
        np.testing.assert_array_equal(sets[0], sets[2])


def test_precision_sends_unseen_groups_and_strict_levels_to_empty_sets():
    rng = np.random.default_rng(15)
    P, Y = draw(1000, rng)
    model = controller(method="ltt", risk="precision", alpha=0.2)
    model.calibrate(P, Y, groups=np.repeat([0, 1], 500))
    with pytest.warns(UserWarning, match="groups without calibration data.*are empty"):
        sets = model.predict_set(P[:5], groups=np.full(5, 2))
    assert not sets.any()  # the least risky sets, not the whole label space
    noise = rng.random(Y.shape) < 0.5  # labels unrelated to the probabilities
    with pytest.warns(UserWarning, match="keep no label of any calibration row"):
        strict = controller(method="ltt", risk="precision", alpha=0.005).calibrate(P, noise)
    assert not strict.predict_set(P).any()  # only t = 1 is certified: p >= 1 keeps nothing


def test_label_sets_need_a_multi_label_model_and_labelled_rows():
    """Review findings: a single-label classifier's probabilities (they sum to one) read as
    label probabilities warn, unless every row has exactly one label (a multi-class
    problem, where that model is the right one); a calibration set without any label has
    nothing to calibrate under the FNR and is refused, naming `y`."""
    rng = np.random.default_rng(0)
    P, Y = draw(400, rng, n_labels=5)
    softmax = P / P.sum(axis=1, keepdims=True)
    with pytest.warns(UserWarning, match="probabilities sum to 1 on every calibration row"):
        MultiLabelRiskController(OneLabelModel()).calibrate(softmax, Y)
    one_hot = np.eye(5, dtype=int)[np.argmax(softmax, axis=1)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MultiLabelRiskController(OneLabelModel()).calibrate(softmax, one_hot)
    for risk in ("fnr", "miscoverage"):
        with pytest.raises(ValueError, match="No calibration row of `y` has a true label"):
            MultiLabelRiskController(ColumnsAreProbabilities(), risk=risk).calibrate(
                P, np.zeros_like(Y)
            )


def test_the_pvalue_refuses_what_is_not_a_risk():
    """Review finding: a negative risk gave p = 0 (certifying anything) and NaN passed."""
    for risk, n, alpha, name in [
        ([-0.5, 0.05], 100, 0.1, "`risk`"),
        ([0.05, np.nan], 100, 0.1, "`risk`"),
        (["a"], 100, 0.1, "`risk`"),
        ([0.05], 10.5, 0.1, "`n`"),
        ([0.05], 0, 0.1, "`n`"),
        ([0.05], 100, 1.5, "`alpha`"),
        ([0.05], 100, [0.1, 0.2], "`alpha`"),
    ]:
        with pytest.raises(ValueError, match=name):
            hoeffding_bentkus_pvalue(risk, n, alpha)


def test_a_risk_level_above_one_half_is_not_read_as_a_coverage_level():
    """alpha bounds the expected FNR (or false-label share): alpha=0.6 warned that it was
    a miscoverage level and advised alpha=0.4, which would change the user's target."""
    P, Y = draw(300, np.random.default_rng(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        controller(risk="fnr", alpha=0.6).calibrate(P, Y)
    with pytest.warns(UserWarning, match=r"alpha=0\.6 is the miscoverage level"):
        controller(risk="miscoverage", alpha=0.6).calibrate(P, Y)


def test_a_risk_level_is_not_called_a_miscoverage_level():
    """For the false negative rate, alpha bounds an expected loss: out-of-range levels
    say so, and a per-call level above 0.5 is not taken for a coverage level."""
    rng = np.random.default_rng(0)
    P, Y = draw(200, rng)
    with pytest.raises(ValueError, match="it is the risk level: a bound on the expected loss"):
        controller(risk="fnr", alpha=1.5).calibrate(P, Y)
    with pytest.raises(ValueError, match="it is the risk level"):
        hoeffding_bentkus_pvalue([0.1], 10, 0.0)
    model = controller(risk="fnr").calibrate(P[:150], Y[:150])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.predict_set(P[150:], alpha=0.6)
    with pytest.raises(ValueError, match="it is the risk level"):
        model.predict_set(P[150:], alpha=1.2)
    with pytest.warns(UserWarning, match="miscoverage level"):  # coverage is still coverage
        controller(risk="miscoverage").calibrate(P[:150], Y[:150]).predict_set(P[150:], alpha=0.6)


def test_a_single_label_model_is_named_with_the_wrapper_to_use():
    """LogisticRegression given a label matrix failed with scikit-learn's "y should be a 1d
    array": the message now names the model and OneVsRestClassifier / MultiOutputClassifier."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    Y = (rng.random((150, 4)) < 0.4).astype(int)
    with pytest.raises(ValueError, match=r"`estimator` \(LogisticRegression\) fits one label"):
        MultiLabelRiskController(LogisticRegression()).fit(X, Y)
    wrapped = MultiLabelRiskController(MultiOutputClassifier(LogisticRegression()))
    assert wrapped.fit(X, Y).predict(X[:2]).shape == (2, 4)  # the remedy works


def test_a_model_fitted_on_labels_other_than_0_1_is_refused():
    """Review finding: a multi-output model fitted on 'no'/'yes' gave probabilities of
    presence all 0 (every set full), one fitted on 1/2 inverted ones (sets of 3.92 of 4
    labels against 2.25), without a word."""
    from sklearn.datasets import make_multilabel_classification

    X, Y = make_multilabel_classification(n_samples=700, n_features=8, n_classes=4, random_state=0)
    for coded in (np.where(Y == 1, "yes", "no"), Y + 1):
        model = RandomForestClassifier(n_estimators=5, random_state=0).fit(X[:300], coded[:300])
        with pytest.raises(ValueError, match=r"fitted with classes .* for label 0.*Refit on 0/1"):
            MultiLabelRiskController(model, alpha=0.1).calibrate(X[300:500], Y[300:500])
    for coded in (Y, Y.astype(bool)):
        model = RandomForestClassifier(n_estimators=5, random_state=0).fit(X[:300], coded[:300])
        controller = MultiLabelRiskController(model, alpha=0.1).calibrate(X[300:500], Y[300:500])
        assert controller.predict_set(X[500:]).shape == (200, 4)
    # review finding: predict and predict_proba before any step asked only for 'fit'
    unused = MultiLabelRiskController(model, alpha=0.1)
    for method in ("predict", "predict_proba"):
        with pytest.raises(NotFittedError, match=rf"{method} needs fit.*or calibrate"):
            getattr(unused, method)(X[500:])


def test_label_matrices_of_text_are_refused_in_any_container():
    """Review finding: a DataFrame of the strings '0'/'1' was read as numbers while the
    same array was refused; both are refused now, with the conversion to make."""
    from uqconform.classification.risk import check_label_matrix

    text = np.array([["0", "1"], ["1", "0"]])
    for labels in (text, pd.DataFrame(text), text.astype(object)):
        with pytest.raises(ValueError, match=r"0/1 entries.*astype\(int\)|0/1 entries"):
            check_label_matrix(labels, 2)
    mixed = pd.DataFrame({"a": pd.array([0, 1], dtype="Int64"), "b": [True, False]})
    np.testing.assert_array_equal(check_label_matrix(mixed, 2), [[0, 1], [1, 0]])


@pytest.mark.filterwarnings("ignore:.*calibration rows have no true label")
def test_label_frames_in_another_column_order_are_refused():
    """Review finding: a label DataFrame whose columns came in another order at calibrate
    than at fit was read by position (test FNR far from alpha, without a word)."""
    from sklearn.datasets import make_multilabel_classification

    X, Y = make_multilabel_classification(n_samples=500, n_features=5, n_classes=4, random_state=0)
    names = ["sport", "politics", "tech", "art"]
    frame = pd.DataFrame(Y, columns=names)
    swapped = frame[names[::-1]]
    model = MultiLabelRiskController().fit(X[:200], frame[:200])
    with pytest.raises(ValueError, match=r"columns of `y` .* differ from the label columns seen"):
        model.calibrate(X[200:400], swapped[200:400])
    np.testing.assert_array_equal(model.label_names_in_, names)
    model.calibrate(X[200:400], frame[200:400])
    with pytest.raises(ValueError, match=r"y\[model.label_names_in_\]"):
        model.score(X[400:], swapped[400:])
    assert model.score(X[400:], frame[400:]) == model.score(X[400:], Y[400:])
    # a fitted model adopted at calibrate: the names come from that first label frame
    adopted = MultiLabelRiskController(model.estimator_).calibrate(X[200:400], frame[200:400])
    np.testing.assert_array_equal(adopted.label_names_in_, names)
    with pytest.raises(ValueError, match="differ from the label columns seen"):
        adopted.score(X[400:], swapped[400:])
    # integer labels that reorder 0..3 (a frame built from an array) name the positions
    plain = MultiLabelRiskController().fit(X[:200], Y[:200])
    with pytest.raises(ValueError, match=r"reorder the outputs \[0, 1, 2, 3\]"):
        plain.calibrate(X[200:400], pd.DataFrame(Y)[[3, 2, 1, 0]][200:400])


@pytest.mark.filterwarnings("ignore:.*calibration rows have no true label")
def test_the_default_model_predicts_one_column_for_one_label():
    """Review finding: the default OneVsRestClassifier(LogisticRegression()) predicts two
    columns for a single label column, and calibrate blamed "the estimator" the user never
    passed. The default is MultiOutputClassifier for one label column; a user's
    OneVsRestClassifier is named, with MLPClassifier, as giving two columns."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 3))
    Y = (X + rng.normal(size=(400, 3)) > 0).astype(int)
    one = MultiLabelRiskController().fit(X[:200], Y[:200, :1]).calibrate(X[200:], Y[200:, :1])
    assert isinstance(one.estimator_, MultiOutputClassifier)
    assert one.predict_set(X[:5]).shape == (5, 1)
    several = MultiLabelRiskController().fit(X[:200], Y[:200])
    assert isinstance(several.estimator_, OneVsRestClassifier)  # unchanged for 2+ labels
    ovr = MultiLabelRiskController(OneVsRestClassifier(LogisticRegression()))
    with pytest.raises(
        ValueError,
        match=r"estimator \(OneVsRestClassifier\) predicts 2 .*MLPClassifier.*"
        r"MultiOutputClassifier\(model\)",
    ):
        ovr.fit(X[:200], Y[:200, :1]).calibrate(X[200:], Y[200:, :1])


def test_unlabelled_rows_warn_with_the_share_of_each_group():
    """Review finding: with Mondrian groups the warning quoted the pooled share of labelled
    rows, a bound false for a group with few of them, and a group without any labelled row
    silently got empty sets. The smallest share per group is quoted now, and groups
    without a labelled row are named."""
    rng = np.random.default_rng(2)
    P, Y = draw(900, rng)
    groups = np.repeat(np.array(["full", "rare", "none"]), 300)
    Y[(groups == "rare") & (rng.random(900) < 0.9)] = False
    Y[groups == "none"] = False
    rare = Y[groups == "rare"].any(axis=1).mean()
    with pytest.warns(UserWarning, match="have no true label") as record:
        model = controller(alpha=0.1).calibrate(P, Y, groups=groups)
    message = str(next(w.message for w in record if "no true label" in str(w.message)))
    assert f"alpha / {rare:.3g} in group 'rare' (300 rows)" in message
    assert "No row has a label in group 'none' (300 rows)" in message
    assert "'full'" not in message  # every row labelled there
    sets = model.predict_set(P, groups=groups)
    assert not sets[groups == "none"].any()  # as the warning says


@pytest.mark.parametrize("method", ["rcps", "ltt"])
@pytest.mark.parametrize("risk", ["fnr", "miscoverage"])
def test_unlabelled_rows_in_groups_that_all_have_labelled_rows(method, risk):
    """Review s63: Mondrian RCPS and LTT failed at calibrate with numpy's "need at least
    one array to concatenate" when some rows had no label but every group had a labelled
    row (the description of groups without any was computed for no group)."""
    rng = np.random.default_rng(4)
    P, Y = draw(600, rng)
    groups = np.repeat(np.array(["a", "b"]), 300)
    Y[rng.random(600) < 0.15] = False
    with pytest.warns(UserWarning, match=r"calibration rows have no true label") as record:
        model = controller(alpha=0.2, method=method, risk=risk).calibrate(P, Y, groups=groups)
    message = str(next(w.message for w in record if "no true label" in str(w.message)))
    assert "in group 'a' (300 rows)" in message and "No row has a label" not in message
    pooled = controller(alpha=0.2, method=method, risk=risk)
    for group in ("a", "b"):  # each group's sets are its own calibration's
        rows = groups == group
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            alone = pooled.calibrate(P[rows], Y[rows]).predict_set(P[rows])
        np.testing.assert_array_equal(model.predict_set(P[rows], groups=groups[rows]), alone)


def test_exact_ties_of_the_rule_at_many_rows_are_ties():
    """Review finding: the tolerance of 1e-9 on the summed losses was below the float error
    of their running sum at many rows (every row with 3 labels, each weighing 1/3), so an
    exact tie of CRC's rule, or a whole number of losses in RCPS's binomial tail, took one
    label more than the definition. Checked against exact arithmetic."""
    from fractions import Fraction

    n = 9999
    P = np.random.default_rng(3).random((n, 3))
    Y = np.ones((n, 3), dtype=int)  # the j-th smallest score covered: summed loss n - j/3
    alphas = [0.1, 0.2, 0.3]
    covered = np.arange(3 * n + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for method in ("crc", "rcps"):
            sets = controller(alpha=alphas, method=method).calibrate(P, Y).predict_set(P)
            for i, alpha in enumerate(alphas):
                if method == "crc":  # the fewest labels j with n - j/3 + 1 <= (n + 1) alpha
                    need = 3 * (n + 1) * (1 - Fraction(str(alpha)))
                    expected = max(0, -(-need.numerator // need.denominator))
                else:  # the summed losses are exact here: (3n - j) / 3 of n rows
                    risk = (3 * n - covered) / (3 * n)
                    expected = int(np.argmax(hoeffding_bentkus_pvalue(risk, n, alpha) < 0.1))
                assert sets[..., i].sum() == expected


@pytest.mark.filterwarnings("ignore:Too few calibration rows")
@pytest.mark.filterwarnings("ignore:No threshold of the grid is certified")
@pytest.mark.parametrize(
    ("method", "rows", "outcome"),
    [
        ("crc", 10, "empty"),  # 1 <= (n + 1) alpha from n = 9
        ("crc", 5, "every label"),
        ("rcps", 10, "every label"),  # (1 - alpha)^n < delta from n = 22
        ("rcps", 30, "empty"),
        ("ltt", 10, "every label"),
        ("ltt", 30, "only the labels with probability at least 1"),
    ],
)
def test_a_group_without_labelled_rows_is_told_what_its_sets_are(method, rows, outcome):
    """Review finding: a Mondrian group without any labelled calibration row was said to
    get empty sets, but with RCPS or LTT and a small group (or CRC and a tiny one) its
    sets hold every label. The warning now reads the group's thresholds."""
    rng = np.random.default_rng(4)
    P, Y = draw(300 + rows, rng)
    groups = np.where(np.arange(300 + rows) < rows, "b", "a")
    Y[groups == "b"] = False
    with pytest.warns(UserWarning, match="have no true label") as record:
        model = controller(method=method, alpha=0.1, delta=0.1).calibrate(P, Y, groups=groups)
    message = str(next(w.message for w in record if "no true label" in str(w.message)))
    assert f"No row has a label in group 'b' ({rows} rows)" in message
    assert f"at alpha=0.1 those sets {'are' if outcome == 'empty' else 'hold'} {outcome}" in (
        message
    )
    sets = model.predict_set(P[groups == "b"], groups=groups[groups == "b"])
    if outcome == "empty":
        assert not sets.any()
    elif outcome == "every label":
        assert sets.all()
    else:  # the grid's largest threshold, 1: only labels of probability 1
        np.testing.assert_array_equal(sets, P[groups == "b"] >= 1)


@pytest.mark.filterwarnings("ignore:Too few calibration rows")
def test_a_group_without_labelled_rows_names_each_level_outcome():
    rng = np.random.default_rng(5)
    P, Y = draw(310, rng)
    groups = np.where(np.arange(310) < 10, "b", "a")
    Y[groups == "b"] = False
    # CRC: 1 <= (10 + 1) alpha holds at alpha 0.1, not at 0.05
    with pytest.warns(UserWarning, match="have no true label") as record:
        controller(alpha=[0.05, 0.1]).calibrate(P, Y, groups=groups)
    message = str(next(w.message for w in record if "no true label" in str(w.message)))
    assert "at alpha=0.05 those sets hold every label" in message
    assert "at alpha=0.1 they are empty" in message


@pytest.mark.filterwarnings("ignore:No threshold of the grid is certified")
@pytest.mark.parametrize("kind", [list, np.array])
def test_a_grid_changed_in_place_after_calibrate_is_refused(kind):
    """Review finding: a list or array `thresholds` changed in place after calibrate was
    not refused; the sets at a level then depended on which levels had been predicted
    before (the cached level kept the old grid, a new level read the new one)."""
    rng = np.random.default_rng(6)
    P, Y = draw(400, rng)
    grid = kind([0.1, 0.2, 0.3, 0.4, 0.5])
    model = controller(method="ltt", thresholds=grid).calibrate(P, Y)
    model.predict_set(P)
    grid[:] = [0.6, 0.7, 0.8, 0.9, 1.0]
    for alpha in (None, 0.2):
        with pytest.raises(NotFittedError, match=r"parameters changed since calibrate.*0\.1"):
            model.predict_set(P, alpha=alpha)
    model.calibrate(P, Y)  # a new calibration takes the new grid
    fresh = controller(method="ltt", thresholds=[0.6, 0.7, 0.8, 0.9, 1.0]).calibrate(P, Y)
    np.testing.assert_array_equal(model.predict_set(P, alpha=0.2), fresh.predict_set(P, alpha=0.2))


@pytest.mark.filterwarnings("ignore:No threshold of the grid is certified")
def test_every_level_reads_the_grid_tested_at_calibrate():
    """Every level's thresholds come from the grid taken at calibrate, whatever the
    parameter holds since (here a Series, which the settings record keeps by reference);
    a model pickled before that copy was kept reads the parameter."""
    rng = np.random.default_rng(7)
    P, Y = draw(400, rng)
    grid = pd.Series([0.1, 0.2, 0.3, 0.4, 0.5])
    model = controller(method="ltt", thresholds=grid).calibrate(P, Y)
    reference = controller(method="ltt", thresholds=[0.1, 0.2, 0.3, 0.4, 0.5]).calibrate(P, Y)
    model.predict_set(P)
    grid[:] = [0.6, 0.7, 0.8, 0.9, 1.0]
    for alpha in (0.1, 0.2, 0.3):
        np.testing.assert_array_equal(
            model.predict_set(P, alpha=alpha), reference.predict_set(P, alpha=alpha)
        )
    older = pickle.loads(pickle.dumps(reference))
    older.__dict__.pop("_tested_grid")  # as pickled by a build that did not keep it
    np.testing.assert_array_equal(
        older.predict_set(P, alpha=0.25), reference.predict_set(P, alpha=0.25)
    )


@pytest.mark.parametrize(("delta", "kind"), [("0.1", "str"), (None, "None"), (True, "bool")])
def test_a_delta_of_the_wrong_type_is_a_type_error(delta, kind):
    """Review finding: `delta='0.1'`, None or True got the range message "must lie
    strictly between 0 and 1" (and True == 1 made it confusing)."""
    rng = np.random.default_rng(8)
    P, Y = draw(50, rng)
    with pytest.raises(TypeError, match=rf"`delta` must be a float in \(0, 1\), got {kind}"):
        controller(method="rcps", delta=delta).calibrate(P, Y)
    with pytest.raises(ValueError, match="`delta` must lie strictly between 0 and 1, got 0"):
        controller(method="rcps", delta=0).calibrate(P, Y)
    assert controller(method="rcps", delta=np.float32(0.3)).calibrate(P, Y).delta == np.float32(
        0.3
    )


def test_hoeffding_bentkus_pvalue_returns_an_array_of_the_risk_shape():
    """Review finding: a single `risk` gave a numpy float while the docstring promised an
    ndarray: a 0-d array now, and one p-value per risk otherwise."""
    single = hoeffding_bentkus_pvalue(0.05, 100, 0.1)
    assert isinstance(single, np.ndarray) and single.shape == ()
    assert float(single) == hoeffding_bentkus_pvalue([0.05], 100, 0.1)[0]
    table = hoeffding_bentkus_pvalue(np.full((2, 3), 0.05), 100, 0.1)
    assert isinstance(table, np.ndarray) and table.shape == (2, 3)


@pytest.mark.parametrize(
    ("shape_of", "message"),
    [
        (lambda Y: Y[:, :, None], r"shape \(50, 6, 1\); its axis 2 has size 1: .*y\[\.\.\., 0\]"),
        (lambda Y: Y[None], r"shape \(1, 50, 6\); its axis 0 has size 1: .*y\[0\]"),
        (lambda Y: np.stack([1 - Y, Y], axis=2), r"one-hot .*y\[\.\.\., 1\]"),
        (lambda Y: np.stack([Y, Y, Y], axis=2), r"shape \(50, 6, 3\); .*y\.reshape\(50, -1\)"),
    ],
)
def test_a_label_array_with_an_extra_axis_is_told_how_to_drop_it(shape_of, message):
    """Review finding (s57): a 3-D label array, (n, L, 1), one-hot (n, L, 2) or (1, n, L),
    was told to use MultiLabelBinarizer, which turns lists of labels into a matrix."""
    rng = np.random.default_rng(17)
    P, Y = draw(50, rng)
    with pytest.raises(ValueError, match=message) as error:
        controller().calibrate(P, shape_of(Y.astype(int)))
    assert "MultiLabelBinarizer" not in str(error.value)


def test_a_label_matrix_without_columns_or_transposed_is_named():
    """Review finding (s57): y of shape (n, 0) at fit got scikit-learn's "Unknown label
    type", and a transposed label matrix "`y` has 6 rows but X has 50 rows" without a hint."""
    rng = np.random.default_rng(18)
    P, Y = draw(50, rng)
    Y = Y.astype(int)
    for call in (MultiLabelRiskController().fit, controller().calibrate):
        with pytest.raises(ValueError, match=r"`y` has no label columns \(shape \(50, 0\)\)"):
            call(P, Y[:, :0])
    with pytest.raises(
        ValueError, match=r"`y` has 6 rows but X has 50 rows; transposed\? pass y\.T"
    ):
        controller().calibrate(P, Y.T)
    with pytest.raises(ValueError, match=r"`y` has 49 rows but X has 50 rows\.$"):
        controller().calibrate(P, Y[:-1])
    # diffrev19: a (49, 50) matrix is no transposed label matrix, and a 3-D y with other
    # rows than X is not told to reshape (that would mix the rows' labels)
    square = np.zeros((49, 50), dtype=int)
    with pytest.raises(ValueError, match=r"`y` has 49 rows but X has 50 rows\.$"):
        controller().calibrate(P, square)
    with pytest.raises(ValueError, match=r"3 axes and 60 rows.*50 rows") as caught:
        controller().calibrate(P, np.zeros((60, 5, 1), dtype=int))
    assert "reshape" not in str(caught.value)


@pytest.mark.parametrize("method", ["crc", "rcps"])
def test_methods_without_a_grid_do_not_build_the_ltt_grid(method):
    """Review finding (s57): `thresholds` (read by LTT only) was built at every validation:
    method='crc' with thresholds=10**7 took 160 MB; 10**18 cannot be allocated at all."""
    rng = np.random.default_rng(19)
    P, Y = draw(200, rng)
    reference = controller(method=method).calibrate(P, Y).predict_set(P)
    model = controller(method=method, thresholds=10**18).calibrate(P, Y)
    np.testing.assert_array_equal(model.predict_set(P), reference)
    with pytest.raises(ValueError, match="`thresholds` must be at least 1"):
        controller(method=method, thresholds=0).calibrate(P, Y)


@pytest.mark.filterwarnings("ignore:No threshold of the grid is certified")
@pytest.mark.filterwarnings("ignore:The certified thresholds keep no label")
@pytest.mark.filterwarnings("ignore:.*calibration rows have no true label")
@pytest.mark.parametrize("risk", ["fnr", "miscoverage", "precision"])
@pytest.mark.parametrize("fwer", ["fixed_sequence", "bonferroni"])
def test_learn_then_test_on_fine_grids_matches_a_brute_force_procedure(risk, fwer):
    """LTT computes one loss per distinct set of chosen labels, not per grid point: the
    same sets as the brute force on grids finer than the scores, with ties, repeats and
    unlabelled rows."""
    rng = np.random.default_rng(20)
    P_cal, Y_cal = draw(150, rng, n_labels=4, ties=True)
    Y_cal[:5] = False
    P_test, _ = draw(50, rng, n_labels=4)
    alphas = [0.1, 0.3]
    for grid in (2000, [*np.ceil(rng.random(300) * 100) / 100, 0.5, 1.0]):
        model = controller(method="ltt", risk=risk, fwer=fwer, thresholds=grid, alpha=alphas)
        sets = model.calibrate(P_cal, Y_cal).predict_set(P_test)
        values = np.arange(1, grid + 1) / grid if isinstance(grid, int) else np.unique(grid)
        for j, alpha in enumerate(alphas):
            expected = brute_force_ltt(P_cal, Y_cal, P_test, alpha, risk, values, fwer)
            np.testing.assert_array_equal(sets[:, :, j], expected)


def _block_summed_losses(model, scores, labels, cuts):
    """The summed losses as LTT computed them before review s59: every cut compared with
    every score (the reference for the step-function evaluation)."""
    counts = labels.sum(axis=1)
    out = np.empty(cuts.size)
    for i, cut in enumerate(cuts):  # a loop over cuts: the oracle, not the method
        chosen = scores <= cut
        if model.risk == "precision":
            size = chosen.sum(axis=1)
            false = (chosen & ~labels).sum(axis=1)
            loss = np.divide(false, size, out=np.zeros(size.shape), where=size > 0)
        else:
            missed = (labels & ~chosen).sum(axis=1)
            if model.risk == "fnr":
                loss = np.divide(missed, counts, out=np.zeros(missed.shape), where=counts > 0)
            else:
                loss = (missed > 0).astype(float)
        out[i] = loss.sum()
    return out


def _random_case(rng):
    """Scores and labels with ties (within and across rows), unlabelled rows and a few
    labels per row, of a random size."""
    n, n_labels = int(rng.integers(5, 400)), int(rng.integers(1, 8))
    P, Y = draw(n, rng, n_labels=n_labels, ties=bool(rng.random() < 0.7))
    if rng.random() < 0.5:
        steps = rng.integers(2, 30)
        P = np.round(P * steps) / steps  # coarser: more ties
    Y[rng.random(n) < rng.random() * 0.4] = False
    if not Y.any():
        Y[0, 0] = True
    return 1 - P, Y


@pytest.mark.parametrize("risk", ["fnr", "miscoverage", "precision"])
@pytest.mark.parametrize("fwer", ["fixed_sequence", "bonferroni"])
def test_ltt_step_function_losses_choose_the_thresholds_of_the_block_loop(risk, fwer, monkeypatch):
    """Review finding (s59): LTT's summed losses are a step function of the cut; the
    thresholds it certifies are those of the former cut-by-cut evaluation, on random
    configurations with ties, unlabelled rows, integer and unsorted grids."""
    rng = np.random.default_rng(59)
    for _ in range(60):
        scores, labels = _random_case(rng)
        grid = (
            int(rng.integers(1, 3000))
            if rng.random() < 0.5
            else list(
                np.round(rng.random(int(rng.integers(1, 80))), int(rng.integers(1, 4))).clip(
                    0.001, 1
                )
            )  # unsorted, with repeats
        )
        alphas = np.sort(rng.uniform(0.02, 0.6, size=3))
        model = controller(method="ltt", risk=risk, fwer=fwer, thresholds=grid)
        model._tested_grid = model._grid()
        cuts = np.sort(rng.choice(scores.ravel(), 20))
        losses_now = model._summed_losses(scores, labels, cuts)
        np.testing.assert_allclose(
            losses_now, _block_summed_losses(model, scores, labels, cuts), rtol=0, atol=1e-9
        )
        chosen = model._tested_thresholds(scores, labels, alphas)
        with monkeypatch.context() as patch:
            patch.setattr(
                model,
                "_summed_losses",
                lambda s, y, c, model=model: _block_summed_losses(model, s, y, c),
            )
            np.testing.assert_array_equal(chosen, model._tested_thresholds(scores, labels, alphas))


@pytest.mark.parametrize("grid", [10**9, 10**18])
def test_ltt_refuses_an_integer_grid_too_fine_to_build(grid):
    """Review finding (s59): thresholds=10**9 made LTT build a grid of several GB."""
    rng = np.random.default_rng(61)
    P, Y = draw(50, rng)
    with pytest.raises(
        ValueError, match=r"`thresholds` must be at most 10000000 for method='ltt'.* GB at its"
    ):
        controller(method="ltt", thresholds=grid).calibrate(P, Y)
    controller(method="crc", thresholds=grid).calibrate(P, Y)  # read by LTT only


def test_ltt_takes_an_integer_grid_as_fine_as_the_same_grid_given_as_an_array():
    """Review finding (s59, diff review 28): thresholds=2 * 10**6 was refused (a cap of
    10**6) while the same grid as an array was taken, at the same cost (16 MB, 0.2 s)."""
    rng = np.random.default_rng(64)
    P, Y = draw(200, rng, n_labels=3)
    m = 2 * 10**6
    fine = controller(method="ltt", thresholds=m).calibrate(P, Y)
    same = controller(method="ltt", thresholds=np.arange(1, m + 1) / m).calibrate(P, Y)
    np.testing.assert_array_equal(fine.predict_set(P), same.predict_set(P))


def _exhaustive_rcps(model, scores, labels, alphas):
    """RCPS as before review s59: the p-value at every candidate threshold."""
    n = scores.shape[0]
    counts = labels.sum(axis=1)
    if model.risk == "fnr":
        row, column = np.nonzero(labels)
        values, weights = scores[row, column], 1.0 / counts[row]
    else:
        has = counts > 0
        values = np.where(labels[has], scores[has], -np.inf).max(axis=1)
        weights = np.ones(values.size)
    order = np.argsort(values, kind="stable")
    values, covered = values[order], np.cumsum(weights[order])
    summed = (counts > 0).sum() - np.concatenate([[0.0], covered])
    tolerance = max(1e-9, values.size * np.finfo(float).eps * summed[0])
    whole = np.rint(summed)
    summed = np.where(np.abs(summed - whole) <= tolerance, whole, summed)
    meets = np.array([model._pvalues(summed, n, a) < model.delta for a in alphas])
    candidates = np.concatenate([[-1.0], values])
    return np.where(meets.any(axis=1), candidates[np.argmax(meets, axis=1)], np.inf)


@pytest.mark.parametrize("risk", ["fnr", "miscoverage"])
def test_rcps_bisection_finds_the_threshold_of_the_exhaustive_search(risk, monkeypatch):
    """Review finding (s59): RCPS evaluated a p-value at every candidate for every level;
    the p-value is monotone in the threshold, so a bisection finds the same threshold
    with a few dozen."""
    rng = np.random.default_rng(62)
    evaluated = []
    for _ in range(80):
        scores, labels = _random_case(rng)
        alphas = np.sort(rng.uniform(0.01, 0.7, size=4))
        model = controller(method="rcps", risk=risk, delta=float(rng.uniform(0.01, 0.5)))
        pvalues = model._pvalues
        with monkeypatch.context() as patch:
            patch.setattr(
                model,
                "_pvalues",
                lambda loss, n, level, pvalues=pvalues: (
                    evaluated.append(np.size(loss)) or pvalues(loss, n, level)
                ),
            )
            chosen = model._exact_thresholds(scores, labels, alphas)
        np.testing.assert_array_equal(chosen, _exhaustive_rcps(model, scores, labels, alphas))
    # a bisection over up to 2,800 candidates: about 12 p-values per level, not 2,800
    assert sum(evaluated) <= 80 * 4 * 16


def test_label_matrices_of_other_encodings_are_told_how_to_convert_them():
    """Review finding (s59): a -1/+1 matrix was told "got [-1, -1, -1] ...", 'yes'/'no' text
    to use y.astype(int) (which fails on text), and a missing entry "got [nan]"."""
    rng = np.random.default_rng(63)
    P, Y = draw(40, rng, n_labels=3)
    signs = 2 * Y.astype(int) - 1
    with pytest.raises(ValueError, match=r"got the values \[-1\]: .*\(y > 0\)\.astype\(int\)"):
        controller().calibrate(P, signs)
    twos = Y.astype(int) + 1  # 1/2: the distinct values outside 0/1, no sign advice
    with pytest.raises(ValueError, match=r"got the values \[2\]\.$"):
        controller().calibrate(P, twos)
    text = pd.DataFrame(np.where(Y, "yes", "no"), columns=list("abc"))
    with pytest.raises(ValueError, match=r"""\(y == "yes"\)\.astype\(int\)""") as caught:
        controller().calibrate(P, text)
    assert "'no', 'yes'" in str(caught.value)
    missing = pd.DataFrame(Y.astype(int), columns=list("abc")).astype("Int64")
    missing.iloc[4, 1] = pd.NA
    missing.iloc[9, 2] = pd.NA
    with pytest.raises(
        ValueError, match=r"missing entries \(2: row 4 column 'b', row 9 column 'c'\)"
    ):
        controller().calibrate(P, missing)
    holes = Y.astype(float)
    holes[7, 0] = np.nan
    with pytest.raises(ValueError, match=r"missing entries \(1: row 7 column 0\)"):
        controller().calibrate(P, holes)


def test_label_matrices_of_bools_or_0_1_held_as_objects_are_told_to_use_astype_int():
    """Review finding (s59, diff review 28): Python True/False held as objects (a frame read
    with missing flags, then filled) were told "convert them to 0/1 first" with no recipe,
    where y.astype(int) works; 0.0/1.0 objects too."""
    rng = np.random.default_rng(65)
    P, Y = draw(40, rng, n_labels=3)
    with warnings.catch_warnings():  # pandas' downcasting notice of fillna on objects
        warnings.simplefilter("ignore")
        filled = pd.DataFrame(Y.tolist(), dtype=object).where(Y, None).fillna(False)
        filled = filled.astype(object)  # (pandas 2.0 downcasts the filled frame to bool)
    cases = {
        "python bools": np.array(Y.tolist(), dtype=object),
        "a filled frame": filled,
        "numpy bools as objects": Y.astype(object),
        "0.0/1.0 objects": Y.astype(float).astype(object),
        "a mix of bools and 0/1 ints": np.where(Y, True, 0).astype(object),
    }
    for name, labels in cases.items():
        with pytest.raises(ValueError, match=r"y\.astype\(int\)") as caught:
            controller().calibrate(P, labels)
        assert "dtype object" in str(caught.value), name
        sets = controller().calibrate(P, labels.astype(int)).predict_set(P)  # the recipe works
        np.testing.assert_array_equal(sets, controller().calibrate(P, Y).predict_set(P))


def test_missing_label_entries_held_as_objects_or_text_are_named_as_missing():
    """Review finding (s59, diff review 28): None in a list of 0/1, or NaN in a frame of
    'yes'/'no', got a conversion recipe ((y == "yes").astype(int) would read them as
    absent) instead of the missing-entries message that float NaN get."""
    rng = np.random.default_rng(66)
    P, Y = draw(40, rng, n_labels=3)
    listed = Y.astype(int).tolist()
    listed[2][1] = None
    text = pd.DataFrame(np.where(Y, "yes", "no"), columns=list("abc"))
    text.iloc[5, 2] = np.nan
    strings = text.astype("string")  # pd.NA in pandas' string dtype
    objects = pd.DataFrame(Y.astype(int), dtype=object)
    objects.iloc[3, 0] = pd.NA
    for labels, where in (
        (listed, "1: row 2 column 1"),
        (text, "1: row 5 column 'c'"),
        (strings, "1: row 5 column 'c'"),
        (objects, "1: row 3 column 0"),
    ):
        with pytest.raises(ValueError, match=r"0/1 entries, got missing entries") as caught:
            controller().calibrate(P, labels)
        assert f"({where})" in str(caught.value)
        assert "astype" not in str(caught.value)


def _population_risk(sets, Y, risk):
    """The mean loss of sets on the rows of a population (labels ``Y``)."""
    if risk == "precision":
        size = sets.sum(axis=1)
        return np.where(size > 0, (sets & ~Y).sum(axis=1) / np.maximum(size, 1), 0).mean()
    fnr, miss = losses(sets, Y)
    return (fnr if risk == "fnr" else miss).mean()


@pytest.mark.slow
def test_rcps_on_the_miscoverage_keeps_it_below_alpha_with_probability_1_minus_delta():
    """Review finding (s59): the exact binomial tail of RCPS had no test of its guarantee."""
    alpha, delta, n_cal, repeats = 0.15, 0.1, 100, 300
    rng = np.random.default_rng(64)
    P_big, Y_big = draw(40_000, rng)  # the population, to read each calibration's true risk
    exceed = {"rcps": 0, "crc": 0}
    for _ in range(repeats):  # independent calibration sets
        P, Y = draw(n_cal, rng)
        for method in exceed:
            model = controller(method=method, risk="miscoverage", alpha=alpha, delta=delta)
            sets = model.calibrate(P, Y).predict_set(P_big)
            exceed[method] += _population_risk(sets, Y_big, "miscoverage") > alpha
    # Binomial(repeats, <= delta) exceedances for a valid method, false alarm 1e-3
    limit = stats.binom.ppf(1 - 1e-3, repeats, delta)
    assert exceed["rcps"] <= limit
    assert exceed["crc"] > limit  # the same check rejects the expectation guarantee alone


@pytest.mark.slow
@pytest.mark.parametrize(
    ("risk", "fwer", "alpha"),
    [
        ("fnr", "fixed_sequence", 0.15),
        ("miscoverage", "fixed_sequence", 0.2),
        ("fnr", "bonferroni", 0.15),
        ("precision", "bonferroni", 0.3),
    ],
)
def test_ltt_keeps_each_risk_below_alpha_with_probability_1_minus_delta(risk, fwer, alpha):
    """Review finding (s59): LTT on the FNR and the miscoverage, and with Bonferroni, had
    no test of its guarantee (only equality with a copy of its own formula)."""
    delta, n_cal, repeats = 0.1, 150, 300
    rng = np.random.default_rng(65)
    P_big, Y_big = draw(40_000, rng)
    grid = np.arange(1, 51) / 50
    risks_big = np.array([_population_risk(1 - P_big <= 1 - t, Y_big, risk) for t in grid])
    exceed = {"ltt": 0, "no correction": 0}
    for _ in range(repeats):  # independent calibration sets
        P, Y = draw(n_cal, rng)
        model = controller(method="ltt", risk=risk, fwer=fwer, alpha=alpha, thresholds=50)
        sets = model.calibrate(P, Y).predict_set(P_big)
        exceed["ltt"] += _population_risk(sets, Y_big, risk) > alpha
        # the naive choice: the threshold furthest from the safe end whose calibration
        # risk is at most alpha (the smallest sets for the FNR and the miscoverage, the
        # largest for precision)
        empirical = np.array([_population_risk(1 - P <= 1 - t, Y, risk) for t in grid])
        meeting = np.flatnonzero(empirical <= alpha)
        naive = meeting[0] if risk == "precision" else meeting[-1]
        exceed["no correction"] += risks_big[naive] > alpha
    limit = stats.binom.ppf(1 - 1e-3, repeats, delta)
    assert exceed["ltt"] <= limit
    assert exceed["no correction"] > limit  # the same check rejects the naive choice


class ForeignContainer:
    """A fitted multi-label model from outside scikit-learn (column k of X is P(label k))
    whose predict_proba returns float32 probabilities in another container: a numpy array,
    a torch tensor still in its autograd graph, a scipy CSR matrix or a frame of nullable
    ``Float64`` columns; one array, or one ``(n, 2)`` block per label (``per_label``)."""

    def __init__(self, kind, per_label=False):
        self.kind, self.per_label = kind, per_label

    def _container(self, block):
        if self.kind == "tensor":
            import torch

            return torch.as_tensor(block) * torch.ones(1, requires_grad=True)  # in the graph
        if self.kind == "sparse":
            from scipy import sparse

            return sparse.csr_matrix(block)
        if self.kind == "frame":
            return pd.DataFrame(block).astype("Float64")
        return block

    def predict_proba(self, X):
        P = np.asarray(X, dtype=np.float32)
        if not self.per_label:
            return self._container(P)
        return [self._container(np.column_stack([1 - p, p])) for p in P.T]


@pytest.mark.parametrize("per_label", [False, True])
@pytest.mark.parametrize("kind", ["tensor", "sparse", "frame"])
def test_tensor_sparse_and_nullable_outputs_give_the_numpy_outputs_sets(kind, per_label):
    """Review finding (s60 outfix 1): a predict_proba returning a torch tensor that requires
    grad failed with torch's "Can't call numpy() on Tensor that requires grad", and a scipy
    sparse matrix with numpy's "setting an array element with a sequence", where every
    single-label wrapper reads both."""
    if kind == "tensor":
        pytest.importorskip("torch")
    rng = np.random.default_rng(66)
    P, Y = draw(500, rng, n_labels=4)
    for method in ("crc", "rcps"):
        reference = MultiLabelRiskController(
            ForeignContainer("numpy", per_label), alpha=0.15, method=method
        ).calibrate(P[:300], Y[:300])
        model = MultiLabelRiskController(
            ForeignContainer(kind, per_label), alpha=0.15, method=method
        ).calibrate(P[:300], Y[:300])
        np.testing.assert_array_equal(model.conformity_scores_, reference.conformity_scores_)
        for read in ("predict_set", "predict_proba"):
            got, expected = getattr(model, read)(P[300:]), getattr(reference, read)(P[300:])
            np.testing.assert_array_equal(got, expected)
        assert 0 < model.predict_set(P[300:]).mean() < 1  # sets neither empty nor full


@pytest.mark.parametrize("per_label", [False, True])
def test_a_missing_value_in_a_nullable_probability_frame_is_named_by_row(per_label):
    """Review finding (s60 outfix 2): a pd.NA in a model's frame of nullable Float64
    probabilities gave numpy's bare "float() argument must be ... not 'NAType'" instead of
    the NaN message naming the row."""

    class Holed(ForeignContainer):
        def _container(self, block):
            frame = super()._container(block)
            frame.iloc[3, 1] = pd.NA
            return frame

    rng = np.random.default_rng(67)
    P, Y = draw(200, rng, n_labels=3)
    model = MultiLabelRiskController(Holed("frame", per_label), alpha=0.2)
    with pytest.raises(
        ValueError,
        match=r"\(Holed\) predict_proba gave NaN or infinite probabilities on 1 row of `X` "
        r"\(first: row 3\)",
    ):
        model.calibrate(P, Y)


def test_a_bfloat16_tensor_output_is_read_exactly():
    # numpy has no bfloat16: torch's "Got unsupported ScalarType BFloat16" before
    torch = pytest.importorskip("torch")
    from uqconform._validation import model_output_as_float

    values = [[0.5, 0.25], [0.125, 1.0]]  # bfloat16 numbers
    output = torch.tensor(values, dtype=torch.bfloat16, requires_grad=True) * 1
    np.testing.assert_array_equal(model_output_as_float(output), values)


def test_predict_and_score_read_a_sparse_label_matrix_of_the_model():
    """Review finding (s61): a model fitted on a sparse label matrix predicts one; predict
    wrapped it in a 0-d object array and score raised a TypeError."""
    import scipy.sparse
    from sklearn.metrics import accuracy_score

    rng = np.random.default_rng(611)
    X = rng.normal(size=(600, 4))
    Y = (X[:, :3] + rng.normal(size=(600, 3)) > 0).astype(int)
    model = OneVsRestClassifier(LogisticRegression()).fit(
        X[:300], scipy.sparse.csr_matrix(Y[:300])
    )
    assert scipy.sparse.issparse(model.predict(X[:2]))
    with pytest.warns(UserWarning, match="no true label"):
        wrapped = MultiLabelRiskController(model).calibrate(X[300:500], Y[300:500])
    predicted = wrapped.predict(X[500:])
    assert isinstance(predicted, np.ndarray) and predicted.dtype == np.int64
    np.testing.assert_array_equal(predicted, model.predict(X[500:]).toarray())
    assert wrapped.score(X[500:], Y[500:]) == accuracy_score(Y[500:], predicted)


def test_fit_weights_for_the_default_model_name_a_model_that_takes_them():
    """Review finding (s61): fit(X, Y, sample_weight=w) with the default model failed with
    scikit-learn's messages about OneVsRestClassifier's routing and its inner
    LogisticRegression, objects the user cannot reach; the message names the model to pass,
    and that model takes the weights."""
    import sklearn

    rng = np.random.default_rng(612)
    X = rng.normal(size=(300, 4))
    Y = (X[:, :3] + rng.normal(size=(300, 3)) > 0).astype(int)
    w = rng.random(300)
    with pytest.raises(
        ValueError,
        match=r"fit parameters \['sample_weight'\] cannot reach the default model, "
        r"OneVsRestClassifier\(LogisticRegression\(\)\).*"
        r"estimator=MultiOutputClassifier\(LogisticRegression\(\)\)",
    ):
        MultiLabelRiskController().fit(X, Y, sample_weight=w)
    weighted = MultiLabelRiskController(MultiOutputClassifier(LogisticRegression()))
    plain = clone(weighted).fit(X, Y).predict_proba(X)
    assert not np.allclose(weighted.fit(X, Y, sample_weight=w).predict_proba(X), plain)
    # one label column: the default is MultiOutputClassifier, which takes them as before
    MultiLabelRiskController().fit(X, Y[:, :1], sample_weight=w)
    with sklearn.config_context(enable_metadata_routing=True):
        for columns in (3, 1):
            with pytest.raises(
                ValueError,
                match=r"cannot reach the default model.*metadata routing.*"
                r"OneVsRestClassifier\(LogisticRegression\(\)\.set_fit_request\("
                r"sample_weight=True\)\)",
            ):
                MultiLabelRiskController().fit(X, Y[:, :columns], sample_weight=w)
        requested = LogisticRegression().set_fit_request(sample_weight=True)
        routed = MultiLabelRiskController(OneVsRestClassifier(requested))
        assert not np.allclose(routed.fit(X, Y, sample_weight=w).predict_proba(X), plain)
    # without weights the default model is unchanged, and `sample_weight=None` is no
    # weight (diff review 40: refused with routing on, as scikit-learn does not)
    np.testing.assert_array_equal(MultiLabelRiskController().fit(X, Y).predict_proba(X), plain)
    for routing in (False, True):
        with sklearn.config_context(enable_metadata_routing=routing):
            unweighted = MultiLabelRiskController().fit(X, Y, sample_weight=None)
            np.testing.assert_array_equal(unweighted.predict_proba(X), plain)


@pytest.mark.parametrize(
    "method, risk, fwer",
    [
        ("rcps", "fnr", "fixed_sequence"),
        ("rcps", "miscoverage", "fixed_sequence"),
        ("ltt", "fnr", "fixed_sequence"),
        ("ltt", "miscoverage", "bonferroni"),
        ("ltt", "precision", "fixed_sequence"),
        ("ltt", "precision", "bonferroni"),
    ],
)
def test_many_mondrian_groups_get_their_own_thresholds_from_few_pvalue_calls(
    method, risk, fwer, monkeypatch
):
    """Review finding (s61): Mondrian RCPS and LTT computed p-values group by group, a
    scipy call per group (and per bisection step): 2,000 groups took seconds. Every group's
    p-values now come in one call per bisection step (RCPS) or per level (LTT); each
    group's thresholds are those of calibrating its rows alone."""
    rng = np.random.default_rng(613)
    P, Y = draw(1500, rng, n_labels=4, ties=True)
    groups = rng.integers(0, 150, size=1500)  # about 10 rows each, some alone
    alphas = [0.1, 0.25, 0.4]
    params = dict(method=method, risk=risk, fwer=fwer, alpha=alphas, delta=0.3, thresholds=40)
    model = controller(**params)
    calls = []
    pvalues = model._pvalues
    monkeypatch.setattr(
        model, "_pvalues", lambda *args: calls.append(1) or pvalues(*args), raising=False
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # groups too small for some levels
        model.calibrate(P, Y, groups=groups)
        table = model._threshold_table(np.array(alphas))
        assert len(calls) <= 20  # not one (or a few) per group: 150 groups
        for stratum, group in enumerate(model.groups_):
            rows = groups == group
            alone = controller(**params).calibrate(P[rows], Y[rows])
            np.testing.assert_array_equal(
                table[stratum], alone._threshold_table(np.array(alphas))[0]
            )


def test_a_model_class_for_the_risk_controller_suggests_a_multi_label_instance():
    """Review s65: it suggested `MultiLabelRiskController(LogisticRegression())`, which is
    refused next (one label per row)."""
    from sklearn.linear_model import LogisticRegression

    with pytest.raises(TypeError, match=r"OneVsRestClassifier\(LogisticRegression\(\)\)"):
        MultiLabelRiskController(estimator=LogisticRegression).fit(
            np.zeros((4, 2)), np.array([[0, 1], [1, 0], [1, 1], [0, 0]])
        )
