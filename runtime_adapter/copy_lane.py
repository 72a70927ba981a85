"""Where O and L copies run: beside compute, as the schedule prices them (DESIGN.md 6.3:
O and L occupy copy lanes, not the compute stream).

On CUDA each direction has its own side stream (a GPU's copy engines run a device-to-host
and a host-to-device copy at once), ordered by events: O waits for the compute stream's
work that produced the tensor and copies it into pinned host memory (``non_blocking``);
L waits for its O and copies the host tensor back; whatever reads it (B, through
autograd's unpack hook) first makes the compute stream wait for L's event. The caching
allocator is told which stream uses each tensor (``record_stream``), so no memory is
reused under a copy still reading it. On the CPU the same path runs each direction's copies
on its own worker thread, and a read waits for its copy's future. In both, `Pending.result`
is the only synchronisation: the step's thread never blocks on a copy it does not need yet.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import torch


class Pending:
    """A copy in flight: `result` is the copied tensor, ready for the compute stream."""

    def __init__(self, tensor: torch.Tensor | None = None, *,
                 event: torch.cuda.Event | None = None,
                 future: Future[torch.Tensor] | None = None) -> None:
        self._tensor = tensor
        self._event = event
        self._future = future

    def result(self) -> torch.Tensor:
        """The copied tensor, the copy done for the compute stream (CUDA: the compute
        stream waits for the copy's event; CPU: this thread waits for the copy)."""
        if self._future is not None:
            self._tensor = self._future.result()
            self._future = None
        elif self._event is not None:
            assert self._tensor is not None
            torch.cuda.current_stream(self._tensor.device).wait_event(self._event)
            self._event = None
        assert self._tensor is not None
        return self._tensor

    def done(self) -> bool:
        """Whether the copy has finished."""
        if self._future is not None:
            return self._future.done()
        return self._event is None or bool(self._event.query())


class CopyLanes:
    """A rank's two copy lanes, device-to-host (O) and host-to-device (L): side CUDA
    streams, or one worker thread each on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        cuda = device.type == "cuda"
        self._down = torch.cuda.Stream(device) if cuda else None
        self._up = torch.cuda.Stream(device) if cuda else None
        self._down_pool = None if cuda else ThreadPoolExecutor(1, "ppsched-offload")
        self._up_pool = None if cuda else ThreadPoolExecutor(1, "ppsched-reload")

    def to_host(self, tensor: torch.Tensor) -> Pending:
        """O: `tensor` copied to host memory (pinned on CUDA)."""
        if self._down is None:
            assert self._down_pool is not None
            return Pending(future=self._down_pool.submit(torch.clone, tensor))
        host = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu", pin_memory=True)
        produced = torch.cuda.current_stream(self.device).record_event()
        with torch.cuda.stream(self._down):
            self._down.wait_event(produced)
            host.copy_(tensor, non_blocking=True)
            tensor.record_stream(self._down)
            copied = self._down.record_event()
        return Pending(host, event=copied)

    def to_device(self, offloaded: Pending) -> Pending:
        """L: an offloaded copy (finished or not) back on the device."""
        if self._up is None:
            assert self._up_pool is not None
            return Pending(future=self._up_pool.submit(lambda: offloaded.result().clone()))
        host = offloaded._tensor
        assert host is not None, "a CUDA offload's host buffer exists from the start"
        with torch.cuda.stream(self._up):
            if offloaded._event is not None:
                self._up.wait_event(offloaded._event)
            back = host.to(self.device, non_blocking=True)
            back.record_stream(torch.cuda.current_stream(self.device))
            copied = self._up.record_event()
        return Pending(back, event=copied)

    def synchronize(self) -> None:
        """Wait until every copy issued so far has finished."""
        for stream in (self._down, self._up):
            if stream is not None:
                stream.synchronize()
        for pool in (self._down_pool, self._up_pool):
            if pool is not None:
                pool.submit(lambda: None).result()  # one worker: it runs after the copies

    def close(self) -> None:
        """Let the CPU lanes' threads go (after waiting for their copies)."""
        for pool in (self._down_pool, self._up_pool):
            if pool is not None:
                pool.shutdown(wait=True)
