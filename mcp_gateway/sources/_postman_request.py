"""One Postman request's URL and arguments: what ``postman.py`` reads each request into.

``Url`` reads the structured or raw URL (segments, query entries, ``:name`` variables and the
origin the request names); ``path_template`` turns the segments into a ``{argument}`` template;
``Arguments`` builds the input schema and the matching ``ParamSpec``s together, so every
property has exactly one place on the wire. The rules are in ``postman.py``'s docstring.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from ..vocabulary.model import ParamLocation, ParamSpec, Risk
from ._naming import snake_case
from ._postman_values import VARIABLE, PostmanVars, credential_name, is_placeholder
from .openapi import arg_name

__all__ = ["SCALAR", "Arguments", "Url", "graphql_kind", "path_template", "text_of"]

SCALAR: dict[str, Any] = {"type": ["string", "number", "boolean"]}
"""Any scalar: Postman values are text, but agents reasonably pass 5 or true for them."""
_MAX_DESCRIPTION = 2000


def text_of(raw: Any) -> str:
    """A Postman description (a string, or ``{content, type}``), trimmed and capped."""
    text = raw.get("content") if isinstance(raw, dict) else raw
    if not isinstance(text, str):
        return ""
    text = text.strip()
    return text if len(text) <= _MAX_DESCRIPTION else text[: _MAX_DESCRIPTION - 1].rstrip() + "…"


# -- URL --------------------------------------------------------------------------------------

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_DIGITS = re.compile(r"^[0-9]+$")
_BRACED = re.compile(r"^(?:\{|%7[Bb])([A-Za-z_][A-Za-z0-9_.-]*)(?:\}|%7[Dd])$")
"""A whole segment ``{id}`` (or URL-encoded, ``%7Bid%7D``): an OpenAPI-style template kept by a
collection exported from a spec (Wise's ``/v1/profiles/{id}/directors``)."""


@dataclass(frozen=True)
class Url:
    segments: list[str]
    query: list[dict[str, Any]]
    variables: dict[str, dict[str, Any]]
    """``:name`` path variables' entries (value, description) by name."""
    origin: str | None

    @property
    def display_path(self) -> str:
        return "/" + "/".join(self.segments)

    @classmethod
    def read(cls, raw: Any, variables: PostmanVars) -> Url:
        if isinstance(raw, str):
            raw = {"raw": raw}
        if not isinstance(raw, dict):
            return cls([], [], {}, None)
        path_vars = {
            str(v["key"]): v for v in raw.get("variable") or [] if isinstance(v, dict) and isinstance(v.get("key"), str)
        }
        query = [q for q in raw.get("query") or [] if isinstance(q, dict)]
        if "host" in raw or "path" in raw:
            segments = [_segment_text(s) for s in _as_list(raw.get("path"))]
            origin = _origin(raw.get("protocol"), _as_list(raw.get("host")), raw.get("port"), variables)
        else:
            text = str(raw.get("raw") or "").split("#", 1)[0]
            text, _, query_text = text.partition("?")
            if not query:
                query = [_query_entry(part) for part in query_text.split("&") if part]
            scheme = _SCHEME.match(text)
            rest = text[scheme.end() :] if scheme else text
            host, _, path_text = rest.partition("/")
            segments = path_text.split("/")
            origin = _origin(scheme.group(0)[:-3] if scheme else None, [host], None, variables)
        return cls([s for s in segments if s != ""], query, path_vars, origin)


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        return [value]
    return []


def _segment_text(segment: Any) -> str:
    if isinstance(segment, dict):  # v2.1 allows {"type": "string", "value": "..."}
        return str(segment.get("value") or "")
    return str(segment)


def _query_entry(part: str) -> dict[str, Any]:
    key, has_value, value = part.partition("=")
    return {"key": key, "value": value if has_value else None}


def _origin(protocol: Any, host: list[Any], port: Any, variables: PostmanVars) -> str | None:
    """The origin the request names, when it is knowable: a literal host, or a defined variable."""
    joined = ".".join(str(h) for h in host if h is not None)
    if not joined:
        return None
    resolved = variables.resolve(joined)
    if resolved is None or "{{" in resolved:
        return None
    if _SCHEME.match(resolved):
        return resolved.rstrip("/")
    scheme = protocol if isinstance(protocol, str) and protocol else "https"
    return f"{scheme}://{resolved}{f':{port}' if port else ''}"


def path_template(url: Url, args: Arguments) -> str:
    parts: list[str] = []
    previous = ""
    for segment in url.segments:
        if segment.startswith(":") and len(segment) > 1:
            name = segment[1:]
            entry = url.variables.get(name, {})
            parts.append("{" + args.add_path(name, entry.get("value"), about=entry) + "}")
        elif is_placeholder(segment):
            parts.append("{" + args.add_path(segment.strip("<>[] "), None, placeholder=True) + "}")
        elif (braced := _BRACED.match(segment)) is not None:
            parts.append("{" + args.add_path(braced.group(1), None, placeholder=True) + "}")
        elif "{{" in segment:
            parts.append(args.path_template(segment))
        elif _DIGITS.match(segment) and previous:
            parts.append("{" + args.add_path(f"{_singular(previous)}_id", segment, example_id=True) + "}")
        else:
            parts.append(literal_path(segment))
        if not _DIGITS.match(segment) and "{" not in segment and ":" not in segment[:1] and not _BRACED.match(segment):
            previous = snake_case(segment)
    return "/" + "/".join(parts)


def _singular(word: str) -> str:
    """English plural to singular, for the common REST nouns: entries, statuses, boxes, folders."""
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("uses", "sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


# -- arguments --------------------------------------------------------------------------------


class Arguments:
    """One request's input schema and the matching ParamSpecs, built together."""

    def __init__(self, variables: PostmanVars) -> None:
        self.variables = variables
        self.properties: dict[str, dict[str, Any]] = {}
        self.required: list[str] = []
        self.specs: list[ParamSpec] = []
        self.encoding: Literal["json", "form", "multipart", "raw"] = "json"
        self.body_param: str | None = None
        self.defaults = False
        self.graphql_kind: Risk | None = None

    @property
    def body_kind(self) -> Literal["json", "form", "multipart", "raw", "none"]:
        return self.encoding if any(s.location == "body" for s in self.specs) else "none"

    def input_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": self.properties, "required": self.required}

    def add_path(
        self, name: str, value: Any, *, about: Any = None, placeholder: bool = False, example_id: bool = False
    ) -> str:
        schema = dict(SCALAR)
        default = None
        if example_id:
            default = value
            schema["description"] = f"An id; the collection uses {value}."
        elif not placeholder and isinstance(value, str) and value:
            default = self.variables.resolve(value)
        if isinstance(about, dict) and text_of(about.get("description")):
            schema["description"] = text_of(about.get("description"))
        return self._add(name, None, "path", schema, required=default is None, default=default)

    def path_template(self, segment: str) -> str:
        """A segment with ``{{variables}}``: each one an argument (a defined one with its value as default)."""

        out: list[str] = []
        pos = 0
        for match in VARIABLE.finditer(segment):
            var = match.group(1).strip()
            default = None if credential_name(var) else self.variables.value(var)
            schema = {**SCALAR, "description": f"Postman variable {{{{{var}}}}}."}
            name = self._add(var.lstrip("$"), None, "path", schema, required=default is None, default=default)
            out.append(literal_path(segment[pos : match.start()]) + "{" + name + "}")
            pos = match.end()
        return "".join(out) + literal_path(segment[pos:])

    def add_text(self, key: str, location: ParamLocation, value: Any, *, disabled: bool, about: Any) -> str:
        schema = dict(SCALAR)
        text = None if value is None else str(value)
        description = text_of(about.get("description")) if isinstance(about, dict) else ""
        required, default = False, None
        if disabled or not text:
            pass
        elif is_placeholder(text):
            description = description or f"The collection has the placeholder {text}."
        else:
            resolved = self.variables.resolve(text)
            if resolved is not None:
                default = resolved
            else:
                required = True
                description = description or f"The collection sends {text}."
        if description:
            schema["description"] = description
        return self._add(key, key, location, schema, required=required, default=default)

    def add_body(self, key: str, schema: dict[str, Any], *, required: bool, default: Any) -> str:
        return self._add(key, key, "body", dict(schema), required=required, default=default)

    def add_whole_body(
        self, schema: dict[str, Any], *, required: bool, default: Any, encoding: Literal["json", "raw"]
    ) -> None:
        self.encoding = encoding
        self.body_param = self._add("body", None, "body", dict(schema), required=required, default=default)

    def _add(
        self,
        key: str,
        wire: str | None,
        location: ParamLocation,
        schema: dict[str, Any],
        *,
        required: bool,
        default: Any,
    ) -> str:
        base = arg_name(key)
        name = base if base not in self.properties else f"{location}_{base}"
        n = 1
        while name in self.properties:
            n += 1
            name = f"{location}_{base}_{n}"
        if default is not None:
            schema["default"] = default
            self.defaults = True
            if location != "path" and "type" in schema:
                # The default is sent unless the agent passes null, which leaves the argument out.
                types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
                schema["type"] = [*types, "null"]
        self.properties[name] = schema
        if required:
            self.required.append(name)
        self.specs.append(
            ParamSpec(name=name, location=location, wire_name=wire if wire is not None and wire != name else None)
        )
        return name


def graphql_kind(document: str) -> Risk | None:
    """``read`` for a GraphQL document whose every operation is a query, ``write`` when one is a
    mutation or subscription, None when it does not parse (the method decides then)."""
    import graphql  # here, not at module level: only a collection with a GraphQL request pays for it

    try:
        parsed = graphql.parse(document, no_location=True)
    except graphql.GraphQLError:
        return None
    kinds = {d.operation for d in parsed.definitions if isinstance(d, graphql.OperationDefinitionNode)}
    if not kinds:
        return None
    return "read" if kinds == {graphql.OperationType.QUERY} else "write"


def literal_path(text: str) -> str:
    """Literal path text, with braces escaped so they cannot read as ``{argument}`` placeholders."""
    return text.replace("{", "%7B").replace("}", "%7D")
