"""What the CLI prints for a human, end to end: agent- and upstream-chosen strings carrying terminal
escapes (a window title, a screen clear, a clipboard write by OSC 52, C1 controls, a bidi override, a
forged line) reach the operator's terminal as visible escapes, in tables, text and JSON alike.

``mcp-gateway`` runs as a subprocess: an agent's ``call`` with a hostile tool name (its audit row),
an upstream whose handshake fails with a hostile message (``connectors``' error column) and an
upstream whose tool description is hostile (``discover``'s summary column)."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from tests.support.cli_process import cli_env, run_cli
from tests.support.mcp_servers import REPO
from tests.support.noisy_mcp import manifest_command

from .conftest import MASTER_KEY

ATTACK = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\x9b31m\u202e0001\u202c\r\nFORGED ROW"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07\\x9b31m\\u202e0001\\u202c\\r\\nFORGED ROW"


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text(
        f"""
project: e2e-terminal
public_url: http://127.0.0.1:1
connectors:
  - slug: noisy
    trust: auto
    source: {{mcp: {{command: {manifest_command()}, cwd: "{REPO}"}}}}
  - slug: refuser
    source: {{mcp: {{command: {manifest_command("refuse")}, cwd: "{REPO}"}}}}
"""
    )
    env = cli_env(tmp_path / "state", MASTER_KEY)
    return manifest, env


def raw_controls(text: str) -> list[str]:
    """What a terminal acts on or shows as nothing: controls (newlines aside), format characters
    (bidi, zero-width, tags), line and paragraph separators."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")]


def test_hostile_strings_reach_the_terminal_as_visible_escapes(setup: tuple[Path, dict[str, str]]) -> None:
    manifest, env = setup
    called = run_cli(manifest, env, "call", f"noisy.echo{ATTACK}")
    assert called.returncode == 1 and json.loads(called.stdout)["reason"] == "action_not_found"
    runs = {
        "audit": run_cli(manifest, env, "audit"),
        "audit --json": run_cli(manifest, env, "audit", "--json"),
        "connectors": run_cli(manifest, env, "connectors"),
        "discover": run_cli(manifest, env, "discover", "shout", "the", "text"),
    }
    for name, run in [("call", called), *runs.items()]:
        assert run.returncode == 0 or name == "call", (name, run.stderr)
        assert raw_controls(run.stdout) == [], name
        assert raw_controls(run.stderr) == [], name

    audit = runs["audit"].stdout.splitlines()
    assert len(audit) == 2  # the header and one row: the forged row stays inside its cell
    assert f"noisy.echo{SHOWN}"[:50] in audit[1]
    assert json.loads(runs["audit --json"].stdout)[0]["requested"] == f"noisy.echo{ATTACK}"  # the value, kept

    refuser = next(line for line in runs["connectors"].stdout.splitlines() if line.startswith("refuser"))
    assert "\\x1b]0;pwned\\x07" in refuser or "pwned" not in refuser  # escaped, or cleaned before it got here
    assert "FORGED ROW" not in runs["connectors"].stdout.replace(refuser, "")  # no line of its own
    assert "noisy.shout" in runs["discover"].stdout
