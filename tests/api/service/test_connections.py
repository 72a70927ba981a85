"""Connection limits against a real server: idle and half-sent connections are closed
after the header timeout, and a kept-alive connection still serves request after request."""

from __future__ import annotations

import socket
from typing import Any


def _closed_by_server(sock: socket.socket) -> bool:
    """Wait (up to the socket's timeout) for the server to close its end."""
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False


def test_idle_and_half_sent_connections_are_closed(start_server: Any) -> None:
    server = start_server(header_timeout_s=1, keep_alive_s=120)
    idle = socket.create_connection(("127.0.0.1", server.port))
    half = socket.create_connection(("127.0.0.1", server.port))
    half.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # the blank line never comes
    # Waits on the state (the server's FIN), with a timeout far over the 1 s setting.
    for sock in (idle, half):
        sock.settimeout(60)
        assert _closed_by_server(sock)
        sock.close()


def test_kept_alive_connection_serves_requests_then_times_out(start_server: Any) -> None:
    server = start_server(header_timeout_s=1, keep_alive_s=120)
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(60)
        for _ in range(3):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = b""
            while b'"ok"' not in reply:
                chunk = sock.recv(4096)
                assert chunk, reply
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 200")
        # Then silent: the next request's headers are due within the header timeout too,
        # though the keep-alive timeout (120 s) is longer than the socket timeout.
        assert _closed_by_server(sock)
