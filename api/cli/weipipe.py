"""`ppsched weipipe PROFILE.json`: time a WeiPipe schedule (DESIGN.md section 6.5) and
print its figures, with its text grid, SVG and JSON on request."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ppsched.solver.model import ProfileError, read_json
from ppsched.solver.weipipe import (
    SCHEDULES,
    parse_weipipe_profile,
    simulate_weipipe,
    weipipe_grid,
    weipipe_svg,
)


def add_weipipe_parser(sub: Any) -> None:
    """Register the `weipipe` sub-command on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("weipipe", help="time a WeiPipe (weight-passing) schedule")
    p.add_argument("profile", help="WeiPipe profile JSON (see examples/weipipe-p4.json)")
    p.add_argument("-m", "--method", default="weipipe-interleave",
                   help="one of " + ", ".join(SCHEDULES) + " (default weipipe-interleave)")
    p.add_argument("--grid", action="store_true", help="print the ring steps per rank")
    p.add_argument("--svg", metavar="FILE", help="write the SVG (one lane per rank)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the timed schedule JSON")
    p.set_defaults(run=run_weipipe)


def run_weipipe(args: argparse.Namespace) -> int:
    if args.method not in SCHEDULES:
        raise ProfileError("method", args.method, "one of " + ", ".join(SCHEDULES))
    profile = parse_weipipe_profile(read_json(args.profile, "profile"))
    result = simulate_weipipe(profile, args.method)
    print(f"{result.method} on {profile.label}: step time {result.step_time:.6g}, "
          f"bubble {result.bubble_rate:.4f}, sent per rank {result.comm_bytes[0]:.6g}, "
          f"peak memory per rank {max(result.peak_memory):.6g}")
    if args.grid:
        print(weipipe_grid(result))
    for path, text in ((args.svg, lambda: weipipe_svg(result)),
                       (args.output, lambda: json.dumps(result.to_dict(), indent=1))):
        if path:
            try:
                Path(path).write_text(text())
            except OSError as exc:
                raise ProfileError("output", path, f"a writable file ({exc.strerror})") \
                    from None
    return 0
