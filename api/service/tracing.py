"""OpenTelemetry traces, where the `otel` extra is installed (``pip install
'ppsched[otel]'``: the SDK and the OTLP exporter; the API alone comes with FastAPI).
Without a tracer provider that records (the API's default is a no-op), no middleware is
added: a span that goes nowhere would still cost the main process per request.

One server span per request, named ``<METHOD> <route template>`` (never the raw path:
ids in paths would make every span name unique), child of the caller's span when the
request carries a W3C ``traceparent``, with the request id, the route and the status as
attributes. Where the SDK is installed and ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_TRACES_EXPORTER``) is set, `configure_sdk` installs a tracer provider exporting
over OTLP; otherwise the API's global provider is used as it is (a no-op until someone,
e.g. ``opentelemetry-instrument``, installs one)."""

from __future__ import annotations

import logging
import os
from typing import Any

from ppsched.api.service.response_status import StatusRecorder
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)
TRACER_NAME = "ppsched.api.service"


def tracer() -> Any | None:
    """The service's tracer when a recording tracer provider is installed (by
    `configure_sdk`, or before the app by ``opentelemetry-instrument``), else None."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    configure_sdk()
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider.get_tracer(TRACER_NAME)


def configure_sdk() -> bool:
    """Install an OTLP-exporting SDK tracer provider when the environment asks for one
    and the SDK and exporter are installed; True when it did."""
    if not (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or
            os.environ.get("OTEL_TRACES_EXPORTER")):
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        log.warning("OTEL_* is set but %s is not installed: no traces are exported "
                    "(pip install 'ppsched[otel]')", exc.name)
        return False
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return False  # one is installed already (an earlier app, opentelemetry-instrument)
    provider = TracerProvider(resource=Resource.create({"service.name": "ppsched"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return True


def _carrier(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]
            if k in (b"traceparent", b"tracestate")}


class Tracing:
    """ASGI middleware: each HTTP request in a server span of `tracer_`."""

    def __init__(self, app: ASGIApp, tracer_: Any) -> None:
        from opentelemetry import propagate, trace

        self.app, self.tracer = app, tracer_
        self._extract, self._kind = propagate.extract, trace.SpanKind.SERVER
        self._error = trace.Status(trace.StatusCode.ERROR)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answered = StatusRecorder(send)
        method = scope["method"]
        context = self._extract(_carrier(scope))
        with self.tracer.start_as_current_span(method, context=context,
                                               kind=self._kind) as span:
            try:
                await self.app(scope, receive, answered)
            finally:
                route = getattr(scope.get("route"), "path", None) or "unmatched"
                span.update_name(f"{method} {route}")
                span.set_attribute("http.request.method", method)
                span.set_attribute("http.route", route)
                span.set_attribute("http.response.status_code", answered.status)
                request_id = scope.get("state", {}).get("request_id")
                if request_id:
                    span.set_attribute("ppsched.request_id", request_id)
                if answered.status >= 500:
                    span.set_status(self._error)
