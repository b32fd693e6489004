"""The vocabulary's small helpers."""

from __future__ import annotations

import pytest

from mcp_gateway.vocabulary.model import AUTH_KINDS, a_credential


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("oauth2", "an oauth2 credential"),
        ("oauth1", "an oauth1 credential"),
        ("api_key", "an api_key credential"),
        ("aws_sigv4", "an aws_sigv4 credential"),
        ("hmac", "an hmac credential"),
        ("mtls", "an mtls credential"),
        ("bearer", "a bearer credential"),
        ("basic", "a basic credential"),
        ("custom", "a custom credential"),
    ],
)
def test_a_credential_reads_aloud(kind: str, said: str) -> None:
    assert kind in AUTH_KINDS
    assert a_credential(kind) == said
