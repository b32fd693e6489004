"""Write the ``initialize`` and ``tools/list`` answers shipped in the package
(``mcp_gateway/server/fast/stdio_answers.json``), which a stdio start in a new state folder replays
while the SDK loads (``server/fast/early_stdio.py``).

Each answer is what a real ``mcp-gateway serve`` gives with the fast paths off (the SDK answering
everything itself), one stdio session per protocol version the SDK negotiates, for ``tools/list``
with no parameters and with empty ones. The file's key is the build that made them
(``early_stdio.content_key``): any change to the package's code, its version, the SDK, pydantic or
Python's release makes it stale, and a stale file is never replayed (a start is then only slower);
``tests/server/test_early_stdio.py`` says when it is stale. Run after such a change:

    PYTHONPATH=$PWD python scripts/build_stdio_answers.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_gateway.server.fast import early_stdio

REPO = Path(__file__).resolve().parent.parent
TARGET = REPO / "mcp_gateway" / "server" / "fast" / "stdio_answers.json"
LISTINGS: tuple[dict[str, Any] | None, ...] = (None, {})
"""The ``tools/list`` parameters clients send: none at all, or an empty object."""


def _session(version: str, env: dict[str, str]) -> list[tuple[str, Any, dict[str, Any]]]:
    """One session's requests (method, params) and the SDK's answers, each request sent once the
    previous one is answered, as a client does."""
    initialize = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "build", "version": "1"}}
    requests: list[tuple[str, Any]] = [("initialize", initialize), *(("tools/list", p) for p in LISTINGS)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_gateway", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    answered = []
    try:
        for rid, (method, params) in enumerate(requests, 1):
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
            if params is not None:
                message["params"] = params
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            answer = json.loads(proc.stdout.readline())
            assert answer.get("id") == rid and "result" in answer, answer
            answered.append((method, params, answer["result"]))
            if method == "initialize":
                proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    return answered


def main() -> None:
    answers: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_")} | {
            "PYTHONPATH": str(REPO),
            "MCP_GATEWAY_STATE_DIR": str(Path(tmp) / "state"),
            "MCP_GATEWAY_MASTER_KEY": "build-stdio-answers-0123456789abcdef",
            "MCP_GATEWAY_DISCOVERY_MODE": "lexical",
            "MCP_GATEWAY_FAST_PATHS": "0",  # the SDK answers every request itself
        }
        for version in HANDSHAKE_PROTOCOL_VERSIONS:
            negotiated = None
            for method, params, result in _session(version, env):
                if method == "initialize":
                    negotiated = result["protocolVersion"]
                key = early_stdio.entry(method, params, negotiated)
                assert key is not None, (method, params)
                answers[key] = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
    built_with = early_stdio.build_environment()
    TARGET.write_text(
        json.dumps({"key": early_stdio.content_key(), "built_with": built_with, "answers": answers}, indent=1) + "\n"
    )
    print(
        f"{TARGET.relative_to(REPO)}: {len(answers)} answers for {len(HANDSHAKE_PROTOCOL_VERSIONS)} protocol versions"
    )


if __name__ == "__main__":
    main()
