"""Run a function on `world_size` local processes with a gloo process group (tests, benchmarks).

Each process gets one CPU thread (and, with ``pin_cores``, a core of its own), a file-based
rendezvous, and a wall-clock limit; what each rank's function returns (or the error it
raised) comes back to the caller. For real launches use ``torchrun`` (see
`runtime_adapter.run`).
"""

from __future__ import annotations

import os
import pickle
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch.multiprocessing as mp


class LaunchError(RuntimeError):
    """A rank raised, died or overran the launch's time limit.

    Attributes:
        errors: rank -> the error text it reported (its exception's last line first).
    """

    def __init__(self, errors: dict[int, str]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"rank {r}: {e}" for r, e in sorted(errors.items())))


def launch_local(fn: Callable[..., Any], world_size: int, *args: Any,
                 timeout_s: float = 120.0, threads: int = 1,
                 pin_cores: bool = False) -> list[Any]:
    """Call ``fn(rank, world_size, *args)`` on `world_size` spawned processes.

    `fn` and `args` must be picklable (a module-level function). The process group
    (gloo) is initialised before `fn` runs and destroyed after it returns. With
    `pin_cores`, rank r runs on the r-th core this process may use (modulo their number;
    Linux only), so that two ranks never share a core while one is idle: what a timing
    benchmark needs to measure the schedule rather than the OS scheduler.

    Returns:
        Each rank's return value, in rank order.

    Raises:
        LaunchError: a rank raised (its message and traceback tail), died, or was still
            running after `timeout_s` (then every rank is killed).
    """
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="ppsched-launch-") as tmp:
        init = f"file://{Path(tmp) / 'rendezvous'}"
        results = [Path(tmp) / f"rank{r}.pkl" for r in range(world_size)]
        cores = pinned_cores(world_size) if pin_cores else [None] * world_size
        procs = [ctx.Process(target=_worker, args=(fn, r, world_size, init, str(results[r]),
                                                    threads, cores[r], args), daemon=True)
                 for r in range(world_size)]
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + timeout_s
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        hung = [r for r, proc in enumerate(procs) if proc.is_alive()]
        for r in hung:
            procs[r].kill()
            procs[r].join()
        values: list[Any] = []
        errors: dict[int, str] = {}
        for r, path in enumerate(results):
            if not path.exists():
                errors[r] = (f"still running after {timeout_s:g} s (killed)" if r in hung
                             else f"died with exit code {procs[r].exitcode} and no result")
                values.append(None)
                continue
            outcome = pickle.loads(path.read_bytes())
            if "error" in outcome:
                errors[r] = outcome["error"]
            values.append(outcome.get("value"))
        if errors:
            raise LaunchError(errors)
        return values


def pinned_cores(world_size: int) -> list[int]:
    """The core each rank is pinned to: the cores this process may use, in order, reused
    modulo their number when there are more ranks than cores.

    Raises:
        RuntimeError: the platform cannot pin processes (no ``os.sched_setaffinity``).
    """
    if not hasattr(os, "sched_getaffinity"):
        raise RuntimeError("pin_cores needs os.sched_setaffinity (Linux); run unpinned")
    usable = sorted(os.sched_getaffinity(0))
    return [usable[rank % len(usable)] for rank in range(world_size)]


def _worker(fn: Callable[..., Any], rank: int, world_size: int, init: str, result: str,
            threads: int, core: int | None, args: tuple[Any, ...]) -> None:
    import torch
    import torch.distributed as dist

    if core is not None:
        os.sched_setaffinity(0, {core})  # before torch starts its threads: they inherit it
    torch.set_num_threads(threads)
    outcome: dict[str, Any]
    try:
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world_size)
        outcome = {"value": fn(rank, world_size, *args)}
    except BaseException as exc:  # reported to the parent, whatever it was
        outcome = {"error": f"{type(exc).__name__}: {exc}\n"
                            + "".join(traceback.format_exc().splitlines(True)[-6:])}
    Path(result + ".tmp").write_bytes(pickle.dumps(outcome))
    os.replace(result + ".tmp", result)
    if "error" in outcome:
        os._exit(1)  # peers may be gone; do not wait in a collective teardown
    dist.destroy_process_group()
