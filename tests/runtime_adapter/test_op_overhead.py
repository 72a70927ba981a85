"""The executor's per-op overhead (`t_op`): the gaps between ops that had nothing to wait
for, measured on real ranks."""

from __future__ import annotations

import pytest
from ppsched.runtime_adapter.launch import launch_local
from ppsched.runtime_adapter.op_overhead import _free_gaps, measure_t_op
from ppsched.runtime_adapter.timeline import OpRecord


def test_only_the_gaps_without_a_pending_input_count() -> None:
    rank0 = [OpRecord("F", 0, 0, 0.0, 1.0), OpRecord("F", 0, 1, 1.2, 2.2),
             OpRecord("B", 0, 0, 3.1, 3.6)]
    rank1 = [OpRecord("F", 1, 0, 1.5, 2.5), OpRecord("B", 1, 0, 2.6, 3.0)]
    # rank 0: F1 follows F0 after 0.2 (stage 0's F needs nothing from another rank);
    # B0 waited for rank 1's B0 (ended at 3.0, after F1's end at 2.2): not counted.
    # rank 1: B0 on the last stage needs no other rank: 0.1.
    assert _free_gaps([rank0, rank1]) == pytest.approx([0.2, 0.1])


def _measure(rank: int, world: int) -> float:
    return measure_t_op(steps=2)


@pytest.mark.dist
def test_every_rank_gets_one_positive_overhead() -> None:
    values = launch_local(_measure, 2, timeout_s=300)
    assert values[0] == values[1]
    assert 0.0 < values[0] < 1000.0  # ms; a loaded machine may stretch it, never to 0


def test_bad_counts_are_named() -> None:
    with pytest.raises(ValueError, match="steps"):
        measure_t_op(steps=0)
