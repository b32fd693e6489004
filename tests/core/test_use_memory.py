"""``discover`` learning from use, through the ``Gateway``: a successful call of an answer lifts it for
reworded repeats, and only there; ``learn: off``; agent and project scopes; permission views; an agent
looping on one action; decay; no secret kept.

Real collaborators (``MemoryStore``, vault, auditor, the lexical index); the upstream is a few lines
behind ``httpx2.MockTransport``, failing on ``/fail``, and time is a ``FixedClock``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx2
import pytest

from mcp_gateway.core import Gateway
from mcp_gateway.core.results import DiscoverResult
from mcp_gateway.discovery.use_lift import HALF_LIFE_DAYS, LIFT_CAP
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.primitives.crypto import AESGCMCipher
from mcp_gateway.services.approvals import ApprovalService
from mcp_gateway.services.audit import Auditor
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.services.identity import Principal
from mcp_gateway.services.links import LinkService
from mcp_gateway.store.contract import UseRecord
from mcp_gateway.store.memory import MemoryStore
from mcp_gateway.vocabulary.clock import FixedClock

pytestmark = pytest.mark.anyio

MANIFEST = """
project: learn
default_mode: allow_all
discovery: {{learn: {learn}}}
agents:
  - name: alice
    connectors: [desk, vault]
  - name: bob
    connectors: [desk]
  - name: carol
    connectors: [desk]
connectors:
  - slug: desk
    base_url: http://desk.test
    source:
      http:
        actions:
          - {{path: issues.report, method: POST, url: /issues, summary: Report a problem with a page}}
          - {{path: tickets.report, method: POST, url: /tickets, summary: Report a problem with a page as a ticket}}
          - {{path: reports.send, method: POST, url: /reports, summary: Send the monthly report to finance}}
          - {{path: pages.list, method: GET, url: /pages, summary: List the pages}}
          - {{path: pages.broken, method: POST, url: /fail, summary: Report a problem with a page that breaks}}
          - {{path: invoices.pay, method: POST, url: /invoices, summary: Pay an invoice}}
          - {{path: flags.create, method: POST, url: /flags, summary: Create a flag that turns a checkout feature on}}
          - {{path: flags.update, method: PATCH, url: /flags/x, summary: Update a flag}}
  - slug: vault
    base_url: http://vault.test
    source:
      http:
        actions:
          - {{path: problems.report, method: POST, url: /problems, summary: Report a problem with the login page}}
"""

ASK = "report a problem with the login page"
AGAIN = "the login page has a problem, report it"
UNRELATED = ("send the monthly numbers to finance", "list the pages")
ALICE, BOB, CAROL = Principal("u", "alice"), Principal("u", "bob"), Principal("u", "carol")
SECRET = "sk_live_c4n4ry5ecretV4lue0123"


@dataclass
class Harness:
    gateway: Gateway
    store: CountingStore
    clock: FixedClock

    async def names(self, principal: Principal, query: str) -> list[str]:
        return [hit.name for hit in (await self.found(principal, query)).results]

    async def found(self, principal: Principal, query: str) -> DiscoverResult:
        result = await self.gateway.discover(principal, query)
        assert isinstance(result, DiscoverResult)
        return result

    async def call(self, principal: Principal, tool: str) -> str:
        return (await self.gateway.call(principal, tool, {})).status


class CountingStore(MemoryStore):
    """Counts the uses written."""

    writes = 0

    async def record_use(self, record: UseRecord) -> None:
        self.writes += 1
        await super().record_use(record)


@asynccontextmanager
async def harness(learn: str = "agent") -> AsyncIterator[Harness]:
    manifest = parse_manifest(MANIFEST.format(learn=learn))
    clock, store = FixedClock(), CountingStore()
    await store.open()

    async def upstream(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(500 if request.url.path == "/fail" else 200, json={"ok": True})

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream)) as http:
        vault = CredentialVault(store, AESGCMCipher(b"k" * 32, project=manifest.project), project=manifest.project)
        gateway = Gateway(
            manifest=manifest,
            store=store,
            vault=vault,
            clock=clock,
            http=http,
            links=LinkService(store, clock, manifest.public_url),
            approvals=ApprovalService(store, clock),
            auditor=Auditor(store),
        )
        await gateway.sync()
        yield Harness(gateway, store, clock)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_used_answer_comes_first_for_a_reworded_repeat_and_nothing_else_moves() -> None:
    async with harness() as h:
        before = await h.found(BOB, ASK)
        assert [r.name for r in before.results][:2] == ["desk.issues.report", "desk.tickets.report"]
        unrelated = {query: await h.names(BOB, query) for query in UNRELATED}
        assert await h.call(BOB, "desk.tickets.report") == "ok"
        after = await h.found(BOB, AGAIN)
        assert [r.name for r in after.results][:2] == ["desk.tickets.report", "desk.issues.report"]
        # Bounded: the lift is at most LIFT_CAP of the best score, and the confidence stays the ranker's.
        old = {r.name: r.score for r in before.results}
        new = {r.name: r.score for r in after.results}
        assert 0 < new["desk.tickets.report"] - old["desk.tickets.report"] <= LIFT_CAP * old["desk.issues.report"]
        assert new["desk.issues.report"] == old["desk.issues.report"] and after.confidence == before.confidence
        assert {query: await h.names(BOB, query) for query in UNRELATED} == unrelated


async def test_an_answer_no_use_lifts_is_the_rankers_own_whatever_the_limit() -> None:
    # With uses to lift by, the ranker is asked for a wider pool; cut to a small limit, that pool used
    # to group near-twins otherwise than the ranker's own answer, so an unrelated answer changed.
    queries = ("report a problem", "flags", "turn on the checkout flag", *UNRELATED)

    async def answers(h: Harness, who: Principal) -> dict[tuple[str, int], DiscoverResult]:
        out: dict[tuple[str, int], DiscoverResult] = {}
        for query in queries:
            for limit in (1, 2, 3, 10):
                result = await h.gateway.discover(who, query, limit=limit)
                assert isinstance(result, DiscoverResult)
                out[(query, limit)] = result
        return out

    async with harness("project") as h:
        before = await answers(h, BOB)
        assert (await h.names(ALICE, "report a problem with the login page"))[0] == "vault.problems.report"
        assert await h.call(ALICE, "vault.problems.report") == "ok"
        await h.names(CAROL, "pay the invoice")
        assert await h.call(CAROL, "desk.invoices.pay") == "ok"
        after = await answers(h, BOB)
        assert [key for key in before if before[key] != after[key]] == []


async def test_an_agent_with_uses_keeps_the_rankers_order_where_it_is_not_by_score() -> None:
    # Between near-twins the kind the request asks for leads ("turn on" updates), ahead of a higher
    # score; lifting by use re-sorted every answer by score once an agent had any use.
    async with harness() as h:
        switch = "turn on the checkout flag"
        assert (await h.names(BOB, switch))[:2] == ["desk.flags.update", "desk.flags.create"]
        await h.names(BOB, ASK)
        assert await h.call(BOB, "desk.tickets.report") == "ok"
        assert (await h.names(BOB, switch))[:2] == ["desk.flags.update", "desk.flags.create"]


async def test_a_store_that_fails_to_keep_a_use_never_fails_the_call_that_ran() -> None:
    # A use is written after the call answered: a locked SQLite file (past its busy timeout) raised
    # here, and the agent got an error for a call that had taken effect.
    async def locked(record: UseRecord) -> None:
        raise sqlite3.OperationalError("database is locked")

    async with harness() as h:
        await h.names(BOB, ASK)
        h.store.record_use = locked  # type: ignore[method-assign]
        assert await h.call(BOB, "desk.tickets.report") == "ok"


async def test_learning_off_records_nothing_and_lifts_nothing() -> None:
    async with harness("off") as h:
        first = await h.names(BOB, ASK)
        assert await h.call(BOB, "desk.tickets.report") == "ok"
        assert await h.names(BOB, AGAIN) == first
        assert await h.store.list_uses("agent:u/bob", 10) == [] and not h.store._d().uses  # pyright: ignore[reportPrivateUsage]


async def test_only_a_successful_call_of_a_recent_answer_is_a_use() -> None:
    async with harness() as h:
        assert await h.call(BOB, "desk.tickets.report") == "ok"  # no discover before it
        await h.names(BOB, ASK)
        assert await h.call(BOB, "desk.pages.broken") == "error"  # the upstream failed
        assert await h.call(BOB, "desk.invoices.pay") == "ok"  # not among the answers
        assert await h.store.list_uses("agent:u/bob", 10) == []
        h.clock.advance(16 * 60)  # the answer is too old to count
        assert await h.call(BOB, "desk.tickets.report") == "ok"
        assert await h.store.list_uses("agent:u/bob", 10) == []


@pytest.mark.parametrize(("learn", "shared"), [("agent", False), ("project", True)])
async def test_one_agents_use_counts_for_another_only_in_a_project_scope(learn: str, shared: bool) -> None:
    async with harness(learn) as h:
        await h.names(BOB, ASK)
        assert await h.call(BOB, "desk.tickets.report") == "ok"
        first = (await h.names(CAROL, AGAIN))[0]
        assert first == ("desk.tickets.report" if shared else "desk.issues.report")


async def test_a_use_of_an_action_another_agent_cannot_see_changes_nothing_for_it() -> None:
    async with harness("project") as h:
        bob_before = await h.found(BOB, ASK)
        assert (await h.names(ALICE, ASK))[0] == "vault.problems.report"
        for _ in range(3):
            assert await h.call(ALICE, "vault.problems.report") == "ok"
        assert len(await h.store.list_uses("project:learn", 10)) == 1
        bob_after = await h.found(BOB, AGAIN)
        assert bob_after.results == bob_before.results
        assert all(not r.name.startswith("vault.") for r in bob_after.results)


async def test_an_agent_looping_on_one_action_is_one_use_and_weighs_little() -> None:
    async with harness() as h:
        for _ in range(20):
            await h.names(BOB, ASK)
            for _ in range(5):
                assert await h.call(BOB, "desk.pages.list") == "ok"
        assert [u.action for u in await h.store.list_uses("agent:u/bob", 10)] == ["desk.pages.list"]
        assert h.store.writes == 1  # nothing embedded or written again for the repeats
        # A hundred calls lift it no more than one careful use would: it does not take over.
        names = await h.names(BOB, AGAIN)
        assert names[:2] == ["desk.issues.report", "desk.tickets.report"]


async def test_a_use_decays_and_is_forgotten() -> None:
    async with harness() as h:
        await h.names(BOB, ASK)
        assert await h.call(BOB, "desk.tickets.report") == "ok"
        assert (await h.names(BOB, AGAIN))[0] == "desk.tickets.report"
        h.clock.advance(4 * HALF_LIFE_DAYS * 86400)
        assert (await h.names(BOB, AGAIN))[0] == "desk.issues.report"
        h.clock.advance(10 * HALF_LIFE_DAYS * 86400)
        await h.names(BOB, UNRELATED[1])
        assert await h.call(BOB, "desk.pages.list") == "ok"  # a new use: the store forgets the old ones
        assert [u.action for u in await h.store.list_uses("agent:u/bob", 10)] == ["desk.pages.list"]


async def test_no_secret_in_a_query_is_kept() -> None:
    async with harness() as h:
        await h.names(BOB, f"{ASK} using the key {SECRET} (it is {SECRET.upper()})")
        assert await h.call(BOB, "desk.tickets.report") == "ok"
        (use,) = await h.store.list_uses("agent:u/bob", 10)
        assert use.words == "report problem login page"
        assert SECRET.lower() not in use.model_dump_json().lower()
