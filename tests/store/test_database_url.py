"""Database URLs: which store a URL selects, and that what is shown of it never holds its password."""

from __future__ import annotations

import pytest

from mcp_gateway.store.database_url import is_postgres_url, redact_url, scrub, unescaped_userinfo


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
    assert redact_url("postgresql://gw:pa55@[::1/gateway") == "postgresql://gw:***@[::1/gateway"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        # Unescaped, these end a URL's authority for a URL parser: the whole password is hidden all the same.
        ("postgresql://gw:CANARY-55zz/slash@db:5432/gateway", "postgresql://gw:***@db:5432/gateway"),
        ("postgresql://gw:CANARY-55zz#hash@db/gateway", "postgresql://gw:***@db/gateway"),
        ("postgresql://gw:CANARY-55zz?q@db/gateway", "postgresql://gw:***@db/gateway"),
        ("postgresql://gw:CANARY@55zz@db/gateway", "postgresql://gw:***@db/gateway"),
        # A libpq keyword string, quoted or not.
        ("host=db port=5432 user=gw password=CANARY-55zz dbname=x", "host=db port=5432 user=gw password=*** dbname=x"),
        ("host=db password='CANARY 55zz' dbname=x", "host=db password=*** dbname=x"),
        (
            "postgresql://gw@db/x?sslmode=require&password=CANARY-55zz&a=1",
            "postgresql://gw@db/x?sslmode=require&password=***&a=1",
        ),
    ],
)
def test_a_password_is_hidden_however_it_is_written(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "CANARY" not in scrub(f"error for {url}", url)


def test_a_password_a_url_parser_would_split_is_refused_with_how_to_write_it() -> None:
    problem = unescaped_userinfo("postgresql://gw:CANARY-55zz/sl#ash@db/gateway")
    assert problem is not None and "'#', '/'" in problem and "/ as %2F" in problem and "# as %23" in problem
    assert "CANARY" not in problem
    assert unescaped_userinfo("postgresql://gw:p%2Fss@db/gateway?application_name=a/b") is None
    assert unescaped_userinfo("postgresql://db/gateway") is None
    assert unescaped_userinfo("postgresql://gw:pw@db/x?application_name=a@b") is None  # a parameter's "@"
    assert redact_url("postgresql://gw:pw@db/x?application_name=a@b") == "postgresql://gw:***@db/x?application_name=a@b"


def test_scrub_removes_every_spelling_of_the_password() -> None:
    url = "postgresql://gw:p%40ss-word@db/gateway?sslpassword=key-pass"
    text = "failed for p%40ss-word and p@ss-word, key key-pass"
    assert scrub(text, url) == "failed for *** and ***, key ***"
    assert scrub("nothing to hide", "postgresql://gw@db/x") == "nothing to hide"
