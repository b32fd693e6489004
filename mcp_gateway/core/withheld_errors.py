"""What an upstream answered a call with that its agent was not shown, kept for the operator.

An upstream's error text that reads as instructions to the model is withheld from the agent
(``upstream_text.screen``), and the agent is told that the operator sees it with ``mcp-gateway
review``. ``screen`` notes every text it withholds while a call runs (``noting_withheld``); the call
pipeline hands them here once the call is answered. Each is logged once per action and process,
naming the action and why (never the words: those are the review's), and the latest per action is
kept in the store, where ``review`` (another process, maybe another instance) reads it: the
``KEPT`` most recent actions.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

import anyio

from ..primitives.escapes import escaped
from ..primitives.upstream_text import Screened
from ..store.contract import MetaStore
from ..vocabulary.clock import Clock

__all__ = ["KEPT", "WithheldErrors"]

logger = logging.getLogger(__name__)

KEPT: Final = 50
_META_KEY: Final = "withheld_call_errors"


class WithheldErrors:
    """The operator's copy of call-time error texts withheld from agents, by action."""

    def __init__(self, store: MetaStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock
        self._lock = anyio.Lock()
        self._last: dict[str, str] = {}
        """By action, what this process last kept: the same text again is neither logged nor written."""

    async def note(self, action: str, texts: Sequence[Screened]) -> None:
        """Log and keep what ``action``'s upstream said that its agent was not shown."""
        said = " | ".join(dict.fromkeys(t.for_operator() for t in texts if t.withheld))
        if not said or self._last.get(action) == said:
            return
        if action not in self._last:
            # Why, not what: the words themselves are for the operator's review, not for every reader
            # of the log (an aggregator, a model summarising it).
            reasons = "; ".join(dict.fromkeys(r for t in texts for r in t.reasons if not r.startswith("hides text")))
            logger.warning(
                "%s: the error text its upstream answered was withheld from the agent: it looks like instructions "
                "to the model (%s); `mcp-gateway review` shows it",
                escaped(action),
                reasons,
            )
        self._last[action] = said
        async with self._lock:
            kept = await self._store.get_meta(_META_KEY)
            entries: dict[str, dict[str, str]] = dict(kept) if isinstance(kept, dict) else {}
            entries.pop(action, None)  # re-inserted last: the most recent are the ones kept
            entries[action] = {"said": said, "at": self._clock.now().isoformat()}
            await self._store.set_meta(_META_KEY, dict(list(entries.items())[-KEPT:]))

    async def listed(self) -> dict[str, str]:
        """By action, the latest text withheld from its agent (cleaned, redacted, with its flags)."""
        kept = await self._store.get_meta(_META_KEY)
        if not isinstance(kept, dict):
            return {}
        return {
            str(action): entry["said"]
            for action, entry in sorted(kept.items())
            if isinstance(entry, dict) and isinstance(entry.get("said"), str)
        }
