"""Each page class on its own: mounted alone in a Starlette app, over the real services of an in-process
gateway (SQLite store, AES-GCM vault, link and approval services), driven as a browser without
JavaScript would. The whole site's behaviour is in ``test_approval_page.py``, ``test_team_credentials.py``
and the end-to-end page tests; here each handler shows it stands on the services it is given."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route

from mcp_gateway.core import Gateway
from mcp_gateway.core.results import ConnectLink
from mcp_gateway.server.pages import HealthPage
from mcp_gateway.server.pages._common import PageContext
from mcp_gateway.server.pages.approval_page import ApprovalPage
from mcp_gateway.server.pages.credential_page import CredentialPages
from mcp_gateway.server.pages.oauth import OAuthCallback
from mcp_gateway.server.pages.operator import OperatorPages
from mcp_gateway.vocabulary.errors import StoreUnavailable
from mcp_gateway.vocabulary.model import PendingApproval
from tests.server.test_approval_page import ALICE, MANIFEST, TOOL
from tests.support.page_site import PUBLIC, PageSite, page_site
from tests.support.pages import csrf

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _ctx(gateway: Gateway) -> PageContext:
    return PageContext(gateway.links, gateway.clock, gateway.sessions, b"k" * 32)


@asynccontextmanager
async def _alone(site: PageSite, routes: list[Route]) -> AsyncIterator[httpx2.AsyncClient]:
    """Only ``routes``, served at ``PUBLIC``."""
    app = Starlette(routes=routes)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app), base_url=PUBLIC) as http:
        yield http


def _upstream(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, json={"ok": True})


async def test_credential_pages_store_what_the_form_says_once(tmp_path: Path) -> None:
    async with page_site(tmp_path, MANIFEST, _upstream) as site:
        g = site.gateway
        pages = CredentialPages(_ctx(g), g, g.credentials)
        link = await g.connect(ALICE, "pay")
        assert isinstance(link, ConnectLink)
        path = link.connect_url.removeprefix(PUBLIC)
        async with _alone(site, pages.routes()) as http:
            form = await http.get(path)
            assert form.status_code == 200 and "Connect pay" in form.text
            forged = await http.post(path, data={"csrf": "0" * 64, "secret": "nope"})
            assert forged.status_code == 403
            empty = await http.post(path, data={"csrf": csrf(form.text), "secret": ""})
            assert empty.status_code == 400 and "fill in Token" in empty.text
            saved = await http.post(path, data={"csrf": csrf(form.text), "secret": "tok-1"})
            assert saved.status_code == 200 and "pay is connected" in saved.text
            assert (await http.get(path)).status_code == 410  # used once
        sealed = await site.vault.sealed("pay", principal="alice")
        assert sealed is not None and sealed.open().reveal() == "tok-1"


@pytest.mark.parametrize(
    ("failure", "status", "said"),
    [
        # Any failure once the link is used, a damaged database file the store did not know as an outage.
        (ValueError("database disk image is malformed"), 500, "open it again and enter the value again"),
        (
            StoreUnavailable(
                "the SQLite database s.db cannot be used (database disk image is malformed)", lasting=True
            ),
            503,
            "open it again once the operator says the gateway is fixed",
        ),
    ],
)
async def test_a_credential_whose_save_fails_gives_its_link_back_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: Exception, status: int, said: str
) -> None:
    # The human typed a secret: a save that fails after the link was used left it used with nothing
    # stored, under a bare 500, and the link then said "expired or already used".
    async with page_site(tmp_path, MANIFEST, _upstream) as site:
        g = site.gateway
        pages = CredentialPages(_ctx(g), g, g.credentials)
        link = await g.connect(ALICE, "pay")
        assert isinstance(link, ConnectLink)
        path = link.connect_url.removeprefix(PUBLIC)

        async def failing(*_: object, **__: object) -> None:
            raise failure

        monkeypatch.setattr(g.credentials, "save", failing)
        async with _alone(site, pages.routes()) as http:
            form = await http.get(path)
            answer = await http.post(path, data={"csrf": csrf(form.text), "secret": "CANARY-typed-secret"})
            assert answer.status_code == status, answer.text
            assert "Nothing was saved" in answer.text and said in answer.text
            assert "CANARY" not in answer.text
            again = await http.get(path)
            assert again.status_code == 200 and "Connect pay" in again.text  # the link works again
        assert await site.vault.sealed("pay", principal="alice") is None


async def test_a_credential_stored_whose_audit_row_fails_is_said_saved_and_its_link_stays_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The vault held the value, its audit row met the outage: the page said "Nothing was saved" and
    # gave the link back, so the human typed a secret the gateway already had (and was told it had not).
    async with page_site(tmp_path, MANIFEST, _upstream) as site:
        g = site.gateway
        pages = CredentialPages(_ctx(g), g, g.credentials)
        link = await g.connect(ALICE, "pay")
        assert isinstance(link, ConnectLink)
        path = link.connect_url.removeprefix(PUBLIC)

        async def failing(*_: object, **__: object) -> None:
            raise StoreUnavailable("the SQLite database pages.db cannot be used (disk I/O error)")

        monkeypatch.setattr(g.credentials._changes, "changed", failing)  # pyright: ignore[reportPrivateUsage]
        async with _alone(site, pages.routes()) as http:
            form = await http.get(path)
            answer = await http.post(path, data={"csrf": csrf(form.text), "secret": "CANARY-typed-secret"})
            assert answer.status_code == 200, answer.text
            assert "pay is connected" in answer.text and "Nothing was saved" not in answer.text
            assert "audit log may lack" in answer.text and "CANARY" not in answer.text
            assert (await http.get(path)).status_code == 410  # not given back: it did its work
        sealed = await site.vault.sealed("pay", principal="alice")
        assert sealed is not None and sealed.open().reveal() == "CANARY-typed-secret"
        told = [r.getMessage() for r in caplog.records if "was stored, but its audit row failed" in r.getMessage()]
        assert told and "CANARY" not in told[0]


async def _asked(site: PageSite) -> tuple[ApprovalPage, PendingApproval, str]:
    """The approval page of ``site``, a payment alice asked to approve, and its link's path."""
    g = site.gateway
    pending = await g.call(ALICE, TOOL, {"to": "bob", "amount": "5"})
    assert isinstance(pending, PendingApproval)
    return ApprovalPage(_ctx(g), g.links, g.approvals), pending, pending.approval_url.removeprefix(PUBLIC)


async def test_approval_page_shows_then_decides_once(tmp_path: Path) -> None:
    async with page_site(tmp_path, MANIFEST, _upstream, credentials={"pay": "tok"}) as site:
        g = site.gateway
        page, pending, path = await _asked(site)
        async with _alone(site, page.routes()) as http:
            shown = await http.get(path)
            assert shown.status_code == 200 and "pay.payments.create" in shown.text and "bob" in shown.text
            bad = await http.post(path, data={"csrf": csrf(shown.text), "decision": "maybe"})
            assert bad.status_code == 400
            both = await http.post(path, data={"csrf": csrf(shown.text), "decision": ["deny", "approve"]})
            assert both.status_code == 400  # two buttons at once decide nothing
            denied = await http.post(path, data={"csrf": csrf(shown.text), "decision": "deny"})
            assert denied.status_code == 200 and "will not run" in denied.text
            reopened = await http.get(path)  # said "expired or already used, ask the agent for a new one"
            assert reopened.status_code == 200 and "This call was already denied." in reopened.text
            unknown = await http.get(path[:-4] + "AAAA")
            assert unknown.status_code == 410
        record = await g.approvals.get(pending.approval_id)
        assert record is not None and record.status == "denied"


async def test_a_head_request_looks_like_get_and_neither_decides_nor_saves(tmp_path: Path) -> None:
    # A link previewer sends HEAD: it was answered "Request refused", and a HEAD carrying the form
    # approved the call or stored the credential.
    async with page_site(tmp_path, MANIFEST, _upstream, credentials={"pay": "tok"}) as site:
        g = site.gateway
        page, pending, path = await _asked(site)
        async with _alone(site, page.routes()) as http:
            token = csrf((await http.get(path)).text)
            assert (await http.head(path)).status_code == 200
            posted_as_head = await http.request("HEAD", path, data={"csrf": token, "decision": "approve"})
            assert posted_as_head.status_code == 200
        record = await g.approvals.get(pending.approval_id)
        assert record is not None and record.status == "pending"
    async with page_site(tmp_path / "connect", MANIFEST, _upstream) as site:
        g = site.gateway
        pages = CredentialPages(_ctx(g), g, g.credentials)
        link = await g.connect(ALICE, "pay")
        assert isinstance(link, ConnectLink)
        connect = link.connect_url.removeprefix(PUBLIC)
        async with _alone(site, pages.routes()) as http:
            token = csrf((await http.get(connect)).text)
            assert (await http.head(connect)).status_code == 200
            head = await http.request("HEAD", connect, data={"csrf": token, "secret": "tok-by-head"})
            assert head.status_code == 200
            assert (await http.get(connect)).status_code == 200  # the link is still unused
        assert await site.vault.sealed("pay", principal="alice") is None


async def test_the_loser_of_two_decisions_at_once_is_told_what_was_decided(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two tabs (or two instances) read the approval pending; the one whose link was spent first won,
    # and the other was told "expired or already used, ask the agent for a new one".
    async with page_site(tmp_path, MANIFEST, _upstream, credentials={"pay": "tok"}) as site:
        g = site.gateway
        page, pending, path = await _asked(site)
        token = path.rsplit("/", 1)[1]
        async with _alone(site, page.routes()) as http:
            shown = await http.get(path)
            read_before = await page._pending(token)  # what the slower tab read while both were pending
            assert not isinstance(read_before, Response)
            first = await http.post(path, data={"csrf": csrf(shown.text), "decision": "approve"})
            assert first.status_code == 200

            async def stale(self: ApprovalPage, token: str, *, deciding: bool = False) -> object:
                return read_before

            monkeypatch.setattr(ApprovalPage, "_pending", stale)
            second = await http.post(path, data={"csrf": csrf(shown.text), "decision": "deny"})
        assert second.status_code == 409 and "This call was already approved." in second.text
        record = await g.approvals.get(pending.approval_id)
        assert record is not None and record.status == "approved"


async def test_operator_pages_answer_a_bearer_operator_only(tmp_path: Path) -> None:
    async with page_site(tmp_path, MANIFEST, _upstream, credentials={"pay": "tok"}) as site:
        g = site.gateway
        pages = OperatorPages(_ctx(g), g, g.approvals, g.auditor, g.review, g.operators)
        _, token = await g.operators.create()
        pending = await g.call(ALICE, TOOL, {"to": "bob", "amount": "5"})
        assert isinstance(pending, PendingApproval)
        bearer = {"Authorization": f"Bearer {token}"}
        async with _alone(site, pages.routes()) as http:
            login = await http.get("/operator")
            assert login.status_code == 200 and 'action="/operator/login"' in login.text
            assert (await http.get("/operator", headers={"Authorization": "Bearer mgo_wrong"})).status_code == 401
            overview = await http.get("/operator", headers=bearer)
            assert (
                overview.status_code == 200
                and pending.approval_id in overview.text
                and "approval-page" in overview.text
            )
            decided = await http.post(
                f"/operator/approvals/{pending.approval_id}", data={"decision": "approve"}, headers=bearer
            )
            assert decided.status_code == 303
            held = await http.post("/operator/review/pay.nothing", data={"decision": "approve"}, headers=bearer)
            assert "not held for review" in held.text
            assert (await http.post("/operator/logout")).status_code == 401
        record = await g.approvals.get(pending.approval_id)
        assert record is not None and record.status == "approved" and record.decided_by == "operator"


async def test_the_operator_overview_shows_every_argument_and_marks_hidden_characters(tmp_path: Path) -> None:
    async with page_site(tmp_path, MANIFEST, _upstream, credentials={"pay": "tok"}) as site:
        g = site.gateway
        pages = OperatorPages(_ctx(g), g, g.approvals, g.auditor, g.review, g.operators)
        _, token = await g.operators.create()
        to = "bob\u202e0001\u202c" + "Z" * 5000 + "TAIL_END"  # reads as "1000" where shown raw
        pending = await g.call(ALICE, TOOL, {"to": to, "amount": "5"})
        assert isinstance(pending, PendingApproval)
        async with _alone(site, pages.routes()) as http:
            overview = await http.get("/operator", headers={"Authorization": f"Bearer {token}"})
        assert overview.status_code == 200
        assert "\u202e" not in overview.text and "\u202c" not in overview.text  # nothing raw
        assert '<mark class="hidden-char" title="a hidden character, shown as its code">\\u202e</mark>' in overview.text
        assert "TAIL_END" in overview.text  # the whole of a long argument, folded, never cut
        record = await g.approvals.get(pending.approval_id)
        assert record is not None and record.calls and record.fingerprint in overview.text
        # As the approval page says it, in written order whatever its letters' direction.
        assert f'It will call: <code><bdo dir="ltr">{html.escape(record.calls)}</bdo></code>' in overview.text
        assert "Mixes alphabets" not in overview.text and "right-to-left" not in overview.text

        # A host spelled with a Cyrillic "а" is named, as on the approval page.
        lookalike = await g.call(ALICE, TOOL, {"to": "https://аpple.com/pay", "amount": "5"})
        assert isinstance(lookalike, PendingApproval)
        async with _alone(site, pages.routes()) as http:
            overview = await http.get("/operator", headers={"Authorization": f"Bearer {token}"})
        assert "Mixes alphabets" in overview.text and "CYRILLIC SMALL LETTER A" in overview.text
        await g.approvals.decide(lookalike.approval_id, False, by="operator")

        # Arguments cut when stored (by an earlier build) cannot be shown whole: the overview offers no
        # Approve, and refuses one.
        whole = await g.call(ALICE, TOOL, {"to": "Z" * 1000, "amount": "5"})
        assert isinstance(whole, PendingApproval)
        stored = await g.approvals.get(whole.approval_id)
        assert stored is not None
        await g.approvals.decide(whole.approval_id, False, by="operator")
        cut = stored.model_copy(update={"id": "apr_cut", "arguments": stored.arguments[:500]})
        await site.store.put_approval(cut)
        bearer = {"Authorization": f"Bearer {token}"}
        async with _alone(site, pages.routes()) as http:
            overview = await http.get("/operator", headers=bearer)
            refused = await http.post(f"/operator/approvals/{cut.id}", data={"decision": "approve"}, headers=bearer)
        assert "it cannot be approved here" in overview.text and overview.text.count('value="approve"') == 1
        assert refused.status_code == 403
        record = await g.approvals.get(cut.id)
        assert record is not None and record.status == "pending"


async def test_oauth_callback_refuses_a_state_it_never_handed_out(tmp_path: Path) -> None:
    async with page_site(tmp_path, MANIFEST, _upstream) as site:
        g = site.gateway
        async with _alone(site, OAuthCallback(_ctx(g), g, g.credentials).routes()) as http:
            answer = await http.get("/oauth/callback", params={"state": "made-up", "code": "c"})
        assert answer.status_code == 400 and "Sign-in not recognised" in answer.text
        assert "made-up" not in answer.text


async def test_healthz_reports_the_audit_trail_and_discovery(tmp_path: Path) -> None:
    async with page_site(tmp_path, MANIFEST, _upstream) as site:
        g = site.gateway
        health = HealthPage(g.auditor, lambda: "discovery: asked just now")
        async with _alone(site, [Route("/healthz", health.healthz)]) as http:
            answer = (await http.get("/healthz")).json()
        assert answer == {
            "status": "ok",
            "audit_failures": 0,
            "audit_journaled": 0,
            "audit_journal_pending": False,
            "discovery": "discovery: asked just now",
        }


OAUTH_MANIFEST = """
project: pages
public_url: http://pages.test
connectors:
  - slug: code
    base_url: http://api.test
    auth: {type: oauth2, authorize_url: http://auth.test/authorize, token_url: http://auth.test/token}
    source: {http: {actions: [{path: me.get, method: GET, url: /me, summary: Who am I}]}}
"""


def _provider(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, json={"access_token": "at-1", "token_type": "Bearer", "refresh_token": "rt-1"})


@pytest.mark.parametrize(
    ("failure", "status", "said"),
    [
        (StoreUnavailable("the SQLite database pages.db cannot be used (disk I/O error)"), 503, "in a few seconds"),
        # A read-only standby after a failover: "in a few seconds" would not help.
        (
            StoreUnavailable("the PostgreSQL database … refuses writes (read-only)", lasting=True),
            503,
            "once the operator says the gateway is fixed",
        ),
        # Any other failure of the save (a lock another client holds, a bug): a bare 500 that used the
        # link up, so the human had to go back to the agent for a new one.
        (
            RuntimeError("canceling statement due to lock timeout"),
            500,
            "If it fails again, tell the gateway",
        ),
    ],
)
async def test_an_oauth_callback_whose_save_fails_gives_the_link_back_and_says_when_to_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: Exception, status: int, said: str
) -> None:
    # The sign-in's state is spent by then (and the code at the provider): "try again in a few
    # seconds" on the callback could never work, and the connect link was used up with nothing saved.
    client = {"client_id": "gw", "client_secret": "CANARY-client-secret"}
    async with page_site(tmp_path, OAUTH_MANIFEST, _provider) as site:
        g = site.gateway
        await site.vault.put("code", client)
        link = await g.connect(ALICE, "code")
        assert isinstance(link, ConnectLink)
        token = link.connect_url.rsplit("/", 1)[1]
        record = await g.links.peek("connect", token)
        assert record is not None
        cfg = g.manifest.connector("code")
        assert cfg is not None
        url = await g.credentials.oauth2.begin(
            cfg.auth,  # type: ignore[arg-type]
            connector="code",
            principal=record.principal,
            client_id="gw",
            link_token=token,
            redirect_uri=f"{PUBLIC}/oauth/callback",
            link_expires_at=record.expires_at,
        )
        state = httpx2.URL(url).params["state"]

        async def failing(*_: object, **__: object) -> None:
            raise failure

        monkeypatch.setattr(g.credentials, "save_token_set", failing)
        async with _alone(site, OAuthCallback(_ctx(g), g, g.credentials).routes()) as http:
            answer = await http.get("/oauth/callback", params={"state": state, "code": "the-code"})
        assert answer.status_code == status, answer.text
        assert "Nothing was saved" in answer.text and "this link still works" in answer.text
        assert said in answer.text and "sign in again" in answer.text
        assert "lock timeout" not in answer.text and "CANARY" not in answer.text
        assert await g.links.peek("connect", token) is not None  # the link works again


async def test_an_oauth_sign_in_stored_whose_record_fails_says_connected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The token set was in the vault, the record of who signed in met the outage: "Nothing was saved",
    # and the connect link was given back for a sign-in already done.
    async with page_site(tmp_path, OAUTH_MANIFEST, _provider) as site:
        g = site.gateway
        await site.vault.put("code", {"client_id": "gw", "client_secret": "CANARY-client-secret"})
        link = await g.connect(ALICE, "code")
        assert isinstance(link, ConnectLink)
        token = link.connect_url.rsplit("/", 1)[1]
        record = await g.links.peek("connect", token)
        cfg = g.manifest.connector("code")
        assert record is not None and cfg is not None
        url = await g.credentials.oauth2.begin(
            cfg.auth,  # type: ignore[arg-type]
            connector="code",
            principal=record.principal,
            client_id="gw",
            link_token=token,
            redirect_uri=f"{PUBLIC}/oauth/callback",
            link_expires_at=record.expires_at,
        )

        async def failing(*_: object, **__: object) -> None:
            raise StoreUnavailable("the SQLite database pages.db cannot be used (disk I/O error)")

        monkeypatch.setattr(g.credentials._changes, "record_origin", failing)  # pyright: ignore[reportPrivateUsage]
        async with _alone(site, OAuthCallback(_ctx(g), g, g.credentials).routes()) as http:
            state = httpx2.URL(url).params["state"]
            answer = await http.get("/oauth/callback", params={"state": state, "code": "the-code"})
        assert answer.status_code == 200, answer.text
        assert "is connected" in answer.text and "Nothing was saved" not in answer.text
        assert "record or audit log may lack" in answer.text
        assert await g.links.peek("connect", token) is None  # used: the sign-in is done


async def test_a_link_whose_agent_lost_its_token_stores_nothing(tmp_path: Path) -> None:
    # A revoked (leaked) token's link still stored whatever its holder typed: a team credential every
    # user's calls then carried, once an operator approved a replacement asked for before the revocation.
    async with page_site(tmp_path, MANIFEST, _upstream) as site:
        g = site.gateway
        _, token = await g.tokens.create("claude")
        bot = await g.tokens.verify(token)
        assert bot is not None
        link = await g.connect(bot, "pay")
        assert isinstance(link, ConnectLink)
        path = link.connect_url.removeprefix(PUBLIC)
        async with _alone(site, CredentialPages(_ctx(g), g, g.credentials).routes()) as http:
            form = await http.get(path)
            assert form.status_code == 200
            assert await g.tokens.revoke(bot.user.removeprefix("token:"))
            refused = await http.post(path, data={"csrf": csrf(form.text), "secret": "CANARY-attacker"})
        assert refused.status_code == 403 and "Link withdrawn" in refused.text, refused.text
        assert await site.vault.sealed("pay", principal=bot.user) is None
        assert await site.vault.sealed("pay", principal="*") is None
