"""A Python traceback in an upstream's error, told as what it says: the exception it ended with.

A server that crashes often answers with its traceback. Its frames are code, not prose: function
names (``send_reset_token``), source lines (``requests.post(url, json={"password": pw})``) and
paths (``load_dotenv("/app/.env")``) read like requests for credentials or local files to the
screen of upstream text (``upstream_text``), which would withhold an honest crash as an injection;
and they help an agent nothing. So a traceback is summarised to the text before it and the
exception after its last frame (type and message, every line of it), and only that is screened.

An exception group (Python 3.11's boxed print, ``| ExceptionGroup: … (2 sub-exceptions)``, then each
sub-exception under a ``+---- 1 ----`` rule) is told as the group's line and each sub-exception's own
ending. A framework's debug page (Werkzeug's, so Flask's; Django's) is told from its copy-and-paste
traceback (a ``<textarea>``; Django's ends with ``Exception Type`` and ``Exception Value`` fields, read
as the exception), with the source lines the page shows around each frame judged as frames are.

The frames are dropped, not trusted: what they hold never reaches the agent. Their string literals
and comments, the only place prose lives in code, are judged first; a traceback whose frames say
something that reads as instructions is left whole, for the screen to withhold and the operator to
review.
"""

from __future__ import annotations

import re
from typing import Final

from ..primitives.html_text import code_parts
from ..primitives.sanitize import instruction_flags

__all__ = ["summarize_debug_page", "summarize_traceback"]

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
_HEADER_LINE: Final = "Traceback (most recent call last):"
_GROUP_HEADER: Final = re.compile(r"^[ \t]*\+ Exception Group Traceback \(most recent call last\):[ \t]*$", re.M)
_BOX_RULE: Final = re.compile(r"[ \t]*(?:\+-)?\+-+(?: (?:\d+|\.\.\.) -+)?[ \t]*")
"""A rule of a group's box: ``+-+---- 1 ----`` opens its sub-exceptions, ``+---- 2 ----`` the next,
``+--------`` closes them."""
_BOXED: Final = re.compile(r"[ \t]*\| ?(.*)")
_MORE: Final = re.compile(r"and \d+ more exceptions?")
_ANY_HEADER: Final = re.compile(r"^(?:[ \t]*\+ Exception Group )?Traceback \(most recent call last\):", re.M)
_DJANGO_ENDING: Final = re.compile(r"\n\s*Exception Type: ([^\n]*?)(?: at [^\n]*)?\nException Value:(.*)\Z", re.S)
_DJANGO_CHAIN: Final = re.compile(
    r"^(?:The above exception \(.*\) was the direct cause of the following exception:"
    r"|During handling of the above exception \(.*\), another exception occurred:)[ \t]*$",
    re.M,
)
"""Django's chain lines, which name the cause and come with no traceback header of their own."""


def summarize_traceback(text: str) -> list[str] | None:
    """``text``'s parts worth reading when it holds a Python traceback: what came before the first one
    (if anything) and the exception the last one ended with (an exception group's line and each of its
    sub-exceptions'); None when it holds no traceback as Python prints one, or its frames hold words that
    read as instructions (then it is screened whole)."""
    if _HEADER_LINE not in text:
        return None
    text = text.replace("\r\n", "\n")
    group = _GROUP_HEADER.search(text)
    if group is not None:
        return _summarize_group(text, group.start())
    found = _last_exception(text)
    if found is None or _says_something(found[2]):
        return None
    prefix, exception, _ = found
    return [part for part in (prefix, exception) if part]


def summarize_debug_page(html: str) -> list[str] | None:
    """A framework's debug page (``html``) told as the exception its traceback ended with, as
    ``summarize_traceback`` tells it; None when it holds no such traceback, or its frames, or the source
    lines it shows, hold words that read as instructions."""
    if _HEADER_LINE not in html:
        return None
    parts = code_parts(html)
    area = next((a for a in parts.text_areas if _ANY_HEADER.search(a)), None)
    if area is None:
        return None
    area = area.replace("\r\n", "\n")
    header = _ANY_HEADER.search(area)
    assert header is not None
    # From the traceback on: Django's copy starts with its environment (versions, apps, middleware).
    area = area[header.start() :]
    django = _DJANGO_ENDING.search(area)
    if django is not None:
        kind, value = django.group(1).strip(), django.group(2).strip()
        area = _DJANGO_CHAIN.sub("", area[: django.start()]) + "\n" + (f"{kind}: {value}" if value else kind)
    summary = summarize_traceback(area)
    if summary is None or _says_something(parts.code_lines):
        return None
    return summary


def _last_exception(text: str) -> tuple[str, str, list[str]] | None:
    """The text before ``text``'s first traceback, the exception its last one ended with, and their
    frames; None when it holds none as Python prints one."""
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
    if not _EXCEPTION.match(exception):
        return None
    return text[: headers[0].start()].strip(), exception, frames


def _summarize_group(text: str, start: int) -> list[str] | None:
    """``text`` whose exception group's box starts at ``start``: what came before it, then the ending
    of each part of the box (the group's own traceback, each sub-exception's), in order."""
    segments: list[list[str]] = [text[:start].split("\n")]
    for line in text[start:].split("\n"):
        if _GROUP_HEADER.fullmatch(line):
            segments.append([_HEADER_LINE])
        elif _BOX_RULE.fullmatch(line):
            segments.append([])
        else:
            boxed = _BOXED.fullmatch(line)
            content = boxed.group(1) if boxed is not None else line
            # A group nested in the box prints its header inside it.
            segments[-1].append(_HEADER_LINE if content.strip() == f"Exception Group {_HEADER_LINE}" else content)
    said: list[str] = []
    frames: list[str] = []
    for index, lines in enumerate(segments):
        body = "\n".join(lines)
        if not body.strip():
            continue
        if _HEADER_LINE in body:
            found = _last_exception(body)
            if found is None or (found[0] and index):
                return None  # text inside the box before a traceback: not as Python prints a group
            said += [part for part in found[:2] if part]
            frames += found[2]
        elif index == 0 or _MORE.fullmatch(body.strip()) or _EXCEPTION.match(body.strip()):
            said.append(body.strip())  # the text before the box; a sub-exception never raised has no frames
        else:
            return None
    if _says_something(frames):
        return None
    return said


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
