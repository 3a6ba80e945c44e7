"""The cross benchmark family at smoke scale (seconds)."""

from __future__ import annotations

from uqconform.benchmarks import run_benchmark
from uqconform.benchmarks.registry import resolve_suite


def test_cross_family_smoke(tmp_path):
    results = run_benchmark("cross", tmp_path, scale="smoke", progress=False, echo=None)
    family = results["families"]["cross"]
    assert family["status"] == "ok", family.get("error")
    rows = family["tables"]["Cross-conformal regression"]
    by = {(r["model"], r["method"]): r for r in rows}
    for model in ("ridge", "hist-gradient-boosting"):
        assert {"cv+", "cv-minmax", "j+ab", "split-50", "split-25"} <= {
            m for k, m in by if k == model
        }
        plus, minmax = by[model, "cv+"], by[model, "cv-minmax"]
        assert plus["n_cal"] == minmax["n_cal"] == 2 * by[model, "split-50"]["n_cal"]
        assert minmax["width"] >= plus["width"] > 0
        if (model, "mapie-cv+") in by:  # the same folds and model: the same intervals
            assert by[model, "mapie-cv+"]["max_abs_diff_vs_uqconform"] < 1e-9
    sets = family["tables"]["Cross-conformal classification"]
    by = {(r["model"], r["method"]): r for r in sets}
    for model in ("logistic", "hist-gradient-boosting"):
        for score in ("lac", "aps", "lac class-cond"):
            cross = by[model, f"cv+ {score}"]
            assert 0 < cross["set_size"] <= 3  # wine has three classes (LAC sets can be empty)
            assert cross["n_cal"] == 2 * by[model, f"split-50 {score}"]["n_cal"]
            assert 0 <= cross["worst_class_coverage"] <= cross["coverage"]
        if (model, "mapie-cv+ lac") in by:  # the same folds and model: their sets in ours
            assert by[model, "mapie-cv+ lac"]["sets_inside_uqconform"]
    claims = [line["claim"] for line in family["headlines"]]
    assert any(claim.startswith("CV+ width / the narrower split CP") for claim in claims)
    assert any(claim.startswith("CV+ LAC set size / the smaller split CP") for claim in claims)
    assert any(claim.startswith("coverage of the least-covered class") for claim in claims)
    assert "cross" in resolve_suite("quick")[0]
