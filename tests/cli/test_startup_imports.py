"""What a start imports (issue 14, "start fast"): listing commands never pay for the heavy packages.

Steady by construction: each case runs in a fresh interpreter and checks ``sys.modules``, never a clock.
The figures themselves are ``scripts/bench_startup.py``'s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.one_connector import ROOT, gateway_env, write_manifest

# Runs the gateway (or its children) as real processes: not in the fast lane.
pytestmark = pytest.mark.slow

# The embedding model's stack, GraphQL, the HTTP transport (built by the first request), the MCP SDK
# and the web server: none is needed to list connectors.
HEAVY = ("numpy", "tokenizers", "safetensors", "graphql", "httpcore2", "trio", "mcp", "mcp_types", "uvicorn")

_PROBE = """\
import json, sys
from mcp_gateway.cli import main
code = main(sys.argv[1:])
heavy = sorted(({name.split(".")[0] for name in sys.modules} | set(sys.modules)) & set(json.loads(HEAVY)))
sys.stderr.write("\\nIMPORTED " + json.dumps(heavy) + "\\n")
sys.exit(code)
"""


_PARSER_PROBE = "import json, sys, mcp_gateway.cli as c; c.build_parser(); print(json.dumps(list(sys.modules)))"


def _imported(tmp_path: Path, *argv: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    env = gateway_env(
        tmp_path,
        MCP_GATEWAY_MANIFEST=str(write_manifest(tmp_path)),
        # auto: hybrid whenever the embeddings extra is installed; listing must not load its model anyway
        MCP_GATEWAY_DISCOVERY_MODE="auto",
    )
    probe = _PROBE.replace("HEAVY", repr(json.dumps(heavy)))
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.rsplit("IMPORTED ", 1)[1])


def test_the_parser_alone_imports_nothing_heavy(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, mcp_gateway.cli as c; c.build_parser(); print(json.dumps(list(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
        check=True,
        cwd=tmp_path,
    )
    loaded = {name.split(".")[0] for name in json.loads(done.stdout)}
    assert loaded & {*HEAVY, "pydantic", "httpx2", "yaml"} == set()


EMBEDDING = {"numpy", "tokenizers"}
"""What ``sync`` may import: it embeds the catalogs it stores when the embeddings extra is installed, so
the ``serve`` after it ranks hybrid from its first query."""


def test_listing_commands_import_no_model_graphql_transport_or_sdk(tmp_path: Path) -> None:
    assert set(_imported(tmp_path, "sync")) <= EMBEDDING  # stores the catalog: the later commands start warm
    assert _imported(tmp_path, "connectors") == []
    assert _imported(tmp_path, "validate") == []
    assert _imported(tmp_path, "discover", "list", "items") == []  # ranks lexically: no catalog embedded yet


def test_validate_loads_no_cryptography_and_no_event_loop(tmp_path: Path) -> None:
    # It opens no credential (logging's secret filter must not pull the cipher in) and awaits nothing.
    assert _imported(tmp_path, "validate", heavy=("cryptography", "anyio", "asyncio")) == []


GATEWAY = ("mcp_gateway.core.gateway", "mcp_gateway.core.catalogs", "mcp_gateway.core.results", "mcp_gateway.runtime")
"""The core beyond what the light paths share with it (``core.visibility``, ``core.credential_readiness``,
``core.connectors_answer``, ``core.discover_answer``): the ``Gateway``, its sync, the executors."""


def test_connectors_on_a_synced_state_assembles_no_gateway(tmp_path: Path) -> None:
    # Every catalog is current: the stored state answers (cli/listing.py) with the gateway's own rules
    # and shaping, but no gateway, no event loop, no async SQLite driver and no HTTP client.
    assert set(_imported(tmp_path, "sync")) <= EMBEDDING
    light = (*GATEWAY, "asyncio", "aiosqlite", "httpx2", "cryptography")
    assert _imported(tmp_path, "connectors", heavy=light) == []
    shared = ("mcp_gateway.core.credential_readiness", "mcp_gateway.core.connectors_answer")
    assert _imported(tmp_path, "connectors", heavy=shared) == sorted(shared)
    # --json names the discovery mode (with mode auto, whether the local model is installed): that
    # imports discovery.providers, but not the HTTP client its embeddings endpoint would use.
    assert _imported(tmp_path, "connectors", "--json", heavy=light) == []


def test_discover_on_an_indexed_state_assembles_no_gateway(tmp_path: Path) -> None:
    # Every catalog current and its index kept (by the first discover): the stored state ranks
    # (cli/stored_discover.py) with the gateway's own rules and shaping, but no gateway, no event loop,
    # no async SQLite driver, no HTTP client, and not the regex analysis a manifest without regexes
    # never needs.
    assert set(_imported(tmp_path, "sync")) <= EMBEDDING
    assert _imported(tmp_path, "discover", "list", "items") == []  # the full path keeps the index
    light = (
        *GATEWAY,
        "asyncio",
        "anyio",
        "aiosqlite",
        "httpx2",
        "cryptography",
        "mcp_gateway.policy.regex_shape",
    )
    assert _imported(tmp_path, "discover", "list", "items", heavy=light) == []
    assert _imported(tmp_path, "discover", "list", "items", "--json", heavy=light) == []
    shared = ("mcp_gateway.core.visibility", "mcp_gateway.core.discover_answer")
    assert _imported(tmp_path, "discover", "list", "items", heavy=shared) == sorted(shared)


def test_store_listings_open_the_store_without_the_core(tmp_path: Path) -> None:
    # audit, token list and approvals list read the store only (store.opening, not runtime's re-export).
    assert set(_imported(tmp_path, "sync")) <= EMBEDDING
    core = ("mcp_gateway.core", "mcp_gateway.runtime", "httpx2")
    for argv in (("audit",), ("token", "list"), ("approvals", "list")):
        assert _imported(tmp_path, *argv, heavy=core) == [], argv
