"""`make gpu-check` runs unattended: on the CPU (CI) its checks run as far as the CPU
allows and write one result file each (on a CUDA machine the same script uses the GPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.dist
def test_the_gpu_check_runs_its_checks_in_cpu_mode(tmp_path: Path) -> None:
    ran = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--device", "cpu",
                          "--only", "nccl,offload,profile", "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(
                             filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "3 of 3 checks ok" in ran.stdout
    nccl = (tmp_path / "gpu_nccl.md").read_text()
    assert "| 1f1b | 2 | cpu | 0 |" in nccl and "| zb-h1 | 2 | cpu | 0 |" in nccl
    errors = [float(line.split("|")[5]) for line in nccl.splitlines()
              if line.startswith(("| 1f1b", "| zb-h1"))]
    assert errors and max(errors) <= 1e-5
    assert "share of the shorter hidden" in (tmp_path / "gpu_offload.md").read_text()
    assert "Measured with the host clock" in (tmp_path / "gpu_profile.md").read_text()


def test_an_unknown_check_is_named() -> None:
    ran = subprocess.run([sys.executable, "-m", "benchmarks.gpu_check", "--only", "nccl,x"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 2
    assert "unknown check(s) ['x']; expected some of nccl, offload, profile, fidelity" \
        in ran.stderr
