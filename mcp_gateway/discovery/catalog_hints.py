"""The bundled catalog APIs that would serve a request nothing configured serves.

"Send an email" on a gateway with GitHub alone finds GitHub's email *addresses*; SendGrid and Gmail
are one ``mcp-gateway add`` away. ``CatalogHints.suggest`` names them, for ``discover`` (the meta-tool
and the command line's) to pass on with the operator's command; it never adds anything.

The catalog's specs are too large to normalize per query, so ``scripts/build_catalog_terms.py`` keeps
each entry's name, description and its actions' index terms in ``catalog/terms.json.gz`` (its name's terms are added to
every action here: "gmail" is what a Gmail message is about). A request is matched action by action:
an action *covers* the request's words it contains (a word standing in for another, ``mail`` for
``email``, counts in part), weighted by how rare each word is across the catalog. A catalog API is
named when one of its actions covers the whole request and the best of what is configured does not
(or the ranking is unsure and it covers clearly more).
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..manifest import CATALOG_DIR, Manifest
from ..vocabulary.model import Action
from ._segment import summary_of
from ._text import identifier_terms, prose_terms, stem

__all__ = ["TERMS_FILE", "CatalogHint", "CatalogHints", "action_terms", "catalog_hint_text"]

TERMS_FILE = CATALOG_DIR / "terms.json.gz"

FULL = 0.75
"""Coverage that counts as the whole request."""

MARGIN = 0.3
"""How much more of the request a catalog API must cover than the best configured hit."""

UNSURE = 0.5
"""When the ranking itself is unsure (low confidence): the least a catalog API must cover."""

LIMIT = 3
"""At most this many catalog APIs are named."""

# Words that name one another across APIs, with how much the stand-in counts: a Gmail message *is* an
# email; a Slack message is only somewhat one.
_STAND_INS: dict[str, tuple[tuple[str, float], ...]] = {
    stem(word): tuple((stem(other), weight) for other, weight in others)
    for word, others in {
        "email": (("mail", 1.0), ("gmail", 1.0), ("mailbox", 1.0), ("message", 0.5)),
        "mail": (("email", 1.0), ("gmail", 1.0), ("message", 0.5)),
        "sms": (("text", 0.5), ("message", 0.5)),
        "text": (("sms", 0.5), ("message", 0.5)),
        "meeting": (("event", 0.5), ("webinar", 0.5)),
        "spreadsheet": (("sheet", 1.0),),
        "video": (("youtube", 0.5),),
        "payment": (("charge", 0.5), ("pay", 1.0)),
        "pay": (("payment", 1.0),),
        "call": (("voice", 0.5),),
    }.items()
}


def action_terms(action: Action) -> str:
    """An action's index terms (its path's and its summary's), sorted and space-separated."""
    return " ".join(sorted(set(identifier_terms(action.path)) | set(prose_terms(summary_of(action)))))


@dataclass(frozen=True, slots=True)
class CatalogHint:
    id: str
    """The catalog entry (``mcp-gateway add <id>``)."""
    name: str
    description: str
    coverage: float

    @property
    def add(self) -> str:
        """The operator's command that adds it."""
        return f"mcp-gateway add {self.id}"

    def payload(self) -> dict[str, str]:
        """What ``discover`` answers for it (``core.results.CatalogSuggestion``'s fields)."""
        return {"catalog": self.id, "name": self.name, "description": self.description, "add": self.add}


@dataclass(frozen=True, slots=True)
class _Entry:
    id: str
    name: str
    description: str
    actions: tuple[frozenset[str], ...]


class CatalogHints:
    """The bundled catalog's actions as terms, read on first use; see the module docstring."""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        self._data = data
        """``terms.json.gz``'s content, given (tests), else read on first use."""

    @cached_property
    def _entries(self) -> tuple[_Entry, ...]:
        data = self._data
        if data is None:
            try:
                data = json.loads(gzip.decompress(TERMS_FILE.read_bytes()))
            except (OSError, ValueError):
                data = {}
        entries: list[_Entry] = []
        for key, about in sorted(data.items()) if isinstance(data, dict) else ():
            if not isinstance(about, dict):
                continue
            name, description = str(about.get("name") or key), str(about.get("description") or "")
            named = frozenset(identifier_terms(name)) | frozenset(identifier_terms(key))
            listed = about.get("actions")
            actions = (
                (
                    named | frozenset(prose_terms(description)),
                    *(named | frozenset(line.split()) for line in listed if isinstance(line, str)),
                )
                if isinstance(listed, list)
                else (named | frozenset(prose_terms(description)),)
            )
            entries.append(_Entry(key, name, description, actions))
        return tuple(entries)

    @cached_property
    def _postings(self) -> dict[str, list[tuple[int, int]]]:
        """Each term's (entry, action) positions."""
        postings: dict[str, list[tuple[int, int]]] = {}
        for e, entry in enumerate(self._entries):
            for a, action in enumerate(entry.actions):
                for term in action:
                    postings.setdefault(term, []).append((e, a))
        return postings

    @cached_property
    def _idf(self) -> dict[str, float]:
        count = sum(len(entry.actions) for entry in self._entries)
        return {term: math.log(1 + count / len(where)) for term, where in self._postings.items()}

    def suggest(
        self, manifest: Manifest, query: str, configured: Iterable[Action], *, unsure: bool
    ) -> list[CatalogHint]:
        """The catalog APIs not in ``manifest`` that serve ``query`` better than ``configured`` (the
        best configured hits), best first; none when what is configured serves it."""
        idf = self._idf
        wanted = [term for term in dict.fromkeys(prose_terms(query)) if _weight(term, idf) > 0]
        if len(wanted) < 2:
            return []  # one word says too little about which API to add
        total = sum(_weight(term, idf) for term in wanted)
        names = {cfg.slug: frozenset(identifier_terms(cfg.name or cfg.slug)) for cfg in manifest.connectors}
        mine = max(
            (
                _coverage(wanted, idf, frozenset(action_terms(a).split()) | names.get(a.connector, frozenset()), total)
                for a in configured
            ),
            default=0.0,
        )
        floor = max(UNSURE if unsure else FULL, mine + MARGIN)
        if floor > 1.0:
            return []
        taken = {cfg.catalog for cfg in manifest.connectors if cfg.catalog} | {cfg.slug for cfg in manifest.connectors}
        covered: dict[tuple[int, int], float] = {}
        for term in wanted:
            weight = _weight(term, idf)
            shares: dict[tuple[int, int], float] = {}
            for other, share in ((term, 1.0), *_STAND_INS.get(term, ())):
                for where in self._postings.get(other, ()):
                    shares[where] = max(shares.get(where, 0.0), share)
            for where, share in shares.items():
                covered[where] = covered.get(where, 0.0) + weight * share
        best: dict[int, float] = {}
        for (e, _), weight in covered.items():
            best[e] = max(best.get(e, 0.0), weight / total)
        found = [
            CatalogHint(entry.id, entry.name, entry.description, round(best[e], 3))
            for e, entry in enumerate(self._entries)
            if entry.id not in taken and best.get(e, 0.0) >= floor
        ]
        found.sort(key=lambda hint: (-hint.coverage, hint.id))
        return found[:LIMIT]


def _weight(term: str, idf: dict[str, float]) -> float:
    """How rare a word is across the catalog (a word it never uses: as rare as its stand-ins)."""
    return idf.get(term) or max((idf.get(other, 0.0) for other, _ in _STAND_INS.get(term, ())), default=0.0)


def _known(term: str, idf: dict[str, float]) -> bool:
    return term in idf or any(other in idf for other, _ in _STAND_INS.get(term, ()))


def _coverage(wanted: list[str], idf: dict[str, float], terms: frozenset[str], total: float) -> float:
    """The share of the request's weight that ``terms`` cover (a stand-in word at its weight)."""
    if total <= 0:
        return 0.0
    covered = 0.0
    for term in wanted:
        weight = _weight(term, idf)
        if term in terms:
            covered += weight
        else:
            covered += weight * max((share for other, share in _STAND_INS.get(term, ()) if other in terms), default=0.0)
    return covered / total


def catalog_hint_text(hints: list[CatalogHint], hint: str | None) -> str | None:
    """``discover``'s hint with the catalog APIs that would serve the request added (``hint`` alone
    when there are none)."""
    if not hints:
        return hint
    named = ", ".join(f"{h.name} ({h.add})" for h in hints)
    return (
        f"{hint + ' ' if hint else ''}Nothing configured here does this well; the bundled catalog has {named}. "
        "Only an operator can add a connector: tell your user."
    )
