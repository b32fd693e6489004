"""What agents may not see of a connector is counted and explained alike by ``sync`` and
``connectors`` (the CLI table and JSON, and the ``connectors`` meta-tool's result they print).

The spec (``tests/fixtures/specs/crlf_openapi.json``, written for this test) reproduces Rocket.Chat's
published OpenAPI description, whose descriptions end lines with CRLF: those are line endings, so
every such operation is available; one description carries a right-to-left override, which is held.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from mcp_gateway import cli
from mcp_gateway.cli import listing
from mcp_gateway.cli.commands import principal
from tests.support.two_paths import isolate

SPEC = Path(__file__).parents[1] / "fixtures" / "specs" / "crlf_openapi.json"

MANIFEST = """
project: withheld
policies:
  - {match: "chat.users_*", action: block}
connectors:
  - slug: chat
    base_url: http://127.0.0.1:9/api/v1
    source: {openapi: crlf_openapi.json}
"""


@pytest.fixture
def manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(tmp_path, monkeypatch)
    monkeypatch.setenv("MCP_GATEWAY_DISCOVERY_MODE", "lexical")
    shutil.copy(SPEC, tmp_path / SPEC.name)
    path = tmp_path / "gateway.yaml"
    path.write_text(MANIFEST)
    return path


def run(capsys: pytest.CaptureFixture[str], manifest: Path, *argv: str) -> str:
    capsys.readouterr()
    code = cli.main([*argv, "--manifest", str(manifest)])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


def entry(rows: list[dict[str, Any]]) -> dict[str, Any]:
    (found,) = [r for r in rows if r["slug"] == "chat"]
    return found


def test_sync_and_connectors_count_alike_and_say_why(
    manifest: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    note = "6 actions: 4 available, 1 held for review (hides text), 1 hidden by policy"
    synced = entry(json.loads(run(capsys, manifest, "sync", "--json")))
    assert synced["actions"] == 6  # everything the spec describes loaded
    assert synced["withheld"] == {"held for review (hides text)": 1, "hidden by policy": 1}
    assert synced["note"] == note
    listed = entry(json.loads(run(capsys, manifest, "connectors", "--json"))["connectors"])
    assert listed["actions"] == 4 and listed["withheld"] == synced["withheld"] and listed["note"] == note
    assert listed["actions"] + sum(listed["withheld"].values()) == synced["actions"]

    # The tables say the same below their rows, and where to see what is held.
    for command in ("sync", "connectors"):
        table = run(capsys, manifest, command)
        assert f"chat: {note}\n" in table, table
        assert "`mcp-gateway review` lists the actions held for review" in table

    # Only the right-to-left override is held: the CRLF descriptions (integrations.create among
    # them) are whitespace.
    held = json.loads(run(capsys, manifest, "review", "--json"))["held"]
    assert [h["name"] for h in held] == ["chat.chat_react"]
    assert held[0]["flags"] == ["description: hides text: 2 invisible or control characters (U+202C, U+202E)"]

    # Approved as it is, it counts as available on both, with nothing left to explain but the policy.
    run(capsys, manifest, "review", "--all")
    note = "6 actions: 5 available, 1 hidden by policy"
    assert entry(json.loads(run(capsys, manifest, "sync", "--json")))["note"] == note
    assert entry(json.loads(run(capsys, manifest, "connectors", "--json"))["connectors"])["note"] == note


def test_the_light_path_answers_only_when_nothing_is_held(manifest: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, manifest, "sync")
    args = cli.build_parser().parse_args(["connectors", "--manifest", str(manifest)], namespace=cli.Args())
    assert listing.connectors_from_state(args, principal(args)) is None  # the full path says why
    manifest.write_text(MANIFEST.replace("crlf_openapi.json}", "crlf_openapi.json}\n    trust: auto"))
    run(capsys, manifest, "sync")
    light = listing.connectors_from_state(args, principal(args))
    assert light is not None
    assert entry(light["connectors"])["note"] == "6 actions: 5 available, 1 hidden by policy"
    assert entry(json.loads(run(capsys, manifest, "connectors", "--json"))["connectors"]) == entry(light["connectors"])
