"""Every figure the README and the docs quote comes from the committed benchmark JSON."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "benchmark-results" / "results.json"


def _update_readme_module():
    spec = importlib.util.spec_from_file_location(
        "update_readme", ROOT / "benchmarks" / "update_readme.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_headline_block_is_the_committed_runs_summary():
    results = json.loads(RESULTS.read_text())
    module = _update_readme_module()
    block = module.headline_block(results, module.full_results())
    assert block in (ROOT / "README.md").read_text(), (
        "README's headline figures differ from docs/benchmark-results/results.json; run "
        "`python benchmarks/update_readme.py`."
    )


def test_committed_run_is_a_full_quick_suite_with_its_plots():
    results = json.loads(RESULTS.read_text())
    assert results["suite"] == "quick"
    from uqconform.benchmarks import get_families

    defaults = {name for name, family in get_families().items() if family.default}
    assert defaults <= set(results["families"]), "a registered family is missing from the run"
    for record in results["families"].values():
        for figure in record["figures"]:
            assert (RESULTS.parent / figure).is_file(), figure
