"""Issue 27's scale rows: CPU time and peak memory of `ppsched solve` on large profiles,
and of the policy search.

Run: ``python -m benchmarks.scale [--base DIR] [--out DIR] [--only NAME]``. Writes
``benchmarks/results/scale.md``. With ``--base``, a checkout of an earlier commit (after
the rebuild: ``git worktree add DIR COMMIT`` and ``make .mypy-src/ppsched`` there, so that
``DIR/.mypy-src`` imports as ``ppsched``), each case is also solved by that checkout's
code, the two taking turns case by case, and the table gives its CPU time, peak RSS and
cost beside this checkout's: a ratio measured side by side in one run.

Each row is one `ppsched solve PROFILE -o out.json` in a fresh subprocess, measured as
``/usr/bin/time -f "%U+%S s %M KB"`` reports it (user + system CPU seconds, peak RSS),
never wall time: the machine may be shared. The large profiles take the 28.3B stage
times of ``profiles/gpt28.3b-p32-m*.json`` (t_f, t_b, t_w, t_comm, m_b, m_w) at p=128,
m=1024 and p=64, m=512, with ``memory_limit`` a multiple of ``p * m_b``; they are solved
with ``--layouts 1,v,loop2`` (the default to come: every layout at every memory level),
once writing the default JSON (DESIGN.md section 4) and once ``--compact`` (one string of
torch actions per rank, `solver.model.compact`). The policy rows solve gpt1.5b-p8-m24
with offload at ``k = 0.5`` (`solver.model.offload_sizing.with_offload`, as
`benchmarks.offload_targets`) at 0.5p. Cost and lower bound are read back from the
written JSON (the simulator's figures).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ppsched.solver.model.offload_sizing import with_offload
from ppsched.solver.model.profile import load_profile

from benchmarks import base_checkout
from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("scale.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "api/cli", "profiles/gpt28.3b-p32-m96.json",
    "profiles/gpt1.5b-p8-m24.json", "benchmarks/base_checkout.py", "benchmarks/scale.py",
)
STAGE_TIMES = ROOT / "profiles" / "gpt28.3b-p32-m96.json"
POLICY_PROFILE = ROOT / "profiles" / "gpt1.5b-p8-m24.json"
ALL_LAYOUTS = "1,v,loop2"
STARTUP_S = 0.4
"""About what the CLI's start-up and imports cost in CPU here (the policy row's limit is
a solve's 0.5 s)."""


@dataclass(frozen=True)
class Case:
    name: str
    profile: dict
    layouts: str | None  # None: the solve's default
    compact: bool
    target: str
    # Issue 27's limits, checked on this row (CPU s, peak RSS MB; None: none).
    cpu_limit: float | None = None
    rss_limit: float | None = None


def large(p: int, m: int, memory: float) -> dict:
    """The 28.3B stage times at p ranks, m microbatches, `memory` times p * m_b."""
    base = json.loads(STAGE_TIMES.read_text())
    data = {k: base[k] for k in ("t_f", "t_b", "t_w", "t_comm", "m_b", "m_w")}
    data.update(name=f"gpt28.3b-p{p}-m{m}@{memory:g}p", num_ranks=p, num_microbatches=m,
                memory_limit=memory * p * base["m_b"])
    return data


def with_offload_at(memory: float, offload: bool) -> dict:
    base = load_profile(POLICY_PROFILE)
    profile = with_offload(base, 0.5) if offload else base
    data = profile.model_dump(mode="json", exclude_none=True)
    data["memory_limit"] = memory * data["num_ranks"] * data["m_b"]
    data["name"] = f"gpt1.5b-p8-m24@{memory:g}p" + (" offload k=0.5" if offload else "")
    return data


def cases() -> list[Case]:
    out = []
    # The large targets hold for the compact JSON (the opt-in for large
    # schedules): the default one is measured beside it.
    for p, m, memory, target, cpu, rss in ((128, 1024, 0.5, "<= 10 s, <= 500 MB", 10.0, 500.0),
                                           (128, 1024, 1.0, "<= 2 s", 2.0, None),
                                           (64, 512, 0.5, "", None, None)):
        for compact in (False, True):
            out.append(Case(f"p{p}-m{m}@{memory:g}p", large(p, m, memory), ALL_LAYOUTS,
                            compact, target if compact else "",
                            cpu if compact else None, rss if compact else None))
    out.append(Case("policy@0.5p keep only", with_offload_at(0.5, False), None, False, ""))
    # The CLI's CPU: the solve's 0.5 s plus about 0.4 s of start-up and imports.
    out.append(Case("policy@0.5p offload", with_offload_at(0.5, True), None, False,
                    "<= 0.5 s solve", 0.5 + STARTUP_S))
    out.append(Case("policy@0.5p offload", with_offload_at(0.5, True), ALL_LAYOUTS, False,
                    ""))
    return out


# The same commands on this branch's base (commit b4503a9, before issue 27's scale work),
# measured once on the same machine with /usr/bin/time as above (default JSON): (case,
# layouts, CPU s, peak RSS KB, JSON bytes, cost). Not re-run here: the p=128 rows took
# 110 s CPU each.
BEFORE = (("p128-m1024@0.5p", ALL_LAYOUTS, 106.41 + 3.29, 1711824, 102593462, 34445.85),
          ("p128-m1024@1p", ALL_LAYOUTS, 33.49 + 3.59, 1698064, 102578344, 29620.90),
          ("p64-m512@0.5p", ALL_LAYOUTS, 22.75 + 0.61, 461104, 25502582, 17385.71),
          ("policy@0.5p offload", "default", 2.81 + 0.04, 42352, None, 1188.40),
          ("policy@0.5p offload", ALL_LAYOUTS, 2.94 + 0.03, 42556, None, 1188.40))


def before_table() -> list[str]:
    lines = ["| case | layouts | CPU s | peak RSS MB | JSON MB | cost |", "|---" * 6 + "|"]
    for name, layouts, cpu, kb, size, cost in BEFORE:
        json_mb = f"{size / 1e6:.2f}" if size is not None else "-"
        lines.append(f"| {name} | {layouts} | {cpu:.2f} | {kb / 1024:.0f} | {json_mb} | "
                     f"{cost:.2f} |")
    return lines


_TIME = re.compile(r"^([\d.]+)\+([\d.]+) s (\d+) KB$", re.M)


def measure(case: Case, folder: Path, base: Path | None = None) -> dict:
    """One fresh `ppsched solve` of the case: CPU s, peak RSS MB, JSON MB, figures; by the
    `base` checkout's code when given (its ``.mypy-src`` first on ``PYTHONPATH``)."""
    profile, out = folder / "profile.json", folder / "out.json"
    profile.write_text(json.dumps(case.profile))
    command = ["/usr/bin/time", "-f", "%U+%S s %M KB", sys.executable, "-m",
               "ppsched.api.cli", "solve", str(profile), "-o", str(out)]
    if case.layouts:
        command += ["--layouts", case.layouts]
    if case.compact:
        command.append("--compact")
    env = None
    if base is not None:
        env = {**os.environ, "PYTHONPATH": base_checkout.pythonpath(base)}
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env,
                          cwd=base)
    found = _TIME.findall(done.stderr)
    assert found, done.stderr
    user, system, kb = found[-1]
    schedule = json.loads(out.read_text())
    size = out.stat().st_size
    out.unlink()
    return {"cpu_s": float(user) + float(system), "rss_mb": int(kb) / 1024,
            "json_mb": size / 1e6, "method": schedule["method"],
            "cost": schedule["metrics"]["cost"],
            "bound": schedule["metrics"]["lower_bound"],
            # Layouts that cannot beat the answer: `solving.first_best` need not search them.
            "above": [name for name, bound in
                      (schedule["solver"].get("layout_bounds") or {}).items()
                      if bound > schedule["metrics"]["cost"] + 1e-9]}


def _row(case: Case, *cells: str) -> str:
    """A table row: the case's name, layouts and JSON kind, then `cells`."""
    return " | ".join(["", case.name, case.layouts or "default",
                       "compact" if case.compact else "default", *cells, ""]).strip()


def verdicts(results: list[tuple[Case, dict]]) -> str:
    """Each issue 27 limit of the rows against what they measured."""
    said = []
    for case, r in results:
        for value, limit, unit in ((r["cpu_s"], case.cpu_limit, "s"),
                                   (r["rss_mb"], case.rss_limit, "MB")):
            if limit is not None:
                said.append(f"{case.name}{' compact' if case.compact else ''} "
                            f"{value:.2f} {unit} against {limit:g} {unit} "
                            f"({'met' if value <= limit else 'missed'})")
    return "Targets (issue 27): " + "; ".join(said) + "."


def table(results: list[tuple[Case, dict]]) -> list[str]:
    lines = ["| case | layouts | JSON | CPU s | peak RSS MB | JSON MB | method | cost | "
             "lower bound | bound above cost | target |", "|---" * 11 + "|"]
    lines += [_row(case, f"{r['cpu_s']:.2f}", f"{r['rss_mb']:.0f}", f"{r['json_mb']:.2f}",
                   r["method"], f"{r['cost']:.2f}", f"{r['bound']:.2f}",
                   " ".join(r["above"]) or "-", case.target)
              for case, r in results]
    return lines


def base_table(results: list[tuple[Case, dict, dict]], commit: str) -> list[str]:
    """This checkout against the base, case by case (each pair run one after the other)."""
    lines = [f"| case | layouts | JSON | CPU s | base {commit} CPU s | CPU this / base | "
             f"peak RSS MB | base RSS MB | cost | base cost |", "|---" * 10 + "|"]
    lines += [_row(case, f"{this['cpu_s']:.2f}", f"{base['cpu_s']:.2f}",
                   f"{this['cpu_s'] / base['cpu_s']:.2f}", f"{this['rss_mb']:.0f}",
                   f"{base['rss_mb']:.0f}", f"{this['cost']:.2f}", f"{base['cost']:.2f}")
              for case, this, base in results]
    return lines


def _beside(results: list[tuple[Case, dict, dict]], base: Path) -> list[str]:
    commit = base_checkout.short_commit(base)
    return [f"Side by side with commit {commit} (`--base`): each case solved by this "
            "checkout, then at once by the base's code, in fresh subprocesses measured as "
            "above (so both meet the same load):", "", *base_table(results, commit), ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--base", type=Path, help="an earlier checkout to solve every case "
                        "beside this one (see the module)")
    parser.add_argument("--only", help="run the cases whose name contains this only "
                        "(prints the table, writes nothing)")
    args = parser.parse_args()
    if args.base is not None:
        base_checkout.require(parser, args.base)
    started = start()
    chosen = [c for c in cases() if args.only is None or args.only in c.name]
    results = []
    beside: list[tuple[Case, dict, dict]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in chosen:
            results.append((case, measure(case, Path(tmp))))
            print(table(results[-1:])[-1], flush=True)
            if args.base is not None:
                beside.append((case, results[-1][1], measure(case, Path(tmp), args.base)))
                print(f"  base: {beside[-1][2]['cpu_s']:.2f} s", flush=True)
    if args.only is not None:
        return
    text = "\n".join([
        *result_header(command_line("benchmarks.scale"), started=started,
                       budget="deterministic (no time limit; the CPU s and RSS columns are "
                       "measured)"),
        "# Scale: CPU time and peak memory of `ppsched solve` (issue 27)",
        "",
        f"Python {platform.python_version()}; each row a fresh "
        "subprocess, `/usr/bin/time -f \"%U+%S s %M KB\"` (user + system CPU, peak RSS). "
        "Large rows: the 28.3B stage times at p, m and a memory limit in units of p * m_b, "
        f"`--layouts {ALL_LAYOUTS}`; policy rows: gpt1.5b-p8-m24 at 0.5p (limit 4), with "
        "offload at k = 0.5 or keep only (the CLI's CPU includes about 0.4 s of start-up "
        "and imports). Cost and bound are the written schedule's (the simulator's).",
        "",
        *table(results),
        "",
        "Before (this branch's base, commit b4503a9; the same commands, measured once on "
        "this machine, not by this run):",
        "",
        *before_table(),
        "",
        *(_beside(beside, args.base) if args.base is not None else []),
        verdicts(results) if args.only is None else "",
        "",
        "Above `solver.heuristic.scale.FULL_SEARCH_OPS` (100,000 ops in a layout's order: "
        "every row here but the policy ones, none of the public profiles) the V and loop "
        "searches build the first raced greedy build and one lookahead candidate (V-Half, "
        "window 16, reserve), the single-chunk search two warm-up families; the answers "
        "of these rows are those of the full search. A layout whose lower bound shows that "
        "its search cannot change the answer is not searched (`solver.solving.first_best`: "
        "the answer is the one searching every layout gives); `bound above cost` names the "
        "layouts whose bound (`solver.layout_bounds` of the written schedule) is above the "
        "answer's cost, which it skips once a searched layout has found a cost below that "
        "bound. A layout searched once an earlier one's answer is known races against it "
        "(`first_best`'s `below`): at 0.5p loop2's builds stop once they cannot beat V's "
        "answer. With `--compact` (and no view asked for) the solve builds no per-op "
        "objects (`solve(..., ops=False)`): the file holds the orders only. What is left "
        "at 1p is the V search (the rounds build and ZB-V's timing, 786,432 ops each) and "
        "simulating and validating the answer; "
        "the policy search spends its time in the keep-only solves of its "
        "relaxed problems and in the fits that end within the limit. A fit gives up at "
        "the first round where, at that round's times, some rank is over its limit "
        "whatever policies its activations take (`solver.policies.fit.least_held_peaks`), "
        "and the policy search of a layout searched after another races its keep-only "
        "solves and its fits against that one's answer.",
        "",
    ])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.md").write_text(text)
    print(f"wrote {args.out / 'scale.md'}")


if __name__ == "__main__":
    main()
