"""The pieces a job's checkpoints are made of, in-process: the exact search's
improvements reach the listener with the profile they belong to, and `Checkpointer`
sends only schedules better than the floor, validated, at most once per flush."""

from __future__ import annotations

import json
from typing import Any

from ppsched.api.service.checkpoint import Checkpointer, resumed
from ppsched.api.service.worker import job_result, schedule_json
from ppsched.solver.exact import improvements
from ppsched.solver.model import parse_profile
from ppsched.solver.model.schedule import parse_schedule
from ppsched.solver.solving import solve

from tests.api.service.conftest import EASY

SPEC: dict[str, Any] = {"objective": "cost", "compact": False}


def test_improvements_reach_the_listener_with_their_profile() -> None:
    profile = parse_profile(EASY)
    orders = solve(profile, "1f1b").orders()
    heard: list[tuple[Any, float]] = []
    improvements.improved(profile.problem, orders, 1.0)  # nobody listens: nothing
    with improvements.listening(lambda p, o, v: heard.append((p, v))):
        improvements.improved(profile.problem, orders, 2.0)  # no profile named: ignored
        with improvements.profile_for(profile):
            improvements.improved(profile.problem, orders, 3.0)
            # Another problem (a relaxation's, a probe's): not this profile's.
            other = parse_profile({**EASY, "t_f": EASY["t_f"] + 0.5})
            improvements.improved(other.problem, orders, 4.0)
    improvements.improved(profile.problem, orders, 5.0)
    assert heard == [(profile, 3.0)]


def test_the_checkpointer_sends_only_improvements_on_its_floor() -> None:
    profile = parse_profile(EASY)
    slow = solve(profile, "1f1b")
    fast = solve(profile, "heuristic")
    assert fast.solver is not None and slow.solver is not None
    assert fast.solver.objective < slow.solver.objective
    sent: list[tuple[str, Any]] = []
    checkpointer = Checkpointer(sent.append, SPEC, "k" * 32, 3600.0,
                                floor=slow.solver.objective)
    checkpointer.note(profile, slow.orders(), slow.solver.objective)  # not below the floor
    checkpointer.flush()
    assert sent == []
    checkpointer.note(profile, fast.orders(), fast.solver.objective)
    checkpointer.note(profile, slow.orders(), slow.solver.objective)  # worse: not kept
    checkpointer.flush()
    checkpointer.flush()  # nothing new
    assert [kind for kind, _ in sent] == ["incumbent"]
    result = sent[0][1]
    assert abs(result[4] - fast.solver.objective) < 1e-9
    schedule = parse_schedule(json.loads(result[2]))  # validated by the simulator
    assert schedule.method == "ilp-cpsat" and schedule.solver is not None
    assert schedule.solver.status == "feasible"
    checkpointer.note(profile, fast.orders(), fast.solver.objective)  # already sent
    checkpointer.flush()
    assert len(sent) == 1


def test_a_stored_checkpoint_resumes_as_the_requests_result() -> None:
    schedule = solve(parse_profile(EASY), "1f1b")
    stored = job_result(schedule_json(schedule, SPEC), "a" * 32)[2]  # under its content id
    again = resumed(stored, "b" * 32)
    body = json.loads(again[0])
    assert body["id"] == "b" * 32 and body["links"]["self"] == f"/v1/schedules/{'b' * 32}"
    assert schedule.solver is not None and again[4] == schedule.solver.objective
