"""The fullcp benchmark family at smoke scale (a few seconds)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from uqconform.benchmarks import run_benchmark
from uqconform.benchmarks.suites.fullcp import LEVELS, METHODS, SPEEDUP_TARGET
from uqconform.evaluation import coverage_bounds

CONFIDENCE = 0.999
# Split conformal around a model fitted on the other half of the training part: the
# coverage of each of these rows follows the split-CP law of coverage_bounds.
SPLIT_CONFORMAL = ("split", "scp-gn", "cqr")


# Smoke scale calibrates on about 68 points: too few for alpha = 0.01 (infinite intervals).
@pytest.mark.filterwarnings("ignore:Too few calibration points")
@pytest.mark.filterwarnings("ignore:Only .* scores")
def test_fullcp_family_smoke(tmp_path):
    results = run_benchmark("fullcp", tmp_path, scale="smoke", progress=False, echo=None)
    family = results["families"]["fullcp"]
    assert family["status"] == "ok"
    tables = family["tables"]
    rows = tables["ACP-GN on small real data"]
    ours = [row for row in rows if row["library"] == "uqconform"]
    assert {row["dataset"] for row in ours} == {"boston", "diabetes", "concrete"}
    assert len(ours) == 3 * len(LEVELS) * (len(METHODS) - 1)  # data sets x levels x methods
    # CV+ (MAPIE, the simple rival that also uses every training row): same shape of rows.
    cv_plus = [row for row in rows if row["library"] == "mapie"]
    if importlib.util.find_spec("mapie") is None:  # an install without the anchors
        assert not cv_plus
    else:
        assert {row["method"] for row in cv_plus} == {"cv+"}
        assert len(cv_plus) == 3 * len(LEVELS)
    for row in cv_plus:
        assert row["resplits"] == 1 and 0 <= row["coverage"] <= 1 and row["width"] > 0
    by = {(row["dataset"], row["method"], round(1 - row["level"], 2)): row for row in ours}
    for row in ours:
        n_train, n_test, resplits = row["n_train"], row["n_test"], row["resplits"]
        alpha = round(1 - row["level"], 2)
        n_cal = n_train - n_train // 2  # split CP calibrates on the second half
        assert resplits == len(row["coverage_per_split"]) == 1
        covered = row["coverage"] * n_test
        assert covered == pytest.approx(round(covered), abs=1e-9)  # a share of test rows
        if row["method"] in SPLIT_CONFORMAL:
            low, high = coverage_bounds(n_cal, alpha, n_test, CONFIDENCE, resplits)
            assert low <= row["coverage"] <= high, (row["dataset"], row["method"], alpha)
        # The conformal rank ceil((n + 1)(1 - alpha)) exceeds n exactly when
        # alpha < 1 / (n + 1): then the set is the whole line (also for split+refine, full
        # CP on the n calibration points, whose p-values are at least 1 / (n + 1));
        # otherwise split CP's intervals are bounded.
        infinite = alpha < 1 / (n_cal + 1)
        if row["method"] in SPLIT_CONFORMAL:
            assert row["unbounded_share"] == (1.0 if infinite else 0.0)
        if row["method"] == "acp-gn split+refine" and infinite:
            assert row["unbounded_share"] == 1.0
        if infinite and row["method"] in (*SPLIT_CONFORMAL, "acp-gn split+refine"):
            assert row["coverage"] == 1.0
    for (dataset, _, alpha), row in by.items():
        split = by[dataset, "split", alpha]
        if split["unbounded_share"] == 0:
            assert row["width_vs_split"] == pytest.approx(row["width"] / split["width"])
    flagged = [row for row in ours if row["target_met"] is not None]
    assert {(row["method"], row["level"]) for row in flagged} == {("acp-gn studentized", 0.9)}
    paper = [row for row in rows if row["library"] == "paper"]
    assert len(paper) == 3 * 8 and {row["dataset"] for row in paper} == {"boston"}
    oracle = tables["oracle: gain from training on all data (90%)"]
    assert [row["dataset"] for row in oracle] == ["boston", "diabetes", "concrete"]
    for row in oracle:
        assert row["level"] == 0.9 and "target_met" not in row  # evidence, not a target
        # The ratios are evidence with no guaranteed direction; check that they are what
        # they claim to be: the main table's widths, and ratios of means that compose.
        split = by[row["dataset"], "split", 0.1]
        acp = by[row["dataset"], "acp-gn studentized", 0.1]
        assert row["split_width"] == pytest.approx(split["width"])
        assert row["acp_gn_studentized_vs_split"] == pytest.approx(acp["width_vs_split"])
        assert row["ideal_all_vs_split"] == pytest.approx(
            row["ideal_all_vs_half"] * row["ideal_half_vs_split"]
        )
        assert len(row["ideal_all_vs_half_per_split"]) == row["resplits"] == 1
        assert row["ideal_all_vs_half"] == pytest.approx(row["ideal_all_vs_half_per_split"][0])
        for key in ("ideal_all_vs_half", "ideal_all_vs_split", "ridge_full_vs_split"):
            assert np.isfinite(row[key]) and row[key] > 0
        # split CP with ridge: the split-CP law on the same calibration half and test rows
        n_cal = row["n_train"] - row["n_train"] // 2
        low, high = coverage_bounds(n_cal, 0.1, row["n_test"], CONFIDENCE, row["resplits"])
        assert low <= row["ridge_split_cp_coverage"] <= high
    exact, acp = tables["speed: ACP-GN vs exact full CP"]
    assert exact["measured_refits"] == exact["grid_labels"] * exact["measured_test_points"]
    # timings are not judged (a loaded machine changes them); each derived figure and the
    # flag must follow from the row's own measurements
    assert exact["s_per_refit"] == pytest.approx(exact["measured_s"] / exact["measured_refits"])
    assert exact["s_per_100_test"] == pytest.approx(
        exact["s_per_refit"] * exact["grid_labels"] * 100
    )
    assert acp["s_per_100_test"] == pytest.approx(acp["fit_s"] + acp["predict_interval_s"])
    assert acp["speedup"] == pytest.approx(exact["s_per_100_test"] / acp["s_per_100_test"])
    assert acp["target_met"] is (acp["speedup"] >= SPEEDUP_TARGET)
    # below 10 resplits the width target is reported but not judged
    widths = [h for h in family["headlines"] if "width / split width" in h["claim"]]
    assert len(widths) == 3 and all(h["met"] is None for h in widths)
    assert len(tables["speed: ACP-GN scaling"]) >= 3
    assert (tmp_path / "fullcp_widths-time.png").exists()


def test_cv_plus_baseline_is_cv_plus_at_every_level():
    """The CV+ rows are CV+ (Barber et al. 2021) on the benchmark's folds and networks:
    each level's ends are the floor(alpha (n + 1))-th smallest of mu_-k(i)(x) - R_i and the
    ceil((1 - alpha)(n + 1))-th smallest of mu_-k(i)(x) + R_i, in the order of LEVELS."""
    pytest.importorskip("mapie")  # the rows come from MAPIE's CrossConformalRegressor
    import math
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import KFold

    from uqconform.benchmarks.suites.fullcp import CV_PLUS_FOLDS, _cv_plus, _network
    from uqconform.datasets import load_dataset

    X, y = load_dataset("diabetes", n_samples=150, random_state=0)
    X, y = np.asarray(X, float), np.asarray(y, float)
    train, test = np.arange(135), np.arange(135, 150)  # MAPIE needs n > 1 / 0.01
    decay, seed = 1.0, 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        out = _cv_plus(X[train], y[train], X[test], decay, seed)
        n = train.size
        centre, residual = np.empty((n, test.size)), np.empty(n)
        folds = KFold(CV_PLUS_FOLDS, shuffle=True, random_state=seed).split(X[train])
        for fit_rows, held_out in folds:
            net = _network(decay, seed).fit(X[train][fit_rows], y[train][fit_rows])
            residual[held_out] = np.abs(y[train][held_out] - net.predict(X[train][held_out]))
            centre[held_out] = net.predict(X[test])[None, :]
    assert out.shape == (test.size, 2, len(LEVELS))
    for k, alpha in enumerate(LEVELS):
        low = np.sort(centre - residual[:, None], axis=0)[math.floor(alpha * (n + 1)) - 1]
        high = np.sort(centre + residual[:, None], axis=0)[math.ceil((1 - alpha) * (n + 1)) - 1]
        np.testing.assert_allclose(out[:, 0, k], low, rtol=1e-9)
        np.testing.assert_allclose(out[:, 1, k], high, rtol=1e-9)
