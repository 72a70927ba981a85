"""`ppsched serve`: run the HTTP service (api/service/; needs the 'service' extra)."""

from __future__ import annotations

import argparse
from typing import Any


def add_serve_parser(sub: Any) -> None:
    """Register the `serve` sub-command on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("serve", help="run the HTTP service (needs the 'service' extra)")
    p.add_argument("--host", help="address to listen on (default PPSCHED_HOST or 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default PPSCHED_PORT or 8000)")
    p.add_argument("--workers", type=int,
                   help="solver worker processes (default PPSCHED_WORKERS or 2)")
    p.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    from ppsched.api.service.serve import serve  # the web stack is an optional extra

    serve(args.host, args.port, args.workers)
    return 0
