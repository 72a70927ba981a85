"""`ppsched methods` and `ppsched schema`: what the solver offers, and the JSON Schemas of
its input and output."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ppsched.solver.model import Profile, Schedule
from ppsched.solver.solving import aliases, methods


def add_methods_parser(sub: Any) -> None:
    """Register the `methods` sub-command on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("methods", help="list the available methods")
    p.set_defaults(run=run_methods)


def add_schema_parser(sub: Any) -> None:
    """Register the `schema` sub-command on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("schema", help="print the JSON Schema of a profile or a schedule")
    p.add_argument("which", choices=("profile", "schedule"))
    p.set_defaults(run=run_schema)


def run_methods(args: argparse.Namespace) -> int:
    del args
    listing = methods()
    width = max(map(len, listing))
    for name, text in listing.items():
        print(f"{name:<{width}}  {text}")
    names = ", ".join(f"{alias} = {target}" for alias, target in aliases(listing).items())
    print(f"\ntorch.distributed.pipelining's names are accepted too: {names}")
    return 0


def run_schema(args: argparse.Namespace) -> int:
    model = Profile if args.which == "profile" else Schedule
    print(json.dumps(model.model_json_schema(), indent=2))
    return 0
