"""The audit trail (SPEC 9): one row per call decision, never a secret, never in the way.

``Auditor.record`` swallows every storage failure (SPEC 2.6): the call it describes has
already been decided, and failing it now would be worse than a missing row. Failures are
counted (``failures``) and logged at WARNING to stderr, so they are visible, not silent.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from .store.base import AuditRecord, Store

__all__ = ["Auditor", "args_preview"]

logger = logging.getLogger(__name__)
PREVIEW_CHARS = 512


def args_preview(args: Any) -> str:
    """A capped, compact rendering of already-redacted arguments."""
    text = json.dumps(args, sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


class Auditor:
    def __init__(self, store: Store) -> None:
        self._store = store
        self.failures = 0

    async def record(self, row: AuditRecord) -> None:
        try:
            await self._store.append_audit(row)
        except Exception as exc:
            self.failures += 1
            logger.warning("audit write failed (%d so far): %s", self.failures, type(exc).__name__)
