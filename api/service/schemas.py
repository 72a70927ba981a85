"""Request and response bodies of the service (``extra="forbid"``), with their examples.

The profile and schedule themselves are the solver's types (DESIGN.md sections 2 and 4);
a request carries the profile as a JSON object so the service's limits on ``p``, ``m``
and ``v`` are checked before the profile is resolved.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

PROFILE_REF = {"allOf": [{"$ref": "#/components/schemas/Profile"}]}
SCHEDULE_REF = {"$ref": "#/components/schemas/Schedule"}

# Identical unit stages, no latency (profiles/uniform-p4-m8.json): small and fast.
EXAMPLE_PROFILE: dict[str, Any] = {
    "name": "uniform-p4-m8", "num_ranks": 4, "num_microbatches": 8, "t_f": 1.0, "t_b": 1.0,
    "t_w": 1.0, "t_comm": 0.0, "m_b": 1.0, "m_w": 0.5, "memory_limit": None}


class ScheduleRequest(BaseModel):
    """What to solve: a profile and the options of `ppsched solve`."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"profile": EXAMPLE_PROFILE, "method": "heuristic"}]})

    profile: Annotated[dict[str, Any], WithJsonSchema(PROFILE_REF)] = Field(
        description="The profile (DESIGN.md section 2).")
    method: str = Field("heuristic", description="heuristic, ilp, or a named schedule "
                        "(GET /v1/methods).")
    objective: Literal["cost", "makespan"] = Field(
        "cost", description="cost (largest per-rank span) or makespan.")
    time_limit_s: float = Field(10.0, gt=0, description="Seconds the ilp search may take; "
                                "over the service's synchronous ceiling the request becomes "
                                "a job. With work_limit and no time_limit_s, the service's "
                                "largest (max_time_limit_s) caps the wall time.")
    work_limit: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="A reproducible budget for the ilp search (backend cpsat): CP-SAT "
        "deterministic time over the whole search (its count of search work, scaled to "
        "about a second a unit); the same request gives the same schedule on any load, as "
        "long as the wall limit (time_limit_s) does not bind first.")
    memory_limit: float | list[float] | None = Field(
        None, description="Override of the profile's memory_limit: a number, a per-rank "
        "list, or null for no limit; leave it out to keep the profile's.")
    backend: Literal["cpsat", "milp"] = Field("cpsat", description="Exact backend of ilp.")
    layouts: str | None = Field(
        None, description="Ways a one-chunk profile's model may be cut, comma-separated: 1 "
        "(one stage per rank), v (V placement, 2 chunks), loopN (N chunks, loop placement); "
        "the best wins, e.g. '1,v'. Leave it out to solve the profile as it is.",
        examples=["1,v,loop2"])
    offload_ratio: float | None = Field(
        None, ge=0, allow_inf_nan=False,
        description="Offer offload, each copy taking offload_ratio * (t_f + t_b) of its "
        "stage (the Zero Bubble repository's k; DESIGN.md 6.3); not with host_bandwidth.")
    host_bandwidth: float | None = Field(
        None, gt=0, allow_inf_nan=False,
        description="Offer offload, each copy sized from its activation (m_b - m_keep, in "
        "units of memory_unit_bytes) over a host link of this many GB/s; times in ms.")
    memory_unit_bytes: float = Field(
        2.0**30, gt=0, allow_inf_nan=False,
        description="Bytes in one of the profile's memory units, for host_bandwidth.")
    gpus_per_node: int | None = Field(
        None, ge=1, description="The ranks of each node (consecutive) share one host link "
        "for their copies (the profile's gpus_per_node).")
    compact: bool = Field(
        False, description="Write each rank's ops as one string of torch actions "
        "(\"0F0,0I0,0W0,...\", the schedule's ops_encoding 'actions') without per-op "
        "times: for large schedules. The views re-time them.")


class Links(BaseModel):
    model_config = ConfigDict(extra="forbid")

    self: str
    svg: str | None = None
    csv: str | None = None
    trace: str | None = None
    schedule: str | None = None


class ScheduleResult(BaseModel):
    """A schedule (DESIGN.md section 4) with its content id and the links to its views."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="Content hash of the request (profile and options).")
    links: Links
    schema_version: int
    profile: Annotated[dict[str, Any], WithJsonSchema(PROFILE_REF)]
    method: str
    ranks: list[list[dict[str, Any]] | str]
    metrics: dict[str, Any] | None
    solver: dict[str, Any] | None


class Progress(BaseModel):
    model_config = ConfigDict(extra="forbid")

    elapsed_s: float = Field(description="Seconds since the job started.")
    best: float | None = Field(description="Best objective found so far.")
    bound: float | None = Field(description="Best proven lower bound so far.")
    gap: float | None = Field(description="(best - bound) / best.")


class JobView(BaseModel):
    """A job: its status, the search's progress, then the result's id."""

    model_config = ConfigDict(extra="forbid")

    id: str
    status: Literal["queued", "running", "done", "failed", "cancelled"]
    progress: Progress | None
    schedule_id: str | None = Field(description="Once done (or cancelled with a schedule "
                                    "found), the id of GET /v1/schedules/{id}.")
    error: str | None
    method: str
    created: float = Field(description="Unix time the job was submitted.")
    updated: float = Field(description="Unix time of its last change.")
    links: Links


class JobAccepted(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    status: Literal["queued", "running"]
    links: Links


class Method(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str


class Methods(BaseModel):
    model_config = ConfigDict(extra="forbid")

    methods: list[Method]


class Example(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    profile: Annotated[dict[str, Any], WithJsonSchema(PROFILE_REF)]


class Examples(BaseModel):
    model_config = ConfigDict(extra="forbid")

    examples: list[Example]


class Violation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str
    message: str
    rank: int | None
    position: int | None


class ValidationReport(BaseModel):
    """POST /v1/validate: whether a schedule keeps the contract, and how it breaks it."""

    model_config = ConfigDict(extra="forbid")

    valid: bool
    violations: list[Violation] = Field(
        description="The first PPSCHED_MAX_VIOLATIONS violations, in the simulator's order.")
    violations_total: int = Field(description="How many violations there are in all.")
    grid: str | None = Field(description="The order grid with each violation marked.")
    metrics: dict[str, Any] | None = Field(description="The simulated figures when valid.")


class Health(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["ok", "not ready"]
    checks: dict[str, bool] = Field(default_factory=dict)


class ErrorBody(BaseModel):
    """Every 4xx/5xx body."""

    model_config = ConfigDict(extra="allow")

    message: str = Field(description="One line: the field, the value, what is accepted.")
    field: str | None
    value: Any = None
    accepted: str | None


class JobList(BaseModel):
    """GET /v1/jobs: the newest jobs first (with API keys, the caller's tenant's only)."""

    model_config = ConfigDict(extra="forbid")

    jobs: list[JobView]
