"""``connectors`` answered from the stored state, without assembling a ``Gateway``.

The full path (``runtime.open_gateway``) syncs every connector: it imports the whole core, opens the
store, decodes every stored catalog (GitHub's ~1,200 actions) and checks each one's fingerprint, then
``Gateway.connectors`` prints a few fields per connector. When the sync would reuse every stored
catalog unchanged, those fields are already in the state store: the connector's state row (status,
action count), the catalog row's fingerprint and files, and which credentials exist. This module
reads just those, with the same checks the sync makes (``sources/_fingerprint.py``: the settings
that shape the actions and the bytes of every spec file), on a read-only SQLite connection.

It answers only what it can prove the full path would answer the same way, and returns None for
everything else, which then takes the full path: PostgreSQL; a source fetched or listed over the
network (a URL, GraphQL, MCP); a connector with no stored catalog or state, in error, or whose spec
or settings changed; a store that needs a migration. The answer is computed afresh on every run
(nothing printed is cached), so a credential stored or a catalog changed by another process shows at
once. ``tests/cli/test_listing.py`` compares both paths byte for byte.

Unlike the full path it writes nothing: the state rows keep the time of the last real sync.
"""

from __future__ import annotations

import argparse
import sqlite3
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..manifest import ConnectorConfig, Manifest
    from ..services.identity import Principal
    from ..vocabulary.model import ConnectorInfo
    from ..vocabulary.settings import Settings

__all__ = ["CurrentState", "Stored", "configured", "connectors_from_state", "current_state", "sqlite_state"]

OAUTH2_TOKEN_NAME = "oauth2_token"
"""``auth.oauth2.TOKEN_NAME``: the credential an authorization's token set is stored as (that package
loads every auth kind and the HTTP client; ``tests/cli/test_listing.py`` checks the two agree)."""

_LEXICAL = "discovery: lexical only"
"""``discovery.hybrid.discovery_status(None)``, without importing the discovery package."""


@dataclass(frozen=True)
class Stored:
    """What the last sync left for one connector."""

    status: str
    actions: int
    error: str | None
    fingerprint: str | None
    files: list[str]


def connectors_from_state(args: argparse.Namespace, principal: Principal) -> dict[str, Any] | None:
    """``connectors``' payload (as ``result_payload`` makes it), or None when the full path must answer."""
    import json

    from ..manifest import load_manifest
    from ..services.identity import granted_connectors

    settings = args.settings
    if not sqlite_state(settings):
        return None
    manifest = load_manifest(settings.manifest_path)
    discovery = _discovery(manifest, settings.env, json_wanted=bool(args.json))
    if discovery is None:
        return None
    from ..discovery.embedding_progress import progress_elsewhere

    elsewhere = progress_elsewhere(settings.state_dir)  # the running gateway is embedding (``HybridSearch.status``)
    if elsewhere is not None and discovery() != _LEXICAL:
        discovery = lambda: elsewhere  # noqa: E731
    names: dict[str, list[Any]] = {}
    try:
        state = current_state(settings.database, manifest)
        if state is None:
            return None
        with state:
            stored, keys = state.stored, state.keys
            for cfg in manifest.connectors:
                if _block_rules(manifest, cfg):  # a hide rule needs the actions' names; only then are they read
                    row = state.db.execute("SELECT actions FROM catalog WHERE slug = ?", (cfg.slug,)).fetchone()
                    if row is None:
                        return None
                    decoded = json.loads(zlib.decompress(row[0]))
                    if not isinstance(decoded, list):
                        return None
                    names[cfg.slug] = decoded
    except (sqlite3.Error, zlib.error, ValueError, TypeError, AttributeError):
        return None  # a file or row not as this build writes it: the full path says what it makes of it
    out: list[ConnectorInfo] = []
    for slug in sorted(granted_connectors(manifest, principal)):
        cfg = manifest.connector(slug)
        assert cfg is not None, slug
        if not _nothing_held(cfg, settings.state_dir, stored[slug]):
            return None  # the full path reviews it, and says what is held and why
        info = _info(manifest, cfg, stored[slug], keys, principal.user, names.get(slug))
        if info is None:
            return None
        out.append(info)
    return {"connectors": [c.model_dump(mode="json", exclude_none=True) for c in out], "discovery": discovery()}


def sqlite_state(settings: Settings) -> bool:
    """Whether the state is an SQLite file that exists (PostgreSQL, or a first start: the full path)."""
    return not settings.database_url and settings.database.is_file()


@dataclass
class CurrentState:
    """The SQLite state when every stored catalog is current: what the last sync left for each
    connector, which credentials exist, and the connection for further reads in the same snapshot
    (closed on leaving ``with``)."""

    db: sqlite3.Connection
    stored: dict[str, Stored]
    keys: list[tuple[str, str, str]]
    """(connector, principal, name) of every stored credential: which exist, never their values."""

    def __enter__(self) -> CurrentState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.db.close()


def current_state(path: Path, manifest: Manifest) -> CurrentState | None:
    """The SQLite state at ``path`` read in one snapshot, when a sync now would reuse every stored
    catalog unchanged (the full path syncs every connector, seen or not); None when it would not, or
    the file needs a migration or is not ours (the full path says which)."""
    from ..store._sqlite_schema import APPLICATION_ID, SCHEMA_VERSION

    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        db.execute("PRAGMA busy_timeout = 5000")
        (version,) = db.execute("PRAGMA user_version").fetchone()
        (application,) = db.execute("PRAGMA application_id").fetchone()
        if version != SCHEMA_VERSION or application != APPLICATION_ID:
            db.close()
            return None
        db.execute("BEGIN")  # one snapshot for every read, here and the caller's
        stored = _stored(db)
        if not all(c.slug in stored and _unchanged(c, manifest, stored[c.slug]) for c in manifest.connectors):
            db.close()
            return None
        keys: list[tuple[str, str, str]] = db.execute("SELECT connector, principal, name FROM credential").fetchall()
    except BaseException:
        db.close()
        raise
    return CurrentState(db, stored, keys)


def _stored(db: sqlite3.Connection) -> dict[str, Stored]:
    import json

    states = {
        slug: (status, actions, error)
        for slug, status, actions, error in db.execute("SELECT slug, status, actions, error FROM connector_state")
    }
    out: dict[str, Stored] = {}
    for slug, fingerprint, info in db.execute("SELECT slug, fingerprint, info FROM catalog"):
        if slug not in states:
            continue
        status, actions, error = states[slug]
        files = json.loads(info or "{}").get("files") or []
        out[slug] = Stored(status, int(actions), error, fingerprint, [str(f) for f in files])
    return out


def _unchanged(cfg: ConnectorConfig, manifest: Manifest, state: Stored) -> bool:
    """Whether a sync now would reuse the stored catalog and record the stored state again (``core/sync.py``)."""
    from ..manifest import GraphQLSource, HttpSource, McpSource, OpenAPISource, PostmanSource
    from ..sources._fingerprint import current_fingerprint, settings_digest

    if state.status != "ready" or state.error is not None or state.fingerprint is None:
        return False
    match cfg.source:
        case OpenAPISource(openapi=ref) | PostmanSource(postman=ref):
            # ``sources._fingerprint.reuse``: the same local file, and the same bytes and settings.
            resolved = manifest.resolve(ref)
            if resolved.startswith(("http://", "https://")) or not state.files or state.files[0] != resolved:
                return False
            return current_fingerprint(cfg, state.files) == state.fingerprint
        case HttpSource() | None:
            return settings_digest(cfg) == state.fingerprint  # normalized afresh, equal when the settings are
        case GraphQLSource() | McpSource():
            return False  # introspected or listed over the network
    return False


def _block_rules(manifest: Manifest, cfg: ConnectorConfig) -> bool:
    """Whether any rule could hide an action of ``cfg`` (only ``block`` rules hide: ``policy.is_hidden``)."""
    return any(r.action == "block" for r in (*manifest.policies, *cfg.policies))


def _info(
    manifest: Manifest,
    cfg: ConnectorConfig,
    state: Stored,
    keys: list[tuple[str, str, str]],
    user: str,
    actions: list[Any] | None,
) -> ConnectorInfo | None:
    """``Gateway.connectors``' entry for one connector whose stored catalog is current."""
    from ..manifest import NoAuth
    from ..policy import is_hidden
    from ..vocabulary.model import ConnectorInfo, withheld_note

    has = configured(cfg, [(p, n) for c, p, n in keys if c == cfg.slug], user)
    needs = not isinstance(cfg.auth, NoAuth)  # ``auth.needs_secret``, without loading every auth kind
    count = state.actions
    withheld: dict[str, int] = {}
    if actions is not None:
        paths = [a.get("path") for a in actions if isinstance(a, dict)]
        if len(paths) != state.actions or not all(isinstance(p, str) for p in paths):
            return None  # not what this build stores: the full path decodes (or rebuilds) it
        count = sum(
            1
            for p in paths
            if not is_hidden(
                qualified_name=f"{cfg.slug}.{p}",
                path=str(p),
                project_rules=manifest.policies,
                connector_rules=cfg.policies,
            )
        )
        if count < state.actions:  # ``Permissions.withheld``: nothing is held (``_nothing_held``)
            withheld = {"hidden by policy": state.actions - count}
    return ConnectorInfo(
        slug=cfg.slug,
        name=cfg.display_name,
        description=cfg.description,
        status="needs_auth" if needs and not has else "ready",
        actions=count,
        auth=cfg.auth.type,
        auth_configured=has or not needs,
        withheld=withheld or None,
        note=withheld_note(count, withheld),
    )


def _nothing_held(cfg: ConnectorConfig, state_dir: Path, state: Stored) -> bool:
    """Whether the full path's review (``Catalogs.review``) would hold none of this catalog: ``auto``
    holds nothing; ``pinned`` (a spec the operator wrote or pinned) holds only the actions whose text
    hides characters, and the scan kept for this very catalog (``discovery.ReviewCache``) found none;
    ``review`` snapshots every action. The kept file is read here as ``ReviewCache.held`` reads it:
    importing the discovery package would cost this command more than all the rest it does."""
    import hashlib
    import marshal

    trust = cfg.effective_trust
    if trust == "auto" or state.actions == 0:
        return True
    if trust != "pinned" or state.fingerprint is None:
        return False
    path = state_dir / "review-scan" / f"{hashlib.sha256(cfg.slug.encode()).hexdigest()[:32]}.review"
    try:
        key, count, held = marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return False
    return key == f"{_review_code_digest()}:{cfg.slug}:{state.fingerprint}" and count == state.actions and not held


def _review_code_digest() -> str:
    """``discovery._review_cache._code_digest()``: the code the kept scan's answers depend on."""
    import hashlib
    import sys

    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256(f"review-{_REVIEW_FORMAT}\0{sys.version}".encode())
    for name in ("policy/review.py", "primitives/sanitize.py", "vocabulary/model.py"):
        digest.update((package / name).read_bytes())
    return digest.hexdigest()


_REVIEW_FORMAT = 1
"""``discovery._review_cache._FORMAT`` (``tests/cli/test_listing.py`` checks the two readers agree)."""


def configured(cfg: ConnectorConfig, keys: list[tuple[str, str]], user: str) -> bool:
    """``CredentialBroker.configured(cfg, user)`` from the stored keys (principal, name) of ``cfg``'s
    credentials: which exist, never their values (the broker decrypts nothing either)."""
    from ..manifest import NoAuth, OAuth2Auth
    from ..primitives.secrets import PROJECT_WIDE

    per_user = cfg.credentials == "per_user"
    if isinstance(cfg.auth, OAuth2Auth):  # ``OAuth2Tokens.ready``
        if not per_user:
            return any(n == "default" for _, n in keys) and (
                cfg.auth.flow == "client_credentials" or any(n == OAUTH2_TOKEN_NAME for _, n in keys)
            )
        usable = (user, PROJECT_WIDE)
        if not any(n == "default" and p in usable for p, n in keys):
            return False
        owners = (user,) if user != PROJECT_WIDE else usable  # a per_user token set is the user's own
        return cfg.auth.flow == "client_credentials" or any(n == OAUTH2_TOKEN_NAME and p in owners for p, n in keys)
    if isinstance(cfg.auth, NoAuth):
        return True
    return any(p == user for p, _ in keys) if per_user else bool(keys)


def _discovery(manifest: Manifest, env: Any, *, json_wanted: bool) -> Any:
    """A function giving ``connectors``' discovery line (``runtime.discovery_search``'s choice, with no
    connector scheduled: the full path builds no index for ``connectors``), or None for the full path.
    The local model's presence is looked up only when the line is printed (``--json``) or ``mode:
    hybrid`` must fail without it, as the full path does."""
    mode = (env.get("MCP_GATEWAY_DISCOVERY_MODE") or "").strip()
    if mode and mode not in ("auto", "lexical", "hybrid"):
        return None  # the full path names the mistake
    config = manifest.discovery.model_copy(update={"mode": mode}) if mode else manifest.discovery
    effective = config.effective_mode
    if effective == "lexical":
        return lambda: _LEXICAL
    if config.embeddings is not None:
        label = f"{config.embeddings.model} at {config.embeddings.url}"
        return lambda: f"discovery: hybrid ({label}; 0 of 0 connectors embedded)"
    if effective == "auto" and not json_wanted:
        return lambda: ""  # not printed
    from ..discovery import EmbeddingsUnavailable
    from ..discovery.providers import local_provider

    try:
        model = local_provider().model
    except EmbeddingsUnavailable:
        if effective == "hybrid":
            return None  # the full path refuses to start, naming the install command
        return lambda: _LEXICAL
    return lambda: f"discovery: hybrid ({model}; 0 of 0 connectors embedded)"
