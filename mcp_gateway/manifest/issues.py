"""Pydantic's validation errors in the manifest's own words: ``file:line: field.path: problem (fix: …)``.

Each error's location is walked through the schema (from ``root``, the ``Manifest``) to drop pydantic's
union-arm labels; an unknown key gets a "did you mean", a value from a catalog entry is located in the
entry, and a header value is described, never echoed (it may hold a pasted token).
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, Tag

from ..policy import OPERATORS, Condition
from ..vocabulary.errors import Issue
from .auth import AUTH_TYPES
from .catalog import CatalogUse
from .sources import SOURCE_CLASSES, SOURCE_KINDS
from .validation import Problem, choose
from .yaml_lines import Loc, dotted, line_for

__all__ = ["describe", "located_issue"]


def _unwrap(tp: Any) -> Any:
    """Strip ``Annotated`` and ``| None`` until something else shows."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
            continue
        if get_origin(tp) in (typing.Union, types.UnionType):
            arms = [a for a in get_args(tp) if a is not type(None)]
            if len(arms) == 1:
                tp = arms[0]
                continue
        return tp


def _union_arms(tp: Any) -> dict[str, Any] | None:
    """The labels pydantic puts into an error location for each arm of a union, if ``tp`` is one."""
    tp = _unwrap(tp)
    if get_origin(tp) not in (typing.Union, types.UnionType):
        return None
    arms: dict[str, Any] = {}
    for arm in get_args(tp):
        if arm is type(None):
            continue
        if get_origin(arm) is Annotated:
            for meta in get_args(arm)[1:]:
                if isinstance(meta, Tag):
                    arms[meta.tag] = get_args(arm)[0]
        inner = _unwrap(arm)
        if isinstance(inner, type):
            arms[inner.__name__] = inner
            if issubclass(inner, BaseModel) and "type" in inner.model_fields:
                for literal in get_args(inner.model_fields["type"].annotation):
                    arms[str(literal)] = inner
    return arms


def _child(tp: Any, part: str | int) -> Any:
    tp = _unwrap(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
        for name, info in tp.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    origin = get_origin(tp)
    if origin in (list, tuple) and isinstance(part, int):
        return get_args(tp)[0]
    if origin is dict and isinstance(part, str):
        return get_args(tp)[1]
    return None


def _walk_loc(raw: Loc, root: type[BaseModel]) -> tuple[Loc, type[BaseModel] | None]:
    """Drop pydantic's union-arm labels from ``raw``; also the model the location ends in."""
    clean: list[str | int] = []
    tp: Any = root
    for part in raw:
        if isinstance(part, str) and part.startswith("function-"):
            continue
        arms = _union_arms(tp)
        if arms is not None and isinstance(part, str) and part in arms:
            tp = arms[part]
            continue
        clean.append(part)
        tp = _child(tp, part)
    model = _unwrap(tp)
    return tuple(clean), model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _keys_of(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items() if not info.exclude]


_UNQUOTED = frozenset({"headers", "auth", "env"})
"""Manifest keys under which a wrong value is described, not quoted."""


def describe(value: Any, *, reveal: bool) -> str:
    if value is None:
        return "empty (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if not reveal:
        return _KIND_NAMES.get(type(value).__name__, "a value")
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_KIND_NAMES = {"str": "a string", "int": "a number", "float": "a number", "bool": "a boolean"}
_MAPPING = ("a mapping", "write 'key: value' lines (or '{key: value}') here")
_EXPECTED: dict[str, tuple[str, str]] = {
    "string_type": ("a string", "write text here, quoted if it looks like a number or a boolean"),
    "list_type": ("a list", "write a list: '[a, b]', or one '- item' line each"),
    "dict_type": _MAPPING,
    "model_type": _MAPPING,
    "model_attributes_type": _MAPPING,
    "bool_type": ("true or false", "write true or false"),
    "bool_parsing": ("true or false", "write true or false"),
    "int_type": ("a whole number", "write a whole number"),
    "int_parsing": ("a whole number", "write a whole number"),
    "float_type": ("a number", "write a number"),
    "float_parsing": ("a number", "write a number"),
}
_FIX_BY_FIELD = {
    "gt": "write a plain number, e.g. 'gt: 10000'",
    "gte": "write a plain number, e.g. 'gte: 10000'",
    "lt": "write a plain number, e.g. 'lt: 10000'",
    "lte": "write a plain number, e.g. 'lte: 10000'",
    "matches": "simplify the regex as described",
    "in": "write a list, e.g. 'in: [main, master]'",
    "not_in": "write a list, e.g. 'not_in: [main, master]'",
}


def located_issue(
    err: Any,
    file: str,
    lines: dict[Loc, int],
    uses: dict[int, CatalogUse],
    raw: list[Any],
    *,
    root: type[BaseModel],
) -> Issue:
    """One pydantic error of validating ``root`` as an Issue at its line (in the catalog entry, if from one)."""
    loc, message, fix = _explain(err, root)
    index = _connector_index(loc)
    use = uses.get(index) if index is not None else None
    own = raw[index] if index is not None and use is not None and isinstance(raw[index], dict) else {}
    if use is not None and loc[2] in use.keys and loc[2] not in own:
        # The value came from the catalog entry: point there, and say which connector used it.
        inner = loc[2:]
        where = f"catalog entry {use.name!r}, used by {dotted(loc[:2])}"
        return Issue(use.file, line_for(inner, use.lines), dotted(inner), f"{message} ({where})", fix)
    return Issue(file, line_for(loc, lines), dotted(loc), message, fix)


def _connector_index(loc: Loc) -> int | None:
    """The index of the connector whose field (or something below it) ``loc`` names."""
    if len(loc) > 2 and loc[0] == "connectors" and isinstance(loc[1], int):
        return loc[1]
    return None


def _explain(err: Any, root: type[BaseModel]) -> tuple[Loc, str, str]:
    """One pydantic error as (YAML location, problem, fix), in the manifest's own words."""
    raw_loc = tuple(err["loc"])
    loc, model = _walk_loc(raw_loc, root)
    kind: str = err["type"]
    ctx: dict[str, Any] = err.get("ctx") or {}
    value = err.get("input")
    # Where a credential goes (headers, the auth block, an MCP server's environment), a token pasted by
    # mistake may be the value: described by its kind, never echoed (the error reaches terminals and logs).
    got = describe(value, reveal=not any(part in _UNQUOTED for part in loc))
    field_fix = _FIX_BY_FIELD.get(str(loc[-1]) if loc else "", "")
    fallback = "change the value as described"

    if kind == "extra_forbidden":
        message, fix = _unknown_key(str(loc[-1]), loc, _walk_loc(raw_loc[:-1], root)[1])
        return loc, message, fix
    if kind == "missing":
        return loc, f"missing required key {loc[-1]!r}", f"add '{loc[-1]}: …'"
    if kind in ("union_tag_invalid", "union_tag_not_found") and loc[-1:] == ("auth",):
        valid = ", ".join(AUTH_TYPES)
        if kind == "union_tag_not_found":
            return loc, "an auth block needs a 'type'", f"add 'type:' with one of: {valid}"
        return (*loc, "type"), f"unknown auth type {ctx.get('tag')!r}", f"use one of: {valid}"
    if kind == "source_kind":
        found = ", ".join(map(str, value)) if isinstance(value, dict) else got
        message = f"a source is exactly one of: {', '.join(SOURCE_KINDS)} (found: {found or 'nothing'})"
        return loc, message, "write e.g. 'source: { openapi: specs/api.json }'"
    if kind == "literal_error" and ctx.get("expected"):
        return loc, f"must be {ctx['expected']}, not {got}", f"write {ctx['expected']}"
    if kind == "value_error":
        error = ctx.get("error")
        if isinstance(error, Problem):
            return (*loc, error.key) if error.key is not None else loc, error.problem, error.fix
        message = str(error) if error is not None else str(err["msg"]).removeprefix("Value error, ")
        if model is Condition:
            return loc, message, "write at least one operator, e.g. 'amount: {gt: 10000}'"
        return loc, message, field_fix or fallback
    if kind in _EXPECTED:
        expected, type_fix = _EXPECTED[kind]
        return loc, f"should be {expected}, not {got}", field_fix or type_fix
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return loc, "must not be empty", "write a value, or remove the key"
    return loc, f"{str(err['msg']).replace('Input should be', 'should be')}, not {got}", field_fix or fallback


def _unknown_key(key: str, loc: Loc, parent: type[BaseModel] | None) -> tuple[str, str]:
    if parent is Condition:
        return f"unknown operator {key!r}", choose(key, list(OPERATORS), "operators")
    if parent in SOURCE_CLASSES.values() and loc[-2:-1] == ("source",):
        kinds = ", ".join(SOURCE_KINDS)
        return f"unknown key {key!r} in a source", f"a source has exactly one key, its kind ({kinds}); remove {key!r}"
    keys = _keys_of(parent) if parent else []
    close = difflib.get_close_matches(key, keys, n=1, cutoff=0.6)
    if close:
        return f"unknown key {key!r}", f"did you mean {close[0]!r}? Otherwise remove it"
    return f"unknown key {key!r}", "remove it" + (f"; the keys here are: {', '.join(keys)}" if keys else "")
