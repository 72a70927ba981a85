"""The web page in a real headless Chromium against a real uvicorn server.

The server runs as its own process on a free loopback port with a temporary database;
the browser (Debian's /usr/bin/chromium, driven by playwright-core's Python client) loads
`/`, solves the prefilled paper profile with two methods side by side, and checks the
Gantt charts, the headline figures, the downloads and the error shown for bad input.
A missing browser fails the test with the command that installs it; only
PPSCHED_SKIP_BROWSER=1 skips it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("PPSCHED_CHROMIUM", "/usr/bin/chromium")
# Flags known to work in containers without a display, GPU, sandbox or network.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
TIMEOUT_MS = 30_000

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real uvicorn process serving the app; yields its base URL."""
    with _serve(tmp_path_factory) as base:
        yield base


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The same with API keys configured (PPSCHED_API_KEYS)."""
    with _serve(tmp_path_factory, PPSCHED_API_KEYS=f"team-a={API_KEY}") as base:
        yield base


API_KEY = "key-of-team-a-page-7c2e91"


@contextmanager
def _serve(tmp_path_factory: pytest.TempPathFactory, **settings: str) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("service")
    port = _free_port()
    env = {**os.environ, "PPSCHED_DB_PATH": str(folder / "ppsched.sqlite3"), **settings}
    log_path = folder / "server.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "--factory", "ppsched.api.service.main:app_from_env",
             "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                pytest.fail(f"the server exited with {process.returncode}:\n"
                            f"{log_path.read_text()}")
            try:
                _get(f"{base}/healthz")
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the server did not answer /healthz in 30 s:\n"
                                f"{log_path.read_text()}")
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium with a fresh profile, or a failure saying how to get one."""
    if os.environ.get("PPSCHED_SKIP_BROWSER") == "1":
        pytest.skip("PPSCHED_SKIP_BROWSER=1")
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.fail(f"no Chromium at {CHROMIUM}: install it with "
                    "`apt-get install -y chromium` (or set PPSCHED_CHROMIUM to a Chromium "
                    "binary; PPSCHED_SKIP_BROWSER=1 skips the browser tests)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the Python package 'playwright' is missing: pip install -e '.[test]'")
    with sync_playwright() as playwright:
        # launch() gives every browser a fresh temporary user-data-dir.
        instance = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=CHROMIUM_ARGS)
        try:
            yield instance
        finally:
            instance.close()


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    context = browser.new_context(base_url=server, accept_downloads=True,
                                  viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto("/")
    page.wait_for_selector("body[data-ready='true']")
    yield page
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def _figures(panel: Any) -> dict[str, str]:
    return {cell.get_attribute("data-figure"): cell.inner_text()
            for cell in panel.query_selector_all("[data-figure]")}


def test_page_solves_prefilled_profile_side_by_side(page: Any, server: str) -> None:
    profile = json.loads(page.input_value("#profile"))
    assert profile["name"] == "gpt1.5b-p8-m24"
    methods = {option.get_attribute("value")
               for option in page.query_selector_all("#method-a option")}
    assert {"heuristic", "1f1b", "zb-h1"} <= methods
    assert page.input_value("#method-a") == "heuristic"

    page.select_option("#method-b", "1f1b")
    page.click("#solve")
    page.wait_for_selector("#result-a[data-state='done']")
    page.wait_for_selector("#result-b[data-state='done']")

    # One Gantt chart per method, one rect per op: p*v*m each of F, B and W for the
    # heuristic (which cuts the model in V here: v = 2); F and fused BW for 1F1B.
    p, m = profile["num_ranks"], profile["num_microbatches"]
    solved = page.request.get(page.get_attribute("#result-a [data-download='json']",
                                                 "href")).json()
    v = solved["profile"]["num_chunks"]
    assert v == 2 and solved["solver"]["layout"] == "v"
    assert len(page.query_selector_all("#result-a .chart svg rect.op")) == 3 * p * v * m
    assert len(page.query_selector_all("#result-b .chart svg rect.op")) == 2 * p * m

    heuristic = _figures(page.query_selector("#result-a"))
    one_f_one_b = _figures(page.query_selector("#result-b"))
    for figures in (heuristic, one_f_one_b):
        assert re.fullmatch(r"\d+(\.\d+)?", figures["cost"]), figures
        assert re.fullmatch(r"\d+\.\d\d%", figures["bubble_rate"]), figures
        assert re.fullmatch(r"\d+\.\d\d%", figures["gap"]), figures
        assert len(figures["peak_memory"].split()) == p, figures
    # The README's figures for this profile: 1F1B's bubble 0.2430, the heuristic's
    # 0.0705 at 1F1B's memory (the V cut), peak memory p*m_b = 8 on rank 0.
    assert one_f_one_b["bubble_rate"] == "24.30%"
    assert heuristic["bubble_rate"] == "7.05%"
    assert float(one_f_one_b["peak_memory"].split()[0]) == 8
    assert float(heuristic["cost"]) < float(one_f_one_b["cost"])
    comparison = page.inner_text("#comparison")
    assert "1f1b is" in comparison and "slower than heuristic" in comparison

    # The JSON download is the schedule the figures came from.
    href = page.get_attribute("#result-a [data-download='json']", "href")
    schedule = page.request.get(href).json()
    assert f"{schedule['metrics']['cost']:.4f}".rstrip("0").rstrip(".") == heuristic["cost"]
    assert len(schedule["ranks"]) == p

    # A real download through the browser: torch's CSV, one line per rank.
    with page.expect_download() as info:
        page.click("#result-b [data-download='csv']")
    download = info.value
    assert download.suggested_filename.endswith(".csv")
    lines = Path(download.path()).read_text().strip().splitlines()
    assert len(lines) == p and lines[0].startswith("0F0")


def test_page_shows_the_services_message_for_a_bad_profile(page: Any) -> None:
    profile = json.loads(page.input_value("#profile"))
    profile["t_f"] = -1
    page.fill("#profile", json.dumps(profile))
    page.click("#solve")
    page.wait_for_selector("#error:not([hidden])")
    message = page.inner_text("#error")
    assert "t_f" in message and "-1" in message, message
    assert page.get_attribute("#result-a", "data-state") == "error"


def test_page_refuses_text_that_is_not_json(page: Any) -> None:
    page.fill("#profile", "{ not json")
    page.click("#solve")
    page.wait_for_selector("#error:not([hidden])")
    assert page.inner_text("#error").startswith("profile: not valid JSON")
    assert page.is_hidden("#result-a")


def test_page_follows_a_long_ilp_run_as_a_job(page: Any) -> None:
    # A time limit above the service's synchronous one (10 s) makes the solve a job; on
    # this small profile CP-SAT proves its answer long before the limit.
    posts: list[int] = []
    page.on("response", lambda r: posts.append(r.status)
            if r.request.method == "POST" and r.url.endswith("/v1/schedules") else None)
    page.select_option("#example", "uniform-p4-m8")
    page.click("#load-example")
    assert json.loads(page.input_value("#profile"))["name"] == "uniform-p4-m8"
    page.select_option("#method-a", "ilp")
    page.fill("#time-limit", "30")
    page.click("#solve")
    # Wait on the job's end, not on a guess of how long a loaded machine takes; a failed
    # job fails the test with its message.
    page.wait_for_selector("#result-a[data-state='done'], #result-a[data-state='error']",
                           timeout=180_000)
    assert page.get_attribute("#result-a", "data-state") == "done", page.inner_text("#error")
    assert posts == [202]
    assert len(page.query_selector_all("#result-a .chart svg rect.op")) == 3 * 4 * 8
    figures = _figures(page.query_selector("#result-a"))
    assert figures["solver"].startswith("optimal"), figures
    assert figures["gap"] == "0.00%"


def _svg_number(page: Any, selector: str, attribute: str) -> float:
    value = page.get_attribute(selector, attribute)
    assert value is not None, (selector, attribute)
    return float(value)


def test_compared_charts_share_one_time_scale_in_a_full_width_view(page: Any) -> None:
    page.select_option("#method-b", "1f1b")
    page.click("#solve")
    page.wait_for_selector("#result-a[data-state='done']")
    page.wait_for_selector("#result-b[data-state='done']")
    a, b = "#result-a .chart svg", "#result-b .chart svg"
    # 1F1B's step is longer: both charts end at its end, at the same px per time unit.
    assert _svg_number(page, a, "data-time-max") == _svg_number(page, b, "data-time-max")
    assert _svg_number(page, a, "data-px-per-unit") == _svg_number(page, b, "data-px-per-unit")
    schedules = [page.request.get(page.get_attribute(f"#result-{x} [data-download='json']",
                                                     "href")).json() for x in "ab"]
    ends = [max(op["end"] for rank in s["ranks"] for op in rank) for s in schedules]
    assert _svg_number(page, a, "data-time-max") == pytest.approx(max(ends))
    # Rank 0's first F (t_f long in 1F1B, half of it in the heuristic's V cut) is drawn
    # to the same scale in both charts: its width is its duration times px per unit.
    first = [page.query_selector(f"{x} rect.op") for x in (a, b)]
    durations = [s["ranks"][0][0]["end"] - s["ranks"][0][0]["start"] for s in schedules]
    widths = [float(f.get_attribute("width")) for f in first]
    assert widths[0] / widths[1] == pytest.approx(durations[0] / durations[1], rel=1e-3)
    # The comparison is a larger view: the panels are stacked, each the results' width.
    results = page.query_selector("#results").bounding_box()
    boxes = [page.query_selector(f"#result-{x}").bounding_box() for x in "ab"]
    assert boxes[1]["y"] >= boxes[0]["y"] + boxes[0]["height"]
    for box in boxes:
        assert box["width"] >= 0.95 * results["width"]


def test_every_microbatch_label_is_drawn_and_the_time_axis_has_a_unit(page: Any) -> None:
    page.click("#solve")
    page.wait_for_selector("#result-a[data-state='done']")
    ops = page.query_selector_all("#result-a .chart svg rect.op")
    labels = page.query_selector_all("#result-a .chart svg text.label")
    stages = 16  # the default solve cuts the 8-rank profile in V at 1p (2 chunks a rank)
    assert len(labels) == len(ops) == 3 * stages * 24
    texts = [label.text_content() for label in labels]
    assert {str(j) for j in range(24)} == set(texts)
    assert sum(int(t) >= 10 for t in texts) == 3 * stages * 14
    # Each label is inside its bar (the chart scrolls sideways rather than clip them).
    sizes = {label.get_attribute("font-size") for label in labels}
    assert sizes <= {"8", "11"}, sizes
    axis = page.text_content("#result-a .chart svg .axis-title") or ""
    assert axis.startswith("time (") and "ms" in axis
    assert len(page.query_selector_all("#result-a .chart svg text.tick")) >= 5


def test_the_memory_override_is_written_into_the_profile_text(page: Any) -> None:
    page.fill("#memory-limit", "16")
    page.dispatch_event("#memory-limit", "change")
    assert json.loads(page.input_value("#profile"))["memory_limit"] == 16
    page.click("#solve")
    page.wait_for_selector("#result-a[data-state='done']")
    peaks = [float(x) for x in _figures(page.query_selector("#result-a"))["peak_memory"].split()]
    assert 8 < max(peaks) <= 16  # the 2p limit was solved, not the profile's 8
    page.fill("#memory-limit", "none")
    page.dispatch_event("#memory-limit", "change")
    assert json.loads(page.input_value("#profile"))["memory_limit"] is None


def test_an_error_shows_once_and_no_download_links_without_a_result(page: Any) -> None:
    profile = json.loads(page.input_value("#profile"))
    profile["t_f"] = -1
    page.fill("#profile", json.dumps(profile))
    page.select_option("#method-b", "1f1b")
    page.click("#solve")
    page.wait_for_selector("#result-a[data-state='error']")
    page.wait_for_selector("#result-b[data-state='error']")
    body = page.inner_text("body")
    assert body.count("invalid 'profile.t_f'") == 1, body
    assert page.inner_text("#error").startswith("heuristic, 1f1b: invalid 'profile.t_f'")
    for x in "ab":
        assert page.is_hidden(f"#result-{x} .downloads")
        assert page.get_attribute(f"#result-{x} [data-download='json']", "href") is None


def test_a_running_ilp_job_can_be_cancelled(page: Any) -> None:
    # Below 1F1B's memory the exact search cannot close its gap: it runs to its time limit
    # unless cancelled. Cancel keeps the best schedule found so far.
    deletes: list[str] = []
    page.on("request", lambda r: deletes.append(r.url) if r.method == "DELETE" else None)
    page.select_option("#method-a", "ilp")
    page.fill("#memory-limit", "6")
    page.fill("#time-limit", "120")
    page.click("#solve")
    # Cancel once the search reports progress: it then has a schedule to hand back (a job
    # cancelled before that ends 'cancelled' with no schedule, which the page reports).
    page.wait_for_selector("#result-a[data-state='running'][data-progress='true']")
    assert page.is_hidden("#result-a .downloads")  # no result yet, no links
    page.click("#result-a .cancel")
    page.wait_for_selector("#result-a[data-state='done'], #result-a[data-state='error']",
                           timeout=60_000)
    assert page.get_attribute("#result-a", "data-state") == "done", (
        page.inner_text("#result-a .status"), page.inner_text("#error"))
    assert len(deletes) == 1 and "/v1/jobs/" in deletes[0]
    assert page.get_attribute("#result-a", "data-result") == "cancelled"
    assert page.inner_text("#result-a .status").startswith("cancelled: the best schedule")
    assert page.is_hidden("#result-a .cancel")
    assert page.is_visible("#result-a .downloads")
    # Below 1F1B's memory the solver may also cut the model in two (a V layout, 2 stages
    # per rank): one bar per F, B and W of every stage and microbatch either way.
    bars = len(page.query_selector_all("#result-a .chart svg rect.op"))
    assert bars in (3 * 8 * 24, 3 * 16 * 24), bars


def test_unequal_microbatches_are_labelled_by_their_size(page: Any) -> None:
    # Input microbatch 0 costs 3 times each other one: 2.4 times the mean of 8.
    profile = {"name": "unequal", "num_ranks": 4, "num_microbatches": 8, "t_f": 10,
               "t_b": 10, "t_w": 5, "t_comm": 0, "m_b": 1, "m_w": 0.5,
               "microbatches": [{"scale": x} for x in (3, 1, 1, 1, 1, 1, 1, 1)]}
    page.fill("#profile", json.dumps(profile))
    page.click("#solve")
    page.wait_for_selector("#result-a[data-state='done']")
    href = page.get_attribute("#result-a [data-download='json']", "href")
    schedule = page.request.get(href).json()
    order = schedule.get("microbatch_order") or list(range(8))
    big = order.index(0)  # the scheduled number of input microbatch 0
    chart = "#result-a .chart svg"
    rects = page.query_selector_all(f"{chart} rect.op[data-microbatch='{big}']")
    stages = schedule["profile"]["num_ranks"] * schedule["profile"]["num_chunks"]
    assert len(rects) == 3 * stages
    assert {r.get_attribute("data-size") for r in rects} == {"2.4000"}
    others = page.query_selector_all(f"{chart} rect.op:not([data-microbatch='{big}'])")
    assert {r.get_attribute("data-size") for r in others} == {"0.8000"}
    title = rects[0].query_selector("title")
    assert title is not None
    assert "size 2.4x the mean, input microbatch 0" in (title.text_content() or "")
    labels = [t.text_content() for t in page.query_selector_all(f"{chart} text.label")]
    assert f"{big} (2.4x)" in labels


def test_page_works_with_api_keys(browser: Any, keyed_server: str) -> None:
    """With keys on, the page loads (it is open), says a key is needed, then solves and
    downloads with the key typed in its field (sent as Authorization: Bearer)."""
    context = browser.new_context(base_url=keyed_server, accept_downloads=True,
                                  viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto("/")
        page.wait_for_selector("#error:not([hidden])")
        assert "API key is required" in page.inner_text("#error")
        page.fill("#api-key", API_KEY)
        page.press("#api-key", "Tab")  # the change event: the page loads its lists
        page.wait_for_selector("body[data-ready='true']")
        assert page.is_hidden("#error")
        compare = [o.get_attribute("value") for o in page.query_selector_all("#method-b option")]
        assert compare[0] == "" and "1f1b" in compare and len(compare) == len(set(compare))
        page.select_option("#method-a", "1f1b")
        page.select_option("#method-b", "1f1b")
        page.click("#solve")
        page.wait_for_selector("#result-a[data-state='done']")
        with page.expect_download() as info:
            page.click("#result-a [data-download='csv']")
        download = info.value
        assert download.suggested_filename.endswith(".csv")
        lines = Path(download.path()).read_text().strip().splitlines()
        profile = json.loads(page.input_value("#profile"))
        assert len(lines) == profile["num_ranks"] and lines[0].startswith("0F0")
        # The key is kept for the tab: a reload needs no typing.
        page.reload()
        page.wait_for_selector("body[data-ready='true']")
        assert page.input_value("#api-key") == API_KEY
    finally:
        context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"
