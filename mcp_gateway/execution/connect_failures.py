"""Why a connection to an upstream could not be made, when it was not that nothing listens.

httpx2 raises one ``ConnectError`` for every failure before a request leaves; the cause it wraps tells
an untrusted certificate, an ``https://`` base URL pointing at a port that serves plain HTTP, and a
host name that does not resolve from a service that is down. Each needs another fix, and "check that
the service is up" sent the operator to look at a service that was up. ``cause_of`` names the cause
and its fix for the agent's message (no secret: the certificate's complaint and the host only); each
is logged once per upstream and cause, since a misconfigured connector fails every call the same way.
"""

from __future__ import annotations

import logging
import socket
import ssl

__all__ = ["PLAIN_HTTP_REASONS", "cause_of", "chain"]

logger = logging.getLogger("mcp_gateway.execution.send")

PLAIN_HTTP_REASONS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST", "PACKET_LENGTH_TOO_LONG"}
)
"""OpenSSL's reasons when what answered a TLS hello speaks plain HTTP."""
_told: set[tuple[str, str]] = set()
_MAX_TOLD = 1024


def cause_of(exc: BaseException, where: str, scheme: str) -> str | None:
    """The sentence saying why ``where`` could not be reached, with its fix, or None when its cause is
    none of these (a refused or reset connection: then nothing listens, or not for us)."""
    said = _said(exc, scheme)
    if said is not None:
        kind, sentence = said
        if (where, kind) not in _told and len(_told) < _MAX_TOLD:
            _told.add((where, kind))
            logger.warning("calls to %s fail: %s", where, sentence)
    return said[1] if said is not None else None


def _said(exc: BaseException, scheme: str) -> tuple[str, str] | None:
    for cause in chain(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            why = cause.verify_message or cause.reason or "certificate verify failed"
            return "certificate", (
                f"its TLS certificate is not trusted ({why}); for a private CA the operator sets the connector's "
                "tls.ca_file to that CA's PEM file; else check the host in the connector's base_url"
            )
        if isinstance(cause, ssl.SSLError):
            if cause.reason in PLAIN_HTTP_REASONS and scheme == "https":
                return "plain-http", (
                    "it did not answer TLS: is that port serving plain HTTP? The connector's base_url says "
                    "https://; check its scheme and port"
                )
            why = cause.reason or type(cause).__name__
            return "tls", f"the TLS handshake failed ({why}); check the connector's base_url and the service's TLS"
        if isinstance(cause, socket.gaierror):
            return "dns", (
                "its host name does not resolve (no DNS record for it from here); check its spelling in the "
                "connector's base_url"
            )
    return None


def chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during, outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 16:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen
