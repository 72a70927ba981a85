"""The web page's Advisor tab in a real headless Chromium against a real uvicorn server
(the fixtures of test_web_page: Debian's chromium, a server process on a free port)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_web_page import browser, page, server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow


def test_advisor_tab_ranks_the_strategies(page: Any) -> None:  # noqa: F811
    assert page.is_hidden("#advise")
    page.click("#tab-advise")
    assert page.is_visible("#advise") and page.is_hidden("main")
    config = json.loads(page.input_value("#advise-config"))
    config["num_microbatches"] = 32
    page.fill("#advise-config", json.dumps(config))
    page.click("#advise-run")
    page.wait_for_selector("#advise-result[data-state='done']")
    rows = page.query_selector_all("#advise-result tr[data-strategy]")
    names = [row.get_attribute("data-strategy") for row in rows]
    assert {"1f1b", "zb-1p", "fsdp", "weipipe-interleave"} <= set(names)
    fits = [row.get_attribute("data-fits") for row in rows]
    assert fits == sorted(fits, reverse=True)  # what fits comes first ("true" > "false")
    first = [cell.inner_text() for cell in rows[0].query_selector_all("td")]
    assert first[0] == "1" and float(first[2]) > 0 and first[5] == "yes"
    # the assumptions follow the ranking, each with where it came from
    facts = {row.get_attribute("data-assumption"):
             [cell.inner_text() for cell in row.query_selector_all("td")]
             for row in page.query_selector_all("#advise-result tr[data-assumption]")}
    assert facts["num_microbatches"] == ["num_microbatches", "32", "config"]
    assert facts["fsdp_overlap"][2] == "default"
    page.click("#tab-schedules")
    assert page.is_visible("main") and page.is_hidden("#advise")


def test_advisor_tab_shows_the_services_message(page: Any) -> None:  # noqa: F811
    page.click("#tab-advise")
    config = json.loads(page.input_value("#advise-config"))
    config["cluster"]["mfu"] = 3
    page.fill("#advise-config", json.dumps(config))
    page.click("#advise-run")
    page.wait_for_selector("#advise-error:not([hidden])")
    message = page.inner_text("#advise-error")
    assert "cluster.mfu" in message and "3" in message, message
    assert page.get_attribute("#advise-result", "data-state") == "error"
    page.fill("#advise-config", "{ nope")
    page.click("#advise-run")
    page.wait_for_function("document.querySelector('#advise-error').textContent"
                           ".startsWith('config: not valid JSON')")
    assert page.get_attribute("#advise-result", "data-state") == "error"


_CARD_STYLE = ("background-color", "border-top-width", "border-top-style", "border-top-color",
               "border-top-left-radius", "padding-top", "padding-left")


def _box(tab: Any, selector: str) -> dict[str, float]:
    box = tab.locator(selector).first.bounding_box()
    assert box is not None, f"{selector} is not laid out"
    return dict(box)


def _style(tab: Any, selector: str, names: tuple[str, ...]) -> dict[str, str]:
    return dict(tab.eval_on_selector(
        selector, "(node, names) => { const s = getComputedStyle(node); "
        "return Object.fromEntries(names.map((n) => [n, s.getPropertyValue(n)])); }",
        list(names)))


def test_the_advisor_tab_is_laid_out_like_the_schedules_tab(
        page: Any, tmp_path: Path) -> None:  # noqa: F811
    """Layout, not pixels: the two tabs' frames, cards and tab states compared by their
    boxes and computed styles; a screenshot of each tab is kept as an artefact
    (PPSCHED_ARTIFACTS, else the test's temporary folder)."""
    tab_style = ("background-color", "font-weight", "border-top-color")
    # The Schedules tab: its frame, its first card, the tab bar, the tabs' states.
    main, editor = _box(page, "main"), _box(page, "section.editor")
    controls, bar = _box(page, "section.controls"), _box(page, "#tabs")
    active = _style(page, "#tab-schedules", tab_style)
    inactive = _style(page, "#tab-advise", tab_style)
    assert active != inactive  # the open tab is marked
    card = _style(page, "section.editor", _CARD_STYLE)
    folder = Path(os.environ.get("PPSCHED_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / "web-page-schedules.png"), full_page=True)

    page.click("#tab-advise")
    page.click("#advise-run")
    page.wait_for_selector("#advise-result[data-state='done']")
    # The open tab's marking moves with it.
    assert _style(page, "#tab-advise", tab_style) == active
    assert _style(page, "#tab-schedules", tab_style) == inactive
    assert _box(page, "#tabs") == bar
    # The same frame: the section spans <main>'s width, its cards start where the
    # Schedules cards start, below the tab bar by the same gap, and span both columns.
    advise, form = _box(page, "#advise"), _box(page, "#advise .advise-form")
    same = pytest.approx  # layout in CSS px, to a rounding
    assert (advise["x"], advise["width"]) == same((main["x"], main["width"]), abs=0.5)
    assert form["x"] == same(editor["x"], abs=0.5)
    assert form["y"] == same(editor["y"], abs=0.5)  # the same gap below the tab bar
    assert form["x"] + form["width"] == same(controls["x"] + controls["width"], abs=0.5)
    # The same cards: background, border, corner radius and padding.
    assert _style(page, "#advise .advise-form", _CARD_STYLE) == card
    assert _style(page, "#advise-result", _CARD_STYLE) == card
    result = _box(page, "#advise-result")
    assert (result["x"], result["width"]) == same((form["x"], form["width"]), abs=0.5)
    assert result["y"] > form["y"] + form["height"]
    # A bordered table across its card.
    table = _box(page, "#advise-result table")
    padding = float(card["padding-left"].removesuffix("px"))
    border = float(card["border-top-width"].removesuffix("px"))
    assert table["width"] == same(result["width"] - 2 * (padding + border), abs=1)
    assert _style(page, "#advise-result table", ("border-collapse",)) == {
        "border-collapse": "collapse"}
    for cell in ("#advise-result th", "#advise-result td"):
        style = _style(page, cell, ("border-top-width", "border-top-style",
                                    "border-left-width"))
        assert style == {"border-top-width": "1px", "border-top-style": "solid",
                         "border-left-width": "1px"}, (cell, style)
    shot = folder / "web-page-advisor.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000
