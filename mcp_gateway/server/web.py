"""Human pages: connect, secret, OAuth2 callback, approval and operator pages.

Plain server-rendered HTML, no JavaScript. Opening a link (GET) never consumes it, so a chat
client's link preview cannot burn it; the form's POST consumes it atomically. Every form carries
a CSRF token bound to its link (or the operator's session), and a POST whose Origin is another
site is refused. A page never echoes a submitted secret, and nothing here logs form values.
The pages live in ``server/pages/``, one module per kind; this module is their entry point.
"""

from __future__ import annotations

from .pages import FIELDS, Field, OperatorTokens, web_routes

__all__ = ["FIELDS", "Field", "OperatorTokens", "web_routes"]
