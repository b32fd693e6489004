"""What every command prints for a person: a table or JSON in which agent- and upstream-chosen
values cannot drive the terminal, forge a row or hide text."""

from __future__ import annotations

import json
import unicodedata

import pytest

from mcp_gateway.cli.output import print_json, table

HOSTILE = "name\x1b]0;pwned\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\x9b2K\u202e0001\u202c\r\nFORGED\u200b\U000e0041"


def raw_controls(text: str) -> list[str]:
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")]


def test_a_table_cell_is_escaped_and_stays_in_its_row(capsys: pytest.CaptureFixture[str]) -> None:
    table([("a", HOSTILE, 3), ("b", None, "ok")], ["id", "tool", "n"])
    out = capsys.readouterr().out
    assert raw_controls(out) == []
    lines = out.splitlines()
    assert len(lines) == 3  # the header and two rows: no forged one
    assert "name\\x1b]0;pwned\\x07\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07\\x9b2K" in lines[1]  # cut at 60 columns


def test_json_output_keeps_the_value_and_escapes_it_on_the_wire(capsys: pytest.CaptureFixture[str]) -> None:
    print_json({"tool": HOSTILE, "rows": [HOSTILE], HOSTILE: "plain — ✓"})
    out = capsys.readouterr().out
    assert raw_controls(out) == []
    assert json.loads(out) == {"tool": HOSTILE, "rows": [HOSTILE], HOSTILE: "plain — ✓"}
    assert "plain — ✓" in out
