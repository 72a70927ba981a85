"""Time the README's two commands on a fresh clone: `make run` until the service answers,
and CI's `make test` (`.ci/run`) to its end.

    python -m benchmarks.two_commands            # clone HEAD into a temporary folder
    python -m benchmarks.two_commands --keep DIR # clone into DIR and leave it there
    python -m benchmarks.two_commands --only test  # re-time one; keep the other's row

Each command builds its virtual environment from nothing, as on a new machine; the apt
packages (Debian's Chromium and PostgreSQL) are installed by `make test` only when missing,
so the file says whether they were already there. Writes
``benchmarks/results/two_commands.md``. The times are wall time on a shared machine: the
header records the load.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks.result_header import Started, commit, read_header, result_header, start

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "two_commands.md"
# The code whose change can move these times: what the commands install and run.
WRITES = ("two_commands.md",)
MEASURES = ("Makefile", "pyproject.toml", ".ci/run", "benchmarks/two_commands.py")
READY_WITHIN_S = 1800.0  # a venv build on a loaded machine; past this the run is a failure

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Timed:
    command: str
    wall_s: float
    outcome: str
    measured_on: str = ""
    """The commit and date of the run that timed it (a kept row keeps its own)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _clone(into: Path) -> Path:
    repo = into / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(repo)], check=True)
    shared = ROOT.parent / "shared"
    if shared.is_dir() and not (into / "shared").exists():
        # The tests read the project's shared folder beside the checkout, as CI has it.
        (into / "shared").symlink_to(shared)
    return repo


def fresh_machine_env() -> dict[str, str]:
    """This process's environment less what a fresh machine would not have: a
    ``PYTHONPATH`` (this checkout's ``.mypy-src``, say) would make the clone's tests import
    this checkout's code instead of the clone's (stop 47's first run: 10 failures)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def time_make_run(repo: Path) -> Timed:
    """`make run` from nothing until GET /healthz answers 200; then stop it."""
    port = _free_port()
    started = time.monotonic()
    proc = subprocess.Popen(["make", "run", f"PORT={port}"], cwd=repo, start_new_session=True,
                            env=fresh_machine_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        while True:
            if proc.poll() is not None:
                return Timed("make run", time.monotonic() - started,
                             f"exited {proc.returncode} before answering: "
                             f"{(proc.stderr.read() if proc.stderr else '')[-300:]!r}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                    return Timed("make run", time.monotonic() - started,
                                 "the service answered /healthz")
            except httpx.HTTPError:
                pass  # not listening yet: the venv is still being built
            if time.monotonic() - started > READY_WITHIN_S:
                return Timed("make run", time.monotonic() - started, "never answered")
            time.sleep(1.0)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def time_make_test(repo: Path) -> Timed:
    """CI's run: `.ci/run` (`make test` with torch and PostgreSQL required)."""
    started = time.monotonic()
    done = subprocess.run(["bash", ".ci/run"], cwd=repo, env={**fresh_machine_env(), "CI": "true"},
                          capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    summary = [line for line in done.stdout.splitlines()
               if re.search(r"\d+ (passed|failed)", line)]
    outcome = f"exit {done.returncode}" + (f": {summary[-1].strip('= ')}" if summary else "")
    if done.returncode != 0:
        failed = failed_tests(done.stdout)
        if failed:
            outcome += " (" + ", ".join(failed) + ")"
        log.error("%s", done.stdout[-5000:] + done.stderr[-3000:])
        try:
            log.error("the whole output: %s", _saved_output(done.stdout, done.stderr))
        except OSError as error:  # a full disk must not cost the row of a 50-minute run
            log.error("the whole output could not be kept: %s", error)
    # A parametrised test id may hold a "|", which would split the table's cell.
    return Timed("make test", wall, outcome.replace("|", r"\|"))


def failed_tests(pytest_output: str) -> list[str]:
    """The test ids pytest's short summary names as failed or in error.

    Why not only the tail of the output: a failure's long message can fill it and push
    the other failure's line out (stop 45's run failed two tests and named one).
    """
    found = []
    for line in pytest_output.splitlines():
        match = re.match(r"(?:FAILED|ERROR) (\S+)", line)
        if match and match.group(1) not in found:
            found.append(match.group(1))
    return found


def _saved_output(stdout: str, stderr: str) -> Path:
    """Keep a failed run's whole output in a file (the clone may be deleted)."""
    handle, name = tempfile.mkstemp(prefix="ppsched-make-test-", suffix=".log")
    with os.fdopen(handle, "w") as out:
        out.write(stdout + "\n--- stderr ---\n" + stderr)
    return Path(name)


def table_cells(line: str) -> list[str]:
    """The cells of a Markdown table row (a ``\\|`` inside a cell does not split it)."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def apt_packages() -> dict[str, bool]:
    """Whether each Debian package `make test` installs when missing is already here."""
    return {"chromium": Path("/usr/bin/chromium").exists(),
            "postgresql": any(Path("/usr/lib/postgresql").glob("*/bin/initdb"))}


def _kept_rows(replaced: set[str]) -> list[Timed]:
    """The rows of the current file that this run does not re-time, each with the commit
    and date of the run that timed it (from its own cell, or the file's header)."""
    if not OUT.exists():
        return []
    header = read_header(OUT)
    before = f"{header.commit}, {header.date}" if header else "unknown"
    rows = []
    for line in OUT.read_text().splitlines():
        cells = table_cells(line)
        if len(cells) in (3, 4) and cells[0].startswith("make ") and cells[0] not in replaced:
            rows.append(Timed(cells[0], float(cells[1]), cells[2],
                              cells[3] if len(cells) == 4 else before))
    return rows


def write(rows: list[Timed], command: str, apt_before: dict[str, bool],
          started: Started) -> None:
    order = {"make run": 0, "make test": 1}
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = [dataclasses.replace(row, measured_on=f"{started.commit}, {now}") for row in rows]
    rows = sorted(rows + _kept_rows({r.command for r in rows}), key=lambda r: order[r.command])
    apt = ", ".join(f"{name} {'already installed' if present else 'installed by the run'}"
                    for name, present in apt_before.items())
    lines = result_header(command, budget="wall", started=started)
    lines += [f"A fresh clone of this checkout; each command builds its own virtual "
              f"environment from nothing. Debian packages: {apt}.", "",
              "Rows this run did not re-time (`--only`) keep the commit and date of the run "
              "that timed them.", "",
              "| command | wall time (s) | outcome | measured on |", "|---|---|---|---|"]
    lines += [f"| {row.command} | {row.wall_s:.0f} | {row.outcome} | {row.measured_on} |"
              for row in rows]
    OUT.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.two_commands",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="clone into this folder and keep it")
    parser.add_argument("--only", choices=("run", "test"), help="time one command; the "
                        "file keeps the other's row")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    started = start()
    apt_before = apt_packages()
    into = args.keep or Path(tempfile.mkdtemp(prefix="ppsched-two-commands-"))
    into.mkdir(parents=True, exist_ok=True)
    try:
        repo = _clone(into)
        # What the run measures is the clone, a clean copy of HEAD (without this
        # checkout's uncommitted changes): its header names the clone's commit, which a
        # commit made here during the 45 minutes of `make test` does not make dirty.
        started = dataclasses.replace(started, commit=commit(repo), of_a_copy=True)
        rows = ([time_make_run(repo)] if args.only != "test" else []) + \
            ([time_make_test(repo)] if args.only != "run" else [])
    finally:
        if args.keep is None:
            shutil.rmtree(into, ignore_errors=True)
    for row in rows:
        log.info("%s: %.0f s, %s", row.command, row.wall_s, row.outcome)
    write(rows, "python -m benchmarks.two_commands" + (f" --only {args.only}" if args.only
                                                         else ""), apt_before, started)
    ok = all(row.outcome.startswith(("exit 0", "the service answered")) for row in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
