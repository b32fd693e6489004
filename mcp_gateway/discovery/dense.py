"""Dense retrieval for hybrid ``discover``: one vector per action, searched by dot product.

An action's vector is the mean of its texts' unit vectors (``DenseEmbedder``'s ``texts``), so its
score is the mean of the query's cosines to them.

Two pieces, wired by the gateway (the index and the store are not imported here); the fusion with
the lexical ranking is ``hybrid.fuse``:

- ``DenseIndex``: the vectors, one float32 matrix block per connector so a re-synced connector
  replaces only its own block. ``search(query_vector, allowed_connectors, k)`` returns the best
  ``k`` qualified names by cosine; ``scores`` gives the cosine of named actions (so fusion scores
  every lexical hit exactly, not only those in the dense top ``k``).
- ``DenseEmbedder``: keeps a ``DenseIndex`` up to date after each sync. ``refresh(slug, actions)``
  looks each action's text up in a ``VectorStore`` by (model, text digest), embeds only the misses
  through an ``EmbeddingProvider`` (worker thread or remote endpoint, never the event loop) and
  writes them back, so a restart, a second instance, or a re-sync whose actions did not change
  embeds nothing. Until a connector's block is in, ``DenseIndex.ready`` says so and the connector
  answers lexically.

Example:
    embedder = DenseEmbedder(provider, MemoryVectorStore())
    await embedder.refresh("github", actions)           # after each sync, in a task
    query = await embedder.embed_query("open a bug report")
    dense = embedder.index.search(query, allowed_connectors={"github"}, k=40)
    cosines = embedder.index.scores(query, [name for name, _ in lexical_hits])

numpy is imported lazily (the ``embeddings`` extra): importing this module costs nothing without it.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..vocabulary.model import Action
from ._embedding import embedded_text

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Matrix = NDArray[np.float32]
else:
    Matrix = Any

__all__ = [
    "DenseEmbedder",
    "DenseIndex",
    "EmbeddingProvider",
    "MemoryVectorStore",
    "VectorStore",
    "text_digest",
]

logger = logging.getLogger(__name__)

_MEAN_NORM = 0.5
"""The shortest a stored vector may be: the mean of unit vectors whose cosine is above -0.5."""

Hit = tuple[str, float]
"""(qualified name, score), best first in every list."""


def text_digest(text: str) -> bytes:
    """The store key of an embedded text (16 bytes of BLAKE2b): same text, same vector, whatever the action."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class EmbeddingProvider(Protocol):
    """Texts to unit-length float32 vectors. ``providers.LocalProvider`` and ``providers.OpenAIEmbeddings``."""

    @property
    def model(self) -> str:
        """Names the vector space: stored vectors are keyed by it, so a different model never reuses them."""
        ...

    async def embed(self, texts: Sequence[str]) -> Matrix:
        """A (len(texts), dimension) float32 matrix of unit rows, in order. Must not block the event loop."""
        ...


class VectorStore(Protocol):
    """Persisted vectors keyed by (model, text digest); values are raw little-endian float32 bytes."""

    async def get_vectors(self, model: str, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        """The stored vectors among ``digests`` (missing ones are simply absent)."""
        ...

    async def put_vectors(self, model: str, vectors: Mapping[bytes, bytes]) -> None:
        """Store (or overwrite) vectors."""
        ...


class MemoryVectorStore:
    """A ``VectorStore`` in a dict, for tests and one-process use. Counts reads and writes."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, bytes], bytes] = {}
        self.gets = 0
        self.puts = 0

    async def get_vectors(self, model: str, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        self.gets += 1
        return {d: self.rows[(model, d)] for d in digests if (model, d) in self.rows}

    async def put_vectors(self, model: str, vectors: Mapping[bytes, bytes]) -> None:
        self.puts += 1
        for digest, blob in vectors.items():
            self.rows[(model, digest)] = blob


@dataclass(frozen=True, slots=True)
class _Block:
    names: tuple[str, ...]
    matrix: Matrix  # (len(names), dimension) float32, unit rows; a view into the index's matrix once packed
    rows: Mapping[str, int]
    total: Matrix  # (dimension,) float64: the sum of the rows, so a mean cosine is one dot product


class DenseIndex:
    """Unit vectors per connector; cosine search over the connectors a caller may see.

    The blocks are packed into one contiguous float32 matrix (rebuilt at the first search after a
    connector changed, the blocks then becoming views into it, so the vectors are held once): a search
    is one matrix-vector product over every action, the connectors the caller may not see masked out,
    and one ``argpartition`` for the top ``k`` (its cost is mostly reading the matrix from memory).

    Not thread-safe by itself: mutate and search from one thread (the event loop). Vectors are
    computed elsewhere (``DenseEmbedder`` in a worker thread) and handed in whole.
    """

    def __init__(self) -> None:
        self._blocks: dict[str, _Block] = {}
        self._packed: _Packed | None = None

    def __len__(self) -> int:
        return sum(len(block.names) for block in self._blocks.values())

    def ready(self, slug: str) -> bool:
        """Whether connector ``slug`` has its vectors (otherwise it answers lexically)."""
        return slug in self._blocks

    @property
    def dimension(self) -> int | None:
        """The length of the vectors it holds (None while it holds none)."""
        block = next(iter(self._blocks.values()), None)
        return None if block is None else int(block.matrix.shape[1])

    @property
    def connectors(self) -> frozenset[str]:
        return frozenset(self._blocks)

    def replace_connector(self, slug: str, names: Sequence[str], matrix: Matrix) -> None:
        """Connector ``slug`` now holds exactly these actions, row ``i`` of ``matrix`` being ``names[i]``'s vector."""
        import numpy as np

        vectors = np.ascontiguousarray(matrix, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(names):
            raise ValueError(f"{len(names)} names but a matrix of shape {vectors.shape}")
        rows = {name: i for i, name in enumerate(names)}
        self._blocks[slug] = _Block(tuple(names), vectors, rows, vectors.sum(axis=0, dtype=np.float64))
        self._packed = None

    def remove_connector(self, slug: str) -> None:
        if self._blocks.pop(slug, None) is not None:
            self._packed = None

    def search(self, query_vector: Matrix, allowed_connectors: Collection[str] | None = None, k: int = 40) -> list[Hit]:
        """The best ``k`` (qualified name, cosine) over ``allowed_connectors`` (None: all), best first.

        Ties are broken by name, so the order is deterministic.
        """
        import numpy as np

        packed = self._pack()
        if packed is None or k <= 0:
            return []
        scores = packed.matrix @ np.asarray(query_vector, dtype=np.float32)
        candidates = len(scores)
        if allowed_connectors is not None:
            hidden = [span for slug, span in packed.spans.items() if slug not in allowed_connectors]
            for begin, end in hidden:
                scores[begin:end] = -np.inf
            candidates -= sum(end - begin for begin, end in hidden)
        take = min(k, candidates)
        if take <= 0:
            return []
        top = np.argpartition(-scores, take - 1)[:take] if take < len(scores) else np.arange(len(scores))
        hits = [(packed.names[i], float(scores[i])) for i in top.tolist() if scores[i] > -np.inf]
        hits.sort(key=lambda hit: (-hit[1], hit[0]))
        return hits[:k]

    def scores(self, query_vector: Matrix, names: Sequence[str]) -> dict[str, float]:
        """The cosine of each named action that has a vector (others are left out)."""
        import numpy as np

        found: list[str] = []
        rows: list[Matrix] = []
        for name in names:
            block = self._blocks.get(name.partition(".")[0])
            row = block.rows.get(name) if block is not None else None
            if block is not None and row is not None:
                found.append(name)
                rows.append(block.matrix[row])
        if not rows:
            return {}
        cosines: list[float] = (np.stack(rows) @ np.asarray(query_vector, dtype=np.float32)).tolist()
        return dict(zip(found, cosines, strict=True))

    def mean_cosine(self, query_vector: Matrix, allowed_connectors: Collection[str] | None = None) -> float:
        """The query's mean cosine over every action of ``allowed_connectors`` (None: all): how near it
        is to the catalog as a whole, one dot product per connector (0.0 without any vector)."""
        import numpy as np

        blocks = [b for slug, b in self._blocks.items() if allowed_connectors is None or slug in allowed_connectors]
        count = sum(len(block.names) for block in blocks)
        if not count:
            return 0.0
        total = np.sum([block.total for block in blocks], axis=0)
        return float(total @ np.asarray(query_vector, dtype=np.float64)) / count

    def mean_cosines(self, query_vector: Matrix, connectors: Collection[str]) -> dict[str, float]:
        """The query's mean cosine over each of ``connectors`` that has vectors, one dot product each."""
        import numpy as np

        query = np.asarray(query_vector, dtype=np.float64)
        return {
            slug: float(block.total @ query) / len(block.names)
            for slug, block in self._blocks.items()
            if slug in connectors and block.names
        }

    def _pack(self) -> _Packed | None:
        """The blocks as one matrix (rebuilt after a change); None when there is no vector at all."""
        import numpy as np

        if self._packed is None:
            one_blas_thread()
            blocks = {slug: block for slug, block in self._blocks.items() if block.names}
            if not blocks:
                return None
            matrix = np.concatenate([block.matrix for block in blocks.values()])
            spans: dict[str, tuple[int, int]] = {}
            names: list[str] = []
            for slug, block in blocks.items():
                spans[slug] = (len(names), len(names) + len(block.names))
                names.extend(block.names)
                # Point the block at its rows of the new matrix: the old copy is freed, nothing is held twice.
                self._blocks[slug] = _Block(
                    block.names, matrix[spans[slug][0] : spans[slug][1]], block.rows, block.total
                )
            self._packed = _Packed(tuple(names), matrix, spans)
        return self._packed


_blas_pinned = False


def one_blas_thread() -> None:
    """Pin numpy's BLAS to one thread per call, process-wide, once (nothing else in the gateway uses BLAS).

    The search is one matrix-vector product; OpenBLAS's default pool (a thread per core) spins for work,
    and on a busy host it made a search cost several times the CPU and wall time of one thread.
    Needs ``threadpoolctl`` (the ``embeddings`` extra); without it, nothing.
    """
    global _blas_pinned
    if _blas_pinned:
        return
    _blas_pinned = True
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    import numpy  # noqa: F401  (loaded first: threadpoolctl finds the BLAS libraries numpy has loaded)

    threadpool_limits(limits=1, user_api="blas")


@dataclass(frozen=True, slots=True)
class _Packed:
    names: tuple[str, ...]
    matrix: Matrix  # (actions, dimension) float32, C-contiguous
    spans: Mapping[str, tuple[int, int]]  # connector -> its rows [begin, end)


class DenseEmbedder:
    """Keeps a ``DenseIndex`` in step with the catalog: store first, provider for the rest.

    ``refresh`` is meant to run in a background task after each sync (``encoder_calls`` and
    ``embedded`` count what it cost). Concurrent refreshes of one connector: the last to finish wins,
    and a refresh that finishes after a newer one started is dropped (``_generation``).
    """

    def __init__(
        self,
        provider: EmbeddingProvider,
        store: VectorStore,
        *,
        index: DenseIndex | None = None,
        texts: Callable[[Action], Sequence[str]] = lambda action: (embedded_text(action),),
        readable: Callable[[Sequence[Action]], Sequence[Action]] = list,
        cards: str | None = None,
        batch: int = 256,
    ) -> None:
        self.provider = provider
        self.store = store
        self.index = index or DenseIndex()
        self._texts = texts
        self._readable = readable
        """One connector's actions as their texts read them (``_segment.readable``): what an action's
        text says may depend on its neighbours (a summary they all share says nothing)."""
        """The texts an action's vector is the mean of (each a unit vector: its score is the mean of
        the query's cosines to them), one or more, the same number for every action."""
        self._cards = cards
        """A version of what ``texts`` makes of a catalog (its code's digest). With it, a refresh given the
        catalog's fingerprint keeps the connector's text digests in the store, so that the next start
        finds its vectors without rebuilding every text (a restart's biggest cost)."""
        self.batch = batch
        self.encoder_calls = 0
        self.embedded = 0
        self.progress: tuple[int, int] | None = None
        """While a refresh embeds: (actions embedded so far, actions it embeds anew); else None."""
        self.on_batch: Callable[[], None] | None = None
        """Called as each batch starts, ``progress`` set (``HybridSearch`` tells other processes)."""
        self._generation: dict[str, int] = {}

    async def refresh(self, slug: str, actions: Sequence[Action], fingerprint: str | None = None) -> int:
        """Give connector ``slug`` its vectors (none: remove it); returns how many texts were embedded anew.

        ``fingerprint`` is the catalog's (``ConnectorCatalog.fingerprint``): with it (and ``cards``),
        the text digests kept for this very catalog stand in for its texts."""
        import numpy as np

        generation = self._generation.get(slug, 0) + 1
        self._generation[slug] = generation
        if not actions:
            self.index.remove_connector(slug)
            return 0
        model = self.provider.model
        names = [action.qualified_name for action in actions]
        kept_at = self._digests_key(slug, fingerprint, names)
        digests = await self._kept_digests(model, kept_at, len(actions))
        known = self._sound(await self.store.get_vectors(model, list(dict.fromkeys(digests)))) if digests else {}
        texts: list[Sequence[str]] | None = None
        if digests is None or len(known) < len(set(digests)):
            # Nothing kept, or a kept vector is gone (or damaged): the texts themselves say what to embed.
            # One vector per action, filed under the digest of all its texts (one text: that text's digest).
            texts = [self._texts(action) for action in self._readable(actions)]
            digests = [text_digest("\0".join(parts)) for parts in texts]
            known = self._sound(await self.store.get_vectors(model, list(dict.fromkeys(digests))))
        vectors: dict[bytes, Matrix] = {d: np.frombuffer(blob, dtype="<f4") for d, blob in known.items()}
        missing = {d: parts for d, parts in zip(digests, texts or (), strict=False) if d not in vectors}
        fresh: dict[bytes, bytes] = {}
        items = list(missing.items())
        try:
            for start in range(0, len(items), self.batch):
                self.progress = (start, len(items))
                if self.on_batch is not None:
                    self.on_batch()
                chunk = items[start : start + self.batch]
                self.encoder_calls += 1
                matrix = await self.provider.embed([text for _, parts in chunk for text in parts])
                row = 0
                made: dict[bytes, bytes] = {}
                for digest, parts in chunk:
                    rows = matrix[row : row + len(parts)]
                    row += len(parts)
                    vector = np.asarray(rows[0] if len(parts) == 1 else np.mean(rows, axis=0), dtype="<f4")
                    vectors[digest] = vector
                    made[digest] = vector.tobytes()
                # Kept batch by batch: a start interrupted halfway (a stopped sync, a client gone) resumes
                # where it stopped instead of embedding everything again.
                await self.store.put_vectors(model, made)
                fresh.update(made)
                self.embedded += len(made)
                if self._generation.get(slug) != generation:
                    return 0  # superseded by a newer refresh (or removal) of this connector
        finally:
            self.progress = None
        if kept_at is not None and texts is not None:
            await self.store.put_vectors(model, {kept_at: b"".join(digests)})
        embedded = len(fresh)
        if self._generation.get(slug) == generation:
            self.index.replace_connector(slug, names, np.stack([vectors[d] for d in digests]))
        return embedded

    def _sound(self, known: dict[bytes, bytes]) -> dict[bytes, bytes]:
        """The stored vectors that can be used: finite, at most unit length, all of one length (the index's
        when it holds any, else the commonest). A row damaged on disk, or cut short, is left out, so it is
        embedded again instead of failing the whole connector at every start (``np.stack`` of unequal rows)."""
        if not known:
            return known
        import numpy as np

        size = self.index.dimension or getattr(self.provider, "dimension", None)
        length = 4 * size if size else Counter(len(blob) for blob in known.values()).most_common(1)[0][0]
        sound: dict[bytes, bytes] = {}
        for digest, blob in known.items():
            if len(blob) == length and length and length % 4 == 0:
                # A unit vector, or the mean of an action's unit vectors (its card and headline: two
                # texts of one action, never half a turn apart).
                norm = float(np.linalg.norm(np.frombuffer(blob, dtype="<f4")))
                if _MEAN_NORM <= norm <= 1.001:  # NaN compares false
                    sound[digest] = blob
        if len(sound) < len(known):
            logger.warning(
                "discovery: %d stored vectors were damaged; they are embedded again", len(known) - len(sound)
            )
        return sound

    def _digests_key(self, slug: str, fingerprint: str | None, names: Sequence[str]) -> bytes | None:
        """Where a catalog's text digests are kept: a key of the store's vector table that no text can
        have (BLAKE2b personalised), made of the card version, the connector, the catalog's fingerprint
        and its actions' names in order (as the lexical segment cache checks them)."""
        if fingerprint is None or self._cards is None:
            return None
        digest = hashlib.blake2b(digest_size=16, person=b"card-digests")
        for part in (self._cards, slug, fingerprint, *names):
            digest.update(part.encode("utf-8"))
            digest.update(b"\0")
        return digest.digest()

    async def _kept_digests(self, model: str, key: bytes | None, count: int) -> list[bytes] | None:
        if key is None:
            return None
        blob = (await self.store.get_vectors(model, [key])).get(key)
        if blob is None or len(blob) != 16 * count:
            return None
        return [blob[i : i + 16] for i in range(0, len(blob), 16)]

    def remove(self, slug: str) -> None:
        self._generation[slug] = self._generation.get(slug, 0) + 1
        self.index.remove_connector(slug)

    async def embed_query(self, query: str) -> Matrix:
        """The query's unit vector (through the provider: a worker thread or the remote endpoint)."""
        matrix = await self.provider.embed([query])
        return matrix[0]
