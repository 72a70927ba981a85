"""`ppsched simulate SCHEDULE` and `ppsched import-csv CSV`: re-time and validate a
schedule JSON or torch.distributed.pipelining's compute-only CSV, print its summary (or
its violations and grid), with its views on request."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ppsched.api.cli.options import (
    KEEP,
    add_view_options,
    memory_limit,
    positive_int,
    with_memory_limit,
)
from ppsched.api.cli.output import (
    EXIT_INVALID,
    check_outputs,
    print_grid,
    summary,
    write_outputs,
)
from ppsched.solver.model import ProfileError, Schedule, order_grid, parse_schedule, read_json
from ppsched.solver.sim import schedule_from_simulation, simulate


def add_simulate_parsers(sub: Any) -> None:
    """Register `simulate` and `import-csv` on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("simulate", help="re-time and validate a schedule JSON or a torch "
                       "CSV")
    p.add_argument("schedule", help="schedule JSON (DESIGN.md section 4; times optional), "
                   "or torch.distributed.pipelining's compute-only CSV (a .csv file)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the re-timed schedule JSON")
    _add_memory_limit(p)
    _add_csv_options(p)
    add_view_options(p)
    p.set_defaults(run=run_simulate)

    p = sub.add_parser("import-csv", help="read torch's compute-only CSV (its _dump_csv), "
                       "time, validate and draw it")
    p.add_argument("schedule", metavar="csv", help="torch.distributed.pipelining's "
                   "compute-only CSV: one row per rank, e.g. 0F0,0F1,0I0,0W0")
    p.add_argument("-o", "--output", metavar="FILE", help="write the schedule JSON")
    _add_memory_limit(p)
    _add_csv_options(p)
    add_view_options(p)
    p.set_defaults(run=run_simulate, from_csv=True)


def _add_memory_limit(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory-limit", metavar="X", type=memory_limit, default=KEEP,
                   help="check the schedule's peak memory against X instead of its "
                   "profile's memory_limit (a number, or 'none' for no memory check); "
                   "over X on any rank is a [memory] violation (exit 1), and -o writes "
                   "the profile with X")


def _add_csv_options(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group(
        "reading a torch CSV", "p is the row count, v and m follow from the largest stage "
        "and microbatch, the placement from the stage-to-rank map; these options override "
        "them. Times and memory come from --profile (unit times without it).")
    group.add_argument("--profile", metavar="FILE", help="profile JSON whose times and "
                       "memory time the CSV (its p, m, v, placement are the CSV's)")
    group.add_argument("--ranks", metavar="P", type=positive_int, help="p (default: rows)")
    group.add_argument("--microbatches", metavar="M", type=positive_int,
                       help="m (default: largest microbatch + 1)")
    group.add_argument("--chunks", metavar="V", type=positive_int,
                       help="v, stages per rank (default: stages / p)")
    group.add_argument("--placement", choices=("loop", "v"),
                       help="stage-to-rank map when v > 1 (default: as the rows show)")


def run_simulate(args: argparse.Namespace) -> int:
    check_outputs(args)
    if getattr(args, "from_csv", False) or args.schedule.lower().endswith(".csv"):
        schedule = _schedule_from_csv(args)
    else:
        for option in ("profile", "ranks", "microbatches", "chunks", "placement"):
            if getattr(args, option) is not None:
                raise ProfileError(f"--{option}", getattr(args, option), "no value for a "
                                   "schedule JSON (it has its profile); the option reads a "
                                   "torch CSV (a .csv file, or `ppsched import-csv`)")
        schedule = parse_schedule(read_json(args.schedule, "schedule"))
    if args.memory_limit is not KEEP:
        schedule = schedule.model_copy(update={
            "profile": with_memory_limit(schedule.profile, args.memory_limit)})
    sim = simulate(schedule.problem(), schedule.orders())
    if not sim.ok:
        args.verdict = EXIT_INVALID  # the exit status even if stdout's reader is gone
        count = len(sim.violations)
        print(f"{args.schedule}: INVALID, {count} violation{'s' * (count != 1)}")
        for violation in sim.violations:
            print(f"  - [{violation.kind}] {violation.message}")
        print(order_grid(sim.order, sim.violations))
        return EXIT_INVALID
    retimed = schedule_from_simulation(schedule.profile, sim, schedule.method,
                                       status=schedule.solver.status if schedule.solver
                                       else "heuristic")
    write_outputs(args, retimed)
    # A schedule ppsched did not solve (imported, or written by hand) has no status of
    # its own: the summary names where it came from, not a "(heuristic)" it never ran.
    print(summary(retimed, solved=schedule.solver is not None))
    print_grid(args, retimed)
    return 0


def _schedule_from_csv(args: argparse.Namespace) -> Schedule:
    """A torch CSV as an untimed Schedule (the simulator times it next)."""
    from ppsched.solver.render import read_torch_csv

    path = Path(args.schedule)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ProfileError("csv", str(path), f"a readable CSV file ({exc.strerror})") \
            from None
    base = read_json(args.profile, "profile") if args.profile else None
    if base is not None and not isinstance(base, dict):
        raise ProfileError("profile", args.profile, "a JSON object (DESIGN.md section 2)")
    overrides = {"num_ranks": args.ranks, "num_microbatches": args.microbatches,
                 "num_chunks": args.chunks, "placement": args.placement}
    profile, orders = read_torch_csv(text, base, path.stem, overrides)
    ranks = [[{"kind": op.kind, "stage": op.stage, "microbatch": op.microbatch}
              for op in rank] for rank in orders]
    return parse_schedule({"profile": profile.model_dump(mode="json"), "ranks": ranks,
                           "method": f"imported from {path.name}"})
