"""Option types and option groups the `ppsched` subcommands share: argparse `type=`
converters that end in one-line errors, the view options, and `--memory-limit`'s value."""

from __future__ import annotations

import argparse

from ppsched.api.offload_options import with_offload_options as apply_offload_options
from ppsched.solver.model import (
    Profile,
    ProfileError,
    parse_profile,
)
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


def add_offload_options(p: argparse.ArgumentParser) -> None:
    """--offload-ratio, --host-bandwidth (with --memory-unit-bytes) and --gpus-per-node:
    offload as a user meets it, without writing t_offload/t_reload by hand."""
    group = p.add_argument_group("offload (DESIGN.md 6.3)")
    size = group.add_mutually_exclusive_group()
    size.add_argument("--offload-ratio", metavar="K", type=float,
                      help="allow offload, each copy taking K * (t_f + t_b) of its stage "
                      "(the Zero Bubble repository's offload time ratio; PipeOffload "
                      "studies 0.25 to 1.25)")
    size.add_argument("--host-bandwidth", metavar="GB_PER_S", type=float,
                      help="allow offload, each copy sized from its activation (m_b - "
                      "m_keep) over this host link bandwidth (times in ms)")
    group.add_argument("--memory-unit-bytes", metavar="B", type=float, default=2.0**30,
                       help="bytes in one of the profile's memory units, for "
                       "--host-bandwidth (default 2^30: GiB)")
    group.add_argument("--gpus-per-node", metavar="N", type=positive_int,
                       help="the ranks of each node (N consecutive ones) share one host "
                       "link for their copies")


def with_offload_options(profile: Profile, args: argparse.Namespace) -> Profile:
    """`profile` with the offload options applied (unchanged when none was given).

    Raises:
        ProfileError: a ratio, bandwidth or node size the profile cannot take, naming it.
    """
    return apply_offload_options(
        profile, offload_ratio=args.offload_ratio, host_bandwidth=args.host_bandwidth,
        memory_unit_bytes=args.memory_unit_bytes, gpus_per_node=args.gpus_per_node)
