"""The CSV `ppsched torchtitan` writes loads in torch's `_PipelineScheduleRuntime` (what
torchtitan builds for `pipeline_parallel_schedule_csv`) with the stage-to-rank map
torchtitan's settings give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ppsched.api.cli import main
from torch.distributed.pipelining.schedules import (
    PipelineScheduleSingle,
    ScheduleDualPipeV,
    ScheduleZBVZeroBubble,
    _PipelineScheduleRuntime,
    get_schedule_class,
)

from tests.interop.torch_side import _stage_stub

ROOT = Path(__file__).resolve().parents[2]
GPT = str(ROOT / "profiles" / "gpt1.5b-p8-m24.json")


def _torchtitan_stages(rank: int, p: int, schedule: str) -> tuple[int, ...]:
    """torchtitan's `_get_pp_rank_to_stage_indices_mapping` for the default 2 (multi) or
    1 (single) stages per rank."""
    cls = get_schedule_class(schedule)
    per_rank = 1 if issubclass(cls, PipelineScheduleSingle) else 2
    num_stages = p * per_rank
    if cls in (ScheduleZBVZeroBubble, ScheduleDualPipeV):
        return (rank, num_stages - 1 - rank)
    return tuple(rank + s * p for s in range(per_rank))


@pytest.mark.parametrize(("method", "extra"), [
    ("heuristic", []), ("ZBVZeroBubble", ["--layouts", "v"]),
    ("InterleavedZeroBubble", []), ("1F1B", []),
])
def test_torchs_runtime_loads_the_csv_with_torchtitans_stage_map(
        tmp_path: Path, method: str, extra: list[str]) -> None:
    assert main(["torchtitan", GPT, "-m", method, *extra, "--unchunked-loss",
                 "-o", str(tmp_path)]) == 0
    settings = json.loads((tmp_path / "torchtitan.json").read_text())
    p = settings["parallelism.pipeline_parallel_degree"]
    schedule = settings["parallelism.pipeline_parallel_schedule"]
    for rank in (0, p - 1):
        mine = _torchtitan_stages(rank, p, schedule)
        num_stages = p * len(mine)
        stubs = [_stage_stub(s, num_stages, p) for s in mine]
        for stub in stubs:
            stub.group_rank = rank
        runtime = _PipelineScheduleRuntime(stubs, n_microbatches=24)
        runtime._load_csv(settings["parallelism.pipeline_parallel_schedule_csv"])
        assert len(runtime.pipeline_order) == p
        held = {s for s, r in runtime.stage_index_to_group_rank.items() if r == rank}
        assert held == set(mine)
