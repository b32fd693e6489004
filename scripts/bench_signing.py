"""What each credential kind costs per request, and what the references cost for the same work.

For every kind, the time to put the credential on one representative request (``apply_auth`` on
an ``httpx2.Request``, the secret already opened), and, beside it, the reference library doing
the same signature (oauthlib ``Client.sign``; botocore ``SigV4Auth.add_auth`` on an ``AWSRequest``):

    bearer          the floor: one header
    oauth1          HMAC-SHA1 and HMAC-SHA256, a GET with a query and a POST with a JSON body
    aws_sigv4       a GET with a query, a POST with a 1 KiB and a 1 MiB JSON body
    hmac            GitHub-style (body) and Slack-style (template with a timestamp)
    mtls            building the client's SSL context from the stored PEM (once per credential,
                    then cached), and opening the sealed credential (AES-GCM) for comparison

Usage (from the repo root): python scripts/bench_signing.py [--n 5000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import trustme
from pydantic import TypeAdapter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout, not an installed copy

from mcp_gateway.auth import apply_auth
from mcp_gateway.auth.mtls import client_tls_context
from mcp_gateway.manifest import AuthConfig
from mcp_gateway.primitives.secrets import SecretValue
from mcp_gateway.vocabulary.clock import FixedClock

AUTH = TypeAdapter(AuthConfig)
CLOCK = FixedClock(datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC))
OAUTH1 = {"consumer_key": "ck" * 10, "consumer_secret": "cs" * 10, "token": "tk" * 10, "token_secret": "ts" * 10}
AWS = {"access_key_id": "AKIDEXAMPLE", "secret_access_key": "s" * 40, "session_token": "t" * 300}
QUERY_URL = "https://api.example.com/v1/items/na%C3%AFve%20file?limit=10&q=caf%C3%A9&tag=b&tag=a"


def _time(fn: Callable[[], Any], n: int) -> float:
    """Median of 5 batches, microseconds per call."""
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n // 5):
            fn()
        batches.append((time.perf_counter() - start) / (n // 5) * 1e6)
    return statistics.median(batches)


def _ours(config: dict[str, Any], secret: str | dict[str, str], method: str, url: str, body: bytes = b"") -> Callable:
    cfg, value = AUTH.validate_python(config), SecretValue(secret)
    headers = {"Content-Type": "application/json"} if body else {}

    def run() -> None:
        request = httpx2.Request(method, url, headers=headers, content=body)
        apply_auth(request, cfg, value, clock=CLOCK, nonce=lambda: "n" * 30)

    return run


def _baseline(method: str, url: str, body: bytes = b"") -> Callable:
    headers = {"Content-Type": "application/json"} if body else {}
    return lambda: httpx2.Request(method, url, headers=headers, content=body)


def _oauthlib(method_name: str, method: str, url: str, body: bytes = b"") -> Callable:
    from oauthlib.oauth1 import Client

    client = Client(
        OAUTH1["consumer_key"],
        client_secret=OAUTH1["consumer_secret"],
        resource_owner_key=OAUTH1["token"],
        resource_owner_secret=OAUTH1["token_secret"],
        signature_method=method_name,
        nonce="n" * 30,
        timestamp="1772600767",
    )
    headers = {"Content-Type": "application/json"} if body else {}
    return lambda: client.sign(url, method, body=body.decode() or None, headers=headers)


def _botocore(method: str, url: str, body: bytes = b"") -> Callable:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    signer = SigV4Auth(
        Credentials(AWS["access_key_id"], AWS["secret_access_key"], AWS["session_token"]), "s3", "us-east-1"
    )
    headers = {"Content-Type": "application/json"} if body else {}
    return lambda: signer.add_auth(AWSRequest(method=method, url=url, headers=headers, data=body))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5000)
    n = parser.parse_args().n
    small = json.dumps({"name": "x" * 1000}).encode()
    large = json.dumps({"data": "x" * (1 << 20)}).encode()
    sigv4 = {"type": "aws_sigv4", "service": "execute-api", "region": "eu-west-1"}
    rows: list[tuple[str, Callable, Callable | None]] = [
        ("request construction only (baseline)", _baseline("GET", QUERY_URL), None),
        ("bearer", _ours({"type": "bearer"}, "t" * 40, "GET", QUERY_URL), None),
        (
            "oauth1 HMAC-SHA1, GET + query",
            _ours({"type": "oauth1"}, OAUTH1, "GET", QUERY_URL),
            _oauthlib("HMAC-SHA1", "GET", QUERY_URL),
        ),
        (
            "oauth1 HMAC-SHA256, POST 1 KiB JSON",
            _ours({"type": "oauth1", "signature_method": "HMAC-SHA256"}, OAUTH1, "POST", QUERY_URL, small),
            _oauthlib("HMAC-SHA256", "POST", QUERY_URL, small),
        ),
        ("aws_sigv4, GET + query", _ours(sigv4, AWS, "GET", QUERY_URL), _botocore("GET", QUERY_URL)),
        (
            "aws_sigv4, POST 1 KiB JSON",
            _ours(sigv4, AWS, "POST", QUERY_URL, small),
            _botocore("POST", QUERY_URL, small),
        ),
        (
            "aws_sigv4, POST 1 MiB JSON",
            _ours(sigv4, AWS, "POST", QUERY_URL, large),
            _botocore("POST", QUERY_URL, large),
        ),
        (
            "hmac body (GitHub-style), 1 KiB",
            _ours({"type": "hmac", "prefix": "sha256="}, "k" * 32, "POST", QUERY_URL, small),
            None,
        ),
        (
            "hmac template + timestamp (Slack-style), 1 KiB",
            _ours(
                {"type": "hmac", "template": "v0:{timestamp}:{body}", "timestamp_header": "X-Ts"},
                "k" * 32,
                "POST",
                QUERY_URL,
                small,
            ),
            None,
        ),
    ]
    print(f"{'per request':<48} {'ours µs':>9} {'reference µs':>13}")
    for label, ours, reference in rows:
        counted = n if "1 MiB" not in label else max(50, n // 100)
        ref = f"{_time(reference, counted):13.1f}" if reference else f"{'-':>13}"
        print(f"{label:<48} {_time(ours, counted):9.1f} {ref}")

    ca = trustme.CA()
    leaf = ca.issue_cert("client@bench.test")
    secret = SecretValue(
        {"cert_pem": leaf.cert_chain_pems[0].bytes().decode(), "key_pem": leaf.private_key_pem.bytes().decode()}
    )
    print()
    print(f"{'mtls (once per credential, then cached)':<48} {'µs':>9}")
    for label, in_memory in (("SSL context from PEM, memfd", True), ("SSL context from PEM, 0600 temp file", False)):
        print(f"{label:<48} {_time(lambda m=in_memory: client_tls_context(secret, in_memory=m), 200):9.1f}")


if __name__ == "__main__":
    main()
