"""O and L run beside compute: the step's thread hands a copy to its lane and goes on; only
a read of the copied tensor waits for it (CPU path; the CUDA streams: benchmarks.gpu_check)."""

from __future__ import annotations

import threading

import torch
from ppsched.runtime_adapter.copy_lane import CopyLanes


def test_a_copy_runs_on_its_lane_while_the_caller_goes_on() -> None:
    lanes = CopyLanes(torch.device("cpu"))
    gate = threading.Event()
    assert lanes._down_pool is not None
    lanes._down_pool.submit(gate.wait)  # the offload lane is busy with an earlier copy
    tensor = torch.arange(6.0)
    offloaded = lanes.to_host(tensor)  # returns at once: the caller is not blocked
    back = lanes.to_device(offloaded)
    assert not offloaded.done() and not back.done()
    gate.set()
    result = back.result()  # the read waits for O, then L
    assert torch.equal(result, tensor) and result is not tensor
    assert offloaded.done()
    lanes.close()


def test_reload_waits_for_its_offload_on_the_other_lane() -> None:
    lanes = CopyLanes(torch.device("cpu"))
    gate = threading.Event()
    assert lanes._down_pool is not None
    lanes._down_pool.submit(gate.wait)
    tensor = torch.randn(4, 4)
    back = lanes.to_device(lanes.to_host(tensor))
    gate.set()
    assert torch.equal(back.result(), tensor)
    lanes.synchronize()
    lanes.close()
