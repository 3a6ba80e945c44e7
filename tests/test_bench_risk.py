"""The risk benchmark family at smoke scale (seconds)."""

from __future__ import annotations

import math
import warnings
from collections import Counter

import numpy as np
import pytest

from uqconform.benchmarks import run_benchmark
from uqconform.benchmarks.registry import resolve_suite


def test_risk_family_smoke(tmp_path):
    results = run_benchmark("risk", tmp_path, scale="smoke", progress=False, echo=None)
    family = results["families"]["risk"]
    assert family["status"] == "ok", family.get("error")
    rows = family["tables"]["Multi-label false negative rate control"]
    methods = {r["method"] for r in rows}
    assert {"crc", "rcps (delta 0.1)", "cover every label (split CP)"} <= methods
    by = {(r["method"], r["alpha"]): r for r in rows}
    for alpha in (0.1, 0.2):
        # larger sets miss fewer labels: covering every label > RCPS > CRC in size
        sizes = [by[m, alpha]["set_size"] for m in ("crc", "rcps (delta 0.1)")]
        assert sizes[0] <= sizes[1] <= by["cover every label (split CP)", alpha]["set_size"]
        assert 0 <= by["crc", alpha]["fnr"] <= 1 and by["crc", alpha]["resplits"] == 2
    for row in rows:  # the share of empty sets and of false labels in the others
        assert 0 <= row["empty_share"] <= 1, row
        nonempty = row["false_share_nonempty"]
        if row["empty_share"] == 0:
            assert math.isclose(nonempty, row["false_share"], abs_tol=1e-12), row
        elif row["empty_share"] < 1:  # the empty sets counted as fully precise lower it
            assert row["false_share"] <= nonempty <= 1, row
    ltt = by["ltt precision (delta 0.1)", 0.1]
    assert ltt["empty_share"] > 0  # a strict precision level certifies small sets
    assert any("no threshold of the grid certified" in note for note in family["notes"])
    assert family["headlines"][0]["target"] == "all"
    assert "risk" in resolve_suite("quick")[0]


def _calibration(n_cal=200, n_test=50, n_labels=4):
    from uqconform.benchmarks.suites import risk as suite

    rng = np.random.default_rng(0)
    proba = rng.uniform(size=(n_cal + n_test, n_labels))
    Y = (rng.uniform(size=proba.shape) < proba).astype(int)
    Y[~Y.any(axis=1), 0] = 1  # every row labelled, as in the suite
    rows = np.arange(n_cal + n_test)[:, None]
    return suite, suite._Lookup(proba), rows[:n_cal], Y[:n_cal], rows[n_cal:]


def test_our_sets_shows_the_controllers_warnings(monkeypatch):
    """Review finding: every warning of the controller was silenced (under a comment about
    a warning it no longer gives), LTT's "no threshold certified" among them. Others are
    shown; LTT's are counted for the notes."""
    suite, lookup, R_cal, Y_cal, R_test = _calibration()
    calibrate = suite.MultiLabelRiskController.calibrate

    def warning_calibrate(self, *args, **kwargs):
        from uqconform._warnings import warn_user

        warn_user("something the user should see", UserWarning)
        return calibrate(self, *args, **kwargs)

    monkeypatch.setattr(suite.MultiLabelRiskController, "calibrate", warning_calibrate)
    with pytest.warns(UserWarning, match="something the user should see"):
        sets = suite._our_sets(lookup, "crc", "fnr", (0.1, 0.2), R_cal, Y_cal, R_test)
    assert sets.shape == (len(R_test), 4, 2)


def test_our_sets_counts_the_ltt_warnings():
    suite, lookup, R_cal, Y_cal, R_test = _calibration(n_cal=30)
    warned: Counter[str] = Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # counted, not shown again
        for _ in range(2):
            sets = suite._our_sets(
                lookup, "ltt", "precision", (0.01, 0.2), R_cal, Y_cal, R_test, warned=warned
            )
    assert warned[suite.NOT_CERTIFIED] == 2
    assert not sets[:, :, 0].any()  # no threshold certified at 0.01: every set empty
