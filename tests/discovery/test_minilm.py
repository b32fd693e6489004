"""``discovery._minilm``: all-MiniLM-L6-v2 (int8) run by onnxruntime, one text per run.

The comparison with the float32 model is in ``test_embedding.py``; these check what the run-alone
design promises: a text's vector does not depend on what it is encoded with, rows come back in the
caller's order, and long texts are cut at the model's 256 tokens. Skips without the embeddings extra.
"""

from __future__ import annotations

import pytest

for _module in ("numpy", "tokenizers", "onnxruntime"):
    pytest.importorskip(_module, reason="the optional embeddings extra is not installed")

import numpy as np  # noqa: E402

from mcp_gateway.discovery._minilm import MiniLmEncoder  # noqa: E402
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


def test_a_vector_does_not_depend_on_its_batch(encoder: MiniLmEncoder) -> None:
    # The activations are quantized per run: run together, texts would shift each other's vectors.
    alone = np.stack([encoder.encode([text])[0] for text in TEXTS])
    together = encoder.encode_matrix(TEXTS)
    assert together.shape == (len(TEXTS), 384) and together.dtype == np.float32
    assert np.array_equal(together, alone)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    saved = encoder.batch
    try:
        encoder.batch = 2
        assert np.array_equal(encoder.encode_matrix(TEXTS), alone)
    finally:
        encoder.batch = saved
    # Reversed input: rows come back in the caller's order.
    assert np.array_equal(encoder.encode_matrix(TEXTS[::-1]), alone[::-1])
    assert encoder.encode([]) == [] and encoder.encode_matrix([]).shape == (0, 384)


def test_long_texts_are_cut_at_the_models_256_tokens(encoder: MiniLmEncoder) -> None:
    long = "The quick brown fox jumps over the lazy dog. " * 40  # 440 tokens
    longer = long + "Nothing after the 256th token counts. " * 20
    assert np.array_equal(encoder.encode_matrix([long]), encoder.encode_matrix([longer]))


def test_malloc_arenas_are_capped_where_glibc_allows_it() -> None:
    import platform

    from mcp_gateway.discovery._minilm import limit_malloc_arenas

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("M_ARENA_MAX is a glibc malloc option")
    assert limit_malloc_arenas() is True  # and the mmap threshold pinned (``catalog_memory.pin_mmap_threshold``)
