"""``runtime``: which store the settings select, and that the database URL's password never shows."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client

from mcp_gateway.manifest import parse_manifest
from mcp_gateway.runtime import BackgroundSync, Settings, open_gateway, open_store
from mcp_gateway.server.tools import build_mcp_server
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.store import SQLiteStore
from mcp_gateway.vocabulary.errors import GatewayError

pytestmark = pytest.mark.anyio

PASSWORD = "CANARY-settings-pass-9043"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_the_database_url_comes_from_the_flag_else_the_environment(tmp_path: Path) -> None:
    env = {"MCP_GATEWAY_DATABASE_URL": f"postgresql://gw:{PASSWORD}@db/env", "MCP_GATEWAY_STATE_DIR": str(tmp_path)}
    assert Settings.from_env(env).database_url == f"postgresql://gw:{PASSWORD}@db/env"
    assert Settings.from_env(env, database_url="postgresql://gw@db/flag").database_url == "postgresql://gw@db/flag"
    assert Settings.from_env({"MCP_GATEWAY_DATABASE_URL": "  "}).database_url is None
    assert Settings.from_env({}).database_url is None
    assert PASSWORD not in repr(Settings.from_env(env))


async def test_no_url_is_sqlite_in_the_state_folder(tmp_path: Path) -> None:
    async with open_store(Settings.from_env({}, state_dir=str(tmp_path / "state"))) as store:
        assert isinstance(store, SQLiteStore)
    assert (tmp_path / "state" / "state.db").is_file()


async def test_a_postgres_url_selects_the_shared_store(tmp_path: Path, postgres_url: str) -> None:
    from mcp_gateway.store.postgres import PostgresStore

    settings = Settings.from_env({"MCP_GATEWAY_DATABASE_URL": postgres_url}, state_dir=str(tmp_path / "state"))
    async with open_store(settings) as store:
        assert isinstance(store, PostgresStore)
        await store.set_meta("k", "v")
    assert not (tmp_path / "state" / "state.db").exists()


async def test_another_scheme_is_refused_without_its_password(tmp_path: Path) -> None:
    settings = Settings.from_env({}, state_dir=str(tmp_path), database_url=f"mysql://gw:{PASSWORD}@db/gateway")
    with pytest.raises(GatewayError, match=r"mysql://gw:\*\*\*@db/gateway is not a PostgreSQL URL") as caught:
        async with open_store(settings):
            pass
    assert PASSWORD not in str(caught.value)


async def test_a_missing_driver_says_which_extra_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp_gateway.store.postgres", None)  # as if asyncpg were not installed
    settings = Settings.from_env({}, state_dir=str(tmp_path), database_url=f"postgresql://gw:{PASSWORD}@db/x")
    with pytest.raises(GatewayError, match=r"pip install 'mcp-action-gateway\[postgres\]'") as caught:
        async with open_store(settings):
            pass
    assert PASSWORD not in str(caught.value)


KEY = "runtime-test-master-key-0123456789"
SMALL = """
project: bg
connectors:
  - slug: notes
    base_url: http://127.0.0.1:9
    source:
      http:
        actions:
          - path: notes.list
            method: GET
            url: /notes
            summary: List the notes
"""


async def test_a_background_sync_serves_tools_list_first_and_calls_wait_for_the_catalog(tmp_path: Path) -> None:
    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, state_dir=str(tmp_path))
    startup = BackgroundSync(grace=30)  # only the first tools/list (or a call) lets the sync start
    async with open_gateway(settings, manifest=parse_manifest(SMALL, base_dir=tmp_path), background=startup) as gw:
        assert not startup.ready.is_set() and len(gw._index) == 0  # handed out before the sync
        async with Client(build_mcp_server(gw, default_principal=OPERATOR, startup=startup)) as client:
            assert len((await client.list_tools()).tools) == 6
            assert startup.served.is_set()
            found = await client.call_tool("discover", {"query": "list notes"})  # waits for the catalog
        assert startup.ready.is_set()
        assert found.structured_content is not None
        assert [r["name"] for r in found.structured_content["results"]] == ["notes.notes.list"]


async def test_a_call_to_a_loaded_connector_does_not_wait_for_one_that_hangs(tmp_path: Path) -> None:
    # The start-up sync waited for its slowest connector: an MCP server hanging in its handshake held every
    # agent's first call, to any connector, for that server's whole timeout.
    hang = f'[{sys.executable!r}, "-c", "import time; time.sleep(60)"]'.replace("'", '"')
    text = (
        SMALL
        + f"""  - slug: stuck
    timeout: 30
    source: {{mcp: {{command: {hang}}}}}
"""
    )
    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, state_dir=str(tmp_path))
    startup = BackgroundSync(grace=0)
    async with open_gateway(settings, manifest=parse_manifest(text, base_dir=tmp_path), background=startup) as gw:
        async with Client(build_mcp_server(gw, default_principal=OPERATOR, startup=startup)) as client:
            with anyio.fail_after(10):
                described = await client.call_tool("describe", {"tool": "notes.notes.list"})
            assert not startup.ready.is_set()  # the stuck one is still loading
            assert described.structured_content is not None
            assert described.structured_content["name"] == "notes.notes.list"


async def test_connectors_and_discover_answer_with_what_loaded_and_name_what_is_still_loading(tmp_path: Path) -> None:
    # Both waited for the whole start-up sync: an MCP server hanging in its handshake held them for its whole
    # timeout, and many clients give up before that.
    hang = f'[{sys.executable!r}, "-c", "import time; time.sleep(60)"]'.replace("'", '"')
    text = SMALL + f"  - slug: stuck\n    timeout: 30\n    source: {{mcp: {{command: {hang}}}}}\n"
    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, state_dir=str(tmp_path))
    startup = BackgroundSync(grace=0, patience=0.5)
    async with open_gateway(settings, manifest=parse_manifest(text, base_dir=tmp_path), background=startup) as gw:
        async with Client(build_mcp_server(gw, default_principal=OPERATOR, startup=startup)) as client:
            with anyio.fail_after(10):
                listed = await client.call_tool("connectors", {})
                found = await client.call_tool("discover", {"query": "list notes"})
            assert not startup.ready.is_set()  # the stuck one is still loading
    assert listed.structured_content is not None and found.structured_content is not None
    statuses = {c["slug"]: c["status"] for c in listed.structured_content["connectors"]}
    assert statuses == {"notes": "ready", "stuck": "loading"}
    assert [r["name"] for r in found.structured_content["results"]] == ["notes.notes.list"]
    assert "still loading: stuck" in found.structured_content["note"]


async def test_a_background_sync_starts_after_its_grace_without_a_request(tmp_path: Path) -> None:
    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, state_dir=str(tmp_path))
    startup = BackgroundSync(grace=0.05)
    async with open_gateway(settings, manifest=parse_manifest(SMALL, base_dir=tmp_path), background=startup) as gw:
        with anyio.fail_after(30):
            await startup.ready.wait()
        assert len(gw._index) == 1


async def test_a_states_only_open_skips_the_index_and_the_next_sync_builds_it(tmp_path: Path) -> None:
    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, state_dir=str(tmp_path))
    manifest = parse_manifest(SMALL, base_dir=tmp_path)
    async with open_gateway(settings, manifest=manifest, build_index=False) as gw:
        assert [s.status for s in gw.states()] == ["ready"]
        assert len(gw._index) == 0
        await gw.sync()  # the catalog is unchanged, yet it is indexed now
        assert len(gw._index) == 1


async def test_a_second_start_reads_the_index_the_first_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_gateway.discovery import _index

    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, state_dir=str(tmp_path))
    manifest = parse_manifest(SMALL, base_dir=tmp_path)
    async with open_gateway(settings, manifest=manifest, embed=False) as gw:
        first = await gw.discover(OPERATOR, "anything")
    assert list((tmp_path / "discovery-index").iterdir())

    def no_build(*_: object) -> object:
        raise AssertionError("built again, not read back")

    monkeypatch.setattr(_index, "build_segment", no_build)
    async with open_gateway(settings, manifest=manifest, embed=False) as gw:
        assert len(gw._index) == 1
        assert await gw.discover(OPERATOR, "anything") == first


HIDING = SMALL.replace("summary: List the notes", 'summary: "List the notes\\u200b"')


async def test_a_second_start_reads_the_review_scan_the_first_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_gateway.discovery import _review_cache

    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, state_dir=str(tmp_path))
    manifest = parse_manifest(HIDING, base_dir=tmp_path)
    async with open_gateway(settings, manifest=manifest, embed=False) as gw:
        first = gw.review.pending()
    assert [f.name for f in first] == ["notes.notes.list"] and first[0].status == "flagged"
    assert list((tmp_path / "review-scan").iterdir())

    def no_scan(*_: object) -> object:
        raise AssertionError("scanned again, not read back")

    monkeypatch.setattr(_review_cache, "hidden_text", no_scan)
    async with open_gateway(settings, manifest=manifest, embed=False) as gw:
        assert gw.review.pending() == first


async def test_a_one_shot_open_loads_the_same_catalog_without_sharing(tmp_path: Path) -> None:
    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, state_dir=str(tmp_path))
    manifest = parse_manifest(SMALL, base_dir=tmp_path)
    answers = []
    for resident in (True, False, True):  # normalized, then read back from the store either way
        async with open_gateway(settings, manifest=manifest, embed=False, resident=resident) as gw:
            actions = [a for c in gw._catalogs.loaded.values() for a in c.actions]
            answers.append((actions, await gw.discover(OPERATOR, "anything"), await gw.connectors(OPERATOR)))
    assert answers[0][0]
    assert answers[0] == answers[1] == answers[2]


async def test_a_reload_takes_a_valid_manifest_and_keeps_the_old_one_over_a_broken_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mcp_gateway import runtime

    collections: list[None] = []
    monkeypatch.setattr(runtime, "collect_frozen_garbage", lambda: collections.append(None))
    path = tmp_path / "gateway.yaml"
    path.write_text(SMALL)
    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, manifest=str(path), state_dir=str(tmp_path))
    more = SMALL + "          - {path: notes.create, method: POST, url: /notes, summary: Create a note}\n"
    async with open_gateway(settings, manifest=parse_manifest(SMALL, base_dir=tmp_path), embed=False) as gw:
        path.write_text(more)
        assert await runtime.reload_manifest(gw, settings) is None
        assert sorted(a.path for a in gw._catalogs.loaded["notes"].actions) == ["notes.create", "notes.list"]
        assert len(collections) == 1  # the replaced catalog's frozen cycles are collected
        # Routine: at INFO, so an alert on WARNING does not fire at every save, yet logged at any level.
        (said,) = [r for r in caplog.records if r.getMessage().startswith("manifest reloaded")]
        assert said.levelno == logging.INFO and "(changed notes)" in said.getMessage()
        path.write_text(more.replace("connectors:", "connectors: [oops"))
        refused = await runtime.reload_manifest(gw, settings)
        assert refused and "gateway.yaml" in refused
        assert len(gw._catalogs.loaded["notes"].actions) == 2 and len(collections) == 1


async def test_a_manifest_file_caught_empty_mid_save_is_not_reloaded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A file being saved (truncated, then written) was reloaded as a valid manifest with no connector
    # and no agent: every agent was told its actions did not exist until the save ended.
    from mcp_gateway import runtime

    path = tmp_path / "gateway.yaml"
    path.write_text(SMALL)
    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, manifest=str(path), state_dir=str(tmp_path))
    async with open_gateway(settings, manifest=parse_manifest(SMALL, base_dir=tmp_path), embed=False) as gw:
        for blank in ("", "\n  \n", "# being rewritten\n---\n"):
            path.write_text(blank)
            with caplog.at_level(logging.WARNING, logger="mcp_gateway.runtime"):
                assert await runtime.reload_manifest(gw, settings) == "the manifest file is empty"
            assert [c.slug for c in gw.manifest.connectors] == ["notes"] and "notes" in gw._catalogs.loaded
        warned = [r for r in caplog.records if "the file is empty" in r.getMessage()]
        assert len(warned) == 3 and all(r.levelno == logging.WARNING for r in warned)
        path.write_text(SMALL)
        assert await runtime.reload_manifest(gw, settings) is None


async def test_a_reload_that_meets_a_database_outage_keeps_serving_and_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A SIGHUP or an edited manifest while the database was down ended `serve` (an ExceptionGroup of
    # StoreUnavailable out of the sync's task group), calls in flight included.
    from mcp_gateway import runtime
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    path = tmp_path / "gateway.yaml"
    path.write_text(SMALL)
    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, manifest=str(path), state_dir=str(tmp_path))
    more = SMALL + "          - {path: notes.create, method: POST, url: /notes, summary: Create a note}\n"
    async with open_gateway(settings, manifest=parse_manifest(SMALL, base_dir=tmp_path), embed=False) as gw:
        store = gw._catalogs._store
        working = store.put_connector_state

        async def unreachable(*_: object, **__: object) -> None:
            raise StoreUnavailable("the PostgreSQL database at postgresql://gateway:***@127.0.0.1:9/gw is unreachable")

        monkeypatch.setattr(store, "put_connector_state", unreachable)
        path.write_text(more)
        problem = await runtime.reload_manifest(gw, settings)
        assert problem is not None and "unreachable" in problem
        assert [a.path for a in gw._catalogs.loaded["notes"].actions] == ["notes.list"]
        assert len(gw.manifest.connectors[0].model_dump()["source"]["http"]["actions"]) == 1  # the old one

        monkeypatch.setattr(runtime, "RELOAD_RETRY_SECONDS", 0.2)
        path.write_text(SMALL)
        reloaded = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: runtime.watch_manifest(gw, settings, reloaded.set, interval=0.05))
            await anyio.sleep(0.1)
            path.write_text(more)  # an edit the watcher meets the outage with, and waits to try again
            await anyio.sleep(0.3)
            assert not reloaded.is_set()
            monkeypatch.setattr(store, "put_connector_state", working)  # the database is back
            with anyio.fail_after(10):
                await reloaded.wait()
            tasks.cancel_scope.cancel()
        assert sorted(a.path for a in gw._catalogs.loaded["notes"].actions) == ["notes.create", "notes.list"]


async def test_a_reload_that_meets_a_read_only_database_beside_other_failures_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One connector met the outage, another failed on what it caused: "unexpected ExceptionGroup", and
    # the edit stayed unapplied after the database was writable again.
    from mcp_gateway import runtime
    from mcp_gateway.vocabulary.errors import StoreUnavailable

    path = tmp_path / "gateway.yaml"
    path.write_text(SMALL)
    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, manifest=str(path), state_dir=str(tmp_path))
    async with open_gateway(settings, manifest=parse_manifest(SMALL, base_dir=tmp_path), embed=False) as gw:

        async def failing(*_: object, **__: object) -> None:
            read_only = StoreUnavailable("the PostgreSQL database at db refuses writes (read-only)", lasting=True)
            raise ExceptionGroup("sync", [RuntimeError("a connector's own failure"), read_only])

        monkeypatch.setattr(gw, "reload", failing)
        problem, passes = await runtime._reload(gw, settings)  # pyright: ignore[reportPrivateUsage]
        assert passes and problem is not None and "read-only" in problem


async def test_the_shared_upstream_client_keeps_no_cookie(tmp_path: Path) -> None:
    # One caller's upstream session must not ride along with another's requests through the shared
    # client (which sends its jar on the requests it builds), nor an upstream grow the jar at will.
    settings = Settings.from_env({"MCP_GATEWAY_MASTER_KEY": KEY}, state_dir=str(tmp_path))
    async with open_gateway(settings, manifest=parse_manifest(SMALL, base_dir=tmp_path), build_index=False) as gw:
        for name in ("session", "tracker"):
            answer = httpx2.Response(
                200,
                headers={"set-cookie": f"{name}=abc; Path=/"},
                request=httpx2.Request("GET", "http://127.0.0.1:9/notes"),
            )
            gw._http.cookies.extract_cookies(answer)  # what the client does with every answer
        assert len(gw._http.cookies.jar) == 0
        assert "cookie" not in gw._http.build_request("GET", "http://127.0.0.1:9/notes").headers


async def test_the_audit_retry_window_comes_from_the_environment(tmp_path: Path) -> None:
    manifest = parse_manifest(SMALL, base_dir=tmp_path)
    env = {"MCP_GATEWAY_MASTER_KEY": KEY, "MCP_GATEWAY_AUDIT_RETRY_SECONDS": "0.25"}
    async with open_gateway(Settings.from_env(env, state_dir=str(tmp_path)), manifest=manifest) as gw:
        assert gw.auditor.retry_for == 0.25
    for bad in ("soon", "-1", "nan", "301"):
        env["MCP_GATEWAY_AUDIT_RETRY_SECONDS"] = bad
        with pytest.raises(GatewayError, match="MCP_GATEWAY_AUDIT_RETRY_SECONDS must be a number"):
            async with open_gateway(Settings.from_env(env, state_dir=str(tmp_path)), manifest=manifest):
                pass


def test_a_reload_log_line_names_every_section_that_changed(tmp_path: Path) -> None:
    # A reload that narrowed an agent's grant was logged "(no connector changed)": true of the
    # connectors, but the operator reading it learned nothing of what did change.
    from mcp_gateway.runtime import _changes  # pyright: ignore[reportPrivateUsage]

    before = parse_manifest(SMALL, base_dir=tmp_path)
    granted = parse_manifest(SMALL + "agents:\n  - {name: bot, connectors: [notes]}\n", base_dir=tmp_path)
    assert _changes(before, before) == " (nothing changed)"
    assert _changes(before, granted) == " (changed agents)"
    renamed = parse_manifest(SMALL.replace("List the notes", "List notes"), base_dir=tmp_path)
    assert _changes(granted, renamed) == " (changed notes; changed agents)"
