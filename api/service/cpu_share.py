"""Main-process CPU per request, when requests overlap: the process's CPU time between
two events (a request starting or ending) is shared equally among the requests in
flight. With one request at a time it is exactly the CPU spent while it was served;
with several, each gets its fair share, and the shares add up to the process's CPU
while any request was in flight (CPU spent with none in flight, the job runner's or
the lease keeper's, is nobody's). O(1) per event: a running sum of per-request shares,
read at a request's start and end."""

from __future__ import annotations

import time
from collections.abc import Callable


class CpuShare:
    """The running sum of each in-flight request's share of the process's CPU."""

    def __init__(self, clock: Callable[[], float] = time.process_time) -> None:
        self._clock = clock
        self._mark = clock()
        self._share = 0.0  # CPU seconds per in-flight request, summed since the start
        self.in_flight = 0

    def _advance(self) -> float:
        now = self._clock()
        if self.in_flight:
            self._share += (now - self._mark) / self.in_flight
        self._mark = now
        return self._share

    def enter(self) -> float:
        """A request starts: its token for `leave`."""
        token = self._advance()
        self.in_flight += 1
        return token

    def leave(self, token: float) -> float:
        """The request of `token` ends: its share of the CPU, in seconds."""
        share = self._advance() - token
        self.in_flight -= 1
        return share
