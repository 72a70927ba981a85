"""`ppsched keys hash TENANT`: a line of PPSCHED_API_KEYS_FILE for a key read from stdin
(the key stays off the command line, so out of the shell's history and `ps`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_keys_parser(sub: Any) -> None:
    """Register the `keys` sub-command on the `ppsched` parser's sub-parsers."""
    p = sub.add_parser("keys", help="make API-key lines for PPSCHED_API_KEYS_FILE")
    p.add_argument("action", choices=("hash",), help="hash: read a key from stdin, print "
                   "the line 'TENANT:sha256-hex'")
    p.add_argument("tenant", metavar="TENANT", help="the tenant the key belongs to")
    p.set_defaults(run=run_keys)


def run_keys(args: argparse.Namespace) -> int:
    from ppsched.api.service.tenants import key_line  # the service's extra

    key = sys.stdin.readline().rstrip("\r\n")
    print(key_line(args.tenant, key))  # a bad name or key: ProfileError, one line
    return 0
