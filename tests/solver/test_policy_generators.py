"""The recompute pass (``NAME+recompute[:K]``) and PipeOffload's schedules
(``pipeoffload-full``, ``pipeoffload-selective``): every emitted schedule validates, the
policies land where the generators say, and a profile without the fields is refused by
name."""

from __future__ import annotations

import math
from typing import Any

import pytest
from ppsched.solver.generators import get_generator
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import policy_of
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.policies.pipeoffload import group_size, grouped_interleaved
from ppsched.solver.sim.simulator import validate
from ppsched.solver.solving.entry import solve
from ppsched.solver.solving.method_names import resolve_method


def _profile(p: int, m: int, **fields: Any) -> dict[str, Any]:
    return {"num_ranks": p, "num_microbatches": m, "t_f": 1.0, "t_b": 1.2, "t_w": 0.8,
            "m_b": 1.0, "m_w": 0.5, "t_comm": 0.1, **fields}


def _chunked(p: int, m: int, v: int, **fields: Any) -> Problem:
    return with_chunks(parse_profile(_profile(p, m, **fields)), v, "loop").problem


@pytest.mark.parametrize("name", ["1f1b", "zb-h1", "zb-h2", "gpipe"])
@pytest.mark.parametrize("stages", [None, 0, 1, 3])
def test_recompute_pass_validates_and_recomputes_the_first_stages(
        name: str, stages: int | None) -> None:
    problem = parse_profile(_profile(4, 8, t_r=1.0, m_ckpt=0.1)).problem
    method = resolve_method(name + "+recompute" + (f":{stages}" if stages is not None
                                                    else ""))
    sim = validate(problem, get_generator(method)(problem))
    first = 4 if stages is None else stages
    assert policy_of(sim.order) == {(s, j): "recompute" for s in range(first)
                                    for j in range(8)}
    for ops in sim.order:  # each R right before its backward
        for i, op in enumerate(ops):
            if op.kind == "R":
                assert ops[i + 1].kind in ("B", "BW") and ops[i + 1][1:] == op[1:]
    plain = validate(problem, get_generator(name)(problem))
    assert sim.metrics is not None and plain.metrics is not None
    assert max(sim.memory_peak) <= max(plain.memory_peak) + 1e-9
    assert sim.metrics.cost >= plain.metrics.cost - 1e-9


def test_recompute_pass_on_chunked_and_fb_schedules() -> None:
    for name, placement in (("1f1b-interleaved", "loop"), ("zb-v", "v"),
                            ("dualpipe-v", "v")):
        profile = with_chunks(parse_profile(_profile(4, 8, t_r=1.0, overlap=0.8)), 2,
                              placement)
        schedule = solve(profile, name + "+recompute:2")
        assert schedule.method == name + "+recompute:2"
        assert {op.kind for rank in schedule.ranks for op in rank} >= {"R"}
        assert all(op.kind != "FB" for rank in schedule.ranks for op in rank)


@pytest.mark.parametrize(("method", "fields", "field"), [
    ("1f1b+recompute", {}, "t_r"),
    ("1f1b+recompute:5", {"t_r": 1.0}, "recompute_stages"),
])
def test_recompute_pass_refusals_are_named(method: str, fields: dict[str, Any],
                                           field: str) -> None:
    profile = parse_profile(_profile(4, 8, **fields))
    with pytest.raises(ProfileError) as info:
        solve(profile, method)
    assert info.value.field == field
    assert method in info.value.accepted


def test_recompute_suffix_needs_a_named_schedule() -> None:
    with pytest.raises(ProfileError) as info:
        resolve_method("heuristic+recompute")
    assert info.value.field == "method" and "named schedule" in info.value.accepted


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("v", [2, 3])
@pytest.mark.parametrize("ratio", [0.25, 1.25])
def test_pipeoffload_schedules_validate(p: int, v: int, ratio: float) -> None:
    grouped = 0
    for m in range(p, 3 * p + 1):
        try:
            group_size(m, p)
        except ProfileError:  # no group size in ceil(p/2)..p divides m: refused by name
            continue
        grouped += 1
        base = _chunked(p, m, v)
        copy = [ratio * (f + b) for f, b in zip(base.t_f, base.t_b, strict=True)]
        problem = _chunked(p, m, v, t_offload=copy[0])
        keep = validate(base, grouped_interleaved(base))
        assert keep.metrics is not None
        for selective in (True, False):
            name = "pipeoffload-selective" if selective else "pipeoffload-full"
            sim = validate(problem, get_generator(name)(problem))
            assert sim.metrics is not None
            policy = policy_of(sim.order)
            assert set(policy.values()) <= {"offload"}
            if selective:
                assert all(s < p for s, _ in policy)  # the first chunk only
            assert max(sim.memory_peak) <= max(keep.memory_peak) + 1e-9
            assert sim.metrics.lower_bound <= sim.metrics.cost + 1e-9
    assert grouped >= 3  # m = p, 2p and 3p always group (g = p divides them)


def test_full_offloads_more_than_selective_and_holds_less() -> None:
    problem = _chunked(8, 24, 2, t_offload=0.5)
    full = validate(problem, get_generator("pipeoffload-full")(problem))
    selective = validate(problem, get_generator("pipeoffload-selective")(problem))
    assert len(policy_of(full.order)) > len(policy_of(selective.order)) > 0
    assert max(full.memory_peak) < max(selective.memory_peak)


def test_group_sizes_and_warmup() -> None:
    assert [group_size(m, 8) for m in (8, 12, 16, 24, 10, 14)] == [4, 4, 4, 4, 5, 7]
    with pytest.raises(ProfileError) as info:
        group_size(11, 8)  # 11 is prime: no divisor in 4..8
    assert info.value.field == "num_microbatches"
    assert "such as 10 or 12" in info.value.accepted
    # Rank r's first backward comes after (p-1-r) + (v-1) g forwards.
    problem = _chunked(4, 8, 2)
    for r, ops in enumerate(grouped_interleaved(problem)):
        assert next(i for i, op in enumerate(ops) if op.kind == "BW") == (3 - r) + 2 + 1


def test_host_memory_limit_drops_the_shortest_lived_first() -> None:
    free = _chunked(4, 8, 2, t_offload=0.3)
    limited = _chunked(4, 8, 2, t_offload=0.3, host_memory_limit=1.0)
    everything = policy_of(get_generator("pipeoffload-full")(free))
    sim = validate(limited, get_generator("pipeoffload-full")(limited))
    assert 0 < len(policy_of(sim.order)) < len(everything)


@pytest.mark.parametrize("name", ["pipeoffload-full", "pipeoffload-selective"])
def test_pipeoffload_needs_t_offload_and_loop_chunks(name: str) -> None:
    with pytest.raises(ProfileError) as info:
        get_generator(name)(_chunked(4, 8, 2))
    assert info.value.field == "t_offload" and name in info.value.accepted
    with pytest.raises(ProfileError) as info:
        get_generator(name)(parse_profile(_profile(4, 8, t_offload=0.5)).problem)
    assert info.value.field == "num_chunks" and "loop2" in info.value.accepted
    # Through solve, a one-chunk profile is cut when the caller allows loop2.
    schedule = solve(parse_profile(_profile(4, 8, t_offload=0.5)), name,
                     layouts=((2, "loop"),))
    assert schedule.profile.num_chunks == 2 and not math.isnan(schedule.metrics.cost)
