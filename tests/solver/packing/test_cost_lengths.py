"""The cost model (scales, the least-squares fit, named errors) and reading lengths."""

from __future__ import annotations

import json

import pytest
from ppsched.solver.packing.cost import (
    CostModel,
    CostModelError,
    Quadratic,
    fit_quadratic,
    parse_coefficients,
)
from ppsched.solver.packing.lengths import LengthsError, check_lengths, read_lengths


def test_scales_relative_to_the_reference_sample():
    cost = CostModel(forward=Quadratic(1e-3, 1.0), memory_per_token=2.0)
    # Two samples of 1000 tokens: 2 * (1000 + 1000) = 4000; the reference 2000 tokens:
    # 4000 + 2000 = 6000 (attention is per sample, so packing halves it).
    f, b, w, k = cost.scales([1000, 1000], 2000)
    assert f == pytest.approx(4000 / 6000)
    assert (b, w) == (f, f)
    assert k == 1.0
    assert cost.memory([1000, 1000]) == 4000.0
    assert cost.uniform_kinds


def test_own_backward_coefficients():
    cost = CostModel(forward=Quadratic(0.0, 1.0), backward=Quadratic(1.0, 0.0),
                     weight=Quadratic(0.0, 3.0))
    assert not cost.uniform_kinds
    f, b, w, _ = cost.scales([10, 10], 10)
    assert (f, b, w) == (2.0, 2.0, 2.0)
    f, b, w, _ = cost.scales([20], 10)
    assert (f, b, w) == (2.0, 4.0, 2.0)
    assert CostModel(forward=Quadratic(1, 2), backward=Quadratic(2, 4)).uniform_kinds


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"forward": Quadratic(-1.0, 1.0)}, "cost.a"),
    ({"forward": Quadratic(0.0, 0.0)}, "cost"),
    ({"memory_per_token": 0.0}, "cost.c"),
    ({"backward": Quadratic(1.0, float("nan"))}, "cost_b.b"),
])
def test_bad_cost_models_name_the_field(kwargs, field):
    with pytest.raises(CostModelError) as info:
        CostModel(**kwargs)
    assert info.value.field == field


def test_fit_recovers_exact_coefficients():
    points = [(s, 2e-4 * s * s + 0.5 * s) for s in (512, 1024, 4096, 8192)]
    q = fit_quadratic(points)
    assert q.a == pytest.approx(2e-4)
    assert q.b == pytest.approx(0.5)


def test_fit_clamps_negative_coefficients():
    # Times falling with the square: the unconstrained a < 0; the fit keeps a = 0.
    q = fit_quadratic([(1.0, 1.0), (2.0, 1.5), (4.0, 2.0)])
    assert q.a == 0.0 and q.b > 0
    with pytest.raises(CostModelError, match="points"):
        fit_quadratic([(100.0, 1.0), (100.0, 2.0)])
    with pytest.raises(CostModelError, match=r"points\[1\]"):
        fit_quadratic([(100.0, 1.0), (-5.0, 2.0)])


def test_parse_coefficients():
    assert parse_coefficients("1e-4, 2, 3", "cost", 3) == (1e-4, 2.0, 3.0)
    with pytest.raises(CostModelError, match="'cost'"):
        parse_coefficients("1,x,3", "cost", 3)
    with pytest.raises(CostModelError, match="2 comma-separated"):
        parse_coefficients("1,2,3", "cost_b", 2)


def test_check_lengths():
    assert check_lengths([3, 4.0]) == [3, 4]
    for bad, field in (([], "lengths"), ([1, 0], "lengths[1]"), ([2.5], "lengths[0]"),
                       ([True], "lengths[0]"), (["7"], "lengths[0]")):
        with pytest.raises(LengthsError) as info:
            check_lengths(bad)
        assert info.value.field == field


def test_read_lengths_text_jsonl_parquet(tmp_path):
    text = tmp_path / "lengths.txt"
    text.write_text("10\n20\n\n30\n")
    assert read_lengths(text) == [10, 20, 30]
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in (
        {"n": 5, "x": 1}, {"n": 7}, {"n": [1, 2, 3]}, {"n": "abcd"})))
    assert read_lengths(jsonl, "n") == [5, 7, 3, 4]
    with pytest.raises(LengthsError, match="line 2"):
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"n": 1}\n{"m": 2}\n')
        read_lengths(bad, "n")
    with pytest.raises(LengthsError, match="'field'"):
        read_lengths(jsonl)
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "data.parquet"
    pq.write_table(pa.table({"num_tokens": [100, 200, 300]}), path)
    assert read_lengths(path, "num_tokens") == [100, 200, 300]
    with pytest.raises(LengthsError, match="column 'tokens'"):
        read_lengths(path, "tokens")
    with pytest.raises(LengthsError, match="a readable file"):
        read_lengths(tmp_path / "missing.txt")
    with pytest.raises(LengthsError, match="line 2"):
        broken = tmp_path / "broken.txt"
        broken.write_text("1\nabc\n")
        read_lengths(broken)
