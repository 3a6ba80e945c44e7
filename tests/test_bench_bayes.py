"""The bayes benchmark family at smoke scale (about 20 seconds)."""

from __future__ import annotations

import numpy as np

from uqconform.benchmarks import run_benchmark
from uqconform.benchmarks.suites.bayes import ece


def test_ece_of_perfect_and_overconfident_predictions():
    labels = np.array([0, 1, 1, 0])
    perfect = np.eye(2)[labels]
    assert ece(perfect, labels) == 0.0
    wrong = np.eye(2)[1 - labels]
    assert ece(wrong, labels) == 1.0


def test_bayes_family_smoke(tmp_path):
    results = run_benchmark("bayes", tmp_path, scale="smoke", progress=False, echo=None)
    family = results["families"]["bayes"]
    assert family["status"] == "ok", family.get("error")
    tables = family["tables"]
    rows = {
        row["data"]: row for row in tables["predictive (test NLL, coverage, ECE; same posterior)"]
    }
    assert {"diabetes", "friedman", "wine"} <= set(rows)
    for row in rows.values():
        assert np.isfinite(row["nll_onepass"]) and np.isfinite(row["nll_mc1000"])
        assert row["nll_target_met"] in (True, False)
    assert 0.0 <= rows["wine"]["ece_onepass"] <= 1.0
    assert 0.0 <= rows["diabetes"]["coverage90_onepass"] <= 1.0
    priors = {row["prior"] for row in tables["prior precision pitfall"]}
    assert {"marglik", "auto (validation NLL)"} <= priors
    bridge = tables["conformal bridge (alpha 0.1)"]
    assert all(row["coverage_low"] <= row["coverage_high"] for row in bridge)
    speed = tables["speed"]
    assert {"mc10_over_onepass", "mc100_over_onepass", "glm_over_onepass"} <= set(speed[0])
    assert (tmp_path / "bayes_reliability.png").exists() or any(
        "matplotlib" in note for note in family["notes"]
    )
