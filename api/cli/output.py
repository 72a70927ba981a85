"""What the `ppsched` subcommands print and write, and the exit codes they end with.

Files are written whole or not at all (`write_atomically`), with the umask's mode, into
folders that exist (or `--mkdir`: `check_outputs`), before anything is printed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ppsched.solver.model import Profile, ProfileError, Schedule, shape_warnings, time_grid

log = logging.getLogger("ppsched")

EXIT_INVALID = 1  # the schedule breaks the contract
EXIT_USAGE = 2  # the input cannot be used
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as a shell reports it)

# A solve that runs longer than PROGRESS_AFTER_S prints a line on stderr every
# PROGRESS_EVERY_S until it ends (a periodic line, so a log file shows it too).
PROGRESS_AFTER_S = 1.0
PROGRESS_EVERY_S = 5.0


def summary(schedule: Schedule, solved: bool = True) -> str:
    """The few lines `solve` and `simulate` print: method, figures, memory, bound, time.

    `solved` False (a schedule ppsched only timed: imported or hand-written) leaves out
    the solver's status, which such a schedule does not have.
    """
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
        f"method       {schedule.method}" + (f" ({info.status})" if solved else ""),
        f"cost         {m.cost:.4f}   (makespan {m.makespan:.4f})",
        f"bubble rate  {m.bubble_rate:.4f}",
        f"peak memory  {peaks}   (limit {limit_text})",
        *([f"host memory  {' '.join(f'{x:g}' for x in m.host_memory)}   (held by offloads, "
           f"per rank)"] if m.host_memory else []),
        # The bound over every schedule, with the gap of the objective it bounds (a cost
        # bound also bounds the makespan, which is never below the cost).
        f"lower bound  {m.lower_bound:.4f}   (gap {_gap(info.objective, m.lower_bound):.2%})"
        + (f" over every schedule of {_layouts_text(info.layouts)}" if info.layouts else ""),
    ]
    if info.layout_bounds and len(info.layout_bounds) > 1:
        # Each layout's own bound beside the one over all (DESIGN.md 6.6).
        lines.append(f"layout       {info.layout}   (bounds by layout: " + ", ".join(
            f"{name} {b:.4f}" for name, b in info.layout_bounds.items()) + ")")
    scope = info.bound_scope
    if info.bound > m.lower_bound + 1e-9 and scope:
        # A narrower bound (an exact model's order family) is shown apart, scope named.
        lines.append(f"solver bound {info.bound:.4f}   (gap {info.gap:.2%}) over {scope}"
                     + (f"   [{info.backend}]" if info.backend else ""))
    # What the exact search's budget bought, in CP-SAT's deterministic time: the same
    # figure on any load, where the wall time is not.
    work = f"   (work {info.work:.2f})" if info.work is not None else ""
    lines.append(f"wall time    {info.wall_s:.3f} s{work}")
    return "\n".join(lines)


def warn_about_shape(profile: Profile) -> None:
    """A line on stderr per shape warning (m < p...): the solve goes on."""
    for warning in shape_warnings(profile):
        print(f"ppsched: warning: {warning}", file=sys.stderr, flush=True)


def _layouts_text(layouts: list[str]) -> str:
    return ("layout " if len(layouts) == 1 else "layouts ") + ", ".join(layouts)


def _gap(value: float, bound: float) -> float:
    return (value - bound) / value if value > 0 else 0.0


def print_progress(point: tuple[float, float, float]) -> None:
    """One line on stderr for the exact search's (seconds, best, bound) progress point."""
    seconds, best, bound = point
    gap = max(0.0, _gap(best, bound))  # a bound within the scaling tolerance reads 0
    print(f"  {seconds:7.2f} s   best {best:.4f}   bound {bound:.4f}   gap {gap:.2%}",
          file=sys.stderr, flush=True)


def _outputs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The (option, path) pairs of the files this command writes."""
    named = [("--output", getattr(args, "output", None)), ("--svg", args.svg),
             ("--trace", args.trace), ("--csv", args.csv)]
    return [(option, path) for option, path in named if path]


def needs_ops(args: argparse.Namespace) -> bool:
    """Whether what the command writes and prints reads the schedule's per-op objects:
    the default JSON, the views and the grid do; the compact JSON and the summary do not
    (`solve(..., ops=False)`)."""
    full_json = bool(getattr(args, "output", None)) and not getattr(args, "compact", False)
    return full_json or any((args.svg, args.trace, args.csv, args.grid))


def check_outputs(args: argparse.Namespace) -> None:
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


def write_outputs(args: argparse.Namespace, schedule: Schedule) -> None:
    """Write the schedule JSON (--output) and the views (--svg, --trace, --csv) asked for."""
    from ppsched.solver.render import dropped_note, render_svg, render_torch_csv, render_trace

    makers: dict[str, Callable[[], str]] = {
        "--output": lambda: schedule_json(schedule, getattr(args, "compact", False)),
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


def schedule_json(schedule: Schedule, compact: bool = False) -> str:
    """The schedule JSON `--output` writes: DESIGN.md section 4's, or with `compact`
    (`solve --compact`) each rank's ops as one string of actions (`Schedule.compact_dump`)."""
    if compact:
        return json.dumps(schedule.compact_dump(), indent=1)
    return schedule.model_dump_json(indent=1)


def print_grid(args: argparse.Namespace, schedule: Schedule) -> None:
    """Print the timed text grid when --grid is given."""
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
def progress(what: str | None, stream: Callable[[str], None] | None = None,
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
