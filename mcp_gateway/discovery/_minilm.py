"""all-MiniLM-L6-v2, 8-bit, run by onnxruntime: the bundled local embedding model of hybrid ``discover``.

The graph (``models/all-MiniLM-L6-v2/model.onnx``, made by ``scripts/build_minilm_onnx.py`` from the
float32 weights, tuned on API descriptions by ``scripts/tune_minilm.py``) is BERT (6 layers, hidden
384, 12 heads) with mean pooling and L2 norm inside, its linear layers dynamically quantized to int8
per output channel and stored as uint8 (so every CPU multiplies them exactly and gets the same
vectors: ``build_minilm_onnx.exact_on_every_cpu``), its word table float16 (35 MB in all).
Its vectors agree with the float32 model's to a cosine of ~0.99 (``tests/discovery/test_embedding.py``).

Why onnxruntime int8 and not float32 numpy (this module until then): a query embedding is
memory-bound, one read of the linear weights (42 MB in float32, 11 MB in int8) for a handful of
tokens. Reading a quarter of the bytes, a query costs a fraction of the CPU and the background
embedding runs faster (``scripts/bench_embedding_models.py --speed`` measures both). onnxruntime
also runs the whole forward with the GIL released, so a query and the background embedding, each in
its worker thread, do not take turns.

- **One thread per call** (intra-op 1, sequential, no spinning): on a busy shared host a spinning
  pool ran many times slower; a query and a background batch each get a core.
- **One text per run**, never padded. The activations are quantized per run (one scale per tensor),
  so a text run beside others would get a vector that depends on them (cosine 0.987 at worst when
  grouped by length); alone, a text always gets the same vector, the same as a query of that text.
  It costs nothing: grouping 4-64 texts per run was no faster here (the int8 weights, 11 MB, stay
  in the cache between runs).

Thread-safe: ``InferenceSession.run`` may be called concurrently; tokenizing holds a lock. numpy,
tokenizers and onnxruntime are imported when an encoder is made, never before.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..primitives import catalog_memory

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Floats = NDArray[np.float32]
else:
    Floats = Any

__all__ = ["MODEL_FILE", "MiniLmEncoder", "limit_malloc_arenas"]

MODEL_FILE = "model.onnx"


class MiniLmEncoder:
    """all-MiniLM-L6-v2 (mean pooling, L2 norm) from ``model_dir``'s ``model.onnx`` and ``tokenizer.json``.

    ``model_dir`` defaults to the bundled folder (``models.bundled_minilm_dir``). ``batch`` texts are
    tokenized together, then each goes through the network alone.
    """

    HIDDEN = 384
    dimension = HIDDEN

    def __init__(self, model_dir: Path | None = None, *, batch: int = 64) -> None:
        from ._embedding import _require
        from .models import bundled_minilm_dir

        np_ = _require("numpy")
        tokenizers = _require("tokenizers")
        ort = _require("onnxruntime")
        folder = model_dir or bundled_minilm_dir()
        if folder is None:
            raise FileNotFoundError("the bundled all-MiniLM-L6-v2 files are missing from this installation")
        self._np = np_
        self.batch = batch
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        options.log_severity_level = 3  # errors only: no start-up chatter on stderr
        # Activations from malloc, not an arena of onnxruntime's own that keeps its peak: ``release``
        # then hands a background batch's memory back.
        options.enable_cpu_mem_arena = False
        self._session = ort.InferenceSession(str(folder / MODEL_FILE), options, providers=["CPUExecutionProvider"])
        config = folder / "sentence_bert_config.json"
        max_length = json.loads(config.read_text())["max_seq_length"] if config.is_file() else 256
        self._tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=max_length)
        self._tokenizer.no_padding()
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> list[Floats]:
        """Unit-length 384-float32 vectors, one per text, in order (an empty text still gets one)."""
        return list(self.encode_matrix(texts))

    def encode_matrix(self, texts: Sequence[str]) -> Floats:
        """A (len(texts), 384) float32 matrix of unit rows, in order."""
        np_ = self._np
        out = np_.empty((len(texts), self.HIDDEN), dtype=np_.float32)
        for start in range(0, len(texts), self.batch):
            with self._lock:
                encodings = self._tokenizer.encode_batch(list(texts[start : start + self.batch]))
            for row, encoding in enumerate(encodings, start):
                ids = np_.asarray(encoding.ids, dtype=np_.int64)[None, :]
                out[row] = self._session.run(None, {"input_ids": ids})[0][0]
        if len(texts) >= _RELEASE_AFTER:
            catalog_memory.release_free_memory()
        return out


_RELEASE_AFTER = 16
"""A call with at least this many texts is a background batch, not a query: the heap is trimmed after it."""

MALLOC_ARENAS = 1
"""glibc malloc arenas the process may create (``M_ARENA_MAX``; glibc's own limit is 8 per core)."""


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas, process-wide, and pin its mmap threshold (``catalog_memory``); False
    where there is no glibc ``mallopt`` (musl, macOS).

    Every thread that allocates gets an arena of its own (up to 8 per core), and each arena keeps the
    memory its thread freed. The encoder runs in whichever worker thread anyio hands it, so the arenas
    kept growing with the background embedding beside queries (+50 MB measured with the float32 model,
    +15 MB with one arena, no slower). Call it before the worker threads exist.
    """
    return catalog_memory.limit_malloc_arenas(arenas)
