"""``not_a_file``: what a path is when reading it whole would hang or never end."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from mcp_gateway.primitives.file_kinds import not_a_file


def test_each_kind_of_path_is_named_and_a_regular_file_is_none(tmp_path: Path) -> None:
    regular = tmp_path / "spec.yaml"
    regular.write_text("openapi: 3.0.0\n")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    link = tmp_path / "link.yaml"
    link.symlink_to(regular)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        assert not_a_file(tmp_path / "sock") == "a socket"
    assert not_a_file(regular) is None and not_a_file(link) is None
    assert not_a_file(pipe) == "a named pipe"
    assert not_a_file(Path("/dev/null")) == "a device"
    assert not_a_file(tmp_path) == "a directory"
    with pytest.raises(FileNotFoundError):
        not_a_file(tmp_path / "absent")
