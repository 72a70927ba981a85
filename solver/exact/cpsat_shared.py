"""Order literals for CP-SAT where several stages share one rank's memory (V and loop).

`solver.cpsat_tight` makes the CP-SAT model tight below 1F1B's memory for one chunk per
rank: a literal per pair "B (or W) of microbatch i runs before F of microbatch j", the
memory at each F exact and linear in them. With two or more chunks per rank (V: stages r
and 2p - 1 - r on rank r; loop: r, r + p, ...) the memory just after F(x, j) starts also
depends on how many forwards of the rank's other stages ran before it, so this module adds
per rank, for each F(x, j) of a stage x on it:

- "F(y, k) runs before F(x, j)" for each other stage y of the rank where the pipeline
  leaves it open (y upstream of x: only k > j; y downstream: only k < j), one literal per
  pair of forwards, read both ways;
- "B(y, i) runs before F(x, j)" and "W(y, i) runs before F(x, j)" for every stage y of
  the rank and i < j (for i >= j, B(y, i) waits on F(last, i), so on F(x, i), which does
  not start before F(x, j) ends);

and on them the memory rule at each F, exact: just after F(x, j) starts the rank holds
`sum_y m_b[y] * (forwards of y started) - sum (m_b - m_w) [B before] - sum m_w [W before]`,
within its limit; and energy cuts: F(x, j) starts no earlier than the rank's first start
plus the work its literals put before it, and the rank's span is at least that start plus
the work left. Every constraint holds in every schedule of the model's scope (F in
microbatch order per stage as in every model here; with FIFO, B and W too), so the
optimum is unchanged; the search and the bound get stronger. Where every m_w <= m_b the
peaks are at F starts and the rule replaces the reservoir (`solver.cpsat._memory`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model
from ppsched.solver.exact.frame import Scaled
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem

# Literals in all (about 5/4 p (v m)^2 for v chunks per rank): beyond this the model
# grows too large to help within seconds (as `solver.cpsat_tight.MAX_LITERALS`).
MAX_LITERALS = 60_000

# A literal, or the constant the pipeline decides it to.
_Lit = cp_model.LiteralT
_Starts = dict[Op, cp_model.IntVar]


def applies(problem: Problem) -> bool:
    """Whether the shared-memory order literals apply: two or more chunks per rank,
    memory binding below what 1F1B holds on some rank, and a model small enough."""
    if problem.num_chunks < 2:
        return False
    binding = problem.below_one_f_one_b([max(row) for row in problem.m_b_mb])
    return binding and num_literals(problem) <= MAX_LITERALS


def num_literals(problem: Problem) -> int:
    """How many literals `add_shared_order_literals` creates."""
    m = problem.num_microbatches
    total = 0
    for stages in problem.rank_to_stages:
        v = len(stages)
        pairs = v * (v - 1) // 2 * m * (m - 1) // 2  # forwards of two stages, k != j
        total += pairs + 2 * v * v * m * (m - 1) // 2  # B and W of any stage, i < j
    return total


@dataclass
class _RankLiterals:
    """One rank's literals, created on first use.

    `ff[(y, k, x, j)]` (y upstream of x, k > j): F(y, k) runs before F(x, j).
    `bw[(kind, y, i, x, j)]` (i < j): B or W of (y, i) runs before F(x, j).
    """

    model: cp_model.CpModel
    start: _Starts
    dur: dict[str, tuple[tuple[int, ...], ...]]
    hint_ticks: dict[Op, int]
    ff: dict[tuple[int, int, int, int], cp_model.IntVar] = field(default_factory=dict)
    bw: dict[tuple[str, int, int, int, int], cp_model.IntVar] = field(default_factory=dict)

    def before(self, op: Op, fx: Op) -> _Lit:
        """Whether `op` runs before the forward `fx` (a constant where the pipeline
        decides it, else a literal)."""
        x, j = fx.stage, fx.microbatch
        y, k = op.stage, op.microbatch
        if op.kind == "F":
            if y == x:
                return k < j
            if y < x:  # F(y, k) precedes F(x, k), and F(x, k) follows F(x, j) for k > j
                return True if k <= j else self._ff(y, k, x, j)
            # y downstream: F(y, k) follows F(x, k), which follows F(x, j) for k >= j.
            return False if k >= j else _negated(self._ff(x, j, y, k))
        if k >= j:
            return False
        key = (op.kind, y, k, x, j)
        lit = self.bw.get(key)
        if lit is None:
            lit = self.bw[key] = self._pair(op, fx, f"{op.kind}_{y}_{k}_{x}_{j}")
        return lit

    def _ff(self, y: int, k: int, x: int, j: int) -> cp_model.IntVar:
        key = (y, k, x, j)
        lit = self.ff.get(key)
        if lit is None:
            lit = self.ff[key] = self._pair(Op("F", y, k), Op("F", x, j), f"F_{y}_{k}_{x}_{j}")
        return lit

    def _pair(self, op: Op, fx: Op, name: str) -> cp_model.IntVar:
        """A literal "op ends before fx starts", its negation "fx ends before op starts"
        (ops of a rank never overlap), hinted from the hint's starts."""
        lit = self.model.new_bool_var(name)
        start = self.start
        self.model.add(start[fx] >= start[op] + self.duration(op)).only_enforce_if(lit)
        self.model.add(start[op] >= start[fx] + self.duration(fx)).only_enforce_if(~lit)
        self.model.add_hint(lit, int(self.hint_ticks[op] < self.hint_ticks[fx]))
        return lit

    def duration(self, op: Op) -> int:
        return self.dur[op.kind][op.stage][op.microbatch]


def _negated(lit: _Lit) -> _Lit:
    assert not isinstance(lit, bool | int), "only a literal is negated"
    return ~lit


def _imply(model: cp_model.CpModel, a: _Lit, b: _Lit) -> None:
    """a => b, where either may be a constant."""
    if a is False or b is True:
        return
    if isinstance(a, bool):  # a is True: b must hold
        assert not isinstance(b, bool), "the pipeline's constants contradict each other"
        model.add_bool_or([b])
    elif isinstance(b, bool):  # b is False: a must not hold
        model.add_bool_or([_negated(a)])
    else:
        model.add_implication(a, b)


def add_shared_order_literals(model: cp_model.CpModel, problem: Problem, scaled: Scaled,
                              start: _Starts, goal: cp_model.IntVar, first: list[int],
                              hint_ticks: dict[Op, int], objective: str,
                              fifo: bool) -> None:
    """Add the literals, the memory rule and the energy cuts to a built model.

    Args:
        start: the model's start variable of each op.
        goal: the objective variable (largest span, or makespan).
        first: per rank, the fixed start of its first op, in ticks.
        hint_ticks: the hint's start of each op (the literals are hinted from it).
        objective: ``cost`` or ``makespan`` (the span is measured from `first` or 0).
        fifo: B and W in microbatch order per stage (adds their monotonicity).
    """
    dur = {"F": scaled.f_mb, "B": scaled.b_mb, "W": scaled.w_mb}
    for r, stages in enumerate(problem.rank_to_stages):
        lits = _RankLiterals(model, start, dur, hint_ticks)
        origin = first[r] if objective == "cost" else 0
        _rank(model, problem, scaled, lits, sorted(stages), start, goal, first[r], origin,
              scaled.limit[r], fifo)


def _rank(model: cp_model.CpModel, problem: Problem, scaled: Scaled, lits: _RankLiterals,
          stages: list[int], start: _Starts, goal: cp_model.IntVar, first: int, origin: int,
          limit: int | None, fifo: bool) -> None:
    """One rank: at each of its forwards the memory rule and the energy cuts, and the
    implications between its literals."""
    m = problem.num_microbatches
    total = sum(lits.duration(Op(kind, y, k)) for kind in ("F", "B", "W") for y in stages
                for k in range(m))
    for x in stages:
        for j in range(m):
            fx = Op("F", x, j)
            held: list[tuple[int, _Lit]] = []  # (memory, whether it counts)
            work: list[tuple[int, _Lit]] = []  # (duration, whether it runs before fx)
            for y in stages:
                for k in range(m):
                    f_before = True if (y == x and k == j) else lits.before(Op("F", y, k), fx)
                    held.append((scaled.m_b_mb[y][k], f_before))
                    if not (y == x and k == j):
                        work.append((lits.duration(Op("F", y, k)), f_before))
                    if k >= j:
                        continue
                    b_before = lits.before(Op("B", y, k), fx)
                    w_before = lits.before(Op("W", y, k), fx)
                    held.append((scaled.m_w_mb[y][k] - scaled.m_b_mb[y][k], b_before))
                    held.append((-scaled.m_w_mb[y][k], w_before))
                    work.append((lits.duration(Op("B", y, k)), b_before))
                    work.append((lits.duration(Op("W", y, k)), w_before))
                    _implications(model, lits, y, k, fx, m, fifo)
            if limit is not None:
                model.add(_linear(held) <= limit)
            before = _linear(work)
            model.add(start[fx] >= first + before)
            model.add(goal >= start[fx] - origin + total - before)


def _implications(model: cp_model.CpModel, lits: _RankLiterals, y: int, k: int, fx: Op,
                  m: int, fifo: bool) -> None:
    """What B(y, k) or W(y, k) running before F(x, j) implies: W after its own B, B after
    the microbatch's forward on the rank, before every later forward of x, and (FIFO)
    the earlier Bs and Ws of y before F(x, j) too."""
    x, j = fx.stage, fx.microbatch
    b, w = lits.before(Op("B", y, k), fx), lits.before(Op("W", y, k), fx)
    _imply(model, w, b)
    _imply(model, b, lits.before(Op("F", y, k), fx))
    if j + 1 < m:
        later = Op("F", x, j + 1)
        _imply(model, b, lits.before(Op("B", y, k), later))
        _imply(model, w, lits.before(Op("W", y, k), later))
        if y != x:
            _imply(model, lits.before(Op("F", y, k), fx), lits.before(Op("F", y, k), later))
    if fifo and k > 0:
        _imply(model, b, lits.before(Op("B", y, k - 1), fx))
        _imply(model, w, lits.before(Op("W", y, k - 1), fx))
    if y != x and k > 0:
        _imply(model, lits.before(Op("F", y, k), fx), lits.before(Op("F", y, k - 1), fx))


def _linear(terms: list[tuple[int, _Lit]]) -> cp_model.LinearExpr:
    """sum coefficient * literal, constants folded."""
    constant = sum(c for c, lit in terms if lit is True)
    return constant + cp_model.LinearExpr.weighted_sum(
        [lit for _, lit in terms if not isinstance(lit, bool)],
        [c for c, lit in terms if not isinstance(lit, bool)])
