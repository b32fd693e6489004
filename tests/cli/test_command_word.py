"""``main`` builds only the parser of the command it runs (``command_word``, ``build_parser(only=...)``):
each command parses, helps and fails exactly as with the whole parser."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from mcp_gateway import cli
from mcp_gateway.cli import build_parser, command_word


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _outcome(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[object, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            result: object = vars(parser.parse_args(argv, namespace=cli.Args()))
        except SystemExit as exc:
            result = exc.code
    return result, out.getvalue(), err.getvalue()


def test_the_command_word_is_known_only_for_sure() -> None:
    assert command_word(["discover", "x"]) == "discover"
    assert command_word(["--manifest", "m.yaml", "--json", "--state-dir=s", "connectors"]) == "connectors"
    assert command_word(["--log-format", "json", "--debug", "token", "list"]) == "token"
    assert command_word(["--manifest", "discover", "serve"]) == "serve"  # a value is never the command
    for unsure in (["--mani", "m.yaml", "sync"], ["-h"], ["--version"], ["--help", "sync"], []):
        assert command_word(unsure) is None, unsure


ARGVS = [
    ["discover", "list", "items", "--json", "--limit", "3"],
    ["--manifest", "m.yaml", "discover", "x", "--agent", "bot", "--connector", "c"],
    ["discover"],  # missing query
    ["discover", "x", "--nosuch"],
    ["connectors", "--json", "--manifest", "m.yaml"],
    ["serve", "--transport", "http", "--port", "9"],
    ["serve", "--transport", "carrier-pigeon"],
    ["token", "create", "--agent", "bot"],
    ["token", "nosuch"],
    ["secret", "set", "github"],
    ["approvals", "approve", "ID"],
    ["review", "--all"],
    ["add", "stripe", "--slug", "s"],
    ["discover", "--help"],
    ["token", "create", "--help"],
]


@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(a) for a in ARGVS])
def test_one_command_s_parser_answers_as_the_whole_parser(argv: list[str]) -> None:
    word = command_word(argv)
    assert word is not None
    assert _outcome(build_parser(only=word), argv) == _outcome(build_parser(), argv)


def test_every_command_is_built_alone_with_the_same_help() -> None:
    whole = _commands(build_parser())
    for name, parser in whole.items():
        alone = _commands(build_parser(only=name))
        assert list(alone) == [name]
        assert alone[name].format_help() == parser.format_help(), name
    # A word that is no command builds the whole parser, whose error lists them all.
    assert list(_commands(build_parser(only="nosuch"))) == list(whole)
