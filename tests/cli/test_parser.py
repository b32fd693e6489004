"""cli/parser.py: the table of commands and each command's options function."""

from __future__ import annotations

import argparse
import importlib
import inspect
import shlex

import pytest

from mcp_gateway import cli
from mcp_gateway.cli.parser import COMMANDS, EXAMPLES, Command, build_parser, command_word, serve_options


def _handlers(parser: argparse.ArgumentParser) -> set[str]:
    """Every handler (``module:function``) the parser's commands and subcommands run."""
    found = {parser._defaults["fn"]} if "fn" in parser._defaults else set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _handlers(sub)
    return found


def test_the_commands_are_named_once_in_the_order_help_lists_them() -> None:
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    usage = build_parser().format_help()
    assert [n for n in names if f"    {n} " in usage] == names


@pytest.mark.parametrize("command", COMMANDS, ids=[c.name for c in COMMANDS])
def test_each_command_runs_a_module_level_handler_of_this_package(command: Command) -> None:
    for handler in _handlers(build_parser(only=command.name)):
        module, _, name = handler.partition(":")
        fn = getattr(importlib.import_module(f"mcp_gateway.cli.{module}"), name)
        assert inspect.isfunction(fn) and fn.__qualname__ == name, handler


def _example_argvs(text: str) -> list[list[str]]:
    """The command lines of an ``EXAMPLES`` entry, without the program name or what follows ``--``."""
    argvs = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        if "mcp-gateway" in words:
            argv = words[words.index("mcp-gateway") + 1 :]
            for end in ("--", "|"):  # a command to run (``add --mcp``), a pipe
                argv = argv[: argv.index(end)] if end in argv else argv
            argvs.append(argv)
    return argvs


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_in_help_parses_to_its_command(name: str) -> None:
    argvs = _example_argvs(EXAMPLES[name])
    assert argvs, name
    for argv in argvs:
        args = build_parser(only=command_word(argv)).parse_args(argv, namespace=cli.Args())
        assert args.command == name, argv


def test_an_options_function_builds_its_command_alone() -> None:
    bare = argparse.ArgumentParser()
    serve_options(bare)
    args = bare.parse_args(["--transport", "http", "--max-sessions", "5"])
    assert (args.transport, args.port, args.max_sessions, args.max_connections) == ("http", 8765, 5, None)
    with pytest.raises(SystemExit):
        bare.parse_args(["--transport", "carrier-pigeon"])


def test_call_options_parse_the_call_tool_s_arguments() -> None:
    args = build_parser(only="call").parse_args(
        ["call", "api.items.get", "--args", '{"id": 1}', "--fields", "id", "name", "--wait", "30"], namespace=cli.Args()
    )
    assert (args.fn, args.tool, args.args, args.fields, args.wait) == (
        "commands:cmd_call",
        "api.items.get",
        '{"id": 1}',
        ["id", "name"],
        30.0,
    )
    assert args.agent is None and args.approval_id is None


def test_a_subcommand_runs_its_group_s_handler_with_its_own_options() -> None:
    args = build_parser(only="token").parse_args(["token", "create", "--agent", "bot", "--json"], namespace=cli.Args())
    assert (args.fn, args.token_cmd, args.agent, args.operator, args.json) == (
        "commands:cmd_token",
        "create",
        "bot",
        False,
        True,
    )
    for verb in ("approve", "deny"):
        decided = build_parser().parse_args(["approvals", verb, "ID"], namespace=cli.Args())
        assert (decided.approvals_cmd, decided.id) == (verb, "ID")


@pytest.mark.parametrize("limit", ["0", "-1", "51", "1000000000", "2.5", "ten"])
def test_discover_takes_a_limit_the_tool_takes(limit: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["discover", "x", "--limit", limit])
    assert exited.value.code == 2
    assert "argument --limit" in capsys.readouterr().err
    assert build_parser().parse_args(["discover", "x", "--limit", "50"]).limit == 50


@pytest.mark.parametrize("json_errors", [False, True])
@pytest.mark.parametrize("argv", [["audit", "--bogus", "\x1b]0;PWNED\x07\x1b[2J"], ["token", "list", "\x1b[2J"]])
def test_a_usage_error_shows_control_characters_escaped(
    argv: list[str], json_errors: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    # "unrecognized arguments" quoted what was typed raw: a pasted ESC sequence retitled or cleared the terminal.
    with pytest.raises(SystemExit):
        build_parser(json_errors=json_errors).parse_args(argv)
    said = capsys.readouterr().err
    assert "\x1b" not in said and "\x07" not in said and "\\u001b" not in said, said
    assert "\\x1b[2J" in said


@pytest.mark.parametrize(
    "argv",
    [
        ["pages", "--public-url", "127.0.0.1:19240"],  # the scheme forgotten: it listened on port 80
        ["pages", "--public-url", "notaurl"],
        ["pages", "--public-url", "ftp://127.0.0.1:21"],
        ["pages", "--public-url", "http://127.0.0.1:99999"],
        ["serve", "--public-url", "http://[::1"],
        ["serve", "--public-url", "http://:8765"],
        ["serve", "--public-url", "https://u:pw@127.0.0.1:8765"],  # every link handed out would carry it
        ["serve", "--port", "99999"],
        ["serve", "--port", "-1"],
        ["serve", "--metrics-port", "0"],
        ["serve", "--drain-timeout", "nan"],
        ["serve", "--shutdown-delay", "inf"],
        ["serve", "--request-timeout", "-3"],
        ["serve", "--request-timeout", "0"],
        ["serve", "--max-sessions", "0"],
        ["call", "x.y", "--wait", "nan"],
        ["call", "x.y", "--wait", "-1"],
        ["audit", "--limit", "0"],
        ["audit", "--limit", "-5"],
    ],
)
def test_a_value_out_of_range_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert f"argument {argv[-2]}" in capsys.readouterr().err


def test_good_values_pass_the_range_checks() -> None:
    args = build_parser().parse_args(
        ["serve", "--port", "65535", "--public-url", "https://gw.example.com", "--drain-timeout", "0"]
    )
    assert (args.port, args.public_url, args.drain_timeout) == (65535, "https://gw.example.com", 0.0)
    assert build_parser().parse_args(["call", "x.y", "--wait", "inf"]).wait == float("inf")  # capped later


@pytest.mark.parametrize("url", ["ftp://u:CANARY-PW@host", "https://u:CANARY-PW@host:8765/"])
def test_a_public_url_s_password_is_not_quoted_back(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["pages", "--public-url", url])
    assert "CANARY-PW" not in capsys.readouterr().err


def test_token_revoke_help_says_it_takes_the_token_itself(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["token", "revoke", "--help"])
    shown = capsys.readouterr().out
    assert "ID-OR-TOKEN" in shown and "the token itself" in shown
