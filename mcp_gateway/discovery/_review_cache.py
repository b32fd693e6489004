"""The hidden-text scan's answers kept in the state folder: a start on an unchanged catalog reads them back.

Every start reviews every connector (``review.review``): for a spec the operator wrote or pinned,
that is a scan of every action's text for hidden characters, a noticeable part of a warm
``mcp-gateway discover`` on a large catalog, where reading the answer back is nearly free. The
answer depends only on the connector's actions and on the code that scans them, so, as for the
discovery index (``_segment_cache``), its file is keyed by the catalog's fingerprint and by a digest
of that code. Only the names and reasons of the flagged actions are kept (data, ``marshal``); their
findings are rebuilt from the actions themselves, so a hit answers exactly what a scan would.
Anything unreadable or not matching is ignored and the catalog is scanned as before.
"""

from __future__ import annotations

import hashlib
import marshal
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from ..policy import review
from ..policy.review import Finding, Scan, flagged, hidden_text
from ..primitives import sanitize
from ..vocabulary import model
from ..vocabulary.model import Action
from ._segment_cache import code_digest, keep

__all__ = ["ReviewCache"]

_FORMAT = 1


@cache
def _code_digest() -> str:
    return code_digest(f"review-{_FORMAT}", (review, sanitize, model))


class ReviewCache:
    """Hidden-text findings found earlier, one file per connector under ``directory`` (created on first write)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def scan(self, slug: str, fingerprint: str | None) -> Scan:
        """``hidden_text`` for the catalog of ``slug`` with ``fingerprint``, answered from the file
        kept for it when there is one (None: a catalog without a fingerprint, always scanned)."""
        if fingerprint is None:
            return hidden_text

        def scan(actions: Sequence[Action]) -> list[Finding]:
            kept = self.load(slug, fingerprint, actions)
            if kept is not None:
                return kept
            findings = hidden_text(actions)
            self.save(slug, fingerprint, len(actions), findings)
            return findings

        return scan

    def _path(self, slug: str) -> Path:
        return self.directory / f"{hashlib.sha256(slug.encode()).hexdigest()[:32]}.review"

    def _key(self, slug: str, fingerprint: str) -> str:
        return f"{_code_digest()}:{slug}:{fingerprint}"

    def load(self, slug: str, fingerprint: str, actions: Sequence[Action]) -> list[Finding] | None:
        """The findings kept for this catalog, rebuilt from ``actions``; None when there are none
        (or they were found in other actions or by other code)."""
        flags_by_name = self.held(slug, fingerprint, len(actions))
        if flags_by_name is None:
            return None
        if not flags_by_name:
            return []  # the usual case: nothing hides text
        found = [flagged(a, flags_by_name[a.qualified_name]) for a in actions if a.qualified_name in flags_by_name]
        findings = [f for f in found if f is not None]
        return findings if len(findings) == len(flags_by_name) else None

    def held(self, slug: str, fingerprint: str, count: int) -> dict[str, tuple[str, ...]] | None:
        """The names of the actions found hiding text in this catalog of ``count`` actions, with the
        reasons, read without the actions; None when nothing is kept for it."""
        try:
            key, kept_count, held = marshal.loads(self._path(slug).read_bytes())
            flags_by_name = {str(name): tuple(map(str, flags)) for name, flags in held}
        except (OSError, ValueError, EOFError, TypeError):
            return None  # absent, or not a file this code wrote
        if key != self._key(slug, fingerprint) or kept_count != count:
            return None
        return flags_by_name

    def save(self, slug: str, fingerprint: str, count: int, findings: Sequence[Finding]) -> None:
        """Keep ``findings`` (of ``count`` actions) for the next start; a failure to write only costs it a scan."""
        data = (self._key(slug, fingerprint), count, [(f.name, list(f.flags)) for f in findings])
        keep(self._path(slug), data, f"the review scan of {slug}")
