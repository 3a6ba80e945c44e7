"""The cps benchmark family at smoke scale (seconds)."""

from __future__ import annotations

import warnings

from uqconform.benchmarks import run_benchmark


def test_cps_family_smoke(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = run_benchmark("cps", tmp_path, scale="smoke", progress=False, echo=None)
    # the default difficulty model's warnings are counted in the table, not printed
    assert not [w for w in caught if "`difficulty_estimator`" in str(w.message)]
    family = results["families"]["cps"]
    assert family["status"] == "ok", family.get("error")
    rows = family["tables"]["Predictive distributions"]
    assert {r["dataset"] for r in rows} == {"diabetes", "synthetic-skewed"}
    methods = [r["method"] for r in rows if r["dataset"] == "diabetes"]
    assert methods[:6] == ["cps", "gaussian", "cps-normalized", "gaussian-normalized",
                           "cps-normalized-knn", "gaussian-normalized-knn"]  # fmt: skip
    warned = [r["difficulty_warned"] for r in rows if r["method"] == "cps-normalized"]
    assert warned and all(w.endswith("/1") for w in warned)
    for row in rows:
        if "pinball" in row:
            assert 0 <= row["ks"] <= 1 and row["pinball"] > 0 and row["width"] > 0
            assert len(row["share_below_upper_quantile"]) == 9
    if "crepes-cps" in methods:  # the anchor is installed: same percentiles as ours
        crepes_rows = [r for r in rows if r["method"] == "crepes-cps"]
        assert max(r["max_rel_diff_vs_uqconform"] for r in crepes_rows) < 1e-9
    claims = [h["claim"] for h in family["headlines"]]
    assert any("upper p-quantile" in claim for claim in claims)


def test_cps_family_is_in_the_quick_suite():
    from uqconform.benchmarks.registry import resolve_suite

    assert "cps" in resolve_suite("quick")[0]
