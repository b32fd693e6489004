"""AWS Signature Version 4: AWS's published example, and byte-for-byte agreement with botocore."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import botocore.auth
import httpx2
import pytest
from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from pydantic import TypeAdapter

from mcp_gateway.auth import LastMeterAuth, apply_auth
from mcp_gateway.auth.sigv4 import canonical_request, signing_key
from mcp_gateway.manifest import AuthConfig, AwsSigV4Auth
from mcp_gateway.primitives.secrets import SecretValue
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.errors import CredentialError
from tests.support.sealed import sealed_credential

CANARY = "canary-7f3a9c1e-never-show-me"
AUTH = TypeAdapter(AuthConfig)
WHEN = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
AKID = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def botocore_at_when(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore reads the time itself (naive UTC); fix it to the instant our clock gives."""
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: WHEN.replace(tzinfo=None))


def sigv4(**data: Any) -> AwsSigV4Auth:
    config = AUTH.validate_python({"type": "aws_sigv4", **data})
    assert isinstance(config, AwsSigV4Auth)
    return config


def secret(token: str | None = None) -> SecretValue:
    value = {"access_key_id": AKID, "secret_access_key": SECRET_KEY}
    return SecretValue({**value, "session_token": token} if token else value)


# -- AWS's own published example ----------------------------------------------------------------


def test_aws_documented_signing_key() -> None:
    """AWS's "derive a signing key" example (IAM, us-east-1, 2015-08-30)."""
    key = signing_key(SECRET_KEY, "20150830", "us-east-1", "iam")
    assert key.hex() == "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9"


def test_aws_documented_iam_list_users_request() -> None:
    """AWS's worked example of a signed GET (IAM ListUsers): the canonical request and the signature."""
    url = "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08"
    content_type = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    dated = httpx2.Request("GET", url, headers={**content_type, "X-Amz-Date": "20150830T123600Z"})
    canonical, signed = canonical_request(dated, hashlib.sha256(b"").hexdigest())
    assert canonical == (
        "GET\n/\nAction=ListUsers&Version=2010-05-08\n"
        "content-type:application/x-www-form-urlencoded; charset=utf-8\nhost:iam.amazonaws.com\n"
        "x-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
    assert signed == "content-type;host;x-amz-date"
    assert hashlib.sha256(canonical.encode()).hexdigest() == (
        "f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59"
    )
    r = httpx2.Request("GET", url, headers=content_type)
    at = FixedClock(datetime(2015, 8, 30, 12, 36, tzinfo=UTC))
    apply_auth(r, sigv4(service="iam", region="us-east-1"), secret(), clock=at)
    assert r.headers["X-Amz-Date"] == "20150830T123600Z"
    assert r.headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date, "
        "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
    )


# -- byte for byte against botocore ----------------------------------------------------------------

CASES: list[dict[str, Any]] = [
    # A GET with a query: repeated names, reserved characters, an empty value, unsorted.
    {
        "id": "get-query",
        "service": "execute-api",
        "method": "GET",
        "url": "https://abc123.execute-api.eu-west-1.amazonaws.com/prod/items?limit=10&tag=b&tag=a&q=caf%C3%A9%20%2B%26&e=",
    },
    # A POST with a JSON body, temporary credentials.
    {
        "id": "post-json",
        "service": "dynamodb",
        "method": "POST",
        "url": "https://dynamodb.eu-west-1.amazonaws.com/",
        "headers": {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.GetItem"},
        "body": b'{"TableName": "caf\xc3\xa9", "Key": {"id": {"S": "1"}}}',
        "token": "FQoGZXIvYXdzEJr//////////wEaDOr+/sessiontoken==",
    },
    # A path with spaces and unicode: escaped once on the wire, twice in the canonical request.
    {
        "id": "path-spaces-unicode",
        "service": "execute-api",
        "method": "GET",
        "url": "https://api.example.com/prod/my docs/naïve résumé (1).txt?x=1",
    },
    # S3: the same path signed as sent (once escaped), and the payload hash in X-Amz-Content-SHA256.
    {
        "id": "s3-path-spaces-unicode",
        "service": "s3",
        "method": "PUT",
        "url": "https://bucket.s3.eu-west-1.amazonaws.com/my docs/naïve résumé.txt",
        "headers": {"Content-Type": "text/plain; charset=utf-8"},
        "body": "héllo wörld".encode(),
        "token": "s3-session-token",
    },
    {
        "id": "s3-unsigned-payload",
        "service": "s3",
        "method": "PUT",
        "url": "https://bucket.s3.amazonaws.com/big.bin",
        "headers": {"Content-Type": "application/octet-stream"},
        "body": b"\x00\x01\x02" * 100,
        "unsigned": True,
    },
    {
        "id": "unsigned-payload",
        "service": "lambda",
        "method": "POST",
        "url": "https://lambda.eu-west-1.amazonaws.com/2015-03-31/functions/f/invocations",
        "headers": {"Content-Type": "application/json"},
        "body": b"{}",
        "unsigned": True,
    },
    # Over plain http the body is signed even when unsigned_payload is set: what botocore signs for
    # a signed payload ("always signed over insecure connections", its _should_sha256_sign_payload).
    {
        "id": "unsigned-over-http-is-signed",
        "service": "execute-api",
        "method": "POST",
        "url": "http://127.0.0.1:8080/prod/items",
        "headers": {"Content-Type": "application/json"},
        "body": b'{"a": 1}',
        "unsigned": True,
        "reference_unsigned": False,
    },
    # A Date header already present carries the signing time instead of X-Amz-Date.
    {
        "id": "date-header",
        "service": "sts",
        "method": "GET",
        "url": "https://sts.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
        "headers": {"Date": "Thu, 01 Jan 2026 00:00:00 GMT", "User-Agent": "not-signed/1.0"},
    },
    # Empty segments and whitespace that the canonical forms normalize.
    {
        "id": "double-slash-and-spaces-in-headers",
        "service": "es",
        "method": "GET",
        "url": "https://search.example.com//index//_search?q=a",
        "headers": {"X-Custom": "  several   spaces  inside  "},
    },
]


@pytest.mark.usefixtures("botocore_at_when")
@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_headers_equal_botocore(case: dict[str, Any]) -> None:
    body: bytes = case.get("body", b"")
    ours = httpx2.Request(case["method"], case["url"], headers=case.get("headers", {}), content=body)
    unsigned_headers = dict(ours.headers)
    apply_auth(
        ours,
        sigv4(service=case["service"], region="eu-west-1", unsigned_payload=case.get("unsigned", False)),
        secret(case.get("token")),
        clock=FixedClock(WHEN),
    )

    # botocore signs the same final request: the URL as httpx2 escaped it, the same headers and body.
    theirs = AWSRequest(method=case["method"], url=str(ours.url), headers=unsigned_headers, data=body)
    if case.get("reference_unsigned", case.get("unsigned")):
        theirs.context["payload_signing_enabled"] = False
        theirs.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    signer = S3SigV4Auth if case["service"] == "s3" else SigV4Auth
    signer(Credentials(AKID, SECRET_KEY, case.get("token")), case["service"], "eu-west-1").add_auth(theirs)

    for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token", "X-Amz-Content-SHA256", "Date"):
        assert ours.headers.get(name) == theirs.headers.get(name), name


def test_path_spaces_unicode_on_the_wire_and_in_the_canonical_request() -> None:
    r = httpx2.Request("GET", "https://api.example.com/prod/my docs/naïve.txt")
    apply_auth(r, sigv4(service="execute-api", region="eu-west-1"), secret(), clock=FixedClock(WHEN))
    assert r.url.raw_path == b"/prod/my%20docs/na%C3%AFve.txt"
    canonical, _ = canonical_request(r, "x")
    assert canonical.split("\n")[1] == "/prod/my%2520docs/na%25C3%25AFve.txt"
    s3, _ = canonical_request(r, "x", s3=True)
    assert s3.split("\n")[1] == "/prod/my%20docs/na%C3%AFve.txt"


def test_query_signs_as_aws_recomputes_it_however_it_is_spelled() -> None:
    """AWS decodes the query and re-escapes it: a ',' or '*' sent raw signs as %2C / %2A, as the server sees it."""
    raw = httpx2.Request("GET", "https://api.test/x?b=1,2&a=*")
    escaped = httpx2.Request("GET", "https://api.test/x?b=1%2C2&a=%2A")
    assert canonical_request(raw, "x")[0].split("\n")[2] == "a=%2A&b=1%2C2"
    assert canonical_request(raw, "x")[0].split("\n")[2] == canonical_request(escaped, "x")[0].split("\n")[2]


def test_replaces_agent_supplied_signing_headers() -> None:
    r = httpx2.Request(
        "GET",
        "https://api.test/x",
        headers={"Authorization": "forged", "X-Amz-Security-Token": "forged", "X-Amz-Content-SHA256": "forged"},
    )
    apply_auth(r, sigv4(service="execute-api", region="eu-west-1"), secret(), clock=FixedClock(WHEN))
    assert r.headers["Authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260304/")
    assert "X-Amz-Security-Token" not in r.headers and "X-Amz-Content-SHA256" not in r.headers


def test_wrong_secrets_never_show_the_secret() -> None:
    config = sigv4(service="s3", region="us-east-1")
    with pytest.raises(CredentialError, match="'access_key_id'") as info:
        apply_auth(httpx2.Request("GET", "https://s3.test/"), config, SecretValue({"secret_access_key": CANARY}))
    assert CANARY not in str(info.value)
    bad_token = SecretValue({"access_key_id": AKID, "secret_access_key": CANARY, "session_token": "a\r\nX-Evil: 1"})
    with pytest.raises(CredentialError, match="line break") as info:
        apply_auth(httpx2.Request("GET", "https://s3.test/"), config, bad_token)
    assert CANARY not in str(info.value)


def test_manifest_refuses_a_malformed_scope() -> None:
    with pytest.raises(ValueError, match="region"):
        sigv4(service="s3", region="us east 1")


@pytest.mark.anyio
async def test_last_meter_signs_what_is_sent_and_botocore_verifies_it() -> None:
    """The upstream recomputes the signature with botocore from the request it received."""
    seen: list[str] = []

    def upstream(request: httpx2.Request) -> httpx2.Response:
        authorization = request.headers["Authorization"]
        signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
        received = AWSRequest(
            method=request.method,
            url=str(request.url),
            headers={name: request.headers[name] for name in signed},
            data=request.content,
        )
        received.context["timestamp"] = request.headers["X-Amz-Date"]
        signer = SigV4Auth(Credentials(AKID, SECRET_KEY, CANARY), "execute-api", "eu-west-1")
        canonical = signer.canonical_request(received)
        expected = signer.signature(signer.string_to_sign(received, canonical), received)
        seen.append(authorization)
        ok = authorization.endswith(f"Signature={expected}") and request.headers["X-Amz-Security-Token"] == CANARY
        return httpx2.Response(200 if ok else 403)

    sealed = await sealed_credential(
        "aws", {"access_key_id": AKID, "secret_access_key": SECRET_KEY, "session_token": CANARY}
    )
    auth = LastMeterAuth(sigv4(service="execute-api", region="eu-west-1"), sealed, clock=FixedClock(WHEN))
    assert auth.requires_request_body
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream)) as client:
        response = await client.post("https://api.test/prod/items/a b?z=1&a=2", json={"name": "é"}, auth=auth)
    assert response.status_code == 200 and len(seen) == 1
