"""Access tokens at the front door (``front_door``): JWT checks against a JWKS the test serves
through ``MockTransport``, key rotation, and every way a token is refused."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from mcp_gateway.services.front_door import (
    FrontDoorSettings,
    Introspector,
    JwksCache,
    JwtVerifier,
    TokenRefused,
    looks_like_jwt,
)

pytestmark = pytest.mark.anyio

ISSUER = "http://127.0.0.1:9/issuer"
AUDIENCE = "http://127.0.0.1:8765/mcp"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Idp:
    """Signing keys and a JWKS endpoint that counts its hits."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {"k1": rsa.generate_private_key(public_exponent=65537, key_size=2048)}
        self.hits = 0

    def jwks(self) -> dict[str, Any]:
        out = []
        for kid, key in self.keys.items():
            algo = RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else ECAlgorithm
            jwk = json.loads(algo.to_jwk(key.public_key()))
            out.append({**jwk, "kid": kid, "use": "sig"})
        return {"keys": out}

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.hits += 1
        return httpx2.Response(200, json=self.jwks())

    def mint(self, kid: str = "k1", alg: str = "RS256", key: Any = None, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "maria", "exp": now + 300, "iat": now, "scope": "mcp"} | claims
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key if key is not None else self.keys[kid], algorithm=alg, headers={"kid": kid})


@pytest.fixture
def idp() -> Idp:
    return Idp()


@pytest.fixture
def verifier(idp: Idp) -> Callable[..., JwtVerifier]:
    def make(clock: Callable[[], float] = time.monotonic, **settings: Any) -> JwtVerifier:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(idp.handler))
        cfg = FrontDoorSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url="http://127.0.0.1:9/jwks", **settings)
        return JwtVerifier(cfg, JwksCache(cfg.jwks_url, http, clock=clock))

    return make


async def test_a_valid_token_names_the_user_client_and_scopes(idp: Idp, verifier: Callable[..., JwtVerifier]) -> None:
    v = verifier(scopes=("mcp",), agent_claim="agent")
    token = idp.mint(azp="claude-code", agent="release-bot", groups=["eng", "ops"])
    access = await v.verify(token)
    assert access.subject == "maria" and access.client_id == "claude-code" and access.scopes == ["mcp"]
    assert access.resource == AUDIENCE
    caller = v.caller(access)
    assert (caller.user, caller.agent, caller.groups) == ("maria", "release-bot", ("eng", "ops"))
    assert idp.hits == 1
    await v.verify(idp.mint())
    assert idp.hits == 1  # cached


# Times are taken when the test runs, not when it is collected: a long suite would otherwise
# reach a "not yet valid" token's nbf before the test does.
@pytest.mark.parametrize(
    ("claims", "code"),
    [
        (lambda now: {"aud": "http://127.0.0.1:9999/other"}, "wrong_audience"),
        (lambda now: {"iss": "http://127.0.0.1:9/evil"}, "wrong_issuer"),
        (lambda now: {"exp": now - 120}, "expired"),
        (lambda now: {"nbf": now + 600}, "not_yet_valid"),
        (lambda now: {"exp": None}, "invalid_signature_or_claims"),
        (lambda now: {"sub": None}, "no_user_claim"),
    ],
    ids=["wrong_audience", "wrong_issuer", "expired", "not_yet_valid", "no_exp", "no_user_claim"],
)
async def test_claims_that_do_not_fit_are_refused(
    idp: Idp, verifier: Callable[..., JwtVerifier], claims: Callable[[int], dict[str, Any]], code: str
) -> None:
    with pytest.raises(TokenRefused) as refused:
        await verifier().verify(idp.mint(**claims(int(time.time()))))
    assert refused.value.code == code
    assert await verifier().verify_token(idp.mint(**claims(int(time.time())))) is None


async def test_a_missing_scope_is_insufficient_scope(idp: Idp, verifier: Callable[..., JwtVerifier]) -> None:
    with pytest.raises(TokenRefused) as refused:
        await verifier(scopes=("mcp", "admin")).verify(idp.mint())
    assert refused.value.insufficient_scope and refused.value.code == "missing_scope:admin"


async def test_a_wrong_signature_and_unsafe_algorithms_are_refused(
    idp: Idp, verifier: Callable[..., JwtVerifier]
) -> None:
    impostor = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(TokenRefused, match="invalid_signature"):
        await verifier().verify(idp.mint(key=impostor))
    for forged in (
        jwt.encode(
            {"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": 2**31},
            "a-shared-secret-that-is-long-enough-32b",
            algorithm="HS256",
        ),
        jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "exp": 2**31}, None, algorithm="none"),
    ):
        with pytest.raises(TokenRefused, match="algorithm_not_allowed"):
            await verifier().verify(forged)
    with pytest.raises(TokenRefused, match="malformed"):
        await verifier().verify("not-a-jwt")


async def test_key_rotation_refreshes_once_and_unknown_kids_are_rate_limited(
    idp: Idp, verifier: Callable[..., JwtVerifier]
) -> None:
    now = [1000.0]
    v = verifier(clock=lambda: now[0])
    await v.verify(idp.mint())
    now[0] += 60
    idp.keys["k2"] = ec.generate_private_key(ec.SECP256R1())
    access = await v.verify(idp.mint(kid="k2", alg="ES256"))  # unknown kid: one refresh finds it
    assert access.subject == "maria" and idp.hits == 2
    for _ in range(20):  # forged kids cannot make us hammer the identity provider
        with pytest.raises(TokenRefused, match="unknown_kid"):
            await v.verify(_with_kid(idp, "nosuch"))
    assert idp.hits == 2
    now[0] += 31
    with pytest.raises(TokenRefused, match="unknown_kid"):
        await v.verify(_with_kid(idp, "nosuch"))
    assert idp.hits == 3


def _with_kid(idp: Idp, kid: str) -> str:
    return jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "sub": "m", "exp": int(time.time()) + 60},
        idp.keys["k1"],
        algorithm="RS256",
        headers={"kid": kid},
    )


# -- opaque tokens: introspection (RFC 7662) ---------------------------------------------------------


class Introspection:
    """An introspection endpoint: the tokens it knows and the claims it answers for each; it counts its
    hits and refuses a client that does not authenticate as ``gw``/``s3cret``."""

    def __init__(self) -> None:
        now = int(time.time())
        base = {"active": True, "iss": ISSUER, "aud": AUDIENCE, "sub": "maria", "scope": "mcp", "exp": now + 300}
        self.tokens: dict[str, dict[str, Any]] = {
            "opaque-maria": base,
            "opaque-other-aud": base | {"aud": "https://other.example/mcp"},
            "opaque-no-aud": {k: v for k, v in base.items() if k != "aud"},
            "opaque-expired": base | {"exp": now - 120},
            "opaque-no-scope": base | {"scope": "profile"},
            "opaque-other-issuer": base | {"iss": "https://evil.example"},
        }
        self.requests: list[httpx2.Request] = []

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if request.headers.get("authorization") != "Basic " + base64.b64encode(b"gw:s3cret").decode():
            return httpx2.Response(401, json={"error": "invalid_client"})
        token = parse_qs(request.content.decode())["token"][0]
        return httpx2.Response(200, json=self.tokens.get(token, {"active": False}))


def introspector(endpoint: Introspection, *, secret: str | None = "s3cret", **kw: Any) -> Introspector:
    async def opened() -> str | None:
        return secret

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(endpoint.handler))
    settings = FrontDoorSettings(issuer=ISSUER, audience=AUDIENCE, jwks_url="http://127.0.0.1:9/jwks", scopes=("mcp",))
    return Introspector(settings, "http://127.0.0.1:9/introspect", "gw", opened, http, **kw)


async def test_an_active_opaque_token_names_its_user_and_is_cached_briefly() -> None:
    endpoint = Introspection()
    now = [time.time()]
    check = introspector(endpoint, clock=lambda: now[0])
    access = await check.verify("opaque-maria")
    assert (access.subject, access.scopes, access.resource) == ("maria", ["mcp"], AUDIENCE)
    [sent] = endpoint.requests
    assert parse_qs(sent.content.decode()) == {"token": ["opaque-maria"], "token_type_hint": ["access_token"]}
    await check.verify("opaque-maria")
    assert len(endpoint.requests) == 1  # cached
    now[0] += Introspector.CACHE_SECONDS + 1
    endpoint.tokens["opaque-maria"] = {"active": False}  # revoked at the issuer meanwhile
    with pytest.raises(TokenRefused, match="inactive"):
        await check.verify("opaque-maria")
    assert len(endpoint.requests) == 2


@pytest.mark.parametrize(
    ("token", "code"),
    [
        ("unknown-token", "inactive"),
        ("opaque-other-aud", "wrong_audience"),
        ("opaque-no-aud", "wrong_audience"),
        ("opaque-expired", "expired"),
        ("opaque-other-issuer", "wrong_issuer"),
        ("opaque-no-scope", "missing_scope:mcp"),
    ],
)
async def test_opaque_tokens_get_the_checks_a_jwt_gets(token: str, code: str) -> None:
    with pytest.raises(TokenRefused) as refused:
        await introspector(Introspection()).verify(token)
    assert refused.value.code == code
    assert refused.value.insufficient_scope == code.startswith("missing_scope")


async def test_an_unreachable_or_refusing_endpoint_refuses_the_token_and_says_nothing_of_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    endpoint = Introspection()
    with pytest.raises(TokenRefused, match="introspection_unavailable"):
        await introspector(endpoint, secret="wrong").verify("opaque-maria")
    with pytest.raises(TokenRefused, match="introspection_unavailable"):
        await introspector(endpoint, secret="wrong").verify("opaque-maria")
    assert len(endpoint.requests) == 2  # a failure is not cached
    assert "opaque-maria" not in caplog.text and "wrong" not in caplog.text


def test_jwts_and_opaque_tokens_are_told_apart(idp: Idp) -> None:
    assert looks_like_jwt(idp.mint())
    assert not looks_like_jwt("opaque-maria") and not looks_like_jwt("a.b.c") and not looks_like_jwt("mgw_x")
