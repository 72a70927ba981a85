"""`Problem`: a profile resolved to one value per stage, per boundary and per rank.

The form every algorithm reads (DESIGN.md section 2); `ppsched.solver.model.profile` holds
the pydantic edge type it is resolved from, and the words error messages use (`ACCEPTED`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ppsched.solver.model.errors import ProfileError

if TYPE_CHECKING:  # the edge type, for annotations only (profile.py imports this module)
    from ppsched.solver.model.profile import Profile

Matrix = tuple[tuple[float, ...], ...]

# What each field accepts, in the words an error message uses.
ACCEPTED = {
    "name": "a string",
    "description": "a string",
    "num_ranks": "an integer >= 1",
    "num_microbatches": "an integer >= 1",
    "num_chunks": "an integer >= 1",
    "placement": "'loop' or 'v' (needed when num_chunks > 1)",
    "t_f": "a number >= 0, a list of num_ranks*num_chunks numbers, or a matrix of "
           "num_ranks*num_chunks rows of num_microbatches numbers",
    "t_b": "a number >= 0, a list of num_ranks*num_chunks numbers, or a matrix of "
           "num_ranks*num_chunks rows of num_microbatches numbers",
    "t_w": "a number >= 0, a list of num_ranks*num_chunks numbers, or a matrix of "
           "num_ranks*num_chunks rows of num_microbatches numbers",
    "t_comm": "a number >= 0, a list of num_ranks*num_chunks-1 numbers, or a matrix of "
              "num_ranks*num_chunks-1 rows of num_microbatches numbers",
    "m_b": "a number >= 0, a list of num_ranks*num_chunks numbers, or a matrix of "
           "num_ranks*num_chunks rows of num_microbatches numbers",
    "m_w": "a number >= 0, a list of num_ranks*num_chunks numbers, or a matrix of "
           "num_ranks*num_chunks rows of num_microbatches numbers",
    "memory_limit": "null (no limit), a number > 0, or a list of num_ranks numbers",
    "overlap": "a number > 0 and <= 1 (an FB op takes overlap * (t_f + t_b + t_w); "
               "1: no gain)",
    "microbatches": "null, or a list of num_microbatches objects {\"scale\": c, "
                    "\"memory_scale\": k} (numbers > 0, default 1): microbatch j takes c "
                    "times t_f, t_b, t_w and k times m_b, m_w, t_comm",
    # DESIGN.md 6.3 (issue 12): activation policies.
    "t_r": "null, a number >= 0 or a list of num_ranks*num_chunks numbers",
    "m_ckpt": "null, a number >= 0 or a list of num_ranks*num_chunks numbers",
    "t_offload": "null, a number >= 0 or a list of num_ranks*num_chunks numbers",
    "t_reload": "null, a number >= 0 or a list of num_ranks*num_chunks numbers",
    "m_keep": "null, a number >= 0 or a list of num_ranks*num_chunks numbers",
    "copy_lanes": "1 (one copy engine for both directions) or 2 (one each way)",
    "shared_host_link": "null or a list of groups (lists) of distinct ranks 0..num_ranks-1, "
                        "a rank in at most one group",
    "host_memory_limit": "null (no limit), a number > 0, or a list of num_ranks numbers",
    "gpus_per_node": "null or an integer >= 1 that divides num_ranks",
    "t_op": "null or a finite number >= 0 (time added to every compute op)",
    # DESIGN.md 6.7: the cut a profile was made by from a per-layer profile.
    "layers_per_stage": "null or a list of num_ranks*num_chunks integers >= 1",
    "stage_layers": "null or a list of num_ranks*num_chunks lists of layer names, as "
                    "many in each as layers_per_stage says",
}


# Optional fields of DESIGN.md section 6, left out of the JSON when absent.


@dataclass(frozen=True)
class Problem:
    """A profile resolved: one value per stage, per boundary and per rank.

    Stages are global indices ``0..num_stages-1`` in model order (DESIGN.md section 1).
    ``t_comm[s]`` is the latency across the boundary between stage ``s`` and ``s+1``; it
    applies only when the two stages run on different ranks.

    With unequal microbatches (DESIGN.md 6.2) the matrices ``t_f_mb`` ... ``t_comm_mb``
    (``[stage][microbatch]``) hold each microbatch's values and every figure comes from
    them; the per-stage tuples are then the mean over microbatches, representative values
    for an algorithm's decisions only. With equal microbatches the tuples are exactly the
    profile's values and each matrix row repeats them.
    """

    num_ranks: int
    num_microbatches: int
    num_chunks: int
    placement: str
    t_f: tuple[float, ...]
    t_b: tuple[float, ...]
    t_w: tuple[float, ...]
    t_comm: tuple[float, ...]
    m_b: tuple[float, ...]
    m_w: tuple[float, ...]
    memory_limit: tuple[float, ...]  # math.inf where there is no limit
    overlap: float = 1.0  # an FB's duration factor (DESIGN.md 6.4)
    # Activation policies (DESIGN.md 6.3), defaults resolved; empty where not offered.
    t_r: tuple[float, ...] = ()
    m_ckpt: tuple[float, ...] = ()
    t_offload: tuple[float, ...] = ()
    t_reload: tuple[float, ...] = ()
    m_keep: tuple[float, ...] = ()
    can_recompute: bool = False
    can_offload: bool = False
    copy_lanes: int = 2
    shared_host_link: tuple[tuple[int, ...], ...] = ()
    host_memory_limit: tuple[float, ...] = ()
    # DESIGN.md 6.2: the [stage][microbatch] matrices of unequal microbatches; empty when
    # every microbatch takes the per-stage values (the `t_f_mb` ... properties then
    # derive them, so `dataclasses.replace` of a per-stage field stays consistent).
    _t_f_mb: Matrix = field(default=(), repr=False)
    _t_b_mb: Matrix = field(default=(), repr=False)
    _t_w_mb: Matrix = field(default=(), repr=False)
    _t_comm_mb: Matrix = field(default=(), repr=False)
    _m_b_mb: Matrix = field(default=(), repr=False)
    _m_w_mb: Matrix = field(default=(), repr=False)

    def _matrix(self, name: str) -> Matrix:
        given: Matrix = getattr(self, f"_{name}_mb")
        if given:
            return given
        m = self.num_microbatches
        return tuple((x,) * m for x in getattr(self, name))

    @cached_property
    def t_f_mb(self) -> Matrix:
        """F times, ``[stage][microbatch]``."""
        return self._matrix("t_f")

    @cached_property
    def t_b_mb(self) -> Matrix:
        """B times, ``[stage][microbatch]``."""
        return self._matrix("t_b")

    @cached_property
    def t_w_mb(self) -> Matrix:
        """W times, ``[stage][microbatch]``."""
        return self._matrix("t_w")

    @cached_property
    def t_comm_mb(self) -> Matrix:
        """Latencies, ``[boundary][microbatch]``."""
        return self._matrix("t_comm")

    @cached_property
    def m_b_mb(self) -> Matrix:
        """Activation memory of F, ``[stage][microbatch]``."""
        return self._matrix("m_b")

    @cached_property
    def m_w_mb(self) -> Matrix:
        """Memory a B holds until its W, ``[stage][microbatch]``."""
        return self._matrix("m_w")

    @classmethod
    def from_profile(cls, profile: Profile) -> Problem:
        p, v = profile.num_ranks, profile.num_chunks
        placement = profile.placement
        if v > 1 and placement is None:
            raise ProfileError("placement", None, f"'loop' or 'v' since num_chunks = {v} > 1")
        if placement == "v" and v != 2:
            raise ProfileError("placement", "v", f"'loop' (V placement needs num_chunks = 2, "
                               f"got num_chunks = {v})")
        num_stages, m = p * v, profile.num_microbatches
        fields = {"t_f": num_stages, "t_b": num_stages, "t_w": num_stages,
                  "t_comm": num_stages - 1, "m_b": num_stages, "m_w": num_stages}
        values = {name: getattr(profile, name) for name in fields}
        scales = _microbatch_scales(profile, values)
        rows: dict[str, tuple[float, ...]] = {}
        matrices: dict[str, Matrix] = {}
        for name, count in fields.items():
            what = "stage boundary" if name == "t_comm" else "stage"
            rows[name], matrices[name] = _per_stage_mb(name, values[name], count, m, what)
        if scales is not None:
            time_scale, memory_scale = scales
            for name in fields:
                factors = memory_scale if name in ("m_b", "m_w", "t_comm") else time_scale
                matrices[name] = tuple(tuple(x * c for c in factors) for x in rows[name])
                rows[name] = tuple(_mean(row) for row in matrices[name])
        overhead = _op_overhead(profile.t_op)
        if overhead:
            # The runtime's per-op work (t_op) does not grow with the microbatch: added
            # after the scales, to every compute op's time.
            for name in ("t_f", "t_b", "t_w"):
                rows[name] = tuple(x + overhead for x in rows[name])
                if matrices[name]:
                    matrices[name] = tuple(tuple(x + overhead for x in row)
                                           for row in matrices[name])
        if all(len(set(row)) <= 1 for matrix in matrices.values() for row in matrix):
            matrices = {name: () for name in fields}  # alike: derived from the rows
        # m_w may exceed m_b (DESIGN.md section 6.1): a B then adds m_w - m_b > 0.
        limit = profile.memory_limit
        if limit is None:
            memory_limit = (math.inf,) * p
        elif isinstance(limit, list):
            if len(limit) != p:
                raise ProfileError("memory_limit", limit,
                                   f"null, a number, or a list of num_ranks = {p} numbers "
                                   f"(got {len(limit)})")
            memory_limit = tuple(_positive("memory_limit", x, i) for i, x in enumerate(limit))
        else:
            memory_limit = (_positive("memory_limit", limit, None),) * p
        overlap = profile.overlap
        if not (math.isfinite(overlap) and 0 < overlap <= 1):
            raise ProfileError("overlap", overlap, ACCEPTED["overlap"])
        base = cls(p, m, v, placement or "loop",
                   rows["t_f"], rows["t_b"], rows["t_w"], rows["t_comm"], rows["m_b"],
                   rows["m_w"], memory_limit, float(overlap),
                   _t_f_mb=matrices["t_f"], _t_b_mb=matrices["t_b"], _t_w_mb=matrices["t_w"],
                   _t_comm_mb=matrices["t_comm"], _m_b_mb=matrices["m_b"],
                   _m_w_mb=matrices["m_w"])
        return _with_policies(base, profile)
    # Microbatches (DESIGN.md 6.2).

    @cached_property
    def uniform_microbatches(self) -> bool:
        """Whether every microbatch takes the same values on every stage."""
        return all(len(set(row)) <= 1 for name in ("t_f", "t_b", "t_w", "t_comm", "m_b", "m_w")
                   for row in getattr(self, f"_{name}_mb"))

    @cached_property
    def microbatch_sizes(self) -> tuple[float, ...]:
        """Each microbatch's total op time relative to the mean microbatch's (1.0 each
        when they are equal): for labels and for choosing an order of entry."""
        m = self.num_microbatches
        if self.uniform_microbatches:
            return (1.0,) * m
        totals = [math.fsum(self.t_f_mb[s][j] + self.t_b_mb[s][j] + self.t_w_mb[s][j]
                            for s in range(self.num_stages)) for j in range(m)]
        mean = math.fsum(totals) / m
        return tuple(x / mean if mean > 0 else 1.0 for x in totals)

    def reordered(self, order: Sequence[int] | None) -> Problem:
        """The same problem with microbatch ``j`` taking input microbatch ``order[j]``'s
        values (a schedule's ``microbatch_order``); itself when ``order`` is None or the
        identity.

        Raises:
            ProfileError: `order` is not a permutation of ``0..m-1``.
        """
        m = self.num_microbatches
        if order is None:
            return self
        order = list(order)
        if sorted(order) != list(range(m)):
            raise ProfileError("microbatch_order", order,
                               f"a permutation of 0..{m - 1} (each input microbatch once)")
        if order == list(range(m)) or self.uniform_microbatches:
            return self

        def permute(matrix: Matrix) -> Matrix:
            return tuple(tuple(row[i] for i in order) for row in matrix)

        return replace(self, _t_f_mb=permute(self.t_f_mb), _t_b_mb=permute(self.t_b_mb),
                       _t_w_mb=permute(self.t_w_mb), _t_comm_mb=permute(self.t_comm_mb),
                       _m_b_mb=permute(self.m_b_mb), _m_w_mb=permute(self.m_w_mb))

    def below_one_f_one_b(self, m_b: Sequence[float] | None = None) -> bool:
        """Whether some rank's limit is below what 1F1B holds there: rank r keeps
        min(m, p - r) microbatches in flight, each holding its stages' `m_b` (per stage;
        default: the problem's own)."""
        p, m = self.num_ranks, self.num_microbatches
        per_stage = self.m_b if m_b is None else m_b
        return any(limit < min(m, p - r) * math.fsum(per_stage[s] for s in stages) - 1e-9
                   for r, (limit, stages) in enumerate(zip(self.memory_limit,
                                                           self.rank_to_stages,
                                                           strict=True)))

    def for_decisions(self) -> Problem:
        """A problem with alike microbatches on which an algorithm that reads one value
        per stage can decide an order for this one: the mean times and latencies, and
        each stage's largest m_b and m_w. Each microbatch then holds at most what the
        decisions assumed at every point of an order, so an order within its memory
        limit here is within it on this problem too."""
        if self.uniform_microbatches:
            return self
        return replace(self, m_b=tuple(max(row) for row in self.m_b_mb),
                       m_w=tuple(max(row) for row in self.m_w_mb), _t_f_mb=(),
                       _t_b_mb=(), _t_w_mb=(), _t_comm_mb=(), _m_b_mb=(), _m_w_mb=())

    def comm_mb(self, s: int, t: int, j: int) -> float:
        """Latency of microbatch ``j`` between adjacent stages s and t; 0 on one rank."""
        if self.stage_to_rank[s] == self.stage_to_rank[t]:
            return 0.0
        return self.t_comm_mb[min(s, t)][j]

    # Shape.

    @property
    def num_stages(self) -> int:
        return self.num_ranks * self.num_chunks

    @cached_property
    def stage_to_rank(self) -> tuple[int, ...]:
        p = self.num_ranks
        if self.placement == "v" and self.num_chunks > 1:
            return tuple(s if s < p else 2 * p - 1 - s for s in range(self.num_stages))
        return tuple(s % p for s in range(self.num_stages))

    @cached_property
    def rank_to_stages(self) -> tuple[tuple[int, ...], ...]:
        stages: list[list[int]] = [[] for _ in range(self.num_ranks)]
        for s, r in enumerate(self.stage_to_rank):
            stages[r].append(s)
        return tuple(tuple(x) for x in stages)

    def comm(self, s: int, t: int) -> float:
        """Latency between adjacent stages s and t (either order); 0 on the same rank."""
        if self.stage_to_rank[s] == self.stage_to_rank[t]:
            return 0.0
        return self.t_comm[min(s, t)]

    # Bounds.

    @cached_property
    def busy_per_rank(self) -> tuple[float, ...]:
        """Total op time each rank must spend (every F, B and W of its stages)."""
        m = self.num_microbatches
        if self.uniform_microbatches:
            return tuple(m * sum(self.t_f[s] + self.t_b[s] + self.t_w[s] for s in stages)
                         for stages in self.rank_to_stages)
        return tuple(math.fsum(self.t_f_mb[s][j] + self.t_b_mb[s][j] + self.t_w_mb[s][j]
                               for s in stages for j in range(m))
                     for stages in self.rank_to_stages)

    @property
    def simple_lower_bound(self) -> float:
        """The busiest rank's total op time: no schedule's cost or makespan is below it."""
        return max(self.busy_per_rank)

    @cached_property
    def min_memory_per_rank(self) -> tuple[float, ...]:
        """The least activation memory any schedule needs on each rank.

        Every F of a microbatch precedes every B of it (B on the last stage waits for the
        last F), so a rank holds at least all its stages' m_b at once, for the largest
        microbatch; running the microbatches one after another achieves exactly that.
        """
        return tuple(max(sum(self.m_b_mb[s][j] for s in stages)
                         for j in range(self.num_microbatches))
                     for stages in self.rank_to_stages)

    def check_totals_finite(self) -> None:
        """Refuse values that are finite one by one but whose totals overflow a float
        (1e308 times m): the bounds, the solvers and the simulator add them up, and an
        infinite total would end as an OverflowError or as null times in a result."""
        m = self.num_microbatches
        # Plain sums, not math.fsum: fsum raises on intermediate overflow, sum gives inf.
        times = {"t_f": self.t_f, "t_b": self.t_b, "t_w": self.t_w, "t_comm": self.t_comm}
        memory = {"m_b": self.m_b, "m_w": self.m_w}
        # A schedule's makespan is at most every op one after another plus a latency per
        # dependency (2 per op); memory at most every F's activations held at once. The
        # factor 4 keeps room for the sums of such totals that the bounds form.
        time_total = 4 * m * (sum(sum(x) for x in times.values()) + 2 * sum(self.t_comm))
        memory_total = 4 * m * sum(sum(x) for x in memory.values())
        limits = [x for x in self.memory_limit if math.isfinite(x)]
        for total, group in ((time_total, times), (memory_total, memory),
                             (4 * sum(limits), {"memory_limit": tuple(limits)})):
            if math.isfinite(total):
                continue
            field = max(group, key=lambda name: max(group[name], default=0.0))
            raise ProfileError(field, max(group[field]),
                               f"values whose totals stay finite: with num_microbatches = "
                               f"{m} and {self.num_stages} stages their sum overflows a "
                               "float (about 1.8e308)")

    def check_memory_limit(self) -> None:
        for r, (limit, need) in enumerate(zip(self.memory_limit, self.min_memory_per_rank,
                                              strict=True)):
            if limit < need - 1e-9:
                field = "memory_limit" if len(set(self.memory_limit)) == 1 else \
                    f"memory_limit[{r}]"
                raise ProfileError(field, limit,
                                   f">= {need:g}: rank {r} must hold the activations of its "
                                   f"stages {list(self.rank_to_stages[r])} for one microbatch "
                                   "(sum of their m_b, for the largest microbatch), or null "
                                   "for no limit")


def _per_stage_mb(field: str, value: Any, count: int, m: int, what: str,
                  ) -> tuple[tuple[float, ...], Matrix]:
    """A per-stage value resolved: the per-stage tuple and the [stage][microbatch] matrix.

    A matrix input gives each row's mean as the per-stage value (each row's one value
    when its microbatches are alike, so an all-equal matrix means exactly its numbers).
    """
    if isinstance(value, list) and value and any(isinstance(x, list) for x in value):
        if len(value) != count or not all(isinstance(x, list) for x in value):
            raise ProfileError(field, value, f"a matrix of {count} rows (one per {what}) of "
                               f"num_microbatches = {m} numbers (got {len(value)} rows)")
        matrix = []
        for s, row in enumerate(value):
            if len(row) != m:
                raise ProfileError(f"{field}[{s}]", row, f"a list of num_microbatches = {m} "
                                   f"numbers, one per microbatch (got {len(row)})")
            matrix.append(tuple(_non_negative(f"{field}[{s}]", x, j)
                                for j, x in enumerate(row)))
        return tuple(_mean(row) for row in matrix), tuple(matrix)
    per_stage = _per_stage(field, value, count, what)
    return per_stage, tuple((x,) * m for x in per_stage)


def _mean(row: Sequence[float]) -> float:
    # Exactly the value when all are alike (a sum divided back would round).
    return row[0] if len(set(row)) == 1 else math.fsum(row) / len(row)


def _microbatch_scales(profile: Profile, values: dict[str, Any],
                       ) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """The time and memory factors of `profile.microbatches`, checked; None if absent."""
    given = profile.microbatches
    if given is None:
        return None
    m = profile.num_microbatches
    if len(given) != m:
        raise ProfileError("microbatches", [x.model_dump() for x in given],
                           f"a list of num_microbatches = {m} objects (got {len(given)})")
    matrix = next((name for name, v in values.items()
                   if isinstance(v, list) and any(isinstance(x, list) for x in v)), None)
    if matrix is not None:
        raise ProfileError("microbatches", "a list", f"null when '{matrix}' is a matrix: give "
                           "per-microbatch values one way, a matrix or scales")
    for j, item in enumerate(given):
        for key in ("scale", "memory_scale"):
            x = getattr(item, key)
            if not math.isfinite(x) or x <= 0:
                raise ProfileError(f"microbatches[{j}].{key}", x, "a finite number > 0")
    return (tuple(float(x.scale) for x in given), tuple(float(x.memory_scale) for x in given))


def _with_policies(problem: Problem, profile: Profile) -> Problem:
    """`problem` with the activation-policy fields of `profile` resolved (DESIGN.md 6.3)."""
    n, p = problem.num_stages, problem.num_ranks

    def per_stage(field: str, default: tuple[float, ...]) -> tuple[float, ...]:
        value = getattr(profile, field)
        return default if value is None else _per_stage(field, value, n)

    if profile.copy_lanes not in (1, 2):
        raise ProfileError("copy_lanes", profile.copy_lanes, ACCEPTED["copy_lanes"])
    groups = profile.shared_host_link or _node_groups(profile.gpus_per_node, p)
    flat = [r for group in groups for r in group]
    if any(not isinstance(r, int) or not 0 <= r < p for r in flat) or len(set(flat)) != len(flat):
        raise ProfileError("shared_host_link", groups, ACCEPTED["shared_host_link"])
    host = profile.host_memory_limit
    if host is None:
        host_limit = (math.inf,) * p
    elif isinstance(host, list):
        if len(host) != p:
            raise ProfileError("host_memory_limit", host, ACCEPTED["host_memory_limit"])
        host_limit = tuple(_positive("host_memory_limit", x, i) for i, x in enumerate(host))
    else:
        host_limit = (_positive("host_memory_limit", host, None),) * p
    offers = [name for name in ("t_r", "m_ckpt", "t_offload", "t_reload")
              if getattr(profile, name) is not None]
    if offers and not problem.uniform_microbatches:
        # The copy lanes and the policy choice read one value per stage (DESIGN.md 6.3
        # has no per-microbatch form of t_r, t_offload ...): refused, not approximated.
        raise ProfileError(offers[0], getattr(profile, offers[0]),
                           "null with unequal microbatches (DESIGN.md 6.2): activation "
                           "policies take alike microbatches only, for now")
    zeros = (0.0,) * n
    t_offload = per_stage("t_offload", per_stage("t_reload", zeros))
    # R is a compute op: it pays t_op too (the default t_r, t_f, already holds it).
    t_r = problem.t_f if profile.t_r is None else \
        _plus(_per_stage("t_r", profile.t_r, n), _op_overhead(profile.t_op))
    return dataclasses.replace(
        problem, t_r=t_r, m_ckpt=per_stage("m_ckpt", zeros),
        t_offload=t_offload, t_reload=per_stage("t_reload", t_offload),
        m_keep=per_stage("m_keep", zeros),
        can_recompute=profile.t_r is not None or profile.m_ckpt is not None,
        can_offload=profile.t_offload is not None or profile.t_reload is not None,
        copy_lanes=profile.copy_lanes, shared_host_link=tuple(map(tuple, groups)),
        host_memory_limit=host_limit)


def _per_stage(field: str, value: Any, count: int, what: str = "stage") -> tuple[float, ...]:
    if isinstance(value, list):
        if len(value) != count:
            raise ProfileError(field, value, f"a number or a list of {count} numbers, one per "
                               f"{what} (got {len(value)})")
        return tuple(_non_negative(field, x, i) for i, x in enumerate(value))
    return (_non_negative(field, value, None),) * count


def _non_negative(field: str, x: float, index: int | None) -> float:
    name = field if index is None else f"{field}[{index}]"
    if not math.isfinite(x) or x < 0:
        raise ProfileError(name, x, "a finite number >= 0")
    return float(x)


def _op_overhead(t_op: float | None) -> float:
    if t_op is None:
        return 0.0
    if isinstance(t_op, bool) or not isinstance(t_op, int | float) or not math.isfinite(t_op) \
            or t_op < 0:
        raise ProfileError("t_op", t_op, ACCEPTED["t_op"])
    return float(t_op)


def _plus(values: tuple[float, ...], extra: float) -> tuple[float, ...]:
    return tuple(x + extra for x in values)


def _node_groups(gpus_per_node: int | None, p: int) -> list[list[int]]:
    """The ranks of each node, consecutive (torchrun's order), sharing the node's host link;
    none when the node size is not given or is one GPU."""
    if gpus_per_node is None:
        return []
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) \
            or gpus_per_node < 1 or p % gpus_per_node:
        raise ProfileError("gpus_per_node", gpus_per_node, ACCEPTED["gpus_per_node"])
    if gpus_per_node == 1:
        return []
    return [list(range(start, start + gpus_per_node)) for start in range(0, p, gpus_per_node)]


def _positive(field: str, x: float, index: int | None) -> float:
    name = field if index is None else f"{field}[{index}]"
    if not math.isfinite(x) or x <= 0:
        raise ProfileError(name, x, "a finite number > 0, or null for no limit")
    return float(x)
