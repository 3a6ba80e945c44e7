"""Every figure the README and the docs quote comes from the committed benchmark JSON."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "benchmark-results" / "results.json"


def _script(name):
    """A maintenance script of benchmarks/ as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _update_readme_module():
    return _script("update_readme")


def test_readme_headline_block_is_the_committed_runs_summary():
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    module = _update_readme_module()
    block = module.headline_block(results, module.full_results())
    assert block in (ROOT / "README.md").read_text(encoding="utf-8"), (
        "README's headline figures differ from docs/benchmark-results/results.json; run "
        "`python benchmarks/update_readme.py`."
    )


def test_only_families_merged_in_count_as_rerun():
    """Review finding: every family now records its `started`, which the README's count
    of families "rerun on their own since" took for a rerun (a fresh run would have said
    15)."""
    module = _update_readme_module()
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    start = results["started"]
    fresh = {**results, "families": {
        name: {**record, "started": start} for name, record in results["families"].items()
    }}  # fmt: skip
    assert "rerun on their own" not in module.headline_block(fresh)
    one = next(iter(fresh["families"]))
    fresh["families"][one] = {**fresh["families"][one], "started": "2020-01-01T00:00:00+00:00"}
    assert "; 1 family rerun on their own since" in module.headline_block(fresh)


def test_committed_run_is_a_full_quick_suite_with_its_plots():
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert results["suite"] == "quick"
    from uqconform.benchmarks import get_families

    defaults = {name for name, family in get_families().items() if family.default}
    assert defaults <= set(results["families"]), "a registered family is missing from the run"
    for record in results["families"].values():
        for figure in record["figures"]:
            assert (RESULTS.parent / figure).is_file(), figure


def _run(seed, status, figures, versions):
    return {
        "scale": "quick", "seed": seed, "started": "2026-01-01T00:00:00",
        "suite": "quick", "wall_time_s": 1.0, "versions": versions,
        "machine": json.loads(RESULTS.read_text(encoding="utf-8"))["machine"],
        "failed": [], "skipped": [],
        "families": {
            "demo": {"status": status, "seed": seed, "scale": "quick", "tables": {},
                     "headlines": [], "notes": [], "figures": figures, "time_s": 1.0},
        },
    }  # fmt: skip


def test_merge_family_refuses_another_seed_and_leaves_no_stale_state(tmp_path):
    module = _script("merge_family")
    committed, new = tmp_path / "committed", tmp_path / "new"
    committed.mkdir(), new.mkdir()
    old = _run(0, "failed", ["demo_old.png"], {"numpy": "2.0"})
    old["failed"] = ["demo"]
    (committed / "results.json").write_text(json.dumps(old), encoding="utf-8")
    (committed / "demo_old.png").write_bytes(b"old")
    (new / "results.json").write_text(
        json.dumps(_run(5, "ok", ["demo_new.png"], {})), encoding="utf-8"
    )
    (new / "demo_new.png").write_bytes(b"new")
    with pytest.raises(SystemExit, match=r"seeds differ: 5 \(new\) and 0"):
        module.merge_family("demo", new, committed)
    (new / "results.json").write_text(
        json.dumps(_run(0, "ok", ["demo_new.png"], {"numpy": "2.1"})), encoding="utf-8"
    )
    module.merge_family("demo", new, committed)
    merged = json.loads((committed / "results.json").read_text(encoding="utf-8"))
    assert merged["failed"] == [] and merged["families"]["demo"]["status"] == "ok"
    assert merged["families"]["demo"]["versions"] == {"numpy": "2.1"}
    assert "numpy 2.0 -> 2.1" in (committed / "report.md").read_text(encoding="utf-8")
    assert sorted(path.name for path in committed.glob("*.png")) == ["demo_new.png"]
    # a package the committed report does not record is not a change of version: it is
    # named as not recorded there
    (new / "results.json").write_text(
        json.dumps(_run(0, "ok", ["demo_new.png"], {"numpy": "2.0", "torch": "2.13"})),
        encoding="utf-8",
    )
    old["families"]["demo"].update(status="ok")
    old["failed"] = []
    (committed / "results.json").write_text(json.dumps(old), encoding="utf-8")
    module.merge_family("demo", new, committed)
    merged = json.loads((committed / "results.json").read_text(encoding="utf-8"))
    assert merged["families"]["demo"]["versions"] == {"numpy": "2.0", "torch": "2.13"}
    report = (committed / "report.md").read_text(encoding="utf-8")
    assert "other package versions" not in report
    assert "Run with packages the report does not name: torch 2.13." in report
    # the commit a merged family ran at is stated when it is not the committed run's
    ran_at = {"source": {"commit": "f" * 40, "modified": False}}
    (new / "results.json").write_text(
        json.dumps(_run(0, "ok", ["demo_new.png"], {"numpy": "2.0"}) | ran_at), encoding="utf-8"
    )
    module.merge_family("demo", new, committed)
    assert "Run at uqconform commit `ffffffffffff`." in (committed / "report.md").read_text(
        encoding="utf-8"
    )
    (committed / "results.json").write_text(json.dumps(old | ran_at), encoding="utf-8")
    module.merge_family("demo", new, committed)
    assert "Run at uqconform commit" not in (committed / "report.md").read_text(encoding="utf-8")
    (new / "demo_new.png").unlink()  # a listed plot the new run did not write
    with pytest.raises(SystemExit, match="lists plots missing"):
        module.merge_family("demo", new, committed)


def test_full_verdicts_match_claims_in_order_only_when_the_counts_agree():
    module = _update_readme_module()

    def run(claims, met=None):
        headlines = [
            {"claim": c, "value": 1, "target": "<= 1 (full scale)", "met": m}
            for c, m in zip(claims, met or [None] * len(claims), strict=True)
        ]
        return {"started": "2026-01-01T00:00:00", "families": {"f": {"headlines": headlines}}}

    quick = run(["width (a, 3 resplits)", "width (b, 3 resplits)"])
    full = run(["width (a, 10 resplits)", "width (b, 10 resplits)"], [True, False])
    verdicts = [
        h["met"] for h in module.with_full_verdicts(quick, full)["families"]["f"]["headlines"]
    ]
    assert verdicts == [True, False]
    targets = [
        h["target"] for h in module.with_full_verdicts(quick, full)["families"]["f"]["headlines"]
    ]
    assert "the full run's (2026-01-01)" in targets[0]
    full["families"]["f"]["started"] = "2026-02-03T00:00:00"  # rerun on its own and merged
    targets = [
        h["target"] for h in module.with_full_verdicts(quick, full)["families"]["f"]["headlines"]
    ]
    assert "the full run's (2026-02-03)" in targets[0]  # was the whole run's date
    more = run(["width (a)", "width (b)", "width (c)"], [True, False, True])
    verdicts = [
        h["met"] for h in module.with_full_verdicts(quick, more)["families"]["f"]["headlines"]
    ]
    assert verdicts == [None, None]


def test_merge_family_keeps_the_merged_runs_source(tmp_path):
    """CLI review (stop 56): the merged family's `source` was reduced to a line naming its
    commit (its diff hash and `changed_during_run` were lost), and a family run without a
    recorded source was merged without a word."""
    module = _script("merge_family")
    committed, new = tmp_path / "committed", tmp_path / "new"
    committed.mkdir(), new.mkdir()
    kept = {"commit": "a" * 40, "modified": False, "diff_sha256": None}
    (committed / "results.json").write_text(
        json.dumps(_run(0, "ok", [], {}) | {"source": kept}), encoding="utf-8"
    )
    moved = {"commit": "b" * 40, "modified": True, "diff_sha256": "0123456789ab",
             "changed_during_run": True}  # fmt: skip
    for source, line in [
        (moved, "Run at uqconform commit `bbbbbbbbbbbb`; the package changed during the run."),
        (None, "Run without a recorded uqconform source (an installed package"),
        (
            {"commit": None, "modified": None, "diff_sha256": None, "error": "fatal: dubious"},
            "Run without a recorded uqconform source (git: fatal: dubious)",
        ),
    ]:
        (new / "results.json").write_text(
            json.dumps(_run(0, "ok", [], {}) | {"source": source}), encoding="utf-8"
        )
        module.merge_family("demo", new, committed)
        merged = json.loads((committed / "results.json").read_text(encoding="utf-8"))
        assert merged["families"]["demo"]["source"] == source
        assert merged["source"] == kept  # the run's own source is the committed run's
        assert line in (committed / "report.md").read_text(encoding="utf-8")


def test_the_scripts_import_the_checkout_they_sit_in(tmp_path):
    """CLI review (stop 56): update_readme.py and merge_family.py imported the installed
    uqconform, not their own checkout's (run.py inserts its checkout): in a second checkout
    update_readme wrote the installed runner's block."""
    import subprocess
    import sys

    checkout = tmp_path / "checkout"
    (checkout / "benchmarks").mkdir(parents=True)
    for name in ("update_readme", "merge_family"):
        source = (ROOT / "benchmarks" / f"{name}.py").read_text(encoding="utf-8")
        (checkout / "benchmarks" / f"{name}.py").write_text(source, encoding="utf-8")
    runner = checkout / "uqconform" / "benchmarks" / "runner.py"  # a stand-in runner
    runner.parent.mkdir(parents=True)
    (checkout / "uqconform" / "__init__.py").write_text("", encoding="utf-8")
    (runner.parent / "__init__.py").write_text("", encoding="utf-8")
    runner.write_text(
        "def merged_in(results, record):\n    return False\n\n\n"
        "def summary_markdown(results):\n    return 'the checkout summary'\n\n\n"
        "def families_with_status(families, status):\n    return []\n\n\n"
        "def report_markdown(results):\n    return 'the checkout report'\n",
        encoding="utf-8",
    )
    (checkout / "docs" / "benchmark-results").mkdir(parents=True)
    (checkout / "docs" / "benchmark-results" / "results.json").write_text(
        json.dumps(_run(0, "ok", [], {})), encoding="utf-8"
    )
    (checkout / "README.md").write_text(
        "<!-- headline-figures:start -->\n<!-- headline-figures:end -->\n", encoding="utf-8"
    )
    new = tmp_path / "new"
    new.mkdir()
    (new / "results.json").write_text(json.dumps(_run(0, "ok", [], {})), encoding="utf-8")
    committed = checkout / "docs" / "benchmark-results"

    def script(*args):
        done = subprocess.run(
            [sys.executable, *args], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr

    script(str(checkout / "benchmarks" / "update_readme.py"))
    assert "the checkout summary" in (checkout / "README.md").read_text(encoding="utf-8")
    script(str(checkout / "benchmarks" / "merge_family.py"), "demo", str(new), str(committed))
    assert (committed / "report.md").read_text(encoding="utf-8") == "the checkout report"
