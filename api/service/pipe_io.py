"""A worker's reply read on the event loop when it is already whole, instead of in a
helper thread: a thread hop per call (the executor's queue, a thread's wake-up, the
loop's wake-up) costs the main process more CPU than the read itself for the usual
reply (a schedule of some 100 KB). The loop waits until the pipe is readable; if the
reply's bytes are all in the socket's buffer, `recv` cannot block and runs here;
otherwise (a reply larger than the buffer, still being written) it is read in a thread
as before, so the loop never waits on a worker.

Only for `multiprocessing` connections over a socket pair (`Pipe(duplex=True)` on
Unix), whose messages are a 4-byte big-endian length and the pickled bytes."""

from __future__ import annotations

import array
import asyncio
import fcntl
import socket
import struct
import termios
from multiprocessing.connection import Connection
from typing import Any


def _whole(fd: int) -> bool:
    """Whether a whole message is waiting on `fd` (False too at EOF: `recv` raises)."""
    sock = socket.socket(fileno=fd)  # a view of the descriptor, detached (not closed)
    try:
        head = sock.recv(4, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return False
    finally:
        sock.detach()
    if len(head) < 4:
        return False
    size = struct.unpack("!i", head)[0]
    if size < 0:  # a message over 2 GiB has a longer header: not the common case
        return False
    waiting = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, waiting, True)
    return waiting[0] >= 4 + size


async def recv(conn: Connection) -> Any:
    """`conn.recv()` without blocking the loop."""
    loop = asyncio.get_running_loop()
    readable = loop.create_future()
    fd = conn.fileno()

    def ready() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await readable
    finally:
        loop.remove_reader(fd)
    if _whole(fd):
        return conn.recv()
    return await asyncio.to_thread(conn.recv)
