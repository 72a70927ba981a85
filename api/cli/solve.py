"""`ppsched solve PROFILE.json`: solve a profile (heuristic, a named schedule, or the
exact search) and print its summary, with its views on request."""

from __future__ import annotations

import argparse
from typing import Any

from ppsched.api.cli.options import (
    KEEP,
    add_offload_options,
    add_view_options,
    layouts,
    memory_limit,
    with_memory_limit,
    with_offload_options,
)
from ppsched.api.cli.output import (
    check_outputs,
    needs_ops,
    print_grid,
    print_progress,
    progress,
    summary,
    warn_about_shape,
    write_outputs,
)
from ppsched.solver.model import load_profile
from ppsched.solver.solving import BACKENDS, HEURISTIC, ILP, OBJECTIVES, ExactOptions, solve


def add_solve_parser(sub: Any) -> None:
    """Register the `solve` sub-command on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("solve", help="solve a profile and print its summary")
    p.add_argument("profile", help="profile JSON (DESIGN.md section 2)")
    p.add_argument("-m", "--method", default=HEURISTIC,
                   help=f"{HEURISTIC} (default) or a named schedule, ours or torch's (e.g. "
                   "ZBVZeroBubble); see `ppsched methods`")
    p.add_argument("--objective", default="cost", choices=OBJECTIVES,
                   help="largest per-rank span (default) or makespan")
    p.add_argument("--memory-limit", metavar="X", type=memory_limit, default=KEEP,
                   help="override the profile's memory_limit: a number, or 'none'")
    p.add_argument("--layouts", metavar="LIST", type=layouts, default=(),
                   help="ways the model may be cut, for a one-chunk profile: comma-separated "
                   "1 (one stage per rank), v (V placement, 2 chunks), loopN (N chunks, "
                   "loop placement); the best wins, e.g. --layouts 1,v,loop2")
    p.add_argument("-o", "--output", metavar="FILE", help="write the schedule JSON")
    p.add_argument("--compact", action="store_true",
                   help="write each rank's ops in the JSON as one string of torch actions "
                   "(0F0,0I0,0W0,...), without per-op times: for large schedules; "
                   "`ppsched simulate` re-times it")
    exact = p.add_argument_group("exact refinement (--method ilp)")
    exact.add_argument("--time-limit", metavar="S", type=float,
                       help="seconds of wall time the exact search may take (default 10, "
                       "none with --work-limit); what it finds by then depends on the "
                       "machine's load. With --work-limit too, the first reached stops it")
    exact.add_argument("--work-limit", metavar="W", type=float,
                       help="a reproducible budget instead: W units of CP-SAT's "
                       "deterministic time (its count of search work, scaled to about a "
                       "second each) "
                       "over the whole exact search; the same profile, options and W give "
                       "the same schedule on any load. The summary's '(work ...)' says "
                       "what a wall budget bought. --backend cpsat only")
    exact.add_argument("--workers", metavar="N", type=int, default=2,
                       help="CP-SAT search workers (default 2; with --work-limit the "
                       "schedule depends on N, never on the load)")
    exact.add_argument("--backend", choices=BACKENDS, default="cpsat",
                       help="cpsat (default) or milp (the paper's ILP via PuLP; small cases)")
    exact.add_argument("--milp-solver", metavar="NAME",
                       help="a PuLP solver for --backend milp (default: bundled CBC)")
    exact.add_argument("--free-order", action="store_true",
                       help="let B and W run out of microbatch order (default: FIFO, "
                       "the paper's model)")
    add_offload_options(p)
    add_view_options(p)
    p.set_defaults(run=run_solve)


def run_solve(args: argparse.Namespace) -> int:
    profile = with_offload_options(
        with_memory_limit(load_profile(args.profile), args.memory_limit), args)
    options = ExactOptions(backend=args.backend, time_limit_s=args.time_limit,
                           work_limit=args.work_limit, workers=args.workers,
                           fifo=not args.free_order, milp_solver=args.milp_solver)
    check_outputs(args)
    warn_about_shape(profile)
    ilp = args.method == ILP  # the exact search prints its own progress
    with progress(None if ilp else f"solving {profile.label} (p={profile.num_ranks}, "
                  f"m={profile.num_microbatches}, method {args.method})"):
        schedule = solve(profile, args.method, args.objective, exact=options,
                         on_progress=print_progress if ilp else None,
                         layouts=args.layouts, ops=needs_ops(args))
    write_outputs(args, schedule)
    print(summary(schedule))
    print_grid(args, schedule)
    return 0
