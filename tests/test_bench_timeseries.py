"""The timeseries benchmark family at smoke scale (well under 20 seconds)."""

from __future__ import annotations

import numpy as np

from uqconform.benchmarks import run_benchmark
from uqconform.benchmarks.suites.timeseries import make_ar_garch, make_nonstationary


def test_synthetic_generators_are_bounded_and_lagged():
    X, y = make_nonstationary(300, np.random.default_rng(0), lags=20)
    assert X.shape == (300, 20) and y.shape == (300,)
    assert np.isfinite(y).all() and np.abs(y).max() < 100
    np.testing.assert_allclose(X[1:, 0], y[:-1])  # column 0 is the previous value
    X, y = make_ar_garch(300, np.random.default_rng(0))
    assert X.shape == (300, 10) and np.isfinite(y).all()
    np.testing.assert_allclose(X[1:, 0], y[:-1])


def test_timeseries_family_smoke(tmp_path):
    results = run_benchmark("timeseries", tmp_path, scale="smoke", progress=False, echo=None)
    family = results["families"]["timeseries"]
    assert family["status"] == "ok", family.get("error")
    tables = family["tables"]
    rows = tables["ELEC2 (paper protocol, alpha = 0.1)"]
    ours = {row["method"]: row for row in rows if row["library"] == "uqconform"}
    assert {"kowcpi", "kowcpi (finite_sample=False)", "plain nw", "spci", "enbpi"} <= set(ours)
    assert all(0.0 <= row["coverage"] <= 1.0 for row in ours.values())
    assert ours["kowcpi"]["target_met"] in (True, False)
    assert sum(row["library"].startswith("paper") for row in rows) == 6
    further = tables["further series (alpha = 0.1)"]
    assert len(further) >= 5
    assert all(isinstance(row["kowcpi_within_0.03"], bool) for row in further)
    assert {row["kind"] for row in further} >= {"real", "synthetic"}
    assert all(0.0 <= row["published_kowcpi_coverage"] <= 1.0 for row in further)
    assert all(row["test_over_fit_residual_scale"] > 0 for row in further)
    speed = {row["method"]: row for row in tables["speed: ELEC2 steps per second"]}
    assert speed["spci"]["ms_per_step"] > speed["kowcpi"]["ms_per_step"]
    assert len(tables["speed: KOWCPI step time vs residual memory"]) >= 2
    assert (tmp_path / "timeseries_elec2-intervals.png").exists()
    assert (tmp_path / "timeseries_elec2-rolling-coverage.png").exists()
