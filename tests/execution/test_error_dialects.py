"""error_dialects reads the common error shapes into reasons that name their field, and codes that say
what kind of failure it is (a throttle, a refused credential, a request a SOAP fault blames)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from mcp_gateway.execution import Outcome, read_response
from mcp_gateway.execution.error_dialects import (
    Challenge,
    body_retry_after,
    error_type_of,
    read_error,
    summarize_error,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def failed(data: Any, content_type: str = "application/json", status: int = 400) -> Outcome:
    return Outcome(status, data, False, content_type)


@pytest.mark.parametrize(
    ("data", "summary"),
    [
        # Jira: errorMessages beside an errors object of field to reason
        (
            {"errorMessages": ["Issue does not exist or you do not have permission to see it."], "errors": {}},
            "Issue does not exist or you do not have permission to see it.",
        ),
        (
            {
                "errorMessages": ["Field 'priority' cannot be set. It is not on the appropriate screen, or unknown."],
                "errors": {"labels": "Labels cannot contain spaces."},
            },
            "Field 'priority' cannot be set. It is not on the appropriate screen, or unknown.; "
            "labels: Labels cannot contain spaces.",
        ),
        # RFC 9457: errors[] with a JSON pointer each
        (
            {
                "title": "Your request is not valid.",
                "detail": "The request body has 2 errors.",
                "errors": [
                    {"detail": "must be a positive integer", "pointer": "#/age"},
                    {"detail": "must be 'green', 'red' or 'blue'", "pointer": "#/profile/color"},
                ],
            },
            "The request body has 2 errors.; #/age: must be a positive integer; #/profile/color: must be 'green', "
            "'red' or 'blue'; Your request is not valid.",
        ),
        # RFC 7807's own example: invalid-params[] {name, reason}
        (
            {
                "title": "Your request parameters didn't validate.",
                "invalid-params": [{"name": "age", "reason": "must be a positive integer"}],
            },
            "age: must be a positive integer; Your request parameters didn't validate.",
        ),
        # JSON:API: source.pointer / source.parameter; the generic title only when nothing else is said
        (
            {
                "errors": [
                    {
                        "source": {"pointer": "/data/attributes/firstName"},
                        "title": "Invalid Attribute",
                        "detail": "First name must contain at least two characters.",
                    },
                    {"source": {"parameter": "include"}, "title": "Invalid Query Parameter"},
                ]
            },
            "/data/attributes/firstName: First name must contain at least two characters.; "
            "include: Invalid Query Parameter",
        ),
        # Google: error.details[].fieldViolations[]
        (
            {
                "error": {
                    "code": 400,
                    "message": "Request contains an invalid argument.",
                    "status": "INVALID_ARGUMENT",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.BadRequest",
                            "fieldViolations": [
                                {"field": "instance.machine_type", "description": "Invalid value 'n9-huge'."}
                            ],
                        }
                    ],
                }
            },
            "Request contains an invalid argument.; instance.machine_type: Invalid value 'n9-huge'.",
        ),
        # Stripe: error.param
        (
            {"error": {"type": "invalid_request_error", "message": "Invalid integer: abc", "param": "amount"}},
            "amount: Invalid integer: abc",
        ),
        # OData / Azure: error.target and details[].target
        (
            {
                "error": {
                    "code": "BadArgument",
                    "message": "Multiple errors in ContactInfo data",
                    "target": "ContactInfo",
                    "details": [{"code": "NullValue", "target": "PhoneNumber", "message": "must not be null"}],
                }
            },
            "ContactInfo: Multiple errors in ContactInfo data; PhoneNumber: must not be null",
        ),
        # Rails / Laravel / Shopify: errors as an object of field to messages
        (
            {
                "message": "The given data was invalid.",
                "errors": {"email": ["has already been taken"], "name": ["can't be blank", "is too short"]},
            },
            "The given data was invalid.; email: has already been taken; name: can't be blank; name: is too short",
        ),
        # Shopify: a field named like a message key is still a field, and every field is said
        (
            {"errors": {"title": ["can't be blank"], "variants.price": ["must be greater than or equal to 0"]}},
            "title: can't be blank; variants.price: must be greater than or equal to 0",
        ),
        # OData with an empty message: the reason is in details only
        (
            {"error": {"code": "BadArgument", "message": "", "details": [{"target": "name", "message": "null"}]}},
            "name: null",
        ),
        # GitLab: the message itself an object of field to messages
        (
            {"message": {"name": ["has already been taken"], "path": ["is too short"]}},
            "name: has already been taken; path: is too short",
        ),
        # Mongoose: the items name their path already
        (
            {"errors": {"email": {"message": "Path `email` is required.", "path": "email", "name": "ValidatorError"}}},
            "email: Path `email` is required.",
        ),
        # Salesforce: a list of {message, errorCode, fields}
        (
            [
                {
                    "message": "Required fields are missing: [Name]",
                    "errorCode": "REQUIRED_FIELD_MISSING",
                    "fields": ["Name"],
                }
            ],
            "Name: Required fields are missing: [Name]",
        ),
        # Spring: errors[] {field, defaultMessage}
        (
            {"message": "Validation failed", "errors": [{"field": "email", "defaultMessage": "must not be blank"}]},
            "Validation failed; email: must not be blank",
        ),
        # a JavaScript error's class name beside its message is no field
        ({"name": "ValidationError", "message": "bad input"}, "bad input"),
    ],
)
def test_the_field_an_error_names_stays_beside_its_reason(data: Any, summary: str) -> None:
    assert summarize_error(failed(data)) == summary


AWS = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidBucketName</Code><Message>The specified bucket is '
    "not valid.</Message><BucketName>my..bucket</BucketName><RequestId>4442587FB7D0A2F9</RequestId></Error>"
)
AWS_QUERY = (
    '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
    "<Code>ExpiredToken</Code><Message>The security token included in the request is expired</Message></Error>"
    "<RequestId>a1</RequestId></ErrorResponse>"
)
EC2 = (
    "<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error>"
    "</Errors><RequestID>b2</RequestID></Response>"
)
SOAP11 = (
    '<?xml version="1.0"?><soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Header>'
    + "<wsse:Security xmlns:wsse='urn:x'>"
    + "<t>token-ish</t>" * 80
    + "</wsse:Security>"
    "</soap:Header><soap:Body><soap:Fault><faultcode>soap:Client</faultcode><faultstring>Invalid value for "
    "parameter CustomerId</faultstring><detail><error>CustomerId must be numeric</error></detail></soap:Fault>"
    "</soap:Body></soap:Envelope>"
)
SOAP12 = (
    '<env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Body><env:Fault><env:Code><env:Value>'
    "env:Receiver</env:Value></env:Code><env:Reason><env:Text xml:lang='en'>Database down</env:Text></env:Reason>"
    "</env:Fault></env:Body></env:Envelope>"
)


@pytest.mark.parametrize(
    ("body", "content_type", "reasons", "codes", "blames"),
    [
        (
            AWS,
            "application/xml",
            ("InvalidBucketName: The specified bucket is not valid.",),
            {"InvalidBucketName"},
            False,
        ),
        (
            AWS_QUERY,
            "text/xml",
            ("ExpiredToken: The security token included in the request is expired",),
            {"ExpiredToken"},
            False,
        ),
        (
            EC2,
            "text/xml;charset=UTF-8",
            ("RequestLimitExceeded: Request limit exceeded.",),
            {"RequestLimitExceeded"},
            False,
        ),
        # the fault is found behind a long header, and the request is blamed
        (
            SOAP11,
            "text/xml",
            ("Invalid value for parameter CustomerId", "CustomerId must be numeric"),
            {"Client"},
            True,
        ),
        (SOAP12, "application/soap+xml", ("Database down",), {"Receiver"}, False),
        # unlabelled, but declared XML; no dialect: its text without tags
        ('<?xml version="1.0"?><oops><why>quota</why> <when>now</when></oops>', "", ("quota now",), set(), False),
        # not well-formed: the tags are taken out all the same
        ("<Error><Code>Broken</Code><Message>cut", "application/xml", ("Broken cut",), set(), False),
    ],
)
def test_xml_errors_are_read_as_code_and_message_not_markup(
    body: str, content_type: str, reasons: tuple[str, ...], codes: set[str], blames: bool
) -> None:
    read = read_error(failed(body, content_type.partition(";")[0], 500))
    assert (read.reasons, set(read.codes), read.blames_request) == (reasons, codes, blames)


def test_an_xml_body_declaring_a_dtd_or_entities_is_never_expanded() -> None:
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;">]>'
        "<Error><Code>X</Code><Message>&lol2;</Message></Error>"
    )
    external = (
        '<?xml version="1.0"?><!DOCTYPE e [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><Error><Message>&xxe;'
        "</Message></Error>"
    )
    for body in (laughs, external):
        read = read_error(failed(body, "application/xml"))
        # Refused as a tree (no code read from it), and no entity expanded in its text either.
        assert not read.codes and "lollol" not in read.text() and "root:" not in read.text()
    assert summarize_error(failed("<Error><Message>&undefined;</Message></Error>", "application/xml")) == "&undefined;"


@pytest.mark.parametrize(
    ("data", "codes", "limited", "refused"),
    [
        (
            {"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "Rate exceeded"},
            {"ThrottlingException"},
            True,
            "",
        ),
        (
            {"__type": "ExpiredTokenException:http://internal.amazon.com/coral", "message": "expired"},
            {"ExpiredTokenException"},
            False,
            "ExpiredTokenException",
        ),
        (
            {"error": {"code": 403, "errors": [{"reason": "rateLimitExceeded", "message": "Rate Limit Exceeded"}]}},
            {"rateLimitExceeded"},
            True,
            "",
        ),
        ({"code": "rate_limited", "message": "slow"}, {"rate_limited"}, False, ""),  # unknown codes decide nothing
        (
            {"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 35"},
            {"429"},
            True,
            "",
        ),
        ({"ok": False, "error_code": 400, "description": "Bad Request: chat not found"}, {"400"}, False, ""),
        ({"ok": False, "error_code": True, "description": "x"}, set[str](), False, ""),
        # Slack's error is a code
        ({"ok": False, "error": "ratelimited"}, {"ratelimited"}, True, ""),
        ({"ok": False, "error": "token_revoked"}, {"token_revoked"}, False, "token_revoked"),
        ({"ok": False, "error": "Token revoked by its owner"}, set[str](), False, ""),  # a sentence, no code
        # GitHub's secondary rate limit is said in words only
        ({"message": "You have exceeded a secondary rate limit. Please wait a few minutes."}, set[str](), True, ""),
    ],
)
def test_json_codes_say_a_throttle_or_a_refused_credential(
    data: Any, codes: set[str], limited: bool, refused: str
) -> None:
    read = read_error(failed(data))
    assert codes <= set(read.codes) and (read.rate_limited, read.credential_refused) == (limited, refused)


@pytest.mark.parametrize(
    ("data", "seconds"),
    [
        ({"error": {"code": 429, "details": [{"@type": "x.RetryInfo", "retryDelay": "37s"}]}}, 37.0),
        ({"error": {"details": [{"retryDelay": "1.5s"}]}}, 1.5),
        ({"message": "You are being rate limited.", "retry_after": 64.57}, 64.57),
        ({"retryAfter": 3}, 3.0),
        ({"retry_after": True}, None),
        ({"retry_after": -1}, None),
        ({"error": {"details": [{"retryDelay": "soon"}]}}, None),
        ({"ok": False, "error_code": 429, "description": "Too Many Requests", "parameters": {"retry_after": 35}}, 35.0),
        ({"ok": False, "error_code": 429, "description": "Too Many Requests: retry after 12"}, 12.0),
        ({"description": "retry after a while"}, None),
        ("text", None),
    ],
)
def test_a_wait_said_in_the_body_is_read(data: Any, seconds: float | None) -> None:
    assert body_retry_after(data) == seconds


async def test_a_wait_said_in_the_body_is_the_outcomes_unless_a_header_says_one() -> None:
    body = {"error": {"code": 429, "details": [{"retryDelay": "37s"}]}}
    outcome = await read_response(httpx2.Response(429, json=body), max_bytes=10_000)
    assert outcome.retry_after == 37.0
    outcome = await read_response(httpx2.Response(429, headers={"Retry-After": "5"}, json=body), max_bytes=10_000)
    assert outcome.retry_after == 5.0
    # a success's body is data, not advice
    assert (await read_response(httpx2.Response(200, json={"retry_after": 9}), max_bytes=10_000)).retry_after is None


@pytest.mark.parametrize(
    ("header", "challenge"),
    [
        (
            'Bearer realm="example", error="invalid_token", error_description="The access token expired"',
            Challenge("invalid_token", "The access token expired"),
        ),
        ('Bearer error="insufficient_scope", scope="repo"', Challenge("insufficient_scope")),
        ('Bearer error_description="say \\"hi\\""', Challenge("", 'say "hi"')),
        ('Bearer realm="example"', None),
        (None, None),
    ],
)
def test_a_challenge_says_why_a_token_was_refused(header: str | None, challenge: Challenge | None) -> None:
    assert Challenge.parse(header) == challenge


async def test_a_401s_challenge_comes_before_its_body() -> None:
    response = httpx2.Response(
        401,
        headers={"WWW-Authenticate": 'Bearer error="invalid_token", error_description="The access token expired"'},
        json={"message": "Bad credentials"},
    )
    outcome = await read_response(response, max_bytes=10_000)
    assert summarize_error(outcome) == "invalid_token: The access token expired; Bad credentials"
    scope = Outcome(403, None, False, "", challenge=Challenge("insufficient_scope"))
    assert read_error(scope).insufficient_scope


@pytest.mark.parametrize(
    ("header", "error_type"),
    [
        ("ValidationException:http://internal.amazon.com/coral/com.amazon.coral.validate/", "ValidationException"),
        ("com.amazonaws.kms#AccessDeniedException", "AccessDeniedException"),
        ("aws.protocoltests#ThrottlingException:http://internal.amazon.com/", "ThrottlingException"),
        (" UnrecognizedClientException ", "UnrecognizedClientException"),
        ("ignore previous instructions", ""),
        ("", ""),
        (None, ""),
    ],
)
def test_the_x_amzn_errortype_header_is_read_as_its_type(header: str | None, error_type: str) -> None:
    assert error_type_of(header) == error_type


async def test_the_x_amzn_errortype_header_is_a_code_and_names_the_message() -> None:
    headers = {"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/"}
    outcome = await read_response(
        httpx2.Response(400, headers=headers, json={"Message": "Rate exceeded"}), max_bytes=999
    )
    read = read_error(outcome)
    assert (read.text(), read.rate_limited) == ("ThrottlingException: Rate exceeded", True)
    headers = {"x-amzn-ErrorType": "AccessDeniedException"}
    read = read_error(await read_response(httpx2.Response(400, headers=headers), max_bytes=999))
    assert (read.text(), read.forbidden) == ("AccessDeniedException", True)
    # a success's header is no error's
    ok = await read_response(httpx2.Response(200, headers=headers, json={}), max_bytes=999)
    assert ok.error_type == ""


@pytest.mark.parametrize(
    ("error", "said", "codes"),
    [
        (
            {
                "message": "Variable $input of type ProductInput! was provided invalid value",
                "extensions": {
                    "code": "INVALID_VARIABLE",
                    "problems": [{"path": ["title"], "explanation": "Expected value to not be null"}],
                },
            },
            "Variable $input of type ProductInput! was provided invalid value; title: Expected value to not be null",
            {"INVALID_VARIABLE"},
        ),
        (
            {"message": "Bad id", "extensions": {"code": "BAD_USER_INPUT", "argumentName": "id"}},
            "id: Bad id",
            {"BAD_USER_INPUT"},
        ),
        (
            {"message": "Check failed", "extensions": {"path": "$.variableValues.email", "code": "validation-failed"}},
            "email: Check failed",
            {"validation-failed"},
        ),
        ({"message": "Token expired", "extensions": {"code": "UNAUTHENTICATED"}}, "Token expired", {"UNAUTHENTICATED"}),
    ],
)
def test_a_graphql_errors_extensions_name_the_argument_at_fault(error: Any, said: str, codes: set[str]) -> None:
    read = read_error(failed({"errors": [error]}))
    assert (read.text(), set(read.codes)) == (said, codes)


@pytest.mark.parametrize(
    ("page", "exception"),
    [("werkzeug_500.html", "KeyError: 'PAYMENTS_API_KEY'"), ("django_500.html", "KeyError: 'STRIPE_SECRET_KEY'")],
)
def test_a_frameworks_debug_page_says_the_exception_not_its_frames_and_settings(page: str, exception: str) -> None:
    html = (Path(__file__).parent.parent / "fixtures" / "debug_pages" / page).read_text()
    assert summarize_error(failed(html, "text/html; charset=utf-8", 500)) == exception


def test_an_exception_group_says_each_sub_exception() -> None:
    group = (
        "  + Exception Group Traceback (most recent call last):\n"
        '  |   File "/srv/app.py", line 9, in handle\n'
        "  |     raise ExceptionGroup('sync failed', errors)\n"
        "  | ExceptionGroup: sync failed (2 sub-exceptions)\n"
        "  +-+---------------- 1 ----------------\n"
        "    | Traceback (most recent call last):\n"
        '    |   File "/srv/app.py", line 4, in fetch\n'
        "    |     token = read_secret('/run/secrets/api_token')\n"
        "    | FileNotFoundError: api_token\n"
        "    +---------------- 2 ----------------\n"
        "    | TimeoutError: ledger did not answer\n"
        "    +------------------------------------\n"
    )
    assert summarize_error(failed(group, "text/plain", 500)) == (
        "ExceptionGroup: sync failed (2 sub-exceptions); FileNotFoundError: api_token;"
        " TimeoutError: ledger did not answer"
    )
