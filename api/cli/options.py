"""Option types and option groups the `ppsched` subcommands share: argparse `type=`
converters that end in one-line errors, the view options, and `--memory-limit`'s value."""

from __future__ import annotations

import argparse

from ppsched.solver.model import Profile, ProfileError, parse_profile
from ppsched.solver.solving import Layout, parse_layouts

KEEP = object()  # --memory-limit not given: keep the profile's


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"got {text!r}; expected an integer >= 1")
    return value


def layouts(text: str) -> tuple[Layout, ...]:
    """An argparse type: `--layouts`' comma-separated list (1, v, loopN)."""
    try:
        return parse_layouts(text)
    except ProfileError as exc:
        raise argparse.ArgumentTypeError(f"got {exc.value!r}; expected {exc.accepted}") from None


def memory_limit(text: str) -> float | None:
    """An argparse type: `--memory-limit`'s number, or 'none' (no limit)."""
    if text.lower() in ("none", "null"):
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}; expected a number or 'none'") \
            from None


def with_memory_limit(profile: Profile, limit: object) -> Profile:
    """`profile` under `--memory-limit`'s value: unchanged when the option was not given
    (`KEEP`), else a copy with that limit (None: no limit)."""
    if limit is KEEP:
        return profile
    data = profile.model_dump()
    data["memory_limit"] = limit
    return parse_profile(data)


def add_view_options(p: argparse.ArgumentParser) -> None:
    """--svg, --trace, --csv, --grid and --mkdir: the views `solve`, `simulate` and
    `render` write or print (output.write_outputs, output.print_grid)."""
    p.add_argument("--svg", metavar="FILE", help="write an SVG Gantt chart")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace JSON")
    p.add_argument("--csv", metavar="FILE", help="write torch.distributed.pipelining's CSV")
    p.add_argument("--grid", action="store_true", help="print the schedule as a text grid")
    p.add_argument("--mkdir", action="store_true",
                   help="create the output files' folders when missing (default: they "
                   "must exist)")
