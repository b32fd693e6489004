"""``doctor`` names each problem of a broken set-up with its fix, and exits non-zero."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.cli.test_commands import CliEnv, env  # noqa: F401 -- the fixture


def test_doctor_names_each_problem_with_its_fix(env: CliEnv) -> None:  # noqa: F811
    env.monkeypatch.delenv("MCP_GATEWAY_MASTER_KEY")
    assert env.run("connectors").code == 0  # creates the state folder and its key file
    env.state_dir.chmod(0o755)
    report = env.run("doctor", "--json")
    assert report.code == 1
    findings = {f["check"]: f for f in json.loads(report.out)}
    assert findings["state folder"]["level"] == "problem" and findings["state folder"]["fix"].startswith("chmod 700")
    assert findings["connector echo"]["level"] == "problem"
    assert "secret set echo" in findings["connector echo"]["fix"]
    assert findings["store"]["level"] == "ok" and findings["manifest"]["level"] == "ok"
    assert findings["public_url"]["level"] == "note" and "mcp-gateway pages" in findings["public_url"]["fix"]

    (env.state_dir / "master.key").chmod(0o644)
    text = env.run("doctor")
    assert text.code == 1 and "chmod 600" in text.out and "problems found" in text.out


def test_doctor_tells_how_to_store_each_kind_of_oauth2_credential(env: CliEnv) -> None:  # noqa: F811
    action = "    source: {http: {actions: [{path: ping, url: /ping}]}}\n"
    env.manifest.write_text(
        "project: x\nconnectors:\n"
        "  - slug: occ\n    base_url: http://127.0.0.1:9\n"
        "    auth: {type: oauth2, flow: client_credentials, token_url: http://127.0.0.1:9/token}\n" + action + ""
        "  - slug: code\n    base_url: http://127.0.0.1:9\n"
        "    auth: {type: oauth2, flow: authorization_code, token_url: http://127.0.0.1:9/token,"
        " authorize_url: http://127.0.0.1:9/authorize}\n" + action
    )
    findings = {f["check"]: f for f in json.loads(env.run("doctor", "--json").out)}
    assert findings["connector occ"]["message"] == "no oauth2 credential stored"
    assert findings["connector occ"]["fix"].startswith("mcp-gateway secret set occ < file-with-the-oauth2-client-json")
    assert findings["connector code"]["fix"].startswith("mcp-gateway connect code, then open the link")


def test_doctor_on_a_broken_manifest(env: CliEnv) -> None:  # noqa: F811
    env.manifest.write_text("project: x\nconnectors:\n  - slug: a\n    auth: {type: kerberos}\n")
    report = env.run("doctor")
    assert report.code == 1
    assert "PROBLEM  manifest" in report.out and "kerberos" in report.out and "fix:" in report.out


def test_doctor_all_good(env: CliEnv) -> None:  # noqa: F811
    env.run("secret", "set", "echo", stdin="tok-123456")
    env.run("secret", "set", "basic_api", stdin='{"username": "a", "password": "b"}')
    report = env.run("doctor")
    assert report.code == 0, report.out
    assert "all good" in report.out


def test_doctor_says_when_stored_credentials_do_not_open_with_the_master_key(env: CliEnv) -> None:  # noqa: F811
    # A key lost and made anew, or replaced: every call said "reconnect" while doctor said "all good".
    env.run("secret", "set", "echo", stdin="tok-123456")
    env.run("secret", "set", "basic_api", stdin='{"username": "a", "password": "b"}')
    good = {f["check"]: f for f in json.loads(env.run("doctor", "--json").out)}
    assert good["credentials"]["level"] == "ok" and "2 stored" in good["credentials"]["message"]
    env.monkeypatch.setenv("MCP_GATEWAY_MASTER_KEY", "another-master-key-0123456789abcdef0123456")
    report = env.run("doctor", "--json")
    assert report.code == 1
    found = {f["check"]: f for f in json.loads(report.out)}["credentials"]
    assert found["level"] == "problem" and "2 of 2 stored credentials (of basic_api, echo)" in found["message"]
    assert "restore the master key" in found["fix"]
    assert "tok-123456" not in report.out + report.err


def test_a_key_file_made_anew_over_stored_credentials_is_an_error_on_the_terminal(env: CliEnv) -> None:  # noqa: F811
    env.monkeypatch.delenv("MCP_GATEWAY_MASTER_KEY")
    env.run("secret", "set", "echo", stdin="tok-123456")
    (env.state_dir / "master.key").unlink()  # lost (a restore without it, a wrong cleanup)
    listed = env.run("connectors")
    assert "a new key was made, but the store holds 1 credentials" in listed.err
    assert "put the previous master.key back" in listed.err
    again = env.run("connectors")  # said once, when the key is made, not at every start
    assert "a new key was made" not in again.err


def test_validate_and_doctor_refuse_a_front_door_over_plain_http(env: CliEnv) -> None:  # noqa: F811
    env.manifest.write_text(
        env.manifest.read_text() + "front_door: {issuer: 'https://idp.example', jwks_url: 'http://idp.example/keys'}\n"
    )
    validated = env.run("validate")
    assert validated.code != 0 and "front_door.jwks_url" in validated.err + validated.out
    assert "plain http on a host that is not loopback" in validated.err + validated.out
    report = env.run("doctor")
    assert report.code == 1 and "PROBLEM  manifest" in report.out and "use the https URL" in report.out


def test_doctor_says_lexical_only_without_the_embeddings_extra(env: CliEnv) -> None:  # noqa: F811
    from mcp_gateway.discovery import EmbeddingsUnavailable, providers

    def missing() -> None:
        raise EmbeddingsUnavailable("numpy is not installed")

    env.monkeypatch.delenv("MCP_GATEWAY_DISCOVERY_MODE", raising=False)  # the manifest's own mode: auto
    env.monkeypatch.setattr(providers, "local_provider", missing)
    findings = {f["check"]: f for f in json.loads(env.run("doctor", "--json").out)}
    said = findings["discovery"]
    assert said["level"] == "note" and said["message"] == "lexical only — install the embeddings extra for hybrid"
    assert said["fix"] == "pip install 'mcp-action-gateway[embeddings]'"

    env.monkeypatch.setenv("MCP_GATEWAY_DISCOVERY_MODE", "lexical")
    findings = {f["check"]: f for f in json.loads(env.run("doctor", "--json").out)}
    assert findings["discovery"]["level"] == "ok" and findings["discovery"]["message"].startswith("lexical only")


# -- each check on its own ---------------------------------------------------------------------


def test_each_connector_status_is_a_finding_with_its_fix() -> None:
    from mcp_gateway.cli.doctor import connector_finding

    broken = connector_finding({"slug": "a", "status": "error", "error": "spec not found"})
    assert (broken.check, broken.level, broken.message) == ("connector a", "problem", "does not load: spec not found")
    assert "mcp-gateway remove a" in broken.fix
    keyless = connector_finding({"slug": "b", "status": "needs_auth", "auth": "bearer"})
    assert keyless.level == "problem" and keyless.fix.startswith("mcp-gateway secret set b <")
    oauth = connector_finding({"slug": "c", "status": "needs_auth", "auth": "oauth2"}, signs_in=True)
    assert oauth.fix.startswith("mcp-gateway connect c") and "mcp-gateway pages" in oauth.fix
    # A client-credentials connector needs no browser: its client is stored like any secret.
    client = connector_finding({"slug": "cc", "status": "needs_auth", "auth": "oauth2"})
    assert client.fix == "mcp-gateway secret set cc < file-with-the-oauth2-client-json (or: mcp-gateway connect cc)"
    moved = connector_finding({"slug": "d", "status": "ready", "warning": "the spec names another origin"})
    assert (moved.level, moved.message) == ("problem", "the spec names another origin")
    assert "mcp-gateway review d.@origin" in moved.fix
    fine = connector_finding({"slug": "e", "status": "ready", "actions": 3})
    assert (fine.level, fine.message, fine.fix) == ("ok", "ready, 3 actions", "")


def test_the_manifest_check_gives_the_manifest_only_when_it_loads(tmp_path: Path) -> None:
    from mcp_gateway.cli.doctor import manifest_findings
    from mcp_gateway.vocabulary.settings import Settings

    path = tmp_path / "gateway.yaml"
    path.write_text("project: x\nconnectors:\n  - slug: a\n    auth: {type: kerberos}\n")
    manifest, found = manifest_findings(Settings(manifest_path=path, state_dir=tmp_path / "state", env={}))
    assert manifest is None and found and all(f.level == "problem" and f.fix for f in found)
    path.write_text("project: x\nconnectors: []\n")
    manifest, found = manifest_findings(Settings(manifest_path=path, state_dir=tmp_path / "state", env={}))
    assert manifest is not None and [(f.level, f.message) for f in found] == [("ok", f"{path}: 0 connectors")]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_the_store_check_says_how_to_fix_a_store_that_does_not_open(tmp_path: Path, anyio_backend: str) -> None:
    from mcp_gateway.cli.doctor import store_finding
    from mcp_gateway.vocabulary.settings import Settings

    fine = await store_finding(Settings(manifest_path=None, state_dir=tmp_path / "state", env={}))
    assert (fine.level, fine.message) == ("ok", f"SQLite in {tmp_path / 'state'}")
    (tmp_path / "file").write_text("not a folder")
    broken = await store_finding(Settings(manifest_path=None, state_dir=tmp_path / "file", env={}))
    assert broken.level == "problem" and broken.message.startswith("cannot open the store")
    assert "is a file" in broken.message and broken.fix.startswith("move it aside")  # not a permission
    if sys.platform == "linux":  # a folder nobody may create: a permission or another folder, not "move it aside"
        unwritable = await store_finding(Settings(manifest_path=None, state_dir=Path("/proc/self/state"), env={}))
        assert unwritable.level == "problem" and "writable" in unwritable.fix and "--state-dir" in unwritable.fix
    mistyped = Settings(manifest_path=None, state_dir=tmp_path / "state", env={}, database_url="mysql://u:pw@db/x")
    wrong_url = await store_finding(mistyped)
    assert "not a PostgreSQL URL" in wrong_url.message and "--database-url" in wrong_url.fix


def _damage_a_page(path: Path) -> None:
    """Overwrite the page of the ``credential`` table (one row in it) with noise."""
    import random
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(path)) as db:
        db.execute("INSERT INTO credential (connector, principal, name, sealed) VALUES ('a', '*', 'default', x'00')")
        db.commit()
        root = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'credential'").fetchone()[0]
        size = db.execute("PRAGMA page_size").fetchone()[0]
    content = bytearray(path.read_bytes())
    content[(root - 1) * size : root * size] = random.Random(3).randbytes(size)
    path.write_bytes(bytes(content))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_the_store_check_finds_a_damaged_sqlite_file(tmp_path: Path, anyio_backend: str) -> None:
    # A damaged page of one table left every read the check makes working: "ok", while every call failed.
    from mcp_gateway.cli.doctor import store_finding
    from mcp_gateway.vocabulary.settings import Settings

    settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={})
    assert (await store_finding(settings)).level == "ok"
    _damage_a_page(Path(settings.database))
    damaged = await store_finding(settings)
    assert damaged.level == "problem" and "is damaged" in damaged.message, damaged
    assert "restore the file from a backup" in damaged.fix and ".recover" in damaged.fix


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
@pytest.mark.parametrize("fault", ["empty", "read-only"])
async def test_the_store_check_neither_sets_up_an_empty_postgresql_database_nor_passes_a_read_only_one(
    postgres_url: str, anyio_backend: str, fault: str, tmp_path: Path
) -> None:
    # After a failover to an empty server the check created every table there in silence, and a
    # standby that refuses writes passed it ("unexpected ReadOnlySQLTransactionError" came later).
    import asyncpg

    from mcp_gateway.cli.doctor import store_finding
    from mcp_gateway.store.postgres import PostgresStore
    from mcp_gateway.vocabulary.settings import Settings

    settings = Settings(manifest_path=None, state_dir=tmp_path / "state", env={}, database_url=postgres_url)
    db = await asyncpg.connect(postgres_url)
    try:
        if fault == "read-only":
            async with PostgresStore(postgres_url):
                pass
            database = postgres_url.rpartition("/")[2]
            await db.execute(f"ALTER DATABASE {database} SET default_transaction_read_only = on")
        found = await store_finding(settings)
        tables = await db.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()")
    finally:
        await db.close()
    assert found.level == "problem", found
    if fault == "empty":
        assert "has no gateway tables" in found.message and "restore" in found.message, found
        assert tables == 0
    else:
        assert "read-only" in found.message and "standby" in found.message, found


def test_doctor_says_a_state_folder_is_a_file_or_cannot_be_created(env: CliEnv, tmp_path: Path) -> None:  # noqa: F811
    # A file was reported as "mode 644: other users can read it, fix: chmod 700"; a folder under a file
    # as "does not exist yet; the first command creates it".
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    for state, said in ((a_file, "is a file, not a folder"), (a_file / "st", "cannot create it")):
        report = env.run("--state-dir", str(state), "doctor", "--json")
        found = {f["check"]: f for f in json.loads(report.out)}["state folder"]
        assert report.code == 1 and found["level"] == "problem" and said in found["message"], found
        assert "--state-dir" in found["fix"] and "chmod" not in found["fix"]


def test_doctor_warns_when_a_connector_exposes_the_request_action_beside_block_rules(tmp_path: Path) -> None:
    from mcp_gateway.cli.doctor import manifest_findings
    from mcp_gateway.vocabulary.settings import Settings

    path = tmp_path / "gateway.yaml"
    connector = (
        "connectors:\n  - slug: bank\n    base_url: https://bank.example/api\n    request_action: true\n"
        "    source: {http: {actions: [{path: admin.purge, method: POST, url: /admin/purge}]}}\n"
    )
    path.write_text("project: x\npolicies:\n  - {match: 'bank.admin.*', action: block}\n" + connector)
    _, found = manifest_findings(Settings(manifest_path=path, state_dir=tmp_path / "state", env={}))
    warned = [f for f in found if f.level == "warning"]
    assert (
        len(warned) == 1
        and "bank.request" in warned[0].message
        and "{match: request, action: block}" in (warned[0].fix)
    )
    path.write_text("project: x\n" + connector)  # no block rule: nothing for the request action to get around
    _, found = manifest_findings(Settings(manifest_path=path, state_dir=tmp_path / "state", env={}))
    assert not [f for f in found if f.level == "warning"]


def test_doctor_names_a_stored_credential_its_connectors_auth_can_no_longer_use(env: CliEnv) -> None:  # noqa: F811
    env.run("secret", "set", "echo", stdin="tok-123456")
    env.run("secret", "set", "basic_api", stdin='{"username": "a", "password": "b"}')
    assert "leftover credentials" not in {f["check"] for f in json.loads(env.run("doctor", "--json").out)}
    # The operator changed echo's kind to basic after its bearer token was stored.
    text = env.manifest.read_text().replace("auth: {type: bearer}", "auth: {type: basic}", 1)
    env.manifest.write_text(text)
    report = env.run("doctor", "--json")
    found = {f["check"]: f for f in json.loads(report.out)}["leftover credentials"]
    assert found["level"] == "warning" and "echo (team-wide: not a basic credential)" in found["message"]
    assert "basic_api" not in found["message"] and "mcp-gateway secret delete" in found["fix"]
    assert "tok-123456" not in report.out + report.err


def test_doctor_names_a_custom_credential_that_cannot_fill_its_templates(env: CliEnv) -> None:  # noqa: F811
    env.manifest.write_text(
        env.manifest.read_text()
        + f"  - slug: cu\n    base_url: {env.upstream_url}\n"
        + "    auth: {type: custom, headers: {X-User: '{secret}'}}\n"
    )
    assert env.run("secret", "set", "cu", stdin="CANARY-pw").code == 0
    # The operator's templates now read two fields of a JSON secret; the stored value is one string.
    text = env.manifest.read_text().replace("{X-User: '{secret}'}", "{X-User: '{secret.user}', X-P: '{secret.pass}'}")
    env.manifest.write_text(text)
    report = env.run("doctor", "--json")
    found = {f["check"]: f for f in json.loads(report.out)}["leftover credentials"]
    assert "cu (team-wide: it cannot fill its header templates." in found["message"]
    assert "'user', 'pass'" in found["message"] and "CANARY" not in report.out + report.err


def test_doctor_names_personal_credentials_left_on_a_shared_connector(env: CliEnv) -> None:  # noqa: F811
    # Stored while echo was per_user; shared again, its calls carry the team's, and nothing said so.
    import anyio

    from mcp_gateway.primitives.crypto import AESGCMCipher, load_master_key
    from mcp_gateway.runtime import open_store
    from mcp_gateway.services.credentials import CredentialVault
    from mcp_gateway.vocabulary.settings import Settings

    assert env.run("secret", "set", "echo", stdin="tok-123456").code == 0
    settings = Settings(manifest_path=env.manifest, state_dir=env.state_dir, env=dict(os.environ))

    async def leave_one() -> None:
        cipher = AESGCMCipher(load_master_key(settings.env, settings.state_dir), project="clitest")
        async with open_store(settings) as store:
            await CredentialVault(store, cipher, project="clitest").put("echo", "CANARY-own", principal="token:ab12")

    anyio.run(leave_one)
    report = env.run("doctor", "--json")
    found = {f["check"]: f for f in json.loads(report.out)}["leftover credentials"]
    assert "credentials: per_user" in found["message"] and "carry the team-wide one" in found["message"]
    assert found["fix"] == "delete them: mcp-gateway secret delete echo --user token:ab12"
    rotated = env.run("secret", "set", "echo", stdin="tok-654321")
    assert "1 user(s) have a personal credential for echo" in rotated.err and "token:ab12" in rotated.err
    assert "CANARY" not in report.out + report.err + rotated.err


def test_doctor_names_credentials_kept_for_a_connector_no_longer_in_the_manifest(env: CliEnv) -> None:  # noqa: F811
    # A connector added later under the same name would send them, and doctor never said they were there.
    assert env.run("secret", "set", "basic_api", stdin='{"username": "a", "password": "CANARY-pw"}').code == 0
    text = env.manifest.read_text()
    env.manifest.write_text(text[: text.index("  - slug: basic_api")])
    report = env.run("doctor", "--json")
    found = {f["check"]: f for f in json.loads(report.out)}["leftover credentials"]
    assert "no longer in the manifest (basic_api)" in found["message"] and "secret delete" in found["fix"]
    assert "CANARY" not in report.out + report.err


def test_a_credential_stored_for_another_address_is_a_problem_saying_what_to_do() -> None:
    from mcp_gateway.cli.doctor import connector_finding

    warning = (
        "The team-wide credential of t was stored while t sent it to http://a.test; it is sent to http://b.test now."
    )
    moved = connector_finding({"slug": "t", "status": "ready", "actions": 2, "warning": warning})
    assert moved.level == "problem" and "mcp-gateway secret delete t" in moved.fix and "review" not in moved.fix


def test_a_refused_stored_credential_is_a_problem_with_how_to_replace_it() -> None:
    from mcp_gateway.cli.doctor import connector_finding

    warning = "The team-wide credential of t was replaced at … by bob; t answered 401 to t.get carrying it at …"
    refused = connector_finding(
        {"slug": "t", "status": "needs_auth", "auth": "bearer", "auth_configured": True, "warning": warning}
    )
    assert (refused.level, refused.message) == ("problem", warning)
    assert refused.fix.startswith("mcp-gateway secret set t < file-with-a-working-credential")


def test_a_per_user_connector_without_the_callers_credential_is_a_note_not_a_secret_set() -> None:
    from mcp_gateway.cli.doctor import connector_finding

    listed = {"slug": "pu", "status": "needs_auth", "auth": "bearer", "auth_configured": False}
    found = connector_finding(listed, per_user=True)
    assert found.level == "note" and "each user connects their own" in found.message
    assert "secret set" not in found.fix and found.fix.endswith("mcp-gateway connect pu")
    # A team-wide one missing is still a problem, with `secret set` as its fix.
    assert connector_finding(listed).level == "problem"


@pytest.mark.parametrize(
    "public_url", ["http://127.0.0.1:9/?token=CANARY-tok", "http://u:CANARY-pw@127.0.0.1:9/?token=CANARY-tok"]
)
def test_doctor_never_prints_a_public_urls_token_or_password(env: CliEnv, public_url: str) -> None:  # noqa: F811
    # Its note that nothing answered there quoted the URL whole; the refusal of a password hid the
    # password but not the token in the query.
    env.manifest.write_text(env.manifest.read_text().replace("http://127.0.0.1:9", public_url, 1))
    doctor = env.run("doctor")
    assert "CANARY" not in doctor.out + doctor.err, doctor.out
    assert "token=[redacted]" in doctor.out


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_doctor_reaches_each_base_url_and_names_why_not(tmp_path: Path, anyio_backend: str) -> None:
    import socket

    import trustme

    from mcp_gateway.cli.doctor import reachability_findings
    from mcp_gateway.manifest import parse_manifest
    from tests.support.upstream import LoopbackServer, echo_app

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    leaf = ca.issue_cert("127.0.0.1")
    leaf.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    leaf.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    action = "    source: {http: {actions: [{path: ping, url: /ping}]}}\n"
    tls = {"ssl_certfile": str(tmp_path / "server.pem"), "ssl_keyfile": str(tmp_path / "server.key")}
    with LoopbackServer(echo_app(), **tls) as private:
        text = (
            f"project: x\nconnectors:\n  - slug: private\n    base_url: {private.base_url}\n{action}"
            f"  - slug: trusting\n    base_url: {private.base_url}\n    tls: {{ca_file: ca.pem}}\n{action}"
            f"  - slug: stopped\n    base_url: http://127.0.0.1:{closed}\n{action}"
            f"  - slug: typo\n    base_url: https://api.no-such-host.invalid/v1\n{action}"
        )
        findings = await reachability_findings(parse_manifest(text, base_dir=tmp_path))
    by_check = {f.check: f for f in findings}
    assert set(by_check) == {"connector private reach", "connector stopped reach", "connector typo reach"}
    private_finding = by_check["connector private reach"]
    assert private_finding.level == "problem" and "certificate not trusted" in private_finding.message
    assert "tls: {ca_file: path/to/ca.pem}" in private_finding.fix
    stopped = by_check["connector stopped reach"]
    assert stopped.level == "warning" and f"127.0.0.1:{closed}: connection refused" in stopped.message
    typo = by_check["connector typo reach"]
    assert typo.level == "problem" and "DNS name not found" in typo.message and "api.no-such-host.invalid" in typo.fix


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_doctor_reaches_a_remote_mcp_servers_url_with_the_connectors_trust(
    tmp_path: Path, anyio_backend: str
) -> None:
    import socket

    import trustme

    from mcp_gateway.cli.doctor import reachability_findings
    from mcp_gateway.manifest import parse_manifest
    from tests.support.upstream import LoopbackServer, echo_app

    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    with LoopbackServer(echo_app(), ssl_certfile=str(tmp_path / "server.pem")) as private:
        mcp = f"    source: {{mcp: {{url: {private.base_url}/mcp}}}}\n"
        text = (
            f"project: x\nconnectors:\n  - slug: private\n{mcp}"
            f"  - slug: trusting\n    tls: {{ca_file: ca.pem}}\n{mcp}"
            f"  - slug: stopped\n    source: {{mcp: {{url: http://127.0.0.1:{closed}/mcp, transport: sse}}}}\n"
        )
        findings = await reachability_findings(parse_manifest(text, base_dir=tmp_path))
    by_check = {f.check: f for f in findings}
    assert set(by_check) == {"connector private reach", "connector stopped reach"}
    private_finding = by_check["connector private reach"]
    assert private_finding.level == "problem" and "certificate not trusted" in private_finding.message
    assert "tls: {ca_file: path/to/ca.pem}" in private_finding.fix
    stopped = by_check["connector stopped reach"]
    assert stopped.level == "warning" and f"127.0.0.1:{closed}: connection refused" in stopped.message
    assert "stopped's mcp.url" in stopped.fix


def test_doctor_warns_of_a_policy_rule_that_matches_no_action(env: CliEnv) -> None:  # noqa: F811
    # A typo in a block rule's match silently blocked nothing.
    env.run("secret", "set", "echo", stdin="tok-123456")
    env.run("secret", "set", "basic_api", stdin='{"username": "a", "password": "b"}')
    text = env.manifest.read_text().replace(
        "connectors:\n",
        "policies:\n  - {match: 'ecoh.items.*', action: block}\n  - {match: 'echo.items.*', action: always_run}\n"
        "connectors:\n",
        1,
    )
    text = text.replace(
        "  - slug: basic_api\n",
        "    policies:\n      - {match: items.delete, action: require_approval}\n  - slug: basic_api\n",
        1,
    )
    env.manifest.write_text(text)
    report = env.run("doctor", "--json")
    assert report.code == 0, report.out  # a warning, not a problem
    warned = [f for f in json.loads(report.out) if f["check"] == "policy"]
    assert len(warned) == 2, warned
    typo, removed = warned
    assert typo["level"] == "warning"
    assert typo["message"] == "policies[0]: block rule 'ecoh.items.*' matches no action, so it blocks nothing"
    assert typo["fix"].startswith("did you mean 'echo.items.*'"), typo
    assert removed["message"].startswith("connectors[echo].policies[0]: require_approval rule 'items.delete'")
    assert removed["fix"] == "did you mean 'items.get', 'items.create'? Fix the match, or remove the rule", removed
