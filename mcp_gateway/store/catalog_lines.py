"""A stored catalog's JSON, one action a line: a reader can decode the few actions it needs.

A catalog row holds its actions as one JSON array (zlib-compressed, ``_rows.encode_actions``). It is
written with a line break before each element: still the same JSON array to every JSON decoder, but
since compact JSON never holds a raw line break (it escapes them inside strings), the array splits
into its actions without being parsed. ``mcp-gateway discover`` from the command line
(``cli/stored_discover.py``) uses that: it ranks with the discovery index kept for the catalog, which
needs only the actions' names, and decodes just the actions it shows (GitHub's whole catalog: ~45 ms
of JSON and ~60 ms of validation; its ten hits: well under a millisecond each).

A row written before this layout is not split (``ActionLines.read`` answers None): the reader then
decodes the whole array as before.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Sequence
from typing import overload

from ..model import Action

__all__ = ["ActionLines", "encode_lines"]

_OPEN, _SEPARATOR, _CLOSE = b"[\n", b",\n", b"\n]"

# The start of every line: pydantic writes a model's fields in their declared order, ``connector`` and
# ``path`` first. Only names without escapes are read this way (a slug never has one; a path with a
# quote or a backslash makes ``read`` hand the row back).
_LINE = re.compile(rb'\n\{"connector":"([^"\\]*)","path":"([^"\\]*)"')


def encode_lines(actions: Iterable[Action]) -> bytes:
    """The actions as one JSON array, each element on a line of its own."""
    lines = [action.model_dump_json().encode() for action in actions]
    return _OPEN + _SEPARATOR.join(lines) + _CLOSE if lines else b"[]"


class ActionLines(Sequence[Action]):
    """The actions of one stored catalog, each decoded (and checked against its line's connector and
    path) on first use. Raises ``ValueError`` when a line does not decode to the action it names."""

    def __init__(self, raw: bytes, starts: list[int], connector: str, paths: list[str]) -> None:
        self._raw = raw
        self._starts = starts
        self._decoded: list[Action | None] = [None] * len(starts)
        self.connector = connector
        self.paths = paths
        """Every action's path, in order, read without decoding the actions."""

    @classmethod
    def read(cls, blob: bytes, connector: str) -> ActionLines | None:
        """The actions of a catalog row's ``actions`` column; None when the row is not in the line
        layout (written by an earlier build), or a line is not an action of ``connector`` whose
        path reads without escapes."""
        raw = zlib.decompress(blob)
        if raw == b"[]":
            return cls(raw, [], connector, [])
        if not (raw.startswith(_OPEN) and raw.endswith(_CLOSE)):
            return None
        # One pass in C over the whole text; no line break is inside an element, so every line but
        # the array's own two is an element, and each must start as _LINE reads it.
        heads = [(m.start(), m[1], m[2]) for m in _LINE.finditer(raw)]
        slug = connector.encode()
        if len(heads) != raw.count(b"\n") - 1 or any(c != slug for _, c, _ in heads):
            return None
        return cls(raw, [start for start, _, _ in heads], connector, [path.decode() for _, _, path in heads])

    def _line(self, index: int) -> bytes:
        start = self._starts[index] + 1  # past the line break
        end = self._starts[index + 1] - 1 if index + 1 < len(self._starts) else len(self._raw) - len(_CLOSE)
        return self._raw[start:end]  # without the comma that ends every line but the last

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> Action: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Action]: ...

    def __getitem__(self, index: int | slice) -> Action | Sequence[Action]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        action = self._decoded[index]
        if action is None:
            action = Action.model_validate_json(self._line(index))
            if action.connector != self.connector or action.path != self.paths[index]:
                raise ValueError(f"a stored action of {self.connector} does not match its line")
            self._decoded[index] = action
        return action

    @property
    def decoded(self) -> int:
        """How many actions were decoded so far (a reader that ranks decodes only a few)."""
        return sum(1 for action in self._decoded if action is not None)
