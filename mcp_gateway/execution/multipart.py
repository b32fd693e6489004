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
What lands in a part's headers (its name, a file's ``filename`` and ``content_type``) holds no
control character, and an agent's ``content_type`` is printable ASCII: a part header has no escape for
a line break, so one is refused naming the field rather than left to the encoder.
Fields no description lays out (a Postman collection's, a manifest's: no ``style``) are known by
their shape: ``{content: "…"}`` is a file part, anything else one text part.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import httpx2

from ..vocabulary.errors import ArgumentError
from ..vocabulary.model import Action, ParamSpec
from .param_styles import unseparated, wire_text

__all__ = ["multipart_body"]

_SEPARATORS = {"spaceDelimited": " ", "pipeDelimited": "|", "tabDelimited": "\t"}
_Part = tuple[str, tuple[str | None, bytes, str | None]]
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MEDIA_TYPE = re.compile(r"[\x21-\x7e][\x20-\x7e]*")


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
    for name, _ in parts:
        _part_header(name, name, "field name")
    # httpx2 encodes (and picks the boundary); the bytes are kept so redirects can replay the body.
    encoded = httpx2.Request("POST", "http://multipart.invalid/", files=parts)
    return encoded.read(), encoded.headers["content-type"]


def _add_parts(key: str, item: Any, spec: ParamSpec | None, parts: list[_Part]) -> None:
    if spec is None or (spec.style is None and not spec.file):
        # Laid out by no description (a collection's or a manifest's fields): known by their shape.
        if _file_shaped(item):
            parts.append(_file_part(key, item, None, key))
        else:
            parts.append((key, (None, wire_text(item).encode("utf-8"), None)))  # no filename: a text part
        return
    declared = spec.content_type
    if spec.file:
        files = list(item) if isinstance(item, list | tuple) else [item]
        for index, one in enumerate(files):
            if one is not None:
                parts.append(_file_part(key, one, declared, f"{key}[{index}]" if len(files) > 1 else key))
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


def _file_part(key: str, item: Any, declared: str | None, field: str) -> _Part:
    if _file_shaped(item):
        filename = _part_header(str(item.get("filename") or key), f"{field}.filename", "file name")
        given = item.get("content_type")
        if given and not _MEDIA_TYPE.fullmatch(str(given)):
            raise ArgumentError(
                f"argument {field!r} has a content_type that is no media type: give one such as text/plain or "
                "application/pdf, in printable ASCII without line breaks",
                errors=[{"field": f"{field}.content_type", "message": "not a media type"}],
            )
        content_type = str(given or declared or "application/octet-stream")
        return key, (filename, str(item["content"]).encode("utf-8"), content_type)
    return key, (key, wire_text(item).encode("utf-8"), declared or "application/octet-stream")


def _part_header(text: str, field: str, what: str) -> str:
    """``text``, written into a part's ``Content-Disposition``: refused when it holds a control character."""
    if _CONTROL.search(text):
        raise ArgumentError(
            f"argument {field!r} has a {what} holding a line break or another control character, which a "
            f"form-data part's header cannot carry; give the {what} without it",
            errors=[{"field": field, "message": "contains a control character"}],
        )
    return text
