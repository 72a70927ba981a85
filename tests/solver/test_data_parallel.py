"""FSDP and ODC step models (solver.advisor.data_parallel) against closed forms on tiny
cases, and the length sources (solver.advisor.lengths) with their named errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from ppsched.solver.advisor.costs import Cluster, ModelDims, ring_collective_s
from ppsched.solver.advisor.data_parallel import (
    FSDP,
    ODC,
    PIPELINE,
    Assumptions,
    compare,
    device_microbatches,
    fsdp_rounds,
    fsdp_step,
    odc_device_s,
    odc_step,
    odc_transfer_s,
    units,
)
from ppsched.solver.advisor.lengths import minibatches, parse_length_source
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.packing import LengthsError

MODEL = ModelDims(layers=2, hidden=1024, heads=8, seq_len=1, microbatch_size=1, vocab=1000)
# A slow GPU on fast links: every unit's compute outlasts its transfers, so the closed
# forms below need no max() (the test checks that it is so).
SLOW = dict(gpu_tflops=10.0, gpu_memory_gb=80.0, intra_node_gbps=450.0,
            inter_node_gbps=450.0, latency_us=10.0)


def cluster(p: int) -> Cluster:
    return Cluster(num_gpus=p, **SLOW)  # type: ignore[arg-type]


def compute(s: int) -> float:
    """One sample's compute over all units, from the formulas of costs.py by hand:
    per layer F = 2sP + 4s^2H, B = 2sP + 8s^2H, W = 2sP; the head 2sHV each of F, B, W."""
    flops = 10.0e12 * 0.5
    h, p_l, v = MODEL.hidden, MODEL.layer_params, MODEL.vocab
    layer = (6 * s * p_l + 12 * s * s * h) / flops
    return MODEL.layers * layer + 3 * 2 * s * h * v / flops


def test_units_are_the_cost_formulas() -> None:
    u = units(MODEL, cluster(2))
    for s in (1, 700, 3000):
        assert math.isclose(u.compute_s([s]), compute(s), rel_tol=1e-12)
    # packed samples are masked from each other: a microbatch costs the sum
    assert math.isclose(u.compute_s([700, 3000]), compute(700) + compute(3000), rel_tol=1e-12)


def _compute_bound(p: int, lengths: list[int]) -> None:
    u = units(MODEL, cluster(p))
    g = max(ring_collective_s(cluster(p), n) for n in u.unit_bytes)
    for s in lengths:
        assert all(f > g and b > 2 * g for f, b in u.unit_times([s]))


def test_equal_lengths_fsdp_and_odc_differ_by_sync_terms_only() -> None:
    p, s, n = 4, 2000, 3
    _compute_bound(p, [s])
    c, u = cluster(p), units(MODEL, cluster(p))
    devices = [[[s]] * n for _ in range(p)]
    fsdp = fsdp_step(u, c, fsdp_rounds(u, devices, balanced=False))
    odc = odc_step(u, c, devices, efficiency=1.0)
    first_fsdp = ring_collective_s(c, u.unit_bytes[0])
    first_odc = odc_transfer_s(c, u.unit_bytes[0], 1.0)
    # compute-bound: every unit lasts its compute; each microbatch adds its first gather
    assert math.isclose(fsdp, n * (first_fsdp + compute(s)), rel_tol=1e-12)
    barrier = math.ceil(math.log2(p)) * c.latency_us * 1e-6
    assert math.isclose(odc, n * (first_odc + compute(s)) + barrier, rel_tol=1e-12)
    # the sync terms: the ring's p-1 latencies against ODC's one, and ODC's barrier
    assert math.isclose(fsdp - odc, n * (p - 2) * c.latency_us * 1e-6 - barrier,
                        rel_tol=1e-9)


def test_one_long_sequence_fsdp_waits_for_it_at_every_layer() -> None:
    p, long, short = 2, 6000, 2000
    _compute_bound(p, [long, short])
    c, u = cluster(p), units(MODEL, cluster(p))
    devices = [[[long]], [[short], [short]]]
    first = ring_collective_s(c, u.unit_bytes[0])
    # round 0 pairs the long sample with a short one: every unit waits for the long one
    fsdp = fsdp_step(u, c, fsdp_rounds(u, devices, balanced=False))
    assert math.isclose(fsdp, 2 * first + compute(long) + compute(short), rel_tol=1e-12)
    # ODC: each device alone, then one barrier
    one = odc_transfer_s(c, u.unit_bytes[0], 1.0)
    odc = odc_step(u, c, devices, efficiency=1.0)
    assert math.isclose(odc, max(one + compute(long), 2 * (one + compute(short)))
                        + c.latency_us * 1e-6, rel_tol=1e-12)
    assert fsdp > odc


def test_transfer_bound_units_cost_the_transfer() -> None:
    # A fast GPU on a slow link: each unit lasts its transfers; ODC at efficiency e
    # pays 1/e of the ring's bandwidth term.
    c = Cluster(num_gpus=4, gpu_tflops=1e6, gpu_memory_gb=80.0, intra_node_gbps=1.0,
                inter_node_gbps=1.0, latency_us=0.0)
    u = units(MODEL, c)
    t = odc_device_s(u, c, [[16]], efficiency=0.5)
    gathers = [odc_transfer_s(c, n, 0.5) for n in u.unit_bytes]
    assert math.isclose(t, gathers[0] + 3 * sum(gathers), rel_tol=1e-9)
    assert math.isclose(gathers[0], 2 * ring_collective_s(c, u.unit_bytes[0]), rel_tol=1e-12)


def test_balancing_keeps_every_sample_once() -> None:
    lengths = [100, 5000, 300, 8000, 50, 2000, 900, 4000, 1200, 700, 3000, 60]
    u = units(MODEL, cluster(4))
    for cap in (None, 9000):
        for arrival in (False, True):
            devices = device_microbatches(u, lengths, 4, cap, arrival=arrival)
            got = sorted(s for d in devices for mb in d for s in mb)
            assert got == sorted(lengths) and len(devices) == 4
            if cap:
                assert all(sum(mb) <= cap for d in devices for mb in d)
    rounds = fsdp_rounds(u, device_microbatches(u, lengths, 4, None), balanced=True)
    assert [len(r) for r in rounds] == [4, 4, 4]
    assert rounds[0] == [[8000], [5000], [4000], [3000]]  # costliest together


def test_odc_gains_as_lengths_spread_and_not_when_equal() -> None:
    a = Assumptions(steps=2, odc_efficiency=1.0)
    c = cluster(8)
    equal = compare(MODEL, c, [[2000] * 32] * 2, a, (FSDP, ODC))
    by = {r.strategy: r.step_s for r in equal}
    assert by[FSDP] is not None and by[ODC] is not None
    assert math.isclose(by[FSDP], by[ODC], rel_tol=1e-3)
    spread = minibatches(parse_length_source("lognormal:median=2000,sigma=1.0"), 32, 2)
    by = {r.strategy: r.step_s for r in compare(MODEL, c, spread, a, (FSDP, ODC))}
    assert by[FSDP] is not None and by[ODC] is not None and by[FSDP] > 1.05 * by[ODC]


def test_pipeline_needs_a_shape_that_splits() -> None:
    c = Cluster(num_gpus=4, gpus_per_node=4, **SLOW)  # type: ignore[arg-type]
    odd = MODEL.model_copy(update={"layers": 3})
    [r] = compare(odd, c, [[1000] * 16], Assumptions(steps=1), (PIPELINE,))
    assert r.step_s is None and "3 layers do not split into 4 stages" in r.note
    [r] = compare(MODEL.model_copy(update={"layers": 4}), c, [[1000] * 16],
                  Assumptions(steps=1), (PIPELINE,))
    assert r.step_s is not None and r.step_s > 0 and r.note == "4 stages x 1 replicas"


@pytest.mark.parametrize(("text", "field"), [
    ("lognormal:median=0", "--lengths lognormal.median"),
    ("lognormal:sigma=-1", "--lengths lognormal.sigma"),
    ("lognormal:sigma=wide", "--lengths lognormal.sigma"),
    ("lognormal:mean=3", "--lengths lognormal[0]"),
    ("lognormal:median=1000,seed=1.5", "--lengths lognormal.seed"),
    ("lognormal:min=100,max=10", "--lengths lognormal.max"),
])
def test_bad_lognormal_names_the_key(text: str, field: str) -> None:
    with pytest.raises(LengthsError) as err:
        parse_length_source(text)
    assert f"'{field}'" in str(err.value)


def test_file_source_reads_minibatches_in_order_and_names_bad_lines(tmp_path: Path) -> None:
    good = tmp_path / "data.jsonl"
    good.write_text("".join(json.dumps({"length": n}) + "\n" for n in range(1, 11)))
    assert minibatches(parse_length_source(str(good)), 4, 8) == [[1, 2, 3, 4], [5, 6, 7, 8]]
    with pytest.raises(LengthsError, match="at least one minibatch of 16 samples"):
        minibatches(parse_length_source(str(good)), 16, 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"length": 5}\n{"tokens": 7}\n')
    with pytest.raises(LengthsError, match=r"bad\.jsonl line 2\.length"):
        minibatches(parse_length_source(str(bad)), 1, 2)
    neg = tmp_path / "neg.jsonl"
    neg.write_text('{"n": 5}\n{"n": -7}\n')
    with pytest.raises(LengthsError, match=r"neg\.jsonl\.n\[1\]"):
        minibatches(parse_length_source(str(neg), field="n"), 1, 2)


def test_assumptions_reject_bad_values() -> None:
    with pytest.raises(ProfileError, match="odc_efficiency"):
        Assumptions(odc_efficiency=0.0)
    with pytest.raises(ProfileError, match="samples_per_device"):
        Assumptions(samples_per_device=0)
    with pytest.raises(ProfileError, match="pipeline_stages"):
        Assumptions(pipeline_stages=1)
