"""``Gateway`` decision paths, in process: grants, policy layers, hidden actions, approvals,
credentials, upstream answers, redaction, projection, audit, and the MCP surface on top.

Real collaborators everywhere (SQLite store, AES-GCM vault, link and approval services, auditor);
the only fakes are a ``FixedClock`` and a dozen-line upstream behind ``httpx2.MockTransport``
that records what reached it (STYLE 9).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx2
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_gateway.core import Gateway, result_payload
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.primitives.crypto import AESGCMCipher, credential_aad
from mcp_gateway.primitives.secrets import PROJECT_WIDE, CredentialKey, encode_secret
from mcp_gateway.server.tools import build_mcp_server
from mcp_gateway.services.approvals import ApprovalService, fingerprint
from mcp_gateway.services.audit import Auditor
from mcp_gateway.services.credentials import CredentialVault
from mcp_gateway.services.identity import OPERATOR, Principal
from mcp_gateway.services.links import LinkService
from mcp_gateway.store.audit_journal import AuditJournal
from mcp_gateway.store.contract import AuditRecord
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.model import Denied, ErrorResult, NeedsAuth, Ok, PendingApproval

pytestmark = pytest.mark.anyio

SECRET = "canary-s3cret-value-0123456789"
PUBLIC_URL = "http://pages.test"
APPROVAL_TTL_SECONDS = 15 * 60

# The `api` connector: bearer auth, a read, writes, a project-blocked admin action, a payment
# whose approval depends on its amount, and paths that make the upstream misbehave.
CONNECTORS = """
policies:
  - match: "*.admin.*"
    action: block
  - match: "api.payments.*"
    action: require_approval
    when: {amount: {gt: 100}}
connectors:
  - slug: api
    base_url: http://upstream.test
    auth: {type: bearer}
    policies:
      - match: "notes.create"
        action: always_run
      - match: "payments.*"
        action: always_run
    source:
      http:
        actions:
          - path: items.get
            method: GET
            url: /items/{id}
            summary: Fetch one item by its id
            input_schema: {type: object, required: [id], properties: {id: {type: string}}}
          - path: items.create
            method: POST
            url: /items
            summary: Create a new item with a name
            input_schema: {type: object, required: [name], properties: {name: {type: string}}}
          - path: notes.create
            method: POST
            url: /notes
            summary: Write a note
            input_schema: {type: object, properties: {text: {type: string}}}
          - path: payments.create
            method: POST
            url: /payments
            summary: Send a payment of an amount
            input_schema: {type: object, required: [amount], properties: {amount: {type: number}}}
          - path: payments.transfer
            method: POST
            url: /transfers
            summary: Transfer an amount, given as a number or a decimal string
            input_schema: {type: object, required: [amount], properties: {amount: {type: [number, string]}}}
          - path: admin.purge
            method: POST
            url: /admin/purge
            summary: Purge every item
          - path: status.get
            method: GET
            url: /status/{code}
            summary: Answer with the given HTTP status
            input_schema: {type: object, properties: {code: {type: string}, pad: {type: integer}}}
          - path: text.get
            method: GET
            url: /text/{n}
            summary: Answer with n characters of text ending in the credential
          - path: boom.get
            method: GET
            url: /boom
            summary: Crash the transport
          - path: down.get
            method: GET
            url: /down
            summary: Reach an upstream that refuses connections
  - slug: vault
    base_url: http://vault.test
    sensitive: true
    source:
      http:
        actions:
          - path: entries.list
            method: GET
            url: /entries
            summary: List the vault entries
  - slug: open
    base_url: http://open.test
    source:
      http:
        actions:
          - path: things.list
            method: GET
            url: /things
            summary: List the things
          - path: things.create
            method: POST
            url: /things
            summary: Create a thing
            input_schema: {type: object, properties: {name: {type: string}}}
"""

AGENTS = """
agents:
  - name: bot
    connectors: [open]
"""


def manifest_text(*, default_mode: str = "risk", agents: bool = False) -> str:
    head = f"project: unit\ndefault_mode: {default_mode}\npublic_url: {PUBLIC_URL}\n"
    return head + CONNECTORS + (AGENTS if agents else "")


class Upstream:
    """A recording upstream: echoes the request, or answers ``/status/{code}`` with that status
    and a message quoting the Authorization header (an upstream that leaks what it was sent)."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []
        self.hanging = anyio.Event()
        """Set once a request to ``/items/hang`` (which never gets an answer) arrived."""
        self.empty_403 = False
        """``/status/403`` answers with no body."""

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if (auth := request.headers.get("authorization")) is not None and auth != auth.strip():
            # What the HTTP client does before a byte leaves (h11 refuses such a header value).
            raise httpx2.LocalProtocolError(f"Illegal header value {auth!r}")
        self.requests.append(request)
        await anyio.lowlevel.checkpoint()  # let concurrent callers interleave, as a real network would
        path = request.url.path
        auth = request.headers.get("authorization")
        if path.startswith("/status/"):
            code = int(path.rsplit("/", 1)[1])
            if self.empty_403 and code == 403:
                return httpx2.Response(code)
            pad = "p" * int(request.url.params.get("pad", "0"))
            return httpx2.Response(code, json={"message": f"{pad}upstream answered {code}; you sent {auth}."})
        if path.startswith("/text/"):
            n = int(path.rsplit("/", 1)[1])
            return httpx2.Response(200, text="x" * n + (auth or ""), headers={"content-type": "text/plain"})
        if path == "/boom":
            raise RuntimeError("the transport broke")
        if path == "/items/hang":
            self.hanging.set()
            await anyio.sleep_forever()
        if path == "/down":
            raise httpx2.ConnectError("connection refused", request=request)
        return httpx2.Response(
            200,
            json={
                "method": request.method,
                "path": path,
                "body": json.loads(request.content) if request.content else None,
                "auth": auth,
                "nested": {"a": 1, "b": {"c": 2, "d": 3}},
            },
        )

    def hits(self, path: str) -> int:
        return sum(1 for r in self.requests if r.url.path == path)


class FullDiskStore(SQLiteStore):
    """A store whose audit table cannot be written."""

    async def append_audit(self, record: AuditRecord) -> None:
        raise OSError("disk full")


@dataclass
class Harness:
    gateway: Gateway
    store: SQLiteStore
    vault: CredentialVault
    clock: FixedClock
    upstream: Upstream
    approvals: ApprovalService
    auditor: Auditor


@asynccontextmanager
async def harness(
    tmp_path: Path,
    text: str | None = None,
    *,
    secret: str | None = SECRET,
    store_cls: type[SQLiteStore] = SQLiteStore,
    max_response_bytes: int | None = None,
    journal: AuditJournal | None = None,
) -> AsyncIterator[Harness]:
    manifest = parse_manifest(text or manifest_text(), base_dir=tmp_path)
    clock = FixedClock()
    upstream = Upstream()
    store = store_cls(tmp_path / "s.db")
    await store.open()
    try:
        vault = CredentialVault(store, AESGCMCipher(b"k" * 32, project=manifest.project), project=manifest.project)
        if secret is not None:
            await vault.put("api", secret)
        approvals = ApprovalService(store, clock)
        auditor = Auditor(store, journal=journal, retry_for=0.1)
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(upstream)) as http:
            extra: dict[str, Any] = {} if max_response_bytes is None else {"max_response_bytes": max_response_bytes}
            gateway = Gateway(
                manifest=manifest,
                store=store,
                vault=vault,
                clock=clock,
                http=http,
                links=LinkService(store, clock, manifest.public_url),
                approvals=approvals,
                auditor=auditor,
                **extra,
            )
            await gateway.sync()
            yield Harness(gateway, store, vault, clock, upstream, approvals, auditor)
    finally:
        await store.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def h(tmp_path: Path) -> AsyncIterator[Harness]:
    async with harness(tmp_path) as built:
        yield built


def payload(result: Any) -> dict[str, Any]:
    return result_payload(result)


def slugs(connectors: dict[str, Any]) -> list[str]:
    return [c["slug"] for c in connectors["connectors"]]


# -- grants ----------------------------------------------------------------------------------


async def test_without_agents_block_every_session_sees_every_connector(h: Harness) -> None:
    for principal in (OPERATOR, Principal(user="alice"), Principal(user="alice", agent="anything")):
        assert slugs(result_payload(await h.gateway.connectors(principal))) == ["api", "open", "vault"]


async def test_agent_sees_only_its_granted_connectors(tmp_path: Path) -> None:
    bot = Principal(user="operator", agent="bot")
    async with harness(tmp_path, manifest_text(agents=True)) as h:
        assert slugs(result_payload(await h.gateway.connectors(bot))) == ["open"]
        found = result_payload(await h.gateway.discover(bot, "fetch an item by its id"))
        assert all(r["name"].startswith("open.") for r in found["results"])
        # a connector not granted is one the agent has not got: named as missing, its own listed
        refused = result_payload(await h.gateway.discover(bot, "item", connector="api"))
        assert (refused["reason"], refused["message"]) == (
            "connector_not_found",
            "No connector named 'api'. Yours: open. Call connectors to list the ones you can use.",
        )

        described = result_payload(await h.gateway.describe(bot, "api.items.get"))
        assert described["reason"] == "action_not_found"
        assert not [s for s in described["suggestions"] if s["name"].startswith("api.")]

        # Calling into an ungranted connector looks exactly like calling a name that does not exist.
        result = await h.gateway.call(bot, "api.items.get", {"id": "1"})
        assert isinstance(result, Denied) and result.reason == "action_not_found"
        assert not [s for s in result.suggestions or [] if s["name"].startswith("api.")]
        connect = result_payload(await h.gateway.connect(bot, "api"))
        assert connect["reason"] == "connector_not_found"

        ok = await h.gateway.call(bot, "open.things.list")
        assert isinstance(ok, Ok)
        assert h.upstream.hits("/items/1") == 0


async def test_unknown_agent_sees_nothing_and_every_call_is_denied(tmp_path: Path) -> None:
    ghost = Principal(user="operator", agent="ghost")
    async with harness(tmp_path, manifest_text(agents=True)) as h:
        assert slugs(result_payload(await h.gateway.connectors(ghost))) == []
        assert (result_payload(await h.gateway.discover(ghost, "list the things")))["results"] == []
        assert (result_payload(await h.gateway.describe(ghost, "open.things.list")))["reason"] == "action_not_found"
        for tool in ("open.things.list", "api.items.get", "no.such.tool"):
            result = await h.gateway.call(ghost, tool, {"id": "1"})
            assert isinstance(result, Denied)
            assert result.reason == "connector_not_assigned"
        # A session that names no agent but is not the operator is a stranger too.
        assert slugs(result_payload(await h.gateway.connectors(Principal(user="token:abc")))) == []
        assert h.upstream.requests == []


async def test_operator_sees_every_connector_even_with_an_agents_block(tmp_path: Path) -> None:
    async with harness(tmp_path, manifest_text(agents=True)) as h:
        assert slugs(result_payload(await h.gateway.connectors(OPERATOR))) == ["api", "open", "vault"]
        assert isinstance(await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"}), Ok)


# -- policy layers, through call --------------------------------------------------------------


async def test_project_block_names_its_layer_and_rule(h: Harness) -> None:
    result = await h.gateway.call(OPERATOR, "api.admin.purge")
    assert isinstance(result, Denied)
    assert (result.reason, result.source, result.rule) == ("policy_block", "project", "*.admin.*")
    assert h.upstream.requests == []


async def test_connector_always_run_beats_the_risk_default(h: Harness) -> None:
    result = await h.gateway.call(OPERATOR, "api.notes.create", {"text": "hi"})
    assert isinstance(result, Ok), result
    assert result.data["body"] == {"text": "hi"}
    assert h.upstream.hits("/notes") == 1
    described = result_payload(await h.gateway.describe(OPERATOR, "api.notes.create"))
    assert (described["policy"]["action"], described["policy"]["source"]) == ("always_run", "connector")
    assert described["policy"]["rule"] == "notes.create"
    # Without that rule the same kind of write waits for a human.
    pending = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
    assert isinstance(pending, PendingApproval)
    assert (await h.store.get_approval(pending.approval_id)).verdict_source == "risk_default"  # type: ignore[union-attr]


async def test_sensitive_connector_needs_approval_even_for_reads(h: Harness) -> None:
    result = await h.gateway.call(OPERATOR, "vault.entries.list")
    assert isinstance(result, PendingApproval), result
    record = await h.store.get_approval(result.approval_id)
    assert record is not None and record.verdict_source == "sensitive" and record.risk == "read"
    assert h.upstream.requests == []
    described = result_payload(await h.gateway.describe(OPERATOR, "vault.entries.list"))
    assert described["policy"]["source"] == "sensitive"
    assert described["policy"]["action"] == "require_approval"


async def test_allow_all_runs_writes_without_approval(tmp_path: Path) -> None:
    async with harness(tmp_path, manifest_text(default_mode="allow_all")) as h:
        result = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
        assert isinstance(result, Ok), result
        assert h.upstream.hits("/items") == 1
        rows = await h.store.list_audit(1)
        assert (rows[0].verdict, rows[0].verdict_source) == ("always_run", "allow_all")
        # A project block still wins over allow_all, and sensitive still asks.
        assert isinstance(await h.gateway.call(OPERATOR, "api.admin.purge"), Denied)
        assert isinstance(await h.gateway.call(OPERATOR, "vault.entries.list"), PendingApproval)


async def test_when_condition_requires_approval_only_above_the_threshold(h: Harness) -> None:
    small = await h.gateway.call(OPERATOR, "api.payments.create", {"amount": 100})
    assert isinstance(small, Ok), small
    big = await h.gateway.call(OPERATOR, "api.payments.create", {"amount": 100.5})
    assert isinstance(big, PendingApproval), big
    record = await h.store.get_approval(big.approval_id)
    assert record is not None
    assert (record.verdict_source, record.verdict_rule) == ("project", "api.payments.*")
    assert h.upstream.hits("/payments") == 1


async def test_when_condition_is_not_bypassed_by_a_numeric_string(h: Harness) -> None:
    """BUG (policy.py ``_compare``): a numeric condition silently fails for a string value, so the
    gating rule is skipped and the next layer (here: always_run) runs it. The agent controls the
    value; ``"1000000"`` must not slip past ``gt: 100`` where the schema accepts strings."""
    result = await h.gateway.call(OPERATOR, "api.payments.transfer", {"amount": "1000000"})
    assert isinstance(result, PendingApproval), result
    assert h.upstream.hits("/transfers") == 0


async def test_describe_says_conditional_only_when_a_conditional_rule_matches(h: Harness) -> None:
    """BUG (core/gateway.py ``describe``): ``conditional`` is true for every action as soon as any rule
    anywhere in the manifest has ``when``, even one that can never apply to this action."""
    payments = result_payload(await h.gateway.describe(OPERATOR, "api.payments.create"))
    assert payments["policy"]["conditional"] is True
    notes = result_payload(await h.gateway.describe(OPERATOR, "api.notes.create"))
    assert notes["policy"]["conditional"] is False


# -- hidden actions -------------------------------------------------------------------------------


async def test_unconditionally_blocked_action_is_invisible_but_call_explains(h: Harness) -> None:
    found = result_payload(await h.gateway.discover(OPERATOR, "purge every item", limit=50))
    assert "api.admin.purge" not in [r["name"] for r in found["results"]]
    described = result_payload(await h.gateway.describe(OPERATOR, "api.admin.purge"))
    assert described["status"] == "denied" and described["reason"] == "action_not_found"
    assert "api.admin.purge" not in [s["name"] for s in described["suggestions"]]
    api = next(c for c in result_payload(await h.gateway.connectors(OPERATOR))["connectors"] if c["slug"] == "api")
    assert api["actions"] == 9  # ten declared, one hidden

    result = await h.gateway.call(OPERATOR, "api.admin.purge")
    assert isinstance(result, Denied) and result.reason == "policy_block" and result.source == "project"


async def test_a_blocked_action_is_refused_before_its_arguments_are_checked(tmp_path: Path) -> None:
    # Argument errors would tell the name and schema of an action discover and describe do not show.
    text = manifest_text().replace(
        '  - match: "*.admin.*"\n', '  - match: "api.items.get"\n    action: block\n  - match: "*.admin.*"\n'
    )
    async with harness(tmp_path, text) as h:
        for args in ({}, {"unexpected": 1}, {"id": ["not", "a", "string"]}, {"id": "1"}):
            wrong = await h.gateway.call(OPERATOR, "api.items.get", args)
            assert isinstance(wrong, Denied) and wrong.reason == "policy_block" and not wrong.errors, wrong
            assert "schema" not in wrong.message


# -- approvals -----------------------------------------------------------------------------------


async def _approved(h: Harness, tool: str, args: dict[str, Any]) -> str:
    pending = await h.gateway.call(OPERATOR, tool, args)
    assert isinstance(pending, PendingApproval), pending
    decided = await h.approvals.decide(pending.approval_id, True)
    assert decided is not None and decided.status == "approved"
    return pending.approval_id


async def test_pending_approval_is_recorded_with_a_link(h: Harness) -> None:
    args = {"name": "widget"}
    result = await h.gateway.call(OPERATOR, "api.items.create", args)
    assert isinstance(result, PendingApproval)
    assert result.approval_url.startswith(f"{PUBLIC_URL}/approvals/")
    assert "api.items.create" in result.summary and "widget" in result.summary
    record = await h.store.get_approval(result.approval_id)
    assert record is not None
    assert record.status == "pending"
    assert record.tool == "api.items.create"
    assert record.fingerprint == fingerprint(OPERATOR, "api.items.create", args)
    assert record.expires_at.isoformat() == result.expires_at
    assert h.upstream.requests == []

    # Retrying before a human decided answers pending again, for the same approval.
    again = await h.gateway.call(OPERATOR, "api.items.create", args, approval_id=result.approval_id)
    assert isinstance(again, PendingApproval) and again.approval_id == result.approval_id
    assert h.upstream.requests == []


async def test_approved_call_runs_exactly_once(h: Harness) -> None:
    args = {"name": "widget"}
    approval_id = await _approved(h, "api.items.create", args)
    first = await h.gateway.call(OPERATOR, "api.items.create", args, approval_id=approval_id)
    assert isinstance(first, Ok), first
    assert first.data["body"] == args
    second = await h.gateway.call(OPERATOR, "api.items.create", args, approval_id=approval_id)
    assert isinstance(second, Denied) and second.reason == "approval_mismatch"
    assert h.upstream.hits("/items") == 1
    assert (await h.store.get_approval(approval_id)).status == "consumed"  # type: ignore[union-attr]


async def test_approval_covers_only_the_exact_arguments_and_principal(h: Harness) -> None:
    approval_id = await _approved(h, "api.items.create", {"name": "widget"})
    other_args = await h.gateway.call(OPERATOR, "api.items.create", {"name": "gadget"}, approval_id=approval_id)
    assert isinstance(other_args, Denied) and other_args.reason == "approval_mismatch"
    other_tool = await h.gateway.call(OPERATOR, "vault.entries.list", approval_id=approval_id)
    assert isinstance(other_tool, Denied) and other_tool.reason == "approval_mismatch"
    other_agent = Principal(user="operator", agent="mallory")
    stolen = await h.gateway.call(other_agent, "api.items.create", {"name": "widget"}, approval_id=approval_id)
    assert isinstance(stolen, Denied) and stolen.reason == "approval_mismatch"
    unknown = await h.gateway.call(OPERATOR, "api.items.create", {"name": "widget"}, approval_id="apr_nope")
    assert isinstance(unknown, Denied) and unknown.reason == "approval_mismatch"
    assert h.upstream.requests == []
    # None of those burned it: the exact call still runs.
    exact = await h.gateway.call(OPERATOR, "api.items.create", {"name": "widget"}, approval_id=approval_id)
    assert isinstance(exact, Ok)


async def test_denied_approval(h: Harness) -> None:
    pending = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
    assert isinstance(pending, PendingApproval)
    assert (await h.approvals.decide(pending.approval_id, False)).status == "denied"  # type: ignore[union-attr]
    result = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"}, approval_id=pending.approval_id)
    assert isinstance(result, Denied) and result.reason == "approval_denied" and result.source == "risk_default"
    assert h.upstream.requests == []


async def test_expired_approval(h: Harness) -> None:
    approval_id = await _approved(h, "api.items.create", {"name": "x"})
    h.clock.advance(APPROVAL_TTL_SECONDS + 1)
    result = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"}, approval_id=approval_id)
    assert isinstance(result, Denied) and result.reason == "approval_expired"
    assert (await h.store.get_approval(approval_id)).status == "expired"  # type: ignore[union-attr]

    # An approval never decided expires too, and can no longer be approved.
    pending = await h.gateway.call(OPERATOR, "api.items.create", {"name": "y"})
    assert isinstance(pending, PendingApproval)
    h.clock.advance(APPROVAL_TTL_SECONDS)
    assert await h.approvals.decide(pending.approval_id, True) is None
    late = await h.gateway.call(OPERATOR, "api.items.create", {"name": "y"}, approval_id=pending.approval_id)
    assert isinstance(late, Denied) and late.reason == "approval_expired"
    assert h.upstream.requests == []


async def test_concurrent_retries_of_one_approval_reach_the_upstream_once(h: Harness) -> None:
    args = {"name": "once"}
    approval_id = await _approved(h, "api.items.create", args)
    results: list[Any] = []

    async def retry() -> None:
        results.append(await h.gateway.call(OPERATOR, "api.items.create", args, approval_id=approval_id))

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(retry)

    assert h.upstream.hits("/items") == 1
    assert sorted(r.status for r in results) == ["denied"] * 9 + ["ok"]
    assert {r.reason for r in results if isinstance(r, Denied)} == {"approval_mismatch"}


async def test_an_approval_does_not_cover_the_action_once_it_sends_elsewhere(h: Harness, tmp_path: Path) -> None:
    # Approved as "POST http://upstream.test/items"; a reload then points the same action at another
    # method and host. The human approved what was shown, not what the action became.
    args = {"name": "widget"}
    approval_id = await _approved(h, "api.items.create", args)
    changed = (
        manifest_text()
        .replace("method: POST\n            url: /items\n", "method: DELETE\n            url: /admin/wipe\n")
        .replace("base_url: http://upstream.test", "base_url: http://other.test")
    )
    assert changed != manifest_text()
    await h.gateway.reload(parse_manifest(changed, base_dir=tmp_path))
    retry = await h.gateway.call(OPERATOR, "api.items.create", args, approval_id=approval_id)
    assert isinstance(retry, Denied) and retry.reason == "approval_mismatch", retry
    assert "POST http://upstream.test/items" in retry.message and "DELETE http://other.test/admin/wipe" in retry.message
    assert h.upstream.requests == []
    record = await h.store.get_approval(approval_id)
    assert record is not None and record.status == "approved"  # not spent: it covers what was shown, should that return


async def test_an_approval_does_not_cover_another_request_to_the_same_url(h: Harness, tmp_path: Path) -> None:
    # Same method and URL, but a reload adds a static header: the request differs from the one approved.
    args = {"name": "widget"}
    approval_id = await _approved(h, "api.items.create", args)
    changed = manifest_text().replace(
        "    base_url: http://upstream.test\n", "    base_url: http://upstream.test\n    headers: {X-Mode: live}\n"
    )
    assert changed != manifest_text()
    await h.gateway.reload(parse_manifest(changed, base_dir=tmp_path))
    retry = await h.gateway.call(OPERATOR, "api.items.create", args, approval_id=approval_id)
    assert isinstance(retry, Denied) and retry.reason == "approval_mismatch", retry
    # The page showed the headers it would send: the message names the one added.
    assert 'it would now send POST http://upstream.test/items, with headers x-mode: "live"' in retry.message
    assert h.upstream.requests == []
    record = await h.store.get_approval(approval_id)
    assert record is not None and record.status == "approved" and len(record.sends) == 64


async def test_an_approval_whose_request_bytes_changed_says_so_with_the_credential_clause_last(h: Harness) -> None:
    args = {"name": "widget"}
    approval_id = await _approved(h, "api.items.create", args)
    record = await h.store.get_approval(approval_id)
    assert record is not None
    await h.store.put_approval(record.model_copy(update={"sends": "0" * 64}))  # approved other bytes
    retry = await h.gateway.call(OPERATOR, "api.items.create", args, approval_id=approval_id)
    assert isinstance(retry, Denied) and retry.reason == "approval_mismatch", retry
    assert retry.message.startswith(
        "This call would not send the request the human approved: POST http://upstream.test/items with other "
        "headers or another body (the action's definition changed since, or its arguments are placed otherwise); "
        "it carries the team-wide credential of api. Call again without approval_id"
    ), retry.message
    assert h.upstream.requests == []


async def test_approval_is_not_burned_by_a_call_that_never_ran(tmp_path: Path) -> None:
    """BUG (core/calls.py ``_attempt``/``_run``): the approval gate consumes the approval before the
    credential is looked up, so a call that stops at needs_auth burns it: after connecting, the
    retry is refused (approval_mismatch) and the human must approve the very same call again.
    Either order of the two human steps is fine; approving twice is not."""
    args = {"name": "x"}
    approvals_asked = 0
    approval_id: str | None = None
    async with harness(tmp_path, secret=None) as h:
        result = await h.gateway.call(OPERATOR, "api.items.create", args)
        for _ in range(4):
            match result:
                case PendingApproval():
                    approvals_asked += 1
                    approval_id = result.approval_id
                    assert await h.approvals.decide(approval_id, True) is not None
                case NeedsAuth():
                    await h.vault.put("api", SECRET)  # the human follows the connect link
                case _:
                    break
            result = await h.gateway.call(OPERATOR, "api.items.create", args, approval_id=approval_id)
        assert isinstance(result, Ok), result
        assert approvals_asked == 1
        assert h.upstream.hits("/items") == 1


async def test_approval_is_not_burned_by_a_call_whose_request_the_http_client_refused(tmp_path: Path) -> None:
    async with harness(tmp_path, secret=SECRET + " ") as h:  # stored before pasted values were checked
        approval_id = await _approved(h, "api.items.create", {"name": "x"})
        refused = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"}, approval_id=approval_id)
        assert isinstance(refused, ErrorResult) and refused.reason == "connector_error", refused
        assert "was not sent" in refused.message and SECRET not in refused.message
        await h.vault.put("api", SECRET)  # stored again, as the message says
        result = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"}, approval_id=approval_id)
        assert isinstance(result, Ok), result
        assert h.upstream.hits("/items") == 1


# -- credentials and upstream answers ------------------------------------------------------------


async def test_a_stored_secret_the_agent_passes_as_an_argument_is_in_no_audit_row_or_approval(tmp_path: Path) -> None:
    # A user pasted the credential into the chat and the agent put it in a call, the first of a fresh
    # process (a CLI `call` always is): the upstream gets what the agent sent, but no copy the gateway
    # keeps or shows holds it.
    secret = "canary-pasted-in-chat-6c1e0b"  # no other test opens it: known to no redactor yet
    async with harness(tmp_path, secret=None) as h:
        await h.vault.put("api", secret)
        pending = await h.gateway.call(OPERATOR, "api.items.create", {"name": f"x {secret} y"})
        assert isinstance(pending, PendingApproval) and secret not in pending.summary
        await h.gateway.call(OPERATOR, "api.items.create", {"name": "x", secret: 1})  # invalid_args, audited
        await h.gateway.call(OPERATOR, f"api.{secret}", {})
        record = await h.store.get_approval(pending.approval_id)
        assert record is not None and secret not in record.model_dump_json() and "[redacted]" in record.arguments
        rows = await h.store.list_audit(20)
        assert rows and not any(secret in row.model_dump_json() for row in rows)


async def test_a_secret_stored_by_another_process_is_redacted_from_rows_of_calls_that_never_open_it(
    tmp_path: Path,
) -> None:
    # Stored before this process started (a CLI `secret set`, a previous run): refusals, and calls to
    # another connector, are recorded before any call sends it, and must not keep it either.
    secret = "canary-stored-before-start-4d2f9a"  # no other test opens it: known to no redactor yet
    async with harness(tmp_path, secret=None) as h:
        key = CredentialKey(connector="api", principal=PROJECT_WIDE, name="default")
        cipher = AESGCMCipher(b"k" * 32, project="unit")
        sealed = cipher.seal(encode_secret(secret), aad=credential_aad("unit", "api", PROJECT_WIDE, "default"))
        await h.store.put_credential(key, sealed)  # as another process writes it: not through this vault
        assert isinstance(await h.gateway.call(OPERATOR, "api.admin.purge", {"note": secret}), Denied)
        await h.gateway.call(OPERATOR, "api.items.create", {"name": 1, "x": secret})  # invalid_args
        await h.gateway.call(OPERATOR, "api.items.nope", {"note": secret})  # action_not_found
        assert isinstance(await h.gateway.call(OPERATOR, "open.things.list", {"note": secret}), (Ok, Denied))
        rows = await h.store.list_audit(20)
        assert len(rows) == 4 and not any(secret in row.model_dump_json() for row in rows)
        assert all("[redacted]" in (row.args_preview or "") for row in rows)


async def test_needs_auth_with_a_connect_link_when_nothing_is_stored(tmp_path: Path) -> None:
    async with harness(tmp_path, secret=None) as h:
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(result, NeedsAuth), result
        assert result.connector == "api"
        assert result.connect_url.startswith(f"{PUBLIC_URL}/connect/")
        assert h.upstream.requests == []
        api = next(c for c in result_payload(await h.gateway.connectors(OPERATOR))["connectors"] if c["slug"] == "api")
        assert (api["status"], api["auth_configured"]) == ("needs_auth", False)
        # A connector without auth needs nothing stored.
        assert isinstance(await h.gateway.call(OPERATOR, "open.things.list"), Ok)


async def test_stored_bearer_secret_reaches_the_upstream_only(h: Harness) -> None:
    result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "a/b"})
    assert isinstance(result, Ok), result
    sent = h.upstream.requests[-1]
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert sent.url.raw_path == b"/items/a%2Fb"
    # The upstream echoed the header back; the agent sees it redacted.
    assert result.data["auth"] == "[redacted]"
    assert SECRET not in json.dumps(payload(result))


async def test_upstream_401_means_needs_auth(h: Harness) -> None:
    result = await h.gateway.call(OPERATOR, "api.status.get", {"code": "401"})
    assert isinstance(result, NeedsAuth), result
    assert result.connect_url.startswith(f"{PUBLIC_URL}/connect/")
    assert h.upstream.hits("/status/401") == 1  # no login loop, no retry


async def test_a_stored_value_missing_a_template_field_names_it_and_who_must_store_it_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    text = manifest_text().replace(
        "    auth: {type: bearer}",
        "    auth: {type: custom, headers: {X-User: '{secret.user}', X-Pass: '{secret.pass}'}}",
    )
    async with harness(tmp_path, text, secret=None) as h:
        # Stored straight into the vault, as a value stored before entered values were checked was.
        await h.vault.put("api", {"pass": SECRET})
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(result, NeedsAuth), result
        assert "has no value for the field 'user'" in result.reason
        assert "store it again" in result.reason and "connect_url" in result.reason
        assert result.connect_url.startswith(f"{PUBLIC_URL}/connect/")
        assert h.upstream.requests == []
        (row,) = await h.store.list_audit(1)
        assert (row.status, row.reason) == ("needs_auth", "needs_auth")
        assert SECRET not in json.dumps(payload(result)) + row.model_dump_json()
    assert "cannot fill its header templates" in caplog.text and "'user'" in caplog.text
    assert SECRET not in caplog.text


async def test_upstream_403_is_a_final_denial(h: Harness) -> None:
    result = await h.gateway.call(OPERATOR, "api.status.get", {"code": "403"})
    assert isinstance(result, Denied) and result.reason == "upstream_forbidden", result
    assert "403" in result.message
    assert SECRET not in result.message and "[redacted]" in result.message
    assert h.upstream.hits("/status/403") == 1


async def test_a_403s_guidance_comes_first_and_its_upstream_text_is_cut_as_documented(h: Harness) -> None:
    long = await h.gateway.call(OPERATOR, "api.status.get", {"code": "403", "pad": 5000})
    assert isinstance(long, Denied), long
    assert long.message.startswith("api refused this call (403). Retrying will not help; the credential lacks")
    assert long.message.endswith(" … [cut]") and len(long.message) < 700
    h.upstream.empty_403 = True
    empty = await h.gateway.call(OPERATOR, "api.status.get", {"code": "403"})
    assert isinstance(empty, Denied)
    assert empty.message == "api refused this call (403). Retrying will not help; the credential lacks the permission."


async def test_upstream_500_carries_status_and_redacted_message(h: Harness) -> None:
    result = await h.gateway.call(OPERATOR, "api.status.get", {"code": "500"})
    assert isinstance(result, ErrorResult), result
    assert (result.reason, result.upstream_status) == ("upstream_error", 500)
    assert result.upstream_message == "upstream answered 500; you sent [redacted]."
    assert result.hint
    assert SECRET not in json.dumps(payload(result))


async def test_truncated_answer_does_not_leak_a_secret_prefix(tmp_path: Path) -> None:
    """BUG (core/calls.py ``_run``): redaction runs after the body is cut at ``max_response_bytes``,
    so a secret straddling the cut is not recognized and all but its last characters reach the
    agent. Same for ``summarize_error``'s 2,000-character cap on ``upstream_message``."""
    cap = 200
    auth = f"Bearer {SECRET}"
    n = cap - len(auth) + 1  # the cut falls just before the secret's last character
    async with harness(tmp_path, max_response_bytes=cap) as h:
        result = await h.gateway.call(OPERATOR, "api.text.get", {"n": str(n)})
        assert isinstance(result, Ok) and result.truncated, result
        assert SECRET[:-1] not in json.dumps(payload(result))


async def test_capped_upstream_message_does_not_leak_a_secret_prefix(h: Harness) -> None:
    """BUG (execution/response.py ``summarize_error`` + core/calls.py ``_run``): the upstream's reason
    is capped at 2,000 characters before it is redacted, so a secret cut by the cap leaks its start."""
    prefix = "upstream answered 500; you sent Bearer "
    pad = 2000 - len(prefix) - len(SECRET)  # the cap (1,999 characters + "…") drops the secret's last one
    result = await h.gateway.call(OPERATOR, "api.status.get", {"code": "500", "pad": pad})
    assert isinstance(result, ErrorResult) and result.upstream_message, result
    assert SECRET[:-1] not in result.upstream_message


async def test_fields_projects_the_result(h: Harness) -> None:
    result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "7"}, fields=["path", "nested.b.c", "missing"])
    assert isinstance(result, Ok)
    assert result.data == {"path": "/items/7", "nested": {"b": {"c": 2}}}


async def test_fields_on_a_json_answer_cut_at_the_read_cap_says_so_and_names_no_path_unmatched(
    tmp_path: Path,
) -> None:
    async with harness(tmp_path, max_response_bytes=64) as h:
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "7"}, fields=["path", "nested.b.c"])
        whole = await h.gateway.call(OPERATOR, "api.items.get", {"id": "7"})
    assert isinstance(result, Ok) and result.truncated and isinstance(result.data, str), result
    assert result.unmatched_fields is None  # "path" is there; the cut answer could not say
    assert result.note and "larger than the 64 bytes" in result.note and "fields` could not be applied" in result.note
    assert "Narrow the request" in result.note
    assert isinstance(whole, Ok) and whole.note is None  # no fields asked: nothing was left undone


async def test_invalid_args_lists_the_schema_errors(h: Harness) -> None:
    missing = await h.gateway.call(OPERATOR, "api.items.get", {})
    assert isinstance(missing, Denied) and missing.reason == "invalid_args"
    assert missing.errors == [{"path": "(root)", "message": "'id' is a required property"}]
    wrong = await h.gateway.call(OPERATOR, "api.items.get", {"id": 5})
    assert isinstance(wrong, Denied) and wrong.reason == "invalid_args"
    assert wrong.errors == [{"path": "id", "message": "5 is not of type 'string'"}]
    # Values as the agent sent them, in JSON: null, not Python's None.
    for value, shown in ((None, "null"), (True, "true"), ({"a": None}, '{"a": null}')):
        wrong = await h.gateway.call(OPERATOR, "api.items.get", {"id": value})
        assert isinstance(wrong, Denied) and wrong.errors == [
            {"path": "id", "message": f"{shown} is not of type 'string'"}
        ]
    assert h.upstream.requests == []


@pytest.mark.parametrize("amount", [float("inf"), float("-inf"), float("nan")])
async def test_a_number_json_cannot_carry_is_refused_before_approval(h: Harness, amount: float) -> None:
    # 1e400 parses as infinity: shown as one thing, each encoder would send its own spelling of it.
    for args in ({"amount": amount}, {"amount": 1, "nested": [{"x": amount}]}):
        result = await h.gateway.call(OPERATOR, "api.payments.create", args)
        assert isinstance(result, Denied) and result.reason == "invalid_args", result
        assert result.errors and "finite" in result.errors[0]["message"]
    assert h.upstream.requests == [] and await h.store.list_approvals() == []


async def test_unknown_tool_is_action_not_found_with_suggestions(h: Harness) -> None:
    result = await h.gateway.call(OPERATOR, "api.item.get", {"id": "1"})
    assert isinstance(result, Denied) and result.reason == "action_not_found"
    assert result.suggestions and result.suggestions[0]["name"] == "api.items.get"
    assert result.suggestions[0]["input_schema"]["required"] == ["id"]
    # Spelling variants resolve to the same action.
    assert isinstance(await h.gateway.call(OPERATOR, "API.Items.Get", {"id": "1"}), Ok)


async def test_unreachable_upstream_is_an_error_naming_only_the_host(h: Harness) -> None:
    result = await h.gateway.call(OPERATOR, "api.down.get")
    assert isinstance(result, ErrorResult) and result.reason == "upstream_unreachable", result
    assert "upstream.test" in result.message and "/down" not in result.message


async def test_connect_and_request_secret_hand_out_links(h: Harness) -> None:
    connect = result_payload(await h.gateway.connect(OPERATOR, "api"))
    assert connect["status"] == "link" and connect["connect_url"].startswith(f"{PUBLIC_URL}/connect/")
    secret = result_payload(await h.gateway.request_secret(OPERATOR, "api", "token"))
    assert secret["status"] == "link" and secret["secret_url"].startswith(f"{PUBLIC_URL}/secrets/")
    assert (result_payload(await h.gateway.connect(OPERATOR, "open")))["status"] == "ok"  # needs no credential
    assert (result_payload(await h.gateway.connect(OPERATOR, "nope")))["reason"] == "connector_not_found"
    # As a person writes the name: discover took "API", connect refused it.
    assert result_payload(await h.gateway.connect(OPERATOR, " API "))["status"] == "link"
    assert result_payload(await h.gateway.request_secret(OPERATOR, "Api", "token"))["status"] == "link"


async def test_unexpected_failure_is_a_generic_internal_error(h: Harness) -> None:
    result = await h.gateway.call(OPERATOR, "api.boom.get")
    assert isinstance(result, ErrorResult) and result.reason == "internal_error"
    assert "api.boom.get" in result.message and "transport broke" not in result.message
    rows = await h.store.list_audit(1)
    assert (rows[0].status, rows[0].reason) == ("error", "internal_error")


# -- audit --------------------------------------------------------------------------------------


async def test_one_audit_row_per_call_decision(h: Harness) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("api.items.get", {"id": "1"}),
        ("api.items.create", {"name": "x"}),
        ("api.admin.purge", {}),
        ("api.nope", {}),
        ("api.items.get", {}),
        ("api.status.get", {"code": "500"}),
    ]
    for tool, args in calls:
        await h.gateway.call(OPERATOR, tool, args)
    rows = list(reversed(await h.store.list_audit(50)))
    assert len(rows) == len(calls)
    seen = [(r.requested, r.verdict, r.verdict_source, r.status, r.reason, r.upstream_status) for r in rows]
    assert seen == [
        ("api.items.get", "always_run", "risk_default", "ok", None, 200),
        ("api.items.create", "require_approval", "risk_default", "pending_approval", None, None),
        ("api.admin.purge", "block", "project", "denied", "policy_block", None),
        ("api.nope", None, None, "denied", "action_not_found", None),
        ("api.items.get", None, None, "denied", "invalid_args", None),
        ("api.status.get", "always_run", "risk_default", "error", "upstream_error", 500),
    ]
    first = rows[0]
    assert (first.user, first.agent, first.connector, first.action) == ("operator", None, "api", "api.items.get")
    assert first.fingerprint == fingerprint(OPERATOR, "api.items.get", {"id": "1"})
    assert first.args_preview == '{"id":"1"}'
    assert first.latency_ms >= 0
    assert SECRET not in json.dumps([r.model_dump(mode="json") for r in rows])
    assert h.auditor.failures == 0


async def test_a_call_reaching_the_upstream_is_audited_before_the_request_leaves(h: Harness) -> None:
    seen: list[list[tuple[str, str | None]]] = []
    answer = h.upstream.__call__

    async def upstream(request: httpx2.Request) -> httpx2.Response:
        seen.append([(r.status, r.call_id) for r in await h.store.list_audit()])
        return await answer(request)

    transport = h.gateway._http._transport  # pyright: ignore[reportPrivateUsage]
    transport.handler = upstream  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
    async with h.auditor.running():  # the background writer, as serve runs it
        for _ in range(2):
            result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
            assert isinstance(result, Ok), result
        denied = await h.gateway.call(OPERATOR, "api.nope")
        assert isinstance(denied, Denied)
        rows = await h.store.list_audit()  # no flush: each answer waited for its row's commit
    assert seen[0] == [("started", seen[0][0][1])] and seen[0][0][1] is not None
    assert [status for status, _ in seen[1]] == ["started", "ok"]
    assert [r.status for r in rows] == ["denied", "ok", "ok"]  # one row per call: the outcome replaced "started"
    assert rows[0].call_id is None and rows[1].call_id != rows[2].call_id


async def test_an_upstream_pattern_that_backtracks_cannot_stall_a_call(tmp_path: Path) -> None:
    # Checked with re on the event loop, 42 characters against ^(a|aa)*$ ran for about a minute.
    text = manifest_text().replace(
        "            input_schema: {type: object, required: [id], properties: {id: {type: string}}}",
        "            input_schema: {type: object, required: [id], properties: {id: "
        '{type: string, pattern: "^(a|aa)*$"}}}',
        1,
    )
    assert text != manifest_text()
    async with harness(tmp_path, text) as h:
        with anyio.fail_after(5):
            result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "a" * 42 + "!"})
        assert isinstance(result, Ok), result  # left to the upstream, which checks its own pattern


async def test_a_whole_float_typed_integer_goes_upstream_as_an_integer(h: Harness) -> None:
    # Models write 2.0 or 2e0 for an integer; "pad=2.0" would reach an upstream that parses integers.
    result = await h.gateway.call(OPERATOR, "api.status.get", {"code": "200", "pad": 2e0})
    assert isinstance(result, Ok), result
    assert h.upstream.requests[-1].url.params["pad"] == "2"


async def test_a_call_its_client_cancels_after_the_request_left_is_audited_cancelled(h: Harness) -> None:
    # Without an outcome, its started row would stay open and the next start would mark it interrupted
    # as if the gateway had died mid-call.
    async with h.auditor.running(), anyio.create_task_group() as tg:
        tg.start_soon(h.gateway.call, OPERATOR, "api.items.get", {"id": "hang"})
        with anyio.fail_after(5):
            await h.upstream.hanging.wait()
        tg.cancel_scope.cancel()
    rows = await h.store.list_audit()
    assert [(r.status, r.action) for r in rows] == [("cancelled", "api.items.get")]
    assert rows[0].call_id is not None
    # The store's instance begins the id: a gateway starting beside this one leaves its calls alone.
    assert h.store.instance is not None and rows[0].call_id.startswith(h.store.instance)
    assert len(rows[0].call_id) == 32
    assert await h.auditor.interrupt_started() == 0  # nothing left open


async def test_metrics_count_every_call_the_audit_records_and_an_agent_cap_refusal_says_when(tmp_path: Path) -> None:
    async with harness(tmp_path, manifest_text() + "agent_limits: {running_calls: 1}\n") as h:
        refused: Any = None
        async with h.auditor.running(), anyio.create_task_group() as tg:
            tg.start_soon(h.gateway.call, OPERATOR, "api.items.get", {"id": "hang"})
            with anyio.fail_after(5):
                await h.upstream.hanging.wait()
            refused = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
            tg.cancel_scope.cancel()
        assert isinstance(refused, ErrorResult) and refused.reason == "rate_limited" and refused.retry_after == 1.0
        rows = await h.store.list_audit()
        limited = next(r for r in rows if r.reason == "rate_limited")
        assert (limited.connector, limited.action, limited.verdict) == ("api", "api.items.get", "always_run")
        assert limited.fingerprint is not None
        text = h.gateway.metrics.render().decode()
        counted = sum(
            float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("mcp_gateway_calls_total{")
        )
        assert counted == len(rows) == 2
        assert 'status="cancelled"' in text
        assert 'mcp_gateway_rate_limited_total{scope="running_calls"} 1.0' in text


async def test_an_outcome_the_store_refuses_is_journaled_and_the_call_answered(tmp_path: Path) -> None:
    journal = AuditJournal(tmp_path / "state")
    async with harness(tmp_path, store_cls=FullDiskStore, journal=journal) as h:
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(result, Ok), result
        denied = await h.gateway.call(OPERATOR, "api.admin.purge")
        assert isinstance(denied, Denied)
        assert (h.auditor.failures, h.auditor.journaled) == (0, 3)  # the call's start, its outcome, the denial
        scrape = (await h.gateway.scrape.render()).decode()
        assert "mcp_gateway_audit_journaled_total 3.0" in scrape
        assert "mcp_gateway_audit_journal_pending 1.0" in scrape
        assert "mcp_gateway_audit_replayed_total 0.0" in scrape
    lines = journal.path.read_text().splitlines()
    assert [json.loads(line)["status"] for line in lines] == ["started", "ok", "denied"]
    assert SECRET not in journal.path.read_text()


async def test_a_call_whose_start_nobody_can_record_is_never_sent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "full").write_text("")  # the journal's folder cannot be made: a full or read-only disk
    async with harness(tmp_path, store_cls=FullDiskStore, journal=AuditJournal(tmp_path / "full" / "state")) as h:
        # Its start cannot be recorded anywhere: the request is never sent.
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(result, ErrorResult) and result.reason == "store_unavailable", result
        assert result.hint and "nothing was run" in result.hint
        assert h.upstream.requests == []
        denied = await h.gateway.call(OPERATOR, "api.admin.purge")
        assert isinstance(denied, Denied)  # nothing ran, nothing to withhold
        assert h.auditor.failures == 3  # the first call's started row, its store_unavailable answer, the denial
    assert "audit write failed" in caplog.text and "journal refused them too" in caplog.text


async def test_an_approved_call_whose_start_nobody_can_record_keeps_its_approval(tmp_path: Path) -> None:
    class StartsRefused(SQLiteStore):
        """Refuses the audit rows of calls starting while ``down`` (a disk that filled up, then was freed)."""

        down = False

        async def append_audit(self, record: AuditRecord) -> None:
            if self.down and record.status == "started":
                raise OSError("disk full")
            await super().append_audit(record)

    (tmp_path / "full").write_text("")  # nor can the journal's folder be made
    args = {"name": "widget"}
    async with harness(tmp_path, store_cls=StartsRefused, journal=AuditJournal(tmp_path / "full" / "state")) as h:
        approval_id = await _approved(h, "api.items.create", args)
        StartsRefused.down = True
        try:
            refused = await h.gateway.call(OPERATOR, "api.items.create", args, approval_id=approval_id)
        finally:
            StartsRefused.down = False
        assert isinstance(refused, ErrorResult) and refused.reason == "store_unavailable", refused
        assert h.upstream.requests == []
        # Nothing ran: what the human approved is still to do, with the same approval, once.
        assert (await h.store.get_approval(approval_id)).status == "approved"  # type: ignore[union-attr]
        ran = await h.gateway.call(OPERATOR, "api.items.create", args, approval_id=approval_id)
        assert isinstance(ran, Ok), ran
        again = await h.gateway.call(OPERATOR, "api.items.create", args, approval_id=approval_id)
        assert isinstance(again, Denied) and again.reason == "approval_mismatch"
        assert h.upstream.hits("/items") == 1


async def test_an_outcome_nobody_can_record_withholds_the_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class OutcomesRefused(SQLiteStore):
        """The start of a call is written; its outcome is not (the disk filled up meanwhile)."""

        async def append_audit(self, record: AuditRecord) -> None:
            if record.status != "started":
                raise OSError("disk full")
            await super().append_audit(record)

    (tmp_path / "full").write_text("")  # nor can the journal's folder be made
    async with harness(tmp_path, store_cls=OutcomesRefused, journal=AuditJournal(tmp_path / "full" / "state")) as h:
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(result, ErrorResult) and result.reason == "store_unavailable", result
        assert result.upstream_status == 200 and "may have taken effect" in result.message
        assert result.hint and "/items/1" not in json.dumps(payload(result))  # the upstream's answer is withheld
        assert len(h.upstream.requests) == 1  # it did run
    assert "journal refused them too" in caplog.text


# -- the MCP surface, in memory ----------------------------------------------------------------


async def test_mcp_surface_in_memory(h: Harness) -> None:
    async with Client(build_mcp_server(h.gateway, default_principal=OPERATOR)) as client:
        tools = await client.list_tools()
        assert sorted(t.name for t in tools.tools) == sorted(
            ["connectors", "discover", "describe", "call", "connect", "request_secret"]
        )

        ok = await client.call_tool("call", {"tool": "api.items.get", "args": {"id": "1"}, "fields": ["path"]})
        assert ok.structured_content == {"status": "ok", "http_status": 200, "data": {"path": "/items/1"}}
        typo = await client.call_tool("call", {"tool": "api.items.get", "args": {"id": "1"}, "fields": ["path", "pth"]})
        assert typo.structured_content is not None
        assert typo.structured_content["data"] == {"path": "/items/1"}
        assert typo.structured_content["unmatched_fields"] == ["pth"]
        assert not ok.is_error
        assert json.loads(ok.content[0].text) == ok.structured_content  # type: ignore[union-attr]

        pending = await client.call_tool("call", {"tool": "api.items.create", "args": {"name": "x"}})
        assert pending.structured_content is not None
        assert pending.structured_content["status"] == "pending_approval"
        assert not pending.is_error

        denied = await client.call_tool("call", {"tool": "api.admin.purge"})
        assert denied.structured_content is not None
        assert (denied.structured_content["status"], denied.structured_content["reason"]) == ("denied", "policy_block")
        assert denied.is_error

        error = await client.call_tool("call", {"tool": "api.status.get", "args": {"code": "502"}})
        assert error.structured_content is not None
        assert error.structured_content["status"] == "error"
        assert error.structured_content["upstream_status"] == 502
        assert error.is_error
        assert SECRET not in error.content[0].text  # type: ignore[union-attr]

        listed = await client.call_tool("connectors", {})
        assert listed.structured_content is not None
        assert slugs(listed.structured_content) == ["api", "open", "vault"]


async def test_unknown_prompt_or_resource_is_invalid_params_without_traceback(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    async with Client(build_mcp_server(h.gateway, default_principal=OPERATOR)) as client:
        with pytest.raises(MCPError) as prompt:
            await client.get_prompt("nosuch")
        with pytest.raises(MCPError) as resource:
            await client.read_resource("gateway://nosuch")
    assert (prompt.value.code, prompt.value.error.message) == (-32602, "Unknown prompt: nosuch")
    assert resource.value.code == -32602
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


async def test_describe_shows_that_an_http_action_refuses_arguments_it_does_not_name(h: Harness) -> None:
    # call answered "has no argument 'x'" while describe's schema, as written, allowed any.
    described = result_payload(await h.gateway.describe(OPERATOR, "api.items.get"))
    assert described["input_schema"]["additionalProperties"] is False
    refused = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1", "x": 1})
    assert isinstance(refused, Denied) and refused.reason == "invalid_args"


async def test_a_call_waiting_on_its_approval_does_not_run_once_its_token_is_revoked(h: Harness) -> None:
    # A leaked token revoked while its call waits: the approval given afterwards must not run it (the
    # agent's SDK then failed its follow-up request with a 401 and reported a failure that had run).
    _, token = await h.gateway.tokens.create("bot")
    bot = await h.gateway.tokens.verify(token)
    assert bot is not None and bot.user.startswith("token:")

    async def revoke_then_approve(pending: PendingApproval) -> None:
        assert await h.gateway.tokens.revoke(bot.user.removeprefix("token:"))
        assert await h.approvals.decide(pending.approval_id, True) is not None

    result = await h.gateway.call(bot, "api.items.create", {"name": "x"}, wait=30, on_pending=revoke_then_approve)
    assert isinstance(result, Denied) and result.reason == "approval_denied", result
    assert "revoked" in result.message and "nothing was sent" in result.message
    assert h.upstream.requests == []
    rows = [r for r in await h.store.list_audit() if r.requested == "api.items.create"]
    assert [r.status for r in rows] == ["denied", "pending_approval"], rows
    # A token still in force runs the same way as before.
    _, kept = await h.gateway.tokens.create("bot")
    kept_bot = await h.gateway.tokens.verify(kept)
    assert kept_bot is not None

    async def approve(pending: PendingApproval) -> None:
        assert await h.approvals.decide(pending.approval_id, True) is not None

    assert isinstance(
        await h.gateway.call(kept_bot, "api.items.create", {"name": "y"}, wait=30, on_pending=approve), Ok
    )
