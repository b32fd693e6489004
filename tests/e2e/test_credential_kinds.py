"""The signing and transport credential kinds end to end: ``oauth1``, ``aws_sigv4``, ``hmac``, ``mtls``.

The gateway runs as a subprocess (``python -m mcp_gateway serve``) reached by the official MCP SDK
client over stdio; secrets go in with ``mcp-gateway secret set`` (JSON on stdin for multi-field
kinds). The upstream on 127.0.0.1 verifies every signature itself, with the reference library and
never with our code: oauthlib's ``SignatureOnlyEndpoint`` for OAuth 1, botocore's ``SigV4Auth`` for
SigV4, stdlib ``hmac`` over the recipe written out by hand. The mTLS upstream is a TLS server that
requires a client certificate from its CA; a second connector holds a certificate from another CA.

Every secret carries the canary marker, and the tokens that do travel (the OAuth token, the AWS
session token) are echoed back by the upstream: afterwards the marker must appear in no tool
result, no CLI output, no log, no audit row and nowhere in the state directory's raw bytes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import ssl
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trustme
from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from oauthlib.oauth1 import RequestValidator, SignatureOnlyEndpoint

from tests.support.env import child_env
from tests.support.upstream import EchoApp, LoopbackServer, RecordedRequest, echo_app

from .conftest import GatewayEnv, free_port
from .test_canary import MARK, Evidence

pytestmark = pytest.mark.anyio

# -- the credentials -------------------------------------------------------------------------------

CONSUMER_KEY = "e2econsumerkey0000000001"
OAUTH1 = {
    "consumer_key": CONSUMER_KEY,
    "consumer_secret": f"{MARK}-consumer-secret",
    "token": f"{MARK}-access-token",  # sent in the header and echoed back: redaction must catch it
    "token_secret": f"{MARK}-token-secret",
}
AWS = {
    "access_key_id": "AKIAE2EEXAMPLE000001",
    "secret_access_key": f"{MARK}-aws-secret/key+",
    "session_token": f"{MARK}-session-token",  # sent in X-Amz-Security-Token and echoed back
}
HMAC_KEYS = {
    "hmac_github": f"{MARK}-github-webhook-secret",
    "hmac_slack": f"{MARK}-slack-signing-secret",
    "hmac_exchange": base64.b64encode(f"{MARK}-exchange-key".encode() + b"\x00\xff").decode(),
}

AUTH_TYPE = re.compile(r"type: (\w+)")
CONNECTORS: dict[str, str] = {
    "oauth1_sha1": "{type: oauth1, realm: Photos}",
    "oauth1_sha256": "{type: oauth1, signature_method: HMAC-SHA256}",
    "sigv4_api": "{type: aws_sigv4, service: execute-api, region: eu-west-1}",
    "sigv4_s3": "{type: aws_sigv4, service: s3, region: us-east-1}",
    "hmac_github": '{type: hmac, header: X-Hub-Signature-256, prefix: "sha256="}',
    "hmac_slack": (
        '{type: hmac, header: X-Slack-Signature, prefix: "v0=", template: "v0:{timestamp}:{body}", '
        "timestamp_header: X-Slack-Request-Timestamp}"
    ),
    "hmac_exchange": (
        "{type: hmac, header: X-Sign, algorithm: sha512, encoding: base64, key_encoding: base64, "
        'template: "{timestamp}{method}{path}{body}", timestamp_header: X-Ts, timestamp_format: iso8601}'
    ),
    "mtls_api": "{type: mtls, ca_file: pki/ca.pem}",  # relative: resolved against the manifest's folder
    "mtls_wrong": "{type: mtls, ca_file: pki/ca.pem}",
}
KINDS = {slug: AUTH_TYPE.search(auth).group(1) for slug, auth in CONNECTORS.items()}  # type: ignore[union-attr]

SPEC = {
    "openapi": "3.0.3",
    "info": {"title": "signed", "version": "1"},
    "paths": {
        "/items/{id}": {
            "get": {
                "operationId": "items/get",
                "summary": "Fetch one item",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "q", "in": "query", "schema": {"type": "string"}},
                ],
            }
        },
        "/items": {
            "post": {
                "operationId": "items/create",
                "summary": "Create an item",
                "requestBody": {
                    "content": {
                        "application/json": {"schema": {"type": "object", "properties": {"name": {"type": "string"}}}}
                    }
                },
            }
        },
        "/forms": {
            "post": {
                "operationId": "forms/submit",
                "summary": "Submit a form",
                "requestBody": {
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {
                                "type": "object",
                                "properties": {"status": {"type": "string"}, "lang": {"type": "string"}},
                            }
                        }
                    }
                },
            }
        },
    },
}


# -- the verifying upstream ---------------------------------------------------------------------------


class _OAuth1Validator(RequestValidator):
    """What oauthlib asks a server about its clients: ours has one client and one token."""

    enforce_ssl = False  # loopback http

    def __init__(self) -> None:
        super().__init__()
        self.nonces: set[tuple[str, str]] = set()

    @property
    def allowed_signature_methods(self) -> tuple[str, ...]:
        return ("HMAC-SHA1", "HMAC-SHA256")

    @property
    def dummy_client(self) -> str:
        return "dummyclientkey0000000000"

    @property
    def dummy_access_token(self) -> str:
        return "dummyaccesstoken00000000"

    def check_access_token(self, request_token: str) -> bool:
        return request_token == OAUTH1["token"]

    def validate_client_key(self, client_key: str, request: Any) -> bool:
        return client_key == CONSUMER_KEY

    def get_client_secret(self, client_key: str, request: Any) -> str:
        return OAUTH1["consumer_secret"] if client_key == CONSUMER_KEY else "dummy"

    def get_access_token_secret(self, client_key: str, token: str, request: Any) -> str:
        return OAUTH1["token_secret"] if token == OAUTH1["token"] else "dummy"

    def validate_timestamp_and_nonce(
        self,
        client_key: str,
        timestamp: str,
        nonce: str,
        request: Any,
        request_token: Any = None,
        access_token: Any = None,
    ) -> bool:
        if (timestamp, nonce) in self.nonces:
            return False  # a replay
        self.nonces.add((timestamp, nonce))
        return True


@dataclass
class VerifyingUpstream:
    """Answers every request with ``{"verified": ..., "why": ..., "request": <echo>}``."""

    port: int = 0
    echo: EchoApp = field(default_factory=EchoApp)
    verdicts: list[tuple[str, bool, str]] = field(default_factory=list)
    oauth1: SignatureOnlyEndpoint = field(default_factory=lambda: SignatureOnlyEndpoint(_OAuth1Validator()))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        request = await EchoApp._record(scope, receive)
        self.echo.requests.append(request)
        slug = request.path.split("/")[1]
        verified, why = self.verify(slug, request)
        self.verdicts.append((slug, verified, why))
        body = json.dumps({"verified": verified, "why": why, "request": request.as_json()}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    def url(self, request: RecordedRequest) -> str:
        return f"http://127.0.0.1:{self.port}{request.raw_path}" + (f"?{request.query}" if request.query else "")

    def verify(self, slug: str, request: RecordedRequest) -> tuple[bool, str]:
        if slug.startswith("oauth1"):
            return self._oauth1(request)
        if slug.startswith("sigv4"):
            return self._sigv4(slug, request)
        return self._hmac(slug, request)

    def _oauth1(self, request: RecordedRequest) -> tuple[bool, str]:
        ok, checked = self.oauth1.validate_request(
            self.url(request), request.method, request.body.decode(), dict(request.headers)
        )
        if not ok:
            return False, f"oauthlib refused the signature ({checked.validator_log if checked else 'unparsable'})"
        params = dict(checked.oauth_params)
        if "oauth_body_hash" in params:  # the draft's check, which oauthlib's endpoint leaves to the server
            if params["oauth_body_hash"] != base64.b64encode(hashlib.sha1(request.body).digest()).decode():
                return False, "oauth_body_hash does not match the body"
        return True, f"oauthlib verified {params['oauth_signature_method']}"

    def _sigv4(self, slug: str, request: RecordedRequest) -> tuple[bool, str]:
        authorization = request.headers["authorization"]
        scope, signed, signature = (part.split("=", 1)[1] for part in authorization.split(" ", 1)[1].split(", "))
        access_key, date, region, service, _ = scope.split("/")
        received = AWSRequest(
            method=request.method,
            url=self.url(request),
            headers={name: request.headers[name] for name in signed.split(";")},
            data=request.body,
        )
        received.context["timestamp"] = request.headers["x-amz-date"]
        signer = (S3SigV4Auth if service == "s3" else SigV4Auth)(
            Credentials(AWS["access_key_id"], AWS["secret_access_key"], AWS["session_token"]), service, region
        )
        expected = signer.signature(signer.string_to_sign(received, signer.canonical_request(received)), received)
        skew = abs(
            datetime.now(UTC) - datetime.strptime(request.headers["x-amz-date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        )
        checks = {
            "signature": hmac.compare_digest(signature, expected),
            "access key": access_key == AWS["access_key_id"],
            "date in scope": request.headers["x-amz-date"].startswith(date),
            "clock skew": skew.total_seconds() < 300,
            "session token": request.headers.get("x-amz-security-token") == AWS["session_token"],
            "payload hash": service != "s3"
            or request.headers.get("x-amz-content-sha256") == hashlib.sha256(request.body).hexdigest(),
        }
        failed = [name for name, ok in checks.items() if not ok]
        return not failed, f"botocore: {', '.join(failed) or 'all checks passed'}"

    def _hmac(self, slug: str, request: RecordedRequest) -> tuple[bool, str]:
        headers, body = request.headers, request.body
        path = request.raw_path + (f"?{request.query}" if request.query else "")
        match slug:
            case "hmac_github":
                mac = hmac.new(HMAC_KEYS[slug].encode(), body, hashlib.sha256).hexdigest()
                expected, got = f"sha256={mac}", headers["x-hub-signature-256"]
            case "hmac_slack":
                message = f"v0:{headers['x-slack-request-timestamp']}:".encode() + body
                expected = "v0=" + hmac.new(HMAC_KEYS[slug].encode(), message, hashlib.sha256).hexdigest()
                got = headers["x-slack-signature"]
            case _:
                message = f"{headers['x-ts']}{request.method}{path}".encode() + body
                mac = hmac.new(base64.b64decode(HMAC_KEYS[slug]), message, hashlib.sha512).digest()
                expected, got = base64.b64encode(mac).decode(), headers["x-sign"]
        return hmac.compare_digest(expected, got), "stdlib hmac"


# -- fixtures ----------------------------------------------------------------------------------------


@dataclass
class KindsEnv:
    gw: GatewayEnv
    verifier: VerifyingUpstream
    tls_app: EchoApp
    secrets: dict[str, str]
    """slug -> what ``secret set`` reads on stdin."""
    evidence: Evidence = field(default_factory=Evidence)

    def cli(self, *args: str, input: str | None = None, expect: int = 0) -> str:
        proc = self.gw.cli(*args, input=input, check=False)
        label = "cli " + " ".join(args)
        self.evidence.add(f"{label} [stdout]", proc.stdout)
        self.evidence.add(f"{label} [stderr]", proc.stderr)
        assert "Traceback" not in proc.stderr, f"{label}:\n{proc.stderr}"
        assert proc.returncode == expect, f"{label} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout


def _identity(cert: trustme.LeafCert, marker: str) -> str:
    key = f"{marker}\n" + cert.private_key_pem.bytes().decode()  # PEM readers skip text before BEGIN
    return json.dumps({"cert_pem": "".join(p.bytes().decode() for p in cert.cert_chain_pems), "key_pem": key})


@pytest.fixture
def kinds_env(tmp_path: Path) -> Iterator[KindsEnv]:
    ca, rogue = trustme.CA(), trustme.CA()
    pki = tmp_path / "pki"
    pki.mkdir()
    ca.cert_pem.write_to_path(str(pki / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pki / "server.pem"))
    (tmp_path / "spec.json").write_text(json.dumps(SPEC))

    verifier, tls_app = VerifyingUpstream(), echo_app()
    with (
        LoopbackServer(verifier) as plain,
        LoopbackServer(
            tls_app,
            ssl_certfile=str(pki / "server.pem"),
            ssl_ca_certs=str(pki / "ca.pem"),
            ssl_cert_reqs=ssl.CERT_REQUIRED,
        ) as tls,
    ):
        verifier.port = plain.port
        pages_port = free_port()
        blocks = []
        for slug, auth in CONNECTORS.items():
            base = tls.base_url if slug.startswith("mtls") else f"{plain.base_url}/{slug}"
            blocks.append(
                f"  - slug: {slug}\n    base_url: {base}\n    auth: {auth}\n    source: {{openapi: spec.json}}\n"
            )
        manifest = tmp_path / "kinds.yaml"
        manifest.write_text(
            f"project: kinds\ndefault_mode: allow_all\npublic_url: http://127.0.0.1:{pages_port}\n"
            "connectors:\n" + "".join(blocks)
        )
        # No MCP_GATEWAY_MASTER_KEY: the gateway creates state/master.key, which is searched too.
        env = child_env() | {
            "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state"),
            "PYTHONUNBUFFERED": "1",
        }
        gw = GatewayEnv(tmp_path, manifest, tmp_path / "state", verifier.echo, plain.base_url, pages_port, env)
        secrets = {
            "oauth1_sha1": json.dumps(OAUTH1),
            "oauth1_sha256": json.dumps(OAUTH1),
            "sigv4_api": json.dumps(AWS),
            "sigv4_s3": json.dumps(AWS),
            **HMAC_KEYS,
            "mtls_api": _identity(ca.issue_cert("client@kinds.test"), f"{MARK}-mtls-key-comment"),
            "mtls_wrong": _identity(rogue.issue_cert("client@kinds.test"), f"{MARK}-rogue-key-comment"),
        }
        yield KindsEnv(gw, verifier, tls_app, secrets)


def _stdio(env: KindsEnv, errlog: Any) -> Any:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_gateway", "serve", "--manifest", str(env.gw.manifest)], env=env.gw.env
    )
    return Client(stdio_client(params, errlog=errlog), mode="legacy")


CALLS: list[tuple[str, str, dict[str, Any]]] = [
    (slug, tool, args)
    for slug in CONNECTORS
    if not slug.startswith("mtls")
    for tool, args in [
        ("items.get", {"id": "7", "q": "café & co/+ 100%"}),
        ("items.get", {"id": "my docs/naïve résumé (1).txt"}),  # a path with spaces and unicode
        ("items.create", {"name": "caf\u00e9 \U0001f600"}),
        *(
            [("forms.submit", {"status": "Hello Ladies + Gentlemen, a signed request!", "lang": "fr"})]
            * slug.startswith("oauth1")
        ),
    ]
]


# -- the test -----------------------------------------------------------------------------------------


async def test_every_kind_signs_verifiably_and_never_leaks(kinds_env: KindsEnv) -> None:
    env, ev = kinds_env, kinds_env.evidence

    async def tool(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
        body = ev.add_result(f"{name} {json.dumps(args)[:100]}", await client.call_tool(name, args))
        assert "Traceback" not in json.dumps(body), body
        return body

    # Before any secret: each connector says which kind it needs, and that it is not configured.
    with (env.gw.root / "stdio-1.log").open("w") as errlog:
        async with _stdio(env, errlog) as client:
            listed = {c["slug"]: c for c in (await tool(client, "connectors", {}))["connectors"]}
            for slug, kind in KINDS.items():
                assert listed[slug]["auth"] == kind and listed[slug]["auth_configured"] is False, listed[slug]
                assert listed[slug]["status"] == "needs_auth", listed[slug]
                described = await tool(client, "describe", {"tool": f"{slug}.items.get"})
                assert described["auth"] == {"kind": kind, "configured": False}
                result = await tool(client, "call", {"tool": f"{slug}.items.get", "args": {"id": "1"}})
                assert result["status"] == "needs_auth" and kind in result["reason"], result
    assert env.verifier.echo.requests == [] and env.tls_app.requests == []

    # secret set: JSON on stdin for the multi-field kinds, the plain string for hmac.
    for slug, value in env.secrets.items():
        env.cli("secret", "set", slug, input=value)
    listed_cli = {c["slug"]: c for c in json.loads(env.cli("connectors", "--json"))["connectors"]}
    for slug, kind in KINDS.items():
        assert (listed_cli[slug]["auth"], listed_cli[slug]["auth_configured"], listed_cli[slug]["status"]) == (
            kind,
            True,
            "ready",
        )

    errlog_path = env.gw.root / "stdio-2.log"
    with errlog_path.open("w") as errlog:
        async with _stdio(env, errlog) as client:
            for slug, kind in KINDS.items():
                described = await tool(client, "describe", {"tool": f"{slug}.items.create"})
                assert described["auth"] == {"kind": kind, "configured": True}

            echoed: dict[str, dict[str, str]] = {}
            for slug, name, args in CALLS:
                result = await tool(client, "call", {"tool": f"{slug}.{name}", "args": args})
                assert result["status"] == "ok", (slug, name, result)
                assert result["data"]["verified"] is True, (slug, name, result["data"]["why"])
                echoed[slug] = result["data"]["request"]["headers"]
            # Redaction: the upstream echoed the tokens that travel; the agent sees them masked.
            assert echoed["sigv4_api"]["x-amz-security-token"] == "[redacted]"
            assert 'oauth_token="[redacted]"' in echoed["oauth1_sha1"]["authorization"]

            ok = await tool(client, "call", {"tool": "mtls_api.items.get", "args": {"id": "42", "q": "é"}})
            assert ok["status"] == "ok" and ok["data"]["path"] == "/items/42", ok
            refused = await tool(client, "call", {"tool": "mtls_wrong.items.get", "args": {"id": "42"}})
            assert refused["status"] == "error" and refused["reason"] == "auth_failed", refused
            assert "refused the TLS handshake" in refused["message"], refused
            assert "reconnect 'mtls_wrong' with a valid certificate and key" in refused["message"], refused
    ev.add("stdio server stderr (before secrets)", (env.gw.root / "stdio-1.log").read_bytes())
    ev.add("stdio server stderr", errlog_path.read_bytes())

    # Every request the verifying upstream saw was verified by the reference library.
    bad = [v for v in env.verifier.verdicts if not v[1]]
    assert not bad, bad
    assert len(env.verifier.verdicts) == len(CALLS)
    assert {slug for slug, _, _ in env.verifier.verdicts} == {s for s in CONNECTORS if not s.startswith("mtls")}
    assert [r.path for r in env.tls_app.requests] == ["/items/42"]
    # The canary is not vacuous: the travelling tokens did reach the upstream.
    seen = env.verifier.echo.requests
    assert any(OAUTH1["token"] in r.headers.get("authorization", "") for r in seen)
    assert any(r.headers.get("x-amz-security-token") == AWS["session_token"] for r in seen)
    assert any(r.raw_path == "/sigv4_api/items/my%20docs%2Fna%C3%AFve%20r%C3%A9sum%C3%A9%20%281%29.txt" for r in seen)

    # The audit trail, the CLI and the state at rest hold none of it either.
    audit = json.loads(env.cli("audit", "--json", "--limit", "500"))
    assert {row["reason"] for row in audit if row["status"] == "error"} == {"auth_failed"}
    env.cli("call", "sigv4_s3.items.create", "--args", '{"name": "from the cli"}')
    env.cli("call", "mtls_wrong.items.get", "--args", '{"id": "1"}', expect=1)
    ev.add_state("state dir after shutdown", env.gw.state_dir)
    leaks = ev.leaks()
    assert not leaks, f"{len(leaks)} leak(s):\n" + "\n".join(leaks[:40])
