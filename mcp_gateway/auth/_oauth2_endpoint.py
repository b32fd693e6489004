"""One exchange with an OAuth 2.0 token endpoint (RFC 6749 section 3.2), answered safely.

Token endpoint answers are never quoted: only their status and a sanitized ``error`` code reach a
message, since a provider may echo what it was sent (the client secret among it). The body is read
up to ``MAX_TOKEN_RESPONSE`` bytes.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any, cast
from urllib.parse import quote_plus

import anyio
import httpx2

from ..manifest import OAuth2Auth
from ..primitives.redaction import Redactor
from ..primitives.secrets import SecretValue
from ..primitives.upstream_text import screen
from ..vocabulary.errors import GatewayError, UpstreamError

__all__ = ["MAX_TOKEN_RESPONSE", "AuthorizationRefused", "request_token"]

MAX_TOKEN_RESPONSE = 64 * 1024
MAX_RETRY_AFTER = 3600
_ERROR_CODE = re.compile(r"^[a-z]+(?:_[a-z]+)*$")
"""What an ``error`` code is (RFC 6749 section 5.2 and its registry: ``invalid_client``, ``slow_down``):
lowercase words joined by ``_``. Digits, dots and capitals are refused, so a provider cannot spell
an encoding of the client secret as its code (hex split by a dot)."""
_MAX_ERROR_CODE = 40
_SECRET_FORM_FIELDS = ("refresh_token", "code", "code_verifier", "client_secret")


class AuthorizationRefused(GatewayError):
    """The provider or its token endpoint said no. The message is safe for a page (no secret, no body).

    ``code`` is the sanitized RFC 6749 section 5.2 ``error`` code (``invalid_grant``), or ``""``.
    """

    def __init__(self, message: str, code: str = "") -> None:
        self.code = code
        super().__init__(message)

    @property
    def configuration(self) -> str:
        """What of the connector's configuration the code blames (the scopes the manifest asks for, the grant
        its flow uses), as a sentence for the operator; empty when it blames none of it."""
        return _CONFIGURATION_CODES.get(self.code, "")

    @property
    def client_refused(self) -> bool:
        """The code says the provider does not accept the client (its id or secret, or this client's use of
        the grant)."""
        return self.code in ("invalid_client", "unauthorized_client")


_CONFIGURATION_CODES = {
    "invalid_scope": "the provider refuses the scopes the manifest asks for (the connector's auth `scopes`): the "
    "operator should set them to ones the provider grants this client",
    "unsupported_grant_type": "the provider does not take this grant type from the client: the operator should "
    "allow it for the client at the provider, or change the connector's `flow`",
}


async def request_token(
    http: httpx2.AsyncClient,
    connector: str,
    config: OAuth2Auth,
    client: dict[str, str],
    form: dict[str, str],
    *,
    time_limit: float,
) -> dict[str, Any]:
    """POST ``form`` with the client's authentication, within ``time_limit`` seconds; the JSON answer,
    which holds a bearer access token.

    Raises:
        AuthorizationRefused: a 4xx other than 429, or an RFC 6749 ``error`` answer.
        UpstreamError: the endpoint could not be reached, timed out, was busy (429: ``rate_limited``) or
            failing (5xx), redirected (``connector_error``: the token_url to fix), or answered without a
            bearer token.
    """
    headers = {"Accept": "application/json"}
    if config.client_auth == "basic":
        # RFC 6749 section 2.3.1: each part form-urlencoded before the Basic encoding.
        pair = f"{quote_plus(client['client_id'])}:{quote_plus(client['client_secret'])}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    else:
        form = {**form, "client_id": client["client_id"], "client_secret": client["client_secret"]}
    url = httpx2.URL(config.token_url)
    where = f"the token endpoint of {connector} ({url.host})"
    cut = False
    try:
        with anyio.fail_after(time_limit):
            async with http.stream(
                "POST", url, data=form, headers=headers, timeout=time_limit, follow_redirects=False
            ) as response:
                try:
                    body = await _read_capped(response)
                except (httpx2.RemoteProtocolError, httpx2.ReadError):
                    # The endpoint was reached and answered: its status says what it made of the request.
                    body, cut = b"", True
    except (TimeoutError, httpx2.TimeoutException):
        raise UpstreamError("upstream_timeout", f"{where} did not answer in time; try again later") from None
    except httpx2.HTTPError as exc:
        raise UpstreamError(
            "upstream_unreachable",
            f"could not reach {where} ({type(exc).__name__}); check the connector's token_url and try again",
        ) from None
    answer = _json_object(body)
    status = response.status_code
    if status == 429 or status >= 500:
        # Busy or down, whatever the body says: nothing about the client or the grant is learnt from it.
        retry = _retry_after(response.headers.get("retry-after"))
        later = f"try again in {retry:g} s" if retry is not None else "try again later"
        if status == 429:
            raise UpstreamError(
                "rate_limited",
                f"{where} is rate limiting the gateway (HTTP 429); nothing stored was changed: {later}",
                upstream_status=status,
                retry_after=retry,
            )
        raise UpstreamError(
            "upstream_error",
            f"{where} answered HTTP {status} without a token; nothing stored was changed: {later}",
            upstream_status=status,
            retry_after=retry,
        )
    if 300 <= status < 400:
        # Not followed: it would carry the client's credentials wherever the answer points. Waiting
        # does not help either: the configured URL is not the endpoint itself.
        raise UpstreamError(
            "connector_error",
            f"{where} answered HTTP {status}, a redirect, which the gateway does not follow with the client's "
            "credentials; set the connector's token_url in the manifest to the token endpoint itself",
            upstream_status=status,
        )
    if status >= 400 or answer is None or "error" in (answer or {}):
        code = _error_code(answer, _sent(client, form))
        if 400 <= status < 500 or code:
            said = f", {code}" if code else ", its answer cut short" if cut else ""
            raise AuthorizationRefused(f"{where} refused the request (HTTP {status}{said})", code)
        raise UpstreamError(
            "upstream_error",
            f"{where} answered HTTP {status} without a token"
            + (" (its answer was cut short)" if cut else "")
            + "; try again later",
            upstream_status=status,
        )
    access = answer.get("access_token")
    token_type = str(answer.get("token_type", "bearer"))
    if not isinstance(access, str) or not access or token_type.lower() != "bearer":
        raise UpstreamError(
            "upstream_error",
            f"{where} answered without a bearer access_token; the gateway can only use bearer tokens",
        )
    return answer


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` in whole seconds, at most ``MAX_RETRY_AFTER``; None when absent or a date."""
    if value is None or not (value := value.strip()).isascii() or not value.isdigit():
        return None
    return float(min(int(value), MAX_RETRY_AFTER))


async def _read_capped(response: httpx2.Response) -> bytes:
    body = b""
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > MAX_TOKEN_RESPONSE:
            break
    return body[:MAX_TOKEN_RESPONSE]


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    return cast(dict[str, Any], value) if isinstance(value, dict) else None


def _sent(client: dict[str, str], form: dict[str, str]) -> Redactor:
    """What redacts every secret value the request carried (the client secret, a refresh token, an
    authorization code and its verifier), in every form it could be echoed in."""
    redactor = Redactor()
    for value in (client.get("client_secret"), *(form.get(k) for k in _SECRET_FORM_FIELDS)):
        if value:
            redactor.add(SecretValue(value))
    return redactor


def _error_code(answer: dict[str, Any] | None, sent: Redactor) -> str:
    """The RFC 6749 section 5.2 ``error`` code if it looks like one; never free text from the provider,
    and never a value the request carried (a provider that echoes the client secret as its code)."""
    code = (answer or {}).get("error")
    if not isinstance(code, str):
        return ""
    code = screen(code, sent.redact_text).text  # a redacted code no longer looks like one
    return code if len(code) <= _MAX_ERROR_CODE and _ERROR_CODE.match(code) else ""
