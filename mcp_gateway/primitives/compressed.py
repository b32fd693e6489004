"""What a compressed body unpacks to, bounded: for looking inside it, never for handing it on.

An upstream that answers ``application/gzip`` (or a zip archive, or bzip2, xz) passes every byte it
holds through compression, so a secret it echoes inside is none of the forms the redactor knows. The
call path looks at what the body unpacks to and withholds a body that holds one. Unpacking is capped
(``MAX_UNPACKED``), so a small bomb cannot make the gateway inflate gigabytes; a secret past the cap
is not seen, as in any body past the response cap.
"""

from __future__ import annotations

import bz2
import io
import lzma
import zipfile
import zlib
from collections.abc import Callable
from typing import Protocol

__all__ = ["MAX_LAYERS", "MAX_UNPACKED", "compressed_content"]

MAX_UNPACKED = 8 * 1024 * 1024
"""At most this many bytes are unpacked from one body (all members of an archive together)."""

_MAX_MEMBERS = 256
"""At most this many members of a zip archive, or of a gzip, bzip2 or xz stream, are read."""

MAX_LAYERS = 4
"""At most this many compressed layers, one inside another, are unpacked."""


def compressed_content(body: bytes, *, budget: int = MAX_UNPACKED, layers: int = MAX_LAYERS) -> bytes:
    """What ``body`` unpacks to when it is gzip, zlib, bzip2, xz or a zip archive (every member of a
    stream of several, the archive's members one after another), and what each compressed layer inside
    unpacks to in turn (a ``.gz`` in a zip, xz around bzip2; ``layers`` deep), all of it one after
    another, up to ``budget`` bytes; ``b""`` when it is none of them or unreadable from the start."""
    out = bytearray()
    layer = body
    for depth in range(layers):
        if layer.startswith(b"PK\x03\x04"):
            # An archive's members are unpacked each on its own, the layers inside them too.
            out += _zip_members(layer, budget - len(out), layers - depth - 1)
            break
        unpacked = _unpacked(layer, budget - len(out))
        if not unpacked:
            break
        out += unpacked
        if len(out) >= budget:
            break
        layer = unpacked
    return bytes(out[:budget])


def _unpacked(body: bytes, budget: int) -> bytes:
    """One layer of a gzip, zlib, bzip2 or xz stream (every member); ``b""`` for anything else."""
    if budget <= 0:
        return b""
    if body.startswith(b"\x1f\x8b"):
        return _members(lambda: zlib.decompressobj(wbits=31), body, budget)
    if len(body) >= 2 and body[0] & 0x0F == 8 and int.from_bytes(body[:2], "big") % 31 == 0:
        return _members(zlib.decompressobj, body, budget)  # a zlib header: deflate, its check bits
    if body.startswith(b"BZh"):
        return _members(bz2.BZ2Decompressor, body, budget)
    if body.startswith(b"\xfd7zXZ\x00"):
        return _members(lzma.LZMADecompressor, body, budget)
    return b""


class _Decompressor(Protocol):
    @property
    def unused_data(self) -> bytes: ...
    def decompress(self, data: bytes, max_length: int, /) -> bytes: ...


def _members(start: Callable[[], _Decompressor], body: bytes, budget: int) -> bytes:
    """Every member of a stream of several (``cat a.gz b.gz`` is one gzip body ``gunzip`` reads whole)."""
    out = bytearray()
    rest = body
    for _ in range(_MAX_MEMBERS):
        decompressor = start()
        try:
            out += decompressor.decompress(rest, budget - len(out))
        except (zlib.error, OSError, EOFError, ValueError, lzma.LZMAError):
            break
        rest = decompressor.unused_data
        if not rest or len(out) >= budget:
            break
    return bytes(out)


def _zip_members(body: bytes, budget: int, layers: int) -> bytes:
    out = bytearray()
    try:
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            for member in archive.infolist()[:_MAX_MEMBERS]:
                if len(out) >= budget:
                    break
                try:
                    with archive.open(member) as packed:
                        content = packed.read(budget - len(out))
                    out += content
                    if layers > 0:  # a member compressed in turn (a .gz in the archive)
                        out += compressed_content(content, budget=budget - len(out), layers=layers)
                except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, EOFError, zlib.error):
                    continue  # an encrypted member, or a compression method this Python lacks
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        pass
    return bytes(out)
