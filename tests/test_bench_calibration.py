"""The calibration benchmark family at smoke scale (seconds)."""

from __future__ import annotations

from uqconform.benchmarks import run_benchmark
from uqconform.benchmarks.registry import resolve_suite


def test_calibration_family_smoke(tmp_path):
    results = run_benchmark("calibration", tmp_path, scale="smoke", progress=False, echo=None)
    family = results["families"]["calibration"]
    assert family["status"] == "ok", family.get("error")
    rows = family["tables"]["Calibrated probabilities (naive Bayes)"]
    by = {r["method"]: r for r in rows}
    assert {"uncalibrated", "sigmoid (Platt)", "isotonic", "venn-abers"} <= set(by)
    venn = by["venn-abers"]
    assert 0 < venn["pair_width"] < 1 and venn["resplits"] == 2
    assert abs(venn["gap_true_label"]) < 1 and venn["gap_bound"] > 0
    # isotonic's exact 0/1 probabilities cost it in log loss on a small calibration set
    assert venn["log_loss"] < by["isotonic"]["log_loss"]
    if "mapie venn-abers" in by:  # the same algorithm: the same probabilities
        assert by["mapie venn-abers"]["max_abs_diff_vs_uqconform"] < 1e-9
    assert "calibration" in resolve_suite("quick")[0]
    cross = family["tables"]["Cross Venn-Abers on small training sets"]
    methods = {(r["model"], r["method"]) for r in cross}
    for model in ("naive Bayes", "logistic (C=100)"):
        assert {(model, "cvap (5 folds)"), (model, "ivap (60/40)")} <= methods
    assert all(0 < r["log_loss"] < 5 and r["n_labelled"] == 200 for r in cross)
    claims = [line["claim"] for line in family["headlines"]]
    assert any(claim.startswith("cross Venn-Abers test log loss /") for claim in claims)


def test_cross_venn_abers_data_sets_leave_test_rows_at_every_scale():
    # the full scale named wine (178 rows) for 200-row training sets: "`X` has no rows"
    from uqconform.benchmarks.suites.calibration import CROSS_DATASETS, CROSS_ROWS, _data

    for names in CROSS_DATASETS:
        for name in names:
            assert len(_data(name, 0)[1]) > CROSS_ROWS + 100, name
