"""The gate (ASGI middleware): who a request comes from, and whether it may come in.

With keys configured, a request needs ``Authorization: Bearer KEY`` of a tenant, else
401 with ``WWW-Authenticate: Bearer`` and the JSON error body. Open always: the probes
(``/healthz``, ``/readyz``), the web page and its files, the API documentation; and
``/metrics`` when ``PPSCHED_METRICS_OPEN`` is true. Then the caller's request rate and,
for the routes that solve, its concurrent solves (`quotas.Quotas`): 429 with Retry-After.

The caller (`tenants.Caller`) goes into the request's state for the routes (``caller``;
``tenant`` too, the tenant's name or None, for metrics' labels). The key itself is
dropped here: it is never stored, logged or echoed.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import Depends, Request
from ppsched.api.service.errors import error_body
from ppsched.api.service.pooled_paths import POOLED_POSTS
from ppsched.api.service.quotas import QuotaExceeded, Quotas
from ppsched.api.service.tenants import Caller, Tenants
from starlette.types import ASGIApp, Receive, Scope, Send

_OPEN_PATHS = frozenset({"/healthz", "/readyz", "/", "/favicon.ico", "/docs", "/redoc",
                         "/openapi.json"})
_OPEN_PREFIXES = ("/static/", "/docs-assets/")
# Routes whose POST takes a solver worker for its answer: each counts as a solve.
SOLVING = frozenset(POOLED_POSTS)
_REALM = 'Bearer realm="ppsched"'


def is_open(path: str, metrics_open: bool) -> bool:
    """Whether `path` is answered without a key (and outside the quotas)."""
    if path in _OPEN_PATHS or path.startswith(_OPEN_PREFIXES):
        return True
    return metrics_open and path == "/metrics"


def bearer(scope: Scope) -> str | None:
    """The key of an ``Authorization: Bearer KEY`` header, None if there is none."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() == "bearer" and key.strip():
                return key.strip()
            return None
    return None


class Gate:
    """Authenticate (when keys are configured), then the rate and solve quotas."""

    def __init__(self, app: ASGIApp, tenants: Tenants, quotas: Quotas,
                 metrics_open: bool) -> None:
        self.app, self.tenants, self.quotas = app, tenants, quotas
        self.metrics_open = metrics_open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or is_open(scope["path"], self.metrics_open):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        address = str(client[0]) if client else "unknown"
        if self.tenants.enabled:
            key = bearer(scope)
            found = self.tenants.authenticate(key) if key is not None else None
            if found is None:
                await _unauthorized(send, key is not None)
                return
            caller = Caller(found[0], address, found[1])
        else:
            caller = Caller(None, address)
        state = scope.setdefault("state", {})
        state["caller"], state["tenant"] = caller, caller.tenant
        solving = scope["method"] == "POST" and scope["path"].rstrip("/") in SOLVING
        try:
            self.quotas.take(caller.owner)
            if solving:
                self.quotas.enter(caller.owner)
        except QuotaExceeded as exc:
            await _send_json(send, 429, exc.body(),
                             [(b"retry-after", str(exc.retry_after_s).encode())])
            return
        try:
            await self.app(scope, receive, send)
        finally:
            if solving:
                self.quotas.leave(caller.owner)


async def _unauthorized(send: Send, key_given: bool) -> None:
    if key_given:
        body = error_body("the API key matches no tenant of this service", "Authorization",
                          "a key that matches no tenant", "Bearer KEY, a key this "
                          "service's operator gave you")
        challenge = f'{_REALM}, error="invalid_token"'
    else:
        body = error_body("an API key is required: send the header 'Authorization: Bearer "
                          "KEY'", "Authorization", None, "Bearer KEY, a key this "
                          "service's operator gave you")
        challenge = _REALM
    await _send_json(send, 401, body, [(b"www-authenticate", challenge.encode())])


async def _send_json(send: Send, status: int, body: dict[str, Any],
                     headers: list[tuple[bytes, bytes]]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()), *headers]})
    await send({"type": "http.response.body", "body": data})


async def get_caller(request: Request) -> Caller | None:
    """The request's caller as the gate recorded it (None where the gate let it through
    unnamed: the open paths)."""
    # async: FastAPI runs a plain `def` dependency in its thread pool (`deps.get_state`).
    caller: Caller | None = getattr(request.state, "caller", None)
    return caller


CallerDep = Annotated[Caller | None, Depends(get_caller)]


def may_see(caller: Caller | None, job_owner: str | None) -> bool:
    """Whether `caller` may read or cancel a job owned by `job_owner`: with keys, only
    its tenant; in open mode, anyone (as before tenants)."""
    if caller is None or caller.tenant is None:
        return True
    return job_owner == caller.tenant


def declare_statuses(schema: dict[str, Any]) -> None:
    """Declare in the OpenAPI document the gate's answers on every route behind it: 401
    (when keys are configured) and 429 (a quota)."""
    body = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for path, operations in schema.get("paths", {}).items():
        if is_open(path, metrics_open=False):
            continue
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            responses.setdefault("401", {
                "description": "With API keys configured: no valid 'Authorization: Bearer "
                "KEY' (WWW-Authenticate: Bearer).", "content": body})
            responses.setdefault("429", {
                "description": "A quota of the caller's (PPSCHED_QUOTA_*): the error names "
                "it; retry after the Retry-After header's seconds.", "content": body})
