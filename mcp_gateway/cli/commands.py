"""The commands that use the gateway or its store: ``validate``, ``sync``, ``connectors``, ``discover``,
``describe``, ``call``, ``connect``, ``token``, ``secret``, ``approvals``, ``audit``, ``keys``.

``discover``, ``describe`` and ``call`` run the very same ``Gateway`` methods as the MCP tools.
Listing commands print a table, or JSON with ``--json``. The gateway's modules are imported
inside the commands that use them (``validate`` needs only the manifest).
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..primitives.quoting import quoted
from ..services.logs import notice
from .output import EXIT_FAILED, EXIT_STORE, CliError, escaped, link_hint, print_json, table

if TYPE_CHECKING:
    from ..core import Gateway
    from ..core.sync import Progress
    from ..manifest import Manifest
    from ..primitives.secrets import CredentialKey
    from ..services.audit import Auditor
    from ..services.identity import Principal
    from ..services.operator_tokens import OperatorTokens
    from ..services.tokens import TokenService
    from ..store.contract import ApprovalRecord, Store
    from ..vocabulary.model import PendingApproval
    from ..vocabulary.settings import Settings

__all__ = [
    "cmd_approvals",
    "cmd_audit",
    "cmd_call",
    "cmd_connect",
    "cmd_connectors",
    "cmd_describe",
    "cmd_discover",
    "cmd_keys",
    "cmd_secret",
    "cmd_sync",
    "cmd_token",
    "cmd_validate",
    "did_you_mean",
    "unknown_agent_words",
]

_print_json = print_json
_table = table


def principal(args: argparse.Namespace) -> Principal:
    from ..services.identity import OPERATOR, Principal

    agent = getattr(args, "agent", None) or args.settings.env.get("MCP_GATEWAY_AGENT")
    return Principal(user=OPERATOR.user, agent=agent) if agent else OPERATOR


def _principal(args: argparse.Namespace) -> Principal:
    """``principal``, refusing an agent the manifest does not name: taken as it is, a misspelt
    ``--agent`` or ``$MCP_GATEWAY_AGENT`` sees no connector, and every action is then said not to exist."""
    chosen = principal(args)
    if chosen.agent is not None:
        from ..manifest import load_manifest

        manifest = load_manifest(args.settings.manifest_path)
        if manifest.agents is not None and chosen.agent not in (known := [a.name for a in manifest.agents]):
            given = "--agent" if getattr(args, "agent", None) else "$MCP_GATEWAY_AGENT"
            raise CliError(
                f"the manifest {args.manifest_source} has no agent {chosen.agent!r} (given by {given})"
                f"{unknown_agent_words(chosen.agent, known)}"
            )
    return chosen


def unknown_agent_words(agent: str, known: list[str]) -> str:
    """``; did you mean 'bot'? (its agents: bot, ci)`` for an agent name the manifest does not have."""
    import difflib

    listed = ", ".join(known) or "none"
    near = difflib.get_close_matches(agent, known, n=3, cutoff=0.6)
    if near:
        return f"; did you mean {' or '.join(repr(n) for n in near)}? (its agents: {listed})"
    return f"; its agents: {listed}"


def _progress(args: argparse.Namespace) -> Progress | None:
    """``loading SLUG…`` on a terminal, overwritten by each connector's outcome: text format only (a JSON
    stream has no line of another shape), and a record logged while it shows takes its line."""
    if args.log_format == "json" or not sys.stderr.isatty():
        return None
    line = _ProgressLine()
    for handler in logging.getLogger().handlers:
        handler.addFilter(line)

    def report(slug: str, phase: str) -> None:
        if phase == "start":
            sys.stderr.write(f"\r\033[Kloading {escaped(slug)}…")
            line.shown = True
        else:
            sys.stderr.write(f"\r\033[K{escaped(slug)}: {escaped(phase)}\n")
            line.shown = False
        sys.stderr.flush()

    return report


class _ProgressLine:
    """A log filter that lets every record through, first clearing the progress line a record would
    otherwise be glued to (it has no newline, to be overwritten)."""

    def __init__(self) -> None:
        self.shown = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.shown:
            sys.stderr.write("\r\033[K")
            self.shown = False
        return True


def _auditor(store: Store, settings: Settings) -> Auditor:
    """The audit service over ``store`` with the state folder's journal, as a running gateway has it."""
    from ..services.audit import Auditor
    from ..store.audit_journal import AuditJournal

    return Auditor(store, journal=AuditJournal(settings.state_dir))


@asynccontextmanager
async def store_of(settings: Settings) -> AsyncIterator[Store]:
    """The state store, or exit 3 (``EXIT_STORE``) saying why it cannot be opened."""
    from ..store.opening import open_store  # not runtime's re-export: that imports the gateway core
    from ..vocabulary.errors import GatewayError

    async with AsyncExitStack() as stack:
        try:
            store = await stack.enter_async_context(open_store(settings))
        except (GatewayError, OSError) as exc:
            raise CliError(f"cannot open the state store: {exc}", EXIT_STORE) from None
        yield store


def _gateway(args: argparse.Namespace, **kw: Any) -> AbstractAsyncContextManager[Gateway]:
    from ..runtime import open_gateway

    # One command, then exit: embedding a catalog for hybrid discover takes far longer than that,
    # and sharing equal values to keep a resident catalog small only slows the start.
    return open_gateway(args.settings, embed=False, resident=False, **kw)


# -- commands ---------------------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    from ..manifest import blank_manifest, load_manifest

    manifest = load_manifest(args.manifest_path)
    problems = manifest.diagnostics(_read_spec)
    where = args.manifest_path or "bundled default manifest"
    if blank_manifest(args.manifest_path):
        notice(
            f"warning: {where} is empty: no connectors, no agents; a running serve keeps its manifest until "
            "the file holds one (write 'connectors: []' to mean none)",
            level=logging.WARNING,
        )
    if args.json:
        _print_json({"manifest": str(where), "connectors": len(manifest.connectors), "problems": problems})
    else:
        for p in problems:
            notice(f"{escaped(p, lines=True)}")
        if not problems:
            sys.stdout.write(f"{where}: ok ({len(manifest.connectors)} connectors)\n")
    return 1 if problems else 0


def _read_spec(kind: str, path: Path) -> None:
    """Parse one spec file the way a sync would read it (raises ``SourceError`` when it does not parse).
    The bundled catalog's specs are skipped: their tests parse them, and GitHub's alone takes a second."""
    from ..manifest.bundled import CATALOG_DIR

    if path.resolve().is_relative_to(Path(str(CATALOG_DIR)).resolve()):
        return
    if kind == "schema":
        from ..sources.graphql import read_schema

        read_schema(str(path))
        return
    from ..sources._documents import read_document

    read_document(path)


async def cmd_sync(args: argparse.Namespace) -> int:
    from ..vocabulary.model import withheld_note

    # Stores the catalogs, and their vectors when discovery is hybrid: the next ``serve`` ranks hybrid
    # from its first query instead of lexically until a background embedding finishes.
    async with _gateway(args, progress=_progress(args), build_index=False, embed_now=True) as gw:
        states = gw.states()
        withheld = {s.slug: gw.withheld(s.slug) for s in states}
    # ``actions`` counts what loaded; what agents may not see of it, and why, is said beside it, in
    # the words ``connectors`` uses, so the two commands' counts never differ unexplained.
    rows: list[dict[str, Any]] = []
    for s in states:
        row = s.model_dump(mode="json")
        if withheld[s.slug]:
            row["withheld"] = withheld[s.slug]
            row["note"] = withheld_note(s.actions - sum(withheld[s.slug].values()), withheld[s.slug])
        rows.append(row)
    if args.json:
        _print_json(rows)
    else:
        _table(
            [(s.slug, s.source, s.actions, s.status, s.error) for s in states],
            ["slug", "source", "actions", "status", "error"],
        )
        _notes(rows)
    _running_server_note(args.settings.state_dir)
    # A connector that failed to load fails the command, though it keeps serving the catalog it last loaded.
    return 1 if any(s.status == "error" or s.error for s in states) else 0


def _running_server_note(state_dir: Path) -> None:
    """A gateway serving this state folder keeps the catalogs it loaded: say how to have it sync too."""
    from ..vocabulary.served import read_served

    served = read_served(state_dir)
    if served is not None:
        notice(
            f"note: the server at {served.url} (pid {served.pid}) still serves the catalogs it loaded; "
            f"`kill -HUP {served.pid}` has it sync again"
        )


def _notes(rows: list[dict[str, Any]]) -> None:
    """Below a table of connectors: one line for each whose actions are not all available, and why."""
    for row in rows:
        if row.get("note"):
            sys.stdout.write(f"{row['slug']}: {row['note']}\n")
    if any("held for review" in why for row in rows for why in row.get("withheld") or {}):
        sys.stdout.write("`mcp-gateway review` lists the actions held for review, with the reasons\n")


def cmd_connectors(args: argparse.Namespace) -> int:
    from .listing import connectors_from_state

    # Most runs read back what the last sync stored: answered from the store, no gateway assembled
    # and no event loop (see listing.py); anything it cannot vouch for takes the full path.
    data = connectors_from_state(args, _principal(args))
    if data is None:
        import anyio

        data = anyio.run(_connectors_payload, args)
    if args.json:
        _print_json({**data, "manifest": args.manifest_source})
    else:
        _table(
            [
                (c["slug"], c["status"], c["actions"], c["auth"], c.get("error") or c.get("warning"))
                for c in data["connectors"]
            ],
            ["slug", "status", "actions", "auth", "error"],
        )
        _notes(data["connectors"])
        if "; embedding " in (data.get("discovery") or ""):  # serve is embedding: discover is lexical meanwhile
            notice(f"{data['discovery']}")
    # The operator's alone: the agent's `connectors` never counts other users' credentials.
    for slug, count in _uncarried_personal(args).items():
        notice(
            f"note: {slug} has {count} personal credential(s) stored while it was `credentials: per_user`; it is "
            f"shared now, so its calls carry the team-wide one and never these. Remove them with "
            f"`mcp-gateway secret delete {slug} --user USER` (`mcp-gateway doctor` names each user)"
        )
    return 0


def _uncarried_personal(args: argparse.Namespace) -> dict[str, int]:
    """How many personal credentials each ``shared`` connector keeps from a time it was ``per_user``."""
    from ..core.credential_readiness import uncarried_personal
    from ..manifest import load_manifest
    from ..primitives.secrets import PROJECT_WIDE
    from .listing import stored_credential_keys

    if args.settings.database_url:
        import anyio

        keys = anyio.run(_credential_keys, args.settings)
    else:
        keys = stored_credential_keys(args.settings)
    if all(k.principal == PROJECT_WIDE for k in keys):
        return {}  # the common case: no manifest to read again
    manifest = load_manifest(args.settings.manifest_path)
    counts = {cfg.slug: len(uncarried_personal(cfg, keys)) for cfg in manifest.connectors}
    return {slug: count for slug, count in counts.items() if count}


async def _credential_keys(settings: Settings) -> list[CredentialKey]:
    async with store_of(settings) as store:
        return await store.list_credentials()


async def _connectors_payload(args: argparse.Namespace) -> dict[str, Any]:
    """``connectors`` the full way: sync every connector through a ``Gateway`` and ask it."""
    from ..core import result_payload

    async with _gateway(args, build_index=False) as gw:  # states only: no discovery index to build
        return result_payload(await gw.connectors(_principal(args)))


def cmd_discover(args: argparse.Namespace) -> int:
    from ..core.discover_answer import NOTHING_TO_SEARCH, nothing_to_search
    from .stored_discover import discover_from_state

    if nothing_to_search(" ".join(args.query)):
        raise CliError(NOTHING_TO_SEARCH)
    if args.connector is not None:
        _known_connector(args, args.connector)

    # As for ``connectors``: most runs rank over what the last sync stored, with no gateway assembled
    # and no event loop (see stored_discover.py); anything it cannot vouch for takes the full path.
    data = discover_from_state(args, _principal(args))
    if data is None:
        import anyio

        data = anyio.run(_discover_payload, args)
    if data.get("status") in ("denied", "error"):
        raise CliError(str(data.get("message")))
    if args.json:
        _print_json({**data, "manifest": args.manifest_source})
    else:
        _table([(r["name"], r["risk"], r["summary"]) for r in data["results"]], ["action", "risk", "summary"])
        if data.get("confidence") == "low" and data.get("hint"):  # what --json says in its "hint"
            notice(f"low confidence: {data['hint']}")
        for api in data.get("catalog") or ():  # nothing configured serves it well; the catalog has these
            notice(f"not configured, in the bundled catalog: {api['name']} ({api['add']})")
    return 0


async def _discover_payload(args: argparse.Namespace) -> dict[str, Any]:
    """``discover`` the full way: a ``Gateway`` synced and indexed, and its ``discover``."""
    from ..core import result_payload

    async with _gateway(args) as gw:
        return result_payload(
            await gw.discover(_principal(args), " ".join(args.query), connector=args.connector, limit=args.limit)
        )


def _known_connector(args: argparse.Namespace, slug: str) -> None:
    """Refuse a connector the manifest does not have, suggesting the nearest slugs (a typo, or the
    manifest another command edited): an empty answer would look like "nothing matches"."""
    from ..manifest import load_manifest

    slugs = [c.slug for c in load_manifest(args.settings.manifest_path).connectors]
    if slug not in slugs:
        raise CliError(f"no connector {slug!r} in the manifest {args.manifest_source}{did_you_mean(slug, slugs)}")


def did_you_mean(word: str, known: list[str]) -> str:
    """``; did you mean 'x'?`` for the nearest of ``known``, else the whole list (or nothing)."""
    import difflib

    near = difflib.get_close_matches(word, known, n=3, cutoff=0.6)
    if near:
        return "; did you mean " + " or ".join(repr(n) for n in near) + "?"
    return f"; it has: {', '.join(known)}" if known else "; it has none"


def _exit_for(data: dict[str, Any]) -> int:
    return 1 if data.get("status") in ("denied", "error") else 0


async def cmd_describe(args: argparse.Namespace) -> int:
    from ..core import result_payload

    async with _gateway(args) as gw:
        data = result_payload(await gw.describe(_principal(args), args.tool))
    _print_json(data)
    return _exit_for(data)


async def cmd_call(args: argparse.Namespace) -> int:
    try:
        call_args = json.loads(args.args) if args.args else {}
    except json.JSONDecodeError as exc:
        raise CliError(
            f"--args is not valid JSON ({exc.msg} at column {exc.colno}); pass an object like "
            '\'{"owner": "octocat"}\''
        ) from None
    if not isinstance(call_args, dict):
        raise CliError('--args must be a JSON object, e.g. \'{"owner": "octocat"}\'')
    announced: list[str] = []
    async with _gateway(args) as gw:

        async def announce(pending: PendingApproval) -> None:
            # The operator at this terminal is often the approver: the link now, not once the wait is over.
            from ..services.approvals import MAX_WAIT_SECONDS

            waiting = min(args.wait, MAX_WAIT_SECONDS)
            notice(f"mcp-gateway: approval needed: {pending.approval_url} (waiting up to {waiting:g} s)")
            _hint_link({"approval_url": pending.approval_url}, gw.links.public_url)
            sys.stderr.flush()
            announced.append(pending.approval_url)

        result = await gw.call(
            _principal(args),
            args.tool,
            call_args,
            approval_id=args.approval_id,
            fields=args.fields or None,
            wait=args.wait,
            on_pending=announce,
        )
    from ..core import result_payload

    data = result_payload(result)
    _print_json(data)
    if data.get("approval_url") not in announced:  # said already, before the wait
        _hint_link(data, gw.links.public_url)
    return _exit_for(data)


async def cmd_connect(args: argparse.Namespace) -> int:
    from ..core import result_payload

    async with _gateway(args) as gw:
        data = result_payload(await gw.connect(_principal(args), args.connector))
    _print_json(data)
    _hint_link(data, gw.links.public_url)
    return _exit_for(data)


def _hint_link(data: dict[str, Any], public_url: str) -> None:
    """How to open the link just printed; nothing when a server already answers where it points."""
    from ..vocabulary.served import url_answers

    hint = link_hint(data, public_url)
    if hint and not url_answers(public_url):
        notice(f"mcp-gateway: {hint}")


async def cmd_token(args: argparse.Namespace) -> int:
    from ..services.operator_tokens import OperatorTokens
    from ..services.tokens import TokenService

    async with store_of(args.settings) as store:
        tokens = TokenService(store, _clock())
        operators = OperatorTokens(store, _clock())
        if args.token_cmd == "create":
            if args.operator == bool(args.agent):
                raise CliError("give either --agent NAME (an MCP token) or --operator (for the /operator page)")
            if args.agent:
                _refuse_unknown_agent(args)
            if args.operator:
                made, token = await operators.create()
                token_id, label = made.id, "the operator page"
            else:
                record, token = await tokens.create(args.agent)
                token_id, label = record.id, f"agent {quoted(record.agent)}"
            if args.json:
                _print_json({"id": token_id, "agent": args.agent, "operator": args.operator, "token": token})
            else:
                notice(f"token {token_id} for {label} (shown once; store it safely):")
                sys.stdout.write(token + "\n")
        elif args.token_cmd == "list":
            rows = [
                {"id": r.id, "agent": r.agent, "kind": "agent", "created_at": r.created_at, "revoked": r.revoked}
                for r in await tokens.list()
            ]
            rows += [
                {"id": o.id, "agent": None, "kind": "operator", "created_at": o.created_at, "revoked": o.revoked}
                for o in await operators.list()
            ]
            if args.json:
                _print_json(rows)
            else:
                _table(
                    [
                        (
                            r["id"],
                            r["agent"] or "(operator)",
                            str(r["created_at"])[:19],
                            "revoked" if r["revoked"] else "active",
                        )
                        for r in rows
                    ],
                    ["id", "agent", "created", "state"],
                )
        else:
            token_id = await _token_id(tokens, operators, args.id.strip())
            if not await tokens.revoke(token_id) and not await operators.revoke(token_id):
                # An id is 12 hex digits: anything much longer may be a secret pasted by mistake, never repeated.
                shown = repr(token_id) if len(token_id) <= 16 else "(not shown: too long for an id)"
                raise CliError(f"no active token with id {shown}; see 'mcp-gateway token list'")
            sys.stdout.write(f"revoked {token_id}\n")
    return 0


async def _token_id(tokens: TokenService, operators: OperatorTokens, given: str) -> str:
    """The id of the token ``given`` names: its id, or the token itself (an operator revoking a leaked
    token often has only the token at hand)."""
    from ..services.operator_tokens import OPERATOR_TOKEN_PREFIX
    from ..services.tokens import TOKEN_PREFIX

    if not given.startswith((TOKEN_PREFIX, OPERATOR_TOKEN_PREFIX)):
        return given
    found = await tokens.id_of(given) or await operators.id_of(given)
    if found is None:
        raise CliError("that token is no token of this state folder; see 'mcp-gateway token list'")
    return found


AGENT_NAME_LIMIT = 200
"""Characters of an agent name ``token create`` takes beyond the manifest's own: every audit row, log
line and approval page of the token's calls carries the name."""


def _refuse_unknown_agent(args: argparse.Namespace) -> None:
    """A token for an agent the manifest does not name sees no connector at all: refuse it (``--force`` mints
    it). A name longer than ``AGENT_NAME_LIMIT`` the manifest does not declare is refused, ``--force`` or not."""
    from ..manifest import load_manifest

    agent: str = args.agent
    if args.force and len(agent) <= AGENT_NAME_LIMIT:
        return
    manifest = load_manifest(args.settings.manifest_path)
    known = [a.name for a in manifest.agents or ()]
    if len(agent) > AGENT_NAME_LIMIT and agent not in known:
        raise CliError(
            f"an agent name is at most {AGENT_NAME_LIMIT} characters, and this one has {len(agent)} "
            f"({quoted(agent)}); give the agent's name as the manifest's 'agents:' declares it"
        )
    if args.force or manifest.agents is None:
        return  # no agents section: every agent sees every connector
    if agent not in known:
        raise CliError(
            f"the manifest has no agent {agent!r}, so its token would see no connector; add it under "
            f"'agents:' or pass --force to mint it anyway{unknown_agent_words(agent, known)}"
        )


async def cmd_secret(args: argparse.Namespace) -> int:
    from ..auth.secret_check import over_http, unusable
    from ..core.credential_changes import change_record, reserved_name
    from ..core.credential_origins import CredentialOrigins, address
    from ..manifest import OAuth2Auth, load_manifest
    from ..primitives.crypto import AESGCMCipher, load_master_key
    from ..primitives.secrets import PROJECT_WIDE, CredentialKey, parse_secret_input
    from ..services.approvals import ApprovalService
    from ..services.credentials import CredentialVault
    from ..services.identity import OPERATOR

    manifest = load_manifest(args.settings.manifest_path)
    if args.secret_cmd == "delete":
        return await _delete_secret(args, manifest)
    if args.discovery:
        return await _discovery_secret(args, manifest)
    if args.front_door:
        return await _front_door_secret(args, manifest)
    if args.connector is None:
        raise CliError("name the connector whose secret this is (or --discovery for the embeddings endpoint's key)")
    cfg = manifest.connector(args.connector)
    if cfg is None:
        slugs = [c.slug for c in manifest.connectors]
        raise CliError(f"no connector {args.connector!r} in the manifest{did_you_mean(args.connector, slugs)}")
    if cfg.credentials == "per_user" and not isinstance(cfg.auth, OAuth2Auth):
        # Its calls carry only the caller's own credential: a team-wide one would be stored and never used.
        raise CliError(
            f"not stored: {cfg.slug} is `credentials: per_user`: each user connects their own, and no call carries "
            f"a team-wide one. A user's agent calls connect (or request_secret) for {cfg.slug}; for your own, run "
            f"`mcp-gateway connect {cfg.slug}` (with --agent NAME for an agent's)"
        )
    if (reserved := reserved_name(cfg, args.name)) is not None:
        raise CliError(f"not stored: {reserved.replace('call connect for', 'run mcp-gateway connect')}")
    kind = cfg.auth.type if args.name == "default" else "bearer"
    raw = _secret_input(f"{cfg.slug} secret {args.name!r} ({kind})")
    value = parse_secret_input(kind, raw, over_http=over_http(cfg))
    if args.name == "default" and (problem := unusable(cfg.auth, value)):
        raise CliError(f"not stored: {problem}")
    async with store_of(args.settings) as store:
        cipher = AESGCMCipher(load_master_key(args.settings.env, args.settings.state_dir), project=manifest.project)
        vault = CredentialVault(store, cipher, project=manifest.project)
        key = CredentialKey(connector=cfg.slug, principal=PROJECT_WIDE, name=args.name)
        stored = await vault.keys(cfg.slug)
        replaced = "team" if key in stored else None
        # Left from a time the connector was per_user: its calls carry this team-wide one, never those.
        leftovers = sorted({k.principal for k in stored if k.principal != PROJECT_WIDE})
        fingerprint = await vault.put(cfg.slug, value, name=args.name)
        await CredentialOrigins(store, _clock()).stored(
            key,
            by=OPERATOR.user,
            via="secret set",
            replaced=bool(replaced),
            fingerprint=fingerprint,
            address=address(cfg),
        )
        # The replacements waiting were asked against the credential just overwritten: moot now.
        overtaken = await ApprovalService(store, _clock()).withdraw_credential(cfg.slug, args.name)
        # The operator's act, on the record like a change through a page (never the value).
        await _auditor(store, args.settings).record(
            change_record(key, at=_clock().now(), who=OPERATOR.user, via="secret set", replaced=replaced)
        )
        in_error = any(s.slug == cfg.slug and s.status == "error" for s in await store.list_connector_states())
    notice(f"stored secret {args.name!r} for {cfg.slug} ({cfg.auth.type})")
    if leftovers:
        users = ", ".join(escaped(u) for u in leftovers)
        notice(
            f"note: {len(leftovers)} user(s) have a personal credential for {cfg.slug} stored while it was "
            f"`credentials: per_user` ({users}); its calls carry this team-wide one, never those. Delete them with "
            f"`mcp-gateway secret delete {cfg.slug} --user USER`"
        )
    for approval in overtaken:
        notice(
            f"withdrew approval {approval.id} (to replace it, asked by {escaped(approval.principal)}): it was asked "
            "against the credential just replaced; its link stores nothing, and a new link asks again"
        )
    if in_error:  # its last sync failed, perhaps for want of this credential: sync it again now
        async with _gateway(args, manifest=manifest) as gw:
            state = await gw.credential_stored(cfg.slug) or next(s for s in gw.states() if s.slug == cfg.slug)
        detail = f"{state.actions} actions" if state.status != "error" else escaped(state.error or "")
        notice(f"synced {cfg.slug}: {state.status} ({detail})")
    return 0


async def _delete_secret(args: argparse.Namespace, manifest: Manifest) -> int:
    """``secret delete CONNECTOR [NAME] [--user USER]``: take one stored credential out of the vault,
    on the record like every other change (never the value). Nothing stored under that key exits 2,
    naming what is stored for the connector."""
    from ..core.credential_changes import scope_of
    from ..primitives.secrets import PROJECT_WIDE, CredentialKey

    slug: str = args.connector
    key = CredentialKey(connector=slug, principal=args.user or PROJECT_WIDE, name=args.name)
    async with store_of(args.settings) as store:  # deleting opens nothing: no master key needed
        stored = await stored_credentials(store, slug)
        if key not in stored:
            if not stored and manifest.connector(slug) is None:
                slugs = [c.slug for c in manifest.connectors]
                raise CliError(
                    f"nothing is stored for {slug!r}, and the manifest has no such connector{did_you_mean(slug, slugs)}"
                )
            raise CliError(
                f"nothing to delete: no {credential_words(key)} is stored for {slug}; {_stored_words(stored)}"
            )
        withdrawn = await delete_credentials(store, args.settings, [key], via="secret delete")
    carried = " (every user's calls carried it)" if scope_of(key) == "team" else ""
    notice(f"deleted the {credential_words(key)} of {slug}{carried}")
    for approval in withdrawn:
        notice(
            f"withdrew approval {approval.id} (to replace it, asked by {escaped(approval.principal)}): its link now "
            "adds a credential like any new link"
        )
    return 0


async def stored_credentials(store: Store, slug: str) -> list[CredentialKey]:
    """Which credentials are stored for connector ``slug`` (never their values)."""
    return [k for k in await store.list_credentials() if k.connector == slug]


async def delete_credentials(
    store: Store, settings: Settings, keys: list[CredentialKey], *, via: str
) -> list[ApprovalRecord]:
    """Delete ``keys``, each with its audit row naming the operator and ``via`` (never the value), and its
    record (who stored it); withdraw the approvals waiting to replace a deleted team-wide one (there is
    nothing left to replace: their links add one, as a new link would). The approvals withdrawn."""
    from ..core.credential_changes import deletion_record
    from ..core.credential_origins import CredentialOrigins
    from ..primitives.secrets import PROJECT_WIDE
    from ..services.approvals import ApprovalService
    from ..services.identity import OPERATOR

    auditor = _auditor(store, settings)
    origins = CredentialOrigins(store, _clock())
    approvals = ApprovalService(store, _clock())
    withdrawn: list[ApprovalRecord] = []
    for key in keys:
        await store.delete_credential(key)
        await origins.forget(key)
        if key.principal == PROJECT_WIDE:
            withdrawn += await approvals.withdraw_credential(key.connector, key.name)
        await auditor.record(deletion_record(key, at=_clock().now(), who=OPERATOR.user, via=via))
    return withdrawn


def credential_words(key: CredentialKey) -> str:
    """A stored credential in words: whose, and its name (never a value)."""
    from ..primitives.secrets import PROJECT_WIDE

    whose = "team-wide" if key.principal == PROJECT_WIDE else f"{escaped(key.principal)}'s own"
    return f"{whose} credential '{escaped(key.name)}'"  # not repr(): it would double each escape's backslash


def _stored_words(stored: list[CredentialKey]) -> str:
    from ..primitives.secrets import PROJECT_WIDE

    if not stored:
        return "it has no stored credential"
    listed = ", ".join(
        f"'{escaped(k.name)}' ({'team-wide' if k.principal == PROJECT_WIDE else '--user ' + escaped(k.principal)})"
        for k in sorted(stored, key=lambda k: (k.principal, k.name))
    )
    return f"stored: {listed}"


def _secret_input(what: str) -> str:
    """The secret on stdin: piped, read whole; typed at a terminal, asked for without echoing it (it
    was shown as typed, with no prompt saying input was awaited)."""
    if sys.stdin is None or sys.stdin.closed:
        raise CliError(f"no {what} to read: stdin is closed; pipe it in (mcp-gateway secret set NAME < file)")
    if not sys.stdin.isatty():
        raw = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            # Read as text, such bytes became lone surrogates, described as "half of a UTF-16 pair".
            raise CliError(
                f"the {what} on stdin is not UTF-8 text (byte 0x{raw[exc.start]:02x} at position {exc.start}); "
                "save it as UTF-8, without a byte-order mark of another encoding"
            ) from None
    import getpass

    return getpass.getpass(f"{what}, not shown as you type (JSON on one line where a shape is asked): ")


async def _discovery_secret(args: argparse.Namespace, manifest: Manifest) -> int:
    """``secret set --discovery``: the API key of ``discovery.embeddings``, sealed like a connector secret."""
    from ..runtime import DISCOVERY_SECRET

    if args.connector is not None:
        raise CliError("--discovery stores the embeddings endpoint's key: name no connector")
    await _reserved_secret(args, manifest, *DISCOVERY_SECRET)
    notice("stored the discovery embeddings API key (used from the next start)")
    return 0


async def _front_door_secret(args: argparse.Namespace, manifest: Manifest) -> int:
    """``secret set --front-door approver|introspection``: a client secret of the front door's own
    clients at the issuer, sealed like a connector secret (never in the manifest)."""
    from ..services.front_door import FRONT_DOOR_SECRETS

    if args.connector is not None:
        raise CliError("--front-door stores a client secret of the front door: name no connector")
    await _reserved_secret(args, manifest, FRONT_DOOR_SECRETS, args.front_door)
    notice(f"stored the front door's {args.front_door} client secret")
    return 0


async def _reserved_secret(args: argparse.Namespace, manifest: Manifest, connector: str, name: str) -> None:
    """Seal stdin under one of the vault's reserved connectors (``_discovery``, ``_front_door``)."""
    from ..primitives.crypto import AESGCMCipher, load_master_key
    from ..primitives.secrets import parse_secret_input
    from ..services.credentials import CredentialVault

    value = parse_secret_input("bearer", _secret_input("secret"))
    async with store_of(args.settings) as store:
        cipher = AESGCMCipher(load_master_key(args.settings.env, args.settings.state_dir), project=manifest.project)
        await CredentialVault(store, cipher, project=manifest.project).put(connector, value, name=name)


async def cmd_approvals(args: argparse.Namespace) -> int:
    from ..services.approvals import ApprovalService, ApproverRefused, ArgumentsUnshown, as_of
    from ..services.identity import OPERATOR

    async with store_of(args.settings) as store:
        approvals = ApprovalService(store, _clock())
        if args.approvals_cmd == "list":
            rows = await approvals.listed(None if args.all else "pending")
            if args.json:
                _print_json([r.model_dump(mode="json") for r in rows])
            else:
                _table(
                    [
                        (
                            r.id,
                            r.status,
                            r.tool,
                            r.agent or r.principal,
                            r.expires_at.isoformat(timespec="seconds"),
                            r.calls,
                            r.summary,
                        )
                        for r in rows
                    ],
                    ["id", "status", "tool", "who", "expires", "target", "summary"],
                )
                if rows:
                    # A summary is cut and a table cell is one line: deciding needs every argument.
                    sys.stdout.write("\nEvery argument of one, whole: mcp-gateway approvals show ID\n")
            return 0
        if args.approvals_cmd == "show":
            record = await approvals.get(args.id)
            if record is None:
                raise CliError(f"approval {args.id!r} is unknown; 'mcp-gateway approvals list --all' lists them")
            record = as_of(record, _clock().now())
            if args.json:
                _print_json(record.model_dump(mode="json"))
            else:
                sys.stdout.write(_shown_approval(record))
            return 0
        try:
            decided = await approvals.decide(args.id, args.approvals_cmd == "approve", by=OPERATOR.user)
        except ArgumentsUnshown:
            raise CliError(
                f"approval {args.id!r} cannot be approved: its arguments were too long to store whole, so nobody "
                f"can see all of what would run. Deny it (mcp-gateway approvals deny {args.id}) or let it expire"
            ) from None
        except ApproverRefused:
            raise CliError(
                f"approval {args.id!r} was asked for by the operator itself and must be approved by someone else"
            ) from None
        if decided is None:
            raise CliError(f"approval {args.id!r} is not pending (unknown, decided or expired)")
        sys.stdout.write(f"{decided.id}: {decided.status}\n")
    return 0


async def cmd_audit(args: argparse.Namespace) -> int:
    async with store_of(args.settings) as store:
        # Through the auditor a server uses: rows a refused write left in the state folder's journal
        # are replayed into the store first, so the listing shows every decision made.
        auditor = _auditor(store, args.settings)
        await auditor.replay()
        rows = await auditor.recent(args.limit)
    if args.json:
        _print_json([r.model_dump(mode="json") for r in rows])
    else:
        _table(
            [
                (
                    r.at.isoformat(timespec="seconds"),
                    r.agent or r.user,
                    r.requested,
                    r.verdict,
                    r.verdict_source,
                    r.status,
                    r.reason,
                    r.upstream_status,
                    r.latency_ms,
                )
                for r in rows
            ],
            ["time", "who", "tool", "verdict", "source", "status", "reason", "upstream", "ms"],
        )
    return 0


async def cmd_keys(args: argparse.Namespace) -> int:
    from ..manifest import load_manifest
    from ..primitives.crypto import KEY_ENV_VAR, KEY_FILE_NAME, AESGCMCipher, load_master_key, parse_master_key
    from ..services.credentials import CredentialVault
    from ..vocabulary.errors import CredentialError

    raw = sys.stdin.buffer.read()
    try:
        # Read by the rule the gateway reads the key with (hex, URL-safe base64, passphrase): sealed under
        # the raw text, the credentials would open under no key the operator can set.
        new_key = parse_master_key(raw.decode("utf-8"))
    except UnicodeDecodeError:
        new_key = raw
    except CredentialError as exc:
        raise CliError(f"pipe the new master key on stdin: {exc}") from None
    if len(new_key) < 32:
        raise CliError(
            "pipe the new master key (>= 32 bytes) on stdin; make one with "
            'python -c "import secrets; print(secrets.token_urlsafe(32))"'
        )
    settings = args.settings
    manifest = load_manifest(settings.manifest_path)
    in_file = not (settings.env.get(KEY_ENV_VAR) or "").strip()
    key_file = settings.state_dir / KEY_FILE_NAME
    async with store_of(settings) as store:
        old = AESGCMCipher(load_master_key(settings.env, settings.state_dir), project=manifest.project)
        # Kept beside the key file before anything is re-sealed: the new key is never only in memory.
        staged = _staged_key(key_file, new_key) if in_file else None
        try:
            count = await CredentialVault(store, old, project=manifest.project).rotate(
                AESGCMCipher(new_key, project=manifest.project)
            )
        except BaseException:
            if staged is not None:
                staged.unlink(missing_ok=True)
            raise
    if staged is None:
        notice(
            f"re-encrypted {count} credentials; now set {KEY_ENV_VAR} to the new key wherever the gateway runs, "
            "and restart running gateways (they still hold the old key)"
        )
        return 0
    try:
        os.replace(staged, key_file)
    except OSError as exc:
        raise CliError(
            f"re-encrypted {count} credentials, but could not replace {key_file} ({exc.strerror}); the new key "
            f"is in {staged}: move it there yourself (mode 600) before the next start",
            code=EXIT_FAILED,
        ) from None
    notice(
        f"re-encrypted {count} credentials; {key_file} holds the new key. Restart running gateways (they still "
        "hold the old key)"
    )
    return 0


def _staged_key(key_file: Path, key: bytes) -> Path:
    """``key`` written as URL-safe base64 (what ``parse_master_key`` reads back to the same bytes) to a new
    private file beside ``key_file``, synced."""
    staged = key_file.with_name(f".{key_file.name}.new")
    staged.unlink(missing_ok=True)
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(base64.urlsafe_b64encode(key).rstrip(b"=") + b"\n")
        f.flush()
        os.fsync(f.fileno())
    return staged


def _clock() -> Any:
    from ..vocabulary.clock import SystemClock

    return SystemClock()


def _shown_approval(record: ApprovalRecord) -> str:
    """An approval as a terminal shows it: what the approval page shows, hidden characters as escapes."""
    from ..primitives.lookalikes import lookalikes
    from ..primitives.sanitize import reveal, revealed, right_to_left
    from ..services.approvals import arguments_whole

    lines = [
        ("id", record.id),
        ("status", record.status),
        ("asked by", f"{record.principal}" + (f" (agent {record.agent})" if record.agent else "")),
        ("action", f"{record.tool} ({record.risk})"),
        ("does", record.does),
        ("calls", record.calls),
        ("why", f"{record.verdict_source} policy" + (f", rule {record.verdict_rule}" if record.verdict_rule else "")),
        ("expires", record.expires_at.isoformat(timespec="seconds")),
        ("fingerprint", record.fingerprint),
    ]
    # Spelled by the page's own rule (``reveal``), then made safe for a terminal.
    out = [f"{name + ':':<13}{escaped(revealed(str(value)))}" for name, value in lines if value]
    out += ["arguments:", escaped(revealed(record.arguments or "{}"), lines=True)]
    if not arguments_whole(record):
        out.append("(the arguments were cut when stored, so this call cannot be approved: deny it or let it expire)")
    if record.arguments and record.arguments.count("[redacted]"):
        out.append(f"({record.arguments.count('[redacted]')} value(s) under credential-like names are hidden)")
    shown = f"{record.calls or ''} {record.arguments or ''}"
    if any(marked for _, marked in reveal(shown)):
        out.append(
            "warning: invisible, blank-looking or direction-changing characters, or marks drawn over other letters, "
            "are shown as their codes (\\u202e); elsewhere the text may read differently"
        )
    if right_to_left(shown):
        out.append(
            "warning: right-to-left letters (Hebrew, Arabic ...): shown here in the order written, but a terminal "
            "or page that applies bidi turns the digits and words after them around ('5000 ,5' for '5, 5000')"
        )
    mixed = lookalikes(shown)
    if mixed:  # as the page and the overview warn: a word that reads as another
        out.append("warning: words mixing alphabets, which read as other words: " + escaped("; ".join(mixed)))
    return "\n".join(out) + "\n"
