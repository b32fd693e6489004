"""The GraphQL normalizer against real schemas (tests/data/graphql) and small SDL fixtures."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from graphql import build_schema

from mcp_gateway.sources.graphql import (
    MAX_INPUT_DEPTH,
    SELECT_ARG,
    build_schema_from_introspection,
    build_schema_from_sdl,
    default_selection,
    normalize_graphql,
    read_schema,
)
from mcp_gateway.sources.openapi import PATH_RE
from mcp_gateway.vocabulary.errors import SourceError
from mcp_gateway.vocabulary.model import ACTIONS_ADAPTER, Action, GraphQLBinding
from tests.support.graphql_upstream import SDL
from tests.support.named_pipe import outcome_of_reading

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "tests" / "data" / "graphql"


# file -> (Query fields, Mutation fields), from tests/data/SOURCES.md
REAL_SCHEMAS = {
    "github/schema.graphql": (31, 247),
    "github/schema.json": (30, 242),
    "swapi/schema.graphql": (13, 0),
}


def _actions(sdl: str) -> dict[str, Action]:
    return {a.path: a for a in normalize_graphql(build_schema_from_sdl(sdl, "<test>"), connector="t")}


def _binding(action: Action) -> GraphQLBinding:
    assert isinstance(action.binding, GraphQLBinding)
    return action.binding


# -- real schemas -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REAL_SCHEMAS))
def test_real_schema_normalizes_one_action_per_root_field(name: str) -> None:
    queries, mutations = REAL_SCHEMAS[name]
    actions = normalize_graphql(read_schema(str(DATA / name)), connector="gh")
    by_kind = {"query": 0, "mutation": 0}
    for action in actions:
        by_kind[_binding(action).operation] += 1
        assert PATH_RE.match(action.path), action.path
        assert action.risk == ("read" if _binding(action).operation == "query" else "write")
        assert action.input_schema["type"] == "object"
    assert by_kind == {"query": queries, "mutation": mutations}
    paths = [a.path for a in actions]
    assert len(paths) == len(set(paths)), "duplicate action paths"
    # Every action survives the catalog's JSON round trip (what the store persists).
    assert ACTIONS_ADAPTER.validate_json(ACTIONS_ADAPTER.dump_json(actions)) == actions


def test_github_sdl_is_tolerated_despite_duplicate_fields() -> None:
    # Strict graphql-core refuses the published SDL: EnterpriseOwnerInfo defines two fields twice.
    text = (DATA / "github/schema.graphql").read_text()
    with pytest.raises(TypeError):
        build_schema(text)
    schema = read_schema(str(DATA / "github/schema.graphql"))
    assert "repositoryDeployKeySetting" in schema.type_map["EnterpriseOwnerInfo"].fields  # type: ignore[attr-defined]


def test_github_names_and_shapes() -> None:
    actions = {a.path: a for a in normalize_graphql(read_schema(str(DATA / "github/schema.graphql")), connector="gh")}
    repo = actions["query.repository"]
    assert _binding(repo).variable_types == {"followRenames": "Boolean", "name": "String!", "owner": "String!"}
    assert sorted(repo.input_schema["required"]) == ["name", "owner"]
    assert repo.summary == "Lookup a given repository by the owner and repository name."
    star = actions["mutation.add_star"]
    assert star.risk == "write"
    assert _binding(star).variable_types == {"input": "AddStarInput!"}
    add_star_input = star.input_schema["properties"]["input"]
    assert add_star_input["type"] == "object"
    assert add_star_input["required"] == ["starrableId"]
    assert add_star_input["additionalProperties"] is False
    assert "starrable { __typename id stargazerCount viewerHasStarred }" in _binding(star).selection
    assert "query.repository_owner" in actions and "mutation.create_issue" in actions
    # Enums carry their values; lists their item types.
    search = actions["query.search"].input_schema["properties"]
    assert search["type"]["enum"][:2] == ["ISSUE", "ISSUE_ADVANCED"] or "REPOSITORY" in search["type"]["enum"]
    labels = actions["mutation.create_issue"].input_schema["properties"]["input"]["properties"]["labelIds"]
    assert labels == {"type": "array", "items": {"type": "string"}, "description": labels["description"]}


# -- reading ------------------------------------------------------------------------------------


def test_introspection_json_with_or_without_data_wrapper(tmp_path: Path) -> None:
    from graphql import get_introspection_query, graphql_sync

    result = graphql_sync(build_schema(SDL), get_introspection_query(descriptions=True))
    assert result.data is not None
    bare, wrapped = tmp_path / "bare.json", tmp_path / "wrapped.json"
    bare.write_text(json.dumps(result.data))
    wrapped.write_text(json.dumps({"data": result.data}))
    for path in (bare, wrapped):
        actions = normalize_graphql(read_schema(str(path)), connector="t")
        assert sorted(a.path for a in actions) == [
            "mutation.add_star",
            "query.failing",
            "query.ping",
            "query.repository",
            "query.search",
        ]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("type Query { a: Int", "not valid GraphQL SDL at line 1"),
        ("type Foo { a: Int }", "no Query type"),
        ('{"data": {"nope": 1}}', "not a GraphQL introspection result"),
        ('{"__schema": ', "not valid JSON"),
        ('{"__schema": {"types": "x"}}', "cannot be built"),
        (
            '{"data": {"__schema": {"types": [{"kind": "OBJECT"}]}}}',
            "__schema.types[0] has no 'name' key. A valid result is what the standard introspection query returns",
        ),
    ],
)
def test_malformed_schema_is_a_clear_source_error(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "schema.graphql"
    path.write_text(content)
    with pytest.raises(SourceError) as info:
        read_schema(str(path))
    assert needle in str(info.value)
    assert str(path) in str(info.value)


def test_missing_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="no such file"):
        read_schema(str(tmp_path / "absent.graphql"))
    (tmp_path / "bin.graphql").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(SourceError, match="not UTF-8"):
        read_schema(str(tmp_path / "bin.graphql"))
    with pytest.raises(SourceError, match="not a GraphQL introspection result"):
        build_schema_from_introspection([1, 2], "<list>")


def test_a_schema_path_that_is_no_regular_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # A named pipe no one writes to waited for ever.
    pipe = tmp_path / "schema.graphql"
    os.mkfifo(pipe)
    refused = outcome_of_reading(lambda: read_schema(str(pipe)), pipe)
    assert isinstance(refused, SourceError) and "is a named pipe, not a schema file" in str(refused), refused
    with pytest.raises(SourceError, match="is a device, not a schema file"):
        read_schema("/dev/null")


# -- mapping ------------------------------------------------------------------------------------


def test_paths_risk_and_collisions() -> None:
    actions = _actions(
        """
        type Query { userById(id: ID!): Int  user_by_id: Int  a: Int }
        type Mutation { deleteUser(id: ID!): Boolean }
        type Subscription { ticks: Int }
        """
    )
    assert sorted(actions) == ["mutation.delete_user", "query.a", "query.user_by_id", "query.user_by_id_2"]
    assert _binding(actions["query.user_by_id"]).field == "userById"
    assert _binding(actions["query.user_by_id_2"]).field == "user_by_id"
    assert actions["mutation.delete_user"].risk == "write"
    assert actions["query.a"].risk == "read"


def test_risk_override() -> None:
    schema = build_schema_from_sdl("type Query { a: Int } type Mutation { b: Int }", "<t>")
    actions = {
        a.path: a for a in normalize_graphql(schema, connector="t", risk_overrides={"mutation.b": "destructive"})
    }
    assert actions["mutation.b"].risk == "destructive"


def test_input_types_map_to_json_schema() -> None:
    actions = _actions(SDL)
    search = actions["query.search"]
    props = search.input_schema["properties"]
    assert search.input_schema["required"] == ["query"]  # `first` is non-null-free and has a default
    assert props["query"] == {"type": "string"}
    assert props["first"] == {"type": "integer", "default": 10}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    flt = props["filter"]
    assert flt["description"] == "Filters for a search; nest with `and`."
    assert flt["properties"]["visibility"] == {"type": "string", "enum": ["PUBLIC", "PRIVATE"]}
    assert flt["properties"]["minStars"] == {"type": "integer", "default": 0}
    # Recursion: the nested RepositoryFilter is described, not expanded again.
    nested = flt["properties"]["and"]
    assert nested["type"] == "object" and "properties" not in nested
    assert "refers to itself" in nested["description"]
    assert search.input_schema["additionalProperties"] is False
    star = actions["mutation.add_star"].input_schema["properties"]["input"]
    assert star["required"] == ["starrableId"]
    assert star["properties"]["starrableId"] == {"type": "string", "description": "The repository's id."}


def test_deep_input_nesting_is_bounded() -> None:
    levels = MAX_INPUT_DEPTH + 3
    inputs = "\n".join(f"input L{i} {{ next: L{i + 1} v: Int }}" for i in range(levels))
    inputs += f"\ninput L{levels} {{ v: Int }}"
    actions = _actions(inputs + "\ntype Query { q(arg: L0): Int }")
    node: dict[str, Any] = actions["query.q"].input_schema["properties"]["arg"]
    depth = 0
    while "properties" in node:
        node = node["properties"]["next"]
        depth += 1
    assert depth == MAX_INPUT_DEPTH
    assert "nested too deep" in node["description"]


def test_custom_scalars_deprecation_and_defaults() -> None:
    actions = _actions(
        """
        "An ISO-8601 date and time."
        scalar DateTime
        enum Order { ASC DESC }
        type Query {
          events(since: DateTime!, order: Order = DESC, old: Int @deprecated(reason: "use since")): [String]
        }
        """
    )
    props = actions["query.events"].input_schema["properties"]
    assert "type" not in props["since"]  # any JSON value: the scalar decides
    assert props["since"]["description"].startswith("A DateTime (custom GraphQL scalar). An ISO-8601")
    assert props["order"] == {"type": "string", "enum": ["ASC", "DESC"], "default": "DESC"}
    assert actions["query.events"].input_schema["required"] == ["since"]
    assert SELECT_ARG not in props  # a list of scalars has nothing to select


# -- default selections -------------------------------------------------------------------------


def test_default_selection_rules() -> None:
    schema = build_schema(SDL)
    fields = schema.query_type.fields  # type: ignore[union-attr]
    # Scalars and enums of the root type, one level into objects, never into fields needing arguments.
    assert default_selection(fields["repository"].type) == "id name stars visibility broken owner { id login }"
    # A connection returned by the root field is unwrapped.
    assert default_selection(fields["search"].type) == (
        "totalCount pageInfo { hasNextPage endCursor } nodes { id name stars visibility broken owner { id login } }"
    )
    assert default_selection(fields["ping"].type) == ""
    mutation = schema.mutation_type.fields  # type: ignore[union-attr]
    assert default_selection(mutation["addStar"].type) == (
        "clientMutationId starred { id name stars visibility broken }"
    )


def test_default_selection_unions_interfaces_and_edges() -> None:
    schema = build_schema(
        """
        interface Node { id: ID! }
        type User implements Node { id: ID! login: String! friend: Node }
        type Bot implements Node { id: ID! model: String }
        union Actor = User | Bot
        type Edge { cursor: String node: User }
        type UserConnection { edges: [Edge] }
        type Query { node(id: ID!): Node  actors: [Actor]  users: UserConnection  me: User }
        """
    )
    fields = schema.query_type.fields  # type: ignore[union-attr]
    assert default_selection(fields["node"].type) == "__typename id"
    assert default_selection(fields["actors"].type) == "__typename ... on User { id login } ... on Bot { id model }"
    assert default_selection(fields["users"].type) == "edges { node { id login friend { __typename id } } }"
    assert default_selection(fields["me"].type) == "id login friend { __typename id }"


@pytest.mark.parametrize("name", sorted(REAL_SCHEMAS))
def test_real_default_selections_are_bounded_and_valid(name: str) -> None:
    from graphql import parse, validate

    schema = read_schema(str(DATA / name))
    actions = normalize_graphql(schema, connector="gh")
    for action in actions:
        selection = _binding(action).selection
        assert len(selection) < 4000, action.path
        if not selection:
            continue
        field = _binding(action).field
        op = _binding(action).operation
        declared = ", ".join(f"${n}: {t}" for n, t in _binding(action).variable_types.items())
        passed = ", ".join(f"{n}: ${n}" for n in _binding(action).variable_types)
        args = f"({passed})" if passed else ""
        doc = f"{op} Q{f'({declared})' if declared else ''} {{ {field}{args} {{ {selection} }} }}"
        errors = validate(schema, parse(doc))
        assert not errors, (action.path, errors[:2])


def test_the_result_type_is_the_action_group() -> None:
    actions = _actions("type Query { repository(name: String!): Repository }\ntype Repository { id: ID! name: String }")
    assert {path: a.group for path, a in actions.items()} == {"query.repository": "Repository"}
