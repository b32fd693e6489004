"""Learning from use: an action that queries like this one led to before is lifted, a little.

When ``discover`` answered a query and the agent then called one of its answers successfully, that
(query, action) pair is a *use* (``core.use_memory`` records them). A later query close to a used one
lifts that action's score by at most ``LIFT_CAP`` of the best hit's score: enough to settle what the
ranker leaves close (two actions that both fit, where this deployment always means one), never
enough to show an action the ranker found no reason to show: only hits already in the ranked pool
(``POOL``) move, and only the ones the caller may see are in it.

How close: the cosine between the query's vector and the used query's (hybrid discovery), else the
share of the two queries' catalog words they have in common (``closeness``). Under
``SIMILAR_COSINE`` or ``SIMILAR_WORDS`` a use counts nothing; it counts fully from ``SAME_COSINE``
or ``SAME_WORDS`` (the same query, or nearly).

How much: each use counts its closeness times ``0.5 ** (age / half_life)``; the uses of one action
by one principal count at most ``PER_PRINCIPAL`` together, decayed as their youngest, so an agent that
loops on one action (or asks many rewordings and calls it each time) weighs like one careful use made
when its last was, and its loop ages as that use would; and the lift is
``LIFT_CAP * (1 - (1 - FIRST_USE) ** evidence)``: one fresh use of the same query gives three
quarters of the cap, and one principal alone never more.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..vocabulary.model import Action
from ._index import SearchResult
from ._text import raw_words, stem
from ._twins import group_twins
from .dense import Matrix

__all__ = [
    "FIRST_USE",
    "HALF_LIFE_DAYS",
    "LIFT_CAP",
    "PER_PRINCIPAL",
    "POOL",
    "SAME_COSINE",
    "SAME_WORDS",
    "SIMILAR_COSINE",
    "SIMILAR_WORDS",
    "Use",
    "closeness",
    "lifted",
    "strengths",
    "terms_of",
]

LIFT_CAP = 0.3
"""The most an action is lifted, as a share of the best hit's score: close calls move, clear answers stay."""

FIRST_USE = 0.75
"""The share of ``LIFT_CAP`` one fresh use of the same query gives; more close uses approach the cap."""

HALF_LIFE_DAYS = 14.0
"""A use counts half as much after this long: catalogs and habits change."""

PER_PRINCIPAL = 1.0
"""The most one principal's uses of one action count together (one fresh use of the same query
being 1): repetition by one agent is not agreement, so one agent alone never gets past ``FIRST_USE``."""

POOL = 20
"""How many of the ranker's hits may be lifted (the answer is cut to the caller's limit after)."""

SIMILAR_COSINE = 0.4
"""Query vectors closer than this may be about the same thing (the bundled model's scale); from
``SAME_COSINE`` a use counts fully. The model places requests near the actions that serve them, not
rewordings near each other: two wordings of one request meet at a median cosine of about 0.5, two
requests for different actions stay under 0.4 nineteen times in twenty. A use lifts only its own
action, and only where the ranker already put it in the pool, so a loose gate costs little."""

SAME_COSINE = 0.7

SIMILAR_WORDS = 0.34
"""Without vectors: the share of words two queries must have in common before a use counts (fully
from ``SAME_WORDS``)."""

SAME_WORDS = 0.84


@dataclass(frozen=True, slots=True)
class Use:
    """One earlier query that led to a successful call of ``action``."""

    action: str
    who: str
    """The principal that made it (``PER_PRINCIPAL``)."""
    terms: frozenset[str]
    """The index terms of its catalog words (``terms_of``)."""
    vector: Matrix | None
    """Its unit vector, or None (lexical discovery, or another model's)."""
    age: float
    """Seconds since it was made."""


def terms_of(words: str) -> frozenset[str]:
    """The index terms of a query's words, as the lexical ranker reads them."""
    return frozenset(stem(word) for word in raw_words(words))


def closeness(use: Use, terms: frozenset[str], vector: Matrix | None) -> float:
    """How much ``use`` is about the query (``terms``, ``vector``): 0 when not close enough, 1 when the same."""
    if vector is not None and use.vector is not None:
        import numpy as np

        similarity = float(np.dot(np.asarray(vector, dtype=np.float32), use.vector))
        floor, full = SIMILAR_COSINE, SAME_COSINE
    elif terms and use.terms:
        similarity = len(terms & use.terms) / max(len(terms), len(use.terms))
        floor, full = SIMILAR_WORDS, SAME_WORDS
    else:
        return 0.0
    return min(max((similarity - floor) / (full - floor), 0.0), 1.0)


def strengths(
    uses: Iterable[Use], terms: frozenset[str], vector: Matrix | None, *, half_life_days: float = HALF_LIFE_DAYS
) -> dict[str, float]:
    """Each used action's lift strength for this query, in [0, 1): ``1 - (1 - FIRST_USE) ** evidence``."""
    half_life = half_life_days * 86400.0
    by_principal: dict[tuple[str, str], float] = {}
    newest: dict[tuple[str, str], float] = {}  # the decay of each principal's youngest close use
    for use in uses:
        close = closeness(use, terms, vector)
        if close <= 0.0:
            continue
        key = (use.action, use.who)
        decay = 0.5 ** (max(use.age, 0.0) / half_life)
        by_principal[key] = by_principal.get(key, 0.0) + close * decay
        newest[key] = max(newest.get(key, 0.0), decay)
    evidence: dict[str, float] = {}
    for key, weight in by_principal.items():
        # Bounded by what one use as young as the youngest would give: many old rewordings of one
        # principal add up to one use of their age, not to a fresh one.
        evidence[key[0]] = evidence.get(key[0], 0.0) + min(weight, PER_PRINCIPAL * newest[key])
    return {action: 1.0 - math.pow(1.0 - FIRST_USE, weight) for action, weight in evidence.items()}


def lifted(result: SearchResult, strength: Mapping[str, float], limit: int) -> SearchResult:
    """``result`` with each hit lifted by ``LIFT_CAP`` times the best score times its ``strength``, cut to
    ``limit`` and its near-twins grouped again. Confidence and hint stay the ranker's.

    A lifted hit moves up ahead of the first hit it now outscores, never down; the others keep the ranker's order,
    which is not always its scores' (a message's asks are covered first, and between near-twins the kind
    the request asks for leads): re-sorting them by score would undo both once an agent has any use."""
    hits = list(result.hits[:POOL] if strength else result.hits)
    if strength and hits:
        top = max(abs(score) for _, score in hits) or 1.0
        hits = [(action, score + LIFT_CAP * top * strength.get(action.qualified_name, 0.0)) for action, score in hits]
        raised = sorted((hit for hit in hits if strength.get(hit[0].qualified_name, 0.0) > 0.0), key=lambda h: -h[1])
        for hit in raised:  # the highest first, so each lands after those lifted above it
            now = hits.index(hit)
            at = next((i for i, (_, score) in enumerate(hits[:now]) if score < hit[1]), now)
            hits.insert(at, hits.pop(now))
    ordered, twins = group_twins(_cut(hits, limit))
    return SearchResult(
        ordered, result.confidence, result.hint, twins, result.named, result.vector, result.unserved, result.asked
    )


def _cut(hits: Sequence[tuple[Action, float]], limit: int) -> list[tuple[Action, float]]:
    return list(hits[: max(limit, 0)])
