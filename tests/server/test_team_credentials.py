"""A team-wide credential changes only by an operator's act: a teammate's connect or secret link
waits for an operator's approval before it may replace it, and every change is audited (who, which
connector, when, who approved; never the value) and logged. A ``per_user`` connector's credentials
are each user's own and change freely.

Two users, alice and bob, reach the gateway through the same granted agent. The real pages app
runs in process (Starlette over ``httpx2.ASGITransport``) on a real gateway (SQLite store, AES-GCM
vault, link and approval services, auditor), as ``test_approval_page`` does.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from mcp_gateway.core import Gateway
from mcp_gateway.core.results import ConnectLink, SecretLink
from mcp_gateway.primitives.secrets import PROJECT_WIDE, CredentialKey
from mcp_gateway.services.approvals import ApproverRefused
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.services.identity import OPERATOR, Principal
from mcp_gateway.store.contract import AuditRecord, LinkRecord
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.errors import StoreUnavailable
from mcp_gateway.vocabulary.model import NeedsAuth
from tests.support.page_site import PUBLIC, page_site
from tests.support.pages import csrf

pytestmark = pytest.mark.anyio

TEAM_CANARY = "canary-team-token-operator-4410"
BOB_CANARY = "canary-bob-own-token-8823"
MANIFEST = f"""
project: teams
public_url: {PUBLIC}
connectors:
  - slug: team
    name: Team API
    base_url: http://team.test
    auth: {{type: bearer}}
    source:
      http:
        actions:
          - {{path: me.get, method: GET, url: /me, summary: Who am I}}
          - {{path: revoked.get, method: GET, url: /revoked, summary: Answer 401 as if the token were revoked}}
  - slug: mine
    name: Own API
    base_url: http://mine.test
    auth: {{type: bearer}}
    credentials: per_user
    source: {{http: {{actions: [{{path: me.get, method: GET, url: /me, summary: Who am I}}]}}}}
agents:
  - name: claude
    connectors: [team, mine]
"""
ALICE = Principal(user="alice", agent="claude")
BOB = Principal(user="bob", agent="claude")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Site:
    gateway: Gateway
    vault: CredentialVault
    store: SQLiteStore
    clock: FixedClock
    http: httpx2.AsyncClient
    sent: list[httpx2.Request]

    async def value(self, connector: str, principal: str = PROJECT_WIDE, name: str = "default") -> str | None:
        sealed = await self.vault.sealed(connector, principal=principal, name=name, own_only=True)
        return sealed.open().reveal() if sealed is not None else None  # type: ignore[no-any-return]

    async def submit(self, url: str, secret: str) -> httpx2.Response:
        path = url.removeprefix(PUBLIC)
        page = await self.http.get(path)
        token = csrf(page.text) if 'name="csrf"' in page.text else "0" * 64
        return await self.http.post(path, data={"csrf": token, "secret": secret})

    async def changes(self) -> list[AuditRecord]:
        await self.gateway.auditor.flush()
        return [r for r in await self.store.list_audit(100) if r.status == "credential_set"]

    async def sends_as(self, principal: Principal) -> str:
        """The Authorization header ``principal``'s call to ``team`` carries."""
        result = await self.gateway.call(principal, "team.me.get")
        assert result.status == "ok", result
        return self.sent[-1].headers["authorization"]


@asynccontextmanager
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    sent: list[httpx2.Request] = []

    def upstream(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        if request.url.path == "/revoked":
            return httpx2.Response(401, json={"message": "token revoked"})
        return httpx2.Response(200, json={"ok": True})

    async with page_site(tmp_path, MANIFEST, upstream, credentials={"team": TEAM_CANARY}) as p:
        yield Site(p.gateway, p.vault, p.store, p.clock, p.http, sent)


def _no_canary(*texts: str) -> None:
    for text in texts:
        assert TEAM_CANARY not in text and BOB_CANARY not in text


async def test_a_teammates_link_replaces_the_team_credential_only_after_an_operator_approves(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with site(tmp_path) as s:
        assert await s.sends_as(ALICE) == f"Bearer {TEAM_CANARY}"
        link = await s.gateway.connect(BOB, "team")
        assert isinstance(link, ConnectLink) and link.approval_id is not None
        assert "team-wide credential" in link.message and link.approval_id in link.message
        # Calls already work: what completing the link does is replace everyone's, once approved.
        assert "will work" not in link.message and "only then does completing it replace" in link.message

        # Before approval: the page waits, shows no form, and a forced submission changes nothing.
        waiting = await s.http.get(link.connect_url.removeprefix(PUBLIC))
        assert "Waiting for an operator" in waiting.text and 'name="secret"' not in waiting.text
        forced = await s.http.post(link.connect_url.removeprefix(PUBLIC), data={"csrf": "0" * 64, "secret": "x"})
        assert forced.status_code == 409 and await s.value("team") == TEAM_CANARY
        assert await s.sends_as(ALICE) == f"Bearer {TEAM_CANARY}"

        # Neither bob nor alice may approve it; only an operator.
        for user in ("bob", "alice", None):
            with pytest.raises(ApproverRefused):
                await s.gateway.approvals.decide(link.approval_id, True, by=user)
        assert await s.gateway.approvals.decide(link.approval_id, True, by=OPERATOR.user) is not None

        form = await s.http.get(link.connect_url.removeprefix(PUBLIC))
        assert 'name="secret"' in form.text and "A team-wide credential:" in form.text
        assert "replaces the team-wide credential" in form.text and "An operator approved" in form.text
        saved = await s.submit(link.connect_url, BOB_CANARY)
        assert saved.status_code == 200 and "Saved" in saved.text
        assert await s.value("team") == BOB_CANARY
        assert await s.sends_as(ALICE) == f"Bearer {BOB_CANARY}"
        approval = await s.store.get_approval(link.approval_id)
        assert approval is not None and approval.status == "consumed"

        [row] = await s.changes()
    assert (row.user, row.agent, row.connector, row.approved_by) == ("bob", "claude", "team", "operator")
    assert row.at == s.clock.now() and row.requested == "credential:team"
    assert json.loads(row.args_preview) == {"scope": "team", "replaced": "team", "via": "connect"}
    [logged] = [r for r in caplog.records if r.name == "mcp_gateway.core.credential_changes"]
    assert logged.levelno == logging.WARNING
    assert "team-wide" in logged.getMessage() and "bob" in logged.getMessage() and "team" in logged.getMessage()
    _no_canary(row.model_dump_json(), caplog.text, waiting.text, form.text, saved.text, link.model_dump_json())


async def test_a_rejected_team_credential_asks_an_operator_before_anyone_reconnects_it(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        result = await s.gateway.call(BOB, "team.revoked.get")
        assert isinstance(result, NeedsAuth), result
        assert "team-wide credential" in result.reason and "operator" in result.reason
        [pending] = await s.store.list_approvals("pending")
        assert (pending.kind, pending.principal, pending.tool) == ("credential", "bob", "credential:team")
        page = await s.http.get(result.connect_url.removeprefix(PUBLIC))
        assert "Waiting for an operator" in page.text and pending.id in page.text
        assert await s.value("team") == TEAM_CANARY


async def test_an_agent_retrying_a_rejected_call_asks_an_operator_once(tmp_path: Path) -> None:
    # Forty retries of a call the upstream refuses used to queue forty identical requests to replace the
    # team's credential (an invitation to approve in bulk); they share one, and the link it approves
    # replaces the credential once.
    async with site(tmp_path) as s:
        results: list[object] = []

        async def call() -> None:
            results.append(await s.gateway.call(BOB, "team.revoked.get"))

        async with anyio.create_task_group() as group:  # together, as an agent's parallel calls come
            for _ in range(5):
                group.start_soon(call)
        assert all(isinstance(result, NeedsAuth) for result in results)
        [pending] = await s.store.list_approvals("pending")
        assert all(pending.id in result.reason for result in results if isinstance(result, NeedsAuth))
        await s.gateway.approvals.decide(pending.id, True, by=OPERATOR.user)
        first, second = (r for r in results[:2] if isinstance(r, NeedsAuth))
        assert (await s.submit(first.connect_url, BOB_CANARY)).status_code == 200
        spent = await s.submit(second.connect_url, "another-token")
        # The other link of the same request: told its approval was used there, not "not approved".
        assert spent.status_code == 409 and "Already replaced" in spent.text and "another link" in spent.text
        assert await s.value("team") == BOB_CANARY and len(await s.changes()) == 1
        # Spent, it is asked for again; and another user asks on their own.
        assert isinstance(await s.gateway.call(ALICE, "team.revoked.get"), NeedsAuth)
        [again] = await s.store.list_approvals("pending")
        assert again.id != pending.id and again.principal == "alice"


async def test_a_denied_replacement_changes_nothing(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        link = await s.gateway.connect(BOB, "team")
        assert isinstance(link, ConnectLink) and link.approval_id is not None
        await s.gateway.approvals.decide(link.approval_id, False, by="alice")  # anyone may deny
        refused = await s.http.get(link.connect_url.removeprefix(PUBLIC))
        assert refused.status_code == 403 and "Not approved" in refused.text
        assert await s.value("team") == TEAM_CANARY and await s.changes() == []


async def test_a_link_minted_before_a_team_credential_existed_cannot_replace_it(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        await s.vault.delete("team")
        first, second = await s.gateway.connect(ALICE, "team"), await s.gateway.connect(BOB, "team")
        assert isinstance(first, ConnectLink) and isinstance(second, ConnectLink)
        assert first.approval_id is None and second.approval_id is None  # nothing to replace yet
        assert (await s.submit(first.connect_url, "alice-first-token")).status_code == 200
        late = await s.submit(second.connect_url, BOB_CANARY)
        assert late.status_code == 409 and "Needs an operator" in late.text
        assert await s.value("team") == "alice-first-token"
        [row] = await s.changes()
    assert (row.user, json.loads(row.args_preview)["replaced"], row.approved_by) == ("alice", None, None)


async def test_two_links_submitted_together_store_one_credential_and_refuse_the_other(tmp_path: Path) -> None:
    # Both links were minted while nothing was stored, so each was permitted to add, not to replace:
    # submitted together, the second silently replaced the first, and both rows said it replaced nothing.
    async with site(tmp_path) as s:
        await s.vault.delete("team")
        links = [await s.gateway.connect(ALICE, "team"), await s.gateway.connect(BOB, "team")]
        assert all(isinstance(link, ConnectLink) and link.approval_id is None for link in links)
        forms = {}
        for link, value in zip(links, ("alice-first-token", BOB_CANARY), strict=True):
            assert isinstance(link, ConnectLink)
            path = link.connect_url.removeprefix(PUBLIC)
            forms[path] = (csrf((await s.http.get(path)).text), value)
        answers: list[httpx2.Response] = []

        async def post(path: str, token: str, value: str) -> None:
            answers.append(await s.http.post(path, data={"csrf": token, "secret": value}))

        async with anyio.create_task_group() as group:
            for path, (token, value) in forms.items():
                group.start_soon(post, path, token, value)
        assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
        refused = next(a for a in answers if a.status_code == 409)
        # Refused where it stood: before storing (the lock's check), or at its permit if it came second.
        assert "Nothing was changed" in refused.text or "Needs an operator" in refused.text
        stored = await s.value("team")
        [row] = await s.changes()  # one change, by the one whose value is stored
    assert (row.user, stored) in (("alice", "alice-first-token"), ("bob", BOB_CANARY))
    assert json.loads(row.args_preview)["replaced"] is None


async def test_an_agent_of_the_operators_own_session_is_not_the_operator(tmp_path: Path) -> None:
    # ``serve --agent claude`` over stdio acts as the operator's user; its stale link replaced the team
    # credential the operator had set meanwhile, and the audit credited the operator.
    session = Principal(user=OPERATOR.user, agent="claude")
    async with site(tmp_path) as s:
        await s.vault.delete("team")
        link = await s.gateway.connect(session, "team")
        assert isinstance(link, ConnectLink) and link.approval_id is None  # nothing to replace yet
        await s.vault.put("team", TEAM_CANARY)  # the operator's `secret set`, meanwhile
        late = await s.submit(link.connect_url, BOB_CANARY)
        assert late.status_code == 409 and await s.value("team") == TEAM_CANARY
        assert await s.changes() == []
        # With nothing stored, its link adds one, and the audit names the agent.
        await s.vault.delete("team")
        fresh = await s.gateway.connect(session, "team")
        assert isinstance(fresh, ConnectLink)
        assert (await s.submit(fresh.connect_url, "agent-added-token")).status_code == 200
        [row] = await s.changes()
    assert (row.user, row.agent) == (OPERATOR.user, "claude")


async def test_the_operators_own_link_replaces_it_and_is_audited(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        link = await s.gateway.connect(OPERATOR, "team")
        assert isinstance(link, ConnectLink) and link.approval_id is None
        assert (await s.submit(link.connect_url, "operator-new-token")).status_code == 200
        [row] = await s.changes()
    assert (row.user, json.loads(row.args_preview)["replaced"]) == ("operator", "team")


async def test_a_named_secret_of_the_team_needs_the_same_approval(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        await s.vault.put("team", "webhook-signing-1", name="webhook")
        link = await s.gateway.request_secret(BOB, "team", "webhook")
        assert isinstance(link, SecretLink) and link.approval_id is not None
        assert (await s.submit(link.secret_url, BOB_CANARY)).status_code == 409
        await s.gateway.approvals.decide(link.approval_id, True, by=OPERATOR.user)
        assert (await s.submit(link.secret_url, BOB_CANARY)).status_code == 200
        assert await s.value("team", name="webhook") == BOB_CANARY
        [row] = await s.changes()
    assert row.requested == "credential:team/webhook" and json.loads(row.args_preview)["via"] == "request_secret"


async def test_per_user_credentials_are_each_users_own_and_need_no_approval(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        await s.vault.put("mine", "alice-own-token", principal="alice")
        pages: list[str] = []
        for _ in range(2):  # connecting again replaces bob's own, still without asking anyone
            link = await s.gateway.connect(BOB, "mine")
            assert isinstance(link, ConnectLink) and link.approval_id is None
            pages.append((await s.http.get(link.connect_url.removeprefix(PUBLIC))).text)
            assert "A personal credential:" in pages[-1] and "<code>bob</code>" in pages[-1]
            assert (await s.submit(link.connect_url, BOB_CANARY)).status_code == 200
        assert "replaces the" not in pages[0] and "replaces the personal credential" in pages[1]
        assert await s.value("mine", "bob") == BOB_CANARY and await s.value("mine", "alice") == "alice-own-token"
        rows = await s.changes()
    assert [json.loads(r.args_preview)["scope"] for r in rows] == ["personal", "personal"]
    assert {r.user for r in rows} == {"bob"} and all(r.approved_by is None for r in rows)


async def test_a_save_the_database_stops_answering_for_gives_the_link_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The link is used up before the value is stored (its use stops a second submission): when the
    # store fails in between, the link is given back, so "try again in a few seconds" is true.
    async with site(tmp_path) as s:
        link = await s.gateway.connect(BOB, "mine")
        assert isinstance(link, ConnectLink)
        put = s.vault.put

        async def down(*_: object, **__: object) -> None:
            raise StoreUnavailable("the SQLite database test.db cannot be used (database or disk is full)")

        monkeypatch.setattr(s.vault, "put", down)
        answer = await s.submit(link.connect_url, BOB_CANARY)
        assert answer.status_code == 503 and "Nothing was saved" in answer.text and "still works" in answer.text
        _no_canary(answer.text)
        assert await s.value("mine", "bob") is None
        monkeypatch.setattr(s.vault, "put", put)
        assert (await s.submit(link.connect_url, BOB_CANARY)).status_code == 200
        assert await s.value("mine", "bob") == BOB_CANARY


async def test_a_link_used_up_as_the_database_stops_is_given_back_once_it_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The consumption commits, then its answer is lost with the database; giving it back fails too
    # while the database is down, and happens when the human tries again.
    async with site(tmp_path) as s:
        link = await s.gateway.connect(BOB, "mine")
        assert isinstance(link, ConnectLink)
        consume, release = s.store.consume_link, s.store.release_link
        outage = StoreUnavailable("the PostgreSQL database at postgresql://gw:***@db/x is unreachable")

        async def consumed_then_lost(*args: Any) -> LinkRecord | None:
            await consume(*args)
            raise outage

        async def down(*_: object) -> bool:
            raise outage

        monkeypatch.setattr(s.store, "consume_link", consumed_then_lost)
        monkeypatch.setattr(s.store, "release_link", down)
        answer = await s.submit(link.connect_url, BOB_CANARY)
        assert answer.status_code == 503 and "still works" in answer.text
        assert await s.value("mine", "bob") is None
        monkeypatch.setattr(s.store, "consume_link", consume)
        monkeypatch.setattr(s.store, "release_link", release)
        assert (await s.submit(link.connect_url, BOB_CANARY)).status_code == 200
        assert await s.value("mine", "bob") == BOB_CANARY


async def test_the_operator_overview_says_which_credentials_are_team_wide(tmp_path: Path) -> None:
    from mcp_gateway.services.operator_tokens import OperatorTokens

    async with site(tmp_path) as s:
        _, token = await OperatorTokens(s.store, s.clock).create()
        page = await s.http.get("/operator", headers={"authorization": f"Bearer {token}"})
    assert "(team-wide)" in page.text and "(personal: each user&#39;s own)" in page.text


async def _approved_link(s: Site, who: Principal) -> ConnectLink:
    link = await s.gateway.connect(who, "team")
    assert isinstance(link, ConnectLink) and link.approval_id is not None
    assert await s.gateway.approvals.decide(link.approval_id, True, by=OPERATOR.user) is not None
    return link


async def test_an_approved_replacement_overtaken_by_another_stores_nothing_and_says_by_whom(tmp_path: Path) -> None:
    # Each operator's approval was to replace the credential stored when it was asked for: two approved
    # links submitted one after the other both said "Saved", the first silently overwritten.
    async with site(tmp_path) as s:
        first, second = await _approved_link(s, ALICE), await _approved_link(s, BOB)
        assert (await s.submit(first.connect_url, "alice-new-token")).status_code == 200
        late = await s.submit(second.connect_url, BOB_CANARY)
        assert late.status_code == 409 and "replaced meanwhile" in late.text and "Saved" not in late.text
        assert "by alice (agent claude) through a connect link, approved by operator" in late.text
        assert await s.value("team") == "alice-new-token"
        [row] = await s.changes()
        assert row.user == "alice"
        # The refused link's approval is spent with it: a new link asks again, over the value stored now.
        again = await s.gateway.connect(BOB, "team")
        assert isinstance(again, ConnectLink) and again.approval_id not in (None, second.approval_id)
        [asked] = await s.store.list_approvals("pending")
        assert "The one stored now was stored" not in asked.summary and "by alice (agent claude)" in asked.summary
        _no_canary(late.text, asked.summary)


async def test_two_approved_replacements_submitted_together_store_one(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        links = [await _approved_link(s, ALICE), await _approved_link(s, BOB)]
        forms = {}
        for link, value in zip(links, ("alice-new-token", BOB_CANARY), strict=True):
            path = link.connect_url.removeprefix(PUBLIC)
            forms[path] = (csrf((await s.http.get(path)).text), value)
        answers: list[httpx2.Response] = []

        async def post(path: str, token: str, value: str) -> None:
            answers.append(await s.http.post(path, data={"csrf": token, "secret": value}))

        async with anyio.create_task_group() as group:
            for path, (token, value) in forms.items():
                group.start_soon(post, path, token, value)
        assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]
        assert "replaced meanwhile" in next(a for a in answers if a.status_code == 409).text
        [row] = await s.changes()
        assert (row.user, await s.value("team")) in (("alice", "alice-new-token"), ("bob", BOB_CANARY))


async def test_the_operators_secret_set_overtakes_an_approved_replacement(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        link = await _approved_link(s, BOB)
        # What ``mcp-gateway secret set`` records beside the value it stores.
        await s.vault.put("team", "operator-fixed-token")
        origins = s.gateway.credentials._changes.origins  # pyright: ignore[reportPrivateUsage]
        key = CredentialKey(connector="team", principal=PROJECT_WIDE, name="default")
        await origins.stored(key, by=OPERATOR.user, via="secret set", replaced=True)
        late = await s.submit(link.connect_url, BOB_CANARY)
        assert late.status_code == 409 and "by operator through `mcp-gateway secret set`" in late.text
        assert await s.value("team") == "operator-fixed-token"


async def test_a_replacement_waiting_when_the_credential_is_deleted_adds_one_and_withdraws_its_approval(
    tmp_path: Path,
) -> None:
    # Deleted, there is nothing left to replace: any link minted now adds one at once, so the one waiting
    # for an operator does too, instead of waiting (and keeping its approval pending) for nothing.
    async with site(tmp_path) as s:
        link = await s.gateway.connect(BOB, "team")
        assert isinstance(link, ConnectLink) and link.approval_id is not None
        await s.vault.delete("team")
        form = await s.http.get(link.connect_url.removeprefix(PUBLIC))
        assert form.status_code == 200 and 'name="secret"' in form.text and "Waiting" not in form.text
        assert "replaces the team-wide credential" not in form.text
        assert (await s.submit(link.connect_url, BOB_CANARY)).status_code == 200
        assert await s.value("team") == BOB_CANARY
        approval = await s.store.get_approval(link.approval_id)
        assert approval is not None and approval.status == "expired"
        [row] = await s.changes()
        assert (json.loads(row.args_preview)["replaced"], row.approved_by) == (None, None)


async def test_an_operators_refusal_still_stands_after_the_credential_is_deleted(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        link = await s.gateway.connect(BOB, "team")
        assert isinstance(link, ConnectLink) and link.approval_id is not None
        await s.gateway.approvals.decide(link.approval_id, False, by=OPERATOR.user)
        await s.vault.delete("team")
        refused = await s.submit(link.connect_url, BOB_CANARY)
        assert refused.status_code == 403 and await s.value("team") is None


async def test_a_refused_replacement_says_who_replaced_it_and_when(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        link = await _approved_link(s, BOB)
        assert (await s.submit(link.connect_url, BOB_CANARY)).status_code == 200
        replaced_at = s.clock.now()
        refused = await s.gateway.call(ALICE, "team.revoked.get")
        assert isinstance(refused, NeedsAuth), refused
        told = (
            f"The team-wide credential of team was replaced at {replaced_at:%Y-%m-%d %H:%M:%S} UTC by bob "
            "(agent claude) through a connect link, approved by operator; team answered 401 to team.revoked.get "
            "carrying it at"
        )
        assert told in refused.reason
        # The operator asked to approve alice's reconnection is told the same.
        [asked] = await s.store.list_approvals("pending")
        assert told in asked.summary
        listed = {c.slug: c for c in (await s.gateway.connectors(ALICE)).connectors}
        assert listed["team"].status == "needs_auth" and listed["team"].warning is not None
        assert told in listed["team"].warning and listed["team"].auth_configured
        # Accepted again (the refusal was the upstream's passing mood): ready, and nothing to tell.
        assert await s.sends_as(ALICE) == f"Bearer {BOB_CANARY}"
        listed = {c.slug: c for c in (await s.gateway.connectors(ALICE)).connectors}
        assert listed["team"].status == "ready" and listed["team"].warning is None
        _no_canary(refused.model_dump_json(), asked.summary)


async def test_a_replacement_withdrawn_by_a_deletion_then_overtaken_by_a_new_one_says_so(tmp_path: Path) -> None:
    # The operator approved bob's replacement; `secret delete` withdrew it; alice's link then added one.
    # Bob's page said "was not approved by an operator": it was, and was withdrawn.
    async with site(tmp_path) as s:
        link = await _approved_link(s, BOB)
        key = CredentialKey(connector="team", principal=PROJECT_WIDE, name="default")
        await s.vault.delete("team")  # what `secret delete` does
        await s.gateway.credentials._changes.origins.forget(key)  # pyright: ignore[reportPrivateUsage]
        await s.gateway.approvals.withdraw_credential("team", "default")
        added = await s.gateway.connect(ALICE, "team")
        assert isinstance(added, ConnectLink) and added.approval_id is None
        assert (await s.submit(added.connect_url, "alice-new-token")).status_code == 200
        for page in (await s.http.get(link.connect_url.removeprefix(PUBLIC)), await s.submit(link.connect_url, "x")):
            assert page.status_code == 409 and "Approval withdrawn" in page.text, page.text
            assert "was deleted since" in page.text and "by alice (agent claude) through a connect link" in page.text
            assert "not approved" not in page.text
        assert await s.value("team") == "alice-new-token"


async def test_a_store_withdraws_the_replacements_it_made_moot(tmp_path: Path) -> None:
    # Bob's replacement waited for an operator while alice's approved one was stored: it stayed pending
    # with a stale "stored now", approving it said "approved", and only the typed value got a 409.
    async with site(tmp_path) as s:
        waiting = await s.gateway.connect(BOB, "team")
        assert isinstance(waiting, ConnectLink) and waiting.approval_id is not None
        first = await _approved_link(s, ALICE)
        assert (await s.submit(first.connect_url, "alice-new-token")).status_code == 200
        withdrawn = await s.store.get_approval(waiting.approval_id)
        assert withdrawn is not None and withdrawn.status == "expired"
        assert await s.gateway.approvals.decide(waiting.approval_id, True, by=OPERATOR.user) is None
        page = await s.http.get(waiting.connect_url.removeprefix(PUBLIC))
        assert page.status_code == 409 and "replaced meanwhile" in page.text and 'name="secret"' not in page.text
        assert "by alice (agent claude) through a connect link" in page.text


@asynccontextmanager
async def slow_site(tmp_path: Path, refused: set[str]) -> AsyncIterator[tuple[Site, anyio.Event, anyio.Event]]:
    """``site`` whose ``/slow`` waits until the test lets it answer, then answers 401 to a value in
    ``refused`` (a key revoked at the provider while the call was in flight)."""
    sent: list[httpx2.Request] = []
    arrived, answer = anyio.Event(), anyio.Event()

    async def upstream(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        if request.url.path == "/slow":
            arrived.set()
            await answer.wait()
        if request.headers["authorization"].removeprefix("Bearer ") in refused:
            return httpx2.Response(401, json={"message": "token revoked"})
        return httpx2.Response(200, json={"ok": True})

    manifest = MANIFEST.replace(
        "          - {path: revoked.get,",
        "          - {path: slow.get, method: GET, url: /slow, summary: Answer late}\n          - {path: revoked.get,",
    )
    async with page_site(tmp_path, manifest, upstream, credentials={"team": TEAM_CANARY}) as p:
        yield Site(p.gateway, p.vault, p.store, p.clock, p.http, sent), arrived, answer


async def _operator_sets(s: Site, value: str) -> None:
    """What ``mcp-gateway secret set`` does: the value, then its record (with the sealed value's fingerprint)."""
    fingerprint = await s.vault.put("team", value)
    origins = s.gateway.credentials._changes.origins  # pyright: ignore[reportPrivateUsage]
    key = CredentialKey(connector="team", principal=PROJECT_WIDE, name="default")
    await origins.stored(key, by=OPERATOR.user, via="secret set", replaced=True, fingerprint=fingerprint)


async def _status(s: Site) -> tuple[str, str | None]:
    listed = {c.slug: c for c in (await s.gateway.connectors(ALICE)).connectors}
    return listed["team"].status, listed["team"].warning


async def test_a_401_to_a_call_that_carried_a_credential_replaced_meanwhile_marks_nothing(tmp_path: Path) -> None:
    # The key was rotated at the provider and stored while a slow call carried the old one: the 401 it
    # drew speaks of the old key, not of the one stored now.
    async with slow_site(tmp_path, {TEAM_CANARY}) as (s, arrived, answer):
        results: list[object] = []
        async with anyio.create_task_group() as group:

            async def call() -> None:
                results.append(await s.gateway.call(ALICE, "team.slow.get"))

            group.start_soon(call)
            await arrived.wait()
            await _operator_sets(s, "rotated-team-token")
            answer.set()
        [result] = results
        assert result.status == "error" and result.reason == "auth_failed", result  # type: ignore[attr-defined]
        assert "replaced at" in result.message and "Call again" in (result.hint or "")  # type: ignore[attr-defined]
        assert await s.store.list_approvals("pending") == []  # nobody is asked to approve a reconnection
        assert await _status(s) == ("ready", None)
        assert await s.sends_as(BOB) == "Bearer rotated-team-token"


async def test_a_success_of_a_call_that_carried_a_credential_replaced_meanwhile_keeps_the_new_ones_mark(
    tmp_path: Path,
) -> None:
    # The operator stored a mistyped key while a call carried the old, good one: the new key's 401 is not
    # cleared by the old key's success.
    async with slow_site(tmp_path, {"mistyped-token"}) as (s, arrived, answer):
        results: list[object] = []
        async with anyio.create_task_group() as group:

            async def call() -> None:
                results.append(await s.gateway.call(ALICE, "team.slow.get"))

            group.start_soon(call)
            await arrived.wait()
            await _operator_sets(s, "mistyped-token")
            refused = await s.gateway.call(BOB, "team.me.get")
            assert isinstance(refused, NeedsAuth), refused
            answer.set()
        assert [r.status for r in results] == ["ok"]  # type: ignore[attr-defined]
        status, warning = await _status(s)
        assert status == "needs_auth" and warning is not None and "team answered 401 to team.me.get" in warning


async def test_a_shared_connector_carries_the_team_credential_not_one_left_from_a_per_user_period(
    tmp_path: Path,
) -> None:
    # Stored while team was per_user, bob's own kept overriding the team-wide one the operator rotated.
    async with site(tmp_path) as s:
        await s.vault.put("team", BOB_CANARY, principal="bob")
        assert await s.sends_as(BOB) == f"Bearer {TEAM_CANARY}"
        await s.vault.delete("team")  # no team-wide one: bob's leftover does not make team ready
        listed = {c.slug: c for c in (await s.gateway.connectors(BOB)).connectors}
        assert listed["team"].status == "needs_auth"
        assert isinstance(await s.gateway.call(BOB, "team.me.get"), NeedsAuth)


async def test_a_team_replacement_approved_before_the_connector_became_per_user_stores_nothing(
    tmp_path: Path,
) -> None:
    # Approved as "replace the team-wide credential", it stored bob's value as his personal one.
    from mcp_gateway.manifest import parse_manifest

    async with site(tmp_path) as s:
        link = await _approved_link(s, BOB)
        per_user = MANIFEST.replace(
            "    auth: {type: bearer}\n    source:",
            "    auth: {type: bearer}\n    credentials: per_user\n    source:",
            1,
        )
        await s.gateway.reload(parse_manifest(per_user, base_dir=tmp_path))
        for page in (await s.http.get(link.connect_url.removeprefix(PUBLIC)), await s.submit(link.connect_url, "x")):
            assert page.status_code in (200, 409) and "credentials: per_user" in page.text, page.text
            assert "nobody approved" in page.text and 'name="secret"' not in page.text
        assert await s.value("team", "bob") is None and await s.value("team") == TEAM_CANARY


async def test_an_approved_replacement_does_not_cover_another_api_that_took_the_connectors_name(
    tmp_path: Path,
) -> None:
    # team was removed and re-added as another API at another address: the old approval revived, and
    # the old key went to the new address with nothing saying so.
    from mcp_gateway.manifest import parse_manifest

    async with site(tmp_path) as s:
        link = await _approved_link(s, BOB)
        origins = s.gateway.credentials._changes.origins  # pyright: ignore[reportPrivateUsage]
        key = CredentialKey(connector="team", principal=PROJECT_WIDE, name="default")
        await origins.stored(key, by=OPERATOR.user, via="secret set", replaced=False, address="http://team.test")
        link = await _approved_link(s, BOB)  # asked against the revision just recorded
        without = MANIFEST.replace("  - slug: team\n", "  - slug: gone_team\n", 1).replace("[team, mine]", "[mine]")
        await s.gateway.reload(parse_manifest(without, base_dir=tmp_path))
        gone = await s.http.get(link.connect_url.removeprefix(PUBLIC))
        assert gone.status_code == 410 and "no longer configured" in gone.text
        other = MANIFEST.replace("base_url: http://team.test", "base_url: http://other.test", 1)
        await s.gateway.reload(parse_manifest(other.replace("name: Team API", "name: Another API"), base_dir=tmp_path))
        for page in (await s.http.get(link.connect_url.removeprefix(PUBLIC)), await s.submit(link.connect_url, "x")):
            assert page.status_code == 409 and "http://team.test" in page.text and "elsewhere" in page.text, page.text
        assert await s.value("team") == TEAM_CANARY
        status, warning = await _status(s)
        assert warning is not None and "stored while team sent it to http://team.test" in warning
        assert "it is sent to http://other.test now" in warning and status == "ready"


async def test_link_pages_say_who_stored_the_credential_and_that_an_approval_expired(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        await s.vault.delete("team")
        adding = await s.gateway.connect(BOB, "team")
        assert isinstance(adding, ConnectLink) and adding.approval_id is None
        stored_at = s.clock.now()
        await _operator_sets(s, "operator-token")  # `secret set` while bob's adding link was open
        told = f"at {stored_at:%Y-%m-%d %H:%M:%S} UTC by operator through `mcp-gateway secret set`"
        for page in (
            await s.http.get(adding.connect_url.removeprefix(PUBLIC)),
            await s.submit(adding.connect_url, "x"),
        ):
            assert page.status_code == 409 and "Needs an operator" in page.text and told in page.text, page.text
        # Waiting for an operator: the page says whose credential saving would replace.
        waiting = await s.gateway.connect(ALICE, "team")
        assert isinstance(waiting, ConnectLink) and waiting.approval_id is not None
        page = await s.http.get(waiting.connect_url.removeprefix(PUBLIC))
        assert "Waiting for an operator" in page.text and f"The one stored now was replaced {told}" in page.text
        # Approved, then expired before the link was used: not "was not approved".
        assert await s.gateway.approvals.decide(waiting.approval_id, True, by=OPERATOR.user) is not None
        past = s.clock.now().isoformat(timespec="microseconds")[:-6] + "Z"
        with sqlite3.connect(tmp_path / "pages.db") as db:  # its time ran out before the link's did
            db.execute("UPDATE approval SET expires_at = ? WHERE id = ?", (past, waiting.approval_id))
        expired = await s.http.get(waiting.connect_url.removeprefix(PUBLIC))
        assert "Approval expired" in expired.text and "An operator approved" in expired.text, expired.text
        assert "not approved" not in expired.text
