"""``discover`` answered from the stored state, without assembling a ``Gateway``.

The full path (``runtime.open_gateway``) imports the whole core, syncs every connector (decoding
every stored catalog: the JSON and the validation of every action), indexes each one
(reading back the segment its last start kept, ``discovery.SegmentCache``), reviews each one
(reading back the kept hidden-text scan, ``discovery.ReviewCache``), then ranks. When every
stored catalog is current (``listing.current_state``: the checks ``connectors`` makes), all of
that is already on disk: this module builds the same ``DiscoveryIndex`` from the kept segments over
actions read through the read-only view ``store.stored_state`` and decoded only when the ranking
touches them (``store.catalog_lines``: the forty or so candidates and the hits, never the whole
catalog), and answers with the gateway's own code: the grants, the hide rules and policy verdicts
of ``core.visibility``, the credential check of ``core.credential_readiness``, the hits and catalog
suggestions shaped by ``core.discover_answer``. The command line's ``discover`` embeds nothing (one
command, then exit), so it ranks lexically in every discovery mode, here as on the full path.

It answers only what it can show the full path would answer the same way, and returns None for
everything else, which then takes the full path: whatever ``connectors`` hands over (PostgreSQL, a
network source, a catalog not current, a store to migrate); a catalog stored by an earlier build
(not one action a line), or without a kept segment or scan for its fingerprint (the full path builds
and keeps them, so the next run is fast); a connector under ``trust: review`` or with any action
held for review (the full path quarantines it and audits that); ``mode: hybrid`` without the model,
or a mistyped ``$MCP_GATEWAY_DISCOVERY_MODE`` (the full path refuses, naming the fix). The store and
the kept files are read afresh on every run: nothing printed is cached. Unlike the full path it
writes nothing. It hands over too once ``discover`` has learned from use (the full path lifts its
ranking by what similar queries led to). ``tests/cli/test_stored_discover.py`` compares both paths
byte for byte.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .listing import CurrentState, current_state, discovery_config, nothing_held, sqlite_state

if TYPE_CHECKING:
    from ..core.discover_answer import DiscoverResult
    from ..discovery import DiscoveryIndex
    from ..manifest import Manifest
    from ..primitives.secrets import CredentialKey
    from ..services.identity import Principal

__all__ = ["discover_from_state"]


def discover_from_state(args: argparse.Namespace, principal: Principal) -> dict[str, Any] | None:
    """``discover``'s payload (as ``result_payload`` makes it), or None when the full path must answer."""
    from ..core.shown import result_payload
    from ..manifest import load_manifest

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
            if manifest.discovery.learn != "off" and state.view.has_uses():
                return None  # the full path lifts what earlier uses led to (``core.use_memory``)
            index = _kept_index(manifest, state, settings.state_dir)
        if index is None:
            return None
        return result_payload(_answer(args, manifest, index, state.keys, principal))
    except (ValueError, OSError):
        # A file or row not as this build writes it (``store.stored_state.StateUnreadable``; a stored
        # action that does not decode to what its line names raises ValueError mid-search): the full
        # path says what it makes of it.
        return None


def _ranks_lexically(manifest: Manifest, env: Mapping[str, str]) -> bool:
    """Whether the full path would start and rank lexically (``runtime.check_discovery``,
    ``discovery_search``): it does in every mode, since the command embeds no catalog, unless the
    mode is misspelled or ``hybrid`` without the local model (it refuses then)."""
    config = discovery_config(manifest, env)
    if config is None:
        return False
    if config.effective_mode != "hybrid" or config.embeddings is not None:
        return True
    from ..discovery import EmbeddingsUnavailable
    from ..discovery.providers import local_provider

    try:
        local_provider()  # looks for the extra's packages and the model files; loads nothing
    except EmbeddingsUnavailable:
        return False
    return True


def _kept_index(manifest: Manifest, state: CurrentState, state_dir: Path) -> DiscoveryIndex | None:
    """The index the full path would build, from the segments its last start kept, over actions
    decoded on first use; None when a catalog or a kept file is not as the full path would find it."""
    from ..discovery import DiscoveryIndex, ReviewCache, SegmentCache

    reviews = ReviewCache(state_dir / "review-scan")
    index = DiscoveryIndex(SegmentCache(state_dir / "discovery-index"))
    for cfg in manifest.connectors:  # in the sync's order: the ids, hence the ranking's ties, are the same
        stored = state.catalogs[cfg.slug]
        actions = state.view.action_lines(cfg.slug)
        if actions is None or len(actions) != stored.actions:
            return None
        if not nothing_held(cfg, reviews, stored.fingerprint, len(actions)):
            return None
        paths = index.add_kept(cfg.slug, actions, fingerprint=stored.fingerprint)
        if paths is None:
            return None
        actions.expect(paths)
    return index


def _answer(
    args: argparse.Namespace,
    manifest: Manifest,
    index: DiscoveryIndex,
    keys: list[CredentialKey],
    principal: Principal,
) -> DiscoverResult:
    """``Gateway.discover`` with ``detail`` off, over the kept index: nothing is held for review
    (``nothing_held``), so what agents may see is what no rule hides."""
    from ..core import credential_readiness, visibility
    from ..core.discover_answer import catalog_suggestions, discover_limit, discover_result
    from ..discovery.catalog_hints import CatalogHints
    from ..services.identity import granted_connectors

    configs = {c.slug: c for c in reversed(manifest.connectors)}  # the first of a slug, as Manifest.connector
    visible = granted_connectors(manifest, principal) & configs.keys()
    if args.connector is not None:
        visible = visible & {args.connector}
    query = " ".join(args.query)
    found = index.find(
        query,
        limit=discover_limit(args.limit),
        connectors=visible,
        allow=lambda action: not visibility.hidden(manifest, configs[action.connector], action),
    )
    return discover_result(
        query,
        found,
        needs_approval=lambda action: (
            visibility.verdict(manifest, configs[action.connector], action, {}).action == "require_approval"
        ),
        needs_auth={
            slug: not credential_readiness.configured(configs[slug], keys, principal.user)
            for slug in {action.connector for action, _ in found.hits}
        },
        hints=catalog_suggestions(
            CatalogHints(),
            manifest,
            query,
            found,
            args.connector,
            str(args.manifest_path) if args.manifest_path is not None else None,
        ),
    )
