"""POST /v1/advise: rank the strategies for one model on one cluster (`ppsched advise`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from ppsched.api.service.bounded import POOLED_ERRORS, request_body, run_bounded
from ppsched.api.service.config import Settings
from ppsched.api.service.deps import State
from ppsched.solver.advisor import AdvisorConfig, advise, format_table, parse_advisor_config
from ppsched.solver.model import ProfileError
from pydantic import BaseModel, ConfigDict, Field

router = APIRouter(prefix="/v1", tags=["advise"])

_EXAMPLE = {"model": {"layers": 32, "hidden": 4096, "heads": 32, "seq_len": 16384,
                      "microbatch_size": 4, "vocab": 32000},
            "cluster": {"num_gpus": 16, "gpus_per_node": 8, "gpu_tflops": 312,
                        "gpu_memory_gb": 80, "intra_node_gbps": 200,
                        "inter_node_gbps": 1.25},
            "num_microbatches": 64}


class AdviseCandidate(BaseModel):
    """One strategy's predicted step (null figures: not applicable, see `note`)."""

    model_config = ConfigDict(extra="forbid")

    strategy: str
    step_time_s: float | None
    tokens_per_s_per_gpu: float | None
    peak_memory_gb: float | None
    fits: bool
    bubble_rate: float | None
    comm_gb_per_gpu: float | None
    note: str


class AdviseResponse(BaseModel):
    """The ranking, best first (what fits, by step time), and the CLI's table."""

    model_config = ConfigDict(extra="forbid")

    ranked: list[AdviseCandidate]
    table: str = Field(description="The table `ppsched advise` prints.")


def advise_json(data: Any, limits: Settings) -> str:
    """A parsed config ranked, as the response's JSON: runs in a worker process (one
    config at the limits took 11.4 s of CPU).

    Raises:
        ProfileError: a bad field, or one over the service's limits.
    """
    if not isinstance(data, dict):
        raise ProfileError("body", data, "a JSON object: the advisor's config (model, "
                           "cluster, num_microbatches)")
    parsed: AdvisorConfig = parse_advisor_config(data)
    for field, value, setting in (
            ("cluster.num_gpus", parsed.cluster.num_gpus, "max_advise_gpus"),
            ("num_microbatches", parsed.num_microbatches, "max_advise_microbatches"),
            ("model.layers", parsed.model.layers, "max_advise_layers")):
        limit = getattr(limits, setting)
        if value > limit:
            raise ProfileError(field, value, f"at most {limit} in the service "
                               f"(PPSCHED_{setting.upper()}; the CLI has no limit)")
    ranked = advise(parsed)
    return AdviseResponse(ranked=[AdviseCandidate(**c.to_dict()) for c in ranked],
                          table=format_table(parsed, ranked)).model_dump_json()


@router.post("/advise", response_model=AdviseResponse, summary="Rank training strategies",
             responses=POOLED_ERRORS, openapi_extra=request_body(
                 AdvisorConfig, "The advisor's config: model, cluster, num_microbatches (as in "
                 "`ppsched advise MODEL.yaml`)", {"llama-16gpu": {"value": _EXAMPLE}}))
async def post_advise(http: Request, state: State) -> Response:
    """Every strategy's step time, throughput and peak memory from the model's dimensions,
    in the worker pool within the size limits (PPSCHED_MAX_ADVISE_*) and
    PPSCHED_CALL_TIME_BUDGET_S; a bad field is a 422 naming it, the value and what is
    accepted."""
    return await run_bounded(http, state, advise_json)
