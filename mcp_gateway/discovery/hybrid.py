"""Hybrid ``discover``: the lexical index fused with dense retrieval, and the vectors kept up to date.

``HybridSearch`` is what the gateway holds when hybrid discovery is on (the ``embeddings`` extra is
installed, or an OpenAI-compatible endpoint is configured). ``schedule(slug, actions)`` is called by
``Catalogs`` right after it re-indexes a connector lexically; ``run()``, a background task of
``runtime.open_gateway``, embeds what was scheduled through ``DenseEmbedder.refresh`` (store first,
so a restart or another instance embeds nothing it already has; the provider runs in a worker thread
or on a remote endpoint, never on the event loop). Until a connector's vectors are in, ``find``
answers lexically for it.

``find`` takes the lexical pool (``DiscoveryIndex.find``), the dense top hits over every connector
the caller may see, fuses them (``fuse``) and puts near-twins side by side again. Confidence is low
when the best cosine among the first hits plus ``MEAN_WEIGHT`` times the query's mean cosine over the
whole searched catalog is under ``SURE_FLOOR`` (``sure``).

The fusion is normalized-score: each side's scores are min-max scaled over its own pool (the lexical
side's best ``LEXICAL_POOL``, the dense side's best ``DENSE_POOL``), and the two are averaged with
``ALPHA``. Neither side's raw scale matters, so a model with another cosine range, or a change to the
lexical ranker's score, does not silently re-weight the fusion. On the dev intents it matched the
other fusions tried (raw-score sum with a weight, reciprocal-rank fusion with k 5-60, z-scored
cosines, a weight that grows when the lexical coverage or margin is small, a listwise-trained linear
model over both sides' ranks and scores): all within a point of each other, min-max the simplest
that is scale-free. Beside the two sides, a prior on the connector the query fits as a whole
(``connector_fit``) settles which API of several a request is for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import anyio

from ..vocabulary.errors import GatewayError
from ..vocabulary.model import Action
from . import _coverage, _rank
from ._index import DiscoveryIndex, SearchResult, low_hint
from ._message import asks, several_asks
from ._outcomes import OUTCOMES, Outcomes
from ._segment import dense_texts, readable
from ._segment_cache import card_version
from ._twins import asked_first, group_twins, none_of_kind
from .dense import DenseEmbedder, DenseIndex, EmbeddingProvider, Matrix, VectorStore
from .embedding_progress import LEXICAL_LINE, clear_progress, hybrid_line, progress_elsewhere, write_progress

__all__ = [
    "ALPHA",
    "CONNECTOR_FIT",
    "MEAN_WEIGHT",
    "SURE_FLOOR",
    "HybridSearch",
    "connector_fit",
    "discovery_status",
    "fuse",
    "sure",
]

logger = logging.getLogger(__name__)

SURE_FLOOR = 0.47
"""``discover`` is sure of its answer when the best cosine among its first three hits, plus
``MEAN_WEIGHT`` times the query's mean cosine over every action it searched, reaches this (the
bundled model's scale; an action's cosine is the mean of its card's and headline's,
``_segment.dense_texts``)."""

MEAN_WEIGHT = 1.0
"""How much the query's nearness to the searched catalog as a whole counts beside its best match.

A question nothing in the catalog answers ("who painted the Mona Lisa") is far from every action: its
best cosine is low and so is its mean. A request the catalog serves sits nearer the catalog as a whole
even when its best match is diluted: a long message with context around the ask, a typo the model
splits into pieces, an API the model was never tuned on. The mean is measured on the catalog being
searched, whatever its size and subject, and costs one dot product per connector
(``DenseIndex.mean_cosine``). The lexical coverage takes no part: a long message's context dilutes
it whatever the message asks. Calibrated on answerable dev intents (as
written, with typos, wrapped in a long message; over APIs the model was and was not tuned on) against
off-topic questions over each API and over all of them (docs/benchmarks.md#confidence-floor)."""

ALPHA = 0.5
"""Weight of the scaled cosine beside the scaled lexical score: equal, each side a scale of its own."""

ASK_BLEND = 0.5
"""Weight of the request sentences' vector beside the whole message's (``query_vector``)."""

LEXICAL_POOL = 20
"""Lexical hits that take part in fusion, and over which their scores are scaled."""

DENSE_POOL = 40
"""Dense hits (best cosines over every visible action) that take part, and over which cosines are scaled."""

CONNECTOR_PRIOR = 0.3
"""Added to the fused score of an action of a connector the query names ("in Slack", "our Stripe"): the
lexical side's prior (``_rank.W_CONNECTOR``) carried through fusion, so the dense side's hits from
other connectors do not wash it out. A prior, not a filter: at 0.1, "post the release notes in Slack"
put Slack's post fourth behind GitHub's and Stripe's release actions (second now)."""

CONNECTOR_FIT = 0.3
"""At most this is added to the fused score of an action of the searched connector the query sits nearest
to as a whole (its mean cosine over the connector's actions, ``DenseIndex.mean_cosines``): the action's
scaled cosine times this, so the lift goes to what the model finds relevant there, not to every action
of the connector alike. The other connectors' actions get their share by where their connector's mean
cosine falls between the farthest connector's and the nearest's.

Which API a request is for shows in all its words, not only in those an action's text shares: "reply to
the top comment on my cooking video" sits nearer YouTube's catalog than Drive's, whose reply action says
"reply" more plainly. One dot product per connector; nothing with one connector (or none embedded yet,
which counts as halfway)."""

MIN_SPREAD = 0.1
"""The cosine range scaled to [0, 1] is at least this wide: when the model sees every action alike (a
long query of filler, a tiny catalog), scaling must not blow its noise up into a strong opinion. The
dev intents' dense pools span 0.07-0.45 (median 0.25); 0.1 changes none of their rankings."""

NARROWED_FLOOR = 0.65
"""Inside one connector the agent named, a request whose words the connector's actions hardly share
(the lexical side unsure) must reach this instead of ``SURE_FLOOR``: the catalog fit is then that one
connector's, and a verb alone carries a cosine near the floor ("delete a repository" in the Petstore:
0.48 for ``delete_pet``; "create an issue" there: 0.59 for ``create_user``; what it serves: 0.79-1.12).
Over every connector, the same rule would make 15-17 % of answerable requests unsure (4.9-5.8 % now)."""

WARM_WAIT = 5.0
"""Seconds a query waits, at most, while a start reads its stored vectors back (once per process):
after a sync the whole catalog is ready in about two seconds, and the first queries would otherwise
be ranked by words alone."""


def discovery_status(search: HybridSearch | None, visible: Collection[str] | None = None) -> str:
    """What ``connectors``, ``/healthz`` and the start-up log say about ranking; with ``visible``, over
    those connectors only (``HybridSearch.status``)."""
    return LEXICAL_LINE if search is None else search.status(visible)


class HybridSearch:
    """Dense retrieval beside a ``DiscoveryIndex``: scheduling, background embedding, fused search."""

    def __init__(self, provider: EmbeddingProvider, store: VectorStore, *, label: str | None = None) -> None:
        self.embedder = DenseEmbedder(provider, store, texts=dense_texts, readable=readable, cards=card_version())
        self.label = label or provider.model
        """The model as the status line names it (never a key: the endpoint's URL at most)."""
        self._pending: dict[str, tuple[Sequence[Action], str | None]] = {}
        self._failing: str | None = None
        """Why the last query could not be embedded (the error's kind), or None: what the status says."""
        self._wake = anyio.Event()
        self._idle = anyio.Event()
        self._idle.set()
        self._warm = anyio.Event()
        """Set once the background work first settles or turns out to need the model (``WARM_WAIT``)."""
        self._running = False
        self._connectors: set[str] = set()
        self._embedding: str | None = None
        """The connector whose vectors are being made or read, if any."""
        self.state_dir: Path | None = None
        """The state folder, where the discovery line is kept while embedding (``embedding_progress``)."""
        self.embedder.on_batch = self._report
        self._outcomes: Outcomes | None = None
        """The outcomes' vectors, embedded with the first query (``_outcomes``)."""

    # -- upkeep ------------------------------------------------------------------------------------

    def schedule(self, slug: str, actions: Sequence[Action], fingerprint: str | None = None) -> None:
        """Connector ``slug`` now has these actions: (re-)embed them in the background (none: drop it).
        ``fingerprint``, the catalog's, lets a restart find the vectors without rebuilding the texts."""
        if actions:
            self._connectors.add(slug)
        else:
            self._connectors.discard(slug)
            self.embedder.remove(slug)
        self._pending[slug] = (actions, fingerprint)
        self._idle = anyio.Event() if self._idle.is_set() else self._idle
        self._wake.set()

    def will_run(self) -> None:
        """Say that ``run`` is about to start: queries from now on may wait ``WARM_WAIT`` for its first
        settling (without a running embedder, they never wait)."""
        self._running = True

    async def run(self) -> None:
        """Embed scheduled connectors one after another, until cancelled. A failure is logged and the
        connector keeps answering lexically (the next sync schedules it again)."""
        self._running = True
        try:
            await self._work()
        finally:
            self._running = False
            self._warm.set()

    async def _work(self) -> None:
        while True:
            if not self._pending:
                self._idle.set()
                if self._connectors:  # settled on something (an empty queue at start says nothing yet)
                    self._warm.set()
                await self._wake.wait()
                self._wake = anyio.Event()
                continue
            slug = next(iter(self._pending))
            actions, fingerprint = self._pending.pop(slug)
            if not actions:
                continue
            try:
                embedded = await self._refresh(slug, actions, fingerprint)
            except (GatewayError, OSError, ValueError) as exc:
                logger.warning("discovery: could not embed %s (it answers lexically meanwhile): %s", slug, exc)
                continue
            logger.info("discovery: %s has its vectors (%d embedded anew, %d actions)", slug, embedded, len(actions))

    async def settled(self) -> None:
        """Wait until everything scheduled so far is embedded (or failed). For tests and benchmarks."""
        await self._idle.wait()

    async def embed_now(self, slug: str, actions: Sequence[Action], fingerprint: str | None = None) -> int:
        """Embed connector ``slug`` now, in the caller's task (``sync`` and ``add`` do, so the ``serve``
        that follows reads the vectors back from the store and ranks hybrid from its first query).
        Returns how many actions were embedded anew; a failure is the caller's to report."""
        if not actions:
            return 0
        self._connectors.add(slug)
        return await self._refresh(slug, actions, fingerprint)

    async def _refresh(self, slug: str, actions: Sequence[Action], fingerprint: str | None) -> int:
        self._embedding = slug
        try:
            return await self.embedder.refresh(slug, actions, fingerprint)
        finally:
            self._embedding = None
            if self.state_dir is not None:
                clear_progress(self.state_dir)

    def _report(self) -> None:
        self._warm.set()  # the model is needed, for a while maybe: queries do not wait for it
        if self.state_dir is not None:
            write_progress(self.state_dir, self.status())

    @property
    def scheduled(self) -> int:
        """How many connectors' actions have been handed over to embed (none before the first load)."""
        return len(self._connectors)

    def status(self, visible: Collection[str] | None = None) -> str:
        """The discovery line; with ``visible``, of those connectors only (an agent's view: a connector it
        cannot see is not counted, nor the embedding of one)."""
        running = self.embedder.progress
        if visible is not None:
            connectors = self._connectors & set(visible)
            running = running if self._embedding in connectors else None
        else:
            connectors = self._connectors
            if running is None and self.state_dir is not None and (elsewhere := progress_elsewhere(self.state_dir)):
                return elsewhere  # the running gateway of this state folder is embedding
        if self._failing is not None:
            # Vectors are stored, but the model cannot embed a query: every answer is by words alone.
            return (
                f"discovery: lexical for now: the embedding model ({self.label}) failed on the last query "
                f"({self._failing}); ranking by words until it works again (see the log)"
            )
        ready = sum(1 for slug in connectors if self.embedder.index.ready(slug))
        return hybrid_line(self.label, ready, len(connectors), running)

    # -- search ------------------------------------------------------------------------------------

    async def find(
        self,
        index: DiscoveryIndex,
        query: str,
        *,
        limit: int = 10,
        connectors: Collection[str] | None = None,
        allow: Callable[[Action], bool] | None = None,
        narrowed: bool = False,
    ) -> SearchResult:
        """``index.find`` fused with dense retrieval over ``connectors`` (None: all). ``narrowed``: the
        agent asked for one connector's actions (``discover``'s ``connector``), so a request it cannot
        serve is unsure (``NARROWED_FLOOR``) however well its verb matches."""
        if self._running and self._connectors and not self._warm.is_set():
            # A start reads the vectors a sync embedded back from the store in a second or two: the
            # first queries wait for that rather than rank lexically (an embedding run sets it at once).
            with anyio.move_on_after(WARM_WAIT):
                await self._warm.wait()
        dense = self.embedder.index
        allowed = dense.connectors if connectors is None else dense.connectors & set(connectors)
        if not allowed:
            return index.find(query, limit=limit, connectors=connectors, allow=allow)
        query = index.corrected(query)
        lexical = index.find(query, limit=max(limit, _rank.POOL), connectors=connectors, allow=allow)
        try:
            vector, each = await self._embed(query, each_ask=True)  # ``query`` is repaired already
        except (GatewayError, OSError, ValueError, ImportError) as exc:
            if self._failing is None:
                logger.warning("discovery: query embedding failed, answering lexically: %s", exc)
            self._failing = type(exc).__name__
            return index.find(query, limit=limit, connectors=connectors, allow=allow)
        self._failing = None
        if dense.dimension is not None and int(vector.shape[-1]) != dense.dimension:
            # Stored vectors of another length than the model makes (damaged, or another model's under
            # this one's name): no cosine can be taken. Words answer; the next sync embeds them again.
            logger.warning(
                "discovery: stored vectors have %d dimensions, the model %d; answering lexically "
                "(`mcp-gateway sync` embeds them again)",
                dense.dimension,
                int(vector.shape[-1]),
            )
            return index.find(query, limit=limit, connectors=connectors, allow=allow)
        return self.rank(
            index, lexical, vector, allowed=allowed, allow=allow, limit=limit, asks=each, narrowed=narrowed
        )

    async def query_vector(self, index: DiscoveryIndex, query: str) -> Matrix:
        """The vector ``query`` is searched by: that of its text with typos repaired (``index.corrected``);
        for a message of several sentences, mixed with that of the sentences that make its request
        (``_message.asks``, weight ``ASK_BLEND``), so its context does not pull it elsewhere."""
        vector, _ = await self._embed(index.corrected(query), each_ask=False)
        return vector

    async def query_vectors(self, index: DiscoveryIndex, query: str) -> tuple[Matrix, Matrix | None]:
        """``query_vector``, and one vector per ask of a message that counts off several
        (``_message.several_asks``; else None), embedded in one call to the provider."""
        return await self._embed(index.corrected(query), each_ask=True)

    async def _embed(self, text: str, *, each_ask: bool) -> tuple[Matrix, Matrix | None]:
        """``text`` (typos repaired) embedded with its request and, with ``each_ask``, each of its asks."""
        requests = asks(text)
        each = several_asks(text) if each_ask else None
        texts = [text, *([" ".join(requests)] if requests is not None else []), *(each or ())]
        if self._outcomes is None:
            self._outcomes = Outcomes(await self.embedder.provider.embed(OUTCOMES))
        matrix = await self.embedder.provider.embed(texts)
        vector = matrix[0]
        if requests is not None:
            import numpy as np

            mixed = (1.0 - ASK_BLEND) * matrix[0] + ASK_BLEND * matrix[1]
            norm = float(np.linalg.norm(mixed))
            vector = mixed / norm if norm > 0 else matrix[0]
        return vector, (matrix[len(texts) - len(each) :] if each else None)

    def rank(
        self,
        index: DiscoveryIndex,
        lexical: SearchResult,
        vector: Matrix,
        *,
        allowed: Collection[str],
        allow: Callable[[Action], bool] | None = None,
        limit: int = 10,
        asks: Matrix | None = None,
        narrowed: bool = False,
    ) -> SearchResult:
        """The fusion itself, for a lexical pool and the query's vector (``find`` minus the embedding;
        the quality benchmark calls it directly). With ``asks`` (``query_vectors``), the first hits cover
        each ask (``_coverage``)."""
        dense = self.embedder.index
        fused = fuse(
            lexical.hits,
            dense,
            vector,
            lookup=index.get,
            allowed=allowed,
            allow=allow,
            limit=limit if asks is None else max(limit, _coverage.COVER_POOL),
            named=lexical.named,
            outcomes=self._outcomes,
        )
        if asks is not None and fused:
            fused = _covering(fused, dense, asks, lookup=index.get, allowed=allowed, allow=allow, limit=limit)
        if fused and fused[0][0].connector not in allowed:
            # The first hit's connector has no vectors yet (a connector just added, being embedded): the
            # lexical side alone put it first, and only its confidence says anything about it.
            low = lexical.confidence == "low"
        else:
            best_cosine = max(dense.scores(vector, [a.qualified_name for a, _ in fused[:3]]).values(), default=0.0)
            floor = NARROWED_FLOOR if narrowed and lexical.confidence == "low" else SURE_FLOOR
            low = not fused or not sure(best_cosine, dense.mean_cosine(vector, allowed), floor)
            low = low or bool(lexical.unserved) or none_of_kind(fused, lexical.asked)
        ordered, twins = group_twins(asked_first(fused, lexical.asked))
        hint = low_hint(lexical.unserved) if low else None
        return SearchResult(
            ordered, "low" if low else "high", hint, twins, lexical.named, vector, lexical.unserved, lexical.asked
        )


def sure(best_cosine: float, mean_cosine: float, floor: float = SURE_FLOOR) -> bool:
    """Whether a hybrid answer is confident: its best cosine, and the query's mean cosine over the
    searched catalog (``MEAN_WEIGHT``), together reach ``floor`` (``SURE_FLOOR``, or ``NARROWED_FLOOR``)."""
    return best_cosine + MEAN_WEIGHT * mean_cosine >= floor


def fuse(
    lexical: Sequence[tuple[Action, float]],
    dense: DenseIndex,
    vector: Matrix,
    *,
    lookup: Callable[[str], Action | None],
    allowed: Collection[str],
    allow: Callable[[Action], bool] | None = None,
    limit: int = 10,
    alpha: float = ALPHA,
    named: Collection[str] = (),
    outcomes: Outcomes | None = None,
) -> list[tuple[Action, float]]:
    """The best ``limit`` of the lexical pool and the dense top hits, by ``(1 - alpha) * lexical + alpha * dense``.

    Both sides are min-max scaled to [0, 1] over their pools. An action outside the lexical pool
    counts 0 there; a lexical hit outside the dense pool gets its exact cosine, scaled the same way
    (floored at 0). A hit of a connector whose vectors are not in yet counts its lexical value on both
    sides, so it ranks as it would lexically instead of sinking. ``lookup`` maps a qualified name to
    its current action (None: gone since its vector was made); ``allow`` drops what the caller may
    not see, as the lexical search did for its own hits. Actions of the ``named`` connectors get
    ``CONNECTOR_PRIOR`` more, and every action up to ``CONNECTOR_FIT`` times its scaled cosine by how near
    the query sits to its connector's catalog (``connector_fit``; a named connector counts as the
    nearest). Ties break by lexical score, then name.
    """
    # By score: ``lexical`` may come with near-twins grouped (``SearchResult.hits``), not in score order.
    pool = sorted(lexical, key=lambda hit: -hit[1])[:LEXICAL_POOL]
    by_name = {action.qualified_name: action for action, _ in lexical}
    top: list[tuple[str, float]] = []
    for name, cosine in dense.search(vector, allowed, k=DENSE_POOL * 2 if allow else DENSE_POOL):
        action = by_name.get(name) or lookup(name)
        if action is None or (allow is not None and name not in by_name and not allow(action)):
            continue
        by_name[name] = action
        top.append((name, cosine))
        if len(top) == DENSE_POOL:
            break
    lexical_scaled = _scaled({action.qualified_name: score for action, score in pool})
    cosines = dict(top)
    high, low = max(cosines.values(), default=1.0), min(cosines.values(), default=0.0)
    missing = [name for name in lexical_scaled if name not in cosines]
    cosines.update(dense.scores(vector, missing) if missing else {})
    fit = connector_fit(dense, vector, allowed)
    fused: dict[str, float] = {}
    for name in dict.fromkeys([*lexical_scaled, *(name for name, _ in top)]):
        lexical_value = lexical_scaled.get(name, 0.0)
        if name in cosines:
            dense_value = min(max((cosines[name] - low) / max(high - low, MIN_SPREAD), 0.0), 1.0)
        else:  # no vector yet: the connector is still being embedded
            dense_value = lexical_value
        slug = name.partition(".")[0]
        # The connector's fit is spent on what the model finds relevant in it, not on all its actions alike.
        if slug in named:  # the query says which connector it is for: as near as any
            prior = CONNECTOR_PRIOR + (CONNECTOR_FIT * dense_value if fit else 0.0)
        else:
            prior = CONNECTOR_FIT * fit.get(slug, 0.5 if fit else 0.0) * dense_value
        fused[name] = (1.0 - alpha) * lexical_value + alpha * dense_value + prior
    if outcomes is not None:
        for name, value in outcomes.lifts(vector, fused, by_name).items():
            fused[name] += value
    # Equal fused scores: the lexical side's evidence (words the agent wrote) goes first, then the name.
    ranked = sorted(fused.items(), key=lambda item: (-item[1], -lexical_scaled.get(item[0], 0.0), item[0]))[:limit]
    return [(by_name[name], score) for name, score in ranked]


def _covering(
    fused: list[tuple[Action, float]],
    dense: DenseIndex,
    asks: Matrix,
    *,
    lookup: Callable[[str], Action | None],
    allowed: Collection[str],
    allow: Callable[[Action], bool] | None,
    limit: int,
) -> list[tuple[Action, float]]:
    """``fused`` re-ordered so its first ``limit`` hits cover each of the message's ``asks`` (``_coverage``);
    each ask's own nearest actions join the candidates with a fused score of 0."""
    candidates = {action.qualified_name: (action, score) for action, score in fused}
    for ask in asks:
        for name, _ in dense.search(ask, allowed, k=_coverage.ASK_POOL):
            if name not in candidates and (action := lookup(name)) is not None and (allow is None or allow(action)):
                candidates[name] = (action, 0.0)
    names = list(candidates)
    relevance: list[list[float]] = []
    for ask in asks:
        cosines = dense.scores(ask, names)
        relevance.append(_coverage.scaled_relevance([cosines.get(name, 0.0) for name in names]))
    order = _coverage.cover([candidates[name][1] for name in names], relevance, limit)
    return [candidates[names[at]] for at in order]


def connector_fit(dense: DenseIndex, vector: Matrix, connectors: Collection[str]) -> dict[str, float]:
    """How near the query sits to each searched connector's catalog as a whole, scaled over them: 1 for
    the nearest (by mean cosine), 0 for the farthest. Empty when fewer than two have vectors."""
    means = dense.mean_cosines(vector, connectors)
    if len(means) < 2:
        return {}
    high, low = max(means.values()), min(means.values())
    return {slug: (mean - low) / (high - low) if high > low else 1.0 for slug, mean in means.items()}


def _scaled(scores: dict[str, float]) -> dict[str, float]:
    """Scores min-max scaled to [0, 1] (all equal: all 1)."""
    high, low = max(scores.values(), default=0.0), min(scores.values(), default=0.0)
    return {name: (score - low) / (high - low) if high > low else 1.0 for name, score in scores.items()}
