"""V-shape schedules: ZB-V (Qi et al. 2024, section 6) and V-Half, V-Min ("Pipeline
Parallelism with Controllable Memory", Qi et al. 2024).

V placement, two chunks per rank: rank r runs stage r (chunk 0, going down the ranks)
and stage 2p-1-r (chunk 1, coming back up). The first rank holds both the first and the
last stage, so it starts backwards early and its memory clears fast.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from ppsched.solver.generators.registry import register_rows
from ppsched.solver.model.ops import Op
from ppsched.solver.model.problem import Problem

# Ops are built with tuple.__new__: half the time of the named tuple's own constructor,
# which shows at 49k ops a schedule (issue 11).
_new = tuple.__new__


@register_rows("zb-v", "ZB-V: V placement, split backward; zero bubble at 1F1B's memory when "
               "T_F = T_B = T_W and m >= 2p", num_chunks=(2,), placement="v")
def zb_v(problem: Problem) -> list[Iterator[Op]]:
    p, m = problem.num_ranks, problem.num_microbatches
    return [_zb_v_rank(p, m, r) for r in range(p)]


def _zb_v_rank(p: int, m: int, r: int) -> Iterator[Op]:
    # The pattern needs 2p-1 microbatches to fill the V; with fewer, build it for 2p-1 and
    # drop the missing ones (dependencies stay within a microbatch, so what is left is a
    # valid order that holds no more memory).
    for op in _zb_v_pattern(p, max(m, 2 * p - 1), r):
        if op[2] < m:
            yield op


def _zb_v_pattern(p: int, n: int, r: int) -> Iterator[Op]:
    """Rank r's ZB-V order for `n` >= 2p-1 microbatches."""
    down, up = r, 2 * p - 1 - r  # chunk 0 and chunk 1 of this rank
    f_down = f_up = b_down = b_up = 0
    # Step 1 (warm-up down the V): 2(p-r)-1 chunk-0 forwards; the first microbatch
    # reaches the bottom of the V and turns back as these run.
    for _ in range(2 * (p - r) - 1):
        yield _new(Op, ("F", down, f_down))
        f_down += 1
    # Step 2 (warm-up, both chunks): r pairs of chunk-1 then chunk-0 forwards.
    for _ in range(r):
        yield _new(Op, ("F", up, f_up))
        f_up += 1
        yield _new(Op, ("F", down, f_down))
        f_down += 1
    # Step 3 (first backwards): p-r steps of chunk-1 F, B, W; the gradient starts on
    # its way down the V while memory stays at 1F1B's.
    for _ in range(p - r):
        yield _new(Op, ("F", up, f_up))
        f_up += 1
        yield _new(Op, ("B", up, b_up))
        yield _new(Op, ("W", up, b_up))
        b_up += 1
    # Step 4 (main step): F B W on chunk 0, then F B W on chunk 1.
    while f_up < f_down or f_down < n:
        if f_down < n:
            yield _new(Op, ("F", down, f_down))
            f_down += 1
        yield _new(Op, ("B", down, b_down))
        yield _new(Op, ("W", down, b_down))
        b_down += 1
        yield _new(Op, ("F", up, f_up))
        f_up += 1
        yield _new(Op, ("B", up, b_up))
        yield _new(Op, ("W", up, b_up))
        b_up += 1
    # Step 5 (cool-down): r pairs of Bs with their Ws deferred, then p-r chunk-0 B W
    # pairs, then the deferred Ws fill the tail.
    w_down, w_up = b_down, b_up
    for _ in range(r):
        yield _new(Op, ("B", down, b_down))
        b_down += 1
        yield _new(Op, ("B", up, b_up))
        b_up += 1
    for _ in range(p - r):
        yield _new(Op, ("B", down, b_down))
        b_down += 1
        yield _new(Op, ("W", down, w_down))
        w_down += 1
    for j in range(w_up, b_up):
        yield _new(Op, ("W", up, j))
    for j in range(w_down, b_down):
        yield _new(Op, ("W", down, j))


@register_rows("v-half", "V-Half (controllable memory): V placement, a repeating building "
               "block holding about half of 1F1B's activation memory", num_chunks=(2,),
               placement="v")
def v_half(problem: Problem) -> list[Iterator[Op]]:
    p = problem.num_ranks
    # The building block in unit slots (each op one slot, one microbatch every 6 slots):
    # rank i runs chunk-0 F at 2i, chunk-1 F at 3p-i-2, chunk-1 B at 3p+gap+2i-1, chunk-0
    # B at 6p+gap-i-2. An activation of chunk 0 lives about 6p-3i slots, i.e. p - i/2
    # microbatches of half a stage each: about half of 1F1B's p stage activations.
    # The gap keeps the slots of a rank distinct modulo 6 when p is even.
    gap = 3 if p % 2 == 0 else 0
    block = [(2 * i, 3 * p - i - 2, 3 * p + gap + 2 * i - 1, 6 * p + gap - i - 2)
             for i in range(p)]
    return _orders_from_block(problem, block)


@register_rows("v-min", "V-Min (controllable memory): V placement, a repeating building "
               "block holding about a third of 1F1B's activation memory", num_chunks=(2,),
               placement="v")
def v_min(problem: Problem) -> list[Iterator[Op]]:
    p = problem.num_ranks
    # Rank i: chunk-0 F at i, chunk-1 F at 2p-i-1, chunk-1 B at 2p+gap+i, chunk-0 B at
    # 4p+gap-i-1: a chunk-0 activation lives about 4p-2i slots, i.e. 2p/3 microbatches of
    # half a stage on average: about a third of 1F1B's. The gap keeps slots distinct
    # modulo 6 when 3 divides p.
    gap = 2 if p % 3 == 0 else 0
    block = [(i, 2 * p - i - 1, 2 * p + gap + i, 4 * p + gap - i - 1) for i in range(p)]
    return _orders_from_block(problem, block)


_PERIOD = 6  # slots per microbatch on a rank: F and B of both chunks, and their two Ws


def _orders_from_block(problem: Problem, block: list[tuple[int, int, int, int]],
                       ) -> list[Iterator[Op]]:
    """Repeat a building block every `_PERIOD` slots and order each rank by slot.

    `block[r]` gives microbatch 0's slots of (chunk-0 F, chunk-1 F, chunk-1 B, chunk-0 B)
    on rank r; microbatch j runs them `_PERIOD * j` slots later. Ws take the free slots
    after their B, oldest B first, so they fill what the block leaves idle.
    """
    p, m = problem.num_ranks, problem.num_microbatches
    return [_block_rank(r, p, m, slots) for r, slots in enumerate(block)]


def _block_rank(r: int, p: int, m: int, slots: tuple[int, int, int, int]) -> Iterator[Op]:
    """Rank r's order, slot by slot (each slot's op found from its residue modulo
    `_PERIOD`, so nothing is built ahead of what is read)."""
    down, up = r, 2 * p - 1 - r
    kinds = (("F", down), ("F", up), ("B", up), ("B", down))
    # Residue -> (first slot, kind, stage); distinct residues: slots never collide.
    at = {first % _PERIOD: (first, kind, stage)
          for first, (kind, stage) in zip(slots, kinds, strict=True)}
    assert len(at) == 4, "building block slots collide"
    pending_w: deque[Op] = deque()
    for slot in range(max(slots) + _PERIOD * (m - 1) + 1):
        entry = at.get(slot % _PERIOD)
        if entry is not None and 0 <= (j := (slot - entry[0]) // _PERIOD) < m:
            _, kind, stage = entry
            yield _new(Op, (kind, stage, j))
            if kind == "B":
                pending_w.append(_new(Op, ("W", stage, j)))
        elif pending_w:
            yield pending_w.popleft()
    yield from pending_w
