"""Audit rows are written in the background: every way a served gateway stops must still leave one
row per call in the table (SPEC 9). Each test makes calls through the real SDK client, stops the
``serve`` subprocess the way an operator or a client would, then reads the trail with the CLI."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from tests.e2e.conftest import GatewayEnv, HttpGateway, http_client, structured

pytestmark = pytest.mark.anyio
CALLS = 25


def _audit_rows(env: GatewayEnv) -> list[dict[str, object]]:
    return json.loads(env.cli("audit", "--json", "--limit", "1000").stdout)


async def _calls(client: Client) -> None:
    for i in range(CALLS):
        result = structured(await client.call_tool("call", {"tool": "open_api.items.get", "args": {"id": str(i)}}))
        assert result["status"] == "ok", result


async def test_sigterm_on_http_writes_the_queue_and_exits_cleanly(
    gateway_env: GatewayEnv, http_gateway: HttpGateway
) -> None:
    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    async with http_client(http_gateway.url, token) as client:
        await _calls(client)
    http_gateway.stop()  # SIGTERM
    # 0, not -SIGTERM: uvicorn stopped gracefully and open_gateway unwound, which is where the
    # audit queue is written and the store closed.
    assert http_gateway.proc.returncode == 0
    assert len(_audit_rows(gateway_env)) == CALLS


async def test_stdio_eof_writes_the_queue(gateway_env: GatewayEnv) -> None:
    async with Client(gateway_env.stdio_params(), mode="legacy") as client:
        await _calls(client)
    assert len(_audit_rows(gateway_env)) == CALLS


def _child_running(manifest: Path) -> int:
    """The pid of the stdio gateway this test process spawned."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        if parent == os.getpid() and b"serve" in cmdline and str(manifest).encode() in cmdline:
            return int(entry.name)
    raise AssertionError("the stdio gateway process was not found")


async def test_sigterm_on_stdio_writes_the_queue_before_the_process_ends(gateway_env: GatewayEnv) -> None:
    async with Client(gateway_env.stdio_params(), mode="legacy") as client:
        await _calls(client)
        pid = _child_running(gateway_env.manifest)
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while _alive(pid):
            assert time.monotonic() < deadline, "the gateway did not end on SIGTERM"
            await anyio.sleep(0.05)
    assert len(_audit_rows(gateway_env)) == CALLS


def _alive(pid: int) -> bool:
    """Running, as opposed to gone or a zombie waiting for the SDK client to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2 :][:1] != b"Z"


async def test_stdio_eof_after_a_minted_link_ends_quietly(gateway_env: GatewayEnv) -> None:
    """A minted link starts the pages server beside stdio; closing stdin stops it without a traceback."""
    errlog = gateway_env.root / "stderr.log"
    with errlog.open("w") as err:
        async with Client(stdio_client(gateway_env.stdio_params(), errlog=err), mode="legacy") as client:
            link = structured(await client.call_tool("connect", {"connector": "bearer_api"}))
            assert link["connect_url"].startswith(f"http://127.0.0.1:{gateway_env.pages_port}/"), link
            async with httpx2.AsyncClient() as http:  # the pages answer while the session is open
                assert (await http.get(link["connect_url"])).status_code == 200
    logged = errlog.read_text()
    assert "Traceback" not in logged and "CancelledError" not in logged, logged


SLOW = """  - slug: slow_api
    base_url: {upstream}
    source:
      http:
        actions:
          - path: wait
            method: GET
            url: /slow
            summary: Answer after a while
            input_schema: {{type: object, properties: {{s: {{type: string}}}}}}
agents:"""


def _with_slow_action(env: GatewayEnv) -> None:
    text = env.manifest.read_text().replace("agents:", SLOW.format(upstream=env.upstream_url), 1)
    env.manifest.write_text(text.replace("connectors: [", "connectors: [slow_api, ", 1))


async def _until_sent(env: GatewayEnv) -> None:
    with anyio.fail_after(20):
        while not any(r.path == "/slow" for r in env.upstream.requests):  # noqa: ASYNC110 -- a list, no event
            await anyio.sleep(0.05)


@pytest.mark.parametrize(
    ("signals", "extra"),
    [((signal.SIGTERM,), ("--drain-timeout", "1")), ((signal.SIGINT, signal.SIGINT), ())],
    ids=["drain-runs-out", "ctrl-c-twice"],
)
async def test_a_call_cut_by_the_stop_is_named_audited_interrupted_and_answered(
    gateway_env: GatewayEnv, signals: tuple[signal.Signals, ...], extra: tuple[str, ...]
) -> None:
    # The cut call was a 50-line traceback at ERROR, false "store unavailable" warnings, a plain 500
    # to the agent, a row saying cancelled and an exit code of 0.
    _with_slow_action(gateway_env)
    token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
    server = HttpGateway(gateway_env, gateway_env.root / "cut.log", *extra)
    answered: list[str] = []
    try:
        async with http_client(server.url, token) as client:

            async def call() -> None:
                try:
                    await client.call_tool("call", {"tool": "slow_api.wait", "args": {"s": "30"}})
                except Exception as exc:  # the cut answer is a JSON-RPC error
                    answered.append(str(exc))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await _until_sent(gateway_env)
                for signum in signals:
                    server.proc.send_signal(signum)
                    await anyio.sleep(0.3)
                await anyio.to_thread.run_sync(server.proc.wait, 20)
    finally:
        server.stop()
    log = server.log()
    assert server.proc.returncode == 1, log
    assert answered and "shutting down" in answered[0] and "may have reached the upstream" in answered[0]
    assert "stopping: 1 call(s) in flight (" in log and "slow_api.wait" in log, log
    assert log.count("stopping: cut the call ") == 1 and "audited interrupted" in log
    assert "stopped; 1 call(s) were cut" in log
    assert "Traceback" not in log and " ERROR " not in log and "store" not in log.lower(), log
    row = _audit_rows(gateway_env)[0]
    assert row["status"] == "interrupted" and row["action"] == "slow_api.wait"


async def test_sigterm_on_stdio_names_the_cut_call_and_audits_it_interrupted(gateway_env: GatewayEnv) -> None:
    _with_slow_action(gateway_env)
    errlog = gateway_env.root / "stdio.log"
    with errlog.open("w") as err:
        async with Client(stdio_client(gateway_env.stdio_params(), errlog=err), mode="legacy") as client:

            async def call() -> None:
                with pytest.raises(Exception):  # noqa: B017 -- the connection closes under it
                    await client.call_tool("call", {"tool": "slow_api.wait", "args": {"s": "30"}})

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await _until_sent(gateway_env)
                pid = _child_running(gateway_env.manifest)
                os.kill(pid, signal.SIGTERM)
                with anyio.fail_after(20):
                    while _alive(pid):  # noqa: ASYNC110 -- a process, no event
                        await anyio.sleep(0.05)
    log = errlog.read_text()
    assert "stopping (SIGTERM): 1 call(s) in flight are cut" in log, log
    assert log.count("stopping: cut the call ") == 1 and "stopped; 1 call(s) were cut" in log
    row = _audit_rows(gateway_env)[0]
    assert row["status"] == "interrupted" and row["action"] == "slow_api.wait"
