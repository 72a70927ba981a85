"""Helpers of the sweep tests: grid files written into a temporary folder."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
UNIFORM = ROOT / "profiles" / "uniform-p4-m8.json"
GPT = ROOT / "profiles" / "gpt1.5b-p8-m24.json"
HETERO = ROOT / "profiles" / "hetero-p8-m32.json"

WriteGrid = Callable[[str], Path]


@pytest.fixture
def write_grid(tmp_path: Path) -> WriteGrid:
    """Write a grid (dedented; {UNIFORM}, {GPT}, {HETERO} name the repo's profiles)."""

    def write(text: str) -> Path:
        path = tmp_path / "grid.yaml"
        path.write_text(textwrap.dedent(text).lstrip("\n").format(
            UNIFORM=UNIFORM, GPT=GPT, HETERO=HETERO))
        return path

    return write
