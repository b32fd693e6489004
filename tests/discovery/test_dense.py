"""Dense retrieval (``discovery.dense``): the per-connector vector index and embedding after a sync.

A tiny bag-of-concepts provider stands in for the model: it counts its calls, so the tests see
exactly what was embedded (store hits embed nothing; a re-sync embeds only changed actions).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

np = pytest.importorskip("numpy", reason="the optional embeddings extra is not installed")

from mcp_gateway.discovery._embedding import embedded_text  # noqa: E402
from mcp_gateway.discovery.dense import (  # noqa: E402
    DenseEmbedder,
    DenseIndex,
    MemoryVectorStore,
    text_digest,
)
from mcp_gateway.discovery.providers import LocalProvider  # noqa: E402
from mcp_gateway.vocabulary.model import Action, McpBinding  # noqa: E402

CONCEPTS = (
    ("bug", "defect", "crash", "issue"),
    ("money", "refund", "payment", "balance"),
    ("weather", "rain", "forecast"),
    ("message", "chat", "post"),
)


class ConceptEncoder:
    """Unit vectors over four concepts plus a constant; records each batch and the thread it ran in."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.threads: set[int] = set()

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        self.threads.add(threading.get_ident())
        out = []
        for text in texts:
            words = set(re.findall(r"[a-z]+", text.lower()))
            vector = [float(any(w in words for w in group)) for group in CONCEPTS] + [0.1]
            norm = math.sqrt(sum(x * x for x in vector))
            out.append([x / norm for x in vector])
        return out

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]


def action(connector: str, path: str, summary: str) -> Action:
    return Action(connector=connector, path=path, summary=summary, risk="read", binding=McpBinding(tool=path))


def tracker() -> list[Action]:
    return [
        action("tracker", "tickets.open", "Open a defect ticket"),
        action("tracker", "reports.create", "Create a report"),
        action("tracker", "forecast.get", "Get the rain forecast"),
    ]


def shop() -> list[Action]:
    return [
        action("shop", "refunds.create", "Give the buyer their payment back"),
        action("shop", "products.create", "Add a product"),
    ]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def unit(*values: float) -> Any:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


# -- DenseIndex ---------------------------------------------------------------------------------


def test_search_ranks_by_cosine_within_the_allowed_connectors() -> None:
    index = DenseIndex()
    index.replace_connector("a", ["a.x", "a.y"], np.stack([unit(1, 0), unit(0, 1)]))
    index.replace_connector("b", ["b.z"], np.stack([unit(1, 1)]))
    query = unit(1, 0.2)
    assert [name for name, _ in index.search(query, None, k=3)] == ["a.x", "b.z", "a.y"]
    assert [name for name, _ in index.search(query, {"b"}, k=3)] == ["b.z"]
    assert [name for name, _ in index.search(query, None, k=1)] == ["a.x"]
    assert index.search(query, set(), k=5) == []
    assert index.search(query, None, k=3)[0][1] == pytest.approx(float(unit(1, 0.2) @ unit(1, 0)))
    assert index.scores(query, ["a.y", "b.z", "c.nope"]).keys() == {"a.y", "b.z"}


def test_mean_cosine_is_over_every_action_of_the_allowed_connectors_packed_or_not() -> None:
    index = DenseIndex()
    assert index.mean_cosine(unit(1, 0)) == 0.0
    rows = {"a": np.stack([unit(1, 0), unit(0, 1)]), "b": np.stack([unit(1, 1)])}
    index.replace_connector("a", ["a.x", "a.y"], rows["a"])
    index.replace_connector("b", ["b.z"], rows["b"])
    query = unit(1, 0.3)
    every = np.concatenate([rows["a"], rows["b"]]) @ query
    assert index.mean_cosine(query) == pytest.approx(float(every.mean()))
    assert index.mean_cosine(query, {"a"}) == pytest.approx(float((rows["a"] @ query).mean()))
    assert index.mean_cosine(query, set()) == 0.0
    index.search(query)  # packs the blocks into one matrix: the sums stay
    assert index.mean_cosine(query, {"b", "c"}) == pytest.approx(float(rows["b"][0] @ query))
    index.replace_connector("b", ["b.z", "b.w"], np.stack([unit(0, 1), unit(0, 1)]))
    assert index.mean_cosine(query, {"b"}) == pytest.approx(float(unit(0, 1) @ query))


def test_replacing_a_connector_swaps_only_its_block() -> None:
    index = DenseIndex()
    index.replace_connector("a", ["a.x"], np.stack([unit(1, 0)]))
    index.replace_connector("b", ["b.z"], np.stack([unit(0, 1)]))
    index.replace_connector("a", ["a.w"], np.stack([unit(0, 1)]))
    assert sorted(name for name, _ in index.search(unit(0, 1), None, k=5)) == ["a.w", "b.z"]
    index.remove_connector("b")
    assert not index.ready("b") and index.ready("a") and len(index) == 1
    with pytest.raises(ValueError):
        index.replace_connector("a", ["a.x", "a.y"], np.stack([unit(1, 0)]))


def test_searches_between_changes_see_each_change_and_hold_the_vectors_once() -> None:
    rng = np.random.default_rng(7)
    index = DenseIndex()
    blocks = {}
    for slug, size in (("a", 50), ("b", 30), ("c", 20)):
        matrix = rng.standard_normal((size, 4)).astype(np.float32)
        blocks[slug] = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        index.replace_connector(slug, [f"{slug}.{i}" for i in range(size)], blocks[slug])

    def brute(query: Any, allowed: set[str], k: int) -> list[str]:
        pairs = [(f"{slug}.{i}", float(row @ query)) for slug in allowed for i, row in enumerate(blocks[slug])]
        return [name for name, _ in sorted(pairs, key=lambda p: (-p[1], p[0]))[:k]]

    query = unit(1, 0.5, -0.2, 0.3)
    assert [n for n, _ in index.search(query, None, k=15)] == brute(query, {"a", "b", "c"}, 15)
    assert [n for n, _ in index.search(query, {"a", "c"}, k=60)] == brute(query, {"a", "c"}, 60)  # all 70
    # Packed: every block is a view into one matrix, so the vectors are held once.
    packed = index._packed
    assert packed is not None and all(np.shares_memory(b.matrix, packed.matrix) for b in index._blocks.values())
    blocks["b"] = -blocks["b"]
    index.replace_connector("b", [f"b.{i}" for i in range(30)], blocks["b"])
    assert [n for n, _ in index.search(query, {"b"}, k=5)] == brute(query, {"b"}, 5)
    index.remove_connector("a")
    assert [n for n, _ in index.search(query, None, k=100)] == brute(query, {"b", "c"}, 100)
    assert index.scores(query, ["b.3", "a.1"]) == {"b.3": pytest.approx(float(blocks["b"][3] @ query))}


# -- DenseEmbedder ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_texts_are_made_from_the_connectors_actions_as_discovery_reads_them() -> None:
    encoder = ConceptEncoder()
    read: list[list[str]] = []

    def readable(actions: Sequence[Action]) -> list[Action]:
        read.append([a.path for a in actions])
        return [a.model_copy(update={"summary": f"{a.summary} (read)"}) for a in actions]

    embedder = DenseEmbedder(
        LocalProvider(encoder, "concepts"), MemoryVectorStore(), texts=lambda a: (a.summary,), readable=readable
    )
    await embedder.refresh("tracker", tracker())
    assert read == [["tickets.open", "reports.create", "forecast.get"]]  # the whole connector at once
    assert encoder.calls == [["Open a defect ticket (read)", "Create a report (read)", "Get the rain forecast (read)"]]


@pytest.mark.anyio
async def test_vectors_are_embedded_off_the_loop_stored_and_searched() -> None:
    encoder = ConceptEncoder()
    store = MemoryVectorStore()
    embedder = DenseEmbedder(LocalProvider(encoder, "concepts"), store)
    assert not embedder.index.ready("tracker")
    assert await embedder.refresh("tracker", tracker()) == 3
    assert threading.get_ident() not in encoder.threads  # a worker thread, never the event loop
    assert embedder.index.ready("tracker") and len(store.rows) == 3
    query = await embedder.embed_query("the app has a crash")
    assert embedder.index.search(query, {"tracker"}, k=1)[0][0] == "tracker.tickets.open"
    # Keys are (model, digest of the embedded text): the same text in another model is another row.
    assert all(model == "concepts" and len(digest) == 16 for model, digest in store.rows)


@pytest.mark.anyio
async def test_a_restart_with_the_store_embeds_nothing() -> None:
    store = MemoryVectorStore()
    first = ConceptEncoder()
    await DenseEmbedder(LocalProvider(first, "concepts"), store).refresh("tracker", tracker())
    second = ConceptEncoder()
    embedder = DenseEmbedder(LocalProvider(second, "concepts"), store)
    assert await embedder.refresh("tracker", tracker()) == 0
    assert second.calls == [] and embedder.encoder_calls == 0
    assert embedder.index.ready("tracker")
    # Another model does not reuse them.
    other = ConceptEncoder()
    assert await DenseEmbedder(LocalProvider(other, "other-model"), store).refresh("tracker", tracker()) == 3


class CountingText:
    """The embedded text of an action, counting how many were built."""

    def __init__(self) -> None:
        self.built = 0

    def __call__(self, action: Action) -> tuple[str]:
        self.built += 1
        return (f"{action.path}: {action.description}",)


def vectors_of(embedder: DenseEmbedder, names: Sequence[str]) -> list[list[float]]:
    query = np.ones(5, dtype=np.float32)
    return [[round(embedder.index.scores(query, [name])[name], 6)] for name in names]


@pytest.mark.anyio
async def test_a_restart_with_the_catalog_fingerprint_builds_no_text() -> None:
    store = MemoryVectorStore()
    first_text = CountingText()
    first = DenseEmbedder(LocalProvider(ConceptEncoder(), "concepts"), store, texts=first_text, cards="v1")
    assert await first.refresh("tracker", tracker(), "fp-1") == 3
    assert first_text.built == 3
    names = [a.qualified_name for a in tracker()]

    def restarted(cards: str = "v1") -> tuple[DenseEmbedder, CountingText, ConceptEncoder]:
        text, encoder = CountingText(), ConceptEncoder()
        return DenseEmbedder(LocalProvider(encoder, "concepts"), store, texts=text, cards=cards), text, encoder

    embedder, text, encoder = restarted()
    assert await embedder.refresh("tracker", tracker(), "fp-1") == 0
    assert text.built == 0 and encoder.calls == []  # the kept digests found every vector
    assert embedder.index.ready("tracker") and vectors_of(embedder, names) == vectors_of(first, names)
    # Another catalog, other card code, other actions under the same fingerprint, or no fingerprint:
    # the texts are built again (and their vectors, unchanged, come from the store).
    for cards, actions, fingerprint in (
        ("v1", tracker(), "fp-2"),
        ("v2", tracker(), "fp-1"),
        ("v1", tracker()[:2], "fp-1"),
        ("v1", tracker(), None),
    ):
        embedder, text, encoder = restarted(cards)
        assert await embedder.refresh("tracker", actions, fingerprint) == 0
        assert text.built == len(actions) and encoder.calls == []


@pytest.mark.anyio
async def test_kept_digests_whose_vector_is_gone_fall_back_to_the_texts() -> None:
    store = MemoryVectorStore()
    await DenseEmbedder(LocalProvider(ConceptEncoder(), "concepts"), store, texts=CountingText(), cards="v1").refresh(
        "tracker", tracker(), "fp-1"
    )
    lost = text_digest(CountingText()(tracker()[0])[0])
    del store.rows[("concepts", lost)]
    text, encoder = CountingText(), ConceptEncoder()
    embedder = DenseEmbedder(LocalProvider(encoder, "concepts"), store, texts=text, cards="v1")
    assert await embedder.refresh("tracker", tracker(), "fp-1") == 1
    assert text.built == 3 and len(encoder.calls) == 1 and embedder.index.ready("tracker")


@pytest.mark.anyio
@pytest.mark.parametrize("damage", [b"\xde\xad\xbe\xef", b"\x00" * 12, b"\xff" * 12, None])
async def test_a_damaged_stored_vector_is_embedded_again_not_the_whole_connector_lexical(
    damage: bytes | None,
) -> None:
    store = MemoryVectorStore()
    await DenseEmbedder(LocalProvider(ConceptEncoder(), "concepts"), store).refresh("tracker", tracker())
    damaged = text_digest(embedded_text(tracker()[0]))
    # Cut short, all zeros, NaNs, or a row of another length than the rest.
    good = store.rows[("concepts", damaged)]
    store.rows[("concepts", damaged)] = damage if damage is not None else good + good
    encoder = ConceptEncoder()
    embedder = DenseEmbedder(LocalProvider(encoder, "concepts"), store)
    assert await embedder.refresh("tracker", tracker()) == 1
    assert encoder.texts == [embedded_text(tracker()[0])] and embedder.index.ready("tracker")
    assert store.rows[("concepts", damaged)] == good  # repaired in the store: the next start embeds nothing


@pytest.mark.anyio
async def test_stored_vectors_all_damaged_alike_are_embedded_again() -> None:
    # Every row cut by the same 4 bytes, or every row a tiny vector: nothing to compare with in the
    # index yet, so the provider's own length and the norm a stored vector has tell them damaged.
    for damage in (lambda blob: blob[:-4], lambda blob: b"\x01" * len(blob)):
        store = MemoryVectorStore()
        await DenseEmbedder(LocalProvider(ConceptEncoder(), "concepts", dimension=5), store).refresh(
            "tracker", tracker()
        )
        for key, blob in list(store.rows.items()):
            store.rows[key] = damage(blob)
        encoder = ConceptEncoder()
        embedder = DenseEmbedder(LocalProvider(encoder, "concepts", dimension=5), store)
        assert await embedder.refresh("tracker", tracker()) == 3
        assert embedder.index.dimension == 5


@pytest.mark.anyio
async def test_a_query_vector_of_another_length_than_the_stored_ones_is_answered_lexically(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from mcp_gateway.discovery import DiscoveryIndex
    from mcp_gateway.discovery.hybrid import HybridSearch

    class Longer(ConceptEncoder):
        def encode(self, texts: Sequence[str]) -> list[list[float]]:
            return [[*row, 0.0] for row in super().encode(texts)]

    index = DiscoveryIndex()
    index.replace_connector("tracker", tracker())
    search = HybridSearch(LocalProvider(ConceptEncoder(), "concepts"), MemoryVectorStore())
    await search.embedder.refresh("tracker", tracker())
    search.embedder.provider = LocalProvider(Longer(), "concepts")  # what another model's vectors look like
    found = await search.find(index, "open a ticket", limit=3)
    assert [a.qualified_name for a, _ in found.hits] == [
        a.qualified_name for a, _ in index.find("open a ticket", limit=3).hits
    ]
    assert "stored vectors have 5 dimensions, the model 6" in caplog.text


@pytest.mark.anyio
async def test_an_embedding_stopped_halfway_keeps_the_batches_it_finished() -> None:
    class Failing(ConceptEncoder):
        def encode(self, texts: Sequence[str]) -> list[list[float]]:
            if self.calls:
                raise OSError("the process is stopping")
            return super().encode(texts)

    store = MemoryVectorStore()
    with pytest.raises(OSError):
        await DenseEmbedder(LocalProvider(Failing(), "concepts"), store, batch=2).refresh("tracker", tracker())
    assert len(store.rows) == 2  # the first batch of two, kept
    encoder = ConceptEncoder()
    embedder = DenseEmbedder(LocalProvider(encoder, "concepts"), store, batch=2)
    assert await embedder.refresh("tracker", tracker()) == 1  # only the action the stop left out
    assert embedder.index.ready("tracker")


@pytest.mark.anyio
async def test_a_resync_embeds_only_changed_actions() -> None:
    encoder = ConceptEncoder()
    embedder = DenseEmbedder(LocalProvider(encoder, "concepts"), MemoryVectorStore())
    await embedder.refresh("tracker", tracker())
    await embedder.refresh("shop", shop())
    encoder.calls.clear()
    changed = [*tracker()[:2], action("tracker", "forecast.get", "Get the weather forecast for a city")]
    assert await embedder.refresh("tracker", [*changed, action("tracker", "chat.post", "Post a message")]) == 2
    assert len(encoder.calls) == 1 and sorted(encoder.texts) == sorted(
        [embedded_text(changed[2]), embedded_text(action("tracker", "chat.post", "Post a message"))]
    )
    assert embedder.index.ready("shop") and len(embedder.index) == 6
    await embedder.refresh("tracker", [])
    assert not embedder.index.ready("tracker") and len(embedder.index) == 2


@pytest.mark.anyio
async def test_a_refresh_overtaken_by_a_newer_one_is_dropped() -> None:
    gate = anyio.Event()

    class SlowProvider:
        model = "slow"

        async def embed(self, texts: Sequence[str]) -> Any:
            await gate.wait()
            return np.stack([unit(1, 0)] * len(texts))

    embedder = DenseEmbedder(SlowProvider(), MemoryVectorStore())
    async with anyio.create_task_group() as tg:
        tg.start_soon(embedder.refresh, "tracker", tracker())
        await anyio.sleep(0.01)
        embedder.remove("tracker")
        gate.set()
    assert not embedder.index.ready("tracker")


def test_text_digest_is_stable() -> None:
    assert text_digest("issues create") == text_digest("issues create") != text_digest("issues  create")


def test_searching_pins_blas_to_one_thread() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl", reason="the optional embeddings extra is not installed")
    index = DenseIndex()
    index.replace_connector("svc", ["svc.a"], np.ones((1, 4), dtype=np.float32) / 2)
    assert index.search(np.ones(4, dtype=np.float32) / 2, None, k=1) == [("svc.a", pytest.approx(1.0))]
    blas = [pool for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"]
    assert blas and all(pool["num_threads"] == 1 for pool in blas)


@pytest.mark.anyio
async def test_an_action_of_several_texts_gets_the_mean_of_their_vectors() -> None:
    def two(action: Action) -> tuple[str, str]:
        return (action.summary, f"{action.path}: {action.summary}")

    store, encoder = MemoryVectorStore(), ConceptEncoder()
    embedder = DenseEmbedder(LocalProvider(encoder, "concepts"), store, texts=two)
    assert await embedder.refresh("tracker", tracker()) == 3
    # Both texts of every action in one batch, in order; one vector per action, under the digest of both.
    assert encoder.texts == [text for a in tracker() for text in two(a)]
    names = [a.qualified_name for a in tracker()]
    assert all(("concepts", text_digest("\0".join(two(a)))) in store.rows for a in tracker())
    # A query scores the mean of its cosines to the two texts.
    query = unit(0, 1, 0, 0, 0)
    scores = embedder.index.scores(query, names)
    for a in tracker():
        parts = np.asarray(ConceptEncoder().encode(two(a)), dtype=np.float32)
        assert scores[a.qualified_name] == pytest.approx(float((parts @ query).mean()))
    again = ConceptEncoder()
    assert await DenseEmbedder(LocalProvider(again, "concepts"), store, texts=two).refresh("tracker", tracker()) == 0
    assert again.calls == []
