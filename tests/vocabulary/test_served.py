"""The served-address record: written, read back while its server answers, ignored once stale."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from mcp_gateway.vocabulary.served import RECORD_NAME, ServedAddress, forget, manifest_digest, read_served, record


def _served(port: int, pid: int | None = None) -> ServedAddress:
    return ServedAddress(
        url=f"http://127.0.0.1:{port}",
        pid=os.getpid() if pid is None else pid,
        host="127.0.0.1",
        port=port,
        transport="http",
        manifest="bundled",
        manifest_digest="bundled",
    )


def test_a_live_record_reads_back_and_forget_removes_it(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        record(tmp_path, _served(port))
        assert read_served(tmp_path) == _served(port)
        forget(tmp_path)
    assert not (tmp_path / RECORD_NAME).exists()


def test_a_record_whose_port_no_longer_answers_is_ignored(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        record(tmp_path, _served(port))
        assert read_served(tmp_path) is None


def test_a_record_whose_process_is_gone_is_ignored_and_not_removed_by_another(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        record(tmp_path, _served(listener.getsockname()[1], pid=int(gone.stdout)))
        assert read_served(tmp_path) is None
        forget(tmp_path)  # not this process's record: left for its owner's successor to overwrite
    assert (tmp_path / RECORD_NAME).exists()


def test_unreadable_records_are_ignored(tmp_path: Path) -> None:
    (tmp_path / RECORD_NAME).write_text("{not json")
    assert read_served(tmp_path) is None
    (tmp_path / RECORD_NAME).write_text('{"url": "http://x"}')
    assert read_served(tmp_path) is None


def test_manifest_digest_follows_the_content(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("project: a\n")
    first = manifest_digest(path)
    path.write_text("project: b\n")
    assert manifest_digest(path) != first
    assert manifest_digest(None) == "bundled"
    assert manifest_digest(tmp_path / "missing.yaml") == ""
