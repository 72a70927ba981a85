"""`ppsched sweep GRID.yaml`: the command-line front of the sweep engine (api/sweep/).

The heavy imports (Dask, rich, matplotlib, pyarrow) happen only when a sweep runs.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from ppsched.api.cli.output import EXIT_INTERRUPTED, EXIT_USAGE
from ppsched.solver.model import ProfileError

EXIT_LOST = 1  # rows lost to failed workers (a rerun runs them)


def add_sweep_parser(sub: Any) -> None:
    """Add the `sweep` subcommand to the CLI's subparsers."""
    p = sub.add_parser("sweep", help="solve a grid of configurations and methods "
                       "(docs/getting-started.md: Sweeps)")
    p.add_argument("grid", help="grid YAML file: profiles, methods, axes, filters")
    p.add_argument("-o", "--output", metavar="FILE", help="JSONL record, one row per line "
                   "(default: out/GRID.jsonl); rerunning with the same file resumes")
    p.add_argument("-j", "--jobs", metavar="N", type=int,
                   help="local worker processes (default: the CPU count)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on an existing Dask cluster, e.g. tcp://HOST:8786")
    p.add_argument("--time-limit", metavar="S", type=float,
                   help="seconds per row for method ilp (default: the grid's "
                   "time_limit_s, else 10; none with a work limit)")
    p.add_argument("--work-limit", metavar="W", type=float,
                   help="a reproducible budget per row for method ilp instead: CP-SAT "
                   "deterministic time (see `ppsched solve --help`; default: the grid's "
                   "work_limit)")
    p.add_argument("--keep-schedules", metavar="DIR",
                   help="write each schedule JSON to DIR/KEY.json; rows give the path")
    p.add_argument("--csv", metavar="FILE", help="export the grid's rows as CSV")
    p.add_argument("--parquet", metavar="FILE", help="export the grid's rows as Parquet")
    p.add_argument("--plots", metavar="DIR", help="write the figures (PNG and SVG) to DIR")
    p.add_argument("--summary-rows", metavar="N", type=int, default=40,
                   help="configurations shown in the summary table (default 40)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--dry-run", action="store_true",
                   help="check and expand the grid, print the row count, solve nothing")
    p.set_defaults(run=run_sweep_command)


def run_sweep_command(args: argparse.Namespace) -> int:
    """Check the grid, run what is not yet done, then summarise and export every row."""
    from ppsched.api.sweep.expand import expand_grid
    from ppsched.api.sweep.grid import GridError, load_grid

    if args.time_limit is not None and not args.time_limit > 0:
        raise ProfileError("time-limit", args.time_limit, "a number of seconds > 0")
    if args.work_limit is not None and not 0 < args.work_limit < math.inf:
        raise ProfileError("work-limit", args.work_limit, "a finite number > 0 (CP-SAT "
                           "deterministic seconds)")
    try:
        grid = load_grid(args.grid)
        tasks = expand_grid(grid, time_limit_s=args.time_limit, work_limit=args.work_limit)
    except GridError as exc:
        print(f"ppsched: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    output = Path(args.output or Path("out") / f"{Path(args.grid).stem}.jsonl")
    if args.dry_run:
        configs = len({t.config["profile"] + repr(sorted(t.profile.items())) for t in tasks})
        print(f"{args.grid}: {len(tasks)} rows ({configs} configurations x "
              f"{len(grid.methods)} methods at most); output {output}")
        return 0

    from ppsched.api.sweep.runner import run_sweep

    outcome = run_sweep(tasks, output, jobs=args.jobs, scheduler=args.scheduler,
                        keep_dir=args.keep_schedules, progress=not args.no_progress)
    saved = outcome.skipped + outcome.done
    if outcome.interrupted:
        # Count from the file: Ctrl-C may land between a row's write and its tally.
        from ppsched.api.sweep.records import read_rows

        keys = {task.key for task in tasks}
        saved = len({row["key"] for row in read_rows(output) if row.get("key") in keys})
        print(f"ppsched: interrupted: {saved} of {outcome.total} rows saved in {output}; "
              "rerun the same command to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    rows = _report(args, tasks, output)
    refused = sum(row["status"] == "error" for row in rows)
    print(f"{saved} of {outcome.total} rows in {output} ({outcome.done} solved now, "
          f"{outcome.skipped} from before; {refused} refused by their method)")
    if outcome.lost:
        print(f"ppsched: error: {outcome.lost} rows were lost to failed workers; rerun the "
              "same command to run them", file=sys.stderr)
        return EXIT_LOST
    return 0


def _report(args: argparse.Namespace, tasks: list[Any], output: Path) -> list[dict[str, Any]]:
    """Print the summary and write the exports of this grid's rows; returns the rows."""
    from ppsched.api.sweep.exports import unique_rows, write_csv, write_parquet
    from ppsched.api.sweep.plots import write_plots
    from ppsched.api.sweep.records import read_rows
    from ppsched.api.sweep.summary import render_summary
    from rich.console import Console

    # The record may hold rows of other grids: report this grid's, in grid order.
    by_key = {row["key"]: row for row in unique_rows(read_rows(output))}
    rows = [by_key[t.key] for t in tasks if t.key in by_key]
    if not rows:
        return rows
    console = Console()
    Console(width=console.width if console.is_terminal else 120).print(
        render_summary(rows, max_rows=args.summary_rows))
    if args.csv:
        write_csv(rows, args.csv)
    if args.parquet:
        write_parquet(rows, args.parquet)
    if args.plots:
        for path in write_plots(rows, args.plots):
            print(f"wrote {path}")
    return rows
