"""The credential vault: secrets go in sealed, and come out only at the last meter.

``CredentialVault.sealed`` hands the call path an opaque ``SealedCredential`` (``secrets.py``);
only the auth step that builds the outbound request (``auth.LastMeterAuth``) calls ``.open()`` on
it, and what that yields is a ``SecretValue`` whose repr, str and format say ``[secure]``.

A principal's own credential wins over the project-wide one (principal ``*``), so a team can
share one API key while a user connects their own account.

A value stored through this vault is taught to ``known_secrets`` at once (the plaintext is at hand
there): a row or log line written before any call opens it must not keep it either.
"""

from __future__ import annotations

from ..primitives.crypto import Cipher, credential_aad
from ..primitives.secrets import (
    PROJECT_WIDE,
    CredentialKey,
    SealedCredential,
    SecretValue,
    encode_secret,
    sealed_fingerprint,
)
from ..store.contract import CachedCredentialStore, CredentialStore
from ..vocabulary.errors import CredentialError
from .logs import known_secrets

__all__ = ["CredentialVault"]

_MAX_HANDED = 4096
"""Past this many keys the handed-out credentials are forgotten (far more than a gateway serves)."""


class CredentialVault:
    """Seals credentials into a ``Store`` and finds them again, without ever decrypting.

    Args:
        store: where sealed bytes live.
        cipher: seals and opens; bound to the same ``project``.
        project: the manifest's project, bound into every credential's associated data.
    """

    def __init__(self, store: CredentialStore, cipher: Cipher, *, project: str) -> None:
        self._store = store
        self._cipher = cipher
        self._project = project
        self._keys: dict[tuple[str, str, str, bool], tuple[CredentialKey, ...]] = {}
        self._cached = store if isinstance(store, CachedCredentialStore) else None
        self._handed: dict[CredentialKey, tuple[bytes, Cipher, SealedCredential]] = {}
        """The ``SealedCredential`` last handed out per key, with the bytes and cipher it holds: a
        call gets the same object again while the store returns the same bytes (binding the
        associated data anew each call was a measurable part of a call's cost)."""

    async def put(
        self, connector: str, value: str | dict[str, str], *, principal: str = PROJECT_WIDE, name: str = "default"
    ) -> str:
        """Seal and store ``value`` (replacing any previous one under the same key); the fingerprint of
        what was stored (``SealedCredential.fingerprint``: a digest of the sealed bytes, never of the value)."""
        key = CredentialKey(connector=connector, principal=principal, name=name)
        sealed = self._seal(key, encode_secret(value))
        await self._store.put_credential(key, sealed)
        known_secrets().add(SecretValue(value))
        return sealed_fingerprint(sealed)

    async def sealed(
        self, connector: str, *, principal: str, name: str = "default", own_only: bool = False
    ) -> SealedCredential | None:
        """The principal's own credential, else (unless ``own_only``) the project-wide one, else None.
        Decrypts nothing."""
        keys = self._keys_for(connector, principal, name, own_only)
        if self._cached is not None:
            found = self._cached.cached_credential(keys)
            if found is not None:
                key, blob = found
                return None if key is None or blob is None else self._handing(key, blob)
        for key in keys:
            blob = await self._store.get_credential(key)
            if blob is not None:
                return self._handing(key, blob)
        return None

    async def stored(self, key: CredentialKey) -> SealedCredential | None:
        """The credential stored under exactly ``key``, or None. Decrypts nothing."""
        blob = await self._store.get_credential(key)
        return None if blob is None else self._handing(key, blob)

    def _keys_for(self, connector: str, principal: str, name: str, own_only: bool) -> tuple[CredentialKey, ...]:
        """The keys ``sealed`` tries, in order; the same objects every call (the store's cache then
        finds them by identity, not by comparing models field by field)."""
        asked = (connector, principal, name, own_only)
        keys = self._keys.get(asked)
        if keys is None:
            whom = (principal,) if own_only else dict.fromkeys((principal, PROJECT_WIDE))
            keys = tuple(CredentialKey(connector=connector, principal=who, name=name) for who in whom)
            if len(self._keys) >= _MAX_HANDED:
                self._keys.clear()
            self._keys[asked] = keys
        return keys

    def _handing(self, key: CredentialKey, blob: bytes) -> SealedCredential:
        handed = self._handed.get(key)
        # ``==`` on bytes returns at once for the same object (what the store's cache hands back).
        if handed is not None and handed[1] is self._cipher and handed[0] == blob:
            return handed[2]
        sealed = SealedCredential(key, blob, cipher=self._cipher, project=self._project)
        if len(self._handed) >= _MAX_HANDED:
            self._handed.clear()
        self._handed[key] = (blob, self._cipher, sealed)
        return sealed

    async def configured(self, connector: str, *, principal: str | None = None, own_only: bool = False) -> bool:
        """Whether any credential is stored for ``connector`` (usable by ``principal`` when given: its
        own, or unless ``own_only`` the project-wide one)."""
        usable = (principal,) if own_only else (principal, PROJECT_WIDE)
        for key in await self._store.list_credentials():
            if key.connector == connector and (principal is None or key.principal in usable):
                return True
        return False

    async def keys(self, connector: str | None = None) -> list[CredentialKey]:
        """Which credentials are stored (never their values), optionally for one connector."""
        return [k for k in await self._store.list_credentials() if connector is None or k.connector == connector]

    async def delete(self, connector: str, *, principal: str = PROJECT_WIDE, name: str = "default") -> bool:
        """Remove one credential; True when it existed."""
        key = CredentialKey(connector=connector, principal=principal, name=name)
        existed = await self._store.get_credential(key) is not None
        await self._store.delete_credential(key)
        return existed

    async def unopenable(self) -> tuple[list[CredentialKey], int]:
        """The stored credentials this vault's key cannot open, and how many are stored: a master key
        changed or lost and made anew, or a project renamed, leaves every one of them unusable."""
        keys = await self._store.list_credentials()
        failed: list[CredentialKey] = []
        for key in keys:
            blob = await self._store.get_credential(key)
            if blob is None:
                continue  # deleted meanwhile
            try:
                self._cipher.open(blob, aad=credential_aad(self._project, key.connector, key.principal, key.name))
            except CredentialError:
                failed.append(key)
        return failed, len(keys)

    async def rotate(self, new_cipher: Cipher) -> int:
        """Re-seal every credential under ``new_cipher`` in one store transaction; returns the count.

        Everything is opened before anything is written, so a credential that cannot be opened
        aborts the rotation with nothing changed. A value already sealed by ``new_cipher`` (a
        rotation run twice) is kept. Afterwards this vault seals and opens with ``new_cipher``.
        """
        resealed: dict[CredentialKey, bytes] = {}
        for key in await self._store.list_credentials():
            blob = await self._store.get_credential(key)
            if blob is None:
                continue  # deleted meanwhile
            aad = credential_aad(self._project, key.connector, key.principal, key.name)
            try:
                plaintext = self._cipher.open(blob, aad=aad)
            except CredentialError as exc:
                try:
                    new_cipher.open(blob, aad=aad)
                except CredentialError:
                    user = "" if key.principal == PROJECT_WIDE else f" --user {key.principal}"
                    raise CredentialError(
                        f"cannot rotate: the credential {key.name!r} of connector {key.connector!r} "
                        f"(principal {key.principal!r}) does not open with the current key ({exc}); "
                        "nothing was changed; delete it "
                        f"(`mcp-gateway secret delete {key.connector} {key.name}{user}`) or enter it again, "
                        "then rotate again"
                    ) from None
                resealed[key] = blob
                continue
            resealed[key] = new_cipher.seal(plaintext, aad=aad)
        await self._store.replace_all_credentials(resealed)
        self._cipher = new_cipher
        return len(resealed)

    def _seal(self, key: CredentialKey, plaintext: bytes) -> bytes:
        return self._cipher.seal(plaintext, aad=credential_aad(self._project, key.connector, key.principal, key.name))

    def __repr__(self) -> str:
        return f"CredentialVault(project={self._project!r}, cipher={self._cipher!r})"
