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
        # Every row is a conformal method: its pooled coverage clears the lower end of its
        # coverage law (for RPS the majority set's, which lies between the laws of split CP
        # on one partition and on the whole calibration set)
        if method.startswith("RPS"):
            whole = coverage_bounds(
                row["n_calibration"], row["alpha"], row["n_test"], 0.99, row["resplits"]
            )[0]
            part = coverage_bounds(
                row["n_calibration"] // 10, row["alpha"], row["n_test"], 0.99, row["resplits"]
            )[0]
            assert part - 0.02 <= row["coverage_lower"] <= whole + 0.02
        else:
            assert (
                row["coverage_lower"]
                == coverage_bounds(
                    row["n_calibration"], row["alpha"], row["n_test"], 0.99, row["resplits"]
                )[0]
            )
        assert row["coverage_ok"] and row["coverage"] >= row["coverage_lower"]
        assert row["set_size"] > 0
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
