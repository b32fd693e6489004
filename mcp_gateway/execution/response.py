"""Read an upstream answer into something an agent can use, never more than ``max_bytes`` of it.

The body is streamed and the read stops at the cap, so a huge or endless upstream body costs at
most ``max_bytes`` of memory and never reaches the agent's context whole. The content type picks
the shape: JSON parsed, ``text/event-stream`` as the list of its ``data:`` payloads, text and XML
as text, anything else as capped base64. ``summarize_error`` (``error_dialects``) pulls the
upstream's own reason out of a non-2xx body, because that sentence usually tells the agent how to fix
its call.
"""

from __future__ import annotations

import base64
import codecs
import datetime
import email.utils
import functools
import importlib.util
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import httpx2

from ..primitives.upstream_text import MAX_UPSTREAM_TEXT, Redacts, Screened, screen
from ..services.logs import known_secrets
from ..sources._credential_names import credential_name
from ..vocabulary.errors import UpstreamError
from .content_coding import INFLATED_CODINGS, Inflater
from .error_dialects import ERROR_TEXT_LIMIT, Challenge, body_retry_after, error_type_of, summarize_error

__all__ = ["ERROR_TEXT_LIMIT", "Outcome", "read_response", "said", "shown_headers", "summarize_error"]

MAX_JSON_DEPTH = 64
"""Deeper JSON is returned as text (see ``_shape``)."""
MAX_RETRY_AFTER = 86_400.0
"""Longest wait a ``Retry-After`` is read as (a day): past that it is no retry advice an agent can follow."""

_Kind = Literal["json", "sse", "text", "binary"]
_TEXT_TYPES = frozenset(
    {
        "application/javascript",
        "application/graphql",
        "application/x-www-form-urlencoded",
        "application/yaml",
        "application/x-yaml",
    }
)
_SSE_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # not str.splitlines: it also splits on U+2028 inside data


@dataclass(frozen=True)
class Outcome:
    """What the upstream answered, already decoded and capped."""

    http_status: int | None
    """The HTTP status; None for an upstream that is not reached over HTTP (a stdio MCP server)."""
    data: Any
    """Parsed JSON, text, a list of SSE payloads, ``{"base64", "content_type", "bytes"}``, or None."""
    truncated: bool
    """True when the body was longer than ``max_bytes`` and ``data`` holds only its start."""
    content_type: str
    """The media type without parameters, lower-case (``application/json``); empty when absent."""
    binary: bool = False
    """``data`` is the ``{"base64", ...}`` shape of a binary body."""
    retry_after: float | None = None
    """Seconds from the upstream's ``Retry-After`` header (delta-seconds or an HTTP date), if any; for an
    error whose rate-limit headers say the allowance is spent, the seconds to its reset when given."""
    limit_spent: bool = False
    """An error answer whose rate-limit headers (``X-RateLimit-Remaining``, ``RateLimit-Remaining``) say
    the allowance is spent: GitHub answers a rate limit with 403, not 429."""
    challenge: Challenge | None = None
    """What a 401's or 403's ``WWW-Authenticate`` says of the token (``error``, ``error_description``)."""
    undecodable: str = ""
    """An error answer's content coding (``gzip``) whose stream was corrupt or cut: its status stands, its
    body is not there. Empty when the body was read."""
    cut_short: bool = False
    """An error answer whose body broke off before its end (shorter than its ``Content-Length``, a chunked
    stream closed before its last chunk): its status and headers stand, ``data`` is what came of it."""
    redirected_to: str | None = None
    """The path of the URL that gave this answer, when a redirect led there from the one requested."""
    error_type: str = ""
    """An error answer's ``x-amzn-ErrorType`` (AWS API Gateway, Lambda, the JSON protocols) without its
    ``:URL`` suffix or ``namespace#`` prefix: ``ThrottlingException``. Empty when absent."""


async def read_response(response: httpx2.Response, *, max_bytes: int, head: bool = False) -> Outcome:
    """Read at most ``max_bytes`` of ``response``'s (decoded) body, close it, and shape the data.

    An empty body is ``data=None`` whatever the type. A JSON body cut by the cap cannot be parsed,
    so its text prefix is returned instead (``truncated=True``); a body labelled JSON that does not
    parse is returned as text. ``head``: the answer to a HEAD, which has no body; what it is asked
    for is its headers, so a success's data is ``{"headers": …}``, the ones safe to show
    (``shown_headers``).
    """
    if head or response.status_code in _BODILESS:
        # Nothing to read (whatever the server wrote after the headers is no part of this answer).
        await _drop_connection(response)
        await response.aclose()
        status = response.status_code
        return Outcome(
            http_status=status,
            data={"headers": shown_headers(response.headers)} if head and status < 400 else None,
            truncated=False,
            content_type=_media(response.headers.get("content-type", "")),
            **_waits(response) if status >= 400 else {},
        )
    coding = response.headers.get("content-encoding")  # one look-up: most answers name none
    if coding is not None and (undecoded := _undecoded(coding.split(","))):
        await response.aclose()
        status = response.status_code
        raise UpstreamError(
            "upstream_error",
            f"The upstream answered HTTP {status} in a content encoding the gateway cannot read "
            f"({', '.join(undecoded)}): its body is withheld, since it cannot be checked for secrets. "
            + ("The call may have taken effect; check before calling again. " if status < 400 else "")
            + "The upstream should answer uncompressed, gzip or deflate, as the gateway's Accept-Encoding asks.",
            upstream_status=status,
        )
    content_type = response.headers.get("content-type", "")
    media, has_params, _ = content_type.partition(";")
    media = media.strip().lower()
    waits = _waits(response) if response.status_code >= 400 else {}
    came: list[bytes] = []
    try:
        body, truncated = await _read_capped(response, max_bytes, coding, came)
    except httpx2.DecodingError:
        if response.status_code < 400:
            raise  # a success's body is its result: without it the exchange broke
        # An error's status says most of what happened; that its body was unreadable is said beside it.
        return Outcome(response.status_code, None, False, media, undecodable=(coding or "").strip(), **waits)
    except (httpx2.RemoteProtocolError, httpx2.ReadError):
        if response.status_code < 400:
            raise
        # The status line and headers came whole (a 429's Retry-After, a 401's challenge): they say what
        # happened, and what came of the body is read as far as it goes.
        body, truncated = b"".join(came), False
        waits["cut_short"] = True
    if not body:
        return Outcome(
            http_status=response.status_code,
            data=None,
            truncated=truncated,
            content_type=media,
            **waits,
        )
    kind = _kind(media, body)
    # Only a parameter can name a charset; httpx2's parse of one goes through the email package.
    charset = response.charset_encoding if has_params else None
    data = _shape(body, truncated, kind, media, charset)
    if waits and waits["retry_after"] is None and (asked := body_retry_after(data)) is not None:
        waits["retry_after"] = min(asked, MAX_RETRY_AFTER)  # said in the body (Google's RetryInfo)
    return Outcome(
        http_status=response.status_code,
        data=data,
        truncated=truncated,
        content_type=media,
        binary=kind == "binary",
        **waits,
    )


def _waits(response: httpx2.Response) -> dict[str, Any]:
    """An error answer's ``retry_after``, ``limit_spent`` and ``challenge`` (``Outcome``)."""
    headers = response.headers
    retry_after = parse_retry_after(headers.get("retry-after"))
    remaining = headers.get("x-ratelimit-remaining") or headers.get("ratelimit-remaining")
    spent = remaining is not None and remaining.strip() == "0"
    if spent and retry_after is None:
        reset = (headers.get("x-ratelimit-reset") or headers.get("ratelimit-reset") or "").strip()
        if reset.isdigit():
            # An epoch time (GitHub's X-RateLimit-Reset), or seconds from now (the IETF draft's RateLimit-Reset).
            seconds = int(reset) - time.time() if int(reset) > 10**9 else float(reset)
            retry_after = parse_retry_after(str(max(0, math.ceil(seconds))))
    challenge = Challenge.parse(headers.get("www-authenticate")) if response.status_code in (401, 403) else None
    error_type = error_type_of(headers.get("x-amzn-errortype"))
    return {"retry_after": retry_after, "limit_spent": spent, "challenge": challenge, "error_type": error_type}


_BODILESS = frozenset({204, 304})
"""Statuses whose answers have no body whatever they announce (RFC 9110 6.4.1), like a HEAD's."""


async def _drop_connection(response: httpx2.Response) -> None:
    """Close the connection an answer without a body came on, so the pool does not use it again.

    A server that writes a body after a 204, a 304 or a HEAD's headers leaves those bytes on the
    connection, where the HTTP client reads them as the answer to the next request sent on it, a
    request of another call, maybe another connector's. Closed here, while this answer still holds
    it, the connection is found closed and replaced when the pool next picks it.
    """
    stream = response.extensions.get("network_stream")
    if stream is None:
        return
    try:
        await stream.aclose()
    except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # already gone: nothing left to reuse


def _media(content_type: str) -> str:
    return content_type.partition(";")[0].strip().lower()


_UNSHOWN_HEADERS = frozenset(
    {
        "set-cookie",
        "set-cookie2",
        "www-authenticate",
        "proxy-authenticate",
        "authentication-info",
        "proxy-authentication-info",
        # A redirect target's or refresh's URL can carry a token in its query.
        "location",
        "content-location",
        "refresh",
        # How the connection was carried, not what the resource is.
        "connection",
        "keep-alive",
        "transfer-encoding",
        "upgrade",
    }
)


def shown_headers(headers: httpx2.Headers) -> dict[str, str]:
    """The headers of an answer an agent may read (lower-case names, repeated ones joined with ", "):
    never a cookie, an authentication challenge, a URL the upstream points to, nor any header whose
    name says it carries a credential or a session (``X-Auth-Token``, ``X-Session-Id``). Their values
    still pass the call's redaction, like a body."""
    shown: dict[str, str] = {}
    for name, value in headers.multi_items():
        name = name.lower()
        if name in _UNSHOWN_HEADERS or credential_name(name) or "session" in name:
            continue
        shown[name] = f"{shown[name]}, {value}" if name in shown else value
    return shown


def _undecoded(codings: list[str]) -> list[str]:
    """The content codings of an answer that httpx2 left as they came (it skips any it has no decoder
    for, ``x-gzip`` included): their bytes hide every form of a secret from the redactor."""
    return [coding for coding in (c.strip().lower() for c in codings) if coding and coding not in _decoded()]


@functools.cache
def _decoded() -> frozenset[str]:
    """The content codings httpx2 decodes here: gzip and deflate always, br and zstd with their modules."""
    found = {"identity", "gzip", "deflate"}
    if _importable("brotli") or _importable("brotlicffi"):
        found.add("br")
    if sys.version_info >= (3, 14) or _importable("backports.zstd"):
        found.add("zstd")
    return frozenset(found)


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # its parent package is missing
        return False


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds from now, between 0 and ``MAX_RETRY_AFTER``; None when absent or
    unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # not str.isdigit alone: "²" is a digit to it
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value)
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.UTC)
        wait = (when - datetime.datetime.now(datetime.UTC)).total_seconds()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return min(max(0.0, wait), MAX_RETRY_AFTER)


async def _read_capped(
    response: httpx2.Response, max_bytes: int, coding: str | None, chunks: list[bytes]
) -> tuple[bytes, bool]:
    """The body (at most ``max_bytes``) and whether it was longer; ``chunks`` holds what came so far when the
    stream breaks off."""
    size = 0
    # A response already read (built in memory) holds its body decoded by httpx2.
    inflater = None if response.is_stream_consumed else _inflater(coding)
    try:
        if inflater is None:
            async for chunk in response.aiter_bytes():
                chunks.append(chunk)
                size += len(chunk)
                if size > max_bytes:
                    return b"".join(chunks)[:max_bytes], True
        else:
            async for raw in response.aiter_raw():
                for chunk in inflater.decode(raw):
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > max_bytes:
                        return b"".join(chunks)[:max_bytes], True
            # The cap was not reached, so the whole stream came: it must have reached its end.
            chunks.extend(inflater.finish())
            if sum(map(len, chunks)) > max_bytes:
                return b"".join(chunks)[:max_bytes], True
    finally:
        # Stopping early leaves bytes on the connection; closing drops it instead of reusing it.
        await response.aclose()
    return b"".join(chunks), False


def _inflater(coding: str | None) -> Inflater | None:
    """Our own decoder for gzip and deflate (``content_coding``: it knows a cut stream); None for an
    answer httpx2 decodes (no coding, or one of br or zstd among them)."""
    if coding is None:
        return None
    codings = [c.strip().lower() for c in coding.split(",")]
    codings = [c for c in codings if c]
    if not codings or not INFLATED_CODINGS.issuperset(codings) or codings == ["identity"]:
        return None
    return Inflater(codings)


def _kind(media: str, body: bytes) -> _Kind:
    if media == "text/event-stream":
        return "sse"
    if media.endswith("json"):  # application/json, application/problem+json, text/json
        return "json"
    if media.startswith("text/") or media.endswith("xml") or media in _TEXT_TYPES:
        return "text"
    if not media:
        # No label: decide by looking. Text (UTF-8, or UTF-16 after its byte order mark) that parses as JSON
        # is JSON; other text is text.
        try:
            body.decode("utf-16" if body[:2] in _UTF16_BOMS else "utf-8")
        except UnicodeDecodeError:
            return "binary"
        return "json"
    return "binary"


def _shape(body: bytes, truncated: bool, kind: _Kind, media: str, charset: str | None) -> Any:
    if kind == "binary":
        return {
            "base64": base64.b64encode(body).decode("ascii"),
            "content_type": media or "application/octet-stream",
            "bytes": len(body),
        }
    text = _decode(body, charset, final=not truncated, media=media)
    if kind == "sse":
        return _sse_payloads(text, complete=not truncated)
    if kind == "json" and not truncated:
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            return text  # labelled JSON but is not: the text itself is still the best answer
        # Absurdly nested JSON would exhaust the recursion of every later walk (redaction,
        # projection, serialization); as text it is still the upstream's answer.
        return text if _too_deep(text, parsed) else parsed
    return text


def _too_deep(text: str, parsed: Any) -> bool:
    """``parsed`` (the JSON in ``text``) nests deeper than ``MAX_JSON_DEPTH``. Each level opens with
    a bracket of the text, so a text with fewer brackets than that cannot, and is not walked."""
    if text.count("{") + text.count("[") <= MAX_JSON_DEPTH:
        return False
    return _deeper_than(parsed, MAX_JSON_DEPTH)


def _deeper_than(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _decode(body: bytes, charset: str | None, *, final: bool, media: str = "") -> str:
    if not charset and media in _HTML_TYPES:
        charset = _meta_charset(body)  # an HTML page's own label (HTML Living Standard 13.2.3.2)
    try:
        text = _read_as(body, _reading(body, charset, final=final), final=final)
    except (LookupError, UnicodeError, ValueError, TypeError):  # an invented name, or a codec that refuses
        text = _read_as(body, "utf-8", final=final)
    return text.removeprefix("\ufeff")


def _read_as(body: bytes, encoding: str, *, final: bool) -> str:
    if final:
        return body.decode(encoding, errors="replace")
    # final=False holds back a multi-byte character cut in half by the cap instead of mangling it.
    return codecs.getincrementaldecoder(encoding)(errors="replace").decode(body, final=False)


_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
"""The byte order marks that say a body is UTF-16 (the ``utf-16`` codec reads either and drops it)."""

_PROBE = bytes(range(0x20, 0x7F))
"""Printable ASCII: what a charset label must read as itself to be taken at its word."""


def _reading(body: bytes, charset: str | None, *, final: bool = True) -> str:
    """The encoding ``body`` is read with: its label, unless the label is one ASCII text does not survive
    (UTF-16, EBCDIC, punycode...) and the bytes hold a secret the process has opened as plain ASCII: read
    as labelled, that secret would reach the agent as other characters that encode back to it. Without a
    label, UTF-8, or Windows-1252 when the bytes are no UTF-8 (WHATWG Encoding's default for unlabelled
    text: its smart quotes and dashes stay readable, and ASCII, an echoed secret too, stays as it is)."""
    label = charset.strip().lower() if charset else ""
    if body[:2] in _UTF16_BOMS:
        label = "utf-16"  # a byte order mark outranks any label (WHATWG Encoding's BOM sniffing)
    if not label or not _text_codec(label):  # none, or one of bytes to bytes (base64, hex) or none at all
        return "utf-8" if _utf8(body, final=final) or _hides_a_secret(body) else "cp1252"
    if _keeps_ascii(label):
        return label
    known = known_secrets()
    if known:
        raw = body.decode("latin-1")  # one character per byte: an ASCII secret shows as itself
        if known.redact(raw) != raw:
            return "utf-8"
    return label


def _hides_a_secret(body: bytes) -> bool:
    """Read as UTF-8, ``body`` holds a secret the process has opened, perhaps with an invalid byte slipped
    into it: that byte becomes U+FFFD, which the redactor looks through; as a Windows-1252 letter it would
    split the secret into parts that are no form of it."""
    known = known_secrets()
    if not known:
        return False
    text = body.decode("utf-8", errors="replace")
    return known.redact(text) != text


def _utf8(body: bytes, *, final: bool) -> bool:
    """``body`` is UTF-8 (its end may be cut inside a character when not ``final``)."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(body, final=final)
    except UnicodeDecodeError:
        return False
    return True


_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_META_CHARSET = re.compile(rb"""<meta\b[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.I)


def _meta_charset(body: bytes) -> str | None:
    """The charset an HTML page's ``<meta charset>`` or ``http-equiv`` content names in its first 1024
    bytes, where the HTML prescan looks; None when there is none."""
    found = _META_CHARSET.search(body[:1024])
    if found is None:
        return None
    label = found.group(1).decode("ascii")
    # A page whose markup could be read as ASCII to find the label is not UTF-16, whatever it says (the spec's rule).
    return "utf-8" if label.lower().replace("_", "-").startswith("utf-16") else label


@functools.lru_cache(maxsize=64)
def _text_codec(charset: str) -> bool:
    try:
        b"0".decode(charset, errors="ignore")  # bytes.decode takes text encodings only
    except LookupError:
        return False
    except (UnicodeError, ValueError, TypeError):
        pass  # a text codec all the same (``undefined`` refuses everything): _decode falls back
    return True


@functools.lru_cache(maxsize=64)
def _keeps_ascii(charset: str) -> bool:
    try:
        return _PROBE.decode(charset) == _PROBE.decode("ascii")
    except (LookupError, UnicodeError, ValueError, TypeError):
        return False


def _sse_payloads(text: str, *, complete: bool) -> list[Any]:
    """The ``data:`` payload of each event (HTML Living Standard 9.2.6), JSON-parsed when possible.

    A cut stream's last event may be partial, so it is dropped; a complete stream's last event is
    kept even without the closing blank line, as lenient servers omit it.
    """
    payloads: list[Any] = []
    data: list[str] = []

    def dispatch() -> None:
        if data:
            payload = "\n".join(data)
            try:
                parsed = json.loads(payload)
            except (ValueError, RecursionError):
                payloads.append(payload)
            else:
                payloads.append(payload if _too_deep(payload, parsed) else parsed)
            data.clear()

    for line in _SSE_LINE_BREAK.split(text):
        if not line:
            dispatch()
        elif line == "data" or line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
        # event:, id:, retry: and ":" comments carry nothing the agent needs.
    if complete:
        dispatch()
    return payloads


# -- error summaries -------------------------------------------------------------------------


def said(text: object, *redacts: Redacts, max_chars: int = MAX_UPSTREAM_TEXT) -> Screened:
    """What an upstream said, screened (``upstream_text.screen``) with ``redacts`` and every secret
    this process has opened: the connector's own credential among them, however it was sent (a
    header, a token request, a stdio child's environment). ``max_chars``: more for a message of its
    own (``upstream_message``) than for one quoted inside the gateway's sentence."""
    return screen(text, *redacts, known_secrets().redact, max_chars=max_chars)
