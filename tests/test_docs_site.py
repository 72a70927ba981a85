"""The docs site builds with `mkdocs build --strict`: no broken link, no missing page, and
(through benchmarks/mkdocs_hooks.py) no figure that differs from its source."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import mkdocs_hooks

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_strict_with_every_section(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(site)], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    for section in ("getting-started", "cost-model", "solving", "layouts", "policies",
                    "packing", "advisor", "service", "service-api", "running", "benchmarks"):
        assert (site / section / "index.html").is_file(), section
    api = (site / "service-api" / "index.html").read_text()
    assert "POST /v1/schedules" in api and "422" in api


def test_the_api_reference_lists_each_route_with_its_statuses() -> None:
    document = {"info": {"version": "9"}, "paths": {"/v1/x": {"post": {
        "summary": "Do x", "requestBody": {"content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/X"}}}},
        "responses": {"200": {"description": "done"}, "422": {"description": "bad | input"}},
    }}}, "components": {"schemas": {"X": {"properties": {"n": {"type": "integer",
                                                               "description": "how many"}},
                                          "required": ["n"]}}}}
    text = mkdocs_hooks.openapi_markdown(document)
    assert "### `POST /v1/x`" in text
    assert "| 422 | bad \\| input | none |" in text
    assert "[X](#x) (`application/json`)" in text
    assert "| `n` | integer | yes | how many |" in text


def test_a_figure_that_differs_fails_the_build_naming_its_page() -> None:
    class Page:
        class file:  # the shape MkDocs passes
            src_uri = "x.md"

    with pytest.raises(Exception, match=r"docs/x.md:1: 12: a figure with no"):
        mkdocs_hooks.on_page_markdown("cost 12 here\n", Page(), None, None)
