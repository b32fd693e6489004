"""``KnownCredentials``: what it does when the stored credentials cannot be read for redaction."""

from __future__ import annotations

import logging
import sqlite3

import pytest

from mcp_gateway.core.known_credentials import KnownCredentials
from mcp_gateway.primitives.crypto import AESGCMCipher
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.store.memory import MemoryStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_store_failure_while_learning_leaves_the_call_to_go_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Raised out of the gateway's call before any audit row: the agent read "Error executing tool
    # call" and the audit had nothing. The call goes on, and fails (answered, audited) where it needs
    # the store.
    store = MemoryStore()
    vault = CredentialVault(store, AESGCMCipher(b"k" * 32, project="p"), project="p")

    async def damaged(*_: object, **__: object) -> list[object]:
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(vault, "keys", damaged)
    known = KnownCredentials(vault)
    with caplog.at_level(logging.ERROR):
        await known.learn_stored()
    assert "not read for redaction" in caplog.text
