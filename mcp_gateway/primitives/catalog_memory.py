"""A catalog's memory footprint (the budget: at most 150 MB resident with 10,000 actions).

Most of a catalog's memory is its actions' input schemas, and real APIs repeat themselves: GitHub's
``owner``, ``repo``, ``per_page`` and ``page`` parameters, the same enums, the same nested objects,
hundreds of times each. ``CatalogSharing`` hash-conses the actions one sync loads: every equal JSON
sub-tree of their schemas becomes one object, equal strings one string, equal ``ParamSpec``s and
bindings one model, and pydantic's per-instance ``__pydantic_fields_set__`` one set per shape. The
canonical trees are ``FrozenDict`` / ``FrozenList``: still ``dict`` and ``list`` (JSON encoders,
pydantic, jsonschema and ``isinstance`` see no difference) but every mutating method raises, so a
write into one action's schema cannot leak into another's. Input schemas are read-only after load
by contract; ``copy.deepcopy`` one to edit it.

Sharing keeps order and types exactly (``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` stay apart, as do
``1``, ``1.0`` and ``True``), so every result is byte for byte what it was.

What stays resident is also a matter of where objects land in the heap, so a sync (``sync.py``)
 - decodes stored catalogs through ``validate_actions``, which shares each action as soon as it is
   validated while the sync's table is ``active``: a catalog never exists twice;
 - parks each catalog it normalizes from a spec as compressed JSON and decodes it after the last
   spec was parsed, so that no parse leaves its garbage around long-lived actions;
 - hands the heap it freed back to the OS (``release_free_memory``).
"""

from __future__ import annotations

import ctypes
import gc
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from operator import is_
from typing import Annotated, Any, NoReturn, cast

from pydantic import AfterValidator, BaseModel, TypeAdapter, ValidationInfo

from ..vocabulary.model import ACTIONS_ADAPTER, Action

__all__ = [
    "CatalogSharing",
    "FrozenDict",
    "FrozenList",
    "collect_frozen_garbage",
    "limit_malloc_arenas",
    "pin_mmap_threshold",
    "release_free_memory",
    "validate_actions",
]


def _read_only(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(
        f"catalog {type(self).__name__} objects are shared between actions and read-only; copy before editing"
    )


class FrozenDict(dict[str, Any]):
    """A ``dict`` whose mutating methods raise ``TypeError``: a shared, read-only JSON object."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        # copy / deepcopy / pickle give plain, editable dicts (a subclass would be rebuilt by
        # __setitem__, which raises).
        return dict, (dict(self),)


class FrozenList(list[Any]):
    """A ``list`` whose mutating methods raise ``TypeError``: a shared, read-only JSON array."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __reduce__(self) -> tuple[type[list[Any]], tuple[list[Any]]]:
        return list, (list(self),)


_HASH_BITS = (1 << 30) - 1
"""Table keys are hashes cut to 30 bits, the smallest int object (one 30-bit digit); a sync of 10,000
actions has ~100,000 nodes, so a cut hash rarely collides, and every hit is verified anyway."""


_NOT_JSON = object()


class _Bucket(list[Any]):
    """Canonical values whose hashes collide (rare): a type of its own, unlike any JSON list."""

    __slots__ = ()


class CatalogSharing:
    """One table of canonical values, for one batch of loads; clear it when the batch is done.

    A container is looked up by the hash of its children's identities (they are canonical already,
    shared bottom-up) and a hit is verified child by child with ``is``, so equal means equal in type,
    order and value. The table holds one small int per container besides the values themselves:
    everything it allocates and frees at the end lands in few heap pages (the memory budget counts what
    stays resident, and freed pages full of holes do).
    """

    def __init__(self) -> None:
        self.closed = False
        self._nodes: dict[int, Any] = {}
        self._strings: dict[str, str] = {}
        self._ints: dict[int, int] = {}
        self._fields_sets: dict[tuple[type[BaseModel], frozenset[str]], set[str]] = {}
        self._parked: dict[str, bytes] = {}

    def park(self, key: str, actions: list[Action]) -> None:
        """Keep a just-normalized catalog as compressed JSON until ``unpark``.

        Its objects were made while its spec was parsed, and every spec parsed after it would put its
        garbage around them: the heap's pages each keep a few live objects and stay resident. Decoded
        after the last parse instead, a catalog packs into few pages, as on a warm restart.
        """
        self._parked[key] = zlib.compress(ACTIONS_ADAPTER.dump_json(actions), 1)

    def unpark(self) -> dict[str, list[Action]]:
        """The parked catalogs, decoded and shared, by key (each is dropped from the table)."""
        out: dict[str, list[Action]] = {}
        while self._parked:
            key, blob = self._parked.popitem()
            out[key] = _SHARING_ADAPTER.validate_json(zlib.decompress(blob), context={_CONTEXT_KEY: self})
        return out

    @contextmanager
    def active(self) -> Iterator[None]:
        """Within it (this task, and the worker threads it starts), ``validate_actions`` shares each
        action through this table as soon as it is validated: a stored catalog never exists unshared,
        and its garbage, one action's worth at a time, is reused at once instead of leaving holes."""
        token = _ACTIVE.set(self)
        try:
            yield
        finally:
            _ACTIVE.reset(token)

    def clear(self) -> None:
        """Drop the table (what was shared stays shared) when the batch is done, whoever still holds it
        (a task started meanwhile keeps a copy of the context ``active`` set)."""
        self.closed = True
        for table in (self._nodes, self._strings, self._ints, self._fields_sets, self._parked):
            table.clear()

    def share_actions(self, actions: list[Action]) -> list[Action]:
        """Replace each action's schema, texts and binding by canonical equal values, in place.

        The actions must be fresh from a source or the store, not yet handed out: their fields are
        swapped under pydantic's ``frozen`` (each for an equal value, so nothing observable changes).
        An action already shared (its schema is frozen) is left as it is. Returns ``actions``.
        """
        share_json, model, strings = self.share_json, self._model, self._strings
        for action in actions:
            fields = cast(dict[str, Any], action.__dict__)
            if type(fields["input_schema"]) is FrozenDict:
                continue
            fields["input_schema"] = share_json(fields["input_schema"])
            fields["summary"] = strings.setdefault(fields["summary"], fields["summary"])
            fields["description"] = strings.setdefault(fields["description"], fields["description"])
            fields["binding"] = model(fields["binding"])
            object.__setattr__(action, "__pydantic_fields_set__", self._fields_set(action))
        return actions

    def share_json(self, value: Any) -> Any:
        """The canonical object equal to ``value`` (a JSON-like tree): frozen containers, shared leaves."""
        kind = type(value)
        if kind is str:
            return self._strings.setdefault(value, value)
        if kind is dict or kind is FrozenDict:
            strings = self._strings
            keys: list[Any] = [strings.setdefault(k, k) if type(k) is str else _NOT_JSON for k in value]
            if _NOT_JSON in keys:
                return value  # a non-str key: not JSON, so not ours to merge
            children = [self.share_json(child) for child in value.values()]
            digest = hash((*map(id, keys), *map(id, children))) & _HASH_BITS
            for found in self._candidates(digest):
                if (
                    type(found) is FrozenDict
                    and len(found) == len(keys)
                    and all(map(is_, found, keys))
                    and all(map(is_, found.values(), children))
                ):
                    return found
            return self._add(digest, FrozenDict(zip(keys, children, strict=True)))
        if kind is list or kind is FrozenList:
            children = [self.share_json(child) for child in value]
            digest = hash(tuple(map(id, children))) & _HASH_BITS
            for found in self._candidates(digest):
                if type(found) is FrozenList and len(found) == len(children) and all(map(is_, found, children)):
                    return found
            return self._add(digest, FrozenList(children))
        if kind is int:
            # Not bool (True == 1 in Python, not in JSON), nor float (-0.0 == 0.0): those stay as they are.
            return self._ints.setdefault(value, value)
        return value

    def _candidates(self, digest: int) -> tuple[Any, ...] | list[Any]:
        found = self._nodes.get(digest)
        if found is None:
            return ()
        return found if type(found) is _Bucket else (found,)

    def _add(self, digest: int, value: Any) -> Any:
        found = self._nodes.get(digest)
        if found is None:
            self._nodes[digest] = value
        elif type(found) is _Bucket:
            found.append(value)
        else:
            self._nodes[digest] = _Bucket((found, value))
        return value

    def _model(self, model: BaseModel) -> BaseModel:
        """The canonical model equal to ``model`` (a frozen binding or ``ParamSpec``): fields shared
        first, then the model itself, matched by its class, its fields' identities and which were set."""
        fields = cast(dict[str, Any], model.__dict__)
        field = self._field
        for name, value in fields.items():
            fields[name] = field(value)
        fields_set = self._fields_set(model)
        values = fields.values()
        kind = type(model)
        digest = hash((id(kind), id(fields_set), *map(id, values))) & _HASH_BITS
        for found in self._candidates(digest):
            # A class's fields sit in its __dict__ in one order (extra="forbid": no others).
            if (
                type(found) is kind
                and found.__pydantic_fields_set__ is fields_set
                and all(map(is_, found.__dict__.values(), values))
            ):
                return found
        object.__setattr__(model, "__pydantic_fields_set__", fields_set)
        return self._add(digest, model)

    def _field(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self._strings.setdefault(value, value)
        if kind is tuple:
            items = tuple(map(self._field, value))
            digest = hash(tuple(map(id, items))) & _HASH_BITS
            for found in self._candidates(digest):
                if type(found) is tuple and len(found) == len(items) and all(map(is_, found, items)):
                    return found
            return self._add(digest, items)
        if isinstance(value, BaseModel):
            return self._model(value)
        return self.share_json(value)

    def _fields_set(self, model: BaseModel) -> set[str]:
        # Pydantic keeps a set of the fields given, per instance: ~700 bytes for an Action, and all
        # equal. A frozen model never changes its own (model_copy copies it first), so they can share.
        current = model.__pydantic_fields_set__
        return self._fields_sets.setdefault((type(model), frozenset(current)), current)


_ACTIVE: ContextVar[CatalogSharing | None] = ContextVar("mcp_gateway_catalog_sharing", default=None)
_CONTEXT_KEY = "mcp_gateway.catalog_sharing"


def _share_validated(action: Action, info: ValidationInfo) -> Action:
    sharing = info.context.get(_CONTEXT_KEY) if isinstance(info.context, dict) else None
    if isinstance(sharing, CatalogSharing) and not sharing.closed:
        sharing.share_actions([action])
    return action


_SHARING_ADAPTER: TypeAdapter[list[Action]] = TypeAdapter(list[Annotated[Action, AfterValidator(_share_validated)]])


def validate_actions(data: bytes | str) -> list[Action]:
    """A catalog's JSON -> its actions (``ACTIONS_ADAPTER.validate_json``), each shared as soon as it is
    validated when a ``CatalogSharing`` is ``active``. The stores decode catalogs with it."""
    sharing = _ACTIVE.get()
    if sharing is None or sharing.closed:
        return ACTIONS_ADAPTER.validate_json(data)
    return _SHARING_ADAPTER.validate_json(data, context={_CONTEXT_KEY: sharing})


_M_ARENA_MAX = -8
"""``mallopt``'s parameter for MALLOC_ARENA_MAX (glibc's malloc.h)."""

_M_MMAP_THRESHOLD = -3
"""``mallopt``'s parameter for MALLOC_MMAP_THRESHOLD_ (glibc's malloc.h)."""

MMAP_THRESHOLD = 128 * 1024
"""Allocations from this size get pages of their own, handed back when freed: glibc's initial
threshold, pinned. Left dynamic, glibc raises it after each large block is freed (up to 32 MB), and
from then on such blocks come from the heap and stay resident once freed: the dense index's matrix,
repacked after each embedded connector, and embedding batches. At 10,000 actions with the model
(``scripts/bench_discover.py``) RSS went 239-248 -> 221-224 MB, queries as fast."""


def _mallopt(param: int, value: int) -> bool:
    """glibc's ``mallopt``; False where there is none (musl, macOS, Windows) or it refuses."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(param, value))


def pin_mmap_threshold(nbytes: int = MMAP_THRESHOLD) -> bool:
    """Pin glibc's mmap threshold at ``nbytes`` (``MMAP_THRESHOLD``); False without glibc."""
    return _mallopt(_M_MMAP_THRESHOLD, nbytes)


def limit_malloc_arenas(arenas: int = 2) -> bool:
    """Cap glibc's malloc arenas for the threads that start from now on (what MALLOC_ARENA_MAX does),
    and pin its mmap threshold (``pin_mmap_threshold``); False without glibc.

    glibc gives each thread that allocates an arena of its own, up to eight per core; the worker
    threads that parse specs and decode catalogs leave theirs full of partly used, resident pages
    (10-20 MB at 10,000 actions). Under the GIL threads gain little from separate arenas."""
    capped = _mallopt(_M_ARENA_MAX, arenas)
    return pin_mmap_threshold() and capped


def release_free_memory() -> None:
    """Return the heap freed by a sync (parsed specs, decoded catalogs) to the OS: glibc keeps freed
    memory in its arenas, resident, unless asked to trim. A no-op where there is no glibc."""
    try:
        # The process's own symbols: libc is already loaded (no library search, no ldconfig).
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError, TypeError):  # musl, macOS, Windows: nothing to trim with
        return
    trim.argtypes = [ctypes.c_size_t]
    trim(0)


def collect_frozen_garbage() -> None:
    """After a reload replaced the catalogs: free the reference cycles among objects the server
    froze at its start (``gc.freeze``), which no collection looks at and which reference counting
    alone never frees, then freeze what is left again. One full collection (it walks every
    object) per reload; a no-op in a process that froze nothing."""
    if gc.get_freeze_count() == 0:
        return
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    release_free_memory()
