"""Unit tests of the request-state pieces of server/elicitation.py: key derivation, single use,
and the SDK sealing policy configured with them (restart-stable, audience-bound)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.server.request_state import InvalidRequestState

from mcp_gateway.server.elicitation import (
    STATE_TTL_SECONDS,
    _Nonces,
    derive_request_state_key,
    principal_key,
    request_state_security,
)
from mcp_gateway.services.identity import Principal
from mcp_gateway.store import SQLiteStore
from mcp_gateway.vocabulary.clock import FixedClock

MASTER = b"m" * 32


def test_key_is_stable_labelled_and_project_bound() -> None:
    key = derive_request_state_key(MASTER, "p1")
    assert key == derive_request_state_key(MASTER, "p1") and len(key) == 32
    assert key != derive_request_state_key(MASTER, "p2")
    assert key != derive_request_state_key(b"n" * 32, "p1")
    assert MASTER not in key


def test_state_sealed_by_one_process_opens_in_another_but_not_under_another_key() -> None:
    def principal_of(_ctx: object) -> Principal:
        return Principal(user="u")

    key = derive_request_state_key(MASTER, "p")
    first = request_state_security(key, audience="mcp-gateway", principal_of=principal_of)
    restarted = request_state_security(key, audience="mcp-gateway", principal_of=principal_of)
    sealed = first.codec.seal(b"state")
    assert b"state" not in sealed.encode()
    assert restarted.codec.unseal(sealed) == b"state"
    assert first.audience == "mcp-gateway"
    other = request_state_security(derive_request_state_key(MASTER, "q"), audience="x", principal_of=principal_of)
    with pytest.raises(InvalidRequestState):
        other.codec.unseal(sealed)
    # Without a key (in-process use) a fresh one is made: nothing sealed elsewhere opens.
    with pytest.raises(InvalidRequestState):
        request_state_security(None, audience="x", principal_of=principal_of).codec.unseal(sealed)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_nonce_is_single_use_across_instances_until_its_state_expires(tmp_path: Path) -> None:
    clock = FixedClock()
    async with SQLiteStore(tmp_path / "s.db") as store, SQLiteStore(tmp_path / "s.db") as other:
        nonces, elsewhere = _Nonces(store, clock), _Nonces(other, clock)  # two instances, one database
        assert await nonces.claim("a") and await nonces.claim("b")
        assert not await nonces.claim("a")
        assert not await elsewhere.claim("b")  # a replay to another instance is refused there too
        clock.advance(STATE_TTL_SECONDS + 61)  # long after any state holding it stopped verifying
        assert await elsewhere.claim("a")


def test_principal_key_tells_user_and_agent_apart() -> None:
    assert principal_key(Principal("u", "a")) != principal_key(Principal("u", None))
    assert principal_key(Principal("u/a")) != principal_key(Principal("u", "a"))


def test_the_elicitation_message_shows_what_the_agent_wrote_with_its_hidden_characters_escaped() -> None:
    # The client shows this text to the human as it is: a right-to-left override in an argument would
    # turn it into other words there, while the page shows the escapes under a warning.
    from mcp_gateway.server.elicitation import _message  # pyright: ignore[reportPrivateUsage]
    from mcp_gateway.services.links import HumanLink

    link = HumanLink(kind="approval", url="http://127.0.0.1:1/approvals/x", link_id="h", message="")
    said = _message(link, {"summary": 'pay.send (write) {"memo":"refund\u202e001$ rof\u202c","to":"a\u200bb"}'})
    assert "\u202e" not in said and "\u200b" not in said
    assert "\\u202e" in said and "\\u200b" in said
    secret = HumanLink(kind="secret", url="http://127.0.0.1:1/secrets/x", link_id="h", message="")
    assert "\\u202e" in _message(secret, {"connector": "api", "name": "key\u202e"})
