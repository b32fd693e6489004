"""catalog/: every integration identity loads through the manifest loader with ``catalog:``, and
every bundled spec normalizes, with the operation counts of tests/data/SOURCES.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_gateway.manifest import (
    CATALOG_DIR,
    CREDENTIAL_HEADERS,
    GraphQLSource,
    OpenAPISource,
    PostmanSource,
    auth_headers,
    parse_manifest,
)
from mcp_gateway.sources.openapi import load_openapi
from mcp_gateway.vocabulary.errors import ManifestError

ENTRIES = sorted(p.stem for p in CATALOG_DIR.glob("*.yaml"))
FILLED = {"jira": "    base_url: https://acme.atlassian.net\n"}
"""What a manifest must add to the entries whose ``fill_in`` names a key no default can serve."""


def using(name: str) -> str:
    return f"connectors:\n  - slug: {name}\n    catalog: {name}\n" + FILLED.get(name, "")


REQUIRED = {"github", "stripe", "linear", "notion", "slack", "petstore"}
# Operations per bundled spec (tests/data/SOURCES.md); each becomes one action.
OPERATIONS = {"github": 1223, "stripe": 417, "slack": 174, "notion": 24, "petstore": 20}


def test_the_catalog_has_at_least_the_required_integrations() -> None:
    assert REQUIRED <= set(ENTRIES)


@pytest.mark.parametrize("name", ENTRIES)
def test_every_entry_loads_through_the_manifest_loader(name: str, tmp_path: Path) -> None:
    manifest = parse_manifest(using(name), base_dir=tmp_path)
    (cfg,) = manifest.connectors
    assert cfg.name and cfg.description
    assert cfg.base_url is not None and cfg.base_url.startswith("https://")
    assert cfg.auth.type != "none"
    # Static headers are never credentials (the loader refuses those; say so here too).
    assert not {h.lower() for h in cfg.headers} & (CREDENTIAL_HEADERS | auth_headers(cfg.auth))
    match cfg.source:
        case OpenAPISource(openapi=ref) | PostmanSource(postman=ref):
            assert Path(ref).is_absolute() and Path(ref).is_file()  # resolved against catalog/, bundled
            assert Path(ref).parent == CATALOG_DIR / "specs"
        case GraphQLSource(graphql=spec):
            assert spec.introspect and spec.schema_ is None  # read from base_url at sync
        case other:
            raise AssertionError(f"unexpected source in catalog/{name}.yaml: {other}")


def test_an_entry_without_a_default_for_everyone_says_what_to_fill_in() -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest("project: p\nconnectors:\n  - slug: work\n    catalog: jira\n")
    (issue,) = info.value.issues
    assert (issue.line, issue.field) == (4, "connectors[0].base_url")
    assert "'jira' has no base_url" in issue.message
    assert "base_url: https://<your-site>.atlassian.net" in issue.fix and "--base-url" in issue.fix
    assert {name for name in ENTRIES if "fill_in" in (CATALOG_DIR / f"{name}.yaml").read_text()} == set(FILLED)


def test_the_example_copied_with_its_placeholder_is_refused() -> None:
    # ``discover`` prints ``mcp-gateway add jira --base-url 'https://<your-site>.atlassian.net'``: run as
    # printed, it must not point a connector at "<your-site>".
    with pytest.raises(ManifestError) as info:
        parse_manifest(
            "project: p\nconnectors:\n  - slug: work\n    catalog: jira\n"
            "    base_url: https://<your-site>.atlassian.net\n"
        )
    (issue,) = info.value.issues
    assert issue.field == "connectors[0].base_url" and "placeholder <your-site>" in issue.message
    assert "https://acme.atlassian.net" in issue.fix
    for written in ("https://<site>.atlassian.net/rest", "https://{site}.atlassian.net", "https://%3Csite%3E.x.net"):
        with pytest.raises(ManifestError) as info:
            parse_manifest(f"project: p\nconnectors:\n  - slug: work\n    catalog: jira\n    base_url: {written}\n")
        (issue,) = info.value.issues
        assert "placeholder" in issue.message and "e.g. https://acme.atlassian.net" in issue.fix, issue


def test_a_manifest_refines_a_catalog_entry() -> None:
    manifest = parse_manifest(
        """
connectors:
  - slug: linear
    catalog: linear
    auth: { prefix: "" }
  - slug: work-notion
    catalog: notion
    headers: { Notion-Version: "2026-03-11" }
"""
    )
    linear, notion = manifest.connectors
    assert linear.auth.type == "bearer" and linear.auth.prefix == ""  # type: ignore[union-attr]
    assert notion.headers == {"Notion-Version": "2026-03-11"}
    assert notion.base_url == "https://api.notion.com"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(OPERATIONS))
async def test_every_bundled_spec_normalizes(name: str, tmp_path: Path) -> None:
    (cfg,) = parse_manifest(using(name), base_dir=tmp_path).connectors
    assert isinstance(cfg.source, OpenAPISource)
    spec = await load_openapi(cfg.source.openapi, connector=name)
    assert len(spec.actions) == OPERATIONS[name]
    assert len({a.path for a in spec.actions}) == len(spec.actions)
    assert {a.risk for a in spec.actions} <= {"read", "write", "destructive"}
