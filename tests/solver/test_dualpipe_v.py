"""DualPipe-V (solver/generators/dualpipe_v.py) against the DualPipe repository's closed
forms for identical stages, its op counts, and torch 2.13's ScheduleDualPipeV.

The README's table (deepseek-ai/DualPipe) gives, for PP stages (PP = 2p here, two per
rank): bubble ``(PP/2-1)(F&B + B - 3W)`` and activation memory ``PP+1`` microbatches of one
stage. Its F is our t_f, its B a *full* backward (our t_b + t_w), its W our t_w, and its
F&B an overlapped pair (our FB: overlap * (t_f + t_b + t_w)). So in our terms the bubble is
``(p-1)(FB + t_b - 2 t_w)``.

Under DESIGN.md's cost model (t_comm = 0) the bubble form holds exactly when t_f = t_b and
overlap = 1, for any t_w <= t_f: the form counts the warm-up and cool-down as if a plain F
and the input part of a backward took the same time, and as if an FB took as long as its
two parts. With t_f != t_b or overlap < 1 the measured bubble differs, lower or higher (p = 6,
m = 12, t_f, t_b, t_w = 3, 2, 1: 35 against the form's 30 at overlap 1); the memory
form holds for all times.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
from ppsched.solver.generators import get_generator
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.ops import FBOp, Op, parts
from ppsched.solver.model.problem import Problem
from ppsched.solver.model.profile import parse_profile
from ppsched.solver.sim.simulator import validate

from tests.needs import import_torch

RANKS = (1, 2, 3, 4, 6)


def _problem(p: int, m: int, t_f: float = 1.0, t_b: float = 1.0, t_w: float = 1.0,
             m_b: float = 1.0, overlap: float = 1.0) -> Problem:
    return parse_profile({"num_ranks": p, "num_microbatches": m, "num_chunks": 2,
                          "placement": "v", "t_f": t_f, "t_b": t_b, "t_w": t_w,
                          "m_b": m_b, "m_w": m_b / 2, "overlap": overlap}).problem


def _grid() -> list[tuple[int, int]]:
    return [(p, m) for p in RANKS for m in sorted({2 * p, 2 * p + 1, 3 * p, 4 * p + 2})]


@pytest.mark.parametrize(("p", "m"), _grid())
@pytest.mark.parametrize(("t_fb", "t_w"), [(1.0, 1.0), (1.0, 0.5), (2.0, 1.0), (1.0, 0.25),
                                           (3.0, 0.0)])
def test_bubble_closed_form(p: int, m: int, t_fb: float, t_w: float) -> None:
    problem = _problem(p, m, t_f=t_fb, t_b=t_fb, t_w=t_w)
    metrics = validate(problem, get_generator("dualpipe-v")(problem)).metrics
    assert metrics is not None
    fb = t_fb + t_fb + t_w  # overlap 1
    # README: (PP/2 - 1)(F&B + B - 3W), B the full backward t_b + t_w, PP = 2p.
    expected = (2 * p / 2 - 1) * (fb + (t_fb + t_w) - 3 * t_w)
    assert metrics.cost - max(metrics.busy) == pytest.approx(expected)
    assert max(metrics.busy) == m * 2 * (t_fb + t_fb + t_w)


@pytest.mark.parametrize(("p", "m"), _grid())
@pytest.mark.parametrize(("t_f", "t_b", "t_w", "overlap"), [
    (1.0, 1.0, 1.0, 1.0), (2.0, 3.0, 1.0, 0.8), (3.0, 2.0, 1.0, 0.5), (1.0, 2.0, 2.0, 0.6)])
def test_activation_memory_pp_plus_one(p: int, m: int, t_f: float, t_b: float, t_w: float,
                                       overlap: float) -> None:
    problem = _problem(p, m, t_f, t_b, t_w, m_b=2.0, overlap=overlap)
    metrics = validate(problem, get_generator("dualpipe-v")(problem)).metrics
    assert metrics is not None
    # PP + 1 = 2p + 1 microbatches' activations of one stage, on every rank.
    assert metrics.peak_memory == (2.0 * (2 * p + 1),) * p


@pytest.mark.parametrize(("p", "m"), _grid())
def test_op_counts_per_rank(p: int, m: int) -> None:
    orders = get_generator("dualpipe-v")(_problem(p, m))
    for r, ops in enumerate(orders):
        kinds = Counter(part.kind for op in ops for part in parts(op))
        assert kinds["F"] == 2 * m  # m per chunk
        assert kinds["B"] + kinds["BW"] == 2 * m
        assert kinds["W"] == kinds["B"]
        # The main step overlaps: every rank but the last runs 2(m-2p+r+1) + (p-r-1) FBs.
        fbs = sum(isinstance(op, FBOp) for op in ops)
        assert fbs == 2 * (m - 2 * p + r + 1) + (p - r - 1) - (r == p - 1)


def test_overlap_shortens_the_step() -> None:
    costs = []
    for overlap in (1.0, 0.8, 0.6):
        problem = _problem(4, 12, overlap=overlap)
        metrics = validate(problem, get_generator("dualpipe-v")(problem)).metrics
        assert metrics is not None
        costs.append(metrics.cost)
    assert costs[0] > costs[1] > costs[2]


def test_small_case_reads_like_dualpipe() -> None:
    orders = get_generator("dualpipe-v")(_problem(2, 4))
    assert [op.to_torch() for op in orders[1]] == [
        "1F0", "2F0", "1F1", "2F1", "1F2",  # steps 1-2: both chunks forward
        "2B0",  # step 4 on the last rank: F0 then a plain B1, not overlapped
        "(2F2;1B0)OVERLAP_F_B", "(1F3;2B1)OVERLAP_F_B", "(2F3;1B1)OVERLAP_F_B",
        "2B2", "1B2", "2I3", "1I3",  # step 6: drain, the second half split
        "2W3", "1W3"]  # step 8


@pytest.mark.parametrize(("p", "m"), [(2, 3), (4, 7), (1, 1)])
def test_refuses_too_few_microbatches(p: int, m: int) -> None:
    with pytest.raises(ProfileError, match="num_microbatches") as info:
        get_generator("dualpipe-v")(_problem(p, m))
    assert info.value.field == "num_microbatches"
    assert f">= 2 * num_ranks = {2 * p}" in str(info.value)


def test_refuses_one_chunk_profiles() -> None:
    problem = parse_profile({"num_ranks": 2, "num_microbatches": 4, "t_f": 1, "t_b": 1,
                             "t_w": 1, "m_b": 1, "m_w": 1}).problem
    with pytest.raises(ProfileError, match="num_chunks"):
        get_generator("dualpipe-v")(problem)


@pytest.mark.parametrize(("p", "m"), [(p, m) for p, m in itertools.product((1, 2, 3, 4), (8, 9))
                                      if m >= 2 * p])
def test_same_actions_as_torch_dualpipev(p: int, m: int) -> None:
    schedules = import_torch("torch.distributed.pipelining.schedules")
    # torch computes each rank's list in a method that needs no stages; call it alone.
    reference = schedules.ScheduleDualPipeV.__new__(schedules.ScheduleDualPipeV)
    reference.pp_group_size, reference._n_microbatches = p, m
    orders = get_generator("dualpipe-v")(_problem(p, m))
    for r in range(p):
        theirs = [str(a) for a in reference._calculate_single_rank_operations(r)]
        assert [op.to_torch() for op in orders[r]] == theirs


def test_plain_ops_only_outside_the_overlap() -> None:
    # Sanity of the representation: each FB's parts are an F and a BW of the rank.
    problem = _problem(3, 6)
    for r, ops in enumerate(get_generator("dualpipe-v")(problem)):
        for op in ops:
            for part in parts(op):
                assert isinstance(part, Op) and problem.stage_to_rank[part.stage] == r
