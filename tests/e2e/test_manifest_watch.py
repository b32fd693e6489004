"""Edits reach a running server: ``add`` and ``remove`` beside ``serve --transport http`` change the
manifest file, the server reloads it by itself and logs what changed, and the command says that the
running server took the change."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.test_edit import _spec
from tests.support.env import child_env
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]

MANIFEST = """\
project: watched
connectors:
  - slug: first
    base_url: http://127.0.0.1:9
    source: {http: {actions: [{path: items.list, method: GET, url: /items, summary: List the items}]}}
"""


def _wait_for(what: str, done: object, log: Path, server: subprocess.Popen[bytes], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not done():  # type: ignore[operator]
        assert server.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{what}:\n{log.read_text()}"
        time.sleep(0.1)


def test_add_and_remove_reach_a_running_server(tmp_path: Path) -> None:
    (tmp_path / "gateway.yaml").write_text(MANIFEST)
    (tmp_path / "billing.json").write_text(json.dumps(_spec("http://127.0.0.1:9")))
    state = tmp_path / "state"
    env = child_env() | {
        "PYTHONPATH": str(ROOT),
        "MCP_GATEWAY_STATE_DIR": str(state),
        "MCP_GATEWAY_MASTER_KEY": "watch-test-master-key-0123456789abcdef0123",
    }
    cli = [sys.executable, "-m", "mcp_gateway"]
    log_path = tmp_path / "serve.log"
    log = log_path.open("w")
    server = subprocess.Popen(
        [*cli, "serve", "--transport", "http", "--port", str(free_port())],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=log,
    )
    try:
        _wait_for("the server never recorded its address", (state / "served.json").exists, log_path, server)
        added = subprocess.run([*cli, "add", "billing.json", "--no-sync"], cwd=tmp_path, env=env, capture_output=True)
        assert added.returncode == 0, added.stderr
        assert b"took the change" in added.stderr, added.stderr
        assert "added billing" in log_path.read_text()  # the server logged what changed
        assert "discovery settings changed" not in log_path.read_text()  # the same mode as at start

        removed = subprocess.run([*cli, "remove", "first"], cwd=tmp_path, env=env, capture_output=True)
        assert removed.returncode == 0, removed.stderr
        assert b"took the change" in removed.stderr, removed.stderr
        assert "removed first" in log_path.read_text()

        # An edit by hand is picked up too; one that does not load is refused and the server keeps going.
        (tmp_path / "gateway.yaml").write_text("project: watched\nconnectors: [{slug: 1bad}]\n")
        _wait_for("no refusal logged", lambda: "manifest reload refused" in log_path.read_text(), log_path, server)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
