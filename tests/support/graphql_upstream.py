"""A real GraphQL server for tests: graphql-core executing a small schema, as a raw ASGI app.

    app = GraphQLApp(token="s3cret")            # requests without "Authorization: Bearer s3cret" get 401
    GraphQLApp(introspection_error=f)           # introspection answers {"errors": [{"message": f(token)}]}
    with serve_asgi(app) as base_url:           # tests.support.upstream; the endpoint is base_url + "/graphql"
        ...
    app.requests[-1].body["variables"]          # exactly what reached the server

It answers like a production server: HTTP 200 with ``{"data": …}``, ``{"data": …, "errors": […]}``
when a resolver fails, ``{"data": null, "errors": […]}`` for a document that does not validate,
and answers introspection (the gateway's ``introspect: true``) with graphql-core's own executor.
"""

from __future__ import annotations

import json
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from graphql import build_schema, graphql

from .upstream import Receive, Scope, Send, reply_json

__all__ = ["SDL", "GraphQLApp", "GraphQLRequest"]

SDL = '''
"""A code repository."""
type Repository {
  id: ID!
  name: String!
  stars: Int!
  visibility: Visibility!
  owner: Owner!
  "Fails on purpose, to produce a partial result."
  broken: String
  issues(first: Int!): IssueConnection!
}

type Owner { id: ID! login: String! }
type Issue { id: ID! title: String! }
type IssueConnection { totalCount: Int! nodes: [Issue!]! }
type RepositoryConnection { totalCount: Int! pageInfo: PageInfo! nodes: [Repository!]! }
type PageInfo { hasNextPage: Boolean! endCursor: String }

enum Visibility { PUBLIC PRIVATE }

"""Filters for a search; nest with `and`."""
input RepositoryFilter {
  visibility: Visibility
  minStars: Int = 0
  and: RepositoryFilter
}

input AddStarInput {
  "The repository's id."
  starrableId: ID!
  clientMutationId: String
}

type AddStarPayload { clientMutationId: String starred: Repository }

type Query {
  "Look up one repository by owner and name."
  repository(owner: String!, name: String!): Repository
  search(query: String!, first: Int = 10, filter: RepositoryFilter, tags: [String!]): RepositoryConnection!
  "Always fails."
  failing: String
  ping: String
}

type Mutation {
  "Adds a star to a repository."
  addStar(input: AddStarInput!): AddStarPayload
}
'''

_REPOS = {
    ("octo", "hello"): {
        "id": "R_1",
        "name": "hello",
        "stars": 42,
        "visibility": "PUBLIC",
        "owner": {"id": "U_1", "login": "octo"},
    },
}


class _Broken(Exception):
    pass


def _repository(_: Any, owner: str, name: str) -> dict[str, Any] | None:
    repo = _REPOS.get((owner, name))
    if repo is None:
        return None
    return {**repo, "broken": _raise, "issues": _issues}


def _issues(_: Any, first: int) -> dict[str, Any]:
    return {"totalCount": 1, "nodes": [{"id": "I_1", "title": "x"}][:first]}


def _raise(*_: Any) -> None:
    raise _Broken("the broken field is broken")


def _search(_: Any, query: str, first: int = 10, filter: Any = None, tags: Any = None) -> dict[str, Any]:
    nodes = [{**r, "broken": None, "issues": _issues} for r in _REPOS.values() if query in r["name"]][:first]
    return {"totalCount": len(nodes), "pageInfo": {"hasNextPage": False, "endCursor": None}, "nodes": nodes}


def _failing(*_: Any) -> None:
    raise _Broken("this field always fails")


def _add_star(_: Any, input: dict[str, Any]) -> dict[str, Any]:
    repo = next((r for r in _REPOS.values() if r["id"] == input["starrableId"]), None)
    if repo is None:
        raise _Broken(f"no repository with id {input['starrableId']}")
    return {"clientMutationId": input.get("clientMutationId"), "starred": {**repo, "stars": repo["stars"] + 1}}


ROOT = {
    "repository": _repository,
    "search": _search,
    "failing": _failing,
    "ping": lambda *_: "pong",
    "addStar": _add_star,
}


@dataclass(frozen=True)
class GraphQLRequest:
    headers: dict[str, str]
    body: Any


class GraphQLApp:
    """POST /graphql with JSON ``{query, variables, operationName}``; records every request."""

    def __init__(self, *, token: str | None = None, introspection_error: Callable[[str], str] | None = None) -> None:
        self.schema = build_schema(SDL)
        self.token = token
        self.introspection_error = introspection_error
        """A hostile endpoint: introspection fails with this text of the bearer token it was sent."""
        self.requests: list[GraphQLRequest] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            message: MutableMapping[str, Any] = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self.requests.append(GraphQLRequest(headers, body))
        if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
            await reply_json(send, 401, {"errors": [{"message": "bad credentials"}]})
            return
        if scope["method"] != "POST" or scope["path"] != "/graphql" or not isinstance(body, dict):
            await reply_json(send, 400, {"errors": [{"message": "POST a JSON body to /graphql"}]})
            return
        if self.introspection_error is not None and body.get("operationName") == "IntrospectionQuery":
            token = headers.get("authorization", "").removeprefix("Bearer ")
            await reply_json(send, 200, {"data": None, "errors": [{"message": self.introspection_error(token)}]})
            return
        result = await graphql(
            self.schema,
            body.get("query") or "",
            root_value=ROOT,
            variable_values=body.get("variables"),
            operation_name=body.get("operationName"),
        )
        answer: dict[str, Any] = {"data": result.data}
        if result.errors:
            answer["errors"] = [e.formatted for e in result.errors]
        await reply_json(send, 200, answer)
