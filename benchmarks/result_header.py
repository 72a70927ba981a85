"""The lines a result file opens with: what made it, on which commit, when, where.

A figure is only as good as what it was measured on: the command that wrote it, the
commit of the code (with ``+dirty`` where the tree had changes), the date, the machine's
cores and load before and after the run (shared machines: a wall-clock figure means little
without it), the CPU time the run took, and the kind of budget the solver ran under
(``deterministic``: the answers repeat on any load; ``wall``: some figure depends on the
wall clock, so on the load).

Which file carries a result file's header (`carrier`):

- ``NAME.md``: its first line;
- ``NAME.json``: its top-level ``"header"`` object (`header_fields`);
- any other file (``NAME.csv``, ``NAME.png``): the companion ``NAME.md`` beside it, written
  by the same run, since a CSV or an image has no room for prose.

A benchmark calls `start` first and `result_header` (or `header_fields`) when it writes,
so that the load is taken at both ends. `python -m benchmarks.freshness` reads the headers
back (`read_header`).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.process_tree import tree_cpu_s

ROOT = Path(__file__).resolve().parent.parent

BUDGETS = ("deterministic", "wall")
"""The budget kinds a header may name (its first word after ``budget:``)."""

# What a result never depends on: the results themselves, the docs that show them and
# the scratch folder. A change anywhere else in the tracked tree marks the commit dirty.
_NOT_MEASURED = ("benchmarks/results", "docs", "README.md", "out")


@dataclass(frozen=True)
class Started:
    """What `start` took at the beginning of a run."""

    load: float
    """The 1-minute load average."""
    cpu: float
    """CPU seconds so far, this process and its descendants, reaped or alive (`_cpu_s`)."""
    commit: str = "unknown"
    """`commit` when the run began: the code it loaded."""
    of_a_copy: bool = False
    """The run measured a copy made at its start (`benchmarks.two_commands`' clone of
    `commit`), which nothing done to this checkout afterwards reaches: its header names
    `commit` as it is, never ``+dirty`` for a change committed here meanwhile."""


def start() -> Started:
    """Take the load (and the CPU clock) at the beginning of a benchmark."""
    return Started(os.getloadavg()[0], _cpu_s(), commit())


def _cpu_s() -> float:
    """The CPU seconds of this process and its descendants, reaped or alive: a benchmark
    that writes its header inside a process pool's block (`benchmarks.ilp_layouts`) has
    not reaped its workers yet, and `os.times` alone then reports the parent's fraction
    of a second, which `benchmarks.freshness` would take for a short run."""
    return tree_cpu_s(os.getpid())


def commit(root: Path = ROOT) -> str:
    """The checkout's commit, ``+dirty`` when a tracked file outside the results and the
    docs differs from it or an untracked, not ignored file lies there. Outside a git
    checkout (a copy of the tree sent to a lent GPU machine), ``$PPSCHED_RESULT_COMMIT``
    names the commit the copy was made from, else ``unknown``."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        changes = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", ".",
             *(f":(exclude){path}" for path in _NOT_MEASURED)],
            capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("PPSCHED_RESULT_COMMIT", "unknown")
    return head + ("+dirty" if changes else "")


def _run_commit(started: Started, root: Path = ROOT) -> str:
    """The commit a run measured: the one it began on, ``+dirty`` when measured code changed
    before it wrote (a commit of results alone, between two benchmarks, changes nothing)."""
    if started.of_a_copy:
        return started.commit
    now = commit(root)
    if started.commit == now or "unknown" in (started.commit, now):
        return now
    if started.commit.endswith("+dirty") or now.endswith("+dirty"):
        return started.commit if started.commit.endswith("+dirty") else now
    same = subprocess.run(
        ["git", "-C", str(root), "diff", "--quiet", started.commit, now, "--", ".",
         *(f":(exclude){path}" for path in _NOT_MEASURED)], check=False).returncode == 0
    return now if same else started.commit + "+dirty"


def command_line(module: str, argv: list[str] | None = None) -> str:
    """``python -m MODULE ARGS``: how a benchmark was invoked (default: this process's
    arguments), for the header to name the command that regenerates the file."""
    args = sys.argv[1:] if argv is None else argv
    return " ".join(["python -m", module, *(shlex.quote(a) for a in args)])


def without_paths(argv: list[str] | None = None) -> list[str]:
    """`argv` (default: this process's arguments) with the folder after ``--reference``
    written ``DIR``: a folder outside the repository (the Zero Bubble authors' code,
    see the module that takes it) means nothing on another machine."""
    args = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(args):
        if arg == "--reference" and i + 1 < len(args):
            args[i + 1] = "DIR"
        elif arg.startswith("--reference="):
            args[i] = "--reference=DIR"
    return args


def header_fields(command: str, *, budget: str, started: Started) -> dict[str, Any]:
    """The header as a JSON object (a ``.json`` result's ``"header"`` key).

    Raises:
        ValueError: `budget` does not begin with one of `BUDGETS`.
    """
    if budget.split(" ", 1)[0] not in BUDGETS:
        raise ValueError(f"budget {budget!r} must begin with one of {', '.join(BUDGETS)}")
    return {"command": command, "commit": _run_commit(started),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "load_before": round(started.load, 2), "load_after": round(os.getloadavg()[0], 2),
            "cpu_s": round(_cpu_s() - started.cpu, 1), "budget": budget}


def result_header(command: str, *, budget: str, started: Started) -> list[str]:
    """Markdown lines (ending with a blank one) naming the command, commit, date, machine,
    load before and after, CPU time and budget kind."""
    return [header_line(header_fields(command, budget=budget, started=started)), ""]


def header_line(fields: dict[str, Any]) -> str:
    """The one Markdown line of `header_fields`."""
    return (f"Made by `{fields['command']}` on commit {fields['commit']}, {fields['date']}; "
            f"machine {fields['machine']}, {fields['cores']} cores, load average "
            f"{fields['load_before']:.2f} before and {fields['load_after']:.2f} after, "
            f"{fields['cpu_s']:.1f} s of CPU; budget: {fields['budget']}.")


_LINE = re.compile(
    r"^Made by `(?P<command>[^`]+)` on commit (?P<commit>[0-9a-f]{7,40}(?:\+dirty)?|unknown), "
    r"(?P<date>\d{4}-\d\d-\d\d \d\d:\d\d UTC); (?P<rest>.*)$")
_LOADS = re.compile(r"load average (?P<before>[\d.]+) before and (?P<after>[\d.]+) after")
_BUDGET = re.compile(r"; budget: (?P<budget>.+)\.$")
_CPU = re.compile(r"(?P<cpu>[\d.]+) s of CPU")


@dataclass(frozen=True)
class Header:
    """A header read back: what `freshness` checks."""

    command: str
    commit: str
    date: str
    load_before: float | None
    load_after: float | None
    budget: str | None
    cpu_s: float | None = None
    """The CPU seconds the run took, as its header records them."""

    @property
    def budget_kind(self) -> str | None:
        """The budget's first word when it is one of `BUDGETS`."""
        kind = (self.budget or "").split(" ", 1)[0]
        return kind if kind in BUDGETS else None


def carrier(path: Path) -> Path:
    """The file that holds `path`'s header: itself for ``.md`` and ``.json``, else the
    ``.md`` of the same stem beside it."""
    return path if path.suffix in (".md", ".json") else path.with_suffix(".md")


def parse_line(line: str) -> Header | None:
    """The header of a Markdown result's first line; None when it is not one."""
    match = _LINE.match(line.strip())
    if match is None:
        return None
    loads = _LOADS.search(match["rest"])
    budget = _BUDGET.search(match["rest"])
    cpu = _CPU.search(match["rest"])
    return Header(match["command"], match["commit"], match["date"],
                  float(loads["before"]) if loads else None,
                  float(loads["after"]) if loads else None,
                  budget["budget"] if budget else None,
                  float(cpu["cpu"]) if cpu else None)


def read_header(path: Path) -> Header | None:
    """The header `path` carries (see `carrier` for a file that carries none itself);
    None when the carrier is missing or holds no header."""
    source = carrier(path)
    try:
        text = source.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    if source.suffix == ".md":
        return parse_line(text.split("\n", 1)[0])
    try:
        fields = json.loads(text).get("header")
        return Header(fields["command"], fields["commit"], fields["date"],
                      fields.get("load_before"), fields.get("load_after"),
                      fields.get("budget"), fields.get("cpu_s"))
    except (ValueError, AttributeError, KeyError, TypeError):
        return None
