"""The heuristic's choice of an activation policy per (stage, microbatch) (DESIGN.md 6.3).

Where a profile offers recompute or offload, a memory limit no longer fixes how much of
the pipeline can be in flight: an activation may leave the device (offload, ``O`` after
its ``F`` on the device-to-host lane, ``L`` back before its ``B``) or be dropped and
recomputed (``R`` before its ``B`` on the compute lane). The search here:

1. solves the keep-only problem with today's heuristic at a *virtual* limit at or above
   the real one (`virtual_limits`: the real limit up to the unconstrained peak), which
   gives the order of the compute ops and, timed, when each activation is born (end of
   its ``F``) and needed (start of its ``B``);
2. while some rank's device memory, taken over time, is over the real limit: at that
   rank's peak instant it takes the activations alive there with the longest lifespans
   first and offloads them where the copies fit inside the lifespan (``O`` right after
   the ``F``; ``L`` triggered by the last compute op that starts early enough for the
   reload to land before the ``B``), recomputes them otherwise (``R`` right before the
   ``B``), until the excess is covered; then re-times the whole order with the simulator;
3. keeps the cheapest valid schedule over the virtual limits and the two policy
   preferences (offload first, recompute only), and the keep-only schedule at the real
   limit.

Every figure comes from `solver.simulator.simulate`; an order that does not validate is
never returned.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Iterable
from typing import Any

from ppsched.solver.generators import REGISTRY
from ppsched.solver.model.bounds import round_trip
from ppsched.solver.model.ops import Op, Orders, parts
from ppsched.solver.model.policy_fields import PolicyFields, policy_fields
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim.result import Simulation
from ppsched.solver.sim.simulator import simulate

logger = logging.getLogger(__name__)

_EPS = 1e-9
KEEP, RECOMPUTE, OFFLOAD = "keep", "recompute", "offload"
# Virtual limits as multiples of the real one (with the real m_b).
VIRTUAL_FACTORS = (1.25, 1.5, 2.0, 3.0)
# Scales of the expected residence (`residence`): 1 trusts the estimate, more leaves
# room for copies that queue on a busy lane.
RESIDENCE_SCALES = (1.0, 1.5, 2.0, 3.0)
# How far a rank's limit is raised where its activations leave the device most.
EXTRA_LIMIT = (0.0, 0.5)
# Rounds of the fitting loop per candidate (each round assigns a policy to at least one
# activation, so S*m rounds always suffice; this cap only bounds the time).
MAX_ROUNDS = 200

# (problem, objective, below) -> orders, name, objective; `below` as `heuristic_orders`'s:
# where the answer is not below it, any result that is not (or none: no orders, inf).
KeepSolver = Callable[[Problem, str, float], tuple[Orders, str, float]]


def offers_policies(problem: Problem) -> bool:
    """Whether the profile makes recompute or offload available (DESIGN.md 6.3 opt-in)."""
    return policy_fields(problem).any


def keep_only(problem: Problem, limit: float | tuple[float, ...] | None = None) -> Problem:
    """`problem` with no policy available (and, if given, another memory limit)."""
    changes: dict[str, Any] = {"can_recompute": False, "can_offload": False}
    if limit is not None:
        changes["memory_limit"] = limit if isinstance(limit, tuple) else \
            (limit,) * problem.num_ranks
    return dataclasses.replace(problem, **changes)


def memory_events(problem: Problem, op: Op, policy: dict[tuple[int, int], str],
                  fields: PolicyFields | None = None) -> tuple[float, float]:
    """The memory `op` adds at its start and frees at its end on its rank (DESIGN.md 6.3:
    an increase applies at the start, a decrease at the end)."""
    pf = fields or policy_fields(problem)
    s, j = op.stage, op.microbatch
    kind = op.kind
    m_b = problem.m_b[s]
    if kind == "F":
        delta = pf.m_ckpt[s] if policy.get((s, j)) == RECOMPUTE else m_b
    elif kind == "R":
        delta = m_b - pf.m_ckpt[s]
    elif kind == "O":
        delta = -(m_b - pf.m_keep[s])
    elif kind == "L":
        delta = m_b - pf.m_keep[s]
    elif kind == "B":
        delta = problem.m_w[s] - m_b
    elif kind == "W":
        delta = -problem.m_w[s]
    else:  # BW
        delta = -m_b
    return (delta, 0.0) if delta > 0 else (0.0, delta)


def peak_instant(problem: Problem, sim: Simulation, rank: int,
                 policy: dict[tuple[int, int], str]) -> tuple[float, float]:
    """The rank's peak device memory taken over time, and the first instant it is held
    (at one instant ends apply before starts)."""
    events: list[tuple[float, int, float]] = []
    fields = policy_fields(problem)
    for i, op in enumerate(sim.order[rank]):
        begin, finish = sim.start[rank][i], sim.end[rank][i]
        if begin is None or finish is None:
            continue
        up, down = memory_events(problem, op, policy, fields)
        if up:
            events.append((begin, 1, up))
        if down:
            events.append((finish, 0, down))
    events.sort()
    held = peak = 0.0
    when = 0.0
    for t, _, delta in events:
        held += delta
        if held > peak + _EPS:
            peak, when = held, t
    return peak, when


@dataclasses.dataclass(frozen=True)
class Life:
    """One activation's life in the keep-only timing: born at the end of its F, needed at
    the start of its B (or BW)."""

    stage: int
    microbatch: int
    rank: int
    born: float
    needed: float

    @property
    def span(self) -> float:
        return self.needed - self.born


def lives(problem: Problem, sim: Simulation) -> dict[tuple[int, int], Life]:
    """Each (stage, microbatch)'s life in a timed order of compute ops."""
    born: dict[tuple[int, int], tuple[int, float]] = {}
    needed: dict[tuple[int, int], float] = {}
    for r, ops in enumerate(sim.order):
        for i, op in enumerate(ops):
            if op.kind == "F":
                born[(op.stage, op.microbatch)] = (r, sim.end[r][i] or 0.0)
            elif op.kind in ("B", "BW"):
                needed[(op.stage, op.microbatch)] = sim.start[r][i] or 0.0
    return {key: Life(key[0], key[1], r, t, needed[key]) for key, (r, t) in born.items()}


def with_policies(problem: Problem, compute: Orders, policy: dict[tuple[int, int], str],
                  life: dict[tuple[int, int], Life], keep_start: dict[Op, float]) -> Orders:
    """The compute orders with the R, O and L ops that `policy` implies, placed.

    ``R`` goes right before its ``B`` (Megatron's place: the recomputed tensors live the
    shortest). ``O`` goes right after its ``F``. ``L`` goes right after the last compute
    op of the rank that starts (in the keep-only timing `life` came from) early enough
    for the reload to land before the ``B``: a copy in a rank's list is issued when the
    program reaches it, so that op triggers the reload, as late as it can be.
    """
    t_reload = policy_fields(problem).t_reload
    offloaded: list[list[tuple[int, int]]] = [[] for _ in compute]
    for (s, j), choice in policy.items():
        if choice == OFFLOAD:
            offloaded[problem.stage_to_rank[s]].append((s, j))
    orders: Orders = []
    for r, ops in enumerate(compute):
        starts = [keep_start.get(op) for op in ops] if offloaded[r] else []
        position = {op: i for i, op in enumerate(ops)} if offloaded[r] else {}
        reloads: dict[int, list[Op]] = {}
        for s, j in offloaded[r]:
            latest = life[(s, j)].needed - t_reload[s]
            f_at = position[Op("F", s, j)]
            b_at = position.get(Op("B", s, j), position.get(Op("BW", s, j), len(ops)))
            trigger = f_at
            for i in range(f_at + 1, b_at):
                begin = starts[i]
                if begin is not None and begin <= latest + _EPS:
                    trigger = i
            reloads.setdefault(trigger, []).append(Op("L", s, j))
        row: list[Op] = []
        for i, op in enumerate(ops):
            key = (op.stage, op.microbatch)
            if op.kind in ("B", "BW") and policy.get(key) == RECOMPUTE:
                row.append(Op("R", *key))
            row.append(op)
            if op.kind == "F" and policy.get(key) == OFFLOAD:
                row.append(Op("O", *key))
            triggered = reloads.get(i)
            if triggered:  # reloads in the order their Bs need them
                row.extend(sorted(triggered,
                                  key=lambda x: life[(x.stage, x.microbatch)].needed))
        orders.append(row)
    return orders


def fit(problem: Problem, compute: Orders, keep_sim: Simulation, prefer: str,
        objective: str = "cost", give_up_at: float = math.inf,
        ) -> tuple[Orders, Simulation] | None:
    """Add policies to the keep-only `compute` orders until the real limit holds.

    Args:
        prefer: ``offload`` (offload where the copies fit in the activation's life,
            recompute otherwise) or ``recompute`` (recompute only).
        give_up_at: stop (None) once a round's orders take this long by `objective`:
            each round only adds policies, so the orders it ends with take as long or
            longer (`policy_search`).

    Returns:
        The orders and their simulation, valid; None when no choice of policies fits.
    """
    life = lives(problem, keep_sim)
    keep_start = {op: t for ops, times in zip(keep_sim.order, keep_sim.start, strict=True)
                  for op, t in zip(ops, times, strict=True) if t is not None}
    policy: dict[tuple[int, int], str] = {}
    orders = compute
    pf = policy_fields(problem)
    can_offload = prefer == OFFLOAD and pf.can_offload
    # Over-limit ranks with no kept activation alive at their peak, by (peak, instant).
    stuck: dict[int, tuple[float, float]] = {}
    for _ in range(MAX_ROUNDS):
        sim = simulate(problem, orders)
        if sim.ok:
            return orders, sim
        if any(v.kind != "memory" for v in sim.violations):
            logger.debug("policy candidate invalid: %s", sim.violations[0])
            return None
        if sim.metrics is not None and sim.metrics.objective(objective) >= give_up_at:
            return None
        # A round only adds policies where a rank peaks. Where, at this round's times,
        # a rank is over its limit whatever the policies, the fit cannot end within it
        # unless later policies move the times enough, which the fits measured never
        # did (issue 27: 8 of the 10 V fits of gpt1.5b-p8-m24 at 0.5p with offload ran
        # 7-12 simulations each to fail; now one).
        if any(peak > limit + _EPS for peak, limit in
               zip(least_held_peaks(problem, sim, prefer), problem.memory_limit,
                   strict=True)):
            return None
        added = False
        was_stuck, stuck = stuck, {}
        for r in range(problem.num_ranks):
            peak, when = peak_instant(problem, sim, r, policy)
            excess = peak - problem.memory_limit[r]
            if excess <= _EPS:
                continue
            alive = sorted((lf for lf in life.values() if lf.rank == r
                            and policy.get((lf.stage, lf.microbatch), KEEP) == KEEP
                            and lf.born - _EPS <= when < lf.needed),
                           key=lambda lf: -lf.span)
            if not alive:
                # Nothing left to move at this rank's peak. Had the round before left it
                # at the same peak, at the same instant, the policies other ranks took
                # since did not move it; later rounds only add more of them. Such a
                # fit ran on, round after round, to fail (issue 27: 8 of the 10 V fits
                # of gpt1.5b-p8-m24 at 0.5p with offload, 7-12 simulations each).
                if was_stuck.get(r) == (peak, when):
                    return None
                stuck[r] = (peak, when)
                continue
            for lf in alive:
                key = (lf.stage, lf.microbatch)
                s = lf.stage
                # The copies fit in the life: the B need not wait for its reload.
                hides = lf.span + _EPS >= pf.t_offload[s] + pf.t_reload[s]
                if can_offload and hides:
                    policy[key] = OFFLOAD
                    excess -= problem.m_b[s] - pf.m_keep[s]
                elif pf.can_recompute:
                    policy[key] = RECOMPUTE
                    excess -= problem.m_b[s] - pf.m_ckpt[s]
                elif can_offload:
                    policy[key] = OFFLOAD  # the copies delay the B; still the only way
                    excess -= problem.m_b[s] - pf.m_keep[s]
                else:
                    continue
                added = True
                if excess <= _EPS:
                    break
        if not added:
            return None
        orders = with_policies(problem, compute, policy, life, keep_start)
    return None


def least_held_peaks(problem: Problem, sim: Simulation, prefer: str) -> list[float]:
    """Each rank's peak memory, with its compute ops at `sim`'s times, were every
    activation to hold only the least that a policy `fit` may give it leaves on the
    device: a lower bound on the peak of any choice of policies at those times.

    That least: in its F, all of it if offloaded and its checkpoint if recomputed;
    between its F and its B, what offload keeps or its checkpoint; from the start of its
    B, all of it. Every W's memory, from its B to its end, no policy moves. (Where
    neither policy is open to `fit`, all of it throughout.)
    """
    pf = policy_fields(problem)
    offload = prefer == OFFLOAD and pf.can_offload
    recompute = pf.can_recompute
    peaks = []
    for r, ops in enumerate(sim.order):
        events: list[tuple[float, int, float]] = []
        for i, op in enumerate(ops):
            begin, finish = sim.start[r][i], sim.end[r][i]
            if begin is None or finish is None or op.kind in ("R", "O", "L"):
                continue
            s = op.stage
            m_b = problem.m_b[s]
            in_f = min([m_b] * offload + [pf.m_ckpt[s]] * recompute or [m_b])
            held = min([pf.m_keep[s]] * offload + [pf.m_ckpt[s]] * recompute or [m_b])
            if op.kind == "F":
                events.append((begin, 1, in_f))
                events.append((finish, 0, held - in_f))
            elif op.kind in ("B", "BW"):
                events.append((begin, 1, m_b - held))
                delta = -m_b if op.kind == "BW" else problem.m_w[s] - m_b
                events.append((begin, 1, delta) if delta > 0 else (finish, 0, delta))
            elif op.kind == "W":
                events.append((finish, 0, -problem.m_w[s]))
        events.sort()  # at one instant, ends before starts (DESIGN.md 6.3)
        total = peak = 0.0
        for _, _, delta in events:
            total += delta
            peak = max(peak, total)
        peaks.append(peak)
    return peaks


def residence(problem: Problem, stage: int, prefer: str, scale: float) -> float:
    """The share of an activation's keep-only life it is expected to spend on the device
    under `prefer`, times `scale` (at most 1).

    Kept, an activation holds its memory from the start of its F to the end of its B:
    at least the round trip plus the B. Offloaded, it holds it during the F and the O,
    and during the L and the B; recomputed, during the R and the B (and m_ckpt always).
    Where the copies do not fit in the round trip, the share is 1.
    """
    pf = policy_fields(problem)
    life = round_trip(problem, stage) + problem.t_b[stage]
    if prefer == OFFLOAD:
        held = problem.t_f[stage] + pf.t_offload[stage] + pf.t_reload[stage] \
            + problem.t_b[stage]
        floor = pf.m_keep[stage] / problem.m_b[stage] if problem.m_b[stage] else 1.0
    else:
        held = pf.t_r[stage] + problem.t_b[stage]
        floor = pf.m_ckpt[stage] / problem.m_b[stage] if problem.m_b[stage] else 1.0
    if life <= 0 or held >= life:
        return 1.0
    return min(1.0, max(floor, scale * held / life))


def relaxed_problems(problem: Problem, prefer: str) -> list[Problem]:
    """The keep-only problems whose heuristic orders the search starts from.

    Two families: the real memory with each stage's ``m_b`` scaled by its expected
    `residence` under `prefer` (the keep heuristic then puts as many activations in
    flight as the policy makes room for, while the Ws' memory stays real), with each
    rank's limit optionally raised where its activations leave the device most; and
    the real ``m_b`` at virtual limits `VIRTUAL_FACTORS` times the real one.
    """
    found: list[Problem] = []
    limit = problem.memory_limit
    for scale in RESIDENCE_SCALES:
        share = [residence(problem, s, prefer, scale) for s in range(problem.num_stages)]
        m_b = tuple(x * a for x, a in zip(problem.m_b, share, strict=True))
        rank_share = [max(share[s] for s in stages) for stages in problem.rank_to_stages]
        for extra in EXTRA_LIMIT:
            raised = tuple(x * (1 + extra * (1 - a)) for x, a in
                           zip(limit, rank_share, strict=True))
            found.append(dataclasses.replace(keep_only(problem, raised), m_b=m_b))
    for factor in VIRTUAL_FACTORS:
        found.append(keep_only(problem, tuple(x * factor for x in limit)))
    unique: list[Problem] = []
    for candidate in found:
        if candidate not in unique:
            unique.append(candidate)
    return unique


def policy_search(problem: Problem, objective: str, keep_solver: KeepSolver,
                  incumbent: float = math.inf) -> tuple[Orders, str, float] | None:
    """The cheapest valid schedule with policies the search finds, or None if none fits.

    Args:
        keep_solver: today's heuristic for a keep-only problem: orders, name, objective.
        incumbent: what a result must beat by more than `_EPS` to be used (the keep-only
            schedule's objective, or less: `policy_orders`'s `below`): a candidate that
            cannot is not fitted, and the keep-only solves race against it.
    """
    best: tuple[Orders, str, float] | None = None
    pf = policy_fields(problem)
    preferences = [p for p, ok in ((OFFLOAD, pf.can_offload),
                                   (RECOMPUTE, pf.can_recompute)) if ok]
    tried: set[tuple[object, ...]] = set()
    for prefer in preferences:
        for relaxed in relaxed_problems(problem, prefer):
            # A fitted order takes at least its keep-only objective (`_fit_one`), so a
            # compute order can matter only below what a result must beat: the keep
            # solve races against that, and is exact there.
            race = min(incumbent, best[2] - _EPS if best else math.inf)
            try:
                compute, name, _ = keep_solver(relaxed, objective, race)
            except ValueError as error:  # a relaxed limit the keep heuristic refuses
                logger.debug("relaxed problem refused: %s", error)
                continue
            found = [(compute, name)] if compute else []  # none: raced out
            # The keep heuristic's best at the relaxed limit is not always the order that
            # takes policies best: the placement's named schedules (ZB-V above all) hold
            # their activations in the pattern offload was priced for, so they are fitted
            # too (gpt1.5b-p8-m24 at 0.5p with k = 0.5: ZB-V fits to 1188.4 where the
            # rounds build that beats it keep-only fits to nothing).
            found += _named_schedules(relaxed)
            for compute, name in found:
                best = _fit_one(problem, objective, compute, name, prefer, tried, best,
                                incumbent)
    return best


def _named_schedules(problem: Problem) -> list[tuple[Orders, str]]:
    """The placement's named schedules (several chunks per rank) valid for `problem`."""
    if problem.num_chunks == 1:
        return []
    found = []
    for name, generator in sorted(REGISTRY.items()):
        if not generator.supports(problem):
            continue
        try:
            orders = generator(problem)
        except ValueError:
            continue  # a shape the schedule refuses
        if simulate(problem, orders).ok:
            found.append((orders, name))
    return found


def _fit_one(problem: Problem, objective: str, compute: Orders, name: str, prefer: str,
             tried: set[tuple[object, ...]], best: tuple[Orders, str, float] | None,
             incumbent: float) -> tuple[Orders, str, float] | None:
    """`best` or, if better, the compute order `compute` with policies fitted."""
    # Policies attach to plain ops: an FB (DESIGN.md 6.4) runs as its two parts.
    compute = [[part for op in ops for part in parts(op)] for ops in compute]
    # The compute order's timing does not depend on memory: time it once.
    keep_sim = simulate(keep_only(problem, (math.inf,) * problem.num_ranks), compute)
    if not keep_sim.ok:
        return best
    key = (*map(tuple, compute), prefer)
    if key in tried:
        return best
    tried.add(key)
    # The policies only add ops and waits to the compute order (an R before its B
    # on the compute lane, a B after its L), never before a rank's first op (an
    # F, run before any B anywhere), so the fitted schedule's spans are no
    # shorter than the keep-only timing's, nor a later round's than an earlier
    # one's. Where that cannot be taken (not below the best by more than _EPS)
    # or cannot beat the incumbent, the fitting (its simulations were 3/4 of a
    # policy solve, issue 27) cannot change the answer: at `incumbent` + _EPS or
    # more a result loses to the keep-only schedule, and so does any result it
    # kept from being taken (within _EPS of it).
    give_up_at = min(incumbent + _EPS, best[2] - _EPS if best else math.inf)
    if _objective(keep_sim, objective) >= give_up_at:
        return best
    fitted = fit(problem, compute, keep_sim, prefer, objective, give_up_at)
    if fitted is None:
        return best
    orders, sim = fitted
    assert sim.metrics is not None
    value = sim.metrics.objective(objective)
    if best is None or value < best[2] - _EPS:
        counts = count_policies(orders)
        label = "+".join(k for k in (OFFLOAD, RECOMPUTE) if counts[k]) or KEEP
        best = (orders, f"{name}+{label}", value)
    return best


def _objective(sim: Simulation, objective: str) -> float:
    assert sim.metrics is not None
    return sim.metrics.objective(objective)


def policy_orders(problem: Problem, objective: str, keep_solver: KeepSolver,
                  below: float = math.inf) -> tuple[Orders, str, float]:
    """The heuristic's orders for a problem that offers policies: the better of the
    keep-only heuristic at the real limit and `policy_search` (ties: keep).

    `below` as `heuristic_orders`'s: where the answer is not below it, the result may not
    be either, or be none (no orders, inf). The policy search then fits nothing that
    cannot get below it (the loop2 search, after V's answer: issue 27)."""
    orders, name, value = keep_solver(keep_only(problem), objective, below)
    found = policy_search(problem, objective, keep_solver, min(value, below))
    if found is not None and found[2] < value - _EPS:
        logger.info("policies: %s at %g (keep only: %g)", found[1], found[2], value)
        return found
    return orders, name, value


def count_policies(orders: Iterable[Iterable[Op]]) -> dict[str, int]:
    """How many (stage, microbatch) each policy covers in `orders`."""
    counts = {RECOMPUTE: 0, OFFLOAD: 0}
    for ops in orders:
        for op in ops:
            if op.kind == "R":
                counts[RECOMPUTE] += 1
            elif op.kind == "O":
                counts[OFFLOAD] += 1
    return counts
