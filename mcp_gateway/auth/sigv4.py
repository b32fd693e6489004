"""``aws_sigv4``: AWS Signature Version 4 over the final request, in the Authorization header.

The steps are AWS's, and each matches botocore's ``SigV4Auth`` (``S3SigV4Auth`` for ``s3``), which
the tests hold it against byte for byte:

1. ``X-Amz-Date`` (or a ``Date`` header already present, rewritten to the signing time), and
   ``X-Amz-Security-Token`` for temporary credentials;
2. the canonical request: method, canonical path (dot segments removed and escaped once more, except
   for S3, which signs the path as sent), canonical query (every name and value escaped the RFC 3986
   way, sorted), every header except hop-by-hop ones and ``User-Agent`` (names lower-cased, values
   trimmed), the signed header names, and the payload hash;
3. the string to sign, keyed by the derived signing key (date, region, service, ``aws4_request``).

The payload hash is the body's SHA-256, or ``UNSIGNED-PAYLOAD`` when the manifest asks and the URL
is https: over plain http the body is always signed, the rule botocore's ``_should_sha256_sign_payload``
states (botocore itself skips it when its caller sets the header). S3 also gets the hash in
``X-Amz-Content-SHA256``.
"""

from __future__ import annotations

import hashlib
import hmac
from calendar import timegm
from datetime import UTC, datetime
from email.utils import formatdate
from urllib.parse import quote, unquote_to_bytes

import httpx2

from ..manifest import AwsSigV4Auth
from ..primitives.secrets import SecretValue
from ._base import check_header_value, request_body, secret_fields

__all__ = ["UNSIGNED_PAYLOAD", "apply_sigv4", "canonical_request", "signing_key", "string_to_sign"]

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
# Never signed: hop-by-hop headers a proxy may rewrite, and ones clients change freely (botocore's list).
_UNSIGNED_HEADERS = frozenset(
    {
        "connection",
        "expect",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "x-amzn-trace-id",
    }
)
# RFC 3986 unreserved characters: AWS escapes everything else, space as %20.
_UNRESERVED = "-_.~"


def apply_sigv4(request: httpx2.Request, config: AwsSigV4Auth, secret: SecretValue, *, now: datetime) -> None:
    """Sign ``request`` in place: date and token headers, then ``Authorization``.

    Raises:
        CredentialError: the secret is not the aws_sigv4 JSON shape, or a value cannot go in a header.
    """
    fields = secret_fields("aws_sigv4", secret, ("access_key_id", "secret_access_key"))
    amz_date = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    headers = request.headers
    headers.pop("Authorization", None)
    if "Date" in headers:
        # Either date header may carry the signing time; keep the one the request already has.
        headers["Date"] = formatdate(timegm(now.astimezone(UTC).timetuple()))
        headers.pop("X-Amz-Date", None)
    else:
        headers["X-Amz-Date"] = amz_date
    headers.pop("X-Amz-Security-Token", None)
    if fields.get("session_token"):
        headers["X-Amz-Security-Token"] = check_header_value(
            "aws_sigv4", "the X-Amz-Security-Token header", fields["session_token"]
        )
    payload = _payload_hash(request, config)
    headers.pop("X-Amz-Content-SHA256", None)
    if config.service == "s3" or payload == UNSIGNED_PAYLOAD:
        headers["X-Amz-Content-SHA256"] = payload
    canonical, signed_headers = canonical_request(request, payload, s3=config.service == "s3")
    scope = f"{amz_date[:8]}/{config.region}/{config.service}/aws4_request"
    key = signing_key(fields["secret_access_key"], amz_date[:8], config.region, config.service)
    signature = hmac.new(key, string_to_sign(amz_date, scope, canonical).encode("utf-8"), hashlib.sha256).hexdigest()
    credential = check_header_value("aws_sigv4", "the Authorization header", fields["access_key_id"])
    headers["Authorization"] = (
        f"{ALGORITHM} Credential={credential}/{scope}, SignedHeaders={signed_headers}, Signature={signature}"
    )


def canonical_request(request: httpx2.Request, payload_hash: str, *, s3: bool = False) -> tuple[str, str]:
    """The canonical request and its signed-header list (``host;x-amz-date;...``)."""
    raw_path, _, raw_query = request.url.raw_path.decode("ascii").partition("?")
    headers = _headers_to_sign(request)
    names = sorted(headers)
    lines = [
        request.method.upper(),
        _canonical_path(raw_path, s3=s3),
        _canonical_query(raw_query),
        "".join(f"{name}:{','.join(headers[name])}\n" for name in names),
        ";".join(names),
        payload_hash,
    ]
    return "\n".join(lines), ";".join(names)


def string_to_sign(amz_date: str, scope: str, canonical: str) -> str:
    return "\n".join((ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode("utf-8")).hexdigest()))


def signing_key(secret_access_key: str, date: str, region: str, service: str) -> bytes:
    """``kSigning``: HMAC chain of the date (YYYYMMDD), region, service and ``aws4_request``."""
    key = f"AWS4{secret_access_key}".encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode("utf-8"), hashlib.sha256).digest()
    return key


def _payload_hash(request: httpx2.Request, config: AwsSigV4Auth) -> str:
    if config.unsigned_payload and request.url.scheme == "https":
        return UNSIGNED_PAYLOAD
    return hashlib.sha256(request_body(request)).hexdigest()


def _headers_to_sign(request: httpx2.Request) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in request.headers.multi_items():
        lname = name.lower()
        if lname not in _UNSIGNED_HEADERS:
            # Trimall: no leading or trailing spaces, inner runs of whitespace as one space.
            out.setdefault(lname, []).append(" ".join(value.split()))
    if "host" not in out:  # httpx2 always sets Host; kept for requests built by hand
        out["host"] = [request.url.netloc.decode("ascii")]
    return out


def _canonical_path(raw_path: str, *, s3: bool) -> str:
    if s3:
        return raw_path or "/"
    # Every service but S3 signs the path normalized and escaped a second time (a %20 signs as %2520).
    return quote(_remove_dot_segments(raw_path or "/"), safe="/~")


def _remove_dot_segments(path: str) -> str:
    # RFC 3986 section 5.2.4, plus AWS's collapsing of empty segments (``//``).
    out: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if out:
                out.pop()
        elif segment and segment != ".":
            out.append(segment)
    first = "/" if path.startswith("/") else ""
    last = "/" if path.endswith("/") and out else ""
    return first + "/".join(out) + last


def _canonical_query(raw_query: str) -> str:
    # Decode then re-escape each name and value, so the query signs the same however the URL spelled
    # it (``,`` or ``%2C``); ``build_request`` already writes queries this way, so this changes nothing
    # there. ``+`` stays a literal plus: it is only a space in form bodies.
    pairs: list[tuple[str, str]] = []
    for item in raw_query.split("&"):
        if not item:
            continue
        name, _, value = item.partition("=")
        pairs.append((_escape(name), _escape(value)))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def _escape(text: str) -> str:
    # Through bytes: an escape that is not UTF-8 (%FF) must come back out unchanged, not as U+FFFD.
    return quote(unquote_to_bytes(text), safe=_UNRESERVED)
