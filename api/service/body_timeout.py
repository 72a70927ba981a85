"""The request-body read timeout (PPSCHED_BODY_TIMEOUT_S): a body must arrive whole within
that many seconds of its request's headers, else the request is answered 408 and its
connection closed. Measured before (issue 29): 400 connections that sent their headers,
then one byte every 2 s, were all still open after 40 s; uvicorn's header timeout
(http.py) ends only at the headers."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from ppsched.api.service.errors import error_body
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)


class BodyTimedOut(HTTPException):
    """The body did not arrive in time. An HTTPException, so that a route's body parsing
    (FastAPI turns other exceptions there into a 400) passes it on as a 408."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(408, f"the request body did not arrive within {timeout_s:g} s "
                         "(PPSCHED_BODY_TIMEOUT_S)", headers={"Connection": "close"})
        self.timeout_s = timeout_s


class BodyTimeout:
    """ASGI middleware: bound the time from a request's start to its body's last byte."""

    def __init__(self, app: ASGIApp, timeout_s: float) -> None:
        self.app, self.timeout_s = app, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        whole = False  # the body's last message arrived: later reads wait for a disconnect
        started = False

        async def timed_receive() -> Message:
            nonlocal whole
            if whole:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise BodyTimedOut(self.timeout_s) from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                whole = True
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, timed_receive, watched_send)
        except BodyTimedOut as exc:
            # Raised outside the routes (a middleware reading the body): answered here.
            if started:
                raise
            log.info("408: %s %s: %s", scope["method"], scope["path"], exc.detail)
            data = json.dumps(_timeout_body(exc)).encode()
            await send({"type": "http.response.start", "status": 408,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(data)).encode()),
                                    (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": data})


def install_body_timeout(app: FastAPI, timeout_s: float) -> None:
    """The middleware, and the 408's body when a route's own body read timed out."""

    @app.exception_handler(BodyTimedOut)
    async def _timed_out(request: Request, exc: BodyTimedOut) -> JSONResponse:
        log.info("408: %s %s: %s", request.method, request.url.path, exc.detail)
        return JSONResponse(_timeout_body(exc), status_code=408, headers=exc.headers)

    app.add_middleware(BodyTimeout, timeout_s=timeout_s)


def _timeout_body(exc: BodyTimedOut) -> dict[str, Any]:
    return error_body(exc.detail, "body", "incomplete",
                      f"the whole body within {exc.timeout_s:g} s of the headers")
