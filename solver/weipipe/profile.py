"""The WeiPipe profile: per-chunk compute times and bytes, the ring's links, `p` and `n`.

The model is cut into `p` chunks (one per rank, in model order); every rank runs its own
`num_microbatches` microbatches through all of them, so a step trains `p * n` microbatches.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from ppsched.solver.model.errors import ProfileError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

PerChunk = float | list[float]
_PER_CHUNK_FIELDS = ("t_f", "t_b", "t_w", "weight_bytes", "grad_bytes", "activation_bytes",
                     "bandwidth")


class WeiPipeProfile(BaseModel):
    """A weight-passing configuration (DESIGN.md section 6.5). Times in one unit (ms advised),
    bytes in bytes, bandwidth in bytes per that time unit."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str | None = Field(None, description="Optional label, echoed in results.")
    num_ranks: int = Field(description="p: ranks in the ring; the model has p chunks.", ge=1)
    num_microbatches: int = Field(
        description="n: microbatches each rank runs per step (the step trains p*n).", ge=1)
    num_iterations: int = Field(
        1, description="Training steps timed back to back (WeiPipe-Zero-Bubble-2 overlaps "
        "one step's drain with the next step's fill).", ge=1)
    t_f: PerChunk = Field(description="Time of one F of one microbatch on one chunk.")
    t_b: PerChunk = Field(description="Time of one B (activation gradient) on one chunk.")
    t_w: PerChunk = Field(description="Time of one W (weight gradient) on one chunk.")
    weight_bytes: PerChunk = Field(description="Bytes of one chunk's weights on the wire.")
    grad_bytes: PerChunk = Field(description="Bytes of one chunk's weight gradient (D).")
    activation_bytes: PerChunk = Field(
        description="Activation memory one F of one microbatch keeps on one chunk (G*M_A/p).")
    alpha: float = Field(
        0.5, description="Share of a chunk's activation memory a B leaves held until its W.")
    boundary_bytes: float = Field(
        0.0, description="The activation-gradient buffer a rank holds while a backward runs "
        "(G*M_B/p in the slides).")
    bandwidth: PerChunk = Field(
        description="Bandwidth of the link from rank r to rank r+1 (a number or p values), "
        "bytes per time unit.")
    latency: float = Field(0.0, description="Fixed cost of one ring transfer, time unit.")

    @model_validator(mode="after")
    def _check(self) -> WeiPipeProfile:
        _ = self.chunks  # raises ProfileError naming the field
        if not 0.0 <= self.alpha <= 1.0:
            raise ProfileError("alpha", self.alpha, "a share between 0 and 1")
        for field in ("boundary_bytes", "latency"):
            value = getattr(self, field)
            if not value >= 0:
                raise ProfileError(field, value, "a number >= 0")
        return self

    @cached_property
    def chunks(self) -> dict[str, tuple[float, ...]]:
        """Per-chunk (per-rank for ``bandwidth``) tuples of every list-or-number field."""
        out = {}
        for field in _PER_CHUNK_FIELDS:
            out[field] = _per_chunk(field, getattr(self, field), self.num_ranks,
                                    positive=field == "bandwidth")
        return out

    @property
    def label(self) -> str:
        return self.name or f"weipipe-p{self.num_ranks}-n{self.num_microbatches}"


def _per_chunk(field: str, value: PerChunk, count: int, positive: bool) -> tuple[float, ...]:
    values = [value] * count if isinstance(value, int | float) else list(value)
    if len(values) != count:
        raise ProfileError(field, value, f"a number or a list of {count} values (one per "
                           f"{'rank' if field == 'bandwidth' else 'chunk'})")
    for i, x in enumerate(values):
        name = field if isinstance(value, int | float) else f"{field}[{i}]"
        if positive and not x > 0:
            raise ProfileError(name, x, "a number > 0")
        if not x >= 0 or x == float("inf"):
            raise ProfileError(name, x, "a finite number >= 0")
    return tuple(float(x) for x in values)


def parse_weipipe_profile(data: Any) -> WeiPipeProfile:
    """A WeiPipeProfile from JSON-like data; errors name the field, the value, the fix.

    Raises:
        ProfileError: the first problem found.
    """
    if not isinstance(data, dict):
        raise ProfileError("profile", data, "a JSON object with the WeiPipe profile's fields")
    try:
        return WeiPipeProfile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        cause = err.get("ctx", {}).get("error")
        if isinstance(cause, ProfileError):
            raise cause from None
        loc = err["loc"]
        # A union's error location names the member type (t_f.float); keep field and index.
        field = (str(loc[0]) + "".join(f"[{x}]" for x in loc[1:] if isinstance(x, int))
                 if loc else "profile")
        if err["type"] == "extra_forbidden":
            accepted = "one of " + ", ".join(WeiPipeProfile.model_fields)
        elif err["type"] == "missing":
            accepted = "a value (the field is required)"
        elif str(loc[0]) in _PER_CHUNK_FIELDS:
            accepted = "a number or a list of numbers"
        else:
            accepted = err["msg"]
        raise ProfileError(field, err.get("input"), accepted) from None
