"""``CallTrace``'s audit rows: the ``started`` row, and the outcome built from it."""

from __future__ import annotations

from mcp_gateway.core.trace import CallTrace
from mcp_gateway.services.approvals import fingerprint
from mcp_gateway.services.identity import Principal
from mcp_gateway.store import AuditRecord
from mcp_gateway.vocabulary.clock import FixedClock
from mcp_gateway.vocabulary.model import Action, ErrorResult, HttpBinding, Ok, Verdict

ALICE = Principal(user="alice", agent="ci-bot")
ARGS = {"id": "7", "token": "s3cret"}


def _action(path: str) -> Action:
    return Action(connector="api", path=path, binding=HttpBinding(method="GET", url=f"/{path}"))


def _reached(clock: FixedClock) -> tuple[CallTrace, AuditRecord]:
    trace = CallTrace(action=_action("items.get"), verdict=Verdict(action="always_run", source="risk_default"))
    trace.call_id = "c1"
    return trace, trace.started_record(ALICE, "api.items.get", ARGS, clock)


def _valid(row: AuditRecord) -> AuditRecord:
    """The row as validation makes it: an outcome must be a row validation accepts unchanged."""
    return AuditRecord.model_validate(row.model_dump())


def test_outcome_is_the_started_row_with_its_outcome_fields() -> None:
    clock = FixedClock()
    trace, started = _reached(clock)
    clock.advance(2)
    trace.upstream_status = 502
    trace.approved_by = "bob"
    failed = ErrorResult(reason="upstream_error", message="bad gateway")
    outcome = trace.audit_record(ALICE, "api.items.get", ARGS, failed, clock)

    assert started.status == "started" and started.upstream_status is None and started.reason is None
    assert _valid(outcome) == outcome
    assert (outcome.status, outcome.reason, outcome.upstream_status) == ("error", "upstream_error", 502)
    assert (outcome.at, outcome.call_id, outcome.approved_by) == (clock.now(), "c1", "bob")
    same = ("user", "agent", "requested", "connector", "action", "args_preview", "fingerprint", "verdict")
    assert [getattr(outcome, f) for f in same] == [getattr(started, f) for f in same]
    assert outcome.args_preview == '{"id":"7","token":"[redacted]"}'
    assert outcome.fingerprint == fingerprint(ALICE, "api.items.get", ARGS)


def test_outcome_of_a_call_whose_action_changed_shows_the_new_action() -> None:
    clock = FixedClock()
    trace, started = _reached(clock)
    trace.action = _action("items.fallback")  # e.g. the request fallback ran another action
    outcome = trace.audit_record(ALICE, "api.items.get", ARGS, Ok(data={"ok": True}), clock)
    assert started.action == "api.items.get" and outcome.action == "api.items.fallback"
    assert outcome.fingerprint == fingerprint(ALICE, "api.items.fallback", ARGS) != started.fingerprint
    assert _valid(outcome) == outcome and outcome.status == "ok"
