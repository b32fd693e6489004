"""Built segments kept in the state folder: a start on an unchanged catalog reads its index back.

Building a segment (tokenizing, stemming and weighting every action) is most of a warm
``mcp-gateway discover`` from the command line, where reading
the same segment back with ``marshal`` costs a small fraction of that. A segment depends only on the connector's
actions and on the code that analyzes them, so its file is keyed by the catalog's fingerprint
(which the store already trusts to stand for the actions: an unchanged fingerprint is how a sync
reuses the stored catalog, see ``core/sync.py``) and by a digest of that code and of Python's
version (``marshal``'s format is Python's own). One file per connector, replaced whenever its key
changes; anything unreadable or not matching is ignored and the segment is built as before.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import os
import sys
from array import array
from collections.abc import Iterable, Sequence
from contextlib import suppress
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from ..vocabulary.model import Action
from . import _effects, _rest_shape, _segment, _text
from ._segment import Segment

__all__ = ["SegmentCache", "code_digest", "keep"]

logger = logging.getLogger(__name__)

_FORMAT = 1


def code_digest(tag: str, modules: Iterable[ModuleType]) -> str:
    """A digest of the source of ``modules`` and of Python's version (``marshal``'s format is Python's own)."""
    digest = hashlib.sha256(f"{tag}\0{sys.version}".encode())
    for module in modules:
        digest.update(Path(module.__file__ or "").read_bytes())
    return digest.hexdigest()


def keep(path: Path, data: Any, what: str) -> None:
    """Write ``data`` with ``marshal`` to ``path`` (its folder made private if absent), whole or not
    at all; a failure only costs the next start the work the file would have saved."""
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial.write_bytes(marshal.dumps(data))
        os.replace(partial, path)  # a reader sees the old file or the new one, never half of one
    except OSError as exc:
        logger.debug("could not keep %s: %s", what, exc)
        with suppress(OSError):
            partial.unlink(missing_ok=True)


@cache
def _code_digest() -> str:
    """What a segment's content depends on besides the actions: the analyzing code and the Python version."""
    return code_digest(str(_FORMAT), (_segment, _text, _effects, _rest_shape))


@cache
def card_version() -> str:
    """What an action's embedded texts (``_segment.dense_texts``) depend on besides the action: its code."""
    return code_digest("cards-1", (_segment, _text, _effects))


class SegmentCache:
    """Segments built earlier, one file per connector under ``directory`` (created on first write)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, slug: str) -> Path:
        return self.directory / f"{hashlib.sha256(slug.encode()).hexdigest()[:32]}.seg"

    def _key(self, slug: str, fingerprint: str) -> str:
        return f"{_code_digest()}:{slug}:{fingerprint}"

    def load(
        self, slug: str, fingerprint: str, start: int, actions: Sequence[Action], *, lazy: bool = False
    ) -> Segment | None:
        """The segment stored for this catalog, its ids starting at ``start``; None when there is none
        (or it was built from other actions or by other code). ``lazy``: ``actions`` decodes each
        action on first use and checks it against the segment's paths (``Segment.by_path``); it is
        kept as given and only its length is compared here. Else it is copied into a tuple and every
        action's path compared."""
        try:
            data = marshal.loads(self._path(slug).read_bytes())
            key, by_path, by_folded, spans, ids, weights, names, exact, name_col, params, about, returns = data
        except (OSError, ValueError, EOFError, TypeError):
            return None  # absent, or not a file this code wrote
        # A last check that it indexes these very actions, in this order (cheap beside the build).
        if key != self._key(slug, fingerprint):
            return None
        if lazy:
            if len(by_path) != len(actions):
                return None
        else:
            actions = tuple(actions)
            if list(by_path) != [a.path for a in actions]:
                return None
        doc_ids: array[int] = array("I")
        doc_ids.frombytes(ids)
        if start:
            doc_ids = array("I", [doc_id + start for doc_id in doc_ids])
        weight_column: array[float] = array("f")
        weight_column.frombytes(weights)
        return Segment(
            slug=slug,
            start=start,
            actions=actions,
            by_path=by_path,
            by_folded=by_folded,
            spans=spans,
            doc_ids=doc_ids,
            weights=weight_column,
            name_terms=names,
            exact=exact,
            names=name_col,
            params=params,
            about=about,
            returns=returns,
        )

    def save(self, segment: Segment, fingerprint: str) -> None:
        """Keep ``segment`` for the next start; a failure to write only costs that start a build."""
        ids = segment.doc_ids
        if segment.start:
            ids = array("I", [doc_id - segment.start for doc_id in ids])
        data = (
            self._key(segment.slug, fingerprint),
            segment.by_path,
            segment.by_folded,
            segment.spans,
            ids.tobytes(),
            segment.weights.tobytes(),
            segment.name_terms,
            segment.exact,
            segment.names,
            segment.params,
            segment.about,
            segment.returns,
        )
        keep(self._path(segment.slug), data, f"the discovery index of {segment.slug}")
