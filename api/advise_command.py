"""`ppsched advise MODEL.yaml`: rank the strategies for one model on one cluster.

Reads the advisor's config (`solver.advisor.AdvisorConfig`; YAML or JSON) and prints the
ranked table of step time and peak memory with what fits, or the candidates as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from solver.advisor import STRATEGIES, advise, format_table, parse_advisor_config
from solver.errors import ProfileError


def add_advise_parser(sub: Any) -> None:
    """Register the `advise` sub-command on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("advise", help="rank pipeline, WeiPipe and FSDP strategies for a model")
    p.add_argument("config", help="model and cluster YAML (see examples/advise-*.yaml)")
    p.add_argument("--strategies", metavar="LIST",
                   help="comma-separated subset of: " + ", ".join(STRATEGIES))
    p.add_argument("--json", action="store_true", help="print the candidates as JSON")
    p.set_defaults(run=run_advise)


def read_config(path: str) -> Any:
    """The YAML (or JSON) document at `path`; I/O and syntax errors as ProfileErrors."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ProfileError("config", path, f"a readable YAML file ({exc.strerror})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ProfileError("config", path, f"valid YAML{where}") from None


def run_advise(args: argparse.Namespace) -> int:
    data = read_config(args.config)
    if args.strategies is not None and isinstance(data, dict):
        data = dict(data, strategies=[s.strip() for s in args.strategies.split(",")])
    config = parse_advisor_config(data)
    ranked = advise(config)
    if args.json:
        json.dump([c.to_dict() for c in ranked], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(format_table(config, ranked))
    return 0
