"""The robust benchmark family (RPS under poisoning) at smoke scale."""

from __future__ import annotations

import itertools

from uqconform.benchmarks.registry import get_families
from uqconform.benchmarks.runner import BenchmarkContext
from uqconform.evaluation import coverage_bounds


def test_robust_family_smoke(tmp_path):
    family = get_families()["robust"]
    ctx = BenchmarkContext(
        family="robust", scale="smoke", seed=0, out_dir=tmp_path, progress=False
    )
    result = family.run(ctx)
    tables = result.tables
    coverage = {(r["problem"], r["method"]): r for r in tables["clean coverage (alpha 0.1)"]}
    assert {"RPS exact", "RPS paper", "split CP (LAC), one model"} <= {m for _, m in coverage}
    for (_, method), row in coverage.items():
        # Every row is a conformal method: its pooled coverage clears the lower end of the
        # split-CP law of its calibration set (for RPS, of its smallest partition's: a wider
        # law than the majority set's), and that end is the one coverage_bounds gives.
        lower, _ = coverage_bounds(
            row["n_calibration_judged"], row["alpha"], row["n_test"], 0.99, row["resplits"]
        )
        assert row["coverage_lower"] == lower
        assert row["coverage_ok"] and row["coverage"] >= lower and row["set_size"] > 0
        if method == "RPS exact":  # the exact rank's promise (a warning flags the exceptions)
            assert row["formula_coverage"] >= 1 - row["alpha"] - 1e-9
    soundness = tables["certificate soundness"]
    assert soundness and sum(row["violations"] for row in soundness) == 0
    assert {row["poisoned"] for row in soundness} == {"calibration", "training", "both"}
    assert sum(row["rows_changed_per_attack"] for row in soundness) > 0
    reliability = [r for r in tables["reliability ratios"] if "robust_rc1" in r]
    assert {r["problem"] for r in reliability} == {"digits", "spam"}
    for row in reliability:
        curve = row["curve_calibration"]["robust"]
        assert all(a >= b for a, b in itertools.pairwise(curve))  # falls with the radius
    assert any(h["claim"].startswith("certified-robust") and h["met"] for h in result.headlines)
    assert tables["speed"] and (tmp_path / "robust_reliability.png").exists()
