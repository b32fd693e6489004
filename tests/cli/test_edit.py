"""``init``, ``add`` and ``remove``: the manifest is edited in place, comments and order kept, and
``remove`` puts the file back byte for byte; every added entry validates and syncs."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from contextlib import closing
from pathlib import Path

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mcp_gateway import cli
from mcp_gateway.cli import edit
from mcp_gateway.manifest import load_manifest
from tests.cli.test_commands import CliEnv, env  # noqa: F401 -- the fixture
from tests.support.named_pipe import outcome_of_reading
from tests.support.upstream import LoopbackServer

COMMENTED = """\
# My gateway -- a comment at the top
project: clitest   # inline, on project
default_mode: risk
public_url: http://127.0.0.1:9

connectors:
  # the echo API, described by a comment
  - slug: echo
    base_url: {upstream}
    auth: {{type: bearer}}   # a flow mapping with a comment
    source:
      http:
        actions:
          - path: items.get
            method: GET
            url: /items/{{id}}
            summary: Fetch one item by its id

  # a comment that introduces the agents

agents:
  - name: bot
    connectors: [echo]   # granted
"""


def _spec(upstream: str) -> dict[str, object]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "Billing API", "version": "1"},
        "servers": [{"url": upstream}],
        "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}}},
        "paths": {
            "/invoices": {"get": {"operationId": "listInvoices", "summary": "List invoices", "responses": {"200": {}}}},
            "/invoices/{id}": {
                "get": {
                    "operationId": "getInvoice",
                    "summary": "Fetch one invoice",
                    "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                    "responses": {"200": {}},
                }
            },
        },
    }


def _commented(env: CliEnv) -> str:  # noqa: F811
    text = COMMENTED.format(upstream=env.upstream_url)
    env.manifest.write_text(text)
    return text


def test_add_a_local_openapi_file_then_remove_restores_the_file(env: CliEnv, tmp_path: Path) -> None:  # noqa: F811
    original = _commented(env)
    spec = tmp_path / "openapi.yaml"
    spec.write_text(json.dumps(_spec(env.upstream_url)))
    added = env.run("add", str(spec), "--slug", "billing")
    assert added.code == 0, added.err
    assert "billing: needs_auth, 2 actions" in added.out
    assert "secret set billing" in added.err  # the next step
    text = env.manifest.read_text()
    for line in original.splitlines():
        assert line in text, line  # every comment and line kept, in order
    assert text.startswith(original.split("\n  # a comment that introduces")[0])
    manifest = load_manifest(env.manifest)
    billing = manifest.connector("billing")
    assert billing is not None and billing.auth.type == "api_key"
    assert [c.slug for c in manifest.connectors] == ["echo", "billing"]
    assert env.run("validate").code == 0

    removed = env.run("remove", "billing")
    assert removed.code == 0, removed.err
    assert env.manifest.read_text() == original


def test_add_a_spec_whose_credential_is_a_header_parameter_sends_it_as_auth(env: CliEnv, tmp_path: Path) -> None:  # noqa: F811
    # No security scheme: every operation takes the token as a header parameter (Rocket.Chat's shape).
    # The agent is never asked for it; the connector's auth sends it, and asks the operator for it.
    _commented(env)
    headers = [
        {"$ref": "#/components/parameters/Auth-Token"},
        {"name": "X-User-Id", "in": "header", "required": True, "schema": {"type": "string"}},
    ]
    spec = _spec(env.upstream_url)
    spec["components"] = {
        "parameters": {
            "Auth-Token": {"name": "X-Auth-Token", "in": "header", "required": True, "schema": {"type": "string"}}
        }
    }
    for item in spec["paths"].values():  # type: ignore[attr-defined]
        item["get"]["parameters"] = [*item["get"].get("parameters", []), *headers]
    path = tmp_path / "openapi.json"
    path.write_text(json.dumps(spec))
    added = env.run("add", str(path), "--slug", "chat")
    assert added.code == 0, added.err
    assert "chat: needs_auth, 2 actions" in added.out
    chat = load_manifest(env.manifest).connector("chat")
    assert chat is not None and chat.auth.model_dump() == {"type": "custom", "headers": {"X-Auth-Token": "{secret}"}}
    described = env.run("describe", "chat.get_invoice", "--json")
    assert described.code == 0, described.err
    arguments = described.json()["input_schema"]["properties"]
    assert set(arguments) == {"id", "x_user_id"}  # the user id is no secret: the agent may pass it


def test_add_a_catalog_entry_and_an_mcp_url(env: CliEnv) -> None:  # noqa: F811
    original = _commented(env)
    assert env.run("add", "petstore", "--no-sync").code == 0
    assert env.run("add", "--mcp-url", "https://mcp.example.com/mcp", "--slug", "docs", "--no-sync").code == 0
    env.monkeypatch.setenv("MCP_GATEWAY_MANIFEST", str(env.manifest))  # env.run's --manifest would follow "--"
    assert cli.main(["add", "--mcp", "--slug", "tool", "--no-sync", "--", "python", "-m", "some_server"]) == 0
    manifest = load_manifest(env.manifest)
    assert manifest.connector("petstore").catalog == "petstore"  # type: ignore[union-attr]
    assert [c.slug for c in manifest.connectors] == ["echo", "petstore", "docs", "tool"]
    assert manifest.connector("tool").source.mcp.command == ["python", "-m", "some_server"]  # type: ignore[union-attr]
    assert "# a comment that introduces the agents" in env.manifest.read_text()
    for slug in ("tool", "docs", "petstore"):
        assert env.run("remove", slug).code == 0
    assert env.manifest.read_text() == original
    duplicate = env.run("add", "--mcp-url", "https://x.example.com/mcp", "--slug", "echo")
    assert duplicate.code == 2 and "already has" in duplicate.err
    assert env.manifest.read_text() == original
    unknown = env.run("add", "no-such-thing")
    assert unknown.code == 2 and "petstore" in unknown.err


def test_add_an_entry_that_needs_a_base_url(env: CliEnv) -> None:  # noqa: F811
    original = _commented(env)
    refused = env.run("add", "jira", "--no-sync")
    assert refused.code == 2 and "base_url: https://<your-site>.atlassian.net" in refused.err
    assert env.manifest.read_text() == original  # nothing written
    added = env.run("add", "jira", "--base-url", "https://acme.atlassian.net", "--no-sync")
    assert added.code == 0, added.err
    assert load_manifest(env.manifest).connector("jira").base_url == "https://acme.atlassian.net"  # type: ignore[union-attr]


def test_add_a_url_fetches_once_and_pins_it_by_sha256(env: CliEnv) -> None:  # noqa: F811
    _commented(env)
    body = json.dumps(_spec(env.upstream_url)).encode()
    hits: list[int] = []

    async def spec(request: object) -> Response:
        hits.append(1)
        return Response(body, media_type="application/json")

    with LoopbackServer(Starlette(routes=[Route("/openapi.json", spec)])) as server:
        added = env.run("add", f"{server.base_url}/openapi.json")
    assert added.code == 0, added.err
    digest = hashlib.sha256(body).hexdigest()
    pinned = env.state_dir / "specs" / f"{digest}.json"
    assert pinned.read_bytes() == body and len(hits) == 1
    text = env.manifest.read_text()
    assert f"sha256 {digest}" in text and f"openapi: {pinned.relative_to(env.manifest.parent)}" in text
    billing = load_manifest(env.manifest).connector("billing_api")
    assert billing is not None and "billing_api: needs_auth, 2 actions" in added.out


def test_add_a_url_with_a_password_and_a_token_writes_neither_into_the_manifest(env: CliEnv) -> None:  # noqa: F811
    # The manifest is committed and shared: its comment names the URL as shown_url shows it, and a
    # relative server is resolved against the URL without the spec's password.
    _commented(env)
    body = json.dumps(_spec("/api/v2")).encode()

    async def spec(request: object) -> Response:
        return Response(body, media_type="application/json")

    with LoopbackServer(Starlette(routes=[Route("/openapi.json", spec)])) as server:
        url = server.base_url.replace("://", "://u:CANARY-pw@") + "/openapi.json?access_token=CANARY-tok&key=CANARY-k"
        added = env.run("add", url, "--no-sync")
    assert added.code == 0, added.err
    text = env.manifest.read_text()
    assert "CANARY" not in text + added.out + added.err
    assert "# fetched from http://u:***@" in text and "access_token=[redacted]&key=[redacted]" in text
    billing = load_manifest(env.manifest).connector("billing_api")
    assert billing is not None and billing.base_url == f"{server.base_url}/api/v2"


def test_add_a_url_whose_spec_refers_to_other_documents_resolves_them_on_its_origin(
    env: CliEnv,  # noqa: F811
    tmp_path: Path,
) -> None:
    # A local copy would resolve its $refs on this machine: any file, shown to agents.
    _commented(env)
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"type": "string", "description": "CANARY-LOCAL"}))
    spec = _spec(env.upstream_url)
    spec["paths"]["/invoices"]["get"]["parameters"] = [  # type: ignore[index]
        {"name": "limit", "in": "query", "schema": {"$ref": "schemas/limit.json"}},
        {"name": "leak", "in": "query", "schema": {"$ref": str(outside)}},
    ]
    asked: list[str] = []

    async def serve(request: Request) -> Response:
        asked.append(request.url.path)
        if request.url.path == "/schemas/limit.json":
            return Response(json.dumps({"type": "integer", "description": "from the origin"}))
        if request.url.path == "/openapi.json":
            return Response(json.dumps(spec), media_type="application/json")
        return Response("not found", status_code=404)

    with LoopbackServer(Starlette(routes=[Route("/{path:path}", serve)])) as server:
        added = env.run("add", f"{server.base_url}/openapi.json")
        assert added.code == 0, added.err
        described = env.run("describe", "billing_api.list_invoices")
    billing = load_manifest(env.manifest).connector("billing_api")
    assert billing is not None and billing.source.openapi == f"{server.base_url}/openapi.json"  # type: ignore[union-attr]
    assert "from the origin" in described.out and "CANARY" not in described.out + added.out
    assert "/schemas/limit.json" in asked and str(outside) in asked


def test_add_a_url_that_fails_names_it_without_its_secrets_and_says_why(env: CliEnv) -> None:  # noqa: F811
    async def hang(request: object) -> Response:
        await anyio.sleep(30)
        return Response(b"{}")

    env.monkeypatch.setattr(edit, "FETCH_SECONDS", 0.5)
    with LoopbackServer(Starlette(routes=[Route("/missing.json", hang)])) as server:
        secret_url = server.base_url.replace("://", "://user:CANARY-pw@") + "/missing.json?api_key=CANARY-key&v=2"
        failed = env.run("add", secret_url, "--slug", "x")
        slow = env.run("add", f"{server.base_url}/missing.json", "--slug", "y")
    assert failed.code == 1 and "CANARY" not in failed.out + failed.err
    assert "user:***@" in failed.err and "api_key=[redacted]&v=2" in failed.err
    assert slow.code == 1 and "no answer within 0.5 s" in slow.err


def test_add_a_url_writes_the_base_url_its_servers_name(env: CliEnv) -> None:  # noqa: F811
    # Where the credential goes is written into the manifest when the operator adds the connector
    # (a relative server resolved against the URL the description came from), not read from a
    # later copy of the description.
    _commented(env)
    spec = _spec("/api/v2")

    async def serve(request: object) -> Response:
        return Response(json.dumps(spec), media_type="application/json")

    with LoopbackServer(Starlette(routes=[Route("/openapi.json", serve)])) as server:
        added = env.run("add", f"{server.base_url}/openapi.json", "--no-sync")
        assert added.code == 0, added.err
        billing = load_manifest(env.manifest).connector("billing_api")
        assert billing is not None and billing.base_url == f"{server.base_url}/api/v2"


def test_removing_a_granted_connector_drops_the_grant(env: CliEnv) -> None:  # noqa: F811
    _commented(env)
    assert env.run("add", "petstore", "--no-sync").code == 0
    assert env.run("remove", "echo").code == 0
    text = env.manifest.read_text()
    assert "connectors: []" in text and "# granted" in text and "# My gateway" in text
    assert [c.slug for c in load_manifest(env.manifest).connectors] == ["petstore"]


def test_init_writes_a_commented_starter_that_validates(env: CliEnv, tmp_path: Path) -> None:  # noqa: F811
    target = tmp_path / "fresh" / "gateway.yaml"
    target.parent.mkdir()
    made = env.run("init", str(target))
    assert made.code == 0, made.err
    text = target.read_text()
    assert text.count("#") > 5 and "public_url" in text
    assert [c.slug for c in load_manifest(target).connectors] == ["petstore"]
    assert env.run("init", str(target)).code == 2  # never overwrites without --force
    # A folder, with or without --force: the file to name inside it, not "unexpected IsADirectoryError".
    for extra in ((), ("--force",)):
        folder = env.run("init", str(target.parent), *extra)
        assert folder.code == 2 and "is a folder" in folder.err and "gateway.yaml" in folder.err, folder


def test_init_default_writes_the_bundled_default_to_edit(env: CliEnv, tmp_path: Path) -> None:  # noqa: F811
    # What serve runs without a manifest, as a file: the same project (its stored credentials stay
    # readable) and the same connectors, so adding one to it drops none.
    target = tmp_path / "out" / "gateway.yaml"
    target.parent.mkdir()
    made = env.run("init", str(target), "--default")
    assert made.code == 0, made.err
    written, bundled = load_manifest(target), load_manifest(None)
    assert written.project == bundled.project
    assert [c.slug for c in written.connectors] == [c.slug for c in bundled.connectors]
    assert target.read_text().startswith("# mcp-gateway manifest, written from the bundled default")


def _insert_credential(env: CliEnv, connector: str, principal: str) -> None:  # noqa: F811
    """A credential written straight into the store (one stored before this build, or by another path)."""
    with closing(sqlite3.connect(env.state_dir / "state.db")) as db, db:
        db.execute(
            "INSERT INTO credential (connector, principal, name, sealed) VALUES (?, ?, 'default', x'00')",
            (connector, principal),
        )


def test_remove_deletes_the_connectors_credentials_so_a_later_one_under_its_slug_gets_none(
    env: CliEnv,  # noqa: F811
    tmp_path: Path,
) -> None:
    _commented(env)
    assert env.run("secret", "set", "echo", stdin="OLD-SERVICE-KEY-1234\n").code == 0
    _insert_credential(env, "echo", "token:abc")  # a user's own
    removed = env.run("remove", "echo")
    assert removed.code == 0, removed.err
    assert "deleted 2 stored credentials of echo" in removed.err and "stays" not in removed.err
    assert "OLD-SERVICE-KEY-1234" not in removed.out + removed.err
    rows = [r for r in env.run("audit", "--json").json() if r["status"] == "credential_deleted"]
    assert sorted(json.loads(r["args_preview"])["principal"] for r in rows) == ["*", "token:abc"]
    assert {json.loads(r["args_preview"])["via"] for r in rows} == {"remove"}
    # Another service added under the same slug starts with nothing stored, and says nothing of it.
    spec = tmp_path / "openapi.yaml"
    spec.write_text(json.dumps(_spec(env.upstream_url)))
    added = env.run("add", str(spec), "--slug", "echo")
    assert added.code == 0 and "echo: needs_auth" in added.out, added.err
    assert "warning" not in added.err and "secret set echo" in added.err


def test_add_warns_where_credentials_already_stored_under_its_slug_will_go(
    env: CliEnv,  # noqa: F811
    tmp_path: Path,
) -> None:
    _commented(env)
    assert env.run("sync").code in (0, 1)  # the state folder exists
    _insert_credential(env, "billing", "*")
    spec = tmp_path / "openapi.yaml"
    spec.write_text(json.dumps(_spec(env.upstream_url)))
    added = env.run("add", str(spec), "--slug", "billing")
    assert added.code == 0, added.err
    assert f"will be sent to {env.upstream_url}" in added.err, added.err
    assert "team-wide credential 'default'" in added.err and "mcp-gateway secret delete billing default" in added.err


def test_add_a_name_too_long_for_a_file_says_it_is_neither_file_nor_url(env: CliEnv) -> None:  # noqa: F811
    # The file system's "File name too long" was an "unexpected OSError".
    original = env.manifest.read_text()
    for what in ("x" * 304, "./" + "y" * 300 + ".yaml"):
        refused = env.run("add", what, "--slug", "b", "--no-sync")
        assert refused.code != 0 and "nor a file nor an http(s) URL" in refused.err, refused.err
        said = [line for line in refused.err.splitlines() if "(--manifest)" not in line]  # the manifest used
        assert "unexpected" not in refused.err and len(said) == 1, said
    assert env.manifest.read_text() == original


ANCHORED = """\
project: clitest
default_mode: risk
connectors:
  # the first one defines the actions the second one shares
  - slug: one
    base_url: {upstream}
    source:
      http:
        actions: &acts
          - path: items.get
            method: GET
            url: /items/{{id}}
            summary: Fetch one item by its id
  - slug: two  # keeps its actions
    base_url: {upstream}
    source:
      http:
        actions: *acts
agents:
  - name: bot
    connectors: [one, two]
"""


def test_remove_an_entry_whose_anchor_another_uses_keeps_what_that_one_means(env: CliEnv) -> None:  # noqa: F811
    # Cutting its lines left '*acts' with no '&acts': "not valid YAML ... found undefined alias".
    env.manifest.write_text(ANCHORED.format(upstream=env.upstream_url))
    removed = env.run("remove", "one")
    assert removed.code == 0, removed.err
    (left,) = load_manifest(env.manifest).connectors
    assert left.slug == "two" and "items.get" in env.manifest.read_text()
    assert "keeps its actions" in env.manifest.read_text()
    assert env.run("call", "two.items.get", "--args", '{"id": "7"}').json()["status"] == "ok"


def test_remove_refuses_in_one_line_naming_the_anchor_when_it_cannot_keep_it(
    env: CliEnv,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = ANCHORED.format(upstream=env.upstream_url)
    env.manifest.write_text(original)
    monkeypatch.setattr(edit, "_dump", lambda yaml, doc: original)  # a round trip that loses the entry's meaning
    refused = env.run("remove", "one")
    said = [line for line in refused.err.splitlines() if "(--manifest)" not in line]
    assert refused.code != 0 and len(said) == 1, said
    assert "another entry uses &acts, defined in the entry being removed" in said[0]
    assert env.manifest.read_text() == original


def test_add_and_remove_on_a_file_that_is_not_yaml_say_where_as_validate_does(env: CliEnv) -> None:  # noqa: F811
    # The round-trip reader's own error was an "unexpected ParserError" / "unexpected DuplicateKeyError".
    for text, said in (
        ("project: x\nconnectors:\n  - slug: a\n    x: {url: /a/{id}}\n", "gateway.yaml:4: not valid YAML"),
        ("project: x\nproject: y\nconnectors: []\n", "key 'project' appears twice"),
    ):
        env.manifest.write_text(text)
        for argv in (("remove", "a"), ("add", "petstore", "--no-sync")):
            refused = env.run(*argv)
            assert refused.code != 0 and said in refused.err and "unexpected" not in refused.err, refused.err
            assert env.manifest.read_text() == text


def test_add_reads_a_spec_file_as_sync_does_and_refuses_what_sync_would(
    env: CliEnv,  # noqa: F811
    tmp_path: Path,
) -> None:
    # add accepted a UTF-16 spec that sync then refused, and said nothing to do for a truncated one.
    text = json.dumps(_spec(env.upstream_url))
    truncated, utf16 = tmp_path / "cut.json", tmp_path / "wide.yaml"
    truncated.write_text(text[: len(text) // 2])
    utf16.write_bytes(text.encode("utf-16"))
    original = _commented(env)
    for spec, said in (
        (truncated, "the file looks truncated. Download or copy it again."),
        (utf16, "the file is UTF-16 text; save it as UTF-8"),
    ):
        refused = env.run("add", str(spec), "--no-sync")
        assert refused.code != 0 and said in refused.err, refused.err
        assert env.manifest.read_text() == original


def test_add_and_remove_on_a_named_pipe_say_what_it_is(env: CliEnv, tmp_path: Path) -> None:  # noqa: F811
    # The manifest check said "no such file" for a named pipe; add was told it is no file nor URL.
    pipe = tmp_path / "pipe.yaml"
    os.mkfifo(pipe)
    for argv in (("remove", "echo"), ("add", "petstore", "--no-sync")):
        refused = outcome_of_reading(lambda argv=argv: cli.main([*argv, "--manifest", str(pipe)]), pipe)
        assert refused is None
        err = env.capsys.readouterr().err
        assert f"cannot edit the manifest {pipe}: it is a named pipe, not a file" in err, err
    refused_spec = env.run("add", str(pipe), "--slug", "b", "--no-sync")
    assert refused_spec.code != 0 and "it is a named pipe, not a file" in refused_spec.err, refused_spec.err
