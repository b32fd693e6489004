"""What ``discover`` learns from use, per deployment: which action a query led to.

An agent asks ``discover``, then calls one of the answers, and the call succeeds: the query and the
action make a *use*. This remembers each principal's recent answers (in memory, for ``RECALL``), and
when a call of one of them succeeds it records the use in the store (``UseStore``: every instance on
one database shares them), in the scope the manifest's ``discovery.learn`` names: the agent's own
(``agent``, the default), the whole project's (``project``), or none (``off``: nothing is recorded and
nothing lifted). A later ``discover`` in that scope lifts the actions that similar queries led to
(``discovery.use_lift``: bounded, decaying, one principal's repetition weighing little).

Never across permission views: a lift only re-orders the hits the ranker returned for this caller,
which hold nothing the caller may not see, so a use of an action one agent may see and another may
not lifts nothing for the other and tells it nothing. Never a secret: of a query only its catalog
words are kept (``DiscoveryIndex.catalog_words``), and the vector kept is that of those words.
Never in the way: a store that fails to record or list uses costs the lift, not the call or the answer.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from ..discovery import DiscoveryIndex, SearchResult
from ..discovery.hybrid import HybridSearch
from ..discovery.use_lift import HALF_LIFE_DAYS, POOL, Use, lifted, strengths, terms_of
from ..services.identity import Principal
from ..store.contract import UseRecord, UseStore
from ..vocabulary.clock import Clock
from ..vocabulary.errors import GatewayError

__all__ = ["KEPT_DAYS", "MAX_USES", "RECALL", "UseMemory"]

logger = logging.getLogger(__name__)

Learn = Literal["agent", "project", "off"]

RECALL = timedelta(minutes=15)
"""A call counts as a use of a ``discover`` answer given at most this long before it."""

ANSWERS_KEPT = 8
"""A principal's most recent ``discover`` answers remembered (a call is matched to the latest holding it)."""

PRINCIPALS_KEPT = 1024
"""Principals whose recent answers are remembered at once (the least recently active is forgotten)."""

MAX_USES = 1000
"""The most recent uses of a scope that take part in a lift."""

KEPT_DAYS = 8 * HALF_LIFE_DAYS
"""Uses older than this count for under half a percent of a fresh one: the store forgets them."""

REFRESH_USE = timedelta(hours=1)
"""A use already stored is written again (its time moved on, against decay) at most this often."""

REFRESH = timedelta(seconds=30)
"""How long a scope's uses read from the store are reused (other instances' new uses show up after it)."""


@dataclass(frozen=True, slots=True)
class _Answer:
    at: datetime
    words: str
    names: tuple[str, ...]
    """The hits, best first."""


@dataclass(frozen=True, slots=True)
class _Recorded:
    record: UseRecord
    vector: Any
    terms: frozenset[str]


class UseMemory:
    """Records uses after successful calls and lifts ``discover``'s answers by them (see the module)."""

    def __init__(
        self,
        store: UseStore,
        clock: Clock,
        index: DiscoveryIndex,
        *,
        learn: Learn,
        project: str,
        dense: HybridSearch | None = None,
    ) -> None:
        self._store = store
        self._clock = clock
        self._index = index
        self._dense = dense
        self.learn: Learn = learn
        self._project = project
        self._answers: OrderedDict[str, deque[_Answer]] = OrderedDict()
        self._uses: dict[str, tuple[datetime, list[_Recorded]]] = {}
        self._forgot: datetime | None = None

    def scope(self, principal: Principal) -> str | None:
        """Whose uses ``principal`` shares: its own, the project's, or None (learning is off)."""
        if self.learn == "off":
            return None
        return f"agent:{principal.label}" if self.learn == "agent" else f"project:{self._project}"

    async def answer(
        self,
        principal: Principal,
        query: str,
        limit: int,
        ranked: Callable[[int], Awaitable[SearchResult]],
        sees: Callable[[str], bool],
    ) -> SearchResult:
        """The ranker's answer to ``query`` (``ranked``: its hits at a count), lifted by the scope's uses
        of actions the caller ``sees`` (by qualified name) close to it, cut to ``limit``; and remembered,
        so that a call of one of its hits counts as a use.

        An answer no use lifts is the ranker's own at ``limit``: a wider ranking cut to ``limit`` is not
        always the same (near-twins group otherwise), so the ``POOL`` a lift is chosen from is asked for
        only when a use is close to the query. Another agent's use of an action this one cannot see
        neither widens its search nor changes its answer."""
        found = await ranked(limit)
        scope = self.scope(principal)
        if scope is None:
            return found
        words = " ".join(self._index.catalog_words(query))
        model = self._model()
        vector = found.vector if model is not None else None
        mine = [self._as_use(r, model) for r in await self._scope_uses(scope) if sees(r.record.action)]
        strength = {name: value for name, value in strengths(mine, terms_of(words), vector).items() if value > 0}
        if strength:
            pool = found if limit >= POOL else await ranked(POOL)
            # Only an action the ranker answered with moves: a lift never shows what it found no reason to.
            answered = {action.qualified_name for action, _ in pool.hits[:POOL]}
            kept = {name: value for name, value in strength.items() if name in answered}
            if kept:
                found = lifted(pool, kept, limit)
        if words and found.hits:
            names = tuple(action.qualified_name for action, _ in found.hits)
            self._remember(principal, _Answer(self._clock.now(), words, names))
        return found

    async def called(self, principal: Principal, action: str) -> None:
        """A call of ``action`` by ``principal`` succeeded: a use, when a recent ``discover`` answered with it.

        Never raises: learning from use is a side effect of an answered call, and a store that fails
        here (locked, full, gone) must not turn the call's answer into an error after it ran."""
        try:
            await self._called(principal, action)
        except Exception as exc:
            why = exc if isinstance(exc, GatewayError | OSError) else type(exc).__name__
            logger.warning("discovery: could not record a use of %s: %s", action, why)

    async def _called(self, principal: Principal, action: str) -> None:
        scope = self.scope(principal)
        recent = self._answers.get(principal.label)
        if scope is None or not recent:
            return
        now = self._clock.now()
        # Of the recent answers holding the action, the one that ranked it best (the latest of equals):
        # a browsing query that lists everything ("list the pages") does not take the use from the ask.
        held = [
            (a.names.index(action), -i, a) for i, a in enumerate(recent) if action in a.names and now - a.at <= RECALL
        ]
        if not held:
            return
        answer = min(held, key=lambda item: item[:2])[2]
        digest = hashlib.sha256(answer.words.encode()).hexdigest()[:32]
        if self._recorded_lately(scope, action, digest, now):
            return  # an agent calling it again and again: nothing to add, nothing to embed
        model, vector = self._model(), None
        if model is not None and self._dense is not None:
            try:
                vector = await self._dense.embedder.embed_query(answer.words)
            except (GatewayError, OSError, ValueError) as exc:
                logger.warning("discovery: could not embed a use (kept without its vector): %s", exc)
                model = None
        record = UseRecord(
            scope=scope,
            action=action,
            query=digest,
            who=principal.label,
            words=answer.words,
            model=model if vector is not None else None,
            vector=_blob(vector) if vector is not None else None,
            at=now,
        )
        await self._store.record_use(record)  # a failure here is ``called``'s to log
        if self._forgot is None or now - self._forgot > timedelta(hours=1):
            self._forgot = now
            await self._store.forget_uses(now - timedelta(days=KEPT_DAYS))
        cached = self._uses.get(scope)
        if cached is not None:
            kept = [r for r in cached[1] if (r.record.action, r.record.query) != (record.action, record.query)]
            self._uses[scope] = (cached[0], [_Recorded(record, vector, terms_of(record.words)), *kept][:MAX_USES])

    # -- helpers -------------------------------------------------------------------------------------

    def _recorded_lately(self, scope: str, action: str, query: str, now: datetime) -> bool:
        """Whether this use is already stored, made less than ``REFRESH_USE`` ago (by anyone in the scope)."""
        cached = self._uses.get(scope)
        return cached is not None and any(
            r.record.action == action and r.record.query == query and now - r.record.at < REFRESH_USE for r in cached[1]
        )

    def _model(self) -> str | None:
        """The embedding model's key when ``discover`` is hybrid (its vectors compare with uses' vectors)."""
        return self._dense.embedder.provider.model if self._dense is not None else None

    def _remember(self, principal: Principal, answer: _Answer) -> None:
        answers = self._answers.pop(principal.label, None) or deque(maxlen=ANSWERS_KEPT)
        answers.append(answer)
        self._answers[principal.label] = answers
        while len(self._answers) > PRINCIPALS_KEPT:
            self._answers.popitem(last=False)

    async def _scope_uses(self, scope: str) -> Sequence[_Recorded]:
        now = self._clock.now()
        cached = self._uses.get(scope)
        if cached is not None and now - cached[0] < REFRESH:
            return cached[1]
        try:
            records = await self._store.list_uses(scope, MAX_USES)
        except (GatewayError, OSError) as exc:
            logger.warning("discovery: could not read what was learned from use: %s", exc)
            return cached[1] if cached is not None else []
        recorded = [_Recorded(record, _vector(record.vector), terms_of(record.words)) for record in records]
        self._uses[scope] = (now, recorded)
        return recorded

    def _as_use(self, recorded: _Recorded, model: str | None) -> Use:
        record = recorded.record
        same_model = model is not None and record.model == model
        return Use(
            action=record.action,
            who=record.who,
            terms=recorded.terms,
            vector=recorded.vector if same_model else None,
            age=(self._clock.now() - record.at).total_seconds(),
        )


def _blob(vector: Any) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def _vector(blob: bytes | None) -> Any:
    if not blob:
        return None
    import numpy as np

    return np.frombuffer(blob, dtype="<f4")
