"""Lock files tell a running gateway on a state folder from one that is gone, however it went."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from mcp_gateway.store.instance_locks import InstanceLocks, instance_of

HOLDER = """
import sys, time
from pathlib import Path
from mcp_gateway.store.instance_locks import InstanceLocks
locks = InstanceLocks(Path(sys.argv[1]))
print(locks.claim(), flush=True)
time.sleep(60)
"""


def test_a_killed_process_lets_go_of_its_instance_and_its_file_is_swept(tmp_path: Path) -> None:
    folder = tmp_path / "instances"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout is not None
        other = holder.stdout.readline().strip()
        assert len(other) == 8
        here = InstanceLocks(folder)
        mine = here.claim()
        assert mine is not None and mine != other
        assert here.alive([other, mine, "0badc0de", "not-an-id"]) == {other, mine}
        holder.send_signal(signal.SIGKILL)  # no clean-up code runs: only the kernel lets go
        holder.wait(timeout=10)
        assert here.alive([other, mine]) == {mine}
        assert sorted(p.name for p in folder.iterdir()) == [mine]  # the dead one's file is gone
        here.release()
        assert list(folder.iterdir()) == []
        assert InstanceLocks(folder).alive([mine]) == set()
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_a_folder_that_cannot_hold_lock_files_claims_nothing(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where the folder would be")
    locks = InstanceLocks(tmp_path / "taken")
    assert locks.claim() is None and locks.instance is None
    assert locks.alive(["0000abcd"]) == set()


def test_the_instance_begins_the_call_id() -> None:
    assert instance_of("0a1b2c3d" + "f" * 24) == "0a1b2c3d"
