"""Order literals for CP-SAT where memory binds: an exact linear memory rule and energy cuts.

Below 1F1B's memory the plain model (`solver.cpsat.build_model`) finds good schedules but
proves little: its memory is a reservoir on start times, which propagates weakly, so its
bound stays at the general lower bound (issue 11: 1401.3 against an optimum of 1527.3 for
`gpt1.5b-p8-m24 --memory-limit 6`). This module adds, per rank, a literal for each pair
"B(s, i) runs before F(s, j)" and "W(s, i) runs before F(s, j)" (one chunk per rank, F in
microbatch order as in every model here), and on them:

- the memory rule at each F, exact and linear: just after F(s, j) starts the rank holds
  `(j + 1) m_b + sum_i x[i, j] (m_w - m_b) - sum_i y[i, j] m_w <= limit`;
- energy cuts: F(s, j) starts no earlier than the rank's first start plus the work that
  runs before it (j Fs, the Bs and Ws its literals say), and the rank's span is at least
  that start plus the work left after it; with FIFO, likewise around each B.

Every constraint holds in every schedule of the model's scope, so the optimum is
unchanged; only the search and the bound get stronger. The reservoir stays where a B
raises memory (`m_w > m_b`, DESIGN.md section 6.1), since the rule above covers the
peaks at F only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ortools.sat.python import cp_model
from ppsched.solver.exact.frame import Scaled
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem

# Literals per rank are about m^2 (x and y for i < j): beyond this many in all, the model
# grows too large to help within seconds (the LNS handles large instances instead).
MAX_LITERALS = 60_000
# Windows F(s, j) .. B(s, k) cut for k - j below this (the longer ones add little).
WINDOW_SPAN = 1


def applies(problem: Problem) -> bool:
    """Whether the order literals apply: one chunk per rank, memory binding below what
    1F1B holds on some rank, and a model small enough."""
    if problem.num_chunks != 1:
        return False
    p, m = problem.num_ranks, problem.num_microbatches
    # 1F1B's memory with its largest microbatches, where they are unequal.
    binding = problem.below_one_f_one_b([max(row) for row in problem.m_b_mb])
    return binding and p * m * (m - 1) <= MAX_LITERALS


def memory_precedences(problem: Problem, scaled: Scaled) -> list[tuple[Op, Op]]:
    """Pairs (a, F) such that a must end before F starts in every FIFO schedule, by memory.

    Just after F(s, j) starts (one chunk, F in microbatch order) the rank holds the
    `m_b` of F(s, 0..j) less what the Bs and Ws done before freed: B(s, i) frees
    `m_b[i] - m_w[i]`, W(s, i) the rest. In FIFO order those done are the first nb Bs and
    nw Ws of the stage, nw <= nb <= j. Freeing the most per B (nw = nb) gives the least
    nb; the most Bs (nb = j) gives the least nw. So B(s, nb - 1) and W(s, nw - 1)
    precede F(s, j). Each microbatch has its own values (DESIGN.md 6.2).
    """
    pairs: list[tuple[Op, Op]] = []
    for r in range(problem.num_ranks):
        s, limit = r, scaled.limit[r]
        m_b, m_w = scaled.m_b_mb[s], scaled.m_w_mb[s]
        if limit is None or problem.num_chunks != 1 or min(m_b) <= 0:
            continue
        held = 0
        for j in range(problem.num_microbatches):
            held += m_b[j]
            over = held - limit  # what must have been freed
            if over <= 0:
                continue
            num_b, freed = 0, 0
            while num_b < j and freed < over:  # Bs with their Ws: m_b each
                freed += m_b[num_b]
                num_b += 1
            if freed < over:
                continue  # cannot happen for a feasible limit; leave it to the model
            pairs.append((Op("B", s, num_b - 1), Op("F", s, j)))
            # Every earlier B done frees m_b - m_w each; the Ws must free the rest.
            rest = over - sum(m_b[i] - m_w[i] for i in range(j))
            num_w, freed = 0, 0
            while num_w < j and freed < rest:
                freed += m_w[num_w]
                num_w += 1
            if 0 < num_w <= j and freed >= rest:
                pairs.append((Op("W", s, num_w - 1), Op("F", s, j)))
    return pairs


_Literals = dict[tuple[int, int], cp_model.IntVar]
_Starts = dict[Op, cp_model.IntVar]


@dataclass(frozen=True)
class _Rank:
    """One rank's stage (one chunk: rank r runs stage r) and its figures in ticks: each
    microbatch's own durations and memory (rows repeat when they are alike)."""

    s: int
    f: tuple[int, ...]
    b: tuple[int, ...]
    w: tuple[int, ...]
    m_b: tuple[int, ...]
    m_w: tuple[int, ...]
    limit: int | None
    first: int  # the fixed start of the rank's first op
    origin: int  # where its span is measured from: `first` for the cost, 0 for makespan


def add_order_literals(model: cp_model.CpModel, problem: Problem, scaled: Scaled,
                       start: dict[Op, cp_model.IntVar], goal: cp_model.IntVar,
                       first: list[int], hint_ticks: dict[Op, int], objective: str,
                       fifo: bool) -> None:
    """Add the literals, the memory rule and the energy cuts to a built model.

    Args:
        start: the model's start variable of each op.
        goal: the objective variable (largest span, or makespan).
        first: per rank, the fixed start of its first op, in ticks.
        hint_ticks: the hint's start of each op (the literals are hinted from it).
        objective: ``cost`` or ``makespan`` (the span is measured from `first` or 0).
        fifo: B and W in microbatch order per stage (adds monotonicity and the B cuts).
    """
    m = problem.num_microbatches
    for r in range(problem.num_ranks):
        s = r  # one chunk: rank r runs stage r
        rank = _Rank(s, scaled.f_mb[s], scaled.b_mb[s], scaled.w_mb[s], scaled.m_b_mb[s],
                     scaled.m_w_mb[s], scaled.limit[r], first[r],
                     first[r] if objective == "cost" else 0)
        x, y = _literals(model, s, m)
        _pairs(model, rank, m, start, x, y, hint_ticks, fifo)
        if fifo:
            # The literals the memory forces (see `memory_precedences`), fixed at once.
            for a, fj in memory_precedences(problem, scaled):
                if fj.stage == s:
                    model.add((x if a.kind == "B" else y)[a.microbatch, fj.microbatch] == 1)
        _memory_and_energy(model, rank, m, start, goal, x, y)
        if fifo:
            _window_cuts(model, rank, m, start, goal, x, y)
            _b_cuts(model, rank, m, start, goal, x)


def _literals(model: cp_model.CpModel, s: int, m: int) -> tuple[_Literals, _Literals]:
    """x[i, j]: B(s, i) ends before F(s, j) starts; only i < j can (F(s, i) precedes
    B(s, i), and F(s, i) is not before F(s, j) for i >= j). y likewise for W."""
    x: _Literals = {}
    y: _Literals = {}
    for j in range(m):
        for i in range(j):
            x[i, j] = model.new_bool_var(f"x_{s}_{i}_{j}")
            y[i, j] = model.new_bool_var(f"y_{s}_{i}_{j}")
    return x, y


def _pairs(model: cp_model.CpModel, rank: _Rank, m: int, start: _Starts, x: _Literals,
           y: _Literals, hint_ticks: dict[Op, int], fifo: bool) -> None:
    """What each literal means (the pair's order), the orders that imply one another,
    and each literal's hint."""
    s = rank.s
    for j in range(m):
        fj = Op("F", s, j)
        for i in range(j):
            bi, wi = Op("B", s, i), Op("W", s, i)
            # Ops of a rank never overlap: each pair runs one way or the other.
            model.add(start[fj] >= start[bi] + rank.b[i]).only_enforce_if(x[i, j])
            model.add(start[bi] >= start[fj] + rank.f[j]).only_enforce_if(~x[i, j])
            model.add(start[fj] >= start[wi] + rank.w[i]).only_enforce_if(y[i, j])
            model.add(start[wi] >= start[fj] + rank.f[j]).only_enforce_if(~y[i, j])
            model.add_implication(y[i, j], x[i, j])  # W(s, i) runs after B(s, i)
            model.add_hint(x[i, j], int(hint_ticks[bi] < hint_ticks[fj]))
            model.add_hint(y[i, j], int(hint_ticks[wi] < hint_ticks[fj]))
            if j + 1 < m:  # F(s, j) precedes F(s, j + 1)
                model.add_implication(x[i, j], x[i, j + 1])
                model.add_implication(y[i, j], y[i, j + 1])
            if fifo and i > 0:  # B(s, i - 1) precedes B(s, i), W likewise
                model.add_implication(x[i, j], x[i - 1, j])
                model.add_implication(y[i, j], y[i - 1, j])


def _memory_and_energy(model: cp_model.CpModel, rank: _Rank, m: int, start: _Starts,
                       goal: cp_model.IntVar, x: _Literals, y: _Literals) -> None:
    """At each F: the memory rule, and the energy cuts on its start and on the span."""
    f, b, w, m_b, m_w = rank.f, rank.b, rank.w, rank.m_b, rank.m_w
    total_b, total_w = sum(b), sum(w)
    for j in range(m):
        fj = Op("F", rank.s, j)
        b_before = sum(b[i] * x[i, j] for i in range(j))
        w_before = sum(w[i] * y[i, j] for i in range(j))
        if rank.limit is not None:
            model.add(sum(m_b[: j + 1]) + sum((m_w[i] - m_b[i]) * x[i, j]
                                              - m_w[i] * y[i, j] for i in range(j))
                      <= rank.limit)
        # What runs before F(s, j), and what is left after it starts.
        model.add(start[fj] >= rank.first + sum(f[:j]) + b_before + w_before)
        model.add(goal >= start[fj] - rank.origin + sum(f[j:]) + total_b - b_before
                  + total_w - w_before)


def _window_cuts(model: cp_model.CpModel, rank: _Rank, m: int, start: _Starts,
                 goal: cp_model.IntVar, x: _Literals, y: _Literals) -> None:
    """FIFO: the idle time in each window F(s, j) .. B(s, k) adds to the rank's work."""
    f, b, w = rank.f, rank.b, rank.w
    busy = sum(f) + sum(b) + sum(w)
    for j in range(m):
        for k in range(j, min(m, j + WINDOW_SPAN)):
            # The window from F(s, j) to B(s, k), k >= j: the rank is busy in it only
            # with F(s, j..k), the later Fs that run before B(s, k), the Bs and Ws from j
            # to k - 1, and the earlier ones not done before F(s, j) (Bs and Ws from k on
            # follow B(s, k) in FIFO). The rest of the window is idle, on top of the
            # rank's total work.
            in_window = (sum(f[j:k + 1])
                         + sum(f[n] * (1 - x[k, n]) for n in range(k + 1, m))
                         + sum(b[i] + w[i] for i in range(j, k))
                         + sum(b[i] * (1 - x[i, j]) + w[i] * (1 - y[i, j])
                               for i in range(j)))
            model.add(goal >= busy + start[Op("B", rank.s, k)] - start[Op("F", rank.s, j)]
                      - in_window)


def _b_cuts(model: cp_model.CpModel, rank: _Rank, m: int, start: _Starts,
            goal: cp_model.IntVar, x: _Literals) -> None:
    """FIFO: energy cuts around each B, on its start and on the span."""
    f, b, w = rank.f, rank.b, rank.w
    total_f = sum(f)
    for i in range(m):
        bi = Op("B", rank.s, i)
        # Fs before B(s, i): every F(s, j) with j <= i, and those j > i not after.
        f_after = sum(f[j] * x[i, j] for j in range(i + 1, m))
        model.add(start[bi] >= rank.first + total_f - f_after + sum(b[:i]))
        model.add(goal >= start[bi] - rank.origin + sum(b[i:]) + sum(w[i:]) + f_after)
