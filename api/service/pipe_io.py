"""A worker's reply read on the event loop, a non-blocking read at a time, as its bytes
arrive: the loop never waits on a worker, and no thread carries the read.

Before (issue 29), the reply was read here only when it was already whole in the
socket's buffer, else in a helper thread. The loop wakes at the reply's first bytes,
while the worker is still writing, so a schedule of some 100 KB went to the thread
nearly every time: 287 of 300 uncached requests at c=1 (gpt1.5b-p8-m32, profiled). The
executor's queue, a thread's wake-up and the loop's wake-up cost the main process more
CPU than the read itself.

Only for `multiprocessing` connections over a socket pair (`Pipe(duplex=True)` on
Unix): a message is a 4-byte big-endian signed length (-1: an 8-byte unsigned length
follows, for a message over 2 GiB) and the pickled bytes (`Connection.send`). Each read
asks for no more than the message's bytes left, so the next message stays in the pipe.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any


async def recv(conn: Connection) -> Any:
    """`conn.recv()` without blocking the loop.

    Raises:
        EOFError: the other end closed (a dead worker), as `Connection.recv` raises it.
    """
    fd = conn.fileno()
    sock = socket.socket(fileno=fd)  # a view of the descriptor, detached (not closed)
    try:
        size = struct.unpack("!i", await _read(sock, 4))[0]
        if size == -1:
            size = struct.unpack("!Q", await _read(sock, 8))[0]
        return ForkingPickler.loads(await _read(sock, size))
    finally:
        sock.detach()


async def _read(sock: socket.socket, size: int) -> bytearray:
    """Exactly `size` bytes from `sock`, waiting on the loop whenever none are there."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        try:
            # MSG_DONTWAIT: this call only; the descriptor stays blocking for `send`.
            n = sock.recv_into(view[got:], size - got, socket.MSG_DONTWAIT)
        except BlockingIOError:
            await _readable(sock.fileno())
            continue
        if n == 0:
            raise EOFError
        got += n
    return buffer


async def _readable(fd: int) -> None:
    """Until `fd` has bytes to read (or its end closed)."""
    loop = asyncio.get_running_loop()
    readable = loop.create_future()

    def ready() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await readable
    finally:
        loop.remove_reader(fd)
