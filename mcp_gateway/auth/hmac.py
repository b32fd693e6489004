"""``hmac``: sign the final request with a shared secret, as webhook-style APIs do.

One declared recipe covers the common schemes; the manifest's ``auth:`` block says which:

    GitHub-style    signed: body                               prefix: "sha256="   encoding: hex
    Shopify-style   signed: body                               encoding: base64
    Slack-style     template: "v0:{timestamp}:{body}"          prefix: "v0="       timestamp_header: ...
    Coinbase-style  template: "{timestamp}{method}{path}{body}"  encoding: base64  key_encoding: base64
    generic         signed: method_path_timestamp_body         separator: "\\n"

The message is assembled as bytes (the body is never decoded, so a binary body signs as sent);
``{path}`` is the path with its query string exactly as on the wire.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from datetime import UTC, datetime, timedelta

import httpx2

from ..manifest import HmacAuth
from ..primitives.secrets import SecretValue
from ..vocabulary.errors import CredentialError
from ._base import check_header_value, request_body, secret_text

__all__ = ["apply_hmac", "format_timestamp", "signed_message", "signing_key"]

_PLACEHOLDER = re.compile(r"\{(method|path|timestamp|body)\}")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def apply_hmac(request: httpx2.Request, config: HmacAuth, secret: SecretValue, *, now: datetime) -> None:
    """Write the signature header (and the timestamp header, when declared) onto ``request``.

    Raises:
        CredentialError: the secret is not a string, or not the hex/base64 that ``key_encoding`` says.
    """
    key = signing_key(config, secret)
    timestamp = format_timestamp(now, config.timestamp_format)
    digest = hmac.new(key, signed_message(config, request, timestamp), config.algorithm).digest()
    value = digest.hex() if config.encoding == "hex" else base64.b64encode(digest).decode("ascii")
    request.headers[config.header] = check_header_value("hmac", f"header {config.header!r}", config.prefix + value)
    if config.timestamp_header:
        request.headers[config.timestamp_header] = timestamp


def signed_message(config: HmacAuth, request: httpx2.Request, timestamp: str) -> bytes:
    """The exact bytes the recipe signs for ``request`` at ``timestamp``."""
    parts = {
        "method": request.method.upper().encode("ascii"),
        "path": request.url.raw_path,
        "timestamp": timestamp.encode("ascii"),
        "body": request_body(request),
    }
    if config.template is not None:
        # Split on the placeholders so literal text and the body join as bytes, never as decoded text.
        pieces = _PLACEHOLDER.split(config.template)
        return b"".join(parts[p] if i % 2 else p.encode("utf-8") for i, p in enumerate(pieces))
    if config.signed == "body":
        return parts["body"]
    return config.separator.encode("utf-8").join((parts["method"], parts["path"], parts["timestamp"], parts["body"]))


def format_timestamp(now: datetime, fmt: str) -> str:
    """``unix`` seconds, ``unix_ms`` milliseconds, or ``iso8601`` UTC with milliseconds and ``Z``."""
    match fmt:
        case "unix":
            return str(int(now.timestamp()))
        case "unix_ms":
            # Integer arithmetic: timestamp() * 1000 in floating point can land a millisecond short.
            return str((now - _EPOCH) // timedelta(milliseconds=1))
        case _:
            return now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def signing_key(config: HmacAuth, secret: SecretValue) -> bytes:
    """The key bytes the stored secret stands for, by the connector's ``key_encoding``.

    Raises:
        CredentialError: the secret is not a string, or not the hex/base64 ``key_encoding`` says.
    """
    text = secret_text("hmac", secret)
    try:
        match config.key_encoding:
            case "hex":
                return bytes.fromhex(text.strip())
            case "base64":
                return base64.b64decode(text.strip(), validate=True)
            case _:
                return text.encode("utf-8")
    except (ValueError, binascii.Error):
        raise CredentialError(
            f"the stored hmac secret is not valid {config.key_encoding}, as the connector's key_encoding says; "
            "enter it again with `mcp-gateway secret set`"
        ) from None
