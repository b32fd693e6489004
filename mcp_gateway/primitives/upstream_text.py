"""What a failing upstream said, screened once where the error is made, before anyone reads it.

An upstream that fails says why in its own words: the JSON-RPC error of an MCP handshake or
``tools/list``, a GraphQL ``errors`` array, an HTTP error body, a token endpoint's ``error``, a
parser's complaint about a fetched spec. Those words are as untrusted as a tool description, and
they travel further: into the connector's stored error, the ``connectors`` and ``call`` results,
the CLI's tables and the log. ``screen`` is the one pipeline they take first:

1. every form of every secret the caller knows is redacted (the ``Redactor`` forms: as is, URL- and
   JSON-escaped, base64, hex), and so is every secret-shaped span it does not know
   (``secret_spans``: a URL's userinfo, ``password=…``, a private key block, a ``Bearer`` value),
   before and after cleaning, since an invisible character inside a secret would otherwise hide it
   from the first pass and give it back in the second;
2. ANSI escapes and control, invisible, bidi and tag characters are removed
   (``sanitize.clean_text``), and every run of whitespace, line breaks included, becomes one space:
   an error is one line of a table or a log;
3. the length is capped, and a cut says so (``CUT``);
4. text that reads as instructions to the model is flagged (``sanitize.instruction_flags``,
   judging what tag characters spell as well), as a model reads it on that one line: line breaks,
   runs of whitespace, invisible characters and markup between the words do not split a phrase.

``Screened.for_agent`` is what a message may quote: the cleaned text, or, when it reads as
instructions, a sentence saying it was withheld and where the operator reads it. A text withheld
inside ``noting_withheld`` is noted there, for the caller to log and keep for that review.
``Screened.for_operator`` is the cleaned text with its flags: for the operator's review only, never
a result, a table or a log line (``Screened.reasons`` is what those may name).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final, TypeVar

from ..vocabulary.errors import GatewayError
from .sanitize import clean_text, instruction_flags
from .secret_spans import hide_secret_spans

__all__ = ["CUT", "MAX_UPSTREAM_TEXT", "WITHHELD", "Redacts", "Screened", "noting_withheld", "screen"]

MAX_UPSTREAM_TEXT: Final = 500
"""How much of an upstream's error text a message quotes (the operator's copy is cut there too)."""
CUT: Final = " … [cut]"
WITHHELD: Final = (
    "the upstream's error text was withheld: it looks like instructions to the model "
    "(the operator sees it with `mcp-gateway review`)"
)
_HIDING: Final = "hides text:"

Redacts = Callable[[str], str]
"""Something that redacts secrets from text: ``Redactor.redact_text``, ``KnownSecrets.redact``."""


@dataclass(frozen=True)
class Screened:
    """An upstream's error text after ``screen``: redacted, cleaned, one line, capped, judged."""

    text: str
    """Redacted and cleaned, one line, at most ``MAX_UPSTREAM_TEXT`` characters."""
    flags: tuple[str, ...] = ()
    """Why it looks like instructions or hides characters (redacted too); empty when it does neither."""

    @property
    def withheld(self) -> bool:
        """Whether it reads as instructions to the model (hidden characters alone are removed, not withheld)."""
        return any(not flag.startswith(_HIDING) for flag in self.flags)

    @property
    def reasons(self) -> tuple[str, ...]:
        """The flags without what they quote (what tag characters spelled): safe for a log line."""
        return tuple(dict.fromkeys(flag.split(" spelling ", 1)[0] for flag in self.flags))

    def for_agent(self) -> str:
        """The text, or why it was withheld; empty for an upstream that said nothing."""
        return WITHHELD if self.withheld else self.text

    def for_operator(self) -> str:
        """The text with its flags, for the operator's review."""
        if not self.flags:
            return self.text
        return f"{self.text} [flagged: {'; '.join(self.flags)}]"

    def attach(self, exc: _E) -> _E:
        """``exc``, keeping the operator's copy when the message withheld the text (``GatewayError.withheld``)."""
        if self.withheld:
            exc.withheld = self.for_operator()
        return exc

    def __bool__(self) -> bool:
        return bool(self.text)


_E = TypeVar("_E", bound=GatewayError)


def screen(raw: object, *redacts: Redacts, max_chars: int = MAX_UPSTREAM_TEXT) -> Screened:
    """``raw`` (an upstream's error text; anything else is turned into text first) through the
    pipeline, with every ``redacts`` applied. Screening a screened text changes nothing."""
    text = raw if isinstance(raw, str) else str(raw)
    if not text:
        return Screened("")
    # Secrets the gateway never held are recognised by their shape only (``secret_spans``).
    redacts = (*redacts, hide_secret_spans)
    text = _redacted(text, redacts)
    # Judged as it is shown, on one line: an order split over line breaks, runs of spaces or markup
    # reads as one there.
    flags = tuple(_redacted(clean_text(flag), redacts) for flag in instruction_flags(text, one_line=True))
    text = _redacted(" ".join(clean_text(text).split()), redacts)
    if len(text) > max_chars:
        text = text[: max(0, max_chars - len(CUT))].rstrip() + CUT
    screened = Screened(text, flags)
    if screened.withheld and (noted := _NOTED.get()) is not None:
        noted.append(screened)
    return screened


_NOTED: ContextVar[list[Screened] | None] = ContextVar("withheld_upstream_texts", default=None)


@contextmanager
def noting_withheld() -> Iterator[list[Screened]]:
    """Every text ``screen`` withholds inside the block (and in tasks it starts), in order: what
    the agent was told the operator sees, for the caller to log and keep. Wherever along a call an
    upstream's words were screened, nothing withheld is left unrecorded."""
    noted: list[Screened] = []
    token = _NOTED.set(noted)
    try:
        yield noted
    finally:
        _NOTED.reset(token)


def _redacted(text: str, redacts: tuple[Redacts, ...]) -> str:
    for redact in redacts:
        text = redact(text)
    return text
