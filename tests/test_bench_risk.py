"""The risk benchmark family at smoke scale (seconds)."""

from __future__ import annotations

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
    assert family["headlines"][0]["target"] == "all"
    assert "risk" in resolve_suite("quick")[0]
