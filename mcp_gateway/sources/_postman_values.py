"""Values inside a Postman collection: ``{{variables}}``, placeholders, credential names, JSON bodies.

A collection is written for a human running it in Postman, so its values mix literal examples,
variables a human fills in (``{{USERNAME}}``), placeholders (``<profileId>``) and, sometimes, a
real credential someone pasted. This module decides what each one is. The one rule that must not
fail: nothing named like a credential, and no variable Postman marks ``secret``, is ever resolved
to its value, so no credential from a collection can become an argument's default.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._credential_names import credential_name

__all__ = ["PostmanVars", "credential_name", "is_placeholder", "json_body_fields", "value_schema"]

VARIABLE = re.compile(r"\{\{([^{}]+)\}\}")
_PLACEHOLDER = re.compile(r"\s*(?:<[^<>{}\n]{1,60}>|\[[A-Za-z_][\w .-]{0,60}\])\]?\s*")


def is_placeholder(text: str) -> bool:
    """``<profileId>``, ``<get code from oauth flow>``, ``[user_id]``: a value a human fills in."""
    return bool(_PLACEHOLDER.fullmatch(text))


@dataclass(frozen=True)
class PostmanVars:
    """The collection's variables that may be resolved (never a credential or ``secret`` one)."""

    values: Mapping[str, str]

    @classmethod
    def from_collection(cls, raw: Any) -> PostmanVars:
        values: dict[str, str] = {}
        for entry in raw if isinstance(raw, list) else ():
            if not isinstance(entry, dict) or entry.get("disabled") is True or entry.get("type") == "secret":
                continue
            key, value = entry.get("key"), entry.get("value")
            if not isinstance(key, str) or credential_name(key) or value is None or isinstance(value, dict | list):
                continue
            text = json.dumps(value) if isinstance(value, bool) else str(value)
            if text and "{{" not in text:
                values[key] = text
        return cls(values)

    def value(self, name: str) -> str | None:
        return self.values.get(name.strip())

    def names_in(self, value: Any) -> list[str]:
        return [m.strip() for m in VARIABLE.findall(value)] if isinstance(value, str) else []

    def resolve(self, text: str) -> str | None:
        """``text`` with every variable replaced by its value; None if one has no (usable) value."""
        missing = False

        def one(match: re.Match[str]) -> str:
            nonlocal missing
            value = self.value(match.group(1))
            if value is None:
                missing = True
                return ""
            return value

        out = VARIABLE.sub(one, text)
        return None if missing else out


# -- raw JSON bodies ------------------------------------------------------------------------------

_MARK = "__pm_var_{}__"
_MARK_RE = re.compile(r"__pm_var_(\d+)__")
Field = tuple[dict[str, Any], bool, Any]
"""(schema, required, default) of one argument."""


def json_body_fields(raw: str, variables: PostmanVars) -> dict[str, Field] | Field | None:
    """A raw JSON body as arguments: ``{key: field}`` for an object, one field for other JSON,
    None when the text is not JSON even with its variables filled in.

    Variables may sit inside strings (``"{{EMAIL}}"``) or bare (``{"limit": {{n}}}``, which is not
    JSON until filled); both are found. A value without unresolved variables is a default; one
    with them is required and has no default.
    """
    names: list[str] = []

    def mark(match: re.Match[str]) -> str:
        names.append(match.group(1).strip())
        return _MARK.format(len(names) - 1)

    marked = VARIABLE.sub(mark, raw)
    bare: set[int] = set()
    try:
        parsed = json.loads(marked)
    except ValueError:
        # Bare variables: quote the marks that are not already inside a string, and remember them.
        def quote(match: re.Match[str]) -> str:
            bare.add(int(match.group(1)))
            return f'"{match.group(0)}"'

        try:
            parsed = json.loads(re.sub(r'(?<!")__pm_var_(\d+)__(?!")', quote, marked))
        except ValueError:
            return None
    reader = _Reader(names, bare, variables)
    if isinstance(parsed, dict):
        return {str(k): reader.field(v, credential_name(str(k))) for k, v in parsed.items()}
    return reader.field(parsed, False)


@dataclass
class _Reader:
    names: list[str]
    bare: set[int]
    variables: PostmanVars

    def field(self, value: Any, secret_key: bool) -> Field:
        literal, unresolved = self.resolve(value, secret_key)
        schema = self.schema(value, secret_key)
        if unresolved:
            return schema, True, None
        return schema, False, literal

    def resolve(self, value: Any, secret_key: bool = False) -> tuple[Any, bool]:
        """The value with variables filled in, and whether some could not be (or must not be)."""
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            missing = False
            for k, v in value.items():
                item, item_missing = self.resolve(v, credential_name(str(k)))
                out[k], missing = item, missing or item_missing
            return out, missing
        if isinstance(value, list):
            items = [self.resolve(v, secret_key) for v in value]
            return [i for i, _ in items], any(m for _, m in items)
        if isinstance(value, str):
            whole = _MARK_RE.fullmatch(value)
            if whole:
                index = int(whole.group(1))
                name = self.names[index]
                resolved = None if secret_key or credential_name(name) else self.variables.value(name)
                if resolved is None:
                    return None, True
                if index in self.bare:
                    try:
                        return json.loads(resolved), False
                    except ValueError:
                        return resolved, False
                return resolved, False
            if _MARK_RE.search(value):
                missing = False

                def one(match: re.Match[str]) -> str:
                    nonlocal missing
                    name = self.names[int(match.group(1))]
                    resolved = None if secret_key or credential_name(name) else self.variables.value(name)
                    missing = missing or resolved is None
                    return resolved or ""

                text = _MARK_RE.sub(one, value)
                return (None, True) if missing else (text, False)
            # A literal under a credential-named key is exactly the pasted secret to keep out.
            return (None, True) if secret_key and value else (value, False)
        return value, False

    def schema(self, value: Any, secret_key: bool) -> dict[str, Any]:
        if isinstance(value, dict):
            properties = {str(k): self.schema(v, credential_name(str(k))) for k, v in value.items()}
            required = [str(k) for k, v in value.items() if self.resolve(v, credential_name(str(k)))[1]]
            schema: dict[str, Any] = {"type": "object", "properties": properties}
            if required:
                schema["required"] = required
            return schema
        if isinstance(value, list):
            return {"type": "array", "items": self.schema(value[0], secret_key)} if value else {"type": "array"}
        if isinstance(value, str):
            whole = _MARK_RE.fullmatch(value)
            if whole:
                index = int(whole.group(1))
                about = {"description": f"Postman variable {{{{{self.names[index]}}}}}."}
                return about if index in self.bare else {"type": "string", **about}
            if _MARK_RE.search(value):
                template = _MARK_RE.sub(lambda m: "{{" + self.names[int(m.group(1))] + "}}", value)
                return {"type": "string", "description": f"The collection sends {json.dumps(template)[:300]}."}
            return {"type": "string"}
        return value_schema(value)


def value_schema(value: Any) -> dict[str, Any]:
    """The JSON Schema type of a literal example value."""
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array", "items": value_schema(value[0])} if value else {"type": "array"}
    if isinstance(value, dict):
        return {"type": "object", "properties": {str(k): value_schema(v) for k, v in value.items()}}
    return {}
