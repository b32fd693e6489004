"""``$ref`` resolution across documents, and schema inlining with cycle and depth control.

A reference is ``<location>#<JSON pointer>``. An empty location means "the document the
reference sits in" (not the root document): each resolved value travels with the location it
came from, so a ref inside ``common.yaml`` that says ``#/X`` resolves inside ``common.yaml``.
Relative locations resolve against that document's own path (or URL).

Local files are read on demand. Remote documents (a ref from a URL-loaded spec, or an absolute
``http(s)`` ref) cannot be fetched from this synchronous code: they are recorded in
``Resolver.pending`` and the ref fails for now; the async loader fetches them and normalizes
again (see ``openapi.load_openapi``). Only documents on the spec's own origin are ever fetched: a
ref to another origin (or any remote ref from a local or in-memory spec) fails with a ``RefError``
that names it, so a third party's document never decides what an agent reads. Local files
likewise: a ref is read only inside the folder the main spec is in (and the folders below it),
so a spec cannot pull ``~/.ssh`` or the gateway's own state into what an agent is shown.

``SchemaInliner`` turns an OpenAPI schema into a self-contained JSON Schema for an action's
``input_schema``: refs inlined, cycles cut to a placeholder, nesting capped so that huge specs
(GitHub) stay a sane size, and noise (``example``, ``x-*``, ``xml``, ``readOnly`` properties)
dropped. A ref that cannot be resolved degrades only its own schema to ``{}`` with a note.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urljoin

from ..policy.review import origin_of
from ..primitives.url_secrets import shown_url
from ..vocabulary.errors import SourceError
from ._documents import is_url, read_document

__all__ = ["Dialect", "RefError", "Resolver", "SchemaInliner"]

Dialect = Literal["2.0", "3.0", "3.1"]

MAX_DEPTH = 6
"""Nesting levels of properties/items kept; deeper schemas keep only type and description."""

MAX_NODES = 5000
"""Schema nodes inlined for one parameter or body; past it the rest is truncated like the depth cap."""

_MAX_HOPS = 32  # a chain of refs to refs longer than this is a loop, not a design


class RefError(Exception):
    """A reference that cannot be resolved; ``str()`` says why, for the user-facing message."""


class Resolver:
    """Finds what a ``$ref`` points at, loading referenced files once each.

    Args:
        root: the main document, already parsed.
        location: its absolute file path or URL; ``""`` for an in-memory document (then only
            internal and absolute-URL refs resolve).
    """

    def __init__(self, root: Any, location: str) -> None:
        self.root_location = location
        self.documents: dict[str, Any] = {location: root}
        self.failures: dict[str, str] = {}
        self.files: list[str] = [location] if location and not is_url(location) else []
        """Absolute paths of local files read, main one first (for change fingerprints)."""
        self.pending: set[str] = set()
        """Remote documents some ref needed but that were not fetched yet."""
        self._targets: dict[str, tuple[Any, str]] = {}
        self._folder = Path(location).parent.resolve() if location and not is_url(location) else None

    def add_document(self, location: str, document: Any) -> None:
        self.documents[location] = document

    def add_failure(self, location: str, reason: str) -> None:
        self.failures[location] = reason

    def locate(self, ref: str, base: str) -> tuple[str, str]:
        """The (document location, fragment) a ref names, relative to the document ``base``."""
        where, _, fragment = ref.partition("#")
        fragment = unquote(fragment)
        if not where:
            return base, fragment
        if is_url(where) or is_url(base):
            location = where if is_url(where) else urljoin(base, where)
            self._same_origin(ref, location)
            return location, fragment
        if not base:
            raise RefError(f"relative file reference {where!r} needs the spec's own path; load the spec from a file")
        target = Path(unquote(where))
        if not target.is_absolute():
            target = Path(base).parent / target
        target = target.resolve()
        if self._folder is not None and not target.is_relative_to(self._folder):
            raise RefError(
                f"the $ref {where!r} points outside the spec's folder; $refs are read only from the folder the "
                "spec is in and the folders below it. Copy that document beside the spec, or bundle the spec into "
                "one file"
            )
        return str(target), fragment

    def _shown(self, location: str) -> str:
        # Relative to the spec's folder: where the gateway keeps its state is nothing an agent needs.
        if self._folder is not None and Path(location).is_relative_to(self._folder):
            return str(Path(location).relative_to(self._folder))
        return location

    def _same_origin(self, ref: str, location: str) -> None:
        own = origin_of(self.root_location) if is_url(self.root_location) else ""
        there = origin_of(location)
        if own and there == own:
            return
        spec = f"the spec's own ({own})" if own else "a spec read from a file"
        raise RefError(
            f"the $ref {ref!r} points at another origin ({there or shown_url(location)}) than {spec}; $refs are "
            "resolved only within the spec's own origin, so it was not fetched. Download that document beside the spec "
            "and refer to it by a relative path, or bundle the spec into one file"
        )

    def key(self, ref: str, base: str) -> str:
        """A canonical name for the ref's target, used to detect cycles."""
        location, fragment = self.locate(ref, base)
        return f"{location}#{fragment}"

    def resolve(self, ref: str, base: str) -> tuple[Any, str]:
        """The value a ref points at and the location of the document holding it.

        Raises:
            RefError: the document cannot be loaded or the pointer leads nowhere.
        """
        location, fragment = self.locate(ref, base)
        cache_key = f"{location}#{fragment}"
        hit = self._targets.get(cache_key)
        if hit is not None:
            return hit
        document = self._document(location)
        value = _follow_pointer(document, fragment, ref)
        self._targets[cache_key] = (value, location)
        return value, location

    def deref(self, value: Any, base: str) -> tuple[Any, str]:
        """Follow a chain of ``{"$ref": ...}`` objects to a concrete value.

        Sibling keys of the last ref (3.1 lets ``description`` and ``summary`` override) win.

        Raises:
            RefError: a ref in the chain cannot be resolved, or the chain loops.
        """
        siblings: dict[str, Any] = {}
        for _ in range(_MAX_HOPS):
            if not (isinstance(value, dict) and isinstance(value.get("$ref"), str)):
                return ({**value, **siblings} if siblings and isinstance(value, dict) else value), base
            siblings = {**{k: v for k, v in value.items() if k != "$ref"}, **siblings}
            value, base = self.resolve(value["$ref"], base)
        raise RefError("the reference chain loops")

    def _document(self, location: str) -> Any:
        if location in self.documents:
            return self.documents[location]
        if location in self.failures:
            raise RefError(self.failures[location])
        if is_url(location):
            self.pending.add(location)
            raise RefError(f"the remote document {shown_url(location)} has not been fetched")
        if not Path(location).is_file():
            self.failures[location] = f"the file {self._shown(location)} does not exist beside the spec"
            raise RefError(self.failures[location])
        try:
            document = read_document(Path(location))
        except SourceError as exc:
            self.failures[location] = str(exc)
            raise RefError(str(exc)) from None
        self.documents[location] = document
        self.files.append(location)
        return document


def _follow_pointer(document: Any, fragment: str, ref: str) -> Any:
    if fragment in ("", "/"):
        return document
    if not fragment.startswith("/"):
        raise RefError(f"only JSON-pointer fragments ('#/a/b') are supported, not {ref!r}")
    node = document
    for raw in fragment[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            if token in node:
                node = node[token]
            elif token.isdigit() and int(token) in node:  # YAML turns `200:` into an int key
                node = node[int(token)]
            else:
                raise RefError(f"the target document has no {token!r}")
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise RefError(f"the target document has no {token!r}")
    return node


# -- inlining ---------------------------------------------------------------------------------

# Annotation and validation keywords copied as they are; everything else not handled below
# (example(s), x-*, xml, externalDocs, discriminator, title, not, if/then/else ...) is dropped:
# it costs tokens and does not help an agent build arguments.
_KEEP = frozenset(
    {
        "type",
        "format",
        "description",
        "enum",
        "const",
        "default",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "deprecated",
        "nullable",
        "readOnly",
    }
)
_COMPOSITIONS = ("allOf", "oneOf", "anyOf")
_MERGEABLE = frozenset({"type", "properties", "required", "description", "additionalProperties"})
_MAX_DESCRIPTION = 1000


class SchemaInliner:
    """Inline one schema at a time; see the module docstring for what is kept."""

    def __init__(self, resolver: Resolver, dialect: Dialect, *, max_depth: int = MAX_DEPTH) -> None:
        self.resolver = resolver
        self.dialect = dialect
        self.max_depth = max_depth
        self._budget = MAX_NODES

    def inline(self, schema: Any, base: str) -> dict[str, Any]:
        # The budget bounds specs whose shared schemas fan out (n refs per level, n**depth nodes).
        self._budget = MAX_NODES
        out = self._inline(schema, base, 0, ())
        out.pop("readOnly", None)
        return out

    def _inline(self, schema: Any, base: str, depth: int, stack: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(schema, dict):
            return {"not": {}} if schema is False else {}
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._inline_ref(schema, ref, base, depth, stack)
        self._budget -= 1
        if depth > self.max_depth or self._budget < 0:
            return self._finish(_truncated(schema))
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key in _KEEP:
                out[key] = value
            elif key == "properties" and isinstance(value, dict):
                props: dict[str, Any] = {}
                for name, sub in value.items():
                    inlined = self._inline(sub, base, depth + 1, stack)
                    if inlined.pop("readOnly", False) is True:
                        continue  # the server sets it; an agent must not send it
                    props[str(name)] = inlined
                out["properties"] = props
            elif key == "items":
                item = (value[0] if value else {}) if isinstance(value, list) else value  # 2.0 tuple form
                out["items"] = self._inline(item, base, depth + 1, stack)
                out["items"].pop("readOnly", None)
            elif key == "additionalProperties":
                if isinstance(value, bool):
                    out[key] = value
                else:
                    out[key] = self._inline(value, base, depth + 1, stack)
                    out[key].pop("readOnly", None)
            elif key in _COMPOSITIONS and isinstance(value, list):
                out[key] = [self._inline(sub, base, depth + 1, stack) for sub in value]
            elif key == "x-nullable" and self.dialect == "2.0":  # the common 2.0 spelling of nullable
                out["nullable"] = value
            elif key == "required" and isinstance(value, list):
                out[key] = [str(v) for v in value if isinstance(v, str | int)]
        return self._finish(out)

    def _inline_ref(
        self, schema: dict[str, Any], ref: str, base: str, depth: int, stack: tuple[str, ...]
    ) -> dict[str, Any]:
        try:
            key = self.resolver.key(ref, base)
            if key in stack:
                name = key.rsplit("/", 1)[-1] or ref
                out: dict[str, Any] = {"type": "object", "description": f"(recursive: {name})"}
            else:
                target, target_base = self.resolver.resolve(ref, base)
                out = self._inline(target, target_base, depth, (*stack, key))
        except RefError as exc:
            out = {"description": f"(unresolved $ref {ref}: {exc})"}
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        if siblings:
            # 3.1 allows keywords beside $ref, and 3.0 specs use them anyway (mostly description):
            # the referring site is more specific, so its keywords win.
            extra = self._inline(siblings, base, depth, stack)
            out = {**out, **extra}
            if siblings.get("nullable") is True and self.dialect != "3.1":
                out = _nullable(out)
        return out

    def _finish(self, out: dict[str, Any]) -> dict[str, Any]:
        for key in _COMPOSITIONS:
            if key in out:
                out = _simplify_composition(out, key)
        if out.get("type") == "file":  # Swagger 2.0 upload
            out["type"] = "string"
            out["format"] = "binary"
        if self.dialect != "3.1":
            _exclusive_bounds(out)
        if out.pop("nullable", None) is True and self.dialect != "3.1":
            out = _nullable(out)
        if out.get("readOnly") is not True:
            out.pop("readOnly", None)
        description = out.get("description")
        if isinstance(description, str) and len(description) > _MAX_DESCRIPTION:
            out["description"] = description[: _MAX_DESCRIPTION - 1].rstrip() + "…"
        props = out.get("properties")
        if isinstance(props, dict) and "required" in out:
            out["required"] = [name for name in out["required"] if name in props]
        if out.get("required") == []:
            del out["required"]
        return out


def _truncated(schema: dict[str, Any]) -> dict[str, Any]:
    # Past the depth cap an agent still learns what kind of value goes there, not its shape.
    return {k: schema[k] for k in ("type", "description", "format", "enum") if k in schema}


def _nullable(out: dict[str, Any]) -> dict[str, Any]:
    """3.0 ``nullable: true`` in 3.1 / JSON Schema terms."""
    out = dict(out)
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        out["type"] = [*kind, "null"]
    elif kind is None:
        for key in ("oneOf", "anyOf"):
            if key in out:
                out[key] = [*out[key], {"type": "null"}]
                break
    if isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def _exclusive_bounds(out: dict[str, Any]) -> None:
    """Draft-4 style boolean ``exclusiveMinimum`` (2.0, 3.0) to the numeric form JSON Schema uses now."""
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        flag = out.get(exclusive)
        if isinstance(flag, bool):
            del out[exclusive]
            if flag and bound in out:
                out[exclusive] = out.pop(bound)


def _simplify_composition(out: dict[str, Any], key: str) -> dict[str, Any]:
    parts = out[key]
    rest = {k: v for k, v in out.items() if k != key}
    if len(parts) == 1:
        # `allOf: [$ref]` with a sibling description is the common 3.0 way to annotate a ref.
        (only,) = parts
        if not (set(only) & set(rest)) - {"description", "default", "deprecated", "readOnly", "nullable"}:
            return {**only, **rest}
        return out
    if key != "allOf" or not parts:
        return out
    if not all(set(p) <= _MERGEABLE and p.get("type", "object") == "object" for p in parts):
        return out
    if not set(rest) <= _MERGEABLE | {"readOnly", "nullable"} or rest.get("type", "object") != "object":
        return out
    merged: dict[str, Any] = {"type": "object"}
    props: dict[str, Any] = {}
    required: list[str] = []
    for part in [*parts, rest]:
        props.update(part.get("properties", {}))
        required.extend(r for r in part.get("required", []) if r not in required)
        if "description" in part:
            merged["description"] = part["description"]
    if "description" in rest:
        merged["description"] = rest["description"]
    merged["properties"] = props
    if required:
        merged["required"] = required
    for flag in ("readOnly", "nullable"):
        if flag in rest:
            merged[flag] = rest[flag]
    return merged
