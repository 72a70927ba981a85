"""uvicorn's HTTP protocol with a header timeout: a connection must deliver a request's
headers within `header_timeout_s` of opening (or of its previous response), else it is
closed. uvicorn's own keep-alive timeout is cancelled by any byte received, so without
this, idle or half-sent connections (slowloris) were held for ever, thousands at once.

The protocol is uvicorn's httptools one (a C parser) where httptools is installed, as it
is with ppsched's dependencies, else its pure-Python h11 one: parsing a request and
writing its response with h11 took a large share of the main process's CPU per request
(`benchmarks/service_throughput.py`). Both keep the request's cycle in ``cycle`` and call
``on_response_complete``, which is all the timeout needs."""

from __future__ import annotations

import asyncio
import logging

from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    BASE: type[H11Protocol] | type[HttpToolsProtocol] = HttpToolsProtocol
except ImportError:  # httptools missing: the pure-Python parser
    BASE = H11Protocol

log = logging.getLogger(__name__)


class HeaderTimeoutProtocol(BASE):  # type: ignore[valid-type,misc]
    """uvicorn's protocol (`BASE`) closing connections slow to send a request's headers."""

    header_timeout_s = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_header_timer()  # the next request's headers are due in time too

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._header_due)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_due(self) -> None:
        self._header_timer = None
        waiting = self.cycle is None or self.cycle.response_complete
        # A request whose headers arrived (its cycle runs) is the app's to time, not ours.
        if waiting and not self.transport.is_closing():
            log.debug("closing %s: no request headers within %.1f s", self.client,
                      self.header_timeout_s)
            self.transport.close()


def protocol_with(header_timeout_s: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class for uvicorn's ``http=`` with this header timeout."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,),
                {"header_timeout_s": header_timeout_s})
