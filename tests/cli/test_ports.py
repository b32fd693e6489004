"""A port already in use stops ``serve --transport http`` and ``pages`` at once, in one line that
names the port, who holds it, and how to pick another."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_gateway import cli


@pytest.fixture
def held_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCP_GATEWAY_MANIFEST", raising=False)
    monkeypatch.setenv("MCP_GATEWAY_STATE_DIR", str(tmp_path / "state"))


def test_serve_http_on_a_port_in_use_says_so_in_one_line(held_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve", "--transport", "http", "--port", str(held_port), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"port {held_port} on 127.0.0.1 is already in use" in err
    assert f"by pid {os.getpid()}" in err  # this very process holds it (found through /proc)
    assert "--port" in err


def test_pages_on_a_port_in_use_says_so_in_one_line(held_port: int, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["pages", "--public-url", f"http://127.0.0.1:{held_port}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"port {held_port} on 127.0.0.1 is already in use" in err
    assert "--public-url" in err


_HOLDER = """
import socket, sys, time
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
print(listener.getsockname()[1], flush=True)
time.sleep(30)
"""


def test_the_holder_is_named_by_pid_and_program_never_its_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    # Another program's command line may carry its password: only its pid and program name are shown.
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, "--password=CANARY-HOLDER"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        port = int(holder.stdout.readline())
        assert cli.main(["serve", "--transport", "http", "--port", str(port), "--quiet"]) == 2
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err
    assert f"by pid {holder.pid} ({Path(sys.executable).name})" in err, err
    assert "CANARY" not in err and "-c" not in err
