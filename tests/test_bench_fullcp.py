"""The fullcp benchmark family at smoke scale (a few seconds)."""

from __future__ import annotations

import pytest

from uqconform.benchmarks import run_benchmark


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
    assert len(ours) == 3 * 3 * 8  # data sets x levels x methods
    assert all(0.0 <= row["coverage"] <= 1.0 for row in ours)
    flagged = [row for row in ours if row["target_met"] is not None]
    assert {(row["method"], row["level"]) for row in flagged} == {("acp-gn studentized", 0.9)}
    paper = [row for row in rows if row["library"] == "paper"]
    assert len(paper) == 3 * 8 and {row["dataset"] for row in paper} == {"boston"}
    oracle = tables["oracle: gain from training on all data (90%)"]
    assert [row["dataset"] for row in oracle] == ["boston", "diabetes", "concrete"]
    for row in oracle:
        assert row["level"] == 0.9 and "target_met" not in row  # evidence, not a target
        for key in ("ideal_all_vs_half", "ideal_all_vs_split", "ridge_full_vs_split"):
            assert 0.0 < row[key] < 10.0
        assert 0.0 <= row["ridge_full_cp_coverage"] <= 1.0
        assert len(row["ideal_all_vs_half_per_split"]) == row["resplits"]
    exact, acp = tables["speed: ACP-GN vs exact full CP"]
    assert exact["measured_refits"] > 0 and acp["speedup"] > 1
    assert len(tables["speed: ACP-GN scaling"]) >= 3
    assert (tmp_path / "fullcp_widths-time.png").exists()
