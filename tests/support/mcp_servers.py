"""Real upstream MCP servers for tests: how to launch each, and HTTP ones as restartable processes.

    everything_command()                # ["node_modules/.bin/mcp-server-everything", "stdio"] (npm, pinned)
    time_command()                      # [python, -m, mcp_server_time] (PyPI, the test extra)
    lab_command()                       # tests/support/mcp_lab.py over stdio
    with McpHttpServer.lab("streamable-http") as server:   # or .everything("streamableHttp"), "sse" modes
        server.url                      # http://127.0.0.1:<port>/mcp (or /sse)
        server.restart()                # same port: a client's session is now unknown to it

A server that is not installed skips the test with the reason, except under ``CI`` (set by
``.ci/run``), where it fails: CI must prove these tests ran.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Self

import pytest

from tests.support.ports import free_port

__all__ = ["REPO", "McpHttpServer", "everything_command", "free_port", "lab_command", "time_command"]

REPO = Path(__file__).resolve().parents[2]
EVERYTHING = REPO / "node_modules" / ".bin" / "mcp-server-everything"


def _missing(what: str, how: str) -> None:
    message = f"{what} is not installed ({how}; `bash scripts/test.sh` installs it)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def everything_command(mode: str = "stdio") -> list[str]:
    """``@modelcontextprotocol/server-everything`` (pinned in package.json) in ``stdio``,
    ``streamableHttp`` or ``sse`` mode."""
    if not EVERYTHING.exists() or shutil.which("node") is None:
        _missing("@modelcontextprotocol/server-everything", "npm install in the repository")
    return [str(EVERYTHING), mode]


def time_command() -> list[str]:
    """``mcp-server-time`` from PyPI, over stdio."""
    if importlib.util.find_spec("mcp_server_time") is None:
        _missing("mcp-server-time", "pip install -e '.[test]'")
    return [sys.executable, "-m", "mcp_server_time"]


def lab_command(mode: str = "stdio", *extra: str) -> list[str]:
    """The controllable test server (``tests/support/mcp_lab.py``); run it with ``cwd=REPO``."""
    return [sys.executable, "-m", "tests.support.mcp_lab", mode, *extra]


class McpHttpServer:
    """An MCP server process listening on a loopback port, restartable on the same port."""

    def __init__(self, argv: list[str], *, path: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}{path}"
        self._argv = argv
        self._env = {**os.environ, **(env or {}), "PORT": str(self.port)}
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def lab(cls, mode: str, *, env: dict[str, str] | None = None) -> McpHttpServer:
        """``mode``: ``streamable-http`` (endpoint ``/mcp``) or ``sse`` (``/sse``)."""
        server = cls([], path="/mcp" if mode == "streamable-http" else "/sse", env=env)
        server._argv = lab_command(mode, str(server.port))
        return server

    @classmethod
    def everything(cls, mode: str) -> McpHttpServer:
        """``mode``: ``streamableHttp`` (endpoint ``/mcp``) or ``sse`` (``/sse``); the port comes from PORT."""
        return cls(everything_command(mode), path="/mcp" if mode == "streamableHttp" else "/sse")

    def start(self) -> None:
        self.proc = subprocess.Popen(
            self._argv, cwd=REPO, env=self._env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self._argv} exited with {self.proc.returncode} before listening")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self._argv} did not listen on {self.port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
