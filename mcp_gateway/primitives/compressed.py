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

__all__ = ["MAX_UNPACKED", "compressed_content"]

MAX_UNPACKED = 8 * 1024 * 1024
"""At most this many bytes are unpacked from one body (all members of an archive together)."""

_MAX_MEMBERS = 256
"""At most this many members of a zip archive are read."""


def compressed_content(body: bytes) -> bytes:
    """What ``body`` unpacks to when it is gzip, zlib, bzip2, xz or a zip archive (the members' contents
    one after another), up to ``MAX_UNPACKED`` bytes; ``b""`` when it is none of them or unreadable
    from the start."""
    if body.startswith(b"PK\x03\x04"):
        return _zip_members(body)
    if body.startswith(b"\x1f\x8b"):
        return _stream(zlib.decompressobj(wbits=31).decompress, body)
    if len(body) >= 2 and body[0] & 0x0F == 8 and int.from_bytes(body[:2], "big") % 31 == 0:
        return _stream(zlib.decompressobj().decompress, body)  # a zlib header: deflate, its check bits
    if body.startswith(b"BZh"):
        return _stream(bz2.BZ2Decompressor().decompress, body)
    if body.startswith(b"\xfd7zXZ\x00"):
        return _stream(lzma.LZMADecompressor().decompress, body)
    return b""


def _stream(decompress: Callable[[bytes, int], bytes], body: bytes) -> bytes:
    try:
        return decompress(body, MAX_UNPACKED)
    except (zlib.error, OSError, EOFError, ValueError, lzma.LZMAError):
        return b""


def _zip_members(body: bytes) -> bytes:
    out = bytearray()
    try:
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            for member in archive.infolist()[:_MAX_MEMBERS]:
                if len(out) >= MAX_UNPACKED:
                    break
                try:
                    with archive.open(member) as packed:
                        out += packed.read(MAX_UNPACKED - len(out))
                except (zipfile.BadZipFile, NotImplementedError, RuntimeError, OSError, EOFError, zlib.error):
                    continue  # an encrypted member, or a compression method this Python lacks
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        pass
    return bytes(out)
