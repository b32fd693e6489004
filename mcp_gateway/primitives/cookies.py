"""The cookie jar every client that talks to an upstream uses: one that keeps nothing.

One caller's upstream session must not ride along with another's requests through a shared client (a
connector's MCP session is shared by every user of its credential), and an upstream's ``Set-Cookie``
would only grow memory.
"""

from __future__ import annotations

from http.cookiejar import CookieJar, DefaultCookiePolicy

__all__ = ["no_cookies"]


def no_cookies() -> CookieJar:
    """A new jar whose policy accepts a cookie from no domain."""
    return CookieJar(DefaultCookiePolicy(allowed_domains=[]))
