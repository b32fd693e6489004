"""A throwaway PostgreSQL cluster for the tests: ``initdb`` into a temporary folder, listening on
127.0.0.1 only (on a free port, plus a Unix socket inside that folder), trust authentication for
those two and nothing else, durability switched off (it is deleted at the end anyway).

``initdb`` refuses to run as root, so under uid 0 every server command runs as the ``postgres``
system user (``runuser``) in a folder handed to it. Missing binaries are a skip with the reason,
except under ``CI=true``, where they fail the test: CI has to prove the PostgreSQL store works.
"""

from __future__ import annotations

import itertools
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.ports import free_port as _free_port

__all__ = [
    "PostgresCluster",
    "PostgresUnavailable",
    "find_bindir",
    "postgres_cluster",
    "postgres_missing",
    "postgres_url",
    "start_cluster",
]

_SERVER_USER = "postgres"
_SUPERUSER = "postgres"
_HBA = """\
# Written by tests/support/postgres.py: the Unix socket (in a private folder) and loopback only.
local all all trust
host  all all 127.0.0.1/32 trust
"""
_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{sockets}'
# A throwaway cluster: durability buys nothing and costs seconds.
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
shared_buffers = 32MB
"""


class PostgresUnavailable(Exception):
    """PostgreSQL cannot be run here; the message says why and what installs it."""


def find_bindir() -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``: from PATH (symlinks followed, as
    Debian links them into /usr/local/bin or /usr/bin), else the newest /usr/lib/postgresql/N/bin."""
    candidates: list[Path] = []
    for tool in ("pg_ctl", "initdb"):
        found = shutil.which(tool)
        if found:
            candidates.append(Path(os.path.realpath(found)).parent)
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    candidates += versions
    for bindir in candidates:
        if all((bindir / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres", "psql")):
            return bindir
    return None


def postgres_missing(reason: str) -> None:
    """Skip with ``reason``, or fail under CI (where PostgreSQL must be present)."""
    message = f"PostgreSQL is not available: {reason} (`bash scripts/test.sh` installs it with apt)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@dataclass
class PostgresCluster:
    bindir: Path
    root: Path
    port: int
    run_as: str | None
    """The system user the server runs as when we are root, else None (ourselves)."""
    started_in: float = 0.0
    """Seconds initdb + start took (reported by the test run)."""
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{_SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def _command(self, args: Sequence[str]) -> list[str]:
        return ["runuser", "-u", self.run_as, "--", *args] if self.run_as else list(args)

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            self._command(args),
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "LC_ALL": "C", "PGTZ": "UTC"},
            cwd=self.root,
        )
        if proc.returncode != 0:
            raise PostgresUnavailable(f"{Path(args[0]).name} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
        return proc

    def sql(self, statement: str, database: str = "postgres") -> str:
        return self.run(
            str(self.bindir / "psql"),
            "-X",
            "-q",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            _SUPERUSER,
            "-d",
            database,
            "-c",
            statement,
        ).stdout

    def create_database(self, prefix: str = "t") -> str:
        """A new, empty database; returns its name."""
        name = f"{prefix}{next(self._names)}"
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", name):
            raise ValueError(f"bad database name {name!r}")
        self.sql(f"CREATE DATABASE {name} TEMPLATE template0")
        return name

    def drop_database(self, name: str) -> None:
        self.sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def stop(self) -> None:
        try:
            self.run(str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data), "-m", "immediate", "-w", timeout=30)
        except (PostgresUnavailable, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster() -> PostgresCluster:
    """initdb, configure and start a cluster on a free loopback port.

    Raises:
        PostgresUnavailable: the binaries are missing, or the server would not start.
    """
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable("initdb/pg_ctl/postgres/psql not found on PATH or under /usr/lib/postgresql")
    run_as: str | None = None
    root = Path(tempfile.mkdtemp(prefix="mcpg-postgres-"))
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam(_SERVER_USER)
        except KeyError:
            shutil.rmtree(root, ignore_errors=True)
            raise PostgresUnavailable(f"running as root and there is no {_SERVER_USER!r} system user") from None
        if shutil.which("runuser") is None:
            shutil.rmtree(root, ignore_errors=True)
            raise PostgresUnavailable("running as root and `runuser` is missing")
        os.chown(root, user.pw_uid, user.pw_gid)
        run_as = _SERVER_USER
    started = time.perf_counter()
    cluster = PostgresCluster(bindir, root, _free_port(), run_as)
    try:
        cluster.run(
            str(bindir / "initdb"),
            "-D",
            str(cluster.data),
            "-U",
            _SUPERUSER,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        )
        (cluster.data / "pg_hba.conf").write_text(_HBA)
        sockets = root / "sockets"
        sockets.mkdir()
        if run_as:
            user = pwd.getpwnam(run_as)
            os.chown(sockets, user.pw_uid, user.pw_gid)
        with (cluster.data / "postgresql.conf").open("a") as conf:
            conf.write(_CONF.format(port=cluster.port, sockets=sockets))
        cluster.run(
            str(bindir / "pg_ctl"), "start", "-D", str(cluster.data), "-l", str(root / "server.log"), "-w", "-t", "60"
        )
    except (PostgresUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        log = root / "server.log"
        detail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
        cluster.stop()
        raise PostgresUnavailable(f"{exc}\n{detail}".strip()) from None
    cluster.started_in = time.perf_counter() - started
    return cluster


# -- fixtures (registered for the whole suite by tests/conftest.py) ----------------------------------


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """One throwaway cluster for the whole run, started on first use; stopped and removed at the end."""
    try:
        cluster = start_cluster()
    except PostgresUnavailable as exc:
        postgres_missing(str(exc))
        raise  # unreachable: postgres_missing skips or fails
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """A URL of a fresh, empty database of its own for this test (dropped afterwards)."""
    name = postgres_cluster.create_database()
    try:
        yield postgres_cluster.url(name)
    finally:
        postgres_cluster.drop_database(name)
