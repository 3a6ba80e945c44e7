"""The multioutput benchmark family at smoke scale (about 20 seconds)."""

from __future__ import annotations

import importlib.util

from uqconform.benchmarks import run_benchmark

HAS_FLOWS = all(importlib.util.find_spec(name) for name in ("torch", "nflows"))


def test_multioutput_family_smoke(tmp_path):
    results = run_benchmark("multioutput", tmp_path, scale="smoke", progress=False, echo=None)
    family = results["families"]["multioutput"]
    assert family["status"] == "ok", family.get("error")
    tables = family["tables"]
    synthetic = tables["synthetic bivariate targets"]
    problems = {row["problem"] for row in synthetic}
    assert problems == {"banana", "moons", "mixture", "ring", "gaussian"}
    methods = {row["method"] for row in synthetic}
    assert {"ellipse", "ellipse-local", "box", "box-bonferroni"} <= methods
    for row in [*synthetic, *tables["real bivariate targets"]]:
        assert 0 < row["volume"] < float("inf")
        assert row["coverage_low"] < row["coverage_high"]
        assert row["coverage_ok"] in (True, False)
    real = {row["problem"] for row in tables["real bivariate targets"]}
    assert {"quakes", "penguins", "geyser", "macro-growth", "diamonds"} <= real
    claims = [h["claim"] for h in family["headlines"]]
    assert any("coverage_bounds" in claim for claim in claims)
    for item in family["headlines"]:
        assert set(item) == {"claim", "value", "target", "met"}
        assert item["met"] in (True, False, None)
    if HAS_FLOWS:
        per_target = [c for c in claims if c.startswith("ResidualCONTRA volume / ellipse, ")]
        assert len(per_target) == len(real)
        count = next(h for h in family["headlines"] if h["claim"].startswith("real targets"))
        wins = sum(
            row["met"] for row in tables["targets (volume ratios)"] if row["problem"] in real
        )
        assert count["value"].startswith(f"{wins} of {len(real)}")
        assert count["met"] is (wins >= 2)
        assert "CONTRA" in methods
        ratios = {row["problem"]: row for row in tables["targets (volume ratios)"]}
        assert {"banana", "moons", "mixture", "gaussian"} <= set(ratios)
        assert all(row["met"] in (True, False, None) for row in ratios.values())
        speed = {row["method"] for row in tables["speed"]}
        assert {"ellipse", "CONTRA", "CONTRA volume (Monte Carlo)"} <= speed
        assert (tmp_path / "multioutput_regions.png").exists()
    else:
        assert any("CONTRA / ResidualCONTRA skipped" in note for note in family["notes"])
