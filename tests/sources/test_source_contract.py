"""The ``Source`` contract, parametrized over every source kind (issue 10, item 5).

Each kind gets a small real input (fixtures here, ``tests/data``, the GraphQL test upstream
introspected in process, real ``mcp_types.Tool`` objects from a recorded ``tools/list``), is picked
the way sync picks it (``core.sync.source_for``) and must yield a ``Normalized`` whose actions
have unique, valid paths under the connector, JSON-Schema object inputs, a known risk and the
binding of its kind; its fingerprint is stable, and handing the result back as the cached catalog
reuses it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import httpx2
import jsonschema
import mcp_types as types
import pytest

from mcp_gateway.core.sync import source_for
from mcp_gateway.execution.graphql_introspection import GraphQLServices
from mcp_gateway.manifest import ACTION_PATH_RE, ConnectorConfig
from mcp_gateway.sources.base import LoadContext, Normalized
from mcp_gateway.sources.graphql import GraphQLSchemas
from mcp_gateway.vocabulary.model import (
    Action,
    GraphQLBinding,
    HttpBinding,
    McpBinding,
    OpenAPIBinding,
    PostmanBinding,
    RequestBinding,
    Risk,
)
from tests.support.graphql_upstream import SDL, GraphQLApp

pytestmark = pytest.mark.anyio

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "tests" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SLUG = "demo"
GRAPHQL_URL = "http://graphql.test/graphql"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class Kind:
    """One source kind's input: the connector's ``source:`` and what its actions are bound as."""

    source: Callable[[Path], dict[str, Any] | None]
    binding: tuple[type, ...]
    from_files: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _tools() -> Sequence[types.Tool]:
    listing = json.loads((DATA / "mcp" / "server-everything.tools-list.json").read_text())
    return [types.Tool.model_validate(t) for t in listing["result"]["tools"]]


def _sdl_file(tmp: Path) -> dict[str, Any]:
    (tmp / "schema.graphql").write_text(SDL)
    return {"graphql": {"schema": "schema.graphql"}}


HTTP_ACTIONS = [
    {"path": "deploys.create", "method": "POST", "url": "https://api.example/sites/{site_id}/deploys"},
    {"path": "deploys.list", "url": "https://api.example/sites/{site_id}/deploys", "params": {"page": "query"}},
]

KINDS: dict[str, Kind] = {
    "openapi": Kind(
        lambda _: {"openapi": str(FIXTURES / "openapi" / "multifile" / "main.yaml")}, (OpenAPIBinding,), from_files=True
    ),
    "openapi-shared": Kind(
        lambda _: {"openapi": str(DATA / "openapi" / "petstore" / "petstore-oas3.json")},
        (OpenAPIBinding,),
        from_files=True,
    ),
    "postman": Kind(
        lambda _: {"postman": str(DATA / "postman" / "realworld" / "Conduit.postman_collection.json")},
        (PostmanBinding,),
        from_files=True,
    ),
    "graphql-file": Kind(_sdl_file, (GraphQLBinding,), from_files=True),
    "graphql-introspect": Kind(
        lambda _: {"graphql": {"introspect": True}}, (GraphQLBinding,), extra={"base_url": GRAPHQL_URL}
    ),
    "mcp": Kind(
        lambda _: {"mcp": {"command": ["server-everything"]}},
        (McpBinding,),
    ),
    "http": Kind(lambda _: {"http": {"actions": HTTP_ACTIONS}}, (HttpBinding,)),
    "request-action": Kind(
        lambda _: {"http": {"actions": HTTP_ACTIONS}},
        (HttpBinding, RequestBinding),
        extra={"request_action": True, "base_url": "https://api.example"},
    ),
    "none": Kind(lambda _: None, (RequestBinding,), extra={"request_action": True, "base_url": "https://api.example"}),
}


async def _auth_for(cfg: ConnectorConfig, on_secret: Callable[..., None]) -> httpx2.Auth:
    return httpx2.Auth()  # the test upstream needs no credential


async def _load(name: str, tmp_path: Path, cached: Normalized | None = None) -> Normalized:
    kind = KINDS[name]
    cfg = ConnectorConfig.model_validate({"slug": SLUG, "source": kind.source(tmp_path), **kind.extra})

    async def list_tools(_: ConnectorConfig) -> Sequence[types.Tool]:
        return _tools()

    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=GraphQLApp())) as client:
        services = GraphQLServices(GraphQLSchemas(), client, _auth_for)
        source = source_for(cfg, services, list_tools)
        resolve: Callable[[str], str] = lambda ref: str(tmp_path / ref) if not Path(ref).is_absolute() else ref  # noqa: E731
        normalized = await source.load(cfg, LoadContext(resolve, cached))
    if name.startswith("graphql"):
        assert services.schemas.known(SLUG)  # registered for the executor's __select checks
    return normalized


@pytest.mark.parametrize("name", list(KINDS))
async def test_every_source_kind_keeps_the_contract(name: str, tmp_path: Path) -> None:
    kind = KINDS[name]
    normalized = await _load(name, tmp_path)
    assert isinstance(normalized, Normalized)
    with pytest.raises(dataclasses.FrozenInstanceError):
        vars(Normalized)["__setattr__"](normalized, "fingerprint", "x")
    actions = normalized.actions
    assert actions, f"{name} yielded no actions"
    paths = [a.path for a in actions]
    assert len(paths) == len(set(paths)), f"duplicate paths: {sorted(p for p in paths if paths.count(p) > 1)}"
    risks = set(get_args(Risk))
    for action in actions:
        assert isinstance(action, Action)
        assert action.connector == SLUG and action.qualified_name == f"{SLUG}.{action.path}"
        assert ACTION_PATH_RE.match(action.path), action.path
        assert action.input_schema.get("type") == "object", action.path
        jsonschema.validators.validator_for(action.input_schema, default=jsonschema.Draft202012Validator).check_schema(
            action.input_schema
        )
        assert action.risk in risks
        assert isinstance(action.binding, kind.binding), (action.path, action.binding)
        assert Action.model_validate_json(action.model_dump_json()) == action  # what the store keeps reads back
    assert {type(a.binding) for a in actions} == set(kind.binding)
    if kind.from_files:
        assert normalized.files and all(Path(f).is_absolute() for f in normalized.files)
        assert not normalized.fingerprint.endswith((":url", ":file"))  # every file was read for the fingerprint
    else:
        assert normalized.files == []
    assert normalized.base_url is None or normalized.base_url.startswith(("http://", "https://"))


@pytest.mark.parametrize("name", list(KINDS))
async def test_fingerprint_is_stable_and_a_cached_catalog_is_reused(name: str, tmp_path: Path) -> None:
    first = await _load(name, tmp_path)
    second = await _load(name, tmp_path)
    assert first.fingerprint and second.fingerprint == first.fingerprint
    assert second.actions == first.actions and second.files == first.files and second.base_url == first.base_url
    again = await _load(name, tmp_path, cached=first)
    assert again.fingerprint == first.fingerprint
    assert again.actions == first.actions  # the request action is not added a second time


async def test_the_fingerprint_follows_the_connectors_settings(tmp_path: Path) -> None:
    plain = await _load("http", tmp_path)
    with_request = await _load("request-action", tmp_path)
    assert plain.fingerprint != with_request.fingerprint
