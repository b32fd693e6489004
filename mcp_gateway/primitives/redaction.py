"""Output redaction: a secret the upstream echoes back never reaches the agent.

Upstreams reflect what they were sent: an error page quoting the ``Authorization`` header, a
debug endpoint echoing the query string, a 401 body naming the key it refused. A ``Redactor``
learns every form a secret may take on the wire (``SecretValue.redaction_forms``) while the
request is built, then scrubs the response before it becomes a tool result, an error text or an
audit row. Longer forms are replaced first, so ``Bearer <token>`` becomes one ``[redacted]``
rather than ``Bearer [redacted]`` with a trailing fragment of some other form.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .secrets import SecretValue

__all__ = ["REDACTED", "Redactor"]

REDACTED = "[redacted]"
MIN_PARTIAL = 3
"""A cut-off tail this long that starts a secret is treated as part of it."""


class Redactor:
    """Replaces every known form of the secrets it was given with ``[redacted]``.

    Cheap when empty (the common case for ``auth: none``): nothing is compiled or walked.
    Not shared between calls: each call learns only the secrets it used. What is derived from a
    secret's forms (its encodings, the compiled patterns) is worked out once per distinct secret set
    and kept (``_Compiled``), as the log filter keeps the same forms for the process's life: every
    call opens its credential again, and re-deriving the same patterns each time was most of the
    cost of redacting a small answer.
    """

    __slots__ = ("_compiled", "_forms")

    def __init__(self) -> None:
        self._forms: frozenset[str] = frozenset()
        self._compiled: _Compiled | None = None

    def add(self, secret: SecretValue) -> None:
        """Learn a secret's forms. Matches ``LastMeterAuth``'s ``on_secret`` callback."""
        forms = _forms_of(secret)
        if not self._forms:
            self._forms, self._compiled = forms, None
        elif not forms <= self._forms:
            self._forms, self._compiled = self._forms | forms, None  # rebuilt on next use

    def __bool__(self) -> bool:
        return bool(self._forms)

    def redact_text(self, s: str, *, truncated: bool = False) -> str:
        """``truncated``: ``s`` was cut by a size cap, so its end may hold the first part of a
        secret that no longer matches whole; such a tail is cut off too."""
        if not self._forms or not s:
            return s
        s = self._state().pattern.sub(REDACTED, s)
        if truncated:
            s = self._cut_partial_tail(s)
        return s

    def redact_bytes(self, body: bytes) -> bytes:
        """Redact a binary body (its text forms, as UTF-8 bytes)."""
        if not self._forms or not body:
            return body
        return self._state().bytes_pattern.sub(REDACTED.encode(), body)

    def _cut_partial_tail(self, s: str) -> str:
        longest = 0
        for form in self._forms:
            for k in range(min(len(form) - 1, len(s)), MIN_PARTIAL - 1, -1):
                if s.endswith(form[:k]):
                    longest = max(longest, k)
                    break
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
            if text is not None and not any(form in text for form in self._state().json_forms):
                return obj, text
        return self._walk(obj), None

    def _walk(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.redact_text(obj)
        if isinstance(obj, dict):
            return {self._walk(k) if isinstance(k, str) else k: self._walk(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self._walk(v) for v in obj]
        return obj

    def _state(self) -> _Compiled:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = _compiled(self._forms)
        return compiled

    def __repr__(self) -> str:
        return f"Redactor(forms={len(self._forms)})"


class _Compiled:
    """What redacting needs of one set of forms, built lazily (most calls use only ``json_forms``)."""

    __slots__ = ("_bytes_pattern", "_forms", "_json_forms", "_pattern")

    def __init__(self, forms: frozenset[str]) -> None:
        self._forms = forms
        self._pattern: re.Pattern[str] | None = None
        self._bytes_pattern: re.Pattern[bytes] | None = None
        self._json_forms: tuple[str, ...] | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        if self._pattern is None:
            # Longest first: regex alternation takes the first alternative that matches, not the longest.
            forms = sorted(self._forms, key=len, reverse=True)
            self._pattern = re.compile("|".join(map(re.escape, forms)))
        return self._pattern

    @property
    def bytes_pattern(self) -> re.Pattern[bytes]:
        if self._bytes_pattern is None:
            forms = sorted((f.encode() for f in self._forms), key=len, reverse=True)
            self._bytes_pattern = re.compile(b"|".join(map(re.escape, forms)))
        return self._bytes_pattern

    @property
    def json_forms(self) -> tuple[str, ...]:
        if self._json_forms is None:
            self._json_forms = tuple(_json_escaped(form) for form in self._forms)
        return self._json_forms


_MAX_KEPT = 1024
"""Distinct secrets (and secret sets) whose derived forms are kept; past it the maps start again."""
_FORMS: dict[bytes, frozenset[str]] = {}
"""A secret's forms by its digest (``SecretValue.digest``: never the value itself as a key)."""
_COMPILED: dict[frozenset[str], _Compiled] = {}


def _forms_of(secret: SecretValue) -> frozenset[str]:
    digest = secret.digest()
    forms = _FORMS.get(digest)
    if forms is None:
        if len(_FORMS) >= _MAX_KEPT:
            _FORMS.clear()
        forms = _FORMS[digest] = frozenset(secret.redaction_forms())
    return forms


def _compiled(forms: frozenset[str]) -> _Compiled:
    compiled = _COMPILED.get(forms)
    if compiled is None:
        if len(_COMPILED) >= _MAX_KEPT:
            _COMPILED.clear()
        compiled = _COMPILED[forms] = _Compiled(forms)
    return compiled


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
