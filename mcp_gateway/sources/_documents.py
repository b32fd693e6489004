"""Reading API description documents: JSON or YAML, from a file or an http(s) URL.

Every expected failure (missing file, bad encoding, truncated JSON, YAML syntax error, an HTTP
error) becomes a ``SourceError`` that names the file or URL, says what is wrong and what to do;
the connector then gets ``status=error`` and the other connectors load.

Gzip is detected by its magic bytes, not the file name, so ``spec.json.gz`` and a server that
sends gzip bytes without ``Content-Encoding`` both work. The format is chosen from the name
(``.json`` / ``.yaml`` / ``.yml``, ignoring ``.gz``) or the content type, else sniffed: JSON is
tried first because it is much faster to parse than YAML and gives exact positions.
"""

from __future__ import annotations

import gzip
import json
import ssl
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx2
import yaml

from ..manifest.validation import url_problem
from ..policy.review import origin_of
from ..primitives.file_kinds import not_a_file
from ..primitives.upstream_text import screen
from ..primitives.url_secrets import shown_url
from ..vocabulary.errors import SourceError

__all__ = ["MAX_REMOTE_BYTES", "document_trust", "fetch_document", "is_url", "parse_document", "read_document"]

MAX_REMOTE_BYTES = 64 * 1024 * 1024
"""A remote document larger than this is refused: specs are a few MB, a bigger answer is a mistake."""

_GZIP_MAGIC = b"\x1f\x8b"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


class _SpecLoader(yaml.CSafeLoader):
    """Safe YAML without timestamps: ``default: 2020-01-01`` must stay a string to remain JSON Schema."""


_SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.CSafeLoader.yaml_implicit_resolvers.items()
}


def is_url(ref: str) -> bool:
    return ref.startswith(("http://", "https://"))


def _format_of(name: str, content_type: str = "") -> str | None:
    lowered = name.lower().split("?", 1)[0].removesuffix(".gz")
    if lowered.endswith(".json") or "json" in content_type:
        return "json"
    if lowered.endswith((".yaml", ".yml")) or "yaml" in content_type:
        return "yaml"
    return None


def _parse_json(text: str, name: str, kind: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # Python's messages end in "at" before a position it leaves out ("Unterminated string starting at").
        problem = exc.msg.removesuffix(" at")
        # A string left open runs to the end of the text: a cut inside a string is truncation too.
        if exc.msg.startswith("Unterminated string"):
            where = f"inside a string that starts at line {exc.lineno}, column {exc.colno}"
        elif not text[exc.pos :].strip():
            where = f"at line {exc.lineno}, column {exc.colno} ({problem})"
        else:
            where = ""
        if where:
            raise SourceError(
                f"{name}: the JSON ends early {where}; the file looks truncated. Download or copy it again."
            ) from None
        raise SourceError(
            f"{name}: not valid JSON at line {exc.lineno}, column {exc.colno}: {problem}. "
            f"Fix the file or point the source at a valid {kind}."
        ) from None


def _parse_yaml(text: str, name: str) -> Any:
    try:
        return yaml.load(text, Loader=_SpecLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        # The parser quotes the document (a fetched one is the server's text): screened like any upstream text.
        problem = screen(getattr(exc, "problem", None) or str(exc).splitlines()[0]).for_agent()
        fix = (
            "Remove the tag: only plain YAML is read, so tags such as !!python/object are not allowed."
            if isinstance(exc, yaml.constructor.ConstructorError)
            else "Check indentation and quoting around that line."
        )
        raise SourceError(f"{name}: not valid YAML{where}: {problem}. {fix}") from None


def parse_document(data: bytes, *, name: str, content_type: str = "", kind: str = "OpenAPI document") -> Any:
    """Decode and parse one document's bytes.

    Args:
        data: the raw bytes, possibly gzipped.
        name: the file path or URL, used to pick the format and in error messages.
        content_type: the HTTP ``Content-Type`` when the bytes came from a URL.
        kind: what the document should be ("Postman collection"), named in the fixes.

    Raises:
        SourceError: the bytes are not valid gzip, UTF-8, JSON or YAML.
    """
    if data.startswith(_GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise SourceError(f"{name}: the gzip data is corrupt or truncated ({exc}). Download it again.") from None
    if data.startswith(_UTF16_BOMS):
        # JSON is UTF-8 (RFC 8259), and every reader here takes UTF-8 only: one encoding, said once.
        raise SourceError(f"{name}: the file is UTF-16 text; save it as UTF-8 (JSON and YAML specs are read as UTF-8).")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(
            f"{name}: not UTF-8 text (bad byte at offset {exc.start}); is this really a {kind}? "
            "If it is, save it as UTF-8."
        ) from None
    if not text.strip():
        raise SourceError(f"{name}: the document is empty. Point the source at a {kind}.")
    fmt = _format_of(name, content_type)
    if fmt == "json" or (fmt is None and text.lstrip()[:1] in ("{", "[")):
        return _parse_json(text, name, kind)
    return _parse_yaml(text, name)


def read_document(path: Path, *, kind: str = "OpenAPI document") -> Any:
    """Read and parse a local JSON or YAML (optionally gzipped) document; ``kind`` is as in ``parse_document``.

    Raises:
        SourceError: the file cannot be read or parsed.
    """
    try:
        special = not_a_file(path)
        if special is not None:
            raise SourceError(f"{path}: is {special}, not a spec file. Point the source at the JSON or YAML file.")
        data = path.read_bytes()
    except FileNotFoundError:
        raise SourceError(
            f"{path}: no such file. Check the source path (relative paths resolve against the manifest)."
        ) from None
    except OSError as exc:
        raise SourceError(f"{path}: cannot read the file ({exc.strerror}). Check its permissions.") from None
    return parse_document(data, name=str(path), kind=kind)


def document_trust(cafile: str, written: str) -> ssl.SSLContext:
    """The trust a connector's description is fetched with when the connector names a CA file
    (``written``, as the manifest spells it; ``cafile``, resolved): the system's store, as for any
    spec, and that file's CAs besides. A spec served by the connector's own host behind a private CA
    needs the CA; one served from a public host (a GitHub raw URL) still needs the system's store;
    and the fetch carries no credential, so trusting both lets nothing more reach a secret.

    Raises:
        SourceError: the file cannot be read or holds no PEM certificate.
    """
    context = httpx2.create_ssl_context(trust_env=False)
    try:
        context.load_verify_locations(cafile=cafile)
    except OSError as exc:  # SSLError is an OSError: a file that is not PEM
        why = getattr(exc, "reason", None) or exc.strerror or "unreadable"
        raise SourceError(
            f"the connector's tls.ca_file {written!r} cannot be used ({why}); point it at a readable PEM file of "
            "CA certificates"
        ) from None
    return context


async def fetch_document(
    url: str,
    client: httpx2.AsyncClient | None = None,
    *,
    origin: str | None = None,
    kind: str = "OpenAPI document",
    verify: ssl.SSLContext | None = None,
) -> Any:
    """Download and parse a document from an http(s) URL.

    Args:
        url: the document's URL (any ``#fragment`` is ignored).
        client: the HTTP client to use; a short-lived one is created when None.
        origin: when given (``scheme://host[:port]``), the document must be served from it: a
            redirect elsewhere is refused before it is followed.
        kind: what the document should be, as in ``parse_document``.
        verify: the trust of the short-lived client (``document_trust``); None: the system's store.

    Raises:
        SourceError: the request fails, the status is not 2xx, the body is too large or unparsable,
            or a redirect leaves ``origin``.
    """
    url = url.split("#", 1)[0]
    if client is None:
        async with httpx2.AsyncClient(
            follow_redirects=origin is None, timeout=30.0, verify=True if verify is None else verify
        ) as own:
            return await _fetch(own, url, origin, kind)
    return await _fetch(client, url, origin, kind)


_MAX_REDIRECTS = 10


async def _fetch(client: httpx2.AsyncClient, url: str, origin: str | None, kind: str) -> Any:
    # Messages quote the URL as ``shown_url`` shows it: an operator may have put a password or a token in it,
    # and a connector's error reaches the terminal, the log and the agent.
    first = url
    try:
        for _ in range(_MAX_REDIRECTS):
            if (problem := url_problem(url)) is not None:  # the client would fail deep inside, with a traceback
                raise SourceError(f"{shown_url(url)}: the URL is not valid: it {problem[0]}; {problem[1]}")
            async with client.stream(
                "GET",
                url,
                headers={"Accept": "application/json, application/yaml, */*"},
                # Redirects are followed here, one by one, when they must stay on ``origin``.
                follow_redirects=httpx2.USE_CLIENT_DEFAULT if origin is None else False,
            ) as resp:
                location = resp.headers.get("location")
                if origin is not None and resp.is_redirect and location:
                    url = urljoin(url, location)
                    if origin_of(url) != origin:
                        raise SourceError(
                            f"{shown_url(first)}: the server redirects to another origin "
                            f"({origin_of(url) or shown_url(url)}) than the spec's own ({origin}); a referenced "
                            "document is read only from the spec's origin. Download it beside the spec and refer to "
                            "it by a relative path."
                        )
                    continue
                if resp.status_code >= 400:
                    raise SourceError(
                        f"{shown_url(url)}: the server answered HTTP {resp.status_code}. Check the URL, or download "
                        "the spec and point the source at the file."
                    )
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_REMOTE_BYTES:
                        raise SourceError(
                            f"{shown_url(url)}: the document is larger than {MAX_REMOTE_BYTES // (1024 * 1024)} MB. "
                            "Download it and point the source at the file."
                        )
                    chunks.append(chunk)
                content_type = resp.headers.get("content-type", "")
                return parse_document(b"".join(chunks), name=shown_url(url), content_type=content_type, kind=kind)
    except httpx2.TimeoutException:
        raise SourceError(
            f"{shown_url(url)}: timed out while downloading the spec. Retry, or use a local copy."
        ) from None
    except httpx2.HTTPError as exc:
        untrusted = _untrusted(exc)
        if untrusted is not None:
            raise SourceError(
                f"{shown_url(url)}: its TLS certificate is not trusted ({untrusted}); if the server uses a private CA, "
                "set the connector's tls.ca_file to that CA's PEM file"
            ) from None
        said = screen(str(exc).replace(url, shown_url(url))).for_agent()
        raise SourceError(
            f"{shown_url(url)}: cannot download the spec ({type(exc).__name__}: {said}). Check the URL and network."
        ) from None
    raise SourceError(f"{shown_url(first)}: more than {_MAX_REDIRECTS} redirects. Check the URL, or use a local copy.")


def _untrusted(exc: BaseException) -> str | None:
    """The certificate's complaint when ``exc`` came of a server certificate not trusted, else None."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 16:
        if isinstance(current, ssl.SSLCertVerificationError):
            return current.verify_message or current.reason or "certificate verify failed"
        seen.append(current)
        current = current.__cause__ or current.__context__
    return None
