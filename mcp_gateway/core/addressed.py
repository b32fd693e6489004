"""What a generic request addresses: the path its rules judge, and the catalog actions it reaches.

A call of ``<slug>.request`` is judged as the request the gateway sends, not as the text the agent
typed: ``request_path`` is the built URL's path below ``base_url`` (dot segments resolved, unreserved
characters percent-decoded, a leading ``/``), and ``addressed`` lists the connector's curated HTTP
actions whose method and path template that request matches, each with the arguments a direct
call of it would have carried, so their rules (a ``block``, a ``when``) apply to it too.

Matching leans wide on purpose: a wider match can only add a stricter verdict. The path is compared
fully percent-decoded, without ``;params``, empty segments or a trailing ``/``, and ignoring case
(servers differ on each); ``HEAD`` and ``OPTIONS`` address whatever action sits at the path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qsl, unquote

import httpx2

from ..execution.http_request import decoded_path
from ..vocabulary.model import Action, HttpBinding, OpenAPIBinding, PostmanBinding

__all__ = ["addressed", "request_path"]

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_PLACEHOLDER = re.compile(r"\{([^{}/]+)\}")
_ANY_METHOD = frozenset({"HEAD", "OPTIONS"})
_FORM = "application/x-www-form-urlencoded"


def request_path(url: httpx2.URL, base_url: str) -> str:
    """The path ``url`` sends, below ``base_url``'s path when it is there, as a rule's ``path``
    condition judges it: unreserved characters percent-decoded, dot segments resolved, a leading ``/``."""
    path = _normalized(url.raw_path.decode("ascii").partition("?")[0])
    base = _normalized(httpx2.URL(base_url).raw_path.decode("ascii").partition("?")[0]).rstrip("/")
    if base and (path == base or path.startswith(base + "/")):
        path = path[len(base) :] or "/"
    return path


def _normalized(raw: str) -> str:
    decoded = _ESCAPE.sub(lambda m: chr(int(m[1], 16)) if chr(int(m[1], 16)) in _UNRESERVED else m[0].upper(), raw)
    segments = decoded.removeprefix("/").split("/")
    out: list[str] = []
    for segment in segments:
        if segment in (".", ".."):
            if segment == ".." and out:  # refused when the request is built; resolved here all the same
                out.pop()
            continue
        out.append(segment)
    if segments[-1] in (".", ".."):
        out.append("")  # "/a/." is the directory "/a/"
    return "/" + "/".join(out)


def addressed(actions: Iterable[Action], request: httpx2.Request, path: str) -> list[tuple[Action, dict[str, Any]]]:
    """The curated HTTP actions among ``actions`` that ``request`` (whose ``request_path`` is ``path``)
    reaches, each with the arguments a direct call would have carried."""
    loose = _loose(path)
    method = request.method.upper()
    found: list[tuple[Action, dict[str, Any]]] = []
    for action in actions:
        binding = action.binding
        if not isinstance(binding, OpenAPIBinding | HttpBinding | PostmanBinding):
            continue
        if method not in _ANY_METHOD and binding.method.upper() != method:
            continue
        captured = _template(binding.url)[0].fullmatch(loose)
        if captured is None:
            continue
        found.append((action, _arguments(binding, captured.groupdict(), request)))
    return found


def _loose(path: str) -> str:
    """``path`` as the widest reading of servers on the way: fully decoded, ``;params`` cut, no empty
    segments or trailing ``/``."""
    try:
        text = decoded_path(path)
    except ValueError:
        text = unquote(path)
    segments = [s.split(";", 1)[0] for s in text.split("/")]
    return "/" + "/".join(s for s in segments if s)


@lru_cache(maxsize=4096)
def _template(url: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """A path template as a pattern (each ``{name}`` one segment, the n-th in group ``gn``), and the names."""
    template = url.partition("?")[0]
    parts: list[str] = []
    names: list[str] = []
    position = 0
    for match in _PLACEHOLDER.finditer(template):
        parts.append(re.escape(template[position : match.start()]))
        parts.append(f"(?P<g{len(names)}>[^/]+)")
        names.append(match[1])
        position = match.end()
    parts.append(re.escape(template[position:]))
    body = "/" + "/".join(s for s in "".join(parts).split("/") if s)
    return re.compile(body, re.IGNORECASE | re.DOTALL), tuple(names)


def _arguments(
    binding: OpenAPIBinding | HttpBinding | PostmanBinding, groups: Mapping[str, str], request: httpx2.Request
) -> dict[str, Any]:
    """The request's path values, query parameters and body fields, under the names the action's own
    arguments have."""
    _, names = _template(binding.url)
    by_wire = {(spec.location, spec.on_wire): spec.name for spec in binding.params}
    args: dict[str, Any] = {}
    for group, value in groups.items():
        wire = names[int(group[1:])]
        args[by_wire.get(("path", wire), wire)] = value
    query: dict[str, list[str]] = {}
    for key, value in parse_qsl(request.url.query.decode("ascii", "replace"), keep_blank_values=True):
        name = by_wire.get(("query", key))
        if name is not None:
            query.setdefault(name, []).append(value)
    # One value as itself, several as the list a condition judges element by element.
    args.update({name: values[0] if len(values) == 1 else values for name, values in query.items()})
    body = _body(request)
    if binding.body_param is not None and body is not None:
        args[binding.body_param] = body
    elif isinstance(body, Mapping):
        for key, value in body.items():
            args.setdefault(by_wire.get(("body", str(key)), str(key)), value)
    return args


def _body(request: httpx2.Request) -> Any:
    content = request.content
    if not content:
        return None
    content_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    text = content.decode("utf-8", "replace")
    if content_type == _FORM:
        return dict(parse_qsl(text, keep_blank_values=True))
    try:
        return json.loads(text)
    except ValueError:
        return text
