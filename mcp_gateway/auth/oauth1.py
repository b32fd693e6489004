"""``oauth1``: OAuth 1.0a request signing (RFC 5849), HMAC-SHA1 or HMAC-SHA256, in the Authorization header.

The signature covers the final request: the method, the URL as it goes on the wire (scheme and host
lower-cased, default port dropped, path exactly as escaped), every query parameter, the parameters
of a form-encoded body, and the protocol parameters. The steps are the RFC's, one function each,
so a test can hold every intermediate string against the RFC's own examples:

    params = protocol_params(...)                                   # section 3.1
    base = signature_base_string(method, url, content_type, body, params)   # section 3.4.1
    sig = sign(base, consumer_secret, token_secret, method="HMAC-SHA1")     # sections 3.4.2, 3.4.3
    header = authorization_header(params + [("oauth_signature", sig)], realm)  # section 3.5.1

Written here rather than taken from oauthlib: the algorithm is small and fixed, and oauthlib
serves as the independent reference the tests compare against, byte for byte. Like oauthlib,
a body that is not form-encoded is covered by ``oauth_body_hash`` (draft-eaton-oauth-bodyhash-00)
unless the manifest turns it off.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from datetime import datetime
from urllib.parse import parse_qsl, quote

import httpx2

from ..manifest import OAuth1Auth
from ..primitives.secrets import SecretValue
from ..vocabulary.errors import ArgumentError
from ._base import check_header_value, request_body, secret_fields

__all__ = [
    "apply_oauth1",
    "authorization_header",
    "base_string_uri",
    "escape",
    "normalize_parameters",
    "protocol_params",
    "request_parameters",
    "sign",
    "signature_base_string",
]

Params = Sequence[tuple[str, str]]

FORM_URLENCODED = "application/x-www-form-urlencoded"
_HASHES = {"HMAC-SHA1": hashlib.sha1, "HMAC-SHA256": hashlib.sha256}
_DEFAULT_PORTS = {"http": 80, "https": 443}


def apply_oauth1(
    request: httpx2.Request, config: OAuth1Auth, secret: SecretValue, *, now: datetime, nonce: str
) -> None:
    """Sign ``request`` and put the result in its Authorization header (replacing any there).

    Raises:
        ArgumentError: the request carries an ``oauth_`` parameter of its own, or a form body that is
            not UTF-8 (the signature could not match what the server decodes).
        CredentialError: the secret is not the oauth1 JSON shape.
    """
    fields = secret_fields("oauth1", secret, ("consumer_key", "consumer_secret", "token", "token_secret"))
    body = request_body(request)
    content_type = request.headers.get("Content-Type")
    params = protocol_params(
        consumer_key=fields["consumer_key"],
        token=fields["token"],
        signature_method=config.signature_method,
        timestamp=str(int(now.timestamp())),
        nonce=nonce,
        body_hash=_body_hash(content_type, body) if config.body_hash else None,
    )
    base = signature_base_string(request.method, request.url, content_type, body, params)
    signature = sign(base, fields["consumer_secret"], fields["token_secret"], method=config.signature_method)
    header = authorization_header([*params, ("oauth_signature", signature)], realm=config.realm)
    request.headers["Authorization"] = check_header_value("oauth1", "the Authorization header", header)


def protocol_params(
    *,
    consumer_key: str,
    token: str | None,
    signature_method: str,
    timestamp: str,
    nonce: str,
    body_hash: str | None = None,
    version: bool = True,
) -> list[tuple[str, str]]:
    """The ``oauth_*`` parameters of section 3.1, in oauthlib's order (so the headers match too).

    ``version=False`` leaves out the optional ``oauth_version``, as the RFC's own examples do.
    """
    params = [("oauth_nonce", nonce), ("oauth_timestamp", timestamp)]
    if version:
        params.append(("oauth_version", "1.0"))
    params += [("oauth_signature_method", signature_method), ("oauth_consumer_key", consumer_key)]
    if token:
        params.append(("oauth_token", token))
    if body_hash is not None:
        params.append(("oauth_body_hash", body_hash))
    return params


def signature_base_string(method: str, url: httpx2.URL, content_type: str | None, body: bytes, protocol: Params) -> str:
    """Section 3.4.1.1: ``METHOD&escaped base string URI&escaped normalized parameters``."""
    params = [*request_parameters(url, content_type, body), *protocol]
    return "&".join((escape(method.upper()), escape(base_string_uri(url)), escape(normalize_parameters(params))))


def base_string_uri(url: httpx2.URL) -> str:
    """Section 3.4.1.2: scheme and host in lower case, the port only when not the default, the path
    as sent (already escaped; ``/`` when empty), no query or fragment."""
    scheme = url.scheme.lower()
    host = url.raw_host.decode("ascii").lower()  # IDNA hosts as sent: the xn-- form of the Host header
    if ":" in host:
        host = f"[{host}]"  # an IPv6 literal
    if url.port is not None and url.port != _DEFAULT_PORTS.get(scheme):
        host = f"{host}:{url.port}"
    path = url.raw_path.split(b"?", 1)[0].decode("ascii") or "/"
    return f"{scheme}://{host}{path}"


def request_parameters(url: httpx2.URL, content_type: str | None, body: bytes) -> list[tuple[str, str]]:
    """Section 3.4.1.3.1: the query's parameters, then a form-encoded body's, both decoded.

    A body counts only when its Content-Type is ``application/x-www-form-urlencoded``. Parameters
    named ``oauth_*`` are refused: the protocol's own travel in the header, and a second copy in
    the query or body is ambiguous (RFC 5849 section 3.5 allows one place only).
    """
    params = parse_qsl(url.query.decode("ascii"), keep_blank_values=True)
    if body and _media_type(content_type) == FORM_URLENCODED:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise ArgumentError(
                "the form body is not UTF-8, so its OAuth 1 signature could not match what the server decodes; "
                "pass text values"
            ) from None
        params += parse_qsl(text, keep_blank_values=True)
    reserved = sorted({name for name, _ in params if name.startswith("oauth_")})
    if reserved:
        raise ArgumentError(
            f"the request carries the parameter(s) {', '.join(map(repr, reserved))}, but OAuth 1 reserves names "
            "starting with 'oauth_' for the protocol, which the gateway writes itself; drop or rename them"
        )
    return params


def normalize_parameters(params: Params) -> str:
    """Section 3.4.1.3.2: escape names and values, sort by name then value, join ``n=v`` with ``&``."""
    pairs = sorted((escape(name), escape(value)) for name, value in params)
    return "&".join(f"{name}={value}" for name, value in pairs)


def sign(base_string: str, consumer_secret: str, token_secret: str, *, method: str) -> str:
    """Sections 3.4.2 (HMAC-SHA1) and its SHA-256 variant: base64 of the HMAC of the base string,
    keyed by the escaped consumer secret and token secret joined with ``&``."""
    key = f"{escape(consumer_secret)}&{escape(token_secret)}"
    digest = hmac.new(key.encode("utf-8"), base_string.encode("utf-8"), _HASHES[method]).digest()
    return base64.b64encode(digest).decode("ascii")


def authorization_header(params: Params, *, realm: str | None = None) -> str:
    """Section 3.5.1: ``OAuth realm="...", name="escaped value", ...``."""
    parts = [f'{escape(name)}="{escape(value)}"' for name, value in params]
    if realm is not None:
        parts.insert(0, f'realm="{realm}"')
    return "OAuth " + ", ".join(parts)


def escape(text: str) -> str:
    """Section 3.6: UTF-8, then every byte but ALPHA, DIGIT, ``-``, ``.``, ``_``, ``~`` as upper-case ``%XX``."""
    return quote(text, safe="~")


def _body_hash(content_type: str | None, body: bytes) -> str | None:
    # draft-eaton-oauth-bodyhash-00 section 4.1.1: never on form-encoded bodies (their parameters are
    # signed already); oauthlib adds it whenever a typed body is not form-encoded.
    if not body or content_type is None or _media_type(content_type) == FORM_URLENCODED:
        return None
    return base64.b64encode(hashlib.sha1(body).digest()).decode("ascii")


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()
