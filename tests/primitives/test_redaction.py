from __future__ import annotations

import base64
import copy
import html
import json
import quopri
import re
import unicodedata
from urllib.parse import quote

import pytest

from mcp_gateway.primitives import redaction, string_search
from mcp_gateway.primitives.redaction import Redactor
from mcp_gateway.primitives.secrets import SecretValue

CANARY = "canary/7f3a 9c1e+never-show-me"


@pytest.fixture(autouse=True, params=["scan", "automaton"])
def search(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with each search: the scan a redactor of few secrets uses (and every redactor
    where pyahocorasick is not installed), and the automata of one that knows many."""
    if request.param == "automaton":
        monkeypatch.setattr(string_search, "AUTOMATON_MIN_STRINGS", 1)
        monkeypatch.setattr(redaction, "SHARED_MAX_FORMS", 1)
        monkeypatch.setattr(redaction, "_COMPILED", {})
    return request.param


def test_empty_redactor_is_a_no_op() -> None:
    redactor = Redactor()
    data = {"a": [CANARY]}
    assert not redactor
    assert redactor.redact(data) is data
    assert redactor.redact_text(CANARY) == CANARY


def test_echoed_secrets_are_redacted_in_nested_json() -> None:
    redactor = Redactor()
    redactor.add(SecretValue(CANARY))
    redactor.add(SecretValue({"username": "alice", "password": "pw-" + CANARY}))
    basic = base64.b64encode(f"alice:pw-{CANARY}".encode()).decode()
    body = {
        "echo": {"headers": {"authorization": f"Bearer {CANARY}", "x-basic": f"Basic {basic}"}},
        "url": f"https://api.test/x?key={quote(CANARY, safe='')}&q=1",
        "lower": f"k={quote(CANARY, safe='').lower()}",
        "list": [1, None, True, {"deep": [f"…{CANARY}…"]}],
        CANARY: "as a key",
        "user": "alice",
    }
    original = copy.deepcopy(body)
    out = redactor.redact(body)
    assert body == original  # the input is not mutated
    text = json.dumps(out)
    assert "canary" not in text and "7f3a" not in text and basic not in text
    assert out["echo"]["headers"] == {"authorization": "[redacted]", "x-basic": "[redacted]"}
    assert out["url"] == "https://api.test/x?key=[redacted]&q=1"
    assert out["list"][:3] == [1, None, True]
    assert out["list"][3] == {"deep": ["…[redacted]…"]}
    assert out["[redacted]"] == "as a key"
    assert out["user"] == "alice"  # a username alone is not a secret


def test_raw_json_text_with_escapes() -> None:
    secret = 'tok"en\\with-quotes'
    redactor = Redactor()
    redactor.add(SecretValue(secret))
    raw = json.dumps({"echo": secret})
    assert redactor.redact_text(raw) == '{"echo": "[redacted]"}'


def test_longest_form_first() -> None:
    redactor = Redactor()
    redactor.add(SecretValue("abcd"))
    redactor.add(SecretValue("abcdefgh"))
    assert redactor.redact_text("x abcdefgh y abcd z") == "x [redacted] y [redacted] z"


def test_repr_shows_counts_only() -> None:
    redactor = Redactor()
    redactor.add(SecretValue(CANARY))
    assert CANARY not in repr(redactor)


def test_secrets_with_escaped_and_non_ascii_characters_are_found_in_json_data() -> None:
    # The check serializes the data once (as the result cleaning does) and looks for each form's
    # JSON escape in it: escapes, non-ASCII letters and control characters must all be found.
    secrets = ['tok"en\\with-quotes', "pässwörd-日本-1", "tab\there\nnewline\u2028sep"]
    redactor = Redactor()
    for secret in secrets:
        redactor.add(SecretValue(secret))
    for secret in secrets:
        out, text = redactor.redact_json({"echo": [f"<{secret}>"], secret: 1})
        assert out == {"echo": ["<[redacted]>"], "[redacted]": 1} and text is None


def test_clean_data_comes_back_as_it_was_with_its_json_text() -> None:
    redactor = Redactor()
    redactor.add(SecretValue(CANARY))
    data = {"name": "wïdget", "tags": ["a", "b"], "n": 1}
    out, text = redactor.redact_json(data)
    assert out is data and text == json.dumps(data, ensure_ascii=False)
    assert Redactor().redact_json(data) == (data, None)  # nothing to look for: not serialized either


def test_the_hex_of_a_secret_is_redacted_in_lower_and_upper_case() -> None:
    secret = "pässwörd-" + CANARY  # non-ASCII: hex is of the UTF-8 bytes
    lower = secret.encode().hex()
    redactor = Redactor()
    redactor.add(SecretValue(secret))
    for form in (lower, lower.upper()):
        assert redactor.redact_text(f"got 0x{form}!") == "got 0x[redacted]!"
        out, _ = redactor.redact_json({"dump": [f"bytes={form}"], form: 1})
        assert out == {"dump": ["bytes=[redacted]"], "[redacted]": 1}
        assert redactor.redact_bytes(f"<{form}>".encode()) == b"<[redacted]>"
    # A dump cut by a size cap in the middle of the hex still loses its start.
    assert redactor.redact_text("dump: " + lower[:20], truncated=True) == "dump: [redacted]"


def test_the_hex_of_a_basic_pair_and_of_each_field_is_redacted() -> None:
    redactor = Redactor()
    redactor.add(SecretValue({"username": "alice", "password": "pw-" + CANARY}))
    pair = f"alice:pw-{CANARY}".encode().hex()
    password = f"pw-{CANARY}".encode().hex().upper()
    assert redactor.redact_text(f"{pair} {password}") == "[redacted] [redacted]"
    assert redactor.redact_text(b"alice".hex()) == b"alice".hex()  # a username alone is not a secret


def test_a_secret_inside_a_longer_base64_text_is_redacted_at_every_offset() -> None:
    # An upstream that base64-encodes what it received (a header dump, a JSON echo) puts the secret at
    # any byte offset: its characters then differ from the secret's own base64 at the edges.
    redactor = Redactor()
    redactor.add(SecretValue(CANARY))
    for prefix in (b"", b"x", b"xy", b'{"authorization": "Bearer '):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            blob = encode(prefix + CANARY.encode() + b'", "user": "me"}').decode()
            out = redactor.redact_text(f"debug={blob}")
            assert "[redacted]" in out
            assert not any(b"7f3a" in text or b"show" in text for text in _decodings(out.removeprefix("debug=")))
    # Text that is no encoding of the secret is left as it was.
    other = base64.b64encode(b"x" + b"canary/7f3a 9c1e+not-the-secret").decode()
    assert redactor.redact_text(other) == other


def test_what_the_request_carried_is_redacted_when_the_upstream_encodes_the_request() -> None:
    # An API key sent URL-escaped in a query, and a pair sent as a Basic header, reach an upstream in
    # those spellings; one that base64s or hexes what it received (an opaque cursor, a debug dump)
    # encodes them, not the value itself.
    redactor = Redactor()
    redactor.add(SecretValue(MARKED))
    redactor.add(SecretValue({"username": "alice", "password": "pw-" + CANARY}))
    basic = base64.b64encode(f"alice:pw-{CANARY}".encode()).decode()
    escaped = quote(MARKED, safe="")
    lower_escapes = re.sub("%[0-9A-F]{2}", lambda match: match[0].lower(), escaped)
    for carried in (escaped, lower_escapes, f"Authorization: Basic {basic}"):
        for prefix in (b"", b"x", b"GET /b64?key="):
            request = prefix + carried.encode() + b" HTTP/1.1"
            for encoded in (base64.b64encode(request).decode(), request.hex(), request.hex().upper()):
                out = redactor.redact_text(f"cursor={encoded}")
                assert "[redacted]" in out, (carried, prefix)
                assert "7f3a" not in redactor.redact_text(out)
    assert not any(b"%2F" in text or b"S3cr" in text for text in _decodings(out.removeprefix("cursor=")))


def _decodings(text: str) -> list[bytes]:
    """What each piece of ``text`` around a ``[redacted]`` decodes to from base64, at each alignment."""
    out = []
    for piece in text.split("[redacted]"):
        for start in range(4):
            chunk = piece[start:][: (len(piece) - start) // 4 * 4]
            out.append(base64.b64decode(chunk.replace("-", "+").replace("_", "/")))
    return out


MARKED = 'cAn4ry/S3cr+t=Tok&en"x'
"""A secret with every character that escapes differently: ``/ + = & "``."""


def _every(template: str, values: bytes | str) -> str:
    return "".join(template.format(v if isinstance(v, int) else ord(v)) for v in values)


@pytest.mark.parametrize(
    "written",
    [
        pytest.param(MARKED.replace("/", "\\/").replace('"', '\\"'), id="php-json"),
        pytest.param(_every("\\u{:04x}", MARKED), id="json-every-char"),
        pytest.param(_every("\\u{:04X}", MARKED), id="json-every-char-upper"),
        pytest.param(_every("\\x{:02x}", MARKED.encode()), id="byte-escapes"),
        pytest.param(html.escape(MARKED), id="html"),
        pytest.param(html.escape(MARKED).replace("/", "&#x2F;"), id="html-slash-hex"),
        pytest.param(html.escape(MARKED).replace("/", "&#47;"), id="html-slash-decimal"),
        pytest.param(_every("&#{};", MARKED), id="html-every-char"),
        pytest.param(_every("&#x{:x};", MARKED), id="html-every-char-hex"),
        # Go's html/template writes "+" as "&#43;" and leaves "/" and "=": neither the value nor a whole
        # escaping of it is there as written.
        pytest.param(MARKED.replace("+", "&#43;").replace("&en", "&amp;en").replace('"', "&#34;"), id="html-go"),
        pytest.param("".join(f"&#{ord(c)};" if i % 3 == 0 else c for i, c in enumerate(MARKED)), id="html-some"),
        pytest.param(MARKED.replace("S3", "&#x53;3").replace("+", "&plus;"), id="html-named-and-hex"),
        # Some characters URL-encoded and not others, URL escapes and references mixed, a reference
        # escaped again by a page quoting it, one without its ";", and "+" read back as a space.
        pytest.param(MARKED.replace("+", "%2B"), id="percent-some"),
        pytest.param(MARKED.replace("/", "%2F").replace("+", "&#43;"), id="percent-and-html"),
        pytest.param(MARKED.replace("+", "&amp;#43;"), id="html-twice"),
        pytest.param(MARKED.replace("+", "&#43").replace("/", "&#47"), id="html-no-semicolon"),
        pytest.param(MARKED.replace("+", " "), id="plus-as-space"),
        pytest.param(_every("%{:02X}", MARKED.encode()), id="percent-every-byte"),
        pytest.param(_every("%{:02x}", MARKED.encode()), id="percent-every-byte-lower"),
        pytest.param(quote(quote(MARKED, safe=""), safe=""), id="percent-twice"),
        pytest.param(quopri.encodestring(MARKED.encode()).decode(), id="quoted-printable"),
        pytest.param(_every("={:02X}", MARKED.encode()), id="quoted-printable-every-byte"),
        pytest.param(":".join(f"{b:02x}" for b in MARKED.encode()), id="hex-colons"),
        pytest.param(" ".join(f"{b:02X}" for b in MARKED.encode()), id="hex-spaces"),
        pytest.param(MARKED.upper(), id="upper-case"),
        pytest.param(MARKED.lower(), id="lower-case"),
    ],
)
def test_every_encoding_an_upstream_writes_a_secret_in_is_redacted(written: str) -> None:
    redactor = Redactor()
    redactor.add(SecretValue(MARKED))
    assert redactor.redact_text(f"you sent: {written} -- end") == "you sent: [redacted] -- end"
    out, _ = redactor.redact_json({"echo": [f"you sent: {written}"]})
    assert out == {"echo": ["you sent: [redacted]"]}


def test_character_references_that_spell_no_secret_are_left_as_written() -> None:
    redactor = Redactor()
    redactor.add(SecretValue(MARKED))
    text = "fish &amp; chips &#60;b&#62; &unknown; cAn4ry/S3cr&#43;"
    assert redactor.redact_text(text) == text
    assert redactor.redact({"page": text}) == {"page": text}


def test_a_secret_split_by_whitespace_is_redacted_whitespace_and_all() -> None:
    redactor = Redactor()
    redactor.add(SecretValue(MARKED))
    # An error whose line break fell inside the secret, as sent and once the break became a space.
    for text in (f"bad token {MARKED[:9]}\n{MARKED[9:]} -- end", f"bad token {MARKED[:9]} {MARKED[9:]} -- end"):
        assert redactor.redact_text(text) == "bad token [redacted] -- end"
    # A base64 dump wrapped every 76 characters (MIME), the secret at each offset, short and long.
    for prefix in (b"", b"x", b"xy", b"GET / HTTP/1.1\r\nAuthorization: Bearer "):
        for filler in (b"", b"z" * 20_000):
            raw = base64.encodebytes(filler + prefix + MARKED.encode() + b"\r\nHost: api\r\n").decode()
            for out in (redactor.redact_text(raw), redactor.redact_json({"dump": raw})[0]["dump"]):
                assert "[redacted]" in out
                joined = "".join(out.split())
                assert not any(b"S3cr+t" in text or b"Tok&en" in text for text in _decodings(joined))
    # Words that meet a secret's start only when spaces are taken out are left alone.
    assert redactor.redact_text("cAn4 ry is a word") == "cAn4 ry is a word"


@pytest.mark.parametrize("space", ["\u00a0", "\u2009", "\u3000", "\u2028", "\t", "\n"])
def test_a_secret_split_by_any_unicode_whitespace_in_short_json_is_redacted(space: str) -> None:
    redactor = Redactor()
    redactor.add(SecretValue("CANARY-s3cr3t-7f2a9"))
    out, _ = redactor.redact_json({"echo": f"token CANARY-{space}s3cr3t-7f2a9 end", "n": [1]})
    assert out == {"echo": "token [redacted] end", "n": [1]}


def test_a_secret_with_an_invalid_byte_slipped_in_is_redacted() -> None:
    # The byte decodes to U+FFFD, which no secret holds: the text around it still spells the secret.
    redactor = Redactor()
    redactor.add(SecretValue("CANARY-s3cr3t-7f2a9"))
    cut = "CANAR\ufffdY-s3cr3t-7f2a9"
    assert redactor.redact_text(f"token was {cut}.") == "token was [redacted]."
    assert redactor.redact_json({"e": f"token {cut}"})[0] == {"e": "token [redacted]"}
    long = "x " * 5000 + cut
    assert redactor.redact_text(long).endswith("[redacted]")
    assert redactor.redact_text("caf\ufffd menu") == "caf\ufffd menu"


def test_a_numeric_secret_echoed_as_a_json_number_is_redacted() -> None:
    redactor = Redactor()
    redactor.add(SecretValue("8675309123456"))
    out, _ = redactor.redact_json({"echo": 8675309123456, "n": [8675309123456, 42], "ok": True})
    assert out == {"echo": "[redacted]", "n": ["[redacted]", 42], "ok": True}


def test_a_binary_body_cut_inside_a_secret_loses_the_start_it_kept() -> None:
    redactor = Redactor()
    redactor.add(SecretValue(MARKED))
    body = bytes(100) + MARKED.encode()[:-1]  # the cap fell one byte before the secret's end
    assert redactor.redact_bytes(body, truncated=True) == bytes(100) + b"[redacted]"
    assert redactor.redact_bytes(body) == body  # not cut: the bytes are the answer's own


def test_a_secret_in_utf16_inside_a_binary_body_is_redacted() -> None:
    redactor = Redactor()
    redactor.add(SecretValue("CANARY-s3cr3t-7f2a9"))
    for codec in ("utf-16-le", "utf-16-be"):
        body = b"\x00\x01header" + "token CANARY-s3cr3t-7f2a9".encode(codec) + b"\xff"
        out = redactor.redact_bytes(body)
        assert "CANARY-s3cr3t-7f2a9".encode(codec) not in out and b"[redacted]" in out


def test_a_secret_split_over_neighbouring_strings_is_redacted_in_each_part() -> None:
    # A server that chunks a long text into content items, or spreads a token over two fields: each
    # string alone holds no whole form, but a reader who joins them has the secret.
    token = "CANARY-split-envTok/9q+Z="
    redactor = Redactor()
    redactor.add(SecretValue(token))
    for cut in (7, len(token) // 2, len(token) - 3):
        chunked = {
            "content": [
                {"type": "text", "text": "part 1: " + token[:cut]},
                {"type": "text", "text": token[cut:] + " (2)"},
            ]
        }
        redacted, text = redactor.redact_json(chunked)
        assert text is None
        assert [item["text"] for item in redacted["content"]] == ["part 1: [redacted]", "[redacted] (2)"], cut
        fields = {"structuredContent": {"a": token[:cut], "b": token[cut:], "n": 3}}
        assert redactor.redact(fields) == {"structuredContent": {"a": "[redacted]", "b": "[redacted]", "n": 3}}
    assert chunked["content"][0]["text"] == "part 1: " + token[: len(token) - 3]  # the input is left as it was
    # Strings that only look alike stay, and so does the JSON text the check made.
    plain = {"content": [{"type": "text", "text": "CANARY-"}, {"type": "text", "text": "other"}]}
    assert redactor.redact_json(plain) == (plain, json.dumps(plain, ensure_ascii=False))


def test_a_secret_echoed_with_its_end_masked_is_redacted_from_half_of_it_and_twelve_characters() -> None:
    token = "CANARY-p71-bearTok/8q+Z="  # 24 characters: a start of 12 or more is redacted
    r = Redactor()
    r.add(SecretValue(token))
    assert r.redact_text(f"bad token {token[:-4]}****") == "bad token [redacted]****"
    assert r.redact_text(f"bad token {token[:12]}************") == "bad token [redacted]************"
    assert r.redact_json({"e": f"x {token[:-6]}******"}) == ({"e": "x [redacted]******"}, None)
    # Shorter starts stay, as a masking by design shows them (first 8 and last 4).
    assert r.redact_text(f"{token[:8]}************{token[-4:]}") == f"{token[:8]}************{token[-4:]}"
    assert r.redact_text(token[:11]) == token[:11]
    # A long secret: half of it at least, so a start of a quarter (a shared prefix) stays.
    long = "sk_live_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    r.add(SecretValue(long))
    assert r.redact_text(long[:19] + "…") == long[:19] + "…"
    assert r.redact_text(long[:20] + long[20:30] + "****") == "[redacted]****"
    # A start followed by words of the text's own is no masked echo: a secret a person chose may begin
    # with a word the gateway's own sentences use.
    worded = Redactor()
    worded.add(SecretValue("introspection-canary-417"))
    said = "127.0.0.1 did not return an introspection result; check that introspection is enabled"
    assert worded.redact_text(said) == said
    assert worded.redact_text("echo: introspection-can…") == "echo: [redacted]…"
    assert worded.redact_text("echo: introspection-ca") == "echo: [redacted]"
    # A value too short to have a start of 12 that is not all of it is redacted only whole.
    short = Redactor()
    short.add(SecretValue("abcdefghijkl"))
    assert short.redact_text("abcdefghijk*") == "abcdefghijk*"


def test_forms_of_two_secrets_that_overlap_are_redacted_as_one() -> None:
    redactor = Redactor()
    redactor.add(SecretValue("first-secret-abcd"))
    redactor.add(SecretValue("abcd-second-secret"))
    # The two share "abcd": redacting the first alone would leave "-second-secret" shown.
    assert redactor.redact_text("x first-secret-abcd-second-secret y") == "x [redacted] y"
    assert redactor.redact_bytes(b"x first-secret-abcd-second-secret y") == b"x [redacted] y"


def _many_secrets(count: int) -> list[SecretValue]:
    return [SecretValue(f"tok_{i:04d}_" + base64.b32encode(bytes([i % 256]) * 20).decode()) for i in range(count)]


def test_a_redactor_of_many_secrets_learns_one_more_and_redacts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redaction, "_COMPILED", {})
    secrets = _many_secrets(60)
    late = SecretValue("late-learned/secret+value")
    texts = [
        f"a {late.reveal()} b",
        f"wrapped {base64.b64encode(str(late.reveal()).encode()).decode()[:10]}\n"
        f"{base64.b64encode(str(late.reveal()).encode()).decode()[10:]} end",
        f"key={quote(str(late.reveal()), safe='')}&{secrets[7].reveal()}",
        f"tail {str(late.reveal())[:15]}",
    ]
    answers: dict[bool, list[str]] = {}
    for library in (True, False):
        if not library:
            monkeypatch.setattr(string_search, "_ahocorasick", None)
        redactor = Redactor()
        for secret in secrets:
            redactor.add(secret)
        assert redactor.redact_text(texts[0]) == texts[0]  # built before the last secret is learned
        redactor.add(late)
        answers[library] = [redactor.redact_text(t, truncated=t.startswith("tail")) for t in texts]
        answers[library].append(json.dumps(redactor.redact({"a": [texts[0], texts[2]]})))
    assert answers[True] == answers[False]
    assert answers[True][:4] == [
        "a [redacted] b",
        "wrapped [redacted] end",
        "key=[redacted]&[redacted]",
        "tail [redacted]",
    ]


MIXED_SECRET = "CANARY-mx-päßwörd+Z9/="


def _mixed(secret: str) -> str:
    """``secret`` with its first letter beyond ASCII composed and every later one decomposed."""
    first = next(i for i, c in enumerate(secret) if not c.isascii())
    return secret[: first + 1] + unicodedata.normalize("NFD", secret[first + 1 :])


def test_a_secret_echoed_with_composed_and_decomposed_letters_is_redacted() -> None:
    redactor = Redactor()
    redactor.add(SecretValue(MIXED_SECRET))
    mixed = _mixed(MIXED_SECRET)
    assert mixed not in {unicodedata.normalize(f, MIXED_SECRET) for f in ("NFC", "NFD")}
    assert redactor.redact_text(f"naïve échö: {mixed} — ok") == "naïve échö: [redacted] — ok"
    # An answer's JSON is looked at for forms before it is walked: the mixed echo is found there too.
    assert redactor.redact({"message": f"bad: {mixed}", "n": 1}) == {"message": "bad: [redacted]", "n": 1}
    # A decomposed mark right after the echo stays as written, and nothing before it is cut.
    tail = "e" + "\u0301"
    assert redactor.redact_text(f"{tail}{mixed}{tail}") == f"{tail}[redacted]{tail}"
