"""The shift benchmark family at smoke scale (seconds)."""

from __future__ import annotations

from uqconform.benchmarks import run_benchmark
from uqconform.benchmarks.registry import resolve_suite


def test_shift_family_smoke(tmp_path):
    results = run_benchmark("shift", tmp_path, scale="smoke", progress=False, echo=None)
    family = results["families"]["shift"]
    assert family["status"] == "ok", family.get("error")
    rows = family["tables"]["Coverage under covariate shift (alpha 0.1)"]
    assert {r["dataset"] for r in rows} == {"concrete", "synthetic (mean shift)"}
    assert {r["method"] for r in rows} == {
        "split (absolute)",
        "split (normalized)",
        "weighted, true ratio",
        "weighted, estimated ratio",
    }
    for row in rows:
        assert 0 <= row["coverage"] <= 1 and 0 <= row["infinite_share"] <= 1
        assert 0 < row["effective_n_cal"] <= row["n_cal"] + 1e-9
        if row["method"].startswith("split"):
            assert row["effective_n_cal"] == row["n_cal"]
    assert family["headlines"][0]["target"] == "all data sets"
    assert "shift" in resolve_suite("quick")[0]
