"""Indirect goals reach their operation: an action's text says what it achieves, for every source kind.

Each source kind (OpenAPI 3, Swagger 2, Postman, GraphQL, MCP) is normalized by its real normalizer
from a small document holding a pin operation, a member removal, a message post and an update whose
``state`` enum is how a thing gets closed; a goal worded by its effect must find the operation named
by its mechanism.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from mcp import types

from mcp_gateway.discovery import DiscoveryIndex
from mcp_gateway.discovery._effects import effect_phrases, effect_words
from mcp_gateway.discovery._segment import dense_text
from mcp_gateway.discovery.dense import EmbeddingProvider
from mcp_gateway.sources.graphql import build_schema_from_sdl, normalize_graphql
from mcp_gateway.sources.mcp import normalize_mcp_tools
from mcp_gateway.sources.openapi import normalize_openapi
from mcp_gateway.sources.postman import normalize_postman
from mcp_gateway.vocabulary.model import Action
from tests.discovery.conftest import embedded_actions

# (operation id, method, path, summary, body properties)
_OPERATIONS = [
    ("pinsAdd", "post", "/pins.add", "Pins an item to a channel", {"channel": {"type": "string"}}),
    ("chatPostMessage", "post", "/chat.postMessage", "Sends a message to a channel", {"channel": {"type": "string"}}),
    ("membersRemove", "post", "/members.remove", "Removes a member from a project", {"user": {"type": "string"}}),
    ("projectsList", "get", "/projects.list", "Lists projects", {}),
    (
        "ticketsUpdate",
        "patch",
        "/tickets.update",
        "Update a ticket",
        {"state": {"type": "string", "enum": ["open", "closed"]}, "title": {"type": "string"}},
    ),
    ("ticketsCreate", "post", "/tickets.create", "Create a ticket", {"title": {"type": "string"}}),
]


def openapi3() -> list[Action]:
    return _operations(*_OPERATIONS)


def _operations(*rows: tuple[str, str, str, str] | tuple[str, str, str, str, dict[str, object]]) -> list[Action]:
    """(operation id, method, path, summary[, body properties]) rows as one OpenAPI connector's actions."""
    paths: dict[str, dict[str, object]] = {}
    for operation_id, method, path, summary, *body in rows:
        operation: dict[str, object] = {
            "operationId": operation_id,
            "summary": summary,
            "responses": {"200": {"description": "ok"}},
        }
        if body and body[0]:
            schema = {"type": "object", "properties": body[0]}
            operation["requestBody"] = {"content": {"application/json": {"schema": schema}}}
        paths.setdefault(path, {})[method] = operation
    document = {"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": paths}
    return list(normalize_openapi(document, connector="work").actions)


def swagger2() -> list[Action]:
    paths: dict[str, object] = {}
    for operation_id, method, path, summary, properties in _OPERATIONS:
        parameters = (
            [{"name": "body", "in": "body", "schema": {"type": "object", "properties": properties}}]
            if properties
            else []
        )
        paths[path] = {
            method: {
                "operationId": operation_id,
                "summary": summary,
                "parameters": parameters,
                "responses": {"200": {"description": "ok"}},
            }
        }
    document = {"swagger": "2.0", "info": {"title": "t", "version": "1"}, "host": "api.example.com", "paths": paths}
    return list(normalize_openapi(document, connector="work").actions)


def postman() -> list[Action]:
    items = []
    for _, method, path, summary, properties in _OPERATIONS:
        body = {key: (spec.get("enum", [""])[0] if isinstance(spec, dict) else "") for key, spec in properties.items()}
        request: dict[str, object] = {"method": method.upper(), "url": {"raw": f"https://api.example.com{path}"}}
        if body:
            import json

            request["body"] = {"mode": "raw", "raw": json.dumps(body)}
        items.append({"name": summary, "request": request})
    document = {
        "info": {"name": "work", "schema": "https://schema.getpostman.com/json/collection/v2.1.0/"},
        "item": items,
    }
    return list(normalize_postman(document, connector="work").actions)


def graphql() -> list[Action]:
    sdl = """
    enum TicketState { OPEN CLOSED }
    type Pin { id: ID }
    type Message { id: ID }
    type Ticket { id: ID }
    type Project { id: ID }
    type Query { "Lists projects" projects: [Project] }
    type Mutation {
      "Pins an item to a channel"
      addPin(channel: String!): Pin
      "Sends a message to a channel"
      postMessage(channel: String!, text: String): Message
      "Removes a member from a project"
      removeMember(user: String!): Project
      "Update a ticket"
      updateTicket(id: ID!, state: TicketState, title: String): Ticket
      "Create a ticket"
      createTicket(title: String!): Ticket
    }
    """
    return normalize_graphql(build_schema_from_sdl(sdl, "<test>"), connector="work")


def mcp() -> list[Action]:
    tools = [
        types.Tool(name=operation_id, description=summary, inputSchema={"type": "object", "properties": properties})
        for operation_id, _, _, summary, properties in _OPERATIONS
    ]
    return normalize_mcp_tools("work", tools)


SOURCES: dict[str, Callable[[], list[Action]]] = {
    "openapi": openapi3,
    "swagger2": swagger2,
    "postman": postman,
    "graphql": graphql,
    "mcp": mcp,
}


def _index(actions: list[Action]) -> DiscoveryIndex:
    index = DiscoveryIndex()
    index.replace_connector("work", actions)
    return index


def _find(actions: list[Action], summary: str) -> Action:
    return next(a for a in actions if a.summary == summary or a.description.startswith(summary))


@pytest.mark.parametrize("kind", SOURCES)
def test_every_source_kind_says_what_pinning_and_removing_achieve(kind: str) -> None:
    actions = SOURCES[kind]()
    pin = _find(actions, "Pins an item to a channel")
    assert "top" in effect_words(pin) and "everyone" in effect_words(pin)
    assert "top" in dense_text(pin)  # the model reads it too
    removal = _find(actions, "Removes a member from a project")
    assert {"longer", "access"} <= set(effect_words(removal))
    post = _find(actions, "Sends a message to a channel")
    assert effect_phrases(post) == []  # no mechanism named: nothing added


@pytest.mark.parametrize("kind", ["openapi", "swagger2", "graphql", "mcp"])
def test_every_source_kind_lends_enum_values_as_effect_words(kind: str) -> None:
    update = _find(SOURCES[kind](), "Update a ticket")
    assert {"open", "closed"} <= set(effect_words(update))


@pytest.mark.parametrize("kind", SOURCES)
@pytest.mark.parametrize(
    ("goal", "mechanism"),
    [
        # Without the effect words, the post (channel) and the project list (project) would come first.
        ("keep the message visible at the top for everyone", "pin"),
        ("Bob should no longer have access to the project", "remove"),
    ],
)
def test_a_goal_worded_by_its_effect_reaches_the_operation_named_by_its_mechanism(
    kind: str, goal: str, mechanism: str
) -> None:
    actions = SOURCES[kind]()
    top = _index(actions).search(goal, limit=3)[0][0]
    assert mechanism in top.path.lower(), (goal, [a.path for a, _ in _index(actions).search(goal, limit=3)])


def test_closing_by_a_state_enum_finds_the_update() -> None:
    # "close" names no operation here: the update's ``state: open | closed`` is how a ticket closes.
    actions = openapi3()
    assert _index(actions).search("mark the ticket as closed", limit=3)[0][0].path == "tickets_update"


def test_an_outcome_of_a_verb_and_a_noun_needs_the_noun_to_be_what_is_acted_on() -> None:
    actions = _operations(
        ("meeting_delete", "delete", "/meetings/{id}", "Delete a meeting"),
        ("meeting_poll_delete", "delete", "/meetings/{id}/polls/{poll}", "Delete a meeting poll"),
        ("meeting_get", "get", "/meetings/{id}", "Get a meeting"),
        ("patch_feature_flag", "patch", "/flags/{key}", "Perform a partial update to a feature"),
        ("post_feature_flag", "post", "/flags", "Creates a new feature flag"),
        ("patch_flag_scheduled_change", "patch", "/flags/{key}/changes/{id}", "Updates a scheduled change"),
    )
    phrases = {action.path: effect_phrases(action) for action in actions}
    assert "cancel it, call it off" in phrases["meeting_delete"]
    assert "cancel it, call it off" not in phrases["meeting_poll_delete"]  # a poll is deleted, not the meeting
    assert phrases["meeting_get"] == []
    assert any("kill switch" in phrase and "on or off" in phrase for phrase in phrases["patch_feature_flag"])
    assert any("kill switch" in phrase for phrase in phrases["post_feature_flag"])
    assert not any("on or off" in phrase for phrase in phrases["patch_flag_scheduled_change"])
    index = _index(actions)
    assert index.search("call off the meeting with the vendor", limit=3)[0][0].path == "meeting_delete"
    assert index.search("turn on the checkout redesign for everyone", limit=3)[0][0].path == "patch_feature_flag"


_MECHANISMS = [
    # (operation id, summary, a goal worded by its outcome, sharing no word with either)
    ("updateAutoForwarding", "Updates the auto-forwarding setting", "stop my mail being copied to another address"),
    ("freebusyQuery", "Returns free/busy information for a set of calendars", "am I double booked on Tuesday?"),
    ("revisionsList", "Lists a file's revisions", "show the old versions of the plan"),
    ("delegatesCreate", "Adds a delegate", "let someone act for me on my behalf"),
    ("getTransitions", "Get transitions", "where can this go next in the workflow"),
    ("moderatorsInsert", "Adds a chat moderator", "let my co-host help remove spam in the live chat"),
    ("simCardDisable", "Request a SIM card disable", "switch off the lost phone's SIM"),
    ("messagesUntrash", "Removes the specified message from the trash", "put those emails back from the bin"),
]


@pytest.mark.parametrize(("operation", "summary", "goal"), _MECHANISMS)
def test_a_mechanism_many_apis_share_gets_its_outcome_words(operation: str, summary: str, goal: str) -> None:
    (action,) = _operations((operation, "post", f"/{operation}", summary))
    outcome = set(effect_words(action))
    assert outcome & set(goal.lower().replace("?", "").split()), (goal, effect_phrases(action))


@pytest.mark.parametrize(("operation", "summary", "goal"), _MECHANISMS)
def test_common_mechanisms_are_found_by_their_outcome(
    provider: EmbeddingProvider, operation: str, summary: str, goal: str
) -> None:
    # Every mechanism in one catalog beside operations on the things the goals mention: each goal's
    # outcome words lead to its own operation.
    actions = _operations(
        *((op, "post", f"/{op}", text) for op, text, _ in _MECHANISMS),
        ("messagesSend", "post", "/messages/send", "Sends a message"),
        ("eventsList", "get", "/calendars/events", "Lists events"),
        ("filesGet", "get", "/files/{id}", "Gets a file"),
        ("usersGet", "get", "/users/{id}", "Get a user"),
    )
    index, search = embedded_actions(provider, "work", actions)
    top = [action.path for action, _ in anyio.run(lambda: search.find(index, goal, limit=3)).hits]
    assert top[0].replace("_", "") == operation.lower(), (goal, top)


def test_a_batch_operation_is_found_by_the_kinds_of_request_it_takes() -> None:
    """Google's batchUpdate says only that it "applies updates": its items' member names say which."""

    def kind(description: str) -> dict[str, object]:
        return {"type": "object", "description": description, "properties": {"id": {"type": "integer"}}}

    kinds = {
        name: kind(name)
        for name in (
            "addSheet",
            "deleteSheet",
            "updateSheetProperties",
            "mergeCells",
            "unmergeCells",
            "repeatCell",
            "addChart",
            "sortRange",
            "autoResizeDimensions",
        )
    }
    requests = {"type": "array", "items": {"type": "object", "properties": kinds}}
    # a record with a few nested objects among its fields is no choice of requests
    fields = {f"field{i}": {"type": "string"} for i in range(8)} | {"address": kind("address")}
    actions = _operations(
        (
            "batchUpdate",
            "post",
            "/spreadsheets/{id}:batchUpdate",
            "Applies one or more updates",
            {"requests": requests},
        ),
        ("valuesUpdate", "put", "/spreadsheets/{id}/values/{range}", "Sets values in a range", {"values": {}}),
        (
            "peopleCreate",
            "post",
            "/people",
            "Creates a person",
            {"people": {"type": "array", "items": {"properties": fields}}},
        ),
    )
    batch, values, people = actions
    assert set(effect_words(batch)) >= {"sheet", "merge", "cells", "chart", "sort"}
    assert effect_words(people) == [] and effect_words(values) == []
    index = DiscoveryIndex()
    index.replace_connector("work", actions)
    assert index.find("merge cells").hits[0][0] is batch
