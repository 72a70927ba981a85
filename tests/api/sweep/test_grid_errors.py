"""Bad grid files are refused before any work, naming the line and the fix."""

from __future__ import annotations

import pytest
from ppsched.api.sweep.expand import expand_grid
from ppsched.api.sweep.grid import GridError, load_grid

from tests.api.sweep.conftest import WriteGrid

BASE = """
profiles: [{UNIFORM}]
methods: [1f1b, heuristic]
"""

CASES = [
    # (id, grid text after BASE, line, words the message must contain)
    ("unknown-axis", "axes:\n  m: [8]\n  pp: [4]\n", 5,
     ["unknown axis 'pp'", "did you mean 'p'", "the axes are p, m, v"]),
    ("unknown-key", "axis:\n  m: [8]\n", 3, ["unknown key 'axis'", "did you mean 'axes'"]),
    ("p-not-integer", "axes:\n  p: [4, 2.5]\n", 4, ["axis 'p'", "2.5", "integer >= 1"]),
    ("p-zero", "axes:\n  p:\n    - 0\n", 5, ["axis 'p'", "integer >= 1"]),
    ("bad-memory", "axes:\n  memory_limit: [1p, lots]\n", 4,
     ["'lots'", "multiple of p*m_b such as 1p"]),
    ("negative-t_comm", "axes:\n  t_comm: [-1]\n", 4, ["axis 't_comm'", "number >= 0"]),
    ("bad-scale-field", "axes:\n  scale.t_x: [2]\n", 4, ["unknown axis 'scale.t_x'"]),
    ("scale-stage-out-of-range", "axes:\n  scale.t_f[7]: [2]\n", 4,
     ["stage 7 does not exist at p = 4"]),
    ("empty-axis", "axes:\n  m: []\n", 4, ["axis 'm' has no values"]),
    ("empty-product", "axes:\n  m: [2]\nfilters:\n  - \"m > p\"\n", 5,
     ["expands to no rows", "filters drop all 2 rows"]),
    ("filter-unknown-name", "filters:\n  - \"mm > 2\"\n", 4,
     ["unknown name 'mm'", "the names are"]),
    ("filter-call", "filters:\n  - \"__import__('os')\"\n", 4, ["Call is not allowed"]),
    ("memory-below-need", "axes:\n  memory_limit: [0.2p]\n", 4,
     ["is impossible", "memory_limit", "add a filter"]),
    ("v-without-placement", "axes:\n  v: [1, 2]\n", 4, ["add `placement: [loop]`"]),
    ("v-placement-needs-2", "axes:\n  v: [3]\n  placement: [v]\n", 5,
     ["impossible", "V placement needs num_chunks = 2"]),
    ("bad-objective", "objective: speed\n", 3, ["objective 'speed'", "cost, makespan"]),
    ("work-limit-zero", "work_limit: 0\n", 3, ["work_limit 0", "finite number > 0"]),
]


@pytest.mark.parametrize("extra,line,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_grid_names_line_and_fix(write_grid: WriteGrid, extra: str, line: int,
                                     words: list[str]) -> None:
    path = write_grid(BASE + extra)
    with pytest.raises(GridError) as info:
        expand_grid(load_grid(path))
    message = str(info.value)
    assert message.startswith(f"{path}, line {line}: "), message
    for word in words:
        assert word in message, message


def test_unknown_method_is_named_with_the_list(write_grid: WriteGrid) -> None:
    path = write_grid("profiles: [{UNIFORM}]\nmethods:\n  - heuristic\n  - zb-h3\n")
    with pytest.raises(GridError, match=r"line 4: unknown method 'zb-h3' .*zb-h2"):
        load_grid(path)


def test_changing_p_of_a_per_stage_profile_is_refused(write_grid: WriteGrid) -> None:
    path = write_grid("profiles: [{HETERO}]\nmethods: [heuristic]\naxes:\n  p: [8, 16]\n")
    with pytest.raises(GridError) as info:
        expand_grid(load_grid(path))
    message = str(info.value)
    assert "line 4: axis 'p': 16 differs from the 8 ranks" in message
    assert "t_f, t_b, t_w, m_b, m_w are per-stage lists" in message
    assert "keep p at 8" in message


def test_yaml_syntax_error_names_the_line(write_grid: WriteGrid) -> None:
    path = write_grid("profiles: [{UNIFORM}]\nmethods: [heuristic\naxes:\n  m: [1]\n")
    with pytest.raises(GridError, match=r"line \d+: not valid YAML"):
        load_grid(path)


def test_missing_profile_file(write_grid: WriteGrid) -> None:
    path = write_grid("profiles: [nowhere.json]\nmethods: [heuristic]\n")
    with pytest.raises(GridError, match=r"line 1: profile nowhere.json: invalid 'profile'"):
        load_grid(path)
