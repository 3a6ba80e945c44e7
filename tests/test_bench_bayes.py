"""The bayes benchmark family at smoke scale (about 20 seconds)."""

from __future__ import annotations

import numpy as np

from uqconform.benchmarks import run_benchmark
from uqconform.benchmarks.registry import get_families
from uqconform.benchmarks.suites.bayes import ece, resplits


def test_ece_of_perfect_and_overconfident_predictions():
    labels = np.array([0, 1, 1, 0])
    perfect = np.eye(2)[labels]
    assert ece(perfect, labels) == 0.0
    wrong = np.eye(2)[1 - labels]
    assert ece(wrong, labels) == 1.0


def test_small_data_sets_get_more_resplits():
    class Quick:
        def pick(self, smoke, quick, full):
            return quick

    # at least 400 pooled test rows (a fifth of the rows per split), between 2 and 10 splits
    assert resplits(178, Quick()) == 10  # wine: 36 test rows per split
    assert resplits(569, Quick()) == 4  # breast cancer: 114
    assert resplits(1797, Quick()) == 2  # digits


def test_bayes_family_needs_no_torch():
    assert get_families()["bayes"].requires == ()


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
        gap = row["nll_onepass"] - row["nll_mc1000"]
        np.testing.assert_allclose(row["nll_onepass_minus_mc"], gap)
        assert row["nll_diff_se"] > 0 and np.isfinite(row["nll_mc1000_own_scale"])
    assert 0.0 <= rows["wine"]["ece_onepass"] <= 1.0
    assert 0.0 <= rows["diabetes"]["coverage90_onepass"] <= 1.0
    priors = {row["prior"] for row in tables["prior precision pitfall"]}
    assert {"marglik", "auto (validation NLL)"} <= priors
    bridge = tables["conformal bridge (alpha 0.1)"]
    assert all(row["coverage_low"] <= row["coverage_high"] for row in bridge)
    speed = tables["speed"]
    assert {"mc10_over_onepass", "mc100_over_onepass", "glm_over_onepass"} <= set(speed[0])
    # one headline per target of the issue, each with its target text and flag
    headlines = family["headlines"]
    claims = " | ".join(h["claim"] for h in headlines)
    for phrase in ("MC-1000", "90% intervals", "Spearman", "MC-100", "normalized split CP", "MAP"):
        assert phrase in claims
    targeted = [h for h in headlines if h["target"] is not None]
    assert all(h["met"] in (True, False) for h in targeted)
    nll = [h for h in targeted if h["claim"].startswith(("diabetes: test NLL", "wine: test NLL"))]
    assert [h["met"] for h in nll] == [
        rows["diabetes"]["nll_target_met"],
        rows["wine"]["nll_target_met"],
    ]
    assert (tmp_path / "bayes_reliability.png").exists() or any(
        "matplotlib" in note for note in family["notes"]
    )
