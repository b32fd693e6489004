"""``connectors`` answered from the stored state, without assembling a ``Gateway``.

The full path (``runtime.open_gateway``) syncs every connector: it imports the whole core, opens the
store, decodes every stored catalog (GitHub's ~1,200 actions) and checks each one's fingerprint, then
``Gateway.connectors`` answers. When the sync would reuse every stored catalog unchanged, what that
answer is made of is already in the state file: each connector's state row, its catalog's
fingerprint and files, which credentials exist. This module reads them through the read-only view
``store.stored_state`` and answers with the gateway's own code: the hide rules of
``core.visibility``, the credential check of ``core.credential_readiness`` and the entry shaped by
``core.connectors_answer``; what it adds is only the proof that the full path would find the same
catalogs (the checks the sync makes, ``sources/_fingerprint.py``) and hold none of their actions.

It answers only what it can prove the full path would answer the same way, and returns None for
everything else, which then takes the full path: PostgreSQL; a source fetched or listed over the
network (a URL, GraphQL, MCP); a connector with no stored catalog or state, in error, or whose spec
or settings changed; a store that needs a migration; a connector with actions held for review. The
answer is computed afresh on every run (nothing printed is cached), so a credential stored or a
catalog changed by another process shows at once. ``tests/cli/test_listing.py`` compares both paths
byte for byte.

Unlike the full path it writes nothing: the state rows keep the time of the last real sync.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..discovery import ReviewCache
    from ..manifest import ConnectorConfig, DiscoveryConfig, Manifest
    from ..primitives.secrets import CredentialKey
    from ..services.identity import Principal
    from ..store.stored_state import StoredCatalog, StoredState
    from ..vocabulary.model import ConnectorInfo
    from ..vocabulary.settings import Settings

__all__ = [
    "CurrentState",
    "connectors_from_state",
    "current_state",
    "discovery_config",
    "nothing_held",
    "sqlite_state",
    "stored_credential_keys",
]


def connectors_from_state(args: argparse.Namespace, principal: Principal) -> dict[str, Any] | None:
    """``connectors``' payload (as ``result_payload`` makes it), or None when the full path must answer."""
    from ..core.connectors_answer import ConnectorsResult
    from ..core.shown import result_payload
    from ..manifest import load_manifest
    from ..store.stored_state import StateUnreadable

    settings = args.settings
    if not sqlite_state(settings):
        return None
    manifest = load_manifest(settings.manifest_path)
    line = _discovery_line(manifest, settings, json_wanted=bool(args.json))
    if line is None:
        return None
    try:
        state = current_state(settings.database, manifest)
        if state is None:
            return None
        with state:
            entries = _entries(manifest, state, principal, settings.state_dir)
    except StateUnreadable:
        return None  # a file or row not as this build writes it: the full path says what it makes of it
    if entries is None:
        return None
    return result_payload(ConnectorsResult(connectors=entries, discovery=line()))


def sqlite_state(settings: Settings) -> bool:
    """Whether the state is an SQLite file that exists (PostgreSQL, or a first start: the full path)."""
    if settings.database_url:
        return False
    try:
        return settings.database.is_file()
    except OSError:  # a folder this user may not enter: the full path opens it and says so
        return False


def stored_credential_keys(settings: Settings) -> list[CredentialKey]:
    """Every stored credential's key (never a value), read without an event loop from an SQLite state
    file; empty when there is none yet, or it cannot be read (the full path says why)."""
    from ..store.stored_state import StateUnreadable, StoredState

    if not sqlite_state(settings):
        return []
    try:
        view = StoredState.open(settings.database)
        if view is None:
            return []
        with view:
            return view.credential_keys()
    except StateUnreadable:
        return []


@dataclass
class CurrentState:
    """The state file when every stored catalog is current: what the last sync left for each
    connector, which credentials exist, and the view for further reads in the same snapshot (closed
    on leaving ``with``)."""

    view: StoredState
    catalogs: dict[str, StoredCatalog]
    keys: list[CredentialKey]
    """Every stored credential's key: which exist, never their values."""

    def __enter__(self) -> CurrentState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.view.close()


def current_state(path: Path, manifest: Manifest) -> CurrentState | None:
    """The state file at ``path`` read in one snapshot, when a sync now would reuse every stored
    catalog unchanged (the full path syncs every connector, seen or not); None when it would not, or
    the file needs a migration or is not ours (the full path says which)."""
    from ..store.stored_state import StoredState

    view = StoredState.open(path)
    if view is None:
        return None
    try:
        catalogs = view.catalogs()
        if all(c.slug in catalogs and _unchanged(c, manifest, catalogs[c.slug]) for c in manifest.connectors):
            return CurrentState(view, catalogs, view.credential_keys())
    except BaseException:
        view.close()
        raise
    view.close()
    return None


def _unchanged(cfg: ConnectorConfig, manifest: Manifest, stored: StoredCatalog) -> bool:
    """Whether a sync now would reuse the stored catalog and record the stored state again (``core/sync.py``)."""
    from ..manifest import GraphQLSource, HttpSource, McpSource, OpenAPISource, PostmanSource
    from ..sources._fingerprint import current_fingerprint, settings_digest

    if stored.status != "ready" or stored.error is not None:
        return False
    match cfg.source:
        case OpenAPISource(openapi=ref) | PostmanSource(postman=ref):
            # ``sources._fingerprint.reuse``: the same local file, and the same bytes and settings.
            resolved = manifest.resolve(ref)
            if resolved.startswith(("http://", "https://")) or not stored.files or stored.files[0] != resolved:
                return False
            return current_fingerprint(cfg, stored.files) == stored.fingerprint
        case HttpSource() | None:
            return settings_digest(cfg) == stored.fingerprint  # normalized afresh, equal when the settings are
        case GraphQLSource() | McpSource():
            return False  # introspected or listed over the network
    return False


def _entries(
    manifest: Manifest, state: CurrentState, principal: Principal, state_dir: Path
) -> list[ConnectorInfo] | None:
    """``Gateway.connectors``' entries, from the stored catalogs; None when one holds an action for review."""
    from ..core import credential_readiness, visibility
    from ..core.connectors_answer import connector_info
    from ..core.credential_origins import ORIGIN_PREFIX, moved_note, parse_origins, refused_note, team_key
    from ..discovery import ReviewCache
    from ..services.identity import granted_connectors

    reviews = ReviewCache(state_dir / "review-scan")
    origins = parse_origins(state.view.meta_rows(ORIGIN_PREFIX))
    out: list[ConnectorInfo] = []
    for slug in sorted(granted_connectors(manifest, principal)):
        cfg = manifest.connector(slug)
        assert cfg is not None, slug
        stored = state.catalogs[slug]
        if not nothing_held(cfg, reviews, stored.fingerprint, stored.actions):
            return None  # the full path reviews it, and says what is held and why
        # The actions are read only when a rule could hide one: else none is hidden.
        may_hide = visibility.may_hide(manifest, cfg)
        actions = state.view.actions(slug) if may_hide else []
        if may_hide and len(actions) != stored.actions:
            return None  # not what the last sync recorded: the full path decodes (or rebuilds) it
        out.append(
            connector_info(
                cfg,
                "ready",  # ``_unchanged``: every stored catalog loaded
                loaded=stored.actions,
                # nothing is held for review (``nothing_held``): only what a rule hides
                withheld=visibility.withheld(actions, partial(visibility.hidden, manifest, cfg), lambda _: None),
                configured=credential_readiness.configured(cfg, state.keys, principal.user),
                warning=moved_note(cfg, origins.get(team_key(cfg))) or None,
                refused=refused_note(slug, origins.get(team_key(cfg))),
            )
        )
    return out


def nothing_held(cfg: ConnectorConfig, reviews: ReviewCache, fingerprint: str, count: int) -> bool:
    """Whether the full path's review (``Catalogs.review``) would quarantine none of this catalog of
    ``count`` actions: ``auto`` never does; ``pinned`` (a spec the operator wrote or pinned) holds only
    actions whose text hides characters, which the scan kept for this very catalog names; ``review``
    snapshots every action."""
    trust = cfg.effective_trust
    if trust == "auto" or count == 0:
        return True
    if trust != "pinned":
        return False
    held = reviews.held(cfg.slug, fingerprint, count)
    return held is not None and not held


def discovery_config(manifest: Manifest, env: Mapping[str, str]) -> DiscoveryConfig | None:
    """The discovery settings the full path starts with (``discovery_override``), or None when
    ``$MCP_GATEWAY_DISCOVERY_MODE`` is misspelled (the full path then names the mistake)."""
    from ..manifest.discovery_mode import discovery_override
    from ..vocabulary.errors import GatewayError

    try:
        return discovery_override(manifest, env).discovery
    except GatewayError:
        return None


def _discovery_line(manifest: Manifest, settings: Settings, *, json_wanted: bool) -> Callable[[], str] | None:
    """A function giving ``connectors``' discovery line, or None for the full path: while the running
    gateway of the state folder embeds, its line (``HybridSearch.status``), unless ranking is lexical."""
    from ..discovery.embedding_progress import LEXICAL_LINE, progress_elsewhere

    config = discovery_config(manifest, settings.env)
    line = None if config is None else _mode_line(config, json_wanted=json_wanted)
    if line is None:
        return None
    elsewhere = progress_elsewhere(settings.state_dir)
    if elsewhere is not None and line() != LEXICAL_LINE:
        return lambda: elsewhere
    return line


def _mode_line(config: DiscoveryConfig, *, json_wanted: bool) -> Callable[[], str] | None:
    """``runtime.discovery_search``'s choice as its line, with no connector scheduled (the full path
    builds no index for ``connectors``), or None for the full path. The local model's presence is
    looked up only when the line is printed (``--json``) or ``mode: hybrid`` must fail without it, as
    the full path does."""
    from ..discovery.embedding_progress import LEXICAL_LINE, hybrid_line

    effective = config.effective_mode
    if effective == "lexical":
        return lambda: LEXICAL_LINE
    if config.embeddings is not None:
        label = f"{config.embeddings.model} at {config.embeddings.url}"
        return lambda: hybrid_line(label, 0, 0)
    if effective == "auto" and not json_wanted:
        return lambda: ""  # not printed
    from ..discovery import EmbeddingsUnavailable
    from ..discovery.providers import local_provider

    try:
        model = local_provider().model
    except EmbeddingsUnavailable:
        if effective == "hybrid":
            return None  # the full path refuses to start, naming the install command
        return lambda: LEXICAL_LINE
    return lambda: hybrid_line(model, 0, 0)
