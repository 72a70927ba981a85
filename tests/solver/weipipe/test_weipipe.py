"""WeiPipe model: the slides' closed forms over grids of (p, n) and times, memory rows,
communication volume, named profile errors and the validator."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ppsched.solver.model.errors import ProfileError, ScheduleInvalid
from ppsched.solver.weipipe import SCHEDULES, build_program, parse_weipipe_profile, simulate_weipipe
from ppsched.solver.weipipe.schedules import WOp
from ppsched.solver.weipipe.simulator import validate_program

GRID = list(itertools.product((2, 3, 4, 8), (2, 3, 5)))  # (p, n): n >= 2 reaches steady state
TIMES = [(1.0, 1.0, 1.0), (1.0, 1.3, 0.7), (2.0, 1.5, 0.5), (1.0, 2.0, 1.0)]


def _profile(p: int, n: int, t: tuple[float, float, float], **extra: object):
    data = dict(num_ranks=p, num_microbatches=n, t_f=t[0], t_b=t[1], t_w=t[2],
                weight_bytes=1.0, grad_bytes=1.0, activation_bytes=1.0, bandwidth=1e12)
    data.update(extra)
    return parse_weipipe_profile(data)


@pytest.mark.parametrize(("p", "n"), GRID)
@pytest.mark.parametrize("t", TIMES)
def test_interleave_bubble_is_the_slides_form(p: int, n: int, t: tuple[float, ...]) -> None:
    result = simulate_weipipe(_profile(p, n, t), "weipipe-interleave")
    big_n = p * n  # the slides' N counts every microbatch of the step
    assert result.bubble_rate == pytest.approx((p - 1) / (big_n + p - 1))
    assert result.makespan == pytest.approx((big_n + p - 1) * sum(t))


@pytest.mark.parametrize(("p", "n"), GRID)
@pytest.mark.parametrize("t", TIMES)
def test_zb1_bubble_is_the_slides_form(p: int, n: int, t: tuple[float, ...]) -> None:
    t_f, t_b, t_w = t
    assert t_b <= t_f + t_w  # the form's premise: B alone is not the longest ring step
    result = simulate_weipipe(_profile(p, n, t), "weipipe-zb1")
    big_n = p * n
    assert result.bubble_rate == pytest.approx((p - 1) / (big_n * (1 + t_b / (t_f + t_w))
                                                          + p - 1))


@pytest.mark.parametrize(("p", "n"), GRID)
def test_zb1_bubble_when_b_dominates(p: int, n: int) -> None:
    # In general the fill costs (p-1) times the longest ring step, max(T_B, T_F+T_W).
    t_f, t_b, t_w = 1.0, 3.0, 0.5
    result = simulate_weipipe(_profile(p, n, (t_f, t_b, t_w)), "weipipe-zb1")
    assert result.makespan == pytest.approx(p * n * (t_f + t_b + t_w)
                                            + (p - 1) * max(t_b, t_f + t_w))


@pytest.mark.parametrize(("p", "n"), GRID)
def test_zb2_beats_zb1_over_several_steps(p: int, n: int) -> None:
    t = (1.0, 1.3, 0.7)
    one = simulate_weipipe(_profile(p, n, t, num_iterations=3), "weipipe-zb1")
    two = simulate_weipipe(_profile(p, n, t, num_iterations=3), "weipipe-zb2")
    assert one.bubble_rate == pytest.approx(simulate_weipipe(_profile(p, n, t),
                                                             "weipipe-zb1").bubble_rate)
    assert two.bubble_rate < one.bubble_rate


@pytest.mark.parametrize(("p", "n"), GRID)
def test_memory_rows(p: int, n: int) -> None:
    w, d, a, b, alpha = 3.0, 2.0, 5.0, 0.25, 0.4
    prof = _profile(p, n, (1.0, 1.0, 1.0), weight_bytes=w, grad_bytes=d,
                    activation_bytes=a, boundary_bytes=b, alpha=alpha)
    peak = {name: simulate_weipipe(prof, name).peak_memory for name in SCHEDULES}
    two = 2 if p > 1 else 1  # distinct weight chunks in a step (F's and the backward's)
    # Slides, WeiPipe-Interleave: (G*M_B + 2*M_W + M_D)/P + G*M_A, per chunk b, w, d, a.
    assert peak["weipipe-interleave"] == pytest.approx((b + two * w + d + p * a,) * p)
    # Ours (the slides' WZB rows assume other in-step orders, see schedules.py):
    assert peak["weipipe-zb1"] == pytest.approx((b + two * w + d + p * a,) * p)
    assert peak["weipipe-zb2"] == pytest.approx((max(b, d) + w + p * a,) * p)
    assert peak["weipipe-naive"] == pytest.approx((b + w + d + p * a,) * p)


@pytest.mark.parametrize(("p", "n"), GRID)
def test_communication_volume(p: int, n: int) -> None:
    w, d = 3.0, 2.0
    prof = _profile(p, n, (1.0, 1.0, 1.0), weight_bytes=w, grad_bytes=d)
    sent = {name: simulate_weipipe(prof, name).comm_bytes[0] for name in SCHEDULES}
    big_n = p * n
    odd = p % 2  # with odd p one step a microbatch pairs a chunk with itself: one transfer
    # Interleave: 2 weight chunks + 1 gradient per ring step of T_F+T_BW: the slides'
    # 36PH^2 per T_F+T_BW (12H^2 weights per layer); no G or S in it.
    assert sent["weipipe-interleave"] == pytest.approx(big_n * (2 * w + d) - (n - 1) * odd * w)
    assert sent["weipipe-naive"] == pytest.approx(big_n * (2 * w + d))
    # WZB1: its B steps move a third weight chunk per chunk-microbatch (48H^2, slides 54H^2).
    assert sent["weipipe-zb1"] == pytest.approx(big_n * (3 * w + d) - (n - 1) * odd * w)
    # WZB2: W and the next F share their chunk, so a W step moves one weight chunk.
    assert sent["weipipe-zb2"] == pytest.approx(big_n * (2 * w + d) + p * w)


def test_transfer_bound_ring_steps() -> None:
    # A link too slow to hide the chunks: every ring step lasts the transfer.
    prof = _profile(4, 3, (1.0, 1.0, 1.0), weight_bytes=10.0, grad_bytes=10.0,
                    bandwidth=1.0, latency=0.5)
    result = simulate_weipipe(prof, "weipipe-interleave")
    steady = [s for s, step in enumerate(result.program) if len(step) == 2]
    assert all(result.end[1][s] - result.start[1][s] == pytest.approx(30.5) for s in steady)
    assert result.bubble_rate > 0.8


def test_slower_link_slows_the_step_on_its_rank() -> None:
    fast = _profile(4, 2, (1.0, 1.0, 1.0), bandwidth=1000.0)
    slow = _profile(4, 2, (1.0, 1.0, 1.0), bandwidth=[1000.0, 1000.0, 0.1, 1000.0])
    a = simulate_weipipe(fast, "weipipe-interleave")
    b = simulate_weipipe(slow, "weipipe-interleave")
    assert b.makespan > a.makespan
    assert max(b.transfer[2]) > max(b.transfer[0])


def test_one_rank_has_no_ring() -> None:
    result = simulate_weipipe(_profile(1, 3, (1.0, 2.0, 1.0)), "weipipe-zb1")
    assert result.bubble_rate == pytest.approx(0.0)
    assert result.comm_bytes == (0.0,)


@pytest.mark.parametrize(("data", "field"), [
    ({"num_ranks": 0}, "num_ranks"),
    ({"t_f": -1.0}, "t_f"),
    ({"t_b": [1.0, 2.0]}, "t_b"),
    ({"bandwidth": 0.0}, "bandwidth"),
    ({"bandwidth": [1.0, 1.0, 0.0, 1.0]}, "bandwidth[2]"),
    ({"alpha": 1.5}, "alpha"),
    ({"latency": -1.0}, "latency"),
    ({"colour": "red"}, "colour"),
    ({"t_w": "fast"}, "t_w"),
])
def test_bad_profile_names_the_field(data: dict, field: str) -> None:
    base = dict(num_ranks=4, num_microbatches=2, t_f=1.0, t_b=1.0, t_w=1.0,
                weight_bytes=1.0, grad_bytes=1.0, activation_bytes=1.0, bandwidth=1.0)
    base.update(data)
    with pytest.raises(ProfileError) as info:
        parse_weipipe_profile(base)
    assert info.value.field == field
    assert "expected" in str(info.value)


def test_unknown_method_lists_the_names() -> None:
    with pytest.raises(ProfileError, match="weipipe-interleave"):
        build_program("weipipe-fast", 4, 2)


def test_validator_catches_misordered_and_missing_ops() -> None:
    program = build_program("weipipe-zb1", 3, 2)
    swapped = [step for step in program]
    # Move the first B before the forward it depends on; drop a W.
    b_step = next(s for s, step in enumerate(swapped) if step[0].kind == "B")
    swapped.insert(0, swapped.pop(b_step))
    swapped = [tuple(op for op in step if op != WOp("W", 0, 1)) for step in swapped]
    with pytest.raises(ScheduleInvalid) as info:
        validate_program(swapped, 3, 2)
    kinds = {v.kind for v in info.value.violations}
    assert kinds == {"deadlock", "missing"}


@pytest.mark.parametrize("name", list(SCHEDULES))
@pytest.mark.parametrize(("p", "n", "iterations"), [(1, 1, 1), (2, 1, 2), (4, 3, 2), (6, 2, 1)])
def test_every_program_validates(name: str, p: int, n: int, iterations: int) -> None:
    program = build_program(name, p, n, iterations)
    validate_program(program, p, n, iterations)
    ops = [op for step in program for op in step]
    assert len(ops) == len(set(ops))


@settings(max_examples=60, deadline=None)
@given(p=st.integers(1, 5), n=st.integers(1, 3), data=st.data(),
       name=st.sampled_from(sorted(SCHEDULES)), iterations=st.integers(1, 2))
def test_random_chunks_keep_the_ring_rules(p: int, n: int, data: st.DataObject, name: str,
                                           iterations: int) -> None:
    times = st.lists(st.floats(0.0, 5.0), min_size=p, max_size=p)
    prof = parse_weipipe_profile(dict(
        num_ranks=p, num_microbatches=n, num_iterations=iterations,
        t_f=data.draw(times), t_b=data.draw(times), t_w=data.draw(times),
        weight_bytes=data.draw(times), grad_bytes=data.draw(times), activation_bytes=1.0,
        bandwidth=data.draw(st.lists(st.floats(0.1, 10.0), min_size=p, max_size=p))))
    result = simulate_weipipe(prof, name)
    steps = len(result.program)
    for r in range(p):
        for s in range(steps):
            length = result.end[r][s] - result.start[r][s]
            assert length == pytest.approx(max(result.compute[r][s], result.transfer[r][s]))
            if s:
                assert result.start[r][s] >= result.end[r][s - 1] - 1e-9
            if r:
                assert result.start[r][s] >= result.end[r - 1][s] - 1e-9
    assert result.makespan >= max(result.busy) - 1e-9
    assert 0.0 <= result.bubble_rate < 1.0 or result.makespan == 0.0
