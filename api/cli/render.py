"""`ppsched render SCHEDULE.json`: re-time a schedule JSON and draw it as SVG, trace, CSV
or text; an invalid schedule is refused with its violations."""

from __future__ import annotations

import argparse
from typing import Any

from ppsched.api.cli.options import add_view_options
from ppsched.api.cli.output import check_outputs, print_grid, write_outputs
from ppsched.solver.model import (
    ProfileError,
    ScheduleInvalid,
    order_grid,
    parse_schedule,
    read_json,
)
from ppsched.solver.sim import schedule_from_simulation, simulate


def add_render_parser(sub: Any) -> None:
    """Register the `render` sub-command on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("render", help="draw a schedule JSON as SVG, trace, CSV or text")
    p.add_argument("schedule", help="schedule JSON (DESIGN.md section 4)")
    add_view_options(p)
    p.set_defaults(run=run_render)


def run_render(args: argparse.Namespace) -> int:
    if not (args.svg or args.trace or args.csv or args.grid):
        raise ProfileError("render", "no output", "at least one of --svg, --trace, --csv, "
                           "--grid")
    check_outputs(args)
    schedule = parse_schedule(read_json(args.schedule, "schedule"))
    sim = simulate(schedule.problem(), schedule.orders())
    if not sim.ok:
        raise ScheduleInvalid(sim.violations, order_grid(sim.order, sim.violations))
    retimed = schedule_from_simulation(schedule.profile, sim, schedule.method)
    # Keep the solver record of the file (status, bound); the times are re-simulated.
    if schedule.solver is not None:
        retimed.solver = schedule.solver
    write_outputs(args, retimed)
    print_grid(args, retimed)
    return 0
