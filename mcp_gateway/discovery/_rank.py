"""The second ranking stage: BM25F's best few, re-ordered by a small linear model over five features.

BM25F finds the right action among the first forty almost always (98 % on BFCL, 95 % on the GitHub
intents); what it gets wrong is the order among near-twins ("calculate_triangle_area" and
"geometry.area_triangle", "issues.create" and "issues.create_label"). Five features, each in [0, 1]
or a small count, settle most of those:

- ``score``: the BM25F score over the best one's: how close the action comes to the best match the
  caller can see;
- ``name``: the share of the query's idf mass found among the action's name words;
- ``params``: the same among its parameter names (a negative weight: matching only on a parameter
  name means the action *takes* the thing, not that it *acts* on it);
- ``exact``: the share of the query's idf mass carried by words found *as written* (unstemmed) in the
  action's name, summary, description head and parameters: stemming and synonyms help recall but
  blur exactly the distinctions that separate near-twins;
- ``length``: the number of words in the action's name (a negative weight: of two names that match
  equally, the shorter one is about the query, the longer one about a sub-resource).

The weights were tuned by coordinate ascent together with the BM25F field weights, on the same
tuning sets (see ``_segment.FIELDS``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from ..vocabulary.model import Action

__all__ = ["POOL", "rerank"]

POOL = 40
"""How many BM25F hits the second stage re-orders (more when the caller asks for more)."""

W_SCORE = 0.68
W_NAME = 0.2
W_PARAMS = -0.1
W_EXACT = 0.75
W_LENGTH = -0.05
W_OBJECT = 0.3
"""The share of the query's *object* mass (its words other than generic verbs) in the action's name and
summary: "add 'Premium T-shirt' to our product catalog" is about products, and an action that only
shares "add" with it (``stars.add``) must not win."""
W_VERB_ONLY = -0.3
"""Malus for an action whose name and summary share none of the query's objects, only its verb."""
W_VERB = 0.15
"""Bonus when the action's name has a verb of the kind the query asks for (create, delete, update, read),
the same malus when its only such verbs are of another kind."""
W_RETURNS = 0.3
"""Bonus for the share of the query's object mass found only among the names of the fields the action
returns ("how much money is *available*": a balance): weak evidence, so small and not indexed."""
W_CONNECTOR = 0.35
"""Bonus for an action of a connector the query names ("in Slack", "our Stripe"): a strong prior, not a filter."""
_MAX_LENGTH = 12
_OFFSET = 0.1 + 0.05 * _MAX_LENGTH
"""Lifts every final score above zero (the negative weights' largest pull) without changing the order."""


def rerank(
    candidates: Sequence[tuple[Action, float, str, str, str, str, str]],
    weighted: dict[str, float],
    idf: Callable[[str], float],
    exact_query: Sequence[tuple[str, float]],
    *,
    verbs: Collection[str] = (),
    named: Collection[str] = (),
    verb_kinds: dict[str, str] | None = None,
    asked: str | None = None,
) -> list[tuple[Action, float]]:
    """Order candidates by the linear model, best first.

    A candidate is ``(action, bm25f score, exact words, name terms, parameter-name terms, name and
    summary terms)``, the last four as a segment stores them (`` w1 w2 … ``). ``weighted`` is the
    analyzed query (term -> query weight), ``exact_query`` its exact words as `` word `` with their
    idf, ``verbs`` the generic verbs (not objects), ``named`` the connectors the query names, ``asked``
    the kind of operation its opening verb asks for (``_message.asked_kind``).
    """
    mass = [(f" {term} ", idf(term) * weight) for term, weight in weighted.items()]
    total = sum(value for _, value in mass) or 1.0
    objects = [(term, value) for term, value in mass if term.strip() not in verbs and weighted[term.strip()] >= 1.0]
    object_total = sum(value for _, value in objects)
    kinds = verb_kinds or {}
    wanted = {kinds[term] for term, weight in weighted.items() if weight >= 1.0 and term in kinds}
    if asked is not None:
        wanted.add(asked)
    wanted_verbs = [term for term, weight in weighted.items() if weight >= 1.0 and term in verbs]
    exact_total = sum(weight for _, weight in exact_query) or 1.0
    best = max((candidate[1] for candidate in candidates), default=0.0) or 1.0
    padded_verbs = [f" {verb} " for verb in wanted_verbs]
    ranked: list[tuple[float, str, Action]] = []
    # Sums over lists, not generators (cheaper per candidate), in the same order: the same floats.
    for action, score, exact, names, params, about, returns in candidates:
        in_name = sum([value for term, value in mass if term in names])
        if object_total:
            in_about = sum([value for term, value in objects if term in about]) / object_total
            in_returns = (
                sum([value for term, value in objects if term in returns and term not in about]) / object_total
                if len(returns) > 2  # "  " when the action's response fields are unknown: nothing to find
                else 0.0
            )
        else:
            in_about = in_returns = 0.0
        agreement = 0.0
        if wanted:
            theirs = {kinds[word] for word in kinds.keys() & names.split()}
            agreement = (1.0 if theirs & wanted else -1.0) if theirs else 0.0
        in_params = sum([value for term, value in mass if term in params])
        found = sum([weight for word, weight in exact_query if word in exact])
        final = (
            W_SCORE * score / best
            + W_NAME * in_name / total
            + W_PARAMS * in_params / total
            + W_EXACT * found / exact_total
            + W_LENGTH * min(names.count(" ") - 1, _MAX_LENGTH)
            + W_OBJECT * in_about
            + (W_VERB_ONLY if object_total and not in_about and any(v in names for v in padded_verbs) else 0.0)
            + W_VERB * agreement
            + W_RETURNS * in_returns
            + (W_CONNECTOR if action.connector in named else 0.0)
            + _OFFSET
        )
        ranked.append((final, action.qualified_name, action))
    ranked.sort(key=lambda item: (-item[0], item[1]))
    return [(action, final) for final, _, action in ranked]
