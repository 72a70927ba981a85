"""The status an ASGI app answered with, as the middlewares that count, trace or memoise
requests need it after the app returns."""

from __future__ import annotations

from starlette.types import Message, Send


class StatusRecorder:
    """An ASGI ``send`` that passes every message on and keeps the response's status.

    500 until the response starts: an app that raises before answering is answered 500
    by the server, and that is what the request is counted as."""

    __slots__ = ("send", "status")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.status = 500

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        await self.send(message)
