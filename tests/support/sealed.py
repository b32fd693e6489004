"""A real ``SealedCredential`` for unit tests: sealed by a real vault over the in-memory store."""

from __future__ import annotations

from mcp_gateway.primitives.crypto import AESGCMCipher
from mcp_gateway.primitives.secrets import SealedCredential
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.store.memory import MemoryStore

__all__ = ["sealed_credential"]


async def sealed_credential(connector: str, value: str | dict[str, str]) -> SealedCredential:
    """``value`` stored project-wide for ``connector`` and found again, still sealed."""
    async with MemoryStore() as store:
        vault = CredentialVault(store, AESGCMCipher(b"k" * 32, project="demo"), project="demo")
        await vault.put(connector, value)
        sealed = await vault.sealed(connector, principal="alice")
    assert sealed is not None
    return sealed
