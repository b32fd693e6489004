"""Upstream MCP servers behind the gateway, end to end: ``mcp-gateway serve`` as a subprocess
reached by the official SDK client over stdio, in front of server-everything (npm, stdio),
mcp-server-time (PyPI, stdio), the lab server with a credential in its environment (stdio) and
a streamable-HTTP lab server that is down when the gateway starts and comes back later."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.support.env import child_env
from tests.support.mcp_servers import REPO, McpHttpServer, everything_command, lab_command, time_command

from .conftest import MASTER_KEY, structured

pytestmark = pytest.mark.anyio

SECRET = "e2e-mcp-upstream-canary-0123456789"


def yaml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


@pytest.fixture
def remote() -> Iterator[McpHttpServer]:
    server = McpHttpServer.lab("streamable-http")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def setup(tmp_path: Path, remote: McpHttpServer) -> tuple[Path, dict[str, str]]:
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(
        f"""
project: e2e-mcp
public_url: http://127.0.0.1:1
connectors:
  - slug: everything
    trust: auto
    source: {{mcp: {{command: {yaml_list(everything_command("stdio"))}}}}}
  - slug: clock
    trust: auto
    source: {{mcp: {{command: {yaml_list(time_command())}}}}}
  - slug: lab
    auth: {{type: bearer}}
    trust: auto
    source: {{mcp: {{command: {yaml_list(lab_command())}, cwd: "{REPO}", env: {{LAB_TOKEN: "{{secret}}"}}}}}}
  - slug: remote
    trust: auto
    source: {{mcp: {{url: "{remote.url}"}}}}
"""
    )
    env = child_env() | {
        "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
        "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
    }
    return manifest, env


def cli(manifest: Path, env: dict[str, str], *args: str, stdin: str | None = None) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_gateway", *args, "--manifest", str(manifest)],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


async def call(client: Client, tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return structured(await client.call_tool("call", {"tool": tool, "args": args or {}}))


async def test_discover_describe_call_across_mcp_upstreams(
    setup: tuple[Path, dict[str, str]], remote: McpHttpServer
) -> None:
    manifest, env = setup
    cli(manifest, env, "secret", "set", "lab", stdin=SECRET)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_gateway", "serve", "--manifest", str(manifest)], env=env
    )
    errlog = manifest.parent / "gateway-stderr.log"
    with errlog.open("w") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
            await exercise(client, remote)
    assert SECRET not in errlog.read_text()  # nor in the gateway's log (its children's stderr included)


async def loaded_connectors(client: Client) -> dict[str, dict[str, Any]]:
    """``connectors`` once no connector is still ``loading``: over stdio it answers within seconds with
    what the start-up sync has loaded so far, as an agent on a busy machine sees it."""
    with anyio.fail_after(90):
        while True:
            listed = structured(await client.call_tool("connectors", {}))["connectors"]
            if all(c["status"] != "loading" for c in listed):
                return {c["slug"]: c for c in listed}
            await anyio.sleep(0.5)


async def exercise(client: Client, remote: McpHttpServer) -> None:
    """The agent's path through the meta-tools, against every upstream."""
    by_slug = await loaded_connectors(client)
    assert by_slug["everything"]["status"] == "ready" and by_slug["everything"]["actions"] >= 10
    assert by_slug["clock"]["status"] == "ready" and by_slug["clock"]["actions"] == 2
    assert by_slug["lab"]["status"] == "ready"
    assert by_slug["remote"]["status"] == "error" and "could not reach" in by_slug["remote"]["error"]

    found = structured(await client.call_tool("discover", {"query": "echo back a message"}))
    assert "everything.echo" in [r["name"] for r in found["results"][:3]]
    described = structured(await client.call_tool("describe", {"tool": "everything.echo"}))
    assert described["risk"] == "read" and "message" in described["input_schema"]["properties"]

    echoed = await call(client, "everything.echo", {"message": "through the gateway"})
    assert echoed["status"] == "ok"
    assert echoed["data"]["content"] == [{"type": "text", "text": "Echo: through the gateway"}]
    image = await call(client, "everything.get_tiny_image")
    assert image["data"]["content"][1]["type"] == "image"
    assert image["data"]["content"][1]["data"].startswith("iVBORw0KGgo")  # a PNG, base64

    now = await call(client, "clock.get_current_time", {"timezone": "Europe/Paris"})
    assert now["data"]["structuredContent"]["timezone"] == "Europe/Paris"

    whoami = await call(client, "lab.whoami")
    assert whoami["data"]["structuredContent"]["env_token"] == "[redacted]"
    assert SECRET not in repr(whoami)

    remote.start()  # the upstream comes back: the first call loads the connector
    recovered = await call(client, "remote.peek", {"key": "back"})
    assert recovered["status"] == "ok", recovered
    assert recovered["data"]["structuredContent"] == {"key": "back", "value": 4}
