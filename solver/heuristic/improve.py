"""A cheap improvement step after the heuristic: local search on the per-rank orders.

Each move takes one op of one rank and puts it a few places earlier or later in that
rank's order, or exchanges two ops a few places apart; the simulator re-times every move
(so memory, deadlocks and t_comm are exactly the contract's) and a move is kept when it
lowers the objective, or keeps it and lowers the sum of the ranks' spans (which lets a
non-critical rank improve first, then the critical one). Moves are tried where time is
lost first: around the ops that wait for their input. The search stops at a local
optimum or when its budget of simulated ops is spent, so its cost does not depend on the
machine's speed; it is skipped where the budget buys too few moves to be worth it.
"""

from __future__ import annotations

from collections.abc import Iterator

from ppsched.solver.model.ops import Orders
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim.result import Simulation
from ppsched.solver.sim.simulator import simulate

_EPS = 1e-9
WINDOW = 3
"""How many places an op may move per step."""
BUDGET_OPS = 50_000
"""Simulated ops the search may spend in all (about 0.05 s here); a move costs one
simulation of the whole order, so small orders get many moves and large ones few."""
MIN_MOVES = 200
"""Below this many affordable moves the search is skipped: on the paper's profiles (576
ops and more) a few dozen moves found nothing while costing more than the whole knob
search."""


def improve(problem: Problem, orders: Orders, objective: str = "cost",
            budget_ops: int = BUDGET_OPS, min_moves: int = MIN_MOVES,
            ) -> tuple[Orders, float] | None:
    """Local search from `orders` (valid): the improved orders and their objective, or
    None when no move helped (or the budget allows fewer than `min_moves`, or the start
    is at the bound)."""
    budget = _moves_affordable(orders, budget_ops)
    if budget < max(1, min_moves):
        return None
    sim = simulate(problem, orders)
    assert sim.ok and sim.metrics is not None, "improve starts from a valid order"
    best = _score(sim, objective)
    if best[0] <= sim.metrics.lower_bound + _EPS:
        return None  # proven optimal already: nothing to search
    kept = 0
    improved = True
    while improved and budget > 0:
        improved = False
        for move in _moves(orders, sim):
            if budget <= 0:
                break
            budget -= 1
            trial = _apply(orders, move)
            candidate = simulate(problem, trial)
            if not candidate.ok or candidate.metrics is None:
                continue
            score = _score(candidate, objective)
            if score[0] < best[0] - _EPS or (score[0] <= best[0] + _EPS
                                             and score[1] < best[1] - _EPS):
                orders, sim, best, improved = trial, candidate, score, True
                kept += 1
                break
    return (orders, best[0]) if kept else None


def runs_on(orders: Orders, budget_ops: int = BUDGET_OPS, min_moves: int = MIN_MOVES,
            ) -> bool:
    """Whether `improve` searches from `orders` at all (its budget buys enough moves)."""
    return _moves_affordable(orders, budget_ops) >= max(1, min_moves)


def _moves_affordable(orders: Orders, budget_ops: int) -> int:
    # Each move simulates the whole order; the start's simulation counts too.
    return budget_ops // max(1, sum(map(len, orders))) - 1


def _score(sim: Simulation, objective: str) -> tuple[float, float]:
    assert sim.metrics is not None
    return sim.metrics.objective(objective), sum(sim.metrics.span)


Move = tuple[int, int, int, bool]
"""(rank, i, k, exchange): op i moves to place k, or with `exchange` ops i and k trade."""


def _apply(orders: Orders, move: Move) -> Orders:
    r, i, k, exchange = move
    trial = list(orders)
    ops = trial[r] = list(orders[r])
    if exchange:
        ops[i], ops[k] = ops[k], ops[i]
    else:
        ops.insert(k, ops.pop(i))
    return trial


def _moves(orders: Orders, sim: Simulation) -> Iterator[Move]:
    """Moves around each op that waits for its input, longest waits first (the waiting
    op earlier or later, a later op into the wait); then every op of every rank moved or
    exchanged within `WINDOW` places (reached on small orders within the budget)."""
    waits = []
    for r, ops in enumerate(orders):
        start, end = sim.start[r], sim.end[r]
        for i in range(1, len(ops)):
            s, e = start[i], end[i - 1]
            assert s is not None and e is not None
            if s > e + _EPS:
                waits.append((s - e, r, i))
    waits.sort(key=lambda x: -x[0])
    for _, r, i in waits:
        ops = orders[r]
        for d in range(1, WINDOW + 1):
            if i - d >= 0 and _may_pass(ops, i, i - d):
                yield r, i, i - d, False  # the waiting op earlier
            if i + d < len(ops) and _may_pass(ops, i + d, i):
                yield r, i + d, i, False  # a later op into the wait
            if i + d < len(ops) and _may_pass(ops, i, i + d):
                yield r, i, i + d, False  # the waiting op later
    for r, ops in enumerate(orders):
        for i in range(len(ops)):
            for d in range(2, WINDOW + 1):  # d = 1 is a relocation too
                k = i + d
                if k < len(ops) and _may_pass(ops, i, k) and _may_pass(ops, k, i):
                    yield r, i, k, True
            for d in range(1, WINDOW + 1):
                if i + d < len(ops) and _may_pass(ops, i, i + d):
                    yield r, i, i + d, False


def _may_pass(ops: list, i: int, k: int) -> bool:
    """Whether op i may move to place k without passing an op of its own (stage,
    microbatch) on this rank (those keep F, B, W order: the move would deadlock)."""
    op = ops[i]
    lo, hi = (k, i) if k < i else (i + 1, k + 1)
    return all((x.stage, x.microbatch) != (op.stage, op.microbatch) for x in ops[lo:hi])
