"""The dialects upstreams fail in, read into what an agent needs: each reason with the field it names,
and the codes that say what kind of failure it is when the status alone misleads.

The one place that knows them. JSON errors differ mostly in where the reason and the field sit:

- RFC 9457/7807 problem details: ``detail``, ``title``, ``errors[] {detail, pointer}``,
  ``invalid-params[] {name, reason}``;
- JSON:API ``errors[] {detail, title, source: {pointer | parameter | header}}``;
- Google ``error {message, details[] {fieldViolations[] {field, description}}}`` (and ``RetryInfo``'s
  ``retryDelay``), OData/Azure ``error {message, target, details[] {target, message}}``;
- Stripe ``error {message, param}``, GitHub ``errors[] {resource, field, code}``, FastAPI
  ``detail[] {loc, msg}``, Spring ``errors[] {field, defaultMessage}``, Salesforce
  ``[{message, errorCode, fields}]``;
- ``errors`` as an object of field to messages (Rails, Laravel, Shopify, Mongoose), GitLab's ``message``
  likewise; Jira's ``errorMessages`` list beside its ``errors`` object.

The general rule: a reason is a message-like value, and an object holding one also names where (a
``field``, ``param``, ``pointer``, ``target``…) is said ``where: reason``; an ``errors``-like object
without a message of its own maps fields to their reasons. XML bodies (AWS and Azure ``<Error>``
``Code``/``Message``, SOAP 1.1 ``faultcode``/``faultstring``, SOAP 1.2 ``Code``/``Reason``) are read with
``xml_text`` (no DTD, no entities). A ``WWW-Authenticate`` challenge's ``error`` and
``error_description`` (RFC 6750) are a reason too. AWS's ``x-amzn-ErrorType`` header
(``Outcome.error_type``) is a code and names the first reason. A Python traceback, wherever a reason
is text, is the text before it and the exception it ended with (``tracebacks``): its frames are
code, not reasons.

Everything here is the upstream's untrusted text: callers screen it (``upstream_text``) before anyone
reads it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..primitives.html_text import looks_like_html, readable_text
from ..primitives.upstream_text import CUT
from ..primitives.xml_text import Element, looks_like_xml, parse_xml, tag_text
from .tracebacks import summarize_debug_page, summarize_traceback

if TYPE_CHECKING:
    from .response import Outcome

__all__ = [
    "ERROR_TEXT_LIMIT",
    "MISSING_SCOPE",
    "Challenge",
    "ErrorBody",
    "body_retry_after",
    "error_type_of",
    "graphql_extensions",
    "read_error",
    "summarize_error",
]

ERROR_TEXT_LIMIT: Final = 2000
"""Longest upstream reason handed on to be screened (``said`` cuts it again to what a message quotes)."""

_TEXT_KEYS: Final = ("message", "error", "error_description", "detail", "errorMessages")
"""Where an object says what went wrong, in the order said (``title`` comes after its details)."""
_FALLBACK_KEYS: Final = ("reason", "description", "msg", "defaultMessage", "errorMessage", "Message")
"""Where an item says it when none of ``_TEXT_KEYS`` is there."""
_LIST_KEYS: Final = (
    "errors",
    "invalid-params",
    "invalid_params",
    "details",
    "fieldViolations",
    "field_violations",
    "violations",
    "fieldErrors",
    "field_errors",
)
"""Where an object lists its single errors: a list of items, or an object of field to reasons."""
_WHERE_KEYS: Final = ("field", "param", "parameter", "pointer", "property", "target", "instancePath", "dataPath")
_CODE_KEYS: Final = ("code", "__type", "errorCode", "error_code", "reason", "type")
_SCOPE_KEYS: Final = ("needed", "provided")
_MAX_DEPTH: Final = 7
_MAX_ITEMS: Final = 10
"""Items of one list (or fields of one object) read: a body is untrusted, and a few reasons say enough."""

_RATE_LIMIT_CODES: Final = frozenset(
    {
        # AWS (the JSON and XML protocols), whose throttling comes as 400 or 503.
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "SlowDown",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "ProvisionedThroughputExceededException",
        # Google's errors[].reason on a 403.
        "rateLimitExceeded",
        "userRateLimitExceeded",
        # A numeric code of 429 in the body (Telegram's error_code, also over HTTP 200).
        "429",
        # GraphQL extensions.code (Shopify, Apollo's convention), GitHub's type.
        "THROTTLED",
        "RATE_LIMITED",
        # Slack's error (over HTTP 429, and 200).
        "ratelimited",
    }
)
"""Codes that say "too many requests" whatever the status they come with."""
_CREDENTIAL_CODES: Final = frozenset(
    {
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidSignatureException",
        "UnrecognizedClientException",
        "IncompleteSignatureException",
        "AuthFailure",
        "UNAUTHENTICATED",  # GraphQL's extensions.code
        # Slack's error, in an ``"ok": false`` answer.
        "invalid_auth",
        "not_authed",
        "token_revoked",
        "token_expired",
        "account_inactive",
    }
)
"""AWS codes (on a 400 or 403), GraphQL's and Slack's, that say the credential itself was refused: expired,
revoked, unknown, or signing with the wrong secret. Not a missing permission: a new credential fixes them,
retrying does not."""
_FORBIDDEN_CODES: Final = frozenset(
    {"AccessDeniedException", "AccessDenied", "FORBIDDEN", "missing_scope", "no_permission", "restricted_action"}
)
"""AWS codes that say the credential may not do this, sent with 400 by some services (KMS, DynamoDB),
GraphQL's ``FORBIDDEN``, and Slack's (``missing_scope`` names the scope ``needed``)."""
MISSING_SCOPE: Final = "missing_scope"
"""Slack's code for a token not granted a scope the method needs."""
_SENDER_FAULTS: Final = frozenset({"client", "sender"})
"""SOAP fault codes (1.1 ``Client``, 1.2 ``Sender``) that blame the request; SOAP sends every fault as a 500."""


@dataclass(frozen=True)
class Challenge:
    """What a ``WWW-Authenticate`` challenge says about a refused token (RFC 6750 3)."""

    error: str
    """``invalid_token``, ``insufficient_scope``, ``invalid_request``; empty when it names none."""
    description: str = ""

    @property
    def insufficient_scope(self) -> bool:
        """The token is good but may not do this: a matter of permission, not of reconnecting."""
        return self.error == "insufficient_scope"

    def reason(self) -> str:
        if self.error and self.description:
            return f"{self.error}: {self.description}"
        return self.error or self.description

    @classmethod
    def parse(cls, header: str | None) -> Challenge | None:
        """The ``error`` and ``error_description`` of a ``WWW-Authenticate`` header; None without either."""
        if not header:
            return None
        params = {name.lower(): _unquoted(value) for name, value in _AUTH_PARAM.findall(header)}
        error, description = params.get("error", ""), params.get("error_description", "")
        return cls(error, description) if error or description else None


_AUTH_PARAM: Final = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^,\s]+)')


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


@dataclass(frozen=True)
class ErrorBody:
    """An error answer as read: its reasons, each with the field it names, and the codes of its dialect."""

    reasons: tuple[str, ...] = ()
    """The upstream's reasons in its words, deduplicated (``where: reason`` when it names a field)."""
    codes: frozenset[str] = frozenset()
    """Machine codes the body names (``ThrottlingException``, a SOAP fault's ``Client``)."""
    blames_request: bool = False
    """A SOAP fault coded ``Client``/``Sender``: the request is at fault, though the status is 500."""
    insufficient_scope: bool = False
    """The challenge says the token lacks the scope: a permission, not a credential, problem."""
    throttle_said: bool = False
    """A reason says in words that calls come too often, with no code for it (GitHub's secondary rate limit,
    a 403 that may come with neither ``Retry-After`` nor a spent allowance)."""

    @property
    def rate_limited(self) -> bool:
        return self.throttle_said or bool(self.codes & _RATE_LIMIT_CODES)

    @property
    def forbidden(self) -> bool:
        """A code saying the credential lacks the permission, whatever the status: final, as a 403 is."""
        return bool(self.codes & _FORBIDDEN_CODES)

    @property
    def credential_refused(self) -> str:
        """The code saying the credential itself was refused (expired, unknown, signed wrong); empty if none."""
        return min(self.codes & _CREDENTIAL_CODES, default="")

    def text(self) -> str:
        return _cap("; ".join(self.reasons))


def summarize_error(outcome: Outcome) -> str:
    """The upstream's own reason for a non-2xx answer, short and as the upstream phrased it.

    Text is passed on verbatim, an HTML page as its title and visible text (``html_text``), XML as the
    reasons its dialect names (else its text without tags), cut at ``ERROR_TEXT_LIMIT`` with ``CUT``
    (``said`` cuts shorter where it quotes it). JSON yields its reasons (``read_error``), joined; JSON
    without any is returned compact. An empty body gives "".
    """
    return read_error(outcome).text()


def read_error(outcome: Outcome) -> ErrorBody:
    """``outcome``'s error body read in its dialect (see the module's docstring)."""
    data = outcome.data
    challenge = outcome.challenge
    said_first = (challenge.reason(),) if challenge is not None and challenge.reason() else ()
    scope = challenge is not None and challenge.insufficient_scope
    body = _read_body(outcome, data)
    read = [r for r in body.reasons if r]
    codes = body.codes
    if outcome.error_type:
        # The header's type is the code, and what it calls the failure: said first, as an XML ``Code: Message``.
        codes = codes | {outcome.error_type}
        if read and not read[0].startswith(outcome.error_type):
            read[0] = f"{outcome.error_type}: {read[0]}"
        elif not read:
            read = [outcome.error_type]
    reasons = tuple(dict.fromkeys(r for r in (*said_first, *read) if r))
    throttle = any(_THROTTLE_SAID.search(r[:_MAX_SAID]) for r in read[:_MAX_ITEMS]) or _throttle_documented(data)
    return ErrorBody(reasons, codes, body.blames_request, scope, throttle)


_THROTTLE_SAID: Final = re.compile(
    r"\bsecondary rate limit|\brate limit (?:exceeded|reached)|\bexceeded (?:a |the |your )?(?:\w+ )?rate limit"
    r"|\b(?:are|been|being) rate[- ]?limited|^too many requests\b|\babuse detection mechanism",
    re.I,
)
"""A reason that says calls come too often: GitHub's "You have exceeded a secondary rate limit", "API rate limit
exceeded", "Too Many Requests". Not a mere mention of a rate limit (a setting one may lack permission for)."""


def _throttle_documented(data: Any) -> bool:
    """GitHub's ``documentation_url`` pointing at its rate-limit section (``…#about-secondary-rate-limits``)."""
    url = data.get("documentation_url") if isinstance(data, dict) else None
    return isinstance(url, str) and "#" in url and "rate-limit" in url.rpartition("#")[2]


def error_type_of(header: str | None) -> str:
    """An ``x-amzn-ErrorType`` header's type: ``ValidationException:http://internal.amazon.com/coral/…``
    and ``com.amazonaws.kms#AccessDeniedException`` are ``ValidationException`` and ``AccessDeniedException``;
    empty when absent or no such name."""
    name = (header or "").strip().partition(":")[0].rpartition("#")[2].strip()
    return name if _TYPE_NAME.fullmatch(name) else ""


_TYPE_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.]{0,99}")


def _read_body(outcome: Outcome, data: Any) -> ErrorBody:
    if data is None:
        return ErrorBody()
    if isinstance(data, str):
        if looks_like_html(data, outcome.content_type):
            # A framework's debug page: the exception its traceback ended with, not its frames and settings.
            debug = summarize_debug_page(data)
            if debug:
                return ErrorBody(tuple(debug))
            # An error page's markup and style sheets come first: its readable text says what happened.
            return ErrorBody(_one(readable_text(data)))
        if looks_like_xml(data, outcome.content_type):
            return _xml_error(data)
        return ErrorBody(tuple(_said(data)))
    if isinstance(data, dict) and _is_binary(outcome, data):
        return ErrorBody((f"{data['bytes']} bytes of {data['content_type']}",))
    reasons = _reasons(data)
    if not reasons:
        reasons = [json.dumps(data, ensure_ascii=False, separators=(",", ":"))]
    return ErrorBody(tuple(reasons), frozenset(_json_codes(data)))


def _one(text: str) -> tuple[str, ...]:
    return (text,) if text else ()


def _said(text: str) -> list[str]:
    """A reason as text: a Python traceback as the text before it and the exception it ended with
    (``tracebacks``), anything else stripped; [] when blank."""
    return summarize_traceback(text) or ([text.strip()] if text.strip() else [])


def _is_binary(outcome: Outcome, data: dict[str, Any]) -> bool:
    # A JSON body that merely has these keys is still the upstream's JSON, not our binary wrapper.
    return data.keys() == {"base64", "content_type", "bytes"} and not outcome.content_type.endswith("json")


# -- JSON --------------------------------------------------------------------------------------


def _reasons(data: Any, depth: int = 0) -> list[str]:
    """Reason strings found in the usual fields, each with the field it names; depth-limited since the
    body is untrusted."""
    if depth > _MAX_DEPTH:
        return []
    if isinstance(data, str):
        return _said(data)
    if isinstance(data, list):
        return [r for item in data[:_MAX_ITEMS] for r in _reasons(item, depth + 1)]
    if not isinstance(data, dict):
        return []
    own: list[str] = []  # what this object says itself: said with its field
    nested: list[str] = []  # what objects inside it say, each with its own
    for key in _TEXT_KEYS:
        if key in data:
            _take(data[key], depth, own, nested)
    for key in _LIST_KEYS:
        value = data.get(key)
        if isinstance(value, dict) and not _says_anything(value):
            nested += _by_field(value, depth)
        elif value is not None:
            _take(value, depth, own, nested)
    title = _reasons(data["title"], depth + 1) if isinstance(data.get("title"), str) else []
    if not own:
        own = next((found for key in _FALLBACK_KEYS if (found := _strings(data.get(key)))), [])
    if not own and not nested and not title and depth > 0:
        own = next((found for key in ("code", "errorCode") if (found := _strings(data.get(key)))), [])
    # Slack: the scope a method needs and those the token has, beside missing_scope; its per-field messages.
    nested += [f"{key}: {value.strip()}" for key in _SCOPE_KEYS if isinstance(value := data.get(key), str) and value]
    if isinstance(metadata := data.get("response_metadata"), dict):
        nested += _strings(metadata.get("messages"))
    where = _where(data)
    if isinstance(extensions := data.get("extensions"), dict):  # a GraphQL error's
        named, problems = graphql_extensions(extensions)
        where, nested = named or where, nested + problems
    if where:
        own = [f"{where}: {reason}" for reason in (own or title)]
        title = []
    return own + nested + title


def graphql_extensions(extensions: dict[str, Any]) -> tuple[str, list[str]]:
    """The argument a GraphQL error's ``extensions`` names (Apollo's ``invalidArgs`` or ``argumentName``,
    Hasura's ``path`` past its ``args``), and its problems as ``field: reason`` (Shopify's
    ``problems[] {path, explanation}``); ``("", [])`` when they name none."""
    where = ""
    invalid = extensions.get("invalidArgs")
    if isinstance(invalid, list) and invalid and all(isinstance(name, str) for name in invalid):
        where = ", ".join(invalid[:_MAX_ITEMS])
    elif isinstance(name := extensions.get("argumentName"), str):
        where = name.strip()
    elif isinstance(path := extensions.get("path"), str) and path.startswith("$"):
        # Hasura: $.selectionSet.insert_users.args.objects[0].email, $.variableValues.email
        where = path.rpartition(".args.")[2] if ".args." in path else path.removeprefix("$").lstrip(".")
        where = where.removeprefix("variableValues.").removeprefix("selectionSet.")
    problems: list[str] = []
    if isinstance(invalid, dict):
        problems += _by_field(invalid, 1)
    listed = extensions.get("problems")
    for problem in listed[:_MAX_ITEMS] if isinstance(listed, list) else ():
        if isinstance(problem, dict) and isinstance(why := problem.get("explanation"), str) and why.strip():
            at = problem.get("path")
            field = ".".join(str(p) for p in at if isinstance(p, str | int)) if isinstance(at, list) else ""
            problems.append(f"{field}: {why.strip()}" if field else why.strip())
    return where, problems


def _take(value: Any, depth: int, own: list[str], nested: list[str]) -> None:
    """A message-like value: its strings are the object's own words, anything deeper is nested."""
    strings = _strings(value)
    if strings:
        own += strings
    elif _field_map(value):
        nested += _by_field(value, depth)
    else:
        nested += _reasons(value, depth + 1)


def _strings(value: Any) -> list[str]:
    """A string, or a list of only strings (Rails' ``["can't be blank"]``), as reasons; else []."""
    if isinstance(value, str):
        return _said(value)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return [said for v in value[:_MAX_ITEMS] for said in _said(v)]
    return []


def _says_anything(value: dict[str, Any]) -> bool:
    """An error object, as opposed to an object of field to reasons (``{"email": ["is taken"]}``): one saying
    something in its own words. A field may be named like a message key (Shopify's ``{"title": ["can't be
    blank"]}``), and then its reasons are a list, not the object's own text."""
    return any(isinstance(value.get(key), str) for key in (*_TEXT_KEYS, *_FALLBACK_KEYS, "title"))


def _field_map(value: Any) -> bool:
    """An object of field to lists of reasons (GitLab's ``{"message": {"name": ["has already been taken"]}}``)."""
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(v, list) and v and all(isinstance(r, str) for r in v) for v in value.values())
    )


def _by_field(fields: dict[str, Any], depth: int) -> list[str]:
    out: list[str] = []
    for name, value in list(fields.items())[:_MAX_ITEMS]:
        for reason in _reasons(value, depth + 1):
            # A reason that names its field already (a Mongoose item's path) is not named twice.
            out.append(reason if reason.startswith(f"{name}:") else f"{name}: {reason}")
    return out


def _where(data: dict[str, Any]) -> str:
    """The field, parameter or location an error object names; empty when it names none."""
    for key in _WHERE_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            resource = data.get("resource")  # GitHub: {"resource": "Issue", "field": "title"}
            return f"{resource} {value.strip()}" if key == "field" and isinstance(resource, str) else value.strip()
    source = data.get("source")  # JSON:API
    if isinstance(source, dict):
        for key in ("pointer", "parameter", "header"):
            value = source.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    loc = data.get("loc")  # FastAPI, pydantic
    if isinstance(loc, list) and loc:
        return ".".join(str(part) for part in loc if isinstance(part, str | int))
    fields = data.get("fields")  # Salesforce
    if isinstance(fields, list) and fields and all(isinstance(f, str) for f in fields):
        return ", ".join(fields[:_MAX_ITEMS])
    name = data.get("name")  # RFC 7807 invalid-params: {"name", "reason"} ("name" beside "message" is a class)
    if isinstance(name, str) and name.strip() and "reason" in data and "message" not in data:
        return name.strip()
    return ""


def _json_codes(data: Any) -> set[str]:
    """The codes at the top of a JSON error and of its first items (``__type``'s ``…#ThrottlingException``
    read as ``ThrottlingException``)."""
    holders: list[Any] = [data] if isinstance(data, dict) else list(data[:_MAX_ITEMS]) if isinstance(data, list) else []
    if isinstance(data, dict):
        if isinstance(error := data.get("error"), dict):
            holders.append(error)
        for holder in list(holders):
            if isinstance(holder, dict) and isinstance(errors := holder.get("errors"), list):
                holders += errors[:_MAX_ITEMS]
    holders += [item["extensions"] for item in list(holders) if isinstance(item, dict) and "extensions" in item]
    codes: set[str] = set()
    for holder in holders:
        if isinstance(holder, dict):
            if isinstance(said := holder.get("error"), str) and _SNAKE_CODE.fullmatch(said):
                codes.add(said)  # Slack's {"ok": false, "error": "invalid_auth"}: the error is a code
            for key in _CODE_KEYS:
                value = holder.get(key)
                if isinstance(value, str) and value:
                    codes.add(value.rpartition("#")[2].partition(":")[0])
                elif isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
                    codes.add(str(value))  # an HTTP status said in the body (Telegram's ``error_code``)
    return codes


_SNAKE_CODE: Final = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z]{4,40}")


def body_retry_after(data: Any) -> float | None:
    """Seconds an error body asks to wait: Google's ``RetryInfo.retryDelay`` (``"37s"``) among
    ``error.details``, or a ``retry_after``/``retryAfter`` number (Discord, many others; Telegram's in
    ``parameters``), else a ``description`` saying "retry after N" (Telegram's); None if none."""
    if not isinstance(data, dict):
        return None
    for holder in (data, data.get("error"), data.get("parameters")):
        if not isinstance(holder, dict):
            continue
        for key in ("retry_after", "retryAfter"):
            value = holder.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
                return float(value)
        details = holder.get("details")
        for item in details[:_MAX_ITEMS] if isinstance(details, list) else ():
            delay = item.get("retryDelay") if isinstance(item, dict) else None
            if isinstance(delay, str) and (match := _DURATION.fullmatch(delay.strip())):
                return float(match.group(1))
    description = data.get("description")
    if isinstance(description, str) and (match := _RETRY_AFTER_SAID.search(description[:_MAX_SAID])):
        return float(match.group(1))
    return None


_DURATION: Final = re.compile(r"(\d{1,9}(?:\.\d{1,9})?)s")
"""A protobuf ``Duration`` in JSON: seconds with an ``s``."""
_RETRY_AFTER_SAID: Final = re.compile(r"\bretry after (\d{1,9})\b", re.I)
"""Telegram's ``"Too Many Requests: retry after 35"``, in seconds."""
_MAX_SAID: Final = 500


# -- XML ---------------------------------------------------------------------------------------


def _xml_error(text: str) -> ErrorBody:
    root = parse_xml(text)
    if root is None:
        return ErrorBody(_one(tag_text(text)))
    faults = root.find_all("Fault")
    if faults:
        return _soap_fault(faults[0])
    reasons: list[str] = []
    codes: set[str] = set()
    for error in root.find_all("Error")[:_MAX_ITEMS]:  # AWS (also in ErrorResponse, Errors), Azure Storage
        code, message = _text_of(error.child("Code")), _text_of(error.child("Message"))
        if code:
            codes.add(code)
        if code or message:
            reasons.append(f"{code}: {message}" if code and message else code or message)
    if reasons:
        return ErrorBody(tuple(reasons), frozenset(codes))
    return ErrorBody(_one(root.all_text()))


def _soap_fault(fault: Element) -> ErrorBody:
    """SOAP 1.1 (``faultcode``, ``faultstring``, ``detail``) or 1.2 (``Code/Value``, ``Reason/Text``, ``Detail``)."""
    code_element = fault.child("faultcode")
    if code_element is None and (code := fault.child("Code")) is not None:
        code_element = code.child("Value")
    code = _text_of(code_element).rpartition(":")[2]
    reasons = [_text_of(fault.child("faultstring"))]
    if (reason := fault.child("Reason")) is not None:
        reasons += [_text_of(text) for text in reason.find_all("Text")[:_MAX_ITEMS]]
    detail = fault.child("detail")  # 1.2 spells it Detail: names are matched without case
    reasons.append(detail.all_text() if detail is not None else "")
    found = tuple(dict.fromkeys(r for r in reasons if r))
    if not found:
        found = _one(fault.all_text())
    return ErrorBody(found, frozenset({code} if code else ()), blames_request=code.lower() in _SENDER_FAULTS)


def _text_of(element: Element | None) -> str:
    return element.all_text() if element is not None else ""


def _cap(text: str) -> str:
    return text if len(text) <= ERROR_TEXT_LIMIT else text[:ERROR_TEXT_LIMIT] + CUT
