"""What a new user meets in the first hour, run as a user runs it (subprocesses, real
pipes, a real busy port): the environment `make run` builds runs every documented command
or names the exact install command; a closed pipe keeps the verdict; a busy port is one
line naming the option."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from ppsched.solver.model import extras

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "profiles" / "uniform-p4-m8.json"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}

# The import names of the extras' distributions (pyproject.toml); the test below checks
# that every extra is here, so a new one cannot slip past the `make run` check.
EXTRA_IMPORTS: dict[str, tuple[str, ...]] = {
    "service": ("fastapi", "uvicorn", "pydantic_settings", "prometheus_client",
                "fastapi_offline", "psycopg"),
    "sweep": ("yaml", "dask", "distributed", "rich", "matplotlib", "pyarrow"),
    "torch": ("torch",),
    "test": ("pytest", "hypothesis", "ruff", "mypy", "httpx", "schemathesis", "playwright"),
    "bench": ("chitchat_dataset",),
    "docs": ("mkdocs", "material"),
    # opentelemetry-api itself comes with fastapi: the extra adds the SDK and exporter.
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter"),
}


def run_extras() -> set[str]:
    """The extras the Makefile's .venv-run installs (`pip install -e '.[a,b]'`)."""
    text = (ROOT / "Makefile").read_text()
    found = re.findall(r"\$\(RUN_VENV\)/bin/python -m pip install .*-e '\.\[([a-z,]+)\]'",
                       text)
    assert len(found) == 1, found
    return set(found[0].split(","))


def blocked(modules: list[str], commands: list[list[str]],
            cwd: Path) -> list[tuple[int, str]]:
    """Run each command through `main` in one interpreter where `modules` cannot be
    imported; (exit status, stderr) per command."""
    code = (
        "import contextlib, io, json, sys\n"
        f"for name in {modules!r}: sys.modules[name] = None\n"
        "from ppsched.api.cli import main\n"
        "out = []\n"
        f"for argv in {commands!r}:\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):\n"
        "        out.append((main(argv), err.getvalue()))\n"
        "print(json.dumps(out))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=cwd, timeout=600, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    return [tuple(x) for x in json.loads(result.stdout)]


def documented_commands(tmp_path: Path) -> list[list[str]]:
    """One run of each command the README's command table documents (small inputs)."""
    schedule = tmp_path / "s.json"
    csv = tmp_path / "s.csv"
    grid = tmp_path / "grid.yaml"
    grid.write_text(f"profiles: [{PROFILE}]\nmethods: [1f1b, zb-h1]\naxes:\n  m: [8, 12]\n")
    advise = ROOT / "examples" / "advise-llama-16gpu.yaml"
    return [
        ["solve", str(PROFILE), "-o", str(schedule), "--csv", str(csv), "--svg",
         str(tmp_path / "s.svg"), "--trace", str(tmp_path / "t.json")],
        ["simulate", str(schedule)],
        ["simulate", str(csv), "--profile", str(PROFILE)],
        ["import-csv", str(csv)],
        ["render", str(schedule), "--svg", str(tmp_path / "r.svg"), "--grid"],
        ["methods"],
        ["schema", "profile"],
        ["torchtitan", str(ROOT / "profiles" / "gpt1.5b-p8-m24.json"), "--layers", "22",
         "--local-batch-size", "144", "--unchunked-loss", "-o", str(tmp_path / "tt"),
         "--mkdir"],
        ["weipipe", str(ROOT / "examples" / "weipipe-p4.json"), "-m", "weipipe-zb1"],
        ["advise", str(advise)],
        ["pack", "512,2048,900,300", "--cap", "4096", "--replicas", "2", "--profile",
         str(PROFILE)],
        ["sweep", str(grid), "-o", str(tmp_path / "sweep.jsonl"), "--no-progress"],
    ]


def test_every_extra_has_its_import_names() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert set(EXTRA_IMPORTS) == set(declared)
    assert run_extras() <= set(declared)


def test_the_documented_commands_run_in_an_environment_like_make_runs(
        tmp_path: Path) -> None:
    """What `make run` leaves out (torch, the test tools, the bench data) is made
    unimportable; every documented command must still succeed."""
    missing = [m for extra, names in EXTRA_IMPORTS.items() if extra not in run_extras()
               for m in names]
    assert "torch" in missing and "pytest" in missing
    commands = documented_commands(tmp_path)
    results = blocked(missing, commands, tmp_path)
    for argv, (code, err) in zip(commands, results, strict=True):
        assert code == 0, (argv, err)
    # `serve` (it blocks, so not run here): its extra is installed and the app imports.
    code = ("import sys\n"
            f"for name in {missing!r}: sys.modules[name] = None\n"
            "from ppsched.api.cli.entry import require_extra\n"
            "require_extra('serve')\n"
            "import ppsched.api.service.main\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120, env=ENV)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.parametrize(("module", "argv", "extra"), [
    ("yaml", ["advise", "examples/advise-llama-16gpu.yaml"], "sweep"),
    ("yaml", ["sweep", "examples/sweep-zb.yaml"], "sweep"),
    ("matplotlib", ["sweep", "examples/sweep-zb.yaml", "--dry-run"], "sweep"),
    ("fastapi", ["serve", "--port", "1"], "service"),
])
def test_a_missing_extra_names_the_checkouts_install_command(module: str, argv: list[str],
                                                             extra: str) -> None:
    [(code, err)] = blocked([module], [argv], ROOT)
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    # From the checkout's root, editable, into the interpreter that ran the command
    # (named relative to the root when it lives inside the checkout, as make's venvs do).
    python = Path(sys.executable)
    shown = str(python.relative_to(ROOT)) if python.is_relative_to(ROOT) else str(python)
    expected = (f"cd {shlex.quote(str(ROOT))} && {shlex.quote(shown)} -m pip "
                f"install -e '.[{extra}]'")
    assert expected in err, err
    assert f"ppsched[{extra}]" not in err


def test_the_install_command_tells_a_checkout_from_a_wheel(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    assert extras.checkout_root() == ROOT
    assert extras.install_command("sweep").endswith("-m pip install -e '.[sweep]'")
    # A venv inside the checkout (make run's .venv-run) is named relative to it.
    monkeypatch.setattr(sys, "executable", str(ROOT / ".venv-run" / "bin" / "python"))
    assert extras.install_command("sweep") == (
        f"cd {shlex.quote(str(ROOT))} && .venv-run/bin/python -m pip install -e '.[sweep]'")
    # An installed wheel: no pyproject.toml two folders above the package.
    wheel = tmp_path / "site-packages" / "ppsched" / "solver" / "model" / "extras.py"
    wheel.parent.mkdir(parents=True)
    wheel.write_text("")
    monkeypatch.setattr(extras, "__file__", str(wheel))
    assert extras.checkout_root() is None
    assert extras.install_command("service") == (
        f"{shlex.quote(sys.executable)} -m pip install 'ppsched[service]'")


# --- a closed pipe keeps the verdict ------------------------------------------------------

BAD_CSV = "0F0,0F1,0B0\n1F0,1B0,1W0\n"  # a torch CSV with missing and mixed backwards


def _into_closed_pipe(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run the CLI with a stdout whose reader is gone before it writes a byte."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "ppsched.api.cli", *argv], stdout=write,
                              stderr=subprocess.PIPE, cwd=cwd, timeout=120, env=ENV)
    finally:
        os.close(write)


@pytest.mark.parametrize("command", ["simulate", "import-csv"])
def test_an_invalid_schedule_exits_1_into_a_closed_pipe(command: str,
                                                        tmp_path: Path) -> None:
    (tmp_path / "bad.csv").write_text(BAD_CSV)
    result = _into_closed_pipe([command, "bad.csv"], tmp_path)
    assert result.returncode == 1, result.stderr
    assert b"Traceback" not in result.stderr and b"Exception ignored" not in result.stderr


def test_a_valid_schedule_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    result = _into_closed_pipe(["solve", str(PROFILE), "-o", "s.json"], tmp_path)
    assert result.returncode == 0, result.stderr
    result = _into_closed_pipe(["simulate", "s.json", "--grid"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""


def test_pipefail_sees_an_invalid_schedule_through_head(tmp_path: Path) -> None:
    (tmp_path / "bad.csv").write_text(BAD_CSV)
    ppsched = f"{shlex.quote(sys.executable)} -m ppsched.api.cli"
    script = f"set -o pipefail; {ppsched} simulate bad.csv | head -1"
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                            cwd=tmp_path, timeout=120, env=ENV)
    assert result.stdout == "bad.csv: INVALID, 6 violations\n"
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr


# --- a busy port ---------------------------------------------------------------------------

def test_serve_on_a_busy_port_is_one_line_naming_the_option(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "ppsched.api.cli", "serve", "--port",
                                 str(port)], capture_output=True, text=True, cwd=tmp_path,
                                timeout=120, env={**ENV, "PPSCHED_DB_PATH": "x.sqlite3"})
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"127.0.0.1:{port} is in use" in result.stderr
    assert "--port N" in result.stderr and "PORT=N" in result.stderr
    assert "ready" not in result.stderr + result.stdout
    assert not (tmp_path / "x.sqlite3").exists()  # the store was never opened


# --- did you mean, m < p -------------------------------------------------------------------

def ppsched(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ppsched.api.cli", *argv],
                          capture_output=True, text=True, cwd=cwd, timeout=120, env=ENV)


def test_advise_with_a_misspelt_key_gets_a_did_you_mean(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "advise-llama-16gpu.yaml").read_text()
    assert "\nnum_microbatches:" in text
    (tmp_path / "typo.yaml").write_text(text.replace("\nnum_microbatches:",
                                                     "\nnum_microbaches:"))
    result = ppsched("advise", str(tmp_path / "typo.yaml"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "invalid 'num_microbaches'" in result.stderr
    assert "did you mean 'num_microbatches'?" in result.stderr
    result = ppsched("advise", str(ROOT / "examples" / "advise-llama-16gpu.yaml"),
                     "--strategies", "zb1p,fsdp")
    assert result.returncode == 2 and "did you mean 'zb-1p'?" in result.stderr


def test_solve_with_a_misspelt_method_gets_a_did_you_mean() -> None:
    result = ppsched("solve", str(PROFILE), "-m", "zbh1")
    assert result.returncode == 2 and "did you mean 'zb-h1'?" in result.stderr


def test_fewer_microbatches_than_ranks_solves_with_a_one_line_warning(
        tmp_path: Path) -> None:
    data = json.loads(PROFILE.read_text())
    data["num_microbatches"] = data["num_ranks"] - 1
    (tmp_path / "few.json").write_text(json.dumps(data))
    result = ppsched("solve", str(tmp_path / "few.json"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("profile ")
    p, m = data["num_ranks"], data["num_microbatches"]
    assert result.stderr.startswith(f"ppsched: warning: m={m} < p={p}: fewer microbatches "
                                    "than ranks")
    assert result.stderr.count("\n") == 1
    assert ppsched("solve", str(PROFILE)).stderr == ""


# --- simulate --memory-limit, an imported CSV's summary ------------------------------------

def test_simulate_checks_against_another_memory_limit(tmp_path: Path) -> None:
    big = ROOT / "profiles" / "gpt1.5b-p8-m24.json"
    assert ppsched("solve", str(big), "-o", str(tmp_path / "s.json")).returncode == 0
    schedule = json.loads((tmp_path / "s.json").read_text())
    limit = schedule["profile"]["memory_limit"]
    peak = max(schedule["metrics"]["peak_memory"])
    assert peak <= limit
    ok = ppsched("simulate", str(tmp_path / "s.json"))
    assert ok.returncode == 0 and f"(limit {limit:g})" in ok.stdout
    # Below the schedule's peak: a [memory] violation on every rank over it, exit 1.
    tight = ppsched("simulate", str(tmp_path / "s.json"), "--memory-limit", f"{peak - 1:g}")
    assert tight.returncode == 1, tight.stdout + tight.stderr
    assert "INVALID" in tight.stdout and f"> memory_limit {peak - 1:g}" in tight.stdout
    # 'none': no memory check; -o writes the profile with the limit asked for.
    free = ppsched("simulate", str(tmp_path / "s.json"), "--memory-limit", "none", "-o",
                   str(tmp_path / "free.json"))
    assert free.returncode == 0 and "(limit none)" in free.stdout
    assert json.loads((tmp_path / "free.json").read_text())["profile"].get(
        "memory_limit") is None
    assert "--memory-limit X" in ppsched("simulate", "--help").stdout


def test_an_imported_csv_says_where_it_came_from(tmp_path: Path) -> None:
    (tmp_path / "2p.csv").write_text("0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,1W0,1F1,1I1,1W1\n")
    for command in ("simulate", "import-csv"):
        result = ppsched(command, "2p.csv", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        method = result.stdout.splitlines()[1]
        # Not "csv 2p.csv (heuristic)": ppsched timed it, it solved nothing.
        assert method == "method       imported from 2p.csv", method
