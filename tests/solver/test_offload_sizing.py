"""Sizing the copies (solver/model/offload_sizing.py): the ZB repository's offload time ratio
against its test vectors, copy times from bytes, and named errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from ppsched.api.offload_options import with_offload_options
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.offload_sizing import (
    copy_time_ms,
    offload_time_ratio,
    with_offload,
    with_offload_bandwidth,
)
from ppsched.solver.model.profile import load_profile, parse_profile

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


@pytest.mark.parametrize(("tflops", "bandwidth", "hidden", "seq", "k"), [
    (220, 15, 4096, 4096, 0.8526),  # A100
    (220, 15, 8192, 4096, 0.4591),
    (220, 15, 4096, 16384, 0.5968),
    (440, 21, 4096, 4096, 1.2179),  # H100
    (440, 21, 8192, 4096, 0.6558),
])
def test_offload_time_ratio_matches_the_zb_vectors(tflops: float, bandwidth: float,
                                                   hidden: int, seq: int, k: float) -> None:
    assert offload_time_ratio(hidden, seq, tflops, bandwidth) == pytest.approx(k, abs=5e-5)


def test_copy_time_of_bytes() -> None:
    assert copy_time_ms(30e9, 15) == pytest.approx(2000.0)  # 30 GB at 15 GB/s: 2 s
    assert copy_time_ms(0, 15) == 0.0


@pytest.mark.parametrize(("call", "field"), [
    (lambda: copy_time_ms(1e6, 0), "bandwidth_GB_per_s"),
    (lambda: copy_time_ms(-1, 10), "num_bytes"),
    (lambda: copy_time_ms(math.nan, 10), "num_bytes"),
    (lambda: offload_time_ratio(0, 4096, 220, 15), "hidden"),
    (lambda: offload_time_ratio(4096, -1, 220, 15), "seq"),
    (lambda: offload_time_ratio(4096, 4096, math.inf, 15), "tflops"),
    (lambda: offload_time_ratio(4096, 4096, 220, 0), "bandwidth_GB_per_s"),
])
def test_bad_sizes_are_named(call: object, field: str) -> None:
    with pytest.raises(ProfileError) as info:
        call()  # type: ignore[operator]
    assert info.value.field == field


def test_with_offload_sets_both_copy_times() -> None:
    profile = load_profile(PROFILES / "gpt1.5b-p8-m24.json")
    problem = with_offload(profile, 0.5).problem
    assert problem.can_offload
    for s in range(problem.num_stages):
        expected = 0.5 * (problem.t_f[s] + problem.t_b[s])
        assert problem.t_offload[s] == pytest.approx(expected)
        assert problem.t_reload[s] == pytest.approx(expected)


@pytest.mark.parametrize("ratio", [-0.1, math.nan, math.inf, True, "0.5"])
def test_a_bad_offload_ratio_is_named(ratio: object) -> None:
    profile = load_profile(PROFILES / "uniform-p4-m8.json")
    with pytest.raises(ProfileError) as info:
        with_offload(profile, ratio)  # type: ignore[arg-type]
    assert info.value.field == "offload_ratio"
    assert info.value.value is ratio or (isinstance(ratio, float) and math.isnan(ratio))
    assert ">= 0" in info.value.accepted


def test_with_offload_bandwidth_sizes_each_stage_from_its_activation() -> None:
    data = json.loads((PROFILES / "uniform-p4-m8.json").read_text())
    data.update(m_b=[2.0, 1.0, 1.0, 0.5], m_keep=[0.5, 0.0, 0.0, 0.0])
    problem = with_offload_bandwidth(parse_profile(data), 10.0, 2**30).problem
    gib_ms = 2**30 / 10e9 * 1e3  # ms to copy one GiB at 10 GB/s
    assert problem.t_offload == pytest.approx((1.5 * gib_ms, gib_ms, gib_ms, 0.5 * gib_ms))
    assert problem.t_reload == problem.t_offload


def test_offload_options_are_one_sizing_and_a_node_size() -> None:
    profile = load_profile(PROFILES / "gpt1.5b-p8-m24.json")
    assert with_offload_options(profile) == profile
    by_ratio = with_offload_options(profile, offload_ratio=0.5, gpus_per_node=4)
    assert by_ratio.problem.t_offload == with_offload(profile, 0.5).problem.t_offload
    assert by_ratio.gpus_per_node == 4
    by_link = with_offload_options(profile, host_bandwidth=20.0, memory_unit_bytes=2.0**20)
    assert by_link.problem.t_reload == with_offload_bandwidth(
        profile, 20.0, 2.0**20).problem.t_reload
    with pytest.raises(ProfileError) as both:
        with_offload_options(profile, offload_ratio=0.5, host_bandwidth=20.0)
    assert both.value.field == "host_bandwidth"
    assert "one way to size the copies" in str(both.value)
