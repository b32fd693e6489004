"""Links follow the address actually served: ``serve --transport http`` on a port of its own records
it in the state folder, and ``connect`` run beside it mints a link on that port which opens."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcp_gateway.vocabulary.served import url_answers
from tests.support.env import child_env
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]

MANIFEST = """\
project: served
connectors:
  - slug: api
    base_url: http://127.0.0.1:9
    auth: {type: bearer}
    source: {http: {actions: [{path: items.list, method: GET, url: /items, summary: List the items}]}}
"""


def _folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The manifest (no public_url: links follow the served address) in ``tmp_path``, the state folder,
    and the environment of the gateway processes run there."""
    (tmp_path / "gateway.yaml").write_text(MANIFEST)
    state = tmp_path / "state"
    env = child_env() | {
        "PYTHONPATH": str(ROOT),
        "MCP_GATEWAY_STATE_DIR": str(state),
        "MCP_GATEWAY_MASTER_KEY": "served-test-master-key-0123456789abcdef01",
    }
    return state, env


async def _connect_over_stdio(folder: Path, env: dict[str, str]) -> str:
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_gateway", "serve"], env=env, cwd=folder)
    with (folder / "stdio.log").open("w") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
            result = await client.call_tool("connect", {"connector": "api"})
    assert result.structured_content is not None, result
    return str(result.structured_content["connect_url"])


def test_connect_beside_a_server_on_another_port_mints_a_link_it_serves(tmp_path: Path) -> None:
    state, env = _folder(tmp_path)
    cli = [sys.executable, "-m", "mcp_gateway"]
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        [*cli, "serve", "--transport", "http", "--port", str(port)], cwd=tmp_path, env=env, stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 60
        while not (state / "served.json").exists():
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "the server never recorded its address"
            time.sleep(0.1)
        minted = subprocess.run([*cli, "connect", "api"], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert minted.returncode == 0, minted.stderr
        link = json.loads(minted.stdout)["connect_url"]
        assert link.startswith(f"http://127.0.0.1:{port}/connect/")
        assert "must be served" not in minted.stderr  # something serves it: no advice to start the pages
        assert "manifest gateway.yaml (./gateway.yaml in this folder)" in minted.stderr
        page = httpx2.get(link, timeout=10)
        assert page.status_code == 200 and "<form" in page.text

        # An agent over stdio beside it, on the same state folder: its links go there too, and work.
        stdio_link = anyio.run(_connect_over_stdio, tmp_path, env)
        assert stdio_link.startswith(f"http://127.0.0.1:{port}/connect/")
        assert httpx2.get(stdio_link, timeout=10).status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    assert not (state / "served.json").exists()  # removed at shutdown
    block = (tmp_path / "serve.log").read_text()
    assert f"MCP at http://127.0.0.1:{port}/mcp" in block and "claude mcp add --transport http" in block

    # Nothing serves now: the link goes to the default address, and the advice says to serve the pages.
    alone = subprocess.run([*cli, "connect", "api"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert alone.returncode == 0, alone.stderr
    assert json.loads(alone.stdout)["connect_url"].startswith("http://127.0.0.1:8765/connect/")
    if not url_answers("http://127.0.0.1:8765"):  # another program on this machine may use the default port
        assert "must be served" in alone.stderr


def test_a_second_server_of_the_state_folder_gives_the_record_back_when_it_stops(tmp_path: Path) -> None:
    # It removed the record on its way out while the first still served: commands beside them then
    # minted links to the default address, where nothing listened.
    state, env = _folder(tmp_path)
    cli = [sys.executable, "-m", "mcp_gateway"]
    servers: list[subprocess.Popen[bytes]] = []

    def start(port: int, name: str) -> None:
        log = (tmp_path / name).open("w")
        servers.append(
            subprocess.Popen(
                [*cli, "serve", "--transport", "http", "--port", str(port)],
                cwd=tmp_path,
                env=env,
                stdout=log,
                stderr=log,
            )
        )
        deadline = time.monotonic() + 60
        while f'"port": {port}' not in (
            (state / "served.json").read_text() if (state / "served.json").exists() else ""
        ):
            assert servers[-1].poll() is None, (tmp_path / name).read_text()
            assert time.monotonic() < deadline, "the server never recorded its address"
            time.sleep(0.1)

    first, second = free_port(), free_port()
    try:
        start(first, "first.log")
        start(second, "second.log")
        assert (
            f"another gateway of this state folder serves at http://127.0.0.1:{first}"
            in (tmp_path / "second.log").read_text()
        )
        servers[1].terminate()
        servers[1].wait(timeout=30)
        assert json.loads((state / "served.json").read_text())["port"] == first
        minted = subprocess.run([*cli, "connect", "api"], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert json.loads(minted.stdout)["connect_url"].startswith(f"http://127.0.0.1:{first}/connect/"), minted
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)
