"""The `ppsched` command line: solve, simulate (our JSON or torch's CSV), render, list
methods, print JSON Schemas.

Every user error ends in one line on stderr and a non-zero exit (2 for bad input, 1 for
an invalid schedule); files are written whole or not at all, with the umask's mode, into
folders that exist (or `--mkdir`), before anything is printed: a reader that closes the
pipe early (`| head`) ends the command quietly with the files already written.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import NoReturn

from ppsched.api.advise_command import add_advise_parser
from ppsched.api.pack_command import add_pack_parser
from ppsched.api.sweep.command import add_sweep_parser
from ppsched.api.torchtitan_command import add_torchtitan_parser
from ppsched.api.weipipe_command import add_weipipe_parser
from ppsched.solver.model import (
    Profile,
    ProfileError,
    Schedule,
    ScheduleInvalid,
    load_profile,
    order_grid,
    parse_profile,
    parse_schedule,
    read_json,
    time_grid,
)
from ppsched.solver.sim import schedule_from_simulation, simulate
from ppsched.solver.solving import (
    BACKENDS,
    HEURISTIC,
    ILP,
    OBJECTIVES,
    ExactOptions,
    Layout,
    aliases,
    methods,
    parse_layouts,
    solve,
)

log = logging.getLogger("ppsched")

EXIT_INVALID = 1  # the schedule breaks the contract
EXIT_USAGE = 2  # the input cannot be used
_KEEP = object()  # --memory-limit not given: keep the profile's

# The modules each optional extra brings (pyproject.toml), and the commands that need one.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "service": ("fastapi", "uvicorn", "pydantic_settings", "prometheus_client"),
    "sweep": ("yaml", "dask", "distributed", "rich", "matplotlib", "pyarrow"),
    "torch": ("torch",),
}
COMMAND_EXTRAS = {"serve": "service", "sweep": "sweep"}

# A solve that runs longer than PROGRESS_AFTER_S prints a line on stderr every
# PROGRESS_EVERY_S until it ends (a periodic line, so a log file shows it too).
PROGRESS_AFTER_S = 1.0
PROGRESS_EVERY_S = 5.0


class MissingExtra(ValueError):
    """A command needs an optional extra that is not installed."""

    def __init__(self, command: str, extra: str, module: str) -> None:
        self.command, self.extra, self.module = command, extra, module
        super().__init__(f"ppsched {command} needs the '{extra}' extra: pip install "
                         f"'ppsched[{extra}]' (module '{module}' is missing)")


def require_extra(command: str) -> None:
    """Raise MissingExtra when a module of the extra `command` needs is not installed."""
    extra = COMMAND_EXTRAS.get(command)
    if extra is None:
        return
    for module in EXTRA_MODULES[extra]:
        if importlib.util.find_spec(module) is None:
            raise MissingExtra(command, extra, module)


def _extra_of(module: str | None) -> str | None:
    top = (module or "").split(".")[0]
    return next((extra for extra, mods in EXTRA_MODULES.items() if top in mods), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `ppsched` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    default_level = logging.INFO if args.command == "serve" else logging.WARNING
    logging.basicConfig(level=logging.DEBUG if args.verbose else default_level,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        require_extra(args.command)
        return int(args.run(args))
    except MissingExtra as exc:
        print(f"ppsched: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as exc:
        # A module of an extra imported deeper down than require_extra looks.
        extra = _extra_of(exc.name)
        if extra is None:
            raise
        print(f"ppsched: error: {MissingExtra(args.command, extra, str(exc.name))}",
              file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader closed stdout (`| head`): what was asked for is done, the files are
        # written; end quietly. Point stdout at /dev/null so the interpreter's final flush
        # cannot raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
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
                   help=f"{HEURISTIC} (default) or a named schedule, ours or torch's (e.g. "
                   "ZBVZeroBubble); see `ppsched methods`")
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

    p = sub.add_parser("simulate", help="re-time and validate a schedule JSON or a torch "
                       "CSV")
    p.add_argument("schedule", help="schedule JSON (DESIGN.md section 4; times optional), "
                   "or torch.distributed.pipelining's compute-only CSV (a .csv file)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the re-timed schedule JSON")
    _add_csv_options(p)
    _add_view_options(p)
    p.set_defaults(run=_cmd_simulate)

    p = sub.add_parser("import-csv", help="read torch's compute-only CSV (its _dump_csv), "
                       "time, validate and draw it")
    p.add_argument("schedule", metavar="csv", help="torch.distributed.pipelining's "
                   "compute-only CSV: one row per rank, e.g. 0F0,0F1,0I0,0W0")
    p.add_argument("-o", "--output", metavar="FILE", help="write the schedule JSON")
    _add_csv_options(p)
    _add_view_options(p)
    p.set_defaults(run=_cmd_simulate, from_csv=True)

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
    add_pack_parser(sub)  # `ppsched pack LENGTHS ...`: api/pack_command.py
    add_torchtitan_parser(sub)  # `ppsched torchtitan PROFILE.json -o DIR`
    return parser


def _add_csv_options(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group(
        "reading a torch CSV", "p is the row count, v and m follow from the largest stage "
        "and microbatch, the placement from the stage-to-rank map; these options override "
        "them. Times and memory come from --profile (unit times without it).")
    group.add_argument("--profile", metavar="FILE", help="profile JSON whose times and "
                       "memory time the CSV (its p, m, v, placement are the CSV's)")
    group.add_argument("--ranks", metavar="P", type=_positive_int, help="p (default: rows)")
    group.add_argument("--microbatches", metavar="M", type=_positive_int,
                       help="m (default: largest microbatch + 1)")
    group.add_argument("--chunks", metavar="V", type=_positive_int,
                       help="v, stages per rank (default: stages / p)")
    group.add_argument("--placement", choices=("loop", "v"),
                       help="stage-to-rank map when v > 1 (default: as the rows show)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"got {text!r}; expected an integer >= 1")
    return value


def _add_view_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--svg", metavar="FILE", help="write an SVG Gantt chart")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace JSON")
    p.add_argument("--csv", metavar="FILE", help="write torch.distributed.pipelining's CSV")
    p.add_argument("--grid", action="store_true", help="print the schedule as a text grid")
    p.add_argument("--mkdir", action="store_true",
                   help="create the output files' folders when missing (default: they "
                   "must exist)")


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
    _check_outputs(args)
    ilp = args.method == ILP  # the exact search prints its own progress
    with _progress(None if ilp else f"solving {profile.label} (p={profile.num_ranks}, "
                   f"m={profile.num_microbatches}, method {args.method})"):
        schedule = solve(profile, args.method, args.objective, exact=options,
                         on_progress=_print_progress if ilp else None,
                         layouts=args.layouts)
    _write_outputs(args, schedule)
    print(summary(schedule))
    _print_grid(args, schedule)
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    _check_outputs(args)
    if getattr(args, "from_csv", False) or args.schedule.lower().endswith(".csv"):
        schedule = _schedule_from_csv(args)
    else:
        for option in ("profile", "ranks", "microbatches", "chunks", "placement"):
            if getattr(args, option) is not None:
                raise ProfileError(f"--{option}", getattr(args, option), "no value for a "
                                   "schedule JSON (it has its profile); the option reads a "
                                   "torch CSV (a .csv file, or `ppsched import-csv`)")
        schedule = parse_schedule(read_json(args.schedule, "schedule"))
    sim = simulate(schedule.problem(), schedule.orders())
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
    _write_outputs(args, retimed)
    print(summary(retimed))
    _print_grid(args, retimed)
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
                           "method": f"csv {path.name}"})


def _cmd_render(args: argparse.Namespace) -> int:
    if not (args.svg or args.trace or args.csv or args.grid):
        raise ProfileError("render", "no output", "at least one of --svg, --trace, --csv, "
                           "--grid")
    _check_outputs(args)
    schedule = parse_schedule(read_json(args.schedule, "schedule"))
    sim = simulate(schedule.problem(), schedule.orders())
    if not sim.ok:
        raise ScheduleInvalid(sim.violations, order_grid(sim.order, sim.violations))
    retimed = schedule_from_simulation(schedule.profile, sim, schedule.method)
    # Keep the solver record of the file (status, bound); the times are re-simulated.
    if schedule.solver is not None:
        retimed.solver = schedule.solver
    _write_outputs(args, retimed)
    _print_grid(args, retimed)
    return 0


def _cmd_methods(args: argparse.Namespace) -> int:
    del args
    listing = methods()
    width = max(map(len, listing))
    for name, text in listing.items():
        print(f"{name:<{width}}  {text}")
    names = ", ".join(f"{alias} = {target}" for alias, target in aliases(listing).items())
    print(f"\ntorch.distributed.pipelining's names are accepted too: {names}")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from ppsched.api.service.serve import serve  # the web stack is an optional extra

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
        # The bound over every schedule, with the gap of the objective it bounds (a cost
        # bound also bounds the makespan, which is never below the cost).
        f"lower bound  {m.lower_bound:.4f}   (gap {_gap(info.objective, m.lower_bound):.2%})",
    ]
    scope = getattr(info, "bound_scope", None)
    if info.bound > m.lower_bound + 1e-9 and scope:
        # A narrower bound (an exact model's order family) is shown apart, scope named.
        lines.append(f"solver bound {info.bound:.4f}   (gap {info.gap:.2%}) over {scope}"
                     + (f"   [{info.backend}]" if info.backend else ""))
    lines.append(f"wall time    {info.wall_s:.3f} s")
    return "\n".join(lines)


def _gap(value: float, bound: float) -> float:
    return (value - bound) / value if value > 0 else 0.0


def _print_progress(point: tuple[float, float, float]) -> None:
    seconds, best, bound = point
    gap = max(0.0, _gap(best, bound))  # a bound within the scaling tolerance reads 0
    print(f"  {seconds:7.2f} s   best {best:.4f}   bound {bound:.4f}   gap {gap:.2%}",
          file=sys.stderr, flush=True)


def _with_limit(profile: Profile, limit: float | None) -> Profile:
    data = profile.model_dump()
    data["memory_limit"] = limit
    return parse_profile(data)


def _outputs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The (option, path) pairs of the files this command writes."""
    named = [("--output", getattr(args, "output", None)), ("--svg", args.svg),
             ("--trace", args.trace), ("--csv", args.csv)]
    return [(option, path) for option, path in named if path]


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, an output whose folder is missing (unless --mkdir)."""
    for option, path in _outputs(args):
        folder = Path(path).parent
        if args.mkdir:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ProfileError(option, path, f"a folder that can be created "
                                   f"({exc.strerror})") from None
        elif not folder.is_dir():
            raise ProfileError(option, path, f"a file in an existing folder ('{folder}' "
                               "does not exist; create it or pass --mkdir)")


def _write_outputs(args: argparse.Namespace, schedule: Schedule) -> None:
    from ppsched.solver.render import dropped_note, render_svg, render_torch_csv, render_trace

    makers: dict[str, Callable[[], str]] = {
        "--output": lambda: schedule.model_dump_json(indent=1),
        "--svg": lambda: render_svg(schedule),
        "--trace": lambda: json.dumps(render_trace(schedule)),
        "--csv": lambda: render_torch_csv(schedule),
    }
    for option, path in _outputs(args):
        write_atomically(path, makers[option](), option)
        log.info("wrote %s", path)
        note = dropped_note(schedule) if option == "--csv" else None
        if note:  # the file alone would not show that a runtime keeps every activation
            print(f"ppsched: note: {path}: {note}", file=sys.stderr)


def _print_grid(args: argparse.Namespace, schedule: Schedule) -> None:
    if args.grid:
        starts = [[op.start for op in rank] for rank in schedule.ranks]
        ends = [[op.end for op in rank] for rank in schedule.ranks]
        print(time_grid(schedule.orders(), starts, ends,
                        copy_lanes=schedule.profile.copy_lanes))


def _umask() -> int:
    # os.umask can only be read by setting it; the CLI is single-threaded at this point.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path: str, text: str, option: str = "output") -> None:
    """Write whole or not at all: a temp file beside the target, then a rename.

    The file gets the mode a plain `open(path, "w")` would give (0666 less the umask),
    not mkstemp's 0600: a job reading the CSV as another user must be able to.
    """
    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            with os.fdopen(fd, "w") as out:
                out.write(text if text.endswith("\n") else text + "\n")
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ProfileError(option, path, f"a writable file path ({exc.strerror})") from None


@contextmanager
def _progress(what: str | None, stream: Callable[[str], None] | None = None,
              after: float | None = None, every: float | None = None) -> Iterator[None]:
    """Print "WHAT: N s" on stderr every `every` seconds once the block has run `after`.

    Nothing is printed for a block that ends sooner (most solves take milliseconds).
    """
    if what is None:
        yield
        return
    after = PROGRESS_AFTER_S if after is None else after
    every = PROGRESS_EVERY_S if every is None else every
    emit = stream or (lambda line: print(line, file=sys.stderr, flush=True))
    done = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        wait = after
        while not done.wait(wait):
            emit(f"ppsched: {what}: {time.monotonic() - start:.0f} s")
            wait = every

    thread = threading.Thread(target=tick, name="ppsched-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


if __name__ == "__main__":
    raise SystemExit(main())
