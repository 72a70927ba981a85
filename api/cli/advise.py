"""`ppsched advise MODEL.yaml`: rank the strategies for one model on one cluster.

Reads the advisor's config (`solver.advisor.AdvisorConfig`; YAML or JSON) and prints the
ranked table of step time and peak memory with what fits, or the candidates as JSON.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import sys
from pathlib import Path
from typing import Any

from ppsched.solver.advisor import (
    DEFAULT_MAX_RUNS,
    STRATEGIES,
    advise,
    format_assumptions,
    format_sensitivity,
    format_table,
    list_assumptions,
    parse_advisor_config,
    probe_sensitivity,
    set_field,
    summary_line,
    winner,
)
from ppsched.solver.model import ProfileError, install_command


def add_advise_parser(sub: Any) -> None:
    """Register the `advise` sub-command on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("advise", help="rank pipeline, WeiPipe and FSDP strategies for a model")
    p.add_argument("config", help="model and cluster YAML (see examples/advise-*.yaml)")
    p.add_argument("--strategies", metavar="LIST",
                   help="comma-separated subset of: " + ", ".join(STRATEGIES))
    p.add_argument("--json", action="store_true", help="print the ranking, the assumptions "
                   "and the sensitivity as JSON")
    p.add_argument("--set", metavar="FIELD=VALUE", action="append", default=[],
                   dest="set_fields", help="set a config field (repeatable; dotted names "
                   "such as cluster.mfu=0.35, fsdp_overlap=false, recompute=[1f1b,fsdp]); "
                   "the assumptions list marks it '--set'")
    p.add_argument("--sensitivity-runs", metavar="N", type=int, default=DEFAULT_MAX_RUNS,
                   help="cap on the advisor reruns that check whether each assumption "
                   f"flips the pick (default {DEFAULT_MAX_RUNS}; 0: no sensitivity)")
    p.add_argument("--vary", metavar="FIELD=V1,V2", action="append", default=[],
                   help="sweep a config field over values (repeatable; dotted names such "
                   "as model.seq_len=4096,16384 or cluster.inter_node_gbps=1.25,25): one "
                   "row per combination with each strategy's tokens/s/GPU and the best")
    p.set_defaults(run=run_advise)


def _yaml() -> Any:
    """PyYAML, imported when used: `ppsched serve` must start without it (service extra)."""
    try:
        import yaml
    except ImportError:
        raise ProfileError("config", "YAML", "PyYAML installed (the 'sweep' extra: "
                           f"{install_command('sweep')}), or the config as JSON via the "
                           "service's POST /v1/advise") from None
    return yaml


def read_config(path: str) -> Any:
    """The YAML (or JSON) document at `path`; I/O and syntax errors as ProfileErrors."""
    yaml = _yaml()
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


def parse_vary(items: list[str]) -> list[tuple[str, list[Any]]]:
    """``FIELD=V1,V2`` arguments as (dotted field, values); values read as YAML scalars.

    Raises:
        ProfileError: an argument without ``=`` or without values.
    """
    axes = []
    for item in items:
        field, sep, values = item.partition("=")
        parsed = [_yaml().safe_load(v) for v in values.split(",") if v.strip()]
        if not sep or not field or not parsed:
            raise ProfileError("--vary", item, "FIELD=V1,V2,... such as "
                               "model.seq_len=4096,16384")
        axes.append((field.strip(), parsed))
    return axes


def _with(data: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    """A copy of `data` with dotted `field` set to `value`."""
    out = copy.deepcopy(data)
    node = out
    *path, leaf = field.split(".")
    for key in path:
        child = node.get(key)
        if not isinstance(child, dict):
            raise ProfileError("--vary", field, "a field of the config, such as "
                               "model.seq_len or cluster.inter_node_gbps")
        node = child
    node[leaf] = value
    return out


def sweep_table(data: dict[str, Any], axes: list[tuple[str, list[Any]]]) -> str:
    """One row per combination of the axes: the values, each strategy's tokens/s/GPU
    (``OOM`` when it does not fit, ``n/a`` when it does not apply) and the best that fits.

    Raises:
        ProfileError: a combination whose config is invalid (named by its values).
    """
    rows: list[list[str]] = []
    names: list[str] = []
    for combo in itertools.product(*(values for _, values in axes)):
        config_data = data
        for (field, _), value in zip(axes, combo, strict=True):
            config_data = _with(config_data, field, value)
        ranked = advise(parse_advisor_config(config_data))
        by_name = {c.strategy: c for c in ranked}
        names = names or [c for c in (parse_advisor_config(config_data).strategies
                                      or STRATEGIES)]
        cells = [str(v) for v in combo]
        for name in names:
            c = by_name[name]
            cells.append("n/a" if c.tokens_per_s_per_gpu is None else
                         f"{c.tokens_per_s_per_gpu:.1f}" if c.fits else "OOM")
        best = ranked[0]
        cells.append(best.strategy if best.fits else "(none fits)")
        rows.append(cells)
    head = [field for field, _ in axes] + names + ["best"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "tokens/s/GPU per strategy\n" + "\n".join(lines)


def parse_set(items: list[str]) -> list[tuple[str, Any]]:
    """``FIELD=VALUE`` arguments as (dotted field, value); a value reads as YAML (a
    number, true/false, a [list]).

    Raises:
        ProfileError: an argument without ``=``, a field or a value.
    """
    out = []
    for item in items:
        field, sep, value = item.partition("=")
        if not sep or not field.strip() or not value.strip():
            raise ProfileError("--set", item, "FIELD=VALUE such as cluster.mfu=0.35")
        out.append((field.strip(), _yaml().safe_load(value)))
    return out


def run_advise(args: argparse.Namespace) -> int:
    data = read_config(args.config)
    if args.strategies is not None and isinstance(data, dict):
        data = dict(data, strategies=[s.strip() for s in args.strategies.split(",")])
    overrides = parse_set(args.set_fields)
    if overrides and not isinstance(data, dict):
        parse_advisor_config(data)  # raises, naming what the file should be
    for field, value in overrides:
        data = set_field(data, field, value)
    if args.vary:
        if not isinstance(data, dict):
            parse_advisor_config(data)  # raises, naming what the file should be
        print(sweep_table(data, parse_vary(args.vary)))
        return 0
    config = parse_advisor_config(data)
    ranked = advise(config)
    items = list_assumptions(config, frozenset(field for field, _ in overrides))
    report = (probe_sensitivity(data, ranked, args.sensitivity_runs)
              if args.sensitivity_runs > 0 else None)
    if args.json:
        json.dump({"ranked": [c.to_dict() for c in ranked], "winner": winner(ranked),
                   "assumptions": [a.to_dict() for a in items],
                   "sensitivity": report.to_dict() if report else None},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    print(format_table(config, ranked))
    print("assumptions (value, from where; set any with --set FIELD=VALUE):")
    print("\n".join(format_assumptions(items)))
    if report:
        print("does the pick hold? each assumption moved over a range (reruns only of "
              "the strategies it moves):")
        print("\n".join(format_sensitivity(report)))
        print(summary_line(report))
    return 0
