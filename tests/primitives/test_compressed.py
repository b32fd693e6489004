"""``primitives.compressed``: what a compressed body unpacks to, bounded."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import random
import zipfile
import zlib

import pytest

from mcp_gateway.primitives.compressed import MAX_UNPACKED, compressed_content

TEXT = b"echo: Bearer canary-compressed-0451\n" * 3


def _zip(*members: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for at, member in enumerate(members):
            archive.writestr(f"m{at}.txt", member)
    return out.getvalue()


@pytest.mark.parametrize(
    "packed",
    [gzip.compress(TEXT), zlib.compress(TEXT), bz2.compress(TEXT), lzma.compress(TEXT), _zip(b"first\n", TEXT)],
    ids=["gzip", "zlib", "bzip2", "xz", "zip"],
)
def test_each_kind_unpacks_to_what_it_holds(packed: bytes) -> None:
    assert TEXT in compressed_content(packed)


def test_a_bomb_unpacks_no_further_than_the_cap() -> None:
    bomb = gzip.compress(bytes(64 * 1024 * 1024))  # 64 MiB of zeros in ~64 KB
    assert len(compressed_content(bomb)) == MAX_UNPACKED
    assert len(compressed_content(_zip(bytes(MAX_UNPACKED), TEXT))) == MAX_UNPACKED


def test_anything_else_unpacks_to_nothing() -> None:
    noise = random.Random(0).randbytes(4096)  # fixed: some random bytes begin like a zlib stream
    for body in (b"", TEXT, noise, b"\x1f\x8b" + noise[:100], b"PK\x03\x04" + noise[:100]):
        assert compressed_content(body) == b""


@pytest.mark.parametrize(
    "packed",
    [
        gzip.compress(b"first member\n") + gzip.compress(TEXT),  # `cat a.gz b.gz`: one body gunzip reads whole
        bz2.compress(b"one\n") + bz2.compress(TEXT),
        lzma.compress(b"one\n") + lzma.compress(TEXT),
        _zip(b"first\n", gzip.compress(TEXT)),  # a .gz inside a zip
        lzma.compress(bz2.compress(TEXT)),  # xz around bzip2
        gzip.compress(gzip.compress(gzip.compress(TEXT))),
    ],
    # Named, not shown: a gzip header holds the second it was made, and two workers collecting a
    # second apart would see two different test lists (pytest-xdist then runs nothing).
    ids=["gzip-members", "bzip2-members", "xz-members", "gz-in-zip", "xz-around-bzip2", "gzip-thrice"],
)
def test_every_member_and_every_layer_is_unpacked(packed: bytes) -> None:
    assert TEXT in compressed_content(packed)


def test_layers_and_members_share_one_cap() -> None:
    bomb = zlib.compress(b"\0" * (MAX_UNPACKED + 10))
    nested = gzip.compress(bomb) * 3
    assert len(compressed_content(nested)) == MAX_UNPACKED
    deep = TEXT
    for _ in range(8):
        deep = gzip.compress(deep)
    assert TEXT not in compressed_content(deep)  # past the last layer looked into: a bound, not a promise
