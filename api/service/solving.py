"""From a request to what a worker solves: limits checked, profile validated, and the
content key that addresses the result (hash of the profile and the options that matter)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from typing import Any

from ppsched.api.service.config import Settings
from ppsched.api.service.errors import LimitExceeded
from ppsched.api.service.schemas import ScheduleRequest
from ppsched.api.service.worker import body_with_links, content_id

__all__ = ["content_id"]  # re-exported: the routers' import of it
from ppsched.api.offload_options import with_offload_options
from ppsched.solver.model import (
    Profile,
    ProfileError,
    parse_profile,
)
from ppsched.solver.solving import (
    ILP,
    Layout,
    default_layouts,
    layout_name,
    parse_layouts,
    resolve_method,
)

KEY_VERSION = 1  # bump when the same request would give a different schedule
# Request fields that bound the work, the setting naming each limit, its attribute.
_SHAPE_LIMITS = (("num_ranks", "max_ranks"), ("num_microbatches", "max_microbatches"),
                 ("num_chunks", "max_chunks"))


@dataclass(frozen=True)
class SolveSpec:
    """One solve, as a worker process receives it (plain data, picklable)."""

    profile: dict[str, Any]
    method: str
    objective: str
    time_limit_s: float
    backend: str
    work_limit: float | None = None
    """CP-SAT deterministic time for ilp (`ExactOptions.work_limit`), None for none."""
    layouts: str = ""
    """Canonical layouts (`ppsched.solver.solving.layouts.parse_layouts`), empty for the
    profile as it is."""
    ops: int = 0
    """The work it asks for: 3 * p * v * m, summed over the layouts (`count_ops`)."""
    compact: bool = False
    """Whether the schedule JSON has compact ranks (`Schedule.compact_dump`)."""

    @property
    def key(self) -> str:
        """Content address of the result: the same profile and options, the same id."""
        data: dict[str, Any] = {"v": KEY_VERSION, "profile": self.profile,
                                "method": self.method, "objective": self.objective}
        if self.layouts:
            data["layouts"] = self.layouts
        if self.compact:  # absent when not asked: the ids of other requests stay
            data["compact"] = True
        if self.method == ILP:  # the other methods ignore the exact search's options
            data.update(time_limit_s=self.time_limit_s, backend=self.backend)
            if self.work_limit is not None:  # keys without it stay those of before
                data["work_limit"] = self.work_limit
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def to_dict(self) -> dict[str, Any]:
        # Shallow: `asdict` deep-copies the profile, a cost per request in the main process.
        return {f.name: getattr(self, f.name) for f in fields(self)}


def check_profile_limits(profile: Any, settings: Settings, prefix: str = "profile") -> None:
    """Refuse a profile over the service's p, m, v limits before it is resolved (a huge
    p or m would otherwise cost memory before any check)."""
    if not isinstance(profile, dict):
        return  # parse_profile names the problem
    for field, setting in _SHAPE_LIMITS:
        value, limit = profile.get(field), getattr(settings, setting)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            raise LimitExceeded(f"{prefix}.{field}", value, limit, setting)


def spec_from_request(request: ScheduleRequest, settings: Settings) -> SolveSpec:
    """Validate a schedule request into a `SolveSpec` (`spec_and_profile`'s spec)."""
    return spec_and_profile(request, settings)[0]


def spec_and_profile(request: ScheduleRequest, settings: Settings,
                     ) -> tuple[SolveSpec, Profile]:
    """Validate a schedule request into a `SolveSpec` and the profile it solves, parsed
    once (a route that needs the profile too does not parse it again).

    Raises:
        LimitExceeded: p, m, v or time_limit_s over the service's limits.
        ProfileError: an invalid profile or option (field named under ``profile.``).
    """
    check_profile_limits(request.profile, settings)
    if request.work_limit is not None and request.backend != "cpsat":
        raise ProfileError("work_limit", request.work_limit, "null with backend "
                           f"{request.backend} (CBC has no deterministic budget)")
    time_limit_s = request.time_limit_s
    if request.work_limit is not None and "time_limit_s" not in request.model_fields_set:
        # The work limit decides where the search stops; the wall cap that every solve
        # of the service keeps is its largest, so that it does not bind in practice.
        time_limit_s = settings.max_time_limit_s
    elif "time_limit_s" not in request.model_fields_set:
        # The default (10 s) is no reason to refuse a request on a service whose ceiling
        # is lower: the request gets the ceiling (schemathesis found this).
        time_limit_s = min(time_limit_s, settings.max_time_limit_s)
    if "time_limit_s" in request.model_fields_set and \
            request.time_limit_s > settings.max_time_limit_s:
        raise LimitExceeded("time_limit_s", request.time_limit_s, settings.max_time_limit_s,
                            "max_time_limit_s")
    method = resolve_method(request.method)  # torch's schedule names too
    data = dict(request.profile)
    if "memory_limit" in request.model_fields_set:
        data["memory_limit"] = request.memory_limit
    if request.gpus_per_node is not None:
        data["gpus_per_node"] = request.gpus_per_node
    profile = parse_profile_field(data)
    profile = with_offload_options(profile, offload_ratio=request.offload_ratio,
                                   host_bandwidth=request.host_bandwidth,
                                   memory_unit_bytes=request.memory_unit_bytes)
    parsed = parse_layouts(request.layouts) if request.layouts else ()
    for layout in parsed:
        # A layout sets v for the whole solve: `loop128` would bypass PPSCHED_MAX_CHUNKS.
        if layout[0] > settings.max_chunks:
            raise LimitExceeded("layouts", layout_name(layout), settings.max_chunks,
                                "max_chunks")
    # Without layouts the solver may still try the V cut (`default_layouts`): count it.
    ops = count_ops(profile, parsed or default_layouts(profile, method))
    if ops > settings.max_ops:
        raise LimitExceeded("layouts" if parsed else "profile.num_microbatches",
                            f"{ops} ops (3 * p * v * m over the layouts)", settings.max_ops,
                            "max_ops")
    spec = SolveSpec(profile=profile.model_dump(mode="json"), method=method,
                     objective=request.objective, time_limit_s=time_limit_s,
                     backend=request.backend, work_limit=request.work_limit,
                     layouts=",".join(map(layout_name, parsed)), ops=ops,
                     compact=request.compact)
    return spec, profile


def count_ops(profile: Profile, layouts: tuple[Layout, ...]) -> int:
    """Ops a request makes the solver place: 3 (F, B, W) per stage and microbatch, for
    the profile as it is or for each layout tried (each is a solve of its own)."""
    chunks = [layout[0] for layout in layouts] or [profile.num_chunks]
    return sum(3 * profile.num_ranks * v * profile.num_microbatches for v in chunks)


def parse_profile_field(data: Any, prefix: str = "profile") -> Profile:
    """`parse_profile`, with the error's field named as the request's ``profile.<field>``."""
    try:
        return parse_profile(data)
    except ProfileError as exc:
        field = exc.field if exc.field.startswith(prefix) else f"{prefix}.{exc.field}"
        raise ProfileError(field, exc.value, exc.accepted) from None


def is_synchronous(spec: SolveSpec, settings: Settings) -> bool:
    """Small requests answer at once: ops within PPSCHED_MAX_SYNC_OPS and, for ilp, a
    time limit within the synchronous ceiling. Others become jobs."""
    if spec.ops > settings.max_sync_ops:
        return False
    return spec.method != ILP or spec.time_limit_s <= settings.sync_time_limit_s


def with_links(schedule_json: str, schedule_id: str) -> str:
    """The stored body: the schedule JSON with its id and links at the top."""
    return body_with_links(json.loads(schedule_json), schedule_id)
