"""Conformal p-values of candidate labels from the split regressors (crepes' `predict_p`)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from conftest import Unchanged, regression_data, thirds
from scipy.stats import kstest
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.neighbors import KNeighborsRegressor

from uqconform import ConformalizedQuantileRegressor, SplitConformalRegressor
from uqconform.evaluation import coverage_bounds


def _split(n=900, seed=0):
    return thirds(*regression_data(n, seed=seed))


def _wrappers():
    return {
        "absolute": SplitConformalRegressor(Ridge(), batch_size=7, random_state=0),
        "normalized": SplitConformalRegressor(
            Ridge(),
            conformity_score="normalized",
            difficulty_estimator=KNeighborsRegressor(15),
            batch_size=7,
            random_state=0,
        ),
        "cqr": ConformalizedQuantileRegressor(
            HistGradientBoostingRegressor(loss="quantile", max_iter=30, random_state=0),
            batch_size=7,
        ),
        "cqr asymmetric": ConformalizedQuantileRegressor(
            HistGradientBoostingRegressor(loss="quantile", max_iter=30, random_state=0),
            symmetric=False,
            batch_size=7,
        ),
    }


@pytest.mark.parametrize("name", list(_wrappers()))
def test_pvalues_above_alpha_are_the_intervals(name):
    """At every level the interval holds exactly the candidates whose p-value exceeds it
    (199 calibration rows: (n + 1) alpha is an integer at 0.1 and 0.2), with groups and in
    batches; candidates closer to an end than rounding can tell are left out."""
    (Xf, yf), (Xc, yc), (Xt, yt) = _split()
    Xc, yc = Xc[:199], yc[:199]
    gc, gt = (Xc[:, 1] > 0).astype(int), (Xt[:, 1] > 0).astype(int)
    cp = _wrappers()[name].fit(Xf, yf)
    alphas = [0.05, 0.1, 0.2, 0.3]
    for groups, test_groups in ((None, None), (gc, gt)):
        cp.calibrate(Xc, yc, groups=groups)
        intervals = cp.predict_interval(Xt, alpha=alphas, groups=test_groups)
        low, high = intervals[:, 0].min(axis=1), intervals[:, 1].max(axis=1)
        grid = np.linspace(low - 1.0, high + 1.0, 61, axis=1)  # every row's own candidates
        p = cp.predict_pvalue(Xt, grid, groups=test_groups)
        assert p.shape == grid.shape and ((p > 0) & (p <= 1)).all()
        for j, alpha in enumerate(alphas):
            lo, hi = intervals[:, :1, j], intervals[:, 1:, j]
            inside = (lo <= grid) & (grid <= hi)
            clear = np.minimum(np.abs(grid - lo), np.abs(grid - hi)) > 1e-9 * (1 + np.abs(grid))
            assert (lo < hi).all()  # no band crossed here: its set would be empty
            np.testing.assert_array_equal((p > alpha)[clear], inside[clear])
            assert inside.any(axis=1).all() and (~inside).any(axis=1).all()
        true = cp.predict_pvalue(Xt, yt, groups=test_groups)
        assert true.shape == (len(yt),)
        # The true label's p-value exceeds alpha as often as split CP covers, in each
        # calibration group (one 1% false-alarm budget over the checks); asymmetric CQR's
        # p-value min(1, 2 min(p_low, p_high)) is conservative: the lower end only.
        cal_groups = np.zeros(len(yc)) if groups is None else gc
        row_groups = np.zeros(len(yt)) if groups is None else gt
        confidence = 1 - 0.01 / (np.unique(row_groups).size * len(alphas))
        for group in np.unique(row_groups):
            rows = row_groups == group
            n_cal = int((cal_groups == group).sum())
            bounds = coverage_bounds(n_cal, alphas, int(rows.sum()), confidence=confidence)
            covered = (true[rows, None] > np.array(alphas)).mean(axis=0)
            assert (covered >= bounds[:, 0]).all(), (group, covered, bounds)
            if name != "cqr asymmetric":
                assert (covered <= bounds[:, 1]).all(), (group, covered, bounds)


def test_pvalues_follow_the_definition_within_groups():
    """p = (1 + #{calibration scores of the row's group >= its score}) / (n_group + 1); the
    smoothed p-value lies between #{>} / (n + 1) and the plain one."""
    (Xf, yf), (Xc, yc), (Xt, yt) = _split(seed=1)
    gc, gt = np.where(Xc[:, 0] > 0, "right", "left"), np.where(Xt[:, 0] > 0, "right", "left")
    cp = SplitConformalRegressor(LinearRegression(), random_state=0).fit(Xf, yf)
    cp.calibrate(Xc, yc, groups=gc)
    candidates = np.column_stack([yt, yt + 0.5, cp.predict(Xt)])
    scores = np.abs(candidates - cp.predict(Xt)[:, None])
    calibration = np.abs(yc - cp.predict(Xc))
    own = [calibration[gc == g] for g in gt]  # each test row's group's calibration scores
    at_least = np.array(
        [[(c >= s).sum() for s in row] for c, row in zip(own, scores, strict=True)]
    )
    greater = np.array([[(c > s).sum() for s in row] for c, row in zip(own, scores, strict=True)])
    size = np.array([c.size for c in own])[:, None]
    p = cp.predict_pvalue(Xt, candidates, groups=gt)
    np.testing.assert_allclose(p, (1 + at_least) / (size + 1), rtol=1e-12)
    np.testing.assert_array_equal(p[:, 2], 1.0)  # the prediction itself: score 0
    smooth = cp.predict_pvalue(Xt, candidates, groups=gt, smooth=True)
    # smoothed: (#{>} + u (#{=} + 1)) / (n + 1), so u can be read back, uniform on [0, 1]
    u = (smooth * (size + 1) - greater) / (at_least - greater + 1)
    assert ((u >= -1e-9) & (u <= 1 + 1e-9)).all()
    assert kstest(u.ravel(), "uniform").pvalue > 0.001  # uniform draws (a 0.1% test)


class _Rounded(RegressorMixin, BaseEstimator):
    """A linear fit whose predictions are rounded to integers: with an integer target the
    absolute residuals are integers and tie heavily."""

    def fit(self, X, y):
        self.model_ = LinearRegression().fit(X, y)
        return self

    def predict(self, X):
        return np.round(self.model_.predict(X))


def test_smoothed_pvalues_cover_exactly_despite_ties():
    """Integer residuals tie: the plain p-values are conservative (coverage above the
    law's upper end), the smoothed ones follow the split-CP coverage law, pooled over
    resplits at two levels."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(6000, 2))
    y = np.round(X @ [2.0, -1.0] + 1.5 * rng.normal(size=len(X)))
    model = _Rounded().fit(X[:1000], y[:1000])
    pool_X, pool_y = X[1000:], y[1000:]
    n_cal, n_test, repeats = 200, 500, 30
    alphas = np.array([0.1, 0.2])
    hits = {False: [], True: []}
    for r in range(repeats):
        order = rng.permutation(len(pool_y))
        cal, test = order[:n_cal], order[n_cal : n_cal + n_test]
        cp = SplitConformalRegressor(FrozenEstimator(model), random_state=r)
        cp.calibrate(pool_X[cal], pool_y[cal])
        for smooth in (False, True):
            p = cp.predict_pvalue(pool_X[test], pool_y[test], smooth=smooth)
            hits[smooth].append(p[:, None] > alphas)
    bounds = coverage_bounds(n_cal, alphas, n_test, confidence=0.999, n_repeats=repeats)
    smoothed, plain = (np.concatenate(hits[s]).mean(axis=0) for s in (True, False))
    assert ((bounds[:, 0] <= smoothed) & (smoothed <= bounds[:, 1])).all(), smoothed
    assert (plain > bounds[:, 1]).all(), plain  # ties make the plain p-values conservative


def test_pvalue_shapes_batches_and_pickling():
    (Xf, yf), (Xc, yc), (Xt, yt) = _split(seed=3)
    cp = SplitConformalRegressor(Ridge(), random_state=4).fit(Xf, yf).calibrate(Xc, yc)
    grid = np.linspace(-3.0, 3.0, 5)
    every = cp.predict_pvalue(Xt, grid)
    assert every.shape == (len(Xt), 5)
    np.testing.assert_array_equal(cp.predict_pvalue(Xt, np.tile(grid, (len(Xt), 1))), every)
    np.testing.assert_array_equal(
        cp.predict_pvalue(Xt, yt), cp.predict_pvalue(Xt, yt[:, None])[:, 0]
    )
    frame = pd.DataFrame(Xt, columns=[f"x{i}" for i in range(Xt.shape[1])])
    np.testing.assert_array_equal(
        cp.predict_pvalue(frame.to_numpy(), list(yt)), cp.predict_pvalue(Xt, yt)
    )
    for smooth in (False, True):
        whole = cp.predict_pvalue(Xt, grid, smooth=smooth)
        cp.set_params(batch_size=4)
        np.testing.assert_array_equal(cp.predict_pvalue(Xt, grid, smooth=smooth), whole)
        cp.set_params(batch_size=None)
        again = pickle.loads(pickle.dumps(cp))
        np.testing.assert_array_equal(again.predict_pvalue(Xt, grid, smooth=smooth), whole)

    def smoothed(batch_size):  # with a Generator, the draws do not depend on batch_size
        model = SplitConformalRegressor(
            Ridge(), random_state=np.random.default_rng(5), batch_size=batch_size
        )
        return model.fit(Xf, yf).calibrate(Xc, yc).predict_pvalue(Xt, grid, smooth=True)

    np.testing.assert_array_equal(smoothed(None), smoothed(3))


def test_a_shared_grid_of_shape_one_by_g_is_read_alike_in_every_batch():
    """A 1-D grid as long as the batch is read as one candidate per row (documented); a
    loop over batches of the grid's length silently got (n,) instead of (n, g). Shape
    (1, g) is a shared grid whatever the batch size, for every predict_pvalue."""
    from uqconform import ConformalPredictiveSystem, FullConformalRidge

    (Xf, yf), (Xc, yc), (Xt, _) = _split(seed=3)
    grid = np.linspace(-3.0, 3.0, 4)
    models = [
        SplitConformalRegressor(Ridge()).fit(Xf, yf).calibrate(Xc, yc),
        FullConformalRidge().fit(Xf[:100], yf[:100]),
    ]
    for model in models:
        assert model.predict_pvalue(Xt[:4], grid).shape == (4,)  # one candidate per row
        shared = model.predict_pvalue(Xt[:4], grid[None, :])
        assert shared.shape == (4, 4)
        np.testing.assert_array_equal(shared, model.predict_pvalue(Xt[:4], np.tile(grid, (4, 1))))
        np.testing.assert_array_equal(model.predict_pvalue(Xt[:3], grid[None, :]), shared[:3])
    cps = ConformalPredictiveSystem(Ridge()).fit(Xf, yf).calibrate(Xc, yc)
    assert cps.predict_cdf(Xt[:4], grid[None, :]).shape == (4, 4)
    with pytest.raises(ValueError, match=r"shape \(n_samples,\), \(g,\), \(1, g\) or"):
        models[0].predict_pvalue(Xt[:4], np.tile(grid, (2, 1)))


def test_pvalue_input_checks():
    (Xf, yf), (Xc, yc), (Xt, yt) = _split(seed=5)
    cp = SplitConformalRegressor(Ridge()).fit(Xf, yf)
    with pytest.raises(NotFittedError, match="predict_pvalue needs calibration"):
        cp.predict_pvalue(Xt, yt)
    cp.calibrate(Xc, yc, groups=np.zeros(len(yc), int))
    unchanged = Unchanged(Xt, yt)
    with pytest.warns(UserWarning, match="groups without calibration data"):
        p = cp.predict_pvalue(Xt, yt, groups=np.r_[np.zeros(len(Xt) - 3, int), [7, 7, 7]])
    unchanged.check()
    assert (p[-3:] == 1).all() and (p[:-3] < 1).mean() > 0.9
    groups = np.zeros(len(Xt), int)
    with pytest.raises(ValueError, match="groups"):
        cp.predict_pvalue(Xt, yt)
    with pytest.raises(ValueError, match="features"):
        cp.predict_pvalue(Xt[:, :1], yt, groups=groups)
    with pytest.raises(ValueError, match="`y_candidates` contains NaN"):
        cp.predict_pvalue(Xt, np.r_[yt[:-1], np.nan], groups=groups)
    with pytest.raises(ValueError, match=r"`y_candidates` must have shape"):
        cp.predict_pvalue(Xt, np.zeros((3, 2)), groups=groups)
    with pytest.raises(ValueError, match="`y_candidates` must be numbers"):
        cp.predict_pvalue(Xt, ["a"] * len(Xt), groups=groups)
    with pytest.raises(ValueError, match="`smooth` must be True or False"):
        cp.predict_pvalue(Xt, yt, groups=groups, smooth="yes")


class _NaNAt(RegressorMixin, BaseEstimator):
    """Predicts NaN on rows whose first feature is above a cut."""

    def fit(self, X, y):
        self.fitted_ = True
        return self

    def predict(self, X):
        return np.where(X[:, 0] > 2.0, np.nan, X[:, 0])


def test_pvalue_names_the_row_where_the_model_predicts_nan():
    (_, _), (Xc, yc), (Xt, _) = _split(seed=6)
    keep = Xc[:, 0] <= 2.0
    cp = SplitConformalRegressor(FrozenEstimator(_NaNAt().fit(Xc, yc)), batch_size=5)
    cp.calibrate(Xc[keep], yc[keep])
    Xt = np.vstack([np.zeros((7, Xt.shape[1])), [[3.0] + [0.0] * (Xt.shape[1] - 1)]])
    with pytest.raises(ValueError, match="row 7"):
        cp.predict_pvalue(Xt, np.zeros(len(Xt)))


class _Counting(RegressorMixin, BaseEstimator):
    """A fitted linear model that counts its predict calls; ``drop`` rows go missing."""

    def __init__(self, drop=0):
        self.drop = drop

    def fit(self, X, y):
        self.model_ = LinearRegression().fit(X, y)
        self.calls_ = 0
        return self

    def predict(self, X):
        self.calls_ += 1
        # (`lost`, not a parameter: rows that go missing later, unseen by the settings check)
        return self.model_.predict(X)[: len(X) - self.drop - getattr(self, "lost", 0)]


def test_automatic_batches_count_the_candidates():
    """A review found: batches were sized for two cells per row whatever the number of
    candidates, so 20,000 rows x 200 candidates ran in one batch (7x the output's memory
    in temporaries); they are now sized by rows x candidates."""
    (Xf, yf), (Xc, yc), _ = _split(seed=7)
    model = _Counting().fit(Xf, yf)
    cp = SplitConformalRegressor(FrozenEstimator(model)).calibrate(Xc, yc)
    X_many = np.random.default_rng(0).normal(size=(20_000, Xf.shape[1]))
    model.calls_ = 0
    cp.predict_interval(X_many)
    assert model.calls_ == 1  # two cells per row: one batch
    model.calls_ = 0
    p = cp.predict_pvalue(X_many, np.linspace(-3, 3, 200))
    assert model.calls_ > 1 and p.shape == (20_000, 200)


def test_a_model_predicting_too_few_rows_is_named_at_every_step():
    (Xf, yf), (Xc, yc), (Xt, yt) = _split(seed=8)
    short = SplitConformalRegressor(FrozenEstimator(_Counting(drop=1).fit(Xf, yf)))
    with pytest.raises(ValueError, match=r"`estimator` predicted .* calibration rows"):
        short.calibrate(Xc, yc)
    short.estimator.estimator.drop = 0
    short.calibrate(Xc, yc)
    short.estimator.estimator.lost = 1  # a change of `drop` itself is refused (stop 62)
    with pytest.raises(ValueError, match=f"`estimator` predicted {len(Xt) - 1} values for"):
        short.predict_interval(Xt)
    with pytest.raises(ValueError, match=f"`estimator` predicted {len(Xt) - 1} values for"):
        short.predict_pvalue(Xt, yt)


def test_candidates_of_none_are_named_as_missing_not_as_nan():
    """Review finding (stop 57): ``predict_cdf(X, None)`` and ``predict_pvalue(X, None)``
    said "`y` contains NaN or infinite values", as ``None`` counts as a missing value."""
    from uqconform.regression import ConformalPredictiveSystem

    (Xf, yf), (Xc, yc), (Xt, _) = _split(300)
    cps = ConformalPredictiveSystem(Ridge()).fit(Xf, yf).calibrate(Xc, yc)
    split = SplitConformalRegressor(Ridge()).fit(Xf, yf).calibrate(Xc, yc)
    for call, name in (
        (lambda: cps.predict_cdf(Xt[:3], None), "y"),
        (lambda: cps.predict_pvalue(Xt[:3], None), "y_candidates"),
        (lambda: split.predict_pvalue(Xt[:3], None), "y_candidates"),
    ):
        with pytest.raises(ValueError, match=rf"^`{name}` is None: pass the values") as error:
            call()
        assert "NaN" not in str(error.value)


def test_venn_abers_scores_of_none_are_not_named_as_nan():
    """Review finding (stop 57): the other caller of `holds_missing_values`,
    ``venn_abers_bounds``, said "`scores` contains NaN." of ``None``."""
    from uqconform.classification.venn_abers import venn_abers_bounds

    for args, name in (
        ((None, [0, 1], [0.5]), "calibration_scores"),
        (([0.0, 1.0], [0, 1], None), "scores"),
    ):
        with pytest.raises(ValueError, match=rf"^`{name}` must hold numbers, got None"):
            venn_abers_bounds(*args)


@pytest.mark.parametrize("wrapper", ["FullConformalRidge", "ApproximateFullConformalRegressor"])
def test_full_cp_p_values_refuse_candidates_in_another_row_order(wrapper):
    # pandas review (stop 58): a y_candidates Series in another row order than X was paired
    # by position (98% of rows changed; share of p <= 0.1 from 0.06 to 0.52)
    import uqconform.regression

    X, y = regression_data(n=240, seed=3)
    frame = pd.DataFrame(X, index=np.arange(1000, 1240))
    target = pd.Series(y, index=frame.index)
    model = getattr(uqconform.regression, wrapper)(Ridge()).fit(frame[:200], target[:200])
    test, truth = frame[200:], target[200:]
    aligned = model.predict_pvalue(test, truth)
    np.testing.assert_array_equal(model.predict_pvalue(test, truth.to_numpy()), aligned)
    with pytest.raises(ValueError, match=r"`y_candidates` is indexed by the row labels of `X`"):
        model.predict_pvalue(test, truth.sort_values())
