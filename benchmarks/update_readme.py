"""Copy the headline figures of the committed benchmark run into README.md.

The README quotes no figure by hand: its "Headline figures" block is the summary table of
``docs/benchmark-results/results.json`` (written by ``uqconform benchmark --suite quick
--out docs/benchmark-results``), and ``tests/test_benchmark_figures.py`` fails when the two
disagree. Run from the repository root::

    python benchmarks/update_readme.py
"""

import copy
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's uqconform

from uqconform.benchmarks.runner import merged_in, summary_markdown

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "benchmark-results" / "results.json"
START, END = "<!-- headline-figures:start -->", "<!-- headline-figures:end -->"


FULL = ROOT / "docs" / "benchmark-results-full" / "results.json"


def _claim_key(claim: str) -> str:
    """A claim without its parenthesised details (resplits, coverages, epochs), which differ
    between the quick and the full run."""
    return " ".join(re.sub(r"\([^()]*\)", "", claim).split())


def with_full_verdicts(results: dict, full: dict | None) -> dict:
    """``results`` with the full run's verdict beside each headline judged at full scale
    (its target says so and the quick run leaves ``met`` empty)."""
    if full is None:
        return results
    results = copy.deepcopy(results)
    for name, record in results["families"].items():
        # claims that differ only in their parentheses (one per dataset or level) are
        # matched in order, and only when both runs have as many of them (a family can
        # write more rows at full scale: then no verdict is copied)
        full_record = full["families"].get(name, {})
        full_groups = _by_claim_key(full_record.get("headlines", []))
        # a family rerun on its own and merged keeps the date of its own run
        started = full_record.get("started", full["started"])[:10]
        for key, group in _by_claim_key(record["headlines"]).items():
            same_key = full_groups.get(key, [])
            if len(same_key) != len(group):
                continue
            for h, match in zip(group, same_key, strict=True):
                judged_later = "full scale" in str(h.get("target")) and h.get("met") is None
                if judged_later and match.get("met") is not None:
                    h["met"] = bool(match["met"])
                    h["target"] = (
                        f"{h['target']}; met: the full run's ({started}) {match['value']}"
                    )
    return results


def _by_claim_key(headlines: list[dict]) -> dict[str, list[dict]]:
    """Headlines grouped by `_claim_key`, in their order."""
    groups: dict[str, list[dict]] = {}
    for h in headlines:
        groups.setdefault(_claim_key(h["claim"]), []).append(h)
    return groups


def full_results() -> dict | None:
    """The committed full run's results, or None when there is none."""
    return json.loads(FULL.read_text(encoding="utf-8")) if FULL.exists() else None


def headline_block(results: dict, full: dict | None = None) -> str:
    """The README block (markers included) for a run's results; ``full`` (the full run's
    results) adds its verdicts to the rows judged at full scale."""
    rerun = [name for name, family in results["families"].items() if merged_in(results, family)]
    noun = "family" if len(rerun) == 1 else "families"
    since = f"; {len(rerun)} {noun} rerun on their own since" if rerun else ""
    run = (
        f"Suite `{results['suite']}`, seed {results['seed']}, run {results['started']} "
        f"({results['wall_time_s'] / 60:.1f} min on {results['machine']['usable_cpus']} CPUs"
        f"{since}); "
        "every figure comes from `docs/benchmark-results/results.json` (families run on "
        "their own and merged in, or amended later, say so in its report), and the `met` of "
        "rows judged at full scale from `docs/benchmark-results-full/results.json`."
    )
    summary = summary_markdown(with_full_verdicts(results, full))
    return f"{START}\n{run}\n\n{summary}\n{END}"


def main() -> int:
    results = json.loads(RESULTS.read_text(encoding="utf-8"))
    full = full_results()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(readme):
        print(f"README.md has no {START} ... {END} block.", file=sys.stderr)
        return 2
    (ROOT / "README.md").write_text(
        pattern.sub(lambda _: headline_block(results, full), readme), encoding="utf-8"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
