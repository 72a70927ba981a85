"""`pipe_io.recv`: a reply read on the loop as its bytes arrive, a reply far larger than
the socket's buffer while its writer still writes, back-to-back messages, the long
header of a message over 2 GiB, EOF as `recv` raises it; never a thread."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import struct
import threading
from typing import Any

import pytest
from ppsched.api.service import pipe_io


def _run_without_threads(main: Any) -> None:
    """`main()` on a loop whose executor refuses work: a read in a thread fails."""

    async def guarded() -> None:
        loop = asyncio.get_running_loop()

        def refuse(*_: Any) -> Any:
            raise AssertionError("pipe_io.recv ran something in a thread")

        loop.run_in_executor = refuse  # type: ignore[method-assign]
        await main()

    asyncio.run(guarded())


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

    _run_without_threads(main)
    ours.close()


def test_back_to_back_messages_are_read_one_at_a_time() -> None:
    ours, theirs = multiprocessing.Pipe(duplex=True)

    async def main() -> None:
        for k in range(3):
            theirs.send(("ok", k))
        assert [await pipe_io.recv(ours) for _ in range(3)] == [("ok", 0), ("ok", 1),
                                                                 ("ok", 2)]
        theirs.send("last")  # nothing of it was read with the others
        assert ours.recv() == "last"

    _run_without_threads(main)
    ours.close()
    theirs.close()


def test_the_long_header_of_a_message_over_2_gib() -> None:
    ours, theirs = multiprocessing.Pipe(duplex=True)
    payload = pickle.dumps(("ok", "long header"))
    # What Connection.send writes for a message over 0x7fffffff bytes, on a short one.
    os.write(theirs.fileno(), struct.pack("!i", -1) + struct.pack("!Q", len(payload))
             + payload)

    async def main() -> None:
        assert await pipe_io.recv(ours) == ("ok", "long header")

    _run_without_threads(main)
    ours.close()
    theirs.close()


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
