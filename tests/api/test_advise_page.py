"""The web page's Advisor tab in a real headless Chromium against a real uvicorn server
(the fixtures of test_web_page: Debian's chromium, a server process on a free port)."""

from __future__ import annotations

import json
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
