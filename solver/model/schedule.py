"""The schedule JSON (DESIGN.md section 4): the solver's output, and its reading back.

`Schedule` is the pydantic edge type. This module is the contract only: it knows
neither the simulator nor any algorithm; `solver.emit` builds a Schedule from per-rank
orders by simulating them, so every figure in it comes from the simulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

from ppsched.solver.model.compact import ENCODING, decode_ranks, encode_rank, encode_scheduled
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import FBOp, Kind, Op, lane_of, policy_of
from ppsched.solver.model.problem import ACCEPTED, Problem
from ppsched.solver.model.profile import Profile, profile_error_from
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

SCHEMA_VERSION = 1
Status = Literal["optimal", "feasible", "heuristic", "infeasible", "timeout"]
Lane = Literal["d2h", "h2d", "copy"]
Policy = Literal["keep", "recompute", "offload"]


class TimedFigures(Protocol):
    """What `ScheduleMetrics.from_metrics` reads (the simulator's `Metrics` has it)."""

    @property
    def cost(self) -> float: ...
    @property
    def makespan(self) -> float: ...
    @property
    def bubble_rate(self) -> float: ...
    @property
    def peak_memory(self) -> Sequence[float]: ...
    @property
    def lower_bound(self) -> float: ...
    @property
    def span(self) -> Sequence[float]: ...
    @property
    def idle_fraction(self) -> Sequence[float]: ...


class ScheduledOp(BaseModel):
    """One op in a rank's order, with its simulated start and end."""

    model_config = ConfigDict(extra="allow")

    kind: Kind = Field(description="F, B (input gradient), W (weight gradient), BW (fused), "
                       "FB (F overlapped with a BW, DESIGN.md 6.4), or R (recompute), O "
                       "(offload, device to host), L (reload, host to device) (6.3).")
    stage: int = Field(ge=0, description="Global stage index (DESIGN.md section 1); "
                       "of the forward part for an FB.")
    microbatch: int = Field(ge=0, description="Microbatch index, 0..m-1.")
    start: float | None = Field(None, description="Simulated start (section 3).")
    end: float | None = Field(None, description="Simulated end (section 3).")
    stage_b: int | None = Field(None, ge=0, description="FB only: the BW part's stage.")
    microbatch_b: int | None = Field(None, ge=0,
                                     description="FB only: the BW part's microbatch.")
    lane: Lane | None = Field(None, description="O and L only (DESIGN.md 6.3): the copy "
                              "lane, d2h / h2d with 2 copy lanes, copy with 1.")
    policy: Policy | None = Field(None, description="DESIGN.md 6.3: what the schedule does "
                                  "with this (stage, microbatch)'s activation; absent: keep.")

    @model_validator(mode="after")
    def _check_fb(self) -> ScheduledOp:
        has_b = (self.stage_b is not None, self.microbatch_b is not None)
        if self.kind == "FB" and not all(has_b):
            raise ValueError("an FB op needs stage_b and microbatch_b (its BW part)")
        if self.kind != "FB" and any(has_b):
            raise ValueError(f"stage_b and microbatch_b belong to FB ops only, not "
                             f"{self.kind}")
        if self.lane is not None and self.kind not in ("O", "L"):
            raise ValueError(f"lane belongs to O and L ops only, not {self.kind}")
        return self

    @model_serializer(mode="wrap")
    def _drop_fb_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Ops other than FB keep the JSON of DESIGN.md section 4, without null FB fields;
        # an op without lane or policy (a keep schedule's) writes neither.
        data: dict[str, Any] = handler(self)
        if self.kind != "FB":
            data.pop("stage_b", None)
            data.pop("microbatch_b", None)
        for name in ("lane", "policy"):
            if data.get(name, 0) is None:
                del data[name]
        return data

    @property
    def op(self) -> Op:
        if self.kind == "FB":
            assert self.stage_b is not None and self.microbatch_b is not None
            return FBOp(self.stage, self.microbatch, self.stage_b, self.microbatch_b)
        return Op(self.kind, self.stage, self.microbatch)


class ScheduleMetrics(BaseModel):
    """Figures of the timed schedule (DESIGN.md section 3); extra per-rank detail added."""

    model_config = ConfigDict(extra="allow")

    cost: float = Field(description="Largest per-rank span (the default objective).")
    makespan: float = Field(description="First start to last end over all ranks.")
    bubble_rate: float = Field(description="(cost - busiest rank's op time) / cost.")
    peak_memory: list[float] = Field(description="Peak activation memory, per rank.")
    lower_bound: float = Field(description="A provable lower bound on the objective.")
    span: list[float] | None = Field(None, description="Each rank's span.")
    idle_fraction: list[float] | None = Field(
        None, description="Per rank, the share of its own span it is idle.")
    host_memory: list[float] | None = Field(
        None, description="Peak activation memory held on the host by offloads (O to L), "
        "per rank; absent from a schedule without offload.")

    @model_serializer(mode="wrap")
    def _drop_absent_host_memory(self, handler: SerializerFunctionWrapHandler,
                                 ) -> dict[str, Any]:
        # A schedule without offload serialises exactly as before the field existed (the
        # same JSON, the same content hashes in the service's store).
        data: dict[str, Any] = handler(self)
        if data.get("host_memory", 0) is None:
            del data["host_memory"]
        return data

    @classmethod
    def from_metrics(cls, metrics: TimedFigures,
                     lower_bound: float | None = None) -> ScheduleMetrics:
        return cls(cost=metrics.cost, makespan=metrics.makespan,
                   bubble_rate=metrics.bubble_rate, peak_memory=list(metrics.peak_memory),
                   lower_bound=max(metrics.lower_bound, lower_bound or 0.0),
                   span=list(metrics.span), idle_fraction=list(metrics.idle_fraction))


class SolverInfo(BaseModel):
    """How the schedule was found: status, objective, proven bound, gap, wall time."""

    model_config = ConfigDict(extra="allow")

    status: Status
    objective: float
    bound: float
    gap: float = Field(description="(objective - bound) / objective.")
    wall_s: float
    backend: str | None = Field(None, description="Exact backend of method ilp.")
    fifo: bool | None = Field(
        None, description="Whether the exact model kept each op kind in microbatch order "
        "per stage (its bound holds over those orders).")
    bound_without_fb: float | None = Field(
        None, description="Method ilp with overlap < 1: the exact model's bound, which holds "
        "only over schedules without FB ops (DESIGN.md 6.4), so it is not `bound`.")
    progress: list[list[float]] | None = Field(
        None, description="Exact search: [seconds, best objective, bound] at each "
        "improvement.")
    bound_scope: str | None = Field(
        None, description="The schedules `bound` holds over: 'all schedules of layouts "
        "1, v, loop2' (as metrics.lower_bound: every layout the solve considered, "
        "DESIGN.md 6.6), or the order family of the exact model that proved it on the "
        "answer's layout (e.g. FIFO orders, objective cost, layout v) with the other "
        "layouts named, ending ', in this microbatch_order' where the order of entry was "
        "chosen first. Absent: a schedule not made by solve.")
    layout: str | None = Field(
        None, description="The layout of the answer: 1 (one stage per rank), v or loopN "
        "(the profile cut as DESIGN.md 6.6 says; `profile` echoes the cut).")
    layouts: list[str] | None = Field(
        None, description="Every layout the solve considered; metrics.lower_bound holds "
        "over all of their schedules.")
    layout_bounds: dict[str, float] | None = Field(
        None, description="Each considered layout's own lower bound, over every schedule "
        "of that layout; metrics.lower_bound is the least of them.")
    work: float | None = Field(
        None, description="Exact search on CP-SAT: the deterministic time its solves spent "
        "(OR-Tools' count of search work, scaled to about a second each): what a wall "
        "budget bought, the unit of a work limit, the same on any load under one. Absent: "
        "no CP-SAT search.")


class Schedule(BaseModel):
    """A schedule: the profile it was solved for, per-rank orders with times, figures."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    profile: Profile
    method: str = Field("custom", description="What made the schedule.")
    ranks: list[list[ScheduledOp]]
    metrics: ScheduleMetrics | None = None
    solver: SolverInfo | None = None
    microbatch_order: list[int] | None = Field(
        None, description="DESIGN.md 6.2: the input microbatch that each microbatch j of "
        "the ops is (a permutation of 0..m-1); absent: j is input microbatch j.")
    ops_encoding: Literal["actions"] | None = Field(
        None, description="'actions' where the JSON's ranks are compact (`solve "
        "--compact`, `model.compact`): each rank one string of actions in torch's syntax, "
        "e.g. \"0F0,0F1,0I0,0W0\" (our B is torch's I, our BW torch's B, an FB "
        "\"(0F3;7B2)OVERLAP_F_B\", and R, O, L keep our letters), without start and end; "
        "a reader re-times them with the simulator. Absent: one object per op (DESIGN.md "
        "section 4). Reading accepts either form per rank whatever this says.")
    # The orders of a schedule built without its per-op objects (`solver.solve` with
    # ``ops=False``, for compact output only): `ranks` is then empty.
    _orders_only: list[list[Op]] | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _decode_compact(cls, data: Any) -> Any:
        # Compact ranks (strings) become op objects without times before validation.
        return decode_ranks(data)

    @model_validator(mode="after")
    def _check_order(self) -> Schedule:
        if self.microbatch_order is not None:
            self.problem()  # raises ProfileError unless a permutation of 0..m-1
        self._check_lanes_and_policies()
        return self

    def _check_lanes_and_policies(self) -> None:
        """Each O/L's lane is the one its profile's ``copy_lanes`` gives, and each op's
        policy is the one its (stage, microbatch)'s R or O implies (DESIGN.md 6.3).

        Raises:
            ProfileError: naming the op's field (``ranks.0.3.lane``), the value, and the
                value its profile and ops imply.
        """
        has_fields = any(op.lane is not None or op.policy is not None
                         for rank in self.ranks for op in rank)
        if not has_fields:
            return
        implied = policy_of(self.orders())
        copy_lanes = self.profile.copy_lanes
        for r, rank in enumerate(self.ranks):
            for i, op in enumerate(rank):
                lane = lane_of(op.kind, copy_lanes)
                if op.lane is not None and op.lane != lane:
                    raise ProfileError(f"ranks.{r}.{i}.lane", op.lane,
                                       f"'{lane}' for an {op.kind} with copy_lanes "
                                       f"{copy_lanes}")
                policy = implied.get((op.stage, op.microbatch), "keep")
                if op.policy is not None and op.policy != policy:
                    raise ProfileError(f"ranks.{r}.{i}.policy", op.policy,
                                       f"'{policy}' for stage {op.stage} microbatch "
                                       f"{op.microbatch} (an R means recompute, an O "
                                       "offload, neither keep)")

    @model_serializer(mode="wrap")
    def _drop_absent_order(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        if self._orders_only is not None:
            raise ValueError("this schedule was built without its ops (solve with "
                             "ops=False): only compact_dump() writes it")
        # Without an order the JSON is DESIGN.md section 4's exactly.
        data: dict[str, Any] = handler(self)
        for name in ("microbatch_order", "ops_encoding"):
            if data.get(name, 0) is None:
                del data[name]
        return data

    def compact_dump(self) -> dict[str, Any]:
        """The JSON-ready dict of the schedule with compact ranks (`ops_encoding`
        'actions', see `model.compact`): each rank one string, no per-op times."""
        # The ops are encoded from the orders, not serialized and replaced: at 10^6 ops
        # their per-op objects are most of a solve's output time.
        rest = self.model_copy(update={"ranks": []})
        rest._orders_only = None
        data = rest.model_dump(mode="json")
        if self._orders_only is not None:
            data["ranks"] = [encode_rank(ops) for ops in self._orders_only]
        else:
            data["ranks"] = [encode_scheduled(rank) for rank in self.ranks]
        data["ops_encoding"] = ENCODING
        return data

    def problem(self) -> Problem:
        """The problem the ops are timed with: the profile's, its microbatches taken in
        `microbatch_order`."""
        return self.profile.problem.reordered(self.microbatch_order)

    def orders(self) -> list[list[Op]]:
        """The per-rank op orders, without times."""
        if self._orders_only is not None:
            return [list(ops) for ops in self._orders_only]
        return [[x.op for x in rank] for rank in self.ranks]

    @property
    def has_ops(self) -> bool:
        """Whether `ranks` holds the ops (not a schedule built for compact output only,
        see `compact_dump`)."""
        return self._orders_only is None

    def require_times(self) -> None:
        """Raise ValueError naming the first op without a start or end (views need times)."""
        if self._orders_only is not None:
            raise ValueError("the schedule was built without its ops (solve with "
                             "ops=False), so it has no times; solve with ops=True")
        for r, rank in enumerate(self.ranks):
            for i, op in enumerate(rank):
                if op.start is None or op.end is None:
                    raise ValueError(f"rank {r} op {i} ({op.kind}{op.microbatch} stage "
                                     f"{op.stage}) has no start/end; time the orders first "
                                     "with ppsched.solver.sim.emit.schedule_from_orders(profile, "
                                     "schedule.orders(), "
                                     "method)")


def parse_schedule(data: Any) -> Schedule:
    """Validate a decoded schedule JSON (times and figures, if present, are ignored later).

    Raises:
        ProfileError: naming the offending field (``profile.t_b``, ``ranks.0.3.kind``...).
    """
    try:
        return Schedule.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        named = error.get("ctx", {}).get("error")
        if isinstance(named, ProfileError):  # raised by a validator, field already named
            raise named from None
        if error["loc"] and error["loc"][0] == "profile" and isinstance(data, dict):
            inner = profile_error_from(exc, data.get("profile"))
            # Re-root the field under 'profile' for the message.
            if inner.field in ACCEPTED or inner.field == "profile":
                return _raise(ProfileError(f"profile.{inner.field}".replace(
                    "profile.profile", "profile"), inner.value, inner.accepted))
            return _raise(inner)
        loc = ".".join(str(x) for x in error["loc"])
        if error["type"] == "missing":
            raise ProfileError(loc, "nothing", "a value (required)") from None
        raise ProfileError(loc or "schedule", error.get("input"), error["msg"]) from None


def _raise(error: ProfileError) -> Schedule:
    raise error from None
