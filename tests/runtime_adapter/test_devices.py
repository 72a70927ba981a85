"""The device and backend of a launch: CUDA/NCCL when a GPU is present, the CPU and gloo
otherwise; torchrun runs the example on the path it picks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from ppsched.runtime_adapter.devices import pick

ROOT = Path(__file__).resolve().parents[2]


def test_auto_picks_the_cpu_and_gloo_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pick() == (torch.device("cpu"), "gloo")


def test_auto_picks_local_ranks_gpu_and_nccl_with_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert pick() == (torch.device("cuda", 3), "nccl")
    assert pick("cpu") == (torch.device("cpu"), "gloo")
    assert pick("cuda", "gloo") == (torch.device("cuda", 3), "gloo")


@pytest.mark.parametrize(("device", "backend", "words"), [
    ("cuda", "auto", "got 'cuda', but torch sees no CUDA device"),
    ("cpu", "nccl", "got 'nccl' on the CPU; expected 'gloo'"),
    ("tpu", "auto", "invalid 'device': got 'tpu'; expected one of auto, cpu, cuda"),
    ("auto", "mpi", "invalid 'backend': got 'mpi'; expected one of auto, gloo, nccl"),
])
def test_impossible_choices_are_named(monkeypatch: pytest.MonkeyPatch, device: str,
                                      backend: str, words: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=words):
        pick(device, backend)


@pytest.mark.dist
def test_torchrun_runs_the_example_on_the_picked_device_and_checks_it() -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
         "2", "-m", "ppsched.runtime_adapter.run", "--method", "zb-h1", "--microbatches",
         "4", "--steps", "1", "--check"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    assert ran.returncode == 0, ran.stderr[-2000:]
    error = float(ran.stderr.split("loss and gradients over all ranks ")[1].split()[0])
    assert error <= 1e-5
