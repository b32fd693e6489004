"""Model files shipped inside the package, so the ``embeddings`` extra needs no separate model download.

``all-MiniLM-L6-v2/``: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0, its licence beside the
files): the weights stored as float16 (45 MB instead of 91 MB; upcast to float32 at load, recall
unchanged on the benchmark sets, see ``scripts/bench_embedding_models.py``), its ``tokenizer.json``
and ``sentence_bert_config.json``. The PyPI packages that carry this model declare
sentence-transformers (torch, CUDA: ~6 GB) or other unused dependencies, so its files live here.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MINILM", "bundled_minilm_dir"]

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
"""The bundled model's name: the key its stored vectors are filed under."""


def bundled_minilm_dir() -> Path | None:
    """The bundled all-MiniLM-L6-v2 folder, or None when the package was installed without it."""
    folder = Path(__file__).resolve().parent / "all-MiniLM-L6-v2"
    return folder if (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file() else None
