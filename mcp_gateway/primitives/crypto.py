"""Encryption at rest for stored credentials, and where the master key comes from.

Threat model: the state database (or a backup of it) leaks, or someone edits it. A leaked
database must not reveal a secret, and an edited row must not decrypt, nor may a sealed value
be moved to another project, connector, principal or name and still open there. So every
credential is sealed with AES-256-GCM under a key derived from the master key and bound to
the project (HKDF info), and its (project, connector, principal, name) go into the associated
data (``credential_aad``). The master key itself lives outside the database: in
``$MCP_GATEWAY_MASTER_KEY`` or in a 0600 file next to it.

Sealed format, version 1::

    0x01 | key id (8 bytes) | nonce (12 bytes) | ciphertext + GCM tag (16 bytes)

The key id is a truncated SHA-256 of the derived key: not secret, and enough for ``rotate`` and
error messages to tell which key sealed a value. The version byte and key id are bound into the
associated data, so a value cannot be replayed as another format version or under another id.

Errors never carry key material or plaintext, and the crypto library's exceptions are cut
(``from None``): its messages are not written for the operator and its tracebacks are noise.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..vocabulary.errors import CredentialError

__all__ = [
    "KEY_ENV_VAR",
    "KEY_FILE_NAME",
    "AESGCMCipher",
    "Cipher",
    "credential_aad",
    "derive_key",
    "load_master_key",
    "parse_master_key",
]

KEY_ENV_VAR = "MCP_GATEWAY_MASTER_KEY"
KEY_FILE_NAME = "master.key"
MIN_KEY_BYTES = 32
MAKE_KEY_HINT = 'make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'

_VERSION = b"\x01"
_KID_LEN = 8
_NONCE_LEN = 12
_TAG_LEN = 16
_HEADER_LEN = len(_VERSION) + _KID_LEN + _NONCE_LEN
_KDF_INFO = b"mcp-gateway/v1/project:"
_KID_LABEL = b"mcp-gateway/v1/kid:"
_AAD_LABEL = "mcp-gateway/credential/v1"


class Cipher(Protocol):
    """Authenticated encryption for values at rest.

    Laws: ``open(seal(p, aad=a), aad=a) == p``; ``open`` raises ``CredentialError`` for any
    value it did not seal unmodified under the same ``aad`` (tampered, truncated, another key,
    another binding). Its messages never contain key material or plaintext.
    """

    def seal(self, plaintext: bytes, *, aad: bytes) -> bytes: ...

    def open(self, sealed: bytes, *, aad: bytes) -> bytes: ...


class AESGCMCipher:
    """AES-256-GCM under a key derived with HKDF-SHA256 from the master key, bound to one project.

    Args:
        master_key: at least 32 bytes of secret randomness (``load_master_key`` finds it).
        project: the manifest's project; a value sealed for one project never opens in another.

    Raises:
        TypeError: ``master_key`` is not ``bytes``/``bytearray``.
        CredentialError: ``master_key`` is shorter than 32 bytes.
    """

    __slots__ = ("_aead", "_kid", "_project")

    def __init__(self, master_key: bytes, *, project: str) -> None:
        if not isinstance(master_key, bytes | bytearray):
            # Never coerce: bytes(32) would silently build an all-zero key, str() a guessable one.
            raise TypeError(f"the master key must be bytes, not {type(master_key).__name__}")
        if len(master_key) < MIN_KEY_BYTES:
            raise CredentialError(
                f"the master key is {len(master_key)} bytes; it must be at least {MIN_KEY_BYTES} bytes "
                f"of secret randomness ({MAKE_KEY_HINT})"
            )
        info = _KDF_INFO + project.encode("utf-8", "surrogatepass")
        derived = HKDF(algorithm=SHA256(), length=32, salt=None, info=info).derive(bytes(master_key))
        self._aead = AESGCM(derived)
        self._kid = hashlib.sha256(_KID_LABEL + derived).digest()[:_KID_LEN]
        self._project = project

    @property
    def key_id(self) -> str:
        """The non-secret fingerprint of the derived key, as hex (what sealed values carry)."""
        return self._kid.hex()

    @staticmethod
    def key_id_of(sealed: bytes) -> str | None:
        """The key id a sealed value names, or None when it is not a version-1 value."""
        if len(sealed) < _HEADER_LEN or sealed[:1] != _VERSION:
            return None
        return sealed[1 : 1 + _KID_LEN].hex()

    def seal(self, plaintext: bytes, *, aad: bytes) -> bytes:
        header = _VERSION + self._kid
        nonce = os.urandom(_NONCE_LEN)
        return header + nonce + self._aead.encrypt(nonce, plaintext, header + aad)

    def open(self, sealed: bytes, *, aad: bytes) -> bytes:
        if len(sealed) < _HEADER_LEN + _TAG_LEN:
            raise CredentialError("the stored credential is truncated; enter it again with `mcp-gateway secret set`")
        if sealed[:1] != _VERSION:
            raise CredentialError(
                f"the stored credential has unknown format version {sealed[0]}; "
                "it was written by a newer mcp-gateway, or it is corrupt"
            )
        kid = sealed[1 : 1 + _KID_LEN]
        if kid != self._kid:
            raise CredentialError(
                f"the stored credential was sealed under another master key or project (key id {kid.hex()}, "
                f"this key is {self._kid.hex()} for project {self._project!r}); restore that master key, "
                "or enter the credential again with `mcp-gateway secret set`"
            )
        nonce = sealed[1 + _KID_LEN : _HEADER_LEN]
        try:
            return self._aead.decrypt(nonce, sealed[_HEADER_LEN:], sealed[: 1 + _KID_LEN] + aad)
        except InvalidTag:
            raise CredentialError(
                "the stored credential failed authentication: it was modified, or it belongs to another "
                "connector or principal; enter it again with `mcp-gateway secret set`"
            ) from None

    def __repr__(self) -> str:
        return f"AESGCMCipher(project={self._project!r}, key_id={self.key_id!r})"


def credential_aad(project: str, connector: str, principal: str, name: str) -> bytes:
    """The associated data binding a sealed credential to where it belongs.

    A JSON array is unambiguous (``("a:b", "c")`` and ``("a", "b:c")`` encode differently) and
    ASCII-escaped, so any string encodes.
    """
    return json.dumps([_AAD_LABEL, project, connector, principal, name], separators=(",", ":")).encode()


def derive_key(master_key: bytes, purpose: str, project: str) -> bytes:
    """A 32-byte key for one ``purpose`` other than sealing credentials (``"pages"``: the human
    pages' CSRF tokens). HKDF-SHA256 from the master key under a label of its own, bound to the
    project: every instance sharing the master key derives the same key, with no state to share,
    and it never equals the sealing key or another purpose's key."""
    if not purpose.isidentifier():
        raise ValueError(f"a key purpose is a plain word, not {purpose!r}")
    info = f"mcp-gateway/{purpose}/v1:".encode() + project.encode("utf-8", "surrogatepass")
    return HKDF(algorithm=SHA256(), length=32, salt=None, info=info).derive(bytes(master_key))


# -- the master key --------------------------------------------------------------------------

_HEX_RE = re.compile(r"^(?:[0-9a-fA-F]{2})+$")
_B64URL_RE = re.compile(r"^[A-Za-z0-9_-]+={0,2}$")


def parse_master_key(text: str) -> bytes:
    """Turn the text form of a master key into key bytes. The rule, first match wins:

    1. surrounding whitespace is ignored;
    2. hex (even length, only ``0-9a-f``) decoding to >= 32 bytes -> those bytes
       (``secrets.token_hex(32)``);
    3. URL-safe base64 (``A-Z a-z 0-9 - _``, optional ``=`` padding) decoding to >= 32 bytes
       -> those bytes (``secrets.token_urlsafe(32)``);
    4. any other string of >= 32 characters -> its UTF-8 bytes (a long passphrase);
    5. anything shorter is refused.

    The rule is deterministic, so the same text always yields the same key.

    Raises:
        CredentialError: too short; the message says how to make a good key and never echoes it.
    """
    text = text.strip()
    if _HEX_RE.match(text) and len(text) >= 2 * MIN_KEY_BYTES:
        return bytes.fromhex(text)
    if _B64URL_RE.match(text):
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) >= MIN_KEY_BYTES:
            return raw
    if len(text) >= MIN_KEY_BYTES:
        return text.encode("utf-8", "surrogatepass")
    raise CredentialError(
        f"the master key is too short: use at least {MIN_KEY_BYTES} random bytes as hex or URL-safe base64, "
        f"or a passphrase of at least {MIN_KEY_BYTES} characters; {MAKE_KEY_HINT}"
    )


def load_master_key(env: Mapping[str, str], state_dir: Path) -> bytes:
    """The master key: ``$MCP_GATEWAY_MASTER_KEY`` if set and not blank, else ``<state_dir>/master.key``.

    The key file is created on first run (``state_dir`` 0700 if missing, the file 0600, created
    exclusively so it is never world-readable, not even for an instant) holding 32 random bytes
    as URL-safe base64, so ``MCP_GATEWAY_MASTER_KEY=$(cat master.key)`` means the same key. Both
    sources are read with ``parse_master_key``'s rule. A key file readable by group or others is
    refused rather than trusted.

    Raises:
        CredentialError: the key is too short, or the key file is unreadable or too open.
    """
    from_env = env.get(KEY_ENV_VAR)
    if from_env is not None and from_env.strip():
        return parse_master_key(from_env)
    path = state_dir / KEY_FILE_NAME
    if not path.exists():
        _create_key_file(state_dir, path)
    return _read_key_file(path)


def _create_key_file(state_dir: Path, path: Path) -> None:
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    # Write a private temporary file, then link it into place: the key appears whole or not at
    # all, and when two processes start at once the first link wins and both use that key.
    tmp = state_dir / f".{KEY_FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(base64.urlsafe_b64encode(secrets.token_bytes(MIN_KEY_BYTES)).rstrip(b"=") + b"\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process created it first; use theirs
    finally:
        tmp.unlink(missing_ok=True)


def _read_key_file(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise CredentialError(
            f"cannot read the master key file {path}: {exc.strerror}; check its owner and permissions, "
            f"or set ${KEY_ENV_VAR}"
        ) from None
    with os.fdopen(fd, "rb") as f:
        # fstat the descriptor we read, not the path, so the check and the read see the same file.
        mode = os.fstat(f.fileno()).st_mode
        if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CredentialError(
                f"the master key file {path} is accessible by group or others "
                f"(mode {stat.S_IMODE(mode):03o}); run: chmod 600 {path}"
            )
        data = f.read()
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        # Raw key bytes (someone wrote the file by hand): usable as they are if long enough.
        if len(data) >= MIN_KEY_BYTES:
            return data
        raise CredentialError(f"the master key file {path} is too short; {MAKE_KEY_HINT}") from None
    try:
        return parse_master_key(text)
    except CredentialError:
        raise CredentialError(
            f"the master key file {path} holds a key that is too short or empty; {MAKE_KEY_HINT}"
        ) from None
