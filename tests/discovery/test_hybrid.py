"""Hybrid ``discover`` through the gateway: modes, vectors in the store across restarts, incremental
re-embedding, low confidence, long queries over MCP, and the OpenAI-compatible provider on loopback."""

from __future__ import annotations

import hashlib
import logging
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest
from mcp import Client

from mcp_gateway.core import result_payload
from mcp_gateway.discovery import LOW_CONFIDENCE_HINT, EmbeddingsUnavailable
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.runtime import DISCOVERY_SECRET, Settings, open_gateway
from mcp_gateway.server.tools import build_mcp_server
from mcp_gateway.services.identity import OPERATOR

pytestmark = [pytest.mark.anyio, pytest.mark.hybrid]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the store runs on asyncio (aiosqlite)


KEY = "hybrid-test-master-key-0123456789abcdef"

MANIFEST = """
project: hybrid
discovery: {discovery}
connectors:
  - slug: tracker
    base_url: http://127.0.0.1:9
    source:
      http:
        actions:
          - {{path: reports.create, method: POST, url: /reports, summary: {summary}}}
          - {{path: tickets.open, method: POST, url: /tickets, summary: Open a ticket to report a defect}}
          - {{path: tickets.close, method: POST, url: /tickets/close, summary: Close a ticket}}
"""


def manifest_text(discovery: str = "{}", summary: str = "Create a report") -> str:
    return MANIFEST.format(discovery=discovery, summary=summary)


def settings(tmp_path: Path) -> Settings:
    return Settings(manifest_path=None, state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": KEY})


def _has_extra() -> bool:
    try:
        from mcp_gateway.discovery.providers import local_provider

        local_provider()
    except EmbeddingsUnavailable:
        return False
    return True


needs_extra = pytest.mark.skipif(not _has_extra(), reason="the embeddings extra is not installed")


class CountingProvider:
    """A bag-of-words stand-in for the model (numpy still needed), counting the texts it embeds."""

    model = "test-bow"

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> object:
        import numpy as np

        self.calls += 1
        self.texts.extend(texts)
        rows = np.zeros((len(texts), 64), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                rows[i, hashlib.blake2b(word.encode(), digest_size=1).digest()[0] % 64] += 1.0
        rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
        return rows


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> CountingProvider:
    pytest.importorskip("numpy")
    made = CountingProvider()
    monkeypatch.setattr("mcp_gateway.discovery.providers.local_provider", lambda: made)
    return made


# -- modes -----------------------------------------------------------------------------------------


def test_modes_default_to_auto_and_the_old_reranker_setting_maps_to_them() -> None:
    assert parse_manifest(manifest_text()).discovery.effective_mode == "auto"
    assert parse_manifest(manifest_text("{reranker: minilm}")).discovery.effective_mode == "hybrid"
    assert parse_manifest(manifest_text("{reranker: none}")).discovery.effective_mode == "lexical"
    assert parse_manifest(manifest_text("{mode: lexical}")).discovery.effective_mode == "lexical"
    with pytest.raises(Exception, match=r"discovery\.mode"):
        parse_manifest(manifest_text("{mode: dense}"))


async def test_lexical_mode_says_so_everywhere(tmp_path: Path, provider: CountingProvider) -> None:
    manifest = parse_manifest(manifest_text("{mode: lexical}"), base_dir=tmp_path)
    async with open_gateway(settings(tmp_path), manifest=manifest) as gw:
        assert gw.dense is None
        listed = result_payload(await gw.connectors(OPERATOR))
        found = result_payload(await gw.discover(OPERATOR, "report a bug"))
    assert listed["discovery"] == "discovery: lexical only"
    assert found["results"] and provider.texts == []


async def test_auto_without_the_extra_is_lexical_and_hybrid_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # as if the extra were not installed
    caplog.set_level(logging.INFO, logger="mcp_gateway.runtime")
    async with open_gateway(settings(tmp_path), manifest=parse_manifest(manifest_text(), base_dir=tmp_path)) as gw:
        assert gw.dense is None and gw.discovery_status == "discovery: lexical only"
        assert (await gw.discover(OPERATOR, "open a ticket")).results[0].name == "tracker.tickets.open"
    assert "discovery: lexical only" in caplog.text
    hybrid = parse_manifest(manifest_text("{mode: hybrid}"), base_dir=tmp_path)
    with pytest.raises(EmbeddingsUnavailable, match=r"pip install"):
        async with open_gateway(settings(tmp_path / "other"), manifest=hybrid):
            pass
    assert not (tmp_path / "other").exists()  # it stopped before opening anything


# -- vectors ---------------------------------------------------------------------------------------


async def test_vectors_survive_a_restart_and_a_resync_embeds_only_what_changed(
    tmp_path: Path, provider: CountingProvider
) -> None:
    manifest = parse_manifest(manifest_text(), base_dir=tmp_path)
    async with open_gateway(settings(tmp_path), manifest=manifest) as gw:
        assert gw.dense is not None
        await gw.dense.settled()
        # Three actions; the close's card says what closing achieves, so it is embedded beside its headline.
        assert len(provider.texts) == 4
        assert gw.discovery_status == "discovery: hybrid (test-bow; 1 of 1 connectors embedded)"
        found = await gw.discover(OPERATOR, "report a defect ticket")
        assert found.results[0].name == "tracker.tickets.open"

    provider.texts.clear()
    async with open_gateway(settings(tmp_path), manifest=manifest) as gw:
        assert gw.dense is not None
        await gw.dense.settled()
        assert provider.texts == []  # every vector came from the store
        assert gw.dense.embedder.index.ready("tracker")
        await gw.reload(parse_manifest(manifest_text(summary="File an incident report"), base_dir=tmp_path))
        await gw.dense.settled()
        assert len(provider.texts) == 1 and "incident" in provider.texts[0]


async def test_a_sync_that_embeds_leaves_nothing_for_the_next_start_to_embed(
    tmp_path: Path, provider: CountingProvider
) -> None:
    manifest = parse_manifest(manifest_text(), base_dir=tmp_path)
    said: list[tuple[str, str]] = []
    # What the ``sync`` command opens: no index, no background embedding, the vectors computed in the sync.
    async with open_gateway(
        settings(tmp_path),
        manifest=manifest,
        build_index=False,
        embed=False,
        embed_now=True,
        progress=lambda slug, phase: said.append((slug, phase)),
    ):
        assert len(provider.texts) == 4  # embedded before the gateway was handed over (the close: card and headline)
    assert ("tracker", "embedded for hybrid discover (3 of 3 anew)") in said

    provider.texts.clear()
    async with open_gateway(settings(tmp_path), manifest=manifest) as gw:
        assert gw.dense is not None
        await gw.dense.settled()
        assert provider.texts == []  # the serve after it reads every vector back
        assert gw.dense.embedder.index.ready("tracker")


async def test_a_start_after_a_sync_answers_its_first_query_by_meaning(
    tmp_path: Path, provider: CountingProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vectors a sync embedded are read back in the background; the first ``discover`` waits for
    that (a second or two on a real catalog, made slower here) instead of ranking by words alone."""
    from mcp_gateway.discovery.dense import DenseEmbedder

    manifest = parse_manifest(manifest_text(), base_dir=tmp_path)
    async with open_gateway(settings(tmp_path), manifest=manifest, build_index=False, embed=False, embed_now=True):
        pass
    kept_digests = DenseEmbedder._kept_digests

    async def slow(self: DenseEmbedder, *args: object) -> object:
        await anyio.sleep(0.5)
        return await kept_digests(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(DenseEmbedder, "_kept_digests", slow)
    provider.texts.clear()
    async with open_gateway(settings(tmp_path), manifest=manifest) as gw:
        assert gw.dense is not None
        found = await gw.discover(OPERATOR, "close a ticket")
        assert gw.dense.embedder.index.ready("tracker")  # it waited for the stored vectors
        assert found.results[0].name == "tracker.tickets.close"
        assert [text for text in provider.texts if "ticket" in text] == ["close a ticket"]  # the query alone


def hold(provider: CountingProvider, monkeypatch: pytest.MonkeyPatch) -> tuple[anyio.Event, anyio.Event]:
    """Make ``provider`` wait in its first batch: (set when it is waiting, set this to let it go on)."""
    release, entered = anyio.Event(), anyio.Event()
    embed = provider.embed

    async def held(texts: Sequence[str]) -> object:
        entered.set()
        await release.wait()
        return await embed(texts)

    monkeypatch.setattr(provider, "embed", held)
    return entered, release


async def test_connectors_says_how_far_a_background_embedding_is(
    tmp_path: Path, provider: CountingProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, release = hold(provider, monkeypatch)
    manifest = parse_manifest(manifest_text(), base_dir=tmp_path)
    async with open_gateway(settings(tmp_path), manifest=manifest) as gw:
        assert gw.dense is not None
        await entered.wait()
        listed = result_payload(await gw.connectors(OPERATOR))
        assert listed["discovery"] == "discovery: hybrid (test-bow; 0 of 1 connectors embedded; embedding 3 actions)"
        release.set()
        await gw.dense.settled()
        assert result_payload(await gw.connectors(OPERATOR))["discovery"] == (
            "discovery: hybrid (test-bow; 1 of 1 connectors embedded)"
        )


async def test_an_agent_sees_the_embedding_of_its_own_connectors_only(
    tmp_path: Path, provider: CountingProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_gateway.services.identity import Principal

    text = manifest_text() + (
        "  - slug: vault\n    base_url: http://127.0.0.1:9\n    source:\n      http:\n        actions:\n"
        "          - {path: keys.list, method: GET, url: /keys, summary: List the keys}\n"
        "agents:\n  - name: limited\n    connectors: [vault]\n"
    )
    entered, release = hold(provider, monkeypatch)
    async with open_gateway(settings(tmp_path), manifest=parse_manifest(text, base_dir=tmp_path)) as gw:
        assert gw.dense is not None
        await entered.wait()  # the first connector's embedding is held: tracker's
        operator = result_payload(await gw.connectors(OPERATOR))["discovery"]
        limited = result_payload(await gw.connectors(Principal("u", "limited")))["discovery"]
        assert "of 2 connectors" in operator and "embedding 3 actions" in operator
        # Neither the tracker's size nor that it is being embedded: only its own connector counts.
        assert limited == "discovery: hybrid (test-bow; 0 of 1 connectors embedded)", limited
        release.set()
        await gw.dense.settled()
        limited = result_payload(await gw.connectors(Principal("u", "limited")))["discovery"]
        assert limited == "discovery: hybrid (test-bow; 1 of 1 connectors embedded)"


async def test_until_vectors_exist_discover_answers_lexically(tmp_path: Path, provider: CountingProvider) -> None:
    manifest = parse_manifest(manifest_text(), base_dir=tmp_path)
    async with open_gateway(settings(tmp_path), manifest=manifest) as gw:
        assert gw.dense is not None
        lexical = [a.qualified_name for a, _ in gw._index.find("close a ticket", limit=10).hits]
        if not gw.dense.embedder.index.ready("tracker"):
            assert [r.name for r in (await gw.discover(OPERATOR, "close a ticket")).results] == lexical
        await gw.dense.settled()
        assert (await gw.discover(OPERATOR, "close a ticket")).results[0].name == "tracker.tickets.close"


# -- results ---------------------------------------------------------------------------------------


async def test_nonsense_is_low_confidence_with_a_hint_and_long_queries_are_searched_over_mcp(
    tmp_path: Path, provider: CountingProvider
) -> None:
    manifest = parse_manifest(manifest_text(), base_dir=tmp_path)
    async with open_gateway(settings(tmp_path), manifest=manifest) as gw:
        assert gw.dense is not None
        await gw.dense.settled()
        nonsense = result_payload(await gw.discover(OPERATOR, "zxqv plorb wibbles"))
        assert nonsense["confidence"] == "low" and nonsense["hint"] == LOW_CONFIDENCE_HINT
        sure = result_payload(await gw.discover(OPERATOR, "close a ticket"))
        assert sure["confidence"] == "high" and "hint" not in sure
        long_query = "Please close the ticket about the broken build. " + "More context follows here. " * 260
        assert 7000 <= len(long_query) <= 8000
        async with Client(build_mcp_server(gw, default_principal=OPERATOR)) as client:
            answer = await client.call_tool("discover", {"query": long_query})
    assert not answer.is_error and answer.structured_content is not None
    assert answer.structured_content["results"][0]["name"] == "tracker.tickets.close"


# -- the real model and the OpenAI-compatible provider ---------------------------------------------------


@needs_extra
async def test_the_bundled_model_is_on_by_default(tmp_path: Path) -> None:
    async with open_gateway(settings(tmp_path), manifest=parse_manifest(manifest_text(), base_dir=tmp_path)) as gw:
        assert gw.dense is not None
        with anyio.fail_after(60):
            await gw.dense.settled()
        assert "all-MiniLM-L6-v2-api-2@u8; 1 of 1 connectors embedded" in gw.discovery_status
        found = await gw.discover(OPERATOR, "something is broken, tell support")
        assert found.results[0].name == "tracker.tickets.open"


@needs_extra
async def test_an_openai_compatible_endpoint_with_a_sealed_key(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp_gateway.discovery._embedding import MiniLmEncoder
    from mcp_gateway.store.sqlite import SQLiteStore
    from tests.support.embeddings_server import embeddings_app
    from tests.support.upstream import serve_asgi

    canary = "sk-canary-" + "7f3a9c" * 6
    app = embeddings_app(MiniLmEncoder(), model="all-minilm", api_key=canary)
    caplog.set_level(logging.DEBUG)
    with serve_asgi(app) as base_url:
        discovery = f"{{embeddings: {{url: '{base_url}/v1', model: all-minilm}}}}"
        manifest = parse_manifest(manifest_text(discovery), base_dir=tmp_path)
        async with open_gateway(settings(tmp_path), manifest=manifest) as gw:
            connector, name = DISCOVERY_SECRET
            await gw._vault.put(connector, canary, name=name)
        async with open_gateway(settings(tmp_path), manifest=manifest) as gw:
            assert gw.dense is not None
            with anyio.fail_after(60):
                await gw.dense.settled()
            assert gw.dense.embedder.index.ready("tracker")
            assert "all-minilm at http://127.0.0.1" in gw.discovery_status
            found = result_payload(await gw.discover(OPERATOR, "something is broken, tell support"))
            listed = result_payload(await gw.connectors(OPERATOR))
    assert found["results"][0]["name"] == "tracker.tickets.open"
    assert app.requests and all(r["headers"].get("authorization") == f"Bearer {canary}" for r in app.requests)
    assert canary not in caplog.text and canary not in str(found) and canary not in str(listed)
    raw = (tmp_path / "state" / "state.db").read_bytes()
    assert canary.encode() not in raw
    async with SQLiteStore(tmp_path / "state" / "state.db") as store:
        assert await store.list_credentials()  # stored, sealed


async def test_the_environment_overrides_the_mode(tmp_path: Path, provider: CountingProvider) -> None:
    env = {"MCP_GATEWAY_MASTER_KEY": KEY, "MCP_GATEWAY_DISCOVERY_MODE": "lexical"}
    state = Settings(manifest_path=None, state_dir=tmp_path / "state", env=env)
    async with open_gateway(state, manifest=parse_manifest(manifest_text("{mode: hybrid}"), base_dir=tmp_path)) as gw:
        assert gw.dense is None


async def test_another_process_sees_how_far_the_running_gateway_embeds(
    tmp_path: Path, provider: CountingProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_gateway.discovery.embedding_progress import PROGRESS_FILE, progress_elsewhere

    entered, release = hold(provider, monkeypatch)
    state = settings(tmp_path)
    async with open_gateway(state, manifest=parse_manifest(manifest_text(), base_dir=tmp_path)) as gw:
        assert gw.dense is not None
        await entered.wait()
        kept = state.state_dir / PROGRESS_FILE
        assert kept.is_file()
        assert progress_elsewhere(state.state_dir) is None  # this process's own line is not "elsewhere"
        with monkeypatch.context() as other:  # as another process reads it: its pid is not the writer's
            other.setattr("mcp_gateway.discovery.embedding_progress.os.getpid", lambda: -1)
            line = progress_elsewhere(state.state_dir)
        assert line == "discovery: hybrid (test-bow; 0 of 1 connectors embedded; embedding 3 actions)"
        release.set()
        await gw.dense.settled()
        assert not kept.exists()  # done: nothing is embedding any more


# -- the query's vector ------------------------------------------------------------------------------


async def test_the_query_vector_reads_the_repaired_text_and_a_long_messages_request(provider: CountingProvider) -> None:
    from mcp_gateway.discovery import DiscoveryIndex
    from mcp_gateway.discovery._outcomes import OUTCOMES
    from mcp_gateway.discovery.dense import MemoryVectorStore
    from mcp_gateway.discovery.hybrid import HybridSearch
    from mcp_gateway.vocabulary.model import Action, OpenAPIBinding

    index = DiscoveryIndex()
    index.replace_connector(
        "calendar",
        [
            Action(
                connector="calendar",
                path="meetings.schedule",
                summary="Schedule a meeting",
                input_schema={"type": "object", "properties": {}},
                risk="write",
                binding=OpenAPIBinding(method="POST", url="/meetings"),
            )
        ],
    )
    search = HybridSearch(provider, MemoryVectorStore())
    await search.query_vector(index, "shedule a meetng")
    # The model never sees the typos; the first query also embeds the outcomes it is read against, once.
    assert provider.texts == [*OUTCOMES, "schedule a meeting"]

    provider.texts.clear()
    context = "Last week the team moved offices and the old keys, invoices and badges were all lost. "
    message = f"{context * 2}Could you schedule a meeting with the landlord?"
    await search.query_vector(index, message)
    # The whole message and its request, mixed: the context cannot pull the vector elsewhere alone.
    assert provider.texts == [message, "Could you schedule a meeting with the landlord?"]

    # A message that counts off its asks: the message, its request and each ask go in one call (one round
    # trip to a remote provider), and each ask's vector is its own text's.
    provider.texts.clear()
    provider.calls = 0
    message = "Schedule a meeting with the landlord. Then cancel the standup."
    vector, each = await search.query_vectors(index, message)
    assert provider.calls == 1
    assert provider.texts == [message, "Schedule a meeting with the landlord.", "Then cancel the standup."]
    assert each is not None and len(each) == 2
    alone = await provider.embed(["Then cancel the standup."])
    assert each[1].tolist() == alone[0].tolist()  # type: ignore[index]
    assert vector.tolist() == (await search.query_vector(index, message)).tolist()


async def test_a_model_that_fails_on_queries_is_said_in_the_status_not_only_in_the_log(
    provider: CountingProvider, caplog: pytest.LogCaptureFixture
) -> None:
    # A broken install (the runtime's import failing at the first query): every answer was by words while
    # `connectors` still said "hybrid (... 3 of 3 connectors embedded)".
    from mcp_gateway.discovery import DiscoveryIndex
    from mcp_gateway.discovery.dense import MemoryVectorStore
    from mcp_gateway.discovery.hybrid import HybridSearch
    from tests.support.actions import catalog_action

    actions = [catalog_action("pets", "pets.list", "List the pets"), catalog_action("pets", "pets.get", "Get a pet")]
    index = DiscoveryIndex()
    index.replace_connector("pets", actions)
    search = HybridSearch(provider, MemoryVectorStore())
    await search.embedder.refresh("pets", actions)
    search.schedule("pets", actions)  # counted as served
    assert search.status().startswith("discovery: hybrid")

    async def broken(texts: Sequence[str]) -> object:
        raise ImportError("libonnxruntime.so: cannot open shared object file")

    provider.embed = broken  # type: ignore[method-assign]
    for _ in range(2):
        found = await search.find(index, "list the pets")
        assert found.hits[0][0].qualified_name == "pets.pets.list"  # answered by words
    assert search.status().startswith("discovery: lexical for now") and "ImportError" in search.status()
    assert caplog.text.count("query embedding failed") == 1  # once, not at every query
