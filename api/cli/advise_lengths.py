"""`ppsched advise CONFIG --lengths SOURCE`: the options and the run of the
length-distribution advice (FSDP, ODC, pipeline; `solver.advisor.length_advice`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ppsched.solver.advisor import (
    LengthAssumptions,
    advise_lengths,
    format_lengths_table,
    parse_advisor_config,
    parse_length_source,
)


def add_lengths_arguments(p: Any) -> None:
    """The ``--lengths`` options on the `advise` parser."""
    defaults = LengthAssumptions()
    p.add_argument("--lengths", metavar="SOURCE",
                   help="rank FSDP, ODC and pipeline (with packing) on these sample lengths: "
                   "a .jsonl (see --lengths-field), .parquet or one-number-a-line file, or "
                   "lognormal:median=1000,sigma=1.2[,min=16,max=32768,seed=0]")
    p.add_argument("--lengths-field", metavar="NAME", default="length",
                   help="the .jsonl/.parquet field holding each sample's length, or a list "
                   "or string whose length counts (default: length)")
    p.add_argument("--samples-per-device", type=int, metavar="N",
                   default=defaults.samples_per_device,
                   help="samples per GPU in one minibatch (default: %(default)s)")
    p.add_argument("--steps", type=int, metavar="N", default=defaults.steps,
                   help="minibatches averaged over (default: %(default)s)")
    p.add_argument("--cap", type=int, metavar="TOKENS",
                   help="pack samples into microbatches of at most TOKENS (default: one "
                   "sample per microbatch for FSDP and ODC, as the ODC example runs)")
    p.add_argument("--odc-efficiency", type=float, metavar="X",
                   default=defaults.odc_efficiency,
                   help="ODC's point-to-point bandwidth as a share of the NCCL ring's "
                   "(default: %(default)s, assumed)")
    p.add_argument("--pipeline-stages", type=int, metavar="N",
                   help="ranks per pipeline replica (default: GPUs per node)")


def run_lengths(args: argparse.Namespace, data: Any) -> int:
    """Print the ranked table (or JSON) of the length-distribution advice."""
    config = parse_advisor_config(data)
    source = parse_length_source(args.lengths, args.lengths_field)
    base = LengthAssumptions(samples_per_device=args.samples_per_device, steps=args.steps,
                             cap=args.cap, odc_efficiency=args.odc_efficiency,
                             pipeline_stages=args.pipeline_stages)
    ranked, batches, used = advise_lengths(config, source, base)
    if args.json:
        json.dump({"lengths": source.describe(), "minibatches": len(batches),
                   "assumptions": used.lines(),
                   "ranked": [{"strategy": r.strategy, "step_s": r.step_s,
                               "tokens_per_s_per_gpu": r.tokens_per_s_per_gpu,
                               "note": r.note} for r in ranked]}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(format_lengths_table(config, source, ranked, batches, used))
    return 0
