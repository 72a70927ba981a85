"""DualPipe-V: DeepSeek's DualPipe cut in half onto a V placement (DeepSeek-V3 report;
deepseek-ai/DualPipe ``dualpipev.py``; torch 2.13's ``ScheduleDualPipeV``).

V placement, two chunks per rank: rank r runs stage r (chunk 0, going down the ranks) and
stage 2p-1-r (chunk 1, coming back up). In the main step each rank overlaps the forward of
one chunk with the full backward of the other (an `FB` op, DESIGN.md 6.4), so with a good
`overlap` the backward hides the forward's communication. Needs m >= 2p.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from ppsched.solver.generators.registry import register_rows
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import FBOp, Op
from ppsched.solver.model.problem import Problem


@register_rows("dualpipe-v", "DualPipe-V: V placement, forward of one chunk overlapped with "
               "the backward of the other (FB ops); needs m >= 2p", num_chunks=(2,),
               placement="v")
def dualpipe_v(problem: Problem) -> list[Iterator[Op]]:
    """Each rank's order, following DualPipe-V's eight steps (``DualPipeV.step``).

    Raises:
        ProfileError: when ``num_microbatches < 2 * num_ranks``.
    """
    p, m = problem.num_ranks, problem.num_microbatches
    if m < 2 * p:
        raise ProfileError("num_microbatches", m, f">= 2 * num_ranks = {2 * p} for schedule "
                           "'dualpipe-v' (its steady state needs the V filled twice)")
    return [_rank_order(p, m, r) for r in range(p)]


class _Rank:
    """One rank's ops as they are written: next microbatch per (chunk, kind), W queue."""

    def __init__(self, p: int, r: int) -> None:
        self.stage = (r, 2 * p - 1 - r)  # chunk 0 (down the V), chunk 1 (back up)
        self.next_f = [0, 0]
        self.next_b = [0, 0]
        self.pending_w: deque[Op] = deque()  # W's deferred by zero-bubble B's, FIFO

    def f(self, chunk: int) -> Op:
        return Op("F", self.stage[chunk], self._take(self.next_f, chunk))

    def b(self, chunk: int, zero_bubble: bool = False) -> Op:
        """A full backward (BW), or with `zero_bubble` a B whose W waits in the queue."""
        j = self._take(self.next_b, chunk)
        if zero_bubble:
            self.pending_w.append(Op("W", self.stage[chunk], j))
            return Op("B", self.stage[chunk], j)
        return Op("BW", self.stage[chunk], j)

    def w(self) -> Op:
        return self.pending_w.popleft()

    def fb(self, forward: int, backward: int) -> FBOp:
        """Forward of chunk `forward` overlapped with the full backward of `backward`."""
        j_f = self._take(self.next_f, forward)
        j_b = self._take(self.next_b, backward)
        return FBOp(self.stage[forward], j_f, self.stage[backward], j_b)

    @staticmethod
    def _take(counter: list[int], chunk: int) -> int:
        counter[chunk] += 1
        return counter[chunk] - 1


def _rank_order(p: int, m: int, r: int) -> Iterator[Op]:
    x = _Rank(p, r)
    last = r == p - 1  # the bottom of the V: its chunk 0 feeds its own chunk 1
    # Step 1: nF0. Fill the way down: the deeper the rank, the fewer it runs ahead.
    for _ in range(2 * (p - r - 1)):
        yield x.f(0)
    # Step 2: nF0F1. Both chunks forward; microbatch 0 turns at the bottom and comes back.
    for _ in range(r + 1):
        yield x.f(0)
        yield x.f(1)
    # Step 3: nB1W1F1. First backwards of chunk 1, split (zero bubble): B, then a W, then F.
    for _ in range(p - r - 1):
        yield x.b(1, zero_bubble=True)
        yield x.w()
        yield x.f(1)
    # Step 4 (main step): nF0B1F1B0. Each forward overlapped with the other chunk's backward.
    for i in range(m - 2 * p + r + 1):
        if i == 0 and last:
            # As in DualPipe: not overlapped here, so chunk 1's backward starts sooner.
            yield x.f(0)
            yield x.b(1)
        else:
            yield x.fb(0, 1)
        yield x.fb(1, 0)
    # Step 5: nB1F1B0. Chunk 0 has no forward left: a chunk-1 backward, then F1 with B0.
    for _ in range(p - r - 1):
        yield x.b(1)
        yield x.fb(1, 0)
    # Step 6: nB1B0. Drain both chunks; the second half splits B and W (zero bubble).
    zero_bubble = False
    for i in range(r + 1):
        if i == (r + 1) // 2 and r % 2 == 1:
            zero_bubble = True
        yield x.b(1, zero_bubble)
        if i == (r + 1) // 2 and r % 2 == 0:
            zero_bubble = True
        yield x.b(0, zero_bubble)
    # Step 7: nWB0. Deferred W's fill the wait for chunk 0's last gradients.
    for _ in range(p - r - 1):
        yield x.w()
        yield x.b(0, zero_bubble=True)
    # Step 8: nW. The W's left.
    for _ in range(r + 1):
        yield x.w()
    assert not x.pending_w and x.next_f == [m, m] and x.next_b == [m, m]
