"""GPU readiness in one unattended run (``make gpu-check``): the runtime on NCCL, the offload
copy streams' overlap with compute, CUDA-event profiling and the fidelity benchmark.

    python -m benchmarks.gpu_check                 # CUDA: writes benchmarks/results/gpu_*.md
    python -m benchmarks.gpu_check --out DIR       # anywhere else
    python -m benchmarks.gpu_check --device cpu    # the same checks on the CPU (CI runs this)

Each check runs on its own and records its outcome (a failed check does not stop the
others), within a total budget (``--budget-s``, 540 s by default: under the ten minutes a
lent GPU machine allows one command):

1. ``nccl``: ``torchrun -m ppsched.runtime_adapter.run --check`` for 1F1B and ZB-H1 on
   ``min(2, GPUs)`` ranks over NCCL (one GPU: a single-rank smoke test, since NCCL refuses
   two ranks on one device), and the step-one error against the unpipelined model.
2. ``offload``: a device-to-host copy on the copy lane (`runtime_adapter.copy_lane`) while
   the compute stream multiplies matrices: compute alone, copy alone, both; the overlap is
   the share of the shorter one hidden under the other.
3. ``profile``: `runtime_adapter.profiler.profile_stages` on the example MLP (CUDA events
   on a GPU, the host clock on the CPU).
4. ``fidelity``: ``benchmarks.runtime_fidelity`` at p=2, one repeat (CPU gloo ranks; on a
   lent machine the cores are idle), with what is left of the budget.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.result_header import parse_line, result_header, start

ROOT = Path(__file__).resolve().parents[1]
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("gpu_*.md",)
MEASURES = (
    "runtime_adapter", "solver", "benchmarks/runtime_fidelity.py",
    "benchmarks/step_timing.py", "benchmarks/gpu_check.py",
)
RESULTS = ROOT / "benchmarks" / "results"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def check_nccl(device: str, budget_s: float) -> list[str]:
    gpus = torch.cuda.device_count() if device == "cuda" else 0
    ranks = min(2, gpus) if device == "cuda" else 2
    rows = ["| method | ranks | device | exit | step-one error | wall (s) |",
            "|---|---|---|---|---|---|"]
    for method in ("1f1b", "zb-h1"):
        started = time.monotonic()
        ran = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
             str(ranks), "-m", "ppsched.runtime_adapter.run", "--method", method,
             "--microbatches", "4", "--steps", "2", "--check", "--device", device],
            capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=budget_s / 2,
            check=False)
        found = re.search(r"over all ranks ([0-9.e+-]+)", ran.stderr)
        error = found.group(1) if found else "none (" + ran.stderr.strip()[-200:].replace(
            "|", "/").replace("\n", " ") + ")"
        rows.append(f"| {method} | {ranks} | {device} | {ran.returncode} | {error} | "
                    f"{time.monotonic() - started:.1f} |")
    return [f"Backend: {'nccl' if device == 'cuda' else 'gloo'}; GPUs seen: {gpus}.", "",
            *rows]


def _timed(device: torch.device, work: Callable[[], object]) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    work()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - started) * 1e3


def check_offload(device: str, budget_s: float) -> list[str]:
    from ppsched.runtime_adapter.copy_lane import CopyLanes

    where = torch.device("cuda", 0) if device == "cuda" else torch.device("cpu")
    size = 4096 if device == "cuda" else 512
    a = torch.randn(size, size, device=where)
    payload = torch.randn(64 * 2**20 // 4 if device == "cuda" else 16 * 2**20 // 4,
                          device=where)
    lanes = CopyLanes(where)

    def compute() -> None:
        for _ in range(20):
            a.matmul(a)

    def copy() -> None:
        lanes.to_host(payload).result()

    def both() -> None:
        pending = lanes.to_host(payload)
        compute()
        pending.result()

    compute(), copy(), both()  # warm-up: kernels, pinned pool, threads
    t_compute, t_copy, t_both = (min(_timed(where, f) for _ in range(3))
                                 for f in (compute, copy, both))
    lanes.close()
    hidden = max(0.0, t_compute + t_copy - t_both) / min(t_compute, t_copy)
    return ["| compute alone (ms) | copy alone (ms) | both (ms) | share of the shorter "
            "hidden |", "|---|---|---|---|",
            f"| {t_compute:.2f} | {t_copy:.2f} | {t_both:.2f} | {100 * hidden:.0f}% |", "",
            f"Device {where}; compute: 20 products of {size}x{size} fp32; copy: "
            f"{payload.numel() * 4 / 2**20:.0f} MiB to the host on the offload lane."]


def check_profile(device: str, budget_s: float) -> list[str]:
    from ppsched.runtime_adapter.model import example_batch, mlp_stages, mse_loss
    from ppsched.runtime_adapter.profiler import profile_stages

    where = torch.device("cuda", 0) if device == "cuda" else torch.device("cpu")
    stages = [s.to(where) for s in mlp_stages(2, hidden=256, layers_per_stage=2)]
    inputs, targets = example_batch(1, hidden=256, microbatch_size=16)
    profile = profile_stages(stages, inputs[0].to(where), mse_loss, targets[0].to(where),
                             num_ranks=2, num_microbatches=8)
    clock = "CUDA events" if where.type == "cuda" else "the host clock"
    return [f"Measured with {clock} on {where} (example MLP, 2 stages, hidden 256).", "",
            "| stage | t_f (ms) | t_b (ms) | t_w (ms) | m_b (MiB) | m_w (MiB) |",
            "|---|---|---|---|---|---|",
            *(f"| {s} | {profile['t_f'][s]} | {profile['t_b'][s]} | {profile['t_w'][s]} | "
              f"{profile['m_b'][s]} | {profile['m_w'][s]} |" for s in range(2))]


def check_fidelity(device: str, budget_s: float) -> list[str]:
    with tempfile.TemporaryDirectory() as out:
        try:
            subprocess.run([sys.executable, "-m", "benchmarks.runtime_fidelity", "--ranks", "2",
                            "--repeats", "1", "--out", out], cwd=ROOT, env=_env(),
                           capture_output=True, text=True, timeout=budget_s, check=True)
        except subprocess.TimeoutExpired:
            return [f"Not finished within the {budget_s:.0f} s left of the budget."]
        text = (Path(out) / "runtime_fidelity.md").read_text()
    # Less its title and its own header (this file's header says when and where).
    return [line for line in text.splitlines()
            if not line.startswith("# ") and parse_line(line) is None]


CHECKS: dict[str, Callable[[str, float], list[str]]] = {
    "nccl": check_nccl, "offload": check_offload, "profile": check_profile,
    "fidelity": check_fidelity}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--out", type=Path, help="default: benchmarks/results on CUDA, "
                        "else a temporary folder (printed)")
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--only", help="comma-separated checks (default: all): "
                        + ", ".join(CHECKS))
    args = parser.parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" \
        else args.device
    out = args.out or (RESULTS if device == "cuda" else Path(tempfile.mkdtemp(
        prefix="ppsched-gpu-check-")))
    out.mkdir(parents=True, exist_ok=True)
    names = args.only.split(",") if args.only else list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        print(f"gpu_check: error: unknown check(s) {unknown}; expected some of "
              f"{', '.join(CHECKS)}", file=sys.stderr)
        return 2
    deadline = time.monotonic() + args.budget_s
    failed = []
    for name in names:
        left = deadline - time.monotonic()
        started, began = start(), time.monotonic()
        try:
            if left < 10:
                raise TimeoutError(f"no budget left ({left:.0f} s)")
            body = CHECKS[name](device, left)
            outcome = "ok"
        except Exception as exc:  # one check's failure must not hide the others' results
            body, outcome = [f"Failed: {type(exc).__name__}: {exc}"], "failed"
            failed.append(name)
        header = result_header(f"python -m benchmarks.gpu_check --only {name} --device "
                               f"{device}", budget="wall", started=started)
        text = "\n".join([*header, f"# GPU check: {name} ({outcome}, "
                          f"{time.monotonic() - began:.0f} s)", "", *body]) + "\n"
        (out / f"gpu_{name}.md").write_text(text)
        print(text, flush=True)
    print(f"gpu_check: {len(names) - len(failed)} of {len(names)} checks ok; results in "
          f"{out}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
