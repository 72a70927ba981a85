"""A process and its descendants, read from Linux's /proc: who they are and the CPU they
used. Result headers count a benchmark's CPU with it (workers of a process pool not yet
reaped included); the service benchmarks measure a server and the processes it forks."""

from __future__ import annotations

import os
from pathlib import Path


def family(pid: int) -> set[int]:
    """A process and all its live descendants (Linux /proc)."""
    parent_of: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # The command name (field 2) may hold spaces; ppid is the 2nd field after it.
            parent_of[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    family, grew = {pid}, True
    while grew:
        kids = {child for child, parent in parent_of.items() if parent in family}
        grew = not kids <= family
        family |= kids
    return family


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of a process and its descendants (Linux /proc): each
    live one's own and that of the children it has reaped, so a job's process counts
    once it ends (the fork server reaps the jobs it forked)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for member in family(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(fields[i]) for i in (11, 12, 13, 14))
    return total / ticks
