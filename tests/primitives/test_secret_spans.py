"""Secrets the gateway never held, found in an upstream's error text by their shape alone."""

from __future__ import annotations

import pytest

from mcp_gateway.primitives.secret_spans import hide_secret_spans, hide_userinfo

R = "[redacted]"


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("at jdbc:mysql://app:dbPass9@db.internal:3306/prod", f"at jdbc:mysql://{R}@db.internal:3306/prod"),
        ("clone https://ghp_abc123@github.com/o/r failed", f"clone https://{R}@github.com/o/r failed"),
        ("postgresql://gw:p@ss/w@db/x", f"postgresql://{R}@db/x"),
        ("AWS_SECRET_ACCESS_KEY=wJalr/K7MDENG+bPx\nnext", f"AWS_SECRET_ACCESS_KEY={R}\nnext"),
        ("host=db password=hunter2 dbname=x", f"host=db password={R} dbname=x"),
        ("GET /cb?code=1&client_secret=s3cr3t&x=1", f"GET /cb?code=1&client_secret={R}&x=1"),
        ('spring.datasource.password="a b c", user=app', f'spring.datasource.password="{R}", user=app'),
        ("accessToken=eyJh.x.y;", f"accessToken={R};"),
        ("Authorization: Bearer eyJhbGciOi.abc123.def", f"Authorization: Bearer {R}"),
        ("Authorization: Basic dXNlcjpwdw==", f"Authorization: Basic {R}"),
        (
            "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAbC=\n-----END RSA PRIVATE KEY-----\nafter",
            f"key:\n{R}\nafter",
        ),
        ("-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1r [cut]", R),
    ],
)
def test_secret_shapes_are_redacted(text: str, hidden: str) -> None:
    assert hide_secret_spans(text) == hidden
    assert hide_secret_spans(hidden) == hidden  # hiding twice changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "password: must be at least 8 characters",
        '{"errors": {"password": ["is too short"], "token": "is required"}}',
        "Bearer token required",
        'WWW-Authenticate: Bearer realm="api", error="invalid_token"',
        "max_tokens=100 token_count=5 password_policy=strict a=1",
        "if password == expected: Authorization=[redacted]",
        "see https://example.com/a?email=a@b.com or mail ops@example.com",
        "The secret key you gave has expired; the password field is required.",
    ],
)
def test_ordinary_text_is_left_as_it_is(text: str) -> None:
    assert hide_secret_spans(text) == text


def test_hide_userinfo_hides_only_a_urls_userinfo() -> None:
    text = "to http://alice:pw@h/x?password=p, then https://tok@h2 and alice:***@ shown: http://bob:***@h3"
    assert hide_userinfo(text) == (
        "to http://[redacted]@h/x?password=p, then https://[redacted]@h2 and alice:***@ shown: http://bob:***@h3"
    )
    assert hide_userinfo("no url here, a@b") == "no url here, a@b"
