"""Output redaction: a secret the upstream echoes back never reaches the agent.

Upstreams reflect what they were sent: an error page quoting the ``Authorization`` header, a
debug endpoint echoing the query string, a 401 body naming the key it refused. A ``Redactor``
learns every form a secret may take on the wire (``SecretValue.redaction_forms``) while the
request is built, then scrubs the response before it becomes a tool result, an error text or an
audit row. Every form is looked for in one pass (``string_search``: an Aho–Corasick automaton once
a process knows many forms), and where forms overlap the union of their spans becomes one
``[redacted]``: ``Bearer <token>`` is one, not ``Bearer [redacted]``, and no fragment of another
form is left beside it.
"""

from __future__ import annotations

import bisect
import html
import itertools
import json
import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any

from .composed import composed
from .secrets import MIN_SECRET_START, SecretValue
from .string_search import Span, StringSearch, compile_search

__all__ = ["REDACTED", "Redactor"]

REDACTED = "[redacted]"
MIN_PARTIAL = 3
"""A cut-off tail this long that starts a secret is treated as part of it."""


class Redactor:
    """Replaces every known form of the secrets it was given with ``[redacted]``.

    Cheap when empty (the common case for ``auth: none``): nothing is compiled or walked.
    Not shared between calls: each call learns only the secrets it used. What is derived from a
    secret's forms (its encodings, the searches for them) is worked out once per distinct secret set
    and kept (``_Compiled``), as the log filter keeps the same forms for the process's life: every
    call opens its credential again, and re-deriving the same searches each time was most of the
    cost of redacting a small answer. A large set (the log filter's, many users' secrets) is searched
    with automata, which learning one more secret extends rather than builds anew.
    """

    __slots__ = ("_compiled", "_forms", "_previous", "_starts")

    def __init__(self) -> None:
        self._forms: frozenset[str] = frozenset()
        self._starts: frozenset[str] = frozenset()
        self._compiled: _Compiled | None = None
        self._previous: _Compiled | None = None
        """The searches of the secrets known before the last ones learned, for the next to extend."""

    def add(self, secret: SecretValue) -> None:
        """Learn a secret's forms. Matches ``LastMeterAuth``'s ``on_secret`` callback."""
        forms, starts = _forms_of(secret)
        if not self._forms:
            self._forms, self._starts, self._compiled = forms, starts, None
        elif not (forms <= self._forms and starts <= self._starts):
            # rebuilt on next use, from what the last state built
            self._previous = self._compiled or self._previous
            self._forms, self._starts, self._compiled = self._forms | forms, self._starts | starts, None

    @property
    def shortest(self) -> int:
        """The length of the shortest form: a shorter text holds none (0 while no secret is known)."""
        return self._state().shortest if self._forms else 0

    def __bool__(self) -> bool:
        return bool(self._forms)

    def redact_text(self, s: str, *, truncated: bool = False) -> str:
        """``truncated``: ``s`` was cut by a size cap, so its end may hold the first part of a
        secret that no longer matches whole; such a tail is cut off too."""
        if not self._forms or not s:
            return s
        state = self._state()
        if len(s) < state.shortest and not truncated:
            return s  # no form fits (an id, a tool name): the common case of the copies a call keeps
        s = _replaced(s, state.form_search.spans(s))
        s = _split_forms_redacted(s, state)
        s = _escaped_forms_redacted(s, state)
        s = _composed_forms_redacted(s, state)
        s = _starts_redacted(s, state)
        if truncated:
            s = self._cut_partial_tail(s)
        return s

    def redact_bytes(self, body: bytes, *, truncated: bool = False) -> bytes:
        """Redact a binary body (its text forms, as UTF-8 bytes); ``truncated`` as for ``redact_text``."""
        if not self._forms or not body:
            return body
        state = self._state()
        # Read as Latin-1, each byte is one character: the searches for text find the bytes' forms
        # at the bytes' own offsets.
        latin = body.decode("latin-1")
        spans = state.bytes_search.spans(latin)
        if spans:
            body = _replaced(latin, spans).encode("latin-1")
        if truncated:
            tails = state.bytes_tails
            longest = tails.cut(body[-tails.longest :].decode("latin-1"))
            body = body[:-longest] + REDACTED.encode() if longest else body
        return body

    def _cut_partial_tail(self, s: str) -> str:
        longest = self._state().tails.cut(s)
        return s[:-longest] + REDACTED if longest else s

    def redact(self, obj: Any, *, truncated: bool = False) -> Any:
        """Redact strings in JSON-like data (values and dict keys), returning new containers.

        Non-string scalars are returned as they are; the input is never mutated. ``truncated``
        applies to a bare string (a body cut at the size cap, see ``redact_text``).
        """
        return self.redact_json(obj, truncated=truncated)[0]

    def redact_json(self, obj: Any, *, truncated: bool = False) -> tuple[Any, str | None]:
        """``redact``, and ``obj``'s JSON text (``json.dumps(obj, ensure_ascii=False)``) when the
        check made it and ``obj`` came back as it was (None otherwise): the result cleaning reads the
        same text, and serializing a large answer twice was a cost in proportion to its size."""
        if not self._forms:
            return obj, None
        if truncated and isinstance(obj, str):
            return self.redact_text(obj, truncated=True), None
        if isinstance(obj, dict | list):
            text = _json_text(obj)
            if text is not None and not self._json_holds_form(text):
                if not self._split_holds_form(text):
                    return obj, text
                return _across_strings(obj, self._state()), None
            # Across strings first: a string ending in a long enough start of a secret is redacted by the
            # walk, and the next string's rest of it would no longer be found joined to it.
            split = text is None or self._split_holds_form(text)
            return self._walk(_across_strings(obj, self._state()) if split else obj), None
        return self._walk(obj), None

    def _split_holds_form(self, text: str) -> bool:
        """Whether JSON text may hold a form that one string begins and another ends (an answer chunked
        into content items, a token spread over two fields): a form cut in two leaves its first half or
        its second half whole in one of them. Only forms long enough not to meet by chance."""
        return self._state().half_search.occurs(text)

    def _json_holds_form(self, text: str) -> bool:
        """Whether JSON text may hold a form: whole, or split as ``_split_forms_redacted`` looks for (a
        line break inside a JSON string is written ``\\n``)."""
        state = self._state()
        if state.json_search.occurs(text):
            return True
        if ("&" in text or "%" in text) and _escapes_hold_form(text, state):
            return True
        if not text.isascii() and not unicodedata.is_normalized("NFC", text):
            if state.json_search.occurs(unicodedata.normalize("NFC", text)):
                return True
        if not state.split_forms:
            return False
        joined = text.replace("\\n", "").replace("\\r", "").replace(_REPLACEMENT, "")
        if len(text) <= SPLIT_ANYWHERE_CHARS:
            joined = "".join(joined.replace("\\t", "").split())  # any whitespace, as in the text itself
        return len(joined) < len(text) and state.split_search.occurs(joined)

    def _walk(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.redact_text(obj)
        if isinstance(obj, int | float) and not isinstance(obj, bool):
            # A secret of digits echoed as a JSON number (an account number, a PIN).
            written = repr(obj)
            return REDACTED if self._state().form_search.occurs(written) else obj
        if isinstance(obj, dict):
            return {self._walk(k) if isinstance(k, str) else k: self._walk(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self._walk(v) for v in obj]
        return obj

    def _state(self) -> _Compiled:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = _compiled(self._forms, self._starts, self._previous)
            self._previous = None
        return compiled

    def __repr__(self) -> str:
        return f"Redactor(forms={len(self._forms)})"


class _Compiled:
    """What redacting needs of one set of forms, built lazily (most calls use only ``json_search``).

    Each kind of form has its ``StringSearch``: a scan of each form with ``in`` (a search in C) for
    a few, an automaton for many (``string_search.compile_search``). Built ``previous=`` the state of
    fewer secrets, a search reuses the automaton that state built. ``shared``: the state is kept in
    ``_COMPILED`` for every redactor of the same secrets, and only scans (small, and quick to make)."""

    __slots__ = (
        "_bytes_forms",
        "_json_forms",
        "_searches",
        "_seeds",
        "_shared",
        "_split_json_forms",
        "_tails",
        "forms",
        "heads",
        "json_heads",
        "shortest",
        "split_forms",
    )

    def __init__(
        self,
        forms: frozenset[str],
        starts: frozenset[str] = frozenset(),
        previous: _Compiled | None = None,
        *,
        shared: bool = False,
    ) -> None:
        self.forms = tuple(sorted(forms, key=len, reverse=True))
        self.heads = tuple(sorted(((_head(value), value) for value in starts), key=lambda h: len(h[1]), reverse=True))
        """For each secret whose start is redacted alone: the shortest such start, and the whole value."""
        self.json_heads = tuple(_json_escaped(head) for head, _ in self.heads)
        self.shortest = min((len(f) for f in (*self.forms[-1:], *(head for head, _ in self.heads))), default=0)
        # The forms also looked for in text with its whitespace taken out.
        self.split_forms = tuple(f for f in self.forms if len(f) >= MIN_SPLIT_FORM and not _SPACE.search(f))
        self._bytes_forms: tuple[bytes, ...] | None = None
        self._json_forms: tuple[str, ...] | None = None
        self._split_json_forms: tuple[str, ...] | None = None
        self._tails: dict[str, _Tails] = {}
        self._searches: dict[str, StringSearch] = {}
        # Only the searches: a state does not keep the one before it alive.
        self._seeds: dict[str, StringSearch] = {} if previous is None else {**previous._seeds, **previous._searches}
        self._shared = shared

    def _search(self, kind: str, strings: Callable[[], Iterable[str]]) -> StringSearch:
        search = self._searches.get(kind)
        if search is None:
            # Two threads may both build it: the same search, and either is kept.
            seed = self._seeds.pop(kind, None)
            search = compile_search(strings(), previous=seed, automaton=not self._shared)
            self._searches[kind] = search
        return search

    @property
    def form_search(self) -> StringSearch:
        return self._search("forms", lambda: self.forms)

    @property
    def split_search(self) -> StringSearch:
        return self._search("split", lambda: self.split_forms)

    @property
    def json_search(self) -> StringSearch:
        """Every form, and every start redacted alone, as JSON text writes it."""
        return self._search("json", lambda: (*self.json_forms, *self.json_heads))

    @property
    def half_search(self) -> StringSearch:
        """Each half of every form looked for across strings, as JSON text writes it."""
        return self._search("halves", lambda: (half for form in self.split_json_forms for half in _halves(form)))

    @property
    def head_search(self) -> StringSearch:
        return self._search("heads", lambda: (head for head, _ in self.heads))

    @property
    def bytes_search(self) -> StringSearch:
        """``bytes_forms`` read as Latin-1 (one character a byte)."""
        return self._search("bytes", lambda: (form.decode("latin-1") for form in self.bytes_forms))

    @property
    def tails(self) -> _Tails:
        tails = self._tails.get("text")
        if tails is None:
            tails = self._tails["text"] = _Tails(self.forms)
        return tails

    @property
    def bytes_tails(self) -> _Tails:
        """``tails`` of the forms' UTF-8 bytes, read as Latin-1."""
        tails = self._tails.get("bytes")
        if tails is None:
            tails = self._tails["bytes"] = _Tails(form.encode().decode("latin-1") for form in self.forms)
        return tails

    @property
    def bytes_forms(self) -> tuple[bytes, ...]:
        if self._bytes_forms is None:
            # UTF-8, and UTF-16 either way round for forms long enough not to meet by chance: a binary
            # body holds text in whichever encoding its format uses (a Windows export, a .docx).
            wide = [form.encode(codec) for form in self.split_forms for codec in ("utf-16-le", "utf-16-be")]
            self._bytes_forms = tuple(sorted({*(form.encode() for form in self.forms), *wide}, key=len, reverse=True))
        return self._bytes_forms

    @property
    def split_json_forms(self) -> tuple[str, ...]:
        """``split_forms`` as JSON text writes them."""
        if self._split_json_forms is None:
            self._split_json_forms = tuple(_json_escaped(form) for form in self.split_forms)
        return self._split_json_forms

    @property
    def json_forms(self) -> tuple[str, ...]:
        if self._json_forms is None:
            self._json_forms = tuple(_json_escaped(form) for form in self.forms)
        return self._json_forms


def _halves(form: str) -> tuple[str, str]:
    return form[: len(form) // 2], form[len(form) // 2 :]


class _Tails:
    """Every form by its first ``MIN_PARTIAL`` characters: which start of one a text ends with is
    looked up at the few places near its end, not tried form by form."""

    __slots__ = ("_by_start", "longest")

    def __init__(self, forms: Iterable[str]) -> None:
        self._by_start: dict[str, list[str]] = {}
        self.longest = 0
        for form in forms:
            if len(form) > MIN_PARTIAL:
                self._by_start.setdefault(form[:MIN_PARTIAL], []).append(form)
                self.longest = max(self.longest, len(form))

    def cut(self, s: str) -> int:
        """How long the longest start of a form (at least ``MIN_PARTIAL``, never the whole form) that
        ``s`` ends with is (0: none)."""
        for at in range(max(0, len(s) - self.longest + 1), len(s) - MIN_PARTIAL + 1):
            group = self._by_start.get(s[at : at + MIN_PARTIAL])
            if group:
                tail = s[at:]
                if any(len(form) > len(tail) and form.startswith(tail) for form in group):
                    return len(tail)
        return 0


MIN_SPLIT_FORM = 8
"""Shortest form looked for across whitespace: a shorter one would be found in words that meet by chance."""
SPLIT_ANYWHERE_CHARS = 8192
"""Up to this length a text is looked at across any whitespace; a longer one across line breaks only."""
_LINE_BREAK = "\r\n"
_REPLACEMENT = "\ufffd"
"""What decoding puts for a byte that is no UTF-8: never part of a secret, and one put inside a secret
(an invalid byte the upstream slipped into it) must not hide it."""
_SPACE = re.compile(r"\s+")


def _split_forms_redacted(s: str, state: _Compiled) -> str:
    """``s`` with every form that a line break or a replacement character splits redacted, line break and
    all (a base64 text wrapped every 76 characters, an invalid byte inside a secret), and in a short text
    (an error, a log line) every form that any whitespace splits (an error whose line breaks became
    spaces). Costs a pass or two in C when there is none, the common case; the character map is made
    only when one is found."""
    if not state.split_forms:
        return s
    anywhere = len(s) <= SPLIT_ANYWHERE_CHARS
    if anywhere:
        joined = "".join(s.split()).replace(_REPLACEMENT, "")  # ``split`` cuts where ``isspace`` says
    else:
        joined = s.replace("\n", "").replace("\r", "").replace(_REPLACEMENT, "")
    found = state.split_search.spans(joined) if len(joined) < len(s) else []
    if not found:
        return s
    kept = [
        at
        for at, char in enumerate(s)
        if not (char == _REPLACEMENT or (char.isspace() if anywhere else char in _LINE_BREAK))
    ]
    out: list[str] = []
    at = 0
    for start, end in found:
        out += (s[at : kept[start]], REDACTED)
        at = kept[end - 1] + 1
    out.append(s[at:])
    return "".join(out)


_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}|&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?")
"""A URL escape (``%2B``) or an HTML character reference, numeric or named, its ``;`` left out or not
(browsers read ``&#43`` as ``+`` too)."""
_ROUNDS = 2
"""Escapes undone over and over at most this often: an HTML page quoting an escaped text (``&amp;#43;``)."""


def _decoded(s: str) -> tuple[str, list[tuple[int, int]]] | None:
    """``s`` with its URL escapes and character references undone (``_ROUNDS`` times), and where each
    character of that text came from in ``s`` (start, end); None when ``s`` holds none."""
    spans: list[tuple[int, int]] | None = None
    text = s
    for _ in range(_ROUNDS):
        if ("%" not in text and "&" not in text) or not _ESCAPE.search(text):
            break
        chars: list[str] = []
        here: list[tuple[int, int]] = []
        at = 0
        for match in _ESCAPE.finditer(text):
            for i in range(at, match.start()):
                chars.append(text[i])
                here.append((i, i + 1))
            for char in _undo(match):
                chars.append(char)
                here.append((match.start(), match.end()))
            at = match.end()
        for i in range(at, len(text)):
            chars.append(text[i])
            here.append((i, i + 1))
        # Where each character comes from in ``s``, through the rounds before.
        spans = here if spans is None else [(spans[a][0], spans[b - 1][1]) for a, b in here]
        text = "".join(chars)
    return None if spans is None else (text, spans)


def _undo(match: re.Match[str]) -> str:
    escape = match.group()
    if escape[0] == "%":
        byte = int(escape[1:], 16)
        return chr(byte) if byte < 0x80 else escape  # a byte of a longer UTF-8 character: kept
    return html.unescape(escape)  # an unknown name stays as written


def _undone(s: str) -> str:
    """``s`` with its escapes undone as ``_decoded`` undoes them, without the map: one pass in C per round."""
    for _ in range(_ROUNDS):
        if "%" not in s and "&" not in s:
            break
        s = _ESCAPE.sub(_undo, s)
    return s


def _escapes_hold_form(s: str, state: _Compiled) -> bool:
    undone = _undone(s)
    return undone != s and state.form_search.occurs(undone)


def _escaped_forms_redacted(s: str, state: _Compiled) -> str:
    """``s`` with every form that URL escapes and character references spell redacted: a page or an
    encoder that escapes some characters of what it quotes and not others (Go's ``html/template`` writes
    ``+`` as ``&#43;``; a query string ``%2B`` and not ``/``; both mixed, or escaped twice), so that
    neither the value nor a whole encoding of it is there as written."""
    if not _escapes_hold_form(s, state):
        return s  # the common case: no escape, or none spelling a form (the map below is made only then)
    decoded = _decoded(s)
    if decoded is None:
        return s
    text, spans = decoded
    out: list[str] = []
    at = 0
    for found_start, found_end in state.form_search.spans(text):  # some: ``_escapes_hold_form`` said so
        start, end = spans[found_start][0], spans[found_end - 1][1]
        if start < at:
            continue  # inside a reference already replaced
        out += (s[at:start], REDACTED)
        at = end
    out.append(s[at:])
    return "".join(out)


def _composed_forms_redacted(s: str, state: _Compiled) -> str:
    """``s`` with every form its composed text (NFC) holds redacted, where ``s`` mixes composed and
    decomposed letters: an echo of a secret with ``ä`` as one code point and ``ö`` as two is neither
    the secret's NFC nor its NFD form (both of which are forms), and reads as the secret all the same."""
    if s.isascii() or unicodedata.is_normalized("NFC", s):
        return s  # the common case: one check in C
    if not state.form_search.occurs(unicodedata.normalize("NFC", s)):
        return s  # the map below is made only when there is a form to map
    normal = composed(s)
    if normal is None:
        return s
    text, spans = normal
    return _replaced(s, _joined_spans((spans[a][0], spans[b - 1][1]) for a, b in state.form_search.spans(text)))


def _joined_spans(spans: Iterable[Span]) -> list[Span]:
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start < out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out


_Slot = tuple[dict[Any, Any] | list[Any], Any]
"""Where a string sits: its container and its key or index there."""


def _across_strings(obj: Any, state: _Compiled) -> Any:
    """``obj`` (copied) with every form split over neighbouring strings redacted in each part: over one
    object's string fields in order (``{"a": "CANARY-", "b": "rest"}``), and over the same field of a
    list's items in order (content items chunking a long text, ``[{"text": "…CANARY-"}, {"text": "rest…"}]``)."""
    groups: list[list[_Slot]] = []

    def copy(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: copy(v) for k, v in node.items()}
        if isinstance(node, list | tuple):
            return [copy(v) for v in node]
        return node

    def strings_under(node: Any, path: tuple[Any, ...], into: dict[tuple[Any, ...], list[_Slot]]) -> None:
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in children:
            if isinstance(value, str):
                into.setdefault((*path, key), []).append((node, key))
            elif isinstance(value, dict) and not path:
                strings_under(value, (key,), into)

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            groups.append([(node, k) for k, v in node.items() if isinstance(v, str)])
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            by_field: dict[tuple[Any, ...], list[_Slot]] = {}
            for index, item in enumerate(node):
                if isinstance(item, str):
                    by_field.setdefault((), []).append((node, index))
                elif isinstance(item, dict):
                    strings_under(item, (), by_field)
                visit(item)
            groups.extend(by_field.values())

    obj = copy(obj)
    visit(obj)
    for group in groups:
        if len(group) > 1:
            _redact_across(group, state)
    return obj


def _redact_across(slots: list[_Slot], state: _Compiled) -> None:
    texts: list[str] = [holder[key] for holder, key in slots]
    joined = "".join(texts)
    found = state.split_search.spans(joined)
    if not found:
        return
    starts = list(itertools.accumulate((len(t) for t in texts[:-1]), initial=0))
    cuts: list[list[tuple[int, int]]] = [[] for _ in texts]
    for found_start, found_end in found:
        first = bisect.bisect_right(starts, found_start) - 1
        last = bisect.bisect_right(starts, found_end - 1) - 1
        for i in range(first, last + 1) if first != last else ():  # one string's own: redacted there already
            start = max(found_start, starts[i]) - starts[i]
            cuts[i].append((start, min(found_end - starts[i], len(texts[i]))))
    for (holder, key), text, spans in zip(slots, texts, cuts, strict=True):
        if spans:
            out, at = [], 0
            for start, end in spans:
                out += (text[at:start], REDACTED)
                at = end
            out.append(text[at:])
            holder[key] = "".join(out)


def _replaced(s: str, spans: list[Span]) -> str:
    """``s`` with each of ``spans`` (sorted, disjoint) replaced by ``[redacted]``."""
    if not spans:
        return s
    out: list[str] = []
    at = 0
    for start, end in spans:
        out += (s[at:start], REDACTED)
        at = end
    out.append(s[at:])
    return "".join(out)


SHARED_MAX_FORMS = 512
"""Sets of fewer forms (the few secrets of one call) are kept for every redactor of the same secrets,
and scanned for (``_Compiled``'s ``shared``): a thousand kept sets of automata would weigh hundreds of
megabytes. A larger set is the log filter's, searched with automata."""
_MAX_KEPT = 1024
"""Distinct secrets (and secret sets) whose derived forms are kept; past it the maps start again."""
_FORMS: dict[bytes, tuple[frozenset[str], frozenset[str]]] = {}
"""A secret's forms by its digest (``SecretValue.digest``: never the value itself as a key)."""
_COMPILED: dict[tuple[frozenset[str], frozenset[str]], _Compiled] = {}


def _forms_of(secret: SecretValue) -> tuple[frozenset[str], frozenset[str]]:
    """A secret's forms, and its values whose start is redacted alone (``SecretValue.redaction_starts``)."""
    digest = secret.digest()
    known = _FORMS.get(digest)
    if known is None:
        if len(_FORMS) >= _MAX_KEPT:
            _FORMS.clear()
        known = _FORMS[digest] = (frozenset(secret.redaction_forms()), frozenset(secret.redaction_starts()))
    return known


def _compiled(forms: frozenset[str], starts: frozenset[str], previous: _Compiled | None = None) -> _Compiled:
    if len(forms) >= SHARED_MAX_FORMS:
        # Many secrets' forms: the log filter's set, which grows by a secret at a time. Kept by its
        # redactor alone, each state extending the automata of the one before.
        return _Compiled(forms, starts, previous)
    compiled = _COMPILED.get((forms, starts))
    if compiled is None:
        if len(_COMPILED) >= _MAX_KEPT:
            _COMPILED.clear()
        compiled = _COMPILED[(forms, starts)] = _Compiled(forms, starts, shared=True)
    return compiled


def _head(value: str) -> str:
    """The shortest start of ``value`` redacted alone: ``MIN_SECRET_START`` characters, and at least half
    of it, so what stays shown of a secret masked at its end is never most of it."""
    return value[: max(MIN_SECRET_START, -(-len(value) // 2))]


_MASKS = frozenset("*•●·…#xX.")
"""What an upstream writes in place of the end of a secret it echoes masked (``sk_live_abcd****``,
``abcd…``, ``abcdXXXX``)."""


def _starts_redacted(s: str, state: _Compiled) -> str:
    """``s`` with every start of a secret (``_head`` and as much more of it as follows) redacted where
    the secret's end is masked or cut off (a mask character, or the text's end, follows): an upstream
    that masks the end of what it echoes (``CANARY-p71-bearTok/8****``) shows the rest."""
    present = state.head_search.found(s) if state.heads else frozenset[str]()
    for head, value in state.heads:
        if head not in present:
            continue
        found = s.find(head)
        if found < 0:
            continue
        out: list[str] = []
        at = 0
        while found >= 0:
            end = found + len(head)
            while end < len(s) and end - found < len(value) and s[end] == value[end - found]:
                end += 1
            if end - found == len(value) or end == len(s) or s[end] in _MASKS:
                out += (s[at:found], REDACTED)
                at = end
            # Else the text went on with its own words: a secret chosen by a person may start with one
            # ("introspection-…"), and the gateway's own sentence using that word is no echo of it.
            found = s.find(head, end)
        out.append(s[at:])
        s = "".join(out)
    return s


_ENCODER = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(obj, ensure_ascii=False)``, made once: ``json.dumps`` builds an encoder on each call
with any non-default option, and every answer of a call with a credential is serialized here."""


def _json_text(obj: dict[Any, Any] | list[Any]) -> str | None:
    """``obj`` as JSON text, or None when it is not plain JSON data (then it is walked).

    What ``redact_json`` looks for forms in. JSON escapes each character on its own, so a string
    holding a form serializes to text holding the form's own escape (``_json_escaped``); absent
    every one of those, no string (value or key) holds any form and nothing needs a walk: one
    serialization in C instead of a walk in Python."""
    try:
        return _ENCODER.encode(obj)
    except (TypeError, ValueError, RecursionError):
        return None


def _json_escaped(form: str) -> str:
    """``form`` as it appears inside a JSON string (``json.dumps(..., ensure_ascii=False)``, as
    ``_json_text`` writes it)."""
    return json.dumps(form, ensure_ascii=False)[1:-1]
