"""Timing pipeline steps side by side on a process group (the runtime benchmarks' loop)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from ppsched.runtime_adapter.executor import PipelineExecutor
from ppsched.runtime_adapter.timeline import gather_records

Key = TypeVar("Key", bound=Hashable)


def time_steps(executors: Mapping[Key, PipelineExecutor], inputs: Sequence[Any],
               targets: Sequence[Any], *, warmup: int, steps: int,
               ) -> tuple[dict[Key, float], dict[Key, Any]]:
    """Run every executor's step in turn (round robin, step by step, so that drift hits
    all alike): `warmup` untimed rounds, `steps` timed ones, then one recorded round.

    Returns, per executor, the median step time in ms (each step the slower rank's
    ``run``, after a barrier) and the gathered records of the last round. A collective:
    every rank of the group calls it with the same executors in the same order.
    """
    times: dict[Key, list[float]] = {key: [] for key in executors}
    records: dict[Key, Any] = {}
    for step in range(warmup + steps + 1):
        last = step == warmup + steps
        for key, executor in executors.items():
            dist.barrier()
            t0 = time.perf_counter()
            result = executor.run(inputs, targets, record=last)
            elapsed = torch.tensor([time.perf_counter() - t0])
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slower rank's step
            if last:
                records[key] = gather_records(result.records)
            elif step >= warmup:
                times[key].append(elapsed.item() * 1e3)
    return {key: statistics.median(t) for key, t in times.items()}, records
