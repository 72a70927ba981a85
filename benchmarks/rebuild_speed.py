"""Speed of this checkout against an earlier one, side by side in one run (issue 28).

Run: ``python -m benchmarks.rebuild_speed --base DIR --reference REF [--rounds N]``, where
DIR is a checkout of the earlier commit (``git worktree add DIR COMMIT``; before the
rebuild its packages import as ``solver``, after it as ``ppsched.solver``: each side runs
with its own folder first on ``PYTHONPATH``) and REF the Zero Bubble reference heuristic's
folder (see `benchmarks.heuristic_speed`).

Each round runs, in separate processes and taking turns (base, then this checkout),
`benchmarks.heuristic_speed` (whose ``ours/ref`` column divides our time by the
reference's, timed in the same process: a ratio the machine's load moves little) and
`benchmarks.v_search_parts` (the V search and the single-chunk search at p=32, m=256, with
the seconds of each). The table gives each row's median over the rounds for both sides.
Writes ``benchmarks/results/rebuild_speed.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import base_checkout
from benchmarks.result_header import command_line, result_header, start

ROOT = Path(__file__).resolve().parent.parent
# The files it writes and the code they measure (`python -m benchmarks.freshness`).
WRITES = ("rebuild_speed.md",)
MEASURES = (
    "solver/model", "solver/sim", "solver/heuristic", "solver/generators", "solver/policies",
    "solver/solving", "profiles/gpt*.json", "benchmarks/heuristic_speed.py",
    "benchmarks/v_search_parts.py", "benchmarks/base_checkout.py", "benchmarks/rebuild_speed.py",
)


def _run(checkout: Path, module: str, args: list[str], out: Path) -> str:
    """Run `module` of `checkout` with its results written under `out`; the table text."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(checkout), *filter(None, [os.environ.get("PYTHONPATH")])])}
    subprocess.run([sys.executable, "-m", module, *args, "--out", str(out)], cwd=checkout,
                   env=env, check=True, stdout=subprocess.DEVNULL)
    name = module.rpartition(".")[2]
    return (out / f"{name}.md").read_text()


def _rows(table: str, key_columns: int, value_column: str) -> dict[str, float]:
    """`value_column` of each row of a markdown table, keyed by its first columns."""
    lines = [line for line in table.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    at = header.index(value_column)
    found = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        found[" ".join(cells[:key_columns])] = float(cells[at])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the earlier checkout")
    parser.add_argument("--reference", type=Path, required=True,
                        help="the reference heuristic's folder (benchmarks.heuristic_speed)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    base_commit = base_checkout.short_commit(args.base)
    this_commit = base_checkout.short_commit(ROOT)
    sides = {"base": args.base.resolve(), "this": ROOT}
    ratios: dict[str, dict[str, list[float]]] = {side: {} for side in sides}
    seconds: dict[str, dict[str, list[float]]] = {side: {} for side in sides}
    started = start()
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for side, checkout in sides.items():
                out = Path(scratch) / f"{side}-{round_}"
                speed = _run(checkout, "benchmarks.heuristic_speed",
                             ["--reference", str(args.reference), "--repeat", "3"], out)
                for row, value in _rows(speed, 1, "ours/ref time").items():
                    ratios[side].setdefault(row, []).append(value)
                parts = _run(checkout, "benchmarks.v_search_parts", ["--repeat", "5"], out)
                for column in ("single s", "V search s"):
                    for row, value in _rows(parts, 1, column).items():
                        seconds[side].setdefault(f"{row} {column}", []).append(value)
    lines = [f"| row | base {base_commit} | this {this_commit} | this / base |",
             "| --- | ---: | ---: | ---: |"]
    quotients = []
    for table, unit in ((ratios, "ours/ref"), (seconds, "")):
        for row in table["base"]:
            before = statistics.median(table["base"][row])
            after = statistics.median(table["this"][row])
            quotients.append(after / before)
            label = f"{row} ({unit})" if unit else f"p=32 m=256 {row}"
            lines.append(f"| {label} | {before:.3f} | {after:.3f} | {after / before:.2f} |")
    notes = [
        "",
        f"Medians over {args.rounds} rounds; in each round the base checkout ({base_commit}) "
        f"and this one ({this_commit}) ran `benchmarks.heuristic_speed --reference DIR "
        "--repeat 3` and `benchmarks.v_search_parts --repeat 5` in turn, each in its own "
        "process, by `python -m benchmarks.rebuild_speed`. `ours/ref` rows: our whole "
        "default solve's time over the reference heuristic's, both timed in one process. "
        "Seconds rows: wall time.",
        f"this / base: geometric mean {statistics.geometric_mean(quotients):.2f}, max "
        f"{max(quotients):.2f}, min {min(quotients):.2f}.",
    ]
    header = result_header(command_line("benchmarks.rebuild_speed", argv), started=started,
                           budget="wall (every figure is a wall-time ratio)")
    text = "\n".join(header + lines + notes) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rebuild_speed.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
