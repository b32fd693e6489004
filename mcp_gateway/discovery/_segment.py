"""One connector's share of the index: its actions analyzed into weighted fields and packed postings.

An action is eight BM25F fields: its qualified name's words, its summary (or its description's first
sentence when it has none: MCP tools and function-calling schemas rarely have a summary), the head
of its description, its input parameter names, the heads of its input parameter descriptions, and
its verb (the first word of the last path segment: APIs name the operation there), its group, and
what it achieves in everyday words (``_effects``). Besides the
postings, a segment keeps each action's *exact words* (unstemmed, as one space-delimited string)
for the second ranking stage, which tells near-twins apart by the words an agent actually used.
"""

from __future__ import annotations

import re
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..vocabulary.model import Action, HttpBinding, OpenAPIBinding, PostmanBinding
from ._effects import effect_phrases, enum_words, kind_words
from ._rest_shape import collection_reads
from ._text import (
    clean_description,
    compatible,
    exact_forms,
    first_sentence,
    fold_name,
    identifier_terms,
    identifier_words,
    is_bare_route,
    is_identifier,
    prose_terms,
    route_summary,
    stem,
)

__all__ = [
    "FIELDS",
    "Segment",
    "build_segment",
    "dense_text",
    "dense_texts",
    "headline",
    "params_of",
    "readable",
    "summary_of",
]

EFFECT_WEIGHT = 1.5
"""BM25F weight of an action's effect words (``_effects.effect_words``): light, so a name or summary
that says the thing outright still wins."""

MAX_EFFECT_TERMS = 24
"""Terms of an action's effect field, at most: its outcome's first, then its enum values'."""

K1 = 4.8
"""BM25 term-frequency saturation; tuned with the field weights (see ``FIELDS``)."""

# BM25F fields as (weight, b), in the order build_segment produces them. Tuned by coordinate ascent
# on BFCL's non-live categories and the dev split of tests/data/intents/github.json (held-out sets:
# BFCL live, the intents' holdout split; scripts/bench_discover_quality.py prints all of them).
# Names get b=1 so that every extra word in a name costs: for "create an issue", issues.create beats
# reactions.create_for_issue. Parameters get a low b: a long parameter list is not a rambling
# document, each parameter speaks for itself.
FIELDS: tuple[tuple[float, float], ...] = (
    (0.9, 0.75),  # qualified-name words, each counted once
    (2.83, 1.0),  # summary, or the description's first sentence when there is none
    (0.05, 0.75),  # description head
    (0.64, 0.25),  # input parameter names
    (0.3, 0.25),  # input parameter description heads
    (2.4, 0.0),  # verb
    (0.4, 0.5),  # group: OpenAPI tag, Postman folders, GraphQL result type, MCP title (``Action.group``)
    (EFFECT_WEIGHT, 0.5),  # what it achieves in everyday words, and its parameters' enum values (``_effects``)
)
PARAM_CHARS = 100
"""Head of each parameter description that is indexed: what the parameter is, not its fine print."""
MAX_PARAMS = 24
"""Parameters past this many are not indexed (nor shown): huge request bodies would drown the rest."""
RAW_DESCRIPTION_CHARS = 600
"""Head of the description whose exact words the second stage compares with the query's."""

_COUNT_BITS = 24
COUNT_MASK = (1 << _COUNT_BITS) - 1


@dataclass(slots=True, eq=False)
class Segment:
    """One connector's share of the index, immutable once built.

    Its actions have the consecutive global ids ``start .. start + len(actions) - 1``. All its postings
    sit in two flat columns, grouped by term; ``spans`` says where each term's run is. One dict entry
    per (connector, term) instead of two ``array`` objects: most terms have a handful of postings, and
    array headers would outweigh them.
    """

    slug: str
    start: int
    actions: Sequence[Action]
    """A tuple, or a sequence that decodes each action on first use (``store.catalog_lines``)."""
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
    exact: tuple[str, ...]
    """Per action, its distinct exact words as `` w1 w2 … `` (spaces around each), for substring tests."""
    names: tuple[str, ...]
    """Per action, its name's terms, the same way (the second stage's name features)."""
    params: tuple[str, ...]
    """Per action, its parameter names' terms, the same way."""
    about: tuple[str, ...]
    """Per action, the terms of its name and summary, the same way: what the action acts on."""
    returns: tuple[str, ...]
    """Per action, the terms of its response's field names (``Action.response_fields``), the same way:
    not indexed (common field names would blur every term's idf), only read by the second stage."""

    def postings(self, term: str) -> tuple[array[int], array[float]] | None:
        span = self.spans.get(term)
        return None if span is None else self.postings_at(span)

    def postings_at(self, span: int) -> tuple[array[int], array[float]]:
        """The ``(doc ids, weights)`` of a term's run, given its entry in ``spans``."""
        offset, count = span >> _COUNT_BITS, span & COUNT_MASK
        return self.doc_ids[offset : offset + count], self.weights[offset : offset + count]


def params_of(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, description) of an input schema's first ``MAX_PARAMS`` top-level properties.

    A raw body parameter whose default is a JSON example (Postman's raw bodies: ``{"targetAccount": …,
    "quote": …}``) adds that example's keys after it: they are the fields the request really takes.
    """
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return []
    out: list[tuple[str, str]] = []
    for name, spec in list(properties.items())[:MAX_PARAMS]:
        if isinstance(name, str):
            text = spec.get("description") if isinstance(spec, dict) else None
            out.append((name, text if isinstance(text, str) else ""))
            default = spec.get("default") if isinstance(spec, dict) else None
            if isinstance(default, str) and default.lstrip().startswith("{"):
                keys = dict.fromkeys(_JSON_KEY.findall(default[:_EXAMPLE_CHARS]))
                out.extend((key, "") for key in keys if key not in properties)
    return out[:MAX_PARAMS]


_JSON_KEY = re.compile(r'"([A-Za-z_][\w-]{0,63})"\s*:')
_EXAMPLE_CHARS = 4000


def summary_of(action: Action) -> str:
    """An action's one-line summary, readable whatever its source.

    Its own, read as words when it is only an identifier ("ListEmployees" -> "List employees": one
    token of the index otherwise); or, when it has none or it is a bare route ("GET /rates"), its
    description's first sentence (the gateway's boilerplate left out); or, with no description either
    (or one that only repeats the route), a line built from the route's method and nouns ("list rates").
    """
    summary = action.summary
    if summary and is_identifier(summary):
        return identifier_words(summary)
    if summary and not is_bare_route(summary):
        return summary
    sentence = first_sentence(action.description)
    if sentence and not is_bare_route(sentence):
        return sentence
    # A Postman request often repeats its route as its description's first line: no better.
    route = summary if summary else sentence
    return route_summary(route) if route else ""


SHARED_SUMMARY = 3
"""Actions of one connector that share a summary ("Inserts a new resource into this collection.", "Retrieves
a list of resources, possibly filtered.": 53 of YouTube's 80 operations) from which it says nothing of any
of them: discovery reads their routes instead (``readable``)."""


def readable(actions: Sequence[Action]) -> list[Action]:
    """One connector's ``actions`` as discovery reads them: an HTTP action whose summary ``SHARED_SUMMARY``
    or more of them share reads a line made of its route instead ("create youtube subscriptions" for
    ``POST /youtube/v3/subscriptions``), its description without that sentence. The others, and every
    action of a connector with no such summary, are the same objects.

    The lexical segment and the dense cards read these; hits, ``describe`` and the catalog keep the
    API's own words."""
    summaries = [summary_of(action).strip().lower() for action in actions]
    shared = {summary for summary, count in Counter(summaries).items() if summary and count >= SHARED_SUMMARY}
    if not shared:
        return list(actions)
    out: list[Action] = []
    for action, lowered in zip(actions, summaries, strict=True):
        binding = action.binding
        if lowered in shared and isinstance(binding, OpenAPIBinding | HttpBinding | PostmanBinding):
            summary = summary_of(action).strip()
            description = action.description.strip()
            head = summary.rstrip(".")
            if description.lower().startswith(head.lower()):
                description = description[len(head) :].lstrip(". ")
            route = route_summary(f"{binding.method} {binding.url}")
            action = action.model_copy(update={"summary": route, "description": description})
        out.append(action)
    return out


DENSE_WORDS = 40
"""Words of an action's card that are embedded at most (the name and summary come first, so a cap cuts
the description's tail and the parameters). Embedding costs CPU per token: with the headline beside
the card (``dense_texts``), 90 words and 10 parameters brought the embedding of 10,000 actions
close to the 5-minute budget on a 2-core host; 40 and 6 cut the card from 57 to 47 tokens on average
(GitHub, Stripe, Slack) for the same dev recall (hybrid R@1 / R@5 / R@10 65.9 / 81.6 / 86.1 before,
65.9 / 81.3 / 87.0 after; 30 words lost 0.7 of R@5)."""
DENSE_PARAMS = 6
DENSE_DESCRIPTION_CHARS = 240
"""The description's head that is embedded, at most its first two sentences: the rest is fine print
(media types, scopes, pagination) that pulls every action of an API towards the same point."""

_SENTENCES = re.compile(r"(?<=[a-z0-9)][.!?])\s+")

_MARKUP = re.compile(r"\[!\w+\]|[*_`#>|]+|\s+")
_IDENT_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def dense_text(action: Action) -> str:
    """What an action's vector is made of: a short plain-text card, the most telling words first.

    ``"issues create (issues): Create an issue. Creates an issue in a repository … Parameters: owner,
    repo, title, body"``: its name's words and its group, its readable summary (``summary_of``) and what
    it achieves in everyday words when ``_effects`` knows (``pins add: Pins an item to a channel (keep
    it at the top, visible to everyone, …).``), the
    description's head when it says more than the summary (markup out, not repeated), parameter names;
    at most ``DENSE_WORDS`` words.
    """
    words = _name_words(action)
    group = " ".join(w.lower() for w in _IDENT_WORDS.findall(action.group))
    head = f"{words} ({group})" if group and group not in words else words
    summary = _plain(summary_of(action))
    description = _plain(clean_description(action.description, DENSE_DESCRIPTION_CHARS))
    if description.lower().startswith(summary.lower().rstrip(".")):
        description = description[len(summary.rstrip(".")) :].lstrip(". ")
    description = " ".join(_SENTENCES.split(description)[:2])
    params = [name for name, _ in params_of(action.input_schema)][:DENSE_PARAMS]
    effect = "; ".join(effect_phrases(action))
    effect = f" ({effect})." if effect else "."
    text = f"{head}: {summary.rstrip('.')}{effect} {description}".strip()
    if params:
        text = f"{text} Parameters: {', '.join(params)}"
    return " ".join(text.split()[:DENSE_WORDS])


def headline(action: Action) -> str:
    """An action in one line, its name's words and its readable summary: ``"issues create: Create an issue"``."""
    words = _name_words(action)
    summary = _plain(summary_of(action)).rstrip(".")
    return f"{words}: {summary}" if summary else words


def dense_texts(action: Action) -> tuple[str, ...]:
    """The texts an action's vector is the mean of: its card (``dense_text``) and its ``headline``.

    A query's score is then the mean of its cosines to the two. The card reaches a query through the
    description's and the parameters' words; the headline matches a short intent, which is what agents
    mostly send, without the card's other words diluting the name and summary. On the dev intents,
    pooled over 21 APIs (``scripts/bench_discover_quality.py``), against the card alone: dense R@1
    54.0 -> 61.0, hybrid R@1 / R@5 / R@10 64.0 / 80.7 / 86.6 -> 65.9 / 81.3 / 87.0; the headline
    alone or the greater of the two cosines did less. A card that says no more than the headline (no
    group, description or parameters) is embedded alone.
    """
    card, line = dense_text(action), headline(action)
    return (card,) if card.rstrip(". ") == line else (card, line)


def _name_words(action: Action) -> str:
    """The words of an action's path, lowercased: ``issues.createComment`` -> ``"issues create comment"``."""
    return " ".join(w.lower() for part in action.path.split(".") for w in _IDENT_WORDS.findall(part))


def _plain(text: str) -> str:
    """Markdown and layout out of a description: emphasis, code ticks, headings, admonitions, line breaks."""
    return _MARKUP.sub(" ", text).strip()


_Param = tuple[list[str], list[str], list[str]]
"""One parameter analyzed: its name's terms, its description's terms, its exact words."""


_READS = frozenset(stem(verb) for verb in ("get", "fetch", "retrieve", "read"))
_LIST = stem("list")


def _verbs(named: list[str], whole_collection: bool) -> list[str]:
    """An action's verb field: its name's verb, and ``list`` for a read named ``get`` of a whole collection
    (``getCampaigns`` is ``GET /ad_campaign``): an agent asks to list what the API calls getting."""
    return [*named, _LIST] if whole_collection and named and named[0] in _READS else named


def build_segment(slug: str, start: int, actions: Sequence[Action]) -> Segment:
    """Tokenize and weight one connector's actions; touches nothing outside the new segment."""
    ident_cache: dict[str, list[str]] = {}
    param_cache: dict[tuple[str, str], _Param] = {}

    def ident(text: str) -> list[str]:
        found = ident_cache.get(text)
        if found is None:
            found = ident_cache[text] = identifier_terms(text)
        return found

    def param(name: str, text: str) -> _Param:
        # Parameters ("owner": "The account owner of the repository...") repeat across a whole API:
        # analyze each distinct one once.
        found = param_cache.get((name, text))
        if found is None:
            head = clean_description(text, PARAM_CHARS) if text else ""
            found = param_cache[(name, text)] = (ident(name), prose_terms(head), exact_forms(f"{name} {head}"))
        return found

    fields: list[tuple[list[str], ...]] = []
    exact: list[str] = []
    names_column: list[str] = []
    params_column: list[str] = []
    about_column: list[str] = []
    returns_column: list[str] = []
    totals = [0] * len(FIELDS)
    for action, whole_collection in zip(readable(actions), collection_reads(actions), strict=True):
        params = [param(name, text) for name, text in params_of(action.input_schema)]
        description = clean_description(action.description, RAW_DESCRIPTION_CHARS)
        # What it achieves counts as what it is about (``about``); its enum values are indexed beside it.
        outcome = prose_terms(" ".join(effect_phrases(action)))
        doc = (
            list(dict.fromkeys(term for part in action.qualified_name.split(".") for term in ident(part))),
            prose_terms(summary_of(action)),
            prose_terms(clean_description(description)),
            [term for terms, _, _ in params for term in terms],
            [term for _, terms, _ in params for term in terms],
            _verbs(ident(action.path.rsplit(".", 1)[-1])[:1], whole_collection),
            prose_terms(action.group) if action.group else [],
            list(dict.fromkeys([*outcome, *prose_terms(" ".join([*enum_words(action), *kind_words(action)]))]))[
                :MAX_EFFECT_TERMS
            ],
        )
        fields.append(doc)
        words = exact_forms(f"{action.qualified_name} {summary_of(action)} {description}")
        words.extend(word for _, _, forms in params for word in forms)
        exact.append(f" {' '.join(dict.fromkeys(words))} ")
        names_column.append(f" {' '.join(doc[0])} ")
        params_column.append(f" {' '.join(dict.fromkeys(doc[3]))} ")
        about_column.append(f" {' '.join(dict.fromkeys((*doc[0], *doc[1], *outcome)))} ")
        returns_column.append(f" {' '.join(dict.fromkeys(identifier_terms(action.response_fields)))} ")
        for i, field in enumerate(doc):
            totals[i] += len(field)
    # Per-field average lengths of this segment only: a rebuild of one connector must not change the
    # stored weights of another. Only idf is global, and it is computed at query time.
    averages = [max(total / max(len(actions), 1), 1.0) for total in totals]
    postings: dict[str, tuple[list[int], list[float]]] = {}
    names: dict[str, None] = {}
    k1 = K1
    for doc_id, doc in enumerate(fields, start):
        pseudo_tf: dict[str, float] = {}
        for field, (weight, b), average in zip(doc, FIELDS, averages, strict=True):
            if field and weight:
                # BM25F: each occurrence adds its field's weight over the field's length norm.
                unit = weight / (1.0 - b + b * len(field) / average)
                for term in field:
                    pseudo_tf[term] = pseudo_tf.get(term, 0.0) + unit
        names.update(dict.fromkeys(doc[0]))
        for term, tf in pseudo_tf.items():
            column = postings.get(term)
            if column is None:
                column = postings[term] = ([], [])
            column[0].append(doc_id)
            column[1].append(tf * (k1 + 1.0) / (k1 + tf))

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
    for position, action in enumerate(actions):
        for alias in action.aliases:
            by_folded.setdefault(fold_name(compatible(alias)), position)  # a real name wins over an earlier one
    return Segment(
        slug=slug,
        start=start,
        actions=tuple(actions),
        by_path={action.path: position for position, action in enumerate(actions)},
        by_folded=by_folded,
        spans=spans,
        doc_ids=doc_ids,
        weights=weights,
        name_terms=tuple(names),
        exact=tuple(exact),
        names=tuple(names_column),
        params=tuple(params_column),
        about=tuple(about_column),
        returns=tuple(returns_column),
    )
