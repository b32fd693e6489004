"""Catalog entries (``bundled/catalog/<name>.yaml``): connector defaults that a manifest's own fields override.

``catalog_entry`` reads one entry (its ``connector_keys`` only; other keys are metadata) with its relative
source paths made absolute against the catalog folder; ``merge_defaults`` lays a connector over it.
An entry's ``fill_in`` metadata names the keys no default can serve (Jira's ``base_url``: every site
has its own host), each with an example; ``unfilled`` reports a connector that leaves one out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..vocabulary.errors import Issue, ManifestError
from .validation import SLUG_RE, choose
from .yaml_lines import Loc, dotted, read_yaml

__all__ = ["CatalogUse", "catalog_entry", "merge_defaults", "unfilled"]


@dataclass
class CatalogUse:
    """The catalog entry one connector used, and which of its keys the entry supplied."""

    name: str
    file: str
    lines: dict[Loc, int]
    keys: set[str]
    fill_in: dict[str, str] = field(default_factory=dict[str, str])
    """Keys the connector must set itself, each with an example value."""


_PATH_KEYS: dict[str, str | None] = {"openapi": None, "postman": None, "graphql": "schema"}
"""Where a source kind keeps a file path: the kind's value itself (None), or this key below it."""


def catalog_entry(
    name: Any, catalog_dir: Path, file: str, line: int | None, index: int, *, connector_keys: frozenset[str]
) -> tuple[dict[str, Any], CatalogUse] | list[Issue]:
    where = dotted(("connectors", index, "catalog"))
    known = sorted(p.stem for p in catalog_dir.glob("*.yaml"))
    if not isinstance(name, str) or not SLUG_RE.match(name):
        return [Issue(file, line, where, f"{name!r} is not a catalog entry name", choose(str(name), known, "entries"))]
    entry_path = catalog_dir / f"{name}.yaml"
    if not entry_path.is_file():
        return [Issue(file, line, where, f"no catalog entry {name!r} in {catalog_dir}", choose(name, known, "entries"))]
    try:
        entry, lines, duplicates = read_yaml(entry_path.read_text(encoding="utf-8"), str(entry_path))
    except ManifestError as exc:
        return exc.issues
    except (OSError, UnicodeDecodeError) as exc:
        return [Issue(str(entry_path), None, "", f"cannot read the catalog entry: {exc}", "check the file")]
    if duplicates:
        return duplicates
    if not isinstance(entry, dict):
        return [Issue(str(entry_path), 1, "", "a catalog entry is a YAML mapping", "start with 'name: …'")]
    defaults = {k: v for k, v in entry.items() if k in connector_keys}
    source = defaults.get("source")
    if isinstance(source, dict):
        defaults["source"] = _resolve_source_paths(source, catalog_dir)
    fill_in = entry.get("fill_in") or {}
    if not isinstance(fill_in, dict) or not all(k in connector_keys and isinstance(v, str) for k, v in fill_in.items()):
        fix = "map connector keys to example values, e.g. 'fill_in: { base_url: \"https://<your-site>.example.com\" }'"
        return [Issue(str(entry_path), lines.get(("fill_in",)), "fill_in", "'fill_in' is not a mapping of keys", fix)]
    return defaults, CatalogUse(name, str(entry_path), lines, set(defaults), dict(fill_in))


def unfilled(use: CatalogUse, raw: dict[str, Any], file: str, line: int | None, index: int) -> list[Issue]:
    """A problem for each key of the entry's ``fill_in`` that connector ``raw`` does not set, or sets to
    the example still holding its ``<placeholder>`` (a command copied as printed)."""
    issues: list[Issue] = []
    for key, example in use.fill_in.items():
        value = raw.get(key)
        if value in (None, ""):
            issues.append(
                Issue(
                    file,
                    line,
                    dotted(("connectors", index, key)),
                    f"catalog entry {use.name!r} has no {key} that works for everyone: this connector must set its own",
                    f"add '{key}: {example}' to it"
                    + (f" ('mcp-gateway add {use.name} --base-url URL' does)" if key == "base_url" else ""),
                )
            )
        elif isinstance(value, str) and (holes := _PLACEHOLDER.findall(value)):
            issues.append(
                Issue(
                    file,
                    line,
                    dotted(("connectors", index, key)),
                    f"{key} {value!r} still holds the placeholder {holes[0]}",
                    f"replace {holes[0]} with your own (e.g. {_PLACEHOLDER.sub('acme', example)})",
                )
            )
    return issues


_PLACEHOLDER = re.compile(r"<[A-Za-z][\w-]*>|\{[A-Za-z][\w-]*\}|%3[Cc][A-Za-z][\w-]*%3[Ee]")
"""A ``<your-site>`` left in a value (or ``{site}``, or ``%3Cyour-site%3E`` as a shell or URL tool
escaped it): a catalog entry's example, copied without being filled in."""


def _resolve_source_paths(source: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Make a catalog entry's relative source paths absolute, against the catalog folder."""
    out = dict(source)
    for kind, below in _PATH_KEYS.items():
        value = out.get(kind)
        if below is None and isinstance(value, str):
            out[kind] = _absolute(value, folder)
        elif below is not None and isinstance(value, dict) and isinstance(value.get(below), str):
            out[kind] = {**value, below: _absolute(value[below], folder)}
    return out


def _absolute(ref: str, folder: Path) -> str:
    if ref.startswith(("http://", "https://")) or Path(ref).expanduser().is_absolute():
        return ref
    return str((folder / ref).resolve())


def merge_defaults(defaults: dict[str, Any], raw: dict[str, Any]) -> dict[str, Any]:
    merged = {**defaults, **raw}
    base_auth, own_auth = defaults.get("auth"), raw.get("auth")
    # Refining the catalog's auth (other scopes, another header) must not mean restating it all.
    if (
        isinstance(base_auth, dict)
        and isinstance(own_auth, dict)
        and own_auth.get("type", base_auth.get("type")) == base_auth.get("type")
    ):
        merged["auth"] = {**base_auth, **own_auth}
    if isinstance(defaults.get("headers"), dict) and isinstance(raw.get("headers"), dict):
        merged["headers"] = {**defaults["headers"], **raw["headers"]}
    return merged
