"""A fixed order on any stage-to-rank map timed as list scheduling, giving up once it
cannot win.

The V search (`solver.greedy.greedy_search`) weighs the named schedules of a placement
(ZB-V, V-Half, ...) against its own; at p=32, m=256 each simulation of 49k ops cost
0.07 s, a peak-memory pass before it 0.035 s, and most of them lose (issue 11). Timed
here, an order over the memory limit stops at its first op over it and a loser once a
rank's clock plus the work it still owes shows it cannot end below the incumbent. The
times are the simulator's (each op starts when its rank is free and its input has
arrived, section 3); the winner is still simulated and validated by `solver.solve`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ppsched.solver.heuristic.early_stop import MARGIN
from ppsched.solver.model.lazy_orders import LazyOrders
from ppsched.solver.model.ops import FBOp, Op, Orders
from ppsched.solver.model.problem import Problem
from ppsched.solver.sim import kernel as _kernel
from ppsched.solver.sim.kernel import (
    BW,
    FB,
    KIND_INDEX,
    NOT_TIMEABLE,
    REFUSED,
    UNTIMED,
    Kernel,
    Timeline,
)

# Why a list-scheduling build (`solver.greedy`, `solver.lookahead`) has no orders to give:
# every rank waits on another, a B adds memory over the limit where m_w > m_b, or the
# build provably cannot win against its incumbent.
DEADLOCK, OVER_THE_LIMIT, CANNOT_WIN = "deadlock", _kernel.OVER_LIMIT, _kernel.CANNOT_WIN


class NotTimeable(ValueError):
    """An order `time_chunked_order` does not time (policy ops, FB ops where
    ``overlap < 1``, unequal microbatches): the caller simulates it instead."""


def time_chunked_order(problem: Problem, orders: Orders | LazyOrders,
                       objective: str = "cost", incumbent: float = math.inf,
                       checkpoint: Callable[[Kernel], bool] | None = None,
                       ) -> tuple[float, float] | None:
    """The cost and makespan of `orders`, or None when they break the memory limit, miss
    or repeat an op, put one on the wrong rank, deadlock, or provably cannot end
    `early_stop.MARGIN` below `incumbent` by `objective`.

    Args:
        problem: any placement, alike microbatches.
        orders: per rank, its ops in execution order: F, B, W, BW and (at overlap 1)
            FB only; as `LazyOrders`, generated only as far as the timing reads (a
            loser stops early, and `LazyOrders.complete` then finishes a winner).
        checkpoint: a caller's stronger floor (`Kernel.run`).

    Raises:
        NotTimeable: unequal microbatches, or an op of another kind (an FB where
            ``overlap < 1``).
    """
    if not problem.uniform_microbatches:
        raise NotTimeable("unequal microbatches")
    lazy = orders if isinstance(orders, LazyOrders) else LazyOrders.of(orders)
    source = lazy.rows
    ids = _Ids(problem, source)
    kernel = Kernel(problem, ids.rows, ids.pairs, limit=list(problem.memory_limit),
                    strict=True, bound=incumbent - MARGIN / 2, objective=objective)

    def pull(r: int) -> bool:  # the end of the ids so far: convert, or generate, more
        if ids.done[r] == len(source[r]) and not lazy.pull(r):
            return False
        ids.convert(r)
        return True

    kernel.pull = pull
    failed = kernel.run(checkpoint)
    if failed == UNTIMED:
        raise NotTimeable("an op other than F, B, W, BW and (overlap 1) FB")
    if failed is not None or not kernel.finished() \
            or None in kernel.end_of[:3 * problem.num_stages * problem.num_microbatches]:
        return None  # an op missing, or a rank waiting for one never timed (a deadlock)
    return kernel.cost(), kernel.makespan_value()


class _Ids:
    """The kernel's op ids of rows of `Op`s, converted as far as they are read: an op on
    the wrong rank becomes `REFUSED`, one the kernel does not time here `NOT_TIMEABLE`
    (an FB where ``overlap < 1``: less than the work each rank owes, the race's floor)."""

    def __init__(self, problem: Problem, source: list[list[Op]]) -> None:
        self.source = source
        self.rows: list[list[int]] = [[] for _ in source]
        self.done = [0] * len(source)
        self.pairs: list[tuple[int, int]] = []
        self.S, self.m = problem.num_stages, problem.num_microbatches
        self.rank_of = problem.stage_to_rank
        self.plain_fb = problem.overlap == 1
        block = self.S * self.m
        self.offset = {kind: k * block for kind, k in KIND_INDEX.items()}
        self.own: list[list[int | None]] = [[None] * self.S for _ in source]
        for s, rank in enumerate(self.rank_of):
            self.own[rank][s] = s * self.m

    def convert(self, r: int) -> None:
        S, m, rank_of, kind_index = self.S, self.m, self.rank_of, KIND_INDEX
        row, out = self.source[r], self.rows[r]
        begin = self.done[r]
        self.done[r] = len(row)
        try:  # the common case, in one comprehension: plain F, B, W and BW ops
            # (kind's block + the stage's row, None for another rank's stage: a TypeError)
            own, offset = self.own[r], self.offset
            out.extend([offset[k] + own[s] + j  # type: ignore[operator]
                        for k, s, j in row[begin:]])
            return
        except (KeyError, TypeError, ValueError, IndexError):
            pass  # an FB, another rank's op, a kind not timed here: op by op
        for i in range(begin, len(row)):
            op = row[i]
            k = kind_index.get(op[0], -1)
            if k < 0 or type(op) is not Op:
                out.append(self._other(op, r))
                continue
            _, s, j = op
            out.append((k * S + s) * m + j if rank_of[s] == r else REFUSED)

    def _other(self, op: Op, r: int) -> int:
        """An FB's id (its parts in `pairs`), or why it is not timed."""
        if type(op) is not FBOp or not self.plain_fb:
            return NOT_TIMEABLE
        assert isinstance(op, FBOp)
        S, m = self.S, self.m
        if self.rank_of[op.stage] != r or self.rank_of[op.stage_b] != r:
            return REFUSED
        self.pairs.append((op.stage * m + op.microbatch,
                           (BW * S + op.stage_b) * m + op.microbatch_b))
        return FB * S * m + len(self.pairs) - 1


def RunningTiming(problem: Problem, objective: str = "cost",
                  incumbent: float = math.inf) -> Timeline:
    """The simulator's times of an order built op by op (`sim.kernel.Timeline`), with
    the floor and the memory check of `time_chunked_order`: `add` says when the order
    breaks the limit or can no longer end `early_stop.MARGIN` below `incumbent` by
    `objective`.

    A builder that decides by its own clock (the greedy waits for arrivals before it
    picks a W) may start an op later than the simulator would; these are the simulator's
    times, so its early stop and its value are those of the order it emits.
    """
    return Timeline(problem, objective, incumbent - MARGIN / 2)
