"""A command that has a light path (answered from the stored state) and the full one (a ``Gateway``),
run both ways in-process on the same state, for tests that compare the two byte for byte
(``tests/cli/test_listing.py``, ``tests/cli/test_stored_discover.py``).
"""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from mcp_gateway import cli
from mcp_gateway.cli.commands import principal

__all__ = ["TwoPaths", "isolate"]


def isolate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No manifest, agent or database from the environment; a state folder in ``tmp_path``."""
    for name in ("MCP_GATEWAY_MANIFEST", "MCP_GATEWAY_AGENT", "MCP_GATEWAY_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MCP_GATEWAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("MCP_GATEWAY_MASTER_KEY", "two-paths-test-master-key-0123456789abcdef0123")


@dataclass
class TwoPaths:
    """``command`` with its light path ``module.function`` (None: hand over to the full path)."""

    command: str
    module: ModuleType
    function: str
    manifest: Path | None
    state_dir: Path
    capsys: pytest.CaptureFixture[str]
    monkeypatch: pytest.MonkeyPatch

    def _manifest(self) -> list[str]:
        return ["--manifest", str(self.manifest)] if self.manifest else []

    def run(self, *argv: str, stdin: str | None = None) -> str:
        """What any command prints (exit 0 expected), with the manifest given."""
        self.capsys.readouterr()
        if stdin is not None:
            self.monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = cli.main([*argv, *self._manifest()])
        captured = self.capsys.readouterr()
        assert code == 0, captured.err
        return captured.out

    def light(self, *extra: str) -> dict[str, Any] | None:
        """The light path's payload for ``command`` with ``extra``, or None when it hands over."""
        args = cli.build_parser().parse_args([self.command, *extra, *self._manifest()], namespace=cli.Args())
        answer: Callable[..., dict[str, Any] | None] = getattr(self.module, self.function)
        return answer(args, principal(args))

    def both(self, *extra: str) -> tuple[str, str]:
        """(light path's output, full path's output) of ``command`` with ``extra``."""
        assert self.light(*extra) is not None, "the light path did not answer: nothing would be compared"
        fast = self.run(self.command, *extra)
        with self.monkeypatch.context() as m:
            m.setattr(self.module, self.function, lambda *_: None)
            full = self.run(self.command, *extra)
        return fast, full
