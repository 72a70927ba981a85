"""The packing front-end end to end: every sample placed once within the cap, one solved
profile per replica whose schedule validates, the step time and the naive comparison,
and named errors for bad input."""

from __future__ import annotations

import math
from typing import Any

import pytest
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.profile import Profile, parse_profile
from ppsched.solver.model.schedule import Schedule
from ppsched.solver.packing import (
    CostModel,
    PackingError,
    PackResult,
    PackSpec,
    Quadratic,
    naive_samples,
    pack,
    pack_samples,
)
from ppsched.solver.packing.synthetic import lognormal
from ppsched.solver.sim.simulator import simulate

COST = CostModel(forward=Quadratic(1e-4, 1.0))


def base(p: int = 4, **changes: Any) -> Profile:
    data: dict[str, Any] = {"num_ranks": p, "num_microbatches": 1, "t_f": 2.0, "t_b": 2.0,
                            "t_w": 1.0, "t_comm": 0.1, "m_b": 1.0, "m_w": 0.5,
                            "memory_limit": float(p)}
    data.update(changes)
    return parse_profile(data)


def assert_validates(schedule: Schedule) -> None:
    """The simulator accepts the schedule and gives it the figures it carries."""
    problem = schedule.profile.problem
    order = getattr(schedule, "microbatch_order", None)
    if order is not None:
        problem = problem.reordered(order)
    sim = simulate(problem, schedule.orders())
    assert sim.ok, sim.violations[:3]
    assert sim.metrics is not None and schedule.metrics is not None
    assert sim.metrics.cost == pytest.approx(schedule.metrics.cost)


def assert_complete(result: PackResult) -> None:
    spec = result.spec
    for packing in (result.packed, result.naive):
        placed = sorted(i for r in packing.replicas for mb in r.microbatches
                        for i in mb.samples)
        assert placed == list(range(len(spec.lengths)))
        for replica in packing.replicas:
            for mb in replica.microbatches:
                assert mb.tokens == sum(spec.lengths[i] for i in mb.samples) <= spec.cap
            # No schedule exactly where the replica got no microbatch; the rest validate.
            assert (replica.schedule is None) == (not replica.microbatches)
            if replica.schedule is not None:
                assert_validates(replica.schedule)
        assert packing.step_time == max(r.cost for r in packing.replicas)


def test_pack_lognormal_beats_naive_and_validates() -> None:
    lengths = lognormal(300, seed=3, max_tokens=8192)
    spec = PackSpec(lengths=tuple(lengths), cap=8192, num_replicas=3, cost=COST)
    result = pack(base(), spec)
    assert_complete(result)
    counts = spec.counts()
    assert [len(r.microbatches) for r in result.packed.replicas] == list(counts)
    assert result.packed.step_time < result.naive.step_time
    assert result.packed.imbalance < result.naive.imbalance
    assert result.speedup == result.naive.step_time / result.packed.step_time
    # The replica's profile scales the base by each microbatch's cost over the reference.
    replica = result.packed.replicas[0]
    assert replica.profile is not None
    entries = replica.profile.microbatches
    assert entries is not None
    for mb, entry in zip(replica.microbatches, entries, strict=True):
        scale = entry["scale"] if isinstance(entry, dict) else entry.scale
        assert scale == pytest.approx(COST.time([lengths[i] for i in mb.samples])
                                      / COST.time([8192]))
    data = result.to_dict()
    assert data["packed"]["step_time"] == result.packed.step_time
    assert len(data["naive"]["replicas"]) == 3


def test_unequal_counts_per_replica_and_own_backward_costs() -> None:
    lengths = [900, 4000, 1200, 300, 7000, 2500, 800, 1600, 3000, 500, 650, 2200]
    cost = CostModel(forward=Quadratic(1e-4, 1.0), backward=Quadratic(3e-4, 1.0))
    spec = PackSpec(lengths=tuple(lengths), cap=8192, num_replicas=2, microbatches=(2, 4),
                    cost=cost, method="1f1b")
    result = pack(base(p=2), spec)
    assert_complete(result)
    # Each replica fills the microbatches asked for (it has the samples for them).
    counts = [len(r.microbatches) for r in result.packed.replicas]
    assert counts == [2, 4]
    profile = result.packed.replicas[1].profile
    assert profile is not None and isinstance(profile.t_b, list)
    assert len(profile.t_b) == 2 and len(profile.t_b[0]) == counts[1]  # type: ignore[arg-type]


def test_naive_packing_runs_the_users_counts_too() -> None:
    # Fixed counts (the case: 6/8/10 for ppsched against naive's own 3/3/2 before):
    # both sides run them, so the speed-up compares like with like.
    lengths = lognormal(120, seed=3)
    spec = PackSpec(lengths=tuple(lengths), cap=32768, num_replicas=3,
                    microbatches=(6, 8, 10), cost=COST)
    result = pack(base(p=2), spec)
    assert_complete(result)
    assert [len(r.microbatches) for r in result.naive.replicas] == [6, 8, 10]
    assert [len(r.microbatches) for r in result.packed.replicas] == [6, 8, 10]
    # Naive keeps arrival order: replica by replica, dealt in turn.
    groups = naive_samples(lengths, 32768, 3, (6, 8, 10))
    flat = sorted((mb[0], mb) for group in groups for mb in group)
    assert [i for _, mb in flat for i in mb] == list(range(len(lengths)))


def test_naive_packing_falls_back_when_arrival_order_needs_more() -> None:
    # Arrival order needs three microbatches of 10 for [6, 6, 6]: two cannot be made, so
    # naive packing fills to the cap as without counts.
    assert naive_samples([6, 6, 6], 10, 1, (2,)) == [[[0], [1], [2]]]


def test_pack_samples_balances_replica_costs() -> None:
    lengths = lognormal(2000, seed=7)
    groups = pack_samples(lengths, COST, 32768, [40] * 4)
    work = [sum(COST.time([lengths[i]]) for mb in g for i in mb) for g in groups]
    naive = naive_samples(lengths, 32768, 4)
    naive_work = [sum(COST.time([lengths[i]]) for mb in g for i in mb) for g in naive]
    spread = (max(work) - min(work)) / min(work)
    assert spread < 1e-3
    assert spread < (max(naive_work) - min(naive_work)) / min(naive_work)
    assert all(sum(lengths[i] for i in mb) <= 32768 for g in groups for mb in g)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"lengths": (100, 9000)}, "lengths[1]"),
    ({"lengths": ()}, "lengths"),
    ({"lengths": (100, 0)}, "lengths[1]"),
    ({"cap": 0}, "cap"),
    ({"num_replicas": 0}, "replicas"),
    ({"num_replicas": 5}, "lengths"),
    ({"microbatches": (1,)}, "microbatches"),
    ({"microbatches": (2, 2, 2)}, "microbatches"),
    ({"microbatches": (3, 0)}, "microbatches[1]"),
    ({"reference_tokens": -1}, "reference_tokens"),
])
def test_bad_input_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    spec: dict[str, Any] = {"lengths": (3000, 5000, 2000, 7000), "cap": 8192,
                            "num_replicas": 2}
    spec.update(kwargs)
    with pytest.raises(ProfileError) as info:  # PackingError, LengthsError
        PackSpec(**spec)
    assert info.value.field == field
    assert "\n" not in str(info.value)


def test_a_matrix_base_profile_is_refused() -> None:
    matrix = base(p=2, num_microbatches=2, t_f=[[1.0, 2.0], [1.0, 2.0]])
    spec = PackSpec(lengths=(100, 200), cap=1000, num_replicas=1)
    with pytest.raises(PackingError, match=r"profile\.t_f"):
        pack(matrix, spec)


def test_imbalance_is_inf_when_a_naive_replica_gets_nothing() -> None:
    # Two samples fill one microbatch: naive packing (no counts given) leaves replica 1
    # without work.
    spec = PackSpec(lengths=(100, 200), cap=1000, num_replicas=2)
    result = pack(base(p=2), spec)
    assert math.isinf(result.naive.imbalance)
    assert result.naive.to_dict()["imbalance"] is None
    assert result.packed.imbalance < math.inf
