"""``discover`` answered from the stored state, without assembling a ``Gateway``.

The full path (``runtime.open_gateway``) imports the whole core, syncs every connector (decoding
every stored catalog: the JSON and the validation of every action), indexes each one
(reading back the segment its last start kept, ``discovery.SegmentCache``), reviews each one
(reading back the kept hidden-text scan, ``discovery.ReviewCache``), then ranks. When every
stored catalog is current (``listing.current_state``: the checks ``connectors`` makes), all of
that is already on disk: this module builds the same ``DiscoveryIndex`` from the kept segments over
actions that are decoded only when the ranking touches them (``store.catalog_lines``: the forty or
so candidates and the hits, never the whole catalog), applies the same grants, hide rules and
policy verdicts, and prints the same answer. The command line's ``discover`` embeds nothing (one
command, then exit), so it ranks lexically in every discovery mode, here as on the full path.

It answers only what it can show the full path would answer the same way, and returns None for
everything else, which then takes the full path: whatever ``connectors`` hands over (PostgreSQL, a
network source, a catalog not current, a store to migrate); a catalog stored by an earlier build
(not one action a line), or without a kept segment or scan for its fingerprint (the full path builds
and keeps them, so the next run is fast); a connector under ``trust: review`` or with any action
held for review (the full path quarantines it and audits that); ``mode: hybrid`` without the model,
or a mistyped ``$MCP_GATEWAY_DISCOVERY_MODE`` (the full path refuses, naming the fix). The store and
the kept files are read afresh on every run: nothing printed is cached. Unlike the full path it
writes nothing. ``tests/cli/test_stored_discover.py`` compares both paths byte for byte.
"""

from __future__ import annotations

import argparse
import sqlite3
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .listing import configured, current_state, sqlite_state

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..discovery import DiscoveryIndex, ReviewCache
    from ..manifest import ConnectorConfig, Manifest
    from ..services.identity import Principal
    from ..vocabulary.model import Action

__all__ = ["discover_from_state"]


def discover_from_state(args: argparse.Namespace, principal: Principal) -> dict[str, Any] | None:
    """``discover``'s payload (as ``result_payload`` makes it), or None when the full path must answer."""
    from ..manifest import load_manifest
    from ..services.identity import granted_connectors

    settings = args.settings
    if not sqlite_state(settings):
        return None
    manifest = load_manifest(settings.manifest_path)
    if not _ranks_lexically(manifest, settings.env):
        return None
    try:
        state = current_state(settings.database, manifest)
        if state is None:
            return None
        with state:
            stored, keys = state.stored, state.keys
            rows: dict[str, tuple[str, bytes]] = {
                slug: (fingerprint, blob)
                for slug, fingerprint, blob in state.db.execute("SELECT slug, fingerprint, actions FROM catalog")
            }
        index = _kept_index(manifest, rows, {slug: s.actions for slug, s in stored.items()}, settings.state_dir)
        if index is None:
            return None
        visible = granted_connectors(manifest, principal) & {c.slug for c in manifest.connectors}
        if args.connector is not None:
            visible = visible & {args.connector}
        query = " ".join(args.query)
        payload = _answer(manifest, index, query, visible, args.limit, keys, principal.user)
        return payload if args.connector is not None else _with_catalog(manifest, query, index, payload)
    except (sqlite3.Error, zlib.error, ValueError, TypeError, AttributeError, OSError):
        # A file or row not as this build writes it (a stored action that does not decode to what
        # its line names raises ValueError mid-search): the full path says what it makes of it.
        return None


def _with_catalog(manifest: Manifest, query: str, index: DiscoveryIndex, payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` with the bundled catalog APIs that would serve ``query`` better (``Gateway.discover``)."""
    from ..discovery.catalog_hints import CatalogHints, catalog_hint_text

    best = [action for hit in payload["results"][:3] if (action := index.get(hit["name"])) is not None]
    hints = CatalogHints().suggest(manifest, query, best, unsure=payload["confidence"] == "low")
    if not hints:
        return payload
    hint = catalog_hint_text(hints, payload.get("hint"))
    head = {key: payload[key] for key in ("query", "results", "confidence")}
    rest = {key: payload[key] for key in ("twins",) if key in payload}
    return {**head, "hint": hint, **rest, "catalog": [h.payload() for h in hints]}


def _ranks_lexically(manifest: Manifest, env: Mapping[str, str]) -> bool:
    """Whether the full path would start and rank lexically (``runtime.check_discovery``,
    ``discovery_search``): it does in every mode, since the command embeds no catalog, unless the
    mode is misspelled or ``hybrid`` without the local model (it refuses then)."""
    mode = (env.get("MCP_GATEWAY_DISCOVERY_MODE") or "").strip()
    if mode and mode not in ("auto", "lexical", "hybrid"):
        return False
    config = manifest.discovery.model_copy(update={"mode": mode}) if mode else manifest.discovery
    if config.effective_mode != "hybrid" or config.embeddings is not None:
        return True
    from ..discovery import EmbeddingsUnavailable
    from ..discovery.providers import local_provider

    try:
        local_provider()  # looks for the extra's packages and the model files; loads nothing
    except EmbeddingsUnavailable:
        return False
    return True


def _kept_index(
    manifest: Manifest, rows: Mapping[str, tuple[str, bytes]], counts: Mapping[str, int], state_dir: Path
) -> DiscoveryIndex | None:
    """The index the full path would build, from the segments its last start kept, over actions
    decoded on first use; None when a catalog or a kept file is not as the full path would find it."""
    from ..discovery import DiscoveryIndex, ReviewCache, SegmentCache
    from ..store.catalog_lines import ActionLines

    reviews = ReviewCache(state_dir / "review-scan")
    index = DiscoveryIndex(SegmentCache(state_dir / "discovery-index"))
    for cfg in manifest.connectors:  # in the sync's order: the ids, hence the ranking's ties, are the same
        fingerprint, blob = rows[cfg.slug]
        actions = ActionLines.read(blob, cfg.slug)
        if actions is None or len(actions) != counts[cfg.slug]:
            return None
        if not _nothing_held(cfg, reviews, fingerprint, len(actions)):
            return None
        paths = index.add_kept(cfg.slug, actions, fingerprint=fingerprint)
        if paths is None:
            return None
        actions.expect(paths)
    return index


def _nothing_held(cfg: ConnectorConfig, reviews: ReviewCache, fingerprint: str, count: int) -> bool:
    """Whether the full path's review (``Catalogs.review``) would quarantine none of this catalog:
    ``auto`` never does; ``pinned`` (a spec the operator wrote or pinned) holds only actions whose
    text hides characters, which the kept scan names; ``review`` snapshots every action."""
    trust = cfg.effective_trust
    if trust == "auto":
        return True
    if trust != "pinned":
        return False
    held = reviews.held(cfg.slug, fingerprint, count)
    return held is not None and not held


def _answer(
    manifest: Manifest,
    index: DiscoveryIndex,
    query: str,
    visible: frozenset[str],
    limit: int,
    keys: list[tuple[str, str, str]],
    user: str,
) -> dict[str, Any]:
    """``Gateway.discover`` with ``detail`` off, as ``result_payload`` prints it."""
    from ..discovery import summary_of
    from ..policy import effective_risk, evaluate, is_hidden
    from ..primitives.sanitize import MAX_TITLE_CHARS, clean_text
    from ..vocabulary.model import ActionSummary

    configs = {c.slug: c for c in reversed(manifest.connectors)}  # the first of a slug, as Manifest.connector

    def allow(action: Action) -> bool:  # ``Permissions.allow``: nothing is quarantined (``_nothing_held``)
        return not is_hidden(
            qualified_name=action.qualified_name,
            path=action.path,
            project_rules=manifest.policies,
            connector_rules=configs[action.connector].policies,
        )

    def needs_approval(action: Action) -> bool:  # ``Permissions.verdict(action, {})``
        cfg = configs[action.connector]
        verdict = evaluate(
            qualified_name=action.qualified_name,
            path=action.path,
            risk=effective_risk(action, {}),
            args={},
            project_rules=manifest.policies,
            connector_rules=cfg.policies,
            sensitive=cfg.sensitive,
            default_mode=manifest.default_mode,
        )
        return verdict.action == "require_approval"

    found = index.find(query, limit=max(1, min(limit, 50)), connectors=visible, allow=allow)
    needs_auth = {
        slug: not configured(configs[slug], [(p, n) for c, p, n in keys if c == slug], user)
        for slug in {action.connector for action, _ in found.hits}
    }
    results: list[dict[str, Any]] = []
    for action, score in found.hits:
        props = action.input_schema.get("properties") or {}
        required = [name for name in action.input_schema.get("required") or [] if isinstance(name, str)]
        hit = ActionSummary(
            name=action.qualified_name,
            summary=clean_text(summary_of(action), max_chars=MAX_TITLE_CHARS),  # ``results.shown_summary``
            risk=action.risk,
            needs_approval=needs_approval(action),
            needs_auth=needs_auth[action.connector],
            params=[*required, *(name for name in props if name not in required)][:12],
            required=required,
            score=round(score, 3),
        )
        results.append(hit.model_dump(mode="json", exclude_none=True))
    payload: dict[str, Any] = {"query": query, "results": results, "confidence": found.confidence}
    if found.hint is not None:
        payload["hint"] = found.hint
    if found.twins:
        payload["twins"] = found.twins
    return payload
