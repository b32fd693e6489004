"""A ``multipart/form-data`` body: one part per field, as the action's description lays them out.

- a file field (``ParamSpec.file``) is a part with a filename: its value is ``{content, filename?,
  content_type?}`` or the text content alone (named after the field, ``application/octet-stream``);
- an object or array field whose ``encoding`` says ``style: deepObject`` is one text part per leaf,
  named ``name[key]`` and ``name[0]`` (Stripe's uploads);
- an object field, or one the description sends as JSON (``style: json``), is one
  ``application/json`` part;
- an array field is one part per element, under the same name (one part joined by its separator
  when the description says so: Swagger 2's ``collectionFormat`` other than ``multi``);
- anything else is a text part (``true``/``false`` for booleans).

A part's own ``Content-Type`` from the description (``ParamSpec.content_type``) is written on it.
Fields no description lays out (a Postman collection's, a manifest's: no ``style``) are known by
their shape: ``{content: "…"}`` is a file part, anything else one text part.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx2

from ..vocabulary.errors import ArgumentError
from ..vocabulary.model import Action, ParamSpec
from .param_styles import unseparated, wire_text

__all__ = ["multipart_body"]

_SEPARATORS = {"spaceDelimited": " ", "pipeDelimited": "|", "tabDelimited": "\t"}
_Part = tuple[str, tuple[str | None, bytes, str | None]]


def multipart_body(action: Action, specs: Mapping[str, ParamSpec], value: Any) -> tuple[bytes, str]:
    """The encoded body and its ``Content-Type`` (with the boundary httpx2 picked).

    Raises:
        ArgumentError: the body is not an object of fields.
    """
    if not isinstance(value, Mapping):
        raise ArgumentError(f"{action.qualified_name} sends form-data; its body must be an object of fields")
    parts: list[_Part] = []
    for key, item in value.items():
        if item is not None:
            _add_parts(str(key), item, specs.get(str(key)), parts)
    # httpx2 encodes (and picks the boundary); the bytes are kept so redirects can replay the body.
    encoded = httpx2.Request("POST", "http://multipart.invalid/", files=parts)
    return encoded.read(), encoded.headers["content-type"]


def _add_parts(key: str, item: Any, spec: ParamSpec | None, parts: list[_Part]) -> None:
    if spec is None or (spec.style is None and not spec.file):
        # Laid out by no description (a collection's or a manifest's fields): known by their shape.
        if _file_shaped(item):
            parts.append(_file_part(key, item, None))
        else:
            parts.append((key, (None, wire_text(item).encode("utf-8"), None)))  # no filename: a text part
        return
    declared = spec.content_type
    if spec.file:
        for one in item if isinstance(item, list | tuple) else (item,):
            if one is not None:
                parts.append(_file_part(key, one, declared))
    elif spec.style == "deepObject" and isinstance(item, Mapping | list | tuple):
        parts.extend((name, (None, text.encode("utf-8"), declared)) for name, text in _deep_fields(key, item))
    elif spec.style == "json" or isinstance(item, Mapping):
        text = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
        parts.append((key, (None, text.encode("utf-8"), declared or "application/json")))
    elif isinstance(item, list | tuple) and spec.style_explode:
        parts.extend((key, (None, wire_text(one).encode("utf-8"), declared)) for one in item if one is not None)
    elif isinstance(item, list | tuple):  # one part, joined as its collectionFormat says
        separator = _SEPARATORS.get(spec.style or "", ",")
        texts = unseparated(key, [wire_text(one) for one in item if one is not None], separator, "form-data part")
        text = separator.join(texts)
        parts.append((key, (None, text.encode("utf-8"), declared)))
    else:
        parts.append((key, (None, wire_text(item).encode("utf-8"), declared)))


def _deep_fields(key: str, value: Any) -> list[tuple[str, str]]:
    """``name[key][0]``-named leaves of a value, as a deepObject form field is written."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [field for sub, item in value.items() for field in _deep_fields(f"{key}[{sub}]", item)]
    if isinstance(value, list | tuple):
        return [field for index, item in enumerate(value) for field in _deep_fields(f"{key}[{index}]", item)]
    return [(key, wire_text(value))]


def _file_shaped(item: Any) -> bool:
    return isinstance(item, Mapping) and isinstance(item.get("content"), str)


def _file_part(key: str, item: Any, declared: str | None) -> _Part:
    if _file_shaped(item):
        filename = str(item.get("filename") or key)
        content_type = str(item.get("content_type") or declared or "application/octet-stream")
        return key, (filename, str(item["content"]).encode("utf-8"), content_type)
    return key, (key, wire_text(item).encode("utf-8"), declared or "application/octet-stream")
