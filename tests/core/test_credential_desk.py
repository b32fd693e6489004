"""``CredentialDesk``: what the pages do with a credential a human enters — the permit, the save
with its audit row and its consequences (cached OAuth2 tokens dropped, a connector in error loaded
again), and the stored OAuth2 client read without handing its secret out."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import anyio
import httpx2
import pytest

from mcp_gateway.core.credential_changes import CredentialChanges
from mcp_gateway.core.credential_desk import CredentialDesk
from mcp_gateway.core.credential_origins import CredentialOrigins
from mcp_gateway.core.oauth2_tokens import ACCOUNT_FIELD, OAuth2Tokens, provider_account
from mcp_gateway.primitives.secrets import PROJECT_WIDE, CredentialKey
from mcp_gateway.services.identity import OPERATOR, Principal
from mcp_gateway.store.contract import LinkRecord
from mcp_gateway.vocabulary.model import NeedsAuth, Ok
from tests.core.test_gateway import Harness, harness, manifest_text

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _link(h: Harness, connector: str = "api") -> LinkRecord:
    """A connect link the operator asked for, as the page reads it."""
    _, record = await h.gateway.links.mint("connect", connector=connector, principal=OPERATOR.user)
    return record


async def test_save_stores_under_the_permit_key_and_audits_the_change(tmp_path: Path) -> None:
    async with harness(tmp_path, secret=None) as h:
        desk = h.gateway.credentials
        link = await _link(h)
        cfg = h.gateway.manifest.connector("api")
        assert cfg is not None
        permit = await desk.permit(link, cfg)
        assert permit.may_save and permit.replaces is None and permit.scope == "team"
        await desk.save(link, permit, "new-token", via="connect")
        sealed = await h.vault.sealed("api", principal=OPERATOR.user)
        assert sealed is not None and sealed.open().reveal() == "new-token"
        [row] = [r for r in await h.auditor.recent(10) if r.status == "credential_set"]
        assert row.requested == "credential:api" and row.user == OPERATOR.user
        assert json.loads(row.args_preview) == {"scope": "team", "replaced": None, "via": "connect"}
        assert "new-token" not in row.model_dump_json()
        # The next call carries it.
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(result, Ok)
        assert h.upstream.requests[-1].headers["authorization"] == "Bearer new-token"
        # Stored once, the same link's next submission would replace a team-wide credential.
        assert (await desk.permit(link, cfg)).replaces == "team"


async def test_save_reloads_and_forgets_tokens_only_when_asked(tmp_path: Path) -> None:
    async with harness(tmp_path, secret=None) as h:
        stored: list[str] = []

        async def on_stored(slug: str) -> None:
            stored.append(slug)

        async with httpx2.AsyncClient() as http:
            oauth2 = OAuth2Tokens(http, h.vault, h.clock, store=h.store, project="unit")
            origins = CredentialOrigins(h.store, h.clock)
            changes = CredentialChanges(h.vault, h.approvals, h.gateway.links, h.auditor, h.clock, origins)
            desk = CredentialDesk(h.vault, oauth2, changes, on_stored)
            link = await _link(h)
            cfg = h.gateway.manifest.connector("api")
            assert cfg is not None
            permit = await desk.permit(link, cfg)
            forgotten: list[str] = []
            oauth2.forget = forgotten.append  # type: ignore[method-assign]
            await desk.save(link, permit, "one", via="connect", reload=False)
            assert stored == [] and forgotten == []
            await desk.save(link, permit, "two", via="connect", forget_tokens=True)
            assert stored == ["api"] and forgotten == ["api"]


async def test_oauth2_client_id_says_none_stored_unusable_or_the_id(tmp_path: Path) -> None:
    async with harness(tmp_path, secret=None) as h:
        desk = h.gateway.credentials
        assert await desk.oauth2_client_id("api", principal="maria") is None
        await h.vault.put("api", "just-a-token")
        assert await desk.oauth2_client_id("api", principal="maria") == ""
        await h.vault.put("api", {"client_id": "robot", "client_secret": "s3cret"})
        assert await desk.oauth2_client_id("api", principal="maria") == "robot"
        sealed = await desk.sealed("api", principal="maria")
        assert sealed is not None and "s3cret" not in repr(sealed)


async def test_two_sign_ins_that_each_add_the_teams_token_set_do_not_both_win(tmp_path: Path) -> None:
    # Two agents' connect links for an OAuth2 connector with no token set stored, their sign-ins
    # finishing at once: the first stores, the second is refused, not a silent replacement.
    text = manifest_text() + (
        "  - slug: oa\n    base_url: http://oa.test\n"
        "    auth: {type: oauth2, authorize_url: http://auth.test/authorize, token_url: http://auth.test/token}\n"
        "    source: {http: {actions: [{path: me, url: /me}]}}\n"
    )
    async with harness(tmp_path, text, secret=None) as h:
        desk = h.gateway.credentials
        cfg = h.gateway.manifest.connector("oa")
        assert cfg is not None
        links = [(await h.gateway.links.mint("connect", connector="oa", principal=user))[1] for user in ("ana", "bo")]
        permits = [await desk.permit(link, cfg) for link in links]
        assert all(p.may_save and p.replaces is None and p.scope == "team" for p in permits)
        saved: list[str] = []

        async def sign_in(at: int) -> None:
            token_set = {"access_token": f"at-{at}", "refresh_token": f"rt-{at}", "token_type": "Bearer"}
            saved.append(await desk.save_token_set(links[at], permits[at], token_set, via="connect"))

        async with anyio.create_task_group() as tg:
            for at in range(2):
                tg.start_soon(sign_in, at)
        assert sorted(saved) == ["added_meanwhile", "saved"]
        rows = [r for r in await h.auditor.recent(10) if r.status == "credential_set"]
        assert len(rows) == 1


async def test_a_refused_team_sign_in_is_told_as_that_sign_in_and_a_new_one_ends_it(tmp_path: Path) -> None:
    # The operator stored the OAuth2 client; ana's sign-in stored the team's token set, which the
    # upstream refuses: the note names her sign-in, not the operator's client, and bo's new sign-in
    # ends the mark at once.
    text = manifest_text() + (
        "  - slug: oa\n    base_url: http://oa.test\n"
        "    auth: {type: oauth2, authorize_url: http://auth.test/authorize, token_url: http://auth.test/token}\n"
        "    source: {http: {actions: [{path: gone, url: /status/401}]}}\n"
    )
    async with harness(tmp_path, text, secret=None) as h:
        await h.vault.put("oa", {"client_id": "cid", "client_secret": "csecret-5521"})
        await CredentialOrigins(h.store, h.clock).stored(
            CredentialKey(connector="oa", principal=PROJECT_WIDE, name="default"),
            by=OPERATOR.user,
            via="secret set",
            replaced=False,
        )
        desk = h.gateway.credentials
        cfg = h.gateway.manifest.connector("oa")
        assert cfg is not None

        async def sign_in(user: str, n: int) -> None:
            _, link = await h.gateway.links.mint("connect", connector="oa", principal=user)
            permit = await desk.permit(link, cfg)
            token_set = {"access_token": f"at-{n}", "token_type": "Bearer", "verified": "1"}  # worked once; no refresh
            assert await desk.save_token_set(link, permit, token_set, via="connect") == "saved"

        await sign_in("ana", 1)
        refused = await h.gateway.call(Principal(user="ana"), "oa.gone")
        assert isinstance(refused, NeedsAuth), refused
        assert "The team-wide credential of oa was stored at " in refused.reason
        assert "by ana through a connect link; oa answered 401 to oa.gone" in refused.reason, refused.reason
        listed = {c.slug: c for c in (await h.gateway.connectors(OPERATOR)).connectors}
        assert "by ana through a connect link" in (listed["oa"].warning or "")

        await sign_in("bo", 2)
        listed = {c.slug: c for c in (await h.gateway.connectors(OPERATOR)).connectors}
        assert listed["oa"].warning is None, listed["oa"].warning


def _id_token(claims: dict[str, str]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJSUzI1NiJ9.{body}.c2lnbmF0dXJl"


def test_the_provider_account_is_read_from_the_id_token_claims() -> None:
    assert provider_account(_id_token({"sub": "1234", "email": "ana@corp"})) == "ana@corp"
    assert provider_account(_id_token({"sub": "1234"})) == "1234"
    assert provider_account(None) is None and provider_account("not-a-jwt") is None


async def test_a_team_sign_in_made_as_another_provider_account_says_which_and_which_it_was(tmp_path: Path) -> None:
    # bob's approved link signed in as another provider account than alice had: every call then acted as
    # it, and nothing (audit, log, approval, pages) named either account.
    text = manifest_text() + (
        "  - slug: oa\n    base_url: http://oa.test\n"
        "    auth: {type: oauth2, authorize_url: http://auth.test/authorize, token_url: http://auth.test/token}\n"
        "    source: {http: {actions: [{path: gone, url: /status/401}]}}\n"
    )
    async with harness(tmp_path, text, secret=None) as h:
        await h.vault.put("oa", {"client_id": "cid", "client_secret": "csecret-5521"})
        desk = h.gateway.credentials
        cfg = h.gateway.manifest.connector("oa")
        assert cfg is not None

        async def sign_in(user: str, account: str) -> None:
            _, link = await h.gateway.links.mint("connect", connector="oa", principal=user)
            permit = await desk.permit(link, cfg)
            token_set = {"access_token": f"at-{user}", "verified": "1", ACCOUNT_FIELD: account}
            assert await desk.save_token_set(link, permit, token_set, via="connect") == "saved"

        await sign_in("ana", "ana@corp")
        await sign_in("operator", "mallory@elsewhere")
        rows = [json.loads(r.args_preview) for r in await h.auditor.recent(10) if r.status == "credential_set"]
        assert {"account": "mallory@elsewhere", "account_was": "ana@corp"}.items() <= rows[0].items(), rows
        assert rows[1]["account"] == "ana@corp" and "account_was" not in rows[1]
        key = CredentialKey(connector="oa", principal=PROJECT_WIDE, name="oauth2_token")
        origin = await CredentialOrigins(h.store, h.clock).of(key)
        assert origin is not None
        assert "signed in at the provider as mallory@elsewhere (it was ana@corp before)" in origin.told()
        sealed = await h.vault.sealed("oa", principal=PROJECT_WIDE, name="oauth2_token")
        assert sealed is not None and ACCOUNT_FIELD not in sealed.open().reveal()  # a label, not a secret


async def test_a_save_whose_record_fails_after_the_vault_write_says_it_was_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The failure of the record after the value was in the vault was raised: its pages said "Nothing was saved".
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    async with harness(tmp_path, secret=None) as h:
        desk = h.gateway.credentials
        link = await _link(h)
        cfg = h.gateway.manifest.connector("api")
        assert cfg is not None
        permit = await desk.permit(link, cfg)

        async def failing(*_: object, **__: object) -> None:
            raise StoreUnavailable("the SQLite database s.db cannot be used (disk I/O error)")

        monkeypatch.setattr(desk._changes, "record_origin", failing)  # pyright: ignore[reportPrivateUsage]
        assert await desk.save(link, permit, "new-token", via="connect") == "saved_unrecorded"
        sealed = await h.vault.sealed("api", principal=OPERATOR.user)
        assert sealed is not None and sealed.open().reveal() == "new-token"
        # The audit row, a step of its own, is still written.
        assert [r for r in await h.auditor.recent(10) if r.status == "credential_set"]
