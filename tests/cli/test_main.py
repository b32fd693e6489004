"""The command line as a tool: global options anywhere, --version, exit codes, a closed pipe, --help examples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_gateway import __version__, cli
from tests.cli.test_commands import CliEnv, env  # noqa: F401 -- the fixture

ROOT = Path(__file__).resolve().parents[2]

# Runs the gateway (or its children) as real processes: not in the fast lane.
pytestmark = pytest.mark.slow


def _run(*argv: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state")}
    environ.pop("MCP_GATEWAY_MANIFEST", None)
    return subprocess.run(
        [sys.executable, "-m", "mcp_gateway", *argv], capture_output=True, text=True, env=environ, timeout=120
    )


def test_global_options_before_or_after_the_command_give_the_same_result(env: CliEnv) -> None:  # noqa: F811
    from mcp_gateway import cli

    state = str(env.state_dir)
    env.capsys.readouterr()
    before = cli.main(["--manifest", str(env.manifest), "--state-dir", state, "--json", "connectors"])
    out_before = env.capsys.readouterr().out
    after = cli.main(["connectors", "--manifest", str(env.manifest), "--state-dir", state, "--json"])
    out_after = env.capsys.readouterr().out
    assert before == after == 0
    assert out_before == out_after and '"echo"' in out_before


def test_a_missing_manifest_before_the_command_fails(env: CliEnv, tmp_path: Path) -> None:  # noqa: F811
    from mcp_gateway import cli

    env.capsys.readouterr()
    code = cli.main(["--manifest", str(tmp_path / "nonexistent.yaml"), "connectors"])
    err = env.capsys.readouterr().err
    assert code == 2 and "nonexistent.yaml" in err


@pytest.mark.parametrize(
    "command",
    [
        ["connectors"],
        ["discover", "create an issue"],
        ["audit"],
        ["sync"],
        ["describe", "echo.items.get"],
        ["call", "echo.items.get"],
        ["connect", "echo"],
    ],
)
def test_a_state_store_that_cannot_be_opened_exits_3(env: CliEnv, tmp_path: Path, command: list[str]) -> None:  # noqa: F811
    # As --help says: 3 is "the state store cannot be opened", whichever command opens it.
    import sqlite3
    from contextlib import closing

    from mcp_gateway import cli

    def foreign(path: Path) -> None:
        with closing(sqlite3.connect(path)) as db, db:
            db.execute("CREATE TABLE notes (body TEXT)")

    def folder(path: Path) -> None:
        path.mkdir()

    # The state folder itself a file: "unexpected FileExistsError" before.
    (tmp_path / "a-file").write_text("not a folder")
    env.capsys.readouterr()
    assert cli.main(["--state-dir", str(tmp_path / "a-file"), *command]) == 3
    assert "is a file" in env.capsys.readouterr().err

    for name, make in (
        ("garbage", lambda path: path.write_bytes(b"this is not a database" * 100)),
        ("foreign", foreign),
        ("folder", folder),
    ):
        state = tmp_path / name
        state.mkdir()
        make(state / "state.db")
        env.capsys.readouterr()
        code = cli.main(["--state-dir", str(state), *command])
        err = env.capsys.readouterr().err
        assert code == 3 and "state.db" in err and "Traceback" not in err, (name, code, err)

    if sys.platform == "linux":  # a folder nobody may create, and one where no file can be created
        for state, named in ((Path("/proc/self/state"), "/proc/self/state"), (Path("/proc/self"), "state.db")):
            env.capsys.readouterr()
            code = cli.main(["--state-dir", str(state), *command])
            err = env.capsys.readouterr().err
            assert code == 3 and named in err and "--state-dir" in err and "unexpected" not in err, (state, err)


@pytest.mark.parametrize("command", [["connectors"], ["audit"], ["token", "list"], ["sync"]])
def test_a_mistyped_database_url_exits_3_whichever_command(env: CliEnv, command: list[str]) -> None:  # noqa: F811
    wrong = env.run("--database-url", "postgresq://gw:CANARY-PW@db/gateway", *command)
    assert wrong.code == 3 and "not a PostgreSQL URL" in wrong.err and "CANARY-PW" not in wrong.err


def test_version_and_help_examples(tmp_path: Path) -> None:
    version = _run("--version", tmp_path=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == f"mcp-gateway {__version__}"
    top = _run("--help", tmp_path=tmp_path)
    assert "exit codes:" in top.stdout and "3  the state store" in top.stdout
    for command in ("call", "add", "doctor", "connectors"):
        helped = _run(command, "--help", tmp_path=tmp_path)
        assert helped.returncode == 0 and f"examples:\n  mcp-gateway {command}" in helped.stdout, command
    assert _run("nosuch", tmp_path=tmp_path).returncode == 2


def test_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state")}
    environ.pop("MCP_GATEWAY_MANIFEST", None)
    # `true` exits without reading: every write the command makes meets a closed pipe.
    for command in ("validate", "--help", "discover pets --limit 50"):
        line = f"{sys.executable} -m mcp_gateway {command} | true; exit ${{PIPESTATUS[0]}}"
        proc = subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=environ, timeout=120)
        # Only the line saying which manifest was used: no error, no traceback.
        said = [line for line in proc.stderr.splitlines() if not line.startswith("mcp-gateway: manifest ")]
        assert said == [], (command, proc.stderr)
        assert proc.returncode in (0, 141), command


def test_token_for_an_unknown_agent_needs_force(env: CliEnv) -> None:  # noqa: F811
    env.manifest.write_text(env.manifest.read_text() + "agents:\n  - name: bot\n    connectors: [echo]\n")
    refused = env.run("token", "create", "--agent", "nosuch")
    assert refused.code == 2 and "nosuch" in refused.err and "--force" in refused.err and refused.out == ""
    assert env.run("token", "create", "--agent", "bot").code == 0
    forced = env.run("token", "create", "--agent", "nosuch", "--force")
    assert forced.code == 0 and forced.out.startswith("mgw_")


def test_served_public_url_defaults_to_the_address_served() -> None:
    from mcp_gateway.cli.serve import served_public_url
    from mcp_gateway.manifest import parse_manifest

    bare = parse_manifest("project: x\n")
    assert served_public_url(bare, None, "127.0.0.1", 56435) == "http://127.0.0.1:56435"
    assert served_public_url(bare, None, "0.0.0.0", 9000) == "http://127.0.0.1:9000"
    assert served_public_url(bare, "https://gw.example.com/", "0.0.0.0", 9000) == "https://gw.example.com"
    pinned = parse_manifest("project: x\npublic_url: https://links.example.com\n")
    assert served_public_url(pinned, None, "127.0.0.1", 56435) == "https://links.example.com"


def test_a_link_minted_from_the_cli_says_how_to_open_it(env: CliEnv) -> None:  # noqa: F811
    connected = env.run("connect", "echo")
    assert connected.code == 0 and connected.json()["connect_url"].startswith("http://127.0.0.1:9/")
    assert "mcp-gateway pages" in connected.err


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_and_json_anywhere(env: CliEnv, where: str) -> None:  # noqa: F811
    from mcp_gateway import cli

    flags = ["--json", "--manifest", str(env.manifest)]
    argv = [*flags, "validate"] if where == "before" else ["validate", *flags]
    env.capsys.readouterr()
    assert cli.main(argv) == 0
    assert '"problems": []' in env.capsys.readouterr().out


def test_debug_leaves_the_loggers_of_whole_messages_and_urls_quiet(env: CliEnv) -> None:  # noqa: F811
    """Each SSE chunk an agent is sent (links in it), each message to and from an upstream MCP server
    and the URL it connects to, each HTTP request's URL: not logged at DEBUG, while the gateway's own
    records are."""
    import logging

    from mcp_gateway import cli

    assert cli.main(["--debug", "--manifest", str(env.manifest), "validate"]) == 0
    for name in ("sse_starlette.sse", "mcp.client.streamable_http", "mcp.client.sse", "mcp.server.sse", "httpx2"):
        assert logging.getLogger(name).getEffectiveLevel() >= logging.INFO, name
    assert logging.getLogger("mcp_gateway.runtime").getEffectiveLevel() == logging.DEBUG


def test_serve_warns_about_an_unknown_agent(tmp_path: Path) -> None:
    manifest = tmp_path / "gateway.yaml"
    manifest.write_text("project: w\nconnectors: []\nagents:\n  - name: bot\n    connectors: []\n")
    environ = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_GATEWAY_STATE_DIR": str(tmp_path / "state")}
    environ["MCP_GATEWAY_MASTER_KEY"] = "serve-warn-master-key-0123456789abcdef0123"
    proc = subprocess.run(
        [sys.executable, "-m", "mcp_gateway", "serve", "--manifest", str(manifest), "--agent", "nosuch"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
    )
    assert "no agent 'nosuch'" in proc.stderr and "bot" in proc.stderr
    assert proc.stdout == ""


def test_only_the_process_own_command_line_freezes_the_heap_at_the_end(
    env: CliEnv,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gc

    from mcp_gateway import cli

    assert gc.get_freeze_count() == 0
    assert cli.main(["validate", "--manifest", str(env.manifest)]) == 0
    assert gc.get_freeze_count() == 0 and gc.isenabled()  # a test process (or a caller) keeps its collector
    monkeypatch.setattr(sys, "argv", ["mcp-gateway", "validate", "--manifest", str(env.manifest)])
    try:
        assert cli.main() == 0
        # the process exits next: its objects are out of the collector's sight, which is back on
        assert gc.get_freeze_count() > 0 and gc.isenabled()
    finally:
        gc.unfreeze()


def test_every_option_and_argument_has_help_text() -> None:
    import argparse

    def walk(parser: argparse.ArgumentParser, where: str) -> Iterator[tuple[str, argparse.Action]]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, f"{where} {name}")
            elif not isinstance(action, argparse._HelpAction):
                yield where, action

    silent = [
        f"{where}: {'/'.join(action.option_strings) or action.dest}"
        for where, action in walk(cli.build_parser(), "mcp-gateway")
        if not action.help
    ]
    assert silent == []


@pytest.mark.parametrize(
    "argv",
    [
        ["--log-format", "json", "--bogus", "connectors"],
        ["--log-format=json", "call"],
        ["call", "--log-format", "json"],
    ],
)
def test_a_usage_error_is_one_json_line_under_json_logs(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # argparse wrote its usage and error as two lines of text into a stream read as JSON lines.
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    record = json.loads(lines[0])
    assert record["level"] == "error" and "error:" in record["message"] and "usage: mcp-gateway" in record["message"]


def test_a_usage_error_stays_text_without_json_logs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--bogus", "connectors"])
    assert capsys.readouterr().err.startswith("usage: mcp-gateway")


@pytest.mark.parametrize("command", [["connectors"], ["serve", "--transport", "stdio"], ["validate"]])
def test_an_on_off_variable_set_to_neither_is_refused_before_anything_runs(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # "maybe" was read as "on" in silence: the operator could not tell the switch had not turned.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MCP_GATEWAY_MANIFEST", raising=False)
    monkeypatch.setenv("MCP_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("MCP_GATEWAY_FAST_PATHS", "maybe")
    assert cli.main(command) == 2
    err = capsys.readouterr().err
    assert "$MCP_GATEWAY_FAST_PATHS must be 1 or 0" in err and "'maybe'" in err and "Traceback" not in err, err
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("stderr", ["closed", "a file open for reading"])
def test_a_command_without_a_usable_stderr_still_does_its_work(env: CliEnv, stderr: str) -> None:  # noqa: F811
    # A daemon or a cron line started with 2>&- exited 1 before doing anything: the first notice
    # ("mcp-gateway: manifest ...") failed to write.
    def without_stderr() -> None:
        os.close(2)
        if stderr != "closed":
            os.open(os.devnull, os.O_RDONLY)  # takes fd 2, as a wrapper script reading itself does

    environ = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_GATEWAY_STATE_DIR": str(env.state_dir)}
    done = subprocess.run(
        [sys.executable, "-m", "mcp_gateway", "--manifest", str(env.manifest), "connectors"],
        stdout=subprocess.PIPE,
        text=True,
        env=environ,
        timeout=120,
        preexec_fn=without_stderr,  # a child started without stderr is the point
    )
    assert done.returncode == 0 and "echo" in done.stdout, done


def test_ctrl_c_while_the_command_loads_exits_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["connectors"]) == 130
    assert "Traceback" not in capsys.readouterr().err
