"""``catalog_memory``: equal values of a catalog become one read-only object, and nothing an agent
or the store sees changes (SPEC 12: <= 150 MB resident with 10,000 actions).

Real specs (the bundled GitHub and Petstore), the real SQLite store and a real gateway opened
cold then warm, as ``serve`` does.
"""

from __future__ import annotations

import copy
import gc
import json
import pickle
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcp_gateway.core import result_payload
from mcp_gateway.manifest import CATALOG_DIR
from mcp_gateway.primitives.catalog_memory import (
    CatalogSharing,
    FrozenDict,
    FrozenList,
    collect_frozen_garbage,
    limit_malloc_arenas,
    release_free_memory,
    validate_actions,
)
from mcp_gateway.runtime import Settings, open_gateway
from mcp_gateway.services.identity import OPERATOR
from mcp_gateway.sources.openapi import load_openapi
from mcp_gateway.vocabulary.model import ACTIONS_ADAPTER, Action, HttpBinding, ParamSpec

SPECS = CATALOG_DIR / "specs"
MASTER_KEY = "catalog-memory-test-master-key-0123456789abcdef"
OWNER = {"type": "string", "description": "The account owner of the repository. The name is not case sensitive."}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def action(path: str, extra: dict[str, Any]) -> Action:
    """A fresh action whose schema has the same ``owner`` parameter as every other (new objects each time)."""
    return Action(
        connector="api",
        path=path,
        summary=f"Do {path}",
        input_schema={
            "type": "object",
            "properties": {"owner": copy.deepcopy(OWNER), **copy.deepcopy(extra)},
            "required": ["owner"],
        },
        risk="read",
        binding=HttpBinding(method="GET", url=f"/{path}/{{owner}}", params=(ParamSpec(name="owner", location="path"),)),
    )


def test_equal_parameter_schemas_of_two_actions_become_one_object() -> None:
    a = action("repos.get", {"repo": {"type": "string"}})
    b = action("issues.list", {"page": {"type": "integer", "default": 1}})
    assert a.input_schema["properties"]["owner"] is not b.input_schema["properties"]["owner"]

    CatalogSharing().share_actions([a, b])

    assert a.input_schema["properties"]["owner"] is b.input_schema["properties"]["owner"]
    assert a.input_schema["required"] is b.input_schema["required"]
    assert isinstance(a.binding, HttpBinding) and isinstance(b.binding, HttpBinding)
    assert a.binding.params[0] is b.binding.params[0]
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__
    # Different schemas stay different objects, with their own values.
    assert a.input_schema is not b.input_schema
    assert a.input_schema["properties"]["repo"] == {"type": "string"}
    assert b.input_schema["properties"]["page"] == {"type": "integer", "default": 1}


def test_values_equal_in_python_but_not_in_json_stay_apart() -> None:
    sharing = CatalogSharing()
    # 1 == 1.0 == True in Python, and dicts compare without order; JSON tells them all apart.
    values = [{"const": 1}, {"const": True}, {"const": 1.0}, {"a": 1, "b": 2}, {"b": 2, "a": 1}, [1], [True], [], {}]
    shared = [sharing.share_json(copy.deepcopy(v)) for v in values]
    assert [json.dumps(s) for s in shared] == [json.dumps(v) for v in values]
    assert len({id(s) for s in shared}) == len(values)
    # The same values again are the same objects.
    assert all(sharing.share_json(copy.deepcopy(v)) is s for v, s in zip(values, shared, strict=True))


def _attempts(schema: dict[str, Any]) -> list[Callable[[], object]]:
    props, required = schema["properties"], schema["required"]

    def augmented_list() -> None:
        nonlocal required
        required += ["x"]

    def merged_dict() -> None:
        nonlocal props
        props |= {"x": {}}

    def delete_key() -> None:
        del props["owner"]

    return [
        lambda: schema.__setitem__("type", "array"),
        lambda: props["owner"].__setitem__("type", "integer"),
        lambda: schema.update(x=1),
        lambda: schema.setdefault("x", 1),
        lambda: schema.pop("type"),
        schema.popitem,
        schema.clear,
        delete_key,
        merged_dict,
        lambda: required.append("x"),
        lambda: required.extend(["x"]),
        lambda: required.insert(0, "x"),
        lambda: required.__setitem__(0, "x"),
        lambda: required.remove("owner"),
        required.pop,
        required.sort,
        required.reverse,
        required.clear,
        augmented_list,
    ]


def test_a_shared_schema_cannot_be_changed_in_place_and_copies_are_editable() -> None:
    a, b = action("repos.get", {}), action("issues.list", {})
    CatalogSharing().share_actions([a, b])
    before = json.dumps(b.input_schema)
    for attempt in _attempts(a.input_schema):
        with pytest.raises(TypeError, match="read-only"):
            attempt()
    assert json.dumps(a.input_schema) == json.dumps(b.input_schema) == before
    assert isinstance(a.input_schema, dict) and isinstance(a.input_schema["required"], list)

    # copy / deepcopy / dict() / slicing give plain containers: edit those.
    edited = copy.deepcopy(a.input_schema)
    edited["properties"]["owner"]["type"] = "integer"
    assert type(edited) is dict and type(edited["required"]) is list
    assert type(copy.copy(a.input_schema)) is dict and type(dict(a.input_schema)) is dict
    assert type(a.input_schema["required"][:]) is list
    assert b.input_schema["properties"]["owner"]["type"] == "string"
    assert pickle.loads(pickle.dumps(a)) == a
    # Pydantic copies still work, and leave the shared values alone.
    renamed = a.model_copy(update={"summary": "renamed"})
    assert renamed.summary == "renamed" and a.summary == "Do repos.get"
    assert "summary" in a.model_fields_set and b.model_fields_set == a.model_fields_set


@pytest.mark.anyio
async def test_sharing_changes_no_byte_of_a_real_catalog() -> None:
    spec = await load_openapi(str(SPECS / "github.json.gz"), connector="github")
    actions = spec.actions
    before = ACTIONS_ADAPTER.dump_json(actions)
    schemas = [json.dumps(a.input_schema) for a in actions]

    CatalogSharing().share_actions(actions)

    assert ACTIONS_ADAPTER.dump_json(actions) == before
    assert [json.dumps(a.input_schema) for a in actions] == schemas
    assert all(type(a.input_schema) is FrozenDict for a in actions)
    owners = {
        id(a.input_schema["properties"]["owner"])
        for a in actions
        if a.input_schema.get("properties", {}).get("owner") == OWNER
    }
    assert len(owners) == 1  # hundreds of operations, one ``owner`` schema


def test_the_stores_decoder_shares_only_while_a_sync_table_is_active() -> None:
    data = ACTIONS_ADAPTER.dump_json([action("repos.get", {}), action("issues.list", {})])
    plain = validate_actions(data)
    assert type(plain[0].input_schema) is dict  # outside a sync: exactly what pydantic decodes

    sharing = CatalogSharing()
    with sharing.active():
        shared = validate_actions(data)
    assert shared == plain
    assert type(shared[0].input_schema) is FrozenDict
    assert type(shared[0].input_schema["required"]) is FrozenList
    assert shared[0].input_schema["properties"]["owner"] is shared[1].input_schema["properties"]["owner"]

    sharing.clear()  # a table that was cleared shares nothing more, even where still active
    with sharing.active():
        assert type(validate_actions(data)[0].input_schema) is dict
    release_free_memory()  # no-ops without glibc; never raise
    limit_malloc_arenas()


def test_large_blocks_are_handed_back_once_freed() -> None:
    import platform
    import subprocess
    import sys

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("M_MMAP_THRESHOLD is a glibc malloc option")
    # In a process of its own: a test worker's other threads allocate too, and RSS would say so.
    # A large block freed raises glibc's own threshold: the next large ones come from the heap and, with
    # anything allocated after them, stay resident once freed (16.2 MB measured here with ``held_kb("dynamic")``).
    script = """
import sys
from mcp_gateway.primitives.catalog_memory import pin_mmap_threshold
if sys.argv[1] == "pin":
    assert pin_mmap_threshold()
def rss_kb():
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
block = bytearray(16 * 1024 * 1024)
del block
before = rss_kb()
blocks = [bytearray(2 * 1024 * 1024) for _ in range(8)]
after = [bytearray(100) for _ in range(1000)]
del blocks
print(rss_kb() - before)
"""

    def held_kb(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, check=True)
        return int(done.stdout)

    assert held_kb("pin") < 4 * 1024, "under 4 of the 16 MB the blocks held"


PETSTORE = SPECS / "petstore.json"


def manifest(tmp_path: Path) -> Path:
    body = "".join(
        f"  - slug: {slug}\n    base_url: http://127.0.0.1:9\n    auth: {{type: none}}\n"
        f"    source: {{openapi: {PETSTORE}}}\n"
        for slug in ("pets-a", "pets-b")
    )
    path = tmp_path / "manifest.yaml"
    path.write_text(f"project: memory\ndefault_mode: allow_all\npublic_url: http://127.0.0.1:1\nconnectors:\n{body}")
    return path


@pytest.mark.anyio
async def test_a_gateway_shares_across_connectors_cold_and_warm_and_answers_the_same(tmp_path: Path) -> None:
    expected = (await load_openapi(str(PETSTORE), connector="pets-a")).actions
    target = next(a for a in expected if a.input_schema.get("properties"))
    settings = Settings(
        manifest_path=manifest(tmp_path), state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": MASTER_KEY}
    )
    answers = []
    for _phase in ("cold", "warm"):  # specs parsed (catalogs parked, then decoded), then read back from SQLite
        async with open_gateway(settings) as gw:
            a, b = gw._index.get(f"pets-a.{target.path}"), gw._index.get(f"pets-b.{target.path}")
            assert a is not None and b is not None
            assert type(a.input_schema) is FrozenDict
            assert a.input_schema is b.input_schema  # the same spec twice: one schema
            assert a.binding is b.binding
            described = result_payload(await gw.describe(OPERATOR, f"pets-a.{target.path}"))
            found = result_payload(await gw.discover(OPERATOR, target.summary, detail=True))
            listed = result_payload(await gw.connectors(OPERATOR))
            answers.append(json.dumps([described, found, listed]))
            # A re-sync with nothing changed keeps the indexed actions: no second copy.
            await gw.sync()
            assert gw._index.get(f"pets-a.{target.path}") is a
            first = gw._catalogs.loaded["pets-a"].actions[0]
            assert first is gw._index.get(f"pets-a.{first.path}")
    assert answers[0] == answers[1]
    assert json.dumps(json.loads(answers[0])[0]["input_schema"]) == json.dumps(target.input_schema)
    assert [c["actions"] for c in json.loads(answers[0])[2]["connectors"]] == [len(expected), len(expected)]


@pytest.mark.anyio
async def test_one_connector_refreshed_alone_is_shared_too(tmp_path: Path) -> None:
    settings = Settings(
        manifest_path=manifest(tmp_path), state_dir=tmp_path / "state", env={"MCP_GATEWAY_MASTER_KEY": MASTER_KEY}
    )
    async with open_gateway(settings) as gw:
        from mcp_gateway.core.sync import sync_connector

        catalog = await sync_connector(gw._catalogs.config("pets-b"), gw.manifest, gw._store, gw.clock)
        assert catalog.actions and all(type(a.input_schema) is FrozenDict for a in catalog.actions)
        loaded = gw._catalogs.loaded["pets-b"].actions
        assert ACTIONS_ADAPTER.dump_json(catalog.actions) == ACTIONS_ADAPTER.dump_json(loaded)


class _Node:
    peer: _Node


def test_a_reload_frees_the_cycles_the_start_froze_and_freezes_the_rest_again() -> None:
    collect_frozen_garbage()  # nothing frozen: nothing to do, and nothing gets frozen
    assert gc.get_freeze_count() == 0
    node = _Node()
    node.peer = node
    alive = weakref.ref(node)
    gc.freeze()  # what the server does once it has started
    try:
        del node
        gc.collect()
        assert alive() is not None  # no collection looks at frozen objects
        collect_frozen_garbage()
        assert alive() is None
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
