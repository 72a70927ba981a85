"""`benchmarks.two_commands`'s result file: a row re-timed with ``--only`` names its own
run, and the row it keeps from the previous file keeps that file's run."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import two_commands
from benchmarks.result_header import Started


def _table(path: Path) -> dict[str, list[str]]:
    rows = {}
    for line in path.read_text().splitlines():
        cells = two_commands.table_cells(line)
        if cells[0].startswith("make "):
            rows[cells[0]] = cells
    return rows


def test_a_kept_row_keeps_the_commit_of_the_run_that_timed_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "two_commands.md"
    monkeypatch.setattr(two_commands, "OUT", out)
    # The format before this column: three cells, the run named by the header alone.
    out.write_text(
        "Made by `python -m benchmarks.two_commands` on commit 09356b1aaaaa, "
        "2026-11-27 20:00 UTC; machine x86_64, 2 cores, load average 1.00 before and "
        "1.00 after, 10.0 s of CPU; budget: wall.\n\n"
        "| command | wall time (s) | outcome |\n|---|---|---|\n"
        "| make run | 23 | the service answered /healthz |\n"
        "| make test | 1700 | exit 0: 1 passed |\n")
    started = Started(0.5, 0.0, "7a748afe120c")
    two_commands.write([two_commands.Timed("make test", 1668.0, "exit 0: 2 passed")],
                       "python -m benchmarks.two_commands --only test", {}, started)
    rows = _table(out)
    assert rows["make run"][1:] == ["23", "the service answered /healthz",
                                    "09356b1aaaaa, 2026-11-27 20:00 UTC"]
    assert rows["make test"][1:3] == ["1668", "exit 0: 2 passed"]
    assert rows["make test"][3].startswith("7a748afe120c, ")
    # A second --only run keeps the kept row's own cell, not the newer header's commit.
    two_commands.write([two_commands.Timed("make test", 1600.0, "exit 0: 3 passed")],
                       "python -m benchmarks.two_commands --only test", {},
                       Started(0.5, 0.0, "d2a91b2fffff"))
    assert _table(out)["make run"][3] == "09356b1aaaaa, 2026-11-27 20:00 UTC"


def test_every_failed_test_is_named_even_past_a_long_message() -> None:
    # pytest's short summary, as `make test` prints it: a long message on the first
    # failure (stop 45's freshness failure filled the logged tail with it).
    long_message = "benchmarks/results/layout_search.md: measured on 0313dff " * 200
    output = "\n".join([
        "tests/test_freshness.py F",
        "=========================== short test summary info ============================",
        f"FAILED tests/test_freshness.py::test_no_stale_result - {long_message}",
        "ERROR tests/api/service/test_jobs.py::test_resume - TimeoutError",
        "FAILED tests/test_freshness.py::test_no_stale_result - repeated",
        "= 1 failed, 3400 passed, 1 error in 2912.56s (0:48:32) =",
    ])
    assert two_commands.failed_tests(output) == [
        "tests/test_freshness.py::test_no_stale_result",
        "tests/api/service/test_jobs.py::test_resume"]
    assert two_commands.failed_tests("= 3400 passed in 2900.00s =") == []


def _red_run(monkeypatch: pytest.MonkeyPatch, failed_id: str) -> None:
    """`.ci/run` as a failed run that names `failed_id`."""
    import subprocess

    output = (f"FAILED {failed_id} - AssertionError\n"
              "= 1 failed, 3400 passed in 2900.00s (0:48:20) =\n")
    monkeypatch.setattr(two_commands.subprocess, "run", lambda *a, **k:
                        subprocess.CompletedProcess(a[0], 1, output, ""))


def test_a_red_row_whose_test_id_holds_a_bar_stays_one_cell(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "two_commands.md"
    monkeypatch.setattr(two_commands, "OUT", out)
    monkeypatch.setattr(two_commands, "_saved_output", lambda *a: tmp_path / "x.log")
    _red_run(monkeypatch, "tests/test_x.py::test_y[a|b]")
    timed = two_commands.time_make_test(tmp_path)
    two_commands.write([timed], "python -m benchmarks.two_commands --only test", {},
                       Started(0.5, 0.0, "7a748afe120c"))
    # A later --only run keeps that row, read back whole.
    two_commands.write([two_commands.Timed("make run", 20.0, "the service answered")],
                       "python -m benchmarks.two_commands --only run", {},
                       Started(0.5, 0.0, "d2a91b2fffff"))
    rows = [two_commands.table_cells(line) for line in out.read_text().splitlines()
            if line.startswith("| make test")]
    assert len(rows) == 1 and len(rows[0]) == 4
    assert rows[0][2].endswith(r"(tests/test_x.py::test_y[a\|b])")
    assert rows[0][3].startswith("7a748afe120c, ")


def test_a_red_run_keeps_its_row_when_its_output_cannot_be_saved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full_disk(*_: str) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(two_commands, "_saved_output", full_disk)
    _red_run(monkeypatch, "tests/test_x.py::test_y")
    timed = two_commands.time_make_test(tmp_path)
    assert timed.outcome.startswith("exit 1: 1 failed, 3400 passed")
    assert timed.outcome.endswith("(tests/test_x.py::test_y)")


def test_the_clone_runs_without_this_checkouts_python_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A PYTHONPATH naming this checkout made the clone's tests import its code (stop 47).
    import subprocess

    monkeypatch.setenv("PYTHONPATH", "/somewhere/.mypy-src:/somewhere")
    seen: list[dict[str, str]] = []

    def run(*args: object, **kwargs: object) -> subprocess.CompletedProcess[str]:
        env = kwargs["env"]
        assert isinstance(env, dict)
        seen.append(env)
        return subprocess.CompletedProcess(["bash"], 0, "= 1 passed in 1.00s =\n", "")

    monkeypatch.setattr(two_commands.subprocess, "run", run)
    assert two_commands.time_make_test(tmp_path).outcome == "exit 0: 1 passed in 1.00s"
    assert "PYTHONPATH" not in seen[0] and seen[0]["CI"] == "true"
