"""A real ``SealedCredential`` for unit tests: sealed by a real vault over a dict-backed store."""

from __future__ import annotations

from mcp_gateway.credentials import CredentialVault
from mcp_gateway.crypto import AESGCMCipher
from mcp_gateway.secrets import CredentialKey, SealedCredential

__all__ = ["sealed_credential"]


class _DictStore:
    """The two ``Store`` methods a vault needs to put and find one credential."""

    def __init__(self) -> None:
        self.rows: dict[CredentialKey, bytes] = {}

    async def put_credential(self, key: CredentialKey, sealed: bytes) -> None:
        self.rows[key] = sealed

    async def get_credential(self, key: CredentialKey) -> bytes | None:
        return self.rows.get(key)


async def sealed_credential(connector: str, value: str | dict[str, str]) -> SealedCredential:
    """``value`` stored project-wide for ``connector`` and found again, still sealed."""
    vault = CredentialVault(_DictStore(), AESGCMCipher(b"k" * 32, project="demo"), project="demo")  # type: ignore[arg-type]
    await vault.put(connector, value)
    sealed = await vault.sealed(connector, principal="alice")
    assert sealed is not None
    return sealed
