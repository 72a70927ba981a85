"""The command line's manners: missing extras, pipes, folders, file modes, field names,
progress. Run as a user runs it (a subprocess, files on disk) except the progress ticker,
whose timing is driven by a state, not by a slow solve."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from ppsched.api.cli import output

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "gpt1.5b-p8-m24.json"
# The checkout first; a PYTHONPATH the caller set (a worktree's links) is kept after it.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def ppsched(*args: str, cwd: Path | None = None, umask: int | None = None,
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ppsched.api.cli", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, timeout=120, env=ENV,
                          umask=-1 if umask is None else umask)


def without(modules: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI in an interpreter where `modules` cannot be imported."""
    code = ("import sys\n"
            f"for name in {modules!r}: sys.modules[name] = None\n"
            "from ppsched.api.cli import main\n"
            f"sys.exit(main({list(args)!r}))\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env=ENV)


@pytest.mark.parametrize(("modules", "args", "extra"), [
    (["yaml"], ("sweep", "examples/sweep-zb.yaml"), "sweep"),
    (["rich"], ("sweep", "examples/sweep-zb.yaml", "--dry-run"), "sweep"),
    (["fastapi"], ("serve", "--port", "1"), "service"),
    (["uvicorn"], ("serve", "--port", "1"), "service"),
])
def test_a_missing_extra_is_one_line_naming_it(modules: list[str], args: tuple[str, ...],
                                               extra: str) -> None:
    result = without(modules, *args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    # A checkout installs its own folders (editable), from its root, into this interpreter
    # (named relative to the root when it lives inside the checkout, as make's venvs do).
    python = Path(sys.executable)
    shown = python.relative_to(ROOT) if python.is_relative_to(ROOT) else python
    assert f"ppsched {args[0]} needs the '{extra}' extra (module {modules[0]!r} is missing): " \
        f"cd {ROOT} && {shown} -m pip install -e '.[{extra}]'" in result.stderr
    assert "ppsched[" not in result.stderr


def _piped_to_head(*args: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[bytes],
                                                         bytes]:
    """Run the CLI with its stdout closed after two lines, as `| head -2` does."""
    proc = subprocess.Popen([sys.executable, "-m", "ppsched.api.cli", *args],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path, env=ENV)
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.readline() + proc.stdout.readline()
    proc.stdout.close()  # the reader goes away; the writer's next write breaks the pipe
    err = proc.stderr.read()
    proc.wait(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, head, err), head


def test_a_closed_pipe_ends_quietly_with_the_files_written(tmp_path: Path) -> None:
    result, head = _piped_to_head("solve", str(PROFILE), "--csv", "x.csv", "--grid",
                                  tmp_path=tmp_path)
    assert head.startswith(b"profile      gpt1.5b-p8-m24")
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    assert (tmp_path / "x.csv").read_text().startswith("0F0")


def test_schema_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    result, head = _piped_to_head("schema", "schedule", tmp_path=tmp_path)
    assert head.startswith(b"{")
    assert result.returncode == 0
    assert result.stderr == b""


def test_files_are_written_before_the_summary_is_printed(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "ppsched.api.cli", "solve", str(PROFILE),
                             "--svg", "s.svg", "-o", "s.json"], stdout=subprocess.PIPE,
                            cwd=tmp_path, env=ENV)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # blocks until the summary's first line is out
    assert first.startswith(b"profile")
    assert (tmp_path / "s.svg").is_file() and (tmp_path / "s.json").is_file()
    proc.stdout.read()
    assert proc.wait(timeout=120) == 0


@pytest.mark.parametrize("option", ["--csv", "--svg", "--trace", "-o"])
def test_an_output_folder_must_exist(option: str, tmp_path: Path) -> None:
    target = tmp_path / "missing" / "dir" / "x.out"
    result = ppsched("solve", str(PROFILE), option, str(target))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    name = "--output" if option == "-o" else option
    assert f"invalid '{name}'" in result.stderr and "--mkdir" in result.stderr
    assert not (tmp_path / "missing").exists()


def test_mkdir_creates_the_output_folders(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "x.csv"
    result = ppsched("solve", str(PROFILE), "--csv", str(target), "--mkdir")
    assert result.returncode == 0, result.stderr
    assert target.read_text().startswith("0F0")


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600),
                                             (0o002, 0o664)])
def test_files_get_the_umasks_mode(umask: int, mode: int, tmp_path: Path) -> None:
    result = ppsched("solve", str(PROFILE), "--csv", "x.csv", "--svg", "x.svg", "-o",
                     "x.json", cwd=tmp_path, umask=umask)
    assert result.returncode == 0, result.stderr
    for name in ("x.csv", "x.svg", "x.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv", "x.json", "x.svg"]


@pytest.mark.parametrize(("field", "hint"), [
    ("tf", "did you mean 't_f'?"),
    ("num_rank", "did you mean 'num_ranks'?"),
    ("colour", "(got 1; expected one of the fields name,"),
])
def test_an_unknown_field_is_named(field: str, hint: str, tmp_path: Path) -> None:
    data = json.loads(PROFILE.read_text())
    data[field] = data.pop("t_f") if field == "tf" else 1
    if field == "num_rank":
        data[field] = data.pop("num_ranks")
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    result = ppsched("solve", str(path))
    assert result.returncode == 2
    assert result.stderr.startswith(f"ppsched: error: no such field '{field}'; {hint}")
    assert result.stderr.count("\n") == 1


def test_a_long_solve_prints_progress_lines_until_it_ends() -> None:
    lines: list[str] = []
    two_ticks = threading.Event()

    def emit(line: str) -> None:
        lines.append(line)
        if len(lines) >= 2:
            two_ticks.set()

    with output.progress("solving x", stream=emit, after=0.0, every=0.001):
        # The "solve" lasts until the ticker has spoken twice: a state, not a duration.
        assert two_ticks.wait(60)
    assert all(line.startswith("ppsched: solving x: ") and line.endswith(" s")
               for line in lines)
    # The ticker stopped with the block.
    assert not any(t.name == "ppsched-progress" for t in threading.enumerate())


def test_a_short_solve_prints_no_progress() -> None:
    lines: list[str] = []
    with output.progress("solving x", stream=lines.append, after=3600.0, every=1.0):
        pass
    assert lines == []


def test_a_solve_from_the_command_line_is_quiet_on_stderr_when_fast(tmp_path: Path) -> None:
    result = ppsched("solve", str(PROFILE))
    assert result.returncode == 0
    assert result.stderr == ""


def test_csv_options_on_a_schedule_json_are_refused(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    assert ppsched("solve", str(PROFILE), "-o", str(out)).returncode == 0
    result = ppsched("simulate", str(out), "--profile", str(PROFILE))
    assert result.returncode == 2
    assert result.stderr.startswith("ppsched: error: invalid '--profile'")
    assert "torch CSV" in result.stderr and result.stderr.count("\n") == 1


@pytest.mark.parametrize(("cells", "words"), [
    ("0F0,0X1\n", "torch CSV line 1, cell 2: '0X1'"),
    ("0F0\n2F0\n", "3 stages on 2 ranks"),
    ("\n\n", "no compute actions"),
])
def test_a_bad_torch_csv_is_one_line_naming_the_problem(cells: str, words: str,
                                                         tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text(cells)
    result = ppsched("simulate", str(path))
    assert result.returncode == 2, result.stdout
    assert words in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_a_hand_written_csv_is_timed_with_the_shape_it_shows(tmp_path: Path) -> None:
    # Two ranks, one microbatch, split backward on rank 0 and torch's fused B on rank 1.
    path = tmp_path / "hand.csv"
    path.write_text("0F0,0I0,0W0\n1F0,1B0\n")
    out = tmp_path / "timed.json"
    result = ppsched("import-csv", str(path), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "(p=2, m=1, v=1)" in result.stdout and "unit times" in result.stdout
    timed = json.loads(out.read_text())
    # F0 [0,1], F1 [1,2], BW1 [2,4], B0 [4,5], W0 [5,6]: rank 0's span is 6.
    assert timed["metrics"]["cost"] == 6.0
    assert [op["kind"] for op in timed["ranks"][1]] == ["F", "BW"]
