"""What hybrid discovery needs from ``discovery._embedding`` and the local model.

Without the ``embeddings`` extra: the install command is named, ``serve`` refuses to start, and
lexical discovery imports nothing heavy. With it: ``MiniLmEncoder`` (8-bit) is compared with the
float32 model's vectors (``data/minilm_float32_reference.npy``, computed by sentence-transformers 6.3.0
on torch 2.14.1 from the tuned weights, ``scripts/tune_minilm.py``) and with its own vectors as
another CPU computed them (``data/minilm_u8_reference.npy``: the bundled graph's, onnxruntime 1.32 on
an AMD EPYC with AVX2 and no AVX-512); those tests skip when the extra is absent.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mcp_gateway import cli
from mcp_gateway.discovery import EmbeddingsUnavailable
from mcp_gateway.discovery._embedding import INSTALL_HINT, MiniLmEncoder

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


# -- the missing extra ------------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["numpy", "tokenizers", "onnxruntime"])
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


@pytest.mark.slow  # a fresh interpreter
def test_lexical_discovery_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from mcp_gateway.discovery import DiscoveryIndex\n"
        "from mcp_gateway.vocabulary.model import Action, McpBinding\n"
        "index = DiscoveryIndex()\n"
        "get_x = Action(connector='a', path='x.get', summary='Get x', binding=McpBinding(tool='x'))\n"
        "index.replace_connector('a', [get_x])\n"
        "assert index.search('get x')\n"
        "print(sorted(m for m in ('numpy', 'tokenizers', 'onnxruntime') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# -- the real model (skipped without the extra) ------------------------------------------------------

# Reference: sentence-transformers 6.3.0, torch 2.14.1 CPU, SentenceTransformer(<the tuned weights, the
# float32 folder scripts/tune_minilm.py writes>).encode(...) (max_seq_length 256, normalized).
# Components 0, 1, 2, 100 and 383 of each vector.
REFERENCE = {
    "create an issue": [-0.037037, 0.031802, -0.06758, -0.000208, 0.081111],
    "issues create: Create an issue Parameters: owner, repo, title, body": [
        -0.04983,
        0.033698,
        -0.049587,
        -0.007719,
        0.086075,
    ],
    "How many Canadian dollars can I get for 500 US dollars?": [0.037241, -0.003064, -0.053052, 0.068796, -0.006051],
    "Who discovered radium?": [-0.045719, 0.105213, -0.029621, 0.06659, 0.043045],
    # 440 tokens: truncated at 256 like the reference.
    "The quick brown fox jumps over the lazy dog. " * 40: [0.054844, -0.037127, 0.064646, 0.048043, 0.11036],
    "": [-0.118685, 0.058865, -0.00046, 0.036129, -0.007664],
}
COMPONENTS = (0, 1, 2, 100, 383)
PARAPHRASES = [
    "give the buyer their money back",
    "refunds create: Create a refund Parameters: charge, amount, reason",
    "is Maria online right now",
    "users get presence: Gets user presence information.",
]
FLOAT32 = Path(__file__).parent / "data" / "minilm_float32_reference.npy"
BUNDLED = Path(__file__).parent / "data" / "minilm_u8_reference.npy"
"""The bundled graph's own vectors of ``[*REFERENCE, *PARAPHRASES]``, as another CPU computed them."""
"""The float32 model's whole vectors of ``[*REFERENCE, *PARAPHRASES]``, in that order (sentence-transformers,
the float32 weights the int8 graph was quantized from)."""


@pytest.fixture(scope="module")
def minilm() -> MiniLmEncoder:
    for module in ("numpy", "tokenizers", "onnxruntime"):
        pytest.importorskip(module, reason="the optional embeddings extra is not installed")
    return MiniLmEncoder()


def test_the_float32_reference_is_sentence_transformers() -> None:
    np = pytest.importorskip("numpy")
    reference = np.load(FLOAT32)
    for row, expected in zip(reference, REFERENCE.values(), strict=False):
        assert [float(row[i]) for i in COMPONENTS] == pytest.approx(expected, abs=2e-6)


def test_minilm_gives_the_same_vectors_on_every_cpu(minilm: MiniLmEncoder) -> None:
    # The graph's 8-bit weights are uint8 (``build_minilm_onnx.exact_on_every_cpu``): every onnxruntime
    # kernel multiplies them exactly. Stored as int8, an AVX2-only CPU added its products with
    # saturation, and its vectors sat at a cosine of 0.970-0.996 to those of a CPU with AVX-512 VNNI:
    # rankings, and the tests that check them, then depended on the machine.
    import numpy as np

    vectors = minilm.encode_matrix([*REFERENCE, *PARAPHRASES])
    cosines = np.sum(vectors * np.load(BUNDLED), axis=1)
    assert cosines.min() > 0.999, cosines


def test_minilm_8bit_gives_the_float32_vectors(minilm: MiniLmEncoder) -> None:
    import numpy as np

    sentences = [*REFERENCE, *PARAPHRASES]
    vectors = minilm.encode_matrix(sentences)  # one call: rows must come back in order
    assert vectors.shape == (len(sentences), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    reference = np.load(FLOAT32)
    cosines = np.sum(vectors * reference, axis=1)
    # Measured 0.980-0.997 (on every CPU: see the next test).
    assert cosines.min() > 0.97, cosines
    # What retrieval sees: the similarities between texts move by a few hundredths at most.
    assert np.abs(vectors @ vectors.T - reference @ reference.T).max() < 0.05
    # Reference cosine 0.761757: "create an issue" vs its action; 0.009789 vs the dollars question.
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.761757, abs=0.03)
    assert float(vectors[0] @ vectors[2]) == pytest.approx(0.009789, abs=0.03)
