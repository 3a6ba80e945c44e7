"""The ``uqconform`` command line.

``uqconform benchmark --suite quick|full|<family> [--out DIR] [--seed N] [--scale S]`` runs
the benchmark suites of `uqconform.benchmarks` on data that ships with the installed
packages, prints the tables and writes ``results.json``, ``report.md`` and PNG plots to
``DIR``. ``uqconform benchmark --list`` shows the suites.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]


# The run options' defaults, applied after parsing: argparse keeps None so that `--list`
# can tell which options were given.
_RUN_DEFAULTS: dict[str, Any] = {
    "suite": "quick",
    "out": "uqconform-benchmark",
    "seed": 0,
    "scale": None,
    "jobs": None,
    "no_progress": False,
}


def _echo(text: str) -> None:
    """Print ``text``; once standard output is closed (``| head``, a pager quit) stay
    silent, so that the run still finishes and writes its files."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # also silences the flush at exit
        os.close(devnull)


def _version() -> str:
    from uqconform import __version__

    return __version__


class _Once(argparse.Action):
    """Store an option's value (True for a flag, ``nargs=0``), refusing the option given a
    second time (argparse keeps the last one silently: ``--suite classic --suite cps`` ran
    cps alone)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        earlier = getattr(namespace, self.dest)
        if earlier is not None:
            if self.nargs == 0:  # a flag: no values to show
                parser.error(f"{option_string} given twice: give it once")
            several = (
                " (run the command once per suite for several suites)"
                if self.dest == "suite"
                else ""
            )
            parser.error(
                f"{option_string} given twice ({earlier} and {values}): give it once{several}"
            )
        setattr(namespace, self.dest, True if self.nargs == 0 else values)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="uqconform", description="Conformal prediction for scikit-learn models."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    bench = commands.add_parser(
        "benchmark",
        help="run the benchmark suites",
        description="Run benchmark suites; tables are printed, results written to --out. "
        "Exit code 0: no family failed (families skipped for a missing optional package "
        "included); 1: a family failed (the others were written); 2: a "
        "usage error; 130: interrupted (Ctrl-C); 143: terminated (SIGTERM); 129: hung up "
        "(SIGHUP).",
    )
    bench.add_argument(
        "--suite",
        action=_Once,
        default=None,
        help=f"{_RUN_DEFAULTS['suite']} (default), full, smoke, or one family such as classic, "
        "speed, memory (see --list)",
    )
    bench.add_argument(
        "--out",
        action=_Once,
        default=None,
        help=f"output folder (default: {_RUN_DEFAULTS['out']}); a finished run replaces the "
        "previous run's files there, an interrupted one changes nothing (stopped while the "
        "finished run moves in, it first finishes the move)",
    )
    bench.add_argument(
        "--seed",
        action=_Once,
        type=int,
        default=None,
        help=f"base random seed, 0 to 2**31 - 1 (default: {_RUN_DEFAULTS['seed']})",
    )
    bench.add_argument(
        "--scale",
        action=_Once,
        choices=("smoke", "quick", "full"),
        default=None,
        help="size at which a single family runs (default: quick)",
    )
    bench.add_argument(
        "--jobs",
        action=_Once,
        type=int,
        default=None,
        help="families run side by side, one thread each (default: 2, or 1 on one CPU); "
        "the timed families (speed, memory) run first and alone",
    )
    bench.add_argument(
        "--no-progress",
        action=_Once,
        nargs=0,
        default=None,
        help="hide the progress bars",
    )
    bench.add_argument(
        "--list",
        action=_Once,
        nargs=0,
        default=None,
        help="list the suites and families (takes no other option)",
    )
    return parser


def _list_suites() -> str:
    from uqconform.benchmarks import get_families, list_suites
    from uqconform.benchmarks.registry import import_errors

    families = get_families()
    lines = ["Suites: quick, full (every default family), smoke (tiny, for tests).", "Families:"]
    names = list_suites()[3:]
    width = max(len(name) for name in names) + 1
    for name in names:
        if name in families:
            lines.append(f"  {name:{width}s} {families[name].description}")
        else:
            lines.append(
                f"  {name:{width}s} (cannot be imported: {import_errors()[name].splitlines()[-1]})"
            )
    lines.append(
        "--suite <family> runs that family (and the families named <family>-*, so robust "
        "also runs robust-inputs); --scale sets its size."
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``uqconform`` command.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 1 when a benchmark family failed (the others still ran and their
        results were written), 2 for a usage error (unknown suite, unwritable folder, an
        option given twice), 130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM)
        and 129 when hung up (SIGHUP); the output folder is then left as it was, unless the
        signal came while the finished run moved in: the move ends first, and the folder
        holds the new run (the message says which).

    Examples
    --------
    >>> main(["benchmark", "--suite", "no-such-suite"])  # doctest: +SKIP
    2
    """
    run: dict[str, Any] = {}  # the run's options, once it starts
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:  # a console that cannot print "±" gets "\xb1", not an error
        reconfigure(errors="backslashreplace")
    try:
        return _command(argv, run)
    except KeyboardInterrupt as stop:  # also while importing the suites: no traceback
        how = "interrupted"
        if isinstance(stop, _Terminated):
            how = "hung up" if stop.signum == getattr(signal, "SIGHUP", None) else "terminated"
        if "out" not in run:
            message = f"uqconform: {how}."
        elif getattr(stop, "uqconform_run_written", False):  # set by the runner
            message = (
                f"uqconform benchmark: {how} after the run finished; {run['out']} holds the "
                "new run (its results.json, report.md and plots)."
            )
        elif not Path(run["out"]).expanduser().exists():  # the run removed what it made
            message = (
                f"uqconform benchmark: {how}; nothing was written ({run['out']} was not created)."
            )
        elif Path(run["out"]).expanduser().is_dir() and not any(
            Path(run["out"]).expanduser().iterdir()
        ):
            message = f"uqconform benchmark: {how}; nothing was written ({run['out']} is empty)."
        else:
            message = (
                f"uqconform benchmark: {how}; the files already in {run['out']} are as they were."
            )
        print(f"\n{message}", file=sys.stderr)
        return 128 + stop.signum if isinstance(stop, _Terminated) else 130


def _command(argv: Sequence[str] | None, run: dict[str, Any]) -> int:
    """`main` but for a Ctrl-C; ``run`` receives the run's options once it starts."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command != "benchmark":
        parser.print_help()
        print("uqconform: error: give a command (uqconform benchmark ...)", file=sys.stderr)
        return 2
    given = {name: getattr(args, name) for name in _RUN_DEFAULTS}
    if args.list:
        options = [f"--{name.replace('_', '-')}" for name, v in given.items() if v is not None]
        if options:
            print(
                f"uqconform benchmark: error: --list takes no other option (got "
                f"{', '.join(options)})",
                file=sys.stderr,
            )
            return 2
        _echo(_list_suites())
        return 0
    from uqconform.benchmarks import BenchmarkOutputError, run_benchmark
    from uqconform.benchmarks.runner import _TooManyJobsWarning

    chosen = {name: _RUN_DEFAULTS[name] if v is None else v for name, v in given.items()}
    if given["suite"] is None and chosen["scale"] not in (None, chosen["suite"]):
        print(
            f"uqconform benchmark: error: --scale {chosen['scale']} applies to one family "
            f"(--suite <family>); for the whole benchmark at that scale use --suite "
            f"{chosen['scale']} (without --suite it runs the default suite, "
            f"{_RUN_DEFAULTS['suite']}).",
            file=sys.stderr,
        )
        return 2
    run.update(chosen)
    # `kill`, a CI timeout, a closed terminal: stopped as Ctrl-C is (signal handlers can
    # only be set on the main thread)
    stopping = [signal.SIGINT, signal.SIGTERM]
    stopping += [signal.SIGHUP] if hasattr(signal, "SIGHUP") else []
    if threading.current_thread() is not threading.main_thread():
        stopping = []
    previous = {signum: signal.signal(signum, _stop_on_signal) for signum in stopping}
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _as_option_warning(_TooManyJobsWarning, warnings.showwarning)
            results = run_benchmark(
                chosen["suite"],
                chosen["out"],
                seed=chosen["seed"],
                scale=chosen["scale"],
                progress=not chosen["no_progress"],
                jobs=chosen["jobs"],
                echo=_echo,
            )
    except (ValueError, BenchmarkOutputError) as error:
        print(f"uqconform benchmark: error: {_as_options(str(error))}", file=sys.stderr)
        return 2
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 1 if results["failed"] else 0


def _as_option_warning(category: type[Warning], show: Callable[..., None]) -> Callable[..., None]:
    """A ``warnings.showwarning`` printing warnings of ``category`` as one line naming the
    options (not the Python arguments, under the entry script's ``sys.exit(main())``),
    and the others with ``show``."""

    def showwarning(
        message: Warning | str,
        kind: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        if issubclass(kind, category):
            print(f"uqconform benchmark: warning: {_as_options(str(message))}", file=sys.stderr)
        else:
            show(message, kind, filename, lineno, file, line)

    return showwarning


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, stopped as Ctrl-C is: workers ended, the staging folder removed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _stop_on_signal(signum: int, frame: Any) -> None:
    stop: KeyboardInterrupt = (
        KeyboardInterrupt() if signum == signal.SIGINT else _Terminated(signum)
    )
    from uqconform.benchmarks.runner import request_stop

    request_stop(stop)  # raised again after the family, should a model swallow it
    raise stop


def _as_options(message: str) -> str:
    """The runner names its Python arguments (`seed`); on the command line they are options."""
    for name in ("suite", "out", "seed", "scale", "jobs"):
        message = message.replace(f"`{name}`=", f"--{name} ").replace(f"`{name}`", f"--{name}")
    # None is the Python default; it cannot be typed on the command line
    return message.replace("--jobs must be None or a", "--jobs must be a")


if __name__ == "__main__":
    sys.exit(main())
