"""Pinning and review of what upstreams say: which actions an agent may see.

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

Where a connector sends its requests (and its credential) is pinned the same way. A connector whose
API description is fetched from a URL and whose manifest names no ``base_url`` takes its origin from
the description's ``servers``; that origin is pinned at the first sync, as an approved snapshot named
``<slug>.@origin`` (``origin_name``). A later description naming another origin is held like a rug
pull (``moved_origin``): the connector keeps sending to the pinned origin until an operator approves
the new one, because a fetched document must never decide where a credential goes.

Pure: the store keeps the approved snapshots; this module only compares.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, cast
from urllib.parse import urlsplit, urlunsplit

from ..primitives.sanitize import hidden_characters, instruction_flags
from ..primitives.url_secrets import shown_url
from ..vocabulary.model import Action, McpBinding, Risk

__all__ = [
    "MAX_SCHEMA_CHARS",
    "MAX_SCHEMA_NODES",
    "TOO_LARGE",
    "Finding",
    "ReviewStatus",
    "Scan",
    "Trust",
    "diff",
    "fingerprint",
    "flagged",
    "hidden_text",
    "moved_origin",
    "on_origin",
    "origin_name",
    "origin_of",
    "origin_snapshot",
    "review",
    "same_source",
    "snapshot",
    "worded_risk",
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

    @property
    def why(self) -> str:
        """Why it is held, in a few words an agent may read too (the flags themselves quote the
        upstream's text, which is the operator's to see): ``new``, ``changed since approval``, or
        the kinds of its flags (``hides text``, ``reads as instructions`` …)."""
        if self.status != "flagged":
            return {"approved": "approved", "new": "new", "changed": "changed since approval"}[self.status]
        kinds = [
            kind
            for kind, present in (
                ("too large to check", any(f.startswith(TOO_LARGE) for f in self.flags)),
                ("hides text", any(": hides text: " in f for f in self.flags)),
                ("risk its words contradict", any(f.startswith("risk: ") for f in self.flags)),
                (
                    "reads as instructions",
                    any(not f.startswith(("risk: ", TOO_LARGE)) and ": hides text: " not in f for f in self.flags),
                ),
            )
            if present
        ]
        return ", ".join(kinds) or "flagged"


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
        flags = () if trust == "auto" else tuple(_flags(action, others, trust=trust))
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
        if label == TOO_LARGE:
            found.append(f"{label}: {text}")
        elif not (text.isascii() and text.isprintable()):
            found += [f"{label}: hides text: {kind}" for kind in hidden_characters(text)]
    return tuple(dict.fromkeys(found))


def flagged(action: Action, flags: tuple[str, ...]) -> Finding | None:
    """The ``flagged`` finding of ``action`` for ``flags``; None without flags."""
    if not flags:
        return None
    shown = snapshot(action)
    return Finding(action.qualified_name, "flagged", fingerprint(shown), shown, flags)


def _flags(action: Action, other_tools: list[str], *, trust: Trust) -> list[str]:
    found: list[str] = []
    if trust == "review" and isinstance(action.binding, McpBinding):
        # The risk an upstream's annotations declare is shown to the operator who approves it: say
        # so when the words disagree ("Delete every record", marked read-only).
        worded = worded_risk((action.path, action.binding.tool), (action.summary, action.description))
        if worded is not None and _RANK[worded[0]] > _RANK[action.risk]:
            found.append(f"risk: {action.risk}, but its name or text says {worded[1]!r} ({worded[0]})")
    own = action.connector + "."
    others = [name for name in other_tools if not name.startswith(own)]
    for label, text in _texts(action):
        if label == TOO_LARGE:
            found.append(f"{label}: {text}")
        else:
            found += [f"{label}: {flag}" for flag in instruction_flags(text, other_tools=others)]
    return list(dict.fromkeys(found))


MAX_SCHEMA_NODES: Final = 50_000
"""The most objects, arrays, keys and strings of one input schema the scan reads. A schema past it is
held as too large to check: text the scan did not read must not reach an agent unread."""

MAX_SCHEMA_CHARS: Final = 2_000_000
"""The most characters of strings (keys included) of one input schema the scan reads (same reason)."""

_NAMED: Final = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
"""Keywords whose value maps names an agent sees (parameter names, mostly) to schemas."""

TOO_LARGE: Final = "input_schema: too large to check"


def _texts(action: Action) -> list[tuple[str, str]]:
    found = [("name", action.path), ("summary", action.summary), ("description", action.description)]
    spaced = action.path.replace("_", " ").replace(".", " ")
    if spaced != action.path:  # a model reads ``ignore_previous_instructions`` as words; the patterns need spaces
        found.insert(1, ("name", spaced))
    _schema_texts(action.input_schema, found)
    return found


def _schema_texts(schema: Any, found: list[tuple[str, str]]) -> None:
    """Every string of ``schema`` onto ``found``, in document order and at any depth: keys (parameter
    names, ``x-`` extensions) and values (descriptions, titles, defaults, constants, patterns,
    examples, enum members, ``$comment`` and whatever else an agent is shown). Labels say where each
    sits (``input_schema.a.description`` for parameter ``a``). Past ``MAX_SCHEMA_NODES`` or
    ``MAX_SCHEMA_CHARS`` one ``TOO_LARGE`` entry stands for the rest, which the flags then hold.

    An explicit stack, not recursion: the depth is the upstream's to choose. A subtree shared by
    several places (a resolved ``$ref``) is read once: its strings are the same wherever it shows."""
    seen: set[int] = set()
    nodes = chars = 0
    stack: list[tuple[str, Any, bool]] = [("input_schema", schema, False)]
    while stack:
        where, node, named = stack.pop()  # named: a map of names to schemas (``properties``)
        if isinstance(node, str):
            nodes, chars = nodes + 1, chars + len(node)
            found.append((where, node))
        elif isinstance(node, Mapping | list | tuple) and id(cast(object, node)) not in seen:
            seen.add(id(cast(object, node)))
            nodes += 1
            children: list[tuple[str, Any, bool]] = []
            if isinstance(node, Mapping):
                for key, value in cast("Mapping[object, Any]", node).items():
                    name = str(key)
                    nodes, chars = nodes + 1, chars + len(name)
                    if named:
                        found.append((f"{where}.properties", name))
                        children.append((f"{where}.{name}", value, False))
                    elif name in _NAMED and isinstance(value, Mapping):
                        found.append((f"{where}.key", name))
                        children.append((where, cast(object, value), True))
                    else:
                        found.append((f"{where}.key", name))
                        children.append((f"{where}.{name}", value, False))
            else:
                children = [(where, item, False) for item in cast("Sequence[Any]", node)]
            stack.extend(reversed(children))
        if nodes > MAX_SCHEMA_NODES or chars > MAX_SCHEMA_CHARS:
            found.append((TOO_LARGE, f"more than {MAX_SCHEMA_NODES:,} parts or {MAX_SCHEMA_CHARS:,} characters"))
            return


_RANK: Final[dict[Risk, int]] = {"read": 0, "write": 1, "destructive": 2}


def _forms(verbs: str) -> frozenset[str]:
    """The verbs as a name or an order uses them (``delete``, ``deletes``): not the participles,
    which describe more often than they order (``deleted records``, "for editing, use …")."""
    return frozenset(form for verb in verbs.split() for form in (verb, verb + "s", verb + "es"))


_DESTRUCTIVE_WORDS: Final = _forms(
    "delete remove destroy drop purge erase wipe truncate revoke terminate uninstall overwrite discard kill"
)
_WRITE_WORDS: Final = _forms(
    "send pay transfer create update write publish charge refund withdraw deposit upload insert modify edit "
    "execute invite approve merge deploy submit cancel archive grant purchase buy rename replace move"
)
_CAMEL: Final = re.compile(r"([a-z0-9])([A-Z])")
_WORD: Final = re.compile(r"[a-z]+")
_CLAUSES: Final = re.compile(r"[.!?;:,()\n]+|\b(?:and|then|or)\b")
_LEAD_INS: Final = frozenset(
    "this it tool will also first finally just simply please permanently immediately irreversibly silently "
    "quickly automatically that which".split()
)


def worded_risk(names: Iterable[str], prose: Iterable[str]) -> tuple[Risk, str] | None:
    """The risk the words of a tool speak of, with the word: ``destructive`` for delete, remove,
    drop, purge …, ``write`` for send, pay, transfer, create …; None when they name no such act.

    Only words where a verb stands count, so that a read's description naming what it reads
    ("lists the workspace's updates", "pull requests to merge") does not: the first word of each
    part of ``names`` (split at ``.`` and ``/``; ``deleteAll``, ``records.purge``), and the first
    word of each clause of ``prose`` (a title, a description: "Delete every record.", "Lists
    records, then deletes them"), after lead-ins such as "this tool will"."""
    starts: list[str] = []
    for name in names:
        for part in name.replace("/", ".").split("."):
            words = _WORD.findall(_CAMEL.sub(r"\1 \2", part).lower())
            starts += words[:1]
    for text in prose:
        for clause in _CLAUSES.split(_CAMEL.sub(r"\1 \2", text).lower()):
            words = [w for w in _WORD.findall(clause or "") if w not in _LEAD_INS]
            starts += words[:1]
    found: tuple[Risk, str] | None = None
    for word in starts:
        if word in _DESTRUCTIVE_WORDS:
            return "destructive", word
        if found is None and word in _WRITE_WORDS:
            found = ("write", word)
    return found


def diff(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> str:
    """A unified diff of two snapshots as indented JSON (all of ``after`` for a new action)."""
    old = json.dumps(before, indent=2, sort_keys=True, ensure_ascii=True).splitlines() if before else []
    new = json.dumps(after, indent=2, sort_keys=True, ensure_ascii=True).splitlines()
    # ensure_ascii: invisible characters show as \\uXXXX escapes, so the operator sees them.
    return "\n".join(difflib.unified_diff(old, new, "approved", "now", lineterm="", n=2))


# -- the origin a connector sends to -----------------------------------------------------------

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of an absolute URL, lowercased and without a default port: two URLs
    share an origin exactly when these are equal. ``""`` for a URL without a scheme or host."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), parts.hostname
    if not scheme or not host:
        return ""
    try:
        port = parts.port
    except ValueError:
        return ""
    where = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        where = f"{where}:{port}"
    return f"{scheme}://{where}"


def origin_name(slug: str) -> str:
    """The name connector ``slug``'s pinned origin is reviewed under; no action path can take it."""
    return f"{slug}.@origin"


def origin_snapshot(origin: str, source: str) -> dict[str, Any]:
    """What is pinned of a connector's destination: the origin, and the description URL that named it
    (the operator pointing the connector at another description pins afresh). The URL is kept as
    ``shown_url`` shows it: the snapshot is shown in reviews, and a password or token in it is no
    part of which description it is."""
    return {"origin": origin, "source": shown_url(source)}


def same_source(pinned: Mapping[str, Any], source: str) -> bool:
    """Whether the ``pinned`` snapshot was taken from the description at ``source`` (a snapshot pinned
    by an earlier build holds the URL as written)."""
    return pinned.get("source") in (shown_url(source), source)


def moved_origin(slug: str, base_url: str, pinned: Mapping[str, Any], source: str) -> Finding | None:
    """The finding that holds connector ``slug`` when ``base_url`` (named by the description at
    ``source``) is on another origin than the ``pinned`` snapshot; None when it stays on it."""
    before = str(pinned.get("origin", ""))
    now = origin_of(base_url)
    if now == before:
        return None
    shown = origin_snapshot(now, source)
    pinned = {**pinned, "source": shown_url(str(pinned.get("source", "")))}
    why = (
        f"origin: the API description now names {now} instead of {before}; its requests and credential "
        f"keep going to {before} until an operator approves the new origin"
    )
    return Finding(origin_name(slug), "changed", fingerprint(shown), shown, (why,), pinned)


def on_origin(base_url: str, origin: str) -> str:
    """``base_url``'s path (and query) on ``origin``: where a held connector keeps sending."""
    parts = urlsplit(base_url)
    pinned = urlsplit(origin)
    return urlunsplit((pinned.scheme, pinned.netloc, parts.path, parts.query, "")).rstrip("/")
