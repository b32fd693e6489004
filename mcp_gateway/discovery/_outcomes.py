"""What a request asks to achieve, read by meaning: the query's vector against the outcomes ``_effects`` knows.

A goal worded by its effect ("make sure the intern can no longer see payroll", "cancel lunch with Mark on
Thursday") shares few words with the operation that achieves it (``permissions.delete``,
``events.delete``), and an action's vector is mostly its name and summary. The outcomes ``_effects``
writes for mechanisms ("they can no longer see or use it, access taken away", "cancel it, call it off")
are few (under a hundred) and worded as people word goals, so the model places a goal near its outcome
more surely than near any one action. ``Outcomes`` holds their vectors (embedded once, by the model the
actions were embedded with); a query whose nearest outcomes stand out from the rest (``MARGIN`` over
their mean cosine, so a model with another cosine scale is read alike) lifts the best two candidates
achieving each by ``LIFT`` in the fusion: a nudge among those either side found, never a new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..vocabulary.model import Action
from ._effects import OUTCOMES, effect_phrases

if TYPE_CHECKING:
    from .dense import Matrix

__all__ = ["LIFT", "MARGIN", "NEAREST", "OUTCOMES", "PER_OUTCOME", "Outcomes"]

NEAREST = 3
"""Outcomes read per query, its nearest."""

MARGIN = 0.35
"""How far above the mean cosine over every outcome one of the nearest must be to count as asked for."""

LIFT = 0.1
"""Added to the fused score of an action achieving an outcome asked for (fused scores run 0 to about 1.4)."""

PER_OUTCOME = 2
"""Candidates lifted per outcome asked for, the best-scored: the action achieving it and its near-twin, not
every action of the catalog doing the same to other things (a message of several asks keeps room for the
others)."""

_KEPT = 65_536
"""Actions whose outcomes are remembered (bounded: catalogs change)."""

_POSITION = {outcome: i for i, outcome in enumerate(OUTCOMES)}


class Outcomes:
    """The outcomes' vectors, and which of them each action achieves (read once per action)."""

    def __init__(self, vectors: Matrix) -> None:
        self._vectors = vectors
        self._achieved: dict[str, tuple[Action, frozenset[int]]] = {}

    def asked(self, vector: Matrix) -> frozenset[int]:
        """The outcomes a query's vector asks for: those of its ``NEAREST`` that stand ``MARGIN`` out."""
        import numpy as np

        cosines = self._vectors @ vector
        floor = float(cosines.mean()) + MARGIN
        return frozenset(int(i) for i in np.argsort(-cosines)[:NEAREST] if cosines[i] >= floor)

    def achieved(self, action: Action) -> frozenset[int]:
        """The outcomes ``action`` achieves (``_effects.effect_phrases``)."""
        kept = self._achieved.get(action.qualified_name)
        if kept is not None and kept[0] is action:
            return kept[1]
        found = frozenset(_POSITION[phrase] for phrase in effect_phrases(action))
        if len(self._achieved) >= _KEPT:
            self._achieved.clear()
        self._achieved[action.qualified_name] = (action, found)
        return found

    def lifts(self, vector: Matrix, scores: Mapping[str, float], actions: Mapping[str, Action]) -> dict[str, float]:
        """What the candidates (``scores``: fused score by name, ``actions``: by name) gain for the query
        ``vector``: ``LIFT`` for the ``PER_OUTCOME`` best-scored achieving each outcome it asks for."""
        asked = self.asked(vector)
        if not asked:
            return {}
        out: dict[str, float] = {}
        taken = dict.fromkeys(asked, 0)
        for name in sorted(scores, key=lambda candidate: (-scores[candidate], candidate)):
            for outcome in asked & self.achieved(actions[name]):
                if taken[outcome] < PER_OUTCOME:
                    taken[outcome] += 1
                    out[name] = LIFT
            if min(taken.values()) >= PER_OUTCOME:
                break
        return out
