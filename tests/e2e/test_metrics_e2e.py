"""Metrics end to end (issue 12 item 3): a real Prometheus server scrapes the gateway's
``--metrics-port`` and the sum of the calls counter, read through Prometheus's HTTP query API,
equals the calls made. ``/metrics`` on the main app needs an operator token; no secret is in it."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from .conftest import SECRETS, GatewayEnv, HttpGateway, free_port, http_client, structured

pytestmark = pytest.mark.anyio

PROMETHEUS = shutil.which("prometheus")


def _prometheus(root: Path, target: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    config = root / "prometheus.yml"
    config.write_text(
        f"""
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: mcp-gateway
    static_configs:
      - targets: ["{target}"]
"""
    )
    log = (root / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            PROMETHEUS or "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={root / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return proc, f"http://127.0.0.1:{port}"


def _query(base: str, expr: str) -> list[dict[str, Any]]:
    r = httpx2.get(f"{base}/api/v1/query", params={"query": expr}, timeout=5)
    r.raise_for_status()
    return r.json()["data"]["result"]


def _wait_value(base: str, expr: str, expected: float, timeout: float = 30) -> float | None:
    deadline, seen = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            result = _query(base, expr)
        except httpx2.HTTPError:
            result = []
        if result:
            seen = float(result[0]["value"][1])
            if seen == expected:
                return seen
        time.sleep(0.5)
    return seen


@pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus binary is not installed (Debian package prometheus)")
async def test_prometheus_scrapes_the_calls_made(gateway_env: GatewayEnv) -> None:
    gateway_env.set_secrets()
    gateway_env.cli("sync", check=False)
    metrics_port = free_port()
    gateway = HttpGateway(gateway_env, gateway_env.root / "gateway.log", "--metrics-port", str(metrics_port))
    prometheus: subprocess.Popen[bytes] | None = None
    try:
        token = gateway_env.cli("token", "create", "--agent", "bot").stdout.strip()
        statuses: list[str] = []
        async with http_client(gateway.url, token) as client:
            for i in range(5):
                ok = structured(
                    await client.call_tool("call", {"tool": "bearer_api.items.get", "args": {"id": str(i)}})
                )
                statuses.append(ok["status"])
            for _ in range(2):  # denied before reaching the upstream
                bad = structured(await client.call_tool("call", {"tool": "open_api.items.get", "args": {}}))
                statuses.append(bad["status"])
            blocked = structured(await client.call_tool("call", {"tool": "open_api.admin.purge", "args": {}}))
            statuses.append(blocked["status"])
            await client.call_tool("discover", {"query": "fetch an item"})
        assert statuses == ["ok"] * 5 + ["denied"] * 3

        # The main app's /metrics wants an operator token; the metrics port does not.
        assert httpx2.get(f"{gateway.url}/metrics").status_code == 401
        assert httpx2.get(f"{gateway.url}/metrics", headers={"Authorization": f"Bearer {token}"}).status_code == 401
        operator = gateway_env.cli("token", "create", "--operator").stdout.strip()
        scraped = httpx2.get(f"{gateway.url}/metrics", headers={"Authorization": f"Bearer {operator}"})
        assert scraped.status_code == 200 and "mcp_gateway_calls_total" in scraped.text
        text = httpx2.get(f"http://127.0.0.1:{metrics_port}/metrics").text
        for secret in SECRETS.values():
            assert secret not in text
        assert 'mcp_gateway_connector_ready{connector="bearer_api"} 1.0' in text
        assert "mcp_gateway_discover_seconds_count 1.0" in text

        prometheus, base = _prometheus(gateway_env.root, f"127.0.0.1:{metrics_port}")
        total = _wait_value(base, "sum(mcp_gateway_calls_total)", len(statuses))
        assert total == len(statuses), (gateway_env.root / "prometheus.log").read_text()[-2000:]
        ok_calls = _query(base, 'sum(mcp_gateway_calls_total{status="ok", connector="bearer_api"})')
        assert float(ok_calls[0]["value"][1]) == 5
        upstream = _query(base, 'sum(mcp_gateway_upstream_seconds_count{connector="bearer_api"})')
        assert float(upstream[0]["value"][1]) == 5
        assert float(_query(base, "mcp_gateway_store_up")[0]["value"][1]) == 1
    finally:
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(timeout=10)
        gateway.stop()
