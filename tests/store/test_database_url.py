"""Database URLs: which store a URL selects, and that what is shown of it never holds its password."""

from __future__ import annotations

import pytest

from mcp_gateway.store.database_url import is_postgres_url, redact_url, scrub


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://gw:pa55@db.internal:5432/gateway", True),
        ("postgres://gw@db/gateway", True),
        ("  POSTGRESQL://db/gateway", True),
        ("sqlite:///state.db", False),
        ("mysql://gw:x@db/gateway", False),
        ("", False),
        ("db.internal:5432", False),
    ],
)
def test_is_postgres_url(url: str, expected: bool) -> None:
    assert is_postgres_url(url) is expected


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://gw:pa55@db:5432/gateway", "postgresql://gw:***@db:5432/gateway"),
        ("postgresql://gw:p%40ss%3Aw@db/gateway", "postgresql://gw:***@db/gateway"),
        ("postgresql://gw:a@b@db/gateway", "postgresql://gw:***@db/gateway"),  # an unescaped @ in the password
        ("postgresql://gw@db/gateway?sslmode=require", "postgresql://gw@db/gateway?sslmode=require"),
        (
            "postgresql://db/gateway?password=pa55&sslmode=require",
            "postgresql://db/gateway?password=***&sslmode=require",
        ),
        ("postgresql://gw:@db/gateway", "postgresql://gw:***@db/gateway"),
        ("postgresql://gw:pa55@h1:5432,h2:5433/gateway", "postgresql://gw:***@h1:5432,h2:5433/gateway"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_url_never_fails() -> None:
    assert redact_url("postgresql://gw:pa55@[::1/gateway") == "(an unparsable database URL)"


def test_scrub_removes_every_spelling_of_the_password() -> None:
    url = "postgresql://gw:p%40ss-word@db/gateway?sslpassword=key-pass"
    text = "failed for p%40ss-word and p@ss-word, key key-pass"
    assert scrub(text, url) == "failed for *** and ***, key ***"
    assert scrub("nothing to hide", "postgresql://gw@db/x") == "nothing to hide"
