"""The all-MiniLM-L6-v2 graph bundled in ``discovery/models`` (8-bit) and ``providers.local_provider``.

Skips without the embeddings extra (numpy, tokenizers, onnxruntime).
"""

from __future__ import annotations

import pytest

for _module in ("numpy", "tokenizers", "onnxruntime"):
    pytest.importorskip(_module, reason="the optional embeddings extra is not installed")

import numpy as np  # noqa: E402

from mcp_gateway.discovery.models import MINILM, bundled_minilm_dir  # noqa: E402
from mcp_gateway.discovery.providers import local_provider  # noqa: E402

SENTENCES = [
    "give the buyer their money back",
    "refunds create: Create a refund Parameters: charge, amount, reason",
    "is Maria online right now",
    "users get presence: Gets user presence information.",
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_the_bundled_model_ships_with_its_licence() -> None:
    folder = bundled_minilm_dir()
    assert folder is not None
    assert "Apache License" in (folder / "LICENSE").read_text() and "int8" in (folder / "NOTICE").read_text()
    assert (folder / "model.onnx").stat().st_size < 40_000_000  # linear layers 8-bit, word table float16


@pytest.mark.anyio
async def test_local_provider_embeds_with_the_bundled_model() -> None:
    provider = local_provider()
    assert provider.model == MINILM
    vectors = await provider.embed(SENTENCES)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors.T
    assert sims[0, 1] > sims[0, 3] and sims[2, 3] > sims[2, 1]  # each intent is nearest its own action
