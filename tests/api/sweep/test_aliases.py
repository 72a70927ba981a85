"""A sweep grid may name methods by torch's schedule names."""

from __future__ import annotations

import pytest
from ppsched.api.sweep.grid import GridError, load_grid

from tests.api.sweep.conftest import WriteGrid


def test_torch_names_in_a_grid_resolve_to_ours(write_grid: WriteGrid) -> None:
    grid = load_grid(write_grid("profiles: [{UNIFORM}]\nmethods: [GPipe, 1F1B, gpipe]\n"))
    assert grid.methods == ("gpipe", "1f1b")


def test_a_torch_schedule_we_do_not_build_is_refused_with_the_csv_route(
        write_grid: WriteGrid) -> None:
    path = write_grid("profiles: [{UNIFORM}]\nmethods:\n  - LoopedBFS\n")
    with pytest.raises(GridError, match=r"line 3: unknown method 'LoopedBFS'"
                       r".*ppsched simulate FILE.csv"):
        load_grid(path)
