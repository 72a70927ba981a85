"""Every endpoint against a real server process: solving, the cache, the views, the
checks, the catalog, health, metrics, errors and limits."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree
from typing import Any

import httpx
import pytest
from ppsched.solver.model.schedule import parse_schedule

from tests.api.service.conftest import EASY, REPO, Server, assert_error, profile

NAMED = ("gpipe", "1f1b", "zb-h1", "zb-h2")


def post(server: Server, body: dict[str, Any]) -> httpx.Response:
    return server.client.post("/v1/schedules", json=body)


@pytest.mark.parametrize("method", ["heuristic", *NAMED])
def test_solve_returns_a_valid_schedule_with_links(server: Server, method: str) -> None:
    response = post(server, {"profile": EASY, "method": method})
    assert response.status_code == 200, response.text
    body = response.json()
    schedule = parse_schedule(body)  # the DESIGN.md section 4 JSON, plus id and links
    assert len(schedule.ranks) == EASY["num_ranks"]
    assert body["links"] == {"self": f"/v1/schedules/{body['id']}",
                             "svg": f"/v1/schedules/{body['id']}.svg",
                             "csv": f"/v1/schedules/{body['id']}.csv",
                             "trace": f"/v1/schedules/{body['id']}/trace"}
    assert body["metrics"]["cost"] >= body["metrics"]["lower_bound"] > 0


def test_closed_form_of_1f1b_through_the_service(server: Server) -> None:
    # DESIGN.md: 1F1B's bubble is (p-1)(T_F+T_B+T_W) = 3*3 on top of m*3 = 24.
    body = post(server, {"profile": EASY, "method": "1f1b"}).json()
    assert body["metrics"]["cost"] == pytest.approx(24 + 9)


def test_repeated_request_is_answered_from_the_store(server: Server) -> None:
    request = {"profile": EASY, "method": "zb-h2", "objective": "makespan"}
    first = post(server, request)
    second = post(server, request)
    assert second.headers["x-cache"] == "hit"
    assert second.json() == first.json()
    # time_limit_s does not change a named schedule: the same id.
    third = post(server, {**request, "time_limit_s": 5.0})
    assert third.headers["x-cache"] == "hit" and third.json()["id"] == first.json()["id"]
    stored = server.client.get(f"/v1/schedules/{first.json()['id']}")
    assert stored.status_code == 200 and stored.json() == first.json()
    metrics = server.client.get("/metrics").text
    assert "ppsched_cache_hits_total" in metrics
    hits = [line for line in metrics.splitlines()
            if line.startswith("ppsched_cache_hits_total")]
    assert float(hits[0].split()[-1]) >= 2


def test_memory_limit_override(server: Server) -> None:
    body = post(server, {"profile": EASY, "method": "heuristic", "memory_limit": 2.5}).json()
    assert body["profile"]["memory_limit"] == 2.5
    assert max(body["metrics"]["peak_memory"]) <= 2.5
    unlimited = post(server, {"profile": profile("gpt1.5b-p8-m24"), "memory_limit": None})
    assert unlimited.json()["profile"]["memory_limit"] is None


def test_layouts_let_the_solver_cut_the_model(server: Server) -> None:
    # The paper's 1.5B configuration at 1F1B's memory: V placement beats one chunk.
    one = post(server, {"profile": profile("gpt1.5b-p8-m24"), "layouts": "1"}).json()
    best = post(server, {"profile": profile("gpt1.5b-p8-m24"), "layouts": "1,v"})
    assert best.status_code == 200, best.text
    body = best.json()
    assert body["profile"]["num_chunks"] == 2 and body["profile"]["placement"] == "v"
    assert body["metrics"]["cost"] < one["metrics"]["cost"]
    assert body["id"] != one["id"]  # the layouts are part of the content key
    # The default considers every layout (issue 27): the same answer as "1,v" here.
    default = post(server, {"profile": profile("gpt1.5b-p8-m24")}).json()
    assert default["metrics"]["cost"] == body["metrics"]["cost"]
    assert default["solver"]["layout"] == "v"
    assert default["solver"]["layouts"] == ["1", "v", "loop2"]
    bad = post(server, {"profile": EASY, "layouts": "1,w"})
    assert_error(bad, 422, "layouts")


def test_compact_request_writes_action_strings_and_draws(server: Server) -> None:
    body = post(server, {"profile": EASY, "method": "zb-h1", "compact": True}).json()
    full = post(server, {"profile": EASY, "method": "zb-h1"}).json()
    assert body["id"] != full["id"] and body["ops_encoding"] == "actions"
    assert body["ranks"][0].startswith("0F0,")
    assert parse_schedule(body).orders() == parse_schedule(full).orders()
    svg = server.client.get(body["links"]["svg"])  # re-timed for the picture
    assert svg.status_code == 200 and svg.text.lstrip().startswith("<svg")


def test_small_ilp_answers_synchronously(server: Server) -> None:
    response = post(server, {"profile": EASY, "method": "ilp", "time_limit_s": 2.0})
    assert response.status_code == 200, response.text
    assert response.json()["solver"]["status"] == "optimal"


def test_views(server: Server) -> None:
    body = post(server, {"profile": EASY, "method": "zb-h1"}).json()
    svg = server.client.get(body["links"]["svg"])
    assert svg.headers["content-type"].startswith("image/svg+xml")
    assert svg.text.lstrip().startswith("<svg")
    csv = server.client.get(body["links"]["csv"])
    assert csv.headers["content-type"].startswith("text/csv")
    lines = csv.text.strip().splitlines()
    assert len(lines) == 4 and lines[0].startswith("0F0,")
    trace = server.client.get(body["links"]["trace"])
    assert trace.headers["content-type"].startswith("application/json")
    events = trace.json()["traceEvents"]
    assert sum(1 for e in events if e.get("ph") == "X") == 4 * 8 * 3


def test_svg_is_well_formed_xml_whatever_the_name(server: Server) -> None:
    name = "a\x00b\x07c\x1f<&\"'\ufffe"
    body = post(server, {"profile": {**EASY, "name": name}, "method": "1f1b"}).json()
    svg = server.client.get(body["links"]["svg"])
    root = xml.etree.ElementTree.fromstring(svg.content)  # raises if not well-formed
    assert root.tag.endswith("svg")
    assert "c\ufffd<&" in "".join(root.itertext())


def test_methods_and_examples(server: Server) -> None:
    methods = server.client.get("/v1/methods").json()["methods"]
    names = [m["name"] for m in methods]
    assert {"heuristic", "ilp", *NAMED} <= set(names)
    assert all(m["description"] for m in methods)
    examples = server.client.get("/v1/examples").json()["examples"]
    by_name = {e["name"]: e["profile"] for e in examples}
    assert by_name["gpt1.5b-p8-m24"]["num_ranks"] == 8
    assert len(by_name) == 14
    # An example is a profile the service solves as it is.
    assert post(server, {"profile": by_name["hetero-p8-m32"]}).status_code == 200


def test_health_readiness_metrics_and_docs(server: Server) -> None:
    assert server.client.get("/healthz").json()["status"] == "ok"
    ready = server.client.get("/readyz").json()
    assert ready == {"status": "ok", "checks": {"store": True, "pool": True, "jobs": True}}
    metrics = server.client.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    for name in ("ppsched_http_requests_total", "ppsched_http_request_duration_seconds",
                 "ppsched_solves_total", "ppsched_queue_depth", "ppsched_cache_hits_total"):
        assert name in metrics.text
    assert 'ppsched_solves_total{method="zb-h1",status="heuristic"}' in metrics.text
    # /docs worked only online (Swagger UI from a CDN): every file it loads is local now.
    for page in ("/docs", "/redoc"):
        html = server.client.get(page)
        assert html.status_code == 200 and "cdn." not in html.text
        for url in re.findall(r'(?:src|href)="([^"]+)"', html.text):
            assert url.startswith("/docs-assets/"), url
            asset = server.client.get(url)
            assert asset.status_code == 200 and len(asset.content) > 1000, url
    assert_error(server.client.get("/docs-assets/core.py"), 404, "docs asset")
    schema = server.client.get("/openapi.json").json()
    for path, operations in schema["paths"].items():
        for verb, operation in operations.items():
            assert operation.get("summary"), (verb, path)
            body = operation.get("requestBody", {}).get("content", {}).get(
                "application/json", {})
            if body:
                assert body.get("examples"), f"{verb} {path} has no request example"


def _hand_made(order: list[tuple[str, int]]) -> dict[str, Any]:
    return {"profile": {**EASY, "num_ranks": 1, "num_microbatches": 2},
            "ranks": [[{"kind": k, "stage": 0, "microbatch": j} for k, j in order]]}


def test_simulate_times_a_hand_made_schedule(server: Server) -> None:
    good = _hand_made([("F", 0), ("F", 1), ("B", 0), ("W", 0), ("BW", 1)])
    response = server.client.post("/v1/simulate", json=good)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["metrics"]["cost"] == 6.0 and body["ranks"][0][-1]["end"] == 6.0
    assert server.client.get(body["links"]["svg"]).status_code == 200
    bad = _hand_made([("B", 0), ("F", 0), ("F", 1), ("W", 0), ("BW", 1)])
    error = assert_error(server.client.post("/v1/simulate", json=bad), 422, "ranks",
                         "schedule invalid")
    assert error["violations"] and "ERROR" in error["grid"]


def test_validate_reports_every_violation(server: Server) -> None:
    good = server.client.post("/v1/validate",
                              json=_hand_made([("F", 0), ("F", 1), ("BW", 0), ("BW", 1)]))
    assert good.json()["valid"] is True and good.json()["metrics"]["cost"] == 6.0
    bad = server.client.post("/v1/validate", json=_hand_made([("F", 0), ("BW", 0)])).json()
    assert bad["valid"] is False and bad["metrics"] is None
    assert any(v["kind"] == "missing" for v in bad["violations"])
    assert_error(server.client.post("/v1/validate", json={"ranks": []}), 422, "profile",
                 "required")


def test_violation_lists_are_truncated_with_their_count(server: Server) -> None:
    # Every op of 300 microbatches missing: hundreds of violations, 100 listed.
    empty = {"profile": {**EASY, "num_ranks": 1, "num_microbatches": 300}, "ranks": [[]]}
    report = server.client.post("/v1/validate", json=empty).json()
    assert report["valid"] is False and len(report["violations"]) == 100
    assert report["violations_total"] >= 300
    error = assert_error(server.client.post("/v1/simulate", json=empty), 422, "ranks",
                         f"{report['violations_total']} violations")
    assert len(error["violations"]) == 100
    assert error["violations_total"] == report["violations_total"]
    good = server.client.post("/v1/validate",
                              json=_hand_made([("F", 0), ("F", 1), ("BW", 0), ("BW", 1)]))
    assert good.json()["violations"] == [] and good.json()["violations_total"] == 0


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"num_ranks": 65}, "profile.num_ranks", ("<= 64", "PPSCHED_MAX_RANKS")),
    ({"num_microbatches": 10**9}, "profile.num_microbatches", ("PPSCHED_MAX_MICROBATCHES",)),
    ({"num_chunks": 5, "placement": "loop"}, "profile.num_chunks", ("PPSCHED_MAX_CHUNKS",)),
])
def test_limits_on_the_shape_are_named(server: Server, change: dict[str, Any], field: str,
                                       words: tuple[str, ...]) -> None:
    assert_error(post(server, {"profile": {**EASY, **change}}), 422, field, *words)


def test_layouts_and_op_counts_are_within_the_limits(server: Server) -> None:
    # A layout sets v for the whole solve: loop128 bypassed PPSCHED_MAX_CHUNKS.
    for layouts in ("loop128", "1,loop5"):
        assert_error(post(server, {"profile": EASY, "layouts": layouts}), 422, "layouts",
                     "<= 4", "PPSCHED_MAX_CHUNKS")
    # p=64, m=512 is within the p and m limits; with every layout it is 9 solves' work.
    big = profile("uniform-p4-m8", num_ranks=64, num_microbatches=512)
    assert_error(post(server, {"profile": big, "layouts": "1,v,loop3,loop4"}), 422,
                 "layouts", "PPSCHED_MAX_OPS", "<= 393216")


def test_limit_on_time_and_body(server: Server) -> None:
    assert_error(post(server, {"profile": EASY, "method": "ilp", "time_limit_s": 1e6}), 422,
                 "time_limit_s", "<= 600", "PPSCHED_MAX_TIME_LIMIT_S")
    big = {"profile": {**EASY, "description": "x" * 3_000_000}}
    assert_error(post(server, big), 413, "body", "PPSCHED_MAX_BODY_BYTES")

    def chunks() -> Any:  # no Content-Length: the body streams
        for _ in range(300):
            yield b"x" * 10_000

    streamed = server.client.post("/v1/schedules", content=chunks(),
                                  headers={"content-type": "application/json"})
    assert_error(streamed, 413, "body", "<= 2000000")


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"profile": {**EASY, "t_b": -1}}, "profile.t_b", ("got -1", ">= 0")),
    ({"profile": {**EASY, "m_w": -1}}, "profile.m_w", ("got -1", ">= 0")),
    ({"profile": {**EASY, "t_comm": [1, 2]}}, "profile.t_comm", ("list of 3",)),
    ({"profile": {**EASY, "colour": "red"}}, "profile.colour", ("no such field",)),
    ({"profile": EASY, "method": "fast"}, "method", ("'fast'", "heuristic")),
    ({"profile": EASY, "objective": "speed"}, "objective", ("'speed'",)),
    ({"profile": EASY, "time_limit_s": 0}, "time_limit_s", ("greater than 0",)),
    ({"profile": EASY, "method": "ilp", "work_limit": 0}, "work_limit", ("greater than 0",)),
    ({"profile": EASY, "method": "ilp", "work_limit": 5, "backend": "milp"}, "work_limit",
     ("no deterministic budget",)),
    ({"profile": profile("gpt1.5b-p8-m24"), "method": "zb-h2"}, "memory_limit",
     (">= 15 for zb-h2",)),
    ({"method": "heuristic"}, "profile", ("required",)),
    ({"profile": EASY, "extra": 1}, "extra", ("no such field",)),
    # Finite one by one, infinite once added up: an OverflowError 500 in the bounds, and
    # a cached 200 with null times whose views answered 422.
    ({"profile": {**EASY, "m_b": 1e308, "m_w": 1e308, "memory_limit": 1e308},
      "method": "heuristic"}, "profile.m_b", ("totals stay finite",)),
    ({"profile": {**EASY, "t_f": 1e308}, "method": "1f1b"}, "profile.t_f",
     ("totals stay finite", "num_microbatches = 8")),
])
def test_bad_input_is_a_422_naming_the_field(server: Server, body: dict[str, Any],
                                            field: str, words: tuple[str, ...]) -> None:
    assert_error(post(server, body), 422, field, *words)


def test_not_json_and_not_found(server: Server) -> None:
    response = server.client.post("/v1/schedules", content=b"{not json",
                                  headers={"content-type": "application/json"})
    assert_error(response, 422, "body", "JSON")
    assert_error(server.client.get("/v1/schedules/0123abc"), 404, "schedule", "0123abc")
    assert_error(server.client.get("/v1/schedules/0123abc.svg"), 404, "schedule")
    assert_error(server.client.get("/v1/jobs/" + "0" * 32), 404, "job")
    assert_error(server.client.get("/v2/nothing"), 404, "path")
    assert_error(server.client.put("/v1/methods"), 405, "method")


def test_web_page_is_served_from_the_static_folder(server: Server) -> None:
    assert_error(server.client.get("/"), 404, "static file", "index.html")
    static = server.db_path.parent / "static"
    static.mkdir(exist_ok=True)
    (static / "index.html").write_text("<!doctype html><title>ppsched</title>")
    (static / "app.js").write_text("console.log(1)")
    page = server.client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert server.client.get("/static/app.js").text == "console.log(1)"
    assert_error(server.client.get("/static/../store.sqlite3"), 404, "path")
    assert_error(server.client.get("/static/%2e%2e/store.sqlite3"), 404, "static file")
    # A NUL byte and names over the OS limits were 500s whose text leaked the install path.
    for path in ("/static/app.js%00.png", "/static/" + "a" * 300,
                 "/static/" + "/".join(["b" * 200] * 30)):
        body = assert_error(server.client.get(path), 404, "static file")
        assert str(REPO) not in json.dumps(body)


def test_security_headers_on_every_response(server: Server) -> None:
    big = {"profile": {**EASY, "description": "x" * 3_000_000}}
    for response in (server.client.get("/healthz"), server.client.get("/v1/nope"),
                     post(server, {"profile": 3}), post(server, big)):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["x-frame-options"] == "DENY"
        assert "default-src 'self'" in response.headers["content-security-policy"]


def test_error_bodies_are_one_json_shape(server: Server) -> None:
    body = json.loads(post(server, {"profile": 3}).text)
    assert body["field"] == "profile" and body["message"].startswith("invalid 'profile'")
