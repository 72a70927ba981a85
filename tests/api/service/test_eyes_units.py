"""The eyes' parts alone: the CPU share, the log formats, store error counting, the
tenant hook, the loop-lag watch and (where opentelemetry-api is installed) the spans."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from ppsched.api.service import loop_lag
from ppsched.api.service.cpu_share import CpuShare
from ppsched.api.service.logs import JsonFormatter, TextFormatter, logging_config
from ppsched.api.service.metrics import TENANT_KEY, Metrics
from ppsched.api.service.request_ids import (
    ContextFilter,
    RequestIds,
    accepted_id,
    job_id,
    request_id,
)
from ppsched.api.service.store import SqliteStore
from ppsched.api.service.store_errors import count_errors
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route


def _get(app: Starlette, *paths: str, **headers: str) -> list[httpx.Response]:
    """GET each path from the ASGI app in this process."""
    async def main() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return [await client.get(path, headers=headers) for path in paths]
    return asyncio.run(main())


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_cpu_share_is_exact_alone_and_fair_when_overlapping() -> None:
    clock = Clock()
    share = CpuShare(clock)
    a = share.enter()
    clock.now += 2.0  # a alone
    b = share.enter()
    clock.now += 1.0  # a and b: 0.5 each
    assert share.leave(a) == pytest.approx(2.5)
    clock.now += 3.0  # b alone
    assert share.leave(b) == pytest.approx(3.5)
    clock.now += 10.0  # nobody's
    c = share.enter()
    clock.now += 0.25
    assert share.leave(c) == pytest.approx(0.25)
    assert share.in_flight == 0


def _record(**extra: Any) -> logging.LogRecord:
    record = logging.makeLogRecord({"name": "ppsched.x", "levelname": "WARNING",
                                    "levelno": logging.WARNING, "msg": "a %s line",
                                    "args": ("nice",), **extra})
    ContextFilter().filter(record)
    return record


def test_json_lines_carry_ids_fields_and_exceptions() -> None:
    rid, jid = request_id.set("r-1"), job_id.set("j-2")
    try:
        record = _record(waited_s=1.5, path=Path("/tmp"))
    finally:
        request_id.reset(rid)
        job_id.reset(jid)
    data = json.loads(JsonFormatter().format(record))
    assert data["message"] == "a nice line" and data["level"] == "WARNING"
    assert data["logger"] == "ppsched.x"
    assert (data["request_id"], data["job_id"]) == ("r-1", "j-2")
    assert data["waited_s"] == 1.5 and data["path"] == "/tmp"  # fields, not JSON: str
    try:
        raise ValueError("boom")
    except ValueError:
        import sys
        failed = _record(exc_info=sys.exc_info())
    data = json.loads(JsonFormatter().format(failed))
    assert data["request_id"] == "-" and "job_id" not in data
    assert "ValueError: boom" in data["exception"]
    assert "\n" not in JsonFormatter().format(failed)  # one object, one line


def test_text_lines_show_request_and_job_ids() -> None:
    token = job_id.set("j-9")
    try:
        line = TextFormatter().format(_record())
    finally:
        job_id.reset(token)
    assert line.endswith("WARNING ppsched.x [- job=j-9] a nice line")
    assert "[r-3] " in TextFormatter().format(_record(request_id="r-3"))


def test_logging_config_is_a_valid_dict_config() -> None:
    import logging.config

    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        logging.config.dictConfig(logging_config("json", "warning"))
        handler = logging.getLogger("uvicorn.access").handlers[0]
        assert isinstance(handler.formatter, JsonFormatter)
        assert any(isinstance(f, ContextFilter) for f in handler.filters)
        assert root.level == logging.WARNING
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])


def test_incoming_ids_kept_when_sane() -> None:
    assert accepted_id(b"00f067aa0ba902b7-4bf92f3577b34da6") == \
        "00f067aa0ba902b7-4bf92f3577b34da6"
    assert accepted_id(b"line\nforged") != "line\nforged"
    assert len(accepted_id(None)) == 32


def test_store_errors_are_counted_and_raised_unchanged(tmp_path: Path) -> None:
    counted: list[tuple[str, str]] = []
    store = count_errors(SqliteStore(tmp_path / "s.sqlite3"),
                         lambda op, error: counted.append((op, error)))
    store.put_schedule("a", "{}")
    assert store.get_schedule("a") == "{}"
    assert counted == []
    store.close()
    with pytest.raises(Exception) as raised:
        store.get_schedule("a")
    assert counted == [("get_schedule", type(raised.value).__name__)]


def _app(metrics: Metrics, tenant: str | None) -> Starlette:
    async def hello(request: Request) -> PlainTextResponse:
        if tenant is not None:
            request.state.tenant = tenant  # what the tenants' authentication does
        return PlainTextResponse(f"hello {request.path_params['name']}")

    app = Starlette(routes=[Route("/hello/{name}", hello)])
    app.add_middleware(metrics.asgi)
    app.add_middleware(metrics.cpu_asgi)
    app.add_middleware(RequestIds)
    return app


def test_tenant_usage_from_the_request_state() -> None:
    metrics = Metrics()
    first, _ = _get(_app(metrics, "team-a"), "/hello/x", "/hello/y")
    assert first.headers["x-request-id"]
    text = metrics.render().decode()
    assert 'ppsched_tenant_requests_total{route="/hello/{name}",status="200",' \
           'tenant="team-a"} 2.0' in text
    assert 'ppsched_tenant_main_cpu_seconds_total{tenant="team-a"}' in text
    assert 'ppsched_http_main_cpu_seconds_count{method="GET",route="/hello/{name}"} 2.0' \
        in text
    open_mode = Metrics()
    _get(_app(open_mode, None), "/hello/x")
    assert "ppsched_tenant_requests_total{" not in open_mode.render().decode()
    assert TENANT_KEY == "tenant"


def test_loop_lag_watch_reports_a_held_loop() -> None:
    seen: list[float] = []

    async def main() -> None:
        watch = asyncio.create_task(loop_lag.watch(seen.append, interval_s=0.01))
        await asyncio.sleep(0)  # the watch's first sleep starts
        import time
        began = time.process_time()
        while time.process_time() - began < 0.2:  # CPU on the loop's thread
            pass
        while not seen:
            await asyncio.sleep(0.001)
        watch.cancel()

    asyncio.run(main())
    assert seen[0] >= 0.15  # the held loop showed as lag (CPU time is a floor on wall)


def test_spans_name_the_route_template_and_carry_the_request_id() -> None:
    pytest.importorskip("opentelemetry.trace")
    from opentelemetry import trace
    from ppsched.api.service.tracing import Tracing

    class Span:
        def __init__(self, name: str, **kwargs: Any) -> None:
            self.name, self.kwargs, self.attributes = name, kwargs, {}
            self.status: Any = None

        def update_name(self, name: str) -> None:
            self.name = name

        def set_attribute(self, key: str, value: Any) -> None:
            self.attributes[key] = value

        def set_status(self, status: Any) -> None:
            self.status = status

        def __enter__(self) -> Span:
            return self

        def __exit__(self, *exc: Any) -> None:
            return None

    class Recording:
        def __init__(self) -> None:
            self.spans: list[Span] = []

        def start_as_current_span(self, name: str, **kwargs: Any) -> Span:
            span = Span(name, **kwargs)
            self.spans.append(span)
            return span

    # The API's default provider records nothing: no middleware, no cost per request.
    from ppsched.api.service import tracing

    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert tracing.tracer() is None
    tracer = Recording()
    app = Starlette(routes=[Route("/hello/{name}",
                                  lambda r: PlainTextResponse("hi"))])
    app.add_middleware(Tracing, tracer_=tracer)
    app.add_middleware(RequestIds)
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    _get(app, "/hello/x", **{"X-Request-ID": "r-5", "traceparent": parent})
    span = tracer.spans[0]
    assert span.name == "GET /hello/{name}"
    assert span.attributes["ppsched.request_id"] == "r-5"
    assert span.attributes["http.response.status_code"] == 200
    assert span.kwargs["kind"] == trace.SpanKind.SERVER
    # The caller's trace is the parent: its trace id reached the span's context.
    caller = trace.get_current_span(span.kwargs["context"]).get_span_context()
    assert f"{caller.trace_id:032x}" == "4bf92f3577b34da6a3ce929d0e0e4736"


def test_the_answer_memo_keeps_tenants_apart() -> None:
    """The same bytes from callers of two id namespaces are two memo entries: each is
    answered with its own key, never the other's."""
    from types import SimpleNamespace

    from ppsched.api.service.answer_memo import ANSWER_KEY, AnswerMemo

    class Store:
        def get_schedule(self, key: str) -> str | None:
            return f'{{"id": "{key}"}}'

    served: list[str] = []

    async def route(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        key = "key-" + scope["state"]["caller"].scope.decode()
        served.append(key)
        scope["state"][ANSWER_KEY] = (key, None)
        await PlainTextResponse(key)(scope, receive, send)

    state = SimpleNamespace(store=Store(), metrics=Metrics())
    memo = AnswerMemo(route, state)

    def as_caller(namespace: str) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            scope.setdefault("state", {})["caller"] = SimpleNamespace(
                scope=namespace.encode())
            await memo(scope, receive, send)
        return app

    async def post(app: Any) -> str:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answer = await client.post("/v1/schedules", content=b"{}")
            return answer.text

    async def main() -> list[str]:
        return [await post(as_caller(n)) for n in ("a", "b", "a", "b")]

    answers = asyncio.run(main())
    assert answers[0] == "key-a" and answers[1] == "key-b"
    assert answers[2] == '{"id": "key-a"}' and answers[3] == '{"id": "key-b"}'  # memo
    assert served == ["key-a", "key-b"]


def test_a_request_makes_one_server_span_not_two(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a tracer provider installed, the service's app makes its own span per request
    and FastAPI's native telemetry (0.165 on) none: two tracers would record each request
    twice."""
    pytest.importorskip("opentelemetry.trace")
    from opentelemetry import trace
    from ppsched.api.service.config import Settings
    from ppsched.api.service.main import create_app

    kinds: list[Any] = []

    class Span:
        def __getattr__(self, name: str) -> Any:  # any span method: recorded nowhere
            return lambda *args, **kwargs: None

        def __enter__(self) -> Span:
            return self

        def __exit__(self, *exc: Any) -> None:
            return None

    class Tracer:
        def start_as_current_span(self, name: str, **kwargs: Any) -> Span:
            kinds.append(kwargs.get("kind"))
            return Span()

        def start_span(self, name: str, **kwargs: Any) -> Span:
            kinds.append(kwargs.get("kind"))
            return Span()

    class Provider(trace.TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            return Tracer()

    monkeypatch.setattr(trace, "get_tracer_provider", lambda: Provider())
    app = create_app(Settings(db_path=Path(":memory:"), workers=1))
    assert _get(app, "/v1/methods")[0].status_code == 200
    assert kinds == [trace.SpanKind.SERVER]
