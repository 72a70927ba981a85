"""Repeated requests answered without parsing them again: a `POST /v1/schedules` whose
exact bytes (and content type) this process has answered before maps, through a bounded
in-memory memo, to the content key the route computed for them; when the store holds
that key the stored body is the answer, as the route itself would give it (`X-Cache:
hit`, the same warning header), without the request's JSON decode, its validation, the
profile's parse and the key's hash (most of the main process's CPU for a cached answer).

The memo only learns from the route (which names the key and the warning header of each
request it answers in the request's state, `ANSWER_KEY`), so a body maps to a key only
after the route validated it; the same bytes give the same key as long as the process
runs (its settings do not change). A key the store no longer holds (retention) goes to
the route, which solves again.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

from ppsched.api.service.asgi_body import read_whole, replayed
from ppsched.api.service.response_status import StatusRecorder
from starlette.types import ASGIApp, Receive, Scope, Send

ANSWER_KEY = "schedule_answer"
"""Request-state key: (content key, X-Ppsched-Warning value or None), set by the route."""
PATHS = frozenset({"/v1/schedules", "/v1/schedules/"})
_CONTENT_TYPE = b"content-type"


def digest_of(scope: Scope, body: bytes) -> bytes:
    """What identifies a request's answer: its bytes, its content type, and the ids'
    namespace of its caller (with API keys, each tenant's schedule ids are its own: the
    same bytes from two tenants are two keys; the gate puts the caller in the state)."""
    content_type = next((v for k, v in scope["headers"] if k == _CONTENT_TYPE), b"")
    state = scope.get("state") or {}
    caller = state.get("caller")
    namespace = bytes(getattr(caller, "scope", b"") or b"")
    tenant = str(state.get("tenant") or "").encode()
    return hashlib.sha256(b"\0".join((namespace, tenant, content_type, body))).digest()


class AnswerMemo:
    """ASGI middleware in front of POST /v1/schedules (inside the body limit)."""

    def __init__(self, app: ASGIApp, state: Any, size: int = 4096) -> None:
        self.app, self.state, self.size = app, state, size
        self._memo: OrderedDict[bytes, tuple[str, str | None]] = OrderedDict()
        self._route: Any = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or \
                scope["path"] not in PATHS:
            await self.app(scope, receive, send)
            return
        body, cut = await read_whole(receive)  # cut: the client went away mid-body
        digest = digest_of(scope, body)
        if cut is None and await self._answered(scope, send, digest):
            return
        answered = StatusRecorder(send)
        await self.app(scope, replayed(body, cut, receive), answered)
        answer = scope.get("state", {}).get(ANSWER_KEY)
        if answer is not None and answered.status in (200, 202) and cut is None:
            self._route = scope.get("route", self._route)  # the router's match, kept
            self._memo[digest] = answer
            if len(self._memo) > self.size:
                self._memo.popitem(last=False)

    async def _answered(self, scope: Scope, send: Send, digest: bytes) -> bool:
        """Send the stored answer for a known body; False when there is none."""
        known = self._memo.get(digest)
        if known is None:
            return False
        key, warning = known
        try:
            stored = self.state.store.get_schedule(key)
        except Exception:  # the route meets the same error and answers it as it should
            return False
        if stored is None:
            return False
        self._memo.move_to_end(digest)
        self.state.metrics.cache_hits.inc()
        scope["route"] = self._route  # as the router would set it: the metrics' label
        data = stored.encode()
        headers = [(b"content-length", str(len(data)).encode()),
                   (b"content-type", b"application/json"), (b"x-cache", b"hit")]
        if warning:
            headers.append((b"x-ppsched-warning", warning.encode("latin-1")))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": data})
        return True
