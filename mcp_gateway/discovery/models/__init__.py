"""Model files shipped inside the package, so the ``embeddings`` extra needs no separate model download.

``all-MiniLM-L6-v2/``: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0, its licence and a NOTICE
of the changes beside the files), fine-tuned on API descriptions and then on hand-written requests for
other APIs' actions (``scripts/tune_minilm.py``), as one
ONNX graph, ``model.onnx`` (35 MB: linear layers 8-bit per output channel, word table float16; made by
``scripts/build_minilm_onnx.py`` from the tuned weights), its ``tokenizer.json`` and
``sentence_bert_config.json``. The PyPI packages that carry this
model declare sentence-transformers (torch, CUDA: ~6 GB) or other unused dependencies, so its files
live here.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MINILM", "MINILM_DIMENSION", "bundled_minilm_dir"]

MINILM = "mcp-gateway/all-MiniLM-L6-v2-api-2@u8"
"""The bundled model's name and the key its stored vectors are filed under: the stock model tuned on API
descriptions, then on users' requests (``-api-2``; each tuning gets the next number, so vectors of
different weights never mix: those an earlier graph stored, ``-api-1`` or the stock
``sentence-transformers/all-MiniLM-L6-v2@int8``, are left alone and the catalog is embedded again in
the background). ``@u8``: the quantized graph's vectors differ from the float32 weights' (cosine
~0.98-0.99), and are the same on every CPU (its 8-bit weights stored as uint8, multiplied exactly by
every onnxruntime kernel). The graph before, ``@int8``, held the same values as int8, whose products
an AVX2-only CPU rounds differently; its vectors are embedded again too."""


MINILM_DIMENSION = 384
"""The length of the bundled model's vectors."""


def bundled_minilm_dir() -> Path | None:
    """The bundled all-MiniLM-L6-v2 folder, or None when the package was installed without it."""
    folder = Path(__file__).resolve().parent / "all-MiniLM-L6-v2"
    return folder if (folder / "model.onnx").is_file() and (folder / "tokenizer.json").is_file() else None
