"""Replace one family of a committed benchmark run with the same family run on its own.

After a change that moves one family's figures, rerun that family alone at the committed
run's scale and merge it in, rather than rerunning the whole suite::

    uqconform benchmark --suite cps --out /tmp/cps
    python benchmarks/merge_family.py cps /tmp/cps docs/benchmark-results
    python benchmarks/update_readme.py

The family keeps its own start time, so the report says it was run on its own and merged.
Its plots are copied beside the committed ones; ``report.md`` is written again.
"""

import json
import sys
from pathlib import Path

from uqconform.benchmarks.runner import report_markdown


def merge_family(family: str, new_dir: Path, committed_dir: Path) -> None:
    """Put ``family`` of the run in ``new_dir`` into the run in ``committed_dir``."""
    new = json.loads((new_dir / "results.json").read_text())
    committed = json.loads((committed_dir / "results.json").read_text())
    if new["scale"] != committed["scale"]:
        raise SystemExit(f"scales differ: {new['scale']} (new) and {committed['scale']}")
    record = new["families"].get(family)
    if record is None or record.get("status") != "ok":
        raise SystemExit(f"family {family!r} did not run cleanly in {new_dir}")
    record.setdefault("started", new["started"])
    for name in record.get("figures", []):
        if (new_dir / name).is_file():
            (committed_dir / name).write_bytes((new_dir / name).read_bytes())
    committed["families"][family] = record
    (committed_dir / "results.json").write_text(json.dumps(committed, indent=2))
    (committed_dir / "report.md").write_text(report_markdown(committed))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit("usage: python benchmarks/merge_family.py FAMILY NEW_DIR COMMITTED_DIR")
    merge_family(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
