"""``connectors`` answered from the stored state (``cli/listing.py``) prints exactly what the full
path (a ``Gateway`` synced through ``runtime.open_gateway``) prints, and hands over to it whenever
it cannot vouch for the answer.

Each comparison runs the command twice in-process on the same state: once as shipped (the light path
must have answered: checked, so a comparison never passes because both runs took the full path),
once with the light path switched off.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from mcp_gateway import cli
from mcp_gateway.auth.oauth2 import TOKEN_NAME
from mcp_gateway.cli import listing
from mcp_gateway.manifest.bundled import CATALOG_DIR
from mcp_gateway.primitives.secrets import PROJECT_WIDE
from mcp_gateway.services.identity import OPERATOR
from tests.support.two_paths import TwoPaths, isolate

PETSTORE = Path(str(CATALOG_DIR)) / "specs" / "petstore.json"

MANIFEST = """
project: listing
policies:
  - {{match: "hidden_api.secret.*", action: block}}
connectors:
  - slug: echo
    name: Echo service
    description: Items, fetched and made.
    base_url: http://127.0.0.1:9
    auth: {{type: bearer}}
{actions}
  - slug: open_api
    base_url: http://127.0.0.1:9
{actions}
  - slug: mine
    base_url: http://127.0.0.1:9
    auth: {{type: bearer}}
    credentials: per_user
{actions}
  - slug: hidden_api
    base_url: http://127.0.0.1:9
    auth: {{type: basic}}
    policies:
      - {{match: "items.create", action: block, when: {{name: {{eq: x}}}}}}
    source:
      http:
        actions:
          - {{path: items.list, method: GET, url: /items}}
          - {{path: secret.read, method: GET, url: /secret}}
          - {{path: secret.wipe, method: DELETE, url: /secret}}
  - slug: pets
    base_url: http://127.0.0.1:9
    auth: {{type: api_key, in: header, name: X-Key}}
    source: {{openapi: {spec}}}
  - slug: bare
    base_url: http://127.0.0.1:9
    auth: {{type: none}}
    request_action: true
  - slug: lent
    base_url: http://127.0.0.1:9
    auth: {{type: oauth2, flow: client_credentials, token_url: "http://127.0.0.1:9/token"}}
  - slug: code
    base_url: http://127.0.0.1:9
    auth: {{type: oauth2, authorize_url: "http://127.0.0.1:9/authorize", token_url: "http://127.0.0.1:9/token"}}
  - slug: code_mine
    base_url: http://127.0.0.1:9
    credentials: per_user
    auth: {{type: oauth2, authorize_url: "http://127.0.0.1:9/authorize", token_url: "http://127.0.0.1:9/token"}}
agents:
  - {{name: bot, connectors: [echo, pets]}}
{discovery}
"""

ACTIONS = """    source:
      http:
        actions:
          - {path: items.get, method: GET, url: "/items/{id}", summary: Fetch one item}
          - {path: items.create, method: POST, url: /items, summary: Create an item}"""


def _listing(
    manifest: Path | None, state_dir: Path, capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch
) -> TwoPaths:
    return TwoPaths("connectors", listing, "connectors_from_state", manifest, state_dir, capsys, mp)


@pytest.fixture
def several(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[TwoPaths]:
    isolate(tmp_path, monkeypatch)
    spec = tmp_path / "petstore.json"
    shutil.copy(PETSTORE, spec)
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(MANIFEST.format(actions=ACTIONS, spec=spec.name, discovery=""))
    env = _listing(manifest, tmp_path / "state", capsys, monkeypatch)
    env.run("sync")
    yield env


def test_the_bundled_default_lists_the_same_both_ways(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(tmp_path, monkeypatch)
    env = _listing(None, tmp_path / "state", capsys, monkeypatch)
    env.run("sync")
    for extra in ((), ("--json",)):
        fast, full = env.both(*extra)
        assert fast == full
    assert "github" in fast


def test_several_connectors_list_the_same_both_ways(several: TwoPaths) -> None:
    several.run("secret", "set", "echo", stdin="echo-token-1234\n")
    several.run("secret", "set", "hidden_api", stdin='{"username": "u", "password": "p"}')
    # per_user: a project-wide value (stored before `secret set` refused it) leaves the operator's own missing.
    with closing(sqlite3.connect(several.state_dir / "state.db")) as db, db:
        db.execute("INSERT INTO credential (connector, principal, name, sealed) VALUES ('mine', '*', 'default', x'00')")
    for extra in ((), ("--json",), ("--agent", "bot"), ("--agent", "bot", "--json")):
        fast, full = several.both(*extra)
        assert fast == full, extra
    table = several.both()[0]
    # The block rule hides two of hidden_api's three actions; a conditional one hides none of echo's.
    rows, notes = table.splitlines()[1:10], table.splitlines()[10:]
    assert notes == ["hidden_api: 3 actions: 1 available, 2 hidden by policy"]
    assert [line.split()[:3] for line in rows] == [
        ["bare", "ready", "1"],
        ["code", "needs_auth", "0"],
        ["code_mine", "needs_auth", "0"],
        ["echo", "ready", "2"],
        ["hidden_api", "ready", "1"],
        ["lent", "needs_auth", "0"],
        ["mine", "needs_auth", "2"],
        ["open_api", "ready", "2"],
        ["pets", "needs_auth", "20"],
    ]
    # OAuth2 readiness is which keys exist (client, token set; OAuth2Tokens.ready decrypts nothing):
    # written straight into the store, step by step, each step compared.
    steps = [
        ("lent", PROJECT_WIDE, "default"),
        ("code", PROJECT_WIDE, "default"),
        ("code", PROJECT_WIDE, TOKEN_NAME),
        ("code_mine", PROJECT_WIDE, "default"),
        ("code_mine", PROJECT_WIDE, TOKEN_NAME),  # a per_user token set must be the caller's own
        ("code_mine", OPERATOR.user, TOKEN_NAME),
    ]
    for step in steps:
        with closing(sqlite3.connect(several.state_dir / "state.db")) as db, db:
            db.execute("INSERT INTO credential (connector, principal, name, sealed) VALUES (?, ?, ?, x'00')", step)
        fast, full = several.both("--json")
        assert fast == full, step
    assert {c["slug"]: c["status"] for c in json.loads(fast)["connectors"]} == {
        "bare": "ready",
        "code": "ready",
        "code_mine": "ready",
        "echo": "ready",
        "hidden_api": "ready",
        "lent": "ready",
        "mine": "needs_auth",
        "open_api": "ready",
        "pets": "needs_auth",
    }


@pytest.mark.parametrize(
    "discovery",
    [
        "discovery: {mode: lexical}",
        "discovery: {embeddings: {url: 'http://127.0.0.1:9/v1', model: tiny}}",
        # mode auto, where the suite's fixture finds no local model: lexical only
        "discovery: {mode: auto}",
        # the local model as installed (when it is; else lexical both ways): neither path loads it
        pytest.param("discovery: {mode: auto}", marks=pytest.mark.hybrid, id="auto-local-model"),
    ],
)
def test_the_discovery_line_is_the_same_both_ways(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, discovery: str
) -> None:
    isolate(tmp_path, monkeypatch)
    monkeypatch.delenv("MCP_GATEWAY_DISCOVERY_MODE", raising=False)
    spec = tmp_path / "petstore.json"
    shutil.copy(PETSTORE, spec)
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(MANIFEST.format(actions=ACTIONS, spec=spec.name, discovery=discovery))
    env = _listing(manifest, tmp_path / "state", capsys, monkeypatch)
    env.run("sync")
    fast, full = env.both("--json")
    assert fast == full


def test_a_changed_spec_or_manifest_takes_the_full_path(several: TwoPaths) -> None:
    assert several.light() is not None
    spec = several.manifest.parent / "petstore.json" if several.manifest else None
    assert spec is not None
    spec.write_text(spec.read_text().replace('"Add a new pet to the store"', '"Add a pet"'))
    assert several.light() is None  # the sync would normalize the spec again
    several.run("sync")
    assert several.light() is not None
    manifest = several.manifest
    assert manifest is not None
    manifest.write_text(manifest.read_text().replace("summary: Fetch one item", "summary: Fetch an item"))
    assert several.light() is None  # echo's settings changed: its actions would be normalized again


def test_what_the_light_path_cannot_vouch_for_takes_the_full_path(
    several: TwoPaths, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MCP_GATEWAY_DATABASE_URL", "postgresql://u@127.0.0.1:9/db")
    assert several.light() is None  # PostgreSQL
    monkeypatch.delenv("MCP_GATEWAY_DATABASE_URL")
    monkeypatch.setenv("MCP_GATEWAY_STATE_DIR", str(tmp_path / "fresh"))
    assert several.light() is None  # nothing synced yet
    monkeypatch.setenv("MCP_GATEWAY_STATE_DIR", str(several.state_dir))
    monkeypatch.setenv("MCP_GATEWAY_DISCOVERY_MODE", "sometimes")
    assert several.light() is None  # the full path names the mistake
    monkeypatch.setenv("MCP_GATEWAY_DISCOVERY_MODE", "lexical")
    assert several.light() is not None
    assert several.manifest is not None
    text = several.manifest.read_text()
    several.manifest.write_text(
        text.replace(
            "  - slug: bare\n",
            "  - slug: graph\n    base_url: http://127.0.0.1:9\n    source: {graphql: {introspect: true}}\n"
            "  - slug: bare\n",
        )
    )
    assert several.light() is None  # graph was never synced
    assert cli.main(["sync", "--manifest", str(several.manifest)]) == 1  # graph: nothing answers there
    assert several.light() is None  # introspected over the network at every sync: the full path does it
