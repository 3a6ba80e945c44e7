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
    claims = [line["claim"] for line in family["headlines"]]
    assert any(claim.startswith("CV+ width / the narrower split CP") for claim in claims)
    assert "cross" in resolve_suite("quick")[0]
