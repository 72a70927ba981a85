"""After a peer failure, which ranks are gone: heartbeats through the process group's
store.

A backend error names at best an address, and in a chain of ranks the survivors far from
the dead one see only their neighbour fail (it stopped when its own neighbour died). So
every engine's process beats: a daemon thread increments its rank's counter in the store
every rank of the job shares (torchrun's, or the launcher's) once per `BEAT_S`, while the
main thread computes or sits in a backend wait. A rank that fails reads the counters twice,
`WATCH_S` apart: a rank whose counter did not move is dead (its process is gone or hung
whole); a live rank still blocked in a wait keeps beating. A rank that fails marks itself
first, so that once it has exited it is told apart from the rank that died.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import torch.distributed as dist

BEAT_S = 0.5
WATCH_S = 2.5  # five beats: a loaded machine may delay one or two

_started: set[int] = set()
_lock = threading.Lock()


def _store() -> Any:
    # The default group's store: torch offers it only through this private accessor; every
    # rank of the job reaches the same one.
    return dist.distributed_c10d._get_default_store()


def _key(rank: int) -> str:
    return f"ppsched/heartbeat/{rank}"


def start() -> None:
    """Start this process's heartbeat into the current job's store (once per store: a
    process that builds several engines beats once; a new process group, a new store,
    gets a new beat)."""
    rank = dist.get_rank()
    try:
        store = _store()
    except (RuntimeError, ValueError):
        return  # no shared store: failures will name the neighbour only
    with _lock:
        if id(store) in _started:
            return
        _started.add(id(store))

    def beat() -> None:
        while True:
            try:
                store.add(_key(rank), 1)
            except Exception:  # the store went away with the job: stop beating
                return
            time.sleep(BEAT_S)

    threading.Thread(target=beat, name="ppsched-heartbeat", daemon=True).start()


def dead_ranks(group: dist.ProcessGroup | None, *, watch_s: float = WATCH_S,
               ) -> tuple[list[int], list[int]]:
    """Mark this rank failed; then (dead, failed): the global ranks of `group` other than
    this one whose heartbeat did not move in `watch_s` seconds without their having
    failed first, and those that failed (each sorted); ([], []) when the store cannot be
    read."""
    ranks = dist.get_process_group_ranks(group) if group is not None else \
        list(range(dist.get_world_size()))
    others = [r for r in ranks if r != dist.get_rank()]
    try:
        store = _store()
        store.set(f"ppsched/failed/{dist.get_rank()}", "1")
        before = {r: store.add(_key(r), 0) for r in others}
        time.sleep(watch_s)
        after = {r: store.add(_key(r), 0) for r in others}
        failed = [r for r in others if store.check([f"ppsched/failed/{r}"])]
    except Exception:  # a store error must not hide the failure itself
        return [], []
    return [r for r in others if after[r] == before[r] and r not in failed], failed


def describe(dead: list[int], failed: list[int]) -> str:
    said = ("every other rank's heartbeat is alive" if not dead else
            f"rank(s) {', '.join(str(r) for r in dead)} stopped beating (dead or hung whole)")
    if failed:
        said += f"; rank(s) {', '.join(str(r) for r in failed)} failed too"
    return said
