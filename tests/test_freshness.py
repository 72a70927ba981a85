"""Result files say when and where they were measured, and none is older than its code.

`benchmarks.freshness` on this repository (CI's fresh clone has the history it reads), and
its rule on throwaway repositories, where each way a file can be stale is made to happen.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from benchmarks import freshness
from benchmarks.result_header import (
    Started,
    carrier,
    header_fields,
    header_line,
    parse_line,
    read_header,
    result_header,
    start,
)

ROOT = Path(__file__).resolve().parents[1]


def test_no_result_file_ci_keeps_fresh_is_stale() -> None:
    # Every result file of a run under freshness.CI_CPU_S of CPU; the longer ones are
    # listed by `make check-docs` (python -m benchmarks.freshness), not here.
    done = subprocess.run([sys.executable, "-m", "benchmarks.freshness", "--ci"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, (
        f"stale result files (regenerate them on a clean tree):\n{done.stdout}{done.stderr}")
    assert "no stale result file of a run under" in done.stdout


def test_every_benchmark_measures_its_own_file_and_tracked_paths() -> None:
    found = freshness.benchmarks()
    assert len(found) >= 25
    for bench in found:
        assert f"benchmarks/{bench.module.split('.')[1]}.py" in bench.measures
        freshness.last_change(ROOT, bench.measures)  # raises on an untracked path


# The header itself.

def test_a_markdown_header_reads_back() -> None:
    line = result_header("python -m benchmarks.x --flag", budget="deterministic (work 10)",
                         started=Started(load=1.5, cpu=0.0))[0]
    header = parse_line(line)
    assert header is not None
    assert header.command == "python -m benchmarks.x --flag"
    assert header.load_before == 1.5 and header.load_after is not None
    assert header.budget_kind == "deterministic"
    assert header.commit.removesuffix("+dirty") in _git(ROOT, "rev-parse", "HEAD") or \
        header.commit == "unknown"


def _burn(cpu_s: float) -> float:
    """Spin until this process has used `cpu_s` of CPU (a state, not a wall-clock wait)."""
    began = time.process_time()
    while time.process_time() - began < cpu_s:
        pass
    return time.process_time() - began


def test_the_cpu_of_live_pool_workers_is_counted() -> None:
    # A header written inside a pool's block (benchmarks.ilp_layouts) came out at 0.3 s
    # of CPU for a run of about 2,700 s: its workers were not reaped yet.
    started = start()
    with ProcessPoolExecutor(max_workers=1) as pool:
        burnt = pool.submit(_burn, 0.5).result()
        fields = header_fields("python -m benchmarks.x", budget="wall",
                               started=started)
    assert burnt >= 0.5
    assert fields["cpu_s"] >= 0.5


def test_a_budget_other_than_deterministic_or_wall_is_refused() -> None:
    with pytest.raises(ValueError, match="deterministic, wall"):
        header_fields("python -m benchmarks.x", budget="fast", started=Started(0.0, 0.0))


def test_a_csv_or_png_takes_the_header_of_its_markdown_companion(tmp_path: Path) -> None:
    assert carrier(tmp_path / "a.csv") == tmp_path / "a.md"
    assert carrier(tmp_path / "a.png") == tmp_path / "a.md"
    assert carrier(tmp_path / "a.json") == tmp_path / "a.json"
    assert read_header(tmp_path / "a.csv") is None  # no companion
    (tmp_path / "a.md").write_text(_line("0123456789ab") + "\n\n| x |\n")
    header = read_header(tmp_path / "a.csv")
    assert header is not None and header.commit == "0123456789ab"


# The rule, on a throwaway repository.

def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c",
                           "user.email=t@example.org", *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def _line(commit: str, command: str = "python -m benchmarks.bench", cpu_s: float = 3.0,
          ) -> str:
    return header_line({"command": command, "commit": commit, "date": "2026-11-27 20:00 UTC",
                        "machine": "x86_64", "cores": 2, "load_before": 1.0,
                        "load_after": 2.0, "cpu_s": cpu_s, "budget": "deterministic"})


BENCH = '''WRITES = ("bench.md", "bench.csv", "bench.json")
MEASURES = ("solver/core.py", "benchmarks/bench.py")
'''


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository whose benchmark measures solver/core.py; committed, no results yet."""
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "solver").mkdir()
    (tmp_path / "benchmarks" / "bench.py").write_text(BENCH)
    (tmp_path / "solver" / "core.py").write_text("X = 1\n")
    (tmp_path / "solver" / "other.py").write_text("Y = 1\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "code")
    return tmp_path


def _write_result(repo: Path, name: str = "bench.md", commit: str | None = None) -> str:
    commit = commit or _git(repo, "rev-parse", "--short=12", "HEAD")
    (repo / "benchmarks" / "results" / name).write_text(_line(commit) + "\n\n| a |\n")
    return commit


def _commit(repo: Path, path: str, text: str) -> None:
    (repo / path).write_text(text)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", f"change {path}")


def _reasons(repo: Path) -> dict[str, str]:
    return {s.path.name: s.reason for s in freshness.stale_files(repo)}


def test_a_result_measured_on_the_last_change_is_fresh(repo: Path) -> None:
    _write_result(repo)
    _commit(repo, "benchmarks/results/bench.md",
            (repo / "benchmarks/results/bench.md").read_text())  # results committed after
    assert _reasons(repo) == {}
    assert freshness.main(["--root", str(repo)]) == 0


def test_ci_fails_on_a_stale_short_run_and_lists_a_long_one(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commit = _git(repo, "rev-parse", "--short=12", "HEAD")
    results = repo / "benchmarks" / "results"
    (results / "bench.md").write_text(_line(commit, cpu_s=3600.0) + "\n\n| a |\n")
    _commit(repo, "solver/core.py", "X = 2\n")
    assert freshness.main(["--root", str(repo), "--ci"]) == 0  # an hour's run: listed only
    assert "not enforced (a long run): benchmarks/results/bench.md" in capsys.readouterr().out
    (results / "bench.md").write_text(_line(commit, cpu_s=12.0) + "\n\n| a |\n")
    assert freshness.main(["--root", str(repo), "--ci"]) == 1
    assert "stale: benchmarks/results/bench.md" in capsys.readouterr().out
    assert freshness.main(["--root", str(repo)]) == 1  # the full check lists both kinds


def test_a_change_to_unmeasured_code_keeps_it_fresh(repo: Path) -> None:
    _write_result(repo)
    _commit(repo, "solver/other.py", "Y = 2\n")
    assert _reasons(repo) == {}


def test_a_change_to_measured_code_makes_it_stale(repo: Path) -> None:
    commit = _write_result(repo)
    _commit(repo, "solver/core.py", "X = 2\n")
    reasons = _reasons(repo)
    assert list(reasons) == ["bench.md"]
    assert f"measured on {commit}" in reasons["bench.md"]
    assert "change solver/core.py" in reasons["bench.md"]
    assert freshness.main(["--root", str(repo)]) == 1


def test_a_change_undone_since_keeps_it_fresh(repo: Path) -> None:
    # Measured, then the code changed and changed back: what it measures is what it
    # measured, so it stays fresh; a change left in place still stales it.
    _write_result(repo)
    _commit(repo, "solver/core.py", "X = 2\n")
    _commit(repo, "solver/core.py", "X = 1\n")
    assert _reasons(repo) == {}
    _commit(repo, "solver/core.py", "X = 3\n")
    assert list(_reasons(repo)) == ["bench.md"]


def test_a_change_to_the_benchmark_itself_makes_it_stale(repo: Path) -> None:
    _write_result(repo)
    _commit(repo, "benchmarks/bench.py", BENCH + "# a new figure\n")
    assert list(_reasons(repo)) == ["bench.md"]


def test_a_result_of_a_side_branch_is_stale_on_a_line_that_changed_the_code(
        repo: Path) -> None:
    base = _git(repo, "rev-parse", "HEAD")
    _commit(repo, "solver/core.py", "X = 2\n")  # main changes the code
    _git(repo, "checkout", "-q", "-b", "side", base)
    measured = _write_result(repo)  # measured on a commit without that change
    _git(repo, "checkout", "-q", "-")
    _write_result(repo, commit=measured)
    assert list(_reasons(repo)) == ["bench.md"]


def test_a_dirty_or_unknown_or_foreign_commit_is_stale(repo: Path) -> None:
    head = _git(repo, "rev-parse", "--short=12", "HEAD")
    _write_result(repo, "bench.md", head + "+dirty")
    (repo / "benchmarks/results/bench.json").write_text(json.dumps(
        {"header": {"command": "python -m benchmarks.bench", "commit": "unknown",
                    "date": "2026-11-27 20:00 UTC", "load_before": 1.0, "load_after": 1.0,
                    "budget": "wall"}}))
    reasons = _reasons(repo)
    assert "uncommitted changes" in reasons["bench.md"]
    assert "bench.csv" not in reasons  # no csv written
    assert "commit unknown" in reasons["bench.json"]
    _write_result(repo, "bench.md", "0123456789ab")
    assert "not in this repository's history" in _reasons(repo)["bench.md"]


def test_headerless_unclaimed_and_companionless_files_are_listed(repo: Path) -> None:
    results = repo / "benchmarks" / "results"
    (results / "bench.md").write_text("| a table without a header |\n")
    (results / "orphan.md").write_text(_line(_git(repo, "rev-parse", "--short=12", "HEAD"))
                                       + "\n")
    (results / "bench.csv").write_text("a,b\n1,2\n")
    reasons = _reasons(repo)
    assert reasons["bench.md"] == "no header"
    assert reasons["bench.csv"].startswith("no header (its header is bench.md's)")
    assert reasons["orphan.md"].startswith("no benchmark claims it")
    # The csv becomes fresh with its companion's header.
    _write_result(repo)
    assert set(_reasons(repo)) == {"orphan.md"}


def test_a_header_without_the_load_or_a_budget_kind_is_listed(repo: Path) -> None:
    head = _git(repo, "rev-parse", "--short=12", "HEAD")
    old = (f"Made by `python -m benchmarks.bench` on commit {head}, 2026-11-27 20:00 UTC; "
           "machine x86_64, 2 cores, load average 3.94 4.43 7.16 when written; budget: "
           "deterministic.")
    (repo / "benchmarks/results/bench.md").write_text(old + "\n")
    assert "lacks the load before and after" in _reasons(repo)["bench.md"]


def test_a_header_naming_another_benchmark_is_listed(repo: Path) -> None:
    head = _git(repo, "rev-parse", "--short=12", "HEAD")
    (repo / "benchmarks/results/bench.md").write_text(
        _line(head, "python -m benchmarks.bench_other") + "\n")
    assert "not benchmarks.bench" in _reasons(repo)["bench.md"]


def test_commands_prints_what_regenerates_each_stale_file(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_result(repo)
    (repo / "benchmarks/results/bench.csv").write_text("a\n")
    _commit(repo, "solver/core.py", "X = 2\n")
    assert freshness.main(["--root", str(repo), "--commands"]) == 1
    assert capsys.readouterr().out.splitlines() == ["python -m benchmarks.bench"]


def test_declarations_that_would_make_the_check_vacuous_are_refused(repo: Path) -> None:
    bench = repo / "benchmarks" / "bench.py"
    bench.write_text('WRITES = ("bench.md",)\nMEASURES = ("solver/core.py",)\n')
    with pytest.raises(freshness.DeclarationError, match="own file"):
        freshness.benchmarks(repo)
    bench.write_text('WRITES = ("bench.md",)\n'
                     'MEASURES = ("solver/typo.py", "benchmarks/bench.py")\n')
    _write_result(repo)
    with pytest.raises(freshness.DeclarationError, match=r"solver/typo\.py"):
        freshness.stale_files(repo)
    bench.write_text('WRITES = ("bench.md",)\nMEASURES = tuple(["benchmarks/bench.py"])\n')
    with pytest.raises(freshness.DeclarationError, match="literal"):
        freshness.benchmarks(repo)
    assert freshness.main(["--root", str(repo)]) == 2


def test_a_run_records_the_commit_it_began_on_unless_measured_code_moved(repo: Path) -> None:
    from benchmarks.result_header import _run_commit, commit

    began = Started(0.0, 0.0, commit(repo))
    _commit(repo, "benchmarks/results/other.md", "a result committed meanwhile\n")
    assert _run_commit(began, repo) == commit(repo)  # results alone: the same code
    _commit(repo, "solver/core.py", "X = 3\n")
    assert _run_commit(began, repo) == began.commit + "+dirty"
    (repo / "solver" / "core.py").write_text("X = 4\n")
    assert commit(repo).endswith("+dirty")
    assert _run_commit(Started(0.0, 0.0, commit(repo)), repo).endswith("+dirty")


def test_a_run_of_a_copy_names_the_copys_commit_whatever_the_checkout_does(
        repo: Path) -> None:
    # benchmarks.two_commands measures a clone made at its start: code committed in the
    # checkout during its run reaches neither the clone nor its header.
    from benchmarks.result_header import _run_commit, commit

    cloned = commit(repo)
    _commit(repo, "solver/core.py", "X = 3\n")
    (repo / "solver" / "other.py").write_text("Y = 2\n")  # and left uncommitted
    assert _run_commit(Started(0.0, 0.0, cloned), repo).endswith("+dirty")
    assert _run_commit(Started(0.0, 0.0, cloned, of_a_copy=True), repo) == cloned
