"""Upstream MCP servers as a source: their ``tools/list`` becomes catalog actions.

Listing needs a live session, which the MCP executor's pool owns (``execution/mcp_sessions.py``); sync
asks it through the ``ToolLister`` protocol and normalizes what comes back here, without I/O.

**Action paths.** A tool's name is split into segments at ``.`` and ``/`` (the usual namespace
separators: ``files/read``, ``github.issues.create``); each segment is snake_cased like an
OpenAPI ``operationId`` part (camelCase split, ``-``, spaces and punctuation become ``_``); empty
segments are dropped; a path starting with a digit gets an ``n`` prefix; a name with nothing
left becomes ``tool``. A name that is not plain ASCII keeps what reads as Latin (accents and
compatibility forms undone: ``café`` -> ``cafe``) and ends in ``_`` and 8 hex digits of its digest
(``名前`` -> ``tool_7ec26292``), so its path is stable and never another tool's, nor a look-alike of
it; its own name stays an alias of the action and opens its summary. Names that fold alike keep
the path for the one already spelled so; the others get ``_2``, ``_3`` in name order, never listing
order (``_action_paths``). So ``get-sum`` -> ``get_sum``,
``Files/Read.v2`` -> ``files.read.v2``, ``getTinyImage`` -> ``get_tiny_image``.
The binding keeps the tool's own name, which is what the upstream is called with, and a name its path
spells otherwise stays an alias of the action (an agent may use the name the server gives it).

**Risk** comes from the tool's annotations when the connector trusts them
(``trust_annotations: true``, the default): ``destructiveHint`` -> destructive, else
``readOnlyHint`` -> read, else write. An untrusted upstream's tools are all write. Annotations lower
a risk only where an operator sees them before the tool is used (``trust: review``: the risk is part
of the snapshot approved) or chose to believe them (``trust: auto``); under ``trust: pinned`` a tool
marked read-only whose name, title or description speaks of deleting, sending, paying … gets the
risk of those words (``review.worded_risk``) instead. A manifest ``risk:`` override (by action
path) wins either way.

**Fingerprint.** ``tools_digest`` hashes the listing itself (canonical JSON of every tool), so an
unchanged server re-syncs without re-indexing and a changed one is picked up by the next sync.
"""

from __future__ import annotations

import hashlib
import json
import logging
import unicodedata
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import httpx2

from ..manifest import ConnectorConfig
from ..policy.review import Trust, worded_risk
from ..policy.schema_patterns import risky_patterns
from ..primitives.escapes import escaped
from ..vocabulary.errors import SourceError
from ..vocabulary.model import Action, McpBinding, Risk
from ._fingerprint import settings_digest
from ._naming import snake_case, unique_name
from .base import LoadContext, Normalized

if TYPE_CHECKING:  # the SDK's types cost a noticeable import; nothing here needs them at run time
    import mcp_types as types

logger = logging.getLogger(__name__)

__all__ = [
    "McpLoader",
    "McpTools",
    "ToolLister",
    "listing_of",
    "mcp_action_path",
    "normalize_mcp_tools",
    "tools_digest",
]

_MAX_SUMMARY = 300
_MAX_DESCRIPTION = 2000
_MAX_NAME_SHOWN = 100
_EMPTY_SCHEMA = {"type": "object", "properties": {}}

McpTools = Callable[[ConnectorConfig], Awaitable[Sequence["types.Tool"]]]
"""Lists an MCP connector's tools (``Gateway`` binds it to the MCP executor's pool and the credential)."""


@runtime_checkable
class ToolLister(Protocol):
    """Something that can list an upstream MCP server's tools (the MCP executor's session pool)."""

    async def list_tools(self, connector: ConnectorConfig, *, auth: httpx2.Auth) -> list[types.Tool]:
        """Every tool of the connector's server, all pages. Raises ``UpstreamError`` when the
        server cannot be reached, started or understood, with a message naming what to fix."""
        ...


def mcp_action_path(tool_name: str) -> str:
    """The action path for a tool name, before collisions are resolved (rule in the module docstring)."""
    latin = _latin(tool_name)
    parts = [p for p in (snake_case(seg) for seg in latin.replace("/", ".").split(".")) if p]
    name = ".".join(parts) or "tool"
    name = f"n{name}" if name[0].isdigit() else name
    if not tool_name.isascii():
        # Letters with no Latin reading (Chinese, Cyrillic, Greek, Arabic, emoji) would be dropped, leaving
        # ``tool`` or a look-alike of another tool's name (``dеlete`` with a Cyrillic "е", full-width
        # ``ａｄｍｉｎ`` read as ``admin``): a digest of the whole name keeps each one stable and apart.
        digest = hashlib.sha256(tool_name.encode()).hexdigest()[:8]
        name = f"{name[: MAX_PATH_CHARS - 9].rstrip('._')}_{digest}"
    if len(name) > MAX_PATH_CHARS:
        # A name of thousands of characters would fill every answer that lists it: cut, and kept apart
        # from another cut the same way by a digest of the whole name.
        digest = hashlib.sha256(tool_name.encode()).hexdigest()[:8]
        name = f"{name[: MAX_PATH_CHARS - 9].rstrip('._')}_{digest}"
    return name


MAX_PATH_CHARS = 120
"""The longest action path an MCP tool's name gives (the binding keeps the whole name)."""


def _latin(tool_name: str) -> str:
    """``tool_name`` with its Latin letters' accents and compatibility forms undone (``ünïcödé`` ->
    ``unicode``); letters of other scripts are left as they are."""
    decomposed = unicodedata.normalize("NFKD", tool_name)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def tool_risk(tool: types.Tool, *, trust_annotations: bool, trust: Trust = "pinned") -> Risk:
    """The risk a tool's annotations declare, or ``write`` when they are absent or not trusted; under
    ``trust: pinned``, a read-only hint yields to what the tool's words say (module docstring)."""
    hints = tool.annotations
    if not trust_annotations or hints is None:
        declared: Risk = "write"
    elif hints.destructive_hint is True:
        declared = "destructive"
    elif hints.read_only_hint is True:
        declared = "read"
    else:
        declared = "write"
    if trust != "pinned" or declared != "read":
        return declared
    title = tool.title or (hints.title if hints else None) or ""
    worded = worded_risk((tool.name,), (title, tool.description or ""))
    return declared if worded is None else worded[0]


def normalize_mcp_tools(
    connector: str,
    tools: Sequence[types.Tool],
    *,
    trust_annotations: bool = True,
    risk_overrides: Mapping[str, Risk] | None = None,
    trust: Trust = "pinned",
) -> list[Action]:
    """One action per tool, in listing order. A tool name listed twice keeps its first entry.
    ``trust`` is the connector's (``ConnectorConfig.effective_trust``): it decides how far the
    tools' annotations may lower their risk."""
    overrides = risk_overrides or {}
    paths = _action_paths(tools)
    actions: list[Action] = []
    for tool in tools:
        if tool.name not in paths:
            continue
        path = paths.pop(tool.name)
        if tool.output_schema and (risky := risky_patterns(tool.output_schema, limit=1)):
            # The MCP client checks every result against the output schema, with a backtracking regex
            # engine on the event loop: one such pattern and a crafted result stall the whole gateway.
            logger.warning(
                "connector %s: tool %s is left out: its output schema's pattern %s could take minutes to "
                "check against a result; ask its maintainers for a pattern without nested repeats",
                connector,
                escaped(tool.name[:200]),
                escaped(repr(risky[0][:200])),
            )
            continue
        description = (tool.description or "").strip()
        actions.append(
            Action(
                connector=connector,
                path=path,
                summary=_summary(tool, description),
                # A name the path spells otherwise (``Files/Read.v2`` -> ``files.read.v2``, ``名前`` ->
                # ``tool_7ec26292``): the name the server and its users know still resolves, in ``describe``,
                # ``call`` and a rule's ``match``.
                aliases=(tool.name,) if tool.name != path else (),
                description=description[:_MAX_DESCRIPTION],
                input_schema=_schema(tool.input_schema),
                risk=overrides.get(path) or tool_risk(tool, trust_annotations=trust_annotations, trust=trust),
                binding=McpBinding(tool=tool.name),
                group=(tool.title or (tool.annotations.title if tool.annotations else None) or "")[:100],
            )
        )
    return actions


def _action_paths(tools: Sequence[types.Tool]) -> dict[str, str]:
    """Each tool name's action path. Names that fold alike get their suffixes by the names
    themselves, never by listing order: the one already spelled as its path keeps it, the others
    take ``_2``, ``_3``… in name order. A server listing the same tools in another order (from a set
    or a hash map) would otherwise move a name, and the rules and approvals written for it, to
    another tool."""
    folded = {tool.name: mcp_action_path(tool.name) for tool in tools}
    taken: set[str] = set()
    return {
        name: unique_name(path, taken)
        for name, path in sorted(folded.items(), key=lambda item: (item[1], item[0] != item[1], item[0]))
    }


def listing_of(fingerprint: str | None) -> str | None:
    """The ``tools_digest`` an MCP connector's catalog fingerprint (``McpLoader``) holds, or None."""
    return fingerprint.rpartition(":")[2] if fingerprint and ":" in fingerprint else None


def tools_digest(tools: Sequence[types.Tool]) -> str:
    """A stable hash of a ``tools/list`` result, whatever its order: a server that lists its tools in
    another order each time it starts (from a set or a hash map) has not changed them."""
    ordered = sorted(tools, key=lambda t: t.name)  # stable: a name listed twice keeps its first entry
    canonical = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in ordered]
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _summary(tool: types.Tool, description: str) -> str:
    title = tool.title or (tool.annotations.title if tool.annotations else None)
    first = next((line.strip() for line in description.splitlines() if line.strip()), "")
    text = title or first or tool.name
    if title and first and first.lower() != title.lower():
        text = f"{title}: {first}"
    if not tool.name.isascii() and not text.startswith(tool.name):
        # Its path keeps only what reads as Latin: the summary says which tool it is by the name it has.
        text = f"{tool.name[:_MAX_NAME_SHOWN]}: {text}"
    return text if len(text) <= _MAX_SUMMARY else text[: _MAX_SUMMARY - 1] + "…"


def _schema(schema: object) -> dict[str, object]:
    # Kept as the upstream gives it; only a missing or non-object schema is replaced, since the gateway
    # validates arguments against it and a call's arguments are always a JSON object.
    if isinstance(schema, dict) and schema:
        return dict(schema)
    return dict(_EMPTY_SCHEMA)


@dataclass(frozen=True)
class McpLoader:
    """``source: {mcp: ...}`` as a ``Source``: the server's live ``tools/list``, through ``list_tools``
    (None when the gateway runs without an MCP client); fingerprinted by the listing itself."""

    list_tools: McpTools | None

    async def load(self, cfg: ConnectorConfig, ctx: LoadContext) -> Normalized:
        if self.list_tools is None:
            raise SourceError("this gateway was started without an MCP client, so MCP connectors cannot load")
        tools = await self.list_tools(cfg)
        trust = cfg.effective_trust  # it shapes the risks: a change of trust normalizes again
        fingerprint = f"{settings_digest(cfg)}:{trust}:{tools_digest(tools)}"  # the digest last: ``listing_of``
        if ctx.cached is not None and ctx.cached.fingerprint == fingerprint:
            return Normalized(ctx.cached.actions, None, fingerprint, [])
        actions = normalize_mcp_tools(
            cfg.slug, tools, trust_annotations=cfg.trust_annotations, risk_overrides=cfg.risk, trust=trust
        )
        return Normalized(actions, None, fingerprint, [])
