"""``discover``'s answer: what a ranking found, shaped for the agent, and the bundled catalog APIs
that would serve the request better. One way whether the index ranks the loaded catalogs
(``Gateway.discover``) or the stored ones, read back by the command line (``cli/stored_discover.py``).
Light to import: the command line builds it without the rest of the core.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..discovery import SearchResult, summary_of
from ..discovery.catalog_hints import CatalogHint, CatalogHints, catalog_hint_text
from ..manifest import Manifest
from ..primitives.sanitize import clean_text
from ..vocabulary.model import Action, ActionSummary
from .shown import shown_schema, shown_summary

__all__ = [
    "DETAIL_SCHEMAS",
    "NOTHING_TO_SEARCH",
    "CatalogSuggestion",
    "DiscoverHit",
    "DiscoverResult",
    "catalog_suggestions",
    "discover_limit",
    "discover_result",
    "nothing_to_search",
]

ECHOED_QUERY = 300
"""Characters of the query a result repeats, at most."""

DETAIL_SCHEMAS = 3
"""How many of discover's first results carry their full input schema when asked with ``detail``."""

_FROZEN = ConfigDict(frozen=True)


class DiscoverHit(ActionSummary):
    """One ``discover`` result; the first few carry their full input schema when asked with ``detail``."""

    input_schema: dict[str, Any] | None = None


class CatalogSuggestion(BaseModel):
    """A bundled catalog API that is not configured but would serve the request, and the command an
    operator runs to add it (the gateway never adds one itself)."""

    model_config = _FROZEN
    catalog: str
    name: str
    description: str
    add: str
    """``mcp-gateway add <catalog>``."""


class DiscoverResult(BaseModel):
    """``discover``: the ranked hits, how sure the ranking is, and near-twins to choose between."""

    model_config = _FROZEN
    query: str
    results: list[DiscoverHit]
    confidence: Literal["high", "low"] = "high"
    """``low`` when nothing matches the query well; ``hint`` then says how to ask better."""
    hint: str | None = None
    twins: dict[str, list[str]] | None = None
    """For a result whose object other results act on with another verb (``customers.create`` beside
    ``customers.delete``): those results' names. They are listed next to it, so the agent sees the choice."""
    catalog: list[CatalogSuggestion] | None = None
    """When nothing configured serves the request well and a bundled catalog API does: those APIs, for
    the agent to tell its user an operator can add them."""
    note: str | None = None
    """The connectors not searched because the gateway is still loading them, named."""


def nothing_to_search(query: str) -> bool:
    """Whether ``query`` holds no letter, digit or symbol: whitespace, punctuation and control characters
    alone ("   ", "?", NUL) ask for nothing, and would be answered with whatever ranks first."""
    return not any(unicodedata.category(char)[0] in "LNS" for char in query)


NOTHING_TO_SEARCH = "query has nothing to search: say in words what you want to do, e.g. 'create a github issue'."


def discover_limit(limit: int) -> int:
    """How many hits a ``discover`` asking for ``limit`` may get."""
    return max(1, min(limit, 50))


def catalog_suggestions(
    hints: CatalogHints,
    manifest: Manifest,
    query: str,
    found: SearchResult,
    connector: str | None,
    manifest_file: str | None = None,
    visible: Collection[str] | None = None,
) -> list[CatalogHint]:
    """The bundled catalog APIs not in ``manifest`` that serve ``query`` better than what was found, each
    with the command that adds it to ``manifest_file`` (the file ``manifest`` was read from; None: the
    bundled default). ``visible``: the caller's connectors (the others count as not configured)."""
    if connector is not None:
        return []  # a search inside one connector asks about that connector, not about the catalog
    best = [action for action, _ in found.hits[:3]]
    found_hints = hints.suggest(manifest, query, best, unsure=found.confidence == "low", visible=visible)
    return [dataclasses.replace(hint, manifest=manifest_file) for hint in found_hints]


def discover_result(
    query: str,
    found: SearchResult,
    *,
    needs_approval: Callable[[Action], bool],
    needs_auth: Mapping[str, bool],
    hints: Sequence[CatalogHint] = (),
    detail: bool = False,
    loading: Sequence[str] = (),
) -> DiscoverResult:
    """``found`` as the agent reads it. ``needs_approval``: whether a call of the action with no
    arguments asks a human; ``needs_auth``: by connector of the hits, whether it waits for a credential.
    With ``detail``, the first few hits carry their full input schema. ``loading``: the connectors the
    search could not see yet, named in ``note``."""
    results: list[DiscoverHit] = []
    for rank, (action, score) in enumerate(found.hits):
        props = action.input_schema.get("properties") or {}
        required = [name for name in action.input_schema.get("required") or [] if isinstance(name, str)]
        results.append(
            DiscoverHit(
                name=action.qualified_name,
                summary=shown_summary(summary_of(action)),
                risk=action.risk,
                needs_approval=needs_approval(action),
                needs_auth=needs_auth[action.connector],
                # The required ones first: they are what a call cannot do without.
                params=[*required, *(name for name in props if name not in required)][:12],
                required=required,
                score=round(score, 3),
                input_schema=shown_schema(action.input_schema) if detail and rank < DETAIL_SCHEMAS else None,
            )
        )
    return DiscoverResult(
        # The agent has its query: a long one (a pasted message, up to 8,000 characters) comes back cut.
        # Cleaned as any text the model reads: control, bidi and tag characters an agent passed on
        # (from a pasted message) do not come back raw.
        query=clean_text(query if len(query) <= ECHOED_QUERY else query[: ECHOED_QUERY - 1] + "…"),
        results=results,
        # A catalog API serving the request better says what is configured does not: unsure, as the hint says.
        confidence="low" if hints else found.confidence,
        hint=catalog_hint_text(list(hints), found.hint),
        twins=found.twins or None,
        catalog=[CatalogSuggestion(**h.payload()) for h in hints] or None,
        note=_loading_note(loading),
    )


def _loading_note(loading: Sequence[str]) -> str | None:
    if not loading:
        return None
    named = ", ".join(loading[:20]) + (f" and {len(loading) - 20} more" if len(loading) > 20 else "")
    return f"Not searched yet, still loading: {named}. Discover again in a moment to search their actions too."
