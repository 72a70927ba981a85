"""`solve(..., start=)`: the exact search goes on from a given schedule (a job's
checkpoint) when it beats the heuristic's, on the layout it was made for, and a job's
re-run hands its checkpoint to CP-SAT."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest
from ppsched.api.service.job_process import run_job
from ppsched.api.service.worker import body_with_links
from ppsched.solver.model import Profile, parse_profile
from ppsched.solver.solving import ExactOptions, solve

PROFILES = Path(__file__).resolve().parents[2] / "profiles"
ONE = ((1, None),)
# CP-SAT's deterministic time: a budget too small to move off the heuristic's schedule
# here (checked below), so whatever beats the heuristic came from `start`.
TINY = ExactOptions(work_limit=0.05, workers=1)


def _tight() -> Profile:
    """gpt1.5b-p8 at 12 microbatches and limit 6 (below 1F1B's 8): the heuristic's cost is
    well above the optimum CP-SAT proves in a few deterministic seconds."""
    data = json.loads((PROFILES / "gpt1.5b-p8-m24.json").read_text())
    return parse_profile({**data, "memory_limit": 6, "num_microbatches": 12})


@pytest.fixture(scope="module")
def searched() -> tuple[Profile, float, Any]:
    """The profile, the heuristic's cost, and CP-SAT's schedule with a real budget."""
    profile = _tight()
    heuristic = solve(profile, "heuristic", layouts=ONE)
    exact = solve(profile, "ilp", exact=ExactOptions(work_limit=3, workers=1), layouts=ONE)
    assert heuristic.metrics is not None and exact.metrics is not None
    assert exact.metrics.cost < heuristic.metrics.cost - 1  # the budget finds better
    assert exact.solver is not None and exact.solver.work is not None
    assert TINY.work_limit is not None and exact.solver.work > 2 * TINY.work_limit
    return profile, heuristic.metrics.cost, exact


def test_a_tiny_budget_alone_keeps_the_heuristic(searched: tuple[Profile, float, Any],
                                                 ) -> None:
    profile, heuristic_cost, _ = searched
    alone = solve(profile, "ilp", exact=TINY, layouts=ONE)
    assert alone.metrics is not None
    assert alone.metrics.cost == pytest.approx(heuristic_cost)


def test_the_search_goes_on_from_a_better_start(searched: tuple[Profile, float, Any],
                                                ) -> None:
    profile, heuristic_cost, exact = searched
    resumed = solve(profile, "ilp", exact=TINY, layouts=ONE, start=exact)
    assert resumed.metrics is not None and resumed.solver is not None
    assert resumed.metrics.cost == pytest.approx(exact.metrics.cost)
    assert resumed.metrics.cost < heuristic_cost - 1
    assert resumed.orders() == exact.orders()  # nothing better within the tiny budget


def test_a_start_of_a_layout_not_considered_is_left_out(
        searched: tuple[Profile, float, Any]) -> None:
    # A V schedule cannot start a one-chunk search: its ops name other stages.
    profile, heuristic_cost, _ = searched
    v = solve(profile, "heuristic", layouts=((2, "v"),))
    resumed = solve(profile, "ilp", exact=TINY, layouts=ONE, start=v)
    assert resumed.metrics is not None and resumed.profile.num_chunks == 1
    assert resumed.metrics.cost == pytest.approx(heuristic_cost)


@pytest.mark.parametrize("method", ["heuristic", "zb-h1"])
def test_start_is_for_ilp_only(searched: tuple[Profile, float, Any], method: str) -> None:
    profile, _, exact = searched
    with pytest.raises(ValueError, match="start is for ilp"):
        solve(profile, method, layouts=ONE, start=exact)


@pytest.mark.parametrize("compact", [False, True])
def test_a_job_rerun_hands_its_checkpoint_to_cpsat(searched: tuple[Profile, float, Any],
                                                   compact: bool) -> None:
    # The job's process (as the service runs it, in this process): its earlier run
    # checkpointed CP-SAT's schedule (stored as the service stores it: with its id and
    # links, compact ranks where the request asked for them), and this run's budget is
    # too small to find it again.
    profile, heuristic_cost, exact = searched
    assert exact.metrics is not None and exact.solver is not None
    assert TINY.work_limit is not None
    spec = {"profile": profile.model_dump(mode="json"), "method": "ilp",
            "objective": "cost", "backend": "cpsat", "time_limit_s": 30.0,
            "work_limit": TINY.work_limit, "layouts": "1"}
    ours, theirs = multiprocessing.Pipe()
    spec["compact"] = compact
    stored = body_with_links(exact.compact_dump() if compact else
                             json.loads(exact.model_dump_json()), "s-checkpoint")
    run_job(theirs, spec, "key", 1, resume=(stored, exact.metrics.cost))
    messages = []
    with contextlib.suppress(EOFError):  # the job closed its end: everything is read
        while True:
            messages.append(ours.recv())
    kinds = [kind for kind, _ in messages]
    assert kinds[0] == "incumbent" and kinds[-1] == "done", kinds
    done = json.loads(messages[-1][1][0])
    assert done["metrics"]["cost"] == pytest.approx(exact.metrics.cost)
    assert done["metrics"]["cost"] < heuristic_cost - 1
    # This run's own search ended there, within the tiny budget: not the floor that hands
    # the checkpoint back unchanged (that body records the earlier run's larger work).
    assert (done["solver"]["work"] or 0.0) <= 2 * TINY.work_limit
    assert done["solver"]["work"] != exact.solver.work
