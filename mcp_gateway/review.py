"""Pinning and review of what upstreams say (SPEC 10a, issue 13): which actions an agent may see.

Every agent-visible part of an action — its name, summary, description, input schema and risk, and
for an upstream MCP tool the upstream name it calls — is *snapshotted* and fingerprinted at sync.
An operator's approval pins that fingerprint. Then, per connector ``trust``:

- ``review`` (the default for upstream MCP servers): a new action, or an approved one whose
  fingerprint changed (a "rug pull"), is quarantined — invisible to ``discover``/``describe``,
  ``denied``/``quarantined`` to ``call`` — until an operator approves it (``mcp-gateway review``,
  the operator page);
- ``pinned`` (sources the operator wrote or pinned: a local spec file, a Postman collection,
  ``http`` actions, a catalog spec with a sha256): approved as they load, changes included;
- ``auto``: approved as they load, whatever they say (servers the operator vouches for).

Independently of trust (``auto`` aside), an action whose text hides characters or reads as
instructions to the model (``sanitize.instruction_flags``) is quarantined with the reasons shown,
until approved as it is. Approval is always of one exact fingerprint: a later change needs another.

Pure: the store keeps the approved snapshots; this module only compares.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .model import Action, McpBinding
from .sanitize import hidden_characters, instruction_flags

__all__ = [
    "Finding",
    "ReviewStatus",
    "Scan",
    "Trust",
    "diff",
    "fingerprint",
    "flagged",
    "hidden_text",
    "review",
    "snapshot",
]

Trust = Literal["review", "pinned", "auto"]
ReviewStatus = Literal["approved", "new", "changed", "flagged"]
Scan = Callable[[Sequence[Action]], list["Finding"]]
"""What finds the actions whose text hides characters: ``hidden_text``, or a cache of its answers."""


def snapshot(action: Action) -> dict[str, Any]:
    """What an agent sees of ``action`` (and, for MCP, which upstream tool it calls)."""
    shown: dict[str, Any] = {
        "name": action.qualified_name,
        "summary": action.summary,
        "description": action.description,
        "risk": action.risk,
        "input_schema": action.input_schema,
    }
    if isinstance(action.binding, McpBinding):
        shown["calls"] = action.binding.tool
    return shown


def fingerprint(shown: Mapping[str, Any]) -> str:
    """A stable digest of a snapshot (key order and whitespace do not matter)."""
    canonical = json.dumps(shown, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Finding:
    """One action's review state after a sync."""

    name: str
    status: ReviewStatus
    fingerprint: str
    snapshot: Mapping[str, Any] = field(repr=False)
    flags: tuple[str, ...] = ()
    """Why the text looks like instructions to the model, or hides characters."""
    previous: Mapping[str, Any] | None = field(default=None, repr=False)
    """The approved snapshot this one differs from (``changed``)."""

    @property
    def visible(self) -> bool:
        return self.status == "approved"

    def diff(self) -> str:
        return diff(self.previous, self.snapshot)


def review(
    actions: Iterable[Action],
    approved: Mapping[str, tuple[str, Mapping[str, Any]]],
    *,
    trust: Trust,
    upstream: bool = True,
    other_tools: Iterable[str] = (),
    scan: Scan | None = None,
) -> list[Finding]:
    """The actions' states, given ``approved`` (qualified name -> (fingerprint, snapshot)) and the
    connector's ``trust``; ``other_tools`` are other connectors' action names (a description that
    names one is flagged).

    ``upstream`` says the text comes from a server as it runs (an ``mcp`` source); then, and under
    ``trust: review``, there is one finding per action, and the ``approved`` ones are the ones to
    pin. Otherwise the text is a spec the operator wrote or pinned: approved as it loads, so only
    the actions held back are returned — none under ``auto``, and under ``pinned`` those whose text
    hides characters (a large spec's own wording about "secrets" or "tokens" is its API, not an
    order to the model, but hidden text never is) unless that exact text was approved. Only those
    are fingerprinted: a spec of thousands of actions is not snapshotted at every sync. ``scan``
    replaces ``hidden_text`` there (a cache that answers the same for an unchanged catalog)."""
    if not upstream and trust != "review":
        if trust == "auto":
            return []
        held = (scan or hidden_text)(list(actions))
        return [f for f in held if approved.get(f.name, ("",))[0] != f.fingerprint]
    others = list(other_tools)
    findings: list[Finding] = []
    for action in actions:
        shown = snapshot(action)
        digest = fingerprint(shown)
        pinned = approved.get(action.qualified_name)
        previous = pinned[1] if pinned is not None else None
        if pinned is not None and pinned[0] == digest:
            findings.append(Finding(action.qualified_name, "approved", digest, shown))
            continue
        flags = () if trust == "auto" else tuple(_flags(action, others))
        if flags:
            status: ReviewStatus = "flagged"
        elif trust != "review":
            status = "approved"
        else:
            status = "changed" if pinned is not None else "new"
        findings.append(Finding(action.qualified_name, status, digest, shown, flags, previous))
    return findings


def hidden_text(actions: Sequence[Action]) -> list[Finding]:
    """A ``flagged`` finding for each of ``actions`` whose text hides characters (tag, zero-width,
    bidi, ANSI), in their order."""
    held = (flagged(action, _hiding_flags(action)) for action in actions)
    return [finding for finding in held if finding is not None]


def _hiding_flags(action: Action) -> tuple[str, ...]:
    """Why ``action``'s text hides characters; empty when it does not."""
    found: list[str] = []
    for label, text in _texts(action):
        if not (text.isascii() and text.isprintable()):
            found += [f"{label}: hides text: {kind}" for kind in hidden_characters(text)]
    return tuple(dict.fromkeys(found))


def flagged(action: Action, flags: tuple[str, ...]) -> Finding | None:
    """The ``flagged`` finding of ``action`` for ``flags``; None without flags."""
    if not flags:
        return None
    shown = snapshot(action)
    return Finding(action.qualified_name, "flagged", fingerprint(shown), shown, flags)


def _flags(action: Action, other_tools: list[str]) -> list[str]:
    found: list[str] = []
    own = action.connector + "."
    others = [name for name in other_tools if not name.startswith(own)]
    for label, text in _texts(action):
        found += [f"{label}: {flag}" for flag in instruction_flags(text, other_tools=others)]
    return list(dict.fromkeys(found))


def _texts(action: Action) -> list[tuple[str, str]]:
    found = [("name", action.path), ("summary", action.summary), ("description", action.description)]
    _schema_texts(action.input_schema, "input_schema", 0, found)
    return found


def _schema_texts(node: Any, where: str, depth: int, found: list[tuple[str, str]]) -> None:
    """Parameter names, titles, descriptions and enum strings, where instructions also hide, onto
    ``found`` in document order. A plain recursion, not nested generators: every start walks every
    action's schema, and each level of ``yield from`` re-handles every string below it."""
    if depth > 8:
        return
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("description", "title") and isinstance(value, str):
                found.append((f"{where}.{key}", value))
            elif key == "properties" and isinstance(value, Mapping):
                for name, sub in value.items():
                    found.append((f"{where}.properties", str(name)))
                    _schema_texts(sub, f"{where}.{name}", depth + 1, found)
            elif key in ("enum", "examples", "default") and isinstance(value, list):
                found.extend((f"{where}.{key}", item) for item in value if isinstance(item, str))
            elif isinstance(value, Mapping | list):
                _schema_texts(value, where, depth + 1, found)
    elif isinstance(node, list):
        for item in node:
            _schema_texts(item, where, depth + 1, found)


def diff(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> str:
    """A unified diff of two snapshots as indented JSON (all of ``after`` for a new action)."""
    old = json.dumps(before, indent=2, sort_keys=True, ensure_ascii=True).splitlines() if before else []
    new = json.dumps(after, indent=2, sort_keys=True, ensure_ascii=True).splitlines()
    # ensure_ascii: invisible characters show as \\uXXXX escapes, so the operator sees them.
    return "\n".join(difflib.unified_diff(old, new, "approved", "now", lineterm="", n=2))
