"""``DiscoveryIndex``: BM25F over actions in per-connector segments, a second ranking stage, name lookup."""

from __future__ import annotations

import bisect
import functools
import heapq
import math
import re
from array import array
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, pairwise
from typing import Any, Literal

from ..vocabulary.model import Action
from . import _rank
from ._message import (
    MANY_WORDS,
    asked_kind,
    asks,
    quoted,
    quoted_spans,
    wants_many,
    without_declined,
)
from ._products import PRODUCTS, named_products, unserved_hint
from ._segment import COUNT_MASK, Segment, build_segment
from ._segment_cache import SegmentCache
from ._spelling import MAX_LENGTH, correction, edits, english_words
from ._suggest import suggest
from ._text import (
    PHRASES,
    QUERY_WORDS,
    STOPWORDS,
    SYNONYMS,
    VERB_KIND,
    VERBS,
    compatible,
    fold_name,
    identifier_terms,
    keep,
    original_case,
    prose_words,
    raw_words,
    stem,
)
from ._twins import asked_first, group_twins, none_of_kind, opening_kind

__all__ = ["LOW_CONFIDENCE_HINT", "MAX_QUERY_CHARS", "DiscoveryIndex", "SearchResult", "low_hint"]

MAX_QUERY_CHARS = 8000
"""Longer queries are cut here; everything up to it is searched (a pasted task, a long BFCL question)."""

MAX_QUERY_TERMS = 48
"""Index terms of a query that are scored, at most: a long query keeps its most telling ones (query
weight times idf), wherever they stand. Keeping the first 48 instead cost BFCL non-live 1.3 points
of R@5: a long question often states what it wants at its end."""

MAX_QUERY_WORDS = 400
"""Distinct words of a query that are analyzed at all, in order of appearance (bounds the work on 8,000 characters)."""

_LATER_SENTENCE_WEIGHT = 0.8
"""Query weight of a word first met after the first sentence: the first sentence usually says what is wanted."""

CONFIDENCE_FLOOR = 0.2
"""The best hit's name and summary must carry at least this share of the query's idf mass (see
``_coverage``) for ``confidence: high``; below it the agent is told to rephrase or name the connector."""

LOW_CONFIDENCE_HINT = (
    'Nothing matches this well. Rephrase with the thing to act on ("refund a charge", "list channels"), '
    'or name the connector ("in Slack"); `connectors` lists what is available.'
)


def low_hint(unserved: Sequence[str]) -> str:
    """The hint of an unsure answer: the products it names that nothing here serves, when it names some."""
    return unserved_hint(list(unserved)) if unserved else LOW_CONFIDENCE_HINT


MAX_CORRECTED_WORDS = 8
"""Distinct unknown words of a query that are tried for a typo, at most (a long message names many
things no action mentions: people, products, places)."""

_TYPO_DF = 1
"""A query word that this many actions use at most, and that is no English word, may still be a slip:
specs have typos of their own ("uplaod"), and a user's same slip should reach the word it meant."""

_TYPO_RATIO = 20
"""How much commoner than the written word (in actions using it) its repair must be when the catalog
uses the written word too."""

_DERIVED_MIN = 7
"""Letters an unknown term needs before name words sharing all but its last are read as its derivatives
("subscrib" -> "subscription"; "transfe" would reach too far)."""

_NOT_AN_ASK = frozenset({("make", "sure"), ("make", "certain")})
"""Two words whose first is no operation ("make sure he can't log in" makes nothing): it is skipped."""

_ADJECTIVES = frozenset({"open", "new"})
"""Words that ask to make something as verbs ("open a ticket", "new issue") but describe it as adjectives
("all open bugs", "the new dashboard"), where they say what the request is about, not what it does."""
_BEFORE_ADJECTIVE = frozenset("all any my our the still currently are is which what many".split())
"""Words after which ``_ADJECTIVES`` describe (``_adjectives``)."""

_ACRONYM_LETTERS = 5
"""A word in capitals this long at most is an acronym ("BRCA", "ARIMA"), not a shouted slip ("MEETNG")."""

_CORRECTIONS_KEPT = 4096
"""Typo repairs remembered per word until the index changes (queries are agent text: bounded)."""

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n\s*\n")
_WORD = re.compile(r"[A-Za-z]+")
_CHANNEL_MENTION = re.compile(r"(?<![\w&])#[A-Za-z][\w-]*")
_ISSUE_KEY = re.compile(
    r"(?<![\w-])(?!(?:UTF|SHA|ISO|RFC|GPT|AES|RSA|CVE|COVID|HTTP|TLS|SSL|IPV|MP|PCI|SOC|MD|ES|PEP|CIS)-)"
    r"[A-Z][A-Z0-9]{1,9}-[0-9]{1,6}(?![\w-])"
)
"""A tracker's issue key ("OPS-12", "PAY-203"): project key, dash, number, as Jira, Linear and YouTrack
write them; not a standard's or an algorithm's name ("UTF-8", "SHA-256", "ISO-8601", "GPT-4")."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    """What ``DiscoveryIndex.find`` answers: the ranked hits, how sure the index is, and near-twins.

    ``confidence`` is ``"low"`` when no hit covers enough of the query (``CONFIDENCE_FLOOR``), or there
    is none; ``hint`` then says how to ask better. ``twins`` maps a hit's qualified name to the other
    hits that act on the same object with another verb (``customers.create`` / ``customers.delete``),
    and ``hits`` keeps each such group side by side, at the place of its best member.
    """

    hits: list[tuple[Action, float]]
    confidence: Literal["high", "low"]
    hint: str | None = None
    twins: dict[str, list[str]] = field(default_factory=dict)
    named: frozenset[str] = frozenset()
    """The visible connectors the query names ("in Slack"): a prior the hybrid fusion applies too."""
    vector: Any = None
    """The query's unit vector when the answer is hybrid (what ``discover`` learns from use compares)."""
    unserved: tuple[str, ...] = ()
    """Products the query names that no searched connector is or mentions (``_products``): the answer
    is then unsure whatever its scores, and its hint says so."""
    asked: str | None = None
    """The kind of operation the request's opening verb asks for (``opening_kind``), for the fusion's
    last word between near-twins (``asked_first``)."""


_CONTEXT_WEIGHT = 0.5
"""Query weight of a word found only outside the sentences that make a message's request (``_message.asks``)."""

_MANY_TERMS = tuple(stem(word) for word in MANY_WORDS)
"""Added to a request for many things at once (``_message.wants_many``), at ``_MANY_WEIGHT``."""

_SHAPE_WEIGHT = 0.5
"""Query weight of what a query's shape says it acts on: "issue" for a tracker's issue key ("assign PAY-12"),
"channel" for a ``#name`` mention. As good as the word half written: at a synonym's weight "asign PAY-12 to
mikael" came behind four phone-number assignments."""

_QUOTED_WEIGHT = 0.25
"""Query weight of a word in quotes: a name or a value, which may still match (a label called "bug"), but
says nothing of the operation."""

_MANY_WEIGHT = 0.75
"""Query weight of ``_MANY_TERMS``: a request that lists many things says "bulk" as plainly as if it
wrote it, but a synonym's weight lost to the single operation's shorter name."""

_SYNONYM_WEIGHT = 0.375
"""Query weight of a synonym, a phrase's meaning or a word form relative to a word the agent wrote."""

_FORM_WEIGHT = 0.375
"""Query weight of another form of a written word ("reviewer" for "review")."""

_AGENT_SUFFIXES = ("er", "or", "r")
"""``review`` <-> ``reviewer``, ``contribute`` <-> ``contributor``: the stemmer keeps agent nouns whole
(stripping "-er" breaks "user" and "owner"); the query side tries them when the index has them."""

_MAX_IDS = 1 << 32  # postings hold ids as unsigned 32-bit ints

_PRUNE_MIN = 512
"""Postings the lists ``_pruned`` leaves unread must hold at least (the commonest alone, for it to try):
below it, reading them costs less than proving they can be left."""

_fold_slug = functools.lru_cache(maxsize=4096)(fold_name)
"""``fold_name`` of a connector slug, remembered: every query compares the visible slugs with its words."""


_SLUG_PARTS = re.compile(r"[-_.]+")


@functools.lru_cache(maxsize=4096)
def _slug_words(slug: str) -> tuple[str, ...]:
    """A connector slug's words ("google-calendar" -> google, calendar), remembered like ``_fold_slug``."""
    return tuple(part for part in _SLUG_PARTS.split(slug.lower()) if part)


_SORT_MAX = 2000
"""Up to this many scores, ``_kth`` sorts them all (see there)."""

_MARGIN = 1e-9
"""Relative slack on ``_pruned``'s bounds: far above the rounding of sums of at most 48 terms (~1e-14),
so a bound that proves a document out never rests on how its floats were added."""


@dataclass(frozen=True, slots=True)
class _Postings:
    """One query term's postings in the searched segments, with what they weigh in this query."""

    df: int
    """Documents holding the term in the whole index: the summation order does not depend on the view."""
    term: str
    factor: float
    """idf times the query weight: a posting adds ``factor * weight``."""
    columns: list[tuple[array[int], array[float]]]
    """One ``(doc ids, weights)`` per segment holding the term, in id order; ids ascend in each."""
    length: int
    """Postings in all ``columns``."""


class DiscoveryIndex:
    """BM25F search over actions, kept per connector so that one connector can be re-indexed alone.

    Not thread-safe: the gateway mutates and queries it from one event loop. A rebuild constructs the
    new segment completely before swapping it in, so a failed rebuild leaves the old one serving.

    Example:
        index = DiscoveryIndex()
        index.replace_connector("github", actions)
        index.search("create an issue", limit=5, connectors={"github"})
    """

    __slots__ = (
        "_about",
        "_corrections",
        "_df",
        "_idf",
        "_maxima",
        "_name_df",
        "_name_vocab",
        "_next_id",
        "_ordered",
        "_segments",
        "_size",
        "_slugs_by_fold",
        "_starts",
        "_vocabulary_words",
        "cache",
    )

    def __init__(self, cache: SegmentCache | None = None) -> None:
        self.cache = cache
        """Where built segments are kept between starts (``replace_connector``'s ``fingerprint``)."""
        self._segments: dict[str, Segment] = {}
        self._about: dict[str, frozenset[str]] = {}  # slug -> the words of its name, catalog and description
        # Segments by ascending ``start`` and those starts, to map a global id to its action by bisection.
        self._ordered: list[Segment] = []
        self._starts: list[int] = []
        self._slugs_by_fold: dict[str, list[str]] = {}
        self._df: dict[str, int] = {}
        self._name_df: dict[str, int] = {}  # term -> how many segments use it in an action name
        self._idf: dict[str, float] = {}
        self._maxima: dict[str, float] = {}  # term -> its largest weight in any segment (``_pruned``)
        self._name_vocab: list[str] | None = None
        self._vocabulary_words: frozenset[str] | None = None
        self._corrections: dict[str, str | None] = {}
        # Ids are never reused, so a stale id can never alias a newer action, and a new segment always
        # sorts last in ``_ordered``. 2**32 ids is thousands of years of reloading a large catalog.
        self._next_id = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    # -- maintenance -----------------------------------------------------------------------

    def replace_connector(self, slug: str, actions: Sequence[Action], *, fingerprint: str | None = None) -> None:
        """(Re)index one connector's actions; every other connector's postings stay as they are.
        With the catalog's ``fingerprint`` (see ``SegmentCache``), a segment kept by an earlier start
        is read back instead of built, and one built now is kept.

        Raises:
            ValueError: an action belongs to another connector, or two actions share a path. The
                index is unchanged then.
        """
        seen: set[str] = set()
        for action in actions:
            if action.connector != slug:
                raise ValueError(f"action {action.qualified_name!r} does not belong to connector {slug!r}")
            if action.path in seen:
                raise ValueError(f"connector {slug!r} has two actions with path {action.path!r}")
            seen.add(action.path)
        self._check_room(len(actions))
        self._install(self._segment(slug, actions, fingerprint))

    def add_kept(self, slug: str, actions: Sequence[Action], *, fingerprint: str) -> list[str] | None:
        """Index one connector from the segment kept for its catalog, reading none of its actions:
        ``actions`` decodes each on first use (``store.catalog_lines``), and only the ones a search
        ranks are. The paths the kept segment indexes, in order, for ``actions`` to check what it
        decodes against; None (and the index unchanged) when no segment is kept for this catalog."""
        if self.cache is None:
            return None
        self._check_room(len(actions))
        segment = self.cache.load(slug, fingerprint, self._next_id, actions, lazy=True)
        if segment is None:
            return None
        self._install(segment)
        return list(segment.by_path)  # positions in order: built from ``enumerate``

    def _check_room(self, count: int) -> None:
        if self._next_id + count > _MAX_IDS or count > COUNT_MASK:
            raise ValueError("discovery index id space exhausted; restart the gateway")

    def _install(self, segment: Segment) -> None:
        slug, actions = segment.slug, segment.actions
        self._next_id += len(actions)
        self._unindex(slug)
        self._segments[slug] = segment
        self._ordered.append(segment)
        self._starts.append(segment.start)
        self._slugs_by_fold.setdefault(fold_name(slug), []).append(slug)
        self._size += len(actions)
        _add_counts(self._df, ((term, span & COUNT_MASK) for term, span in segment.spans.items()), 1)
        _add_counts(self._name_df, ((term, 1) for term in segment.name_terms), 1)
        self._changed()

    def _segment(self, slug: str, actions: Sequence[Action], fingerprint: str | None) -> Segment:
        if self.cache is None or fingerprint is None:
            return build_segment(slug, self._next_id, actions)
        segment = self.cache.load(slug, fingerprint, self._next_id, actions)
        if segment is None:
            segment = build_segment(slug, self._next_id, actions)
            self.cache.save(segment, fingerprint)
        return segment

    def remove_connector(self, slug: str) -> None:
        """Forget one connector; a slug that is not indexed is a no-op."""
        self._unindex(slug)

    def _unindex(self, slug: str) -> None:
        segment = self._segments.pop(slug, None)
        if segment is None:
            return
        position = bisect.bisect_left(self._starts, segment.start)
        del self._ordered[position], self._starts[position]
        folded = fold_name(slug)
        self._slugs_by_fold[folded].remove(slug)
        if not self._slugs_by_fold[folded]:
            del self._slugs_by_fold[folded]
        self._size -= len(segment.actions)
        _add_counts(self._df, ((term, span & COUNT_MASK) for term, span in segment.spans.items()), -1)
        _add_counts(self._name_df, ((term, 1) for term in segment.name_terms), -1)
        self._changed()

    def _changed(self) -> None:
        # idf depends on N and df, both global: drop the cache rather than patch it.
        self._idf.clear()
        self._maxima.clear()
        self._name_vocab = None
        self._vocabulary_words = None
        self._corrections.clear()

    def _action(self, doc_id: int) -> Action:
        segment = self._ordered[bisect.bisect_right(self._starts, doc_id) - 1]
        return segment.actions[doc_id - segment.start]

    def _features(self, doc_id: int) -> tuple[str, str, str, str, str]:
        """What the second stage reads of one action: its exact words, name, parameter, name+summary and
        response field terms."""
        segment = self._ordered[bisect.bisect_right(self._starts, doc_id) - 1]
        p = doc_id - segment.start
        return (segment.exact[p], segment.names[p], segment.params[p], segment.about[p], segment.returns[p])

    # -- lookup ----------------------------------------------------------------------------

    def get(self, qualified_name: str) -> Action | None:
        """The action with exactly this qualified name."""
        slug, _, path = qualified_name.partition(".")
        segment = self._segments.get(slug)
        position = segment.by_path.get(path) if segment is not None else None
        return None if segment is None or position is None else segment.actions[position]

    def resolve(self, name: str) -> Action | None:
        """The action whose qualified name matches ``name`` up to case and ``_``/``-``/camelCase spelling.

        Dots still separate segments: ``GitHub.Repos.getContent`` finds ``github.repos.get_content``, but
        ``github.repos_get_content`` finds nothing. When several actions fold to the same key
        (``a.get_x`` and ``a.getx``), the one equal to ``name`` up to case wins; if that does not settle
        it, None, so an ambiguous guess never runs the wrong action. Full-width and other compatibility
        forms read as the plain letters (``compatible``).
        """
        exact = self.get(name)
        if exact is not None:
            return exact
        name = compatible(name)  # after the exact look-up, which every call by its real name takes
        folded_slug, _, folded_path = fold_name(name).partition(".")
        found: list[Action] = []
        for slug in self._slugs_by_fold.get(folded_slug, ()):
            segment = self._segments[slug]
            hit = segment.by_folded.get(folded_path)
            positions = (hit,) if isinstance(hit, int) else hit or ()
            found.extend(segment.actions[position] for position in positions)
        if not found:
            # ``slack.chat.postMessage`` for ``slack.chat_post_message``: dots inside the path read as
            # any separator when that names exactly one action.
            flat = folded_path.replace(".", "")
            for slug in self._slugs_by_fold.get(folded_slug, ()):
                segment = self._segments[slug]
                found.extend(a for a in segment.actions if fold_name(a.path).replace(".", "") == flat)
        if len(found) > 1:
            lowered = name.strip().lower()
            found = [action for action in found if action.qualified_name.lower() == lowered]
        return found[0] if len(found) == 1 else None

    # -- search ----------------------------------------------------------------------------

    def catalog_words(self, query: str, limit: int = 32) -> list[str]:
        """The query's words that are words of the catalog (their index term is in some action), in
        order, each once, at most ``limit``: what it asks for in the catalog's own vocabulary. A key or
        token pasted into a query is no such word, so this is what may be kept of a query
        (``core.use_memory``)."""
        words = [word for word in dict.fromkeys(raw_words(query[:MAX_QUERY_CHARS])) if stem(word) in self._df]
        return words[:limit]

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        connectors: Collection[str] | None = None,
        allow: Callable[[Action], bool] | None = None,
    ) -> list[tuple[Action, float]]:
        """Actions ranked by relevance to a natural-language ``query``, best first.

        Args:
            query: what the agent wants to do ("create an issue"). Empty or only stopwords: ``[]``.
            limit: at most this many results.
            connectors: only these connector slugs (the caller's permission view); None means all.
            allow: a per-action filter, applied before the ranking is cut to ``limit``.

        BM25F picks the best few the filters allow and a second stage re-orders them (``_rank``).
        Scores are deterministic for a given catalog and view; ties are broken by qualified name.
        """
        return self._search(self.corrected(query), limit, connectors, allow)[0]

    def find(
        self,
        query: str,
        *,
        limit: int = 10,
        connectors: Collection[str] | None = None,
        allow: Callable[[Action], bool] | None = None,
    ) -> SearchResult:
        """``search``, plus whether anything matched well (``confidence``/``hint``) and near-twins side by side."""
        query = self.corrected(query)
        hits, coverage, named = self._search(query, limit, connectors, allow)
        unserved = self.unserved(query, self._visible(connectors)) if hits and not named else ()
        asked = opening_kind(query)
        low = not hits or coverage < CONFIDENCE_FLOOR or bool(unserved) or none_of_kind(hits, asked)
        ordered, twins = group_twins(asked_first(hits, asked))
        hint = low_hint(unserved) if low else None
        return SearchResult(ordered, "low" if low else "high", hint, twins, named, unserved=unserved, asked=asked)

    def unserved(self, query: str, visible: list[Segment]) -> tuple[str, ...]:
        """The products ``query`` names (``_products``) when none of them is a ``visible`` connector or a
        word of its actions: "a Spotify playlist" over YouTube alone. Empty when any named product is
        served, since then the request may only mention the others ("copy the Trello card to Jira").
        In a long message only the sentences that make its request count (``_message.asks``): its
        context may name any product ("a customer wrote on Zendesk that…")."""
        query = query[:MAX_QUERY_CHARS]
        products = named_products(" ".join(asks(query) or (query,)))
        if not products:
            return ()
        slugs = [_fold_slug(segment.slug) for segment in visible]
        about = [self._about.get(segment.slug, frozenset()) for segment in visible]
        for word in products:
            term = stem(word)
            if (
                any(word in slug for slug in slugs)
                or any(word in words for words in about)
                or any(term in segment.spans for segment in visible)
            ):
                return ()
        return tuple(dict.fromkeys(products.values()))

    def products_missing(self, text: str, connectors: Collection[str] | None = None) -> tuple[str, ...]:
        """``unserved`` over ``connectors`` (None: all): the products ``text`` names that none of them is."""
        return self.unserved(text, self._visible(connectors))

    def name_connectors(self, about: Mapping[str, str]) -> None:
        """What the manifest says each connector is (its name, catalog entry and description): a product
        named there is served ("unserved"), even by an upstream whose tools never say its name."""
        self._about = {slug: frozenset(prose_words(text)) for slug, text in about.items()}

    def _search(
        self,
        query: str,
        limit: int,
        connectors: Collection[str] | None,
        allow: Callable[[Action], bool] | None,
    ) -> tuple[list[tuple[Action, float]], float, frozenset[str]]:
        """The ranked hits, the share of the query's written-word idf mass the best one carries, and the
        connectors the query names (none without hits)."""
        if limit <= 0:
            return [], 0.0, frozenset()
        query = without_declined(query[:MAX_QUERY_CHARS])
        visible = self._visible(connectors)
        weighted = self._query_terms(query)
        if not weighted:
            return [], 0.0, frozenset()
        named = self._named_connectors(query, visible)
        pool = max(limit, _rank.POOL)
        hits = self._best(weighted, visible, pool, allow)
        if named:
            # A connector the query names is a prior: its best actions join the pool even when other
            # connectors' score higher, and get a bonus in the second stage.
            seen = {doc_id for doc_id, _, _ in hits}
            own = self._best(weighted, [s for s in visible if s.slug in named], pool, allow)
            hits.extend(hit for hit in own if hit[0] not in seen)
        if not hits:
            return [], 0.0, frozenset()
        exact_query = []
        for word in list(dict.fromkeys(raw_words(query)))[:MAX_QUERY_WORDS]:
            term = stem(word)
            if term in weighted and term in self._df:
                # As much as the word weighs in the query: a long message's context counts less.
                exact_query.append((f" {word} ", self._idf_of(term) * weighted[term]))
        candidates = [(action, score, *self._features(doc_id)) for doc_id, action, score in hits]
        ranked = _rank.rerank(
            candidates,
            weighted,
            self._idf_of,
            exact_query,
            verbs=VERBS,
            named=named,
            verb_kinds=VERB_KIND,
            asked=asked_kind(query),
        )
        coverage = self._coverage(weighted, candidates, ranked[0][0])
        return ranked[:limit], coverage, named

    def corrected(self, query: str) -> str:
        """``query`` (its first ``MAX_QUERY_CHARS``) with its typos repaired against the catalog's words
        (``_spelling``): a word no action uses, one edit from one that some do, becomes that word.

        A word the catalog knows, as written or by its index term, is never changed (unless a single
        action uses it and the repair is ``_TYPO_RATIO`` times commoner); nor a stopword,
        an identifier typed in camelCase ("getContent"), two catalog words run together ("rerun"), a
        product's name (``_products``: "Lyft" is not a slip of "left"), a quoted name or value
        ('label it "frontend"'), or a capitalized word inside a sentence into anything but a connector's
        or product's name: a name ("Messi" is not a slip of "mess"; "Sttripe" is of Stripe). Full-width
        and other compatibility forms are read as the plain letters first (``compatible``).
        """
        query = compatible(query[:MAX_QUERY_CHARS])
        fixes: dict[str, str] = {}
        tried = 0
        spans = quoted_spans(query)

        def as_written(match: re.Match[str]) -> bool:  # a quoted name or value ('"frontend"') is as meant
            return any(start <= match.start() < end for start, end in spans)

        for match in _WORD.finditer(query):
            if spans and as_written(match):
                continue
            written = match.group()
            word = written.lower()
            camel = written[1:] != written[1:].lower() and written != written.upper()
            if word in fixes or not keep(word) or camel or word in PRODUCTS:
                continue
            named = _named(query, match)
            if word in self._corrections:
                fix = self._corrections[word]
            else:
                known = self._df.get(stem(word), 0)
                if (known and word in english_words()) or tried >= MAX_CORRECTED_WORDS:
                    continue
                # A word cut short within its term ("creat", "delet") already matches lexically; the dense
                # side reads the text, and gets the whole word.
                fix = self._whole_word(word) if known and word not in self._words() else None
                if fix is None:
                    if known > _TYPO_DF:
                        continue
                    fix = self._correction(word, known)
                tried += 1
                if len(self._corrections) < _CORRECTIONS_KEPT:
                    self._corrections[word] = fix
            # A name is repaired only into a connector's or a product's name ("Sttripe"), never a word.
            if fix is not None and (not named or fix in self._slugs_by_fold or fix in PRODUCTS):
                fixes[word] = fix
        if not fixes:
            return query
        return _WORD.sub(
            lambda m: m.group() if spans and as_written(m) else _recased(fixes.get(m.group().lower()), m.group()), query
        )

    def _correction(self, word: str, known: int = 0) -> str | None:
        """The catalog word ``word`` is a slip of, or None. ``known``: how many actions use ``word``'s
        term already (at most ``_TYPO_DF``: a slip in the API's own text, "uplaod", is no reason to
        keep the user's), so a repair must be far commoner (``_TYPO_RATIO``)."""
        words = self._words()
        if (word in words and not known) or self._split(word):
            return None
        df, common = self._df, self._size + 1

        def frequency(candidate: str) -> int:
            # A slip of a function word ("wiht", "fron") is meant as that word: commoner than any catalog
            # word. Not when the slip is longer ("shre" is "share" before it is "she"): a letter more
            # where a short word was meant is the rarer slip.
            if candidate in STOPWORDS:
                return common if len(candidate) >= len(word) else 0
            return df.get(stem(candidate), 0)

        fix = correction(word, words, frequency, english=english_words(), known=bool(known))
        if known and (fix is None or df.get(stem(fix), 0) < _TYPO_RATIO * known):
            return None
        return fix

    def _whole_word(self, word: str) -> str | None:
        """The catalog word one edit from ``word`` with the same index term ("creat" -> "create"), or
        None: ``word`` is cut short or misspelt within its stem, so the repair cannot change what it
        matches, only what the dense side reads."""
        if len(word) > MAX_LENGTH:
            return None
        term = stem(word)
        same = [c for c in edits(word) & self._words() if c not in STOPWORDS and stem(c) == term]
        return min(same, key=lambda c: (abs(len(c) - len(word)), c)) if same else None

    def _words(self) -> frozenset[str]:
        """The words a typo may be repaired to: every exact word of every indexed action (names,
        summaries, description heads, parameters), the stopwords, and the words the query side reads
        besides the catalog's (``SYNONYMS``' and ``PHRASES``' own: "thumbs", "chargeback")."""
        if self._vocabulary_words is None:
            words: set[str] = set(STOPWORDS) | QUERY_WORDS
            for segment in self._ordered:
                for line in segment.exact:
                    words.update(line.split())
            self._vocabulary_words = frozenset(words)
        return self._vocabulary_words

    def _coverage(
        self,
        weighted: dict[str, float],
        candidates: Sequence[tuple[Action, float, str, str, str, str, str]],
        best: Action,
    ) -> float:
        """How well ``best`` is about the query: 0 unless its name or summary holds a written word that is
        not a generic verb; else the share of the written words' idf mass (those the index knows) found there.

        Words the index does not know are left out: an intent carries content ("saying the deploy is
        done", "Premium T-shirt") that no action mentions and that is no evidence against a match.
        """
        about = next(c[5] for c in candidates if c[0] is best)
        known = [term for term, weight in weighted.items() if weight >= 1.0 and term in self._df]
        found = [term for term in known if f" {term} " in about]
        if not any(term not in VERBS for term in found):
            return 0.0
        total = sum(self._idf_of(term) for term in known)
        return sum(self._idf_of(term) for term in found) / total if total else 0.0

    def _named_connectors(self, query: str, visible: list[Segment]) -> frozenset[str]:
        """Visible connectors the query names by slug: as one word ("in Slack", "our Stripe account",
        "googlecalendar") or, for a slug of several, by its words in a row ("my Google Calendar")."""
        words = prose_words(query)  # letters or digits, lowercased: already folded
        present = set(words)
        named: set[str] = set()
        for segment in visible:
            if _fold_slug(segment.slug) in present:
                named.add(segment.slug)
                continue
            parts = _slug_words(segment.slug)
            if len(parts) > 1 and parts[0] in present:
                width = len(parts)
                if any(tuple(words[i : i + width]) == parts for i, word in enumerate(words) if word == parts[0]):
                    named.add(segment.slug)
        return frozenset(named)

    def _visible(self, connectors: Collection[str] | None) -> list[Segment]:
        if connectors is None:
            return list(self._ordered)
        wanted = connectors if isinstance(connectors, set | frozenset) else set(connectors)
        return [segment for segment in self._ordered if segment.slug in wanted]

    def _query_terms(self, query: str) -> dict[str, float]:
        """The query's index terms with their weights: 1 for a word written, less for what it suggests.

        Words of the sentences that make the request (``_message.asks``) weigh 1 and the others
        ``_CONTEXT_WEIGHT``; with no such sentence, words of the first sentence weigh 1 and later ones
        ``_LATER_SENTENCE_WEIGHT``. A request for many things adds ``_MANY_TERMS``. The first
        ``MAX_QUERY_WORDS`` distinct words are analyzed, and the ``MAX_QUERY_TERMS`` known terms that
        weigh most (weight times idf) kept. A ``#name`` mention reads as "channel".
        """
        weighted: dict[str, float] = {}
        extra: list[str] = []
        forms: list[str] = []
        requests = asks(query)
        if requests is None:
            first, _, _ = _SENTENCE.split(query, maxsplit=1)[0].partition("\n\n")
            first_words, elsewhere = set(prose_words(first)), _LATER_SENTENCE_WEIGHT
        else:
            # A message of several sentences: the ones that ask weigh fully, the context less.
            first_words, elsewhere = set(prose_words(" ".join(requests))), _CONTEXT_WEIGHT
        many = wants_many(" ".join(requests) if requests else query)
        words = prose_words(query)
        distinct: set[str] = set()
        if _CHANNEL_MENTION.search(query):
            weighted[stem("channel")] = _SHAPE_WEIGHT
        if _ISSUE_KEY.search(query):
            weighted[stem("issue")] = _SHAPE_WEIGHT
        values = quoted(query)
        idiom = {i for i, pair in enumerate(pairwise(words)) if pair in _NOT_AN_ASK}
        adjective = _adjectives(words)
        for position, (previous, word) in enumerate(zip(["", *words], words, strict=False)):
            if position in idiom:
                continue  # "make sure": no request to make anything
            if word not in distinct:
                if len(distinct) >= MAX_QUERY_WORDS:
                    continue
                distinct.add(word)
            weight = 1.0 if word in first_words else elsewhere
            term = stem(word)
            if position in values or position in adjective:
                # A quoted name or value ('the "Draft v3" document'), or a word describing it ("all open
                # bugs"): what to act on, not what to do.
                weight = min(weight, _QUOTED_WEIGHT)
            else:
                extra.extend(PHRASES.get((previous, word), ()))
                extra.extend(SYNONYMS.get(term, ()))  # before the stopword check: "my" -> authenticated
            if not keep(word):
                continue
            if term in self._df:
                weighted[term] = max(weighted.get(term, 0.0), weight)
                forms.extend(self._word_forms(term))
                continue
            # An unknown word may be an identifier typed into the query ("getContent"): try its parts;
            # or two words run together ("rerun", "username").
            parts = identifier_terms(original_case(query, word))
            if len(parts) > 1:
                for part in parts:
                    weighted[part] = max(weighted.get(part, 0.0), weight)
            else:
                weighted[term] = max(weighted.get(term, 0.0), weight)
                # "discovered" -> "discover", which no action uses, but discoverer.get does.
                forms.extend(self._word_forms(term) or self._derived(term))
                extra.extend(self._split(word))
        for term in _MANY_TERMS if many else ():
            weighted[term] = max(weighted.get(term, 0.0), _MANY_WEIGHT)
        for term in extra:
            weighted.setdefault(term, _SYNONYM_WEIGHT)
        for term in forms:
            weighted.setdefault(term, _FORM_WEIGHT)
        known = [term for term in weighted if term in self._df]
        if len(known) > MAX_QUERY_TERMS:
            known.sort(key=lambda term: (-weighted[term] * self._idf_of(term), term))
            weighted = {term: weighted[term] for term in known[:MAX_QUERY_TERMS]}
        return weighted

    def _derived(self, term: str) -> list[str]:
        """Name words derived from an unknown term's root, when the stemmer could not join them
        ("subscrib" -> "subscription", "describ" -> "description"): those that start with the term but
        its last letter, for a term of ``_DERIVED_MIN`` letters or more; the two commonest."""
        if len(term) < _DERIVED_MIN:
            return []
        root = term[:-1]
        vocabulary = self._vocabulary()
        start = end = bisect.bisect_left(vocabulary, root)
        while end < len(vocabulary) and vocabulary[end].startswith(root):
            end += 1
        return sorted(vocabulary[start:end], key=lambda word: (-self._name_df[word], word))[:2]

    def _word_forms(self, term: str) -> list[str]:
        # Only forms that action names use: "reviewer" (request_reviewers), not every "-er" word.
        names = self._name_df
        forms = [term + suffix for suffix in _AGENT_SUFFIXES if term + suffix in names]
        for suffix in ("er", "or"):
            if term.endswith(suffix) and len(term) > 5 and term[: -len(suffix)] in names:
                forms.append(term[: -len(suffix)])
        # The action noun of a verb and back: "collaborates"/"collaborator" -> "collaboration",
        # "subscription" -> "subscribe" (stems: "collaborat", "subscrib").
        base = term[:-2] if term.endswith(("er", "or")) and len(term) > 6 else term
        for suffix in ("ion", "ation", "ment"):
            if len(base) > 4 and base + suffix in names:
                forms.append(base + suffix)
        for suffix in ("ion", "ation", "ment"):
            if term.endswith(suffix) and len(term) - len(suffix) > 4 and term[: -len(suffix)] in names:
                forms.append(term[: -len(suffix)])
        # "verify" <-> "verification", "notify" <-> "notification": the stemmer keeps both whole.
        if term.endswith("ify") and term[:-1] + "ication" in names:
            forms.append(term[:-1] + "ication")
        if term.endswith("ification") and term[: -len("ication")] + "y" in names:
            forms.append(term[: -len("ication")] + "y")
        return forms

    def _split(self, word: str) -> list[str]:
        """Two action-name words that ``word`` is made of ("rerun"), if there is exactly one such split."""
        if len(word) > MAX_LENGTH:
            return []  # no word: a token or a run of one letter
        names = self._name_df
        found: list[list[str]] = []
        for cut in range(2, len(word) - 1):
            left, right = stem(word[:cut]), stem(word[cut:])
            if keep(word[:cut]) and keep(word[cut:]) and left in names and right in names:
                found.append([left, right])
        return found[0] if len(found) == 1 else []

    def _idf_of(self, term: str) -> float:
        idf = self._idf.get(term)
        if idf is None:
            df = self._df.get(term, 0)
            # Lucene's non-negative BM25 idf: a term in every document still counts a little.
            idf = self._idf[term] = math.log(1.0 + (self._size - df + 0.5) / (df + 0.5))
        return idf

    def _lists(self, weighted: dict[str, float], segments: list[Segment]) -> list[_Postings]:
        """The query's terms that the ``segments`` hold, commonest first (the order scores are summed in)."""
        lists: list[_Postings] = []
        for term, query_weight in weighted.items():
            # Only the segments that hold the term pay for a method call (most hold few query terms).
            columns = [
                segment.postings_at(span) for segment in segments if (span := segment.spans.get(term)) is not None
            ]
            if columns:
                length = sum([len(ids) for ids, _ in columns])
                lists.append(_Postings(self._df[term], term, self._idf_of(term) * query_weight, columns, length))
        # Commonest term first, so the big lists become the score map in one C-level dict() and the
        # Python loop only runs where a rarer list meets it. Ordered by global df, not by what the
        # filter left visible: the summation order, hence every float, is the same under any filter.
        lists.sort(key=lambda item: (-item.df, item.term))
        return lists

    def _score(self, weighted: dict[str, float], segments: list[Segment]) -> dict[int, float]:
        """Every document's BM25F score, over the documents that hold any of the query's terms."""
        scores: dict[int, float] = {}
        for postings in self._lists(weighted, segments):
            multiply = postings.factor.__mul__
            # Segments hold disjoint ids: their postings chain into one map without collisions.
            partial = dict(
                chain.from_iterable(zip(ids, map(multiply, ws), strict=True) for ids, ws in postings.columns)
            )
            if scores:
                for doc_id in partial.keys() & scores.keys():
                    partial[doc_id] += scores[doc_id]
            scores.update(partial)
        return scores

    def _best(
        self,
        weighted: dict[str, float],
        segments: list[Segment],
        limit: int,
        allow: Callable[[Action], bool] | None,
    ) -> list[tuple[int, Action, float]]:
        """``_top`` of ``_score``, scoring only the documents that can reach the top when that is provable
        (``_pruned``): the same hits and the same floats, without turning the longest postings into a map."""
        lists = self._lists(weighted, segments)
        k = limit
        while (pruned := self._pruned(lists, k)) is not None:
            hits = self._window(pruned[0], limit, allow, pruned[1], k)
            if hits is not None:
                return hits
            if allow is None or k > limit:
                break
            k *= 4  # the filter hid too many of the best k: once more with a window as wide as ``_top``'s next
        return self._top(self._score(weighted, segments), limit, allow)

    def _pruned(self, lists: list[_Postings], k: int) -> tuple[dict[int, float], float] | None:
        """Exact scores of the only documents that can make the best ``k``, and a bound on every other
        score (MaxScore); None when the commonest lists cannot be set aside or it would not pay.

        The rarest lists are read whole (their documents are the candidates) until the ``k``-th best
        candidate, counting those lists alone, beats the most that the commonest lists left over can
        add up to: a document in none of the read lists cannot reach the top. A candidate's score is
        then summed term by term in ``_score``'s order, looking the unread lists up (bisection in the
        sorted postings), so it is the very float ``_score`` gives. Candidates whose read part plus
        the bound cannot reach the ``k``-th best are dropped unscored. ``_window`` checks the result.
        """
        if len(lists) < 2 or lists[0].length < _PRUNE_MIN:
            return None
        maxima = [self._max_weight(postings) for postings in lists]
        bounds = [0.0]  # bounds[j]: the most the j commonest lists can add together (a float sum of maxima)
        for postings, maximum in zip(lists, maxima, strict=True):
            bounds.append(bounds[-1] + postings.factor * maximum)
        unread = [0]  # unread[j]: postings in the j commonest lists
        for postings in lists:
            unread.append(unread[-1] + postings.length)
        partials: list[dict[int, float] | None] = [None] * len(lists)
        estimate: dict[int, float] = {}
        for j in range(len(lists) - 1, 0, -1):
            if unread[j] < _PRUNE_MIN:
                return None  # what would be left unread is short: scoring it all costs no more
            postings = lists[j]
            multiply = postings.factor.__mul__
            partial = partials[j] = dict(
                chain.from_iterable(zip(ids, map(multiply, ws), strict=True) for ids, ws in postings.columns)
            )
            merged = dict(partial)
            for doc_id in merged.keys() & estimate.keys():
                merged[doc_id] += estimate[doc_id]
            estimate.update(merged)
            if len(estimate) < k:
                continue
            # ``estimate`` sums in another order than ``_score``: a relative margin far above rounding
            # covers that and the bound's own rounding.
            kth = _kth(estimate.values(), k)
            bound = bounds[j] * (1.0 + _MARGIN)
            if bound >= kth * (1.0 - _MARGIN):
                continue
            reach = kth * (1.0 - _MARGIN) - bound
            scores = self._exact(lists, partials, [doc_id for doc_id, value in estimate.items() if value >= reach])
            return scores, bound
        return None

    @staticmethod
    def _exact(
        lists: list[_Postings], partials: list[dict[int, float] | None], candidates: list[int]
    ) -> dict[int, float]:
        """The candidates' scores, summed list by list in ``_score``'s order: from the maps of the lists
        read (``partials``), looking the others up. Each document's sum is its own: the same float
        whichever other candidates come along."""
        candidates.sort()
        wanted = set(candidates)
        scores: dict[int, float] = {}
        for position, postings in enumerate(lists):
            partial = partials[position]
            if partial is None:
                factor = postings.factor
                found: dict[int, float] = {}
                for ids, ws in postings.columns:
                    # One column per segment: the candidates in its id range, each found by bisection
                    # from where the previous one was (both ascend).
                    first = bisect.bisect_left(candidates, ids[0])
                    last = bisect.bisect_right(candidates, ids[-1], first)
                    at = 0
                    for doc_id in candidates[first:last]:
                        at = bisect.bisect_left(ids, doc_id, at)
                        if ids[at] == doc_id:
                            found[doc_id] = factor * ws[at]
            else:
                found = {doc_id: partial[doc_id] for doc_id in partial.keys() & wanted}
            for doc_id in found.keys() & scores.keys():
                found[doc_id] += scores[doc_id]
            scores.update(found)
        return scores

    def _max_weight(self, postings: _Postings) -> float:
        """The largest weight of a term in any segment (kept until the index changes)."""
        maximum = self._maxima.get(postings.term)
        if maximum is None:
            columns = (segment.postings(postings.term) for segment in self._ordered)
            maximum = self._maxima[postings.term] = max(max(column[1]) for column in columns if column is not None)
        return maximum

    def _top(
        self, scores: dict[int, float], limit: int, allow: Callable[[Action], bool] | None
    ) -> list[tuple[int, Action, float]]:
        """The ``limit`` best allowed ``(doc id, action, score)``, best first, ties by qualified name."""
        return self._window(scores, limit, allow, None, limit) or []

    def _window(
        self,
        scores: dict[int, float],
        limit: int,
        allow: Callable[[Action], bool] | None,
        bound: float | None,
        k: int,
    ) -> list[tuple[int, Action, float]] | None:
        """``_top``, looking at the best ``k`` first. With a ``bound``, ``scores`` holds only the documents
        that can score above it (``_pruned``): None when the answer would need another one (too few above
        it, or a filter hiding too many of the best ``k``).
        """
        verdicts: dict[int, bool] = {}
        while scores:
            if k >= len(scores):
                if bound is not None:
                    return None
                candidates = list(scores.items())
            else:
                # Everything tied with the k-th best comes along, so ties break by name, not by id.
                floor = _kth(scores.values(), k)
                if bound is not None and floor <= bound:
                    return None
                candidates = [(doc_id, score) for doc_id, score in scores.items() if score >= floor]
            ranked: list[tuple[float, str, int, Action]] = []
            for doc_id, score in candidates:
                action = self._action(doc_id)
                ranked.append((-score, action.qualified_name, doc_id, action))
            ranked.sort(key=lambda item: (item[0], item[1]))
            out: list[tuple[int, Action, float]] = []
            for negative, _, doc_id, action in ranked:
                if allow is not None:
                    ok = verdicts.get(doc_id)
                    if ok is None:
                        ok = verdicts[doc_id] = bool(allow(action))
                    if not ok:
                        continue
                out.append((doc_id, action, -negative))
                if len(out) == limit:
                    return out
            if len(candidates) >= len(scores):
                return out
            if bound is not None:
                return None
            # The filter hid too many of the best: widen the window and try again.
            k *= 4
        return []

    # -- suggestions -----------------------------------------------------------------------

    def suggest(
        self,
        name: str,
        *,
        limit: int = 3,
        connectors: Collection[str] | None = None,
        allow: Callable[[Action], bool] | None = None,
    ) -> list[Action]:
        """The actions closest to a guessed or misspelled tool name, best first (see ``_suggest``).

        ``github.create_issue``, ``issues.create``, ``github.issue.create``, ``github.createIssue`` and
        ``github.isues.create`` all put ``github.issues.create`` first. Nothing outside ``connectors``
        and ``allow`` is ever suggested.
        """
        return suggest(self, compatible(name), limit=limit, connectors=connectors, allow=allow)

    def _vocabulary(self) -> list[str]:
        if self._name_vocab is None:
            self._name_vocab = sorted(self._name_df)
        return self._name_vocab


def _adjectives(words: Sequence[str]) -> set[int]:
    """Positions of ``_ADJECTIVES`` that describe a thing rather than ask to make one: after a word such as
    "all", "the" or "are", or before a plural ("open tickets")."""
    out: set[int] = set()
    for i, word in enumerate(words):
        if word not in _ADJECTIVES:
            continue
        after = words[i + 1] if i + 1 < len(words) else ""
        if (i and words[i - 1] in _BEFORE_ADJECTIVE) or (
            len(after) > 3 and after.endswith("s") and not after.endswith("ss")
        ):
            out.add(i)
    return out


def _named(query: str, match: re.Match[str]) -> bool:
    """Whether the word ``match`` found is capitalized inside a sentence, a name ("Messi", "Rodin", "Higgs
    boson"), or a short word in capitals, an acronym ("BRCA", "INTJ", "AMZN"): not a slip of a catalog
    word."""
    written = match.group()
    if written.isupper():
        return len(written) <= _ACRONYM_LETTERS
    if not written[:1].isupper():
        return False
    # A few characters back are enough to see a sentence's end, and cost the same in any long message.
    before = query[max(0, match.start() - 8) : match.start()].rstrip(" \t\"'(\u201c")
    return bool(before) and before[-1] not in ".!?:\n"


def _recased(fix: str | None, written: str) -> str:
    """``fix`` written the way ``written`` was (capitalized or all capitals), or ``written`` when no fix."""
    if fix is None:
        return written
    if written.isupper() and len(written) > 1:
        return fix.upper()
    return fix[:1].upper() + fix[1:] if written[:1].isupper() else fix


def _kth(values: Collection[float], k: int) -> float:
    """The ``k``-th largest of ``values`` (at least ``k`` of them): a C sort up to a few thousand, where
    ``heapq.nlargest``'s Python loop costs more; past that the heap's linear pass wins."""
    return sorted(values)[-k] if len(values) <= _SORT_MAX else heapq.nlargest(k, values)[-1]


def _add_counts(total: dict[str, int], counts: Iterable[tuple[str, int]], sign: int) -> None:
    if sign > 0 and not total:  # the first segment (its terms are distinct, its counts positive): in C
        total.update(counts)
        return
    for term, count in counts:
        value = total.get(term, 0) + sign * count
        if value > 0:
            total[term] = value
        else:
            total.pop(term, None)
