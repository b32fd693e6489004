"""Running a GraphQL action: one POST of ``{query, variables, operationName}`` to the endpoint.

Argument values only ever travel in ``variables``; the query text is built from the schema's own
names (the field, its argument names and their types, all recorded at sync) and a selection set.
An agent's ``__select`` is parsed as GraphQL, must be exactly one anonymous selection set (no
second operation, no fragment definitions or spreads, no variables), and is printed back from its
syntax tree, so no string an agent writes is pasted into the document. When the connector's
schema is at hand the whole document is also validated against it, so a misspelled field is the
agent's ``invalid_args`` before any approval is asked for, not an upstream error after.

GraphQL answers are passed on as the server sent them: ``{"data": …}``, or ``{"data": …,
"errors": […]}`` for a partial result (``ok``). When there are errors and ``data`` is null, or
the one root field asked for is null (it failed), the call failed: the errors' messages, each
with its path, become an ``error`` result (``UpstreamError``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import httpx2
from graphql import (
    DocumentNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLSchema,
    OperationDefinitionNode,
    OperationType,
    VariableNode,
    Visitor,
    parse,
    print_ast,
    validate,
    visit,
)

from ..manifest import ConnectorConfig
from ..primitives.html_text import looks_like_html
from ..primitives.sanitize import MAX_ERROR_CHARS
from ..sources.graphql import SELECT_ARG, GraphQLSchemas
from ..vocabulary.errors import ArgumentError, UpstreamError
from ..vocabulary.model import Action, GraphQLBinding
from .error_dialects import graphql_extensions
from .executor import Prepared
from .http_request import USER_AGENT, with_own_body_type
from .response import MAX_RETRY_AFTER, Outcome, said, summarize_error
from .send import RedirectJudge, send

__all__ = ["GraphQLExecutor", "Operation", "build_operation", "selection_from_select"]

_NAME = re.compile(r"^[_A-Za-z][_0-9A-Za-z]*$")
_MAX_SELECT_CHARS = 20_000
_MAX_ERROR_TEXT = 2000
ACCEPT = "application/graphql-response+json, application/json;q=0.9"


@dataclass(frozen=True)
class Operation:
    """What is posted, plus whether the document still needs checking against the schema."""

    query: str
    variables: dict[str, Any]
    operation_name: str
    document: DocumentNode
    custom_selection: bool

    def body(self) -> dict[str, Any]:
        return {"query": self.query, "variables": self.variables, "operationName": self.operation_name}


def selection_from_select(value: Any) -> str:
    """An agent's ``__select`` as canonical selection-set text (without the outer braces).

    Accepts a selection-set string (``"id owner { login }"``, braces optional) or a list of
    dotted field paths (``["id", "owner.login"]``).

    Raises:
        ArgumentError: not one plain selection set (a second operation, a fragment, a variable,
            a syntax error) or a path segment that is not a GraphQL name.
    """
    if isinstance(value, list) and value and all(isinstance(p, str) for p in value):
        return _paths_selection(value)
    if not isinstance(value, str) or not value.strip():
        raise _select_error("give a selection-set string or a non-empty list of dotted field paths")
    if len(value) > _MAX_SELECT_CHARS:
        raise _select_error(f"it is longer than {_MAX_SELECT_CHARS} characters")
    text = value.strip()
    source = text if text.startswith("{") else "{" + text + "}"
    try:
        document = parse(source, no_location=True, max_tokens=5000)
    except GraphQLError as exc:
        raise _select_error(f"it is not a GraphQL selection set: {exc.message}") from None
    definitions = document.definitions
    if len(definitions) != 1 or not isinstance(definitions[0], OperationDefinitionNode):
        raise _select_error("it must be one selection set, not several operations or fragment definitions")
    op = definitions[0]
    if op.operation != OperationType.QUERY or op.name or op.variable_definitions or op.directives:
        raise _select_error("it must be a bare selection set such as 'id name owner { login }'")
    forbidden = _Forbidden()
    visit(op.selection_set, forbidden)
    if forbidden.found:
        raise _select_error(f"it may not use {forbidden.found}; write the fields out (inline '... on Type' is fine)")
    return print_ast(op.selection_set).strip()[1:-1].strip()


class _Forbidden(Visitor):
    """Finds what a selection may not contain: spreads of fragments it cannot define, variables."""

    def __init__(self) -> None:
        super().__init__()
        self.found = ""

    def enter_fragment_spread(self, node: FragmentSpreadNode, *_: Any) -> Any:
        self.found = self.found or "fragment spreads (...Name)"
        return self.BREAK

    def enter_variable(self, node: VariableNode, *_: Any) -> Any:
        self.found = self.found or "variables ($name)"
        return self.BREAK


def _paths_selection(paths: Sequence[str]) -> str:
    tree: dict[str, Any] = {}
    for path in paths:
        parts = path.strip().split(".")
        if not all(_NAME.match(p) for p in parts):
            raise _select_error(f"{path!r} is not a dotted path of GraphQL field names")
        node = tree
        for part in parts:
            node = node.setdefault(part, {})

    def render(node: dict[str, Any]) -> str:
        return " ".join(f"{k} {{ {render(v)} }}" if v else k for k, v in node.items())

    return render(tree)


def _select_error(why: str) -> ArgumentError:
    return ArgumentError(f"{SELECT_ARG} was refused: {why}.", errors=[{"field": SELECT_ARG, "message": why[:300]}])


def build_operation(action: Action, binding: GraphQLBinding, args: Mapping[str, Any]) -> Operation:
    """The document and variables for ``action`` called with ``args``.

    Only the arguments the agent passed are declared and sent, so omitted ones keep the
    server's defaults.

    Raises:
        ArgumentError: an unknown argument, a missing required one, or a refused ``__select``.
    """
    values = {k: v for k, v in args.items() if k != SELECT_ARG}
    unknown = sorted(set(values) - set(binding.variable_types))
    if unknown:
        accepted = ", ".join(sorted(binding.variable_types)) or "no arguments"
        raise ArgumentError(
            f"{action.qualified_name} has no argument {', '.join(map(repr, unknown))}; it accepts {accepted}"
            + (f" and {SELECT_ARG}" if binding.selection else ""),
            errors=[{"field": n, "message": "unknown argument"} for n in unknown],
        )
    missing = [n for n in action.input_schema.get("required") or [] if values.get(n) is None]
    if missing:
        raise ArgumentError(
            f"{action.qualified_name} needs {', '.join(map(repr, missing))}",
            errors=[{"field": n, "message": "required"} for n in missing],
        )
    custom = SELECT_ARG in args
    if custom and not binding.selection:
        raise _select_error(f"{binding.field} returns a scalar or enum, which has no fields to select")
    selection = selection_from_select(args[SELECT_ARG]) if custom else binding.selection
    names = [binding.field, *values]
    if not all(_NAME.match(n) for n in names):  # the catalog is ours, but the text must stay syntax-safe
        raise ArgumentError(f"{action.qualified_name} has a malformed binding; re-sync the connector")
    declared = ", ".join(f"${n}: {binding.variable_types[n]}" for n in values)
    passed = ", ".join(f"{n}: ${n}" for n in values)
    query = (
        f"{binding.operation} {binding.field}{f'({declared})' if declared else ''} "
        f"{{ {binding.field}{f'({passed})' if passed else ''}{f' {{ {selection} }}' if selection else ''} }}"
    )
    try:
        document = parse(query, no_location=True)
    except GraphQLError:
        raise ArgumentError(
            f"{action.qualified_name}: the operation could not be built; re-sync the connector"
        ) from None
    if len(document.definitions) != 1:  # pragma: no cover - guaranteed by the construction above
        raise ArgumentError(f"{action.qualified_name}: the operation could not be built")
    return Operation(
        query=query,
        variables=dict(values),
        operation_name=binding.field,
        document=document,
        custom_selection=custom,
    )


def check_against_schema(action: Action, operation: Operation, schema: GraphQLSchema) -> None:
    """Raises ``ArgumentError`` naming each problem when the document does not fit the schema."""
    errors = validate(schema, operation.document, max_errors=10)
    if errors:
        messages = [e.message for e in errors]
        raise ArgumentError(
            f"{SELECT_ARG} does not fit {action.qualified_name}'s schema: " + "; ".join(messages)[:1000],
            errors=[{"field": SELECT_ARG, "message": m[:300]} for m in messages],
        )


class GraphQLExecutor:
    """graphql bindings: the operation is built and checked in ``prepare``, sent in ``run``."""

    def __init__(
        self,
        client: httpx2.AsyncClient,
        schemas: GraphQLSchemas,
        *,
        client_for: Callable[[ConnectorConfig, httpx2.Auth], httpx2.AsyncClient] | None = None,
    ) -> None:
        """``client_for`` picks the client per connector (an ``mtls`` one holds its certificate);
        by default every call goes through ``client``."""
        self._client = client
        self._schemas = schemas
        self._client_for = client_for

    def prepare(
        self, action: Action, args: Mapping[str, Any], connector: ConnectorConfig, base_url: str | None
    ) -> Prepared:
        binding = action.binding
        if not isinstance(binding, GraphQLBinding):  # pragma: no cover - registered for graphql only
            raise TypeError(f"GraphQLExecutor cannot run {binding.kind} actions")
        if not base_url:
            raise UpstreamError(
                "connector_error",
                f"Connector {connector.slug!r} has no base_url; the operator must set it to the GraphQL endpoint.",
            )
        operation = build_operation(action, binding, args)
        checked = False
        if operation.custom_selection:
            schema = self._schemas.get(connector.slug)
            if schema is not None:
                check_against_schema(action, operation, schema)
                checked = True
        headers = httpx2.Headers({"User-Agent": USER_AGENT, "Accept": ACCEPT})
        for name, value in connector.headers.items():
            headers[name] = value
        headers["Content-Type"] = "application/json"
        content = json.dumps(operation.body(), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        request = httpx2.Request("POST", base_url, headers=headers, content=content.encode("utf-8"))
        with_own_body_type(request, "application/json")
        return Prepared(action=action, connector=connector, request=request, payload=(operation, checked))

    async def run(
        self, prepared: Prepared, *, auth: httpx2.Auth, max_bytes: int, redirects: RedirectJudge | None = None
    ) -> Outcome:
        assert prepared.request is not None
        operation, checked = prepared.payload
        if operation.custom_selection and not checked:
            # The schema file is parsed on first need (see GraphQLSchemas), off the event loop.
            schema = await self._schemas.load(prepared.connector.slug)
            if schema is not None:
                check_against_schema(prepared.action, operation, schema)
        client = self._client_for(prepared.connector, auth) if self._client_for else self._client
        outcome = await send(
            client,
            prepared.request,
            auth=auth,
            timeout=prepared.connector.timeout,
            max_bytes=max_bytes,
            trace_context=prepared.connector.trace_context,
            redirects=redirects,
        )
        data, status = outcome.data, outcome.http_status
        assert status is not None, "send() answers over HTTP, with a status"
        if status < 400 and isinstance(data, dict) and data.get("errors") and _no_result(data, operation):
            messages = _messages(data["errors"])
            quoted, whole = said(messages), said(messages, max_chars=MAX_ERROR_CHARS)
            slug, name = prepared.connector.slug, operation.operation_name
            text = quoted.for_agent().rstrip(".")
            codes = _codes(data["errors"])
            # Shopify says how long its query cost takes to restore: the call's retry_after, and its hint.
            wait = _throttle_wait(data) if codes & _RATE_LIMITED_CODES else None
            if codes & _UNAUTHENTICATED_CODES or codes & _RATE_LIMITED_CODES:
                limited = bool(codes & _RATE_LIMITED_CODES)
                # Said in GraphQL's words over HTTP 200: the same answers as an HTTP 401 or 429 would get.
                raise whole.attach(
                    UpstreamError(
                        "rate_limited" if limited else "auth_failed",
                        f"{slug} refused the GraphQL {name} operation: {text}. "
                        + (
                            "It is limiting how often it is called: wait before calling again (retry_after, when it "
                            "says how long); the arguments are not the problem."
                            if limited
                            else "It does not accept the stored credential: ask the user to reconnect "
                            "(connect); the arguments are not the problem."
                        ),
                        upstream_status=outcome.http_status,
                        upstream_message=whole.for_agent(),
                        retry_after=wait,
                    )
                )
            if codes & _FORBIDDEN_CODES:
                raise whole.attach(
                    UpstreamError(
                        "upstream_error",
                        f"{slug} refused the GraphQL {name} operation. Retrying will not help; the credential lacks "
                        f"the permission. The upstream said: {text}.",
                        upstream_status=outcome.http_status,
                        upstream_message=whole.for_agent(),
                        forbidden=True,
                    )
                )
            if codes & _NOT_FOUND_CODES:
                message = (
                    f"{slug} ran the GraphQL {name} operation and found nothing: {text}. What the arguments name "
                    "was not found (it does not exist, or the credential may not see it); check the identifiers "
                    "rather than repeating the call."
                )
            elif not _executed(data):
                message = (
                    f"{slug} rejected the GraphQL {name} operation: {text}. Check the arguments against describe "
                    f"(and {SELECT_ARG}, if you gave one), then call again."
                )
            else:
                message = f"{slug} ran the GraphQL {name} operation and it failed: {text}. " + (
                    "The mutation may have taken effect, so check before calling again rather than repeating it. "
                    if _binding_is_mutation(prepared)
                    else ""
                )
                message += (
                    "The failure is on the server's side, not in the arguments: try again later, and tell the "
                    "operator if it persists."
                    if _server_side(data["errors"])
                    else "Its message says what went wrong."
                )
            raise whole.attach(
                UpstreamError(
                    "upstream_error",
                    message,
                    upstream_status=outcome.http_status,
                    upstream_message=whole.for_agent(),
                    drifted=not _executed(data) and _drifted(data["errors"]),
                )
            )
        if status < 400 and isinstance(data, str) and _ERRORS_FIRST.match(data):
            # An answer of errors too long (cut by the cap) or too deeply nested to parse: still errors,
            # screened as any upstream text is, not an ``ok`` answer the agent reads as a result.
            quoted, whole = said(data, max_chars=_MAX_ERROR_TEXT), said(data, max_chars=MAX_ERROR_CHARS)
            raise whole.attach(
                UpstreamError(
                    "upstream_error",
                    f"{prepared.connector.slug} answered the GraphQL {operation.operation_name} operation with "
                    f"errors too long or too deeply nested to read whole; they begin: {quoted.for_agent()}",
                    upstream_status=outcome.http_status,
                    upstream_message=whole.for_agent(),
                )
            )
        if status < 400 and not _graphql_answer(outcome):
            raise _not_graphql(prepared, operation, outcome)
        return outcome


def _graphql_answer(outcome: Outcome) -> bool:
    """Whether a 2xx/3xx answer is a GraphQL response: an object with ``data`` (null included), or with
    errors (handled above); or the start of one, cut by the size cap."""
    data = outcome.data
    if isinstance(data, dict):
        return ("data" in data and isinstance(data["data"], dict | None)) or bool(data.get("errors"))
    return isinstance(data, str) and outcome.truncated and data.lstrip().startswith("{")


def _not_graphql(prepared: Prepared, operation: Operation, outcome: Outcome) -> UpstreamError:
    """A 2xx that is no GraphQL response: a login page from a proxy in front, an empty body, an object
    with neither ``data`` nor errors. Passed on as ``ok``, it reads as the operation's result."""
    mutation = _binding_is_mutation(prepared)
    if outcome.data is None:
        what = "an empty body"
    elif isinstance(outcome.data, str) and looks_like_html(outcome.data, outcome.content_type):
        what = "an HTML page"
    else:
        what = "neither data nor errors"
    whole = said(summarize_error(outcome), max_chars=MAX_ERROR_CHARS)
    return whole.attach(
        UpstreamError(
            "upstream_error",
            f"{prepared.connector.slug} did not answer the GraphQL {operation.operation_name} operation with a "
            f"GraphQL response (HTTP {outcome.http_status} with {what}); "
            + ("the mutation may or may not have run, so check before calling again; " if mutation else "")
            + "the operator should check that the connector's URL is its GraphQL endpoint and that the credential "
            "gets past any sign-in page in front of it",
            upstream_status=outcome.http_status,
            upstream_message=whole.for_agent() or None,
        )
    )


_ERRORS_FIRST = re.compile(r'\s*\{\s*(?:"data"\s*:\s*null\s*,\s*)?"errors"\s*:')
"""A GraphQL answer that opens with its errors (after a null ``data``, as graphql-core writes it)."""


_NOT_EXECUTED_CODES = frozenset(
    {"GRAPHQL_PARSE_FAILED", "GRAPHQL_VALIDATION_FAILED", "BAD_USER_INPUT", "INVALID_VARIABLE"}
)
"""``extensions.code``s (Apollo's, widely copied; Shopify's ``INVALID_VARIABLE``) of a request refused before
any resolver ran: the arguments are at fault."""
_NOT_FOUND_CODES = frozenset({"NOT_FOUND"})
"""GitHub's ``type``, Apollo-style ``extensions.code``: what the arguments name does not exist."""
_SERVER_SIDE_CODES = frozenset({"INTERNAL_SERVER_ERROR", "INTERNAL", "INTERNAL_ERROR", "SERVICE_UNAVAILABLE"})
_UNAUTHENTICATED_CODES = frozenset({"UNAUTHENTICATED", "UNAUTHORIZED", "INVALID_TOKEN"})
_RATE_LIMITED_CODES = frozenset({"RATE_LIMITED", "RATE_LIMIT_EXCEEDED", "THROTTLED", "TOO_MANY_REQUESTS"})
_FORBIDDEN_CODES = frozenset({"FORBIDDEN", "PERMISSION_DENIED", "ACCESS_DENIED"})
"""A credential that may not do this (Apollo's ``FORBIDDEN``): what an HTTP 403 says."""


def _throttle_wait(answer: dict[str, Any]) -> float | None:
    """Seconds until the query's cost is available again, from Shopify's ``extensions.cost``: what the query
    asks beyond what is available, at the rate the bucket refills (``throttleStatus.restoreRate`` a second),
    in whole seconds, at least one; None when the answer does not say."""
    cost = answer.get("extensions")
    cost = cost.get("cost") if isinstance(cost, dict) else None
    if not isinstance(cost, dict):
        return None
    status = cost.get("throttleStatus")
    numbers = (
        cost.get("requestedQueryCost"),
        *(status.get(k) if isinstance(status, dict) else None for k in ("currentlyAvailable", "restoreRate")),
    )
    if not all(isinstance(n, int | float) and not isinstance(n, bool) and math.isfinite(n) for n in numbers):
        return None
    requested, available, rate = cast(tuple[float, float, float], numbers)
    if rate <= 0:
        return None
    return float(min(max(1, math.ceil((requested - available) / rate)), MAX_RETRY_AFTER))


def _codes(errors: Any) -> set[str]:
    """Each error's ``extensions.code``, and GitHub's ``type`` (``NOT_FOUND``, ``RATE_LIMITED``, ``FORBIDDEN``)."""
    items = [item for item in (errors if isinstance(errors, list) else [errors]) if isinstance(item, dict)]
    coded = [extensions.get("code") for item in items if isinstance(extensions := item.get("extensions"), dict)]
    return {
        str(code).upper() for code in [*coded, *(item.get("type") for item in items)] if isinstance(code, str) and code
    }


def _executed(answer: dict[str, Any]) -> bool:
    """Whether execution began: a request refused before it (a parse or validation error) has no ``data``
    at all, or a null ``data`` and errors without a ``path``; an error with a ``path`` comes from a
    resolver that ran, and an object ``data`` is execution's own result."""
    errors = answer.get("errors")
    if "data" not in answer or _codes(errors) & _NOT_EXECUTED_CODES:
        return False
    items = errors if isinstance(errors, list) else [errors]
    if any(isinstance(item, dict) and isinstance(item.get("path"), list) and item["path"] for item in items):
        return True
    return isinstance(answer["data"], dict)


_DRIFT = re.compile(
    r"Cannot query field|Unknown argument|Unknown type|is required, but it was not provided|"
    r"used in position expecting|is not defined by type|Unknown enum value"
)
"""Validation messages (graphql-js's and its ports') of a document naming what the schema lacks or
types otherwise: the gateway builds the document from its catalog, so the schema changed since."""


def _drifted(errors: Any) -> bool:
    items = errors if isinstance(errors, list) else [errors]
    return any(isinstance(item, dict) and _DRIFT.search(str(item.get("message") or "")) for item in items)


def _server_side(errors: Any) -> bool:
    return bool(_codes(errors) & _SERVER_SIDE_CODES)


def _binding_is_mutation(prepared: Prepared) -> bool:
    binding = prepared.action.binding
    return isinstance(binding, GraphQLBinding) and binding.operation == "mutation"


def _no_result(answer: dict[str, Any], operation: Operation) -> bool:
    """Errors and nothing else: ``data`` is null, or the one root field asked for is (it failed)."""
    data = answer.get("data")
    return data is None or (isinstance(data, dict) and data.get(operation.operation_name) is None)


def _messages(errors: Any) -> str:
    """The errors' messages, each with its path, joined and capped."""
    items = errors if isinstance(errors, list) else [errors]
    out: list[str] = []
    for item in items[:10]:
        if isinstance(item, dict):
            text = str(item.get("message") or json.dumps(item, separators=(",", ":")))
            extensions = item.get("extensions")
            where, problems = graphql_extensions(extensions) if isinstance(extensions, dict) else ("", [])
            if where:
                text = f"{where}: {text}"  # the argument at fault, as error_dialects names a field
            path = item.get("path")
            if isinstance(path, list) and path:
                text += f" (at {'.'.join(str(p) for p in path)})"
            out += [text, *problems]
        else:
            out.append(str(item))
    joined = "; ".join(out) or "no message"
    return joined if len(joined) <= _MAX_ERROR_TEXT else joined[: _MAX_ERROR_TEXT - 1] + "…"
