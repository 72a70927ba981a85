"""A real PostgreSQL server for the tests: Debian's binaries (`pg_config --bindir` or
/usr/lib/postgresql/*/bin), a cluster initialised in a temp folder, listening on a free
loopback port, stopped at the end. As root (CI containers) it runs as the `postgres`
user, since PostgreSQL refuses to run as root.

Without binaries the tests that need it skip, unless PPSCHED_REQUIRE_POSTGRES=1 (set by
.ci/run), which makes them fail instead."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def bindir() -> Path | None:
    """The folder of initdb and postgres, or None when PostgreSQL is not installed."""
    pg_config = shutil.which("pg_config")
    candidates = []
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        candidates.append(out.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if folder and (Path(folder) / "initdb").exists() and (Path(folder) / "postgres").exists():
            return Path(folder)
    return None


class PostgresServer:
    """One PostgreSQL cluster in a temp folder."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="ppsched-pg-"))
        self.data = self.root / "data"
        self.user = "postgres" if os.geteuid() == 0 else None
        self.role = self.user or os.environ.get("USER") or "postgres"
        if self.user:
            shutil.chown(self.root, self.user)
            os.chmod(self.root, 0o755)
        self._as_user([str(self.bin / "initdb"), "-D", str(self.data), "-U", self.role,
                       "--auth=trust", "-E", "UTF8", "--no-sync"], check=True)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.log = self.root / "postgres.log"
        self.start()

    def start(self) -> None:
        """Start the server (again, after `pause`) on its port."""
        self._as_user([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                       "-w", "-t", "60", "-o",
                       f"-p {self.port} -c listen_addresses=127.0.0.1 "
                       f"-k {self.root} -c fsync=off -c max_connections=200", "start"],
                      check=True)

    def pause(self) -> None:
        """Stop the server as an operator would (`pg_ctl stop -m fast`: sessions are
        ended), keeping its data for `start`."""
        self._as_user([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                       "stop"], check=True)

    def _as_user(self, command: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"{command[-1]} failed: {done.stdout}{done.stderr}")
        return done

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql://{self.role}@127.0.0.1:{self.port}/{dbname}"

    def new_database(self) -> str:
        """A fresh, empty database's URL (one per test keeps tests apart)."""
        import psycopg

        name = f"t{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        self._as_user([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                       "-w", "stop"], check=False)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = started_or_skipped()
    yield server
    server.stop()


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A cluster of the test's own, for a test that stops and starts it."""
    server = started_or_skipped()
    yield server
    server.stop()


def started_or_skipped() -> PostgresServer:
    """A started cluster, or the test skipped (failed under PPSCHED_REQUIRE_POSTGRES=1)."""
    required = os.environ.get("PPSCHED_REQUIRE_POSTGRES") == "1"
    found = bindir()
    if found is None:
        message = "PostgreSQL server binaries not found (apt-get install postgresql)"
        if required:
            pytest.fail(f"PPSCHED_REQUIRE_POSTGRES=1: {message}")
        pytest.skip(message)
    try:
        server = PostgresServer(found)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        if required:
            pytest.fail(f"PPSCHED_REQUIRE_POSTGRES=1: PostgreSQL did not start: {exc}")
        pytest.skip(f"PostgreSQL did not start: {exc}")
    return server


def wait_until(predicate: object, timeout_s: float = 60, what: str = "") -> None:
    """Poll a state until it holds (the machine is loaded: no fixed sleeps)."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"not reached in {timeout_s} s: {what}")
