"""``bearer``: ``<header>: <prefix> <token>`` (RFC 6750 section 2.1 with the defaults)."""

from __future__ import annotations

import httpx2

from ..manifest import BearerAuth
from ..primitives.secrets import SecretValue
from ._base import check_header_value, secret_text

__all__ = ["apply_bearer"]


def apply_bearer(request: httpx2.Request, config: BearerAuth, secret: SecretValue) -> None:
    token = secret_text("bearer", secret)
    # An empty prefix means the raw token (APIs that want ``X-Token: <token>``), not " <token>".
    value = f"{config.prefix} {token}" if config.prefix else token
    request.headers[config.header] = check_header_value("bearer", f"header {config.header!r}", value)
