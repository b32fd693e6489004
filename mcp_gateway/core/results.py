"""What the gateway hands back: one typed result model per meta-tool, the JSON payload a model
becomes on the wire, an upstream outcome redacted for the agent, and a call's audit reason code.

Every meta-tool returns a pydantic model (``call`` the ``CallResult`` union of ``model.py``); the
transport turns it into JSON with ``result_payload`` (``exclude_none``: an absent optional field is
left out, not sent as null). The ``status`` of a result is a closed set: ``ok``, ``link`` (a link
for the human, from ``connect`` and ``request_secret``), ``pending_approval``, ``needs_auth``,
``denied``, ``error``.

The parts the command line builds without this module's execution layer live apart and are
re-exported here: ``shown`` (the payload, upstream text cleaned), ``connectors_answer`` and
``discover_answer`` (those two meta-tools' results).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from ..execution import Outcome, said
from ..execution.error_dialects import read_error
from ..primitives.compressed import compressed_content
from ..primitives.redaction import REDACTED, Redactor
from ..primitives.sanitize import MAX_ERROR_CHARS, clean_json, clean_text
from ..primitives.upstream_text import WITHHELD
from ..vocabulary.model import (
    AuditReason,
    CallResult,
    Denied,
    ErrorResult,
    NeedsAuth,
    Ok,
    PolicyAction,
    Risk,
    VerdictSource,
)
from .connectors_answer import ConnectorsResult
from .discover_answer import CatalogSuggestion, DiscoverHit, DiscoverResult
from .shown import result_payload, shown_description, shown_schema, shown_summary

__all__ = [
    "CatalogSuggestion",
    "ConnectLink",
    "Connected",
    "ConnectorsResult",
    "DescribeAuth",
    "DescribePolicy",
    "DescribeResult",
    "DiscoverHit",
    "DiscoverResult",
    "SecretLink",
    "UpstreamSummary",
    "clean_result",
    "reason_code",
    "redact_data",
    "redacted_json",
    "result_payload",
    "shown_description",
    "shown_schema",
    "shown_summary",
    "upstream_summary",
]

_FROZEN = ConfigDict(frozen=True)


class DescribePolicy(BaseModel):
    """The rule that decides a call of the action with no arguments, and whether arguments may change it."""

    model_config = _FROZEN
    action: PolicyAction
    source: VerdictSource
    rule: str | None
    """Sent as null for a default (no rule matched): an agent reads "no rule", not a missing field."""
    conditional: bool
    separate_approver: bool | None = None
    """True when an approval of this call must come from someone other than the caller (the
    rule's or the project's ``separate_approver``); left out otherwise."""

    @model_serializer(mode="wrap")
    def _keep_rule(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # result_payload drops None fields; this one is part of describe's answer even when null.
        data: dict[str, Any] = handler(self)
        return {"action": data["action"], "source": data["source"], "rule": self.rule, **data}


class DescribeAuth(BaseModel):
    model_config = _FROZEN
    kind: str
    """The auth kind the connector needs (``bearer``, ``none`` ...); never a value."""
    configured: bool


class DescribeResult(BaseModel):
    """``describe``: everything needed to call one action."""

    model_config = _FROZEN
    name: str
    summary: str
    description: str
    risk: Risk
    input_schema: dict[str, Any]
    policy: DescribePolicy
    auth: DescribeAuth


class Connected(BaseModel):
    """``connect`` or ``request_secret`` with nothing left for a human to do."""

    model_config = _FROZEN
    status: Literal["ok"] = "ok"
    connector: str
    name: str | None = None
    """The secret's name, for ``request_secret``."""
    message: str


class ConnectLink(BaseModel):
    """``connect``: a link for the human to enter the connector's credential or sign in."""

    model_config = _FROZEN
    status: Literal["link"] = "link"
    connector: str
    connect_url: str
    expires_at: str
    message: str
    approval_id: str | None = None
    """Set when the link would replace a team-wide credential: it works once an operator approves this."""


class SecretLink(BaseModel):
    """``request_secret``: a link for the human to paste one named secret."""

    model_config = _FROZEN
    status: Literal["link"] = "link"
    connector: str
    name: str
    secret_url: str
    expires_at: str
    message: str
    approval_id: str | None = None
    """Set when the link would replace a team-wide secret: it works once an operator approves this."""


def reason_code(result: CallResult) -> AuditReason | None:
    """The reason an audit row records: a denial's or error's reason, ``needs_auth``, else None."""
    match result:
        case Denied(reason=reason) | ErrorResult(reason=reason):
            return reason
        case NeedsAuth():
            return "needs_auth"
        case _:
            return None


@dataclasses.dataclass(frozen=True)
class UpstreamSummary:
    """What a message may quote of an upstream's error body, and whether part of it was withheld."""

    text: str
    """Screened: redacted, cleaned, capped; ``WITHHELD`` when nothing of it could be kept."""
    withheld: bool = False
    """Some or all of it read as instructions to the model and is not in ``text``."""

    def __bool__(self) -> bool:
        return bool(self.text)


def upstream_summary(
    outcome: Outcome, redactor: Redactor, connector: str = "", *, max_chars: int = MAX_ERROR_CHARS
) -> UpstreamSummary:
    """The upstream's reasons, redacted before they are capped so a cut cannot split a secret, then
    screened (``execution.said``). When they read as instructions to the model, each reason is judged
    on its own and those that pass are kept (a field's ``missing_field`` code beside a message that
    was an injection), provided they still pass together; the rest is withheld. ``max_chars``: less
    for text quoted inside the gateway's own sentence than for an ``upstream_message``."""
    # A body the upstream cut short may end in the first part of a secret, as one cut by the cap does.
    cut = outcome.truncated or outcome.cut_short
    body = read_error(dataclasses.replace(outcome, data=redactor.redact(outcome.data, truncated=cut)))
    screened = said(body.text(), redactor.redact_text, max_chars=max_chars)
    if not screened.withheld:
        return UpstreamSummary(screened.for_agent())
    passing = [reason for reason in body.reasons if not said(reason, redactor.redact_text).withheld]
    kept = said("; ".join(passing), redactor.redact_text, max_chars=max(0, max_chars - len(WITHHELD) - 2))
    if kept and not kept.withheld:
        return UpstreamSummary(f"{kept.text}; {WITHHELD}", withheld=True)
    return UpstreamSummary(WITHHELD, withheld=True)


def redact_data(outcome: Outcome, redactor: Redactor) -> Any:
    """The upstream's answer with every secret the call used taken out."""
    return redacted_json(outcome, redactor)[0]


def redacted_json(outcome: Outcome, redactor: Redactor) -> tuple[Any, str | None]:
    """``redact_data``, and the answer's JSON text when redacting worked it out and changed nothing
    (``Redactor.redact_json``): ``clean_result`` takes it instead of serializing the answer again."""
    data = outcome.data
    if redactor and outcome.binary:
        # A binary body: the secret would hide inside the base64, so redact the bytes themselves.
        raw = redactor.redact_bytes(base64.b64decode(data["base64"]), truncated=outcome.truncated)
        if redactor.redact_bytes(unpacked := compressed_content(raw)) != unpacked:
            # Compressed bytes (gzip, zlib, a zip archive) hide every form: what they unpack to decides.
            raw = REDACTED.encode()
        return {**data, "base64": base64.b64encode(raw).decode("ascii"), "bytes": len(raw)}, None
    return redactor.redact_json(data, truncated=outcome.truncated)


# -- what reaches the model from upstreams is cleaned -------------------------------------------------


_JSON = json.JSONEncoder(ensure_ascii=False, default=str)
"""``json.dumps(data, ensure_ascii=False, default=str)``, made once (``json.dumps`` builds an encoder
per call when given options); measures and checks every ``ok`` answer that redaction did not serialize."""


def clean_result(
    result: CallResult,
    max_result_chars: int | None = None,
    *,
    text: str | None = None,
    redactor: Redactor | None = None,
) -> CallResult:
    """``result`` with upstream text made safe for the model: the messages of a denial or an error
    cleaned and capped, and an ``ok`` answer's strings cleaned. With ``max_result_chars``, an answer
    whose JSON is longer is cut to that many characters (as one string) and marked ``truncated``.
    ``text``: the ``ok`` answer's ``json.dumps(data, ensure_ascii=False)`` when it is already at hand.
    ``redactor``: the call's, applied again to what cleaning changed, before any cut: taking out an
    invisible character can join a secret the upstream split with it (``cAn4r\\u200by``)."""
    if isinstance(result, ErrorResult):
        return result.model_copy(
            update={
                "message": clean_text(result.message, max_chars=MAX_ERROR_CHARS),
                # Screened where it was made; again here, so that no path to the agent can skip it.
                "upstream_message": said(result.upstream_message, max_chars=MAX_ERROR_CHARS).for_agent()
                if result.upstream_message
                else result.upstream_message,
                "hint": clean_text(result.hint, max_chars=MAX_ERROR_CHARS) if result.hint else result.hint,
            }
        )
    if isinstance(result, Denied):
        return result.model_copy(update={"message": clean_text(result.message, max_chars=MAX_ERROR_CHARS)})
    if not isinstance(result, Ok):
        return result
    data, text, non_finite = _finite(result.data, text)
    data, text = _cleaned(data, text)
    if redactor and data is not result.data:
        data, text = redactor.redact_json(data)
    truncated = result.truncated
    if max_result_chars is not None:
        if text is None:
            text = data if isinstance(data, str) else _JSON.encode(data)
        if len(text) > max_result_chars:
            data, truncated = text[:max_result_chars], True
    if data is result.data and truncated == result.truncated:
        return result  # nothing to clean or cut (the common case): no copy
    update: dict[str, Any] = {"data": data, "truncated": truncated}
    if non_finite:
        update["non_finite_replaced"] = True
    return result.model_copy(update=update)


def _finite(data: Any, known: str | None) -> tuple[Any, str | None, bool]:
    """``data`` with every NaN and infinite number made None, the JSON text ``clean_result`` may reuse,
    and whether any was. JSON has no such numbers, so the agent would read them as null either way:
    this says so. Decided on the answer's text (the encoder writes them ``NaN``, ``Infinity``): no
    walk unless one of those words is in it."""
    if isinstance(data, str) or data is None:
        return data, known, False
    try:
        text = known if known is not None else _JSON.encode(data)
    except (TypeError, ValueError, RecursionError):
        return data, known, False
    if "NaN" not in text and "Infinity" not in text:
        return data, text, False
    replaced = _nulled(data)
    return (data, text, False) if replaced is data else (replaced, None, True)


def _nulled(value: Any) -> Any:
    """``value`` with its non-finite floats made None; ``value`` itself when it has none."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        items = {k: _nulled(v) for k, v in value.items()}
        return value if all(items[k] is v for k, v in value.items()) else items
    if isinstance(value, list | tuple):
        values = [_nulled(v) for v in value]
        return value if all(n is v for n, v in zip(values, value, strict=True)) else values
    return value


def _cleaned(data: Any, known: str | None = None) -> tuple[Any, str | None]:
    """``clean_json(data)``, and the text ``clean_result`` measures against ``max_result_chars`` when
    it came for free. ``data`` itself when no string in it (key or value) has anything to clean:
    decided on one serialization in C instead of a walk in Python. JSON escapes every control
    character and a backslash, so text that is printable ASCII without a backslash holds only
    strings of printable ASCII, which ``clean_text`` returns as they are. (``clean_json`` would also
    turn tuples into lists and keys into strings; the JSON the agent gets is the same either way.)"""
    if isinstance(data, str):
        cleaned = clean_text(data)
        return cleaned, cleaned
    try:
        text = known if known is not None else _JSON.encode(data)
    except (TypeError, ValueError, RecursionError):
        return clean_json(data), None
    if text.isascii() and text.isprintable() and "\\" not in text:
        return data, text
    return clean_json(data), None
