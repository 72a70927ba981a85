"""The `ppsched` command line: solve, simulate, render, list methods, print JSON Schemas.

Every user error ends in one line on stderr and a non-zero exit (2 for bad input, 1 for
an invalid schedule); files are written whole or not at all.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from api.advise_command import add_advise_parser
from api.sweep.command import add_sweep_parser
from api.weipipe_command import add_weipipe_parser
from solver.errors import ProfileError, ScheduleInvalid
from solver.profile import Profile, load_profile, parse_profile, read_json
from solver.render.grid import order_grid, time_grid
from solver.schedule import Schedule, parse_schedule, schedule_from_simulation
from solver.simulator import simulate
from solver.solve import (
    BACKENDS,
    HEURISTIC,
    ILP,
    OBJECTIVES,
    ExactOptions,
    Layout,
    methods,
    parse_layouts,
    solve,
)

log = logging.getLogger("ppsched")

EXIT_INVALID = 1  # the schedule breaks the contract
EXIT_USAGE = 2  # the input cannot be used
_KEEP = object()  # --memory-limit not given: keep the profile's


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `ppsched` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    default_level = logging.INFO if args.command == "serve" else logging.WARNING
    logging.basicConfig(level=logging.DEBUG if args.verbose else default_level,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.run(args))
    except ProfileError as exc:
        print(f"ppsched: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ScheduleInvalid as exc:
        print(f"ppsched: error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except KeyboardInterrupt:
        print("ppsched: interrupted", file=sys.stderr)
        return 130


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: the message, not the whole usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ppsched", description="Pipeline-parallel schedules: Zero Bubble and classics, "
        "simulated and validated under the DESIGN.md cost model.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)

    p = sub.add_parser("solve", help="solve a profile and print its summary")
    p.add_argument("profile", help="profile JSON (DESIGN.md section 2)")
    p.add_argument("-m", "--method", default=HEURISTIC,
                   help=f"{HEURISTIC} (default) or a named schedule; see `ppsched methods`")
    p.add_argument("--objective", default="cost", choices=OBJECTIVES,
                   help="largest per-rank span (default) or makespan")
    p.add_argument("--memory-limit", metavar="X", type=_memory_limit, default=_KEEP,
                   help="override the profile's memory_limit: a number, or 'none'")
    p.add_argument("--layouts", metavar="LIST", type=_layouts, default=(),
                   help="ways the model may be cut, for a one-chunk profile: comma-separated "
                   "1 (one stage per rank), v (V placement, 2 chunks), loopN (N chunks, "
                   "loop placement); the best wins, e.g. --layouts 1,v,loop2")
    p.add_argument("-o", "--output", metavar="FILE", help="write the schedule JSON")
    exact = p.add_argument_group("exact refinement (--method ilp)")
    exact.add_argument("--time-limit", metavar="S", type=float, default=10.0,
                       help="seconds the exact search may take (default 10)")
    exact.add_argument("--workers", metavar="N", type=int, default=2,
                       help="CP-SAT search workers (default 2)")
    exact.add_argument("--backend", choices=BACKENDS, default="cpsat",
                       help="cpsat (default) or milp (the paper's ILP via PuLP; small cases)")
    exact.add_argument("--milp-solver", metavar="NAME",
                       help="a PuLP solver for --backend milp (default: bundled CBC)")
    exact.add_argument("--free-order", action="store_true",
                       help="let B and W run out of microbatch order (default: FIFO, "
                       "the paper's model)")
    _add_view_options(p)
    p.set_defaults(run=_cmd_solve)

    p = sub.add_parser("simulate", help="re-time and validate an existing schedule JSON")
    p.add_argument("schedule", help="schedule JSON (DESIGN.md section 4); times optional")
    p.add_argument("-o", "--output", metavar="FILE", help="write the re-timed schedule JSON")
    _add_view_options(p)
    p.set_defaults(run=_cmd_simulate)

    p = sub.add_parser("render", help="draw a schedule JSON as SVG, trace, CSV or text")
    p.add_argument("schedule", help="schedule JSON (DESIGN.md section 4)")
    _add_view_options(p)
    p.set_defaults(run=_cmd_render)

    p = sub.add_parser("methods", help="list the available methods")
    p.set_defaults(run=_cmd_methods)

    p = sub.add_parser("serve", help="run the HTTP service (needs the 'service' extra)")
    p.add_argument("--host", help="address to listen on (default PPSCHED_HOST or 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default PPSCHED_PORT or 8000)")
    p.add_argument("--workers", type=int,
                   help="solver worker processes (default PPSCHED_WORKERS or 2)")
    p.set_defaults(run=_cmd_serve)

    p = sub.add_parser("schema", help="print the JSON Schema of a profile or a schedule")
    p.add_argument("which", choices=("profile", "schedule"))
    p.set_defaults(run=_cmd_schema)

    add_sweep_parser(sub)  # `ppsched sweep GRID.yaml`: api/sweep/
    add_advise_parser(sub)  # `ppsched advise MODEL.yaml`: api/advise_command.py
    add_weipipe_parser(sub)  # `ppsched weipipe PROFILE.json`: api/weipipe_command.py
    return parser


def _add_view_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--svg", metavar="FILE", help="write an SVG Gantt chart")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace JSON")
    p.add_argument("--csv", metavar="FILE", help="write torch.distributed.pipelining's CSV")
    p.add_argument("--grid", action="store_true", help="print the schedule as a text grid")


def _layouts(text: str) -> tuple[Layout, ...]:
    try:
        return parse_layouts(text)
    except ProfileError as exc:
        raise argparse.ArgumentTypeError(f"got {exc.value!r}; expected {exc.accepted}") from None


def _memory_limit(text: str) -> float | None:
    if text.lower() in ("none", "null"):
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}; expected a number or 'none'") \
            from None


# Commands.

def _cmd_solve(args: argparse.Namespace) -> int:
    profile = load_profile(args.profile)
    if args.memory_limit is not _KEEP:
        profile = _with_limit(profile, args.memory_limit)
    options = ExactOptions(backend=args.backend, time_limit_s=args.time_limit,
                           workers=args.workers, fifo=not args.free_order,
                           milp_solver=args.milp_solver)
    schedule = solve(profile, args.method, args.objective, exact=options,
                     on_progress=_print_progress if args.method == ILP else None,
                     layouts=args.layouts)
    print(summary(schedule))
    _write_outputs(args, schedule)
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    schedule = parse_schedule(read_json(args.schedule, "schedule"))
    sim = simulate(schedule.profile.problem, schedule.orders())
    if not sim.ok:
        count = len(sim.violations)
        print(f"{args.schedule}: INVALID, {count} violation{'s' * (count != 1)}")
        for violation in sim.violations:
            print(f"  - [{violation.kind}] {violation.message}")
        print(order_grid(sim.order, sim.violations))
        return EXIT_INVALID
    retimed = schedule_from_simulation(schedule.profile, sim, schedule.method,
                                       status=schedule.solver.status if schedule.solver
                                       else "heuristic")
    print(summary(retimed))
    _write_outputs(args, retimed)
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    schedule = parse_schedule(read_json(args.schedule, "schedule"))
    if not (args.svg or args.trace or args.csv or args.grid):
        raise ProfileError("render", "no output", "at least one of --svg, --trace, --csv, "
                           "--grid")
    sim = simulate(schedule.profile.problem, schedule.orders())
    if not sim.ok:
        raise ScheduleInvalid(sim.violations, order_grid(sim.order, sim.violations))
    retimed = schedule_from_simulation(schedule.profile, sim, schedule.method)
    # Keep the solver record of the file (status, bound); the times are re-simulated.
    if schedule.solver is not None:
        retimed.solver = schedule.solver
    _write_outputs(args, retimed)
    return 0


def _cmd_methods(args: argparse.Namespace) -> int:
    del args
    listing = methods()
    width = max(map(len, listing))
    for name, text in listing.items():
        print(f"{name:<{width}}  {text}")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from api.service.serve import serve  # the web stack is an optional extra

    serve(args.host, args.port, args.workers)
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    model = Profile if args.which == "profile" else Schedule
    print(json.dumps(model.model_json_schema(), indent=2))
    return 0


# Helpers.

def summary(schedule: Schedule) -> str:
    """The few lines `solve` and `simulate` print: method, figures, memory, bound, time."""
    m, info = schedule.metrics, schedule.solver
    assert m is not None and info is not None
    profile = schedule.profile
    peaks = " ".join(f"{x:g}" for x in m.peak_memory)
    limit = profile.memory_limit
    limit_text = "none" if limit is None else (f"{limit:g}" if not isinstance(limit, list)
                                               else " ".join(f"{x:g}" for x in limit))
    lines = [
        f"profile      {profile.label} (p={profile.num_ranks}, m={profile.num_microbatches}, "
        f"v={profile.num_chunks}" + (f", placement {profile.placement})"
                                     if profile.num_chunks > 1 else ")"),
        f"method       {schedule.method} ({info.status})",
        f"cost         {m.cost:.4f}   (makespan {m.makespan:.4f})",
        f"bubble rate  {m.bubble_rate:.4f}",
        f"peak memory  {peaks}   (limit {limit_text})",
        f"lower bound  {m.lower_bound:.4f}   (gap {info.gap:.2%})"
        + (f"   [{info.backend}, {'FIFO' if info.fifo else 'free B/W'} orders]"
           if info.backend else ""),
        f"wall time    {info.wall_s:.3f} s",
    ]
    return "\n".join(lines)


def _print_progress(point: tuple[float, float, float]) -> None:
    seconds, best, bound = point
    gap = (best - bound) / best if best > 0 else 0.0
    print(f"  {seconds:7.2f} s   best {best:.4f}   bound {bound:.4f}   gap {gap:.2%}",
          file=sys.stderr, flush=True)


def _with_limit(profile: Profile, limit: float | None) -> Profile:
    data = profile.model_dump()
    data["memory_limit"] = limit
    return parse_profile(data)


def _write_outputs(args: argparse.Namespace, schedule: Schedule) -> None:
    from solver.render.svg import render_svg
    from solver.render.torch_csv import render_torch_csv
    from solver.render.trace import render_trace

    writers: list[tuple[str | None, Callable[[], str]]] = [
        (getattr(args, "output", None), lambda: schedule.model_dump_json(indent=1)),
        (args.svg, lambda: render_svg(schedule)),
        (args.trace, lambda: json.dumps(render_trace(schedule))),
        (args.csv, lambda: render_torch_csv(schedule)),
    ]
    for path, make in writers:
        if path:
            _write_atomically(path, make())
            log.info("wrote %s", path)
    if args.grid:
        starts = [[op.start for op in rank] for rank in schedule.ranks]
        ends = [[op.end for op in rank] for rank in schedule.ranks]
        print(time_grid(schedule.orders(), starts, ends))


def _write_atomically(path: str, text: str) -> None:
    """Write whole or not at all: a temp file beside the target, then a rename."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        with os.fdopen(fd, "w") as out:
            out.write(text if text.endswith("\n") else text + "\n")
        os.replace(tmp, target)
    except OSError as exc:
        raise ProfileError("output", path, f"a writable file path ({exc.strerror})") from None


if __name__ == "__main__":
    raise SystemExit(main())
