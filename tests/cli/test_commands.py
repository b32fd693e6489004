"""The ``mcp-gateway`` command in-process: ``cli.main([...])`` with a temporary state dir.

What a script or a human relies on: ``--json`` output parses, secrets and tokens go where they
should (a token on stdout only, a secret nowhere), and mistakes end in a clear message and a
non-zero exit -- never a traceback, unless ``--debug`` asks for one.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_gateway import cli
from mcp_gateway.core import Gateway
from mcp_gateway.store import SQLiteStore
from mcp_gateway.vocabulary.served import ServedAddress, record
from tests.support.upstream import EchoApp, LoopbackServer, echo_app

MANIFEST = """
project: clitest
default_mode: risk
public_url: http://127.0.0.1:9
connectors:
  - slug: echo
    base_url: {upstream}
    auth: {{type: bearer}}
{actions}
  - slug: basic_api
    base_url: {upstream}
    auth: {{type: basic}}
{actions}
"""

ACTIONS = """    source:
      http:
        actions:
          - path: items.get
            method: GET
            url: /items/{id}
            summary: Fetch one item by its id
          - path: items.create
            method: POST
            url: /items
            summary: Create a new item with a name
            input_schema: {type: object, required: [name], properties: {name: {type: string}}}"""


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class CliEnv:
    manifest: Path
    state_dir: Path
    upstream: EchoApp
    capsys: pytest.CaptureFixture[str]
    monkeypatch: pytest.MonkeyPatch
    upstream_url: str = ""

    def run(self, *argv: str, stdin: str | None = None) -> Run:
        self.capsys.readouterr()  # drop anything earlier
        if stdin is not None:
            self.monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = cli.main([*argv, "--manifest", str(self.manifest)])
        captured = self.capsys.readouterr()
        return Run(code, captured.out, captured.err)


@pytest.fixture
def env(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[CliEnv]:
    for name in ("MCP_GATEWAY_MANIFEST", "MCP_GATEWAY_AGENT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MCP_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("MCP_GATEWAY_MASTER_KEY", "cli-test-master-key-0123456789abcdef012345")
    app = echo_app()
    with LoopbackServer(app) as server:
        manifest = tmp_path / "gateway.yaml"
        manifest.write_text(MANIFEST.format(upstream=server.base_url, actions=ACTIONS))
        yield CliEnv(manifest, tmp_path / "state", app, capsys, monkeypatch, server.base_url)


def test_json_outputs_parse(env: CliEnv) -> None:
    assert env.run("secret", "set", "echo", stdin="echo-token-1234\n").code == 0
    assert env.run("call", "echo.items.get", "--args", '{"id": "1"}').json()["status"] == "ok"
    pending = env.run("call", "echo.items.create", "--args", '{"name": "w"}').json()
    assert pending["status"] == "pending_approval"
    env.run("token", "create", "--agent", "bot")

    validated = env.run("validate", "--json")
    assert validated.code == 0 and validated.json()["problems"] == []

    synced = env.run("sync", "--json")
    assert synced.code == 0
    assert {(s["slug"], s["status"], s["actions"]) for s in synced.json()} == {
        ("echo", "ready", 2),
        ("basic_api", "ready", 2),
    }

    listed = env.run("connectors", "--json").json()["connectors"]
    assert {c["slug"]: c["status"] for c in listed} == {"echo": "ready", "basic_api": "needs_auth"}

    found = env.run("discover", "fetch", "one", "item", "--json").json()
    assert found["query"] == "fetch one item"
    assert found["results"][0]["name"] in ("echo.items.get", "basic_api.items.get")
    blank = env.run("discover", "   ")
    assert blank.code == 2 and "query has nothing to search" in blank.err
    unsure = env.run("discover", "who", "painted", "the", "Mona", "Lisa")
    assert unsure.code == 0 and "low confidence: " in unsure.err  # what --json says in its "hint"

    tokens = env.run("token", "list", "--json").json()
    assert [t["agent"] for t in tokens] == ["bot"]
    assert "token_hash" not in tokens[0] and "token" not in tokens[0]

    # The calls' rows (the operator's `secret set` has a credential_set row of its own).
    audit = [row for row in env.run("audit", "--json").json() if row["status"] != "credential_set"]
    assert {row["status"] for row in audit} == {"ok", "pending_approval"}
    assert all(row["action"].startswith("echo.") for row in audit)

    approvals = env.run("approvals", "list", "--json").json()
    assert [a["id"] for a in approvals] == [pending["approval_id"]]

    described = env.run("describe", "echo.items.create", "--json").json()
    assert described["risk"] == "write" and described["input_schema"]["required"] == ["name"]


def test_audit_lists_the_rows_a_refused_write_left_in_the_journal(env: CliEnv) -> None:
    # A server whose store refused an outcome row kept it in the state folder's journal: the operator's
    # listing shows it (replayed into the store once), beside the rows the store took.
    from datetime import UTC, datetime

    from mcp_gateway.store import AuditRecord
    from mcp_gateway.store.audit_journal import AuditJournal

    journaled = AuditRecord(
        at=datetime(2026, 1, 1, tzinfo=UTC),
        user="alice",
        agent="bot",
        requested="echo.items.journaled",
        connector="echo",
        action="echo.items.journaled",
        args_preview="{}",
        fingerprint=None,
        verdict="always_run",
        verdict_source="risk_default",
        status="ok",
        latency_ms=12.0,
        call_id="journaled-1",
    )
    journal = AuditJournal(env.state_dir)
    journal.append([journaled])
    rows = env.run("audit", "--json").json()
    assert [r["call_id"] for r in rows if r["requested"] == "echo.items.journaled"] == ["journaled-1"]
    assert not journal.pending()
    again = env.run("audit", "--json").json()  # replayed once, not twice
    assert [r["call_id"] for r in again if r["requested"] == "echo.items.journaled"] == ["journaled-1"]


def test_tables_are_the_default(env: CliEnv) -> None:
    connectors = env.run("connectors")
    assert connectors.code == 0
    assert connectors.out.splitlines()[0].split() == ["SLUG", "STATUS", "ACTIONS", "AUTH", "ERROR"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(connectors.out)
    assert env.run("audit").out.split()[:3] == ["TIME", "WHO", "TOOL"]


def test_token_create_prints_the_token_on_stdout_only(env: CliEnv) -> None:
    created = env.run("token", "create", "--agent", "bot")
    assert created.code == 0
    token = created.out.strip()
    assert created.out == token + "\n", "stdout is the token and nothing else, so $(...) captures it"
    assert token.startswith("mgw_") and len(token) > 30
    assert token not in created.err
    assert "bot" in created.err

    listed = env.run("token", "list")
    assert token not in listed.out + listed.err
    assert "bot" in listed.out and "active" in listed.out

    as_json = env.run("token", "create", "--agent", "other", "--json")
    data = as_json.json()
    assert data["agent"] == "other" and data["token"].startswith("mgw_")
    assert data["token"] not in as_json.err

    revoked = env.run("token", "revoke", data["id"])
    assert revoked.code == 0 and data["id"] in revoked.out
    unknown = env.run("token", "revoke", "no-such-id")
    assert unknown.code == 2 and "no-such-id" in unknown.err and "Traceback" not in unknown.err


def test_token_create_refuses_a_huge_agent_name_without_quoting_it_whole(env: CliEnv) -> None:
    # The manifest declares no agents: any name is taken, but not one of 100 KB (a paste gone wrong).
    name = "a" * 100_000
    for extra in ((), ("--force",)):
        refused = env.run("token", "create", "--agent", name, *extra)
        assert refused.code == 2 and refused.out == "", refused.err[:500]
        assert "at most 200 characters" in refused.err and "(100000 characters)" in refused.err
        assert len(refused.err) < 2_000, refused.err[:500]
    assert env.run("token", "list", "--json").json() == []
    made = env.run("token", "create", "--agent", "b" * 200)
    assert made.code == 0 and "b" * 200 in made.err  # at the limit: taken, and named whole


def test_token_revoke_takes_the_token_itself_and_never_prints_it(env: CliEnv) -> None:
    # An operator revoking a leaked token often has only the token: it was echoed as "no active token
    # with id 'mgw_…'", and stayed active.
    token = env.run("token", "create", "--agent", "bot").out.strip()
    operator = env.run("token", "create", "--operator").out.strip()
    for value in (token, operator):
        revoked = env.run("token", "revoke", value)
        assert revoked.code == 0 and value not in revoked.out + revoked.err, revoked.err
    listed = env.run("token", "list", "--json").json()
    assert [row["revoked"] for row in listed] == [True, True]
    again = env.run("token", "revoke", token)
    assert again.code == 2 and token not in again.err and "no active token" in again.err
    stranger = env.run("token", "revoke", "mgw_" + "x" * 40)
    assert stranger.code == 2 and "x" * 40 not in stranger.err and "no token of this state folder" in stranger.err
    pasted = env.run("token", "revoke", "some-long-secret-pasted-by-mistake-0123456789")
    assert pasted.code == 2 and "pasted-by-mistake" not in pasted.err


@pytest.mark.parametrize(
    ("stdin", "says"),
    [
        ("pasted-PASSWORD-4f9e not json", "not valid JSON"),
        ('"pasted-PASSWORD-4f9e"', "must be a JSON object"),
        ('{"username": "alice"}', "missing 'password'"),
        ('{"username": "alice", "password": "pasted-PASSWORD-4f9e", "pasted-PASSWORD-4f9e": "x"}', "unexpected"),
        ('{"username": "alice", "password": ["pasted-PASSWORD-4f9e"]}', "must be a string"),
    ],
)
def test_secret_set_basic_rejects_bad_input_without_echoing_it(env: CliEnv, stdin: str, says: str) -> None:
    result = env.run("secret", "set", "basic_api", stdin=stdin)
    assert result.code == 2
    assert says in result.err, result.err
    assert '"username"' in result.err or "username" in result.err, "the message shows the expected shape"
    assert "pasted-PASSWORD-4f9e" not in result.out + result.err
    assert "Traceback" not in result.err
    # Nothing was stored.
    listed = env.run("connectors", "--json").json()["connectors"]
    assert {c["slug"]: c["auth_configured"] for c in listed}["basic_api"] is False


def test_secret_set_accepts_good_input_and_never_prints_it(env: CliEnv) -> None:
    stored = env.run("secret", "set", "basic_api", stdin='{"username": "alice", "password": "s3cret-pw-77"}')
    assert stored.code == 0 and "basic_api" in stored.err
    assert "s3cret-pw-77" not in stored.out + stored.err
    empty = env.run("secret", "set", "echo", stdin="\n")
    assert empty.code == 2 and "empty" in empty.err
    unknown = env.run("secret", "set", "nope", stdin="x")
    assert unknown.code == 2 and "nope" in unknown.err and "echo" in unknown.err
    called = env.run("call", "basic_api.items.get", "--args", '{"id": "9"}')
    assert called.json()["status"] == "ok"
    assert env.upstream.requests[-1].headers["authorization"].startswith("Basic ")
    assert "s3cret-pw-77" not in called.out + called.err


def test_secret_set_is_audited_as_the_operators_act_without_the_value(env: CliEnv) -> None:
    for password in ("first-pw-1234", "second-pw-5678"):
        stored = env.run("secret", "set", "basic_api", stdin=json.dumps({"username": "ops", "password": password}))
        assert stored.code == 0, stored.err
    rows = [r for r in env.run("audit", "--json").json() if r["status"] == "credential_set"]
    assert [(r["user"], r["connector"], r["requested"]) for r in rows] == [
        ("operator", "basic_api", "credential:basic_api")
    ] * 2
    assert [json.loads(r["args_preview"])["replaced"] for r in rows] == ["team", None]  # newest first
    assert all(json.loads(r["args_preview"])["scope"] == "team" for r in rows)
    assert "first-pw-1234" not in json.dumps(rows) and "second-pw-5678" not in json.dumps(rows)


PER_USER = """  - slug: mine
    base_url: {upstream}
    credentials: per_user
    auth: {{type: bearer}}
{actions}
  - slug: signin
    base_url: {upstream}
    auth: {{type: oauth2, authorize_url: {upstream}/authorize, token_url: {upstream}/token}}
{actions}
"""


def _with_more_connectors(env: CliEnv) -> None:
    env.manifest.write_text(env.manifest.read_text() + PER_USER.format(upstream=env.upstream_url, actions=ACTIONS))


def test_secret_delete_takes_a_credential_out_on_the_record(env: CliEnv) -> None:
    assert env.run("secret", "set", "echo", stdin="echo-token-1234\n").code == 0
    assert env.run("secret", "set", "echo", "webhook", stdin="hook-value-5678\n").code == 0
    deleted = env.run("secret", "delete", "echo")
    assert deleted.code == 0, deleted.err
    assert "deleted the team-wide credential 'default' of echo" in deleted.err
    assert "echo-token-1234" not in deleted.out + deleted.err
    called = env.run("call", "echo.items.get", "--args", '{"id": "1"}').json()
    assert called["status"] == "needs_auth", called  # at once: nothing stored is carried any more
    again = env.run("secret", "delete", "echo")
    assert again.code == 2 and "nothing to delete" in again.err and "'webhook' (team-wide)" in again.err, again.err
    user = env.run("secret", "delete", "echo", "webhook", "--user", "token:abc")
    assert user.code == 2 and "token:abc's own credential 'webhook'" in user.err, user.err
    unknown = env.run("secret", "delete", "ecko")
    assert unknown.code == 2 and "no such connector" in unknown.err and "echo" in unknown.err
    rows = [r for r in env.run("audit", "--json").json() if r["status"] == "credential_deleted"]
    assert [(r["user"], r["requested"]) for r in rows] == [("operator", "credential:echo")]
    assert json.loads(rows[0]["args_preview"]) == {"scope": "team", "principal": "*", "via": "secret delete"}
    assert "echo-token-1234" not in json.dumps(rows)


def test_secret_set_refuses_what_no_call_would_carry(env: CliEnv) -> None:
    _with_more_connectors(env)
    per_user = env.run("secret", "set", "mine", stdin="team-token-1234\n")
    assert per_user.code == 2 and "per_user" in per_user.err and "mcp-gateway connect mine" in per_user.err
    slot = env.run("secret", "set", "signin", "oauth2_token", stdin="junk-1234\n")
    assert slot.code == 2 and "mcp-gateway connect signin" in slot.err, slot.err
    assert not [r for r in env.run("audit", "--json").json() if r["status"] == "credential_set"]
    # The OAuth2 client of a connector stays the operator's to store.
    client = env.run("secret", "set", "signin", stdin='{"client_id": "c", "client_secret": "s3cret-cs-1"}')
    assert client.code == 0, client.err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ("{not json", "--args is not valid JSON"),
        ('{"id": 1,}', "--args is not valid JSON"),
        ("[1, 2]", "--args must be a JSON object"),
        ('"id"', "--args must be a JSON object"),
    ],
)
def test_call_with_bad_args_json_is_a_clear_error(env: CliEnv, args: str, says: str) -> None:
    result = env.run("call", "echo.items.get", "--args", args)
    assert result.code == 2
    assert says in result.err, result.err
    assert result.out == ""
    assert "Traceback" not in result.err
    assert env.upstream.requests == []


def test_describe_and_call_of_an_unknown_action(env: CliEnv) -> None:
    described = env.run("describe", "echo.item.fetch")
    assert described.code == 1
    body = described.json()
    assert (body["status"], body["reason"]) == ("denied", "action_not_found")
    assert "echo.items.get" in [s["name"] for s in body["suggestions"]]
    called = env.run("call", "nothing.at.all")
    assert called.code == 1 and called.json()["reason"] == "action_not_found"
    assert "Traceback" not in described.err + called.err


def test_describe_and_call_of_a_huge_unknown_name_quote_its_start(env: CliEnv) -> None:
    name = "echo." + "z" * 100_000
    for run in (env.run("describe", name), env.run("call", name)):
        assert run.code == 1 and run.json()["reason"] == "action_not_found"
        assert len(run.out) + len(run.err) < 5_000 and "(100005 characters)" in run.out, run.out[:500]


def test_call_exit_codes_follow_the_status(env: CliEnv) -> None:
    needs_auth = env.run("call", "echo.items.get", "--args", '{"id": "1"}')
    assert needs_auth.code == 0 and needs_auth.json()["status"] == "needs_auth"
    env.run("secret", "set", "echo", stdin="tok-123456")
    invalid = env.run("call", "echo.items.create", "--args", '{"name": 5}')
    assert invalid.code == 1 and invalid.json()["reason"] == "invalid_args"
    pending = env.run("call", "echo.items.create", "--args", '{"name": "w"}')
    assert pending.code == 0
    approval_id = pending.json()["approval_id"]

    listed = env.run("approvals", "list")
    assert f"POST {env.upstream_url}/items" in listed.out and "approvals show ID" in listed.out
    long_note = "n" * 600 + "\u202e" + "tail-word"
    shown = env.run("approvals", "show", approval_id)
    assert shown.code == 0 and f"calls:       POST {env.upstream_url}/items" in shown.out
    assert '"name": "w"' in shown.out and "echo.items.create (write)" in shown.out
    cut = env.run("call", "echo.items.create", "--args", json.dumps({"name": long_note}))
    whole = env.run("approvals", "show", cut.json()["approval_id"])
    assert "tail-word" in whole.out and "\\u202e" in whole.out and "\u202e" not in whole.out
    assert env.run("approvals", "show", "apr_nope").code == 2
    assert "mixing alphabets" not in whole.out

    approved = env.run("approvals", "approve", approval_id)
    assert approved.code == 0 and approved.out.strip() == f"{approval_id}: approved"
    again = env.run("approvals", "deny", approval_id)
    assert again.code == 2 and "not pending" in again.err
    ran = env.run("call", "echo.items.create", "--args", '{"name": "w"}', "--approval-id", approval_id)
    assert ran.code == 0 and ran.json()["status"] == "ok"
    assert env.upstream.requests[-1].json() == {"name": "w"}
    projected = env.run("call", "echo.items.get", "--args", '{"id": "1"}', "--fields", "method", "raw_path")
    assert projected.json()["data"] == {"method": "GET", "raw_path": "/items/1"}
    everything = env.run("approvals", "list", "--all", "--json").json()
    assert {a["id"]: a["status"] for a in everything}[approval_id] == "consumed"
    assert [a["status"] for a in env.run("approvals", "list", "--json").json()] == ["pending"]


def test_unexpected_error_has_a_traceback_only_with_debug(env: CliEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(self: Gateway, principal: Any) -> dict[str, Any]:
        raise RuntimeError("boom in connectors")

    monkeypatch.setattr(Gateway, "connectors", broken)
    # After the first run's sync, the stored state would answer without a Gateway (cli/listing.py).
    monkeypatch.setattr("mcp_gateway.cli.listing.connectors_from_state", lambda *_: None)
    quiet = env.run("connectors")
    assert quiet.code == 1
    assert "unexpected RuntimeError" in quiet.err and "--debug" in quiet.err
    assert "Traceback" not in quiet.err
    debugged = env.run("connectors", "--debug")
    assert debugged.code == 1 and "Traceback" in debugged.err and "boom in connectors" in debugged.err


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_debug_adds_the_traceback_and_keeps_the_exit_code(env: CliEnv, log_format: str) -> None:
    # --debug turned every failure's exit code into 1: a script adding it to learn why got another code.
    for argv, code in (
        (["approvals", "show", "apr_nope"], 2),
        (["--state-dir", str(env.manifest), "audit"], 3),
        (["validate"], 2),  # the manifest broken just below
    ):
        if argv == ["validate"]:
            env.manifest.write_text("connectors: [ {slug: 1} ]\n")
        plain = env.run(*argv, "--log-format", log_format)
        debugged = env.run(*argv, "--log-format", log_format, "--debug")
        assert plain.code == debugged.code == code, (argv, plain, debugged)
        assert "Traceback" not in plain.err and "Traceback" in debugged.err, argv
        if log_format == "json":  # the traceback inside the record, not lines of another shape
            records = [json.loads(line) for line in debugged.err.splitlines()]
            assert any("Traceback" in r.get("exception", "") for r in records), records


def test_manifest_errors_exit_2_without_traceback(env: CliEnv) -> None:
    env.manifest.write_text("project: x\nconnectors:\n  - slug: a\n    auth: {type: kerberos}\n")
    for command in (("validate",), ("sync",), ("connectors",), ("call", "a.b")):
        result = env.run(*command)
        assert result.code == 2, command
        assert "gateway.yaml:4" in result.err and "kerberos" in result.err, result.err
        assert "Traceback" not in result.err
        assert result.out == ""


def test_secret_set_discovery_seals_the_embeddings_key(env: CliEnv) -> None:
    stored = env.run("secret", "set", "--discovery", stdin="sk-discovery-canary-991\n")
    assert stored.code == 0 and "discovery" in stored.err
    assert "sk-discovery-canary-991" not in stored.out + stored.err
    assert b"sk-discovery-canary-991" not in (env.state_dir / "state.db").read_bytes()
    both = env.run("secret", "set", "echo", "--discovery", stdin="x")
    assert both.code == 2 and "--discovery" in both.err
    neither = env.run("secret", "set", stdin="x")
    assert neither.code == 2 and "--discovery" in neither.err


def test_secret_set_front_door_seals_a_client_secret_of_the_front_door(env: CliEnv) -> None:
    stored = env.run("secret", "set", "--front-door", "introspection", stdin="introspection-canary-417\n")
    assert stored.code == 0 and "introspection client secret" in stored.err
    assert "introspection-canary-417" not in stored.out + stored.err
    assert b"introspection-canary-417" not in (env.state_dir / "state.db").read_bytes()
    assert env.run("secret", "set", "echo", "--front-door", "approver", stdin="x").code == 2


def test_validate_names_a_missing_or_unparsable_spec_file_with_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "project: v\nconnectors:\n  - slug: billing\n    base_url: http://127.0.0.1:9\n"
        "    source:\n      openapi: ./nosuch.yaml\n"
        "  - slug: notes\n    base_url: http://127.0.0.1:9\n    source:\n      postman: ./broken.json\n"
    )
    (tmp_path / "broken.json").write_text('{"info": ')
    assert cli.main(["validate", "--manifest", str(manifest)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{manifest}:6: connectors[0].source.openapi: './nosuch.yaml': no such file"), err
    assert err[1].startswith(f"{manifest}:10: connectors[1].source.postman: './broken.json' does not parse"), err


def test_secret_set_resyncs_a_connector_whose_introspection_needed_the_credential(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.support.graphql_upstream import GraphQLApp

    monkeypatch.setenv("MCP_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("MCP_GATEWAY_MASTER_KEY", "cli-test-master-key-0123456789abcdef012345")
    app = GraphQLApp(token="gql-token-value-123")
    with LoopbackServer(app) as server:
        manifest = tmp_path / "m.yaml"
        manifest.write_text(
            f"project: g\nconnectors:\n  - slug: gh\n    base_url: {server.base_url}/graphql\n"
            "    auth: {type: bearer}\n    source: {graphql: {introspect: true}}\n"
        )
        assert cli.main(["sync", "--manifest", str(manifest)]) == 1  # in error: introspection needs the token
        capsys.readouterr()
        monkeypatch.setattr(sys, "stdin", io.StringIO("gql-token-value-123\n"))
        assert cli.main(["secret", "set", "gh", "--manifest", str(manifest)]) == 0
        assert "synced gh: ready (5 actions)" in capsys.readouterr().err


def _rotate(env: CliEnv, new_key: str) -> Run:
    env.capsys.readouterr()
    env.monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(f"{new_key}\n".encode())))
    code = cli.main(["keys", "rotate", "--manifest", str(env.manifest)])
    captured = env.capsys.readouterr()
    return Run(code, captured.out, captured.err)


def test_keys_rotate_reads_the_new_key_as_the_gateway_reads_it(env: CliEnv) -> None:
    # Sealed under the key's raw text, the credentials opened under no key the operator could set.
    assert env.run("secret", "set", "echo", stdin="rotated-token-1234\n").code == 0
    new_key = secrets.token_urlsafe(32)
    rotated = _rotate(env, new_key)
    assert rotated.code == 0 and "re-encrypted 1 credentials" in rotated.err and "MCP_GATEWAY_MASTER_KEY" in rotated.err
    assert new_key not in rotated.out + rotated.err
    env.monkeypatch.setenv("MCP_GATEWAY_MASTER_KEY", new_key)
    called = env.run("call", "echo.items.get", "--args", '{"id": "1"}')
    assert called.json()["status"] == "ok", called.out
    assert env.upstream.requests[-1].headers["authorization"] == "Bearer rotated-token-1234"


def test_keys_rotate_writes_the_new_key_to_the_key_file_it_replaces(env: CliEnv) -> None:
    env.monkeypatch.delenv("MCP_GATEWAY_MASTER_KEY")
    assert env.run("secret", "set", "echo", stdin="file-token-5678\n").code == 0
    key_file = env.state_dir / "master.key"
    before = key_file.read_text()
    rotated = _rotate(env, secrets.token_hex(32))
    assert rotated.code == 0 and str(key_file) in rotated.err, rotated.err
    assert key_file.read_text() != before and oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in env.state_dir.iterdir() if p.name.startswith(".master.key")] == []
    called = env.run("call", "echo.items.get", "--args", '{"id": "1"}')  # the next start reads the file
    assert called.json()["status"] == "ok", called.out
    assert env.upstream.requests[-1].headers["authorization"] == "Bearer file-token-5678"


def test_secret_set_refuses_a_value_its_connector_could_never_use(env: CliEnv) -> None:
    # Stored, each answered every call with "reconnect"; the link page already refused them.
    env.manifest.write_text(
        env.manifest.read_text()
        + f"  - slug: signed\n    base_url: {env.upstream_url}\n    auth: {{type: hmac, key_encoding: base64}}\n"
        + f"  - slug: tls\n    base_url: {env.upstream_url}\n    auth: {{type: mtls}}\n"
    )
    bad_key = env.run("secret", "set", "signed", stdin="CANARY-!!not-base64")
    assert bad_key.code == 2 and "not valid base64" in bad_key.err and "CANARY" not in bad_key.err
    bad_pem = env.run("secret", "set", "tls", stdin='{"cert_pem": "CANARY-garbage", "key_pem": "CANARY-garbage"}')
    assert bad_pem.code == 2 and "not a PEM certificate" in bad_pem.err and "CANARY" not in bad_pem.err
    assert env.run("secret", "set", "signed", stdin="c2lnbmluZy1rZXktMDEyMzQ1Njc4OQ==").code == 0


def test_secret_set_refuses_a_value_its_kind_cannot_send(env: CliEnv) -> None:
    # Stored, each was "ready" to doctor and failed every call: garbled upstream, internal error or "reconnect".
    env.manifest.write_text(
        env.manifest.read_text()
        + f"  - slug: cookie\n    base_url: {env.upstream_url}\n    auth: {{type: api_key, in: cookie, name: sid}}\n"
        + f"  - slug: tmpl\n    base_url: {env.upstream_url}\n"
        + "    auth: {type: custom, headers: {X-Key: '{secret.key}'}}\n"
        + f"  - slug: pair\n    base_url: {env.upstream_url}\n    auth: {{type: basic}}\n"
    )
    for slug, raw, problem in [
        ("echo", "\ufeffCANARY-token", "the bearer secret holds an invisible formatting character at the start"),
        ("cookie", "CANARY-cøøkie", "the api_key secret holds a character beyond ASCII inside it"),
        ("tmpl", '{"key": "CANARY-key\\n"}', "a field of the custom secret holds a line break at the end"),
        ("pair", '{"username": "CANARY:x", "password": "x"}', "the basic username contains ':'"),
    ]:
        refused = env.run("secret", "set", slug, stdin=raw)
        assert refused.code == 2 and problem in refused.err and "CANARY" not in refused.err, (slug, refused.err)
    assert env.run("secret", "set", "tmpl", stdin='{"key": "CANARY-key"}').code == 0


def test_secret_set_refuses_a_custom_value_lacking_a_field_its_templates_read(env: CliEnv) -> None:
    # Stored as "stored secret 'default' for cu (custom)", then every call was needs_auth and doctor said ready.
    env.manifest.write_text(
        env.manifest.read_text()
        + f"  - slug: cu\n    base_url: {env.upstream_url}\n"
        + "    auth: {type: custom, headers: {X-User: '{secret.user}', X-Pass: '{secret.pass}'}}\n"
    )
    for raw in ('{"pass": "CANARY-pw"}', "CANARY-pw"):
        refused = env.run("secret", "set", "cu", stdin=raw)
        assert refused.code == 2 and "'user'" in refused.err and "CANARY" not in refused.err, refused.err
    assert env.run("secret", "set", "cu", stdin='{"user": "ana", "pass": "CANARY-pw"}').code == 0


def test_approvals_show_warns_of_a_word_mixing_alphabets_as_the_page_does(env: CliEnv) -> None:
    env.run("secret", "set", "echo", stdin="tok-123456")
    asked = env.run("call", "echo.items.create", "--args", json.dumps({"name": "https://\u0430pple.com/pay"}))
    warned = env.run("approvals", "show", asked.json()["approval_id"])
    assert "warning: words mixing alphabets" in warned.out and "CYRILLIC SMALL LETTER A" in warned.out


def test_approvals_show_spells_and_warns_of_what_the_page_marks(env: CliEnv) -> None:
    # The page's one rule: a braille blank, an overlay and a stack of accents as codes; right-to-left letters named.
    env.run("secret", "set", "echo", stdin="tok-123456")
    name = "\u2800|inv\u0338oice|e" + "\u0301" * 20 + "|\u05d0 5, 5000"
    asked = env.run("call", "echo.items.create", "--args", json.dumps({"name": name}))
    shown = env.run("approvals", "show", asked.json()["approval_id"]).out
    assert "\\u2800|inv\\u0338oice|e" + "\\u0301" * 20 + "|\u05d0 5, 5000" in shown
    assert "warning: invisible, blank-looking" in shown and "warning: right-to-left letters" in shown
    plain = env.run("call", "echo.items.create", "--args", json.dumps({"name": "Tiếng Việt"}))
    calm = env.run("approvals", "show", plain.json()["approval_id"]).out
    assert "Tiếng Việt" in calm and "warning" not in calm


def test_secret_set_at_a_terminal_asks_without_echoing(env: CliEnv) -> None:
    # Typed at a terminal, the secret showed as typed, with no prompt saying input was awaited.
    import getpass

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    asked: list[str] = []
    env.monkeypatch.setattr(getpass, "getpass", lambda prompt: asked.append(prompt) or "typed-token-0042")
    env.monkeypatch.setattr(sys, "stdin", Terminal(""))
    stored = env.run("secret", "set", "echo")
    assert stored.code == 0 and asked and "not shown as you type" in asked[0]
    called = env.run("call", "echo.items.get", "--args", '{"id": "1"}')
    assert env.upstream.requests[-1].headers["authorization"] == "Bearer typed-token-0042", called.out


def test_sync_says_how_a_running_server_syncs_too(env: CliEnv) -> None:
    # The CLI's sync stores catalogs; a server already running keeps those it loaded until told.
    assert "kill -HUP" not in env.run("sync").err  # nothing serves: nothing to say
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        record(env.state_dir, ServedAddress(url, os.getpid(), "127.0.0.1", port, "http", str(env.manifest), ""))
        synced = env.run("sync")
    assert synced.code == 0
    assert f"the server at {url} (pid {os.getpid()}) still serves the catalogs it loaded" in synced.err
    assert f"`kill -HUP {os.getpid()}` has it sync again" in synced.err


def test_sync_shows_and_stores_source_urls_without_their_passwords_or_tokens(env: CliEnv) -> None:
    closed = "127.0.0.1:9"  # nothing listens: each connector fails at once
    env.manifest.write_text(
        "project: clitest\nconnectors:\n"
        f"  - slug: spec\n    source: {{openapi: 'http://alice:CANARY-SPECPW@{closed}/s.json'}}\n"
        f"  - slug: tok\n    source: {{openapi: 'http://{closed}/s.json?access_token=CANARY-TOK'}}\n"
        f"  - slug: coll\n    source: {{postman: 'http://u:CANARY-PMPW@{closed}/c.json'}}\n"
        f"  - slug: remote\n    source: {{mcp: {{url: 'http://u:CANARY-MCPPW@{closed}/mcp?token=CANARY-MT'}}}}\n"
        "  - slug: child\n    source: {mcp: {command: [mcp-remote, 'https://u:CANARY-ARGPW@mcp.example/sse']}}\n"
    )
    table, listed = env.run("sync"), env.run("sync", "--json")
    sources = {row["slug"]: row["source"] for row in listed.json()}
    assert sources == {
        "spec": "openapi:http://alice:***@127.0.0.1:9/s.json",
        "tok": "openapi:http://127.0.0.1:9/s.json?access_token=[redacted]",
        "coll": "postman:http://u:***@127.0.0.1:9/c.json",
        "remote": "mcp:http://u:***@127.0.0.1:9/mcp?token=[redacted]",
        "child": "mcp:mcp-remote https://u:***@mcp.example/sse",
    }
    stored = b"".join(f.read_bytes() for f in env.state_dir.glob("state.db*")).decode("latin-1")
    for shown in (table.out + table.err, listed.out + listed.err, stored):
        assert "CANARY" not in shown


def test_approvals_show_says_when_arguments_were_cut_when_stored(env: CliEnv) -> None:
    # An earlier build stored arguments past a million characters cut: `show` printed the cut text unmarked.
    env.run("secret", "set", "echo", stdin="tok-123456")
    pending = env.run("call", "echo.items.create", "--args", '{"name": "whole"}').json()

    async def cut_copy() -> None:
        async with SQLiteStore(env.state_dir / "state.db") as store:
            stored = await store.get_approval(pending["approval_id"])
            assert stored is not None
            await store.put_approval(stored.model_copy(update={"id": "apr_cut", "arguments": stored.arguments[:8]}))

    anyio.run(cut_copy)
    assert "were cut when stored" not in env.run("approvals", "show", pending["approval_id"]).out
    shown = env.run("approvals", "show", "apr_cut")
    assert shown.code == 0 and "were cut when stored, so this call cannot be approved" in shown.out


def test_an_agent_the_manifest_does_not_name_is_refused_with_the_nearest(env: CliEnv) -> None:
    # Taken as it was, a typo saw no connector and was told every action and connector did not exist.
    env.manifest.write_text(env.manifest.read_text() + "agents:\n  - name: bot\n    connectors: [echo]\n")
    for argv in (
        ["connectors"],
        ["discover", "fetch", "one", "item"],
        ["describe", "echo.items.get"],
        ["call", "echo.items.get", "--args", '{"id": "1"}'],
        ["connect", "echo"],
    ):
        typo = env.run(*argv, "--agent", "bto")
        assert typo.code == 2 and typo.out == "", (argv, typo)
        assert "no agent 'bto'" in typo.err and "did you mean 'bot'?" in typo.err and "its agents: bot" in typo.err
    env.monkeypatch.setenv("MCP_GATEWAY_AGENT", "bto")
    from_env = env.run("connect", "echo")
    assert from_env.code == 2 and "$MCP_GATEWAY_AGENT" in from_env.err
    env.monkeypatch.setenv("MCP_GATEWAY_AGENT", "bot")
    assert env.run("connectors").code == 0
    minted = env.run("token", "create", "--agent", "bto")
    assert minted.code == 2 and "did you mean 'bot'?" in minted.err


@pytest.mark.slow
def test_call_wait_prints_the_approval_link_before_it_waits(env: CliEnv) -> None:
    # The person at the terminal is often the approver: the link came only once the wait was over.
    import subprocess
    import time

    from tests.support.env import child_env

    assert env.run("secret", "set", "echo", stdin="echo-token-1234\n").code == 0
    root = Path(__file__).resolve().parents[2]
    environ = child_env() | {
        "PYTHONPATH": str(root),
        "MCP_GATEWAY_STATE_DIR": str(env.state_dir),
        "MCP_GATEWAY_MASTER_KEY": os.environ["MCP_GATEWAY_MASTER_KEY"],
    }
    argv = ["call", "echo.items.create", "--args", '{"name": "w"}', "--wait", "60", "--manifest", str(env.manifest)]
    started = time.monotonic()
    waiting = subprocess.Popen(
        [sys.executable, "-m", "mcp_gateway", *argv],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert waiting.stderr is not None
        said = ""
        while "approval needed" not in said:
            line = waiting.stderr.readline()
            assert line, said
            said += line
        assert "waiting up to 60 s" in said and "/approvals/" in said
        (pending,) = env.run("approvals", "list", "--json").json()  # the one the link printed opens
        assert env.run("approvals", "approve", pending["id"]).code == 0
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert waiting.returncode == 0 and json.loads(out)["status"] == "ok", (out, err)
    assert time.monotonic() - started < 55
    assert "approval needed" not in err  # said once


REFUSING = """  - slug: team
    base_url: {upstream}
    auth: {{type: bearer}}
    source:
      http:
        actions:
          - {{path: refused.get, method: GET, url: /status/401, summary: Answer 401 as a revoked token would}}
"""


def test_a_credential_its_upstream_refused_says_who_stored_it_in_connectors_and_doctor(env: CliEnv) -> None:
    env.manifest.write_text(env.manifest.read_text() + REFUSING.format(upstream=env.upstream_url))
    assert env.run("secret", "set", "team", stdin="team-token-1234\n").code == 0
    assert env.run("connectors", "--json").json()["connectors"][2]["status"] == "ready"
    refused = env.run("call", "team.refused.get").json()
    assert refused["status"] == "needs_auth", refused
    told = "The team-wide credential of team was stored at "
    assert told in refused["reason"] and "by operator through `mcp-gateway secret set`" in refused["reason"]
    assert "team answered 401 to team.refused.get carrying it at " in refused["reason"]
    # ``connectors`` (read from the state file) and ``doctor`` (the full gateway) say so too: not ready.
    [listed] = [c for c in env.run("connectors", "--json").json()["connectors"] if c["slug"] == "team"]
    assert listed["status"] == "needs_auth" and told in listed["warning"], listed
    doctor = {f["check"]: f for f in json.loads(env.run("doctor", "--json").out)}
    finding = doctor["connector team"]
    assert finding["level"] == "problem" and told in finding["message"], finding
    assert finding["fix"].startswith("mcp-gateway secret set team <")
    # Deleted, its record goes with it: nothing stored, nothing refused.
    assert env.run("secret", "delete", "team").code == 0
    [listed] = [c for c in env.run("connectors", "--json").json()["connectors"] if c["slug"] == "team"]
    assert listed["status"] == "needs_auth" and listed.get("warning") is None
    assert "team-token-1234" not in json.dumps(refused) + json.dumps(listed) + json.dumps(doctor)


def test_connectors_tells_the_operator_of_personal_credentials_left_on_a_shared_connector(env: CliEnv) -> None:
    from mcp_gateway.primitives.crypto import AESGCMCipher, load_master_key
    from mcp_gateway.services.credentials import CredentialVault

    assert env.run("secret", "set", "echo", stdin="echo-token-1234\n").code == 0
    quiet = env.run("connectors")
    assert quiet.code == 0 and "per_user" not in quiet.err, quiet.err

    async def leave_two() -> None:
        # Stored while echo was `credentials: per_user`; it is shared now.
        cipher = AESGCMCipher(load_master_key(dict(os.environ), env.state_dir), project="clitest")
        async with SQLiteStore(env.state_dir / "state.db") as store:
            vault = CredentialVault(store, cipher, project="clitest")
            await vault.put("echo", "CANARY-own-1", principal="token:ab12")
            await vault.put("echo", "CANARY-own-2", principal="token:cd34")

    anyio.run(leave_two)
    for args in (("connectors",), ("connectors", "--json")):
        listed = env.run(*args)
        assert listed.code == 0, listed.err
        assert "echo has 2 personal credential(s) stored while it was `credentials: per_user`" in listed.err
        assert "mcp-gateway secret delete echo --user USER" in listed.err
        # A count and the command: names are doctor's to give, and never in what an agent reads.
        assert "token:ab12" not in listed.out + listed.err and "CANARY" not in listed.out + listed.err
    assert [c["status"] for c in env.run("connectors", "--json").json()["connectors"] if c["slug"] == "echo"] == [
        "ready"
    ]


def test_secret_delete_withdraws_the_approvals_waiting_to_replace_it(env: CliEnv) -> None:
    from mcp_gateway.services.approvals import ApprovalService
    from mcp_gateway.services.identity import Principal
    from mcp_gateway.vocabulary.clock import SystemClock

    assert env.run("secret", "set", "echo", stdin="echo-token-1234\n").code == 0

    async def ask() -> str:
        async with SQLiteStore(env.state_dir / "state.db") as store:
            approvals = ApprovalService(store, SystemClock())
            asked = await approvals.request_credential(Principal(user="bob", agent="bot"), "echo", "default", "Replace")
            return asked.id

    approval_id = anyio.run(ask)
    deleted = env.run("secret", "delete", "echo")
    assert deleted.code == 0 and f"withdrew approval {approval_id}" in deleted.err, deleted.err
    assert env.run("approvals", "list", "--json").json() == []


def test_secret_set_withdraws_the_replacements_it_overtook_and_names_them(env: CliEnv) -> None:
    from mcp_gateway.services.approvals import ApprovalService
    from mcp_gateway.services.identity import Principal
    from mcp_gateway.vocabulary.clock import SystemClock

    assert env.run("secret", "set", "echo", stdin="echo-token-1234\n").code == 0

    async def ask() -> str:
        async with SQLiteStore(env.state_dir / "state.db") as store:
            approvals = ApprovalService(store, SystemClock())
            asked = await approvals.request_credential(Principal(user="bob", agent="bot"), "echo", "default", "Replace")
            return asked.id

    approval_id = anyio.run(ask)
    replaced = env.run("secret", "set", "echo", stdin="echo-token-5678\n")
    assert replaced.code == 0 and f"withdrew approval {approval_id}" in replaced.err, replaced.err
    assert "against the credential just replaced" in replaced.err
    assert env.run("approvals", "list", "--json").json() == []


PETS = """{"openapi": "3.0.0", "info": {"title": "Pets", "version": "1"}, "paths": {
  "/pets": {"get": {"operationId": "listPets", "summary": "List the pets", "responses": {"200": {"description": "ok"}}},
            "post": {"operationId": "addPet", "summary": "Add a pet", "responses": {"200": {"description": "ok"}}}}}}"""


def test_a_connector_whose_spec_breaks_is_ready_with_its_last_catalog_in_every_command(
    env: CliEnv, tmp_path: Path
) -> None:
    # A running server kept serving the catalog it last loaded, while each CLI command, a process of
    # its own, said "error, 0 actions", and doctor advised removing the connector.
    spec = tmp_path / "pets.json"
    spec.write_text(PETS)
    env.manifest.write_text(
        env.manifest.read_text()
        + f"  - slug: pets\n    base_url: {env.upstream_url}\n    source: {{openapi: {spec}}}\n"
    )
    assert env.run("sync").code == 0
    spec.write_text(PETS[:120])  # cut short, as mid-copy
    synced = env.run("sync")
    assert synced.code == 1  # the load failed: a script sees it, though the connector still serves
    for _ in range(2):  # and again, from the state the previous command stored
        [pets] = [c for c in env.run("connectors", "--json").json()["connectors"] if c["slug"] == "pets"]
        assert (pets["status"], pets["actions"]) == ("ready", 2), pets
        assert "the catalog loaded at" in pets["error"] and "is kept" in pets["error"]
    doctor = env.run("doctor")
    line = next(line for line in doctor.out.splitlines() if "connector pets" in line)
    assert line.startswith("WARNING") and "ready, 2 actions" in line and "remove" not in doctor.out
    spec.write_text(PETS)  # repaired
    assert env.run("sync").code == 0
    [pets] = [c for c in env.run("connectors", "--json").json()["connectors"] if c["slug"] == "pets"]
    assert (pets["status"], pets["actions"], pets.get("error")) == ("ready", 2, None)


def test_validate_warns_of_an_empty_manifest(env: CliEnv) -> None:
    env.manifest.write_text("# nothing yet\n")
    checked = env.run("validate")
    assert checked.code == 0 and "ok (0 connectors)" in checked.out
    assert "warning:" in checked.err and "is empty" in checked.err


def test_a_count_too_large_for_the_database_is_a_usage_error(env: CliEnv) -> None:
    # It reached SQLite as "unexpected OverflowError", exit 1.
    with pytest.raises(SystemExit) as usage:
        env.run("audit", "--limit", "99999999999999999999")
    assert usage.value.code == 2 and "is not from 1 to 1,000,000,000" in env.capsys.readouterr().err


def test_secret_set_without_a_stdin_or_with_bytes_that_are_not_utf8_says_so(env: CliEnv) -> None:
    env.monkeypatch.setattr(sys, "stdin", None)
    closed = env.run("secret", "set", "echo")
    assert closed.code == 2 and "stdin is closed" in closed.err and "unexpected" not in closed.err
    env.monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xff\xfeCANARY-latin")))
    latin = env.run("secret", "set", "echo")
    assert latin.code == 2 and "is not UTF-8 text (byte 0xff at position 0)" in latin.err
    assert "UTF-16" not in latin.err and "CANARY" not in latin.err


def test_every_stderr_line_is_a_json_record_under_json_logs(env: CliEnv, tmp_path: Path) -> None:
    """What each command tells the operator on stderr (a stored secret, a new token, a link's hint, an
    entry added or removed, a low-confidence search, an empty manifest) is a log record, like its errors."""
    json_logs = ("--log-format", "json")
    runs = [
        env.run(*json_logs, "secret", "set", "echo", stdin="echo-token-1234\n"),
        env.run(*json_logs, "call", "echo.items.create", "--args", '{"name": "w"}'),  # the link's hint
        env.run(*json_logs, "connect", "echo"),
        env.run(*json_logs, "token", "create", "--agent", "bot"),
        env.run(*json_logs, "discover", "zzqqxx"),
        env.run(*json_logs, "secret", "delete", "echo"),
        env.run(*json_logs, "add", "--mcp-url", "http://127.0.0.1:9/mcp", "--slug", "m2"),  # does not load
        env.run(*json_logs, "remove", "m2"),
    ]
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    env.capsys.readouterr()
    cli.main([*json_logs, "validate", "--manifest", str(empty)])
    runs.append(Run(0, "", env.capsys.readouterr().err))
    said = []
    for run in runs:
        assert run.err.strip(), run
        for line in run.err.splitlines():
            said.append(json.loads(line)["message"])
    for words in (
        "stored secret",
        "the pages must be served",
        "shown once",
        "low confidence",
        "deleted the team-wide",
        "added m2",
        "m2 did not load",
        "removed m2",
        "is empty",
    ):
        assert any(words in message for message in said), (words, said)


def test_sync_progress_on_a_terminal_gives_its_line_to_a_record_and_none_in_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import argparse
    import logging

    from mcp_gateway.cli import commands

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    root = logging.getLogger()
    saved = list(root.handlers)
    root.handlers = [logging.StreamHandler(terminal)]
    try:
        assert commands._progress(argparse.Namespace(log_format="json")) is None
        report = commands._progress(argparse.Namespace(log_format="text"))
        assert report is not None
        report("hmcp", "start")
        logging.getLogger("mcp_gateway.test").warning("hmcp failed to load")
        report("hmcp", "error")
    finally:
        root.handlers = saved
    assert terminal.getvalue() == "\r\x1b[Kloading hmcp…\r\x1b[Khmcp failed to load\n\r\x1b[Khmcp: error\n"


def test_secret_delete_escapes_a_hostile_name_once(env: CliEnv) -> None:
    missing = env.run("secret", "delete", "echo", "n\x1b]0;TITLE\x07")
    assert missing.code == 2
    assert "'n\\x1b]0;TITLE\\x07'" in missing.err and "\\\\x1b" not in missing.err, missing.err


def test_an_error_quotes_a_huge_argument_by_its_start_and_length(env: CliEnv) -> None:
    huge = "a" * 100_000
    for argv in (("approvals", "show", huge), ("secret", "delete", "echo", huge), ("remove", huge)):
        run = env.run(*argv)
        assert run.code == 2 and len(run.err) < 2000, (argv, len(run.err))
        assert "… (10000" in run.err, run.err  # the argument's length, give or take its quotes
