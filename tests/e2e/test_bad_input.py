"""Bad input of every kind: broken manifests, broken specs, wrong arguments, hostile strings, and
upstreams that time out or answer garbage. The gateway must answer each with a located, readable
error (never a traceback) and keep serving."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from mcp_gateway.manifest import CATALOG_DIR
from tests.support.env import child_env
from tests.support.ports import free_port
from tests.support.upstream import EchoApp, echo_app, serve_asgi

pytestmark = pytest.mark.anyio

# The bundled copy of the Petstore (the same bytes as tests/data/openapi/petstore/petstore-oas3.json).
PETSTORE = CATALOG_DIR / "specs" / "petstore.json"
MASTER_KEY = "bad-input-master-key-0123456789abcdef0123"


# -- running the CLI -----------------------------------------------------------------------------


def _env(state_dir: Path) -> dict[str, str]:
    return child_env() | {
        "MCP_GATEWAY_STATE_DIR": str(state_dir),
        "MCP_GATEWAY_MASTER_KEY": MASTER_KEY,
        "PYTHONUNBUFFERED": "1",
    }


def run_cli(tmp_path: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcp_gateway", *args],
        input=input,
        capture_output=True,
        text=True,
        env=_env(tmp_path / "state"),
        cwd=tmp_path,
        timeout=60,
    )


def assert_clean_failure(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout


# -- 1. broken manifests -------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokenManifest:
    text: str
    line: int
    """The line the error must name: where the mistake is."""
    says: str
    """A fragment of the message (what is wrong)."""
    commands: tuple[str, ...] = ("validate", "sync")


BROKEN_MANIFESTS: dict[str, BrokenManifest] = {
    "bad_yaml": BrokenManifest(
        "project: x\nconnectors:\n  - slug: a\n    base_url: http://x: y\n", 4, "not valid YAML"
    ),
    "not_a_mapping": BrokenManifest("- slug: a\n- slug: b\n", 1, "mapping"),
    "unknown_auth_type": BrokenManifest(
        "project: x\nconnectors:\n  - slug: a\n    base_url: http://x\n    auth: {type: kerberos}\n",
        5,
        "kerberos",
    ),
    "unknown_top_level_key": BrokenManifest("project: x\nfrobnicate: 1\nconnectors: []\n", 2, "frobnicate"),
    "unknown_connector_key": BrokenManifest(
        "project: x\nconnectors:\n  - slug: a\n    bse_url: http://x\n", 4, "bse_url"
    ),
    "bad_slug": BrokenManifest("project: x\nconnectors:\n  - slug: GitHub!\n", 3, "slug"),
    "duplicate_slug": BrokenManifest(
        "project: x\nconnectors:\n  - slug: a\n    base_url: http://x\n  - slug: a\n    base_url: http://y\n",
        5,
        "duplicate",
    ),
    # An invalid regex never matches (fail safe) so the gateway still runs; validate reports it.
    "bad_regex": BrokenManifest(
        'project: x\nconnectors: []\npolicies:\n  - match: "/([a-z/"\n    action: block\n',
        4,
        "regex",
        commands=("validate",),
    ),
    "catastrophic_regex": BrokenManifest(
        'project: x\npolicies:\n  - match: "*.read"\n    action: always_run\n  - match: "/^(a+)+$/"\n'
        "    action: block\n",
        5,
        "nested quantifiers",
        commands=("validate",),
    ),
}


@pytest.mark.parametrize("case", list(BROKEN_MANIFESTS))
def test_broken_manifest_gives_a_located_error_without_traceback(case: str, tmp_path: Path) -> None:
    broken = BROKEN_MANIFESTS[case]
    manifest = tmp_path / f"{case}.yaml"
    manifest.write_text(broken.text)
    for command in broken.commands:
        proc = run_cli(tmp_path, command, "--manifest", str(manifest))
        assert_clean_failure(proc)
        assert f"{case}.yaml:{broken.line}" in proc.stderr, f"{command}: expected line {broken.line}:\n{proc.stderr}"
        assert broken.says.lower() in proc.stderr.lower(), proc.stderr


def test_missing_manifest_file_is_a_clean_error(tmp_path: Path) -> None:
    for command in ("validate", "sync", "connectors"):
        proc = run_cli(tmp_path, command, "--manifest", str(tmp_path / "nope.yaml"))
        assert_clean_failure(proc)
        assert "nope.yaml" in proc.stderr and "cannot read" in proc.stderr, proc.stderr


# -- 2. broken specs: sync is best effort --------------------------------------------------------


def _broken_specs(folder: Path) -> dict[str, tuple[Path, str]]:
    """slug -> (spec file, a fragment of the error the connector must carry)."""
    truncated = folder / "cut.json"
    truncated.write_bytes(PETSTORE.read_bytes()[:1000])
    listy = folder / "seq.yaml"
    listy.write_text("- openapi: 3.0.0\n- paths: {}\n")
    return {
        "truncated": (truncated, "truncated"),
        "listy": (listy, "list"),
        "missing": (folder / "does-not-exist.json", "no such file"),
    }


def _sources_manifest(folder: Path, upstream: str, broken: dict[str, tuple[Path, str]]) -> Path:
    lines = [
        "project: sources",
        "default_mode: allow_all",
        "connectors:",
        "  - slug: petstore",
        f"    source: {{openapi: {PETSTORE}}}",
        f"    base_url: {upstream}",
        "  - slug: web",
        f"    base_url: {upstream}",
        "    source: {http: {actions: [{path: items.get, url: '/items/{id}', summary: Fetch one item}]}}",
    ]
    for slug, (path, _) in broken.items():
        lines += [f"  - slug: {slug}", f"    source: {{openapi: {path.name}}}", f"    base_url: {upstream}"]
    manifest = folder / "sources.yaml"
    manifest.write_text("\n".join(lines) + "\n")
    return manifest


def _table(stdout: str) -> dict[str, dict[str, str]]:
    """The CLI's table, as {first column: {HEADER: cell}}; columns start where their header does."""
    header, *rows = stdout.splitlines()
    names = header.split()
    assert names == ["SLUG", "SOURCE", "ACTIONS", "STATUS", "ERROR"], header
    starts = [header.index(name) for name in names]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    parsed = [{name: row[a:b].strip() for name, (a, b) in zip(names, bounds, strict=True)} for row in rows]
    return {cells["SLUG"]: cells for cells in parsed}


@pytest.mark.parametrize("kind", ["truncated", "listy", "missing"])
def test_sync_marks_only_the_broken_connector(kind: str, tmp_path: Path) -> None:
    spec, reason = _broken_specs(tmp_path)[kind]
    manifest = _sources_manifest(tmp_path, "http://127.0.0.1:9", {kind: (spec, reason)})

    as_json = run_cli(tmp_path, "sync", "--json", "--manifest", str(manifest))
    assert_clean_failure(as_json)
    states = {s["slug"]: s for s in json.loads(as_json.stdout)}
    assert [s["status"] for s in states.values()].count("error") == 1
    assert states[kind]["status"] == "error" and states[kind]["actions"] == 0
    assert spec.name in states[kind]["error"] and reason in states[kind]["error"].lower(), states[kind]
    assert states["petstore"]["status"] == "ready" and states["petstore"]["actions"] > 0
    assert states["petstore"]["error"] is None

    table = run_cli(tmp_path, "sync", "--manifest", str(manifest))
    assert_clean_failure(table)
    by_slug = _table(table.stdout)
    assert set(by_slug) == {"petstore", "web", kind}
    assert by_slug["petstore"]["STATUS"] == "ready" and int(by_slug["petstore"]["ACTIONS"]) > 0, by_slug
    assert (by_slug["web"]["STATUS"], by_slug["web"]["ACTIONS"], by_slug["web"]["ERROR"]) == ("ready", "1", "")
    broken = by_slug[kind]
    assert (broken["STATUS"], broken["ACTIONS"]) == ("error", "0"), broken
    # The reason must be readable in the table itself, not only in --json.
    assert reason in broken["ERROR"].lower(), broken


@asynccontextmanager
async def stdio_gateway(manifest: Path, state_dir: Path, errlog: Path) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_gateway", "serve", "--manifest", str(manifest)],
        env=_env(state_dir),
    )
    with errlog.open("w") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
            yield client


def structured(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None, result
    return result.structured_content


async def test_serve_starts_and_serves_the_good_connectors_despite_broken_specs(tmp_path: Path) -> None:
    upstream = echo_app()
    with serve_asgi(upstream) as base_url:
        broken = _broken_specs(tmp_path)
        manifest = _sources_manifest(tmp_path, base_url, broken)
        errlog = tmp_path / "stderr.log"
        async with stdio_gateway(manifest, tmp_path / "state", errlog) as client:
            listed = {c["slug"]: c for c in structured(await client.call_tool("connectors", {}))["connectors"]}
            found = structured(await client.call_tool("discover", {"query": "find pets by status"}))
            described = structured(await client.call_tool("describe", {"tool": found["results"][0]["name"]}))
            ran = structured(await client.call_tool("call", {"tool": "web.items.get", "args": {"id": "1"}}))
            pet = await client.call_tool("call", {"tool": "petstore.getPetById", "args": {"petId": 7}})
            gone = structured(await client.call_tool("call", {"tool": "truncated.pets.list"}))
    assert set(listed) == {"petstore", "web", *broken}
    for slug, (path, reason) in broken.items():
        assert listed[slug]["status"] == "error", listed[slug]
        assert listed[slug]["actions"] == 0
        assert path.name in listed[slug]["error"] and reason in listed[slug]["error"].lower()
    assert listed["petstore"]["status"] == "ready" and listed["petstore"]["actions"] > 0
    assert listed["web"]["status"] == "ready" and listed["web"]["actions"] == 1
    assert found["results"] and all(r["name"].startswith("petstore.") for r in found["results"][:3]), found
    assert described["input_schema"]["type"] == "object"
    assert ran["status"] == "ok", ran
    assert structured(pet)["status"] == "ok", structured(pet)
    assert upstream.requests[-1].raw_path.endswith("/pet/7")
    # A call into a connector in error retries loading it (Gateway.refresh_connector) and, still
    # broken, says why: the connector's own error, not a bare "no such action".
    assert gone["status"] == "error" and gone["reason"] == "connector_error", gone
    assert "'truncated' is unavailable" in gone["message"] and broken["truncated"][0].name in gone["message"]
    assert "Traceback" not in errlog.read_text()


# -- 3. wrong arguments and hostile strings over MCP ------------------------------------------------

ITEMS = """    source:
      http:
        actions:
          - path: items.get
            method: GET
            url: /items/{id}
            summary: Fetch one item by its id
            input_schema:
              type: object
              required: [id]
              properties: {id: {type: string}, count: {type: integer}, tags: {type: array, items: {type: string}}}
          - path: items.create
            method: POST
            url: /items
            summary: Create a new item with a name
            input_schema: {type: object, required: [name], properties: {name: {type: string}}}
          - path: slow
            method: GET
            url: /slow
            summary: Answer after s seconds
            input_schema: {type: object, properties: {s: {type: number}}}
"""

GARBAGE = {
    "truncated_json": (200, "application/json", b'{"items": [1, 2'),
    "invalid_utf8": (200, "application/json; charset=utf-8", b'{"v": "\xff\xfe\xfa"}'),
    "html_as_json": (200, "application/json", b"<html><body>Service Unavailable</body></html>"),
    "empty_json": (200, "application/json", b""),
    "nan": (200, "application/json", b'{"v": NaN, "w": -Infinity}'),
    "huge_int": (200, "application/json", b"9" * 5000),
    "nul_bytes": (200, "application/json", b'{"v": "a\x00b"}'),
    "bad_charset": (200, "text/plain; charset=x-made-up", b"caf\xe9"),
    "error_garbage": (500, "application/json", b"{not json at all"),
    "deep": (200, "application/json", b"[" * 100_000 + b"]" * 100_000),
}


async def garbage_app(scope: Any, receive: Any, send: Any) -> None:
    """Answers each ``/<name>`` of ``GARBAGE`` with that status, content type and body."""
    if scope["type"] != "http":
        return
    status, content_type, body = GARBAGE.get(scope["path"].strip("/"), (404, "text/plain", b"no such route"))
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type.encode())]})
    await send({"type": "http.response.body", "body": body})


@dataclass
class HostileEnv:
    root: Path
    manifest: Path
    upstream: EchoApp

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(self.root, *args, "--manifest", str(self.manifest))


@pytest.fixture
def hostile_env(tmp_path: Path) -> Iterator[HostileEnv]:
    upstream = echo_app()
    with serve_asgi(upstream) as echo_url, serve_asgi(garbage_app) as garbage_url:
        garbage_actions = "".join(
            f"          - {{path: {name}, url: /{name}, summary: Garbage {name}}}\n" for name in GARBAGE
        )
        manifest = tmp_path / "hostile.yaml"
        manifest.write_text(
            # A port of its own: a link it mints starts its pages there, where other tests' port stays free.
            f"project: hostile\ndefault_mode: risk\npublic_url: http://127.0.0.1:{free_port()}\nconnectors:\n"
            f"  - slug: e\n    base_url: {echo_url}\n{ITEMS}"
            f"  - slug: slowpoke\n    base_url: {echo_url}\n    timeout: 1\n{ITEMS}"
            f"  - slug: garbage\n    base_url: {garbage_url}\n    source:\n      http:\n        actions:\n"
            f"{garbage_actions}"
        )
        yield HostileEnv(tmp_path, manifest, upstream)


@asynccontextmanager
async def hostile_session(env: HostileEnv) -> AsyncIterator[Client]:
    async with stdio_gateway(env.manifest, env.root / "state", env.root / "stderr.log") as client:
        yield client
    assert "Traceback" not in (env.root / "stderr.log").read_text()


def assert_tool_error(result: Any, *fragments: str) -> str:
    """An SDK-level argument error: a tool error whose text names the problem, without a traceback."""
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert result.is_error, text
    assert "Traceback" not in text and 'File "' not in text, text
    for fragment in fragments:
        assert fragment in text, text
    return text


def assert_invalid_args(result: Any, *paths: str) -> dict[str, Any]:
    body = structured(result)
    assert result.is_error
    assert (body["status"], body["reason"]) == ("denied", "invalid_args"), body
    assert "Traceback" not in result.content[0].text
    assert body["errors"], body
    named = {e.get("path") or e.get("field") for e in body["errors"]}
    assert set(paths) <= named, body
    return body


async def test_wrong_argument_types_give_invalid_args(hostile_env: HostileEnv) -> None:
    async with hostile_session(hostile_env) as client:

        async def call(args: Any, tool: str = "e.items.get") -> Any:
            return await client.call_tool("call", {"tool": tool, "args": args})

        body = assert_invalid_args(await call({"id": 5}), "id")
        assert "is not of type 'string'" in body["errors"][0]["message"]
        body = assert_invalid_args(await call({"id": "1", "count": "five"}), "count")
        assert "\"five\" is not of type 'integer'" in body["errors"][0]["message"]
        assert_invalid_args(await call({"id": "1", "tags": "not-a-list"}), "tags")
        body = assert_invalid_args(await call({}), "(root)")
        assert "'id' is a required property" in body["errors"][0]["message"]
        body = assert_invalid_args(await call({"id": "1", "unexpected": True}), "unexpected")
        assert "unexpected" in body["message"]
        assert_invalid_args(await call({"id": None}), "id")

        # Not an object at all: the SDK validates the call tool's own schema first.
        for not_an_object in ([1, 2], "id=1", 42, True):
            assert_tool_error(await call(not_an_object), "invalid arguments for call: args must be a JSON object (got ")
        assert_tool_error(await client.call_tool("call", {"args": {"id": "1"}}), "tool is required")
        assert_tool_error(
            await client.call_tool("call", {"tool": ["e.items.get"]}), "tool must be a string (got a list)"
        )
        assert_tool_error(
            await client.call_tool("call", {"tool": "e.items.get", "fields": "id"}), "fields must be a list"
        )
        text = assert_tool_error(
            await client.call_tool("discover", {"query": "items", "limit": "ten"}), "limit must be a whole number"
        )
        assert "'ten'" not in text  # the rejected value is not echoed back
        text = assert_tool_error(
            await client.call_tool("discover", {"query": "items", "limit": 10_000}), "limit must be"
        )
        assert "pydantic" not in text and "[type=" not in text and "http" not in text, text

        still = structured(await call({"id": "1"}))
    assert still["status"] == "ok", still
    assert [r.raw_path for r in hostile_env.upstream.requests] == ["/items/1"]


async def test_hostile_strings_are_answered_cleanly(hostile_env: HostileEnv) -> None:
    weird_names = [
        "e.items.get\nX-Injected: 1",
        "e.items\x00.get",
        "\x00",
        "e.ítems.gét 😀",
        "../../etc/passwd",
        "' OR 1=1; DROP TABLE audit; --",
        "e." + "a" * 290,
        "\u202ee.items.get",
    ]
    path_values = [
        "../../etc/passwd",
        "a/../../b",
        "%2e%2e%2f%2e%2e%2fetc",
        "..%2f..%2f",
        "\r\nHost: evil.example",
        "a\x00b",
        "😀 snowman ☃",
        "?admin=1#frag",
        "~root",
    ]
    async with hostile_session(hostile_env) as client:
        # A 10,000-character tool name: refused by the tool's own schema, and not echoed back whole.
        for tool in ("call", "describe"):
            text = assert_tool_error(await client.call_tool(tool, {"tool": "x" * 10_000}), "tool")
            assert len(text) < 2_000, len(text)

        for name in weird_names:
            for tool in ("call", "describe"):
                result = await client.call_tool(tool, {"tool": name})
                body = structured(result)
                assert result.is_error and body["reason"] == "action_not_found", (name, body)
                assert "Traceback" not in result.content[0].text

        for query in ("😀🔥💥 " * 20, "'; DROP TABLE audit; -- \" OR 1=1 /*", "%s%s%n{0}${jndi:x}"):
            found = structured(await client.call_tool("discover", {"query": query}))
            assert isinstance(found["results"], list)
        blank = structured(await client.call_tool("discover", {"query": "\x00\n\t"}))
        assert (blank["reason"], blank["message"].split(":")[0]) == ("invalid_args", "query has nothing to search")
        elsewhere = structured(await client.call_tool("discover", {"query": "items", "connector": "../../etc"}))
        assert elsewhere["reason"] == "connector_not_found" and "results" not in elsewhere

        for connector in ("../../etc", "\x00", "e\x00", "é"):
            for tool in ("connect", "request_secret"):
                body = structured(await client.call_tool(tool, {"connector": connector}))
                assert body["reason"] == "connector_not_found", (tool, connector, body)
        for connector in ("e\n", "E"):  # a connector named as a person writes it, as discover takes it
            for tool in ("connect", "request_secret"):
                body = structured(await client.call_tool(tool, {"connector": connector}))
                assert body.get("connector") == "e" and "reason" not in body, (tool, connector, body)
        assert_tool_error(await client.call_tool("request_secret", {"connector": "e", "name": "../x"}), "name")

        outcomes = {}
        for value in path_values:
            result = await client.call_tool("call", {"tool": "e.items.get", "args": {"id": value}})
            body = structured(result)
            assert body["status"] in ("ok", "denied"), (value, body)
            assert body["status"] == "ok" or body["reason"] == "invalid_args", (value, body)
            outcomes[value] = body["status"]
        # A value that climbs once a server on the way decodes it is refused, not sent as '..%2F..%2F'.
        assert {v: outcomes[v] for v in path_values[:4]} == dict.fromkeys(path_values[:4], "denied")
        for dots in (".", ".."):
            body = structured(await client.call_tool("call", {"tool": "e.items.get", "args": {"id": dots}}))
            assert body["reason"] == "invalid_args", body

        # A forged approval id answers a mismatch; nothing runs.
        forged = structured(
            await client.call_tool(
                "call",
                {"tool": "e.items.create", "args": {"name": "x"}, "approval_id": "'; DROP TABLE approval; --"},
            )
        )
        assert forged["reason"] == "approval_mismatch", forged

        # Still serving, and the tables the SQL-looking strings named are intact.
        listed = structured(await client.call_tool("connectors", {}))
        found = structured(await client.call_tool("discover", {"query": "fetch one item"}))
        ok = structured(await client.call_tool("call", {"tool": "e.items.get", "args": {"id": "fine"}}))
    assert {c["slug"] for c in listed["connectors"]} == {"e", "slowpoke", "garbage"}
    assert found["results"][0]["name"] in ("e.items.get", "slowpoke.items.get")
    assert ok["status"] == "ok"

    # No value escaped its path segment: every request the upstream saw is /items/<one segment>.
    seen = hostile_env.upstream.requests
    assert len(seen) == list(outcomes.values()).count("ok") + 1
    for request in seen:
        assert re.fullmatch(r"/items/[^/?#]+", request.raw_path), request.raw_path
        assert request.method == "GET" and request.query == ""
        assert "evil.example" not in request.headers.get("host", "")
    assert all(r.path.startswith("/items/") and "/etc/passwd" != r.path for r in seen)

    audit = hostile_env.cli("audit", "--json", "--limit", "500")
    assert audit.returncode == 0, audit.stderr
    assert len(json.loads(audit.stdout)) >= len(weird_names) + len(path_values)
    approvals = hostile_env.cli("approvals", "list", "--all", "--json")
    assert approvals.returncode == 0 and isinstance(json.loads(approvals.stdout), list)


async def test_upstream_timeout_and_garbage(hostile_env: HostileEnv) -> None:
    async with hostile_session(hostile_env) as client:
        started = time.monotonic()
        # The upstream would answer after 30 s; the connector's 1 s timeout (and a read's retry) ends it long before,
        # with room for a busy machine.
        result = await client.call_tool("call", {"tool": "slowpoke.slow", "args": {"s": 30}})
        took = time.monotonic() - started
        timed_out = structured(result)
        garbage = {
            name: structured(await client.call_tool("call", {"tool": f"garbage.{name}"}))
            for name in GARBAGE
            if name != "deep"
        }
        after = structured(await client.call_tool("call", {"tool": "e.items.get", "args": {"id": "1"}}))
    assert result.is_error
    assert (timed_out["status"], timed_out["reason"]) == ("error", "upstream_timeout"), timed_out
    assert took < 10, took
    assert "Traceback" not in json.dumps(garbage)

    assert garbage["truncated_json"]["status"] == "ok"
    assert garbage["truncated_json"]["data"] == '{"items": [1, 2'
    assert garbage["invalid_utf8"]["status"] == "ok" and "v" in garbage["invalid_utf8"]["data"]
    assert "Service Unavailable" in garbage["html_as_json"]["data"]
    assert garbage["empty_json"]["status"] == "ok" and garbage["empty_json"].get("data") is None
    assert garbage["nan"]["status"] == "ok"
    assert garbage["huge_int"]["status"] == "ok" and garbage["huge_int"]["data"].startswith("999")
    # A raw NUL is not allowed inside a JSON string: handed on as text, with the control character
    # scrubbed like every string an upstream sends the model (issue 13).
    nul = garbage["nul_bytes"]
    assert nul["status"] == "ok" and "ab" in str(nul["data"]) and "\x00" not in str(nul["data"])
    assert garbage["bad_charset"]["status"] == "ok" and garbage["bad_charset"]["data"].startswith("caf")
    error = garbage["error_garbage"]
    assert (error["status"], error["reason"], error["upstream_status"]) == ("error", "upstream_error", 500)
    assert error["upstream_message"] == "{not json at all"
    assert after["status"] == "ok"


# -- bugs found while writing the tests above (cheap to run: the CLI is the same Gateway) ---------


def test_deeply_nested_json_from_upstream_is_a_usable_result(hostile_env: HostileEnv) -> None:
    """100,000 nested arrays labelled JSON: json.loads raises RecursionError, which is not a
    ValueError, so it escapes the response reader and the call ends as internal_error (with a
    traceback on the CLI's stderr, without --debug)."""
    proc = hostile_env.cli("call", "garbage.deep")
    body = json.loads(proc.stdout)
    assert body["status"] == "ok", body
    assert isinstance(body["data"], str)
    assert "Traceback" not in proc.stderr, proc.stderr[-600:]


def test_path_argument_too_long_for_a_url_is_invalid_args(hostile_env: HostileEnv) -> None:
    """A 70,000-character path value makes httpx2 raise InvalidURL ('URL component too long'),
    which build_request does not turn into an ArgumentError: the agent gets internal_error."""
    proc = hostile_env.cli("call", "e.items.get", "--args", json.dumps({"id": "A" * 70_000}))
    body = json.loads(proc.stdout)
    assert (body["status"], body["reason"]) == ("denied", "invalid_args"), body
    assert "Traceback" not in proc.stderr, proc.stderr[-600:]
    assert hostile_env.upstream.requests == []


def test_unknown_argument_to_a_write_is_refused_before_asking_for_approval(hostile_env: HostileEnv) -> None:
    """The JSON Schema check lets unknown properties through; build_request refuses them, but only
    after the approval gate, so a human is asked to approve a call that can never run."""
    proc = hostile_env.cli("call", "e.items.create", "--args", '{"name": "x", "unexpected": 1}')
    body = json.loads(proc.stdout)
    assert (body["status"], body.get("reason")) == ("denied", "invalid_args"), body
    pending = json.loads(hostile_env.cli("approvals", "list", "--json").stdout)
    assert pending == []
