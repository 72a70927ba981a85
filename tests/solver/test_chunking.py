"""with_chunks: the same model re-cut into several chunks per rank."""

from __future__ import annotations

import pytest
from ppsched.solver.model.chunking import with_chunks
from ppsched.solver.model.errors import ProfileError
from ppsched.solver.model.profile import load_profile, parse_profile


def test_scalar_profile_halves_per_stage_values() -> None:
    base = load_profile("profiles/gpt1.5b-p8-m24.json")
    cut = with_chunks(base, 2, "v")
    assert (cut.num_chunks, cut.placement, cut.name) == (2, "v", "gpt1.5b-p8-m24-v2")
    problem = cut.problem
    assert problem.num_stages == 16
    assert problem.t_f == (18.5 / 2,) * 16
    assert problem.m_w == (0.45 / 2,) * 16
    assert problem.t_comm == (0.6,) * 15
    assert problem.memory_limit == base.problem.memory_limit
    # Every rank runs the same total work as before the cut.
    assert problem.busy_per_rank == pytest.approx(base.problem.busy_per_rank)


def test_per_stage_lists_split_in_model_order() -> None:
    base = parse_profile({"num_ranks": 3, "num_microbatches": 4, "t_f": [2.0, 4.0, 6.0],
                          "t_b": 1.0, "t_w": 1.0, "t_comm": [0.1, 0.2], "m_b": [3.0, 3, 3],
                          "m_w": 1.0})
    cut = with_chunks(base, 2, "loop").problem
    assert cut.t_f == (1.0, 1.0, 2.0, 2.0, 3.0, 3.0)
    assert cut.m_b == (1.5,) * 6
    assert cut.stage_to_rank == (0, 1, 2, 0, 1, 2)
    # DESIGN.md 6.6: the list gives the links 0-1 (0.1) and 1-2 (0.2); each transfer pays
    # the link it crosses, and the wrap-around 2 -> 0 the largest link.
    assert cut.t_comm == (0.1, 0.2, 0.2, 0.1, 0.2)


def test_v_cut_charges_each_transfer_the_link_it_crosses() -> None:
    # Alternating slow links (issue 27): the V's way back crosses the same links as its
    # way down, in reverse; the turn at the last rank stays on it and pays nothing.
    links = [1.0, 9.0, 1.0, 9.0, 1.0]
    base = parse_profile({"num_ranks": 6, "num_microbatches": 6, "t_f": 1.0, "t_b": 1.0,
                          "t_w": 1.0, "t_comm": links, "m_b": 1.0, "m_w": 0.5})
    cut = with_chunks(base, 2, "v").problem
    assert cut.stage_to_rank == (0, 1, 2, 3, 4, 5, 5, 4, 3, 2, 1, 0)
    for k in range(11):
        a, b = cut.stage_to_rank[k], cut.stage_to_rank[k + 1]
        assert cut.comm(k, k + 1) == (0.0 if a == b else links[min(a, b)])
    assert cut.t_comm == (1.0, 9.0, 1.0, 9.0, 1.0, 0.0, 1.0, 9.0, 1.0, 9.0, 1.0)


def test_per_microbatch_latencies_follow_their_links() -> None:
    base = parse_profile({"num_ranks": 2, "num_microbatches": 2, "t_f": 1.0, "t_b": 1.0,
                          "t_w": 1.0, "t_comm": [[0.5, 2.0]], "m_b": 1.0, "m_w": 0.5})
    loop = with_chunks(base, 2, "loop").problem
    assert loop.t_comm_mb == ((0.5, 2.0), (0.5, 2.0), (0.5, 2.0))
    v = with_chunks(base, 2, "v").problem
    assert v.t_comm_mb == ((0.5, 2.0), (0.0, 0.0), (0.5, 2.0))


def test_one_rank_with_an_empty_latency_list_cuts() -> None:
    # One rank has no boundary: its latency list may be empty, and the cut's boundaries
    # all lie on the rank (this raised an IndexError from `ppsched solve --layouts v`).
    one = parse_profile({"num_ranks": 1, "num_microbatches": 2, "t_f": [1.0], "t_b": [1.0],
                         "t_w": [1.0], "t_comm": [], "m_b": [1.0], "m_w": [0.0],
                         "memory_limit": 1.5})
    for placement in ("v", "loop"):
        cut = with_chunks(one, 2, placement)
        assert cut.problem.t_comm == (0.0,)
        assert cut.problem.comm(0, 1) == 0.0


def test_one_chunk_is_the_profile_itself() -> None:
    base = load_profile("profiles/uniform-p4-m8.json")
    assert with_chunks(base, 1, None) is base


@pytest.mark.parametrize(("chunks", "placement", "field"), [
    (2, None, "placement"), (2, "zigzag", "placement"), (3, "v", "placement"),
    (0, "loop", "num_chunks")])
def test_bad_requests_name_the_field(chunks: int, placement: str | None, field: str) -> None:
    base = load_profile("profiles/uniform-p4-m8.json")
    with pytest.raises(ProfileError) as info:
        with_chunks(base, chunks, placement)
    assert info.value.field == field


def test_refuses_to_recut_a_chunked_profile() -> None:
    cut = with_chunks(load_profile("profiles/uniform-p4-m8.json"), 2, "loop")
    with pytest.raises(ProfileError, match="num_chunks"):
        with_chunks(cut, 2, "v")
