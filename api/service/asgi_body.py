"""A request's body read whole by an ASGI middleware, and given again to the app behind
it (the answer memo and the schedule fast path read the body before deciding whether
the route answers)."""

from __future__ import annotations

from starlette.types import Message, Receive


async def read_whole(receive: Receive) -> tuple[bytes, Message | None]:
    """The body's bytes, and the message that ended it early (a disconnect) or None when
    it arrived whole."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), None


def replayed(body: bytes, cut: Message | None, receive: Receive) -> Receive:
    """A `receive` that gives the app the body read (or the message that cut it short),
    then the connection's own messages."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            if cut is not None:
                return cut
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
