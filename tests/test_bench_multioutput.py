"""The multioutput benchmark family at smoke scale (about 20 seconds)."""

from __future__ import annotations

import importlib.util

import numpy as np

from uqconform.benchmarks import run_benchmark
from uqconform.benchmarks.suites.multioutput import (
    CONFIDENCE,
    CURVED,
    CURVED_TARGET,
    GAUSSIAN_TARGET,
    LEVEL,
    mean_volume_se,
)
from uqconform.evaluation import coverage_bounds

HAS_FLOWS = all(importlib.util.find_spec(name) for name in ("torch", "nflows"))
TEST_CONFIDENCE = 0.999


def test_multioutput_family_smoke(tmp_path):
    """Every method of the family is split conformal (continuous scores; the Bonferroni
    box conservative by design), so each row's coverage must follow the split-CP law.

    The family flags rows at confidence 0.99; over its 50-odd rows a few flags are expected
    to be False by chance (at smoke scale the single geyser resplit is in the lower 0.5 %
    tail of the law, shared by every method on it), so the test checks the flags'
    consistency and judges coverage at the tests' confidence, 0.999.
    """
    results = run_benchmark("multioutput", tmp_path, scale="smoke", progress=False, echo=None)
    family = results["families"]["multioutput"]
    assert family["status"] == "ok", family.get("error")
    tables = family["tables"]
    synthetic = tables["synthetic bivariate targets"]
    problems = {row["problem"] for row in synthetic}
    assert problems == {"banana", "moons", "mixture", "ring", "gaussian"}
    methods = {row["method"] for row in synthetic}
    assert {"ellipse", "ellipse-local", "box", "box-bonferroni"} <= methods
    rows = [*synthetic, *tables["real bivariate targets"]]
    for row in rows:
        assert 0 < row["volume"] < float("inf")
        n_cal, n_test, repeats = row["n_calibration"], row["n_test"], row["repeats"]
        assert repeats == len(row["coverage_per_split"]) >= 1
        bonferroni = row["method"] == "box-bonferroni"
        # the family's flag: its own bounds at 0.99, lower end only for Bonferroni
        low, high = coverage_bounds(n_cal, LEVEL, n_test, CONFIDENCE, repeats)
        assert (row["coverage_low"], row["coverage_high"]) == (low, high)
        inside = low <= row["coverage"] and (bonferroni or row["coverage"] <= high)
        assert row["coverage_ok"] is inside
        # the law, at the tests' confidence
        low, high = coverage_bounds(n_cal, LEVEL, n_test, TEST_CONFIDENCE, repeats)
        where = (row["problem"], row["method"], row["coverage"], low, high)
        assert row["coverage"] >= low, where
        if not bonferroni:
            assert row["coverage"] <= high, where
    real = {row["problem"] for row in tables["real bivariate targets"]}
    assert {"quakes", "penguins", "geyser", "macro-growth", "diamonds"} <= real
    claims = [h["claim"] for h in family["headlines"]]
    assert any("coverage_bounds" in claim for claim in claims)
    validity = family["headlines"][0]
    assert "coverage_bounds" in validity["claim"]
    # the headline checks every row at the family-wise (Bonferroni) confidence
    family_wise = 1 - (1 - CONFIDENCE) / len(rows)
    n_ok = 0
    for row in rows:
        low, high = coverage_bounds(
            row["n_calibration"], LEVEL, row["n_test"], family_wise, row["repeats"]
        )
        upper = row["method"] == "box-bonferroni" or row["coverage"] <= high
        n_ok += bool(row["coverage"] >= low and upper)
        assert row["coverage_ok"] <= (row["coverage"] >= low and upper)  # 99% is narrower
    assert validity["value"] == f"{n_ok}/{len(rows)}" and validity["met"] is (n_ok == len(rows))
    for item in family["headlines"]:
        assert set(item) == {"claim", "value", "target", "met"}
    by = {(row["problem"], row["method"]): row for row in rows}
    if HAS_FLOWS:
        per_target = [c for c in claims if c.startswith("ResidualCONTRA volume / ellipse, ")]
        assert len(per_target) == len(real)
        count = next(h for h in family["headlines"] if h["claim"].startswith("real targets"))
        wins = sum(
            row["met"] for row in tables["targets (volume ratios)"] if row["problem"] in real
        )
        assert count["value"].startswith(f"{wins} of {len(real)}")
        assert count["met"] is None  # judged at full scale only
        assert "CONTRA" in methods
        ratios = {row["problem"]: row for row in tables["targets (volume ratios)"]}
        assert {"banana", "moons", "mixture", "gaussian"} <= set(ratios)
        # every ratio is the ratio of the rows' volumes, and each flag follows its target
        for problem, row in ratios.items():
            if problem in real:
                ratio = by[problem, "ResidualCONTRA"]["volume"] / by[problem, "ellipse"]["volume"]
                assert row["ratio"] == ratio  # one resplit: also the mean of the ratios
                # a win only below 1 by more than twice the standard error over resplits
                se = row["ratio_se_resplits"]
                assert row["met"] is (se is not None and row["ratio"] + 2 * se < 1)
                continue
            ellipse, box = by[problem, "ellipse"]["volume"], by[problem, "box"]["volume"]
            contra = by[problem, "CONTRA"]["volume"]
            if problem == "gaussian":
                assert row["ratio"] == contra / ellipse
                assert row["met"] is (row["ratio"] <= GAUSSIAN_TARGET)
            else:
                assert row["ratio"] == contra / min(ellipse, box)
                expected = row["ratio"] <= CURVED_TARGET if problem in CURVED else None
                assert row["met"] is expected
        speed = {row["method"] for row in tables["speed"]}
        assert {"ellipse", "CONTRA", "CONTRA volume (Monte Carlo)"} <= speed
        assert (tmp_path / "multioutput_regions.png").exists()
    else:
        assert any("CONTRA / ResidualCONTRA skipped" in note for note in family["notes"])


def test_the_volume_standard_error_counts_a_shared_estimate_once():
    """Review finding (mo): a translation-invariant region (ResidualCONTRA) gives every
    row the same Monte Carlo estimate, whose noise was divided by the number of rows: its
    reported standard error was 18 times the spread over Monte Carlo seeds too small (and
    independent estimates counted their noise twice)."""
    rng = np.random.default_rng(0)
    draws = 2.0 + 0.1 * rng.normal(size=(4000, 300))  # 4,000 Monte Carlo repetitions
    shared = np.repeat(draws[:, :1], 300, axis=1)  # one estimate serves every row
    for volumes in (shared, draws):
        reported = mean_volume_se(volumes[0], np.full(300, 0.1))
        actual = float(np.std(volumes.mean(axis=1)))  # the spread it should describe
        assert 0.9 < reported / actual < 1.1
