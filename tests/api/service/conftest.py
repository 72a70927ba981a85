"""Real server processes for the service tests: `ppsched serve` on a free loopback port,
with settings given as PPSCHED_* environment variables and a store in a temp folder."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.service.postgres import own_postgres, postgres  # noqa: F401  (fixtures)

REPO = Path(__file__).resolve().parents[3]
PROFILES = REPO / "profiles"


def profile(name: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PROFILES / f"{name}.json").read_text())
    data.update(changes)
    return data


# A case CP-SAT cannot close in seconds (the README's 0.75p example): jobs on it run for
# their whole time limit unless cancelled.
HARD = profile("gpt1.5b-p8-m24", memory_limit=6.0)
EASY = profile("uniform-p4-m8")


class Server:
    """One `ppsched serve` process."""

    def __init__(self, db_path: Path, env: dict[str, str], log_path: Path,
                 command: list[str] | None = None, cwd: Path = REPO) -> None:
        self.db_path, self.log_path = db_path, log_path
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        full_env = {**os.environ, "PPSCHED_DB_PATH": str(db_path), **env}
        if command is not None:
            # Another installation's entry point (a clean virtualenv's): a PYTHONPATH
            # pointing at this checkout would make it import this checkout instead.
            full_env.pop("PYTHONPATH", None)
        self._log = log_path.open("ab")
        command = command or [sys.executable, "-m", "ppsched.api.cli"]
        self.process = subprocess.Popen(
            [*command, "serve", "--port", str(self.port)],
            cwd=cwd, env=full_env, stdout=self._log, stderr=subprocess.STDOUT)
        self.client = httpx.Client(base_url=self.url, timeout=60)
        self._wait_ready()

    def _wait_ready(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-2000:]}")
            try:
                if self.client.get("/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"server not ready: {self.log_path.read_text()[-2000:]}")

    def _processes(self) -> dict[int, tuple[int, bytes]]:
        """Every process: pid to (parent pid, command line)."""
        table = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
                cmdline = (stat.parent / "cmdline").read_bytes()
            except OSError:
                continue
            table[int(stat.parent.name)] = (int(fields[1]), cmdline)
        return table

    def fork_servers(self) -> list[int]:
        """Pids of the server's fork servers (the jobs' processes are forked there)."""
        return [pid for pid, (parent, cmdline) in self._processes().items()
                if parent == self.process.pid and b"multiprocessing.forkserver" in cmdline]

    def children(self) -> list[int]:
        """Pids of the server's worker processes: the spawned interpreters (the pool's
        workers) and the jobs' processes, forked by the server's fork server (its child
        too, not counted: it solves nothing)."""
        table = self._processes()
        servers = set(self.fork_servers())
        return [pid for pid, (parent, cmdline) in table.items()
                if (parent == self.process.pid and b"spawn_main" in cmdline)
                or parent in servers]

    def stop(self, kill: bool = False) -> None:
        self.client.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Any]:
    """Start servers on one store (`db`), each with its own PPSCHED_* settings."""
    servers: list[Server] = []

    def start(db: str = "store.sqlite3", **settings: Any) -> Server:
        env = {f"PPSCHED_{k.upper()}": str(v) for k, v in settings.items()}
        server = Server(tmp_path / db, env, tmp_path / "server.log")
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server shared by a module's tests, with an ilp ceiling of 3 s."""
    folder = tmp_path_factory.mktemp("server")
    server = Server(folder / "store.sqlite3", {"PPSCHED_SYNC_TIME_LIMIT_S": "3",
                                               "PPSCHED_STATIC_DIR": str(folder / "static")},
                    folder / "server.log")
    yield server
    server.stop()


def wait_for_job(client: httpx.Client, job_id: str, statuses: tuple[str, ...],
                 timeout_s: float = 60, has_progress: bool = False) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in statuses and (not has_progress or job["progress"]):
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} not in {statuses} after {timeout_s} s: {job}")


def assert_error(response: httpx.Response, status: int, field: str | None,
                 *words: str) -> dict[str, Any]:
    """An error response: the status, the JSON body's field, words in its message."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) >= {"message", "field", "value", "accepted"}
    assert body["field"] == field, body
    for word in words:
        assert word in body["message"], body
    assert "\n" not in body["message"]
    return body


def post_in_thread(server: Server, path: str, body: Any,
                   out: list[httpx.Response]) -> threading.Thread:
    """POST `body` to `path` from a thread of its own (the caller goes on while the
    server works); the response is appended to `out`."""
    def post() -> None:
        with httpx.Client(timeout=300) as client:
            out.append(client.post(f"{server.url}{path}", json=body))

    thread = threading.Thread(target=post)
    thread.start()
    return thread
