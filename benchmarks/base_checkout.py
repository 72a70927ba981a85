"""An earlier checkout a benchmark measures beside this one (``--base DIR``).

Its code is imported from ``DIR/.mypy-src`` (``make .mypy-src/ppsched`` there links its
folders under the name ``ppsched``). Without that folder the base's ``ppsched`` would
resolve to the installed checkout, this one, and a "base" column would silently measure
this code twice: `require` refuses such a folder before any work.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path


def require(parser: argparse.ArgumentParser, base: Path) -> None:
    """Exit through `parser` (usage error, naming the option) unless `base` imports as
    ``ppsched`` from its own ``.mypy-src``."""
    if not (base / ".mypy-src" / "ppsched").is_dir():
        parser.error(f"--base {base}: no .mypy-src/ppsched there (run "
                     "`make .mypy-src/ppsched` in that checkout)")


def pythonpath(checkout: Path) -> str:
    """The ``PYTHONPATH`` that runs `checkout`'s code."""
    return os.pathsep.join([str(checkout / ".mypy-src"), str(checkout)])


def short_commit(checkout: Path) -> str:
    """The checkout's HEAD commit, abbreviated as git does."""
    return subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
