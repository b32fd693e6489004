"""A stored catalog's JSON, one action a line: a reader can decode the few actions it needs.

A catalog row holds its actions as one JSON array (zlib-compressed, ``_rows.encode_actions``). It is
written with a line break before each element: still the same JSON array to every JSON decoder, but
since compact JSON never holds a raw line break (it escapes them inside strings), the array splits
into its actions without being parsed. ``mcp-gateway discover`` from the command line
(``cli/stored_discover.py``) uses that: it ranks with the discovery index kept for the catalog, which
needs only the actions' names, and decodes just the few dozen candidates the ranking reads, not
the whole catalog (decoding and validating every action is the cost this avoids).

A row written before this layout is not split (``ActionLines.read`` answers None): the reader then
decodes the whole array as before. ``sources/_fingerprint.NORMALIZER_VERSION`` 4 makes the first sync
of an upgraded installation store every catalog anew, in this layout.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from typing import overload

from ..vocabulary.model import Action

__all__ = ["ActionLines", "encode_lines"]

_OPEN, _SEPARATOR, _CLOSE = b"[\n", b",\n", b"\n]"


def encode_lines(actions: Iterable[Action]) -> bytes:
    """The actions as one JSON array, each element on a line of its own."""
    lines = [action.model_dump_json().encode() for action in actions]
    return _OPEN + _SEPARATOR.join(lines) + _CLOSE if lines else b"[]"


class ActionLines(Sequence[Action]):
    """The actions of one stored catalog, each decoded on first use and checked against the connector
    and the path the reader expects at its place (``expect``). Raises ``ValueError`` when a line does
    not decode to that action, or is read before ``expect``."""

    def __init__(self, raw: bytes, starts: list[int], connector: str) -> None:
        self._raw = raw
        self._starts = starts
        self._decoded: list[Action | None] = [None] * len(starts)
        self._paths: Sequence[str] | None = None
        self.connector = connector

    @classmethod
    def read(cls, blob: bytes, connector: str) -> ActionLines | None:
        """The actions of a catalog row's ``actions`` column; None when the row is not in the line
        layout (written by an earlier build)."""
        raw = zlib.decompress(blob)
        if raw == b"[]":
            return cls(raw, [], connector)
        if not (raw.startswith(_OPEN) and raw.endswith(_CLOSE)):
            return None
        # No line break is inside an element: each one before the last starts a line, an element.
        starts: list[int] = []
        at = raw.find(b"\n")
        while at >= 0:
            starts.append(at)
            at = raw.find(b"\n", at + 1)
        return cls(raw, starts[:-1], connector)

    def expect(self, paths: Sequence[str]) -> None:
        """The path of every action, in order, as the reader knows them (a kept index built from
        these very actions): each action decoded is checked against its own."""
        if len(paths) != len(self._starts):
            raise ValueError(f"{len(paths)} paths for the {len(self._starts)} stored actions of {self.connector}")
        self._paths = paths

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
            if self._paths is None:
                raise ValueError("the actions' paths are not known yet: call expect() first")
            action = Action.model_validate_json(self._line(index))
            if action.connector != self.connector or action.path != self._paths[index]:
                raise ValueError(f"a stored action of {self.connector} is not the one its place expects")
            self._decoded[index] = action
        return action

    @property
    def decoded(self) -> int:
        """How many actions were decoded so far (a reader that ranks decodes only a few)."""
        return sum(1 for action in self._decoded if action is not None)
