"""The packing front-end's types and steps (DESIGN.md 6.2): samples into microbatches and
data-parallel replicas, one solved profile per replica, naive packing beside it.

The balanced assignment (`pack_samples`) balances the replicas' costs first
(Karmarkar-Karp over the samples' costs, then moves and swaps; exact for tiny cases),
then each replica's microbatches the same way, always within the token cap. Each replica
becomes a profile whose ``microbatches`` scale the base profile's per-stage values (those
of a reference microbatch, see `solver.packing.cost`), solved with the chosen method
(`solve_replica`); the step time is the slowest replica's cost. Naive packing takes the
samples in arrival order, fills each microbatch to the cap and deals the microbatches to
the replicas in turn. `solver.packing.search` chooses among assignments by step time.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.profile import Profile, parse_profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.packing.cost import CostModel
from ppsched.solver.packing.lengths import MAX_TOKENS, check_lengths
from ppsched.solver.packing.partition import (
    Bins,
    balanced_partition,
    deal_with_counts,
    fill_in_order,
    split_in_order,
)
from ppsched.solver.solving.entry import chooses_entry_order, solve

logger = logging.getLogger(__name__)


class PackingError(ProfileError):
    """A packing request that cannot be met (the field, the value, what would be accepted)."""


@dataclass(frozen=True, kw_only=True)
class PackSpec:
    """What to pack and how (validated on construction; errors name the field)."""

    lengths: tuple[int, ...]
    """Each sample's tokens, in arrival order."""
    cap: int
    """The most tokens one microbatch may hold."""
    num_replicas: int = 1
    """R: data-parallel replicas (pipelines), each running its own microbatches."""
    microbatches: tuple[int, ...] | None = None
    """Microbatches per replica (one count for all, or one per replica as ODC allows);
    None: as many as naive packing needs, spread evenly."""
    cost: CostModel = field(default_factory=CostModel)
    reference_tokens: int | None = None
    """The tokens of the microbatch the base profile's times describe (one sample);
    None: the cap."""
    method: str = "heuristic"
    """The solve method of ppsched's packing."""
    naive_method: str | None = None
    """The solve method of the naive packing (None: the same)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "lengths", tuple(check_lengths(self.lengths)))
        if isinstance(self.cap, bool) or not isinstance(self.cap, int) \
                or not 1 <= self.cap <= MAX_TOKENS:
            raise PackingError("cap", self.cap, f"a whole number of tokens from 1 to "
                               f"{MAX_TOKENS:.0e}")
        if isinstance(self.num_replicas, bool) or not isinstance(self.num_replicas, int) \
                or self.num_replicas < 1:
            raise PackingError("replicas", self.num_replicas, "an integer >= 1")
        for i, s in enumerate(self.lengths):
            if s > self.cap:
                raise PackingError(f"lengths[{i}]", s, f"at most the cap of {self.cap} "
                                   "tokens (raise the cap, or split or drop the sample)")
        if len(self.lengths) < self.num_replicas:
            raise PackingError("lengths", f"{len(self.lengths)} samples",
                               f"at least one sample per replica ({self.num_replicas})")
        if self.microbatches is not None:
            counts = tuple(self.microbatches)
            if len(counts) == 1:
                counts *= self.num_replicas
            if len(counts) != self.num_replicas:
                raise PackingError("microbatches", list(self.microbatches),
                                   f"one count, or {self.num_replicas} counts (one per "
                                   "replica)")
            for i, x in enumerate(counts):
                if isinstance(x, bool) or not isinstance(x, int) or x < 1:
                    raise PackingError(f"microbatches[{i}]", x, "an integer >= 1")
            needed = math.ceil(sum(self.lengths) / self.cap)
            if sum(counts) < needed:
                raise PackingError("microbatches", list(self.microbatches),
                                   f"at least {needed} microbatches in all: "
                                   f"{sum(self.lengths)} tokens at {self.cap} per "
                                   "microbatch")
            object.__setattr__(self, "microbatches", counts)
        ref = self.reference_tokens
        if ref is not None and (isinstance(ref, bool) or not isinstance(ref, int)
                                or not 1 <= ref <= MAX_TOKENS):
            raise PackingError("reference_tokens", ref, f"a whole number of tokens from 1 "
                               f"to {MAX_TOKENS:.0e}")

    @property
    def reference(self) -> int:
        return self.reference_tokens or self.cap

    def counts(self) -> tuple[int, ...]:
        """Microbatches per replica: as given, or naive packing's count spread evenly."""
        if self.microbatches is not None:
            return self.microbatches
        naive = len(fill_in_order(self.lengths, self.cap))
        return (math.ceil(naive / self.num_replicas),) * self.num_replicas


@dataclass(frozen=True)
class MicrobatchPlan:
    """One microbatch: its samples (indices into the lengths) and its costs."""

    samples: tuple[int, ...]
    tokens: int
    time: float
    """F's time in the cost model's unit (sum of a*s^2 + b*s)."""
    memory: float
    """c * tokens."""

    def to_dict(self) -> dict[str, Any]:
        return {"samples": list(self.samples), "tokens": self.tokens, "time": self.time,
                "memory": self.memory}


@dataclass(frozen=True)
class ReplicaPlan:
    """One data-parallel replica: its microbatches (input order), profile and schedule."""

    microbatches: tuple[MicrobatchPlan, ...]
    profile: Profile | None
    schedule: Schedule | None
    """The solved schedule (None for a replica that got no microbatch)."""

    @property
    def cost(self) -> float:
        """The replica's simulated cost (largest per-rank span); 0 when it has no work."""
        if self.schedule is None:
            return 0.0
        assert self.schedule.metrics is not None, "solve() times every schedule"
        return self.schedule.metrics.cost

    @property
    def work(self) -> float:
        """The sum of its microbatches' F times (cost-model unit)."""
        return math.fsum(mb.time for mb in self.microbatches)

    @property
    def microbatch_order(self) -> list[int] | None:
        order = getattr(self.schedule, "microbatch_order", None)
        return None if order is None else list(order)

    def to_dict(self) -> dict[str, Any]:
        return {"cost": self.cost, "work": self.work, "tokens":
                sum(mb.tokens for mb in self.microbatches),
                "num_microbatches": len(self.microbatches),
                "microbatch_order": self.microbatch_order,
                "lower_bound": None if self.schedule is None or self.schedule.metrics is None
                else self.schedule.metrics.lower_bound,
                "microbatches": [mb.to_dict() for mb in self.microbatches]}


@dataclass(frozen=True)
class Packing:
    """An assignment of samples to replicas and microbatches, each replica solved."""

    name: str
    method: str
    replicas: tuple[ReplicaPlan, ...]
    strategy: str = ""
    """Which assignment ppsched's search kept (`ppsched.solver.packing.search`); "" for naive."""
    moves: int = 0
    """Samples the search moved between replicas after choosing the assignment."""

    def groups(self) -> list[Bins]:
        """Per replica, its microbatches' sample indices (in the replica's input order)."""
        return [[list(mb.samples) for mb in r.microbatches] for r in self.replicas]

    @property
    def step_time(self) -> float:
        """The slowest replica's cost: the data-parallel step waits for it."""
        return max(r.cost for r in self.replicas)

    @property
    def imbalance(self) -> float:
        """(max - min) / min of the replicas' costs (inf when a replica has no work)."""
        costs = [r.cost for r in self.replicas]
        low = min(costs)
        return math.inf if low <= 0 else (max(costs) - low) / low

    def to_dict(self) -> dict[str, Any]:
        imbalance = self.imbalance
        return {"name": self.name, "method": self.method, "strategy": self.strategy,
                "moves": self.moves, "step_time": self.step_time,
                "imbalance": None if math.isinf(imbalance) else imbalance,
                "replicas": [r.to_dict() for r in self.replicas]}


@dataclass(frozen=True)
class PackResult:
    """ppsched's packing beside naive packing of the same samples."""

    spec: PackSpec
    packed: Packing
    naive: Packing

    @property
    def speedup(self) -> float:
        """Naive step time over ppsched's (> 1: ppsched's packing is faster); 1 when both
        are 0 (a profile of zero times)."""
        if self.packed.step_time <= 0:
            return 1.0 if self.naive.step_time <= 0 else math.inf
        return self.naive.step_time / self.packed.step_time

    def to_dict(self) -> dict[str, Any]:
        return {"num_samples": len(self.spec.lengths), "tokens": sum(self.spec.lengths),
                "cap": self.spec.cap, "num_replicas": self.spec.num_replicas,
                "reference_tokens": self.spec.reference, "packed": self.packed.to_dict(),
                "naive": self.naive.to_dict(),
                "speedup": None if math.isinf(self.speedup) else self.speedup}


def split_replicas(lengths: Sequence[int], cost: CostModel, cap: int,
                   counts: Sequence[int]) -> Bins | None:
    """The samples into replicas, their cost sums balanced, replica ``r`` within
    ``counts[r] * cap`` tokens; None when none was found."""
    weights = [cost.time([s]) for s in lengths]
    return balanced_partition(weights, [float(s) for s in lengths], [c * cap for c in counts])


def pack_samples(lengths: Sequence[int], cost: CostModel, cap: int,
                 counts: Sequence[int]) -> list[Bins]:
    """The balanced assignment: per replica, its microbatches' sample indices
    (`balanced_samples` over `split_replicas`).

    Raises:
        PackingError: no assignment within the cap was found.
    """
    return balanced_samples(lengths, cost, cap, counts,
                            split_replicas(lengths, cost, cap, counts))


def balanced_samples(lengths: Sequence[int], cost: CostModel, cap: int,
                     counts: Sequence[int], replicas: Bins | None) -> list[Bins]:
    """The balanced assignment from a replica split already made (`split_replicas`; None
    when it found none), so that several assignments can share one split.

    Each replica's microbatches balanced, each within the cap; when a replica's samples
    do not fit its microbatches that way (or there is no split), microbatches first over
    all samples, then dealt to the replicas by count. Empty microbatches are left out.
    Microbatches are listed costliest first.

    Raises:
        PackingError: no assignment within the cap was found.
    """
    weights = [cost.time([s]) for s in lengths]
    sizes = [float(s) for s in lengths]
    result: list[Bins] | None = None
    if replicas is not None:
        result = []
        for items, count in zip(replicas, counts, strict=True):
            bins = balanced_partition([weights[i] for i in items], [sizes[i] for i in items],
                                      [cap] * count)
            if bins is None:
                result = None
                break
            result.append([[items[i] for i in b] for b in bins])
    if result is None:
        logger.info("replica-first packing missed the cap; packing microbatches first")
        bins = balanced_partition(weights, sizes, [cap] * sum(counts))
        if bins is None:
            raise PackingError("microbatches", list(counts),
                               f"more microbatches or a larger cap: {len(lengths)} samples "
                               f"of {sum(lengths)} tokens did not fit {sum(counts)} "
                               f"microbatches of {cap} tokens")
        mb_weights = [math.fsum(weights[i] for i in b) for b in bins]
        dealt = deal_with_counts(mb_weights, counts)
        result = [[bins[k] for k in group] for group in dealt]
    return [costliest_first(fill_empty(group, weights), weights) for group in result]


def costliest_first(bins: Bins, weights: Sequence[float]) -> Bins:
    """The non-empty microbatches, costliest first."""
    return sorted((b for b in bins if b), key=lambda b: -math.fsum(weights[i] for i in b))


def fill_empty(bins: Bins, weights: Sequence[float]) -> Bins:
    """`bins` with each empty microbatch given a sample from a microbatch holding several.

    The partition balances the costliest microbatch only, so it may leave one empty when
    a replica has few samples; the replica was asked for that many microbatches, and more
    microbatches shorten the pipeline's fill. The moved sample is the lightest of the
    microbatch with the most samples: alone it is within the cap.
    """
    bins = [list(b) for b in bins]
    for empty in [b for b in bins if not b]:
        donor = max(bins, key=len)
        if len(donor) < 2:
            break
        lightest = min(donor, key=lambda i: weights[i])
        donor.remove(lightest)
        empty.append(lightest)
    return bins


def naive_samples(lengths: Sequence[int], cap: int, num_replicas: int,
                  counts: Sequence[int] | None = None) -> list[Bins]:
    """Naive packing: arrival order, filled to the cap, dealt to the replicas in turn.

    With ``counts`` (microbatches per replica, as the user fixed them for ppsched's
    packing too), arrival order is cut into ``sum(counts)`` microbatches of about equal
    tokens (`split_in_order`) and dealt in turn to the replicas that still need one, so
    both packings run the same counts. When arrival order cannot make that many within
    the cap, it is filled to the cap as without counts (logged).
    """
    if counts is not None:
        bins = split_in_order(lengths, cap, sum(counts))
        if bins is not None:
            groups: list[Bins] = [[] for _ in counts]
            turn = itertools.cycle(range(len(counts)))
            for b in bins:
                r = next(x for x in turn if len(groups[x]) < counts[x])
                groups[r].append(b)
            return groups
        logger.info("naive packing: arrival order needs more than %d microbatches within "
                    "the cap; filled to the cap instead", sum(counts))
    bins = fill_in_order(lengths, cap)
    return [bins[r::num_replicas] for r in range(num_replicas)]


def replica_profile(base: Profile, microbatches: Sequence[Sequence[int]], cost: CostModel,
                    reference_tokens: int, name: str) -> Profile:
    """The base profile with one entry per microbatch: ``microbatches`` scales when B and W
    scale as F, else matrices ``[stage][microbatch]`` (DESIGN.md 6.2)."""
    data = base.model_dump(exclude={"microbatches"})
    for key in ("t_f", "t_b", "t_w", "t_comm", "m_b", "m_w"):
        value = data.get(key)
        if isinstance(value, list) and value and isinstance(value[0], list):
            raise PackingError(f"profile.{key}", "a matrix", "per-stage values (a number or "
                               "a list): packing sets the per-microbatch costs")
    scales = [cost.scales(mb, reference_tokens) for mb in microbatches]
    data["num_microbatches"] = len(microbatches)
    data["name"] = name
    if cost.uniform_kinds:
        data["microbatches"] = [{"scale": f, "memory_scale": k} for f, _, _, k in scales]
    else:
        problem = base.problem
        for key, column in (("t_f", 0), ("t_b", 1), ("t_w", 2), ("m_b", 3), ("m_w", 3),
                            ("t_comm", 3)):
            per_stage = getattr(problem, key)
            data[key] = [[x * sc[column] for sc in scales] for x in per_stage]
    return parse_profile(data)


def entry_orders(costs: Sequence[float]) -> list[list[int]]:
    """Candidate orders of entry into the pipeline for microbatches of these costs, distinct,
    as lists of indices: costliest first, cheapest first, and cheapest at both ends with
    the costliest in the middle (the warm-up runs the first microbatches' F over p-1
    stages before the pipe is full, the cool-down the last ones' B and W: cheap ones there
    shorten both)."""
    up = sorted(range(len(costs)), key=lambda j: (costs[j], j))
    candidates = [up[::-1], up, up[0::2] + up[1::2][::-1]]
    distinct: list[list[int]] = []
    for order in candidates:
        if order not in distinct:
            distinct.append(order)
    return distinct


def solve_replica(name: str, base: Profile, index: int, group: Bins, spec: PackSpec,
                  method: str, *, choose_order: bool) -> ReplicaPlan:
    """One replica's profile (its microbatches in `group`'s order), solved.

    With `choose_order` the replica enters its microbatches in the best order found: the
    heuristic and ``ilp`` choose it inside `solve` (DESIGN.md 6.2); for a named schedule,
    which keeps its input order, the fastest of `entry_orders` by the simulated cost.
    Without it, the microbatches enter in `group`'s order (naive packing's arrival order).
    """
    if not group:
        return ReplicaPlan((), None, None)
    searched = choose_order and not chooses_entry_order(method)
    costs = [spec.cost.time([spec.lengths[i] for i in mb]) for mb in group]
    orders = entry_orders(costs) if searched else [list(range(len(group)))]
    best: ReplicaPlan | None = None
    for order in orders:
        ordered = [group[k] for k in order]
        lengths = [[spec.lengths[i] for i in mb] for mb in ordered]
        plans = tuple(MicrobatchPlan(tuple(mb), sum(ls), spec.cost.time(ls),
                                     spec.cost.memory(ls))
                      for mb, ls in zip(ordered, lengths, strict=True))
        profile = replica_profile(base, lengths, spec.cost, spec.reference,
                                  f"{base.label}-{name}-replica{index}")
        plan = ReplicaPlan(plans, profile, solve(profile, method,
                                                 keep_order=not choose_order))
        if best is None or plan.cost < best.cost:
            best = plan
    assert best is not None
    return best


def solve_replicas(name: str, base: Profile, groups: list[Bins], spec: PackSpec,
                   method: str, *, choose_order: bool, strategy: str = "") -> Packing:
    """Every replica of an assignment solved (see `solve_replica`)."""
    return Packing(name, method, tuple(
        solve_replica(name, base, r, group, spec, method, choose_order=choose_order)
        for r, group in enumerate(groups)), strategy=strategy)
