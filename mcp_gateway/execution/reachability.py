"""Whether a base URL's host can be reached, without sending a request: its name resolves, a TCP
connection opens and, for ``https``, the TLS handshake passes with the trust the connector's calls use.

``doctor`` runs it for every connector at once, each within a short timeout, and names what failed the
way a call would meet it (``connect_failures``): a certificate not trusted, for another host name or
expired, a name that does not resolve, a refused connection, no answer in time. Nothing is sent after
the handshake and no credential is used (an mTLS connector's handshake goes without its certificate,
which a server asks for only once it is made).
"""

from __future__ import annotations

import errno
import socket
import ssl
from dataclasses import dataclass
from typing import Final, Literal
from urllib.parse import urlsplit

import anyio

from .connect_failures import PLAIN_HTTP_REASONS, chain
from .tls_trust import trust_context

__all__ = ["Failure", "Unreached", "reach"]

Failure = Literal[
    "certificate not trusted",
    "certificate hostname mismatch",
    "certificate expired",
    "TLS handshake failed",
    "plain HTTP at an https URL",
    "DNS name not found",
    "connection refused",
    "timed out",
    "unreachable",
]

_EXPIRED: Final = 10  # X509_V_ERR_CERT_HAS_EXPIRED
_NAME_MISMATCH: Final = frozenset({62, 64})  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH


@dataclass(frozen=True)
class Unreached:
    """Why ``where`` could not be reached: ``failure`` its name, ``detail`` what the system said."""

    where: str
    failure: Failure
    detail: str


async def reach(url: str, *, cafile: str | None = None, seconds: float = 3.0) -> Unreached | None:
    """None when ``url``'s host resolves, accepts a connection and (https) completes the TLS handshake
    trusting ``cafile`` (else the system's store, as the calls do), all within ``seconds``.

    Raises:
        OSError: ``cafile`` cannot be read as PEM certificates (the caller names the setting).
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    where = f"{host}:{port}"
    context = trust_context(cafile) if secure else None
    try:
        with anyio.fail_after(seconds):
            await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            if context is None:
                stream = await anyio.connect_tcp(host, port)
            else:
                stream = await anyio.connect_tcp(
                    host, port, ssl_context=context, tls_hostname=host, tls_standard_compatible=False
                )
            await stream.aclose()
    except TimeoutError:
        return Unreached(where, "timed out", f"no answer in {seconds:g} s")
    except OSError as exc:
        return _named(where, exc)
    except anyio.BrokenResourceError as exc:  # the peer hung up during the handshake
        return Unreached(where, "TLS handshake failed", str(exc.__cause__ or exc) or "the connection was closed")
    return None


def _named(where: str, exc: OSError) -> Unreached:
    for cause in chain(exc):
        if isinstance(cause, ssl.SSLCertVerificationError):
            detail = cause.verify_message or cause.reason or "certificate verify failed"
            if cause.verify_code == _EXPIRED:
                return Unreached(where, "certificate expired", detail)
            if cause.verify_code in _NAME_MISMATCH:
                return Unreached(where, "certificate hostname mismatch", detail)
            return Unreached(where, "certificate not trusted", detail)
        if isinstance(cause, ssl.SSLError):
            if cause.reason in PLAIN_HTTP_REASONS:
                return Unreached(where, "plain HTTP at an https URL", cause.reason or "")
            return Unreached(where, "TLS handshake failed", cause.reason or type(cause).__name__)
        if isinstance(cause, socket.gaierror):
            return Unreached(where, "DNS name not found", cause.strerror or str(cause))
        if isinstance(cause, ConnectionRefusedError) or getattr(cause, "errno", None) == errno.ECONNREFUSED:
            return Unreached(where, "connection refused", "nothing listens at that port")
        if isinstance(cause, TimeoutError):
            return Unreached(where, "timed out", str(cause) or "no answer")
    return Unreached(where, "unreachable", exc.strerror or str(exc))
