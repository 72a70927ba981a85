"""Cost and peak memory of the policy generators beside keep-only 1F1B and interleaved 1F1B.

Run: ``python -m benchmarks.pipeoffload_generators [--out DIR]``. Writes
``benchmarks/results/pipeoffload_generators.md``.

On gpt1.5b-p8-m24 and gpt28.3b-p32-m96 (the Zero Bubble paper's measured times) with no
memory limit: the named schedules ``1f1b`` and ``1f1b-interleaved`` (keep every
activation), ``1f1b+recompute`` and ``1f1b+recompute:K`` (the recompute pass, t_r = t_f
and m_ckpt = 0: the stage input kept is small beside its activations), and PipeOffload's
``pipeoffload-selective`` and ``pipeoffload-full`` with offload at k = 0.5, beside their
compute order keeping every activation
(`solver.offload_sizing.with_offload`: t_offload = t_reload = 0.5 (t_f + t_b)). Two-chunk
schedules run on the same model cut into 2 chunks per rank (loop placement). Every
schedule is validated by the simulator; figures are simulated times (ms, the profile's
unit) and the activation memory the profile counts, not wall time.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.offload_sizing import with_offload
from ppsched.solver.model.ops import policy_of
from ppsched.solver.model.profile import Profile, load_profile, parse_profile
from ppsched.solver.policies.pipeoffload import grouped_interleaved
from ppsched.solver.sim.simulator import validate
from ppsched.solver.solving.entry import solve

from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("pipeoffload_generators.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "profiles/gpt1.5b-p8-m24.json", "profiles/gpt28.3b-p32-m96.json",
    "benchmarks/pipeoffload_generators.py",
)
PROFILES = ("gpt1.5b-p8-m24", "gpt28.3b-p32-m96")
RATIO = 0.5
LOOP2 = ((2, "loop"),)
ONE = ((1, None),)
KEEP_ORDER = "pipeoffload order, keep"


def rows(profile_path: Path) -> list[str]:
    data = load_profile(profile_path).model_dump(mode="json")
    keep = parse_profile({**data, "memory_limit": None})
    recompute = parse_profile({**data, "memory_limit": None, "m_ckpt": 0.0})
    offload = with_offload(keep, RATIO)
    p = keep.num_ranks
    runs: list[tuple[str, Profile, tuple[tuple[int, str | None], ...]]] = [
        ("1f1b", keep, ONE), ("1f1b-interleaved", keep, LOOP2),
        ("1f1b+recompute", recompute, ONE), (f"1f1b+recompute:{p // 2}", recompute, ONE),
        ("pipeoffload-selective", offload, LOOP2), ("pipeoffload-full", offload, LOOP2)]
    out = [f"**{profile_path.stem}** (p = {p}, m = {keep.num_microbatches}):", "",
           "| schedule | chunks | cost | cost / 1F1B | peak memory | peak / 1F1B | "
           "recomputed | offloaded |", "|---" * 8 + "|"]
    reference: tuple[float, float] | None = None
    runs.insert(4, (KEEP_ORDER, keep, LOOP2))
    for name, profile, layouts in runs:
        if name == KEEP_ORDER:  # PipeOffload's compute order, nothing offloaded
            problem = with_chunks(profile, 2, "loop").problem
            sim = validate(problem, grouped_interleaved(problem))
            chunks = 2
        else:
            schedule = solve(profile, name, layouts=layouts)
            sim = validate(schedule.problem(), schedule.orders())
            chunks = schedule.profile.num_chunks
        assert sim.metrics is not None
        cost, peak = sim.metrics.cost, max(sim.memory_peak)
        reference = reference or (cost, peak)
        policy = list(policy_of(sim.order).values())
        total = sum(op.kind == "F" for ops in sim.order for op in ops)
        out.append(f"| {name} | {chunks} | {cost:.1f} | "
                   f"{cost / reference[0]:.3f} | {peak:.2f} | {peak / reference[1]:.3f} | "
                   f"{policy.count('recompute')}/{total} | "
                   f"{policy.count('offload')}/{total} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    started = start()
    tables = [line for name in PROFILES
              for line in (*rows(ROOT / "profiles" / f"{name}.json"), "")]
    text = "\n".join([
        *result_header(command_line("benchmarks.pipeoffload_generators"), started=started,
                       budget="deterministic (simulated times, no time limit)"),
        f"Policy generators on the Zero Bubble paper's measured profiles, no memory limit, "
        f"offload at k = {RATIO:g}; simulated times (ms) and activation memory (the "
        "profile's unit).",
        "",
        "Recompute: t_r = t_f, m_ckpt = 0. PipeOffload: groups of the smallest g in "
        "[ceil(p/2), p] dividing m, on 2 chunks per rank (loop).",
        "",
        *tables])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "pipeoffload_generators.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
