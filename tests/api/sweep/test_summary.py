"""The summary's best method and speed-up over 1F1B, on hand-made rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from ppsched.api.sweep.exports import unique_rows, write_csv
from ppsched.api.sweep.plots import write_plots
from ppsched.api.sweep.summary import best_per_config


def row(key: str, method: str, memory: str, cost: float | None, m: int = 8) -> dict[str, Any]:
    return {"key": key, "profile": "x", "p": 4, "m": m, "memory": memory,
            "memory_limit": 4.0 if memory == "1p" else 8.0,
            "memory_ratio": 1.0 if memory == "1p" else 2.0, "method": method,
            "objective": "cost", "status": "error" if cost is None else "heuristic",
            "error": "refused" if cost is None else None, "cost": cost,
            "bubble_rate": None if cost is None else 1 - 24 / cost, "peak_memory": 4.0,
            "lower_bound": 24.0, "gap": 0.0, "solver_wall_s": 0.0, "wall_s": 0.0,
            "schedule": None}


ROWS = [row("a", "1f1b", "1p", 33.0), row("b", "zb-h2", "1p", None),
        row("c", "heuristic", "1p", 30.0), row("d", "heuristic", "2p", 26.0),
        row("e", "zb-h2", "2p", 27.0)]


def test_best_method_and_speedup_against_1f1b_at_any_limit() -> None:
    one, two = best_per_config(ROWS)
    assert (one.config["memory"], one.method, one.cost, one.num_errors) == \
        ("1p", "heuristic", 30.0, 1)
    assert one.speedup == pytest.approx(33 / 30)
    # No 1F1B row at 2p: its cost does not depend on the limit, so the 1p row is used.
    assert (two.method, two.reference_cost) == ("heuristic", 33.0)
    assert two.speedup == pytest.approx(33 / 26)


def test_a_configuration_every_method_refused_has_no_best() -> None:
    (only,) = best_per_config([row("b", "zb-h2", "1p", None)])
    assert only.method is None and only.speedup is None and only.num_errors == 1


def test_unique_rows_keeps_the_first_of_each_key(tmp_path: Path) -> None:
    rows = unique_rows([*ROWS, row("a", "1f1b", "1p", 99.0)])
    assert len(rows) == 5 and rows[0]["cost"] == 33.0
    write_csv(rows, tmp_path / "r.csv")
    lines = (tmp_path / "r.csv").read_text().splitlines()
    assert lines[2].split(",")[lines[0].split(",").index("cost")] == ""  # None -> empty


def test_plots_need_more_than_one_x_value(tmp_path: Path) -> None:
    written = write_plots(ROWS, tmp_path)
    # Two memory ratios: a bubble-vs-memory curve; one m: no cost-vs-m figure.
    names = sorted(p.name for p in written)
    assert names == ["bubble_vs_memory.png", "bubble_vs_memory.svg", "speedup_heatmap.png",
                     "speedup_heatmap.svg"]


def test_plots_of_the_same_rows_are_byte_identical(tmp_path: Path) -> None:
    # Plots kept in git (docs/sweep-zb/) must change only when their data does: no date,
    # and SVG element ids from a fixed salt (matplotlib's default salt is a fresh uuid4).
    first = write_plots(ROWS, tmp_path / "first")
    second = write_plots(ROWS, tmp_path / "second")
    assert [p.name for p in first] == [p.name for p in second]
    assert any(p.suffix == ".svg" for p in first)
    changed = [a.name for a, b in zip(first, second, strict=True)
               if a.read_bytes() != b.read_bytes()]
    assert not changed, f"plots that differ between two runs of the same rows: {changed}"
