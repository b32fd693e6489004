"""What an agent is shown: the JSON a result model becomes, and upstream text cleaned and capped.

Apart from ``results`` (which also redacts upstream outcomes, and so needs the execution layer)
because the command line's stored-state answers shape their results with these too, and start
without that layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from ..primitives.sanitize import MAX_DESCRIPTION_CHARS, MAX_TITLE_CHARS, clean_json, clean_text

__all__ = ["result_payload", "shown_description", "shown_schema", "shown_summary"]


def result_payload(result: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """The JSON object a meta-tool returns (structured content)."""
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", exclude_none=True)
    return dict(result)


def shown_summary(summary: str) -> str:
    """An action's summary as an agent sees it: no invisible characters, capped."""
    return clean_text(summary, max_chars=MAX_TITLE_CHARS)


def shown_description(text: str) -> str:
    return clean_text(text, max_chars=MAX_DESCRIPTION_CHARS)


def shown_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An input schema with its strings (descriptions, titles, enums, names) cleaned."""
    cleaned = clean_json(schema, max_string_chars=MAX_DESCRIPTION_CHARS)
    return cleaned if isinstance(cleaned, dict) else dict(schema)
