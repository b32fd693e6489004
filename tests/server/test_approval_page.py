"""The approval page shows the approver what will run: every argument in full (long ones folded,
never cut), hidden and bidi characters escaped under a warning, what the action does and the
method and URL it calls, the fingerprint of the exact call, and who asks in words a person reads.

The real pages app runs in process (Starlette over ``httpx2.ASGITransport``) on a real gateway
(SQLite store, AES-GCM vault, link and approval services); the upstream is a recording
``httpx2.MockTransport`` app.
"""

from __future__ import annotations

import html
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_gateway.core import Gateway
from mcp_gateway.server.pages._arguments import FOLD_CHARS, arguments_view
from mcp_gateway.services.approvals import fingerprint
from mcp_gateway.services.identity import Principal
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.model import Ok, PendingApproval
from tests.support.page_site import PUBLIC, page_site
from tests.support.pages import csrf

pytestmark = pytest.mark.anyio

CANARY = "canary-approval-page-token-7731"
MANIFEST = f"""
project: approval-page
public_url: {PUBLIC}
connectors:
  - slug: pay
    base_url: http://upstream.test/v1
    auth: {{type: bearer}}
    source:
      http:
        actions:
          - path: payments.create
            method: POST
            url: /payments
            summary: Send money from the team account to someone
            input_schema:
              type: object
              required: [to, amount]
              properties:
                a_note: {{type: string}}
                to: {{type: string}}
                amount: {{type: string}}
                api_token: {{type: string}}
                auth: {{type: object}}
                signature_block: {{type: array, items: {{type: string}}}}
                password: {{type: string}}
"""
TOOL = "pay.payments.create"
BOT = Principal(user="token:tk_8f2a", agent="bot")
ALICE = Principal(user="alice", agent="claude")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Site:
    gateway: Gateway
    store: SQLiteStore
    http: httpx2.AsyncClient
    sent: list[httpx2.Request]

    async def pending(self, principal: Principal, args: dict[str, Any]) -> PendingApproval:
        result = await self.gateway.call(principal, TOOL, args)
        assert isinstance(result, PendingApproval), result
        return result

    async def page(self, pending: PendingApproval) -> str:
        answer = await self.http.get(pending.approval_url.removeprefix(PUBLIC))
        assert answer.status_code == 200, answer.text
        return answer.text


@asynccontextmanager
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    sent: list[httpx2.Request] = []

    def upstream(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(200, json={"ok": True})

    async with page_site(tmp_path, MANIFEST, upstream, credentials={"pay": CANARY}) as p:
        yield Site(p.gateway, p.store, p.http, sent)


async def test_a_long_first_argument_hides_nothing_after_it_and_approving_runs_exactly_that(tmp_path: Path) -> None:
    note = "Quarterly reconciliation, see attached. " * 150  # ~6,000 characters, sorted first
    args = {"a_note": note, "to": "IBAN DE89 3704 0044 0532 0130 00", "amount": "9,750.00 EUR"}
    async with site(tmp_path) as s:
        pending = await s.pending(BOT, args)
        page = await s.page(pending)
        text = html.unescape(page)
        # Every argument, in full: the long one folded but whole, the short ones open after it.
        assert json.dumps(note) in text
        assert '"IBAN DE89 3704 0044 0532 0130 00"' in text and '"9,750.00 EUR"' in text
        assert page.count("<details>") == 1 and f"{len(json.dumps(note)):,} characters" in text
        approved = await s.http.post(
            pending.approval_url.removeprefix(PUBLIC), data={"csrf": csrf(page), "decision": "approve"}
        )
        assert "Approved" in approved.text
        ran = await s.gateway.call(BOT, TOOL, args, approval_id=pending.approval_id)
    assert isinstance(ran, Ok), ran
    assert json.loads(s.sent[-1].content) == args  # what ran is what the page showed


async def test_bidi_and_invisible_characters_are_escaped_under_a_warning(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        pending = await s.pending(BOT, {"to": "acct-7", "amount": "\u202e0001\u202c", "a_note": "pay\u200bme"})
        page = await s.page(pending)
    assert "\u202e" not in page and "\u202c" not in page and "\u200b" not in page
    assert '<mark class="hidden-char"' in page and "\\u202e" in page and "\\u202c" in page and "\\u200b" in page
    assert 'class="warning" role="alert"' in page and "direction-changing" in page


async def test_a_word_mixing_alphabets_is_named_under_a_warning(tmp_path: Path) -> None:
    # "аpple.com" with a Cyrillic "а" reads as apple.com and is another host.
    async with site(tmp_path) as s:
        page = html.unescape(
            await s.page(await s.pending(BOT, {"to": "https://аpple.com/login", "amount": "1", "a_note": "Москва"}))
        )
    assert "mix letters of different alphabets" in page
    assert "https://аpple.com/login (а is CYRILLIC SMALL LETTER A)" in page
    assert "Москва (" not in page  # one alphabet throughout: a word, not a look-alike


async def test_a_credential_like_name_hides_values_never_what_the_call_does(tmp_path: Path) -> None:
    # An agent naming an argument "auth" or "signature" hid a whole payload from the approver.
    args = {
        "to": "acct-7",
        "amount": "10",
        "auth": {"role": "admin", "grant_all_repos": True},
        "signature_block": ["delete every repo"],
        "password": "hunter2-passphrase",
    }
    async with site(tmp_path) as s:
        page = html.unescape(await s.page(await s.pending(BOT, args)))
    assert '"role": "[redacted]"' in page and '"grant_all_repos": true' in page  # what it sets, shown
    assert "hunter2" not in page and "delete every repo" not in page  # values under such names stay hidden
    assert "3 values are hidden as [redacted]" in page  # and the approver is told so


async def test_plain_arguments_raise_no_warning(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        page = await s.page(await s.pending(BOT, {"to": "acct-7", "amount": "12.00 café"}))
    assert 'class="warning"' not in page and "<details>" not in page and "café" in page


async def test_the_page_shows_what_the_action_does_where_it_goes_and_the_calls_fingerprint(tmp_path: Path) -> None:
    args = {"to": "acct-7", "amount": "10", "api_token": "agent-passed-value-1234"}
    async with site(tmp_path) as s:
        pending = await s.pending(ALICE, args)
        page = html.unescape(await s.page(pending))
        digest = fingerprint(ALICE, TOOL, args)
        assert "Send money from the team account to someone" in page
        assert "POST http://upstream.test/v1/payments" in page
        assert f'<code class="fingerprint">{digest}</code>' in page
        assert "agent-passed-value-1234" not in page and CANARY not in page
        record = await s.store.get_approval(pending.approval_id)
        assert record is not None and record.fingerprint == digest


async def test_the_asker_is_named_as_a_person_reads_it(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        by_alice = html.unescape(await s.page(await s.pending(ALICE, {"to": "a", "amount": "1"})))
        by_token = html.unescape(await s.page(await s.pending(BOT, {"to": "b", "amount": "2"})))
    assert "<strong>alice, through the agent “claude”,</strong> asks to run" in by_alice
    assert "<strong>The agent “bot” (static token tk_8f2a, no user signed in)</strong> asks to run" in by_token
    assert "<strong>token:" not in by_token and "token:tk_8f2a" not in by_token


async def test_arguments_cut_when_stored_are_said_to_be_incomplete_and_cannot_be_approved(tmp_path: Path) -> None:
    async with site(tmp_path) as s:
        pending = await s.pending(BOT, {"to": "c", "amount": "3"})
        record = await s.store.get_approval(pending.approval_id)
        assert record is not None
        await s.store.put_approval(record.model_copy(update={"arguments": '{\n  "amount": "3",\n  "to": "c'}))
        page = await s.page(pending)
        assert "too long to show in full" in page and 'value="approve"' not in page
        refused = await s.http.post(
            pending.approval_url.removeprefix(PUBLIC), data={"csrf": csrf(page), "decision": "approve"}
        )
    assert refused.status_code == 403


def test_the_view_folds_long_values_but_keeps_them_whole() -> None:
    long = "x" * (FOLD_CHARS + 1)
    view = arguments_view(json.dumps({"a": long, "b": "short"}, indent=2))
    first, second = view.arguments
    assert first.preview is not None and "".join(t for t, _ in first.value.runs) == json.dumps(long)
    assert second.preview is None and view.complete and not view.hidden
