"""The runtime adapter's tests need torch; CI (PPSCHED_REQUIRE_TORCH=1) must not skip them
(`tests/needs.py`: collection fails there instead)."""

from __future__ import annotations

import pytest

from tests.needs import torch_installed

if not torch_installed():
    collect_ignore_glob = ["test_*.py"]
    pytest.skip("torch is not installed", allow_module_level=True)
