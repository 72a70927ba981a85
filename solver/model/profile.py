"""The profile (DESIGN.md section 2): what a user measured, and its per-stage resolution.

`Profile` is the pydantic edge type (JSON in, JSON out, JSON Schema); `Problem` is the
same data resolved to per-stage and per-rank tuples, the form every algorithm reads.
"""

from __future__ import annotations

import difflib
import json
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from ppsched.solver.model.errors import ProfileError, _short
from ppsched.solver.model.problem import ACCEPTED, Problem
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

PerStage = float | list[float]
# DESIGN.md 6.2: a per-stage value may also be a matrix, [stage][microbatch].
PerStageMb = float | list[float] | list[list[float]]

_EXTENSIONS = ("microbatches", "t_r", "m_ckpt", "t_offload", "t_reload", "m_keep",
               "shared_host_link", "host_memory_limit", "gpus_per_node", "t_op",
               "layers_per_stage", "stage_layers")


class MicrobatchScale(BaseModel):
    """One microbatch's size relative to the profile's per-stage values (DESIGN.md 6.2)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    scale: float = Field(1.0, description="Factor on t_f, t_b and t_w of every stage.")
    memory_scale: float = Field(1.0, description="Factor on m_b, m_w and t_comm.")



class Profile(BaseModel):
    """A profiled pipeline configuration: the solver's input (DESIGN.md section 2)."""

    # strict: a JSON string or boolean is never read as a number (ints still are floats).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: str | None = Field(None, description="Optional label, echoed in results.")
    description: str | None = Field(None, description="Optional text, echoed in results.")
    num_ranks: int = Field(description="p: pipeline ranks (devices).", ge=1)
    num_microbatches: int = Field(description="m: microbatches per training step.", ge=1)
    num_chunks: int = Field(1, description="v: stages per rank; the model has p*v stages.", ge=1)
    placement: Literal["loop", "v"] | None = Field(
        None,
        description="Stage-to-rank map when v > 1: 'loop' (stage s on rank s % p) or "
        "'v' (stage s < p on rank s, stage s >= p on rank 2p-1-s; v = 2 only).",
    )
    t_f: PerStageMb = Field(description="Time of one F of one microbatch on one stage.")
    t_b: PerStageMb = Field(description="Time of one B (input gradient) on one stage.")
    t_w: PerStageMb = Field(description="Time of one W (weight gradient) on one stage.")
    t_comm: PerStageMb = Field(
        0.0,
        description="Latency between dependent ops on different ranks; a number or a list "
        "of p*v-1 values, one per stage boundary (s, s+1).",
    )
    m_b: PerStageMb = Field(description="Activation memory one F adds on its stage.")
    m_w: PerStageMb = Field(
        description="Memory a B leaves held until its W (m_w >= 0; may exceed m_b).")
    memory_limit: float | list[float] | None = Field(
        None,
        description="Most activation memory a rank may hold at once: a number, a list of "
        "p values, or null for no limit.",
    )

    t_op: float | None = Field(
        None,
        description="Per-op overhead (a DESIGN.md section 3 extension): time added to every "
        "compute op (F, B, W, R) on top of its t_f, t_b, t_w or t_r: the runtime's own "
        "work between kernels, as the profiler measures it; null or 0 for none.",
    )
    overlap: float = Field(
        1.0,
        description="DESIGN.md 6.4: an FB op (the F of one microbatch overlapped with the "
        "BW of another) takes overlap * (t_f + t_b + t_w); 1 means no gain.",
    )
    microbatches: list[MicrobatchScale] | None = Field(
        None,
        description="DESIGN.md 6.2: one {scale, memory_scale} per microbatch (unequal "
        "microbatches); null: all alike. Not together with a matrix field.",
    )

    @model_serializer(mode="wrap")
    def _drop_absent_extensions(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A profile without `microbatches` echoes exactly as before DESIGN.md 6.2 (same
        # JSON, same content hashes in the service's store).
        # The same for the activation-policy fields (DESIGN.md 6.3) at their defaults.
        data: dict[str, Any] = handler(self)
        for name in _EXTENSIONS:
            if data.get(name, 0) is None:
                del data[name]
        if data.get("copy_lanes") == 2:
            del data["copy_lanes"]
        return data

    # DESIGN.md 6.3 (issue 12): optional; recompute is available iff t_r or m_ckpt is
    # set, offload iff t_offload or t_reload is.
    t_r: PerStage | None = Field(None, description="Time of one recompute (R); default t_f.")
    m_ckpt: PerStage | None = Field(
        None, description="Memory F keeps under recompute (e.g. the stage input); default 0.")
    t_offload: PerStage | None = Field(None, description="Time of one O (device to host).")
    t_reload: PerStage | None = Field(
        None, description="Time of one L (host to device); default t_offload.")
    m_keep: PerStage | None = Field(
        None, description="Memory an offloaded activation keeps on the device; default 0.")
    copy_lanes: int = Field(2, description="Copy engines per rank: 1 (both directions) "
                            "or 2 (one each way).")
    shared_host_link: list[list[int]] | None = Field(
        None, description="Groups of ranks that share their copy lanes.")
    gpus_per_node: int | None = Field(
        None, description="GPUs of one node: without shared_host_link, the ranks of each "
        "node (consecutive, num_ranks / gpus_per_node nodes) share their copy lanes, as "
        "eight GPUs of one node share its host memory bandwidth.")
    host_memory_limit: float | list[float] | None = Field(
        None, description="Most offloaded memory a rank's host may hold; null for none.")

    # DESIGN.md 6.7: a profile cut from a per-layer profile carries its cut; the solver
    # never reads it (the stage values are already the sums), the integrations do.
    layers_per_stage: list[int] | None = Field(
        None, description="DESIGN.md 6.7: layers in each of the p*v stages, when this "
        "profile was cut from a per-layer profile; null otherwise.")
    stage_layers: list[list[str]] | None = Field(
        None, description="DESIGN.md 6.7: the layer names of each stage, in model order.")

    @model_validator(mode="after")
    def _check(self) -> Profile:
        problem = Problem.from_profile(self)  # raises ProfileError naming the field
        self._check_cut(problem.num_stages)
        problem.check_totals_finite()
        problem.check_memory_limit()
        return self

    def _check_cut(self, num_stages: int) -> None:
        counts, names = self.layers_per_stage, self.stage_layers
        if counts is not None and (len(counts) != num_stages or min(counts) < 1):
            raise ProfileError("layers_per_stage", counts, ACCEPTED["layers_per_stage"])
        if names is not None and (len(names) != num_stages
                                  or (counts is not None
                                      and [len(n) for n in names] != counts)):
            raise ProfileError("stage_layers", names, ACCEPTED["stage_layers"])

    @cached_property
    def problem(self) -> Problem:
        """This profile resolved to per-stage tuples."""
        return Problem.from_profile(self)

    @property
    def label(self) -> str:
        """A short name for messages and file names."""
        return self.name or f"p{self.num_ranks}-m{self.num_microbatches}-v{self.num_chunks}"


class _Missing:
    def __repr__(self) -> str:
        return "nothing (the field is missing)"


_MISSING = _Missing()


def parse_profile(data: Any) -> Profile:
    """Validate a decoded JSON object as a profile.

    Raises:
        ProfileError: naming the first offending field, its value and what is accepted.
    """
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise profile_error_from(exc, data) from None


class UnknownField(ProfileError):
    """A profile field that does not exist, with the nearest real name when one is close."""

    def __init__(self, field: str, value: Any) -> None:
        close = difflib.get_close_matches(field, list(ACCEPTED), n=1, cutoff=0.5)
        hint = f"did you mean '{close[0]}'? " if close else ""
        fields = ", ".join(ACCEPTED)
        # `accepted` is what a caller that rebuilds the error (the service) shows.
        super().__init__(field, value, f"no such field ({hint}the fields are {fields})")
        # One line that names the field first: a misspelt field, not a bad value.
        self.args = (f"no such field '{field}'; {hint}(got {_short(value)}; expected one "
                     f"of the fields {fields})",)


def load_profile(path: str | Path) -> Profile:
    """Read and validate a profile JSON file."""
    return parse_profile(read_json(path, "profile"))


def read_json(path: str | Path, what: str) -> Any:
    """Read a JSON file, turning I/O and syntax errors into one-line ProfileErrors."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ProfileError(what, str(path), f"a readable {what} JSON file ({exc.strerror})") \
            from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ProfileError(what, str(path), f"valid JSON (line {exc.lineno}, column "
                           f"{exc.colno}: {exc.msg})") from None


def profile_error_from(exc: ValidationError, data: Any) -> ProfileError:
    """The first error of a pydantic ValidationError, as a ProfileError."""
    errors = exc.errors()
    # A misspelt field also shows as the real one missing: name the misspelling first.
    error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    original = (error.get("ctx") or {}).get("error")
    if isinstance(original, ProfileError):
        return original
    loc = [part for part in error["loc"] if not isinstance(part, str) or part[0].islower()]
    # pydantic reports each branch of a union ('float', 'list[float]'): keep the field path.
    field = ".".join(str(x) for x in loc if x not in ("float", "list[float]",
                                                       "list[list[float]]", "int", "none"))
    top = str(loc[0]) if loc else "profile"
    if error["type"] == "missing":
        return ProfileError(top, _MISSING, f"{ACCEPTED.get(top, 'a value')} (required)")
    if error["type"] == "extra_forbidden" and len(loc) == 1:
        return UnknownField(top, error.get("input"))
    if error["type"] == "extra_forbidden":
        return ProfileError(top, error.get("input"),
                            "no such field: the fields are " + ", ".join(ACCEPTED))
    if error["type"] in ("model_type", "dict_type"):
        return ProfileError("profile", data, "a JSON object with the fields "
                            + ", ".join(ACCEPTED))
    value = data.get(top) if isinstance(data, dict) else error.get("input")
    return ProfileError(field or top, value, ACCEPTED.get(top, error["msg"]))
