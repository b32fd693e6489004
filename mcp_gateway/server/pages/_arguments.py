"""The approval page's view of a call's arguments: every one in full, nothing hidden.

Each top-level argument gets a row of its own, so a long first value cannot push the recipient or
the amount out of sight. A value longer than ``FOLD_CHARS`` (or ``FOLD_LINES``) is folded into a
``<details>`` element that shows its start and its length and opens to the whole of it; nothing is
ever cut. Characters a reader would not see, or would see wrongly (bidi overrides, zero-width and
tag characters, other format controls, blank-looking characters, marks drawn over their neighbours),
are shown as escapes (``\\u202e``), marked, and the page warns about them (``sanitize.reveal``); text
holding right-to-left letters is shown in written order, and the page says so. Arguments that were
cut when stored (beyond ``approvals.ARGUMENTS_CHARS``) no longer parse: the view says so, and the page
offers no Approve for what it cannot show.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ...primitives.lookalikes import lookalikes
from ...primitives.redaction import REDACTED
from ...primitives.sanitize import reveal, right_to_left

__all__ = ["FOLD_CHARS", "FOLD_LINES", "ArgumentView", "ArgumentsView", "Shown", "arguments_view", "lookalikes"]

FOLD_CHARS = 600
FOLD_LINES = 12
PREVIEW_CHARS = 160


@dataclass(frozen=True)
class Shown:
    """Text as runs of plain text (False) and escaped hidden characters (True)."""

    runs: tuple[tuple[str, bool], ...]

    @property
    def hidden(self) -> bool:
        return any(marked for _, marked in self.runs)


def _shown(text: str) -> Shown:
    return Shown(tuple(reveal(text)))


@dataclass(frozen=True)
class ArgumentView:
    name: Shown
    value: Shown
    chars: int
    """The length of the value as shown (its JSON)."""
    preview: Shown | None = None
    """The start of a folded value; None when the value is short enough to show open."""


@dataclass(frozen=True)
class ArgumentsView:
    arguments: tuple[ArgumentView, ...]
    whole: Shown | None
    """The arguments as one text when they are not an object of named values (or could not be read)."""
    complete: bool
    """False when the stored text was cut: the page cannot show everything that would run."""
    redacted: int = 0
    """How many values are shown as ``[redacted]`` (under credential-like names the agent chose)."""
    lookalikes: tuple[str, ...] = ()
    """Words that mix letters of different alphabets (``аpple.com``, its first letter Cyrillic), each
    with the letters that are not Latin named: they read as a word they are not."""
    right_to_left: bool = False
    """Whether any name or value holds right-to-left letters, which the page shows in written order
    (``sanitize.right_to_left``) and says so."""

    @property
    def hidden(self) -> bool:
        """Whether any name or value holds characters shown as escapes."""
        parts = [self.whole] if self.whole is not None else []
        parts += [shown for a in self.arguments for shown in (a.name, a.value)]
        return any(p.hidden for p in parts)


def arguments_view(text: str) -> ArgumentsView:
    """The view of an approval's stored ``arguments`` (indented JSON of the redacted arguments)."""
    rtl = right_to_left(text)
    try:
        value: Any = json.loads(text) if text else {}
    except ValueError:
        return ArgumentsView((), _shown(text), complete=False, lookalikes=lookalikes(text), right_to_left=rtl)
    redacted = text.count(f'"{REDACTED}"')
    if not isinstance(value, dict):
        return ArgumentsView(
            (), _shown(text), complete=True, redacted=redacted, lookalikes=lookalikes(text), right_to_left=rtl
        )
    rows = tuple(_row(str(name), item) for name, item in value.items())  # pyright: ignore[reportUnknownVariableType]
    shown = json.dumps(value, ensure_ascii=False)
    return ArgumentsView(rows, None, complete=True, redacted=redacted, lookalikes=lookalikes(shown), right_to_left=rtl)


def _row(name: str, value: Any) -> ArgumentView:
    text = json.dumps(value, indent=2, ensure_ascii=False)
    folded = len(text) > FOLD_CHARS or text.count("\n") >= FOLD_LINES
    preview = _shown(text[:PREVIEW_CHARS].split("\n", 1)[0]) if folded else None
    return ArgumentView(_shown(name), _shown(text), len(text), preview)
