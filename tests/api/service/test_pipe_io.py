"""`pipe_io.recv`: a whole reply read on the loop, a reply larger than the socket's
buffer read in a thread while its writer still writes, EOF as `recv` raises it."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading

import pytest
from ppsched.api.service import pipe_io


def test_small_big_and_closed() -> None:
    ours, theirs = multiprocessing.Pipe(duplex=True)
    big = "x" * (8 << 20)  # far over a socket buffer: written while it is read

    async def main() -> None:
        theirs.send(("ok", "small"))
        assert await pipe_io.recv(ours) == ("ok", "small")
        writer = threading.Thread(target=theirs.send, args=(("ok", big),))
        writer.start()
        assert await pipe_io.recv(ours) == ("ok", big)
        writer.join()
        theirs.close()
        with pytest.raises(EOFError):
            await pipe_io.recv(ours)

    asyncio.run(main())
    ours.close()


def test_a_cancelled_wait_leaves_the_pipe_usable() -> None:
    ours, theirs = multiprocessing.Pipe(duplex=True)

    async def main() -> None:
        waiting = asyncio.ensure_future(pipe_io.recv(ours))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        theirs.send("after")  # the reader was removed: a new wait gets it
        assert await pipe_io.recv(ours) == "after"

    asyncio.run(main())
    ours.close()
    theirs.close()
