"""What hybrid discovery needs before any model is loaded: the missing-extra error, and an action text.

- ``EmbeddingsUnavailable`` / ``INSTALL_HINT``: asking for the local model (``MiniLmEncoder``,
  ``providers.local_provider``) without the ``embeddings`` extra fails at once, naming the install
  command (``_require``).
- ``embedded_text``: an action as a sentence (name words, summary, description head, parameter names),
  ``dense.DenseEmbedder``'s default text and the benchmarks'. The gateway embeds the shorter
  ``_segment.dense_texts``.
- ``MiniLmEncoder`` is re-exported from ``_minilm``.

Nothing here imports numpy, tokenizers or onnxruntime until a ``MiniLmEncoder`` is made: a
gateway without the extra never pays for it.
"""

from __future__ import annotations

import re
from typing import Any

from ..vocabulary.errors import GatewayError
from ..vocabulary.model import Action
from ._minilm import MiniLmEncoder
from ._segment import summary_of
from ._text import clean_description

__all__ = ["INSTALL_HINT", "EmbeddingsUnavailable", "MiniLmEncoder", "embedded_text"]

INSTALL_HINT = "python3 -m pip install 'mcp-action-gateway[embeddings]'"
"""One step: the model's files ship inside the package (``discovery/models``); the extra adds onnxruntime & co."""

_IDENT_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_PARAMS = 12


class EmbeddingsUnavailable(GatewayError):
    """Hybrid discovery was asked for but the optional ``embeddings`` dependencies are not installed."""


def embedded_text(action: Action) -> str:
    """What an action's vector is made of: its name's words, summary, description head, parameter names.

    ``"issues create: Create an issue Parameters: owner, repo, title, body"``. The name words come
    first because agents phrase intents after them; the description head is added only when there is
    a separate summary (otherwise the summary already is its first sentence).
    """
    words = " ".join(word for part in action.path.split(".") for word in _IDENT_WORD.findall(part)).lower()
    schema = action.input_schema if isinstance(action.input_schema, dict) else {}
    properties = schema.get("properties")
    params = [str(name) for name in properties][:_PARAMS] if isinstance(properties, dict) else []
    head = clean_description(action.description) if action.summary else ""
    text = f"{words}: {summary_of(action)} {head}".strip()
    return f"{text} Parameters: {', '.join(params)}" if params else text


def _require(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EmbeddingsUnavailable(
            f"hybrid discovery needs the optional embeddings extra ({module} is not installed); "
            f"install it with: {INSTALL_HINT} (from a checkout: python3 -m pip install -e '.[embeddings]'), "
            "or set discovery.mode to 'lexical'"
        ) from exc
