"""``discovery._minilm``: packed batches, the in-place GELU and the memory-mapped weights.

The comparison with sentence-transformers' own vectors is in ``test_embedding.py``; these check that
the speed-ups change nothing: a text's vector does not depend on what it is batched with, nor on
how many tokens go through the network at once. Skips without the embeddings extra.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

for _module in ("numpy", "tokenizers", "threadpoolctl"):
    pytest.importorskip(_module, reason="the optional embeddings extra is not installed")

import numpy as np  # noqa: E402

from mcp_gateway.discovery._minilm import MiniLmEncoder, _SafeTensors, gelu_  # noqa: E402
from mcp_gateway.discovery.models import bundled_minilm_dir  # noqa: E402

TEXTS = [
    "issues create: Create an issue Parameters: owner, repo, title, body",
    "",
    "refund",
    "charges capture: Capture a payment Capture the payment of an existing, uncaptured charge. "
    "Parameters: charge, amount, application_fee, receipt_email, statement_descriptor",
    "chat post message: Sends a message to a channel. Parameters: channel, text, as_user, attachments, blocks",
    "How many Canadian dollars can I get for 500 US dollars?",
    "The quick brown fox jumps over the lazy dog. " * 40,  # truncated at 256 tokens
]


@pytest.fixture(scope="module")
def encoder() -> MiniLmEncoder:
    folder = bundled_minilm_dir()
    if folder is None:
        pytest.skip("the bundled model files are absent")
    return MiniLmEncoder(folder)


def test_a_vector_does_not_depend_on_its_batch_or_the_token_budget(encoder: MiniLmEncoder) -> None:
    alone = np.stack([encoder.encode([text])[0] for text in TEXTS])
    together = encoder.encode_matrix(TEXTS)
    assert together.shape == (len(TEXTS), 384) and together.dtype == np.float32
    assert np.abs(together - alone).max() < 1e-5
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    saved = encoder.token_budget, encoder.batch
    try:
        for budget, batch in ((1, 3), (64, 2), (10_000, 64)):
            encoder.token_budget, encoder.batch = budget, batch
            assert np.abs(encoder.encode_matrix(TEXTS) - alone).max() < 1e-5, (budget, batch)
    finally:
        encoder.token_budget, encoder.batch = saved
    # Reversed input: rows come back in the caller's order, whatever the length sort did.
    assert np.abs(encoder.encode_matrix(TEXTS[::-1]) - alone[::-1]).max() < 1e-5
    assert encoder.encode([]) == [] and encoder.encode_matrix([]).shape == (0, 384)


def test_gelu_is_the_erf_gelu_in_place() -> None:
    x = np.linspace(-12, 12, 20_001, dtype=np.float32)
    expected = np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x.tolist()])
    y = x.copy()
    assert gelu_(y) is y
    assert np.abs(y - expected).max() < 5e-7
    assert -1e-30 < y[0] <= 0.0  # far left: 0 less a vanishing term, no cancellation error


def test_the_word_table_stays_mapped_and_its_pages_can_be_given_back(encoder: MiniLmEncoder) -> None:
    # Mapped read-only from the file in its dtype (float16 for the bundled copy), never copied.
    words = encoder._words
    assert words.dtype == np.float16 and words.shape == (30522, 384)
    assert not words.flags.writeable and not words.flags.owndata
    before = encoder.encode(TEXTS[:3])
    encoder.release()  # drops the resident pages: the next look-ups read them back from the file
    after = encoder.encode(TEXTS[:3])
    assert np.abs(np.stack(before) - np.stack(after)).max() == 0.0


def test_a_bad_tensor_file_is_refused_with_its_name(tmp_path: Path) -> None:
    header = {"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 32]}, "ids": {"dtype": "I64", "shape": [1]}}
    blob = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(blob).to_bytes(8, "little") + blob + bytes(64))
    tensors = _SafeTensors(path)
    with pytest.raises(ValueError, match="has 32 bytes for shape"):
        tensors.read("w")
    with pytest.raises(ValueError, match="no floating-point tensor 'ids'"):
        tensors.map("ids")
    with pytest.raises(ValueError, match="no floating-point tensor 'missing'"):
        tensors.map("missing")


def test_malloc_arenas_are_capped_where_glibc_allows_it() -> None:
    import platform

    from mcp_gateway.discovery._minilm import _limit_malloc_arenas

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("M_ARENA_MAX is a glibc malloc option")
    assert _limit_malloc_arenas() is True
