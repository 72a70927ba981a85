"""Golden schedules: small (p, v, m) cases of the multi-chunk generators, kept as torch
CSV files under tests/solver/golden/ and reviewed as diffs.

A change to a generator's order shows up here as a diff of its file. To accept one on
purpose, run ``PPSCHED_UPDATE_GOLDEN=1 pytest tests/solver/test_golden.py`` and commit
the files (that run rewrites and checks nothing: it skips, and fails under CI). The files
are regression pins of today's output; the independent checks are the simulator's
validation of each file, the contract checker's re-timing of it, and the last test, which
loads a ZB-V file with torch.distributed.pipelining's own CSV reader (torch required under
PPSCHED_REQUIRE_TORCH).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ppsched.solver.generators import get_generator
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import Profile, parse_profile
from ppsched.solver.render.torch_csv import parse_torch_csv, render_torch_csv
from ppsched.solver.sim.emit import schedule_from_orders
from ppsched.solver.sim.simulator import validate

from tests.contract import contract_cost
from tests.needs import import_torch
from tests.solver.pins import rewrite_and_stop

GOLDEN = Path(__file__).parent / "golden"
CASES = [  # (schedule, p, v, m)
    ("1f1b-interleaved", 2, 2, 4), ("1f1b-interleaved", 4, 2, 8),
    ("1f1b-interleaved", 3, 3, 6), ("1f1b-interleaved", 4, 2, 6),
    ("zb-v", 2, 2, 4), ("zb-v", 4, 2, 8), ("zb-v", 3, 2, 4),
    ("v-half", 4, 2, 8), ("v-min", 3, 2, 6), ("v-min", 4, 2, 8),
]


def _posted(p: int, m: int) -> dict[str, Any]:
    """The one-chunk profile each case cuts (identical stages)."""
    return {"num_ranks": p, "num_microbatches": m, "t_f": 1.0, "t_b": 1.0, "t_w": 1.0,
            "m_b": 1.0, "m_w": 0.5}


def _profile(name: str, p: int, v: int, m: int) -> Profile:
    return with_chunks(parse_profile(_posted(p, m)), v, get_generator(name).placement)


def _problem(name: str, p: int, v: int, m: int) -> Problem:
    return _profile(name, p, v, m).problem


def _path(name: str, p: int, v: int, m: int) -> Path:
    return GOLDEN / f"{name}-p{p}-v{v}-m{m}.csv"


@pytest.mark.parametrize(("name", "p", "v", "m"), CASES)
def test_golden_schedule(name: str, p: int, v: int, m: int) -> None:
    problem = _problem(name, p, v, m)
    orders = get_generator(name)(problem)
    validate(problem, orders)
    text = render_torch_csv(orders)
    path = _path(name, p, v, m)
    # A regression pin (today's output, a change detector): a run that rewrites it checks
    # nothing (pins.rewrite_and_stop). The independent checks are the simulator's below,
    # the contract checker's and torch's reader in the tests after this one.
    rewrite_and_stop(path, text, "PPSCHED_UPDATE_GOLDEN")
    assert path.exists(), f"{path} is missing: run with PPSCHED_UPDATE_GOLDEN=1 to write it"
    assert text == path.read_text(), f"{name} p={p} v={v} m={m} changed; review the diff"
    # The golden file itself is a valid schedule under the cost model.
    validate(problem, parse_torch_csv(path.read_text()))


@pytest.mark.parametrize(("name", "p", "v", "m"), CASES)
def test_golden_file_passes_the_contract_checker(name: str, p: int, v: int, m: int) -> None:
    # The committed file re-timed by DESIGN.md alone (no ppsched code), its cut judged fair
    # against the one-chunk profile, at the cost our simulator gives it.
    profile = _profile(name, p, v, m)
    orders = parse_torch_csv(_path(name, p, v, m).read_text())
    schedule = schedule_from_orders(profile, orders, name)
    assert schedule.metrics is not None
    assert contract_cost(schedule, _posted(p, m)) == pytest.approx(schedule.metrics.cost)


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
