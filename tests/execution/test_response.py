"""read_response shapes each content type within the byte budget; summarize_error finds the reason."""

from __future__ import annotations

import base64
import codecs
import gzip
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from mcp_gateway.execution import Outcome, read_response, said, summarize_error
from mcp_gateway.execution.response import (
    ERROR_TEXT_LIMIT,
    MAX_RETRY_AFTER,
    _decoded,
    _importable,
    parse_retry_after,
)
from mcp_gateway.primitives.secrets import SecretValue
from mcp_gateway.primitives.upstream_text import CUT, MAX_UPSTREAM_TEXT
from mcp_gateway.services.logs import known_secrets
from mcp_gateway.vocabulary.errors import UpstreamError

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Chunks(httpx2.AsyncByteStream):
    """A streamed body that records how far it was read, to prove the reader stops early."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks
        self.served = 0
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            self.served += 1
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


async def read(body: bytes, content_type: str | None, max_bytes: int = 10_000, status: int = 200) -> Outcome:
    headers = {"content-type": content_type} if content_type is not None else {}
    return await read_response(httpx2.Response(status, headers=headers, content=body), max_bytes=max_bytes)


# -- JSON ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "application/problem+json", "text/json"]
)
async def test_json_is_parsed(content_type: str) -> None:
    outcome = await read(b'{"a": [1, "\xc3\xa9"]}', content_type)
    assert outcome == Outcome(200, {"a": [1, "é"]}, False, content_type.partition(";")[0])


async def test_json_cut_by_the_cap_is_returned_as_its_text_prefix() -> None:
    body = json.dumps({"data": "a" * 100}).encode()
    outcome = await read(body, "application/json", max_bytes=20)
    assert outcome.truncated is True
    assert outcome.data == body[:20].decode()


async def test_body_of_exactly_max_bytes_is_not_truncated() -> None:
    outcome = await read(b"[1,2]", "application/json", max_bytes=5)
    assert (outcome.data, outcome.truncated) == ([1, 2], False)


async def test_json_label_on_something_else_gives_the_text() -> None:
    outcome = await read(b"<html>oops</html>", "application/json")
    assert outcome.data == "<html>oops</html>"


async def test_empty_body_is_none_whatever_the_type() -> None:
    assert (await read(b"", "application/json", status=204)).data is None
    assert (await read(b"", "text/plain")).data is None


async def test_reading_stops_at_the_cap_and_closes_the_stream() -> None:
    stream = Chunks(b"x" * 100, b"y" * 100, b"z" * 100, b"never")
    response = httpx2.Response(200, headers={"content-type": "text/plain"}, stream=stream)
    outcome = await read_response(response, max_bytes=150)
    assert outcome.data == "x" * 100 + "y" * 50
    assert outcome.truncated is True
    assert stream.served == 2
    assert stream.closed is True


# -- text ------------------------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "text/html", "application/xml", "application/atom+xml"])
async def test_text_and_xml_are_text(content_type: str) -> None:
    assert (await read(b"<a>hi</a>", content_type)).data == "<a>hi</a>"


async def test_a_charset_label_that_would_disguise_an_opened_secret_is_not_followed() -> None:
    # The upstream echoes the credential as plain bytes and labels them UTF-16: read as labelled, the
    # agent would get CJK characters that encode back to the secret, past the redactor.
    canary = "CANARY-utf16-label-51c7"
    known_secrets().add(SecretValue(canary))
    body = f"token was {canary}".encode()
    for charset in ("utf-16-le", "utf-16", "utf-32", "cp500"):
        outcome = await read(body, f"text/plain; charset={charset}")
        assert canary in outcome.data, charset  # as itself: what the call's redactor then finds
    honest = "héllo wörld".encode("utf-16")
    assert (await read(honest, "text/plain; charset=utf-16")).data == "héllo wörld"


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", None])
@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be"])
async def test_a_utf16_byte_order_mark_is_honoured_without_a_charset(content_type: str | None, codec: str) -> None:
    mark = "\ufeff" if codec == "utf-16-be" else ""  # the utf-16 codec writes its own
    body = (mark + '{"message": "name fehlt: ü"}').encode(codec)
    outcome = await read(body, content_type, status=400)
    text = '{"message": "name fehlt: ü"}'
    assert outcome.data == (text if content_type == "text/plain" else json.loads(text))
    # Cut by the cap (the mark and nine characters), what came is still read as UTF-16.
    assert (await read(body, "text/plain", max_bytes=20)).data == '{"message'


async def test_a_byte_order_mark_does_not_disguise_an_opened_secret() -> None:
    canary = "CANARY-utf16-bom-7d1e"
    known_secrets().add(SecretValue(canary))
    outcome = await read(codecs.BOM_UTF16_LE + f"token was {canary}".encode(), "text/plain")
    assert canary in outcome.data


@pytest.mark.parametrize("charset", ["idna", "punycode", "base64", "hex", "rot13", "undefined", "utf-7"])
async def test_a_charset_that_is_no_text_encoding_reads_as_utf8_and_never_fails(charset: str) -> None:
    for body in (b"plain words \xff", b"x" * 300):
        outcome = await read(body, f"text/plain; charset={charset}")
        assert isinstance(outcome.data, str)
        cut = await read(body * 10, f"application/json; charset={charset}", max_bytes=100)
        assert isinstance(cut.data, str) and cut.truncated


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        ("\u00b2", None),
        ("9" * 400, MAX_RETRY_AFTER),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),
        ("Fri, 31 Dec 9999 23:59:59 GMT", MAX_RETRY_AFTER),
        ("soon", None),
        ("", None),
    ],
)
def test_retry_after_is_read_within_a_day_or_not_at_all(value: str, seconds: float | None) -> None:
    assert parse_retry_after(value) == seconds


async def test_text_uses_the_declared_charset() -> None:
    assert (await read("café".encode("latin-1"), "text/plain; charset=iso-8859-1")).data == "café"
    assert (await read("café".encode(), "text/plain; charset=no-such-charset")).data == "café"


async def test_an_unlabelled_body_that_is_no_utf8_reads_as_windows_1252() -> None:
    said = "The field “name” isn’t valid — try again"
    outcome = await read(
        json.dumps({"message": said}, ensure_ascii=False).encode("cp1252"), "application/json", status=400
    )
    assert outcome.data == {"message": said}
    assert (await read("Bad request: “name” café".encode("cp1252"), "text/plain", status=400)).data == (
        "Bad request: “name” café"
    )
    assert (await read("ok café ✓".encode(), "text/plain")).data == "ok café ✓"  # UTF-8 stays UTF-8


async def test_an_invalid_byte_inside_an_opened_secret_keeps_an_unlabelled_body_utf8() -> None:
    canary = "CANARY-cp1252-fallback-93b1"
    known_secrets().add(SecretValue(canary))
    outcome = await read(b"token was " + canary[:9].encode() + b"\xff" + canary[9:].encode(), "text/plain")
    assert "\ufffd" in outcome.data  # the redactor looks through it; a Windows-1252 "ÿ" would split the secret


@pytest.mark.parametrize(
    "head",
    ['<meta charset="windows-1252">', "<meta http-equiv='Content-Type' content='text/html; charset=windows-1252'>"],
)
async def test_an_html_page_is_read_in_the_charset_its_meta_names(head: str) -> None:
    page = f"<html><head>{head}<title>Bad</title></head><body>“name” isn’t valid</body></html>"
    assert "“name” isn’t valid" in (await read(page.encode("cp1252"), "text/html", status=400)).data
    shift_jis = '<meta charset="Shift_JIS"><p>パラメータが不正です</p>'
    assert "パラメータが不正です" in (await read(shift_jis.encode("shift_jis"), "text/html", status=400)).data
    labelled = f"<html><head>{head}</head><body>café</body></html>"  # the header's label outranks the page's
    assert "café" in (await read(labelled.encode(), "text/html; charset=utf-8", status=400)).data


async def test_a_character_cut_in_half_by_the_cap_is_left_out() -> None:
    outcome = await read("aé".encode(), "text/plain", max_bytes=2)  # "é" is two bytes
    assert (outcome.data, outcome.truncated) == ("a", True)


# -- server-sent events ----------------------------------------------------------------------


async def test_sse_collects_data_payloads_json_parsed_when_possible() -> None:
    body = (
        ": a comment\r\n"
        'event: progress\r\nid: 1\r\ndata: {"n": 1}\r\n\r\n'
        "data: first line\ndata: second line\n\n"
        "retry: 10\n\n"  # no data: dispatches nothing
        "data:no-space\u2028\n\n"  # U+2028 is not a line break in SSE
        "data: [1, 2]"  # the last event without its closing blank line
    )
    outcome = await read(body.encode(), "text/event-stream")
    assert outcome.data == [{"n": 1}, "first line\nsecond line", "no-space\u2028", [1, 2]]


async def test_truncated_sse_drops_the_partial_last_event() -> None:
    body = b'data: {"n": 1}\n\ndata: {"n": 2, "long": "' + b"x" * 100 + b'"}\n\n'
    outcome = await read(body, "text/event-stream", max_bytes=40)
    assert (outcome.data, outcome.truncated) == ([{"n": 1}], True)


# -- binary and unlabeled --------------------------------------------------------------------


async def test_binary_is_capped_base64() -> None:
    payload = bytes(range(256)) * 4
    outcome = await read(payload, "image/png", max_bytes=100)
    assert outcome.truncated is True
    assert outcome.data == {
        "base64": base64.b64encode(payload[:100]).decode(),
        "content_type": "image/png",
        "bytes": 100,
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"ok": true}', {"ok": True}),
        (b"plain words", "plain words"),
        (
            b"\xff\xfe\x00",
            {
                "base64": base64.b64encode(b"\xff\xfe\x00").decode(),
                "content_type": "application/octet-stream",
                "bytes": 3,
            },
        ),
    ],
)
async def test_unlabeled_bodies_are_sniffed(body: bytes, expected: Any) -> None:
    assert (await read(body, None)).data == expected


# -- error summaries -------------------------------------------------------------------------


def failed(data: Any, content_type: str = "application/json", status: int = 422) -> Outcome:
    return Outcome(status, data, False, content_type)


@pytest.mark.parametrize(
    ("data", "summary"),
    [
        # GitHub: message plus errors[] items that carry only codes
        (
            {
                "message": "Validation Failed",
                "errors": [{"resource": "Issue", "field": "title", "code": "missing_field"}],
                "documentation_url": "https://docs.github.com/rest",
            },
            "Validation Failed; Issue title: missing_field",
        ),
        # Stripe: the reason nested under error
        (
            {"error": {"type": "card_error", "code": "card_declined", "message": "Your card was declined."}},
            "Your card was declined.",
        ),
        # Google: nested message repeated in errors[] is said once
        (
            {"error": {"code": 403, "message": "Forbidden", "errors": [{"message": "Forbidden", "reason": "x"}]}},
            "Forbidden",
        ),
        # OAuth 2 (RFC 6749 5.2)
        (
            {"error": "invalid_grant", "error_description": "refresh token expired"},
            "invalid_grant; refresh token expired",
        ),
        # RFC 9457 problem details
        ({"type": "about:blank", "title": "Not Found", "detail": "no user 42"}, "no user 42; Not Found"),
        # FastAPI validation errors
        (
            {"detail": [{"loc": ["body", "name"], "msg": "field required", "type": "missing"}]},
            "body.name: field required",
        ),
        # a bare list of errors
        ([{"message": "a"}, {"message": "b"}], "a; b"),
        # nothing recognizable: compact JSON
        ({"ok": False, "code": 7}, '{"ok":false,"code":7}'),
    ],
)
def test_json_errors_are_summarized_by_their_reason_fields(data: Any, summary: str) -> None:
    assert summarize_error(failed(data)) == summary


def test_text_errors_are_verbatim_and_capped() -> None:
    assert summarize_error(failed("  rate limited, retry in 5 s\n", "text/plain", 429)) == "rate limited, retry in 5 s"
    long = summarize_error(failed("x" * 10_000, "text/plain", 502))
    assert long == "x" * ERROR_TEXT_LIMIT + CUT
    # What a message quotes is cut shorter, and says so the same way.
    assert said(long).text == "x" * (MAX_UPSTREAM_TEXT - len(CUT)) + CUT


CLOUDFLARE = (
    "<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>Attention Required! | Cloudflare</title>"
    "<style>" + "body{margin:0;padding:0;font-family:system-ui}.cf-error-details{color:#333}" * 60 + "</style>"
    "<script>window._cf_chl_opt={cvId: '3'};</script></head><body><div class=cf-wrapper><h1>Sorry, you have "
    "been blocked</h1><p>You are unable to access <b>example.com</b></p><!-- ray 8f1 --></div></body></html>"
)


@pytest.mark.parametrize("content_type", ["text/html", "text/plain", ""])
def test_an_html_error_page_is_summarized_as_its_readable_text(content_type: str) -> None:
    summary = summarize_error(failed(CLOUDFLARE, content_type, 403))
    assert summary == (
        "Attention Required! | Cloudflare: Sorry, you have been blocked You are unable to access example.com"
    )
    nginx = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
    assert summarize_error(failed(nginx + "</center><hr><center>nginx</center></body></html>", "text/html", 502)) == (
        "502 Bad Gateway nginx"
    )


def test_unrecognizable_json_is_capped_too() -> None:
    summary = summarize_error(failed({"blob": "y" * 10_000}))
    assert len(summary) == ERROR_TEXT_LIMIT + len(CUT) and summary.endswith(CUT)


def test_binary_and_empty_errors() -> None:
    binary = {"base64": "AAE=", "content_type": "image/png", "bytes": 2}
    assert summarize_error(failed(binary, "image/png", 500)) == "2 bytes of image/png"
    assert summarize_error(failed(None, "", 500)) == ""
    # an upstream's JSON that happens to have those keys is still treated as JSON
    assert summarize_error(failed(binary)).startswith('{"base64"')


# -- content encodings ----------------------------------------------------------------------


@pytest.mark.parametrize(("coding", "status"), [("br", 200), ("zstd", 201), ("gzip, br", 200), ("x-gzip", 502)])
async def test_a_body_in_an_encoding_left_undecoded_is_withheld(coding: str, status: int) -> None:
    """Bytes httpx2 has no decoder for hide a secret from the redactor in every form: none reach the agent."""
    if "br" in coding and any(_importable(name) for name in ("brotli", "brotlicffi")):
        pytest.skip("br is decoded where a brotli module is installed")
    if coding == "zstd" and "zstd" in _decoded():
        pytest.skip("zstd is decoded here")
    stream = Chunks(b"\x8b\x02\x80compressed-canary-bytes\x03")
    response = httpx2.Response(
        status, headers={"content-type": "application/octet-stream", "content-encoding": coding}, stream=stream
    )
    with pytest.raises(UpstreamError) as raised:
        await read_response(response, max_bytes=10_000)
    error = raised.value
    assert error.reason == "upstream_error" and error.upstream_status == status
    assert coding.rpartition(" ")[2] in str(error) and "canary" not in str(error)
    assert ("may have taken effect" in str(error)) == (status < 400)
    assert stream.served == 0 and stream.closed


async def test_gzip_and_identity_encodings_are_read_as_usual() -> None:
    body = gzip.compress(b'{"a": 1}')
    for headers in ({"content-encoding": "gzip"}, {"content-encoding": "identity"}):
        content = body if headers["content-encoding"] == "gzip" else b'{"a": 1}'
        response = httpx2.Response(200, headers={"content-type": "application/json", **headers}, content=content)
        assert (await read_response(response, max_bytes=10_000)).data == {"a": 1}


async def test_a_streamed_gzip_body_is_capped_and_only_a_whole_one_must_reach_its_end() -> None:
    packed = gzip.compress(b"x" * 50_000)
    headers = {"content-type": "text/plain", "content-encoding": "gzip"}
    whole = await read_response(httpx2.Response(200, headers=headers, stream=Chunks(packed)), max_bytes=100_000)
    assert (whole.data, whole.truncated) == ("x" * 50_000, False)
    # Cut, but past the cap: what is handed on is the cap's cut, as for any long body.
    capped = await read_response(httpx2.Response(200, headers=headers, stream=Chunks(packed[:-30])), max_bytes=1000)
    assert (capped.data, capped.truncated) == ("x" * 1000, True)
    with pytest.raises(httpx2.DecodingError):
        await read_response(httpx2.Response(200, headers=headers, stream=Chunks(packed[:-30])), max_bytes=100_000)


@pytest.mark.parametrize("status", [400, 500])
async def test_an_error_whose_compressed_body_is_broken_keeps_its_status(status: int) -> None:
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    for body in (b'{"message": "not gzip at all"}', gzip.compress(b'{"message": "cut"}' * 40)[:30]):
        outcome = await read_response(httpx2.Response(status, headers=headers, stream=Chunks(body)), max_bytes=1000)
        assert (outcome.http_status, outcome.data, outcome.undecodable) == (status, None, "gzip")


@pytest.mark.parametrize("status", [204, 304])
async def test_an_answer_without_a_body_is_not_read_whatever_follows_its_headers(status: int) -> None:
    stream = Chunks(b'{"smuggled": 1}')
    headers = {"content-type": "application/json", "content-encoding": "br"}
    outcome = await read_response(httpx2.Response(status, headers=headers, stream=stream), max_bytes=1000)
    assert (outcome.http_status, outcome.data, outcome.truncated) == (status, None, False)
    assert stream.served == 0 and stream.closed
