"""Secrets as values: sealed at rest, revealed at the last meter, never printed.

The pure half of the credential vault, with no store behind it, so that ``auth/`` and ``sources/``
can hold and reveal secrets without reaching persistence:

- ``CredentialKey``: which credential (connector, principal, name).
- ``SealedCredential``: a stored credential still encrypted; only the auth step that builds the
  outbound request (``auth.LastMeterAuth``) calls ``.open()`` on it.
- ``SecretValue``: what ``.open()`` yields, whose repr, str and format say ``[secure]``. So a secret
  cannot reach a log line, an exception message or a tool result by being printed: it has to be
  revealed on purpose, in one place.
- ``parse_secret_input`` and ``SECRET_SHAPES``: what ``secret set`` reads for each auth kind.

``credentials.CredentialVault`` seals values into the store and finds them again.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import quopri
import unicodedata
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final, Literal, NoReturn, cast
from urllib.parse import quote, quote_plus

from pydantic import BaseModel, ConfigDict

from ..vocabulary.errors import CredentialError
from ..vocabulary.model import AuthKind

if TYPE_CHECKING:
    from .crypto import Cipher

__all__ = [
    "MIN_SECRET_START",
    "OAUTH2_TOKEN_NAME",
    "PROJECT_WIDE",
    "SECRET_SHAPES",
    "CredentialKey",
    "SealedCredential",
    "SecretValue",
    "decode_secret",
    "encode_secret",
    "parse_secret_input",
    "sealed_fingerprint",
]

PROJECT_WIDE: Final = "*"
OAUTH2_TOKEN_NAME: Final = "oauth2_token"
"""The credential name an ``oauth2`` connector's token set is sealed under (beside the client's
``default``): which of the two exist is what decides whether a call can get a token."""
MIN_REDACT_CHARS = 4
"""Shorter values are not redacted on their own: replacing every ``abc`` in a response helps no one."""
MIN_SECRET_START = 12
"""The shortest start of a secret redacted without the rest (and never less than half the secret): 12
characters of a random token do not occur by chance, and no common word is that long a start of one;
a vendor's fixed prefix (``sk_live_``, ``ghp_``, ``xoxb-``) is shorter."""

# Fields of JSON-shaped secrets that identify rather than authenticate: they travel in clear
# (a username, an OAuth client id, an AWS access key id, a public certificate), so responses
# that mention them are not redacted for it. Combinations with a secret field still are.
_IDENTIFIER_FIELDS = frozenset({"username", "client_id", "consumer_key", "access_key_id", "cert_pem"})

# What ``secret set`` reads for each kind: required and optional fields
# of a JSON object; kinds absent here take a plain string.
SECRET_SHAPES: Final[Mapping[AuthKind, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "basic": (("username", "password"), ()),
    "oauth1": (("consumer_key", "consumer_secret", "token", "token_secret"), ()),
    "aws_sigv4": (("access_key_id", "secret_access_key"), ("session_token",)),
    "mtls": (("cert_pem", "key_pem"), ()),
    "oauth2": (("client_id", "client_secret"), ()),
}
_STRING_KINDS: frozenset[AuthKind] = frozenset({"bearer", "api_key", "custom", "hmac"})
_SENT_AS_WRITTEN: frozenset[AuthKind] = frozenset({"bearer", "api_key", "custom"})
"""String kinds whose value goes into a header, a query or a cookie as it is (an HMAC key only signs)."""

# Serialized plaintext is tagged so a string that happens to look like JSON stays a string.
_TAG_STR = b"s"
_TAG_JSON = b"j"


class CredentialKey(BaseModel):
    """Which credential: a connector's, for one principal (or project-wide), under one name."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    connector: str
    principal: str
    """Whose credential: ``*`` for the project-wide one, else a user or agent id."""
    name: str = "default"


class SecretValue:
    """A revealed secret: a string, or a ``dict[str, str]`` for JSON shapes. Never prints itself."""

    __slots__ = ("_digest", "_value")

    def __init__(self, value: str | dict[str, str]) -> None:
        self._value = value
        self._digest: bytes | None = None

    def reveal(self) -> str | dict[str, str]:
        """The plaintext. Call it only where the secret is put on the wire."""
        return self._value

    def digest(self) -> bytes:
        """A SHA-256 of the value: tells two openings of the same secret apart from different ones
        (the log filter learns each value once) without keeping the value."""
        if self._digest is None:  # asked by the redactor and the log filter alike
            value = self._value if isinstance(self._value, str) else json.dumps(self._value, sort_keys=True)
            self._digest = hashlib.sha256(value.encode()).digest()
        return self._digest

    def redaction_forms(self) -> set[str]:
        """Every string that, found in an upstream response, would leak this secret.

        Each secret value of >= 4 characters, as is, URL-encoded (``%XX`` upper and lower case,
        ``+`` for spaces, twice, every byte), quoted-printable, JSON-escaped (``\\/`` too, and every
        character as ``\\uXXXX``), byte-escaped (``\\xNN``), HTML-escaped (entities, every character
        as a numeric entity), base64-encoded (alone, and inside a longer base64 text at any offset,
        both alphabets: ``_b64_runs``), hex-encoded (its UTF-8 bytes, lower and upper case, with
        ``:`` or nothing between bytes) and, from 8 characters, upper- and lower-cased; with its
        ``Bearer`` form; a value beyond ASCII also in the other spellings an upstream writes it in
        (``_misread``: its UTF-8 bytes read as Latin-1 or Windows-1252, normalized otherwise, its letters
        beyond ASCII as ``?``, U+FFFD or nothing, folded to ASCII), in each of those encodings. For a
        username/password pair also ``user:pass``
        and its Basic-auth header whatever the password's length, and the username itself when the
        password is shorter than 4 characters (an API key sent as the username).
        A form split by whitespace (a line break in a wrapped base64 text or error) is found by the
        redactor (``Redactor.redact_text``).
        """
        values = [self._value] if isinstance(self._value, str) else _secret_fields(self._value)
        forms: set[str] = set()
        for v in values:
            if len(v) < MIN_REDACT_CHARS:
                continue
            for spelling in (v, *_misread(v)):
                if len(spelling) < MIN_REDACT_CHARS:
                    continue
                forms.update(_encodings(spelling))
                forms.add(f"Bearer {spelling}")
        if isinstance(self._value, dict) and "username" in self._value and "password" in self._value:
            username, password = self._value["username"], self._value["password"]
            pair = f"{username}:{password}"
            # The header the gateway itself writes is redacted whatever the password's length.
            forms.add("Basic " + _b64(pair))
            if len(password) < MIN_REDACT_CHARS and len(username) >= MIN_REDACT_CHARS:
                # An API key as the username and a placeholder password ("x"): the username is the secret.
                forms.update(_encodings(username))
                forms.add(f"Bearer {username}")
            if len(pair) >= MIN_REDACT_CHARS:
                forms.update(_encodings(pair))
                forms.update(_carried(_b64(pair)))
        return {f for f in forms if f}

    def redaction_starts(self) -> set[str]:
        """The values whose start, when long enough, is redacted on its own (``Redactor``): an upstream
        that masks only the end of what it echoes (``sk_live_abcdefghij****``) shows the rest. Each secret
        value long enough for a start of ``MIN_SECRET_START`` characters to be less than all of it."""
        values = [self._value] if isinstance(self._value, str) else _secret_fields(self._value)
        spellings = {s for v in values for s in (v, *_misread(v))}
        return {s for s in spellings if len(s) > MIN_SECRET_START}

    def __repr__(self) -> str:
        return "SecretValue([secure])"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        # Pickling would write the plaintext somewhere (a cache, a multiprocessing queue).
        raise TypeError("a SecretValue cannot be pickled")


def _misread(v: str) -> set[str]:
    """``v`` as an upstream echoes a value beyond ASCII in another spelling (each at most once, so a secret
    with many such letters gives a few more forms, not their combinations):

    - its UTF-8 bytes read as Latin-1 or Windows-1252 (Python's ``http.server`` reading header bytes,
      many others): ``clé`` comes back as ``clÃ©``;
    - normalized otherwise (NFC, NFD, NFKC, NFKD): ``ä`` as ``a`` plus a combining mark reads the same;
    - each letter beyond ASCII as ``?`` (a Java ``getBytes("US-ASCII")``, many loggers), as U+FFFD once or
      once per UTF-8 byte (Latin-1 or UTF-8 bytes read under the other label), or dropped;
    - folded to ASCII (its accents stripped) and transliterated as German writes it (``ä`` as ``ae``).
    """
    if v.isascii():
        return set()
    data = v.encode()
    spellings = {data.decode("latin-1"), data.decode("cp1252", errors="replace")}
    try:
        spellings.add(data.decode("cp1252"))
    except UnicodeDecodeError:  # a byte Windows-1252 leaves undefined
        pass
    spellings.update(unicodedata.normalize(form, v) for form in ("NFC", "NFD", "NFKC", "NFKD"))
    composed = unicodedata.normalize("NFC", v)
    folded = "".join(c for c in unicodedata.normalize("NFKD", v) if not unicodedata.combining(c))
    lossy = {
        _each_beyond_ascii(composed, lambda _c: "?"),
        _each_beyond_ascii(composed, lambda _c: "\ufffd"),
        _each_beyond_ascii(composed, lambda c: "\ufffd" * len(c.encode())),
        _each_beyond_ascii(composed, lambda _c: ""),
        folded,
        _each_beyond_ascii(folded, lambda _c: ""),
        _each_beyond_ascii(folded, lambda _c: "?"),
        _each_beyond_ascii(_transliterated(composed), lambda _c: ""),
    }
    # A lossy spelling too little of the secret is left in ("????") would hide text that is no echo.
    spellings.update(s for s in lossy if len(s.replace("?", "").replace("\ufffd", "")) >= MIN_REDACT_CHARS)
    spellings.discard(v)
    return spellings


def _each_beyond_ascii(v: str, spelled: Callable[[str], str]) -> str:
    return "".join(c if c.isascii() else spelled(c) for c in v)


_GERMAN: Final[Mapping[str, str]] = {"ä": "ae", "ö": "oe", "ü": "ue", "Ä": "Ae", "Ö": "Oe", "Ü": "Ue", "ß": "ss"}


def _transliterated(v: str) -> str:
    """``v`` in ASCII as a German writer spells it (``ä`` as ``ae``), other accents stripped."""
    german = "".join(_GERMAN.get(c, c) for c in v)
    return "".join(c for c in unicodedata.normalize("NFKD", german) if not unicodedata.combining(c))


def _secret_fields(value: Mapping[str, str]) -> list[str]:
    return [v for k, v in value.items() if k not in _IDENTIFIER_FIELDS]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


MIN_BASE64_RUN = 6
"""Shortest run of a secret's base64 looked for inside a longer base64 text: 64**6 strings, so never
found there by chance."""


def _b64_runs(text: str) -> set[str]:
    """The characters of ``text``'s base64 that stay the same wherever it sits in a longer base64 text,
    in both alphabets: a secret encoded with what came before and after it (a header dump, a JSON body,
    ``user:pass``) starts at any of three byte offsets, and its first and last characters then mix with
    its neighbours' bits. For each offset, the characters that hold none of the neighbours' bits."""
    data = text.encode()
    runs: set[str] = set()
    for offset in range(3):
        total = offset + len(data)
        encoded = base64.b64encode(bytes(offset) + data).decode()
        first = -(-8 * offset // 6)  # the first character holding only this text's bits
        # A last group of one or two bytes fixes one or two characters; the next holds the following bits.
        run = encoded[first : total // 3 * 4 + total % 3]
        if len(run) >= MIN_BASE64_RUN:
            runs.add(run)
            runs.add(run.replace("+", "-").replace("/", "_"))
    return runs


def _encodings(v: str) -> set[str]:
    data = v.encode()
    pct = quote(v, safe="")
    every_pct = "".join(f"%{b:02X}" for b in data)
    escaped = json.dumps(v)[1:-1]
    hexed = data.hex()
    marked_up = html.escape(v)
    forms = {
        v,
        pct,
        _lower_escapes(pct),
        quote_plus(v, safe=""),
        quote(v),  # what a URL path keeps of it ('/' unescaped)
        quote(pct, safe=""),  # encoded twice: a URL carried inside another URL's query
        every_pct,  # every byte escaped, letters too (some encoders do)
        every_pct.lower(),
        every_pct.replace("%", "="),  # quoted-printable, every byte
        quopri.encodestring(data).decode(),  # quoted-printable as mail and multipart bodies write it
        escaped,
        escaped.replace("/", "\\/"),  # PHP's json_encode escapes '/'
        "".join(f"\\u{ord(c):04x}" for c in v),  # a JSON or JavaScript writer escaping every character
        "".join(f"\\u{ord(c):04X}" for c in v),
        "".join(f"\\x{b:02x}" for b in data),  # a C, Python or shell escape of every byte
        "".join(f"\\x{b:02X}" for b in data),
        # An HTML error page quotes what it was sent with entities.
        marked_up,
        marked_up.replace("/", "&#x2F;"),
        marked_up.replace("/", "&#47;"),
        "".join(f"&#{ord(c)};" for c in v),
        "".join(f"&#x{ord(c):x};" for c in v),
        "".join(f"&#x{ord(c):X};" for c in v),
        _b64(v),
        base64.urlsafe_b64encode(data).decode(),
        *_b64_runs(v),
        # An upstream that dumps what it received as bytes (a debug echo, a hexdump in an error) leaks it too.
        hexed,
        hexed.upper(),
        ":".join(hexed[i : i + 2] for i in range(0, len(hexed), 2)),
        ":".join(hexed[i : i + 2] for i in range(0, len(hexed), 2)).upper(),
    }
    if len(v) >= MIN_CASED_CHARS:  # a log or an error that shouts or folds what it quotes
        forms.update((v.lower(), v.upper()))
        if "+" in v:  # read back from a form or a query string, where "+" is a space
            forms.add(v.replace("+", " "))
    # How a URL carries it (a query value, a path segment): an encoding of the request encodes these.
    for carried in {pct, _lower_escapes(pct), quote_plus(v, safe=""), quote(v)} - {v}:
        forms.update(_carried(carried))
    return forms


def _carried(wire: str) -> set[str]:
    """``wire`` (a spelling the request carried) as an upstream that encodes what it received writes
    it: base64 alone or inside a longer base64 text, and hex."""
    data = wire.encode()
    hexed = data.hex()
    return {_b64(wire), base64.urlsafe_b64encode(data).decode(), *_b64_runs(wire), hexed, hexed.upper()}


MIN_CASED_CHARS = 8
"""Shortest secret whose upper- and lower-cased spellings are redacted too (a shorter one, cased, is
too often a word of the answer)."""


def _lower_escapes(pct: str) -> str:
    # Some servers echo percent-escapes in lower case (%2f); the secret leaks just the same.
    parts = pct.split("%")
    return parts[0] + "".join("%" + p[:2].lower() + p[2:] for p in parts[1:])


def sealed_fingerprint(sealed: bytes) -> str:
    """A digest of a credential's sealed bytes (``SealedCredential.fingerprint``)."""
    return hashlib.sha256(sealed).hexdigest()


class SealedCredential:
    """A stored credential still encrypted; ``open()`` is for the last meter only.

    Its repr names which credential it is (connector, principal, name), never any bytes.
    """

    __slots__ = ("_aad", "_cipher", "_sealed", "key")

    def __init__(self, key: CredentialKey, sealed: bytes, *, cipher: Cipher, project: str) -> None:
        self.key = key
        """Which credential this is; ``key.principal == '*'`` when the project-wide one was used."""
        self._sealed = sealed
        self._cipher = cipher
        # Here, not at module level: logging imports this module, and a command that opens no
        # credential (``validate``) need not load the cryptography library.
        from .crypto import credential_aad

        self._aad = credential_aad(project, key.connector, key.principal, key.name)

    def open(self) -> SecretValue:
        """Decrypt. Raises ``CredentialError`` (never holding the value) when it cannot."""
        return SecretValue(decode_secret(self._cipher.open(self._sealed, aad=self._aad), self.key))

    @property
    def fingerprint(self) -> str:
        """A digest of the sealed bytes: it changes whenever the credential is stored again, and tells
        nothing about the plaintext. For caches keyed by credential (mTLS clients)."""
        return sealed_fingerprint(self._sealed)

    def __repr__(self) -> str:
        k = self.key
        return f"SealedCredential(connector={k.connector!r}, principal={k.principal!r}, name={k.name!r})"


def encode_secret(value: str | dict[str, str]) -> bytes:
    """The plaintext a credential is sealed as: tagged, so a string that looks like JSON stays a string."""
    if isinstance(value, str):
        return _TAG_STR + value.encode("utf-8")
    # Checked at run time too: callers (the CLI, the secret page) pass what they parsed.
    fields = cast(dict[object, object], value)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in fields.items()):
        raise CredentialError("a JSON-shaped secret maps field names to strings")
    return _TAG_JSON + json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")


def decode_secret(plaintext: bytes, key: CredentialKey) -> str | dict[str, str]:
    """What ``encode_secret`` sealed. Raises ``CredentialError`` (never holding the value) for an unknown layout."""
    tag, body = plaintext[:1], plaintext[1:]
    try:
        if tag == _TAG_STR:
            return body.decode("utf-8")
        if tag == _TAG_JSON:
            value: object = json.loads(body)
            if isinstance(value, dict):
                fields = cast(dict[object, object], value)
                if all(isinstance(k, str) and isinstance(v, str) for k, v in fields.items()):
                    return cast(dict[str, str], fields)
    except (UnicodeDecodeError, json.JSONDecodeError):
        pass
    # Authentic ciphertext with an unreadable body: a bug or a foreign writer, not tampering.
    raise CredentialError(
        f"the stored credential for connector {key.connector!r} has an unknown layout; "
        "enter it again with `mcp-gateway secret set`"
    )


# -- what ``secret set`` reads --------------------------------------------------------------


_Rule = Literal["wire", "text", "password", "any"]
"""What a value may hold: ``wire`` visible ASCII (it is sent as written), ``text`` any letters but no
blank edge, control or formatting character, ``password`` no control or formatting character,
``any`` anything (a PEM, checked by ``auth.secret_check``)."""

_FIELD_RULES: Final[Mapping[tuple[AuthKind, str], _Rule]] = {
    ("basic", "password"): "password",
    ("aws_sigv4", "access_key_id"): "wire",  # in the Authorization header's Credential=
    ("aws_sigv4", "session_token"): "wire",  # X-Amz-Security-Token
    ("mtls", "cert_pem"): "any",
    ("mtls", "key_pem"): "any",
}
"""Fields that differ from ``text``; the other fields are encoded before they are sent (base64, percent-
encoding, a signature), so a letter beyond ASCII is carried."""


def parse_secret_input(kind: AuthKind, raw: str, *, over_http: bool = True) -> str | dict[str, str]:
    """Parse a secret as typed or piped for an auth ``kind``, refusing a value its kind cannot send.

    ``bearer``, ``api_key``, ``hmac`` and ``custom`` take a plain string (one trailing newline is
    dropped, nothing else); a ``custom`` secret may instead be a JSON object of strings, for
    ``{secret.field}`` templates. ``basic``, ``oauth1``, ``aws_sigv4``, ``mtls`` and ``oauth2`` take a
    JSON object (see ``SECRET_SHAPES``).

    Every value is checked where it is entered, since a paste mistake found at a call could only
    say "reconnect": a ``bearer``, ``api_key`` or ``custom`` value (each field of a JSON one too), and
    an AWS access key id or session token, go into a header, a query or a cookie as written, so they
    must be visible ASCII (spaces inside allowed) with nothing blank at either end; with
    ``over_http=False`` (a stdio MCP server, which gets the secret in its environment) other letters
    are allowed. The other fields take any letters, but no whitespace at either end, control or
    invisible formatting character (zero-width space, byte-order mark, direction mark); a Basic
    password only no control or formatting character (RFC 7617 section 2), a Basic username no
    ``:`` either. An ``hmac`` key, which only signs, is taken as given unless it is blank.

    Raises:
        CredentialError: the input is empty, has the wrong shape, or holds a character its kind
            cannot send. The message names the field, the kind of character and where it sits
            (start, end, inside), and shows the expected shape; it never repeats the input.
    """
    plain: _Rule = "wire" if over_http else "text"
    if kind in _STRING_KINDS:
        text = raw.removesuffix("\n").removesuffix("\r")
        if not text.strip():
            what = "empty" if not text else "blank (only whitespace)"
            raise CredentialError(f"the {kind} secret is {what}; pipe or paste the secret itself")
        if kind == "custom" and text.lstrip().startswith("{"):
            example = '{"field": "...", ...}'
            fields = _string_fields(kind, _json_object(text, f"{kind} (JSON form)", example), example, ())
            for value in fields.values():
                _check(f"a field of the {kind} secret", value, plain)
            return fields
        _check(f"the {kind} secret", text, plain if kind in _SENT_AS_WRITTEN else "any")
        return text
    shape = SECRET_SHAPES.get(kind)
    if shape is None:
        known = ", ".join(sorted(_STRING_KINDS | SECRET_SHAPES.keys()))
        raise CredentialError(f"auth kind {kind!r} takes no secret; secrets exist for: {known}")
    required, optional = shape
    example = _example(required, optional)
    obj = _string_fields(kind, _json_object(raw, kind, example), example, required + optional)
    missing = [f for f in required if not obj.get(f)]
    if missing:
        raise CredentialError(
            f"the {kind} secret is missing {', '.join(repr(f) for f in missing)} "
            f"(each a non-empty string); expected {example}"
        )
    extra = len(obj.keys() - set(required) - set(optional))
    if extra:
        # The unexpected names are not echoed: someone may have pasted a secret as a key.
        raise CredentialError(
            f"the {kind} secret has {extra} unexpected field(s); allowed are "
            f"{', '.join(required + optional)}; expected {example}"
        )
    kept = {k: v for k, v in obj.items() if v or k in required}
    for name, value in kept.items():
        rule: _Rule = _FIELD_RULES.get((kind, name), "text")
        _check(f"the {kind} secret's {name!r}", value, plain if rule == "wire" else rule)
    if kind == "basic" and ":" in kept["username"]:
        raise CredentialError(
            "the basic username contains ':', which HTTP Basic auth cannot carry (the server reads the username up "
            "to the first ':', RFC 7617); check which part is the username and which the password"
        )
    return kept


def _check(what: str, value: str, rule: _Rule) -> None:
    """Refuse ``value`` when a character breaks ``rule``, naming its kind and place, never the value."""
    for i, c in enumerate(value):
        problem = _character_problem(c, rule)
        if problem is None and rule in ("wire", "text") and (i == 0 or i == len(value) - 1) and c.isspace():
            problem = "whitespace"
        if problem is not None:
            where = "at the start" if i == 0 else "at the end" if i == len(value) - 1 else "inside it"
            # Sent in a header it would fail every call, far from here, as an error that cannot say why
            # without quoting the value.
            raise CredentialError(f"{what} holds {problem} {where}; paste the value alone, {_FIX[problem]}")


def _character_problem(c: str, rule: _Rule) -> str | None:
    category = unicodedata.category(c)
    if category == "Cs":  # a lone surrogate, which no UTF-8 text (and so no sealed secret) can hold
        return "a broken character (half of a UTF-16 pair)"
    if rule == "any":
        return None
    if c in "\r\n\u2028\u2029\x85":
        return "a line break"
    if category == "Cc":
        return "a control character"
    if category == "Cf":
        return "an invisible formatting character"
    if rule == "wire" and not c.isascii():
        return "a space other than the ordinary one" if c.isspace() else "a character beyond ASCII"
    return None


_FIX: Final[Mapping[str, str]] = {
    "whitespace": "without the space or line break around it",
    "a broken character (half of a UTF-16 pair)": "as the service showed it",
    "a line break": "on one line",
    "a control character": "without the control character (a tab or another unprintable character)",
    "an invisible formatting character": (
        "typed again or without the invisible character a copy from a chat, mail or web page carries "
        "(a zero-width space, byte-order mark or direction mark)"
    ),
    "a space other than the ordinary one": "with ordinary spaces (a copy from a web page carries non-breaking ones)",
    "a character beyond ASCII": (
        "in plain ASCII: it goes into a header, a query or a cookie as written, where an upstream reads a letter "
        "beyond ASCII garbled"
    ),
}


def _example(required: tuple[str, ...], optional: tuple[str, ...]) -> str:
    parts = [f'"{f}": "..."' for f in required] + [f'"{f}": "..." (optional)' for f in optional]
    return "{" + ", ".join(parts) + "}"


def _json_object(raw: str, label: str, example: str) -> dict[str, object]:
    try:
        value: object = json.loads(raw)
    except json.JSONDecodeError as exc:
        # exc.msg and the position say what is wrong without quoting the document.
        raise CredentialError(
            f"the {label} secret is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
            f"expected {example}"
        ) from None
    if not isinstance(value, dict):
        raise CredentialError(f"the {label} secret must be a JSON object; expected {example}")
    return cast(dict[str, object], value)  # JSON object keys are strings


def _string_fields(kind: str, obj: dict[str, object], example: str, known: tuple[str, ...]) -> dict[str, str]:
    bad = [k for k, v in obj.items() if not isinstance(v, str)]
    if bad:
        # Field names of the expected shape are safe to name; anything else is only counted.
        named = [repr(k) for k in bad if k in known]
        which = ", ".join(named) if named else f"{len(bad)} field(s)"
        raise CredentialError(f"in the {kind} secret, {which} must be a string; expected {example}")
    return {k: v for k, v in obj.items() if isinstance(v, str)}
