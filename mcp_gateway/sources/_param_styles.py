"""How a description says each parameter and multipart field is written, read into a ``ParamSpec``.

OpenAPI 3's ``style``/``explode`` (defaults: ``form`` exploded in the query and cookies, ``simple``
in the path and headers), a JSON ``content`` instead of a schema, Swagger 2's ``collectionFormat``,
and a multipart field's file-ness and ``encoding``. What the request builder cannot write as asked
(a style a location does not define, an exploded cookie array, a nested value in a flat style) comes
back as a note naming the parameter, which the loader logs as a warning, with what is sent instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..vocabulary.model import ParamStyle

__all__ = ["FILE_PART", "Written", "file_field_schema", "form_field_style", "multipart_field", "param_style"]

FILE_PART: dict[str, Any] = {
    "type": "object",
    "description": "A file part: its text content, and optionally a filename and content type.",
    "properties": {
        "content": {"type": "string"},
        "filename": {"type": "string"},
        "content_type": {"type": "string"},
    },
    "required": ["content"],
    "additionalProperties": False,
}

_DEFAULT_STYLE: dict[str, ParamStyle] = {"query": "form", "cookie": "form", "path": "simple", "header": "simple"}
_STYLES: dict[str, tuple[str, ...]] = {
    "query": ("form", "spaceDelimited", "pipeDelimited", "deepObject"),
    "path": ("simple", "label", "matrix"),
    "header": ("simple",),
    "cookie": ("form",),
}
_COLLECTION_FORMATS: dict[str, ParamStyle] = {
    "ssv": "spaceDelimited",
    "tsv": "tabDelimited",
    "pipes": "pipeDelimited",
}


@dataclass(frozen=True)
class Written:
    """How one parameter or field goes on the wire, and what of its description cannot be honoured."""

    style: ParamStyle | None
    explode: bool
    notes: tuple[str, ...] = ()
    file: bool = False
    content_type: str | None = None


def param_style(param: Mapping[str, Any], schema: Mapping[str, Any], *, swagger2: bool) -> Written:
    """A path, query, header or cookie parameter's style; ``schema`` is its inlined schema."""
    name, location = str(param.get("name")), str(param.get("in"))
    default = _DEFAULT_STYLE.get(location, "form")
    if swagger2:
        return _collection_format(param, location, default)
    content = param.get("content")
    if param.get("schema") is None and isinstance(content, Mapping) and content:
        media = str(next(iter(content)))
        return Written("json", False) if "json" in media.lower() else Written(None, True)
    notes: list[str] = []
    raw = param.get("style")
    style: str = raw if isinstance(raw, str) else default
    if style not in _STYLES.get(location, ()):
        notes.append(f"style {style!r} is not defined for a {location} parameter; it is sent in style {default}")
        style = default
    explode = param.get("explode")
    exploded = explode if isinstance(explode, bool) else style == "form"
    shape = _shape(schema)
    where = f"parameter {name!r} (in: {location})"
    if style == "deepObject":
        # An array (Stripe's ``expand``) is bracketed by index, as nested values are: one reading, documented.
        if not exploded:
            notes.append("style deepObject is defined with explode: true only; it is sent exploded (name[key]=…)")
            exploded = True
    elif location == "cookie" and exploded and shape in ("array", "object"):
        notes.append("an exploded cookie cannot repeat its name; it is sent as with explode: false (name=a,b)")
    elif style in ("spaceDelimited", "pipeDelimited") and exploded and shape == "object":
        notes.append(f"style {style} is not defined for an exploded object; its properties are sent as key=value")
    if style != "deepObject" and _nested(schema):
        notes.append(f"style {style} cannot write nested objects or arrays; those are sent as JSON text")
    return Written(_as_style(style), exploded, tuple(f"{where}: {note}" for note in notes))


def _collection_format(param: Mapping[str, Any], location: str, default: ParamStyle) -> Written:
    if param.get("type") != "array":
        return Written(default, True)
    name = str(param.get("name"))
    fmt = param.get("collectionFormat") or "csv"
    if fmt == "multi":
        if location in ("query", "formData"):
            return Written("form", True)
        note = f"parameter {name!r} (in: {location}): collectionFormat multi is for the query and forms; sent as csv"
        return Written(default, False, (note,))
    if fmt == "csv":
        return Written(default, False)
    if fmt in _COLLECTION_FORMATS:
        return Written(_COLLECTION_FORMATS[fmt], False)
    note = f"parameter {name!r} (in: {location}): collectionFormat {fmt!r} is unknown; it is sent as csv"
    return Written(default, False, (note,))


def form_field_style(param: Mapping[str, Any]) -> Written:
    """A Swagger 2 ``formData`` field of a multipart body: a file, or text parts as its collectionFormat says."""
    if param.get("type") == "file":
        return Written(None, False, file=True)
    written = _collection_format(param, "formData", "form")
    return Written(written.style or "form", written.explode, written.notes)


def multipart_field(schema: Mapping[str, Any], encoding: Any) -> Written:
    """A multipart field: a file part (a binary string, or an array of them), text parts named
    ``name[key]`` (an ``encoding`` with ``style: deepObject``), one JSON part (an object, an array of
    objects, or an ``encoding`` with a JSON ``contentType``), else text parts (one per array element
    unless the ``encoding`` says ``explode: false``)."""
    declared = encoding.get("contentType") if isinstance(encoding, Mapping) else None
    content_type = declared.split(",")[0].strip() or None if isinstance(declared, str) else None
    items = schema.get("items") if _shape(schema) == "array" else None
    single = items if isinstance(items, Mapping) else schema
    if _binary(single):
        return Written(None, False, file=True, content_type=content_type)
    style = encoding.get("style") if isinstance(encoding, Mapping) else None
    if style == "deepObject" and _shape(schema) != "scalar":
        return Written("deepObject", True, content_type=content_type)  # one text part per leaf: name[key]
    if (content_type and "json" in content_type.lower()) or _shape(single) == "object":
        return Written("json", False, content_type=content_type)
    explode = encoding.get("explode") if isinstance(encoding, Mapping) else None
    return Written("form", explode is not False, content_type=content_type)


def file_field_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The argument schema of a file field: the text content, or ``{content, filename?, content_type?}``;
    an array of them for an array of files."""
    one: dict[str, Any] = {
        "anyOf": [{"type": "string", "description": "The file's content, as text."}, FILE_PART],
    }
    items = schema.get("items") if _shape(schema) == "array" else None
    out: dict[str, Any] = {"type": "array", "items": one} if isinstance(items, Mapping) else dict(one)
    description = schema.get("description")
    if isinstance(description, str) and description.strip():
        out["description"] = description
    return out


def _binary(schema: Mapping[str, Any]) -> bool:
    kinds = _types(schema)
    if "file" in kinds:
        return True
    binary = schema.get("format") in ("binary", "base64") or "contentMediaType" in schema
    return binary and (not kinds or "string" in kinds)


def _types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    return {str(t) for t in declared} if isinstance(declared, list) else set()


def _shape(schema: Mapping[str, Any]) -> Literal["array", "object", "scalar"]:
    kinds = _types(schema)
    if "array" in kinds or (not kinds and isinstance(schema.get("items"), Mapping)):
        return "array"
    if "object" in kinds or (not kinds and isinstance(schema.get("properties"), Mapping)):
        return "object"
    return "scalar"


def _nested(schema: Mapping[str, Any]) -> bool:
    """Whether an array's items, or an object's properties, are objects or arrays themselves."""
    shape = _shape(schema)
    if shape == "array":
        items = schema.get("items")
        return isinstance(items, Mapping) and _shape(items) != "scalar"
    if shape == "object":
        properties = schema.get("properties")
        values = properties.values() if isinstance(properties, Mapping) else ()
        return any(isinstance(value, Mapping) and _shape(value) != "scalar" for value in values)
    return False


def _as_style(style: str) -> ParamStyle:
    match style:
        case "form" | "simple" | "label" | "matrix" | "spaceDelimited" | "pipeDelimited" | "deepObject":
            return style
        case _:  # pragma: no cover - only styles checked against _STYLES reach here
            return "form"
