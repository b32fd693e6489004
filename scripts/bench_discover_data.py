"""The real APIs the discovery benchmarks search, loaded through the gateway's own normalizers.

Every catalog here comes from a real, unmodified API description in ``tests/data`` (see its
SOURCES.md) and goes through the same source code a connector's sync uses (``sources.openapi``,
``sources.postman``, ``sources.graphql``, ``sources.mcp``): no private mini-normalizer, so what the
benchmark ranks is what ``discover`` ranks.

``API_LOADERS`` maps a connector slug to a loader; ``load_intent_sets`` reads
``tests/data/intents/*.json`` (one file per set, each row ``{"intent", "actions", "split"}``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

from mcp_gateway.vocabulary.model import Action

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
INTENTS_DIR = REPO / "tests" / "data" / "intents"
OPENAPI_SPECS = {
    "github": DATA / "openapi" / "github" / "api.github.com.json.gz",
    "stripe": DATA / "openapi" / "stripe" / "spec3.json",
    "slack": DATA / "openapi" / "slack" / "slack_web_openapi_v2.json",
}
"""The three large OpenAPI descriptions the index and speed tests replicate (GitHub, Stripe, Slack)."""

__all__ = [
    "API_LOADERS",
    "DATA",
    "INTENTS_DIR",
    "OPENAPI_SPECS",
    "IntentRow",
    "catalog",
    "load_intent_sets",
    "split_of",
]


def _json(path: Path) -> Any:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            return json.load(handle)
    from mcp_gateway.sources._documents import read_document

    return read_document(path)


def openapi(relative: str, slug: str) -> list[Action]:
    from mcp_gateway.sources.openapi import normalize_openapi

    path = DATA / "openapi" / relative
    return list(normalize_openapi(_json(path), connector=slug, source_file=path).actions)


def postman(relative: str, slug: str) -> list[Action]:
    from mcp_gateway.sources.postman import normalize_postman

    path = DATA / "postman" / relative
    return list(normalize_postman(_json(path), connector=slug, label=str(path)).actions)


def graphql(relative: str, slug: str) -> list[Action]:
    from mcp_gateway.sources.graphql import normalize_graphql, read_schema

    return normalize_graphql(read_schema(str(DATA / "graphql" / relative)), connector=slug)


def mcp_tools(slug: str, tools: Iterable[dict[str, Any]]) -> list[Action]:
    """MCP ``tools/list`` entries (or function-calling schemas of that shape) as the MCP source normalizes them."""
    from mcp import types

    from mcp_gateway.sources.mcp import normalize_mcp_tools

    return normalize_mcp_tools(slug, [types.Tool.model_validate(tool) for tool in tools])


def mcp_file(name: str, slug: str) -> list[Action]:
    listing = _json(DATA / "mcp" / f"{name}.tools-list.json")
    return mcp_tools(slug, listing["result"]["tools"])


API_LOADERS: dict[str, Callable[[], list[Action]]] = {
    "github": lambda: openapi("github/api.github.com.json.gz", "github"),
    "stripe": lambda: openapi("stripe/spec3.json", "stripe"),
    "slack": lambda: openapi("slack/slack_web_openapi_v2.json", "slack"),
    "notion": lambda: openapi("notion/notion-openapi.json", "notion"),
    "nytimes": lambda: openapi("nytimes/books_api.json", "nytimes"),
    "realworld": lambda: openapi("realworld/openapi.yml", "realworld"),
    "conduit": lambda: postman("realworld/Conduit.postman_collection.json", "conduit"),
    "petstore": lambda: openapi("petstore/petstore3-openapi.yaml", "petstore"),
    "box": lambda: postman("box/box-platform-api-legacy.postman_collection.json", "box"),
    "wise": lambda: postman("wise/TW-API.postman_collection.json", "wise"),
    "githubql": lambda: graphql("github/schema.graphql", "githubql"),
    "swapi": lambda: graphql("swapi/schema.graphql", "swapi"),
    "filesystem": lambda: mcp_file("server-filesystem", "filesystem"),
    "git": lambda: mcp_file("mcp-server-git", "git"),
    "time": lambda: mcp_file("mcp-server-time", "time"),
    "fetch": lambda: mcp_file("mcp-server-fetch", "fetch"),
    "playwright": lambda: mcp_file("playwright-mcp", "playwright"),
    "memory": lambda: mcp_file("server-memory", "memory"),
    "slackmcp": lambda: mcp_file("server-slack", "slackmcp"),
    "githubmcp": lambda: mcp_file("server-github", "githubmcp"),
    "gitlab": lambda: mcp_file("server-gitlab", "gitlab"),
}


@cache
def catalog(slug: str) -> tuple[Action, ...]:
    return tuple(API_LOADERS[slug]())


def split_of(intent: str, holdout_share: float = 0.4) -> str:
    """``dev`` or ``holdout``, fixed by a seeded hash of the intent's text (never by hand)."""
    digest = hashlib.sha256(b"discovery-intents-v2:" + intent.strip().lower().encode()).digest()
    return "holdout" if int.from_bytes(digest[:4], "big") / 2**32 < holdout_share else "dev"


IntentRow = dict[str, Any]


def load_intent_sets(directory: Path = INTENTS_DIR) -> dict[str, list[IntentRow]]:
    """``{set name: rows}`` for every ``*.json`` in ``directory``; a set may span several connectors."""
    return {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in sorted(directory.glob("*.json"))}


def connectors_of(rows: Iterable[IntentRow]) -> list[str]:
    return sorted({name.split(".", 1)[0] for row in rows for name in row["actions"]})
