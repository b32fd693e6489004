"""What an upstream's refusal means for the agent: the category, the sentence and the next step.

An error status is where an agent most needs the right advice, and where the status alone misleads
most: GitHub answers a rate limit with 403, AWS a throttle with 400 and an expired token with 403, a
SOAP service every fault with 500, and a 401 may mean an expired token or an address the token may
not be used from. The body's dialect (``execution.error_dialects``) is read for what it says, and
whatever of it is quoted is screened first (``results.upstream_summary``).
"""

from __future__ import annotations

from ..execution.error_dialects import MISSING_SCOPE, ErrorBody, body_retry_after, read_error
from ..execution.executor import Prepared
from ..execution.response import MAX_RETRY_AFTER, Outcome
from ..policy import effective_risk
from ..primitives.redaction import Redactor
from ..primitives.upstream_text import MAX_UPSTREAM_TEXT
from ..vocabulary.model import CallResult, Denied, ErrorResult
from .results import UpstreamSummary, upstream_summary

__all__ = ["failed_envelope", "failed_in_body", "may_have_run", "refusal", "several_choices", "unauthorized"]


def unauthorized(slug: str, outcome: Outcome, redactor: Redactor) -> Denied | str:
    """The answer to a 401: the reason a connect link is given with, the upstream's own words in it
    (an expired token and an address not allowed both answer 401, and only one is fixed by
    reconnecting); a ``Denied`` when its challenge says ``insufficient_scope``, a missing permission."""
    quoted = upstream_summary(outcome, redactor, slug, max_chars=MAX_UPSTREAM_TEXT)
    if outcome.challenge is not None and outcome.challenge.insufficient_scope:
        return _forbidden(slug, 401, quoted, redactor, "the credential was not granted the scope this call needs")
    if not quoted or quoted.withheld:
        return f"{slug} rejected the stored credential (401); ask the user to reconnect."
    return redactor.redact_text(
        f"{slug} rejected the stored credential (401). The upstream said: {quoted.text.rstrip('.')}. Ask the user "
        "to reconnect, unless that says a new credential would not help (an address not allowed, a disabled "
        "account): then tell the user what it said."
    )


def refusal(prepared: Prepared, outcome: Outcome, redactor: Redactor, fallback: str = "") -> CallResult:
    """The answer to an upstream's error status (not 401): a rate limit is one whatever its status (its
    headers or its body's codes say so), a refused credential says so, a 511 is a network sign-in in
    front of the upstream, a 5xx is the upstream's own failure (nothing to fix in the arguments, unless
    a SOAP fault blames the request), a 403 is final, the rest are the arguments' to fix but for the
    statuses of ``_STATUS_HINTS``. ``fallback``: the sentence pointing at the connector's request
    action, for an argument error."""
    slug, status = prepared.connector.slug, outcome.http_status
    assert status is not None
    body = read_error(outcome)
    # A rate limit told with 403 (GitHub's) says when to retry, not that retrying will not help.
    limited = status == 429 or (status in (403, 503) and outcome.retry_after is not None)
    limited = limited or (status == 403 and outcome.limit_spent) or body.rate_limited
    refused = "" if limited else body.credential_refused
    if (status == 403 or body.forbidden) and not limited and not refused:
        # AWS says AccessDeniedException with a 400 too (its x-amzn-ErrorType header or its __type).
        quoted = upstream_summary(outcome, redactor, slug, max_chars=MAX_UPSTREAM_TEXT)
        return _forbidden(slug, status, quoted, redactor, _lacking(body))
    summary = upstream_summary(outcome, redactor, slug)
    upstream_message = summary.text or None  # an empty body said nothing: no empty quote of it
    unread = (
        f" Its body could not be decoded (a corrupt or cut {outcome.undecodable} stream), so what it said is unknown."
        if outcome.undecodable
        else " Its body was cut short (the connection closed before its end)."
        if outcome.cut_short
        else ""
    )
    if limited:
        return _rate_limited(slug, status, outcome.retry_after, upstream_message)
    if refused:
        # AWS says ExpiredToken or SignatureDoesNotMatch with a 400 or 403: no permission is missing, the
        # credential itself is expired, unknown or signs wrong.
        return _credential_refused(slug, status, refused, upstream_message)
    if status == 511:
        # RFC 6585: only a proxy or captive portal in front of the upstream answers 511, the API never.
        return ErrorResult(
            reason="upstream_unreachable",
            message=f"{slug} answered 511 (network authentication required): a captive portal or proxy between "
            "the gateway and the upstream wants a sign-in, so the request never reached the API and nothing was done.",
            upstream_status=status,
            upstream_message=upstream_message,
            hint="The arguments are not the problem, and retrying will not help until the gateway's network lets "
            "it through: tell the operator.",
        )
    if status >= 500 and not body.blames_request:
        return ErrorResult(
            reason="upstream_error",
            message=f"{slug} answered {status}: it failed on its side."
            + (" The call may have taken effect; check before calling again." if may_have_run(prepared) else "")
            + unread,
            upstream_status=status,
            upstream_message=upstream_message,
            hint="The arguments are not the problem: try again later, and tell the operator if it keeps failing.",
        )
    if summary.withheld:
        hint = "The upstream's explanation was withheld; check the arguments against describe."
    elif outcome.undecodable:
        hint = "Check the arguments against describe (the upstream's explanation could not be read)."
    elif not upstream_message:
        hint = "Check the arguments against describe (the upstream gave no explanation)."
    else:
        hint = "Check the arguments against describe; the upstream's message says what it expected."
    return ErrorResult(
        reason="upstream_error",
        message=f"{slug} answered {status}"
        + (" with a SOAP fault that blames the request." if body.blames_request else ".")
        + (" The call may have taken effect; check before calling again." if _cut_short(status, prepared) else "")
        + unread,
        upstream_status=status,
        upstream_message=upstream_message,
        hint=_STATUS_HINTS.get(status, hint) + fallback,
    )


def _credential_refused(slug: str, status: int, code: str, upstream_message: str | None) -> ErrorResult:
    return ErrorResult(
        reason="auth_failed",
        message=f"{slug} answered {status}: it did not accept the stored credential ({code}).",
        upstream_status=status,
        upstream_message=upstream_message,
        hint="Retrying will not help and the arguments are not the problem: ask the user to reconnect "
        "(connect) with a valid credential.",
    )


def _lacking(body: ErrorBody) -> str:
    if MISSING_SCOPE in body.codes:
        return "the credential was not granted the scope this call needs (the upstream's message names it)"
    return "the credential lacks the permission"


def _rate_limited(slug: str, status: int, wait: float | None, upstream_message: str | None) -> ErrorResult:
    if wait is None:
        return ErrorResult(
            reason="rate_limited",
            message=f"{slug} answered {status}: it is limiting how often it is called, and did not say for how long.",
            upstream_status=status,
            upstream_message=upstream_message,
            hint="Wait before calling again (some seconds at first, longer each time it refuses so; the upstream's "
            "message may say how long); the arguments are not the problem and the credential is not at fault.",
        )
    retry = max(0.1, round(wait, 1))
    asks = (
        f"asks to wait at least {MAX_RETRY_AFTER:g} s (its Retry-After is past the longest wait the gateway passes on)"
        if wait >= MAX_RETRY_AFTER
        else f"asks to retry in {retry:g} s"
    )
    return ErrorResult(
        reason="rate_limited",
        message=f"{slug} answered {status} and {asks}.",
        upstream_status=status,
        upstream_message=upstream_message,
        retry_after=retry,
        hint=f"Wait {retry:g} s before calling again (retry_after).",
    )


def may_have_run(prepared: Prepared) -> bool:
    """Whether a call that failed may still have changed something upstream: it is no read (the generic
    request action's risk is its method's)."""
    method = {"method": prepared.request.method} if prepared.request is not None else {}
    return effective_risk(prepared.action, method) != "read"


_STATUS_HINTS = {
    402: "The upstream wants payment or a plan that allows this (a declined card, a quota of the account): the "
    "arguments are not the problem; tell the user.",
    405: "The upstream does not take this method at this URL: the action's description may be out of date; tell "
    "the operator.",
    409: "The upstream refused it as conflicting with the current state (it exists already, or changed "
    "meanwhile): read the current state before deciding what to do; do not just repeat it.",
    410: "What this call names is gone for good at the upstream (deleted, or an endpoint it retired: its message "
    "may say what replaced it); the arguments' shape is not the problem, so do not repeat the call as it is. A "
    "watch or list whose resource version is too old (Kubernetes) is fixed by listing again without one.",
    412: "A precondition failed: what the request was based on (a version, an ETag) changed meanwhile; read it "
    "again, then decide.",
    415: "The upstream does not take the body in this format: the action's description may be out of date; tell "
    "the operator.",
    423: "What this call acts on is locked (another operation holds it, or its owner locked it): the arguments are "
    "not the problem; wait and try again later, or tell the user if it stays locked.",
    424: "It depended on another request or step that failed (the upstream's message may name it): deal with that "
    "one first; this call's own arguments may be fine.",
    451: "The upstream may not serve this for legal reasons (a court order, sanctions, a country's law): the "
    "arguments are not the problem and retrying will not help; tell the user.",
    499: "The request was cancelled before the upstream finished it (a proxy on the way, or the upstream, gave up "
    "on it): the arguments are not the problem; try again.",
}
"""What to do after a 4xx whose cause is not the arguments' shape, where "check the arguments" misleads."""


def _cut_short(status: int, prepared: Prepared) -> bool:
    """A 499 (a request cancelled while the upstream worked on it) of a call that may have changed something."""
    return status == 499 and may_have_run(prepared)


def several_choices(prepared: Prepared, outcome: Outcome, redactor: Redactor) -> ErrorResult:
    """The answer to a 300 (Multiple Choices) with no ``Location`` to follow: the upstream offered several
    representations and did not pick one, so the call did not get what it asked for, for a write too."""
    slug = prepared.connector.slug
    return ErrorResult(
        reason="upstream_error",
        message=f"{slug} answered 300 (Multiple Choices): it offered several representations of what the call "
        "asked for and picked none, so the call got no answer to use"
        + ("; check whether the write took effect before calling again." if may_have_run(prepared) else "."),
        upstream_status=300,
        upstream_message=upstream_summary(outcome, redactor, slug).text or None,
        hint="Its message may list the choices: call the one you need (through the connector's request action if "
        "no action reaches it), or tell the operator that the action's URL is ambiguous.",
    )


def failed_in_body(data: object) -> str:
    """The flag by which an answer's body says it failed though its status is 2xx (``"ok": false``,
    ``"success": false``); empty when it says no such thing.

    Only an envelope that says so without doubt: the top level's ``ok`` or ``success`` is the boolean
    false and beside it is what went wrong: an ``error`` (Slack's ``{"ok": false, "error":
    "channel_not_found"}``), a non-empty ``errors`` (Cloudflare's ``{"success": false, "errors": […]}``),
    or a ``description`` with an ``error_code`` (Telegram's). A record that merely has an ``ok`` or
    ``success`` field, or a ``description``, stays data.
    """
    if not isinstance(data, dict):
        return ""
    fields: dict[str, object] = data  # pyright: ignore[reportUnknownVariableType]
    flag = next((key for key in ("ok", "success") if fields.get(key) is False), "")
    if not flag:
        return ""
    said = fields.get("error") not in (None, "", False) or bool(fields.get("errors"))
    said = said or (bool(fields.get("description")) and fields.get("error_code") is not None)
    return f'"{flag}": false' if said else ""


def failed_envelope(prepared: Prepared, outcome: Outcome, redactor: Redactor, flag: str) -> ErrorResult | Denied:
    """The answer to a 2xx whose envelope says it failed (``failed_in_body``'s ``flag``): a rate limit when
    its codes say so (Telegram's ``error_code`` 429 over HTTP 200, Slack's ``ratelimited``), with the wait its
    body asks for; a refused credential (Slack's ``invalid_auth``, ``token_revoked``) or a missing permission
    (``missing_scope``, naming the scope needed) as an error status saying so would be; else the failure it
    is, its text screened as any error's, not handed over as a success."""
    slug, status = prepared.connector.slug, outcome.http_status
    assert status is not None
    upstream_message = upstream_summary(outcome, redactor, slug).text or None
    body = read_error(outcome)
    if body.rate_limited:
        asked = body_retry_after(outcome.data)
        return _rate_limited(slug, status, None if asked is None else min(asked, MAX_RETRY_AFTER), upstream_message)
    if refused := body.credential_refused:
        return _credential_refused(slug, status, refused, upstream_message)
    if body.forbidden:
        quoted = upstream_summary(outcome, redactor, slug, max_chars=MAX_UPSTREAM_TEXT)
        return _forbidden(slug, status, quoted, redactor, _lacking(body))
    return ErrorResult(
        reason="upstream_error",
        message=f"{slug} answered {status} but its answer says the call failed ({flag}).",
        upstream_status=status,
        upstream_message=upstream_message,
        hint="Read the upstream's error, fix what it names and call again"
        + ("; check first whether a write took effect." if may_have_run(prepared) else "."),
    )


def _forbidden(slug: str, status: int, quoted: UpstreamSummary, redactor: Redactor, lacking: str) -> Denied:
    return Denied(
        reason="upstream_forbidden",
        message=redactor.redact_text(
            f"{slug} refused this call ({status}). Retrying will not help; {lacking}."
            + (f" The upstream said: {quoted.text}" if quoted else "")
        ),
    )
