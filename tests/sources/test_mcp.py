"""MCP tools -> actions, without I/O: the path rule, risk from annotations, overrides, the digest.
(The same normalization against live servers is in ``tests/execution/test_mcp.py``.)"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from mcp_gateway.manifest import ACTION_PATH_RE
from mcp_gateway.sources.mcp import mcp_action_path, normalize_mcp_tools, tool_risk, tools_digest
from mcp_gateway.vocabulary.model import McpBinding

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def tool(name: str, *, description: str | None = None, title: str | None = None, **hints: Any) -> types.Tool:
    annotations = types.ToolAnnotations(**hints) if hints else None
    return types.Tool(name=name, description=description, title=title, input_schema=SCHEMA, annotations=annotations)


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("echo", "echo"),
        ("get-sum", "get_sum"),
        ("getTinyImage", "get_tiny_image"),
        ("get_current_time", "get_current_time"),
        ("Files/Read.v2", "files.read.v2"),
        ("github.issues.create", "github.issues.create"),
        ("repos//list", "repos.list"),
        ("2fa-verify", "n2fa_verify"),
        ("...", "tool"),
        ("Convert Time (UTC)", "convert_time_utc"),
    ],
)
def test_tool_names_become_valid_action_paths(name: str, path: str) -> None:
    assert mcp_action_path(name) == path
    assert ACTION_PATH_RE.match(path)


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("ünïcödé_名前", "unicode_791b46ee"),
        ("名前", "tool_7ec26292"),
        ("dеlete", "d_lete_fe08d8c5"),  # a Cyrillic "е": never ``delete``, nor a look-alike of it
        ("ａｄｍｉｎ", "admin_2692e55d"),
        ("café", "cafe_850f7dc4"),
        ("🚀launch", "launch_984dadac"),
    ],
)
def test_names_outside_ascii_keep_their_latin_reading_and_a_digest_of_the_whole(name: str, path: str) -> None:
    # Such names became ``tool``, ``n_c_d`` or ``d_lete``: two Chinese names were ``tool`` and ``tool_2`` by
    # listing order, and a look-alike could take a real tool's path.
    assert mcp_action_path(name) == path
    assert ACTION_PATH_RE.match(path)


def test_names_in_other_scripts_stay_apart_whatever_the_listing_order() -> None:
    names = ["名前", "名字", "Δέλτα", "حذف", "delete", "dеlete"]
    forward = {a.binding.tool: a.path for a in normalize_mcp_tools("up", [tool(n) for n in names])}  # type: ignore[union-attr]
    backward = {a.binding.tool: a.path for a in normalize_mcp_tools("up", [tool(n) for n in reversed(names)])}  # type: ignore[union-attr]
    assert forward == backward and len(set(forward.values())) == len(names)
    assert forward["delete"] == "delete"


def test_collisions_get_suffixes_by_name_and_the_binding_keeps_the_name() -> None:
    names = ["files/read", "files.read", "Files-Read", "files_read"]
    actions = normalize_mcp_tools("up", [tool(n) for n in names])
    # Listing order kept; the name spelled as its path keeps it, the others are suffixed in name order.
    assert [(a.path, a.binding) for a in actions] == [
        ("files.read_2", McpBinding(tool="files/read")),
        ("files.read", McpBinding(tool="files.read")),
        ("files_read_2", McpBinding(tool="Files-Read")),
        ("files_read", McpBinding(tool="files_read")),
    ]
    assert actions[1].qualified_name == "up.files.read"


@pytest.mark.parametrize("order", [[0, 1, 2, 3], [1, 0, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1]])
def test_a_reordered_listing_keeps_every_name_on_its_tool(order: list[int]) -> None:
    # A block rule or approval on ``m.admin.purge`` must stay on the tool it was written for.
    names = ["admin.purge", "admin/purge", "admin_purge", "Admin.Purge"]
    actions = normalize_mcp_tools("m", [tool(names[i]) for i in order])
    bound = {a.path: a.binding for a in actions}
    assert bound == {
        "admin.purge": McpBinding(tool="admin.purge"),
        "admin.purge_2": McpBinding(tool="Admin.Purge"),
        "admin.purge_3": McpBinding(tool="admin/purge"),
        "admin_purge": McpBinding(tool="admin_purge"),
    }


def test_a_name_listed_twice_keeps_its_first_entry() -> None:
    actions = normalize_mcp_tools("up", [tool("a", description="first"), tool("a", description="second")])
    assert [(a.path, a.description) for a in actions] == [("a", "first")]


@pytest.mark.parametrize(
    ("hints", "risk"),
    [
        ({}, "write"),
        ({"read_only_hint": True}, "read"),
        ({"destructive_hint": True}, "destructive"),
        ({"read_only_hint": True, "destructive_hint": True}, "destructive"),
        ({"read_only_hint": False, "destructive_hint": False}, "write"),
        ({"idempotent_hint": True}, "write"),
    ],
)
def test_risk_from_annotations(hints: dict[str, bool], risk: str) -> None:
    assert tool_risk(tool("t", **hints), trust_annotations=True) == risk


def test_untrusted_annotations_make_every_tool_a_write_and_overrides_win() -> None:
    tools = [tool("peek", read_only_hint=True), tool("wipe", destructive_hint=True), tool("note")]
    assert [a.risk for a in normalize_mcp_tools("up", tools, trust_annotations=False)] == ["write"] * 3
    overridden = normalize_mcp_tools("up", tools, risk_overrides={"wipe": "read", "note": "destructive"})
    assert [a.risk for a in overridden] == ["read", "read", "destructive"]
    untrusted = normalize_mcp_tools("up", tools, trust_annotations=False, risk_overrides={"peek": "read"})
    assert [a.risk for a in untrusted] == ["read", "write", "write"]


def test_summary_description_and_schema_come_from_the_tool() -> None:
    described = tool("t", title="Search", description="Find things by a query.\n\nLong details here.")
    (action,) = normalize_mcp_tools("up", [described])
    assert action.summary == "Search: Find things by a query."
    assert action.description == "Find things by a query.\n\nLong details here."
    assert action.input_schema == SCHEMA  # as given
    (bare,) = normalize_mcp_tools("up", [types.Tool(name="bare", input_schema={})])
    assert bare.summary == "bare"
    assert bare.input_schema == {"type": "object", "properties": {}}
    long = tool("t", description="x" * 5000)
    (capped,) = normalize_mcp_tools("up", [long])
    assert len(capped.summary) == 300 and len(capped.description) == 2000


def test_the_digest_changes_exactly_when_the_listing_does() -> None:
    tools = [tool("a", read_only_hint=True), tool("b")]
    assert tools_digest(tools) == tools_digest([t.model_copy() for t in tools])
    assert tools_digest(tools) == tools_digest([tools[1], tools[0]])  # listed in another order: the same tools
    colliding = [tool("files/read"), tool("files.read")]
    assert tools_digest(colliding) == tools_digest(colliding[::-1])  # names, not order, decide the suffixes
    assert tools_digest(tools) != tools_digest([tool("a", read_only_hint=False), tool("b")])
    assert tools_digest(tools) != tools_digest([tool("a", read_only_hint=True), tool("b", description="new")])


def test_the_tool_title_is_the_action_group() -> None:
    titled, bare = normalize_mcp_tools("up", [tool("a", title="Search the web"), tool("b")])
    assert (titled.group, bare.group) == ("Search the web", "")


def needs_approval(risk: str) -> bool:
    """What the default policy (``default_mode: risk``, no rules) decides for a call of this risk."""
    from mcp_gateway.policy import evaluate

    verdict = evaluate(
        qualified_name="up.t",
        path="t",
        risk=risk,  # type: ignore[arg-type]
        args={},
        project_rules=[],
        connector_rules=[],
        sensitive=False,
        default_mode="risk",
    )
    return verdict.action == "require_approval"


@pytest.mark.parametrize(
    ("name", "description", "title", "risk"),
    [
        ("list_records", "Delete every record", None, "destructive"),
        ("deleteAll", "Lists the records.", None, "destructive"),
        ("records/purge", None, None, "destructive"),
        ("cleanup", None, "Remove old entries", "destructive"),
        ("notify", "Sends an email to every customer.", None, "write"),
        ("settle", "Pay the invoice from the company account.", None, "write"),
        ("list_records", "Lists records, then deletes them.", None, "destructive"),
        ("sync", "This tool will permanently remove every row.", None, "destructive"),
    ],
)
def test_under_pinned_a_read_only_hint_does_not_lower_what_the_words_say(
    name: str, description: str | None, title: str | None, risk: str
) -> None:
    listed = tool(name, description=description, title=title, read_only_hint=True)
    (pinned,) = normalize_mcp_tools("up", [listed], trust="pinned")
    assert pinned.risk == risk and needs_approval(pinned.risk)
    # Chosen to be believed (``auto``) or shown to the approving operator (``review``): honoured.
    for trusting in ("auto", "review"):
        (honoured,) = normalize_mcp_tools("up", [listed], trust=trusting)
        assert honoured.risk == "read" and not needs_approval(honoured.risk)


def test_under_pinned_a_read_only_tool_whose_words_name_no_act_stays_a_read() -> None:
    for description in (
        "Lists records; deleted ones are left out.",
        "Lists the workspace's updates and the pull requests to merge. For editing, use edit_record.",
    ):
        listed = tool("list_records", description=description, read_only_hint=True)
        assert normalize_mcp_tools("up", [listed], trust="pinned")[0].risk == "read", description
    # And an operator's risk override wins over the words too.
    wiper = tool("wipe_cache", read_only_hint=True)
    assert normalize_mcp_tools("up", [wiper], trust="pinned", risk_overrides={"wipe_cache": "read"})[0].risk == "read"
    assert normalize_mcp_tools("up", [wiper], trust="pinned")[0].risk == "destructive"


@pytest.mark.parametrize(
    "capture", ["server-filesystem", "mcp-server-git", "notion-mcp-server", "server-everything", "playwright-mcp"]
)
def test_real_servers_read_only_tools_stay_reads_under_pinned(capture: str) -> None:
    import json
    from pathlib import Path

    listing = Path(__file__).parents[1] / "data" / "mcp" / f"{capture}.tools-list.json"
    tools = [types.Tool.model_validate(t) for t in json.loads(listing.read_text())["result"]["tools"]]
    trusted = normalize_mcp_tools("up", tools, trust="auto")
    assert any(a.risk == "read" for a in trusted)
    assert [a.risk for a in normalize_mcp_tools("up", tools, trust="pinned")] == [a.risk for a in trusted]


def test_a_tool_whose_output_schema_pattern_could_stall_every_result_check_is_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The MCP client checks each result against it with a backtracking engine, on the event loop.
    risky = types.Tool(
        name="stall",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a|aa)*$"}}},
    )
    fine = types.Tool(
        name="fine",
        input_schema={"type": "object"},
        output_schema={"type": "object", "properties": {"x": {"type": "string", "pattern": "^[a-z]+$"}}},
    )
    actions = normalize_mcp_tools("up", [risky, fine])
    assert [a.path for a in actions] == ["fine"]
    assert "tool stall is left out" in caplog.text and "^(a|aa)*$" in caplog.text


def test_a_tool_name_of_thousands_of_characters_gives_a_bounded_path() -> None:
    # 5,000 characters became a 5,004-character action name in every answer that listed it.
    long_a, long_b = "x" * 5000, "x" * 4999 + "y"
    paths = [mcp_action_path(long_a), mcp_action_path(long_b)]
    assert all(len(p) <= 120 and ACTION_PATH_RE.fullmatch(p) for p in paths) and paths[0] != paths[1]
    [action] = normalize_mcp_tools("up", [tool(long_a)])
    assert isinstance(action.binding, McpBinding) and action.binding.tool == long_a  # called by its whole name
    assert mcp_action_path("list_items") == "list_items"
