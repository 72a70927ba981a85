"""The device and backend a rank runs on: CUDA and NCCL when a GPU is present, the CPU and
gloo otherwise, as torchrun launches expect (``LOCAL_RANK`` picks the GPU).

    device = init_distributed()              # "auto": cuda/nccl if CUDA, else cpu/gloo
    device = init_distributed("cpu", "gloo") # force the CPU path (tests, debugging)

The engines take their device from the stages' parameters, so move the stages there
(``module.to(device)``) before building one; they move each step's microbatches and
targets to it.
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch
import torch.distributed as dist

DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("auto", "gloo", "nccl")


def pick(device: str = "auto", backend: str = "auto") -> tuple[torch.device, str]:
    """The device of this process (``cuda:LOCAL_RANK`` for CUDA) and the backend.

    Raises:
        ValueError: an unknown name, CUDA asked for where torch sees none, or NCCL on the
            CPU; naming what would be accepted.
    """
    if device not in DEVICES:
        raise ValueError(f"invalid 'device': got {device!r}; expected one of "
                         f"{', '.join(DEVICES)}")
    if backend not in BACKENDS:
        raise ValueError(f"invalid 'backend': got {backend!r}; expected one of "
                         f"{', '.join(BACKENDS)}")
    cuda = torch.cuda.is_available()
    if device == "cuda" and not cuda:
        raise ValueError("invalid 'device': got 'cuda', but torch sees no CUDA device (a "
                         "CPU build of torch, or no GPU); expected 'cpu' or 'auto'")
    kind = ("cuda" if cuda else "cpu") if device == "auto" else device
    chosen = ("nccl" if kind == "cuda" else "gloo") if backend == "auto" else backend
    if chosen == "nccl" and kind != "cuda":
        raise ValueError("invalid 'backend': got 'nccl' on the CPU; expected 'gloo' (or "
                         "device 'cuda')")
    if kind == "cuda":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))), chosen
    return torch.device("cpu"), chosen


def init_distributed(device: str = "auto", backend: str = "auto", *,
                     timeout_s: float = 600.0) -> torch.device:
    """Set this process's device (``torch.cuda.set_device(LOCAL_RANK)`` on CUDA) and start
    the default process group on the backend; return the device. Call it once per
    process, under torchrun (which sets RANK, WORLD_SIZE, LOCAL_RANK and the rendezvous).
    """
    where, chosen = pick(device, backend)
    if where.type == "cuda":
        torch.cuda.set_device(where)
    dist.init_process_group(chosen, timeout=timedelta(seconds=timeout_s),
                            device_id=where if where.type == "cuda" else None)
    return where
