"""One manifest, found the same way by every command: ``--manifest``, then ``$MCP_GATEWAY_MANIFEST``,
then ``./gateway.yaml`` when it exists, then the bundled default; each command says which it used."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_gateway import cli
from tests.cli.test_edit import _spec


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in ("MCP_GATEWAY_MANIFEST", "MCP_GATEWAY_AGENT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MCP_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("MCP_GATEWAY_MASTER_KEY", "choice-test-master-key-0123456789abcdef0123")
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_add_then_discover_without_manifest_finds_the_new_actions(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, "init")[0] == 0
    (folder / "billing.json").write_text(json.dumps(_spec("http://127.0.0.1:9")))
    code, _, err = _run(capsys, "add", "billing.json", "--slug", "billing")
    assert code == 0, err
    assert "manifest gateway.yaml (./gateway.yaml in this folder)" in err
    assert "openapi: billing.json" in (folder / "gateway.yaml").read_text()  # relative to the manifest

    code, out, err = _run(capsys, "discover", "list", "invoices", "--connector", "billing", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert [r["name"] for r in found["results"]][:1] == ["billing.list_invoices"]
    assert found["manifest"] == "gateway.yaml (./gateway.yaml in this folder)"
    assert "manifest gateway.yaml (./gateway.yaml in this folder)" in err

    code, out, err = _run(capsys, "connectors", "--json")
    assert code == 0 and {c["slug"] for c in json.loads(out)["connectors"]} == {"petstore", "billing"}


def test_an_unknown_connector_is_an_error_with_suggestions(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "init")[0] == 0
    code, out, err = _run(capsys, "discover", "pets", "--connector", "petstor")
    assert code == 2 and out == ""
    assert "no connector 'petstor'" in err and "did you mean 'petstore'?" in err
    code, _, err = _run(capsys, "secret", "set", "petsore")
    assert code == 2 and "did you mean 'petstore'?" in err


def test_the_order_is_flag_then_variable_then_local_file_then_bundled(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = _run(capsys, "validate", "--json")
    assert code == 0 and json.loads(out)["manifest"] == "bundled default manifest"
    (folder / "gateway.yaml").write_text("project: local\nconnectors: []\n")
    (folder / "other.yaml").write_text("project: other\nconnectors: []\n")
    (folder / "third.yaml").write_text("project: third\nconnectors: []\n")
    assert json.loads(_run(capsys, "validate", "--json")[1])["manifest"] == "gateway.yaml"
    monkeypatch.setenv("MCP_GATEWAY_MANIFEST", str(folder / "other.yaml"))
    assert json.loads(_run(capsys, "validate", "--json")[1])["manifest"] == str(folder / "other.yaml")
    code, _, err = _run(capsys, "audit", "--manifest", "third.yaml")
    assert code == 0 and "mcp-gateway: manifest third.yaml (--manifest)" in err
    monkeypatch.delenv("MCP_GATEWAY_MANIFEST")
    (folder / "gateway.yaml").unlink()
    code, _, err = _run(capsys, "audit")
    assert code == 0 and "manifest the bundled default manifest" in err


def test_add_a_misspelt_catalog_entry_suggests_the_right_one(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "init")[0] == 0
    code, _, err = _run(capsys, "add", "sendgird")
    assert code == 2 and "did you mean 'sendgrid'?" in err


def test_init_says_what_is_true(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "init")
    assert code == 0 and "every command run in this folder reads it" in err
    text = (folder / "gateway.yaml").read_text()
    assert "\npublic_url:" not in text  # links follow the served address
    assert "# Run it:          mcp-gateway serve\n" in text
    # The comment says the Petstore asks for an api_key, and the connectors list agrees.
    assert "needs_auth" in text and "api_key" in text
    code, out, _ = _run(capsys, "connectors", "--json")
    petstore = next(c for c in json.loads(out)["connectors"] if c["slug"] == "petstore")
    assert (petstore["status"], petstore["auth"]) == ("needs_auth", "api_key")

    assert _run(capsys, "init", "other.yaml")[0] == 0
    assert "# Run it:          mcp-gateway serve --manifest other.yaml\n" in (folder / "other.yaml").read_text()


def test_a_manifest_path_is_said_with_its_control_characters_escaped(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path is the one value of the manifest line an operator did not type as text: a file name can
    hold an escape sequence that retitles or clears the terminal."""
    hostile = folder / "m\x1b]0;TITLE\x07\x1b[2J\rFAKE\u202e.yaml"
    hostile.write_text("connectors: []\n")
    code, _, err = _run(capsys, "connectors", "--manifest", str(hostile))
    monkeypatch.setenv("MCP_GATEWAY_MANIFEST", str(hostile))
    _, out, from_env = _run(capsys, "connectors", "--json")
    monkeypatch.delenv("MCP_GATEWAY_MANIFEST")
    _, _, removed = _run(capsys, "remove", "nothing-here", "--manifest", str(hostile))
    assert code == 0, err
    for text in (err, from_env, removed):
        assert "\x1b" not in text and "\r" not in text and "\u202e" not in text, text
    assert "m\\x1b]0;TITLE\\x07\\x1b[2J\\rFAKE\\u202e.yaml (--manifest)" in err
    assert "\\u202e.yaml ($MCP_GATEWAY_MANIFEST)" in from_env
    assert json.loads(out)["manifest"] == f"{hostile} ($MCP_GATEWAY_MANIFEST)"  # JSON keeps the value itself
