"""Point-to-point traffic of the executor: batched posting, waits with a deadline, shapes.

Every wait has a deadline; a rank that passes it raises `PipelineTimeout` naming the op it
waits for, the tensor and the peer rank, instead of hanging until the process group's own
timeout (gloo's is 30 minutes by default).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist


class PipelineTimeout(RuntimeError):
    """A rank waited longer than its timeout for a peer (the message names op and peer)."""


class ScheduleMismatch(ValueError):
    """The schedule does not match the ranks' stages or world size (refused before any
    point-to-point traffic)."""


_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64,
           torch.int32)
_HEADER_LEN = 10  # ndim, dtype code, up to 8 dims


def wait(work: Any, deadline: float, what: str) -> None:
    """Wait for `work` until `deadline` (``time.monotonic()``); `what` names it on failure.

    Raises:
        PipelineTimeout: past the deadline, or when the backend reports the peer gone.
    """
    remaining = deadline - time.monotonic()
    if remaining <= 0 and not work.is_completed():
        raise PipelineTimeout(f"{what}: timed out (no time left)")
    try:
        if dist.get_backend() == "gloo":
            work.wait(timedelta(seconds=max(remaining, 1e-3)))
            return
        # Other backends: poll, since their wait() may not honour a CPU-side timeout.
        while not work.is_completed():
            if time.monotonic() > deadline:
                raise PipelineTimeout(f"{what}: timed out")
            time.sleep(1e-4)
        work.wait()
    except PipelineTimeout:
        raise
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PipelineTimeout(f"{what}: {first}") from None


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


def empty_meta(device: torch.device) -> torch.Tensor:
    return torch.zeros(_HEADER_LEN, dtype=torch.int64, device=device)
