"""The lines a result file opens with: what made it, on which commit, when, where.

A figure is only as good as what it was measured on: the command that wrote it, the
commit of the code (with ``+dirty`` where the tree had changes), the date, the machine's
cores and load (shared machines: a wall-clock figure means little without it) and the
kind of budget the solver ran under (deterministic answers repeat on any load).
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def commit() -> str:
    """The checkout's commit, ``+dirty`` when tracked files differ from it; ``unknown``
    outside a git checkout."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--",
                                "solver", "api", "runtime_adapter", "benchmarks"],
                               check=False).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def result_header(command: str, *, budget: str) -> list[str]:
    """Markdown lines (ending with a blank one) naming the command, commit, date, machine,
    load and budget kind."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = platform.processor() or platform.machine()
    return [f"Made by `{command}` on commit {commit()}, {today}; machine {machine}, "
            f"{os.cpu_count()} cores, load average {load} when written; budget: {budget}.",
            ""]
