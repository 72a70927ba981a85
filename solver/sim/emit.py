"""Orders in, a timed `Schedule` out: the one place the simulator meets the contract.

`solver.schedule` is the contract (the JSON's types) and knows no timing; this module
times per-rank orders with the simulator and wraps them, so every figure of an emitted
schedule is the simulator's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from ppsched.solver.model.ops import FBOp, Op, lane_of, policy_of
from ppsched.solver.model.profile import Profile
from ppsched.solver.model.schedule import (
    Lane,
    Policy,
    Schedule,
    ScheduledOp,
    ScheduleMetrics,
    SolverInfo,
    Status,
)
from ppsched.solver.sim.lane_rules import peaks_over_time
from ppsched.solver.sim.lanes import has_policy_ops
from ppsched.solver.sim.result import Simulation
from ppsched.solver.sim.simulator import validate
from pydantic import BaseModel


def schedule_from_orders(profile: Profile, orders: list[list[Op]], method: str, *,
                         status: Status = "heuristic", wall_s: float = 0.0,
                         objective: str = "cost", bound: float | None = None,
                         microbatch_order: Sequence[int] | None = None) -> Schedule:
    """Simulate and validate `orders`, and wrap them as a Schedule.

    With `microbatch_order` (DESIGN.md 6.2), microbatch j of the orders is input
    microbatch ``microbatch_order[j]``, and is timed with its values.

    Raises:
        ScheduleInvalid: when the orders break the contract (all violations listed).
    """
    sim = validate(profile.problem.reordered(microbatch_order), orders)
    return schedule_from_simulation(profile, sim, method, status=status, wall_s=wall_s,
                                    objective=objective, bound=bound,
                                    microbatch_order=microbatch_order)


def schedule_from_simulation(profile: Profile, sim: Simulation, method: str, *,
                             status: Status = "heuristic", wall_s: float = 0.0,
                             objective: str = "cost", bound: float | None = None,
                             microbatch_order: Sequence[int] | None = None,
                             ops: bool = True) -> Schedule:
    """Wrap a valid simulation as a Schedule; figures are the simulator's.

    `ops`: False keeps the simulation's orders instead of making a `ScheduledOp` of
    each op; the schedule is then for `Schedule.compact_dump` only (issue 27: at
    p=128, m=1024 the 786,432 op objects took 240 MB, the solve's peak, and 0.8 s,
    for a compact file that holds none of their times).

    The parts are built without pydantic's validation: the profile is already validated
    and the simulator's ops and figures are valid by construction, and validating 10^4
    ops costs more than timing them (the ops skip even `model_construct`, see
    `scheduled_op`).
    """
    assert sim.metrics is not None, "only a valid simulation becomes a schedule"
    metrics = ScheduleMetrics.from_metrics(sim.metrics, bound)
    value = sim.metrics.objective(objective)
    best_bound = metrics.lower_bound
    # DESIGN.md 6.3: O/L name their copy lane and a non-keep activation's ops its policy;
    # a keep-only schedule gets neither field, so its JSON is section 4's exactly.
    with_policies = has_policy_ops(sim.order)
    if with_policies and any(op.kind == "O" for row in sim.order for op in row):
        # What the host holds (DESIGN.md 6.3): an offloaded activation from O to L.
        problem = profile.problem.reordered(microbatch_order)
        metrics.host_memory = peaks_over_time(problem, sim.order, sim.start, sim.end)[1]
    ranks: list[list[ScheduledOp]]
    if not ops:
        ranks = []
    elif not with_policies:  # no lane, no policy: the common case, per op
        ranks = [_rank_ops(row, sim.start[r], sim.end[r]) for r, row in enumerate(sim.order)]
    else:
        policy = policy_of(sim.order)
        copy_lanes = profile.copy_lanes
        ranks = [[scheduled_op(op, start, end,
                               cast(Lane, lane_of(op.kind, copy_lanes))
                               if op.kind in ("O", "L") else None,
                               cast(Policy | None, policy.get((op.stage, op.microbatch)))
                               if policy else None)
                  for op, start, end in zip(ops, sim.start[r], sim.end[r], strict=True)]
                 for r, ops in enumerate(sim.order)]
    info = SolverInfo(status=status, objective=value, bound=best_bound,
                      gap=(value - best_bound) / value if value > 0 else 0.0, wall_s=wall_s)
    order = list(microbatch_order) if microbatch_order is not None and \
        list(microbatch_order) != list(range(profile.num_microbatches)) else None
    schedule = Schedule.model_construct(profile=profile, method=method, ranks=ranks,
                                        metrics=metrics, solver=info, microbatch_order=order)
    if not ops:
        schedule._orders_only = [list(row) for row in sim.order]
    return schedule


_OP_FIELDS = set(ScheduledOp.model_fields)
_new = object.__new__
_set = object.__setattr__
# BaseModel's slots, set through their descriptors: `object.__setattr__` looks them up
# by name at every call.
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def _rank_ops(ops: Sequence[Op], starts: Sequence[float | None],
              ends: Sequence[float | None]) -> list[ScheduledOp]:
    """`scheduled_op` of each of a rank's ops (no lane, no policy), inlined for plain ops:
    the Schedule's ops were a sixth of a p=8 solve (issue 11)."""
    out = []
    # One fields set for all the rank's plain ops, not a copy each: it holds every field,
    # so pydantic's `add` on an assignment (op.start = ...) changes nothing, and the
    # copies were 728 of the 1152 bytes an op took (issue 27: 786,432 ops at p=128,
    # m=1024 in V). Only an extra attribute set on one op would show in the others'
    # `model_fields_set`; nothing reads it (no `exclude_unset` dump of ops).
    fields = _OP_FIELDS.copy()
    for op, start, end in zip(ops, starts, ends, strict=True):
        if type(op) is not Op:
            out.append(scheduled_op(op, start, end))
            continue
        kind, stage, microbatch = op
        made = _new(ScheduledOp)
        _set(made, "__dict__", {"kind": kind, "stage": stage, "microbatch": microbatch,
                                "start": start, "end": end, "stage_b": None,
                                "microbatch_b": None, "lane": None, "policy": None})
        _set_fields_set(made, fields)
        _set_extra(made, {})
        _set_private(made, None)
        out.append(made)
    return out


def scheduled_op(op: Op, start: float | None, end: float | None, lane: Lane | None = None,
                 policy: Policy | None = None) -> ScheduledOp:
    """The `ScheduledOp` of `op`, exactly as `ScheduledOp.model_construct` with every
    field given would build it, at a quarter of its cost (issue 11: constructing the
    24,576 ops of a p=32, m=256 schedule took as long as the whole heuristic search).

    Only for valid ops (the simulator's): nothing is validated.
    """
    stage_b, microbatch_b = (op.stage_b, op.microbatch_b) if isinstance(op, FBOp) \
        else (None, None)
    made = _new(ScheduledOp)
    _set(made, "__dict__", {"kind": op.kind, "stage": op.stage, "microbatch": op.microbatch,
                            "start": start, "end": end, "stage_b": stage_b,
                            "microbatch_b": microbatch_b, "lane": lane, "policy": policy})
    # A set of its own: pydantic adds to it when a field is assigned (op.start = ...).
    _set(made, "__pydantic_fields_set__", _OP_FIELDS.copy())
    _set(made, "__pydantic_extra__", {})
    _set(made, "__pydantic_private__", None)
    return made
