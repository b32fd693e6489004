"""Signals while ``serve`` starts, and SIGHUP to ``pages``: a SIGHUP during the start-up load is
logged and its reload run once the start ends, a SIGTERM then stops the gateway with the ordinary
``stopping`` and ``stopped`` lines and exit 0; ``pages`` logs a SIGHUP and keeps serving. The start is
held on a real loopback upstream whose spec answers only when the test says so."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest

from tests.support.env import child_env
from tests.support.ports import free_port
from tests.support.upstream import LoopbackServer

from .conftest import MASTER_KEY

SPEC = {
    "openapi": "3.0.0",
    "info": {"title": "Notes", "version": "1"},
    "paths": {"/notes": {"get": {"operationId": "listNotes", "summary": "List notes", "responses": {"200": {}}}}},
}


class HeldSpec:
    """An upstream whose ``/spec.json`` answers once ``release`` is set; ``asked`` once it was requested."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == "/spec.json":
            self.asked.set()
            await anyio.to_thread.run_sync(self.release.wait)
        body = json.dumps(SPEC if scope["path"] == "/spec.json" else []).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


class Started:
    """A ``mcp-gateway`` process, its stderr in a file."""

    def __init__(self, root: Path, *argv: str) -> None:
        self.log = root / "stderr.log"
        env = child_env() | {"MCP_GATEWAY_STATE_DIR": str(root / "state"), "MCP_GATEWAY_MASTER_KEY": MASTER_KEY}
        with self.log.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "mcp_gateway", *argv], env=env, stderr=err)

    def text(self) -> str:
        return self.log.read_text()

    def wait_for(self, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while what not in self.text():
            assert self.proc.poll() is None, f"exited {self.proc.returncode}:\n{self.text()}"
            assert time.monotonic() < deadline, f"no {what!r} in:\n{self.text()}"
            time.sleep(0.05)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise


@pytest.fixture
def held() -> Iterator[tuple[HeldSpec, str]]:
    app = HeldSpec()
    with LoopbackServer(app) as server:
        try:
            yield app, server.base_url
        finally:
            app.release.set()


def _manifest(root: Path, upstream: str, pages_port: int) -> Path:
    path = root / "gateway.yaml"
    path.write_text(
        f"""
public_url: http://127.0.0.1:{pages_port}
connectors:
  - slug: notes
    base_url: {upstream}
    source: {{openapi: "{upstream}/spec.json"}}
"""
    )
    return path


def _healthy(port: int) -> bool:
    try:
        return httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx2.HTTPError:
        return False


def test_a_sighup_during_the_start_up_load_is_logged_and_reloads_once_started(
    tmp_path: Path, held: tuple[HeldSpec, str]
) -> None:
    app, upstream = held
    port = free_port()
    manifest = _manifest(tmp_path, upstream, free_port())
    gateway = Started(tmp_path, "serve", "--transport", "http", "--port", str(port), "--manifest", str(manifest))
    try:
        assert app.asked.wait(60), gateway.text()
        gateway.proc.send_signal(signal.SIGHUP)
        gateway.wait_for("SIGHUP during start-up: the manifest is read again once the start ends")
        app.release.set()
        gateway.wait_for("manifest reloaded: 1 connectors")
        assert _healthy(port)
    finally:
        code = gateway.stop()
    assert code == 0, gateway.text()


def test_a_sigterm_during_the_start_up_load_stops_with_the_ordinary_lines(
    tmp_path: Path, held: tuple[HeldSpec, str]
) -> None:
    app, upstream = held
    manifest = _manifest(tmp_path, upstream, free_port())
    argv = ("serve", "--transport", "http", "--port", str(free_port()), "--manifest", str(manifest))
    gateway = Started(tmp_path, *argv)
    try:
        assert app.asked.wait(60), gateway.text()
        gateway.proc.send_signal(signal.SIGTERM)
        code = gateway.proc.wait(timeout=30)
    finally:
        gateway.stop()
    lines = gateway.text().splitlines()
    assert code == 0, gateway.text()
    assert any("stopping (SIGTERM during start-up)" in line for line in lines), lines
    assert lines[-1].endswith("INFO mcp_gateway.cli.serve: stopped"), lines


def test_pages_log_a_sighup_and_keep_serving(tmp_path: Path, held: tuple[HeldSpec, str]) -> None:
    app, upstream = held
    app.release.set()
    pages_port = free_port()
    manifest = _manifest(tmp_path, upstream, pages_port)
    pages = Started(tmp_path, "pages", "--manifest", str(manifest))
    try:
        pages.wait_for("human pages at")
        pages.proc.send_signal(signal.SIGHUP)
        pages.wait_for("SIGHUP: the pages have nothing to reload")
        assert _healthy(pages_port) and pages.proc.poll() is None
    finally:
        pages.stop()
