"""The multidim benchmark family at smoke scale (about 10 seconds)."""

from __future__ import annotations

import numpy as np

from uqconform.benchmarks import run_benchmark
from uqconform.benchmarks.suites.multidim import _stored_heads


def test_stored_heads_return_the_rows_asked_for():
    probabilities = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 6))
    heads = _stored_heads(probabilities)
    assert len(heads) == 2 and heads[0].classes_.tolist() == [0, 1, 2, 3]
    np.testing.assert_array_equal(
        heads[1].predict_proba(np.array([[5], [0]])), probabilities[1, [5, 0]]
    )


def test_multidim_family_smoke(tmp_path):
    results = run_benchmark("multidim", tmp_path, scale="smoke", progress=False, echo=None)
    family = results["families"]["multidim"]
    assert family["status"] == "ok", family.get("error")
    tables = family["tables"]
    main = tables["PathMNIST (7 heads, alpha 0.01)"]
    ours = {row["method"]: row for row in main if row["library"] == "uqconform"}
    reference = {row["method"] for row in main if row["library"] == "reference"}
    assert {"single raps", "cells lac", "cells raps", "learned lac", "ensemble lac"} <= set(ours)
    assert reference <= set(ours) and "cells raps" in reference
    flagged = {method for method, row in ours.items() if row["target_met"] is not None}
    assert flagged == {"cells raps", "cells lac"}
    validity = tables["PathMNIST coverage at every level"]
    assert {row["alpha"] for row in validity} == {0.01, 0.05, 0.1}
    assert all(row["coverage_lower"] <= row["coverage"] + 0.05 for row in validity)
    summary = tables["tabular: multi-dim vs ensemble"]
    assert {row["problem"] for row in summary} >= {"digits"}
    assert all(row["learned_no_larger"] in (True, False) for row in summary)
    speed = {row["method"]: row for row in tables["speed (20,000 rows, 50 classes, 5 heads)"]}
    assert speed["cells lac"]["target_met"] and speed["learned lac"]["target_met"]
    assert (tmp_path / "multidim_set-sizes.png").exists()
    assert (tmp_path / "multidim_cells.png").exists()
