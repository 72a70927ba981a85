"""Lowering a schedule to one rank's plan: its ops, and the messages each op sends and awaits.

Pure functions over the schedule JSON (no torch): which activation or gradient crosses
which rank boundary, and in which order each sender emits them, so that a receiver can
post its receives in exactly the sender's order (the only order NCCL can match, since its
point-to-point ops carry no tags; gloo matches it too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ppsched.solver.model import Op, Schedule, parts
from ppsched.solver.sim import simulate

MessageKind = Literal["activation", "gradient"]


@dataclass(frozen=True)
class Message:
    """One tensor crossing a stage boundary for one microbatch.

    An ``activation`` goes from stage ``s`` to ``s+1`` after ``F(s, j)``; a ``gradient``
    goes from stage ``s+1`` to ``s`` after ``B(s+1, j)`` (or ``BW``).
    """

    kind: MessageKind
    src_stage: int
    dst_stage: int
    microbatch: int
    src_rank: int
    dst_rank: int

    def describe(self) -> str:
        return (f"the {self.kind} of microbatch {self.microbatch} from stage {self.src_stage} "
                f"(rank {self.src_rank}) to stage {self.dst_stage} (rank {self.dst_rank})")


@dataclass(frozen=True)
class RankPlan:
    """What one rank does in a step, in order.

    Attributes:
        rank: this rank.
        stages: the global stages it runs, ascending.
        num_stages: stages of the whole model.
        stage_to_rank: the placement of every stage.
        ops: its ops in the schedule's order.
        needs: per op, the message from another rank it must receive first (or None).
        sends: per op, the messages it sends to other ranks when done.
        recv_order: per source rank, every message it sends to this rank, in its send order.
    """

    rank: int
    stages: tuple[int, ...]
    num_stages: int
    stage_to_rank: tuple[int, ...]
    ops: tuple[Op, ...]
    needs: tuple[Message | None, ...]
    sends: tuple[tuple[Message, ...], ...]
    recv_order: dict[int, tuple[Message, ...]]


def check_schedule(schedule: Schedule, rank: int, world_size: int,
                   stage_ids: set[int]) -> str | None:
    """Why this rank cannot run `schedule` with modules for `stage_ids`; None if it can.

    Purely local, so that a mismatch is found before any communication.
    """
    profile = schedule.profile
    problem = profile.problem
    if profile.num_ranks != world_size:
        return (f"invalid 'profile.num_ranks': got {profile.num_ranks}; expected the world "
                f"size {world_size} (one pipeline rank per process)")
    if len(schedule.ranks) != world_size:
        return (f"invalid 'ranks': got {len(schedule.ranks)} op lists; expected one per rank "
                f"({world_size})")
    expected = set(problem.rank_to_stages[rank])
    if stage_ids != expected:
        return (f"invalid 'stages' on rank {rank}: got modules for stages {sorted(stage_ids)}; "
                f"expected stages {sorted(expected)} (the schedule's {problem.placement} "
                f"placement of {problem.num_stages} stages over {world_size} ranks)")
    sim = simulate(problem, schedule.orders())
    if not sim.ok:
        head = "; ".join(v.message for v in sim.violations[:3])
        more = len(sim.violations) - 3
        return ("invalid 'ranks': the schedule breaks the cost model's contract: " + head
                + (f"; ... and {more} more" if more > 0 else "")
                + " (check it with `ppsched simulate`)")
    return None


def _messages_after(op: Op, stage_to_rank: tuple[int, ...], num_stages: int) -> list[Message]:
    s, j = op.stage, op.microbatch
    here = stage_to_rank[s]
    if op.kind == "F" and s + 1 < num_stages and stage_to_rank[s + 1] != here:
        return [Message("activation", s, s + 1, j, here, stage_to_rank[s + 1])]
    if op.kind in ("B", "BW") and s > 0 and stage_to_rank[s - 1] != here:
        return [Message("gradient", s, s - 1, j, here, stage_to_rank[s - 1])]
    return []


def _message_before(op: Op, stage_to_rank: tuple[int, ...], num_stages: int) -> Message | None:
    s, j = op.stage, op.microbatch
    here = stage_to_rank[s]
    if op.kind == "F" and s > 0 and stage_to_rank[s - 1] != here:
        return Message("activation", s - 1, s, j, stage_to_rank[s - 1], here)
    if op.kind in ("B", "BW") and s + 1 < num_stages and stage_to_rank[s + 1] != here:
        return Message("gradient", s + 1, s, j, stage_to_rank[s + 1], here)
    return None


def plan_rank(schedule: Schedule, rank: int) -> RankPlan:
    """Lower `schedule` to `rank`'s plan (the schedule is assumed checked)."""
    problem = schedule.profile.problem
    stage_to_rank, num_stages = problem.stage_to_rank, problem.num_stages
    # An FB (DESIGN.md 6.4) runs as its F then its BW: overlapping them is a GPU matter.
    orders = [[part for op in ops for part in parts(op)] for ops in schedule.orders()]
    ops = tuple(orders[rank])
    recv_order: dict[int, tuple[Message, ...]] = {}
    for src, src_ops in enumerate(orders):
        if src == rank:
            continue
        incoming = tuple(msg for op in src_ops
                         for msg in _messages_after(op, stage_to_rank, num_stages)
                         if msg.dst_rank == rank)
        if incoming:
            recv_order[src] = incoming
    return RankPlan(
        rank=rank, stages=problem.rank_to_stages[rank], num_stages=num_stages,
        stage_to_rank=stage_to_rank, ops=ops,
        needs=tuple(_message_before(op, stage_to_rank, num_stages) for op in ops),
        sends=tuple(tuple(_messages_after(op, stage_to_rank, num_stages)) for op in ops),
        recv_order=recv_order)
