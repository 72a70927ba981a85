"""`ppsched partition LAYERS.json -o OUT.json`: cut a per-layer profile (DESIGN.md 6.7)
into one stage per rank jointly with the schedule, write the best cut's schedule, and
print the cuts compared and the torchtitan setting that runs it."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from ppsched.api.cli.options import KEEP, add_view_options, memory_limit, positive_int
from ppsched.api.cli.output import check_outputs, summary, write_outputs
from ppsched.api.partition_record import partition_record, torchtitan_recipe
from ppsched.solver.model import LayerProfile, Schedule, load_layers, parse_layers
from ppsched.solver.partition import Partition, partition


def add_partition_parser(sub: Any) -> None:
    """Register the `partition` sub-command on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("partition", help="cut a per-layer profile into stages jointly "
                       "with the schedule (DESIGN.md 6.7)")
    p.add_argument("layers", help="per-layer profile JSON (DESIGN.md 6.7)")
    p.add_argument("-o", "--output", metavar="FILE", required=True,
                   help="write the best cut's schedule JSON (its profile carries the cut)")
    p.add_argument("--memory-limit", metavar="X", type=memory_limit, default=KEEP,
                   help="override the profile's memory_limit: a number, or 'none'")
    p.add_argument("--microbatches", metavar="M", type=positive_int,
                   help="override the profile's num_microbatches")
    p.add_argument("--candidates", metavar="N", type=positive_int, default=256,
                   help="cuts the heuristic judges at most, in order of their bound "
                   "(default 256), besides the even split, torchtitan's and Megatron's")
    add_view_options(p)
    p.set_defaults(run=run_partition)


def run_partition(args: argparse.Namespace) -> int:
    layers = load_layers(args.layers)
    changes: dict[str, Any] = {}
    if args.memory_limit is not KEEP:
        changes["memory_limit"] = args.memory_limit
    if args.microbatches is not None:
        changes["num_microbatches"] = args.microbatches
    if changes:
        layers = parse_layers({**layers.model_dump(mode="json"), **changes})
    check_outputs(args)
    found = partition(layers, budget=args.candidates)
    schedule = found.best.schedule
    assert schedule is not None  # the best judged cut fits (partition raises otherwise)
    schedule.partition = partition_record(found)  # type: ignore[attr-defined]  # extra field
    write_outputs(args, schedule)
    print(summary(schedule))
    print()
    print(comparison(layers, found))
    print()
    print(recipe_text(schedule))
    return 0


def comparison(layers: LayerProfile, found: Partition) -> str:
    """The cuts compared, one line each, with step time and peak memory."""
    best = found.best.step_time
    lines = [f"cuts of {len(layers.layers)} layers into {layers.num_ranks} stages "
             f"(heuristic makespan; peak = busiest rank's activation memory):",
             f"  {'cut':<20} {'step time':>11} {'vs best':>8} {'peak mem':>9}  layers per stage"]
    for c in found.compared:
        if c.judged is None:
            lines.append(f"  {c.label:<20} {'-':>11} {'':>8} {'':>9}  (the rule gives no cut)")
            continue
        j = c.judged
        time_text = "no fit" if math.isinf(j.step_time) else f"{j.step_time:.2f}"
        ratio = "" if math.isinf(j.step_time) else f"{j.step_time / best:.3f}"
        peak = "" if math.isinf(j.peak_memory) else f"{j.peak_memory:.4g}"
        lines.append(f"  {c.label:<20} {time_text:>11} {ratio:>8} {peak:>9}  "
                     f"{' '.join(map(str, j.cut))}" + (f"  ({c.note})" if c.note else ""))
    lines.append(f"lower bound {found.lower_bound:.2f} over {found.bound_scope}")
    lines.append(("the chosen cut is the best under the heuristic over every cut"
                  if found.proven else "the best of the cuts judged (the bound did not "
                  "rule out the rest: raise --candidates)") + f"; {found.judged} judged")
    return "\n".join(lines)


def recipe_text(schedule: Schedule) -> str:
    """torchtitan's `module_fqns_per_model_part` for the cut, with the layer names as
    module FQNs (torchtitan 0.3.0's `parallelism.module_fqns_per_model_part`)."""
    recipe = torchtitan_recipe(schedule)
    return ("torchtitan: [parallelism]\nmodule_fqns_per_model_part = "
            + json.dumps(recipe["module_fqns_per_model_part"])
            + f"\npipeline_parallel_degree = {recipe['pipeline_parallel_degree']}"
            "\n(the schedule's CSV: --csv FILE, as pipeline_parallel_schedule_csv)")
