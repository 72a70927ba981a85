"""ppsched's packing: a search over assignments, judged by the step time (DESIGN.md 6.2).

Balancing the replicas' summed costs is not balancing their step times. A replica's step
also pays its pipeline's fill and drain, which its first and last microbatches set, and
its memory limit, which its largest microbatches bind. So ppsched builds a few
assignments of the samples, solves every replica of each, keeps the one whose slowest
replica is fastest, then moves single samples from the slowest replica to the fastest
while the step time falls (`rebalance`). The assignments:

- ``balanced``: `balanced_samples` (replicas, then each replica's microbatches, balanced by
  cost within the cap);
- ``fill``: the same replicas, each replica's samples longest first into the first
  microbatch with room (first-fit decreasing): full microbatches and a few light ones,
  which the order of entry then puts at the pipeline's ends;
- ``arrival``: naive packing's own assignment, when the user left the counts free, so
  that ppsched's step time is never longer than naive packing's with the same method
  (ppsched then only chooses the order of entry).
"""

from __future__ import annotations

from collections.abc import Sequence

from ppsched.solver.model.profile import Profile
from ppsched.solver.packing.cost import CostModel
from ppsched.solver.packing.partition import Bins
from ppsched.solver.packing.plan import (
    Packing,
    PackResult,
    PackSpec,
    balanced_samples,
    costliest_first,
    fill_empty,
    naive_samples,
    solve_replica,
    solve_replicas,
    split_replicas,
)

# Samples tried per rebalancing step (those whose cost is nearest half the gap between
# the slowest and the fastest replica): each try solves two replicas.
TRIES_PER_MOVE = 3


def fill_samples(lengths: Sequence[int], cost: CostModel, cap: int,
                 counts: Sequence[int], replicas: Bins | None) -> list[Bins] | None:
    """The ``fill`` assignment: from a replica split (`split_replicas`), per replica
    first-fit decreasing by tokens into at most its count of microbatches (spread over
    exactly that count when fewer fill). None without a split, or when a replica's
    samples need more microbatches that way."""
    if replicas is None:
        return None
    weights = [cost.time([s]) for s in lengths]
    result: list[Bins] = []
    for items, count in zip(replicas, counts, strict=True):
        bins: Bins = []
        room: list[int] = []
        for i in sorted(items, key=lambda i: (-lengths[i], i)):
            slot = next((b for b, r in enumerate(room) if lengths[i] <= r), None)
            if slot is None:
                if len(bins) == count:
                    return None
                bins.append([])
                room.append(cap)
                slot = len(bins) - 1
            bins[slot].append(i)
            room[slot] -= lengths[i]
        bins += [[] for _ in range(count - len(bins))]
        result.append(costliest_first(fill_empty(bins, weights), weights))
    return result


def candidate_assignments(spec: PackSpec) -> list[tuple[str, list[Bins]]]:
    """The assignments the search solves, by name (see the module's docstring)."""
    counts = spec.counts()
    # One replica split serves both: balancing the samples' costs over the replicas is
    # the costly step on large draws.
    replicas = split_replicas(spec.lengths, spec.cost, spec.cap, counts)
    candidates = [("balanced", balanced_samples(spec.lengths, spec.cost, spec.cap, counts,
                                                replicas))]
    fill = fill_samples(spec.lengths, spec.cost, spec.cap, counts, replicas)
    if fill is not None:
        candidates.append(("fill", fill))
    if spec.microbatches is None:  # the counts are ppsched's to choose
        candidates.append(("arrival", naive_samples(spec.lengths, spec.cap,
                                                    spec.num_replicas)))
    return candidates


def best_packing(base: Profile, spec: PackSpec) -> Packing:
    """The candidate assignment of the shortest step time, each replica solved with
    ``spec.method`` in the order of entry it chooses, then `rebalance`d."""
    best: Packing | None = None
    for strategy, groups in candidate_assignments(spec):
        packing = solve_replicas("packed", base, groups, spec, spec.method,
                                 choose_order=True, strategy=strategy)
        if best is None or packing.step_time < best.step_time - 1e-9:
            best = packing
    assert best is not None  # the balanced assignment is always a candidate
    return rebalance(base, spec, best, max_moves=2 * spec.num_replicas)


def rebalance(base: Profile, spec: PackSpec, packing: Packing, *,
              max_moves: int) -> Packing:
    """`packing` with up to `max_moves` samples moved, one at a time, from the slowest
    replica into a microbatch of the fastest, each move kept only when the simulated
    step time falls. A moved sample comes from a microbatch of several (no microbatch is
    emptied, so the counts hold) and fits its new microbatch's cap."""
    moves = 0
    while moves < max_moves:
        moved = _one_move(base, spec, packing)
        if moved is None:
            break
        packing, moves = moved, moves + 1
    if moves == 0:
        return packing
    return Packing(packing.name, packing.method, packing.replicas,
                   strategy=packing.strategy, moves=packing.moves + moves)


def _one_move(base: Profile, spec: PackSpec, packing: Packing) -> Packing | None:
    """The first of `TRIES_PER_MOVE` single-sample moves that shortens the step, or None."""
    costs = [r.cost for r in packing.replicas]
    slow = max(range(len(costs)), key=lambda r: costs[r])
    fast = min(range(len(costs)), key=lambda r: costs[r])
    if slow == fast or costs[slow] <= 0:
        return None
    # A replica's step grows with its work about as its cost-to-work ratio says; moving
    # half the gap's worth of work evens the two.
    slow_plan = packing.replicas[slow]
    target = (costs[slow] - costs[fast]) / 2 * slow_plan.work / costs[slow]
    groups = packing.groups()
    tokens = [[sum(spec.lengths[i] for i in mb) for mb in g] for g in groups]
    movable = [(k, i) for k, mb in enumerate(groups[slow]) if len(mb) > 1 for i in mb]
    movable.sort(key=lambda ki: (abs(spec.cost.time([spec.lengths[ki[1]]]) - target),
                                 ki[1]))
    for k, i in movable[:TRIES_PER_MOVE]:
        room = [(tokens[fast][d], d) for d in range(len(groups[fast]))
                if tokens[fast][d] + spec.lengths[i] <= spec.cap]
        if not room:
            continue
        dest = min(room)[1]  # the lightest microbatch that takes it
        new_slow = [[x for x in mb if x != i] if n == k else list(mb)
                    for n, mb in enumerate(groups[slow])]
        new_fast = [[*mb, i] if n == dest else list(mb)
                    for n, mb in enumerate(groups[fast])]
        replicas = list(packing.replicas)
        replicas[slow] = solve_replica("packed", base, slow, new_slow, spec, spec.method,
                                       choose_order=True)
        replicas[fast] = solve_replica("packed", base, fast, new_fast, spec, spec.method,
                                       choose_order=True)
        if max(r.cost for r in replicas) < packing.step_time - 1e-9:
            return Packing(packing.name, packing.method, tuple(replicas),
                           strategy=packing.strategy, moves=packing.moves)
    return None


def pack(base: Profile, spec: PackSpec) -> PackResult:
    """Pack `spec`'s samples both ways and solve every replica of each.

    ppsched's packing is `best_packing`; naive packing fills microbatches to the cap in
    arrival order (with ``spec.microbatches``: cuts arrival order into that many, so both
    sides run the same counts), deals them to the replicas in turn and runs them in that
    order, solved with ``spec.naive_method`` (default: ``spec.method``).

    Args:
        base: the pipeline's profile; its per-stage times and memory are those of the
            reference microbatch (``spec.reference`` tokens in one sample); its
            ``num_microbatches`` is replaced by each replica's count.
        spec: the samples, the cap, the replicas, the cost model and the methods.

    Raises:
        PackingError, ProfileError: bad input, named; a method that does not take a
            replica's shape (e.g. fewer microbatches than it needs).
    """
    packed = best_packing(base, spec)
    naive = solve_replicas("naive", base, naive_samples(spec.lengths, spec.cap,
                                                        spec.num_replicas,
                                                        spec.microbatches), spec,
                           spec.naive_method or spec.method, choose_order=False)
    return PackResult(spec, packed, naive)
