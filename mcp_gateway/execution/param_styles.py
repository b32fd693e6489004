"""One argument's array or object value written as its parameter's ``style`` says.

OpenAPI 3's styles (https://spec.openapis.org/oas/v3.1.0#style-values) and Swagger 2's
``collectionFormat``, whose separators are the same (``ssv`` is ``spaceDelimited``, ``pipes``
``pipeDelimited``, ``tsv`` ``tabDelimited``, ``multi`` an exploded ``form``). For ``filter`` =
``{"a": 1, "b": 2}`` and ``ids`` = ``[3, 4]``:

============  ========================  =============================  ========================
style         explode                   query                          path (or header: no ``.``/``;``)
============  ========================  =============================  ========================
form          true                      ``a=1&b=2``, ``ids=3&ids=4``
form          false                     ``filter=a,1,b,2``, ``ids=3,4``
pipeDelimited false                     ``ids=3|4``
deepObject    true                      ``filter[a]=1&filter[b]=2``
simple        false / true                                             ``a,1,b,2`` / ``a=1,b=2``
label         false / true                                             ``.3,4`` / ``.3.4``
matrix        false / true                                             ``;ids=3,4`` / ``;ids=3;ids=4``
============  ========================  =============================  ========================

Values are escaped one by one and the separators written literally, so a ``,`` or ``|`` inside a
value cannot pass for one (``q|r`` in a pipe-delimited array is ``q%7Cr``). What the styles leave
undefined has one reading here: a deepObject's nested objects and arrays are bracketed further
(``filter[b][c]=1``, ``filter[tags][0]=x``, as form bodies are), and a deepObject array by index
(Stripe's ``expand[0]=customer``); any other nested value is compact
JSON text. The normalizer warns at load about a description that asks for such a thing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

from ..vocabulary.errors import ArgumentError
from ..vocabulary.model import ParamSpec

__all__ = [
    "cookie_text",
    "escaped",
    "free_keys",
    "header_text",
    "nested_leaves",
    "path_text",
    "query_parts",
    "unseparated",
    "wire_text",
]

_URL_SEPARATORS = {"spaceDelimited": "%20", "pipeDelimited": "|", "tabDelimited": "%09"}
_TEXT_SEPARATORS = {"spaceDelimited": " ", "pipeDelimited": "|", "tabDelimited": "\t"}


def wire_text(value: Any) -> str:
    """One scalar as wire text: JSON spellings for booleans, compact JSON for objects."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def escaped(text: str) -> str:
    """``quote(text, safe="")``. Letters and digits (most identifiers) are returned as they are
    without the call, which encodes and scans in Python (every call escapes its path values)."""
    return text if text.isascii() and text.isalnum() else quote(text, safe="")


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _pairs(value: Mapping[Any, Any]) -> list[tuple[str, Any]]:
    return [(str(key), item) for key, item in value.items() if item is not None]


def query_parts(spec: ParamSpec, value: Any) -> list[str]:
    """``name=value`` pieces of the query for one argument (none for null or an empty array), escaped."""
    key = escaped(spec.on_wire)
    style = spec.style
    if style == "json":
        return [f"{key}={escaped(_json_text(value))}"]
    if style == "deepObject" and isinstance(value, Mapping | list | tuple):
        return [
            key + "".join(f"[{escaped(sub)}]" for sub in keys) + f"={escaped(text)}"
            for keys, text in nested_leaves(value)
        ]
    if isinstance(value, list | tuple):
        values = [escaped(wire_text(v)) for v in value if v is not None]
        if spec.style_explode:
            return [f"{key}={v}" for v in values]
        # Literal separators: servers split "a=1,2" on the separator, not on "%2C".
        return [f"{key}={_URL_SEPARATORS.get(style or '', ',').join(values)}"] if values else []
    if isinstance(value, Mapping) and style is not None:
        pairs = [(escaped(k), escaped(wire_text(v))) for k, v in _pairs(value)]
        if spec.style_explode:
            return [f"{k}={v}" for k, v in pairs]
        separator = _URL_SEPARATORS.get(style, ",")
        return [f"{key}={separator.join(part for pair in pairs for part in pair)}"] if pairs else []
    return [f"{key}={escaped(wire_text(value))}"]


def free_keys(spec: ParamSpec, value: Any) -> list[str]:
    """The query names ``query_parts`` writes from the value itself rather than from the parameter's
    name: an exploded object's keys (``flt={"a": 1}`` is ``a=1``). The caller checks that none of them
    is another parameter's name or one read as the method."""
    if spec.style in (None, "json", "deepObject") or not spec.style_explode or not isinstance(value, Mapping):
        return []
    return [key for key, _ in _pairs(value)]


def nested_leaves(value: Any, keys: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """Each scalar inside ``value`` with the object keys and list indexes leading to it, and its wire
    text; null is left out. The nesting both ``deepObject`` and bracketed forms (``a[b][0]=x``) spell."""
    if value is None:
        return
    if isinstance(value, Mapping):
        for sub, item in value.items():
            yield from nested_leaves(item, (*keys, str(sub)))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from nested_leaves(item, (*keys, str(index)))
    else:
        yield keys, wire_text(value)


def path_text(spec: ParamSpec, value: Any, element: Callable[[Any], str]) -> str:
    """One path placeholder's text; ``element`` escapes (and checks) one scalar."""
    style = spec.style or "simple"
    explode = spec.style_explode
    if style == "json":
        return element(_json_text(value))
    if isinstance(value, Mapping):
        pairs = [(element(k), element(v)) for k, v in _pairs(value)]
        if style == "matrix" and explode:
            return "".join(f";{k}={v}" for k, v in pairs)
        joined = [f"{k}={v}" for k, v in pairs] if explode else [part for pair in pairs for part in pair]
        values = joined
    elif isinstance(value, list | tuple):
        values = [element(v) for v in value if v is not None]
        if style == "matrix" and explode:
            name = escaped(spec.on_wire)
            return "".join(f";{name}={v}" for v in values)
    else:
        values = [element(value)]
    if style == "label":
        return "." + ("." if explode else ",").join(values)
    if style == "matrix":
        return f";{escaped(spec.on_wire)}={','.join(values)}"
    return _URL_SEPARATORS.get(style, ",").join(values)


def header_text(spec: ParamSpec, value: Any) -> str:
    """A header argument's value: ``simple`` (commas, ``k=v`` pairs when exploded), else as before.

    A header has no escape, so an element holding its own separator would be read as more elements
    (``["a", "b,c"]`` as three): refused.

    Raises:
        ArgumentError: an element, key or value holds a separator, naming the argument and the character.
    """
    style = spec.style
    if style == "json":
        return _json_text(value)
    if isinstance(value, list | tuple):
        separator = ", " if style is None else _TEXT_SEPARATORS.get(style, ",")
        texts = [wire_text(v) for v in value if v is not None or style is None]
        return separator.join(unseparated(spec.name, texts, separator.strip() or separator, "header"))
    if isinstance(value, Mapping) and style is not None:
        pairs = [(k, wire_text(v)) for k, v in _pairs(value)]
        if spec.style_explode:
            parts = unseparated(spec.name, [part for pair in pairs for part in pair], ",=", "header")
            return ",".join(f"{k}={v}" for k, v in zip(parts[::2], parts[1::2], strict=True))
        return ",".join(unseparated(spec.name, [part for pair in pairs for part in pair], ",", "header"))
    return wire_text(value)


_SHOWN_SEPARATORS = {",": "','", "=": "'='", "|": "'|'", " ": "a space", "\t": "a tab"}


def unseparated(name: str, texts: list[str], separators: str, where: str) -> list[str]:
    """``texts``, the elements of one argument joined by one of ``separators`` in a place with no
    escape (a header, a multipart part). Raises ``ArgumentError`` naming ``name`` and the character
    when an element holds one: it would be read as more elements than were given."""
    for text in texts:
        for char in separators:
            if char in text:
                shown = _SHOWN_SEPARATORS.get(char, repr(char))
                raise ArgumentError(
                    f"argument {name!r} has an element holding {shown}, the separator its {where} joins elements "
                    f"with; a {where} has no escape for it, so the upstream would read more elements than were "
                    "given. Send each element without it",
                    errors=[{"field": name, "message": f"an element holds the separator {shown}"}],
                )
    return texts


def cookie_text(spec: ParamSpec, value: Any) -> str:
    """A cookie argument's value before cookie escaping: ``form`` without explode (``a,b``, ``k,v``).
    The escaping takes the separators with it, so an element holding a ``,`` is refused as in a header."""
    if spec.style == "json":
        return _json_text(value)
    if isinstance(value, list | tuple):
        return ",".join(unseparated(spec.name, [wire_text(v) for v in value], ",", "cookie"))
    if isinstance(value, Mapping) and spec.style is not None:
        parts = [part for k, v in _pairs(value) for part in (k, wire_text(v))]
        return ",".join(unseparated(spec.name, parts, ",", "cookie"))
    return wire_text(value)
