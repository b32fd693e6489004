"""A Python traceback in an upstream's error, told as what it says: the exception it ended with.

A server that crashes often answers with its traceback. Its frames are code, not prose: function
names (``send_reset_token``), source lines (``requests.post(url, json={"password": pw})``) and
paths (``load_dotenv("/app/.env")``) read like requests for credentials or local files to the
screen of upstream text (``upstream_text``), which would withhold an honest crash as an injection;
and they help an agent nothing. So a traceback is summarised to the text before it and the
exception after its last frame (type and message, every line of it), and only that is screened.

The frames are dropped, not trusted: what they hold never reaches the agent. Their string literals
and comments, the only place prose lives in code, are judged first; a traceback whose frames say
something that reads as instructions is left whole, for the screen to withhold and the operator to
review.
"""

from __future__ import annotations

import re
from typing import Final

from ..primitives.sanitize import instruction_flags

__all__ = ["summarize_traceback"]

_HEADER: Final = re.compile(r"^Traceback \(most recent call last\):[ \t]*$", re.M)
_FRAME: Final = re.compile(r'^\s+File "[^"\n]*", line \d+')
_EXCEPTION: Final = re.compile(r"[A-Za-z_][\w.]*(?::|$)", re.M)
"""The line an exception is printed on: its (qualified) type, then a colon and its message, if any."""
_CHAINED: Final = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_PROSE: Final = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|#[^\n]*")
"""A source line's string literals and comment."""
_CODE_FLAGS: Final = frozenset({"asks to read local files or keys"})
"""Flags a frame's literals raise as code: a config loader names ``.env`` or ``~/.aws`` honestly."""


def summarize_traceback(text: str) -> list[str] | None:
    """``text``'s parts worth reading when it holds a Python traceback: what came before the first one
    (if anything) and the exception the last one ended with; None when it holds no traceback as Python
    prints one, or its frames hold words that read as instructions (then it is screened whole)."""
    if "Traceback (most recent call last):" not in text:
        return None
    text = text.replace("\r\n", "\n")
    headers = list(_HEADER.finditer(text))
    if not headers:
        return None
    frames: list[str] = []
    ending: list[str] = []
    for header, after in zip(headers, [*(h.start() for h in headers[1:]), len(text)], strict=True):
        lines = text[header.end() : after].split("\n")[1:]
        at = 0
        while at < len(lines) and (not lines[at].strip() or lines[at][:1] in " \t"):
            at += 1
        if not any(_FRAME.match(line) for line in lines[:at]) or at == len(lines):
            return None
        frames += lines[:at]
        ending = [line for line in lines[at:] if line.strip() not in _CHAINED]
    exception = "\n".join(ending).strip()
    if not _EXCEPTION.match(exception) or _says_something(frames):
        return None
    return [part for part in (text[: headers[0].start()].strip(), exception) if part]


def _says_something(frames: list[str]) -> bool:
    """Whether a frame's string literals or comments read as instructions to the model."""
    prose = "\n".join(
        found.group(0).strip("\"'#").strip()
        for line in frames
        if not _FRAME.match(line)
        for found in _PROSE.finditer(line)
    )
    flags = instruction_flags(prose) if prose else []
    return any(flag not in _CODE_FLAGS and not flag.startswith("hides text:") for flag in flags)
