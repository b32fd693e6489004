"""``ApprovalService`` beyond the gateway's decision paths: redaction of what a human is shown, the
explanation of why, ids, and ``wait`` (woken in process at once, by another process through the
store, bounded). The gateway's approval paths themselves are in ``test_gateway.py``."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_gateway.core import result_payload
from mcp_gateway.core.results import DescribeResult
from mcp_gateway.services import approvals as approvals_module
from mcp_gateway.services.approvals import (
    ApprovalService,
    ApproverRefused,
    explain,
    fingerprint,
    fingerprint_of,
    redact_arguments,
)
from mcp_gateway.services.audit import args_json
from mcp_gateway.services.identity import OPERATOR, Principal
from mcp_gateway.store.sqlite import SQLiteStore
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.model import Denied, Ok, PendingApproval
from tests.core.test_gateway import harness, manifest_text

# items.create also takes a credential-like argument, as some APIs do (a webhook's secret, a token).
WITH_TOKEN = manifest_text().replace(
    "required: [name], properties: {name: {type: string}}}",
    "required: [name], properties: {name: {type: string}, api_token: {type: string}}}",
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_credential_like_arguments_are_redacted_by_name() -> None:
    args: dict[str, Any] = {
        "name": "widget",
        "password": "hunter2",
        "apiKey": "k",
        "X-API-Key": "k",
        "client_secret": "s",
        "access_token": "t",
        "privateKey": "p",
        "nested": [{"Authorization": "Bearer x", "count": 3}],
        "max_tokens": 100,
        "author": "me",
        "tokenizer": "cl100k",
    }
    shown = redact_arguments(args)
    hidden = ("password", "apiKey", "X-API-Key", "client_secret", "access_token", "privateKey")
    assert all(shown[k] == "[redacted]" for k in hidden)
    assert shown["nested"] == [{"Authorization": "[redacted]", "count": 3}]
    assert (shown["name"], shown["max_tokens"], shown["author"], shown["tokenizer"]) == ("widget", 100, "me", "cl100k")
    assert args["password"] == "hunter2"  # the call itself keeps its arguments


async def test_the_record_keeps_redacted_arguments_and_explains_itself(tmp_path: Path) -> None:
    async with harness(tmp_path, WITH_TOKEN) as h:
        pending = await h.gateway.call(OPERATOR, "api.items.create", {"name": "w", "api_token": "SECRET-123"})
        assert isinstance(pending, PendingApproval)
        assert "SECRET-123" not in pending.summary
        record = await h.store.get_approval(pending.approval_id)
        assert record is not None
        assert '"api_token": "[redacted]"' in record.arguments and '"name": "w"' in record.arguments
        assert "SECRET-123" not in record.arguments + record.summary
        assert explain(record) == "It is a write action, and by default every write or delete needs a human's approval."
        [row] = await h.store.list_audit(5)
        assert "SECRET-123" not in row.args_preview and "[redacted]" in row.args_preview
        # The fingerprint still covers the real value: another token is another call.
        other = await h.gateway.call(
            OPERATOR, "api.items.create", {"name": "w", "api_token": "OTHER"}, approval_id=pending.approval_id
        )
        assert other.status == "denied" and other.reason == "approval_mismatch"  # type: ignore[union-attr]

        rule = await h.gateway.call(OPERATOR, "api.payments.create", {"amount": 500})
        assert isinstance(rule, PendingApproval)
        record = await h.store.get_approval(rule.approval_id)
        assert record is not None
        assert explain(record) == "The project's policy rule “api.payments.*” requires approval for this call."
        sensitive = await h.gateway.call(OPERATOR, "vault.entries.list")
        assert isinstance(sensitive, PendingApproval)
        record = await h.store.get_approval(sensitive.approval_id)
        assert record is not None and "marked sensitive" in explain(record)


SEPARATE = manifest_text().replace(
    "    action: require_approval\n    when: {amount: {gt: 100}}",
    "    action: require_approval\n    separate_approver: true\n    when: {amount: {gt: 100}}",
)


@pytest.mark.parametrize("project_wide", [False, True])
async def test_a_separate_approver_is_someone_other_than_the_requester(tmp_path: Path, project_wide: bool) -> None:
    """Per rule (``separate_approver`` on the payments rule) or project-wide (``approvals``): the
    requester may deny but not approve, nor may someone unknown; another user or the operator may."""
    text = manifest_text() + "approvals: {separate_approver: true}\n" if project_wide else SEPARATE
    maria = Principal("maria")
    async with harness(tmp_path, text) as h:
        asked = await h.gateway.call(maria, "api.payments.create", {"amount": 500})
        assert isinstance(asked, PendingApproval)
        assert "someone other than the user this session acts for" in asked.reason  # not "send it to the user"
        record = await h.store.get_approval(asked.approval_id)
        assert record is not None and record.separate_approver
        assert explain(record).endswith(
            "requires approval for this call. Someone other than maria, who asked, must approve it."
        )
        for who in ("maria", None):
            with pytest.raises(ApproverRefused):
                await h.gateway.approvals.decide(asked.approval_id, True, by=who)
        decided = await h.gateway.approvals.decide(asked.approval_id, True, by="bob")
        assert decided is not None and (decided.status, decided.decided_by) == ("approved", "bob")
        ran = await h.gateway.call(maria, "api.payments.create", {"amount": 500}, approval_id=asked.approval_id)
        assert isinstance(ran, Ok), ran
        await h.gateway.auditor.flush()
        [row] = [r for r in await h.store.list_audit(10) if r.status == "ok"]
        assert (row.user, row.action, row.approved_by) == ("maria", "api.payments.create", "bob")

        # The same requester may always deny her own call.
        again = await h.gateway.call(maria, "api.payments.create", {"amount": 700})
        assert isinstance(again, PendingApproval)
        denied = await h.gateway.approvals.decide(again.approval_id, False, by="maria")
        assert denied is not None and (denied.status, denied.decided_by) == ("denied", "maria")

        # Another rule's approval (the risk default for a write) lets anyone approve it, unless project-wide.
        other = await h.gateway.call(maria, "api.items.create", {"name": "w"})
        assert isinstance(other, PendingApproval)
        record = await h.store.get_approval(other.approval_id)
        assert record is not None and record.separate_approver is project_wide

        # describe says so before the call, where the no-argument call needs an approval.
        described = await h.gateway.describe(maria, "api.items.create")
        assert isinstance(described, DescribeResult) and described.policy.action == "require_approval"
        assert described.policy.separate_approver is (True if project_wide else None)
        assert ("separate_approver" in result_payload(described)["policy"]) is project_wide


async def test_arguments_too_long_to_show_ask_for_no_approval(tmp_path: Path) -> None:
    # An approval no surface could show whole was a link leading nowhere, while the agent was told to send it.
    from mcp_gateway.services.approvals import ARGUMENTS_CHARS

    async with harness(tmp_path) as h:
        asked = await h.gateway.call(OPERATOR, "api.items.create", {"name": "w" * (ARGUMENTS_CHARS + 10)})
        assert isinstance(asked, Denied) and asked.reason == "invalid_args", asked
        assert "too long for a human to review" in asked.message and "Send less per call" in asked.message
        assert await h.store.list_approvals() == [] and h.upstream.requests == []
        fits = await h.gateway.call(OPERATOR, "api.items.create", {"name": "w" * (ARGUMENTS_CHARS - 1000)})
        assert isinstance(fits, PendingApproval)


async def test_arguments_cut_when_stored_can_be_denied_but_never_approved(tmp_path: Path) -> None:
    # Earlier builds stored them cut. The page and the overview showed no Approve for them; `approvals
    # approve` approved one, and it ran.
    from mcp_gateway.services.approvals import ArgumentsUnshown

    async with harness(tmp_path) as h:
        asked = await h.gateway.call(OPERATOR, "api.items.create", {"name": "w" * 1000})
        assert isinstance(asked, PendingApproval)
        stored = await h.store.get_approval(asked.approval_id)
        assert stored is not None
        cut = stored.model_copy(update={"id": "apr_cut", "arguments": stored.arguments[:500]})
        await h.store.put_approval(cut)
        with pytest.raises(ArgumentsUnshown):
            await h.gateway.approvals.decide(cut.id, True, by=OPERATOR.user)
        denied = await h.gateway.approvals.decide(cut.id, False, by=OPERATOR.user)
        assert denied is not None and denied.status == "denied"


async def test_approval_ids_carry_128_random_bits(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        ids = set()
        for i in range(50):
            pending = await h.gateway.call(OPERATOR, "api.items.create", {"name": f"n{i}"})
            assert isinstance(pending, PendingApproval)
            ids.add(pending.approval_id)
        assert len(ids) == 50
        for approval_id in ids:
            raw = base64.urlsafe_b64decode(approval_id.removeprefix("apr_") + "==")
            assert len(raw) * 8 == 128


async def test_wait_wakes_at_once_on_a_decision_in_this_process(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        args = {"name": "waited"}
        results: list[Any] = []

        async def call() -> None:
            results.append(await h.gateway.call(OPERATOR, "api.items.create", args, wait=30))

        started = 0.0
        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            pending = []
            for _ in range(100):
                await anyio.sleep(0.01)
                pending = await h.store.list_approvals("pending")
                if pending:
                    break
            started = time.monotonic()
            assert await h.approvals.decide(pending[0].id, True) is not None
        woke = time.monotonic() - started
        [result] = results
        assert isinstance(result, Ok), result
        assert woke < approvals_module.POLL_SECONDS  # the event, not the poll
        assert h.upstream.hits("/items") == 1
        rows = await h.store.list_audit(5)
        assert [r.status for r in reversed(rows)] == ["pending_approval", "ok"]


async def test_wait_sees_a_decision_made_by_another_process(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        pending = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
        assert isinstance(pending, PendingApproval)
        # Another process: its own connection to the same database, its own ApprovalService.
        async with SQLiteStore(tmp_path / "s.db") as other:
            results: list[Any] = []

            async def call() -> None:
                results.append(
                    await h.gateway.call(
                        OPERATOR, "api.items.create", {"name": "x"}, approval_id=pending.approval_id, wait=30
                    )
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await anyio.sleep(0.2)
                assert results == []
                assert await ApprovalService(other, FixedClock()).decide(pending.approval_id, False) is not None
        [result] = results
        assert result.status == "denied" and result.reason == "approval_denied"  # type: ignore[union-attr]
        assert h.upstream.hits("/items") == 0


async def test_a_stopping_gateway_answers_its_waiting_calls_pending_approval_at_once(tmp_path: Path) -> None:
    # Asleep through the graceful shutdown, a waiting call would be cancelled: the agent would get a
    # bare error where the approval still holds for a retry after the restart.
    async with harness(tmp_path) as h:
        results: list[Any] = []

        async def call() -> None:
            results.append(await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"}, wait=60))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                while not await h.store.list_approvals("pending"):  # noqa: ASYNC110 - stored by the call's task
                    await anyio.sleep(0.01)
                h.approvals.stop_waiting()
        [result] = results
        assert isinstance(result, PendingApproval), result
        later = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"}, wait=60)  # already stopping
        assert isinstance(later, PendingApproval)
        assert h.upstream.hits("/items") == 0


async def test_wait_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with harness(tmp_path) as h:
        started = time.monotonic()
        result = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"}, wait=0.3)
        assert isinstance(result, PendingApproval)  # nobody decided: the same answer as without wait
        assert 0.3 <= time.monotonic() - started < 2
        monkeypatch.setattr(approvals_module, "MAX_WAIT_SECONDS", 0.2)
        started = time.monotonic()
        assert await h.approvals.wait(result.approval_id, 10_000) is not None
        assert time.monotonic() - started < 1.5
        assert h.upstream.hits("/items") == 0


@pytest.mark.parametrize(
    "args",
    [{}, {"id": "1"}, {"b": [1, 2.5, None, True], "a": {"z": 'ü\n"', "y": 1}}, {"when": Path("/x")}, {"é": "日本"}],
)
@pytest.mark.parametrize(
    "principal", [OPERATOR, Principal(user="alice", agent="bot-1"), Principal(user='we"ird\\', agent="ä")]
)
def test_fingerprint_from_canonical_text_equals_the_fingerprint(principal: Principal, args: dict[str, Any]) -> None:
    # The audit path serializes the arguments once and hashes that text (fingerprint_of): the
    # digest must be the one approvals compute from the arguments themselves.
    assert fingerprint_of(principal, "gh.repos.get", args_json(args)) == fingerprint(principal, "gh.repos.get", args)


async def test_get_and_pending_read_what_pages_show(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        asked = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
        other = await h.gateway.call(OPERATOR, "api.items.create", {"name": "y"})
        assert isinstance(asked, PendingApproval) and isinstance(other, PendingApproval)
        record = await h.approvals.get(asked.approval_id)
        assert record is not None and record.id == asked.approval_id and record.status == "pending"
        assert await h.approvals.get("apr_nothing") is None
        assert {a.id for a in await h.approvals.pending(h.clock.now())} == {asked.approval_id, other.approval_id}
        await h.approvals.decide(other.approval_id, False)
        assert [a.id for a in await h.approvals.pending(h.clock.now())] == [asked.approval_id]
        # Past its expiry an approval is no longer waiting, though nothing has marked it yet.
        assert await h.approvals.pending(record.expires_at) == []
        decided = await h.approvals.get(other.approval_id)
        assert decided is not None and decided.status == "denied"


async def test_listed_reads_the_stored_approvals_by_status(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        asked = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
        other = await h.gateway.call(OPERATOR, "api.items.create", {"name": "y"})
        assert isinstance(asked, PendingApproval) and isinstance(other, PendingApproval)
        await h.approvals.decide(other.approval_id, True)
        assert [a.id for a in await h.approvals.listed("pending")] == [asked.approval_id]
        assert [a.id for a in await h.approvals.listed("approved")] == [other.approval_id]
        assert {a.id for a in await h.approvals.listed()} == {asked.approval_id, other.approval_id}


async def test_an_approval_covers_the_request_it_pinned_and_no_other(tmp_path: Path) -> None:
    # Same arguments, same method and URL, other bytes (a default or a body encoding changed by a
    # reload): not what the human approved. The check itself, below what the gateway builds.
    async with harness(tmp_path) as h:
        asked = await h.gateway.call(OPERATOR, "api.items.create", {"name": "w"})
        assert isinstance(asked, PendingApproval)
        record = await h.gateway.approvals.get(asked.approval_id)
        assert record is not None and len(record.sends) == 64
        await h.gateway.approvals.decide(asked.approval_id, True, by="alice")
        service, tool, args = h.gateway.approvals, "api.items.create", {"name": "w"}
        other = await service.check(asked.approval_id, OPERATOR, tool, args, calls=record.calls, sends="0" * 64)
        assert other[0] == "approval_mismatch"
        assert (await service.get(asked.approval_id)).status == "approved"  # type: ignore[union-attr]
        same = await service.check(asked.approval_id, OPERATOR, tool, args, calls=record.calls, sends=record.sends)
        assert same[0] == "run"


async def test_an_approval_past_its_expiry_is_listed_as_expired_not_pending(tmp_path: Path) -> None:
    # `approvals list` showed it pending, then `approvals approve` said it was not.
    async with harness(tmp_path) as h:
        asked = await h.gateway.call(OPERATOR, "api.items.create", {"name": "late"})
        assert isinstance(asked, PendingApproval)
        assert [r.id for r in await h.approvals.listed("pending")] == [asked.approval_id]
        h.clock.advance(approvals_module.DEFAULT_TTL.total_seconds() + 1)
        assert await h.approvals.listed("pending") == []
        expired = await h.approvals.listed("expired")
        assert [(r.id, r.status) for r in expired] == [(asked.approval_id, "expired")]
        assert [r.status for r in await h.approvals.listed()] == ["expired"]


async def test_an_approval_taken_before_a_separate_approver_was_required_does_not_run_after(tmp_path: Path) -> None:
    # Approved through the link by nobody known; then the project asked for a separate approver: the
    # retry ran all the same.
    from mcp_gateway.manifest import parse_manifest

    maria = Principal("maria")
    async with harness(tmp_path) as h:
        asked = await h.gateway.call(maria, "api.payments.create", {"amount": 500})
        assert isinstance(asked, PendingApproval)
        assert await h.gateway.approvals.decide(asked.approval_id, True, by=None) is not None
        stricter = manifest_text() + "approvals: {separate_approver: true}\n"
        await h.gateway.reload(parse_manifest(stricter, base_dir=tmp_path))
        retried = await h.gateway.call(maria, "api.payments.create", {"amount": 500}, approval_id=asked.approval_id)
        assert isinstance(retried, Denied) and retried.reason == "approval_mismatch", retried
        assert "someone other than who asked" in retried.message
        assert h.upstream.requests == []

        # One another user approved still runs under the stricter rules.
        again = await h.gateway.call(maria, "api.payments.create", {"amount": 600})
        assert isinstance(again, PendingApproval)
        assert await h.gateway.approvals.decide(again.approval_id, True, by="bob") is not None
        ran = await h.gateway.call(maria, "api.payments.create", {"amount": 600}, approval_id=again.approval_id)
        assert isinstance(ran, Ok), ran


async def test_the_approval_says_which_credential_the_call_carries_and_holds_to_it(tmp_path: Path) -> None:
    # The page never said whose account the call would act as, and a call approved with the team-wide
    # credential ran with the user's own once they had connected it.
    maria = Principal("maria")
    async with harness(tmp_path) as h:
        asked = await h.gateway.call(maria, "api.payments.create", {"amount": 500})
        assert isinstance(asked, PendingApproval)
        record = await h.store.get_approval(asked.approval_id)
        assert record is not None and record.calls.endswith("; it carries the team-wide credential of api")
        assert await h.gateway.approvals.decide(asked.approval_id, True, by="bob") is not None
        # A personal credential of hers (left from a time api was `per_user`) is not what a shared
        # connector's calls carry: the call runs as approved, with the team-wide one.
        await h.vault.put("api", "maria-own-token-1234", principal="maria")
        retried = await h.gateway.call(maria, "api.payments.create", {"amount": 500}, approval_id=asked.approval_id)
        assert retried.status == "ok", retried
        [sent] = h.upstream.requests
        assert "maria-own-token-1234" not in str(sent.headers)


async def test_the_same_call_asked_again_while_it_waits_gets_the_same_approval(tmp_path: Path) -> None:
    # Two identical pages, both approved, ran the transfer twice.
    maria, other_agent = Principal("maria"), Principal("maria", agent="cron")
    async with harness(tmp_path) as h:
        first = await h.gateway.call(maria, "api.payments.create", {"amount": 500})
        twice = await h.gateway.call(maria, "api.payments.create", {"amount": 500})
        assert isinstance(first, PendingApproval) and isinstance(twice, PendingApproval)
        assert twice.approval_id == first.approval_id
        # Other arguments, another agent of the same user: other calls, other approvals.
        more = await h.gateway.call(maria, "api.payments.create", {"amount": 501})
        by_cron = await h.gateway.call(other_agent, "api.payments.create", {"amount": 500})
        assert isinstance(more, PendingApproval) and isinstance(by_cron, PendingApproval)
        assert len({first.approval_id, more.approval_id, by_cron.approval_id}) == 3
        # Decided, it is no longer waiting: the same call asked again after it ran asks anew.
        assert await h.gateway.approvals.decide(first.approval_id, True, by="bob") is not None
        ran = await h.gateway.call(maria, "api.payments.create", {"amount": 500}, approval_id=first.approval_id)
        assert isinstance(ran, Ok), ran
        again = await h.gateway.call(maria, "api.payments.create", {"amount": 500})
        assert isinstance(again, PendingApproval) and again.approval_id != first.approval_id
        assert len(h.upstream.requests) == 1
