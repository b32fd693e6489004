"""Inflater undoes gzip and deflate like httpx2 does, and refuses a stream that stopped before its end."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable, Iterable

import httpx2
import pytest

from mcp_gateway.execution.content_coding import Inflater

TEXT = b'{"rows": [' + b", ".join(b'{"id": %d, "token": "abc"}' % i for i in range(3000)) + b"]}"


def inflate(codings: list[str], chunks: Iterable[bytes]) -> bytes:
    inflater = Inflater(codings)
    out = b"".join(piece for chunk in chunks for piece in inflater.decode(chunk))
    return out + b"".join(inflater.finish())


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("coding", "pack"), [("gzip", gzip.compress), ("deflate", zlib.compress), ("deflate", raw_deflate)]
)
@pytest.mark.parametrize("size", [1, 7, 4096, 1 << 20])
def test_a_whole_stream_is_read_whole_in_any_chunking(coding: str, pack: Callable[[bytes], bytes], size: int) -> None:
    assert inflate([coding], pieces(pack(TEXT), size)) == TEXT


@pytest.mark.parametrize(("coding", "pack"), [("gzip", gzip.compress), ("deflate", zlib.compress)])
@pytest.mark.parametrize("kept", [0.2, 0.6, 0.99])
def test_a_stream_cut_before_its_end_is_a_decoding_error(
    coding: str, pack: Callable[[bytes], bytes], kept: float
) -> None:
    packed = pack(TEXT)
    cut = packed[: int(len(packed) * kept)]
    inflater = Inflater([coding])
    read = b"".join(piece for chunk in pieces(cut, 1000) for piece in inflater.decode(chunk))
    assert TEXT.startswith(read)  # what came is handed on as it comes; only the end says it is broken
    with pytest.raises(httpx2.DecodingError, match="stopped before its end"):
        b"".join(inflater.finish())


def test_a_gzip_cut_in_its_trailer_is_cut_too() -> None:
    # All the text came; the checksum and length that prove it did not.
    with pytest.raises(httpx2.DecodingError):
        inflate(["gzip"], [gzip.compress(TEXT)[:-4]])


def test_an_empty_body_has_no_stream_to_end() -> None:
    assert inflate(["gzip"], []) == b"" and inflate(["deflate"], [b""]) == b""


def test_members_are_read_one_after_another_and_trailing_bytes_dropped() -> None:
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    for size in (1, 3, 1000):
        assert inflate(["gzip"], pieces(two, size)) == b"first second"
    assert inflate(["gzip"], [gzip.compress(b"body") + b"\n"]) == b"body"
    assert inflate(["gzip"], [gzip.compress(b"body") + b"\x00\x00\x00junk"]) == b"body"
    assert inflate(["deflate"], [zlib.compress(b"body") + b"junk"]) == b"body"
    with pytest.raises(httpx2.DecodingError):  # a second member begun and cut
        inflate(["gzip"], [two[:-10]])


def test_codings_are_undone_in_reverse_order_and_each_must_end() -> None:
    twice = zlib.compress(gzip.compress(TEXT))
    assert inflate(["gzip", "identity", "deflate"], [twice]) == TEXT
    with pytest.raises(httpx2.DecodingError):
        inflate(["gzip", "deflate"], [zlib.compress(gzip.compress(TEXT)[:-20])])


def test_garbage_is_a_decoding_error() -> None:
    with pytest.raises(httpx2.DecodingError, match="corrupt"):
        inflate(["gzip"], [b"not gzip at all"])


def test_a_bomb_is_inflated_only_as_far_as_it_is_read() -> None:
    bomb = gzip.compress(b"\0" * (64 << 20))
    first = next(Inflater(["gzip"]).decode(bomb))
    assert 0 < len(first) <= 64 * 1024
