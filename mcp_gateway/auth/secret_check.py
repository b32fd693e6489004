"""Whether a secret entered for a connector can be used by its ``auth:`` block, checked when it is
entered (a link page, ``secret set``) rather than at each call, where it could only say "reconnect".

Messages name the field, never its content.
"""

from __future__ import annotations

from typing import Any, cast

from ..manifest import AuthConfig, ConnectorConfig, CustomAuth, HmacAuth, McpSource, MtlsAuth
from ..primitives.secrets import SecretValue
from ..vocabulary.errors import CredentialError

__all__ = ["over_http", "unusable"]


def over_http(cfg: ConnectorConfig) -> bool:
    """Whether the connector's secret goes into HTTP requests (``parse_secret_input``'s ``over_http``):
    every connector's but a stdio MCP server's, which gets it in its environment."""
    return not (isinstance(cfg.source, McpSource) and cfg.source.mcp.command is not None)


def unusable(auth: AuthConfig, value: Any) -> str | None:
    """Why ``value`` (as ``parse_secret_input`` returned it) cannot sign or carry a request under
    ``auth``, as a sentence; None when it can."""
    if isinstance(auth, CustomAuth) and isinstance(value, str | dict):
        from .custom import template_misfit

        return template_misfit(auth, cast(str | dict[str, str], value))
    if isinstance(auth, MtlsAuth) and isinstance(value, dict):
        return _mtls_problem(cast(dict[str, str], value))  # the shape parse_secret_input checked
    if isinstance(auth, HmacAuth) and isinstance(value, str) and auth.key_encoding in ("hex", "base64"):
        from .hmac import signing_key

        try:
            key = signing_key(auth, SecretValue(value))
        except CredentialError:
            return f"The signing secret is not valid {auth.key_encoding}, as this connector's key_encoding says."
        if not key:
            return f"The signing secret decodes ({auth.key_encoding}) to an empty key, which signs nothing."
    return None


def _mtls_problem(value: dict[str, str]) -> str | None:
    """That the PEM parses and the key belongs to the certificate."""
    from cryptography import x509  # here: heavy imports only an mTLS credential needs
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    try:
        certificate = x509.load_pem_x509_certificate(value["cert_pem"].encode())
    except ValueError:
        return "The client certificate is not a PEM certificate (it starts with -----BEGIN CERTIFICATE-----)."
    try:
        key = serialization.load_pem_private_key(value["key_pem"].encode(), password=None)
    except TypeError:
        return "The private key is protected by a passphrase; export it unencrypted (openssl pkey -in key.pem)."
    except (ValueError, UnsupportedAlgorithm):
        return "The private key is not a PEM private key (it starts with -----BEGIN … PRIVATE KEY-----)."
    raw = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*raw) != certificate.public_key().public_bytes(*raw):
        return "The private key does not belong to this certificate."
    return None
