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

import functools
import gzip
import json
import math
import re
import shlex
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from typing import Any

import yaml

from ..manifest import CATALOG_DIR, Manifest
from ..vocabulary.model import Action
from ._products import EVERYDAY_NAMES
from ._segment import summary_of
from ._text import PHRASES, SYNONYMS, VERBS, fold_name, identifier_terms, keep, prose_terms, prose_words, stem

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


# Two words that name a kind of product together ("a text message" is an SMS, "a video call" a meeting),
# beside the phrases ``discover`` reads (``_text.PHRASES``).
_KINDS: dict[tuple[str, str], tuple[str, ...]] = {
    pair: tuple(stem(word) for word in words.split())
    for pair, words in {
        ("text", "message"): "sms",
        ("text", "messages"): "sms",
        ("video", "call"): "video meeting",
        ("video", "meeting"): "video meeting",
        ("phone", "call"): "voice call",
        ("cloud", "storage"): "cloud storage file",
        ("feature", "flag"): "feature flag",
        ("feature", "toggle"): "feature flag",
        ("roll", "out"): "rollout",
        ("send", "money"): "transfer",
        ("wire", "money"): "transfer",
        ("credit", "card"): "card payment",
        ("team", "chat"): "team chat",
        ("virtual", "machine"): "virtual machine",
        ("virtual", "machines"): "virtual machine",
        ("exchange", "rate"): "exchange rate",
        ("project", "management"): "project management",
        ("design", "file"): "design file",
        ("bank", "balance"): "bank balance",
    }.items()
}


# Words that name a kind of product alone ("an SMS", "my calendar").
_KIND_WORDS = frozenset(stem(word) for word in "sms mms email spreadsheet calendar webinar kubernetes website".split())


_FLAGS = {"base_url": "--base-url"}
"""The ``add`` option that sets each connector key a catalog entry may leave to the operator."""


@functools.cache
def fill_in(entry: str) -> dict[str, str]:
    """The keys catalog entry ``entry`` leaves to the operator, each with its example (its ``fill_in``)."""
    try:
        data = yaml.safe_load((CATALOG_DIR / f"{entry}.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    found = data.get("fill_in") if isinstance(data, dict) else None
    return (
        {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(found, dict) else {}
    )


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
    manifest: str | None = None
    """The manifest file the gateway serves, as the operator named it (None: the bundled default)."""

    @property
    def add(self) -> str:
        """The operator's command that adds it, as it must be typed to work: with the values no default can
        serve (Jira's site), into the manifest the gateway serves; on the bundled default (read-only), after
        writing it out as ``./gateway.yaml`` (which a restarted ``serve`` in that folder then reads)."""
        words = ["mcp-gateway", "add", self.id]
        for key, example in fill_in(self.id).items():
            if key in _FLAGS:
                words += [_FLAGS[key], shlex.quote(example)]
        if self.manifest is None:
            return f"mcp-gateway init --default && {' '.join(words)}"
        return " ".join([*words, "--manifest", shlex.quote(self.manifest)])

    def payload(self) -> dict[str, str]:
        """What ``discover`` answers for it (``core.results.CatalogSuggestion``'s fields)."""
        return {"catalog": self.id, "name": self.name, "description": self.description, "add": self.add}


@dataclass(frozen=True, slots=True)
class _Entry:
    id: str
    name: str
    description: str
    actions: tuple[frozenset[str], ...]
    about: frozenset[str] = frozenset()
    """Its description's terms: what the API is, which every action of it shares in part."""


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
            entries.append(_Entry(key, name, description, actions, frozenset(prose_terms(description))))
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
    def _everyday(self) -> dict[str, frozenset[str]]:
        """What each product named by an everyday word is (its description's terms), by that word."""
        return {entry.name.lower(): entry.about for entry in self._entries if entry.name.lower() in EVERYDAY_NAMES}

    @cached_property
    def _idf(self) -> dict[str, float]:
        count = sum(len(entry.actions) for entry in self._entries)
        return {term: math.log(1 + count / len(where)) for term, where in self._postings.items()}

    def suggest(
        self,
        manifest: Manifest,
        query: str,
        configured: Iterable[Action],
        *,
        unsure: bool,
        visible: Collection[str] | None = None,
    ) -> list[CatalogHint]:
        """The catalog APIs not in ``manifest`` that serve ``query`` better than ``configured`` (the
        best configured hits), best first; none when what is configured serves it. ``visible``: the
        connectors the caller may use; the others count as not configured, so that what this caller
        is told (which APIs to add) says nothing of connectors kept from it."""
        connectors = [cfg for cfg in manifest.connectors if visible is None or cfg.slug in visible]
        idf = self._idf
        query = _products_named(query, self._everyday)
        wanted = _wanted(query, idf)
        # A kind of product something configured already is ("an SMS" with Twilio there) names nothing new.
        served = [frozenset(prose_terms(cfg.description or "")) for cfg in connectors]
        kinds = [kind for kind in _kinds(query) if not any(about.issuperset(kind) for about in served)]
        if len(wanted) < 2 and all(_KIND_WORDS.issuperset(kind) for kind in kinds):
            return []  # one word says too little about which API to add ("send money" is two)
        total = sum(weight for weight, _ in wanted)
        names = {cfg.slug: frozenset(identifier_terms(cfg.name or cfg.slug)) for cfg in connectors}
        mine = max(
            (
                _coverage(wanted, frozenset(action_terms(a).split()) | names.get(a.connector, frozenset()), total)
                for a in configured
            ),
            default=0.0,
        )
        floor = max(UNSURE if unsure else FULL, mine + MARGIN)
        taken = {cfg.catalog for cfg in connectors if cfg.catalog} | {cfg.slug for cfg in connectors}
        # A connector the manifest names as the product (``name: Jira`` over a hand-written source) is it.
        named_as = {fold_name(cfg.name) for cfg in connectors if cfg.name}
        said = set(prose_words(query))
        slugs = {cfg.slug.lower() for cfg in connectors}
        if not said.isdisjoint(slugs) or any(
            (entry.id in taken or fold_name(entry.name) in named_as) and _names(entry, said) for entry in self._entries
        ):
            # The request names a product that is configured, or a connector by its slug ("in tix"):
            # another API of the catalog is not what it asks for.
            return []
        # An action covers a word itself, or in part through what its API is (its description): "send a
        # text message" is Twilio's message create, on an API of text messages.
        shared = [
            sum(weight * _ABOUT_SHARE * _share(alternatives, entry.about) for weight, alternatives in wanted)
            for entry in self._entries
        ]
        covered: dict[tuple[int, int], float] = {}
        for weight, alternatives in wanted:
            shares: dict[tuple[int, int], float] = {}
            for other, share in alternatives:
                for where in self._postings.get(other, ()):
                    shares[where] = max(shares.get(where, 0.0), share)
            for (e, a), share in shares.items():
                beyond = share - _ABOUT_SHARE * _share(alternatives, self._entries[e].about)
                if beyond > 0:
                    covered[(e, a)] = covered.get((e, a), 0.0) + weight * beyond
        best: dict[int, float] = {e: shared[e] / total for e in range(len(self._entries)) if shared[e] > 0}
        for (e, _), weight in covered.items():
            best[e] = max(best.get(e, 0.0), (shared[e] + weight) / total)
        found: list[tuple[bool, CatalogHint]] = []
        for e, entry in enumerate(self._entries):
            # A product the request names, or whose kind it names ("a feature flag", "a text message"), needs
            # less, and comes first.
            named = _named_floor(entry, said, kinds, mine)
            if entry.id in taken or fold_name(entry.name) in named_as:
                continue
            if e in best and best[e] >= (floor if named is None else named):
                hint = CatalogHint(entry.id, entry.name, entry.description, round(best[e], 3))
                found.append((named is not None, hint))
        if any(named for named, _ in found):
            found = [item for item in found if item[0]]  # what the request names, not what it also mentions
        found.sort(key=lambda item: (-item[1].coverage, item[1].id))
        return [hint for _, hint in found[:LIMIT]]


def _names(entry: _Entry, said: set[str]) -> bool:
    """Whether the request's words ``said`` name the entry's product ("in Jira", "our google drive")."""
    words = [word.lower() for word in entry.name.split()]
    return entry.id.replace("-", "") in said or (len(words) > 0 and all(word in said for word in words))


def _named_floor(entry: _Entry, said: set[str], kinds: list[tuple[str, ...]], mine: float) -> float | None:
    """The least share of the request an entry must cover when the request names it ("in Jira", "our
    google drive": as much as an unsure ranking would) or a kind of product (``_kinds``) its description
    says it is ("a video meeting": as much as what is configured covers, whatever the rest of the
    request is about); None when the request names neither."""
    if _names(entry, said):
        return max(UNSURE, mine)
    if any(entry.about.issuperset(kind) for kind in kinds):
        return mine
    return None


_AS_PRODUCT = frozenset("in on via with to into from using through our my your their".split())
"""Words after which an everyday word that names a product is that product ("post in slack")."""


def _products_named(query: str, about: Mapping[str, frozenset[str]]) -> str:
    """``query`` without the words that name a product of ``EVERYDAY_NAMES`` but do not here: "zoom in on
    the picture", "put the shoes in a box", "the square of 12", "wise words". Such a word names the
    product written capitalized inside a sentence ("a Zoom meeting"), right after a word like "in" ("post
    in slack"), or before a word of what the product is (``about``: its entry's description's terms by
    its name lowercased): "a zoom meeting", "the slack channel"."""

    def ordinary(match: re.Match[str]) -> bool:
        word, before = match.group(0), query[: match.start()].rstrip()
        if word[:1].isupper() and before[-1:] not in ("", ".", "!", "?", ":"):
            return False
        previous = re.findall(r"[A-Za-z]+", before[-20:])
        following = re.findall(r"[A-Za-z]+", query[match.end() : match.end() + 20])
        kind = about.get(word.lower(), frozenset())
        return not (previous and previous[-1].lower() in _AS_PRODUCT) and not (
            following and stem(following[0].lower()) in kind
        )

    return _EVERYDAY.sub(lambda m: " " if ordinary(m) else m.group(0), query)


_EVERYDAY = re.compile(rf"(?<![A-Za-z])(?i:{'|'.join(sorted(EVERYDAY_NAMES))})(?![A-Za-z])")


def _kinds(query: str) -> list[tuple[str, ...]]:
    """The kinds of product a request names (``_KINDS``), as the terms each means; a request opening with
    "text" asks for an SMS ("text the customer that…")."""
    words = prose_words(query)
    pairs = [kind for pair in pairwise(words) if (kind := _KINDS.get(pair))]
    opening = [(stem("sms"),)] if words[:1] == ["text"] else []
    return [*pairs, *opening, *((term,) for word in words if (term := stem(word)) in _KIND_WORDS)]


_SYNONYM_SHARE = 0.75
"""How much a synonym discover knows counts for the word it stands in for ("ticket" for an issue)."""


def _wanted(query: str, idf: dict[str, float]) -> list[tuple[float, tuple[tuple[str, float], ...]]]:
    """The request's words, each as its weight (how rare it is across the catalog) and the terms that
    cover it with their shares: itself, its stand-ins and synonyms; a two-word phrase ("turn on",
    "video call") as one word that its meaning's terms cover. A word the catalog never uses, and nothing
    stands in for, says nothing about which API serves the request."""
    words = prose_words(query)
    items: dict[str, tuple[float, tuple[tuple[str, float], ...]]] = {}
    phrased: set[int] = set()
    for i, pair in enumerate(pairwise(words)):
        kind, meaning = _KINDS.get(pair), PHRASES.get(pair)
        if kind:
            # What a product of that kind is about, each word as rare as the rarest: "video meeting".
            phrased.update((i, i + 1))
            weight = max(idf.get(term, 0.0) for term in kind)
            items.update({term: (weight, ((term, 1.0),)) for term in kind if weight > 0 and term not in items})
        elif meaning:
            # What the two words ask for, in any of its words ("turn on": enable, or an update).
            phrased.update((i, i + 1))
            weight = max((idf.get(term, 0.0) for term in meaning), default=0.0)
            if weight > 0:
                items[" ".join(pair)] = (weight, tuple((term, 1.0) for term in meaning))
    for i, word in enumerate(words):
        term = stem(word)
        if i in phrased or not keep(word) or term in items:
            continue
        # A noun's synonyms, not a verb's ("post" is as often an HTTP method's name as a sending); where a
        # stand-in says how much a word counts for this one, it decides (a Slack message is only somewhat an
        # email).
        shares = {other: _SYNONYM_SHARE for other in SYNONYMS.get(term, ()) if term not in VERBS}
        shares.update(_STAND_INS.get(term, ()))
        shares.pop(term, None)
        alternatives = ((term, 1.0), *shares.items())
        weight = idf.get(term) or max((idf.get(other, 0.0) * share for other, share in alternatives[1:]), default=0.0)
        if weight > 0:
            items[term] = (weight, alternatives)
    return list(items.values())


_ABOUT_SHARE = 0.75
"""How much a word of an API's description counts for each of its actions."""


def _share(alternatives: tuple[tuple[str, float], ...], terms: frozenset[str]) -> float:
    """How much of a request's word ``terms`` cover: its best alternative among them."""
    return max((share for other, share in alternatives if other in terms), default=0.0)


def _coverage(wanted: list[tuple[float, tuple[tuple[str, float], ...]]], terms: frozenset[str], total: float) -> float:
    """The share of the request's weight that ``terms`` cover (a stand-in at its share)."""
    if total <= 0:
        return 0.0
    return sum(weight * _share(alternatives, terms) for weight, alternatives in wanted) / total


def catalog_hint_text(hints: list[CatalogHint], hint: str | None) -> str | None:
    """``discover``'s hint with the catalog APIs that would serve the request added (``hint`` alone
    when there are none)."""
    if not hints:
        return hint
    named = ", ".join(
        f"{h.name} ({h.add}{'; with their own ' + ', '.join(fill_in(h.id)) if fill_in(h.id) else ''})" for h in hints
    )
    # On the bundled default the command writes ./gateway.yaml, which only a serve started anew reads.
    restart = " and restart mcp-gateway serve in that folder" if any(h.manifest is None for h in hints) else ""
    return (
        f"{hint + ' ' if hint else ''}Nothing configured here does this well; the bundled catalog has {named}. "
        f"Only an operator can add a connector{restart}: tell your user."
    )
