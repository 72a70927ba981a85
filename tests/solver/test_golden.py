"""Golden schedules: small (p, v, m) cases of the multi-chunk generators, kept as torch
CSV files under tests/solver/golden/ and reviewed as diffs.

A change to a generator's order shows up here as a diff of its file. To accept one on
purpose, run ``PPSCHED_UPDATE_GOLDEN=1 pytest tests/solver/test_golden.py`` and commit
the files. The last test loads a ZB-V file with torch.distributed.pipelining's own CSV
reader when torch is installed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from ppsched.solver.generators import get_generator
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.render.torch_csv import parse_torch_csv, render_torch_csv
from ppsched.solver.sim.simulator import validate

from tests.needs import import_torch

GOLDEN = Path(__file__).parent / "golden"
CASES = [  # (schedule, p, v, m)
    ("1f1b-interleaved", 2, 2, 4), ("1f1b-interleaved", 4, 2, 8),
    ("1f1b-interleaved", 3, 3, 6), ("1f1b-interleaved", 4, 2, 6),
    ("zb-v", 2, 2, 4), ("zb-v", 4, 2, 8), ("zb-v", 3, 2, 4),
    ("v-half", 4, 2, 8), ("v-min", 3, 2, 6), ("v-min", 4, 2, 8),
]


def _problem(name: str, p: int, v: int, m: int) -> Problem:
    placement = get_generator(name).placement
    one = parse_profile({"num_ranks": p, "num_microbatches": m, "t_f": 1.0, "t_b": 1.0,
                         "t_w": 1.0, "m_b": 1.0, "m_w": 0.5})
    return with_chunks(one, v, placement).problem


def _path(name: str, p: int, v: int, m: int) -> Path:
    return GOLDEN / f"{name}-p{p}-v{v}-m{m}.csv"


@pytest.mark.parametrize(("name", "p", "v", "m"), CASES)
def test_golden_schedule(name: str, p: int, v: int, m: int) -> None:
    problem = _problem(name, p, v, m)
    orders = get_generator(name)(problem)
    validate(problem, orders)
    text = render_torch_csv(orders)
    path = _path(name, p, v, m)
    if os.environ.get("PPSCHED_UPDATE_GOLDEN"):
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with PPSCHED_UPDATE_GOLDEN=1 to write it"
    assert text == path.read_text(), f"{name} p={p} v={v} m={m} changed; review the diff"
    # The golden file itself is a valid schedule under the cost model.
    validate(problem, parse_torch_csv(path.read_text()))


@pytest.mark.parametrize(("p", "m"), [(2, 4), (4, 8)])
def test_zb_v_csv_loads_with_torch_reader(p: int, m: int) -> None:
    import_torch()
    from torch.distributed.pipelining.schedules import PipelineScheduleMulti, _Action

    # _load_csv is an instance method of torch's multi-stage schedules; an instance made
    # without stages (no process group needed) has what it reads: the shape to validate
    # against. Its validator also infers the stage-to-rank map from the file.
    reader = object.__new__(PipelineScheduleMulti)
    reader.pipeline_order = {}
    reader.pp_group_size = p
    reader._num_stages = 2 * p
    reader._n_microbatches = m
    reader._stages = []
    reader._load_csv(str(_path("zb-v", p, 2, m)))
    problem = _problem("zb-v", p, 2, m)
    assert reader.stage_index_to_group_rank == dict(enumerate(problem.stage_to_rank))
    ours = get_generator("zb-v")(problem)
    for rank, actions in reader.pipeline_order.items():
        assert [str(action) for action in actions] == [op.to_torch() for op in ours[rank]]
        assert all(isinstance(action, _Action) for action in actions)
