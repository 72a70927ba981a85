"""The torch interop tests need torch; CI (PPSCHED_REQUIRE_TORCH=1) must not skip them."""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("torch") is None:
    if os.environ.get("PPSCHED_REQUIRE_TORCH"):
        raise RuntimeError("torch is not installed but PPSCHED_REQUIRE_TORCH is set: install "
                           "torch==2.13.0 (the CPU build), as the Makefile does")
    collect_ignore_glob = ["test_*.py"]
    pytest.skip("torch is not installed", allow_module_level=True)
