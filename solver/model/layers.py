"""Per-layer profiles (DESIGN.md 6.7): the model before it is cut into stages, and the cut.

A cut gives each of the `p*v` stages a contiguous run of layers; the stage's values are
the sums over its layers, and the result is an ordinary profile (section 2) that carries
the cut (`layers_per_stage`, `stage_layers`), so every other rule applies unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.profile import Profile, parse_profile, read_json
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

LAYER_FIELDS = ("t_f", "t_b", "t_w", "m_b", "m_w")

# What each field accepts, in the words an error message uses.
LAYERS_ACCEPTED = {
    "name": "a string",
    "description": "a string",
    "num_ranks": "an integer >= 1",
    "num_microbatches": "an integer >= 1",
    "t_comm": "a number >= 0 or a list of num_ranks-1 numbers (one per link r, r+1)",
    "memory_limit": "null (no limit), a number > 0, or a list of num_ranks numbers",
    "layers": "a list of at least num_ranks layer objects {name, t_f, t_b, t_w, m_b, m_w, "
              "params_bytes (optional)}, in model order, with distinct names",
    "t_f": "a finite number >= 0 (time of one microbatch's F through the layer)",
    "t_b": "a finite number >= 0 (time of one microbatch's B through the layer)",
    "t_w": "a finite number >= 0 (time of one microbatch's W through the layer)",
    "m_b": "a finite number >= 0 (activation memory one microbatch's F adds)",
    "m_w": "a finite number >= 0 (memory a B leaves held until its W)",
    "params_bytes": "null or a finite number >= 0",
}


class Layer(BaseModel):
    """One layer of the model (the embedding and the head are layers of their own)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str = Field(min_length=1, description="Module name, e.g. 'layers.0'.")
    t_f: float = Field(ge=0, allow_inf_nan=False, description="F time of one microbatch.")
    t_b: float = Field(ge=0, allow_inf_nan=False, description="B time of one microbatch.")
    t_w: float = Field(ge=0, allow_inf_nan=False, description="W time of one microbatch.")
    m_b: float = Field(ge=0, allow_inf_nan=False, description="Activation memory of one F.")
    m_w: float = Field(ge=0, allow_inf_nan=False, description="Memory held from B to W.")
    params_bytes: float | None = Field(None, ge=0, allow_inf_nan=False,
                                       description="Parameter bytes (informative).")


class LayerProfile(BaseModel):
    """A per-layer profile (DESIGN.md 6.7): the partitioner's input."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str | None = None
    description: str | None = None
    num_ranks: int = Field(ge=1)
    num_microbatches: int = Field(ge=1)
    t_comm: float | list[float] = 0.0
    memory_limit: float | list[float] | None = None
    layers: list[Layer]

    @model_validator(mode="after")
    def _check(self) -> LayerProfile:
        p = self.num_ranks
        if len(self.layers) < p:
            raise ProfileError("layers", f"{len(self.layers)} layers",
                               f"at least num_ranks = {p} layers (every stage needs one)")
        seen: set[str] = set()
        for i, layer in enumerate(self.layers):
            if layer.name in seen:
                raise ProfileError(f"layers[{i}].name", layer.name, "a name no other "
                                   "layer has (the cut names its stages' layers)")
            seen.add(layer.name)
        links = self.t_comm if isinstance(self.t_comm, list) else [self.t_comm]
        if isinstance(self.t_comm, list) and len(self.t_comm) != p - 1:
            raise ProfileError("t_comm", self.t_comm, LAYERS_ACCEPTED["t_comm"]
                               + f" (got {len(self.t_comm)}, num_ranks - 1 = {p - 1})")
        if any(not math.isfinite(x) or x < 0 for x in links):
            raise ProfileError("t_comm", self.t_comm, LAYERS_ACCEPTED["t_comm"])
        limits = self.memory_limit
        if isinstance(limits, list) and len(limits) != p:
            raise ProfileError("memory_limit", limits, LAYERS_ACCEPTED["memory_limit"])
        if limits is not None and any(
                not x > 0 for x in (limits if isinstance(limits, list) else [limits])):
            raise ProfileError("memory_limit", limits, LAYERS_ACCEPTED["memory_limit"])
        return self

    @property
    def label(self) -> str:
        return self.name or f"layers{len(self.layers)}-p{self.num_ranks}"

    def link_latency(self, link: int) -> float:
        """The latency of the link between ranks `link` and `link + 1`."""
        return self.t_comm[link] if isinstance(self.t_comm, list) else self.t_comm

    def rank_limit(self, rank: int) -> float:
        """The memory limit of `rank` (infinite without one)."""
        limit = self.memory_limit
        if limit is None:
            return math.inf
        return limit[rank] if isinstance(limit, list) else limit


def parse_layers(data: Any) -> LayerProfile:
    """Validate a decoded JSON object as a per-layer profile.

    Raises:
        ProfileError: naming the first offending field (``layers[3].t_f``), its value and
            what is accepted.
    """
    try:
        return LayerProfile.model_validate(data)
    except ValidationError as exc:
        raise _error_from(exc, data) from None


def load_layers(path: str | Path) -> LayerProfile:
    """Read and validate a per-layer profile JSON file."""
    return parse_layers(read_json(path, "per-layer profile"))


class _Missing:
    def __repr__(self) -> str:
        return "nothing (the field is missing)"


_MISSING = _Missing()


def _error_from(exc: ValidationError, data: Any) -> ProfileError:
    errors = exc.errors()
    error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    original = (error.get("ctx") or {}).get("error")
    if isinstance(original, ProfileError):
        return original
    # pydantic names the branches of a union ('float', 'list[float]'): keep the path.
    loc = [part for part in error["loc"]
           if not isinstance(part, str) or part in LAYERS_ACCEPTED or part not in (
               "float", "list[float]", "int", "none")]
    field = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in loc).lstrip(".")
    key = next((str(x) for x in reversed(loc) if isinstance(x, str)), "per-layer profile")
    if error["type"] == "missing":
        return ProfileError(field, _MISSING,
                            f"{LAYERS_ACCEPTED.get(key, 'a value')} (required)")
    if error["type"] == "extra_forbidden":
        where = "a layer" if len(loc) > 1 else "a per-layer profile"
        fields = ("name", *LAYER_FIELDS, "params_bytes") if len(loc) > 1 else \
            tuple(k for k in LayerProfile.model_fields)
        return ProfileError(field, error.get("input"),
                            f"no such field in {where}: the fields are {', '.join(fields)}")
    if error["type"] in ("model_type", "dict_type"):
        return ProfileError(field or "per-layer profile", error.get("input"),
                            "a JSON object" + (f" ({LAYERS_ACCEPTED[key]})"
                                               if key in LAYERS_ACCEPTED else ""))
    value: Any = data
    for part in loc:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            value = error.get("input")
            break
    return ProfileError(field or key, value, LAYERS_ACCEPTED.get(key, error["msg"]))


def cut_bounds(counts: Sequence[int]) -> list[tuple[int, int]]:
    """The [start, end) layer indices of each stage for `counts` layers per stage."""
    bounds, start = [], 0
    for count in counts:
        bounds.append((start, start + count))
        start += count
    return bounds


def cut_profile(layers: LayerProfile, counts: Sequence[int]) -> Profile:
    """The ordinary one-chunk profile (DESIGN.md section 2) of `layers` cut into stages of
    `counts` consecutive layers, one stage per rank, with the cut it was made by.

    Raises:
        ProfileError: counts that are not num_ranks positive integers summing to the layer
            count, or a memory limit below what the cut needs on some rank (naming it).
    """
    p, total = layers.num_ranks, len(layers.layers)
    if len(counts) != p or min(counts, default=0) < 1 or sum(counts) != total:
        raise ProfileError("layers_per_stage", list(counts), f"num_ranks = {p} integers "
                           f">= 1 summing to the {total} layers")
    stages = [layers.layers[a:b] for a, b in cut_bounds(counts)]
    data: dict[str, Any] = {
        "name": layers.name, "description": layers.description,
        "num_ranks": p, "num_microbatches": layers.num_microbatches,
        "t_comm": layers.t_comm, "memory_limit": layers.memory_limit,
        **{f: [math.fsum(getattr(x, f) for x in stage) for stage in stages]
           for f in LAYER_FIELDS},
        "layers_per_stage": list(counts),
        "stage_layers": [[x.name for x in stage] for stage in stages],
    }
    return parse_profile(data)
