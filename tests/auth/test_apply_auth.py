from __future__ import annotations

import base64
from typing import Any

import httpx2
import pytest
from pydantic import TypeAdapter

from mcp_gateway.auth import LastMeterAuth, apply_auth, needs_secret
from mcp_gateway.manifest import AuthConfig
from mcp_gateway.primitives.crypto import AESGCMCipher
from mcp_gateway.primitives.redaction import Redactor
from mcp_gateway.primitives.secrets import CredentialKey, SealedCredential, SecretValue
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.vocabulary.errors import (
    CredentialError,
    CredentialMissing,
    GatewayError,
    StoredSecretMisfit,
    UnsupportedAuth,
)

CANARY = "canary-7f3a9c1e-never-show-me"
AUTH = TypeAdapter(AuthConfig)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def cfg(**data: Any) -> AuthConfig:
    return AUTH.validate_python(data)


def req(url: str = "https://api.test/v1/items?b=1%2C2&c=%20x", **kw: Any) -> httpx2.Request:
    return httpx2.Request("GET", url, **kw)


def _clean(exc: BaseException) -> None:
    assert CANARY not in f"{exc} {exc!r} {exc.args}"


# -- each kind, checked on the final request ---------------------------------------------------


def test_bearer_defaults() -> None:
    r = req()
    apply_auth(r, cfg(type="bearer"), SecretValue(CANARY))
    assert r.headers["Authorization"] == f"Bearer {CANARY}"
    assert CANARY not in repr(r.headers)  # httpx2 masks it as [secure]


def test_bearer_custom_header_and_prefix() -> None:
    r = req()
    apply_auth(r, cfg(type="bearer", header="X-Auth", prefix="Token"), SecretValue(CANARY))
    assert r.headers["X-Auth"] == f"Token {CANARY}"
    assert "Authorization" not in r.headers


def test_bearer_empty_prefix_is_the_bare_token() -> None:
    r = req()
    apply_auth(r, cfg(type="bearer", header="X-Token", prefix=""), SecretValue(CANARY))
    assert r.headers["X-Token"] == CANARY


def test_bearer_replaces_an_agent_supplied_header() -> None:
    r = req(headers={"Authorization": "Bearer forged"})
    apply_auth(r, cfg(type="bearer"), SecretValue(CANARY))
    assert r.headers.get_list("Authorization") == [f"Bearer {CANARY}"]


def test_basic_rfc7617() -> None:
    r = req()
    apply_auth(r, cfg(type="basic"), SecretValue({"username": "Aladdin", "password": "open sesame"}))
    assert r.headers["Authorization"] == "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="  # RFC 7617 section 2
    r = req()
    apply_auth(r, cfg(type="basic"), SecretValue({"username": "test", "password": "123£"}))
    assert r.headers["Authorization"] == "Basic dGVzdDoxMjPCow=="  # RFC 7617 section 2.1 (UTF-8)


def test_basic_rejects_colon_in_username() -> None:
    with pytest.raises(CredentialError, match="':'") as info:
        apply_auth(req(), cfg(type="basic"), SecretValue({"username": "a:b", "password": CANARY}))
    _clean(info.value)


def test_api_key_header_with_prefix() -> None:
    r = req()
    apply_auth(r, cfg(type="api_key", name="Authorization", prefix="Token "), SecretValue(CANARY))
    assert r.headers["Authorization"] == f"Token {CANARY}"
    r = req()
    apply_auth(r, cfg(type="api_key"), SecretValue(CANARY))
    assert r.headers["X-API-Key"] == CANARY


def test_api_key_query_keeps_existing_params_byte_for_byte() -> None:
    r = req()
    apply_auth(r, cfg(type="api_key", **{"in": "query"}, name="api key"), SecretValue("a&b=c d/é"))
    assert r.url.query == b"b=1%2C2&c=%20x&api%20key=a%26b%3Dc%20d%2F%C3%A9"
    assert r.url.params["api key"] == "a&b=c d/é"
    assert r.url.params["b"] == "1,2" and r.url.params["c"] == " x"
    assert r.url.path == "/v1/items" and r.url.host == "api.test"


def test_api_key_query_replaces_an_agent_supplied_param() -> None:
    r = req("https://api.test/x?api_key=forged&q=1&api%5Fkey=forged2")
    apply_auth(r, cfg(type="api_key", **{"in": "query"}, name="api_key"), SecretValue(CANARY))
    assert r.url.params.get_list("api_key") == [CANARY]
    assert r.url.params["q"] == "1"


def test_api_key_query_on_a_url_without_query() -> None:
    r = req("https://api.test/x")
    apply_auth(r, cfg(type="api_key", **{"in": "query"}, name="key"), SecretValue(CANARY))
    assert str(r.url) == f"https://api.test/x?key={CANARY}"


def test_api_key_cookie_merges_with_existing_cookies() -> None:
    r = req(headers={"Cookie": "session=abc; theme=dark; sid=forged"})
    apply_auth(r, cfg(type="api_key", **{"in": "cookie"}, name="sid"), SecretValue(CANARY))
    assert r.headers.get_list("Cookie") == [f"session=abc; theme=dark; sid={CANARY}"]


def test_api_key_cookie_alone() -> None:
    r = req()
    apply_auth(r, cfg(type="api_key", **{"in": "cookie"}, name="sid"), SecretValue(CANARY))
    assert r.headers["Cookie"] == f"sid={CANARY}"


def test_api_key_cookie_refuses_a_separator() -> None:
    with pytest.raises(CredentialError, match="cookie") as info:
        apply_auth(req(), cfg(type="api_key", **{"in": "cookie"}, name="sid"), SecretValue(f"{CANARY};x=1"))
    _clean(info.value)


def test_custom_templates() -> None:
    r = req()
    config = cfg(type="custom", headers={"X-Key": "{secret}", "X-Literal": "v={secret} {other}"})
    apply_auth(r, config, SecretValue(CANARY))
    assert r.headers["X-Key"] == CANARY
    assert r.headers["X-Literal"] == f"v={CANARY} {{other}}"


def test_custom_fields() -> None:
    r = req()
    config = cfg(type="custom", headers={"X-Id": "{secret.id}", "X-Sig": "key {secret.key}"})
    apply_auth(r, config, SecretValue({"id": "app-1", "key": CANARY}))
    assert r.headers["X-Id"] == "app-1"
    assert r.headers["X-Sig"] == f"key {CANARY}"


def test_custom_unknown_field_names_the_field_not_the_value() -> None:
    config = cfg(type="custom", headers={"X-Sig": "{secret.nope}"})
    with pytest.raises(CredentialError, match="'nope'") as info:
        apply_auth(req(), config, SecretValue({"id": "x", "key": CANARY}))
    _clean(info.value)


def test_custom_shape_mismatch() -> None:
    with pytest.raises(CredentialError, match="one plain value") as info:
        apply_auth(req(), cfg(type="custom", headers={"X": "{secret.id}"}), SecretValue(CANARY))
    _clean(info.value)
    with pytest.raises(CredentialError, match="JSON object") as info:
        apply_auth(req(), cfg(type="custom", headers={"X": "{secret}"}), SecretValue({"id": CANARY}))
    _clean(info.value)


def test_custom_names_every_field_a_stored_value_lacks() -> None:
    config = cfg(type="custom", headers={"X-User": "{secret.user}", "X-Pass": "{secret.pass}", "X-Org": "{secret.org}"})
    with pytest.raises(StoredSecretMisfit, match="fields 'user', 'org' ") as info:
        apply_auth(req(), config, SecretValue({"pass": CANARY, "org": ""}))
    _clean(info.value)


def test_none_changes_nothing() -> None:
    r = req()
    before = (str(r.url), list(r.headers.raw))
    apply_auth(r, cfg(type="none"), None)
    assert (str(r.url), list(r.headers.raw)) == before
    assert not needs_secret(cfg(type="none"))
    assert needs_secret(cfg(type="bearer"))


def test_oauth2_puts_the_access_token_on_as_bearer() -> None:
    # oauth1, hmac, aws_sigv4, mtls and oauth2 have their own test modules (test_oauth1.py, test_oauth2.py ...).
    r = req()
    config = cfg(type="oauth2", flow="client_credentials", token_url="https://auth.test/token")
    apply_auth(r, config, SecretValue(CANARY))
    assert r.headers["authorization"] == f"Bearer {CANARY}"


@pytest.mark.parametrize(
    "data",
    [{"type": "bearer"}, {"type": "basic"}, {"type": "api_key"}, {"type": "custom", "headers": {"X": "{secret}"}}],
)
def test_missing_secret(data: dict[str, Any]) -> None:
    with pytest.raises(CredentialMissing, match="'github'"):
        apply_auth(req(), cfg(**data), None, connector="github")


def test_wrong_shape_and_header_injection() -> None:
    with pytest.raises(CredentialError, match="plain-string") as info:
        apply_auth(req(), cfg(type="bearer"), SecretValue({"token": CANARY}))
    _clean(info.value)
    with pytest.raises(CredentialError, match="JSON-object") as info:
        apply_auth(req(), cfg(type="basic"), SecretValue(CANARY))
    _clean(info.value)
    with pytest.raises(CredentialError, match="line break") as info:
        apply_auth(req(), cfg(type="bearer"), SecretValue(f"{CANARY}\r\nX-Evil: 1"))
    _clean(info.value)


@pytest.mark.parametrize(
    ("config", "value"),
    [
        ({"type": "api_key", "in": "cookie", "name": "sid"}, f"{CANARY}-cøøkie"),
        (
            {"type": "aws_sigv4", "service": "s3", "region": "eu-west-1"},
            {"access_key_id": "AKIA1", "secret_access_key": "s", "session_token": f"{CANARY}-tøken"},
        ),
    ],
)
def test_a_stored_value_no_header_can_carry_is_a_credential_error(
    config: dict[str, Any], value: str | dict[str, str]
) -> None:
    # Stored before such values were refused where entered: every call was an internal error with a traceback.
    with pytest.raises(CredentialError, match=r"cannot carry .*`mcp-gateway secret set`") as info:
        apply_auth(req(), cfg(**config), SecretValue(value))
    _clean(info.value)
    assert info.value.__suppress_context__


# -- through a real client ------------------------------------------------------------------------


class DictStore:
    def __init__(self) -> None:
        self.rows: dict[CredentialKey, bytes] = {}

    async def put_credential(self, key: CredentialKey, sealed: bytes) -> None:
        self.rows[key] = sealed

    async def get_credential(self, key: CredentialKey) -> bytes | None:
        return self.rows.get(key)


async def _sealed(value: str | dict[str, str]) -> SealedCredential:
    vault = CredentialVault(DictStore(), AESGCMCipher(b"k" * 32, project="demo"), project="demo")  # type: ignore[arg-type]
    await vault.put("github", value)
    sealed = await vault.sealed("github", principal="alice")
    assert sealed is not None
    return sealed


@pytest.mark.anyio
async def test_last_meter_auth_through_async_client() -> None:
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        assert request.headers["Authorization"] == f"Bearer {CANARY}"
        # A careless upstream echoing what it got, in several spellings.
        return httpx2.Response(401, json={"error": f"bad token {CANARY}", "auth": request.headers["Authorization"]})

    redactor = Redactor()
    auth = LastMeterAuth(cfg(type="bearer"), await _sealed(CANARY), on_secret=redactor.add)
    assert CANARY not in repr(auth)
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler), base_url="https://api.test") as client:
        response = await client.get("/v1/me", auth=auth)
    assert len(seen) == 1 and response.status_code == 401
    assert redactor.redact(response.json()) == {"error": "bad token [redacted]", "auth": "[redacted]"}
    assert CANARY not in repr(response.request) + repr(response.request.headers)


@pytest.mark.anyio
async def test_last_meter_auth_query_placement_through_client() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.url.params["key"] == CANARY and request.url.params["q"] == "x y"
        return httpx2.Response(200, text=f"you sent {request.url}")

    redactor = Redactor()
    auth = LastMeterAuth(
        cfg(type="api_key", **{"in": "query"}, name="key"), await _sealed(CANARY), on_secret=redactor.add
    )
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
        response = await client.get("https://api.test/search", params={"q": "x y"}, auth=auth)
    assert response.status_code == 200
    assert CANARY not in redactor.redact_text(response.text)


@pytest.mark.anyio
async def test_last_meter_auth_basic_and_sync_client() -> None:
    sealed = await _sealed({"username": "alice", "password": CANARY})
    expected = "Basic " + base64.b64encode(f"alice:{CANARY}".encode()).decode()

    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.headers["Authorization"] == expected
        return httpx2.Response(204)

    with httpx2.Client(transport=httpx2.MockTransport(handler)) as client:
        assert client.get("https://api.test/", auth=LastMeterAuth(cfg(type="basic"), sealed)).status_code == 204


@pytest.mark.anyio
async def test_last_meter_auth_missing_credential_sends_nothing() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        raise AssertionError("a request without its credential must not be sent")

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
        with pytest.raises(CredentialMissing, match="'github'"):
            await client.get("https://api.test/", auth=LastMeterAuth(cfg(type="bearer"), None, connector="github"))


class _CountingCredential:
    def __init__(self) -> None:
        self.opened = 0
        self.key = CredentialKey(connector="github", principal="*")

    def open(self) -> SecretValue:
        self.opened += 1
        return SecretValue(CANARY)


@pytest.mark.anyio
async def test_last_meter_auth_unsupported_kind_decrypts_nothing() -> None:
    credential = _CountingCredential()
    auth = LastMeterAuth(cfg(type="oauth2", flow="client_credentials", token_url="https://auth.test/token"), credential)  # type: ignore[arg-type]
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(lambda r: httpx2.Response(200))) as client:
        with pytest.raises(UnsupportedAuth):
            await client.get("https://api.test/", auth=auth)
    assert credential.opened == 0


@pytest.mark.anyio
async def test_last_meter_auth_none_opens_nothing() -> None:
    credential = _CountingCredential()
    auth = LastMeterAuth(cfg(type="none"), credential)  # type: ignore[arg-type]

    def handler(request: httpx2.Request) -> httpx2.Response:
        assert "Authorization" not in request.headers
        return httpx2.Response(200)

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
        assert (await client.get("https://api.test/", auth=auth)).status_code == 200
    assert credential.opened == 0


@pytest.mark.anyio
async def test_tampered_credential_surfaces_as_credential_error_without_the_secret() -> None:
    sealed = await _sealed(CANARY)
    sealed._sealed = sealed._sealed[:-1] + bytes([sealed._sealed[-1] ^ 1])  # type: ignore[attr-defined]
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(lambda r: httpx2.Response(200))) as client:
        with pytest.raises(CredentialError) as info:
            await client.get("https://api.test/", auth=LastMeterAuth(cfg(type="bearer"), sealed))
    assert isinstance(info.value, GatewayError)
    _clean(info.value)
