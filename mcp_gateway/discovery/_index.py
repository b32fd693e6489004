"""``DiscoveryIndex``: BM25F over actions in per-connector segments, name lookup, suggestions."""

from __future__ import annotations

import bisect
import difflib
import heapq
import math
from array import array
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any

from ..model import Action
from ._text import (
    SYNONYMS,
    clean_description,
    fold_name,
    identifier_terms,
    keep,
    original_case,
    prose_terms,
    prose_words,
    stem,
)

__all__ = ["DiscoveryIndex"]

_K1 = 1.2
"""BM25 term-frequency saturation, the usual default; the field weights below are scaled to suit it."""

# BM25F fields as (weight, b), in the order _build produces them. Names and summaries are written
# to say what the action does; descriptions ramble about scopes and media types; parameter names
# say what an action takes, not what it does ("issue_number" is on every issue sub-resource). The
# verb is the first word of the last path segment ("star" in activity.star_repo_for_authenticated_user):
# APIs name the operation there. Names get b=1 so that every extra word in a name costs: for
# "create an issue", issues.create beats reactions.create_for_issue. Tuned on ~50 intents over
# GitHub, Stripe and Slack (tests/test_discovery.py keeps a dozen of them).
_FIELDS: tuple[tuple[float, float], ...] = (
    (1.2, 1.0),  # qualified-name words, each counted once
    (0.8, 0.75),  # summary
    (0.2, 0.75),  # description head
    (0.12, 0.75),  # input parameter names
    (0.8, 0.0),  # verb
)

_SYNONYM_WEIGHT = 0.5
"""Query weight of a synonym relative to a word the agent actually wrote."""

_REPAIR_WEIGHT = 0.5
"""Query weight of a name word standing in for a misspelled word of a guessed name."""

_SUGGEST_POOL = 50
"""How many search hits ``suggest`` re-ranks by name similarity."""

_MIN_SHAPE = 0.6
"""A suggestion sharing no word with the guess must at least look like it (difflib ratio)."""

_COUNT_BITS = 24
_COUNT_MASK = (1 << _COUNT_BITS) - 1
_MAX_IDS = 1 << 32  # postings hold ids as unsigned 32-bit ints


@dataclass(slots=True, eq=False)
class _Segment:
    """One connector's share of the index, immutable once built.

    Its actions have the consecutive global ids ``start .. start + len(actions) - 1``. All its postings
    sit in two flat columns, grouped by term; ``spans`` says where each term's run is. One dict entry
    per (connector, term) instead of two ``array`` objects: most terms have a handful of postings, and
    array headers would outweigh them.
    """

    slug: str
    start: int
    actions: tuple[Action, ...]
    by_path: dict[str, int]
    """path -> position in ``actions``."""
    by_folded: dict[str, int | tuple[int, ...]]
    """``fold_name(path)`` -> position(s); a tuple only when spellings collide."""
    spans: dict[str, int]
    """term -> ``offset << 24 | count`` into the columns; ``count`` is the term's df in this segment."""
    doc_ids: array[int]
    weights: array[float]
    """Saturated BM25F weight of the term in the document: the score is ``idf * weight``."""
    name_terms: tuple[str, ...]
    """The distinct terms of this segment's action names: the vocabulary for repairing typos."""

    def postings(self, term: str) -> tuple[array[int], array[float]] | None:
        span = self.spans.get(term)
        if span is None:
            return None
        offset, count = span >> _COUNT_BITS, span & _COUNT_MASK
        return self.doc_ids[offset : offset + count], self.weights[offset : offset + count]


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
        "_df",
        "_idf",
        "_name_df",
        "_name_vocab",
        "_next_id",
        "_ordered",
        "_segments",
        "_size",
        "_slugs_by_fold",
        "_starts",
    )

    def __init__(self) -> None:
        self._segments: dict[str, _Segment] = {}
        # Segments by ascending ``start`` and those starts, to map a global id to its action by bisection.
        self._ordered: list[_Segment] = []
        self._starts: list[int] = []
        self._slugs_by_fold: dict[str, list[str]] = {}
        self._df: dict[str, int] = {}
        self._name_df: dict[str, int] = {}  # term -> how many segments use it in an action name
        self._idf: dict[str, float] = {}
        self._name_vocab: list[str] | None = None
        # Ids are never reused, so a stale id can never alias a newer action, and a new segment always
        # sorts last in ``_ordered``. 2**32 ids is thousands of years of reloading a large catalog.
        self._next_id = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    # -- maintenance -----------------------------------------------------------------------

    def replace_connector(self, slug: str, actions: Sequence[Action]) -> None:
        """(Re)index one connector's actions; every other connector's postings stay as they are.

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
        if self._next_id + len(actions) > _MAX_IDS or len(actions) > _COUNT_MASK:
            raise ValueError("discovery index id space exhausted; restart the gateway")
        segment = _build(slug, self._next_id, actions)
        self._next_id += len(actions)
        self.remove_connector(slug)
        self._segments[slug] = segment
        self._ordered.append(segment)
        self._starts.append(segment.start)
        self._slugs_by_fold.setdefault(fold_name(slug), []).append(slug)
        self._size += len(actions)
        _add_counts(self._df, ((term, span & _COUNT_MASK) for term, span in segment.spans.items()), 1)
        _add_counts(self._name_df, ((term, 1) for term in segment.name_terms), 1)
        self._changed()

    def remove_connector(self, slug: str) -> None:
        """Forget one connector; a slug that is not indexed is a no-op."""
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
        _add_counts(self._df, ((term, span & _COUNT_MASK) for term, span in segment.spans.items()), -1)
        _add_counts(self._name_df, ((term, 1) for term in segment.name_terms), -1)
        self._changed()

    def _changed(self) -> None:
        # idf depends on N and df, both global: drop the cache rather than patch it.
        self._idf.clear()
        self._name_vocab = None

    def _action(self, doc_id: int) -> Action:
        segment = self._ordered[bisect.bisect_right(self._starts, doc_id) - 1]
        return segment.actions[doc_id - segment.start]

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
        it, None, so an ambiguous guess never runs the wrong action.
        """
        exact = self.get(name)
        if exact is not None:
            return exact
        folded_slug, _, folded_path = fold_name(name).partition(".")
        found: list[Action] = []
        for slug in self._slugs_by_fold.get(folded_slug, ()):
            segment = self._segments[slug]
            hit = segment.by_folded.get(folded_path)
            positions = (hit,) if isinstance(hit, int) else hit or ()
            found.extend(segment.actions[position] for position in positions)
        if len(found) > 1:
            lowered = name.strip().lower()
            found = [action for action in found if action.qualified_name.lower() == lowered]
        return found[0] if len(found) == 1 else None

    # -- search ----------------------------------------------------------------------------

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

        Scores are BM25F, deterministic for a given catalog; ties are broken by qualified name.
        """
        if limit <= 0:
            return []
        weighted = self._query_terms(query)
        if not weighted:
            return []
        return self._top(self._score(weighted, self._visible(connectors)), limit, allow)

    def _visible(self, connectors: Collection[str] | None) -> list[_Segment]:
        if connectors is None:
            return list(self._ordered)
        wanted = connectors if isinstance(connectors, set | frozenset) else set(connectors)
        return [segment for segment in self._ordered if segment.slug in wanted]

    def _query_terms(self, query: str) -> dict[str, float]:
        weighted: dict[str, float] = {}
        synonyms: list[str] = []
        for word in prose_words(query):
            term = stem(word)
            synonyms.extend(SYNONYMS.get(term, ()))  # before the stopword check: "my" -> authenticated
            if not keep(word):
                continue
            if term in self._df:
                weighted[term] = 1.0
                continue
            # An unknown word may be an identifier typed into the query ("getContent"): try its parts.
            for part in identifier_terms(original_case(query, word)) or [term]:
                weighted[part] = 1.0
        for synonym in synonyms:
            weighted.setdefault(synonym, _SYNONYM_WEIGHT)
        return weighted

    def _idf_of(self, term: str) -> float:
        idf = self._idf.get(term)
        if idf is None:
            df = self._df.get(term, 0)
            # Lucene's non-negative BM25 idf: a term in every document still counts a little.
            idf = self._idf[term] = math.log(1.0 + (self._size - df + 0.5) / (df + 0.5))
        return idf

    def _score(self, weighted: dict[str, float], segments: list[_Segment]) -> dict[int, float]:
        lists: list[tuple[int, str, float, list[tuple[array[int], array[float]]]]] = []
        for term, query_weight in weighted.items():
            columns = [column for segment in segments if (column := segment.postings(term)) is not None]
            if columns:
                lists.append((self._df[term], term, self._idf_of(term) * query_weight, columns))
        # Commonest term first, so the big lists become the score map in one C-level dict() and the
        # Python loop only runs where a rarer list meets it. Ordered by global df, not by what the
        # filter left visible: the summation order, hence every float, is the same under any filter.
        lists.sort(key=lambda item: (-item[0], item[1]))
        scores: dict[int, float] = {}
        for _, _, factor, columns in lists:
            multiply = factor.__mul__
            # Segments hold disjoint ids: their postings chain into one map without collisions.
            partial = dict(chain.from_iterable(zip(ids, map(multiply, ws), strict=True) for ids, ws in columns))
            if scores:
                for doc_id in partial.keys() & scores.keys():
                    partial[doc_id] += scores[doc_id]
            scores.update(partial)
        return scores

    def _top(
        self, scores: dict[int, float], limit: int, allow: Callable[[Action], bool] | None
    ) -> list[tuple[Action, float]]:
        verdicts: dict[int, bool] = {}
        k = limit
        while scores:
            if k >= len(scores):
                candidates = list(scores.items())
            else:
                # Everything tied with the k-th best comes along, so ties break by name, not by id.
                floor = heapq.nlargest(k, scores.values())[-1]
                candidates = [(doc_id, score) for doc_id, score in scores.items() if score >= floor]
            ranked: list[tuple[float, str, int, Action]] = []
            for doc_id, score in candidates:
                action = self._action(doc_id)
                ranked.append((-score, action.qualified_name, doc_id, action))
            ranked.sort(key=lambda item: (item[0], item[1]))
            out: list[tuple[Action, float]] = []
            for negative, _, doc_id, action in ranked:
                if allow is not None:
                    ok = verdicts.get(doc_id)
                    if ok is None:
                        ok = verdicts[doc_id] = bool(allow(action))
                    if not ok:
                        continue
                out.append((action, -negative))
                if len(out) == limit:
                    return out
            if len(candidates) >= len(scores):
                return out
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
        """The actions closest to a guessed or misspelled tool name, best first.

        ``github.create_issue``, ``issues.create``, ``github.issue.create`` and ``github.isues.create`` all
        put ``github.issues.create`` first. What ``resolve`` finds comes first; the rest are BM25 hits for
        the guessed name's words (misspelled words repaired against the words of action names), re-ranked
        by word overlap with each hit's path, character similarity, and the search score. A leading
        segment naming a visible connector restricts the hits to it when that finds anything.
        Nothing outside ``connectors`` and ``allow`` is ever suggested.
        """
        name = name.strip()
        if limit <= 0 or not name:
            return []
        visible = self._visible(connectors)
        visible_slugs = {segment.slug for segment in visible}
        exact = self.resolve(name)
        if exact is not None and (exact.connector not in visible_slugs or (allow is not None and not allow(exact))):
            exact = None  # hidden by the permission view: it must not leak through a suggestion either

        parts = [part for part in name.split(".") if part]
        if not parts:
            return [exact] if exact is not None else []
        named = [
            self._segments[slug]
            for slug in (self._slugs_by_fold.get(fold_name(parts[0]), ()) if len(parts) > 1 else ())
            if slug in visible_slugs
        ]
        path = ".".join(parts[1:] if named else parts)
        guessed = [term for part in path.split(".") for term in identifier_terms(part)]
        weighted = dict.fromkeys(guessed, 1.0)
        for term in guessed:
            if term not in self._name_df:
                # A misspelled word ("isues") has no postings: add its nearest name words instead.
                for repair in difflib.get_close_matches(term, self._vocabulary(), n=2, cutoff=0.75):
                    weighted.setdefault(repair, _REPAIR_WEIGHT)

        hits = self._top(self._score(weighted, named or visible), _SUGGEST_POOL, allow) if weighted else []
        if not hits and named:
            hits = self._top(self._score(weighted, visible), _SUGGEST_POOL, allow)

        # Synonyms count as shared words too: "send_message" is what chat_post_message does.
        guessed_set = {*guessed, *(synonym for term in guessed for synonym in SYNONYMS.get(term, ()))}
        folded_path = fold_name(path)
        best = hits[0][1] if hits else 1.0
        scored: list[tuple[float, str, Action]] = []
        for action, score in hits:
            words = set(identifier_terms(action.path))
            overlap = 2 * len(guessed_set & words) / (len(guessed_set) + len(words)) if words else 0.0
            shape = difflib.SequenceMatcher(None, folded_path, fold_name(action.path), autojunk=False).ratio()
            if not overlap and shape < _MIN_SHAPE:
                continue  # shares no word and barely a letter sequence: noise, not a suggestion
            # Word overlap is order-free ("create_issue" ~ "issues.create"); shape catches what word
            # splitting misses; the search score leans toward what the action is about.
            scored.append((0.5 * overlap + 0.3 * shape + 0.2 * score / best, action.qualified_name, action))
        scored.sort(key=lambda item: (-item[0], item[1]))
        out = [exact] if exact is not None else []
        out.extend(action for _, _, action in scored if action is not exact)
        return out[:limit]

    def _vocabulary(self) -> list[str]:
        if self._name_vocab is None:
            self._name_vocab = sorted(self._name_df)
        return self._name_vocab


def _build(slug: str, start: int, actions: Sequence[Action]) -> _Segment:
    """Tokenize and weight one connector's actions; touches nothing outside the new segment."""
    ident_cache: dict[str, list[str]] = {}

    def ident(text: str) -> list[str]:
        # Parameter names ("owner", "per_page") repeat across a whole API: split each once.
        found = ident_cache.get(text)
        if found is None:
            found = ident_cache[text] = identifier_terms(text)
        return found

    fields: list[tuple[list[str], ...]] = []
    totals = [0] * len(_FIELDS)
    for action in actions:
        # A word repeated in a name comes from the URL ("customers.customer"), not from emphasis.
        name = list(dict.fromkeys(term for part in action.qualified_name.split(".") for term in ident(part)))
        doc = (
            name,
            prose_terms(action.summary),
            prose_terms(clean_description(action.description)),
            [term for param in _param_names(action.input_schema) for term in ident(param)],
            ident(action.path.rsplit(".", 1)[-1])[:1],
        )
        fields.append(doc)
        for i, field in enumerate(doc):
            totals[i] += len(field)

    # Per-field average lengths of this segment only: a rebuild of one connector must not change the
    # stored weights of another. Only idf is global, and it is computed at query time.
    averages = [max(total / max(len(actions), 1), 1.0) for total in totals]
    postings: dict[str, tuple[list[int], list[float]]] = {}
    name_terms: dict[str, None] = {}
    for doc_id, doc in enumerate(fields, start):
        pseudo_tf: dict[str, float] = {}
        for field, (weight, b), average in zip(doc, _FIELDS, averages, strict=True):
            if field:
                # BM25F: each occurrence adds its field's weight over the field's length norm.
                unit = weight / (1.0 - b + b * len(field) / average)
                for term in field:
                    pseudo_tf[term] = pseudo_tf.get(term, 0.0) + unit
        name_terms.update(dict.fromkeys(doc[0]))
        for term, tf in pseudo_tf.items():
            column = postings.get(term)
            if column is None:
                column = postings[term] = ([], [])
            column[0].append(doc_id)
            column[1].append(tf * (_K1 + 1.0) / (_K1 + tf))

    doc_ids: array[int] = array("I")
    weights: array[float] = array("f")
    spans: dict[str, int] = {}
    for term, (ids, values) in postings.items():
        spans[term] = len(doc_ids) << _COUNT_BITS | len(ids)
        doc_ids.extend(ids)
        weights.extend(values)

    by_folded: dict[str, int | tuple[int, ...]] = {}
    for position, action in enumerate(actions):
        key = fold_name(action.path)
        previous = by_folded.get(key)
        if previous is None:
            by_folded[key] = position
        else:
            by_folded[key] = (*((previous,) if isinstance(previous, int) else previous), position)
    return _Segment(
        slug=slug,
        start=start,
        actions=tuple(actions),
        by_path={action.path: position for position, action in enumerate(actions)},
        by_folded=by_folded,
        spans=spans,
        doc_ids=doc_ids,
        weights=weights,
        name_terms=tuple(name_terms),
    )


def _param_names(schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return [name for name in properties if isinstance(name, str)] if isinstance(properties, dict) else []


def _add_counts(total: dict[str, int], counts: Iterable[tuple[str, int]], sign: int) -> None:
    for term, count in counts:
        value = total.get(term, 0) + sign * count
        if value > 0:
            total[term] = value
        else:
            total.pop(term, None)
