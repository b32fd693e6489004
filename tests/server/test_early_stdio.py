"""``serve --transport stdio`` replays ``initialize`` and ``tools/list`` from the last start
(``server/fast/early_stdio.py``).

Each case drives a real ``mcp-gateway serve`` over stdin/stdout with raw JSON-RPC lines, pipelined
as a client may send them, and checks what came back: the same bytes as the SDK's own answers, one
answer per request id, and the SDK staying the judge of what is stored. No clock is read.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcp_gateway.server.fast import early_stdio
from mcp_gateway.server.fast.early_stdio import (
    EarlyStdio,
    SdkStdin,
    SdkWire,
    build_environment,
    content_key,
    entry,
    shipped_answers,
)
from tests.support.one_connector import MASTER_KEY, gateway_env, write_manifest

REPO = Path(__file__).resolve().parents[2]
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
SESSION = [
    INITIALIZE,
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": "two", "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 3, "method": "ping"},
]


def _serve(
    tmp_path: Path, messages: list[dict[str, Any]], *, step: bool = False, fast_paths: bool = True
) -> list[dict[str, Any]]:
    """One session; ``step``: wait for each answer before the next request, as the SDK client does."""
    return [json.loads(line) for line in _lines(tmp_path, messages, step=step, fast_paths=fast_paths)]


def _lines(tmp_path: Path, messages: list[dict[str, Any]], *, step: bool, fast_paths: bool = True) -> list[str]:
    """One session's answers as the client reads them, each line's bytes as written."""
    manifest = write_manifest(tmp_path)
    env = gateway_env(tmp_path, MCP_GATEWAY_DISCOVERY_MODE="lexical", MCP_GATEWAY_FAST_PATHS="1" if fast_paths else "0")
    argv = [sys.executable, "-m", "mcp_gateway", "serve", "--manifest", str(manifest)]
    if not step:
        lines = "".join(json.dumps(m) + "\n" for m in messages)
        done = subprocess.run(argv, input=lines, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=tmp_path
    )
    assert proc.stdin is not None and proc.stdout is not None
    answers = []
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            if "id" in message:
                answers.append(proc.stdout.readline().rstrip("\n"))
        proc.stdin.close()
        answers += proc.stdout.read().splitlines()
    finally:
        proc.wait(timeout=60)
    return answers


def _stored(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "state" / "stdio-answers.json").read_text())


@pytest.mark.slow  # a real gateway process
def test_a_second_start_gives_the_same_answers_once_each(tmp_path: Path) -> None:
    first = _serve(tmp_path, SESSION, step=True)  # the SDK answers; its answers are stored
    assert [a["id"] for a in first] == [1, "two", 3]
    stored = _stored(tmp_path)
    # initialize, and tools/list in the version it negotiated (besides the answers shipped in the package)
    assert {'["initialize","2025-11-25"]', '["tools/list","2025-11-25",null]'} <= stored["answers"].keys()
    assert (tmp_path / "state" / "stdio-answers.json").stat().st_mode & 0o077 == 0
    assert MASTER_KEY not in json.dumps(stored)
    second = _serve(tmp_path, SESSION, step=True)  # initialize and tools/list replayed, ping by the SDK
    pipelined = _serve(tmp_path, SESSION)  # all at once, then EOF: every request still answered, once
    assert second == first
    assert pipelined == first
    assert {t["name"] for t in first[1]["result"]["tools"]} == {
        "connectors",
        "discover",
        "describe",
        "call",
        "connect",
        "request_secret",
    }


@pytest.mark.slow  # real gateway processes
def test_every_request_read_before_eof_is_answered_before_the_process_ends(tmp_path: Path) -> None:
    call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "connectors", "arguments": {}}}
    for _ in range(3):  # written at once, stdin closed right after: the call still runs
        answers = _serve(tmp_path, [*SESSION, call])
        assert sorted(json.dumps(a["id"]) for a in answers) == ['"two"', "1", "3", "4"]
        assert all("result" in a for a in answers), answers
        assert "echo" in json.dumps(answers[-1]["result"])


@pytest.mark.slow  # a real gateway process
def test_the_sdk_stays_the_judge_of_what_is_replayed(tmp_path: Path) -> None:
    real = _serve(tmp_path, SESSION, step=True)
    stored = _stored(tmp_path)
    entry = '["tools/list","2025-11-25",null]'
    stored["answers"][entry] = stored["answers"][entry].replace("List the connectors", "STALE: list the connectors")
    (tmp_path / "state" / "stdio-answers.json").write_text(json.dumps(stored))
    replayed = _serve(tmp_path, SESSION, step=True)
    assert "STALE" in json.dumps(replayed[1])  # what was stored is what the client got, once
    assert "STALE" not in json.dumps(_stored(tmp_path))  # the SDK's own answer replaced it
    assert _serve(tmp_path, SESSION, step=True) == real
    other = {**INITIALIZE, "params": {**INITIALIZE["params"], "clientInfo": {"name": "other", "version": "2"}}}
    assert _serve(tmp_path, [other])[0]["result"] == real[0]["result"]  # parameters never seen: the SDK answers


@pytest.mark.slow  # real gateway processes
def test_with_the_fast_paths_off_the_sdk_answers_and_nothing_is_replayed(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    first = _serve(plain, SESSION, step=True, fast_paths=False)
    assert not (plain / "state" / "stdio-answers.json").exists()  # the streams were never claimed early
    assert _serve(plain, SESSION, step=True, fast_paths=False) == first  # a second start: the SDK again
    assert not (plain / "state" / "stdio-answers.json").exists()
    fast = tmp_path / "fast"
    fast.mkdir()
    assert _serve(fast, SESSION, step=True) == first  # the same answers either way
    assert (fast / "state" / "stdio-answers.json").exists()


def test_the_shipped_answers_are_this_builds() -> None:
    shipped = json.loads((REPO / "mcp_gateway" / "server" / "fast" / "stdio_answers.json").read_text())
    if shipped["built_with"] != build_environment():
        # Another Python or SDK release (the drift check's newest versions): the answers are never
        # replayed there, and whether they are current can only be judged where they were made.
        assert shipped_answers() == {}
        pytest.skip(f"answers made with {shipped['built_with']}, this is {build_environment()}")
    assert shipped["key"] == content_key(), "stale: run PYTHONPATH=$PWD python scripts/build_stdio_answers.py"
    assert shipped_answers() == shipped["answers"]


def test_a_new_state_folder_starts_from_the_shipped_answers_and_a_stale_file_is_never_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    early = EarlyStdio(tmp_path / "state")  # nothing stored there: a first start
    initialize, listing = entry("initialize", INITIALIZE["params"], None), entry("tools/list", None, "2025-11-25")
    assert early._answers == shipped_answers()  # pyright: ignore[reportPrivateUsage]
    assert initialize in early._answers and listing in early._answers  # pyright: ignore[reportPrivateUsage]
    stale = tmp_path / "stdio_answers.json"
    stale.write_text(json.dumps({"key": "another build", "answers": {initialize: "{}"}}))
    monkeypatch.setattr(early_stdio, "_SHIPPED", stale)
    assert shipped_answers() == {}
    assert EarlyStdio(tmp_path / "other")._answers == {}  # pyright: ignore[reportPrivateUsage]


def test_an_initialize_of_another_shape_is_left_to_the_sdk() -> None:
    plain = INITIALIZE["params"]
    assert entry("initialize", plain, None) == '["initialize","2025-11-25"]'
    other_client = {**plain, "clientInfo": {"name": "claude-code", "version": "2.1", "title": "Claude Code"}}
    capable = {**plain, "capabilities": {"roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}}}
    assert (
        entry("initialize", other_client, None)
        == entry("initialize", capable, None)
        == entry("initialize", plain, None)
    )
    for odd in (
        {**plain, "extra": 1},
        {**plain, "protocolVersion": 20251125},
        {**plain, "clientInfo": {"name": "t"}},
        {**plain, "clientInfo": {**plain["clientInfo"], "icons": [{"src": "x"}]}},
        {**plain, "capabilities": {"roots": True}},
        {**plain, "capabilities": {"roots": {"listChanged": "yes"}}},
        {**plain, "capabilities": {"experimental": {"x": True}}},
        {**plain, "capabilities": {"unheard_of": {}}},
        {**plain, "_meta": []},
        None,
    ):
        assert entry("initialize", odd, None) is None, odd


@pytest.mark.slow  # real gateway processes
def test_a_first_start_answers_byte_for_byte_as_the_full_server(tmp_path: Path) -> None:
    plain, fast = tmp_path / "plain", tmp_path / "fast"
    plain.mkdir()
    fast.mkdir()
    sdk = _lines(plain, SESSION, step=True, fast_paths=False)  # the SDK answers all, nothing replayed
    replayed = _lines(fast, SESSION, step=True)  # a new state folder: the shipped answers
    assert replayed == sdk
    # What the replay writes (``EarlyStdio._early_answer``) is the SDK's line, byte for byte, with a
    # manifest of the test's own (the answers do not depend on it).
    shipped = shipped_answers()
    assert sdk[0] == '{"jsonrpc":"2.0","id":1,"result":' + shipped['["initialize","2025-11-25"]'] + "}"
    assert sdk[1] == '{"jsonrpc":"2.0","id":"two","result":' + shipped['["tools/list","2025-11-25",null]'] + "}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # what the gateway serves on


@pytest.mark.anyio
async def test_sdk_stdin_gives_the_lines_as_a_text_file_would() -> None:
    """The pipe the SDK reads is watched by the event loop: lines split across writes, several in
    one write, undecodable bytes and a last line without its newline come out as from a text file."""
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as pipe, os.fdopen(write_end, "wb", buffering=0) as writer:
        lines = SdkStdin(pipe)
        got: list[str] = []

        async def read_all() -> None:
            got.extend([line async for line in lines])

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_all)
            for chunk in (b'{"a":', b'1}\n{"b":2}\n', b"\xff\xfe\n", "é".encode(), b"\nlast"):
                writer.write(chunk)
                await anyio.sleep(0.01)
            writer.close()
    want = ['{"a":1}\n', '{"b":2}\n', "\ufffd\ufffd\n", "é\n", "last"]
    assert got == want == io.TextIOWrapper(io.BytesIO(b"".join(w.encode() for w in want))).readlines()


@pytest.mark.anyio
async def test_sdk_wire_writes_every_line_whole_and_in_order(tmp_path: Path) -> None:
    """Short lines are written on the event loop, a line longer than the pipe holds on a worker thread
    (the loop keeps running while the client reads it); the client gets each whole, in order."""
    early = EarlyStdio(tmp_path)
    read_end, write_end = os.pipe()
    early._wire = os.fdopen(write_end, "wb", buffering=0)
    wire = SdkWire(early)
    big = json.dumps({"data": "x" * 300_000}) + "\n"
    sent = ['{"id":1}\n', big, '{"id":"é"}\n']
    with os.fdopen(read_end, "rb") as client:
        received = b""
        async with anyio.create_task_group() as tg:

            async def read() -> None:
                nonlocal received
                want = sum(len(line.encode()) for line in sent)
                while len(received) < want:
                    received += await anyio.to_thread.run_sync(client.read1, 1 << 16)

            tg.start_soon(read)
            for line in sent:
                assert await wire.write(line) == len(line)
                await wire.flush()
        early._wire.close()
    assert received.decode() == "".join(sent)


def test_shipped_answers_never_create_the_state_folder(tmp_path: Path) -> None:
    # A start that a later check refuses (a missing extra, a bad manifest) must leave no folder behind;
    # an existing folder gets the shipped answers at once.
    missing, existing = tmp_path / "missing", tmp_path / "existing"
    existing.mkdir()
    assert EarlyStdio(missing)._answers == shipped_answers() != {}  # pyright: ignore[reportPrivateUsage]
    assert not missing.exists()
    EarlyStdio(existing)
    assert [p.name for p in existing.iterdir()] != []


@pytest.mark.slow  # a real gateway process
def test_a_request_whose_id_is_no_string_nor_integer_is_refused_not_left_waiting(tmp_path: Path) -> None:
    # The SDK reads such a request as a notification: no answer ever came, and a cached one would carry the bad id.
    bad = [
        {"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": True, "method": "tools/call", "params": {"name": "connectors", "arguments": {}}},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": {}, "method": "ping"},
    ]
    answers = _serve(tmp_path, [*SESSION[:2], *bad, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}])
    refused = [a for a in answers if a.get("id") is None]
    assert [a["error"]["code"] for a in refused] == [-32600] * 4, answers
    assert "id must be a string or an integer" in refused[0]["error"]["message"]
    assert sorted(a["id"] for a in answers if a.get("id") is not None) == [1, 9]  # nothing else ran


@pytest.mark.slow  # a real gateway process
@pytest.mark.parametrize("fast_paths", [True, False])
def test_a_session_ended_by_eof_leaves_no_stream_unclosed(tmp_path: Path, fast_paths: bool) -> None:
    # Warnings shown, as an operator running with PYTHONWARNINGS=default sees them at exit.
    manifest = write_manifest(tmp_path)
    env = gateway_env(
        tmp_path, MCP_GATEWAY_DISCOVERY_MODE="lexical", MCP_GATEWAY_FAST_PATHS="1" if fast_paths else "0"
    ) | {"PYTHONWARNINGS": "default"}
    argv = [sys.executable, "-m", "mcp_gateway", "serve", "--manifest", str(manifest)]
    lines = "".join(json.dumps(m) + "\n" for m in SESSION[:2])
    done = subprocess.run(argv, input=lines, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["id"] == 1, done.stdout
    assert "ResourceWarning" not in done.stderr and "Unclosed" not in done.stderr, done.stderr
