"""``init``, ``add`` and ``remove``: write the manifest for the user, keeping their comments and order.

The file is edited with ``ruamel.yaml``'s round trip (comments, key order, quoting and flow style
survive), validated with the gateway's own loader, and put back as it was when the result does not
validate. ``add`` then syncs the new connector and prints the next step (store its secret, or open
its connect link); ``remove`` takes out exactly the entry ``add`` wrote.

``add`` understands a catalog entry name (``stripe``), an OpenAPI file (``./openapi.yaml``), an
OpenAPI URL (fetched once, stored under the state folder by its sha256, the manifest pointing at
that pinned copy), an MCP server command (``--mcp -- npx -y server``) and an MCP URL (``--mcp-url``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import itertools
import logging
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..primitives.file_kinds import not_a_file
from ..services.logs import notice
from . import LOCAL_MANIFEST
from .commands import credential_words, delete_credentials, store_of, stored_credentials
from .output import EXIT_FAILED, CliError, escaped, print_json

if TYPE_CHECKING:
    from ruamel.yaml import YAML

    from ..primitives.secrets import CredentialKey

__all__ = ["STARTER", "cmd_add", "cmd_init", "cmd_remove"]

STARTER = """\
# mcp-gateway manifest: one MCP server in front of the APIs listed below.
# Every mcp-gateway command run in this folder reads ./gateway.yaml; elsewhere, give
# --manifest {path} (or export MCP_GATEWAY_MANIFEST={path}).
# Check it:        mcp-gateway validate{flag}
# Add connectors:  mcp-gateway add stripe{flag}   (a catalog entry; also an OpenAPI file or URL, or --mcp)
# Run it:          mcp-gateway serve{flag}

# Namespaces stored credentials and links: keep it stable once secrets are stored.
project: {project}

# risk: reads run, writes and deletes wait for a human's approval. allow_all: everything runs.
default_mode: risk

# Links the gateway hands out (connect a credential, approve a call) point at the address it serves:
# `mcp-gateway serve --transport http --port N` serves them on port N; with stdio, `mcp-gateway pages`
# (http://127.0.0.1:8765). Set public_url only when humans reach the gateway at another address
# (a proxy, a public host name):
# public_url: https://gateway.example.com

# Gateway-wide rules, first match wins: always_run, require_approval or block, by action name.
policies:
  - match: "*.delete*"
    action: require_approval

connectors:
  # The Swagger Petstore demo from the bundled catalog. It asks for an api_key (the connectors
  # list shows needs_auth) but its demo server takes any value:
  #   echo special-key | mcp-gateway secret set petstore
  # discover and describe work without it.
  - slug: petstore
    catalog: petstore

# Agents with HTTP tokens see only the connectors granted here (leave it out: everyone sees all).
# agents:
#   - name: bot
#     connectors: [petstore]
"""

DEFAULTED = """\
# mcp-gateway manifest, written from the bundled default (`mcp-gateway init --default`).
# Every mcp-gateway command run in this folder reads ./gateway.yaml; elsewhere, give
# --manifest {path} (or export MCP_GATEWAY_MANIFEST={path}).
# Check it:        mcp-gateway validate{flag}
# Add connectors:  mcp-gateway add stripe{flag}   (a catalog entry; also an OpenAPI file or URL, or --mcp)
# Run it:          mcp-gateway serve{flag}

"""

SLUG_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


# -- the file -------------------------------------------------------------------------------------


def _yaml_for(text: str) -> tuple[YAML, Any]:
    """A round-trip loader/dumper set to the file's own indentation, and the loaded document."""
    from ruamel.yaml import YAML
    from ruamel.yaml.util import load_yaml_guess_indent

    _, indent, block_seq_indent = load_yaml_guess_indent(text)
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    sequence, offset = indent or 2, block_seq_indent or 0
    yaml.indent(mapping=max(sequence - offset, 2), sequence=sequence, offset=offset)
    return yaml, yaml.load(text)


def _parsed(path: Path, text: str) -> Any:
    """The manifest's round-trip document; a file that is not YAML gets the loader's located error."""
    from ruamel.yaml.error import YAMLError

    try:
        return _yaml_for(text)[1]
    except YAMLError as exc:
        from ..manifest import load_manifest

        load_manifest(path)  # says where and what, as every command does
        problem = escaped(str(exc).strip().splitlines()[0])
        raise CliError(f"{path}: cannot edit it ({problem}); edit it by hand") from None


def _dump(yaml: YAML, doc: Any) -> str:
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


def _manifest_file(args: argparse.Namespace) -> Path:
    path = args.manifest_path
    if path is None:
        default = Path("gateway.yaml")
        if default.is_file():
            return default
        raise CliError(
            "no manifest to edit (the bundled default is read-only): run 'mcp-gateway init --default' to write it "
            "as ./gateway.yaml (or 'mcp-gateway init' for a starter), or give --manifest FILE "
            "(or $MCP_GATEWAY_MANIFEST)"
        )
    try:
        kind = not_a_file(path)
    except FileNotFoundError:
        raise CliError(f"cannot read the manifest {path}: no such file; 'mcp-gateway init {path}' writes one") from None
    except OSError as exc:
        raise CliError(f"cannot read the manifest {path}: {exc.strerror or type(exc).__name__}") from None
    if kind is not None:
        raise CliError(f"cannot edit the manifest {path}: it is {kind}, not a file; give --manifest a YAML file")
    return path


def _check(path: Path, text: str, original: str) -> Any:
    """Write ``text``, load it with the gateway's loader; put ``original`` back if it does not validate."""
    from ..manifest import load_manifest
    from ..vocabulary.errors import ManifestError

    path.write_text(text, encoding="utf-8")
    try:
        return load_manifest(path)
    except ManifestError:
        path.write_text(original, encoding="utf-8")
        raise


# -- init -----------------------------------------------------------------------------------------


async def cmd_init(args: argparse.Namespace) -> int:
    return _init(Path(args.path), force=args.force, default=getattr(args, "default", False))


def _init(path: Path, *, force: bool, default: bool = False) -> int:
    if path.is_dir():  # --force overwrites a file, never a folder
        raise CliError(f"{path} is a folder; name the file to write, e.g. mcp-gateway init {path / LOCAL_MANIFEST}")
    if path.exists() and not force:
        raise CliError(f"{path} exists; pass --force to overwrite it, or name another file")
    project = re.sub(r"[^a-z0-9_-]+", "-", path.resolve().parent.name.lower()).strip("-") or "default"
    local = path.resolve() == Path(LOCAL_MANIFEST).resolve()  # what every command here reads unasked
    flag = "" if local else f" --manifest {path}"
    if default:
        # The gateway that ran without a manifest, as a file to edit: the same project (its stored
        # credentials stay readable), the same connectors.
        from ..manifest import DEFAULT_MANIFEST

        lines = DEFAULT_MANIFEST.read_text(encoding="utf-8").splitlines(keepends=True)
        body = "".join(itertools.dropwhile(lambda line: line.startswith("#"), lines))  # its own header is its file's
        text = DEFAULTED.format(path=path.resolve(), flag=flag) + body
    else:
        text = STARTER.format(path=path.resolve(), project=project, flag=flag)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path} ({exc.strerror or exc}); name a file in a folder you can write") from None
    _check(path, text, text)
    if local:
        notice(f"wrote {escaped(str(path))}; every command run in this folder reads it. next: mcp-gateway add stripe")
        return 0
    notice(
        f"wrote {escaped(str(path))}; next: mcp-gateway add <catalog entry | openapi file or URL> --manifest "
        f"{escaped(str(path))}\n  (or export MCP_GATEWAY_MANIFEST={escaped(str(path.resolve()))})"
    )
    return 0


# -- add ------------------------------------------------------------------------------------------


def _catalog_names() -> list[str]:
    from ..manifest import CATALOG_DIR

    return sorted(p.stem for p in CATALOG_DIR.glob("*.yaml"))


def _slugify(text: str) -> str:
    slug = re.sub(r"[^a-z0-9_]+", "_", text.lower()).strip("_")
    slug = re.sub(r"^[^a-z]+", "", slug)[:63]
    return slug or "api"


def _read_spec(raw: bytes, where: str) -> dict[str, Any]:
    from ..sources._documents import parse_document
    from ..vocabulary.errors import SourceError

    # The loader's own reader: what add accepts, sync reads the same way (encoding, truncation, tags).
    try:
        doc = parse_document(raw, name=where)
    except SourceError as exc:
        raise CliError(str(exc)) from None
    if not isinstance(doc, dict) or not ("openapi" in doc or "swagger" in doc):
        raise CliError(f"{where} is not an OpenAPI document (no 'openapi' or 'swagger' key)")
    return doc


def _auth_from_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The auth block the spec's first security scheme implies, or None (left to the user)."""
    schemes = (doc.get("components") or {}).get("securitySchemes") or doc.get("securityDefinitions") or {}
    for scheme in schemes.values() if isinstance(schemes, dict) else []:
        if not isinstance(scheme, dict):
            continue
        kind, where = scheme.get("type"), scheme.get("in")
        if kind == "http" and str(scheme.get("scheme", "")).lower() == "bearer":
            return {"type": "bearer"}
        if (kind == "http" and str(scheme.get("scheme", "")).lower() == "basic") or kind == "basic":
            return {"type": "basic"}
        if kind == "apiKey" and where in ("header", "query", "cookie") and scheme.get("name"):
            if where == "header" and str(scheme["name"]).lower() == "authorization":
                return {"type": "bearer"}
            return {"type": "api_key", "in": where, "name": scheme["name"]}
    return _auth_from_headers(doc)


def _auth_from_headers(doc: dict[str, Any]) -> dict[str, Any] | None:
    """For a spec that declares no scheme: the header named as a credential (``X-Auth-Token``) that most
    of its operations take as a parameter, as the auth that sends it; None when there is none."""
    from ..sources._credential_names import credential_name
    from ..sources.openapi import HTTP_METHODS

    shared = (doc.get("components") or {}).get("parameters") or doc.get("parameters") or {}
    counts: dict[str, int] = {}
    operations = 0
    for item in (doc.get("paths") or {}).values():
        if not isinstance(item, dict):
            continue
        for method, op in item.items():
            if method not in HTTP_METHODS or not isinstance(op, dict):
                continue
            operations += 1
            names = set()
            for param in [*(item.get("parameters") or []), *(op.get("parameters") or [])]:
                if isinstance(param, dict) and isinstance(param.get("$ref"), str):
                    param = shared.get(param["$ref"].rpartition("/")[2]) if isinstance(shared, dict) else None
                if isinstance(param, dict) and param.get("in") == "header" and isinstance(param.get("name"), str):
                    if credential_name(param["name"]):
                        names.add(param["name"])
            for name in names:
                counts[name] = counts.get(name, 0) + 1
    if not counts:
        return None
    name, used = max(counts.items(), key=lambda item: (item[1], item[0]))
    if used * 2 < operations:
        return None
    return {"type": "bearer"} if name.lower() == "authorization" else {"type": "custom", "headers": {name: "{secret}"}}


async def _fetch_pinned(url: str, state_dir: Path) -> tuple[Path, str, bytes]:
    """Fetch ``url`` once; keep it under ``<state>/specs/`` named by its sha256 (a later fetch never changes it)."""
    import httpx2

    from ..primitives.url_secrets import shown_url

    try:
        async with httpx2.AsyncClient(trust_env=False, follow_redirects=True, timeout=FETCH_SECONDS) as client:
            response = await client.get(url)
    except httpx2.TimeoutException:
        raise CliError(
            f"cannot fetch {shown_url(url)}: no answer within {FETCH_SECONDS:g} s; check the URL, or download the "
            "spec and add the file",
            EXIT_FAILED,
        ) from None
    except httpx2.HTTPError as exc:
        # httpx2's message can quote the URL (its password, a key in its query): named by its kind only.
        raise CliError(f"cannot fetch {shown_url(url)} ({type(exc).__name__})", EXIT_FAILED) from None
    if response.status_code != 200:
        raise CliError(f"cannot fetch {shown_url(url)}: HTTP {response.status_code}", EXIT_FAILED)
    body = response.content
    path, digest = _pin(body, state_dir)
    return path, digest, body


FETCH_SECONDS = 30.0


def _without_userinfo(url: str) -> str:
    from ..primitives.url_secrets import userinfo_span

    span = userinfo_span(url)
    return url if span is None else url[: span[0]] + url[span[1] + 1 :]


def _pin(body: bytes, state_dir: Path) -> tuple[Path, str]:
    digest = hashlib.sha256(body).hexdigest()
    suffix = ".json" if body.lstrip()[:1] == b"{" else ".yaml"
    folder = state_dir / "specs"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / f"{digest}{suffix}"
    if not path.exists():
        path.write_bytes(body)
    return path.resolve(), digest


def _refers_elsewhere(node: Any) -> bool:
    """Whether a ``$ref`` anywhere in ``node`` names another document (not just ``#/...`` in this one)."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and not ref.startswith("#"):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _local_spec(what: str) -> tuple[dict[str, Any], str] | None:
    path = Path(what)
    try:
        kind = not_a_file(path)
    except OSError:  # nothing there, a name too long for a file, a path the system refuses: not a file either
        return None
    if kind is not None:
        raise CliError(f"cannot read {what}: it is {kind}, not a file; give add the path of an OpenAPI file")
    return _read_spec(path.read_bytes(), what), str(path.resolve())


async def _entry_for(args: argparse.Namespace) -> tuple[dict[str, Any], str | None]:
    """The connector entry to write, and a comment to put above it (or None)."""
    what: str | None = args.what
    if args.mcp or args.mcp_url or args.mcp_command:
        command = ([what] if what else []) + [a for a in args.mcp_command if a != "--"]
        if args.mcp_url and command:
            raise CliError("give either --mcp-url URL or --mcp -- COMMAND ..., not both")
        if args.mcp_url:
            slug = args.slug or _slugify((urlsplit(args.mcp_url).hostname or "mcp").split(".")[0])
            return {"slug": slug, "source": {"mcp": {"url": args.mcp_url}}}, None
        if not command:
            raise CliError("--mcp needs the server's command after '--', e.g. mcp-gateway add --mcp -- npx -y server")
        slug = args.slug or _slugify(Path(command[-1]).stem.removeprefix("mcp-server-").removeprefix("server-"))
        return {"slug": slug, "source": {"mcp": {"command": command}}}, None
    if not what:
        raise CliError(f"name what to add: a catalog entry ({', '.join(_catalog_names())}), an OpenAPI file or URL")
    entry: dict[str, Any]
    if what.startswith(("http://", "https://")):
        from ..primitives.url_secrets import shown_url

        path, digest, body = await _fetch_pinned(what, args.settings.state_dir)
        # The manifest is committed and shared: the URL's password or key stays out of its comments and errors.
        doc = _read_spec(body, shown_url(what))
        slug = args.slug or _slugify(str(doc.get("info", {}).get("title") or urlsplit(what).hostname or "api"))
        if _refers_elsewhere(doc):
            # Its $refs name documents beside it on its origin: a local copy would look for them on
            # this machine instead. From the URL they resolve on that origin, and only there.
            entry = {"slug": slug, "source": {"openapi": what}}
            comment = f"read from {shown_url(what)} at each sync: its $refs name other documents there"
        else:
            entry = {"slug": slug, "source": {"openapi": str(path)}}
            comment = f"fetched from {shown_url(what)} (sha256 {digest})"
        if not args.base_url:
            from ..sources.openapi import declared_base_url

            # Where the credential goes is decided now, by the operator running `add`, and written
            # down: a later copy of the description naming other servers changes nothing.
            # A relative server URL is resolved against the spec's URL without its userinfo: the
            # password that fetched the spec is not the API's credential, nor for the manifest.
            if declared := declared_base_url(doc, _without_userinfo(what)):
                entry["base_url"] = declared
    elif SLUG_RE.match(what) and what in _catalog_names():
        # --base-url too: an entry such as jira has none that works for everyone.
        base_url = {"base_url": args.base_url} if args.base_url else {}
        return {"slug": args.slug or what, "catalog": what, **base_url}, None
    elif (local := _local_spec(what)) is not None:
        doc, resolved = local
        stem = Path(what).stem
        title = doc.get("info", {}).get("title", "api")
        slug = args.slug or _slugify(stem if stem not in ("openapi", "swagger") else title)
        entry = {"slug": slug, "source": {"openapi": resolved}}
        comment = None
    else:
        import difflib

        near = difflib.get_close_matches(what, _catalog_names(), n=3, cutoff=0.6)
        if near:
            raise CliError(f"no catalog entry {what!r}; did you mean {' or '.join(repr(n) for n in near)}?")
        raise CliError(
            f"{what!r} is neither a catalog entry ({', '.join(_catalog_names())}) nor a file nor an http(s) URL"
        )
    if args.base_url:
        entry["base_url"] = args.base_url
    auth = _auth_from_spec(doc)
    if auth:
        entry["auth"] = auth
    return entry, comment


def _relative_source(entry: dict[str, Any], manifest: Path) -> None:
    """A spec file inside the manifest's folder written relative to it (as the loader resolves it),
    so the folder moves, or is checked out elsewhere, with its manifest still right."""
    source = entry.get("source")
    spec = source.get("openapi") if isinstance(source, dict) else None
    if isinstance(source, dict) and isinstance(spec, str) and Path(spec).is_absolute():
        folder = manifest.resolve().parent
        if Path(spec).is_relative_to(folder):
            source["openapi"] = str(Path(spec).relative_to(folder))


def _flow(value: Any) -> Any:
    """Small mappings and lists written ``{type: bearer}``-style, as the README's examples are."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, dict):
        out = CommentedMap((k, _flow(v)) for k, v in value.items())
        if all(not isinstance(v, dict) for v in value.values()) and len(value) <= 3:
            out.fa.set_flow_style()
        return out
    if isinstance(value, list):
        seq = CommentedSeq(value)
        seq.fa.set_flow_style()
        return seq
    return value


def _render_item(entry: dict[str, Any], dash_col: int, comment: str | None) -> list[str]:
    """The entry as the lines of one list item, its dash at ``dash_col``."""
    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedMap

    yaml = YAML()
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    body = _dump(yaml, CommentedMap((k, _flow(v)) for k, v in entry.items())).splitlines()
    pad = " " * dash_col
    lines = [f"{pad}# {comment}"] if comment else []
    lines += [f"{pad}- {body[0]}"] + [f"{pad}  {line}" if line else line for line in body[1:]]
    return [line + "\n" for line in lines]


def _is_mapping(doc: Any) -> bool:
    return isinstance(doc, dict)


def _connectors_of(doc: Any) -> Any:
    """The manifest's ``connectors`` node (a ruamel ``CommentedSeq`` when it is a block list), or None."""
    return doc.get("connectors") if _is_mapping(doc) else None


def _is_filler(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _block(doc: Any, lines: list[str]) -> tuple[int, int]:
    """The lines of the ``connectors:`` block: from the key's line to the next top-level key (exclusive),
    less the blank and comment lines at its end (they introduce what follows)."""
    keys = list(doc)
    start = doc.lc.key("connectors")[0]
    later = [doc.lc.key(k)[0] for k in keys[keys.index("connectors") + 1 :]]
    end = min(later) if later else len(lines)
    while end > start + 1 and _is_filler(lines[end - 1]):
        end -= 1
    return start, end


async def cmd_add(args: argparse.Namespace) -> int:
    path = _manifest_file(args)
    original = path.read_text(encoding="utf-8")
    entry, comment = await _entry_for(args)
    _relative_source(entry, path)
    if not SLUG_RE.match(entry["slug"]):
        raise CliError(f"{entry['slug']!r} is not a valid slug; give --slug (lowercase letters, digits, '_' or '-')")
    doc: Any = _parsed(path, original)
    connectors: Any = _connectors_of(doc)
    if any(isinstance(c, dict) and c.get("slug") == entry["slug"] for c in connectors or []):
        raise CliError(f"{path} already has a connector {entry['slug']!r}; give another --slug, or remove it first")
    lines = original.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    if connectors:  # a block list with items: the new one goes right after the last
        if connectors.fa.flow_style():
            raise CliError(f"{path}: write 'connectors:' as a block list (one '- slug: ...' per item) to use add")
        dash_col = max(connectors.lc.item(0)[1] - 2, 0)
        _, at = _block(doc, lines)
        lines[at:at] = _render_item(entry, dash_col, comment)
    elif _is_mapping(doc) and "connectors" in doc:  # "connectors:" with nothing under it
        start = doc.lc.key("connectors")[0]
        lines[start] = "connectors:\n"
        lines[start + 1 : start + 1] = _render_item(entry, 2, comment)
    else:
        lines += ["connectors:\n", *_render_item(entry, 2, comment)]
    manifest = _check(path, "".join(lines), original)
    slug = entry["slug"]
    notice(f"added {slug} to {escaped(str(path))}")
    async with store_of(args.settings) as store:
        inherited = await stored_credentials(store, slug)
    code = 0 if args.no_sync else await _sync_one(args, manifest, slug, inherited)
    await _tell_running_server(args, path)
    return code


SERVER_TAKES_SECONDS = 15.0
"""How long ``add`` and ``remove`` wait for a running server to reload the edited manifest (it looks
at the file every second, then syncs what changed)."""


async def _tell_running_server(args: argparse.Namespace, path: Path) -> None:
    """Say whether a gateway serving from this state folder took the edit: it reloads a changed
    manifest by itself and records the digest of what it loaded (``served.py``)."""
    import anyio.to_thread

    await anyio.to_thread.run_sync(_wait_for_running_server, args.settings.state_dir, path)


def _wait_for_running_server(state_dir: Path, path: Path) -> None:
    import time

    from ..vocabulary.served import manifest_digest, read_served

    served = read_served(state_dir)
    if served is None:
        return
    where = f"the server at {served.url} (pid {served.pid})"
    if served.manifest != str(path.resolve()):
        notice(f"note: {where} reads another manifest ({escaped(served.manifest)}): this change is not for it")
        return
    wanted = manifest_digest(path)
    deadline = time.monotonic() + SERVER_TAKES_SECONDS
    while served is not None and served.manifest_digest != wanted and time.monotonic() < deadline:
        time.sleep(0.2)
        served = read_served(state_dir)
    if served is None:
        notice(f"note: {where} stopped before it took the change")
    elif served.manifest_digest == wanted:
        notice(f"{where} took the change")
    else:
        notice(
            f"note: {where} has not taken the change yet; its log says why (it keeps the previous manifest "
            "when the new one does not load)"
        )


async def _sync_one(args: argparse.Namespace, manifest: Any, slug: str, inherited: list[CredentialKey]) -> int:
    """Sync the manifest and tell the user what to do next for ``slug``, and where the credentials
    already stored under its slug (``inherited``: from before ``remove`` deleted them, or another path)
    will now be sent."""
    from ..core import result_payload
    from ..runtime import open_gateway
    from .commands import principal

    # The new connector's vectors are computed now (hybrid discovery): the next ``serve`` reads them back.
    async with open_gateway(args.settings, manifest=manifest, embed=False, embed_now=True) as gw:
        listed = result_payload(await gw.connectors(principal(args)))
        origin = await gw.origin(slug)
    if inherited:
        _warn_inherited(slug, inherited, origin)
    row = next(c for c in listed["connectors"] if c["slug"] == slug)
    cfg = manifest.connector(slug)
    if args.json:
        print_json(row)
    else:
        sys.stdout.write(f"{slug}: {row['status']}, {row['actions']} actions\n")
    if row["status"] == "error":
        error = escaped(str(row.get("error")))
        notice(f"{slug} did not load: {error}\n  fix the entry, or 'mcp-gateway remove {slug}'", level=logging.WARNING)
        return EXIT_FAILED
    kind = cfg.auth.type
    if kind == "none" or row.get("auth_configured"):
        step = f"try it: mcp-gateway discover <what you want to do> --connector {slug}"
    elif kind == "oauth2":
        step = f"connect it: mcp-gateway connect {slug} (open the link while 'mcp-gateway pages' runs)"
    else:
        step = f"store its credential: mcp-gateway secret set {slug} < token-file  (or: mcp-gateway connect {slug})"
    notice(f"next: {step}")
    return 0


def _warn_inherited(slug: str, inherited: list[CredentialKey], origin: str | None) -> None:
    from ..primitives.secrets import PROJECT_WIDE

    what = "; ".join(credential_words(k) for k in inherited)
    where = escaped(origin) if origin else "wherever its calls go"
    first = inherited[0]
    user = "" if first.principal == PROJECT_WIDE else f" --user {escaped(first.principal)}"
    notice(
        f"warning: {len(inherited)} credential(s) stored under {slug!r} before this entry ({what}) will be "
        f"sent to {where}; if they are not this service's, delete them "
        f"(mcp-gateway secret delete {slug} {escaped(first.name)}{user}) and store its own"
    )


# -- remove ---------------------------------------------------------------------------------------


async def cmd_remove(args: argparse.Namespace) -> int:
    path = _manifest_file(args)
    original = path.read_text(encoding="utf-8")
    slug: str = args.slug
    doc: Any = _parsed(path, original)
    connectors: Any = _connectors_of(doc)
    slugs: list[Any] = [c.get("slug") if isinstance(c, dict) else None for c in connectors or []]
    if slug not in slugs:
        known = ", ".join(str(s) for s in slugs if s) or "none"
        raise CliError(f"{path} has no connector {slug!r}; it has: {known}")
    if connectors.fa.flow_style():
        raise CliError(f"{path}: write 'connectors:' as a block list (one '- slug: ...' per item) to use remove")
    index = slugs.index(slug)
    text = _without(original, doc, index, slug)
    # Its credentials go with it: a later connector under this slug (another service) must not be sent them.
    async with store_of(args.settings) as store:
        _check(path, text, original)
        stored = await stored_credentials(store, slug)
        await delete_credentials(store, args.settings, stored, via="remove")
    notice(f"removed {slug} from {escaped(str(path))}")
    if stored:
        what = "; ".join(credential_words(k) for k in stored)
        plural = "" if len(stored) == 1 else "s"
        notice(f"deleted {len(stored)} stored credential{plural} of {slug} ({what})")
    await _tell_running_server(args, path)
    return 0


def _without(original: str, doc: Any, index: int, slug: str) -> str:
    """The manifest's text without connector ``index`` (``slug``) and its grants.

    Its lines are cut out, so everything else stays byte for byte. When that changes what another
    entry means (it aliases an ``&anchor`` defined in the lines cut), the file is written back through
    the round trip, which moves the anchor to the first entry left that uses it. Either result is
    checked against the file as read less that entry; when neither matches, nothing is written."""
    import yaml
    from ruamel.yaml.error import YAMLError as RoundTripError

    granted = any(slug in (a.get("connectors") or []) for a in doc.get("agents") or [] if isinstance(a, dict))
    try:
        expected = _meaning(original)
        del expected["connectors"][index]
        _drop_grants_from(expected, slug)
    except (yaml.YAMLError, LookupError, TypeError):
        expected = None  # the gateway's loader will say what is wrong with the file
    lines = original.splitlines(keepends=True)
    start, end = _item_lines(doc, lines, index)
    cut = lines[:start] + lines[end:]
    if len(doc["connectors"]) == 1:  # the last one: an empty list, not an empty (null) key
        key = doc.lc.key("connectors")[0]
        cut[key] = cut[key].replace("connectors:", "connectors: []", 1)
    try:
        text = _drop_grants("".join(cut), slug) if granted else "".join(cut)
        if expected is None or _meaning(text) == expected:
            return text
    except (yaml.YAMLError, RoundTripError):
        pass  # an alias whose anchor went with the entry: the round trip below keeps it
    try:
        rt_yaml, rt_doc = _yaml_for(original)
        del rt_doc["connectors"][index]
        _drop_grants_from(rt_doc, slug)
        text = _dump(rt_yaml, rt_doc)
        if _meaning(text) == expected:
            return text
    except (yaml.YAMLError, RoundTripError):
        pass
    anchors = _anchors_used_elsewhere(original, start, end)
    why = (
        f"another entry uses {', '.join('&' + a for a in anchors)}, defined in the entry being removed"
        if anchors
        else "taking its lines out would change what the other entries mean"
    )
    raise CliError(f"cannot remove {slug}: {why}; copy what it stands for into that entry, then remove again")


def _meaning(text: str) -> Any:
    """The document as data, aliases expanded: two texts that mean the same compare equal."""
    import yaml

    return yaml.safe_load(text)


def _item_lines(doc: Any, lines: list[str], index: int) -> tuple[int, int]:
    """Connector ``index``'s lines, with the comment lines right above it (they describe it)."""
    connectors = doc["connectors"]
    start = connectors.lc.item(index)[0]
    while start > 0 and lines[start - 1].strip().startswith("#"):
        start -= 1
    if index + 1 < len(connectors):
        end = connectors.lc.item(index + 1)[0]
        while end > start and lines[end - 1].strip().startswith("#"):
            end -= 1
    else:
        end = _block(doc, lines)[1]
    return start, end


def _anchors_used_elsewhere(text: str, start: int, end: int) -> list[str]:
    """The anchors defined on lines ``start``..``end`` (exclusive) that an alias outside them uses."""
    import yaml

    defined: set[str] = set()
    used: set[str] = set()
    try:
        for event in yaml.parse(text):
            line = event.start_mark.line
            if isinstance(event, yaml.AliasEvent) and not start <= line < end:
                used.add(str(event.anchor))
            elif isinstance(event, yaml.NodeEvent) and event.anchor is not None and start <= line < end:
                defined.add(str(event.anchor))
    except yaml.YAMLError:
        return []
    return sorted(defined & used)


def _drop_grants(text: str, slug: str) -> str:
    """Take ``slug`` out of every agent's ``connectors`` (a round trip: comments stay)."""
    yaml, doc = _yaml_for(text)
    _drop_grants_from(doc, slug)
    return _dump(yaml, doc)


def _drop_grants_from(doc: Any, slug: str) -> None:
    for agent in (doc.get("agents") if isinstance(doc, dict) else None) or []:
        granted = agent.get("connectors") if isinstance(agent, dict) else None
        if isinstance(granted, list):
            while slug in granted:
                granted.remove(slug)
