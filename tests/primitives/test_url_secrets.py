from __future__ import annotations

import pytest

from mcp_gateway.primitives.url_secrets import secret_name, shown_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://u:pw@h/s.json", "https://u:***@h/s.json"),
        ("https://h/s.json?access_token=t&v=2", "https://h/s.json?access_token=[redacted]&v=2"),
        ("https://h/s.json?apiKey=k#frag", "https://h/s.json?apiKey=[redacted]"),
        ("https://h/s.json?password=p", "https://h/s.json?password=[redacted]"),
        ("https://h/s.json?max_tokens=5&flag", "https://h/s.json?max_tokens=5&flag"),
        ("https://u@h/s.json", "https://u@h/s.json"),
    ],
)
def test_shown_url_hides_a_password_and_credential_like_query_values(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_shown_url_never_fails() -> None:
    assert "pw" not in shown_url("https://u:pw@[::1/s.json")


def test_secret_name_reads_the_names_words() -> None:
    assert secret_name("access_token") and secret_name("apiKey") and secret_name("X-Auth")
    assert not secret_name("max_tokens") and not secret_name("page")
