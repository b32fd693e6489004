"""A message of several asks gets an answer for each: the first hits cover its asks, not one ask's look-alikes.

"Find the invoice, then email it to the customer" ranked as one query fills the first places with
whatever sits nearest the whole message, often near-twins of its strongest ask, and the second ask's
action lands out of sight. ``cover`` re-orders the fused ranking greedily (xQuAD, Santos et al. 2010):
the whole message's first hit stays first; each next place goes to the candidate with the best mix of
its fused score and the asks it serves that the places before left uncovered. An ask counts as covered
by a hit in proportion to how relevant the hit is to it (its cosine to the ask, scaled over the ask's own
best ``ASK_SPREAD``), so a second hit for a covered ask weighs less than a first hit for an open one.

The candidates are the fused ranking's and each ask's own nearest actions (``ASK_POOL``), which the
whole message's ranking may not reach: an action of the second ask sits far from a message that spends
most of its words on the first.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ASK_POOL", "ASK_SPREAD", "ASK_WEIGHT", "COVER_POOL", "cover", "scaled_relevance"]

ASK_WEIGHT = 0.6
"""Weight of each ask's open share beside the fused score (both in [0, 1]): an ask's best action, while
nothing placed serves that ask, outranks a near-twin of a hit already placed however well the whole
message scores it (docs/benchmarks.md has the weights tried)."""

ASK_POOL = 10
"""Each ask's nearest actions (by cosine) added to the candidates."""

ASK_SPREAD = 20
"""An ask's relevance is its cosine scaled between its ``ASK_SPREAD``-th best among the candidates (0)
and its best (1)."""

COVER_POOL = 30
"""Fused hits re-ordered: past these, a hit serves none of the asks well enough to be placed."""

_MIN_SPREAD = 0.1
"""As the fusion's own floor on a cosine range: near-equal cosines are noise, not relevance."""


def scaled_relevance(cosines: Sequence[float]) -> list[float]:
    """One ask's cosines over the candidates, scaled to [0, 1] (see ``ASK_SPREAD``)."""
    if not cosines:
        return []
    ordered = sorted(cosines, reverse=True)
    high, low = ordered[0], ordered[min(ASK_SPREAD, len(ordered)) - 1]
    spread = max(high - low, _MIN_SPREAD)
    return [min(max((cosine - low) / spread, 0.0), 1.0) for cosine in cosines]


def cover(fused: Sequence[float], relevance: Sequence[Sequence[float]], limit: int) -> list[int]:
    """The candidates' order (indexes) for the first ``limit`` places.

    ``fused[j]`` is candidate ``j``'s fused score (0 for one only an ask found), candidate 0 the whole
    message's first hit; ``relevance[i][j]`` is how relevant candidate ``j`` is to ask ``i``, in [0, 1].
    """
    count = len(fused)
    if count == 0 or limit <= 0:
        return []
    best = max(fused) or 1.0
    open_share = [1.0 - row[0] for row in relevance]  # how much of each ask the places so far leave open
    order = [0]
    rest = list(range(1, count))
    while rest and len(order) < limit:
        scores = [
            (1.0 - ASK_WEIGHT) * fused[j] / best
            + ASK_WEIGHT * sum(left * row[j] for left, row in zip(open_share, relevance, strict=True))
            for j in rest
        ]
        at = max(range(len(rest)), key=lambda k: (scores[k], -rest[k]))
        chosen = rest.pop(at)
        order.append(chosen)
        open_share = [left * (1.0 - row[chosen]) for left, row in zip(open_share, relevance, strict=True)]
    return order
