"""Replace one family of a committed benchmark run with the same family run on its own.

After a change that moves one family's figures, rerun that family alone at the committed
run's scale and merge it in, rather than rerunning the whole suite::

    uqconform benchmark --suite cps --out /tmp/cps
    python benchmarks/merge_family.py cps /tmp/cps docs/benchmark-results
    python benchmarks/update_readme.py

The family keeps its own start time, so the report says it was run on its own and merged.
Its plots are copied beside the committed ones (the old record's plots that the new one no
longer draws are deleted), the run's lists of failed and skipped families are recomputed,
and ``report.md`` is written again. A run at another scale or seed, or one whose listed
plots are missing, is refused; package versions that differ from the committed run's, and
those of packages the committed run does not name (it predates their recording), are
stated under the family's heading in the report, and so is the uqconform commit it ran at
when that differs from the committed run's, when the package changed during its run, or
that it was not recorded. The family's record keeps the run's ``source`` whole.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's uqconform

from uqconform.benchmarks.runner import families_with_status, report_markdown


def merge_family(family: str, new_dir: Path, committed_dir: Path) -> None:
    """Put ``family`` of the run in ``new_dir`` into the run in ``committed_dir``."""
    new = json.loads((new_dir / "results.json").read_text(encoding="utf-8"))
    committed = json.loads((committed_dir / "results.json").read_text(encoding="utf-8"))
    for key in ("scale", "seed"):
        if new.get(key) != committed.get(key):
            raise SystemExit(
                f"{key}s differ: {new.get(key)} (new) and {committed.get(key)} (committed)"
            )
    record = new["families"].get(family)
    if record is None or record.get("status") != "ok":
        raise SystemExit(f"family {family!r} did not run cleanly in {new_dir}")
    record.setdefault("started", new["started"])
    changed = sorted(
        f"{name} {committed['versions'][name]} -> {version}"
        for name, version in new["versions"].items()
        if committed["versions"].get(name, version) != version
    )
    unnamed = sorted(  # packages the committed report does not record (older runs)
        f"{name} {version}"
        for name, version in new["versions"].items()
        if name not in committed["versions"]
    )
    if changed or unnamed:
        record["versions"] = new["versions"]
    for packages, text in ((changed, "other package versions than the report's"),
                           (unnamed, "packages the report does not name")):  # fmt: skip
        if packages:
            line = f"Run with {text}: {', '.join(packages)}."
            record["provenance"] = [*record.get("provenance", []), line]
            print(f"{family}: {line}")
    source = new.get("source")
    record["source"] = source  # the code this family ran at, kept whole (diff hash, flags)
    line = None
    if not source or not source.get("commit"):
        why = (
            f"git: {source['error']}"
            if source and source.get("error")
            else "an installed package, or git not available"
        )
        line = f"Run without a recorded uqconform source ({why}): the code it ran at is not known."
    elif source.get("changed_during_run"):
        line = (
            f"Run at uqconform commit `{source['commit'][:12]}`; the package changed during "
            "the run."
        )
    elif source != committed.get("source"):
        diff = source.get("diff_sha256")
        changed_files = (
            f", with uncommitted changes{f' (diff `{diff}`)' if diff else ''}"
            if source["modified"]
            else ""
        )
        line = f"Run at uqconform commit `{source['commit'][:12]}`{changed_files}."
    if line is not None:
        record["provenance"] = [*record.get("provenance", []), line]
    missing = [name for name in record.get("figures", []) if not (new_dir / name).is_file()]
    if missing:
        raise SystemExit(f"{family} lists plots missing from {new_dir}: {', '.join(missing)}")
    old_record = committed["families"].get(family, {})
    for name in set(old_record.get("figures", [])) - set(record.get("figures", [])):
        (committed_dir / name).unlink(missing_ok=True)
    for name in record.get("figures", []):
        (committed_dir / name).write_bytes((new_dir / name).read_bytes())
    committed["families"][family] = record
    for status in ("failed", "skipped"):
        committed[status] = families_with_status(committed["families"], status)
    (committed_dir / "results.json").write_text(json.dumps(committed, indent=2), encoding="utf-8")
    (committed_dir / "report.md").write_text(report_markdown(committed), encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit("usage: python benchmarks/merge_family.py FAMILY NEW_DIR COMMITTED_DIR")
    merge_family(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))
