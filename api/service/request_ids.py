"""Request ids: each request carries one, the client's own `X-Request-ID` when it is sane
(an id another proxy or service made, so that their logs and ours join), else one made
here. It is sent back on every response, refusals included, and every log line written
while the request is served carries it (a context variable that a logging filter reads;
tasks started for the request copy the context, so their lines carry it too). A job's
runner sets the job's id the same way, for the lines written while the job runs."""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "X-Request-ID"
_HEADER_KEY = HEADER.lower().encode()
# What an incoming id may be: the characters of UUIDs, W3C trace ids and the usual
# proxies' ids, at most 128 of them. Anything else (spaces, quotes, control characters
# that could forge log lines, a megabyte of text) is replaced by an id of our own.
_SANE = re.compile(rb"[A-Za-z0-9._:@/+=-]{1,128}")
NONE = "-"
"""What a log line written outside any request or job shows."""

request_id: ContextVar[str] = ContextVar("ppsched_request_id", default=NONE)
job_id: ContextVar[str] = ContextVar("ppsched_job_id", default=NONE)


def new_id() -> str:
    return uuid.uuid4().hex


def accepted_id(raw: bytes | None) -> str:
    """The client's id if it is sane, else a new one."""
    if raw is not None and _SANE.fullmatch(raw):
        return raw.decode("ascii")
    return new_id()


class ContextFilter(logging.Filter):
    """Puts `request_id` and `job_id` on each record (on a handler: it sees the records
    of every logger, uvicorn's access lines included)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id.get()
        if not hasattr(record, "job_id"):
            record.job_id = job_id.get()
        return True


class RequestIds:
    """ASGI middleware (outermost): the request's id into the context and the scope's
    state (``request.state.request_id``), and onto the response's headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = next((value for key, value in scope["headers"] if key == _HEADER_KEY), None)
        rid = accepted_id(raw)
        scope.setdefault("state", {})["request_id"] = rid
        encoded = rid.encode("ascii")

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", ()) if k != _HEADER_KEY]
                headers.append((_HEADER_KEY, encoded))
                message["headers"] = headers
            await send(message)

        token = request_id.set(rid)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            request_id.reset(token)
