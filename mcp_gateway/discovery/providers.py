"""Embedding providers for hybrid ``discover``: the bundled local model, or an OpenAI-compatible endpoint.

Both implement ``dense.EmbeddingProvider``: ``model`` names the vector space (stored vectors are
keyed by it) and ``await embed(texts)`` returns a float32 matrix of unit rows without blocking the
event loop.

- ``LocalProvider``: an in-process encoder (``MiniLmEncoder``), run in a worker thread.
- ``OpenAIEmbeddings``: ``POST {url}/embeddings`` with ``{"model", "input": [...]}``, answered by
  ``{"data": [{"embedding": [...], "index": i}, ...]}`` (OpenAI, Ollama, vLLM, LM Studio, TEI...).
  Its API key is held as a secret (anything with ``reveal()``), revealed only into the request's
  ``Authorization`` header; errors name the status and the endpoint, never the key or the body
  the server sent back (a server may echo the header).
"""

from __future__ import annotations

import importlib.util
import math
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread

from ..vocabulary.errors import GatewayError

if TYPE_CHECKING:
    import httpx2
    import numpy as np
    from numpy.typing import NDArray


__all__ = ["EmbeddingsFailed", "LazyEncoder", "LocalProvider", "OpenAIEmbeddings", "local_provider"]

MAX_INPUTS = 128
"""Texts per request to a remote endpoint (OpenAI accepts 2,048; small servers choke on far fewer)."""


class EmbeddingsFailed(GatewayError):
    """The embeddings endpoint did not answer with usable vectors."""


class Secret(Protocol):
    def reveal(self) -> str | dict[str, str]: ...


class TextEncoder(Protocol):
    """What ``LocalProvider`` runs (``MiniLmEncoder``): one vector per text, safe to call from a worker thread."""

    def encode(self, texts: Sequence[str]) -> Sequence[Any]: ...


def _unit_rows(rows: Sequence[Sequence[float]] | Any) -> NDArray[np.float32]:
    import numpy as np

    matrix = np.asarray(rows, dtype=np.float32)
    if matrix.ndim != 2:
        raise EmbeddingsFailed(f"expected one vector per text, got an array of shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    result: NDArray[np.float32] = matrix / np.maximum(norms, 1e-12)
    return result


class LocalProvider:
    """An in-process ``Encoder`` (e.g. ``MiniLmEncoder``) run in a worker thread, ``batch`` texts per call."""

    def __init__(self, encoder: TextEncoder, model: str, *, batch: int = 64, dimension: int | None = None) -> None:
        self.encoder = encoder
        self._model = model
        self.batch = batch
        self.dimension = dimension
        """The length of its vectors when known before any is made (stored ones of another are damaged)."""

    @property
    def model(self) -> str:
        return self._model

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        rows: list[Any] = []
        for start in range(0, len(texts), self.batch):
            rows.extend(await anyio.to_thread.run_sync(self.encoder.encode, list(texts[start : start + self.batch])))
        return _unit_rows(rows) if rows else _unit_rows([[0.0]])[:0]


def local_provider() -> LocalProvider:
    """all-MiniLM-L6-v2 (int8, onnxruntime; ``_minilm``). ``EmbeddingsUnavailable`` without the extra, at once.

    The model itself, slow to load, is loaded by the first ``embed``, in its worker thread: a restart whose
    vectors are all in the store has them in use before, the event loop never waits for the load, and
    a command that only lists never loads it.
    """
    from ._embedding import EmbeddingsUnavailable, MiniLmEncoder, _require
    from ._minilm import limit_malloc_arenas
    from .models import MINILM, MINILM_DIMENSION, bundled_minilm_dir

    for module in ("numpy", "tokenizers", "onnxruntime"):
        if importlib.util.find_spec(module) is None:  # looks, imports nothing
            _require(module)  # raises EmbeddingsUnavailable naming the install command
    folder = bundled_minilm_dir()
    if folder is None:
        raise EmbeddingsUnavailable("the bundled all-MiniLM-L6-v2 files are missing from this installation")
    # Now, before the worker threads exist: a thread that allocated before the cap keeps its own arena.
    limit_malloc_arenas()
    return LocalProvider(LazyEncoder(lambda: MiniLmEncoder(folder)), MINILM, dimension=MINILM_DIMENSION)


class LazyEncoder:
    """A ``TextEncoder`` made by ``make`` on the first ``encode`` (in whichever thread calls it first)."""

    def __init__(self, make: Callable[[], TextEncoder]) -> None:
        self._make = make
        self._encoder: TextEncoder | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    def encode(self, texts: Sequence[str]) -> Sequence[Any]:
        encoder = self._encoder
        if encoder is None:
            with self._lock:  # one load, even when a query and the background embedding start together
                if self._encoder is None:
                    self._encoder = self._make()
                encoder = self._encoder
        return encoder.encode(texts)


class OpenAIEmbeddings:
    """An OpenAI-compatible ``/embeddings`` endpoint.

    ``url`` is the API base (``https://api.openai.com/v1``, ``http://localhost:11434/v1``): the
    request goes to ``{url}/embeddings``. ``api_key`` (optional, a ``SecretValue``) is sent as
    ``Authorization: Bearer``. ``http`` is the gateway's shared ``httpx2.AsyncClient``.
    """

    def __init__(
        self,
        url: str,
        model: str,
        http: httpx2.AsyncClient,
        *,
        api_key: Secret | None = None,
        timeout: float = 30.0,
        max_inputs: int = MAX_INPUTS,
    ) -> None:
        self.url = url.rstrip("/")
        self._model = model
        self._http = http
        self._api_key = api_key
        self.timeout = timeout
        self.max_inputs = max_inputs

    def __repr__(self) -> str:
        return f"OpenAIEmbeddings(url={self.url!r}, model={self._model!r})"

    @property
    def model(self) -> str:
        # The endpoint is part of the name: the same model name served elsewhere may be another model.
        return f"openai:{self.url}#{self._model}"

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.max_inputs):
            rows.extend(await self._request(list(texts[start : start + self.max_inputs])))
        return _unit_rows(rows) if rows else _unit_rows([[0.0]])[:0]

    async def _request(self, texts: list[str]) -> list[list[float]]:
        import httpx2  # here: `connectors --json` loads this module only to name the discovery mode

        endpoint = f"{self.url}/embeddings"
        headers = {"content-type": "application/json"}
        if self._api_key is not None:
            key = self._api_key.reveal()
            if not isinstance(key, str):
                raise EmbeddingsFailed("the embeddings API key must be a single string")
            headers["authorization"] = f"Bearer {key}"
        try:
            response = await self._http.post(
                endpoint, json={"model": self._model, "input": texts}, headers=headers, timeout=self.timeout
            )
        except httpx2.HTTPError as exc:
            # The exception's text may quote the request; only its type is safe to repeat.
            raise EmbeddingsFailed(f"embeddings endpoint {endpoint} unreachable ({type(exc).__name__})") from None
        finally:
            headers.pop("authorization", None)
        if response.status_code != 200:
            raise EmbeddingsFailed(f"embeddings endpoint {endpoint} answered HTTP {response.status_code}")
        try:
            data = response.json()["data"]
            ordered = sorted(data, key=lambda item: int(item["index"]))
            vectors = [[float(x) for x in item["embedding"]] for item in ordered]
        except (ValueError, KeyError, TypeError) as exc:
            problem = type(exc).__name__
            raise EmbeddingsFailed(f"embeddings endpoint {endpoint} sent an unexpected body ({problem})") from None
        if len(vectors) != len(texts) or [int(item["index"]) for item in ordered] != list(range(len(texts))):
            raise EmbeddingsFailed(f"embeddings endpoint {endpoint} sent {len(vectors)} vectors for {len(texts)} texts")
        if any(not vector or not all(math.isfinite(x) for x in vector) for vector in vectors):
            raise EmbeddingsFailed(f"embeddings endpoint {endpoint} sent an empty or non-finite vector")
        return vectors
