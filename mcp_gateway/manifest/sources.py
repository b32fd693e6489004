"""The ``source:`` models of a connector: exactly one of openapi, http, postman, graphql or mcp."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from ..primitives.rerouting import rerouting
from ..vocabulary.model import Risk
from .auth import refuse_static_headers
from .validation import STRICT, Problem

__all__ = [
    "ACTION_PATH_RE",
    "SOURCE_CLASSES",
    "SOURCE_KINDS",
    "GraphQLSource",
    "GraphQLSpec",
    "HttpActionConfig",
    "HttpActions",
    "HttpSource",
    "McpSource",
    "McpSpec",
    "OpenAPISource",
    "PostmanSource",
    "SourceConfig",
]

ACTION_PATH_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")


class OpenAPISource(BaseModel):
    model_config = STRICT
    openapi: str
    """A file path (relative to the manifest) or an http(s) URL; ``.gz`` files are decompressed."""
    credential_params: list[str] = Field(default_factory=list)
    """Parameters the spec declares that carry the credential the connector's ``auth`` already
    sends (Slack's ``token``, in the query, a header or the form, beside ``Authorization``): not
    arguments, in whichever location. An ``apiKey`` scheme's parameter and the places the ``auth``
    writes are dropped without being named here."""


class HttpActionConfig(BaseModel):
    model_config = STRICT
    path: str
    method: str = "GET"
    url: str
    summary: str = ""
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    risk: Risk | None = None
    params: dict[str, Literal["path", "query", "header", "cookie", "body"]] = Field(default_factory=dict)
    """Optional placement per argument; unlisted args go to the path if templated, else body or query."""

    @field_validator("path")
    @classmethod
    def _path(cls, v: str) -> str:
        if not ACTION_PATH_RE.match(v):
            raise Problem(
                f"action path {v!r} is not dot-separated words",
                "use letters, digits, '_' and '-' between dots, e.g. 'deploys.create'",
            )
        return v

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        upper = v.upper()
        if upper not in {"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"}:
            raise Problem(f"unknown HTTP method {v!r}", "use GET, POST, PUT, PATCH, DELETE, HEAD or OPTIONS")
        return upper

    @field_validator("params")
    @classmethod
    def _params(
        cls, v: dict[str, Literal["path", "query", "header", "cookie", "body"]]
    ) -> dict[str, Literal["path", "query", "header", "cookie", "body"]]:
        for name, location in v.items():
            if location == "header" and rerouting(name):
                raise Problem(
                    f"header argument {name!r} would make servers on the way use another method, URL or client "
                    "than the action's own; the gateway refuses it at every call",
                    "remove it; declare an action with the method and path the upstream should see",
                    key=name,
                )
        return v


class HttpActions(BaseModel):
    model_config = STRICT
    actions: list[HttpActionConfig]


class HttpSource(BaseModel):
    model_config = STRICT
    http: HttpActions


class PostmanSource(BaseModel):
    model_config = STRICT
    postman: str
    """A Postman v2.1 collection: a file path (relative to the manifest) or an http(s) URL."""


class GraphQLSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, defer_build=True)
    schema_: str | None = Field(None, alias="schema")
    """An SDL file or an introspection JSON file (relative to the manifest)."""
    introspect: bool = False
    """Introspect the live endpoint (the connector's base_url) at sync."""

    @model_validator(mode="after")
    def _one_way(self) -> GraphQLSpec:
        if (self.schema_ is None) == (not self.introspect):
            raise Problem(
                "a graphql source needs exactly one of 'schema' or 'introspect: true'",
                "write 'graphql: {schema: schema.graphql}' or 'graphql: {introspect: true}'",
            )
        return self


class GraphQLSource(BaseModel):
    model_config = STRICT
    graphql: GraphQLSpec


class McpSpec(BaseModel):
    model_config = STRICT
    command: list[str] | None = None
    """A stdio server: the command and its arguments."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment for a stdio server (beside a minimal inherited one: PATH, HOME, ...). A value may use
    ``{secret}`` (or ``{secret.<field>}`` for a JSON secret): the connector's stored credential, filled in
    server-side when the child is spawned, e.g. ``GITHUB_TOKEN: "{secret}"`` with ``auth: {type: bearer}``."""
    cwd: str | None = None
    """A stdio server's working directory (relative to the manifest's folder)."""
    url: str | None = None
    """A remote server's URL (streamable HTTP, or legacy SSE with ``transport: sse``)."""
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    headers: dict[str, str] = Field(default_factory=dict)
    """Static, non-secret headers for a remote server; the credential goes in by the connector's ``auth:``."""

    @field_validator("headers")
    @classmethod
    def _no_credential_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        return refuse_static_headers(headers, "under the connector's 'auth:'")

    @property
    def uses_secret(self) -> bool:
        """Whether an ``env`` value takes the connector's credential."""
        return any("{secret" in value for value in self.env.values())

    @model_validator(mode="after")
    def _one_way(self) -> McpSpec:
        if (self.command is None) == (self.url is None):
            raise Problem(
                "an mcp source needs exactly one of 'command' or 'url'",
                "write 'mcp: {command: [mcp-server-time]}' or 'mcp: {url: http://127.0.0.1:3001/mcp}'",
            )
        if self.command is not None and not self.command:
            raise Problem("'command' is empty", "give the program and its arguments, e.g. [mcp-server-time]")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            # Not quoted: a password written into the URL would reach the terminal and the log.
            raise Problem("'url' is not an http(s) URL", "write e.g. 'url: http://127.0.0.1:3001/mcp'")
        if self.url is not None and (self.env or self.cwd):
            raise Problem(
                "'env' and 'cwd' apply to a stdio server ('command'), not to a 'url'",
                "remove them; a remote server takes 'headers' and the connector's 'auth:'",
            )
        if self.command is not None and self.headers:
            raise Problem(
                "'headers' apply to a remote server ('url'), not to a stdio 'command'", "pass values through 'env'"
            )
        return self


class McpSource(BaseModel):
    model_config = STRICT
    mcp: McpSpec


SOURCE_KINDS = ("openapi", "http", "postman", "graphql", "mcp")
SOURCE_CLASSES: dict[str, type[BaseModel]] = {
    "openapi": OpenAPISource,
    "http": HttpSource,
    "postman": PostmanSource,
    "graphql": GraphQLSource,
    "mcp": McpSource,
}


def _source_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        kinds = [k for k in SOURCE_KINDS if k in value]
        return kinds[0] if len(kinds) == 1 else None
    for kind, cls in SOURCE_CLASSES.items():
        if isinstance(value, cls):
            return kind
    return None


# Dispatch on the one key a source has, so a mistake inside `openapi:` is reported once, for
# that kind, instead of once per kind it failed to be.
SourceConfig = Annotated[
    Annotated[OpenAPISource, Tag("openapi")]
    | Annotated[HttpSource, Tag("http")]
    | Annotated[PostmanSource, Tag("postman")]
    | Annotated[GraphQLSource, Tag("graphql")]
    | Annotated[McpSource, Tag("mcp")],
    Discriminator(
        _source_kind,
        custom_error_type="source_kind",
        custom_error_message="a source is exactly one of: " + ", ".join(SOURCE_KINDS),
    ),
]
