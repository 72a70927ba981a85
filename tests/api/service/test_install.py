"""The Docker image's install and start commands, run in a clean virtualenv (no container
engine runs here): only what the Dockerfile copies, `pip install '.[service]'`, then
`ppsched serve` from another folder; the service answers and torch is not installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

from tests.api.service.conftest import EASY, REPO, Server, assert_error

pytestmark = pytest.mark.slow


def _dockerfile_copies() -> list[str]:
    text = (REPO / "Dockerfile").read_text()
    return [name for line in re.findall(r"^COPY (.+)$", text, re.M)
            for name in line.split()[:-1]]


def test_image_install_and_start_commands_in_a_clean_virtualenv(tmp_path: Path) -> None:
    source = tmp_path / "app"
    source.mkdir()
    for name in _dockerfile_copies():
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "static"))
        else:
            shutil.copy(src, source / name)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "--quiet", ".[service]"], cwd=source,
                   check=True, timeout=600)
    installed = subprocess.run([python, "-m", "pip", "list"], capture_output=True,
                               text=True, check=True).stdout
    assert "fastapi" in installed and "torch" not in installed.split()

    # Start it as the image does, from another folder: the installed package runs.
    home = tmp_path / "run"
    home.mkdir()
    server = Server(home / "store.sqlite3", {"PPSCHED_PROFILES_DIR": str(source / "profiles")},
                    home / "server.log", command=[str(env_dir / "bin" / "ppsched")], cwd=home)
    try:
        assert server.client.get("/healthz").json()["status"] == "ok"
        assert len(server.client.get("/v1/examples").json()["examples"]) == 14
        solved = server.client.post("/v1/schedules", json={"profile": EASY, "method": "zb-h1"})
        assert solved.status_code == 200 and solved.json()["metrics"]["cost"] == 27.0
        assert_error(server.client.get("/"), 404, "static file")  # no page copied here
    finally:
        server.stop()
