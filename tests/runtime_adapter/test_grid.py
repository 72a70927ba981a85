"""The correctness grid: the small GPT with tied embeddings, 2x2 (pipeline x data
parallel) and 4x1 on gloo, five schedules, fp32 and bf16 autocast, against the unpipelined
single-process model (loss, every gradient after the reductions, parameters after AdamW).

bf16: the reference runs the same autocast, one region per microbatch as the pipeline
does, with fp32 weights and gradients; the pipelined result must then match it to the
fp32 tolerance too (measured: at most 1.1e-7 on gradients, 1e-6 on parameters).
Engines join through `grid.ENGINES` and the `ENGINES` list below: ``ppsched`` (our
executor) and ``torch`` (torch's pipelining runtime fed with our actions). On 2x2 a few
cases reduce through DDP or FSDP2 instead of ``dp_group`` (`WRAPPED`).
"""

from __future__ import annotations

from typing import Any

import pytest
from ppsched.runtime_adapter.launch import launch_local

from tests.runtime_adapter import grid

pytestmark = pytest.mark.dist

TOLERANCE = 1e-5  # relative, by the norm of each tensor's error
METHODS = ["1f1b", "zb-h1", "heuristic", "zb-v", "1f1b-interleaved"]
DTYPES: list[str | None] = [None, "bfloat16"]
CASES = [(method, dtype) for method in METHODS for dtype in DTYPES]
TOPOLOGIES = {"2x2": 2, "4x1": 1}  # pipeline x data parallel -> data-parallel size
ENGINES = ["ppsched", "torch"]  # both registered in grid.ENGINES: a lost one fails
# Data parallel through the wrappers instead of dp_group= (2x2 only; a few cases keep the
# grid's time bounded): our engine runs a DDP stage unwrapped over DDP's group; torch's
# runtime drives DDP (fused backwards only, see test_dp_wrappers) and FSDP2 itself.
WRAPPED: dict[str, list[tuple[str, str | None, str]]] = {
    "ppsched": [("zb-h1", None, "ddp")],
    "torch": [("1f1b", None, "ddp"), ("zb-h1", None, "fsdp"), ("zb-h1", "bfloat16", "fsdp")]}


@pytest.fixture(scope="module")
def results() -> dict[tuple[str, str], list[dict[str, dict[str, float]]]]:
    # One launch per engine and topology runs every case: process start-up is paid once.
    return {(engine, topology): launch_local(
        grid.grid, 4, dp, engine, CASES + (WRAPPED[engine] if dp > 1 else []),
        timeout_s=500) for engine in ENGINES for topology, dp in TOPOLOGIES.items()}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("topology", list(TOPOLOGIES))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1] or 'fp32'}")
def test_pipelined_step_equals_the_unpipelined_model(
        results: dict[tuple[str, str], Any], engine: str, topology: str,
        case: tuple[str, str | None]) -> None:
    _check_case(results[(engine, topology)], grid.case_key(*case), TOPOLOGIES[topology])


@pytest.mark.parametrize(("engine", "case"), [(e, c) for e in ENGINES for c in WRAPPED[e]],
                         ids=lambda x: x if isinstance(x, str) else grid.case_key(*x))
def test_data_parallel_wrappers_compose_with_the_engine(
        results: dict[tuple[str, str], Any], engine: str,
        case: tuple[str, str | None, str]) -> None:
    # The engines get no dp_group here: only the wrapper can have averaged the replicas'
    # gradients (a replica's own is far off the mean: see test_dp_wrappers).
    _check_case(results[(engine, "2x2")], grid.case_key(*case), 2)


def _check_case(per_rank_results: list[dict[str, dict[str, float]]], key: str,
                replicas: int) -> None:
    per_rank = [rank[key] for rank in per_rank_results]
    for rank, figures in enumerate(per_rank):
        assert figures["num_params"] > 0 and figures["distinct"] == 1.0, (rank, figures)
        assert figures["loss"] <= TOLERANCE, (rank, figures)
        assert figures["grad"] <= TOLERANCE, (rank, figures)
        assert figures["param"] <= TOLERANCE, (rank, figures)
    # One loss per replica: the rank of the last stage in each.
    assert sum(f["has_loss"] for f in per_rank) == replicas


@pytest.mark.parametrize("engine", ENGINES)
def test_gradients_accumulate_across_run_calls_and_reduce_once(engine: str) -> None:
    for rank, figures in enumerate(launch_local(grid.accumulation, 4, 2, engine,
                                                timeout_s=300)):
        assert figures["grad"] <= TOLERANCE, (rank, figures)
        # After the first, unsynchronised call the gradient is far from the total.
        assert figures["local_after_first"] > 0.1, (rank, figures)


@pytest.mark.parametrize(("method", "wrapper"), [("zb-h1", "fsdp"), ("1f1b", "ddp")])
def test_wrapped_stages_accumulate_across_torch_engine_calls(method: str,
                                                             wrapper: str) -> None:
    # torch's runtime reduces wrapped stages in every call (DDP averages the running sum,
    # FSDP2 adds each call's reduce-scattered shard); the engine sums the tie once.
    for rank, figures in enumerate(launch_local(grid.accumulation, 4, 2, "torch", method,
                                                wrapper, timeout_s=300)):
        assert figures["grad"] <= TOLERANCE, (rank, figures)


def test_every_engine_is_registered() -> None:
    # The grid runs every engine of ENGINES; one missing from grid.ENGINES must fail here
    # (and in the grid's KeyError), not drop out of the parametrisation.
    assert sorted(grid.ENGINES) == sorted(ENGINES)
