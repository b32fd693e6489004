"""Embedding providers (``discovery.providers``) against a real OpenAI-compatible server on loopback.

``tests/support/embeddings_server.py`` speaks the ``/embeddings`` API over real HTTP (uvicorn). One
test puts the real all-MiniLM-L6-v2 (int8) behind it and skips without the embeddings extra; the
others use a small deterministic encoder so the protocol, errors and key handling run everywhere.
The API key is a canary: it must reach the server's ``Authorization`` header and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import httpx2
import pytest

np = pytest.importorskip("numpy", reason="the optional embeddings extra is not installed")

from mcp_gateway.discovery._embedding import embedded_text  # noqa: E402
from mcp_gateway.discovery.dense import DenseEmbedder, MemoryVectorStore  # noqa: E402
from mcp_gateway.discovery.providers import EmbeddingsFailed, LocalProvider, OpenAIEmbeddings  # noqa: E402
from mcp_gateway.primitives.secrets import SecretValue  # noqa: E402
from mcp_gateway.vocabulary.model import Action, McpBinding  # noqa: E402
from tests.support.embeddings_server import EmbeddingsApp, embeddings_app  # noqa: E402
from tests.support.upstream import LoopbackServer  # noqa: E402

CANARY = "sk-canary-7f3a9c1e55d04b2a"


class HashEncoder:
    """A deterministic 8-d encoder (character trigram counts folded), unit rows."""

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            vector = [0.0] * 8
            for i in range(len(text) - 2):
                vector[sum(map(ord, text[i : i + 3])) % 8] += 1.0
            norm = sum(x * x for x in vector) ** 0.5 or 1.0
            out.append([x / norm for x in vector])
        return out


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[tuple[EmbeddingsApp, str]]:
    app = embeddings_app(HashEncoder(), model="hash-8", api_key=CANARY)
    with LoopbackServer(app) as loopback:
        yield app, loopback.base_url


def action(path: str, summary: str) -> Action:
    return Action(connector="svc", path=path, summary=summary, risk="read", binding=McpBinding(tool=path))


@pytest.mark.anyio
async def test_vectors_come_back_in_order_with_the_key_only_in_the_header(
    server: tuple[EmbeddingsApp, str], caplog: pytest.LogCaptureFixture
) -> None:
    app, base_url = server
    caplog.set_level(logging.DEBUG)
    texts = [f"text number {i} about things" for i in range(5)]
    async with httpx2.AsyncClient() as http:
        provider = OpenAIEmbeddings(f"{base_url}/v1", "hash-8", http, api_key=SecretValue(CANARY), max_inputs=2)
        matrix = await provider.embed(texts)
    assert matrix.shape == (5, 8) and matrix.dtype == np.float32
    assert np.allclose(matrix, np.asarray(HashEncoder().encode(texts)), atol=1e-6)
    assert [len(r["body"]) > 0 for r in app.requests] == [True] * 3  # batches of two
    assert {r["path"] for r in app.requests} == {"/v1/embeddings"}
    assert all(r["headers"]["authorization"] == f"Bearer {CANARY}" for r in app.requests)
    assert CANARY not in repr(provider) and CANARY not in provider.model
    assert CANARY not in caplog.text


@pytest.mark.anyio
async def test_errors_never_repeat_the_key(server: tuple[EmbeddingsApp, str], caplog: pytest.LogCaptureFixture) -> None:
    app, base_url = server
    caplog.set_level(logging.DEBUG)
    wrong = "sk-wrong-canary-0a1b2c3d4e"
    async with httpx2.AsyncClient() as http:
        # The server echoes the bad key in its 401 body: the error must not carry it on.
        with pytest.raises(EmbeddingsFailed) as raised:
            await OpenAIEmbeddings(f"{base_url}/v1", "hash-8", http, api_key=SecretValue(wrong)).embed(["x"])
        assert "HTTP 401" in str(raised.value)
        assert app.requests[-1]["headers"]["authorization"] == f"Bearer {wrong}"
        with pytest.raises(EmbeddingsFailed, match="HTTP 400"):
            await OpenAIEmbeddings(f"{base_url}/v1", "no-such-model", http, api_key=SecretValue(CANARY)).embed(["x"])
        with pytest.raises(EmbeddingsFailed, match="HTTP 404"):
            await OpenAIEmbeddings(f"{base_url}/nope", "hash-8", http, api_key=SecretValue(CANARY)).embed(["x"])
        with pytest.raises(EmbeddingsFailed, match="unreachable") as unreachable:
            await OpenAIEmbeddings("http://127.0.0.1:9/v1", "hash-8", http, api_key=SecretValue(CANARY)).embed(["x"])
    for exc in (raised.value, unreachable.value):
        chain = [exc, exc.__cause__, exc.__context__]
        assert all(CANARY not in repr(e) and wrong not in repr(e) for e in chain if e is not None)
        assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)
    assert CANARY not in caplog.text and wrong not in caplog.text


@pytest.mark.anyio
async def test_the_remote_provider_feeds_the_dense_index(server: tuple[EmbeddingsApp, str]) -> None:
    _, base_url = server
    store = MemoryVectorStore()
    actions = [action("a.get", "Get an apple"), action("b.list", "List bananas")]
    async with httpx2.AsyncClient() as http:
        provider = OpenAIEmbeddings(f"{base_url}/v1", "hash-8", http, api_key=SecretValue(CANARY))
        embedder = DenseEmbedder(provider, store)
        assert await embedder.refresh("svc", actions) == 2
        query = await embedder.embed_query(embedded_text(actions[1]))
    assert embedder.index.search(query, {"svc"}, k=1)[0][0] == "svc.b.list"
    assert all(CANARY.encode() not in blob for blob in store.rows.values())
    assert all(model == f"openai:{base_url}/v1#hash-8" for model, _ in store.rows)


# -- with the real model behind the server -------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> Any:
    for module in ("tokenizers", "onnxruntime"):
        pytest.importorskip(module, reason="the optional embeddings extra is not installed")
    from mcp_gateway.discovery._embedding import EmbeddingsUnavailable, MiniLmEncoder

    try:
        return MiniLmEncoder()
    except EmbeddingsUnavailable:
        pytest.skip("the all-MiniLM-L6-v2 weights are not installed")


@pytest.mark.anyio
async def test_a_real_model_behind_the_endpoint_matches_the_local_one(minilm: Any) -> None:
    app = embeddings_app(minilm, model="all-minilm", api_key=CANARY)
    texts = ["give the buyer their money back", "refunds create: Create a refund", "mute my notifications"]
    with LoopbackServer(app) as loopback:
        async with httpx2.AsyncClient() as http:
            remote = await OpenAIEmbeddings(
                f"{loopback.base_url}/v1", "all-minilm", http, api_key=SecretValue(CANARY)
            ).embed(texts)
    local = await LocalProvider(minilm, "all-minilm").embed(texts)
    assert np.allclose(remote, local, atol=1e-6)
    assert float(remote[0] @ remote[1]) > float(remote[0] @ remote[2]) + 0.2  # the paraphrase is the closer one


# -- the local model, loaded on first use ---------------------------------------------------------


@pytest.mark.anyio
async def test_the_local_model_is_loaded_once_by_the_first_embed_in_a_worker_thread() -> None:
    import threading

    from mcp_gateway.discovery.providers import LazyEncoder

    made: list[int] = []
    loop_thread = threading.get_ident()

    def make() -> HashEncoder:
        made.append(threading.get_ident())
        return HashEncoder()

    lazy = LazyEncoder(make)
    provider = LocalProvider(lazy, "hash")
    assert not lazy.loaded and made == []  # building the provider loads nothing
    async with anyio.create_task_group() as tg:  # a query and a background batch start together
        for texts in (["create an issue"], ["refund a charge", "list channels"]):
            tg.start_soon(provider.embed, texts)
    assert lazy.loaded and len(made) == 1 and made[0] != loop_thread
    vectors = await provider.embed(["create an issue"])
    assert vectors.shape == (1, 8) and len(made) == 1
    assert np.allclose(vectors[0], HashEncoder().encode(["create an issue"])[0])
