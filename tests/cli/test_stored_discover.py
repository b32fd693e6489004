"""``discover`` answered from the stored state (``cli/stored_discover.py``) prints exactly what the full
path (a ``Gateway`` synced and indexed through ``runtime.open_gateway``) prints, and hands over to it
whenever it cannot vouch for the answer.

Each comparison runs the command twice in-process on the same state: once as shipped (the light path
must have answered: checked, so a comparison never passes because both runs took the full path),
once with the light path switched off.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import zlib
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from mcp_gateway.cli import stored_discover
from mcp_gateway.manifest.bundled import CATALOG_DIR
from mcp_gateway.store import catalog_lines
from mcp_gateway.store.catalog_lines import ActionLines
from mcp_gateway.vocabulary.model import ACTIONS_ADAPTER
from tests.support.two_paths import TwoPaths, isolate

PETSTORE = Path(str(CATALOG_DIR)) / "specs" / "petstore.json"

MANIFEST = """
project: finding
default_mode: risk
policies:
  - {{match: "hidden_api.secret.*", action: block}}
  - {{match: "*.items.delete", action: require_approval}}
connectors:
  - slug: echo
    name: Echo service
    base_url: http://127.0.0.1:9
    auth: {{type: bearer}}
    policies:
      - {{match: "items.list", action: always_run}}
{actions}
  - slug: store
    base_url: http://127.0.0.1:9
    trust: auto
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
      - {{match: "items.list", action: block, when: {{name: {{eq: x}}}}}}
    source:
      http:
        actions:
          - {{path: items.list, method: GET, url: /items, summary: List items}}
          - {{path: secret.read, method: GET, url: /secret, summary: Read the secret items}}
          - {{path: secret.wipe, method: DELETE, url: /secret, summary: Delete every secret item}}
  - slug: pets
    base_url: http://127.0.0.1:9
    auth: {{type: api_key, in: header, name: X-Key}}
    source: {{openapi: {spec}}}
  - slug: bare
    base_url: http://127.0.0.1:9
    auth: {{type: none}}
    request_action: true
agents:
  - {{name: bot, connectors: [echo, pets]}}
{discovery}
"""

ACTIONS = """    source:
      http:
        actions:
          - {path: items.get, method: GET, url: "/items/{id}", summary: Fetch one item}
          - path: items.list
            method: GET
            url: /items
            summary: List items
            params: {limit: query, owner: query}
            input_schema:
              type: object
              required: [owner]
              properties: {limit: {type: integer}, owner: {type: string, description: "Whose items"}}
          - {path: items.create, method: POST, url: /items, summary: Create an item}
          - {path: items.delete, method: DELETE, url: "/items/{id}", summary: Delete an item}"""

QUERIES = [
    ("list items",),
    ("create an item",),
    ("delete", "an", "item"),
    ("read the secret",),  # hidden by a block rule: hidden_api.secret.* never shows
    ("find pets by status",),
    ("add a new pet to the store",),
    ("send an arbitrary request",),
    ("x",),  # no term known: nothing, low confidence
    ("weather forecast for tomorrow",),  # nothing matches well
    ("echo.items_get",),  # a guessed name
    ("pets.findPetsByStatus",),
    ("list items in store",),  # names a connector
]


def _discovering(
    manifest: Path | None, state_dir: Path, capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch
) -> TwoPaths:
    return TwoPaths("discover", stored_discover, "discover_from_state", manifest, state_dir, capsys, mp)


def _setup(tmp_path: Path, capsys: pytest.CaptureFixture[str], mp: pytest.MonkeyPatch, discovery: str) -> TwoPaths:
    isolate(tmp_path, mp)
    spec = tmp_path / "petstore.json"
    shutil.copy(PETSTORE, spec)
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(MANIFEST.format(actions=ACTIONS, spec=spec.name, discovery=discovery))
    env = _discovering(manifest, tmp_path / "state", capsys, mp)
    env.run("sync")
    env.run("discover", "warm")  # ``sync`` indexes nothing: the first discover keeps each catalog's index
    return env


@pytest.fixture
def several(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[TwoPaths]:
    yield _setup(tmp_path, capsys, monkeypatch, "")


def test_the_bundled_default_finds_the_same_both_ways(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(tmp_path, monkeypatch)
    env = _discovering(None, tmp_path / "state", capsys, monkeypatch)
    env.run("sync")
    assert env.light("create", "an", "issue") is None  # ``sync`` indexes nothing: the full path keeps the index
    env.run("discover", "warm")
    for argv in (("create", "an", "issue"), ("x",), ("list", "pets", "--json"), ("github.create_issue", "--json")):
        fast, full = env.both(*argv)
        assert fast == full, argv
    assert "github.issues.create" in env.both("create", "an", "issue")[0]
    # GitHub's 1,223 actions: the light path decodes the ranked candidates, not the catalog.
    made: list[ActionLines] = []
    read = ActionLines.read

    def recorded(blob: bytes, connector: str) -> ActionLines | None:
        lines = read(blob, connector)
        if lines is not None:
            made.append(lines)
        return lines

    monkeypatch.setattr(ActionLines, "read", staticmethod(recorded))
    assert env.light("create", "an", "issue") is not None
    github = next(lines for lines in made if lines.connector == "github")
    assert len(github) == 1223 and 0 < github.decoded <= 100


def test_several_connectors_find_the_same_both_ways(several: TwoPaths) -> None:
    several.run("secret", "set", "echo", stdin="echo-token-1234\n")
    # per_user: a project-wide value (stored before `secret set` refused it) leaves the operator's own missing.
    with closing(sqlite3.connect(several.state_dir / "state.db")) as db, db:
        db.execute("INSERT INTO credential (connector, principal, name, sealed) VALUES ('mine', '*', 'default', x'00')")
    for query in QUERIES:
        for extra in ((), ("--json",), ("--agent", "bot", "--json"), ("--connector", "store", "--json")):
            fast, full = several.both(*query, *extra)
            assert fast == full, (query, extra)
    for extra in (("--limit", "1"), ("--limit", "50"), ("--agent", "bot")):
        fast, full = several.both("list", "items", "--json", *extra)
        assert fast == full, extra
    # What the comparisons went through: hidden actions, approvals, credentials, low confidence.
    found = json.loads(several.both("delete", "an", "item", "--json")[0])
    names = [r["name"] for r in found["results"]]
    assert not any(name.startswith("hidden_api.secret") for name in names)
    by_name = {r["name"]: r for r in found["results"]}
    assert by_name["echo.items.delete"]["needs_approval"] and not by_name["echo.items.delete"]["needs_auth"]
    assert by_name["mine.items.delete"]["needs_auth"] and by_name["store.items.delete"]["needs_auth"] is False
    assert found.get("twins")
    assert json.loads(several.both("weather", "forecast", "--json")[0])["confidence"] == "low"
    assert json.loads(several.both("x", "--json")[0]) == {
        "query": "x",
        "results": [],
        "confidence": "low",
        "hint": json.loads(several.both("x", "--json")[1])["hint"],
        "manifest": f"{several.manifest} (--manifest)",
    }


@pytest.mark.parametrize(
    "discovery",
    [
        "discovery: {mode: lexical}",
        "discovery: {embeddings: {url: 'http://127.0.0.1:9/v1', model: tiny}}",
        "discovery: {mode: auto}",
        # the local model as installed (when it is): the command embeds nothing, so both rank lexically
        pytest.param("discovery: {mode: auto}", marks=pytest.mark.hybrid, id="auto-local-model"),
    ],
)
def test_every_discovery_mode_finds_the_same_both_ways(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, discovery: str
) -> None:
    monkeypatch.delenv("MCP_GATEWAY_DISCOVERY_MODE", raising=False)
    env = _setup(tmp_path, capsys, monkeypatch, discovery)
    fast, full = env.both("list", "items", "--json")
    assert fast == full


def test_a_change_takes_the_full_path_until_the_next_run(several: TwoPaths) -> None:
    assert several.manifest is not None
    spec = several.manifest.parent / "petstore.json"
    spec.write_text(spec.read_text().replace('"Add a new pet to the store"', '"Add a pet"'))
    assert several.light("add", "a", "pet") is None  # the sync would normalize the spec again
    several.run("discover", "add", "a", "pet")  # the full path stores the catalog and keeps its index
    fast, full = several.both("add", "a", "pet", "--json")
    assert fast == full and "Add a pet" in fast
    # The kept index or scan of a catalog gone: the full path builds and keeps it again.
    for folder in ("discovery-index", "review-scan"):
        shutil.rmtree(several.state_dir / folder)
        assert several.light("list", "items") is None, folder
        several.run("discover", "list", "items")
        assert several.light("list", "items") is not None, folder


def test_what_the_light_path_cannot_vouch_for_takes_the_full_path(
    several: TwoPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert several.light("list", "items") is not None
    monkeypatch.setenv("MCP_GATEWAY_DISCOVERY_MODE", "sometimes")
    assert several.light("list", "items") is None  # the full path names the mistake
    monkeypatch.setenv("MCP_GATEWAY_DISCOVERY_MODE", "hybrid")
    assert several.light("list", "items") is None  # no local model here: the full path refuses to start
    monkeypatch.setenv("MCP_GATEWAY_DISCOVERY_MODE", "lexical")
    monkeypatch.setenv("MCP_GATEWAY_DATABASE_URL", "postgresql://u@127.0.0.1:9/db")
    assert several.light("list", "items") is None  # PostgreSQL
    monkeypatch.delenv("MCP_GATEWAY_DATABASE_URL")
    assert several.light("list", "items") is not None
    assert several.manifest is not None
    text = several.manifest.read_text()
    # trust: review snapshots every action for the operator: the full path quarantines and audits
    several.manifest.write_text(text.replace("    trust: auto\n", "    trust: review\n"))
    assert several.light("list", "items") is None
    several.manifest.write_text(text)
    assert several.light("list", "items") is not None
    # discover learned from a use (a served gateway's agent called what it found): the full path lifts it.
    with closing(sqlite3.connect(several.state_dir / "state.db")) as db, db:
        db.execute(
            "INSERT INTO discovery_use (scope, action, query, who, words, at) VALUES (?, ?, ?, ?, ?, ?)",
            ("agent:bot", "echo.items.list", "q1", "bot", "list items", "2026-01-01T00:00:00.000000Z"),
        )
    assert several.light("list", "items") is None
    several.run("discover", "list", "items")  # the full path answers
    several.manifest.write_text(text + 'discovery: {learn: "off"}\n')
    fast, full = several.both("list", "items", "--json")  # learning off: nothing is lifted either way
    assert fast == full


def _rewrite_catalog(state_dir: Path, slug: str, blob: bytes) -> None:
    with closing(sqlite3.connect(state_dir / "state.db")) as db, db:
        db.execute("UPDATE catalog SET actions = ? WHERE slug = ?", (blob, slug))


def _stored(state_dir: Path, slug: str) -> bytes:
    with closing(sqlite3.connect(state_dir / "state.db")) as db:
        (blob,) = db.execute("SELECT actions FROM catalog WHERE slug = ?", (slug,)).fetchone()
    return zlib.decompress(blob)


def test_a_catalog_it_cannot_split_or_that_does_not_match_takes_the_full_path(several: TwoPaths) -> None:
    raw = _stored(several.state_dir, "echo")
    actions = ACTIONS_ADAPTER.validate_json(raw)
    # Written by an earlier build: one compact array, the same actions.
    _rewrite_catalog(several.state_dir, "echo", zlib.compress(ACTIONS_ADAPTER.dump_json(actions)))
    assert several.light("list", "items") is None
    fast_full = several.run("discover", "list", "items", "--json")  # the full path reads it as before
    assert "echo.items.list" in fast_full
    # A line whose action is not the one its head names: found out when the ranking decodes it.
    lines = raw.split(b",\n")
    lines[1] = lines[1].replace(b'"summary":"List items"', b'"path":"items.other","summary":"List items"', 1)
    assert lines[1] != raw.split(b",\n")[1]
    _rewrite_catalog(several.state_dir, "echo", zlib.compress(b",\n".join(lines)))
    assert several.light("list", "items", "--connector", "echo") is None


def test_the_line_layout_is_the_same_json_array() -> None:
    from mcp_gateway.vocabulary.model import Action, HttpBinding

    binding = HttpBinding(method="GET", url="/x")
    actions = [
        Action(connector="c", path="a.b", summary='line\nbreak "quoted" \\ back', binding=binding),
        Action(connector="c", path="é.ü", description="ünïcode", binding=binding),
    ]
    encoded = catalog_lines.encode_lines(actions)
    assert json.loads(encoded) == json.loads(ACTIONS_ADAPTER.dump_json(actions))
    assert ACTIONS_ADAPTER.validate_json(encoded) == actions
    lines = ActionLines.read(zlib.compress(encoded), "c")
    assert lines is not None and len(lines) == 2 and lines.decoded == 0
    with pytest.raises(ValueError, match="expect"):
        lines[0]  # the paths the reader expects come first
    lines.expect(["a.b", "é.ü"])
    assert lines[1] == actions[1] and lines.decoded == 1 and list(lines) == actions
    swapped = ActionLines.read(zlib.compress(encoded), "c")
    assert swapped is not None
    swapped.expect(["é.ü", "a.b"])
    with pytest.raises(ValueError):
        swapped[0]  # not the action the index has at that place
    theirs = ActionLines.read(zlib.compress(encoded), "other")
    assert theirs is not None
    theirs.expect(["a.b", "é.ü"])
    with pytest.raises(ValueError):
        theirs[0]  # another connector's
    with pytest.raises(ValueError):
        theirs.expect(["a.b"])
    assert ActionLines.read(zlib.compress(ACTIONS_ADAPTER.dump_json(actions)), "c") is None  # compact: whole decode
    empty = ActionLines.read(zlib.compress(catalog_lines.encode_lines([])), "c")
    assert empty is not None and len(empty) == 0
