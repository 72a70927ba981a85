"""What a test needs from outside the repository or outside the base install, and what
happens when it is missing: a skip with its reason on a developer's machine, a failure
where the run promised to have it.

- torch: ``PPSCHED_REQUIRE_TORCH`` (set by `.ci/run`) turns every torch skip into a
  failure. The `tests/interop` and `tests/runtime_adapter` conftests and every torch
  comparison in `tests/solver` go through `torch_installed` / `import_torch`.
- the shared folder beside the checkout (``../shared``: the public profiles' originals,
  the independent contract checker): under CI (``CI=true``, as CI services set it) a
  missing folder fails the test; elsewhere it skips.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REQUIRE_TORCH = "PPSCHED_REQUIRE_TORCH"
_TORCH_INSTALL = "install torch==2.13.0 (the CPU build), as the Makefile does"


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def torch_required() -> bool:
    """Whether this run promised torch (``PPSCHED_REQUIRE_TORCH`` set, not 0/false)."""
    return _flag(REQUIRE_TORCH)


def in_ci() -> bool:
    """Whether this run is CI's (``CI`` set, not 0/false: CI services set CI=true)."""
    return _flag("CI")


def torch_installed() -> bool:
    """Whether torch can be imported; where it cannot and the run requires it, raises
    (a conftest calls this at import, so collection fails instead of skipping)."""
    if importlib.util.find_spec("torch") is not None:
        return True
    if torch_required():
        raise RuntimeError(f"torch is not installed but {REQUIRE_TORCH} is set: "
                           f"{_TORCH_INSTALL}")
    return False


def import_torch(name: str = "torch") -> ModuleType:
    """`pytest.importorskip(name)` for torch and its submodules that fails instead of
    skipping where the run requires torch."""
    if not torch_required():
        return pytest.importorskip(name, reason=f"{name} cannot be imported (torch is "
                                   f"optional; {REQUIRE_TORCH}=1 makes this a failure)")
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        pytest.fail(f"{name} cannot be imported but {REQUIRE_TORCH} is set ({exc}): "
                    f"{_TORCH_INSTALL}")


def shared_path(*parts: str) -> Path:
    """``../shared/<parts>`` beside the checkout. Missing: fails under CI, skips
    elsewhere (a checkout without the shared folder cannot run the test)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        message = (f"{path} is missing: the shared folder beside the checkout "
                   "(../shared) holds what this test compares with")
        if in_ci():
            pytest.fail(f"CI=true: {message}")
        pytest.skip(message)
    return path
