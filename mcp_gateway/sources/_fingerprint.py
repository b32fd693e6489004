"""Change fingerprints of a connector's source.

A source is re-normalized only when its content changes: the fingerprint covers the bytes of
every file the normalizer read (the spec and its relative-file ``$ref`` targets), the connector's
settings that shape actions, and the normalizer's version, so restarting on an unchanged spec
only reads the stored catalog back.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..manifest import ConnectorConfig, OpenAPISource, PostmanSource
from ..primitives.file_kinds import not_a_file

if TYPE_CHECKING:
    from .base import Normalized

__all__ = ["NORMALIZER_VERSION", "current_fingerprint", "file_fingerprint", "reuse", "settings_digest"]

NORMALIZER_VERSION = "11"
"""Part of every fingerprint: a new value makes the next sync normalize every catalog again and store
it anew. 4: catalogs are stored one action a line (``store/catalog_lines.py``), which the command
line's ``discover`` needs to answer from the stored state; rows of earlier builds are rewritten.
5: acronyms are one word in names (``list_redirect_urls``) and operations without a name of their own
are named verb first (``list_deployment_builds``), their earlier names kept as aliases. 6: a URL's
leading bare number is a version, a GET on a collection URL lists (``list_setup_flows``), a shared or
``By<Param>``-padded operationId names no operation, as ``_naming`` says. 8: an OpenAPI parameter keeps
its ``style`` and a multipart body its fields' files and content types (``sources/_param_styles.py``).
9: an MCP tool's name outside ASCII keeps its Latin reading and a digest of the whole (``sources/mcp.py``).
10: such a tool's own name is an alias of its action and opens its summary. 11: an OpenAPI body that
is neither JSON nor a form (``text/plain``, ``application/octet-stream``) is sent raw with its media type,
and an ASCII MCP tool name its path spells otherwise (``Files/Read.v2``) is an alias too."""


def settings_digest(cfg: ConnectorConfig) -> str:
    """A digest of the connector settings that shape its actions."""
    shaping = {
        "v": NORMALIZER_VERSION,
        "slug": cfg.slug,
        "risk": cfg.risk,
        "source": cfg.source.model_dump(mode="json") if cfg.source else None,
        # Postman and OpenAPI drop the parameters the connector's auth writes: it shapes actions too.
        "auth": cfg.auth.model_dump(mode="json") if isinstance(cfg.source, PostmanSource | OpenAPISource) else None,
        "request_action": cfg.request_action,
        "trust_annotations": cfg.trust_annotations,
    }
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()


def _files_digest(files: list[str]) -> str | None:
    h = hashlib.sha256()
    for f in files:
        try:
            if not_a_file(Path(f)) is not None:  # reading a named pipe or a device would never end
                return None
            h.update(f.encode() + b"\0" + Path(f).read_bytes() + b"\0")
        except OSError:
            return None
    return h.hexdigest()


def current_fingerprint(cfg: ConnectorConfig, files: list[str]) -> str | None:
    """The fingerprint ``files`` and ``cfg``'s settings have now; None when a file cannot be read.
    ``cli/listing.py`` compares it with a stored one, as ``reuse`` does, without decoding the catalog."""
    files_digest = _files_digest(files)
    return None if files_digest is None else f"{settings_digest(cfg)}:{files_digest}"


async def file_fingerprint(cfg: ConnectorConfig, files: list[str], *, fallback: str) -> str:
    """The settings and the bytes of ``files`` (read in a worker thread); when there are no files
    or one cannot be read, the settings digest followed by ``:<fallback>``."""
    import anyio.to_thread  # here: the command line's listings read fingerprints without an event loop

    fp = await anyio.to_thread.run_sync(current_fingerprint, cfg, files) if files else None
    return fp or f"{settings_digest(cfg)}:{fallback}"


async def reuse(cfg: ConnectorConfig, cached: Normalized | None, resolved: str) -> Normalized | None:
    """The stored catalog, when it came from this same local file and nothing that shapes it changed."""
    if resolved.startswith(("http://", "https://")) or cached is None or not cached.files:
        return None
    if cached.files[0] != resolved:
        return None
    import anyio.to_thread

    fp = await anyio.to_thread.run_sync(current_fingerprint, cfg, cached.files)
    if fp is None or fp != cached.fingerprint:
        return None
    return cached
