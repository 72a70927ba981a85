"""One build of the Zero Bubble automatic heuristic (Qi et al. 2024, section 3.1): the
paper's recipe for one choice of knobs (`heuristic.knobs.Knobs`).

1. Warm-up: stage j runs ``warmup[j]`` forwards before its first B; counts never grow
   down the pipeline (stage j schedules at least as many Fs as stage j+1).
2. Main step: 1F1B, one F and one B per stage per wave; wave i places the Fs in stage
   order (each F's input is then already timed) and the B of microbatch i in reverse
   stage order (each B's gradient is then already timed). Before an op whose input
   arrives later than the rank is free, Ws fill the gap: every W that fits, and one more
   that overruns it when the gap is at least ``fill`` of a W (or, with ``balance``, when
   idling would make this stage the most idle one). Before an F, Ws also run while the
   F would break the memory limit.
3. Cool-down: the remaining Ws, in microbatch order.

Because every op is placed after its dependency, a build times itself exactly as the
simulator does (list scheduling, the rules of `sim.kernel`), so the search compares builds
by their own cost and only the winner is re-timed and validated by the simulator. The
build keeps its own clocks rather than the kernel's: it reads them at every W fill
decision, and as plain lists in closures they cost a third of the kernel's per-op step.

The steps are closures over the build's state (`_State`), made by one factory each: as
closures their hot loops read the state as fast as local variables.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from ppsched.solver.heuristic.early_stop import cannot_win, idle_cap, is_checkpoint, stage_floors
from ppsched.solver.heuristic.knobs import Build, Decisions, Knobs, threshold
from ppsched.solver.heuristic.warm_up import Forwards
from ppsched.solver.model.problem import Problem

_EPS = 1e-9
Put = Callable[[Iterable[int]], None]


class _CannotWin(Exception):
    """A stage of the build has idled so long that its span alone loses (`idle_cap`)."""


class _State:
    """What a build has placed so far, per stage (= rank): clocks, counts, memory, ops."""

    def __init__(self, problem: Problem, knobs: Knobs, incumbent: float, record: bool,
                 ) -> None:
        p, m = problem.num_ranks, problem.num_microbatches
        self.idle = [0.0] * p  # per stage, idle time since its first F
        self.busy = [m * (problem.t_f[j] + problem.t_b[j] + problem.t_w[j])
                     for j in range(p)]  # per stage, its op time
        self.cap = idle_cap(incumbent)
        self.most_idle = [0.0]  # the largest of `idle`, kept as it only grows
        self.free = [0.0] * p
        self.first = [0.0] * p
        self.mem = [0.0] * p
        self.num_f, self.num_b, self.num_w = [0] * p, [0] * p, [0] * p
        self.f_end = [[0.0] * m for _ in range(p)]
        self.b_end = [[0.0] * m for _ in range(p)]
        # Ops as ints (kind * m + microbatch; kinds F, B, W, BW = 0, 1, 2, 3) until the end.
        self.codes: list[list[int]] = [[] for _ in range(p)]
        self.decisions = Decisions() if record else None
        self.over = [False]  # some op broke the memory limit: the build is not a candidate


def build(problem: Problem, knobs: Knobs, incumbent: float = math.inf,
          objective: str = "cost", forwards: Forwards | None = None,
          record: bool = False) -> Build:
    """Run the heuristic once with fixed knobs; see the module docstring for the steps.

    With a finite `incumbent`, the build gives up (cost and makespan infinite) as soon as
    its `objective` provably cannot beat it (`solver.early_stop`). With `forwards` (the
    problem's), the warm-up is copied from it rather than placed op by op. With
    `record`, the build keeps what its W fill decisions saw (`Build.decides_alike`).
    """
    if forwards is not None and math.isfinite(incumbent) and forwards.covers(knobs.warmup) \
            and forwards.cannot_win(problem, knobs.warmup, knobs.fused, objective, incumbent):
        # It would give up at its first checkpoint (and so would any fill rule on it).
        return _lost("cannot win", knobs, Decisions() if record else None)
    p, m = problem.num_ranks, problem.num_microbatches
    st = _State(problem, knobs, incumbent, record)
    fill_gap = _fill_gap(problem, knobs, st)
    settle = _settle(st, fill_gap, _wait(st))
    make_room = _make_room(problem, st)
    put_fs = _put_fs(problem, st, settle, make_room)
    put_bs = _put_bs(problem, knobs, st, settle, make_room)
    give_up = _give_up(problem, knobs, st, objective, incumbent) \
        if math.isfinite(incumbent) else None
    # Step 2 (main step): wave i = one F per stage down the pipeline, then B of
    # microbatch i up the pipeline.
    b_first = [knobs.b_first_when_capped and j > 0 and knobs.warmup[j] == knobs.warmup[j - 1]
               for j in range(p)]
    done: bool | None
    try:
        _warm_up(problem, knobs, st, forwards, put_fs)
        done = _waves(p, m, put_fs, put_bs, give_up) if not any(b_first) else \
            _waves_b_first(p, m, b_first, st.num_f, st.num_b, put_fs, put_bs, give_up)
    except _CannotWin:
        done = False
    if not done:
        return _lost("stuck" if done is None else "cannot win", knobs, st.decisions)
    _cool_down(problem, st)
    if st.over[0]:
        return _lost("over the memory limit", knobs, st.decisions)
    free, first = st.free, st.first
    cost = max(free[j] - first[j] for j in range(p))
    return Build(cost, max(free) - min(first), "zb-heuristic", codes=st.codes,
                 num_microbatches=m, decisions=st.decisions, knobs=knobs)


def _fill_gap(problem: Problem, knobs: Knobs, st: _State) -> Callable[[int, float], None]:
    """Ws into the idle time before `ready`: whole ones, then one that overruns a gap of
    at least `fill` of a W (it delays the op, but idles the rank less)."""
    m, t_w, m_w = problem.num_microbatches, problem.t_w, problem.m_w
    fill, cooldown, balance = knobs.fill, knobs.cooldown, knobs.balance
    num_f, num_b, num_w, free, first = st.num_f, st.num_b, st.num_w, st.free, st.first
    mem, codes, idle, most_idle, decisions = st.mem, st.codes, st.idle, st.most_idle, \
        st.decisions

    def fill_gap(j: int, ready: float) -> None:
        past_last_f = num_f[j] == m  # then the cool-down rule sets the threshold
        backlog_fits = past_last_f and (num_b[j] - num_w[j]) * t_w[j] <= first[j] - first[0]
        least = threshold(fill, cooldown, j, True, backlog_fits) if past_last_f else fill
        t = t_w[j]
        x, owed, clock, row = num_w[j], num_b[j], free[j], codes[j]
        while x < owed:
            gap = ready - clock
            if gap <= _EPS:
                break
            if gap < t - _EPS:  # the W would overrun the gap: a decision (`knobs.stops`)
                slack = most_idle[0] - idle[j]
                stop = gap <= slack if balance and least > 0.0 else gap < least * t
                if decisions is not None:
                    decisions.add((j, past_last_f, backlog_fits, gap, t, slack), stop)
                if stop:
                    break
            clock += t  # a W, inlined: this loop is most of a build's W fill
            mem[j] -= m_w[j]
            row.append(2 * m + x)
            x += 1
        num_w[j], free[j] = x, clock

    return fill_gap


def _wait(st: _State) -> Callable[[int, float], None]:
    idle, most_idle, busy, free, cap = st.idle, st.most_idle, st.busy, st.free, st.cap

    def wait(j: int, start: float) -> None:  # the rank idles until `start`
        idle[j] += start - free[j]
        if idle[j] > most_idle[0]:
            most_idle[0] = idle[j]
        if busy[j] + idle[j] > cap:  # this stage's span alone loses (`idle_cap`)
            raise _CannotWin

    return wait


def _settle(st: _State, fill_gap: Callable[[int, float], None],
            wait: Callable[[int, float], None]) -> Callable[[int, float], float]:
    """Before an op whose input is `ready`: Ws into the gap (if any is owed), then the
    rank waits for the input; the op's start."""
    free, num_w, num_b = st.free, st.num_w, st.num_b

    def settle(j: int, ready: float) -> float:
        clock = free[j]
        if ready - clock > _EPS and num_w[j] < num_b[j]:
            fill_gap(j, ready)
            clock = free[j]
        if ready > clock:
            wait(j, ready)
            clock = ready
        return clock

    return settle


def _make_room(problem: Problem, st: _State) -> Callable[[int, float], None]:
    m, m_w, limit = problem.num_microbatches, problem.m_w, problem.memory_limit
    mem, num_w, num_b, free, codes, over = st.mem, st.num_w, st.num_b, st.free, st.codes, \
        st.over
    t_w = problem.t_w

    def make_room(j: int, need: float) -> None:
        # Ws until `need` more fits under the limit (or none is owed).
        while mem[j] + need > limit[j] + _EPS and num_w[j] < num_b[j]:
            free[j] += t_w[j]
            mem[j] -= m_w[j]
            codes[j].append(2 * m + num_w[j])
            num_w[j] += 1
        if mem[j] + need > limit[j] + _EPS:
            over[0] = True

    return make_room


# The hot path: helpers are called only with work to do, put_* once per wave's stages.
def _put_fs(problem: Problem, st: _State, settle: Callable[[int, float], float],
            make_room: Callable[[int, float], None]) -> Put:
    m, t_f, t_comm = problem.num_microbatches, problem.t_f, problem.t_comm
    m_b, limit = problem.m_b, problem.memory_limit
    num_f, f_end, free, first, mem, codes = st.num_f, st.f_end, st.free, st.first, st.mem, \
        st.codes

    def put_fs(stages: Iterable[int]) -> None:  # the next F of each stage with Fs left
        for j in stages:
            x = num_f[j]
            if x == m:
                continue
            ready = f_end[j - 1][x] + t_comm[j - 1] if j > 0 else 0.0
            if mem[j] + m_b[j] > limit[j] + _EPS:
                make_room(j, m_b[j])  # the F would break the memory limit
            if x == 0:  # (no W owed yet: no gap to fill)
                clock = free[j]
                first[j] = clock = clock if clock > ready else ready
            else:
                clock = free[j]
                if ready > clock:  # a gap before its input (else nothing to settle)
                    clock = settle(j, ready)
            free[j] = f_end[j][x] = clock + t_f[j]
            mem[j] += m_b[j]
            num_f[j] = x + 1
            codes[j].append(x)

    return put_fs


def _put_bs(problem: Problem, knobs: Knobs, st: _State,
            settle: Callable[[int, float], float],
            make_room: Callable[[int, float], None]) -> Put:
    p, m = problem.num_ranks, problem.num_microbatches
    t_b, t_w, t_comm, m_b, m_w = problem.t_b, problem.t_w, problem.t_comm, problem.m_b, \
        problem.m_w
    fused = knobs.fused or (False,) * p
    grows = [w > b for w, b in zip(m_w, m_b, strict=True)]  # a B adds memory (6.1)
    held_by_b = [w - b for w, b in zip(m_w, m_b, strict=True)]  # what a B adds
    last = p - 1
    num_b, num_w, b_end, f_end, free, mem, codes = st.num_b, st.num_w, st.b_end, st.f_end, \
        st.free, st.mem, st.codes

    def put_bs(stages: Iterable[int]) -> None:  # the next B (or BW) of each stage
        for j in stages:
            x = num_b[j]
            ready = b_end[j + 1][x] + t_comm[j] if j < last else f_end[j][x]
            clock = free[j]
            if fused[j]:  # BW: frees m_b at its end, owes no W (so no gap to fill)
                if ready > clock:
                    clock = settle(j, ready)
                free[j] = b_end[j][x] = clock + t_b[j] + t_w[j]
                mem[j] -= m_b[j]
                num_b[j] = num_w[j] = x + 1
                codes[j].append(3 * m + x)
                continue
            if grows[j]:
                make_room(j, m_w[j] - m_b[j])  # m_w > m_b (DESIGN.md 6.1): B adds memory
            clock = free[j]  # (after the room made)
            if ready > clock:
                clock = settle(j, ready)
            free[j] = b_end[j][x] = clock + t_b[j]
            mem[j] += held_by_b[j]
            num_b[j] = x + 1
            codes[j].append(m + x)

    return put_bs


def _give_up(problem: Problem, knobs: Knobs, st: _State, objective: str,
             incumbent: float) -> Callable[[], bool]:
    fused = knobs.fused or (False,) * problem.num_ranks

    def give_up() -> bool:
        ends = stage_floors(st.free, st.num_f, st.num_b, st.num_w, st.f_end, st.b_end,
                            problem.t_f, problem.t_b, problem.t_w, problem.t_comm, fused)
        return cannot_win(ends, st.first, objective, incumbent)

    return give_up


def _warm_up(problem: Problem, knobs: Knobs, st: _State, forwards: Forwards | None,
             put_fs: Put) -> None:
    """Step 1: stage by stage, so each F's input is already timed."""
    if forwards is not None and forwards.covers(knobs.warmup):
        st.over[0] = forwards.place(knobs.warmup, st.f_end, st.free, st.first, st.idle,
                                    st.mem, st.num_f, st.codes)
        st.most_idle[0] = max(0.0, *st.idle)
        if any(b + i > st.cap for b, i in zip(st.busy, st.idle, strict=True)):
            raise _CannotWin
    else:
        for j in range(problem.num_ranks):
            put_fs((j,) * knobs.warmup[j])


def _cool_down(problem: Problem, st: _State) -> None:
    """Step 3: the Ws still owed."""
    m, t_w, m_w = problem.num_microbatches, problem.t_w, problem.m_w
    for j in range(problem.num_ranks):
        while st.num_w[j] < m:
            st.free[j] += t_w[j]
            st.mem[j] -= m_w[j]
            st.codes[j].append(2 * m + st.num_w[j])
            st.num_w[j] += 1


def _lost(why: str, knobs: Knobs, decisions: Decisions | None) -> Build:
    """A build that is no candidate, and why."""
    return Build(math.inf, math.inf, f"zb-heuristic ({why})", knobs=knobs, decisions=decisions)


def _waves(p: int, m: int, put_fs: Callable[[Iterable[int]], None],
           put_bs: Callable[[Iterable[int]], None],
           give_up: Callable[[], bool] | None) -> bool:
    """The main step's 1F1B waves: wave i places one F per stage down the pipeline (each
    F's input is then already timed; stages with no F left skip it), then the B of
    microbatch i up the pipeline. False when `give_up` said so at a checkpoint."""
    down, up = range(p), range(p - 1, -1, -1)
    for i in range(m):
        if give_up is not None and is_checkpoint(i, m) and give_up():
            return False
        if i > 0:
            put_fs(down)
        put_bs(up)
    return True


def _waves_b_first(p: int, m: int, b_first: list[bool], num_f: list[int],
                   num_b: list[int], put_fs: Callable[[Iterable[int]], None],
                   put_bs: Callable[[Iterable[int]], None],
                   give_up: Callable[[], bool] | None) -> bool | None:
    """The main step where some stages take B before F in each wave; None if stuck,
    False when `give_up` said so at a checkpoint.

    A stage with as many warm-up Fs as the one before it (both capped by memory) takes
    its B before its F in each wave: with F first, its B would wait for its F, which
    waits for the previous stage's F of the same wave, which waits for that stage's
    previous B; every wave would then cost two Fs and two Bs. Ops are placed as their
    inputs are placed, stage by stage, until the wave is done.
    """
    for i in range(m):
        if give_up is not None and is_checkpoint(i, m) and give_up():
            return False
        todo = [["B"] if i == 0 else (["B", "F"] if b_first[j] else ["F", "B"])
                for j in range(p)]
        for j in range(p):
            if num_f[j] >= m and "F" in todo[j]:
                todo[j].remove("F")
        left = sum(map(len, todo))
        while left:
            placed = left
            for j in range(p):
                while todo[j]:
                    if todo[j][0] == "F":
                        if j > 0 and num_f[j - 1] <= num_f[j]:
                            break
                        put_fs((j,))
                    else:
                        x = num_b[j]
                        if (num_f[j] if j == p - 1 else num_b[j + 1]) <= x:
                            break
                        put_bs((j,))
                    todo[j].pop(0)
                    left -= 1
            if left == placed:  # no stage could move: this knob deadlocks here
                return None
    return True
