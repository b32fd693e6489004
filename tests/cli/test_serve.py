"""cli/serve.py's named pieces: the HTTP limits ``serve`` starts with and the request-state key.
``serve`` itself runs as a real process in tests/e2e (test_http_transport, test_startup_block)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mcp_gateway.cli.parser import build_parser
from mcp_gateway.cli.serve import connection_limits, discovery_line, loaded_line, request_state_key
from mcp_gateway.vocabulary.errors import GatewayError
from mcp_gateway.vocabulary.settings import Settings

KEY = "k" * 43


def _serve(*argv: str) -> SimpleNamespace:
    return SimpleNamespace(**vars(build_parser(only="serve").parse_args(["serve", "--transport", "http", *argv])))


def test_the_limits_are_the_options_given() -> None:
    limits = connection_limits(_serve("--max-sessions", "10", "--drain-timeout", "3", "--shutdown-delay", "1.5"))
    assert (limits.max_sessions, limits.drain_timeout, limits.shutdown_delay) == (10, 3.0, 1.5)
    assert limits.connection_limit > limits.max_sessions  # its default stays above the sessions'
    assert connection_limits(_serve("--max-connections", "50", "--max-sessions", "10")).connection_limit == 50


def test_a_connection_limit_at_or_below_the_sessions_is_refused_before_anything_starts() -> None:
    with pytest.raises(GatewayError, match="--max-connections 10 does not exceed --max-sessions 10"):
        connection_limits(_serve("--max-connections", "10", "--max-sessions", "10"))


def test_the_request_state_key_follows_the_master_key_and_the_project(tmp_path: Path) -> None:
    def key(master: str, project: str) -> bytes:
        settings = Settings(manifest_path=None, state_dir=tmp_path, env={"MCP_GATEWAY_MASTER_KEY": master})
        return request_state_key(settings, SimpleNamespace(manifest=SimpleNamespace(project=project)))  # type: ignore[arg-type]

    first = key(KEY, "p")
    assert len(first) == 32 and first == key(KEY, "p")  # every instance and restart verifies the same state
    assert first != key(KEY, "q") and first != key("m" * 43, "p")
    assert KEY.encode() not in first


class _Unused:
    """A provider the start-up line names but never asks for a vector."""

    model = "tiny"

    async def embed(self, texts: object) -> object:
        raise AssertionError("nothing is embedded to write the start-up block")


def test_the_start_up_block_names_what_hybrid_discovery_will_embed() -> None:
    from mcp_gateway.discovery.dense import MemoryVectorStore
    from mcp_gateway.discovery.hybrid import HybridSearch
    from tests.support.actions import catalog_action

    dense = HybridSearch(_Unused(), MemoryVectorStore())  # type: ignore[arg-type]
    gw = SimpleNamespace(dense=dense, manifest=SimpleNamespace(connectors=["github", "petstore"]))
    # the catalog loads in the background after the block is written: nothing is scheduled yet
    line = discovery_line(gw)  # type: ignore[arg-type]
    until = "each ranks by meaning once its stored vectors are read or new ones made, by words until then"
    assert line == f"hybrid (tiny; 2 connectors loading); {until}"
    dense.schedule("petstore", [catalog_action("petstore", "list_pets")])
    gw.discovery_status = dense.status()
    line = discovery_line(gw)  # type: ignore[arg-type]
    assert line == f"hybrid (tiny; 0 of 1 connectors embedded); {until}"


def test_the_stdio_register_line_passes_the_database_url_on_by_name(tmp_path: Path) -> None:
    # Without it the registered server would run on the state folder's SQLite, another store entirely.
    from mcp_gateway.cli.serve import claude_line

    url = "postgresql://gw:CANARY-pw@127.0.0.1:5432/gateway"
    settings = Settings.from_env({"MCP_GATEWAY_DATABASE_URL": url}, state_dir=str(tmp_path))
    line = claude_line(SimpleNamespace(transport="stdio", settings=settings, agent=None))
    assert '-e MCP_GATEWAY_DATABASE_URL="$MCP_GATEWAY_DATABASE_URL"' in line and "CANARY" not in line
    alone = Settings.from_env({}, state_dir=str(tmp_path))
    sqlite = claude_line(SimpleNamespace(transport="stdio", settings=alone, agent=None))
    assert "MCP_GATEWAY_DATABASE_URL" not in sqlite


def test_the_start_block_counts_the_connectors_that_loaded_and_failed() -> None:
    def gw(*statuses: str) -> Any:
        return SimpleNamespace(states=lambda: [SimpleNamespace(status=s) for s in statuses])

    assert loaded_line(gw("ready", "error", "needs_auth")) == " (2 loaded, 1 failed: see the warnings above)"
    assert loaded_line(gw("ready")) == " (1 loaded)"
    assert loaded_line(gw()) == ""  # stdio: the block is out before the connectors load
