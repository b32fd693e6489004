"""Output redaction: a secret the upstream echoes back never reaches the agent (SPEC 1, 2.1).

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
    Not shared between calls: each call learns only the secrets it used.
    """

    __slots__ = ("_bytes_pattern", "_forms", "_json_forms", "_pattern")

    def __init__(self) -> None:
        self._forms: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._bytes_pattern: re.Pattern[bytes] | None = None
        self._json_forms: list[str] | None = None

    def add(self, secret: SecretValue) -> None:
        """Learn a secret's forms. Matches ``LastMeterAuth``'s ``on_secret`` callback."""
        new = secret.redaction_forms() - self._forms
        if new:
            self._forms |= new
            self._pattern = self._bytes_pattern = self._json_forms = None  # rebuilt on next use

    def __bool__(self) -> bool:
        return bool(self._forms)

    def redact_text(self, s: str, *, truncated: bool = False) -> str:
        """``truncated``: ``s`` was cut by a size cap, so its end may hold the first part of a
        secret that no longer matches whole; such a tail is cut off too."""
        if not self._forms or not s:
            return s
        s = self._compiled().sub(REDACTED, s)
        if truncated:
            s = self._cut_partial_tail(s)
        return s

    def redact_bytes(self, body: bytes) -> bytes:
        """Redact a binary body (its text forms, as UTF-8 bytes)."""
        if not self._forms or not body:
            return body
        if self._bytes_pattern is None:
            forms = sorted((f.encode() for f in self._forms), key=len, reverse=True)
            self._bytes_pattern = re.compile(b"|".join(map(re.escape, forms)))
        return self._bytes_pattern.sub(REDACTED.encode(), body)

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
        if not self._forms:
            return obj
        if truncated and isinstance(obj, str):
            return self.redact_text(obj, truncated=True)
        if isinstance(obj, dict | list) and not self._may_contain(obj):
            return obj
        return self._walk(obj)

    def _may_contain(self, obj: dict[Any, Any] | list[Any]) -> bool:
        """False when no string in ``obj`` (value or key) holds a form: then there is nothing to walk.

        One serialization in C instead of a walk in Python. JSON escapes each character on its
        own, so a string holding a form serializes to text holding the form's own JSON escape
        (``json.dumps(form)[1:-1]``); absent every one of those, no string holds any form.
        """
        try:
            text = json.dumps(obj)
        except (TypeError, ValueError, RecursionError):  # not plain JSON data: walk it
            return True
        if self._json_forms is None:
            self._json_forms = [_json_escaped(form) for form in self._forms]
        return any(form in text for form in self._json_forms)

    def _walk(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.redact_text(obj)
        if isinstance(obj, dict):
            return {self._walk(k) if isinstance(k, str) else k: self._walk(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self._walk(v) for v in obj]
        return obj

    def _compiled(self) -> re.Pattern[str]:
        if self._pattern is None:
            # Longest first: regex alternation takes the first alternative that matches, not the longest.
            forms = sorted(self._forms, key=len, reverse=True)
            self._pattern = re.compile("|".join(map(re.escape, forms)))
        return self._pattern

    def __repr__(self) -> str:
        return f"Redactor(forms={len(self._forms)})"


def _json_escaped(form: str) -> str:
    """``form`` as it appears inside a JSON string (``json.dumps`` defaults)."""
    if form.isascii() and form.isprintable() and '"' not in form and "\\" not in form:
        return form  # nothing in it is escaped
    return json.dumps(form)[1:-1]
