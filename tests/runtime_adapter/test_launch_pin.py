"""`launch_local(pin_cores=True)`: each rank runs on the core `pinned_cores` names for it
(the fidelity benchmark relies on it to keep two ranks off one core)."""

from __future__ import annotations

import os

import pytest
from ppsched.runtime_adapter.launch import launch_local, pinned_cores

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"),
                                reason="pinning needs os.sched_setaffinity (Linux)")


def _affinity(rank: int, world_size: int) -> list[int]:
    return sorted(os.sched_getaffinity(0))


def test_each_rank_runs_on_its_pinned_core() -> None:
    expected = pinned_cores(2)
    assert launch_local(_affinity, 2, pin_cores=True) == [[core] for core in expected]


def test_pinned_cores_are_the_usable_ones_in_order_then_reused() -> None:
    usable = sorted(os.sched_getaffinity(0))
    cores = pinned_cores(len(usable) + 1)
    assert cores[:len(usable)] == usable  # a core of its own while there are enough
    assert cores[-1] == usable[0]  # then shared, from the first


def test_unpinned_ranks_keep_the_parents_cores() -> None:
    assert launch_local(_affinity, 2) == [sorted(os.sched_getaffinity(0))] * 2
