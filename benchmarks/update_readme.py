"""Copy the headline figures of the committed benchmark run into README.md.

The README quotes no figure by hand: its "Headline figures" block is the summary table of
``docs/benchmark-results/results.json`` (written by ``uqconform benchmark --suite quick
--out docs/benchmark-results``), and ``tests/test_benchmark_figures.py`` fails when the two
disagree. Run from the repository root::

    python benchmarks/update_readme.py
"""

import json
import re
import sys
from pathlib import Path

from uqconform.benchmarks.runner import summary_markdown

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "benchmark-results" / "results.json"
START, END = "<!-- headline-figures:start -->", "<!-- headline-figures:end -->"


def headline_block(results: dict) -> str:
    """The README block (markers included) for a run's results."""
    run = (
        f"Suite `{results['suite']}`, seed {results['seed']}, run {results['started']} "
        f"({results['wall_time_s'] / 60:.1f} min on {results['machine']['usable_cpus']} CPUs); "
        "every figure comes from `docs/benchmark-results/results.json`."
    )
    return f"{START}\n{run}\n\n{summary_markdown(results)}\n{END}"


def main() -> int:
    results = json.loads(RESULTS.read_text())
    readme = (ROOT / "README.md").read_text()
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(readme):
        print(f"README.md has no {START} ... {END} block.", file=sys.stderr)
        return 2
    (ROOT / "README.md").write_text(pattern.sub(lambda _: headline_block(results), readme))
    return 0


if __name__ == "__main__":
    sys.exit(main())
