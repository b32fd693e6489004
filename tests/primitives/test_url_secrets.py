from __future__ import annotations

import pytest

from mcp_gateway.primitives.url_secrets import secret_name, secret_query_name, shown_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://u:pw@h/s.json", "https://u:***@h/s.json"),
        ("https://h/s.json?access_token=t&v=2", "https://h/s.json?access_token=[redacted]&v=2"),
        ("https://h/s.json?apiKey=k#frag", "https://h/s.json?apiKey=[redacted]"),
        ("https://h/s.json?password=p", "https://h/s.json?password=[redacted]"),
        ("https://h/s.json?max_tokens=5&flag", "https://h/s.json?max_tokens=5&flag"),
        ("https://u@h/s.json", "https://u@h/s.json"),
        # Names that mark a credential only in a URL: Google's key, an Azure SAS signature (its
        # version, permissions and expiry kept), Azure Functions' code, presigned AWS URLs.
        ("https://h/s.json?key=AIza&alt=json", "https://h/s.json?key=[redacted]&alt=json"),
        ("https://h/s.json?sv=2022&sp=r&se=2030&sig=S", "https://h/s.json?sv=2022&sp=r&se=2030&sig=[redacted]"),
        ("https://h/s.json?code=c&subscription-key=k", "https://h/s.json?code=[redacted]&subscription-key=[redacted]"),
        (
            "https://h/s.json?X-Amz-Credential=c&X-Amz-Security-Token=t&X-Amz-Signature=s&X-Amz-Expires=60",
            "https://h/s.json?X-Amz-Credential=[redacted]&X-Amz-Security-Token=[redacted]"
            "&X-Amz-Signature=[redacted]&X-Amz-Expires=60",
        ),
        (
            "https://h/s.json?client_secret=c&session=s&auth=a",
            "https://h/s.json?client_secret=[redacted]&session=[redacted]&auth=[redacted]",
        ),
        ("https://h/s.json?keyword=k&monkey=m&sort=asc", "https://h/s.json?keyword=k&monkey=m&sort=asc"),
    ],
)
def test_shown_url_hides_a_password_and_credential_like_query_values(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_shown_url_never_fails() -> None:
    assert "pw" not in shown_url("https://u:pw@[::1/s.json")


def test_secret_name_reads_the_names_words() -> None:
    assert secret_name("access_token") and secret_name("apiKey") and secret_name("X-Auth")
    assert not secret_name("max_tokens") and not secret_name("page")
    # An argument named key or code is no credential: only a URL's query reads those names as one.
    assert not secret_name("key") and not secret_name("code") and secret_query_name("key")
