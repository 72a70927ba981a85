"""The assumptions behind one advisor answer: every config value that is not the model's
shape, with its value and where it came from (the config, a default, the command line).

A ranking can turn on these as much as on the model (see `benchmarks/weipipe_slides.py`),
so the advisor prints them with every answer. Each is a field of `AdvisorConfig`, set in
the config file, by `ppsched advise --set FIELD=VALUE`, or in the service's JSON body.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ppsched.solver.advisor.rank import STRATEGIES, AdvisorConfig, uses_recompute
from ppsched.solver.model.errors import ProfileError
from pydantic import BaseModel

# field -> the strategies whose figures it moves (None: all of them; () : none).
ASSUMED: dict[str, tuple[str, ...] | None] = {
    "num_microbatches": None,
    "cluster.mfu": None,
    "recompute": None,
    "fsdp_overlap": ("fsdp",),
    "cluster.inter_node_gbps": None,
    "cluster.intra_node_gbps": None,
    "cluster.latency_us": None,
    "cluster.gpus_per_node": None,
    "act_bytes_per_token_hidden": None,
    "state_bytes_per_param": None,
    "alpha": tuple(s for s in STRATEGIES if s != "fsdp"),
    "cluster.gpu_tflops": None,
    "cluster.gpu_memory_gb": (),
    "model.ffn_hidden": None,
    "cluster.host_link_gbps": (),
}
CONFIG, DEFAULT, CLI = "config", "default", "--set"


@dataclass(frozen=True)
class Assumption:
    """One value the answer rests on."""

    field: str  # dotted config field, as `--set` and the config file spell it
    value: Any  # as the config holds it (recompute: the list of strategies that use it)
    source: str  # CONFIG, DEFAULT or CLI
    description: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _section(config: AdvisorConfig, field: str) -> tuple[BaseModel, str]:
    node: BaseModel = config
    *path, leaf = field.split(".")
    for key in path:
        node = getattr(node, key)
    return node, leaf


def list_assumptions(config: AdvisorConfig, overridden: frozenset[str] = frozenset()
                ) -> list[Assumption]:
    """Every assumption of `config`, in `ASSUMED`'s order; `overridden` names the fields the
    command line set (they read ``--set``)."""
    out = []
    names = config.strategies or list(STRATEGIES)
    for field in ASSUMED:
        node, leaf = _section(config, field)
        value: Any = getattr(node, leaf)
        if field == "recompute":
            value = [s for s in names if uses_recompute(config, s)]
        elif field == "model.ffn_hidden" and value is None:
            value = config.model.ffn  # the default is derived: 8H/3
        source = CLI if field in overridden else CONFIG if leaf in node.model_fields_set \
            else DEFAULT
        description = type(node).model_fields[leaf].description or ""
        if ASSUMED[field] == () and field != "cluster.gpu_memory_gb":
            description += " Moves no strategy's figures."
        out.append(Assumption(field, value, source, description))
    return out


def set_field(data: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    """A copy of config `data` with dotted `field` set to `value`.

    Raises:
        ProfileError: `field` goes through a value that is not a section.
    """
    out = copy.deepcopy(data)
    node = out
    *path, leaf = field.split(".")
    for key in path:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ProfileError("--set", field, "a field of the config, such as "
                               "cluster.mfu or num_microbatches")
        node = child
    node[leaf] = value
    return out


def as_config_data(config: AdvisorConfig, items: list[Assumption]) -> dict[str, Any]:
    """`config` as data with every assumption in `items` written out explicitly (what a
    user copies into a config file to pin the answer)."""
    data = config.model_dump(exclude_none=True)
    for item in items:
        data = set_field(data, item.field, item.value)
    return data


def format_assumptions(items: list[Assumption]) -> list[str]:
    """One line per assumption: field, value, source."""
    return [f"  {a.field:<28}{format_value(a.value):>14}  ({a.source})" for a in items]


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]" if value else "none"
    return str(value)
