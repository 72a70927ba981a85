"""Point-to-point traffic of the executor: batched posting, waits with a deadline, shapes.

Every wait has a deadline; a rank that passes it raises `PipelineTimeout` naming the op it
waits for, the tensor and the peer rank, instead of hanging until the process group's own
timeout (gloo's is 30 minutes by default).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist


class PipelineTimeout(RuntimeError):
    """A rank waited longer than its timeout for a peer (the message names op and peer)."""


class PipelinePeerLost(PipelineTimeout):
    """The backend reported a peer's connection gone while this rank posted or waited (the
    message names the op, the peer and how long this rank had waited)."""


class ScheduleMismatch(ValueError):
    """The schedule does not match the ranks' stages or world size (refused before any
    point-to-point traffic)."""


_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64,
           torch.int32)
_HEADER_LEN = 10  # ndim, dtype code, up to 8 dims


def wait(work: Any, deadline: float, what: str) -> None:
    """Wait for `work` until `deadline` (``time.monotonic()``); `what` names it on failure.

    The error says how long this call really waited, measured, not the limit.

    Raises:
        PipelineTimeout: past the deadline.
        PipelinePeerLost: the backend reported the peer gone (e.g. gloo's "Connection
            closed by peer" when the peer process died).
    """
    start = time.monotonic()
    if deadline - start <= 0 and not work.is_completed():
        raise PipelineTimeout(f"{what}: timed out: the step's wait limit had already passed")
    try:
        if dist.get_backend() == "gloo":
            work.wait(timedelta(seconds=max(deadline - start, 1e-3)))
            return
        # NCCL and other device backends: wait() makes the current stream wait on the
        # communication (it does not block the host); a dead or stuck peer surfaces
        # through the process group's own timeout and watchdog.
        work.wait()
    except RuntimeError as exc:
        elapsed = time.monotonic() - start
        first = backend_reason(exc)
        if time.monotonic() >= deadline:
            raise PipelineTimeout(f"{what}: timed out after waiting {elapsed:.1f} s"
                                  ) from None
        raise PipelinePeerLost(f"{what}: the peer's connection failed after waiting "
                               f"{elapsed:.1f} s ({first})") from None


@contextmanager
def posting(what: str) -> Iterator[None]:
    """Turn a backend error raised while posting (a peer already gone) into
    `PipelinePeerLost` naming `what`."""
    start = time.monotonic()
    try:
        yield
    except RuntimeError as exc:
        if isinstance(exc, PipelineTimeout):
            raise
        elapsed = time.monotonic() - start
        raise PipelinePeerLost(f"{what}: the backend refused it after {elapsed:.1f} s, a "
                               f"peer is gone ({backend_reason(exc)})") from None


def backend_reason(exc: BaseException) -> str:
    """The backend's own reason, without its source location and advice: gloo's
    "[.../pair.cc:553] Connection closed by peer [addr]:port. This is typically ..."."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__
    first = re.sub(r"^\[[^\]]*\]\s*", "", text.splitlines()[0])
    return first.split(". This is")[0].rstrip(".")


def encode_meta(shape: torch.Size, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A small int64 tensor carrying a tensor's shape and dtype (for the shape handshake)."""
    if len(shape) > _HEADER_LEN - 2:
        raise ValueError(f"invalid 'activation shape': got {tuple(shape)}; expected at most "
                         f"{_HEADER_LEN - 2} dimensions")
    if dtype not in _DTYPES:
        raise ValueError(f"invalid 'activation dtype': got {dtype}; expected one of "
                         + ", ".join(str(d) for d in _DTYPES))
    header = [len(shape), _DTYPES.index(dtype), *shape]
    header += [0] * (_HEADER_LEN - len(header))
    return torch.tensor(header, dtype=torch.int64, device=device)


def decode_meta(header: torch.Tensor) -> tuple[torch.Size, torch.dtype]:
    values = header.tolist()
    ndim, code = int(values[0]), int(values[1])
    return torch.Size(int(x) for x in values[2:2 + ndim]), _DTYPES[code]
