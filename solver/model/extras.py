"""The command that installs one of ppsched's optional extras (pyproject.toml) into the
running environment, for the errors of a command that needs one.

A checkout (the repository's folders, installed editable as `make run` and `make test` do,
or on PYTHONPATH) needs `pip install -e '.[EXTRA]'` from its root: `pip install
'ppsched[EXTRA]'` would fetch a second copy from the registry, or nothing at all. An
installed wheel needs the registry's. Either way the command names this environment's
interpreter, so that the extra lands where the failing command runs (a `pip` on PATH may
belong to another environment).
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path


def checkout_root() -> Path | None:
    """The repository root when ppsched runs from a checkout, None for an installed wheel.

    In a checkout this file is ``ROOT/solver/model/extras.py`` beside ``ROOT/pyproject.toml``;
    in a wheel it is ``site-packages/ppsched/solver/model/extras.py``, with no pyproject.
    """
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "solver" / "model").is_dir():
        return root
    return None


def install_command(extra: str) -> str:
    """The shell command that installs `extra` into the running environment."""
    root = checkout_root()
    python = sys.executable or "python3"
    if root is None:
        return f"{shlex.quote(python)} -m pip install 'ppsched[{extra}]'"
    # A venv's interpreter inside the checkout reads shorter relative to it
    # (.venv-run/bin/python); the path is not resolved, so a venv's link stays a link.
    absolute = os.path.abspath(python)
    if absolute.startswith(str(root) + os.sep):
        python = os.path.relpath(absolute, root)
    return f"cd {shlex.quote(str(root))} && {shlex.quote(python)} -m pip install -e '.[{extra}]'"
