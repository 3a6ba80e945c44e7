"""Full conformal prediction for ridge (the ridge confidence machine) against its oracles.

The oracles are independent of :mod:`uqconform.regression.crr`: the augmented hat matrix
``H = Phi_aug (Phi_aug^T Phi_aug + Lambda)^-1 Phi_aug^T`` of the fit that includes the test
point (checked once against ``sklearn.linear_model.Ridge`` refits), and the brute-force
full-CP p-value on a grid of candidate labels computed from it.
"""

from __future__ import annotations

import itertools
import pickle
import re
import warnings
from fractions import Fraction

import numpy as np
import pytest
from conftest import Unchanged
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import Lasso, LinearRegression, Ridge
from sklearn.utils.estimator_checks import parametrize_with_checks

from uqconform import ApproximateFullConformalRegressor, FullConformalRidge
from uqconform.evaluation import coverage_bounds
from uqconform.quantiles import levels_text
from uqconform.regression.crr import (
    LinearConfidenceMachine,
    exact_intervals,
    exact_union,
    fast_intervals,
    p_values,
    residual_coefficients,
)

SCORES = ["standard", "studentized", "deleted"]
# n = 16 training points: (n + 1) alpha is never an integer for these levels, so no p-value
# lands exactly on alpha and float rounding cannot decide membership.
N_SMALL = 16
ALPHAS = [0.1, 0.25, 0.4]


# ---- the oracle ---------------------------------------------------------------------------------
def small_data(n=N_SMALL, d=3, seed=0, n_test=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_test, d))
    y = X @ np.linspace(1.0, -0.5, d) + 0.7 * rng.normal(size=n + n_test)
    return X[:n], y[:n], X[n:], y[n:]


def augmented_hat(X, x, strength, intercept):
    """Hat matrix of the ridge fit on the n training rows plus the test row ``x``."""
    Phi = np.vstack([X, x])
    if intercept:
        Phi = np.column_stack([Phi, np.ones(len(Phi))])
    penalty = np.full(Phi.shape[1], float(strength))
    if intercept:
        penalty[-1] = 0.0  # scikit-learn does not penalise the intercept
    return Phi @ np.linalg.solve(Phi.T @ Phi + np.diag(penalty), Phi.T)


def oracle_scores(X, y, x, grid, strength, intercept, score):
    """Signed scores (g, n + 1) of the augmented refit for every candidate label in ``grid``
    (last column: the test point), rescaled by the augmented leverages."""
    H = augmented_hat(X, x, strength, intercept)
    C = np.eye(len(H)) - H
    labels = np.tile(np.append(y, 0.0), (len(grid), 1))
    labels[:, -1] = grid
    residuals = labels @ C.T
    leverage = np.diag(H)
    if score == "studentized":
        residuals = residuals / np.sqrt(1.0 - leverage)
    elif score == "deleted":
        residuals = residuals / (1.0 - leverage)
    return residuals


def oracle_pvalues(X, y, x, grid, strength, intercept, score):
    """p(y) = #{i <= n + 1 : |r_i| >= |r_test|} / (n + 1), and the distance to a tie."""
    r = np.abs(oracle_scores(X, y, x, np.atleast_1d(grid), strength, intercept, score))
    diff = r[:, :-1] - r[:, -1:]
    p = ((diff >= 0).sum(axis=1) + 1) / r.shape[1]
    return p, np.abs(diff).min(axis=1)


def model(strength=1.0, intercept=True, **params):
    return FullConformalRidge(Ridge(alpha=strength, fit_intercept=intercept), **params)


# ---- 1. augmented hat matrix == rank-one formulas -----------------------------------------------
@pytest.mark.parametrize("intercept", [False, True])
def test_oracle_matches_sklearn_ridge_refits(intercept):
    X, y, X_test, _ = small_data()
    x = X_test[0]
    for label in (-3.0, 0.4, 5.0):
        fit = Ridge(alpha=0.7, fit_intercept=intercept).fit(np.vstack([X, x]), np.append(y, label))
        expected = np.append(y, label) - fit.predict(np.vstack([X, x]))
        got = oracle_scores(X, y, x, np.array([label]), 0.7, intercept, "standard")[0]
        np.testing.assert_allclose(got, expected, atol=1e-10)


@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("score", SCORES)
def test_rank_one_coefficients_equal_augmented_hat_matrix(intercept, score):
    X, y, X_test, _ = small_data(n=25, d=4, seed=1, n_test=6)
    strength = 0.8
    features = np.column_stack([X, np.ones(len(X))]) if intercept else X
    test_features = np.column_stack([X_test, np.ones(len(X_test))]) if intercept else X_test
    penalty = np.full(features.shape[1], strength)
    if intercept:
        penalty[-1] = 0.0
    machine = LinearConfidenceMachine(features, penalty)
    coef = machine.solve(y)
    h_test, h_cross = machine.test_leverages(test_features)
    a, b = residual_coefficients(
        y - features @ coef, test_features @ coef, machine.leverage, h_test, h_cross, score
    )
    for row, x in enumerate(X_test):
        H = augmented_hat(X, x, strength, intercept)
        C = np.eye(len(H)) - H
        A, B = C @ np.append(y, 0.0), C[:, -1]
        scale = {
            "standard": np.ones(len(H)),
            "studentized": np.sqrt(1 - np.diag(H)),
            "deleted": 1 - np.diag(H),
        }[score]
        np.testing.assert_allclose(a[row], A / scale, rtol=0, atol=1e-10)
        np.testing.assert_allclose(b[row], B / scale, rtol=0, atol=1e-10)


# ---- 2. exact intervals and p-values == brute-force full CP -------------------------------------
@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("score", SCORES)
def test_exact_intervals_and_pvalues_equal_brute_force(score, intercept):
    X, y, X_test, _ = small_data(seed=2)
    strength = 0.5
    fitted = model(strength, intercept, alpha=ALPHAS, conformity_score=score).fit(X, y)
    intervals = fitted.predict_interval(X_test)
    assert intervals.shape == (len(X_test), 2, len(ALPHAS))
    for row, x in enumerate(X_test):
        centre = fitted.predict(x[None])[0]
        grid = np.linspace(centre - 15.0, centre + 15.0, 2001)
        step = grid[1] - grid[0]
        p, tie = oracle_pvalues(X, y, x, grid, strength, intercept, score)
        away = tie > 1e-9
        np.testing.assert_array_equal(fitted.predict_pvalue(x[None], grid)[0][away], p[away])
        for j, alpha in enumerate(ALPHAS):
            inside = grid[p > alpha]
            assert grid[0] < inside.min() and inside.max() < grid[-1]  # bounded sets here
            low, high = intervals[row, :, j]
            assert abs(low - inside.min()) <= step
            assert abs(high - inside.max()) <= step


def test_pvalue_shapes_and_single_candidates():
    X, y, X_test, y_test = small_data(seed=3)
    fitted = model(conformity_score="studentized").fit(X, y)
    per_row = fitted.predict_pvalue(X_test, y_test)
    assert per_row.shape == (len(X_test),)
    grid = fitted.predict_pvalue(X_test, np.linspace(-2, 2, 7))
    assert grid.shape == (len(X_test), 7)
    both = fitted.predict_pvalue(X_test, np.column_stack([y_test, y_test + 1.0]))
    np.testing.assert_array_equal(both[:, 0], per_row)
    for row, x in enumerate(X_test):
        expected, _ = oracle_pvalues(X, y, x, y_test[row], 1.0, True, "studentized")
        assert per_row[row] == expected[0]


# ---- 3. just inside / just outside; the union of intervals --------------------------------------
def _step(value):
    return 1e-7 * max(1.0, abs(value))


@pytest.mark.parametrize("score", SCORES)
def test_pvalue_exceeds_alpha_just_inside_and_not_just_outside(score):
    X, y, X_test, _ = small_data(n=30, d=4, seed=4, n_test=8)
    fitted = model(0.3, True, alpha=ALPHAS, conformity_score=score).fit(X, y)
    intervals = fitted.predict_interval(X_test)
    for row, x in enumerate(X_test):
        for j, alpha in enumerate(ALPHAS):
            low, high = intervals[row, :, j]
            probes = [low + _step(low), low - _step(low), high - _step(high), high + _step(high)]
            p, _ = oracle_pvalues(X, y, x, np.array(probes), 0.3, True, score)
            assert p[0] > alpha and p[2] > alpha
            assert p[1] <= alpha and p[3] <= alpha


def _union_case(score, seed):
    """Small, low-regularised fits and far test points: with the standard score, training
    residuals that grow faster in ``y`` than the test residual make the set non-convex."""
    X, y, X_test, _ = small_data(n=N_SMALL, d=5, seed=seed, n_test=10)
    X_test = X_test * 5.0  # far test points: high leverage
    return X, y, X_test, model(0.05, True, alpha=0.25, conformity_score=score).fit(X, y)


@pytest.mark.parametrize("score", SCORES)
def test_exact_union_pieces_gaps_and_hull(score):
    pieces_seen = 0
    for seed in range(6):
        X, y, X_test, fitted = _union_case(score, seed)
        unions = fitted.predict_set(X_test, union=True)
        hulls = fitted.predict_interval(X_test)
        for row, x in enumerate(X_test):
            union = unions[row]
            assert union.shape[1] == 2 and len(union) >= 1
            assert (union[:, 0] <= union[:, 1]).all() and (union[1:, 0] > union[:-1, 1]).all()
            np.testing.assert_array_equal([union[0, 0], union[-1, 1]], hulls[row])
            pieces_seen += len(union) - 1
            finite = union[np.isfinite(union).all(axis=1) & (union[:, 1] > union[:, 0])]
            middles = finite.mean(axis=1)
            gaps = (union[1:, 0] + union[:-1, 1]) / 2
            p_mid, _ = oracle_pvalues(X, y, x, middles, 0.05, True, score)
            p_gap, _ = oracle_pvalues(X, y, x, gaps, 0.05, True, score)
            assert (p_mid > 0.25).all() and (p_gap <= 0.25).all()
            # every piece ends where the p-value drops to alpha or below
            ends = union[np.isfinite(union[:, 1]), 1]
            starts = union[np.isfinite(union[:, 0]), 0]
            p_in, _ = oracle_pvalues(X, y, x, ends - [_step(e) for e in ends], 0.05, True, score)
            p_out, _ = oracle_pvalues(X, y, x, ends + [_step(e) for e in ends], 0.05, True, score)
            assert (p_in > 0.25).all() and (p_out <= 0.25).all()
            p_in, _ = oracle_pvalues(
                X, y, x, starts + [_step(s) for s in starts], 0.05, True, score
            )
            p_out, _ = oracle_pvalues(
                X, y, x, starts - [_step(s) for s in starts], 0.05, True, score
            )
            assert (p_in > 0.25).all() and (p_out <= 0.25).all()
    if score == "standard":
        assert pieces_seen > 0, "no non-convex set: the union checks above were vacuous"


def _exact_p(a, b, y):
    """p(y) for integer-valued coefficients, in exact rational arithmetic."""

    y = Fraction(y)
    test = abs(int(a[-1]) + int(b[-1]) * y)
    conforming = sum(
        abs(int(ai) + int(bi) * y) >= test for ai, bi in zip(a[:-1], b[:-1], strict=True)
    )
    return Fraction(conforming + 1, len(a))


def test_exact_ties_at_integer_labels_conform():
    """A mean model on counts (15 zeros, 4 ones): at y = 0 the refit mean is 0.2 and every
    zero ties at residual 0.2, so p(0) = 1 exactly; rounding put the ties a few ulps apart
    and gave p(0) = 0.25 and intervals leaving out 0, the likeliest label (a review's
    Monte Carlo: coverage 0.64 at nominal 0.7). Exact p-values in rationals: 1, 1/4, 1/20."""
    X, y = np.ones((19, 1)), np.array([0.0] * 15 + [1.0] * 4)
    for algorithm in ("exact", "fast"):
        machine = FullConformalRidge(LinearRegression(fit_intercept=False), algorithm=algorithm)
        machine.fit(X, y)
        p = machine.predict_pvalue(X[:1], np.array([[0.0, 1.0, 2.0]]))[0]
        np.testing.assert_array_equal(p, [1.0, 0.25, 0.05])
        for alpha in (0.3, 0.5):
            low, high = machine.predict_interval(X[:1], alpha=alpha)[0]
            assert low <= 0.0 < high, (algorithm, alpha)
            if algorithm == "exact":  # p(1) = 0.25 <= alpha: 1 is out
                assert high < 1.0


def test_sweep_on_degenerate_coefficients_matches_exact_arithmetic():
    """Integer coefficients make ties, equal slopes and coinciding roots common; the sweep is
    compared with p-values in exact rational arithmetic at every root and between them."""

    rng = np.random.default_rng(5)
    for _ in range(400):
        n = int(rng.integers(1, 8))
        a = rng.integers(-3, 4, size=(1, n + 1)).astype(float)
        b = rng.integers(-2, 3, size=(1, n + 1)).astype(float)
        b[0, -1] = rng.integers(1, 3)
        alpha = float(rng.choice([0.3, 0.45, 0.6, 0.8]))
        level = Fraction(alpha).limit_denominator(100)
        roots = set()
        for ai, bi in zip(a[0, :-1], b[0, :-1], strict=True):
            for sign in (1, -1):
                if bi != sign * b[0, -1]:
                    roots.add(Fraction(int(sign * a[0, -1] - ai), int(bi - sign * b[0, -1])))
        roots = sorted(roots) or [Fraction(0)]
        probes = [roots[0] - 1, *roots, roots[-1] + 1]
        probes += [(u + v) / 2 for u, v in itertools.pairwise(roots)]
        member = {q: _exact_p(a[0], b[0], q) > level for q in probes}
        left, right = (_exact_p(a[0], b[0], s * 10**9) > level for s in (-1, 1))
        inside = sorted(q for q in probes if member[q])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            hull = exact_intervals(a, b, np.array([alpha]))[0, :, 0]
            union = exact_union(a, b, alpha)[0]
        expected = [
            -np.inf if left else float(inside[0]),
            np.inf if right else float(inside[-1]),
        ]
        # Every set is widened by the tie margin (1e-10 of the largest |a|, per unit of slope
        # difference, at most 3e-10 here): exact up to that, and no probe changes side.
        np.testing.assert_allclose(hull, expected, atol=1e-9)
        for q in probes:
            covered = ((union[:, 0] <= float(q) + 1e-12) & (float(q) - 1e-12 <= union[:, 1])).any()
            assert covered == member[q], (a, b, alpha, float(q))


@pytest.mark.parametrize("slope", [0.0, 1.0, -1.0])
def test_equal_slopes_print_no_runtime_warning(slope):
    """Training residuals with the test point's slope (or none, zero leverage) have no root
    or an infinite one; the sweep divides by zero inside its own errstate and the user sees
    no RuntimeWarning."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 40))
    b = np.full_like(a, slope)
    b[:, -1] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        hull = exact_intervals(a, b, np.array([0.1, 0.3]))
        fast = fast_intervals(a, b, np.array([0.1, 0.3]))
        union = exact_union(a, b, 0.1)
        grid = np.linspace(-4.0, 4.0, 81)
        p = p_values(a, b, np.tile(grid, (3, 1)))
    for row in range(3):  # the sets still agree with their p-values (half-lines included)
        inside = ((union[row][:, :1] <= grid) & (grid <= union[row][:, 1:])).any(axis=0)
        np.testing.assert_array_equal(inside, p[row] > 0.1)
        assert hull[row, 0, 0] == union[row][0, 0] and hull[row, 1, 0] == union[row][-1, 1]
    assert (fast[:, 0] <= fast[:, 1]).all()  # the signed machine: its own (ordered) ends


# ---- 4. unbounded sets --------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ["exact", "fast"])
def test_alpha_below_one_over_n_plus_one_gives_the_real_line(algorithm):
    X, y, X_test, _ = small_data()
    alpha = 0.5 / (N_SMALL + 1)
    fitted = model(algorithm=algorithm, alpha=alpha).fit(X, y)
    # the message names the user's alpha (the fast algorithm's sides work at alpha / 2)
    with pytest.warns(UserWarning, match=re.escape(f"too few for alpha={levels_text([alpha])}")):
        intervals = fitted.predict_interval(X_test)
    assert np.isneginf(intervals[:, 0]).all() and np.isposinf(intervals[:, 1]).all()
    if algorithm == "fast":  # above 1 / (n + 1) but below 2 / (n + 1): infinite for fast only
        fast_warning = r"too few for alpha=[0-9.e-]*.*algorithm='fast'.*alpha / 2"
        with pytest.warns(UserWarning, match=fast_warning):
            fitted.predict_interval(X_test, alpha=1.5 / (N_SMALL + 1))


def test_high_leverage_point_can_give_an_unbounded_standard_set():
    """Far from the data with almost no ridge penalty, some training residuals grow faster in
    ``y`` than the test residual (``|b_i| > b_test``), so |r_i| >= |r_test| holds for every
    large |y|: the full-CP set is unbounded although alpha > 1 / (n + 1)."""
    X, y, _, _ = small_data(n=20, seed=6)
    x = np.array([40.0, 40.0, 40.0])
    fitted = model(1e-6, False, alpha=0.1).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "too few" warning: alpha is large enough
        interval = fitted.predict_interval(x[None])[0]
        union = fitted.predict_set(x[None], union=True)[0]
    assert np.isinf(interval).all()
    np.testing.assert_array_equal([union[0, 0], union[-1, 1]], interval)
    far = np.array([-1e6, 1e6]) + fitted.predict(x[None])[0]
    p, _ = oracle_pvalues(X, y, x, far, 1e-6, False, "standard")
    assert (p > 0.1).all()
    # the studentized score adapts to the leverage and stays bounded here
    studentized = model(1e-6, False, alpha=0.1, conformity_score="studentized").fit(X, y)
    assert np.isfinite(studentized.predict_interval(x[None])).all()


# ---- 5. vanishing leverages ---------------------------------------------------------------------
@pytest.mark.parametrize("score", ["studentized", "deleted"])
def test_rescaled_scores_reduce_to_standard_under_huge_ridge_strength(score):
    X, y, X_test, _ = small_data(n=40, seed=7, n_test=10)
    standard = model(1e9, False, alpha=ALPHAS).fit(X, y).predict_interval(X_test)
    rescaled = model(1e9, False, alpha=ALPHAS, conformity_score=score).fit(X, y)
    np.testing.assert_allclose(rescaled.predict_interval(X_test), standard, rtol=1e-6)


@pytest.mark.parametrize("score", ["studentized", "deleted"])
def test_rescaled_scores_approach_standard_as_n_grows(score):
    gaps = []
    for n in (50, 5000):
        X, y, X_test, _ = small_data(n=n, d=2, seed=8, n_test=20)
        standard = model(1.0, True, alpha=0.1).fit(X, y)
        rescaled = model(1.0, True, alpha=0.1, conformity_score=score).fit(X, y)
        a, b = standard.predict_interval(X_test), rescaled.predict_interval(X_test)
        leverage = rescaled.machine_.leverage.max()
        width = np.ptp(a, axis=1).max()
        # 1 / (1 - h) - 1 <= 2h for h <= 1/2: endpoints move by about h times the width
        assert np.abs(a - b).max() <= 4 * leverage * width
        gaps.append(np.abs(a - b).max())
    assert gaps[1] < gaps[0] / 10


# ---- 6. the Burnaev-Vovk algorithm --------------------------------------------------------------
@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("score", SCORES)
def test_fast_equals_two_one_sided_brute_force_machines(score, intercept):
    """When every training slope is below the test slope (the usual case), the Burnaev-Vovk
    interval is exactly ``{p_low > alpha/2} & {p_up > alpha/2}`` for signed residuals."""
    X, y, X_test, _ = small_data(n=40, seed=9, n_test=4)
    fitted = model(0.5, intercept, alpha=[0.2, 0.5], algorithm="fast", conformity_score=score)
    intervals = fitted.fit(X, y).predict_interval(X_test)
    for row, x in enumerate(X_test):
        centre = fitted.predict(x[None])[0]
        grid = np.linspace(centre - 10, centre + 10, 2001)
        r = oracle_scores(X, y, x, grid, 0.5, intercept, score)
        slopes = oracle_scores(X, y, x, np.array([0.0, 1.0]), 0.5, intercept, score)
        assert (np.diff(slopes, axis=0)[0, :-1] < np.diff(slopes, axis=0)[0, -1]).all()
        p_up = ((r[:, :-1] >= r[:, -1:]).sum(axis=1) + 1) / r.shape[1]
        p_low = ((r[:, :-1] <= r[:, -1:]).sum(axis=1) + 1) / r.shape[1]
        for j, alpha in enumerate([0.2, 0.5]):
            inside = grid[(p_up > alpha / 2) & (p_low > alpha / 2)]
            assert grid[0] < inside.min() and inside.max() < grid[-1]
            np.testing.assert_allclose(
                intervals[row, :, j], [inside.min(), inside.max()], atol=grid[1] - grid[0]
            )


@pytest.mark.parametrize("score", SCORES)
def test_fast_equals_exact_for_symmetric_residuals_at_zero_leverage(score):
    """Mirrored training data (x, y) and (-x, -y) give residuals symmetric about 0 with equal
    leverages in pairs, and a test point at the origin has zero (cross-)leverage. Then the
    exact set is ``[-q, q]`` with ``q`` the ``floor((n+1) alpha)``-th largest |score|, and
    Burnaev-Vovk takes the ``floor((n+1) alpha / 2)``-th signed score on each side: equal
    whenever ``floor((n+1) alpha)`` is even (the only case theory makes them identical)."""
    X, y, _, _ = small_data(n=25, seed=10)
    X, y = np.vstack([X, -X]), np.append(y, -y)  # n = 50, n + 1 = 51
    origin = np.zeros((1, X.shape[1]))
    alphas = [0.1, 0.2, 0.4]  # floor(51 alpha) = 5 (odd), 10, 20
    exact = model(0.5, False, alpha=alphas, conformity_score=score).fit(X, y)
    fast = model(0.5, False, alpha=alphas, conformity_score=score, algorithm="fast").fit(X, y)
    e, f = exact.predict_interval(origin)[0], fast.predict_interval(origin)[0]
    np.testing.assert_allclose(e[:, 1:], f[:, 1:], rtol=1e-12)
    np.testing.assert_allclose(e[0], -e[1], rtol=1e-12)
    # the odd case: Burnaev-Vovk uses floor(5 / 2) = 2 per side, exact uses 5 in total
    assert f[0, 0] < e[0, 0] and f[1, 0] > e[1, 0]


def test_fast_intervals_function_matches_estimator():
    X, y, X_test, _ = small_data(seed=11)
    fitted = model(algorithm="fast", alpha=ALPHAS[1:]).fit(X, y)
    # the machine's features: centred by the training means, then the intercept's column
    features = np.column_stack([X_test - X.mean(axis=0), np.ones(len(X_test))])
    h_test, h_cross = fitted.machine_.test_leverages(features)
    predictions = fitted.predict(X_test)
    a, b = residual_coefficients(
        fitted.training_residuals_,
        predictions,
        fitted.machine_.leverage,
        h_test,
        h_cross,
        centred=True,  # in y - prediction, as the estimator computes them
    )
    np.testing.assert_array_equal(
        fast_intervals(a, b, np.array(ALPHAS[1:])) + predictions[:, None, None],
        fitted.predict_interval(X_test),
    )
    candidates = np.column_stack([predictions, y[: len(X_test)]])
    np.testing.assert_array_equal(
        p_values(a, b, candidates - predictions[:, None]),
        fitted.predict_pvalue(X_test, candidates),
    )


# ---- 7. coverage (slow) ---------------------------------------------------------------------
R_COVERAGE = 3000
N_TRAIN = 100


def _coverage_hits(params, alphas, seed):
    """Covered count per level: one test point per fresh Gaussian linear training set."""
    hits = np.zeros(len(alphas))
    for r in range(R_COVERAGE):
        rng = np.random.default_rng([seed, r])
        X = rng.normal(size=(N_TRAIN + 1, 5))
        y = X @ np.array([1.0, -2.0, 0.5, 0.0, 0.0]) + 3.0 + rng.normal(size=N_TRAIN + 1)
        fitted = model(1.0, True, alpha=alphas, **params).fit(X[:-1], y[:-1])
        interval = fitted.predict_interval(X[-1:])[0]
        hits += (interval[0] <= y[-1]) & (y[-1] <= interval[1])
    return hits / R_COVERAGE


@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [
        {"conformity_score": "standard"},
        {"conformity_score": "studentized"},
        {"conformity_score": "deleted"},
        {"conformity_score": "standard", "algorithm": "fast"},
        {"conformity_score": "studentized", "algorithm": "fast"},
    ],
    ids=["standard", "studentized", "deleted", "fast-standard", "fast-studentized"],
)
def test_pooled_coverage_of_full_conformal_ridge(params):
    """Why one test point per training set, and why coverage_bounds(n, alpha, 1, R) is exact.

    With continuous scores the n + 1 scores of the augmented fit at the true label are
    exchangeable and almost surely distinct, so the test point is covered with probability
    exactly ``1 - floor((n + 1) alpha) / (n + 1)``, the same mean as split CP with n
    calibration points. But the coverage *conditional on the training set* is not the
    ``Beta(n + 1 - l, l)`` of split CP for full CP (the set depends on the training data
    through the refits), so the Beta-Binomial law of many test points sharing a training set
    does not apply and its dispersion is unknown. Drawing a fresh training set for each single
    test point makes the ``R`` coverage indicators independent Bernoulli variables with that
    exact mean: their sum is Binomial, which is what ``coverage_bounds`` returns for
    ``n_test=1`` (a Beta-Binomial with one trial is a Bernoulli of the same mean). The fitting
    is cheap, so R = 3000 resplits. Burnaev-Vovk misses with probability at most
    ``2 floor((n + 1) alpha / 2) / (n + 1) <= floor((n + 1) alpha) / (n + 1)``: only its
    lower side is checked.
    """
    alphas = [0.1, 0.2]
    coverage = _coverage_hits(params, alphas, seed=12)
    bounds = coverage_bounds(N_TRAIN, alphas, 1, confidence=0.999, n_repeats=R_COVERAGE)
    for c, (low, high), alpha in zip(coverage, bounds, alphas, strict=True):
        assert c >= low, f"alpha={alpha}: coverage {c:.4f} below [{low}, {high}]"
        if params.get("algorithm") != "fast":
            assert c <= high, f"alpha={alpha}: coverage {c:.4f} above [{low}, {high}]"


# ---- 8. bad input and scikit-learn conventions ------------------------------------------------
@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, np.nan, [0.1, np.nan]])
def test_bad_alpha_is_refused(alpha):
    X, y, X_test, _ = small_data()
    with pytest.raises(ValueError, match="alpha"):
        model(alpha=alpha).fit(X, y)
    fitted = model().fit(X, y)
    with pytest.raises(ValueError, match="alpha"):
        fitted.predict_interval(X_test, alpha=alpha)


def test_bad_parameters_are_refused():
    X, y, _, _ = small_data()
    with pytest.raises(ValueError, match="conformity_score"):
        model(conformity_score="absolute").fit(X, y)
    with pytest.raises(ValueError, match="algorithm"):
        model(algorithm="burnaev").fit(X, y)
    with pytest.raises(ValueError, match="batch_size"):
        model(batch_size=0).fit(X, y)
    with pytest.raises(TypeError, match="Ridge or LinearRegression"):
        FullConformalRidge(Lasso()).fit(X, y)
    for strength in (-1.0, np.inf):  # (review: inf was told "must be >= 0")
        with pytest.raises(ValueError, match=f"must be a finite number >= 0, got {strength}"):
            FullConformalRidge(Ridge(alpha=strength)).fit(X, y)
    with pytest.raises(ValueError, match="positive"):
        FullConformalRidge(Ridge(positive=True)).fit(X, y)
    from sklearn.frozen import FrozenEstimator

    frozen = FrozenEstimator(Ridge().fit(X[::-1] * 2, y))
    with pytest.raises(TypeError, match="a FrozenEstimator cannot be kept as fitted"):
        FullConformalRidge(frozen).fit(X, y)  # it was unwrapped and silently refitted


def test_bad_data_is_refused():
    X, y, X_test, _ = small_data()
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="NaN or infinite"):
            model().fit(X, np.append(y[:-1], bad))
    with pytest.raises(ValueError, match="entries"):
        model().fit(X, y[:-1])
    with pytest.raises(ValueError, match=r"\['sample_weight'\] are not supported.*unweighted"):
        model().fit(X, y, sample_weight=np.ones(len(y)))  # not a bare TypeError
    fitted = model().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        fitted.predict_interval(X_test[:, :2])
    for shape in [(), (len(X_test) + 1, 2), (len(X_test), 2, 1)]:
        with pytest.raises(ValueError, match="y_candidates"):
            fitted.predict_pvalue(X_test, np.zeros(shape))
    with pytest.raises(ValueError, match="y_candidates"):
        fitted.predict_pvalue(X_test, np.full(len(X_test), np.nan))
    with pytest.raises(ValueError, match=r"single level when union=True: pass one to this call"):
        fitted.predict_set(X_test, alpha=[0.1, 0.2], union=True)
    assert fitted.predict_set(X_test, alpha=[0.1, 0.2]).shape == (len(X_test), 2, 2)  # the hull
    with pytest.raises(ValueError, match="single level"):
        model(alpha=[0.1, 0.2]).fit(X, y).predict_set(X_test, union=True)


def test_a_model_changed_after_fit_asks_for_a_new_fit():
    """Review finding: `set_params(estimator=Ridge(alpha=1e4))` or a strength changed in
    place after fit kept the old machine's sets silently (other wrappers refuse)."""
    X, y, X_test, _ = small_data(n=40, seed=1, n_test=5)
    fitted = model().fit(X, y)
    reference = fitted.predict_interval(X_test)
    fitted.set_params(alpha=0.3)  # the level is read at prediction: no new fit needed
    assert fitted.predict_interval(X_test).shape == (5, 2)
    for change in (
        lambda m: m.set_params(estimator=Ridge(alpha=1e4)),
        lambda m: m.estimator.set_params(alpha=1e4),
        lambda m: m.set_params(estimator=LinearRegression(fit_intercept=False)),
    ):
        changed = clone(fitted).fit(X, y)
        change(changed)
        for method in ("predict_interval", "predict", "predict_set", "predict_pvalue"):
            args = (X_test, np.zeros(5)) if method == "predict_pvalue" else (X_test,)
            with pytest.raises(NotFittedError, match=r"parameters changed since fit.*fit\(X, y\)"):
                getattr(changed, method)(*args)
        refitted = changed.fit(X, y).set_params(alpha=0.1).predict_interval(X_test)
        fresh = FullConformalRidge(changed.estimator).fit(X, y).predict_interval(X_test)
        np.testing.assert_array_equal(refitted, fresh)  # a new fit uses the new model
    assert np.isfinite(reference).all()


def test_predicting_before_fit_raises_not_fitted():
    _, _, X_test, y_test = small_data()
    for method in ("predict", "predict_interval", "predict_set"):
        with pytest.raises(NotFittedError):
            getattr(model(), method)(X_test)
    with pytest.raises(NotFittedError):
        model().predict_pvalue(X_test, y_test)


def test_inputs_are_not_modified_and_batches_agree():
    X, y, X_test, y_test = small_data(n=30, seed=13, n_test=11)
    unchanged = Unchanged(X, y, X_test, y_test)
    whole = model(alpha=ALPHAS, conformity_score="deleted").fit(X, y)
    batched = model(alpha=ALPHAS, conformity_score="deleted", batch_size=3).fit(X, y)
    np.testing.assert_array_equal(whole.predict_interval(X_test), batched.predict_interval(X_test))
    np.testing.assert_array_equal(
        whole.predict_pvalue(X_test, y_test), batched.predict_pvalue(X_test, y_test)
    )
    for mine, theirs in zip(
        whole.predict_set(X_test, alpha=0.25, union=True),
        batched.predict_set(X_test, alpha=0.25, union=True),
        strict=True,
    ):
        np.testing.assert_array_equal(mine, theirs)
    single = whole.predict_interval(X_test, alpha=0.25)
    np.testing.assert_array_equal(single, whole.predict_interval(X_test)[:, :, 1])
    unchanged.check()


def test_linear_regression_and_predict_match_sklearn():
    X, y, X_test, _ = small_data(n=30, seed=14)
    for estimator in (Ridge(alpha=2.0), LinearRegression(), Ridge(alpha=0.5, fit_intercept=False)):
        fitted = FullConformalRidge(estimator).fit(X, y)
        reference = estimator.fit(X, y).predict(X_test)
        np.testing.assert_allclose(fitted.predict(X_test), reference, atol=1e-10)
        interval = fitted.predict_interval(X_test)
        assert (interval[:, 0] < reference).all() and (reference < interval[:, 1]).all()


@pytest.mark.parametrize("algorithm", ["exact", "fast"])
def test_pickle_round_trip_gives_identical_intervals(algorithm):
    X, y, X_test, y_test = small_data(seed=15)
    fitted = model(alpha=ALPHAS[1:], algorithm=algorithm, conformity_score="studentized")
    fitted.fit(X, y)
    twin = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(twin.predict_interval(X_test), fitted.predict_interval(X_test))
    np.testing.assert_array_equal(
        twin.predict_pvalue(X_test, y_test), fitted.predict_pvalue(X_test, y_test)
    )


@parametrize_with_checks(
    [
        FullConformalRidge(),
        FullConformalRidge(LinearRegression(), conformity_score="studentized", algorithm="fast"),
    ]
)
def test_sklearn_estimator_checks(estimator, check):
    """No expected failures: every check passes."""
    check(estimator)


@pytest.mark.parametrize("make", ["ridge_machine", "acp"])
def test_more_features_than_rows_without_penalty_gives_the_whole_line(make):
    """Unpenalised interpolation (p > n): every label of a test point outside the training
    span is fitted exactly, so full CP's set is the whole line (regression test: the
    solver's jitter gave points with 0% coverage for ACP and finite hulls for the machine)."""
    from sklearn.linear_model import LinearRegression, Ridge

    from uqconform import ApproximateFullConformalRegressor

    kind = FullConformalRidge if make == "ridge_machine" else ApproximateFullConformalRegressor
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(10, 40)), rng.normal(size=10)
    X_test = rng.normal(size=(20, 40))
    with warnings.catch_warnings():  # ACP also reports the training rows fitted exactly
        warnings.filterwarnings("ignore", message=".*leverage above")
        model = kind(LinearRegression()).fit(X, y)
    with pytest.warns(UserWarning, match="outside the span"):
        intervals = model.predict_interval(X_test)
    assert np.isinf(intervals).all()
    with pytest.warns(UserWarning, match="outside the span"):
        p_values = model.predict_pvalue(X_test, rng.normal(size=(20, 3)))
    np.testing.assert_array_equal(p_values, 1.0)
    with pytest.warns(UserWarning, match="outside the span"):
        union = model.predict_set(X_test[:2], union=True)
    assert all(np.array_equal(piece, [[-np.inf, np.inf]]) for piece in union)
    # with a penalty every direction is pinned: finite intervals, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(kind(Ridge(alpha=1.0)).fit(X, y).predict_interval(X_test)).all()


def test_an_array_ridge_strength_is_refused_by_name():
    from sklearn.linear_model import Ridge

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 2)), rng.normal(size=20)
    with pytest.raises(ValueError, match=r"`estimator\.alpha` must be one number"):
        FullConformalRidge(Ridge(alpha=np.array([1.0]))).fit(X, y)


def test_an_ill_conditioned_but_regular_system_keeps_its_exact_sets():
    """Near-collinear features with more rows than features: a test point far along the
    weak direction has a huge leverage but the system is regular, so the exact (finite)
    set stands, with no warning."""
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(0)
    x1 = rng.normal(size=200)
    X = np.c_[x1, x1 + 1e-6 * rng.normal(size=200)]
    y = x1 + rng.normal(size=200)
    model = FullConformalRidge(LinearRegression(), conformity_score="deleted").fit(X, y)
    assert model.machine_.jitter == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        interval = model.predict_interval(np.array([[1.0, 0.0]]))
    h_test, _ = model.machine_.test_leverages(model._test_features(np.array([[1.0, 0.0]]))[0])
    assert h_test[0] > 1e8 and np.isfinite(interval).all()


def test_duplicated_features_pin_the_span_only():
    """A duplicated column without ridge: the Gram matrix is singular (by jitter or by
    rounding). Test points in the span of the training features keep finite exact sets;
    points with a component along the unpinned direction get the whole line."""
    from sklearn.linear_model import LinearRegression

    for seed in range(5):
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(20, 3))
        X, y = np.c_[x, x[:, 0]], x @ [1.0, 2.0, 3.0] + rng.normal(size=20)
        model = FullConformalRidge(LinearRegression(fit_intercept=False)).fit(X, y)
        assert model.machine_.singular
        test = rng.normal(size=(10, 4))
        inside = np.c_[test[:, :3], test[:, 0]]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert np.isfinite(model.predict_interval(inside)).all()
        with pytest.warns(UserWarning, match="outside the span"):
            assert np.isinf(model.predict_interval(test)).all()


def _group_mean_pvalue(groups, y, group, label, score):
    """Exact p(label) of a test row in ``group`` under the group-means fit (one-hot columns
    and an intercept without penalty), in rationals: the augmented fit's prediction of a
    row is its group's mean and its leverage one over the group's size."""
    groups, labels = np.append(groups, group), [Fraction(v) for v in y] + [Fraction(label)]
    sizes = {g: int((groups == g).sum()) for g in set(groups.tolist())}
    pairs = list(zip(labels, groups, strict=True))
    means = {g: sum(v for v, h in pairs if h == g) / sizes[g] for g in sizes}
    scores = []
    for value, g in pairs:
        residual = abs(value - means[g])
        scores.append(residual / (1 - Fraction(1, sizes[g])) if score == "deleted" else residual)
    return Fraction(sum(s >= scores[-1] for s in scores[:-1]) + 1, len(scores))


@pytest.mark.parametrize("score", ["standard", "deleted"])
def test_one_hot_columns_with_an_intercept_keep_exact_ties(score):
    """Every one-hot column beside an intercept, no penalty: the Gram matrix is singular.
    Inverting it through jitter left rounding-sized errors in the leverages that broke exact
    ties (integer labels) against the test label (107 of 4,800 p-values low); the
    pseudo-inverse gives the group-means fit's p-values exactly."""
    rng = np.random.default_rng(0)
    groups = rng.integers(0, 4, 30)
    X = np.eye(4)[groups]
    y = rng.integers(0, 5, 30).astype(float) + groups
    test_groups = np.array([0, 1, 2, 3])
    candidates = np.arange(-2.0, 10.0, 0.5)
    model = FullConformalRidge(LinearRegression(), conformity_score=score).fit(X, y)
    assert model.machine_.singular
    p = model.predict_pvalue(np.eye(4)[test_groups], np.tile(candidates, (4, 1)))
    expected = [
        [float(_group_mean_pvalue(groups, y, g, c, score)) for c in candidates]
        for g in test_groups
    ]
    np.testing.assert_array_equal(p, expected)


# ---- translation and the ends of the sets -------------------------------------------------------
@pytest.mark.parametrize("algorithm", ["exact", "fast"])
@pytest.mark.parametrize("score", SCORES)
def test_sets_move_with_an_offset_of_the_labels(score, algorithm):
    """Adding a constant to every label (timestamps, prices in cents) moves the sets by it
    and leaves their widths alone: the tie margin was relative to coefficients holding
    the predictions, so at an offset of 1e9 the sets widened by about 0.2 (3.5 -> 24 at
    1e11, with coverage 1)."""
    X, y, X_test, _ = small_data(n=40, seed=12, n_test=20)
    base = model(alpha=[0.1, 0.3], conformity_score=score, algorithm=algorithm).fit(X, y)
    reference = base.predict_interval(X_test)
    for offset in (1e6, 1e9, 1e13):
        shifted = clone(base).fit(X, y + offset).predict_interval(X_test)
        # to a few dozen units of the labels' own float resolution at the offset (the tie
        # margin keeps 16; review finding: with a margin of 1e-13 of the labels' size,
        # labels 1e13 from 0 widened sets by a third; the labels are now centred, an exact
        # reparametrisation with an intercept)
        atol = 32 * np.spacing(offset)
        np.testing.assert_allclose(shifted - offset, reference, rtol=0, atol=atol)


@pytest.mark.parametrize("algorithm", ["exact", "fast"])
@pytest.mark.parametrize("score", SCORES)
def test_sets_do_not_move_with_an_offset_of_the_features(score, algorithm):
    """Review finding: with an intercept, features at 1e6 from 0 (unit spread) made the
    uncentred Gram matrix of [X, 1] look singular: 12% of the rows got the whole line with
    advice to add a penalty that was there, and predictions were 1.6 off scikit-learn's
    Ridge. With an unpenalised intercept, translating the features changes no fit, so the
    sets must stay those of the centred features."""
    X, y, X_test, _ = small_data(n=20, seed=3, n_test=50)
    reference = model(conformity_score=score, algorithm=algorithm).fit(X, y)
    for offset in (1e6, 1e7):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "outside the span" warning either
            shifted = clone(reference).fit(X + offset, y)
            intervals = shifted.predict_interval(X_test + offset)
        width = np.ptp(reference.predict_interval(X_test), axis=1)
        # to the features' float resolution at the offset (measured: 1.1e-9 of the width
        # at 1e7; before, whole lines and ends 1.2 off)
        np.testing.assert_allclose(
            intervals,
            reference.predict_interval(X_test),
            rtol=0,
            atol=1e-15 * offset * width.min(),
        )
        ridge = Ridge(alpha=1.0).fit(X + offset, y)
        np.testing.assert_allclose(
            shifted.predict(X_test + offset), ridge.predict(X_test + offset), atol=1e-6
        )


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize("integer_labels", [False, True])
def test_every_label_of_a_set_has_a_p_value_above_alpha(score, integer_labels):
    """The ends of the hull and of every union piece have p(y) > alpha (the sweep widened
    the second root of each residual pair by the first root's rate, so 45 of 50 ends had
    p(y) <= alpha); integer labels give exact ties."""
    X, y, X_test, _ = small_data(n=40, seed=13, n_test=25)
    if integer_labels:
        y = np.round(y)
    fitted = model(conformity_score=score).fit(X, y)
    for alpha in (0.1, 0.3):
        hull = fitted.predict_interval(X_test, alpha=alpha)
        assert (fitted.predict_pvalue(X_test, hull) > alpha).all()
        pieces = fitted.predict_set(X_test, alpha=alpha, union=True)
        for row, intervals in enumerate(pieces):
            ends = intervals[np.isfinite(intervals)]
            p = fitted.predict_pvalue(X_test[row : row + 1], ends[None, :])
            assert (p > alpha).all()


def _refit_p_value(X: np.ndarray, y: np.ndarray, x: np.ndarray, label: float) -> float:
    """Full-CP p-value by refitting scikit-learn's LinearRegression with the label added
    (absolute residuals, ties within 1e-9 conforming)."""
    X_all, y_all = np.vstack([X, x]), np.append(y, label)
    residuals = np.abs(y_all - LinearRegression().fit(X_all, y_all).predict(X_all))
    return float((np.sum(residuals[:-1] >= residuals[-1] - 1e-9) + 1) / y_all.size)


@pytest.mark.parametrize("offset", [0.0, 1e4, 1e8])
def test_a_fit_through_every_training_point_keeps_exact_ties(offset):
    """Review findings: with residuals of rounding size (more parameters than rows and no
    penalty, or noise-free labels) the tie margin, relative to them alone, vanished and
    exact ties were decided by rounding: p-values 1/9 where the refit gives 2/9, and half
    the line missing from a set the refit says is the whole line. A floor relative to the
    labels' spread missed labels far from 0 (prices) and, in ACP, the residuals' spread."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(8, 12)), rng.normal(size=8) + offset  # p > n: all fitted
    model = FullConformalRidge(LinearRegression(), alpha=0.2).fit(X, y)
    labels = y[0] + np.array([-5.0, -1.0, 1.0, 5.0])  # the test row repeats row 0
    expected = [2 / 9] * 4  # rows 0 and the test row tie, every other residual is 0
    if offset == 0.0:  # a refit agrees (its own rounding decides ties far from 0)
        assert [_refit_p_value(X, y, X[:1], label) for label in labels] == expected
    np.testing.assert_allclose(model.predict_pvalue(X[:1], labels)[0], expected)
    np.testing.assert_array_equal(model.predict_set(X[:1], union=True)[0], [[-np.inf, np.inf]])
    np.testing.assert_array_equal(model.predict_interval(X[:1])[0], [-np.inf, np.inf])
    # the same through ACP-GN around the same linear model (full mode)
    acp = ApproximateFullConformalRegressor(LinearRegression(), prior_precision=1e-12, alpha=0.2)
    np.testing.assert_allclose(acp.fit(X, y).predict_pvalue(X[:1], labels)[0], expected)
    # noise-free labels, more rows than parameters: the true label conforms with p = 1
    X_free = rng.normal(size=(30, 3))
    y_free = X_free @ [1.0, -2.0, 0.5] + offset
    exact = FullConformalRidge(LinearRegression()).fit(X_free, y_free)
    X_test = rng.normal(size=(4, 3))
    truth = X_test @ [1.0, -2.0, 0.5] + offset
    np.testing.assert_array_equal(exact.predict_pvalue(X_test, truth[:, None])[:, 0], 1.0)


def test_labels_far_more_spread_than_the_residuals_keep_their_width():
    """Review finding: the tie margin's floor, 1e-10 of the labels' spread, widened the sets
    by 7-10% when an exact linear trend 1e9 times the noise was added to the labels (full
    CP with LinearRegression is unchanged by such a trend); the floor is now 1e-13 of the
    labels' root mean square."""
    rng = np.random.default_rng(0)
    X, noise = rng.normal(size=(60, 2)), rng.normal(size=60)
    X_test = rng.normal(size=(20, 2))
    widths = []
    for slope in (0.0, 1e9):
        model = FullConformalRidge(LinearRegression()).fit(X, noise + slope * X @ [1.0, 1.0])
        intervals = model.predict_interval(X_test)
        widths.append(intervals[:, 1] - intervals[:, 0])
    np.testing.assert_allclose(widths[1], widths[0], rtol=2e-3)


@pytest.mark.parametrize("algorithm", ["exact", "fast"])
def test_labels_and_test_rows_near_the_float_limits_keep_their_sets(algorithm):
    """Review finding: labels of 1e154 overflowed the labels' root mean square (the tie
    margin became inf) and test rows 1e160 times the training scale made the test
    leverage inf - inf; both gave a zero-width interval at the prediction, silently."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = X @ [1.0, 2.0, 0.0] + rng.normal(size=30)
    X_test = rng.normal(size=(5, 3))
    reference = FullConformalRidge(algorithm=algorithm).fit(X, y).predict_interval(X_test)
    scaled = FullConformalRidge(algorithm=algorithm).fit(X, y * 1e154).predict_interval(X_test)
    np.testing.assert_allclose(scaled / 1e154, reference, rtol=1e-12)
    # the studentized and deleted scores too (review finding: leverage inf / inf gave NaN
    # scores and an empty set reported as a zero-width interval)
    for score in SCORES:
        model = FullConformalRidge(conformity_score=score, algorithm=algorithm).fit(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing to report
            # the test leverage overflows (1e320): the whole line, the sets' limit
            far = model.predict_interval(X_test * 1e160)
            np.testing.assert_array_equal(far, np.tile([-np.inf, np.inf], (5, 1)))
            # 1e150: the exact sets (acp review, stop 57: the floor of 1 - h clipped the
            # test point's 1 / (1 + h) and gave the whole line): unbounded for the standard
            # score, half-widths growing with the row (studentized) or not (deleted)
            near = model.predict_interval(X_test * 1e6)
            far = model.predict_interval(X_test * 1e150)
        centre = model.predict(X_test * 1e150)[:, None]
        if score == "standard":
            np.testing.assert_array_equal(far, np.tile([-np.inf, np.inf], (5, 1)))
        else:
            growth = 1e144 if score == "studentized" else 1.0
            ends = centre + (near - model.predict(X_test * 1e6)[:, None]) * growth
            np.testing.assert_allclose(far, ends, rtol=1e-6)


def test_an_empty_set_from_a_numerical_failure_is_reported():
    from uqconform.regression.full import _empty_at_centre

    intervals = np.array([[[np.nan], [np.nan]], [[0.0], [1.0]]])
    with pytest.warns(RuntimeWarning, match="1 test row.*empty full-CP set.*numerical"):
        out = _empty_at_centre(intervals, np.array([2.0, 0.5]))
    np.testing.assert_array_equal(out[:, :, 0], [[2.0, 2.0], [0.0, 1.0]])


def test_refused_weights_name_the_wrappers_that_take_them():
    """Refusing `sample_weight` explained why but not what to use instead (docs review)."""
    from sklearn.neural_network import MLPRegressor

    from uqconform import ApproximateFullConformalRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = X[:, 0] + rng.normal(size=40)
    remedy = r"SplitConformalRegressor or CrossConformalRegressor, which pass `sample_weight`"
    with pytest.raises(ValueError, match=remedy):
        FullConformalRidge().fit(X, y, sample_weight=np.ones(40))
    network = MLPRegressor(hidden_layer_sizes=(3,), max_iter=20, random_state=0)
    with pytest.raises(ValueError, match=remedy):
        ApproximateFullConformalRegressor(network).fit(X, y, sample_weight=np.ones(40))


def test_groups_given_to_full_cp_point_to_mondrian_split_cp():
    """`fit(X, y, groups=g)` was refused as a weight ("For weighted rows use ...") without
    a word about Mondrian groups (docs review)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = X[:, 0] + rng.normal(size=40)
    with pytest.raises(ValueError, match=r"`groups` is not supported.*`calibrate\(X, y, groups"):
        FullConformalRidge().fit(X, y, groups=np.arange(40) % 2)
    plain = FullConformalRidge().fit(X, y).predict_interval(X[:3])
    np.testing.assert_array_equal(
        FullConformalRidge().fit(X, y, groups=None).predict_interval(X[:3]), plain
    )


def _exact_full_cp_pvalues(X, y, x_test, labels, score):
    """Full-CP p-values of ordinary least squares with an intercept, in exact rationals:
    refit on the augmented data for each label, scores ``|r| / (1 - h)^k``."""
    rows = [[Fraction(1), *map(Fraction, row)] for row in np.vstack([X, x_test])]
    p = len(rows[0])
    gram = [[sum(r[i] * r[j] for r in rows) for j in range(p)] for i in range(p)]
    inverse = [[Fraction(int(i == j)) for j in range(p)] for i in range(p)]
    for c in range(p):  # Gauss-Jordan on [gram | I]
        pivot = next(r for r in range(c, p) if gram[r][c] != 0)
        gram[c], gram[pivot] = gram[pivot], gram[c]
        inverse[c], inverse[pivot] = inverse[pivot], inverse[c]
        scale = gram[c][c]
        gram[c] = [v / scale for v in gram[c]]
        inverse[c] = [v / scale for v in inverse[c]]
        for r in range(p):
            if r != c and gram[r][c] != 0:
                factor = gram[r][c]
                gram[r] = [a - factor * b for a, b in zip(gram[r], gram[c], strict=True)]
                inverse[r] = [a - factor * b for a, b in zip(inverse[r], inverse[c], strict=True)]
    solve = [[sum(inverse[i][k] * r[k] for k in range(p)) for i in range(p)] for r in rows]
    spread = [
        1 - sum(a * b for a, b in zip(r, s, strict=True)) for r, s in zip(rows, solve, strict=True)
    ]
    out = []
    for label in labels:
        target = [*map(Fraction, y), Fraction(label)]
        coef = [sum(solve[k][i] * target[k] for k in range(len(rows))) for i in range(p)]
        residual = [
            t - sum(c * v for c, v in zip(coef, r, strict=True))
            for t, r in zip(target, rows, strict=True)
        ]
        # |r_i| / c_i^k >= |r_t| / c_t^k, squared (k = 1/2 studentized, 1 deleted)
        power = 1 if score == "studentized" else 2
        held = [
            residual[i] ** 2 * spread[-1] ** power >= residual[-1] ** 2 * spread[i] ** power
            for i in range(len(rows))
        ]
        out.append(sum(held) / len(rows))
    return np.array(out)


@pytest.mark.parametrize("score", ["studentized", "deleted"])
def test_a_training_row_of_leverage_near_one_keeps_exact_p_values(score):
    """Review finding (stop 52): 1 - h was computed as 1 - (h_i - c_i^2 / (1 + h)) and
    clipped at 1e-8, so a training row with features 1e5 times the others' (1 - h =
    1.8e-9) had its studentized score shrunk threefold: p = 0.19 where exact full CP
    gives 0.238, and sets narrower than exact by 12% of their width."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(20, 2))
    X[0] = [1e5 * 0.3, -1e5 * 1.1]
    y = X @ [1e-5, -1e-5] + rng.normal(size=20)
    x_test = np.array([0.4, -0.2])
    labels = np.linspace(-1.3, 1.4, 28) + 1e-3 * np.pi  # generic: no label at a tie
    model = FullConformalRidge(LinearRegression(), conformity_score=score).fit(X, y)
    got = model.predict_pvalue(x_test[None], labels[None])[0]
    np.testing.assert_array_equal(got, _exact_full_cp_pvalues(X, y, x_test, labels, score))


def test_a_test_row_at_the_float_limit_gets_the_whole_line():
    """Review finding (stop 52): the power-of-two scale of a feature at or above 2**1023
    (1e308) overflowed to inf, and such a test row got an empty set with a warning."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=30)
    model = FullConformalRidge(Ridge(1.0)).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        intervals = model.predict_interval(np.array([[1e308, 0.0], [1e307, 0.0]]))
    assert np.isneginf(intervals[:, 0]).all() and np.isposinf(intervals[:, 1]).all()


def test_a_model_class_is_named_with_the_instance_to_pass():
    """API review (stop 57): FullConformalRidge(Ridge) said "got ABCMeta"."""
    X, y = np.random.default_rng(0).normal(size=(20, 2)), np.arange(20.0)
    message = (
        r"`estimator` is the class Ridge: pass an instance, e.g. FullConformalRidge\(Ridge\(\)\)"
    )
    with pytest.raises(TypeError, match=message):
        FullConformalRidge(Ridge).fit(X, y)


@pytest.mark.parametrize("make", [FullConformalRidge, ApproximateFullConformalRegressor])
@pytest.mark.parametrize("score", ["studentized", "deleted"])
def test_a_test_row_of_huge_leverage_keeps_exact_p_values(score, make):
    """Review finding (acp, stop 57): the floor 1e-14 of 1 - h also clipped the test
    point's exact 1 / (1 + h_test), so a test row 1e9 times the others' got every p-value
    1 (deleted; exact full CP gives 0.05 away from the prediction) or a set of the whole
    line (studentized)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    y = X @ [1.0, -1.0] + rng.normal(size=20)
    x_test = np.array([1e9, 0.3e9])
    model = make(LinearRegression(), conformity_score=score).fit(X, y)
    unit = 1.0 if score == "deleted" else 2.5e8  # the exact sets' half-width is ~1.7 or ~5e8
    labels = model.predict(x_test[None])[0] + unit * (np.linspace(-4, 4, 17) + 1e-3 * np.pi)
    got = model.predict_pvalue(x_test[None], labels[None])[0]
    np.testing.assert_array_equal(got, _exact_full_cp_pvalues(X, y, x_test, labels, score))
