"""A gateway subprocess over HTTP with extra options and environment, for the observability tests
(metrics, traces, store outages)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx2

from .conftest import GatewayEnv, free_port


class ObservedGateway:
    """``mcp-gateway serve --transport http`` with ``extra`` options and ``env`` added; ready once
    ``/healthz`` answers."""

    def __init__(self, env: GatewayEnv, log: Path, *extra: str, extra_env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        self._log = log.open("w")
        command = [sys.executable, "-m", "mcp_gateway", "serve", "--transport", "http", "--port", str(self.port)]
        self.proc = subprocess.Popen(
            [*command, "--manifest", str(env.manifest), "--public-url", self.url, *extra],
            env=env.env | (extra_env or {}),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited early:\n{log.read_text()}")
            try:
                if httpx2.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("gateway did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log.close()

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()
