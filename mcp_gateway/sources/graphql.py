"""GraphQL schemas to ``model.Action``s: one action per root field.

Where the schema comes from: an SDL file, an introspection JSON file (``{"__schema": …}``, with or
without a ``{"data": …}`` wrapper), or the live endpoint (the connector's ``base_url``), which
sync introspects with the connector's credential applied server-side
(``execution/graphql_introspection.py`` sends that query; ``GraphQLLoader`` is handed it). graphql-core builds the
schema with ``assume_valid_sdl``/``assume_valid``: real schemas are not always strictly valid
(GitHub's published SDL defines two fields of ``EnterpriseOwnerInfo`` twice; the later
definition wins), and refusing a whole API over one redundant field helps nobody.

Naming (the same text is in docs/manifest.md): every field of the Query root becomes ``query.<field>``
(a read), every field of the Mutation root ``mutation.<field>`` (a write); the field name is
snake_cased like OpenAPI operation ids (``addStar`` -> ``mutation.add_star``,
``repositoryOwner`` -> ``query.repository_owner``). Two fields that snake_case alike get ``_2``,
``_3`` in schema order. Subscriptions are not actions (they need a long-lived stream).

Arguments keep their GraphQL names (GraphQL names are already identifiers). Types map to JSON
Schema: ``Int`` -> integer, ``Float`` -> number, ``String``/``ID`` -> string, ``Boolean`` ->
boolean, enums -> string with ``enum``, lists -> array, input objects -> object with
``additionalProperties: false``; custom scalars (``DateTime``, ``URI``, ``JSON`` …) accept any
JSON value and say which scalar they are. Non-null without a default is ``required``. Input
objects nest at most ``MAX_INPUT_DEPTH`` levels and never into themselves: a recursive or deeper
input object is described, not expanded.

Every field that returns an object gets a default selection set (``default_selection``) and a
``__select`` argument to replace it; ``__`` names are reserved by GraphQL, so it cannot clash
with a real argument.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import anyio.to_thread
from graphql import (
    GraphQLArgument,
    GraphQLEnumType,
    GraphQLField,
    GraphQLInputField,
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNamedType,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLScalarType,
    GraphQLSchema,
    GraphQLSyntaxError,
    GraphQLUnionType,
    IntrospectionQuery,
    Undefined,
    build_ast_schema,
    build_client_schema,
    get_named_type,
    is_leaf_type,
    parse,
    value_from_ast_untyped,
)

from ..manifest import ConnectorConfig, GraphQLSpec
from ..primitives.file_kinds import not_a_file
from ..vocabulary.errors import SourceError
from ..vocabulary.model import Action, GraphQLBinding, Risk
from ._fingerprint import file_fingerprint, reuse, settings_digest
from ._naming import snake_case, unique_name
from .base import LoadContext, Normalized
from .graphql_schemas import GraphQLSchemas

__all__ = [
    "MAX_INPUT_DEPTH",
    "SELECT_ARG",
    "GraphQLLoader",
    "GraphQLSchemas",
    "Introspect",
    "build_schema_from_introspection",
    "build_schema_from_sdl",
    "default_selection",
    "normalize_graphql",
    "read_schema",
]

SELECT_ARG = "__select"
MAX_INPUT_DEPTH = 6
"""Input objects nested deeper than this are described, not expanded (GitHub's nest about 4)."""
MAX_ROOT_LEAVES = 40
"""Scalar fields selected from the root field's own type (GitHub's Repository has 70)."""
MAX_NESTED_OBJECTS = 10
"""Object fields of the root field's type that are expanded one level."""
MAX_NESTED_LEAVES = 8
"""Scalar fields selected from each of those objects, and from each member of a union."""
_MAX_SUMMARY = 300
_MAX_DESCRIPTION = 2000
_SCALARS: Mapping[str, dict[str, Any]] = {
    "Int": {"type": "integer"},
    "Float": {"type": "number"},
    "String": {"type": "string"},
    "ID": {"type": "string"},
    "Boolean": {"type": "boolean"},
}
RootOperation = Literal["query", "mutation"]
# Fields an agent most often wants from a related object; the rest follow in schema order.
_PREFERRED = ("id", "number", "name", "login", "title", "url", "state", "slug", "createdAt", "updatedAt")

Introspect = Callable[[ConnectorConfig, str], Awaitable[tuple[GraphQLSchema, str]]]
"""Introspects the connector's endpoint (the URL) with its credential; returns the schema and a
digest of the answer. The running gateway provides it (``execution.graphql_introspection``)."""


# -- reading a schema -------------------------------------------------------------------------


def build_schema_from_sdl(text: str, label: str) -> GraphQLSchema:
    """An SDL document as a schema, tolerant of redundant definitions (see the module docstring).

    Raises:
        SourceError: the text is not GraphQL SDL or defines no Query type.
    """
    try:
        document = parse(text, no_location=False)
    except GraphQLSyntaxError as exc:
        where = f" at line {exc.locations[0].line}, column {exc.locations[0].column}" if exc.locations else ""
        raise SourceError(
            f"{label}: not valid GraphQL SDL{where}: {exc.message}. Point the source at the schema file "
            "(schema.graphql) or an introspection result (schema.json)."
        ) from None
    try:
        schema = build_ast_schema(document, assume_valid_sdl=True, assume_valid=True)
    except (TypeError, ValueError) as exc:  # graphql-core raises these for unusable definitions
        raise SourceError(f"{label}: the SDL cannot be built into a schema: {exc}") from None
    return _checked(schema, label)


def build_schema_from_introspection(data: Any, label: str) -> GraphQLSchema:
    """An introspection result (``{"__schema": …}`` or ``{"data": {"__schema": …}}``) as a schema.

    Raises:
        SourceError: the JSON is not an introspection result, or is one that cannot be built.
    """
    if isinstance(data, dict) and "__schema" not in data and isinstance(data.get("data"), dict):
        data = data["data"]
    if not isinstance(data, dict) or not isinstance(data.get("__schema"), dict):
        raise SourceError(
            f"{label}: not a GraphQL introspection result (no '__schema' object at the top or under 'data'). "
            "Point the source at an SDL file or at the JSON an introspection query returns."
        )
    try:
        schema = build_client_schema(cast(IntrospectionQuery, data), assume_valid=True)
    except KeyError as exc:
        key = str(exc.args[0]) if exc.args else "?"
        where = _lacking(data["__schema"], key)
        raise SourceError(
            f"{label}: the introspection result cannot be built into a schema: "
            f"{where or 'an entry'} has no {key!r} key. A valid result is what the standard introspection query "
            "returns: every type has 'kind' and 'name', every field and argument 'name' and 'type'. Fetch it "
            "again with that query, or point the source at the SDL."
        ) from None
    except (TypeError, ValueError) as exc:
        raise SourceError(f"{label}: the introspection result cannot be built into a schema: {exc}") from None
    return _checked(schema, label)


_INTROSPECTION_LISTS = ("types", "fields", "args", "inputFields", "enumValues", "interfaces", "possibleTypes")
_TYPED = ("fields", "args", "inputFields")


def _lacking(schema: dict[str, Any], key: str) -> str | None:
    """Where (``__schema.types[0].fields[2]``) the first listed entry without ``key`` is, or None."""
    stack: list[tuple[Any, str]] = [(schema, "__schema")]
    while stack:
        node, path = stack.pop(0)
        if not isinstance(node, dict):
            continue
        for name in _INTROSPECTION_LISTS:
            items = node.get(name)
            if not isinstance(items, list):
                continue
            for index, item in enumerate(items):
                here = f"{path}.{name}[{index}]"
                if isinstance(item, dict) and key not in item and (key != "type" or name in _TYPED):
                    return here
                stack.append((item, here))
    return None


def _checked(schema: GraphQLSchema, label: str) -> GraphQLSchema:
    if schema.query_type is None:
        raise SourceError(f"{label}: the schema has no Query type, so it offers no operations.")
    return schema


def read_schema(path: str) -> GraphQLSchema:
    """An SDL or introspection JSON file as a schema (blocking: run it in a worker thread).

    JSON is recognised by its first character (``{``), so the file name does not matter.

    Raises:
        SourceError: the file cannot be read or is neither SDL nor an introspection result.
    """
    label = str(Path(path).absolute())
    try:
        kind = not_a_file(Path(path))
        if kind is not None:
            fix = "point 'graphql: schema:' at an SDL or JSON file"
            raise SourceError(f"{label}: is {kind}, not a schema file; {fix}.")
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise SourceError(f"{label}: no such file; check the path under 'graphql: schema:'.") from None
    except OSError as exc:
        raise SourceError(f"{label}: cannot be read ({exc.strerror or type(exc).__name__}).") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SourceError(f"{label}: not UTF-8 text; a GraphQL schema is SDL or JSON text.") from None
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SourceError(
                f"{label}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}. "
                "Fix the file or point the source at the SDL."
            ) from None
        return build_schema_from_introspection(data, label)
    return build_schema_from_sdl(text, label)


# -- the source -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GraphQLLoader:
    """``source: {graphql: ...}`` as a ``Source``. A schema file is fingerprinted like a spec; a
    live endpoint is introspected on every sync (there is no cheaper way to know it changed) and
    fingerprinted by the answer. Either way the schema is registered in ``schemas`` for the
    executor's ``__select`` checks."""

    spec: GraphQLSpec
    schemas: GraphQLSchemas
    introspect: Introspect | None = None
    """None when sync runs outside a gateway (no HTTP client, no credentials)."""

    async def load(self, cfg: ConnectorConfig, ctx: LoadContext) -> Normalized:
        if self.spec.schema_ is not None:
            return await self._from_file(cfg, ctx, ctx.resolve(self.spec.schema_))
        if not cfg.base_url:
            raise SourceError("'introspect: true' reads the schema from base_url, and this connector has none; set it")
        if self.introspect is None:
            raise SourceError("introspection needs the running gateway's HTTP client; sync through the gateway")
        schema, digest = await self.introspect(cfg, cfg.base_url)
        fingerprint = f"{settings_digest(cfg)}:introspection:{digest}"
        if ctx.cached is not None and ctx.cached.fingerprint == fingerprint:
            actions = ctx.cached.actions
        else:
            actions = await anyio.to_thread.run_sync(
                lambda: normalize_graphql(schema, connector=cfg.slug, risk_overrides=cfg.risk)
            )
        self.schemas.put(cfg.slug, schema)
        return Normalized(actions, None, fingerprint, [])

    async def _from_file(self, cfg: ConnectorConfig, ctx: LoadContext, resolved: str) -> Normalized:
        if resolved.startswith(("http://", "https://")):
            raise SourceError(
                f"graphql schema {resolved!r} is a URL; give a schema file, or 'introspect: true' to read the schema "
                "from the endpoint at base_url"
            )
        reused = await reuse(cfg, ctx.cached, resolved)
        if reused is None:
            schema = await anyio.to_thread.run_sync(read_schema, resolved)
            actions = await anyio.to_thread.run_sync(
                lambda: normalize_graphql(schema, connector=cfg.slug, risk_overrides=cfg.risk)
            )
            del schema  # parsed again only if an agent's __select needs checking (GraphQLSchemas)
            fingerprint = await file_fingerprint(cfg, [resolved], fallback="file")
            reused = Normalized(actions, None, fingerprint, [resolved])
        self.schemas.put_file(cfg.slug, resolved)
        return reused


# -- schema -> actions ------------------------------------------------------------------------


def normalize_graphql(
    schema: GraphQLSchema, *, connector: str, risk_overrides: Mapping[str, Risk] = {}
) -> list[Action]:
    """One action per Query and Mutation root field (rules in the module docstring)."""
    actions: list[Action] = []
    taken: set[str] = set()
    roots: tuple[tuple[RootOperation, GraphQLObjectType | None], ...] = (
        ("query", schema.query_type),
        ("mutation", schema.mutation_type),
    )
    for operation, root in roots:
        if root is None:
            continue
        for name, field in root.fields.items():
            path = unique_name(f"{operation}.{snake_case(name) or 'field'}", taken)
            actions.append(_action(connector, operation, name, field, path, risk_overrides))
    return actions


def _action(
    connector: str,
    operation: RootOperation,
    name: str,
    field: GraphQLField,
    path: str,
    risk_overrides: Mapping[str, Risk],
) -> Action:
    properties: dict[str, Any] = {}
    required: list[str] = []
    variable_types: dict[str, str] = {}
    for arg_name, arg in field.args.items():
        properties[arg_name] = _argument_schema(arg)
        variable_types[arg_name] = str(arg.type)
        if isinstance(arg.type, GraphQLNonNull) and _default(arg) is Undefined:
            required.append(arg_name)
    selection = default_selection(field.type)
    returns = str(field.type)
    if selection:
        shown = selection if len(selection) <= 400 else selection[:399].rstrip() + "…"
        properties[SELECT_ARG] = {
            "description": (
                f"What to return from the {get_named_type(field.type).name} result: a GraphQL selection set "
                '(e.g. "id name owner { login }", nested fields and arguments allowed, one selection only) '
                'or a list of dotted field paths (e.g. ["id", "owner.login"]). Default: ' + shown
            ),
            "anyOf": [
                {"type": "string", "minLength": 1},
                {"type": "array", "items": {"type": "string"}, "minItems": 1},
            ],
        }
    description = _text(field.description, _MAX_DESCRIPTION)
    note = f"GraphQL {operation} field `{name}`, returns `{returns}`."
    if field.deprecation_reason:
        note += f" Deprecated: {field.deprecation_reason}"
    return Action(
        connector=connector,
        path=path,
        summary=_summary(field.description) or f"{operation.capitalize()} {name}",
        description=f"{description}\n\n{note}" if description else note,
        input_schema={
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
        risk=risk_overrides.get(path, "read" if operation == "query" else "write"),
        binding=GraphQLBinding(
            operation=operation,
            field=name,
            variable_types=variable_types,
            selection=selection,
        ),
        group=get_named_type(field.type).name,
    )


def _summary(text: str | None) -> str:
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line if len(line) <= _MAX_SUMMARY else line[: _MAX_SUMMARY - 1].rstrip() + "…"


def _text(text: str | None, limit: int) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# -- input types -> JSON Schema ---------------------------------------------------------------


def _argument_schema(arg: GraphQLArgument | GraphQLInputField) -> dict[str, Any]:
    schema = _input_schema(arg.type, ())
    if arg.description:
        schema = {**schema, "description": _text(arg.description, 500)}
    default = _default(arg)
    if default is not Undefined and default is not None and _is_json(default):
        schema["default"] = default
    if getattr(arg, "deprecation_reason", None):
        schema["deprecated"] = True
    return schema


def _input_schema(gql_type: Any, stack: tuple[str, ...]) -> dict[str, Any]:
    if isinstance(gql_type, GraphQLNonNull):
        return _input_schema(gql_type.of_type, stack)
    if isinstance(gql_type, GraphQLList):
        return {"type": "array", "items": _input_schema(gql_type.of_type, stack)}
    if isinstance(gql_type, GraphQLScalarType):
        known = _SCALARS.get(gql_type.name)
        if known is not None:
            return dict(known)
        about = f" {_text(gql_type.description, 200)}" if gql_type.description else ""
        return {"description": f"A {gql_type.name} (custom GraphQL scalar).{about}"}
    if isinstance(gql_type, GraphQLEnumType):
        schema: dict[str, Any] = {"type": "string", "enum": list(gql_type.values)}
        if gql_type.description:
            schema["description"] = _text(gql_type.description, 300)
        return schema
    if isinstance(gql_type, GraphQLInputObjectType):
        return _input_object_schema(gql_type, stack)
    return {}  # pragma: no cover - input positions hold only the kinds above


def _input_object_schema(gql_type: GraphQLInputObjectType, stack: tuple[str, ...]) -> dict[str, Any]:
    about = _text(gql_type.description, 300)
    if gql_type.name in stack or len(stack) >= MAX_INPUT_DEPTH:
        # Recursive (a filter of filters) or very deep: describe it instead of expanding forever.
        why = "refers to itself" if gql_type.name in stack else "is nested too deep to expand here"
        return {
            "type": "object",
            "description": f"A {gql_type.name} input object ({why}; pass its fields as the schema defines them). "
            + about,
        }
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in gql_type.fields.items():
        sub = _input_schema(field.type, (*stack, gql_type.name))
        if field.description:
            sub = {**sub, "description": _text(field.description, 500)}
        default = _default(field)
        if default is not Undefined and default is not None and _is_json(default):
            sub["default"] = default
        properties[name] = sub
        if isinstance(field.type, GraphQLNonNull) and default is Undefined:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    if about:
        schema["description"] = about
    return schema


def _default(arg: GraphQLArgument | GraphQLInputField) -> Any:
    """The default value, or ``Undefined``: graphql-core 3.2 has ``default_value``; 3.3 keeps it only
    for defaults given as Python values and puts SDL and introspection defaults in ``default``."""
    value = getattr(arg, "default_value", Undefined)
    if value is not Undefined:
        return value
    given = getattr(arg, "default", None)
    if given is None or given is Undefined:
        return Undefined
    if getattr(given, "value", Undefined) is not Undefined:
        return given.value
    literal = getattr(given, "literal", None)
    return value_from_ast_untyped(literal) if literal is not None else Undefined


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# -- default selection sets -------------------------------------------------------------------


def default_selection(gql_type: Any) -> str:
    """The selection set (without braces) sent when the agent gives no ``__select``.

    The root field's type contributes up to ``MAX_ROOT_LEAVES`` of its scalar and enum fields
    (ids, numbers, names, titles, URLs and states first, then schema order), and up to
    ``MAX_NESTED_OBJECTS`` of its object fields contribute ``MAX_NESTED_LEAVES`` of theirs;
    nothing deeper. A connection (a type with ``nodes`` or ``edges { node }``) returned
    by the root field is unwrapped: ``totalCount``, ``pageInfo { hasNextPage endCursor }`` and the
    node type selected as the root. Fields that need arguments, deprecated fields, and
    connections below the root (they need paging arguments on most servers) are left out. A
    union or interface adds ``__typename``; a union selects each member's scalars with ``... on``.
    Empty for a scalar or enum result.
    """
    named = get_named_type(gql_type)
    if is_leaf_type(named):
        return ""
    if isinstance(named, GraphQLObjectType | GraphQLInterfaceType) and _is_connection(named):
        return _connection_selection(named) or "__typename"
    return _selection(named, nested=False) or "__typename"


def _selectable(field: GraphQLField) -> bool:
    return not field.deprecation_reason and not any(
        isinstance(a.type, GraphQLNonNull) and _default(a) is Undefined for a in field.args.values()
    )


def _fields(named: GraphQLNamedType) -> dict[str, GraphQLField]:
    if isinstance(named, GraphQLObjectType | GraphQLInterfaceType):
        return {k: f for k, f in named.fields.items() if not k.startswith("__") and _selectable(f)}
    return {}


def _is_connection(named: GraphQLNamedType) -> bool:
    fields = _fields(named)
    if "nodes" in fields:
        return True
    edges = fields.get("edges")
    return edges is not None and "node" in _fields(get_named_type(edges.type))


def _leaves(named: GraphQLNamedType, limit: int) -> list[str]:
    names = [k for k, f in _fields(named).items() if is_leaf_type(get_named_type(f.type))]
    ordered = [k for k in _PREFERRED if k in names] + [k for k in names if k not in _PREFERRED]
    return ordered[:limit]


def _selection(named: GraphQLNamedType, *, nested: bool) -> str:
    if isinstance(named, GraphQLUnionType):
        if nested:
            return "__typename"
        parts = ["__typename"]
        # Members' same-named fields must have the same type to be selected together (the
        # spec's OverlappingFieldsCanBeMerged rule): GitHub's App.name is String!, User.name String.
        seen: dict[str, str] = {}
        for member in named.types:
            leaves = []
            for leaf in _leaves(member, MAX_NESTED_LEAVES):
                shape = str(member.fields[leaf].type)
                if seen.setdefault(leaf, shape) == shape:
                    leaves.append(leaf)
            if leaves:
                parts.append(f"... on {member.name} {{ {' '.join(leaves)} }}")
        return " ".join(parts)
    parts = _leaves(named, MAX_NESTED_LEAVES if nested else MAX_ROOT_LEAVES)
    if isinstance(named, GraphQLInterfaceType):
        parts.insert(0, "__typename")
    if nested:
        return " ".join(parts)
    expanded = 0
    for name, field in _fields(named).items():
        child = get_named_type(field.type)
        if expanded >= MAX_NESTED_OBJECTS or is_leaf_type(child) or _is_connection(child):
            continue
        sub = _selection(child, nested=True)
        if sub:
            parts.append(f"{name} {{ {sub} }}")
            expanded += 1
    return " ".join(parts)


def _connection_selection(named: GraphQLNamedType) -> str:
    fields = _fields(named)
    parts: list[str] = []
    if "totalCount" in fields and is_leaf_type(get_named_type(fields["totalCount"].type)):
        parts.append("totalCount")
    page_info = fields.get("pageInfo")
    if page_info is not None:
        wanted = [k for k in ("hasNextPage", "endCursor") if k in _fields(get_named_type(page_info.type))]
        if wanted:
            parts.append(f"pageInfo {{ {' '.join(wanted)} }}")
    if "nodes" in fields:
        node = get_named_type(fields["nodes"].type)
        sub = "" if is_leaf_type(node) else _selection(node, nested=False)
        parts.append(f"nodes {{ {sub} }}" if sub else "nodes")
    else:
        node = get_named_type(_fields(get_named_type(fields["edges"].type))["node"].type)
        sub = "" if is_leaf_type(node) else _selection(node, nested=False)
        parts.append(f"edges {{ node {{ {sub} }} }}" if sub else "edges { node }")
    return " ".join(parts)
