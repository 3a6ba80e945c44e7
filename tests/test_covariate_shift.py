"""Weighted conformal prediction under covariate shift (``likelihood_ratio``)."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import Unchanged
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.svm import LinearSVC

from uqconform import (
    ConformalizedQuantileRegressor,
    SplitConformalClassifier,
    SplitConformalRegressor,
)
from uqconform.evaluation import coverage_bounds
from uqconform.quantiles import conformal_quantile
from uqconform.shift import ClassifierDensityRatio


def tilt(X):
    """The density ratio of N(1, 1) to N(0, 1) in the first feature (picklable)."""
    return np.exp(np.asarray(X)[:, 0] - 0.5)


def ones(X):
    return np.ones(len(X))


def _draw(n, rng, shift=0.0):
    """Noise grows with |x0|: a population shifted to larger x0 has harder rows."""
    X = np.column_stack([rng.normal(shift, 1.0, n), rng.normal(size=n)])
    return X, X[:, 0] + (0.2 + np.abs(X[:, 0])) * rng.normal(size=n)


def _labels(X, rng):
    """Three classes; the label noise grows with |x0|."""
    logits = np.column_stack([X[:, 0], -X[:, 0], X[:, 1]]) * 2 / (0.5 + np.abs(X[:, :1]))
    p = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    return (rng.random(len(X))[:, None] > np.cumsum(p, axis=1)).sum(axis=1)


def _wrappers(ratio):
    return {
        "absolute": SplitConformalRegressor(Ridge(), likelihood_ratio=ratio, batch_size=7),
        "cqr asymmetric": ConformalizedQuantileRegressor(
            HistGradientBoostingRegressor(loss="quantile", max_iter=20, random_state=0),
            symmetric=False,
            likelihood_ratio=ratio,
        ),
        "lac": SplitConformalClassifier(likelihood_ratio=ratio),
        "aps class-conditional": SplitConformalClassifier(
            conformity_score="aps", class_conditional=True, random_state=0, likelihood_ratio=ratio
        ),
    }


def _data(name, seed=0):
    rng = np.random.default_rng(seed)
    X, y = _draw(900, rng)
    if name in ("lac", "aps class-conditional"):
        y = _labels(X, rng)
    return (X[:300], y[:300]), (X[300:600], y[300:600]), (X[600:], y[600:])


def _predict(model, X, **kwargs):
    if isinstance(model, SplitConformalClassifier):
        return model.predict_set(X, **kwargs)
    return model.predict_interval(X, **kwargs)


@pytest.mark.parametrize("name", list(_wrappers(None)))
def test_equal_weights_give_the_unweighted_sets_and_pvalues(name):
    (Xf, yf), (Xc, yc), (Xt, yt) = _data(name)
    groups_cal, groups = (Xc[:, 1] > 0).astype(int), (Xt[:, 1] > 0).astype(int)
    plain, weighted = _wrappers(None)[name], _wrappers(ones)[name]
    for model in (plain, weighted):
        model.fit(Xf, yf).calibrate(Xc, yc, groups=groups_cal)
    alphas = [0.05, 0.1, 0.3]
    np.testing.assert_array_equal(
        _predict(plain, Xt, alpha=alphas, groups=groups),
        _predict(weighted, Xt, alpha=alphas, groups=groups),
    )
    candidates = yt if isinstance(plain, SplitConformalRegressor) else None
    if candidates is not None:
        np.testing.assert_allclose(
            plain.predict_pvalue(Xt, candidates, groups=groups),
            weighted.predict_pvalue(Xt, candidates, groups=groups),
            rtol=1e-14,
        )
    else:
        np.testing.assert_allclose(
            plain.predict_pvalue(Xt, groups=groups),
            weighted.predict_pvalue(Xt, groups=groups),
            rtol=1e-14,
        )


def test_thresholds_are_the_weighted_conformal_quantile_row_by_row():
    (Xf, yf), (Xc, yc), (Xt, _) = _data("absolute", seed=1)
    groups_cal, groups = (Xc[:, 1] > 0).astype(int), (Xt[:, 1] > 0).astype(int)
    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=tilt).fit(Xf, yf)
    cp.calibrate(Xc, yc, groups=groups_cal)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a few rows far in the tail: infinite
        intervals = cp.predict_interval(Xt, alpha=[0.1, 0.2], groups=groups)
    half = (intervals[:, 1] - intervals[:, 0]) / 2
    scores = np.abs(yc - cp.predict(Xc))
    for row in range(0, len(Xt), 7):  # the reference, one row at a time
        mine = groups_cal == groups[row]
        expected = conformal_quantile(
            scores[mine],
            [0.1, 0.2],
            weights=tilt(Xc[mine]),
            test_weight=tilt(Xt[row : row + 1])[0],
            warn=False,
        )
        np.testing.assert_allclose(half[row], expected, rtol=1e-12)


@pytest.mark.parametrize("name", list(_wrappers(None)))
def test_pvalues_above_alpha_are_the_weighted_sets(name):
    (Xf, yf), (Xc, yc), (Xt, yt) = _data(name, seed=2)
    model = _wrappers(tilt)[name].fit(Xf, yf).calibrate(Xc, yc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for alpha in (0.1, 0.25):
            sets = _predict(model, Xt, alpha=alpha)
            if isinstance(model, SplitConformalClassifier):
                np.testing.assert_array_equal(model.predict_pvalue(Xt) > alpha, sets)
            else:
                inside = (sets[:, 0] <= yt) & (yt <= sets[:, 1])
                np.testing.assert_array_equal(model.predict_pvalue(Xt, yt) > alpha, inside)


@pytest.mark.slow
def test_weights_restore_coverage_on_the_shifted_population():
    """Calibration rows from N(0, 1), test rows from N(1, 1) where the noise is larger:
    unweighted split CP under-covers (below the coverage law's lower end, pooled over 200
    resplits); weighted by the true ratio, or by a domain classifier fitted on other
    source rows and unlabelled target rows, it covers. Weighted CP guarantees the mean
    coverage over calibration sets, but each test row has its own threshold, so its
    per-resplit coverage does not follow `coverage_bounds`' Beta-Binomial law (it spreads
    wider): the weighted methods are judged by a one-sided 0.5% test of the mean of the
    per-resplit coverages against 0.90 with their own standard error."""
    n_cal, n_test, repeats = 200, 100, 200
    coverage = {"plain": [], "true ratio": [], "estimated ratio": [], "classifier": []}
    for seed in range(repeats):
        rng = np.random.default_rng(seed)
        Xf, yf = _draw(300, rng)
        Xc, yc = _draw(n_cal, rng)
        Xt, yt = _draw(n_test, rng, shift=1.0)
        estimated = ClassifierDensityRatio().fit(_draw(300, rng)[0], _draw(300, rng, 1.0)[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # rare infinite intervals far in the tail
            for name, ratio in (
                ("plain", None),
                ("true ratio", tilt),
                ("estimated ratio", estimated),
            ):
                cp = SplitConformalRegressor(Ridge(), likelihood_ratio=ratio).fit(Xf, yf)
                low, high = cp.calibrate(Xc, yc).predict_interval(Xt).T
                coverage[name].append(np.mean((low <= yt) & (yt <= high)))
            labels_cal, labels = _labels(Xc, rng), _labels(Xt, rng)
            sets = (
                SplitConformalClassifier(likelihood_ratio=tilt)
                .fit(Xf, _labels(Xf, rng))
                .calibrate(Xc, labels_cal)
                .predict_set(Xt)
            )
            coverage["classifier"].append(np.mean(sets[np.arange(n_test), labels]))
    lower = coverage_bounds(n_cal, 0.1, n_test, n_repeats=repeats)[0]
    assert np.mean(coverage["plain"]) < lower
    for name in ("true ratio", "estimated ratio", "classifier"):
        values = np.asarray(coverage[name])
        floor = 0.9 - 2.576 * values.std(ddof=1) / np.sqrt(repeats)
        assert values.mean() >= floor, (name, values.mean(), floor)


def test_extreme_weights_give_infinite_intervals_with_a_warning():
    (Xf, yf), (Xc, yc), _ = _data("absolute", seed=3)
    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=lambda X: np.exp(8 * X[:, 0]))
    cp.fit(Xf, yf).calibrate(Xc, yc)
    rows = np.array([[4.0, 0.0], [-2.0, 0.0], [0.0, 0.0]])  # beyond every calibration row
    with pytest.warns(UserWarning, match=r"^1 row got an infinite threshold at alpha=0\.1"):
        intervals = cp.predict_interval(rows)
    assert np.isinf(intervals[0]).all() and np.isfinite(intervals[1:]).all()


def test_the_infinite_threshold_warning_names_the_strata_of_those_rows():
    (Xf, yf), (Xc, yc), _ = _data("absolute", seed=3)
    tilt = lambda X: np.exp(8 * np.asarray(X)[:, 0])  # noqa: E731
    groups = np.where(Xc[:, 1] > 0, "b", "a")
    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=tilt).fit(Xf, yf)
    cp.calibrate(Xc, yc, groups=groups)
    rows = np.array([[4.0, 0.0], [4.0, 1.0], [4.5, 1.0], [0.0, 0.0]])
    with pytest.warns(UserWarning, match=r"^3 rows got an infinite threshold") as record:
        intervals = cp.predict_interval(rows, groups=["a", "b", "b", "a"])
    assert "; group 'a': 1 row, group 'b': 2 rows)" in str(record[0].message)
    assert np.isinf(intervals[:3]).all() and np.isfinite(intervals[3]).all()
    rng = np.random.default_rng(0)
    labels = _labels(Xc, rng)
    sets_model = SplitConformalClassifier(likelihood_ratio=tilt, class_conditional=True)
    sets_model.fit(Xf, _labels(Xf, rng)).calibrate(Xc, labels)
    with pytest.warns(UserWarning, match="got an infinite threshold") as record:
        sets = sets_model.predict_set(rows[:1])
    named = [f"class {int(label)}: 1 row" for label in sets_model.classes_]
    assert all(name in str(record[0].message) for name in named)
    assert sets.all()


def test_bad_ratios_name_the_argument_and_a_changed_ratio_needs_calibration():
    (Xf, yf), (Xc, yc), (Xt, _) = _data("absolute", seed=4)
    with pytest.raises(TypeError, match="`likelihood_ratio` must be None or a callable"):
        SplitConformalRegressor(Ridge(), likelihood_ratio=np.ones(3)).fit(Xf, yf)
    cases = {
        "returned shape \\(2,\\) for 300 calibration rows": lambda X: np.ones(2),
        "returned 1 NaN, infinite or negative": lambda X: np.r_[-1.0, np.ones(len(X) - 1)],
        "returned values of dtype <U1": lambda X: np.asarray(["a"] * len(X)),
        "returned values of dtype complex128": lambda X: np.ones(len(X)) * 1j,
        "failed on the calibration rows: ValueError": lambda X: int("x"),
        "returned 1 NaN, infinite or negative weights for the calibration": lambda X: np.r_[
            np.inf, np.ones(len(X) - 1)
        ],
    }
    for message, ratio in cases.items():
        cp = SplitConformalRegressor(Ridge(), likelihood_ratio=ratio).fit(Xf, yf)
        with pytest.raises(ValueError, match=message):
            cp.calibrate(Xc, yc)
    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=tilt).fit(Xf, yf).calibrate(Xc, yc)
    cp.set_params(likelihood_ratio=ones)
    with pytest.raises(NotFittedError, match="likelihood_ratio"):
        cp.predict_interval(Xt)
    beyond = lambda X: np.where(np.asarray(X)[:, 0] > 1.5, np.nan, 1.0)  # noqa: E731
    kept = Xc[:, 0] <= 1.5
    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=beyond).fit(Xf, yf)
    cp.calibrate(Xc[kept], yc[kept])
    with pytest.raises(ValueError, match="weights for the rows of `X`"):
        cp.predict_interval(Xt)
    # a column-name typo in the ratio: a bare KeyError came out
    frame = pd.DataFrame(Xc, columns=["a", "b"])
    typo = SplitConformalRegressor(Ridge(), likelihood_ratio=lambda X: np.exp(X["typo"]))
    with pytest.raises(ValueError, match="failed on the calibration rows: KeyError: 'typo'"):
        typo.fit(frame, yc).calibrate(frame, yc)


def test_a_bad_test_weight_is_named_by_its_row_of_x_in_batches():
    """With batches the message named the row's position in its batch (row 3 for row 7)."""
    (Xf, yf), (Xc, yc), (Xt, _) = _data("absolute", seed=4)
    test = Xt[:10].copy()
    test[7, 0] = 99.0
    ratio = lambda X: np.where(np.asarray(X)[:, 0] > 50, np.nan, 1.0)  # noqa: E731
    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=ratio, batch_size=4)
    cp.fit(Xf, yf).calibrate(Xc, yc)
    for call in (lambda: cp.predict_interval(test), lambda: cp.predict_pvalue(test, np.zeros(10))):
        with pytest.raises(ValueError, match=r"for the rows 4 to 7 of `X` \(e\.g\. row 7: nan\)"):
            call()


@pytest.mark.parametrize("constant", [5e-324, 0.1, 7.0, 1e307])
def test_any_positive_multiple_of_the_ratio_gives_the_same_sets_and_pvalues(constant):
    """Weights are divided by the largest calibration weight: no overflow in their sums
    (1e307), no underflow (the smallest subnormal), and a constant is exactly 1."""
    (Xf, yf), (Xc, yc), (Xt, _) = _data("lac", seed=8)
    plain = SplitConformalClassifier().fit(Xf, yf).calibrate(Xc[:19], yc[:19])
    weighted = SplitConformalClassifier(likelihood_ratio=lambda X: np.full(len(X), constant))
    weighted.fit(Xf, yf).calibrate(Xc[:19], yc[:19])
    alphas = np.arange(1, 20) / 20  # multiples of 1 / (n + 1): where rounding would show
    np.testing.assert_array_equal(plain.predict_set(Xt, alphas), weighted.predict_set(Xt, alphas))
    np.testing.assert_array_equal(plain.predict_pvalue(Xt), weighted.predict_pvalue(Xt))
    if constant < 1e-300:  # a subnormal times the ratio rounds the ratio itself
        return
    scaled = SplitConformalRegressor(Ridge(), likelihood_ratio=lambda X: constant * tilt(X))
    scaled.fit(Xf, yf).calibrate(Xc, yc)
    unit = SplitConformalRegressor(Ridge(), likelihood_ratio=tilt).fit(Xf, yf).calibrate(Xc, yc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(scaled.predict_interval(Xt), unit.predict_interval(Xt))


def test_an_infinite_test_weight_is_a_row_off_the_support():
    (Xf, yf), (Xc, yc), (Xt, yt) = _data("absolute", seed=9)
    off = lambda X: np.where(np.asarray(X)[:, 0] > 1.0, np.inf, 1.0)  # noqa: E731
    inside = Xc[:, 0] <= 1.0
    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=off).fit(Xf, yf)
    cp.calibrate(Xc[inside], yc[inside])
    far = Xt[:, 0] > 1.0
    with pytest.warns(UserWarning, match=f"^{far.sum()} rows got an infinite threshold"):
        intervals = cp.predict_interval(Xt)
    assert np.isinf(intervals[far]).all() and np.isfinite(intervals[~far]).all()
    np.testing.assert_array_equal(cp.predict_pvalue(Xt, yt)[far], 1.0)
    # smoothed, the limit of (W_> + u (W_= + w)) / (W + w) is the row's own draw u, as
    # for a huge finite weight (it was 1: a jump at the limit, not uniform off support)
    huge = lambda X: np.where(np.asarray(X)[:, 0] > 1.0, 1e300, 1.0)  # noqa: E731
    near = SplitConformalRegressor(Ridge(), likelihood_ratio=huge, random_state=0)
    cp.set_params(random_state=0)
    for model in (cp, near):
        model.fit(Xf, yf).calibrate(Xc[inside], yc[inside])
    smoothed = cp.predict_pvalue(Xt, yt, smooth=True)
    np.testing.assert_allclose(smoothed, near.predict_pvalue(Xt, yt, smooth=True), atol=1e-12)
    assert (smoothed[far] < 0.99).any()


def test_all_zero_calibration_weights_warn_at_calibrate():
    # every later prediction would be infinite: say so once, where the cause is
    (Xf, yf), (Xc, yc), (Xt, _) = _data("absolute", seed=11)
    zero = lambda X: np.zeros(len(X))  # noqa: E731
    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=zero).fit(Xf, yf)
    with pytest.warns(UserWarning, match="weight 0 to all 300 calibration rows"):
        cp.calibrate(Xc, yc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isinf(cp.predict_interval(Xt)).all()
    half = lambda X: (np.asarray(X)[:, 1] > 0).astype(float)  # noqa: E731
    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=half).fit(Xf, yf)
    with pytest.warns(
        UserWarning, match=r"weight 0 to every calibration row of 1 group \(\[0\]\)"
    ):
        cp.calibrate(Xc, yc, groups=(Xc[:, 1] > 0).astype(int))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # one positive weight is enough for this warning
        SplitConformalRegressor(
            Ridge(), likelihood_ratio=lambda X: np.r_[1.0, np.zeros(len(X) - 1)]
        ).fit(Xf, yf).calibrate(Xc, yc)
    assert not any("weight 0 to all" in str(w.message) for w in caught)
    assert any("effective calibration size of 1.0 of 300" in str(w.message) for w in caught)


def test_weights_that_leave_few_effective_rows_warn_at_calibrate():
    """Weights concentrated on a few calibration rows (Kish's effective size below the
    scores alpha needs) make every threshold hang on those rows: calibrate says so; a
    mild tilt does not warn."""
    (Xf, yf), (Xc, yc), _ = _data("absolute", seed=11)
    steep = lambda X: np.exp(6 * np.asarray(X)[:, 0])  # noqa: E731
    cp = SplitConformalRegressor(Ridge(), alpha=0.1, likelihood_ratio=steep).fit(Xf, yf)
    with pytest.warns(UserWarning, match=r"effective calibration size of \d+\.\d of 300 rows"):
        cp.calibrate(Xc, yc)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SplitConformalRegressor(Ridge(), likelihood_ratio=tilt).fit(Xf, yf).calibrate(Xc, yc)


def test_a_group_left_with_few_effective_rows_is_named():
    """The effective-size warning counted all calibration rows together: a Mondrian group
    whose own weights leave one effective row went unnoticed when the others were fine."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 2))
    y = X.sum(axis=1) + rng.normal(size=600)
    groups = (X[:, 1] > 0).astype(int)

    def ratio(Z):  # steep within group 1, but small there: the pooled size stays large
        Z = np.asarray(Z)
        return np.where(Z[:, 1] > 0, 1e-6 * np.exp(6 * Z[:, 0]), 1.0)

    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=ratio).fit(X[:300], y[:300])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cp.calibrate(X[300:], y[300:], groups=groups[300:])
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "in 1 group ([1]; Kish" in messages[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a mild tilt: no group is thin
        SplitConformalRegressor(Ridge(), likelihood_ratio=lambda Z: np.exp(0.2 * Z[:, 0])).fit(
            X[:300], y[:300]
        ).calibrate(X[300:], y[300:], groups=groups[300:])


def test_a_domain_classifier_with_hard_probabilities_warns():
    """A fully grown tree gives probabilities 0 and 1: weight 0 drops calibration rows and
    weight 1 sits at the clip, and weighted CP under-covers with no other sign (a review:
    0.835 at nominal 0.90, as unweighted CP). The ratio warns; the logistic default does not."""
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(0)
    source, target = rng.normal(size=(300, 2)), rng.normal(1.5, 1.0, size=(300, 2))
    tree = ClassifierDensityRatio(DecisionTreeClassifier(random_state=0)).fit(source, target)
    with pytest.warns(UserWarning, match=r"certain on 100 of 100 rows .*0 on \d+: weight 0"):
        weights = tree(rng.normal(size=(100, 2)))
    assert set(np.unique(weights)) <= {0.0, 1000.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ClassifierDensityRatio().fit(source, target)(rng.normal(size=(100, 2)))
        tree(rng.normal(size=(10, 2)))  # said once per fit (it came at every batch of rows)
    tree.clip = 50.0
    with pytest.warns(UserWarning, match=r"test row's threshold comes from the calibration"):
        tree(rng.normal(size=(10, 2)))  # a new clip changes the weights: said again
    tree.fit(source, target)
    with pytest.warns(UserWarning, match=r"Said once per fit of the ratio"):
        tree(rng.normal(size=(10, 2)))  # and a refit


def test_clone_keeps_a_fitted_ratio_and_unseen_groups_warn_once():
    (Xf, yf), (Xc, yc), (Xt, _) = _data("absolute", seed=10)
    ratio = ClassifierDensityRatio().fit(Xf, Xt)
    twin = clone(SplitConformalRegressor(Ridge(), likelihood_ratio=ratio))
    twin.fit(Xf, yf).calibrate(Xc, yc, groups=(Xc[:, 1] > 0).astype(int))
    groups = np.where(Xt[:, 1] > 0, 1, 0)
    groups[:3] = 5  # unseen at calibration
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        twin.predict_interval(Xt[np.abs(Xt[:, 0]) < 1], groups=groups[np.abs(Xt[:, 0]) < 1])
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "groups without calibration data" in messages[0]


def test_pickles_frames_and_unchanged_inputs():
    (Xf, yf), (Xc, yc), (Xt, yt) = _data("absolute", seed=5)
    columns = ["a", "b"]
    frame = pd.DataFrame(Xt, columns=columns)
    ratio = ClassifierDensityRatio().fit(
        pd.DataFrame(Xf, columns=columns), pd.DataFrame(Xt + 1.0, columns=columns)
    )
    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=ratio)
    cp.fit(pd.DataFrame(Xf, columns=columns), yf).calibrate(pd.DataFrame(Xc, columns=columns), yc)
    kept = Unchanged(frame, yt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        intervals = cp.predict_interval(frame)
        again = pickle.loads(pickle.dumps(cp)).predict_interval(frame)
    kept.check()
    np.testing.assert_array_equal(intervals, again)
    np.testing.assert_array_equal(
        cp.calibration_weights_, ratio(pd.DataFrame(Xc, columns=columns))
    )


def test_classifier_density_ratio_tracks_the_true_ratio_and_checks_input():
    rng = np.random.default_rng(6)
    source, target = rng.normal(size=(4000, 1)), rng.normal(1.0, 1.0, size=(4000, 1))
    ratio = ClassifierDensityRatio().fit(source, target)
    grid = np.linspace(-2, 2.5, 10)[:, None]
    np.testing.assert_allclose(np.log(ratio(grid)), grid[:, 0] - 0.5, atol=0.15)
    assert ratio(np.array([[40.0]]))[0] == 1e3  # the classifier is sure: clipped
    unclipped = ClassifierDensityRatio(clip=None).fit(source, target)
    assert unclipped(np.array([[40.0]]))[0] > 1e6
    with pytest.raises(ValueError, match="same columns"):
        ClassifierDensityRatio().fit(pd.DataFrame({"a": [1.0, 2]}), pd.DataFrame({"b": [1.0, 2]}))
    with pytest.raises(ValueError, match="`clip`"):
        ClassifierDensityRatio(clip=0).fit(source, target)
    with pytest.raises(ValueError, match=r"got inf\. For no clipping pass clip=None"):
        ClassifierDensityRatio(clip=np.inf).fit(source, target)  # (shift review)
    with pytest.raises(ValueError, match="same columns"):
        ClassifierDensityRatio().fit(source, np.ones((10, 2)))
    with pytest.raises(ValueError, match="at least 2 rows"):
        ClassifierDensityRatio().fit(source, target[:1])
    with pytest.raises(TypeError, match="predict_proba"):
        ClassifierDensityRatio(LinearSVC()).fit(source, target)
    with pytest.raises(NotFittedError):
        ClassifierDensityRatio()(source)
    # a nullable boolean column's pd.NA is named like NaN (numpy could not read it as float)
    nullable = pd.DataFrame({"a": pd.array([True, None, False, True], dtype="boolean")})
    complete = pd.DataFrame({"a": pd.array([True, False, True, False], dtype="boolean")})
    with pytest.raises(ValueError, match="`X_target` contains NaN"):
        ClassifierDensityRatio().fit(complete, nullable)


def test_density_ratio_names_a_missing_sample():
    """Review finding: ``fit(None, X)`` failed inside ``len`` without naming the argument."""
    from uqconform.shift import ClassifierDensityRatio

    rows = np.ones((5, 2))
    for source, target, name in [
        (None, rows, "X_source"),
        (rows, "x", "X_target"),
        (rows, 5, "X_target"),
    ]:
        with pytest.raises(ValueError, match=f"`{name}` must be rows of features"):
            ClassifierDensityRatio().fit(source, target)
    # NaN named by its sample (scikit-learn's message named neither); a string classifier
    # named as `classifier` (it was called `estimator`, with advice about calibrate)
    gappy = rows.copy()
    gappy[2, 1] = np.nan
    with pytest.raises(ValueError, match="`X_target` contains NaN"):
        ClassifierDensityRatio().fit(rows, gappy)
    with pytest.raises(TypeError, match="`classifier` must be a scikit-learn classifier"):
        ClassifierDensityRatio(classifier="logistic").fit(rows, rows)
    # review findings: the class itself failed in clone ("Cannot clone object"), and a
    # 3-D input was refused for its rows ("need at least 2 rows, got 1 and 1")
    with pytest.raises(TypeError, match=r"got the class LogisticRegression: pass Logistic"):
        ClassifierDensityRatio(classifier=LogisticRegression).fit(rows, rows)
    with pytest.raises(ValueError, match=r"`X_source` must be 2-D .*got shape \(1, 5, 2\)"):
        ClassifierDensityRatio().fit(rows[None], rows)


def test_a_density_ratio_refitted_in_place_calls_for_recalibration():
    """Review finding: refitting the ratio object after ``calibrate`` mixed old calibration
    weights with new test weights, silently (301 of 1000 intervals changed)."""
    from sklearn.exceptions import NotFittedError
    from sklearn.linear_model import LinearRegression

    from uqconform.regression import SplitConformalRegressor
    from uqconform.shift import ClassifierDensityRatio

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=2000)
    ratio = ClassifierDensityRatio().fit(X[500:1000], X[1000:1500] + 1.0)
    cp = SplitConformalRegressor(LinearRegression(), likelihood_ratio=ratio)
    cp.fit(X[:500], y[:500]).calibrate(X[500:1000], y[500:1000])
    before = cp.predict_interval(X[1500:])
    restored = pickle.loads(pickle.dumps(cp))  # the ratio travels with it: still valid
    np.testing.assert_array_equal(restored.predict_interval(X[1500:]), before)
    ratio.fit(X[500:1000], X[1500:2000] - 1.0)
    with pytest.raises(NotFittedError, match="refitted or changed since"):
        cp.predict_interval(X[1500:])
    cp.calibrate(X[500:1000], y[500:1000])  # recalibrated with the new ratio: fine
    assert cp.predict_interval(X[1500:]).shape == before.shape
    # a new clip changes the weights as a refit does (the calibration weights kept the
    # old clip while each test row's used the new one: 275 of 500 intervals changed)
    ratio.clip = 2.0
    with pytest.raises(NotFittedError, match="refitted or changed since"):
        cp.predict_interval(X[1500:])
    cp.calibrate(X[500:1000], y[500:1000])
    # replaced rather than refitted: refused, without the word "refitted"
    cp.set_params(likelihood_ratio=ClassifierDensityRatio().fit(X[:500], X[1500:]))
    with pytest.raises(
        NotFittedError, match=r"likelihood_ratio=ClassifierDensityRatio\([^)]*\)\)"
    ):
        cp.predict_interval(X[1500:])


def test_a_density_ratio_passed_as_its_bound_predict_is_tracked_too():
    """Review finding: ``likelihood_ratio=ratio.predict`` (documented as the same as the
    object) let a refit in place go unnoticed: 486 of 500 intervals mixed old calibration
    weights with new test weights."""
    from sklearn.linear_model import LinearRegression

    from uqconform.regression import SplitConformalRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=2000)
    ratio = ClassifierDensityRatio().fit(X[500:1000], X[1000:1500] + 1.0)
    cp = SplitConformalRegressor(LinearRegression(), likelihood_ratio=ratio.predict)
    cp.fit(X[:500], y[:500]).calibrate(X[500:1000], y[500:1000])
    before = cp.predict_interval(X[1500:])
    restored = pickle.loads(pickle.dumps(cp))
    np.testing.assert_array_equal(restored.predict_interval(X[1500:]), before)
    ratio.fit(X[500:1000], X[1500:2000] - 1.0)
    with pytest.raises(NotFittedError, match="refitted or changed since"):
        cp.predict_interval(X[1500:])
    cp.calibrate(X[500:1000], y[500:1000])
    refitted = cp.predict_interval(X[1500:])
    assert not np.array_equal(refitted, before)
    # a fresh lookup of the same bound method is the same setting (no recalibration)
    cp.set_params(likelihood_ratio=ratio.predict)
    np.testing.assert_array_equal(cp.predict_interval(X[1500:]), refitted)
    ratio.clip = 2.0
    with pytest.raises(NotFittedError, match="refitted or changed since"):
        cp.predict_interval(X[1500:])


def test_density_ratio_seed_and_the_class_instead_of_an_instance():
    """A stochastic domain classifier gave other weights at every fit (28.7 and 18.5 for
    one row with a random forest): random_state seeds it. Passing the class itself
    failed later with 'returned values of dtype object'."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LinearRegression

    from uqconform.regression import SplitConformalRegressor
    from uqconform.shift import ClassifierDensityRatio

    rng = np.random.default_rng(0)
    source, target = rng.normal(size=(300, 2)), rng.normal(1.0, 1.0, size=(300, 2))

    def weights(seed):
        forest = RandomForestClassifier(n_estimators=10)
        return ClassifierDensityRatio(forest, random_state=seed).fit(source, target)(source)

    np.testing.assert_array_equal(weights(0), weights(0))
    assert not np.array_equal(weights(0), weights(1))
    y = source[:, 0] + rng.normal(size=300)
    model = SplitConformalRegressor(LinearRegression(), likelihood_ratio=ClassifierDensityRatio)
    with pytest.raises(
        TypeError,
        match=r"is the class ClassifierDensityRatio: pass a fitted instance, e.g. .*"
        r"fit\(X_source, X_target\).* neither the calibration nor the test rows",
    ):
        model.fit(source[:150], y[:150])


def test_a_ratio_indexed_by_the_rows_in_another_order_is_refused():
    # weights are read by position: a Series sorted by X's row labels would give each row
    # another row's weight; a fresh RangeIndex (positions) and X's own order are fine
    (Xf, yf), (Xc, yc), (Xt, _) = _data("absolute", seed=12)
    frame = pd.DataFrame(Xc, columns=["x0", "x1"], index=np.arange(len(Xc))[::-1] * 3)
    test = pd.DataFrame(Xt, columns=["x0", "x1"], index=np.arange(len(Xt))[::-1] + 5000)

    def sorted_ratio(X):
        return pd.Series(tilt(X), index=X.index).sort_index()

    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=sorted_ratio)
    cp.fit(pd.DataFrame(Xf, columns=["x0", "x1"]), yf)
    with pytest.raises(ValueError, match=r"likelihood_ratio.*calibration rows.*reindex"):
        cp.calibrate(frame, yc)
    expected = (
        SplitConformalRegressor(Ridge(), likelihood_ratio=tilt)
        .fit(pd.DataFrame(Xf, columns=["x0", "x1"]), yf)
        .calibrate(frame, yc)
        .predict_interval(test)
    )
    for keeps_order in (
        lambda X: pd.Series(tilt(X), index=X.index),
        lambda X: pd.Series(tilt(X)),  # positions
    ):
        cp.set_params(likelihood_ratio=keeps_order).calibrate(frame, yc)
        np.testing.assert_array_equal(cp.predict_interval(test), expected)

    def sorts_test_rows(X):  # calibration rows in order, test rows (labels >= 5000) sorted
        weights = pd.Series(tilt(X), index=X.index)
        return weights.sort_index() if X.index.min() >= 5000 else weights

    cp.set_params(likelihood_ratio=sorts_test_rows).calibrate(frame, yc)
    with pytest.raises(ValueError, match=r"likelihood_ratio.*rows of `X`"):
        cp.predict_interval(test)


def test_density_ratio_takes_sparse_rows():
    """Sparse rows (which the wrappers take) are stacked as sparse and scaled without
    centring; `fit` refused them with the message for 0-D input, naming shapes ()."""
    from scipy import sparse

    rng = np.random.default_rng(0)
    source, target = rng.normal(size=(300, 3)), rng.normal(0.5, 1.0, size=(300, 3))
    dense = ClassifierDensityRatio().fit(source, target)
    ratio = ClassifierDensityRatio().fit(sparse.csr_matrix(source), sparse.csr_matrix(target))
    np.testing.assert_allclose(ratio(sparse.csr_matrix(source[:20])), dense(source[:20]),
                               rtol=1e-2)  # fmt: skip
    with pytest.raises(ValueError, match="both be sparse or both dense"):
        ClassifierDensityRatio().fit(sparse.csr_matrix(source), target)
    with pytest.raises(ValueError, match="same columns"):
        ClassifierDensityRatio().fit(sparse.csr_matrix(source), sparse.csr_matrix(target[:, :2]))


def test_density_ratio_fitted_on_dense_rows_refuses_sparse_ones_saying_what_to_do():
    """The default pipeline fitted on dense rows centres them: sparse rows got
    scikit-learn's "pass `with_mean=False`", a parameter of the library's own pipeline
    (also through a wrapper calibrated on them). Fitted on sparse rows it takes dense
    ones (scaled alike, not centred)."""
    from scipy import sparse

    rng = np.random.default_rng(0)
    source, target = rng.normal(size=(200, 3)), rng.normal(0.5, 1.0, size=(200, 3))
    ratio = ClassifierDensityRatio().fit(source, target)
    expected = r"`X` is sparse, but the ratio was fitted on dense rows.*X\.toarray\(\)"
    with pytest.raises(ValueError, match=expected):
        ratio(sparse.csr_matrix(source[:3]))
    cp = SplitConformalRegressor(Ridge().fit(source, source[:, 0]), likelihood_ratio=ratio)
    with pytest.raises(ValueError, match=r"`likelihood_ratio` failed.*fit the ratio on sparse"):
        cp.calibrate(sparse.csr_matrix(source), source[:, 0])
    on_sparse = ClassifierDensityRatio().fit(sparse.csr_matrix(source), sparse.csr_matrix(target))
    np.testing.assert_allclose(on_sparse(source[:5]), on_sparse(sparse.csr_matrix(source[:5])))
    restored = pickle.loads(pickle.dumps(ratio))
    with pytest.raises(ValueError, match=expected):
        restored(sparse.csr_matrix(source[:3]))


def test_an_infinite_calibration_weight_points_to_the_clip():
    """With clip=None a certain domain classifier gives a calibration row an infinite
    weight: the refusal says how to avoid it (it only said weights must be finite)."""
    (Xf, yf), (Xc, yc), _ = _data("absolute", seed=3)
    infinite = lambda X: np.where(np.asarray(X)[:, 0] > 1.5, np.inf, 1.0)  # noqa: E731
    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=infinite).fit(Xf, yf)
    with pytest.raises(ValueError, match=r"must be non-negative and finite\. .*finite clip"):
        cp.calibrate(Xc, yc)


def test_the_ratio_names_bad_rows_and_a_boolean_mask_is_not_a_ratio():
    """`ClassifierDensityRatio` called on rows of the wrong width, a 1-D row or NaN got
    scikit-learn's messages (naming StandardScaler or suggesting HistGradientBoosting);
    a `likelihood_ratio` returning a boolean mask was read as 0/1 weights."""
    rng = np.random.default_rng(0)
    ratio = ClassifierDensityRatio().fit(rng.normal(size=(50, 2)), rng.normal(size=(50, 2)) + 1)
    with pytest.raises(ValueError, match=r"`X` has 3 columns, but the ratio was fitted on 2"):
        ratio(rng.normal(size=(5, 3)))
    with pytest.raises(ValueError, match=r"`X` must be 2-D .* X.reshape\(1, -1\)"):
        ratio(np.zeros(2))
    with pytest.raises(ValueError, match=r"`X` contains NaN or infinite values"):
        ratio(np.array([[np.nan, 1.0]]))
    # text columns and no rows got scikit-learn's messages ("could not convert string to
    # float", "StandardScaler") (stop 51's shift review)
    with pytest.raises(ValueError, match=r"`X` has no rows"):
        ratio(np.zeros((0, 2)))
    text = pd.DataFrame({"a": rng.normal(size=20), "c": ["x", "y"] * 10})
    with pytest.raises(ValueError, match=r"`X_source` holds values that are not numbers"):
        ClassifierDensityRatio().fit(text, text)
    X = rng.normal(size=(200, 2))
    y = X[:, 0] + rng.normal(size=200)
    mask = SplitConformalRegressor(Ridge(), likelihood_ratio=lambda Z: np.asarray(Z)[:, 0] > 0)
    with pytest.raises(ValueError, match="a boolean mask is not a ratio"):
        mask.fit(X[:100], y[:100]).calibrate(X[100:], y[100:])


def test_a_class_without_calibration_weight_is_named_at_calibrate():
    """Class-conditional weighted sets: a class whose calibration rows all get weight 0
    joins every set, but calibrate said nothing and the prediction warning spoke of "sets
    holding every class" (17% of them did) (shift review)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 2))
    y = np.digitize(X[:, 0] + 0.3 * rng.normal(size=900), [-0.5, 0.5])
    model = LogisticRegression().fit(X[:300], y[:300])
    Xc, yc = X[300:600], y[300:600]
    keep = ~((yc == 0) & (Xc[:, 0] >= -0.8))  # class 0 only where the weight is 0
    ratio = lambda Z: np.where(np.asarray(Z)[:, 0] < -0.8, 0.0, 1.0)  # noqa: E731
    cp = SplitConformalClassifier(model, likelihood_ratio=ratio, class_conditional=True)
    with pytest.warns(UserWarning, match=r"weight 0 to every calibration row of class 0: that"):
        cp.calibrate(Xc[keep], yc[keep])
    with pytest.warns(UserWarning, match=r"the class of that stratum in every set") as caught:
        sets = cp.predict_set(X[600:])
    assert sets[:, 0].all() and not sets.all(axis=1).all()
    assert not any("sets holding every class" in str(w.message) for w in caught)
    # every weight 0: one warning for the whole set, not another per class (diff review)
    nothing = SplitConformalClassifier(
        model, likelihood_ratio=lambda Z: np.zeros(len(Z)), class_conditional=True
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nothing.calibrate(Xc, yc)
    zero = [w for w in caught if "weight 0" in str(w.message)]
    assert len(zero) == 1 and "all 300 calibration rows" in str(zero[0].message)


def test_the_default_ratio_certain_far_from_both_samples_does_not_recommend_itself():
    """The default logistic ratio on a row far outside both samples (x = 400) rounds the
    probability to 1: the hard-probability warning advised "a smoother classifier (the
    default logistic one, ...)", the classifier in use (shift review)."""
    rng = np.random.default_rng(0)
    source, target = rng.normal(size=(200, 1)), rng.normal(3.0, 1.0, size=(200, 1))
    ratio = ClassifierDensityRatio().fit(source, target)
    with pytest.warns(UserWarning, match=r"certain on 1 of 2 rows") as caught:
        weights = ratio(np.array([[0.0], [400.0]]))
    message = next(str(w.message) for w in caught if "certain on" in str(w.message))
    assert "far outside both samples" in message and "lower `clip`" in message
    assert "the default logistic one" not in message
    assert weights[1] == 1e3


def test_the_density_ratio_refuses_complex_rows_naming_them():
    """Complex rows met numpy's ComplexWarning (imaginary part discarded), then
    scikit-learn's "Complex data not supported" printing the whole array, naming neither
    sample (shift review)."""
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(20, 2))
    cases = [
        (rows + 1j, rows, "X_source"),
        (rows, (rows + 1j).tolist(), "X_target"),
        (pd.DataFrame(rows + 1j), pd.DataFrame(rows), "X_source"),
    ]
    ratio = ClassifierDensityRatio().fit(rows, rows + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning first
        for source, target, name in cases:
            with pytest.raises(ValueError, match=rf"Complex data not supported: `{name}` holds"):
                ClassifierDensityRatio().fit(source, target)
        with pytest.raises(ValueError, match=r"Complex data not supported: `X_source`"):
            ClassifierDensityRatio(LogisticRegression()).fit(rows + 1j, rows)
        with pytest.raises(ValueError, match=r"Complex data not supported: `X` holds .*X\.real"):
            ratio(rows + 1j)


def test_the_density_ratio_names_ragged_rows_and_no_columns():
    """A ragged list of rows got numpy's "inhomogeneous shape", and rows without columns
    StandardScaler's "0 feature(s)", naming neither sample (shift review)."""
    with pytest.raises(ValueError, match=r"`X_source` holds rows of different lengths"):
        ClassifierDensityRatio().fit([[1.0, 2.0], [3.0]], np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"`X_source` and `X_target` have no columns"):
        ClassifierDensityRatio().fit(np.ones((5, 0)), np.ones((5, 0)))
    with pytest.raises(ValueError, match=r"`X_source` and `X_target` have no columns"):
        ClassifierDensityRatio().fit(pd.DataFrame(index=range(5)), pd.DataFrame(index=range(4)))


def test_an_unfitted_ratio_is_a_not_fitted_error_and_huge_counts_read_alike():
    """An unfitted ClassifierDensityRatio passed as `likelihood_ratio` says "not fitted"
    (a NotFittedError naming the argument, not a ValueError around one); at a tiny alpha
    the effective-size warning prints the needed count as the too-few warning does."""
    (Xf, yf), (Xc, yc), _ = _data("absolute", seed=11)
    cp = SplitConformalRegressor(Ridge(), likelihood_ratio=ClassifierDensityRatio()).fit(Xf, yf)
    with pytest.raises(NotFittedError, match=r"`likelihood_ratio` is not fitted: .*fit\("):
        cp.calibrate(Xc, yc)
    cp = SplitConformalRegressor(Ridge(), alpha=1e-12, likelihood_ratio=tilt).fit(Xf, yf)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cp.calibrate(Xc, yc)
    effective = [str(w.message) for w in caught if "effective calibration size" in str(w.message)]
    assert effective and "the 1e+12 scores" in effective[0], effective


@pytest.mark.parametrize("attribute", ["classifier_", "prior_ratio_"])
def test_a_fitted_attribute_replaced_after_calibrate_calls_for_recalibration(attribute):
    """Review finding (stop 57): ``ratio.classifier_ = other_fitted`` or
    ``ratio.prior_ratio_ = 50.0`` after ``calibrate`` went unnoticed (new weights on the
    test rows, the old ones on the calibration rows), while a new ``clip`` was refused."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=1500)
    ratio = ClassifierDensityRatio().fit(X[:300], X[300:600] + 1.0)
    other = ClassifierDensityRatio().fit(X[:300], X[600:900] - 1.0)
    new = {"classifier_": other.classifier_, "prior_ratio_": 50.0}[attribute]
    for wrapper in (ratio, ratio.predict):
        cp = SplitConformalRegressor(Ridge(), likelihood_ratio=wrapper)
        cp.fit(X[900:1100], y[900:1100]).calibrate(X[1100:1300], y[1100:1300])
        cp.predict_interval(X[1300:])
        old = getattr(ratio, attribute)
        setattr(ratio, attribute, new)
        with pytest.raises(NotFittedError, match="refitted or changed since"):
            cp.predict_interval(X[1300:])
        cp.calibrate(X[1100:1300], y[1100:1300])  # recalibrated: fine
        assert cp.predict_interval(X[1300:]).shape == (200, 2)
        setattr(ratio, attribute, old)


def test_a_ratio_tracks_changed_weights_only_and_also_when_built_by_hand():
    """Diff-review finding (stop 57): assigning a ratio's classifier_ or prior_ratio_ the
    value it holds (``r.prior_ratio_ = float(r.prior_ratio_)``) called for recalibration,
    while a ratio built by hand (classifier_ and prior_ratio_ assigned, no fit) had no fit
    token, so a later change of its weights went unnoticed (new weights on the test rows,
    the old ones on the calibration rows)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=1500)

    def calibrated(ratio):
        cp = SplitConformalRegressor(Ridge(), likelihood_ratio=ratio)
        return cp.fit(X[900:1100], y[900:1100]).calibrate(X[1100:1300], y[1100:1300])

    ratio = ClassifierDensityRatio().fit(X[:300], X[300:600] + 1.0)
    cp = calibrated(ratio)
    expected = cp.predict_interval(X[1300:])
    ratio.classifier_ = ratio.classifier_
    ratio.prior_ratio_ = float(ratio.prior_ratio_)
    ratio.clip = float(ratio.clip)
    np.testing.assert_array_equal(cp.predict_interval(X[1300:]), expected)
    ratio.clip = 5.0  # a change still calls for recalibration
    with pytest.raises(NotFittedError, match="refitted or changed since"):
        cp.predict_interval(X[1300:])

    by_hand = ClassifierDensityRatio()
    labels = np.r_[np.zeros(300), np.ones(300)]
    by_hand.classifier_ = LogisticRegression().fit(np.r_[X[:300], X[300:600] + 1], labels)
    by_hand.prior_ratio_ = 1.0
    cp = calibrated(by_hand)
    cp.predict_interval(X[1300:])
    by_hand.prior_ratio_ = 50.0
    with pytest.raises(NotFittedError, match="refitted or changed since"):
        cp.predict_interval(X[1300:])


def _site_frames(n=1000, seed=0):
    """Source sites a and b half and half, target site b only: the true ratio is 0 at site a
    and 2 at site b. Each frame's category column lists only its own sites."""
    rng = np.random.default_rng(seed)
    source = pd.DataFrame({"x": rng.normal(size=n), "site": rng.choice(["a", "b"], n)})
    target = pd.DataFrame({"x": rng.normal(size=n), "site": ["b"] * n})
    return source.astype({"site": "category"}), target.astype({"site": "category"})


class _SeesDtypes(ClassifierMixin, BaseEstimator):
    """Records the dtypes it is fitted on; probability 1/2 everywhere."""

    def fit(self, X, y):
        self.dtypes_, self.classes_ = X.dtypes.copy(), np.unique(y)
        return self

    def predict_proba(self, X):
        return np.full((len(X), 2), 0.5)


def test_category_columns_listing_other_categories_in_each_frame_stay_categorical():
    """Shift review (stop 59): ``fit`` joined the frames with ``pd.concat``, which turns a
    category column whose categories differ between them (a site absent from the target)
    into text, silently: a pipeline selecting category columns by dtype dropped it (weights
    about 1 where the true ratio is 0 and 2; weighted CP then covered 0.782 at 0.90) and
    HistGradientBoosting with categorical_features="from_dtype" failed on the text. The
    column now gets the union of both frames' categories (the user's frames untouched)."""
    from sklearn.compose import make_column_selector, make_column_transformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    source, target = _site_frames()
    onehot = make_pipeline(
        make_column_transformer(
            (
                OneHotEncoder(handle_unknown="ignore"),
                make_column_selector(dtype_include="category"),
            ),
            (StandardScaler(), make_column_selector(dtype_include="number")),
        ),
        LogisticRegression(),
    )
    probe = pd.DataFrame({"x": [0.0, 0.0], "site": pd.Categorical(["a", "b"])})
    weights = ClassifierDensityRatio(onehot).fit(source, target)(probe)
    assert weights[0] < 0.1 and 1.8 < weights[1] < 2.2, weights
    assert list(target["site"].cat.categories) == ["b"]  # the user's frame is untouched
    boosting = HistGradientBoostingClassifier(
        categorical_features="from_dtype", max_iter=30, random_state=0
    )
    weights = ClassifierDensityRatio(boosting).fit(source, target)(probe)
    assert weights[0] < 0.1 and 1.5 < weights[1] < 2.5, weights
    # a column categorical in one frame only is made categorical in both; an ordered one
    # keeps its order when the other frame's categories follow it
    levels = pd.CategoricalDtype(["low", "mid", "high"], ordered=True)
    source["size"] = pd.Categorical(["low", "mid", "high", "mid"] * 250, dtype=levels)
    target["size"] = pd.Categorical(
        ["low", "high"] * 500, dtype=pd.CategoricalDtype(["low", "high"], ordered=True)
    )
    target["site"] = target["site"].astype(str)
    seen = ClassifierDensityRatio(_SeesDtypes()).fit(source, target).classifier_.dtypes_
    assert seen["site"] == pd.CategoricalDtype(["a", "b"])
    assert seen["size"] == levels
    reordered = target.astype({"size": pd.CategoricalDtype(["high", "low"], ordered=True)})
    with pytest.raises(
        ValueError, match=r"column 'size' is ordered, and the frames' categories differ"
    ):
        ClassifierDensityRatio(_SeesDtypes()).fit(source, reordered)
    with pytest.raises(ValueError, match=r"column 'size' is ordered in `X_source` only"):
        ClassifierDensityRatio(_SeesDtypes()).fit(
            source, target.assign(size=pd.Categorical(target["size"].astype(str)))
        )
    plain = target.assign(size=["high", "low"] * 500)  # text: it follows the order given
    assert (
        ClassifierDensityRatio(_SeesDtypes()).fit(source, plain).classifier_.dtypes_["size"]
        == levels
    )
    with pytest.raises(ValueError, match=r"`X_target` column 'size' holds values outside"):
        ClassifierDensityRatio(_SeesDtypes()).fit(source, plain.assign(size="huge"))


def test_category_values_unseen_at_fit_are_warned_of_once_per_fit():
    """What a fitted domain classifier does with a category it never saw is its own affair
    (HistGradientBoosting treats it as missing, OneHotEncoder(handle_unknown="ignore") as
    no category): the weight does not come from data, and it was silent."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    source, target = _site_frames(300)
    ratio = ClassifierDensityRatio(
        HistGradientBoostingClassifier(categorical_features="from_dtype", max_iter=10)
    ).fit(source, target)
    unseen = pd.DataFrame({"x": [0.0, 0.0, 0.0], "site": pd.Categorical(["a", "c", "d"])})
    with pytest.warns(
        UserWarning, match=r"not seen when the ratio was fitted .*column 'site' \('c', 'd'\)"
    ):
        ratio(unseen)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ratio(unseen)  # once per fit
        ratio(source.iloc[:5])  # known values (their dtype lists fewer sites) are fine


def test_values_absent_from_both_samples_are_unseen_even_when_the_dtype_lists_them():
    """Diff review (ec1b546): the unseen-category warning compared with the dtype's declared
    categories: with one shared CategoricalDtype listing a site no sample holds (a common
    idiom), rows at that site were weighed silently; and a text column was not checked. The
    values present in the two samples are recorded now."""
    rng = np.random.default_rng(0)
    shared = pd.CategoricalDtype(list("abcd"))  # 'd' in neither sample
    sites = {side: pd.Series(rng.choice(list("abc"), 200)).astype(shared) for side in ("S", "T")}
    source = pd.DataFrame({"x": rng.normal(size=200), "site": sites["S"]})
    target = pd.DataFrame({"x": rng.normal(0.5, 1.0, 200), "site": sites["T"]})
    probe = pd.DataFrame({"x": [0.0, 0.0], "site": pd.Series(["d", "a"]).astype(shared)})
    ratio = ClassifierDensityRatio(_SeesDtypes()).fit(source, target)
    with pytest.warns(UserWarning, match=r"not seen when the ratio was fitted .*'site' \('d'\)"):
        ratio(probe)
    text = ClassifierDensityRatio(_SeesDtypes()).fit(
        source.astype({"site": str}), target.astype({"site": str})
    )
    with pytest.warns(UserWarning, match=r"not seen when the ratio was fitted .*'site' \('e'\)"):
        text(pd.DataFrame({"x": [0.0], "site": ["e"]}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # values present in a sample: no warning
        ClassifierDensityRatio(_SeesDtypes()).fit(source, target)(source.iloc[:50])
        text(source.astype({"site": str}).iloc[:50])
        text(source.iloc[:50])  # the same values in a category column


def test_the_unseen_value_scan_stops_once_it_has_warned_for_the_fit(monkeypatch):
    """Diff review (ec1b546): the scan for unseen category values ran at every call, even
    after its once-per-fit warning (2.5 ms per call with 5 category columns); a refit scans
    again."""
    import uqconform.shift as shift

    calls = []

    def counting(X, known):
        calls.append(len(X))
        return _unseen_categories(X, known)

    _unseen_categories = shift._unseen_categories
    monkeypatch.setattr(shift, "_unseen_categories", counting)
    source, target = _site_frames(100)
    ratio = ClassifierDensityRatio(_SeesDtypes()).fit(source, target)
    unseen = pd.DataFrame({"x": [0.0], "site": pd.Categorical(["c"])})
    with pytest.warns(UserWarning, match="not seen when the ratio was fitted"):
        ratio(unseen)
    for _ in range(3):
        ratio(unseen)
        ratio(source.iloc[:5])
    assert calls == [1]
    ratio.fit(source, target)
    with pytest.warns(UserWarning, match="not seen when the ratio was fitted"):
        ratio(unseen)
    assert calls == [1, 1]


def test_category_columns_are_found_among_many_numeric_columns():
    """Diff review (ec1b546): the union of categories read every column (134-185 ms per fit
    at 2,000 numeric columns); it now reads the category columns found from the dtypes, with
    the same outcome: numeric columns untouched, a category column anywhere made one dtype."""
    from uqconform._rows import shared_categories

    rng = np.random.default_rng(0)
    source = pd.DataFrame(rng.normal(size=(6, 40)))
    target = pd.DataFrame(rng.normal(size=(4, 40)))
    source[17] = pd.Categorical(list("ababab"))
    target[17] = pd.Categorical(list("cccc"))
    target[33] = pd.Categorical(list("xyxy"))  # categorical in one frame only
    first, second, categories = shared_categories(source, target)
    assert sorted(categories) == [17, 33]
    assert list(categories[17]) == ["a", "b", "c"]
    assert list(categories[33])[-2:] == ["x", "y"] and len(categories[33]) == 8
    joined = pd.concat([first, second], ignore_index=True)
    assert isinstance(joined[17].dtype, pd.CategoricalDtype)
    assert isinstance(joined[33].dtype, pd.CategoricalDtype)
    numeric = [c for c in joined.columns if c not in (17, 33)]
    assert all(dtype.kind == "f" for dtype in joined[numeric].dtypes)
    assert first[numeric].equals(source[numeric]) and second[numeric].equals(target[numeric])
    assert list(source[17].cat.categories) == ["a", "b"]  # the user's frames untouched
    weights = ClassifierDensityRatio(_SeesDtypes()).fit(source, target)
    assert weights.classifier_.dtypes_[17] == pd.CategoricalDtype(["a", "b", "c"])


def test_ordered_categories_refused_say_what_the_union_requires():
    """Diff review (ec1b546): ['lo', 'mid'] and ['mid', 'hi'] were refused "in a way no one
    order holds", though lo < mid < hi holds both: the union needs one frame's categories
    to contain the other's in the same order."""
    ordered = pd.CategoricalDtype(["lo", "mid"], ordered=True)
    other = pd.CategoricalDtype(["mid", "hi"], ordered=True)
    source = pd.DataFrame({"x": [0.0, 1.0], "c": pd.Series(["lo", "mid"]).astype(ordered)})
    target = pd.DataFrame({"x": [0.0, 1.0], "c": pd.Series(["mid", "hi"]).astype(other)})
    with pytest.raises(ValueError) as info:
        ClassifierDensityRatio(_SeesDtypes()).fit(source, target)
    assert "no one order holds" not in str(info.value)
    assert "neither frame's categories contain the other's in the same order" in str(info.value)


def test_a_classifier_without_probabilities_is_told_how_to_get_them():
    """Shift review (stop 59): ``SVC()`` got "`classifier` must have predict_proba, got
    SVC." with no remedy; and the hard-probability warning advised a bare
    CalibratedClassifierCV, whose isotonic method itself gives exact 0/1 probabilities."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(0)
    source, target = rng.normal(size=(100, 2)), rng.normal(1.0, 1.0, size=(100, 2))
    with pytest.raises(TypeError, match=r"`classifier` \(SVC\) .*Use SVC\(probability=True\)"):
        ClassifierDensityRatio(SVC()).fit(source, target)
    with pytest.raises(TypeError, match=r"SVC\(probability=True\) as the pipeline's last step"):
        ClassifierDensityRatio(make_pipeline(StandardScaler(), SVC())).fit(source, target)
    tree = ClassifierDensityRatio(DecisionTreeClassifier(random_state=0)).fit(source, target)
    with pytest.warns(UserWarning, match=r'CalibratedClassifierCV\(\.\.\., method="sigmoid"\)'):
        tree(source)
    # isotonic calibration of even a logistic regression is 0 or 1 past its extreme scores
    probe = rng.normal(0.5, 2.0, size=(500, 2))
    isotonic = CalibratedClassifierCV(LogisticRegression(), method="isotonic")
    ratio = ClassifierDensityRatio(isotonic, random_state=0).fit(source, target)
    with pytest.warns(UserWarning, match=r"isotonic calibration itself gives 0 and 1"):
        ratio(probe)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        isotonic.set_params(method="sigmoid")
        ClassifierDensityRatio(isotonic, random_state=0).fit(source, target)(probe)


def _covering_wrappers():
    """Weighted wrappers with fixed fitted models (the review's set-up), by name: the model,
    the calibration rows per resplit and the kind of labels and strata."""
    from sklearn.frozen import FrozenEstimator

    rng = np.random.default_rng(12345)
    X, y = _draw(500, rng)
    band = tuple(
        FrozenEstimator(
            HistGradientBoostingRegressor(
                loss="quantile", quantile=q, max_iter=30, random_state=0
            ).fit(X, y)
        )
        for q in (0.05, 0.95)
    )
    ridge = FrozenEstimator(Ridge().fit(X, y))
    logistic = FrozenEstimator(LogisticRegression().fit(X, _labels(X, rng)))
    return {
        "cqr asymmetric": (
            ConformalizedQuantileRegressor(band, symmetric=False, likelihood_ratio=tilt),
            99,
            "regression",
        ),
        "mondrian groups": (SplitConformalRegressor(ridge, likelihood_ratio=tilt), 98, "groups"),
        "aps class-conditional": (
            SplitConformalClassifier(
                logistic,
                conformity_score="aps",
                class_conditional=True,
                random_state=0,
                likelihood_ratio=tilt,
            ),
            149,
            "classes",
        ),
    }


def _tilt_by(shift):
    """The density ratio of N(shift, 1) to N(0, 1) in the first feature."""
    return lambda X: np.exp(shift * np.asarray(X)[:, 0] - shift**2 / 2)


def _pooled_coverage(name, ratio=tilt, repeats=500, shift=1.0):
    """The share of `repeats` resplits whose one test row (drawn with x0 shifted by
    ``shift``) is covered by wrapper ``name`` of `_covering_wrappers` weighted by ``ratio``
    (None: unweighted)."""
    template, n_cal, kind = _covering_wrappers()[name]
    template.set_params(likelihood_ratio=ratio)
    covered = 0
    for seed in range(repeats):
        rng = np.random.default_rng(seed)
        Xc, yc = _draw(n_cal, rng)
        Xt, yt = _draw(1, rng, shift=shift)
        if kind == "classes":
            yc, yt = _labels(Xc, rng), _labels(Xt, rng)
        groups = {"groups": (Xc[:, 1] > 0).astype(int)} if kind == "groups" else {}
        test_groups = {"groups": (Xt[:, 1] > 0).astype(int)} if groups else {}
        with warnings.catch_warnings():
            # few effective rows, and rows far in the tail with infinite intervals
            warnings.simplefilter("ignore")
            cp = clone(template).calibrate(Xc, yc, **groups)
            if kind == "classes":
                covered += bool(cp.predict_set(Xt)[0, yt[0]])
            else:
                low, high = cp.predict_interval(Xt, **test_groups)[0]
                covered += bool(low <= yt[0] <= high)
    return covered / repeats


@pytest.mark.parametrize(
    ("name", "shift", "repeats"),
    [
        ("cqr asymmetric", 1.5, 500),
        ("mondrian groups", 1.0, 500),
        ("aps class-conditional", 2.0, 500),
    ],
)
def test_weighted_strata_and_asymmetric_cqr_cover_over_resplits(name, shift, repeats):
    """Shift review (stop 59): weighted CQR with ``symmetric=False``, weighted Mondrian
    groups and weighted class-conditional sets had no coverage test. Calibration rows from
    N(0, 1), one test row per resplit from N(shift, 1) (where the noise is larger), weighted
    by the true ratio: the pooled count of covers is Binomial(R, p) with p >= 0.90 (per
    group and per class too), judged by the lower end of `coverage_bounds` for a
    calibration size whose law has p = 0.90 exactly (a 0.5% one-sided test). The unweighted
    wrapper must fail that limit, or the test could not tell them apart: at shift 1 and 500
    resplits the class-conditional sets covered 0.866 unweighted, above the limit 0.864
    (diff review of ec1b546; 0.886 against 0.882 at 2,000 resplits), so that case uses
    shift 2 (81% of its weighted sets hold every class); CQR at shift 1 covered 0.860
    unweighted with current packages but 0.866 with the lower bounds (scikit-learn 1.6),
    so it uses shift 1.5 (weighted 0.924 and 0.936, unweighted 0.796 and 0.802 in the two).
    Mondrian groups at shift 1: weighted 0.952, unweighted 0.834; class-conditional at
    shift 2: 0.928 and 0.826; the lower end is 0.864."""
    ratio = tilt if shift == 1.0 else _tilt_by(shift)
    lower = coverage_bounds(99, 0.1, 1, n_repeats=repeats)[0]  # (99 + 1) 0.1 is whole
    coverage = _pooled_coverage(name, ratio, repeats, shift)
    assert coverage >= lower, (coverage, lower)
    unweighted = _pooled_coverage(name, None, repeats, shift)
    assert unweighted < lower, (unweighted, lower)


def test_two_sided_weighted_pvalues_stay_in_zero_one():
    """Shift review: the two sides of weighted CQR shared the first side's summed weights,
    whose last bits differ from the second side's: a weight-0 test row far above its
    interval got p = -3.8e-16 instead of 0."""
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.frozen import FrozenEstimator

    from uqconform import ConformalizedQuantileRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 2))
    y = X[:, 0] + rng.normal(size=3000)
    band = tuple(
        FrozenEstimator(
            HistGradientBoostingRegressor(
                loss="quantile", quantile=q, max_iter=20, random_state=0
            ).fit(X[:1000], y[:1000])
        )
        for q in (0.05, 0.95)
    )

    def ratio(X):
        X = np.asarray(X)
        tilt = np.exp(0.7 * X[:, 0]) * (1 + 0.3 * np.sin(50 * X[:, 1]))
        return np.where(X[:, 1] > 2.5, 0.0, tilt)

    cp = ConformalizedQuantileRegressor(band, symmetric=False, likelihood_ratio=ratio)
    cp.calibrate(X[1000:2000], y[1000:2000])
    X_test = X[2000:][X[2000:, 1] > 2.5]  # weight 0
    far_above = cp.predict_interval(X_test)[:, 1] + 1e6
    np.testing.assert_array_equal(cp.predict_pvalue(X_test, far_above), 0.0)


def test_one_row_of_a_frame_is_told_how_to_stay_a_frame():
    """Shift review: calling a fitted ratio on `frame.iloc[0]` (a Series) was told to use
    `X.reshape(1, -1)`, which a Series does not have."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(200, 2)), columns=["a", "b"])
    ratio = ClassifierDensityRatio().fit(frame[:100], frame[100:] + 0.5)
    with pytest.raises(ValueError, match=r"must be 2-D .*frame\.iloc\[\[i\]\]"):
        ratio(frame.iloc[0])
    with pytest.raises(ValueError, match=r"must be 2-D .*X\.reshape\(1, -1\)"):
        ratio(frame.to_numpy()[0])
    assert ratio(frame.iloc[[0]]).shape == (1,)
