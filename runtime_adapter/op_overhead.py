"""The executor's own time per op (``t_op``, the cost model's per-op overhead): measured
on the ranks of a group as the gaps between an op and the next on a rank, where the next op
had nothing left to wait for.

A pipelined step spends time that no op's kernel accounts for: posting the sends and
receives of each op, the bookkeeping of the B/W split, Python between ops. The cost model
adds it to every compute op (`t_op`). Measured here on the ranks' own device with a stage
so small its compute is negligible: a recorded 1F1B step of a one-Linear stage per rank,
and the median, over the ops whose cross-rank input had arrived before the previous op
ended, of the time from that previous op's end to the op's start.
"""

from __future__ import annotations

import itertools
import statistics

import torch
import torch.distributed as dist
from ppsched.runtime_adapter.executor import PipelineExecutor
from ppsched.runtime_adapter.timeline import OpRecord, gather_records
from ppsched.solver.model import Op, parse_profile
from ppsched.solver.solving import solve
from torch import nn

_HIDDEN = 8


def measure_t_op(group: dist.ProcessGroup | None = None, *, device: torch.device | None = None,
                 microbatches_per_rank: int = 4, steps: int = 3) -> float:
    """The per-op overhead in ms on the ranks of `group` (a collective; every rank gets
    the same value).

    Raises:
        ValueError: fewer than 1 step or microbatch.
    """
    if steps < 1 or microbatches_per_rank < 1:
        raise ValueError(f"invalid 'steps'/'microbatches_per_rank': got {steps}/"
                         f"{microbatches_per_rank}; expected integers >= 1")
    p, rank = dist.get_world_size(group), dist.get_rank(group)
    device = device or torch.device("cpu")
    m = microbatches_per_rank * p
    schedule = solve(parse_profile({"num_ranks": p, "num_microbatches": m, "t_f": 1.0,
                                    "t_b": 1.0, "t_w": 1.0, "m_b": 1.0, "m_w": 0.5}), "1f1b")
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(0)
        stage = nn.Sequential(nn.Linear(_HIDDEN, _HIDDEN)).to(device)
    executor = PipelineExecutor(schedule, {rank: stage}, nn.functional.mse_loss, group=group)
    inputs = [torch.zeros(1, _HIDDEN, device=device) for _ in range(m)]
    gaps: list[float] = []
    for step in range(steps + 1):  # the first is warm-up (the layout handshake)
        result = executor.run(inputs, inputs, record=True)
        per_rank = gather_records(result.records, group)
        if step:
            gaps += _free_gaps(per_rank)
    value = torch.tensor([statistics.median(gaps) * 1e3 if gaps else 0.0],
                         dtype=torch.float64)
    dist.broadcast(value, dist.get_global_rank(group, 0) if group is not None else 0, group)
    return float(value.item())


def _free_gaps(per_rank: list[list[OpRecord]]) -> list[float]:
    """Seconds from each op's end to the next op's start on its rank, for the next ops
    whose cross-rank input (one stage per rank: F from the rank before, B from the rank
    after) had ended before that op ended."""
    ended = {(r.kind, r.stage, r.microbatch): r.end_s for recs in per_rank for r in recs}
    last = len(per_rank) - 1
    gaps = []
    for recs in per_rank:
        for before, after in itertools.pairwise(recs):
            needs = _cross_rank_input(after.op, last)
            if needs is not None and ended.get(needs, float("inf")) > before.end_s:
                continue  # it may have waited for its input: not overhead alone
            gaps.append(max(after.start_s - before.end_s, 0.0))
    return gaps


def _cross_rank_input(op: Op, last: int) -> tuple[str, int, int] | None:
    if op.kind == "F" and op.stage > 0:
        return ("F", op.stage - 1, op.microbatch)
    if op.kind in ("B", "BW") and op.stage < last:
        return ("B", op.stage + 1, op.microbatch)
    return None
