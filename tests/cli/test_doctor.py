"""``doctor`` names each problem of a broken set-up with its fix, and exits non-zero."""

from __future__ import annotations

import json

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
