"""WeiPipe views: the grid lists every step, the SVG has one box per op and one bar per
transfer, and parses as XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ppsched.solver.weipipe import parse_weipipe_profile, simulate_weipipe
from ppsched.solver.weipipe.render import weipipe_grid, weipipe_svg


def _result(bandwidth: float = 4.0):
    prof = parse_weipipe_profile(dict(num_ranks=3, num_microbatches=2, t_f=1.0, t_b=1.0,
                                      t_w=0.5, weight_bytes=1.0, grad_bytes=1.0,
                                      activation_bytes=1.0, bandwidth=bandwidth))
    return simulate_weipipe(prof, "weipipe-zb1")


def test_grid_shows_every_step_of_every_rank() -> None:
    result = _result()
    text = weipipe_grid(result)
    lines = text.splitlines()
    assert lines[0].startswith("weipipe-zb1: step time")
    assert len(lines) == 2 + 2 * 3
    assert "W2.0+F0.1" in lines[2]  # ZB1: the last chunk's W beside the next F of chunk 0
    assert f"@{result.start[2][0]:.4g}" in lines[7]


def test_svg_draws_ops_and_ring_transfers() -> None:
    result = _result()
    root = ET.fromstring(weipipe_svg(result))
    ns = "{http://www.w3.org/2000/svg}"
    rects = root.iter(f"{ns}rect")
    classes = [r.get("class") for r in rects]
    ops = sum(len(step) for step in result.program) * 3
    assert classes.count("op") == ops
    assert classes.count("link") == len(result.program) * 3
    titles = [t.text for t in root.iter(f"{ns}title")]
    assert any("rank 2 -> rank 0" in (t or "") for t in titles)  # the ring closes
