"""The request body limit (PPSCHED_MAX_BODY_BYTES), enforced before any parsing: a body
over it is answered 413 (Content Too Large) with the usual error body naming the limit,
whether it declares its length or streams."""

from __future__ import annotations

import json
from typing import Any

from ppsched.api.service.errors import LimitExceeded, error_body
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """ASGI middleware: refuse request bodies over `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length > self.max_bytes:
                await self._refuse(send, length)
                return
            if length >= 0:
                await self.app(scope, receive, send)
                return
        # No (usable) length: read the body here, up to the limit, then replay it.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._refuse(send, size)
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send, size: int) -> None:
        exc = LimitExceeded("body", f"{size} bytes", self.max_bytes, "max_body_bytes")
        payload: dict[str, Any] = error_body(str(exc), exc.field, exc.value, exc.accepted)
        data = json.dumps(payload).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": data})
