"""Shaping what the gateway hands back: a meta-tool's JSON payload, an upstream outcome redacted for
the agent, and the reason code a call's audit row records."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from .execution import Outcome, summarize_error
from .model import AuditReason, CallResult, Denied, ErrorResult, NeedsAuth
from .redaction import Redactor

__all__ = ["result_payload"]


def result_payload(result: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object a meta-tool returns (structured content)."""
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", exclude_none=True)
    return dict(result)


def _reason_code(result: CallResult) -> AuditReason | None:
    match result:
        case Denied(reason=reason) | ErrorResult(reason=reason):
            return reason
        case NeedsAuth():
            return "needs_auth"
        case _:
            return None


def _summary(outcome: Outcome, redactor: Redactor) -> str:
    """The upstream's reason, redacted before it is capped so a cut cannot split a secret."""
    return summarize_error(dataclasses.replace(outcome, data=redactor.redact(outcome.data)))


def _redact_data(outcome: Outcome, redactor: Redactor) -> Any:
    data = outcome.data
    if redactor and outcome.binary:
        # A binary body: the secret would hide inside the base64, so redact the bytes themselves.
        raw = redactor.redact_bytes(base64.b64decode(data["base64"]))
        return {**data, "base64": base64.b64encode(raw).decode("ascii"), "bytes": len(raw)}
    return redactor.redact(data, truncated=outcome.truncated)
