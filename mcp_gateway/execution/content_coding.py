"""Undo an answer's gzip and deflate content codings, and tell a stream that ended from one cut short.

httpx2's gzip and deflate decoders hand on whatever a stream gave when its bytes run out, end marker
or not. A compressed body cut inside a ``Content-Length`` that matches the cut (a proxy dropping the
rest, a server crashing while it streams) then reads as a complete, shorter answer: a fifth of a list
reported as the whole, or the start of an echoed secret at its end with nothing marking the cut. A
plain body shorter than its ``Content-Length`` is a broken exchange; ``Inflater`` makes a compressed
stream without its end the same (``httpx2.DecodingError``, which ``send`` reports as a broken
exchange).

Each piece it yields is at most ``_PIECE`` bytes, and pieces are made only as they are asked for, so
a small bomb costs what the reader takes of it, never what it would inflate to.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterable, Iterator, Sequence

import httpx2

__all__ = ["INFLATED_CODINGS", "Inflater"]

INFLATED_CODINGS = frozenset({"gzip", "deflate", "identity"})
"""The codings ``Inflater`` undoes (identity: nothing to undo); an answer with any other goes through httpx2."""

_PIECE = 64 * 1024
_GZIP_MAGIC = b"\x1f\x8b"


class Inflater:
    """The decoder for an answer whose ``Content-Encoding`` lists ``codings`` (in the order applied,
    each in ``INFLATED_CODINGS``): ``decode`` each raw chunk, then ``finish`` once the body has ended."""

    def __init__(self, codings: Sequence[str]) -> None:
        self._stages = [_Stage(coding) for coding in reversed(codings) if coding != "identity"]

    def decode(self, data: bytes) -> Iterator[bytes]:
        pieces: Iterable[bytes] = (data,)
        for stage in self._stages:
            pieces = stage.pipe(pieces)
        yield from pieces

    def finish(self) -> Iterator[bytes]:
        """What each stage still holds, through the stages after it.

        Raises:
            httpx2.DecodingError: a stage was given bytes and its stream never reached its end.
        """
        pieces: Iterable[bytes] = ()
        for stage in self._stages:
            pieces = itertools.chain(stage.pipe(pieces), stage.finish())
        yield from pieces


class _Stage:
    """One gzip or deflate layer."""

    def __init__(self, coding: str) -> None:
        self._coding = coding
        # deflate is meant to be zlib-wrapped, but servers send it raw too: the first bytes decide.
        self._stream = zlib.decompressobj(zlib.MAX_WBITS | 16 if coding == "gzip" else zlib.MAX_WBITS)
        self._started = False
        self._ended = False
        """The stream reached its end; later bytes may begin another gzip member (``cat a.gz b.gz``)."""
        self._head = b""
        """The first bytes after an end, until there are enough to tell a member from trailing bytes."""
        self._ignoring = False
        """Bytes after the end that begin no member: no part of the body (httpx2 drops them too)."""

    def pipe(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            yield from self._decode(chunk)

    def _decode(self, data: bytes) -> Iterator[bytes]:
        if not data or self._ignoring:
            return
        first = not self._started
        self._started = True
        if first and self._coding == "deflate":
            # zlib tells its header from raw deflate by the first two bytes: wait for both.
            data = self._head + data
            if len(data) < 2:
                self._head = data
                self._started = False
                return
            self._head = b""
        while True:  # until the stream wants more input: output can wait with all input taken
            if self._ended:
                if not data:
                    return
                data = self._head + data
                if len(data) < len(_GZIP_MAGIC):
                    self._head = data
                    return
                self._head = b""
                if self._coding != "gzip" or not data.startswith(_GZIP_MAGIC):
                    self._ignoring = True
                    return
                self._stream = zlib.decompressobj(zlib.MAX_WBITS | 16)
                self._ended = False
            try:
                piece = self._stream.decompress(data, _PIECE)
            except zlib.error as exc:
                if first and self._coding == "deflate":
                    first = False
                    self._stream = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise httpx2.DecodingError(f"{self._coding} body is corrupt ({exc})") from None
            first = False
            if piece:
                yield piece
            if self._stream.eof:
                self._ended = True
                data = self._stream.unused_data
            else:
                data = self._stream.unconsumed_tail
                if not piece and not data:
                    return

    def finish(self) -> Iterator[bytes]:
        if self._head and not self._started:
            raise httpx2.DecodingError(f"the {self._coding} stream of the body stopped before its end")
        if not self._started or self._ended or self._ignoring:
            return  # an empty body (a HEAD, a 204) has no stream to end
        try:
            rest = self._stream.flush()
        except zlib.error as exc:
            raise httpx2.DecodingError(f"{self._coding} body is corrupt ({exc})") from None
        if rest:
            yield rest
        if not self._stream.eof:
            raise httpx2.DecodingError(f"the {self._coding} stream of the body stopped before its end")
