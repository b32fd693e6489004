"""``basic``: ``Authorization: Basic base64(user:pass)`` (RFC 7617)."""

from __future__ import annotations

import base64

import httpx2

from ..manifest import BasicAuth
from ..primitives.secrets import SecretValue
from ..vocabulary.errors import CredentialError
from ._base import secret_fields

__all__ = ["apply_basic"]


def apply_basic(request: httpx2.Request, config: BasicAuth, secret: SecretValue) -> None:
    fields = secret_fields("basic", secret, ("username", "password"))
    username, password = fields["username"], fields["password"]
    # RFC 7617 section 2: a user-id containing a colon cannot be represented.
    if ":" in username:
        raise CredentialError("the stored basic username contains ':', which HTTP Basic auth cannot carry")
    # RFC 7617 section 2.1: UTF-8 is the only charset a server may announce, so encode with it.
    token = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
    request.headers["Authorization"] = f"Basic {token}"
