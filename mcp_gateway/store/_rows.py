"""Record <-> row conversion shared by the SQL stores (``SQLiteStore``, ``PostgresStore``).

Both backends keep the same tables, whose columns are named exactly like the record fields, so
turning a record into statement parameters and a fetched row back into a record is one piece of
code. What differs stays in each backend: placeholders and identifier quoting (its SQL), and how
a datetime travels (fixed-width UTC text for SQLite, ``timestamptz`` for asyncpg).

- A catalog is one row per connector: its actions as zlib-compressed JSON, (de)compressed and
  validated on a worker thread, since a GitHub-sized catalog is a few MB. Validation is the
  backend's ``ActionsDecoder``: pydantic's JSON validator unless the caller injects another
  (the runtime passes ``catalog_memory.validate_actions``, which shares equal values during a
  sync), so the store depends on no layer above the vocabulary. Every other
  ``CatalogRecord`` field lives in the ``info`` JSON column, so a new optional field there needs
  no migration. A row this build cannot read is a miss, so the next sync
  rebuilds it instead of the connector failing.
- A naive datetime is refused before it reaches SQL, whichever backend.
- ``meta`` values are compact JSON text.
"""

from __future__ import annotations

import json
import logging
import operator
import zlib
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import anyio.to_thread
from pydantic import BaseModel

from ..primitives.secrets import CredentialKey
from ..vocabulary.model import ACTIONS_ADAPTER, Action
from .catalog_lines import encode_lines
from .contract import AuditRecord, CatalogRecord

__all__ = [
    "CATALOG_COLUMNS",
    "CREDENTIAL_KEY",
    "ZLIB_LEVEL",
    "ActionsDecoder",
    "RecordColumns",
    "Row",
    "aware",
    "catalog_params",
    "credential_key",
    "decode_actions",
    "dump_meta",
    "encode_actions",
    "load_catalog",
    "load_meta",
    "split_audits",
]

_M = TypeVar("_M", bound=BaseModel)

# A field's annotation is a type form (pydantic types it loosely, and narrower in some releases than
# others): membership in a set of objects asks the same question on every release.
_DATETIME_ANNOTATIONS: frozenset[object] = frozenset({datetime, datetime | None})

ActionsDecoder = Callable[[bytes], list[Action]]
"""A catalog's actions JSON -> its actions. Runs on a worker thread (context variables copied)."""

# Level 1 compresses a GitHub-sized catalog to about the same size as level 6 in a fraction of the
# time; decompression speed does not depend on the level.
ZLIB_LEVEL = 1

CATALOG_COLUMNS = ("slug", "fingerprint", "info", "actions")
"""The catalog table's columns, in the order ``catalog_params`` gives their values."""
# CatalogRecord's fields other than these go to the `info` JSON column.
_CATALOG_OWN_COLUMNS = frozenset({"slug", "fingerprint", "actions"})

CREDENTIAL_KEY = ("connector", "principal", "name")
"""The credential table's primary key, the fields of ``CredentialKey``."""


class Row(Protocol):
    """A fetched row as both drivers give it (``sqlite3.Row``, ``asyncpg.Record``): values by column name."""

    def __getitem__(self, key: str, /) -> Any: ...


# -- values -------------------------------------------------------------------------------------


def aware(value: datetime) -> datetime:
    """``value`` itself if it is timezone-aware.

    Raises:
        ValueError: ``value`` is naive. It is ambiguous (local or UTC?) and guessing wrong would
            move every expiry by the UTC offset (asyncpg would read it as UTC); the Clock protocol
            promises aware UTC, so this is a caller bug.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value!r}: the store needs timezone-aware datetimes")
    return value


def credential_key(row: Row) -> CredentialKey:
    return CredentialKey(connector=row["connector"], principal=row["principal"], name=row["name"])


def dump_meta(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def load_meta(text: str) -> Any:
    return json.loads(text)


class RecordColumns(Generic[_M]):
    """One record model as the columns of a table named exactly like its fields.

    Each backend's table subclasses this with its SQL, and passes how a datetime goes to and comes
    back from its driver.
    """

    def __init__(self, model: type[_M]) -> None:
        self.model = model
        self.columns = tuple(model.model_fields)
        # From the instance's __dict__, where pydantic keeps every field's value: a dict lookup per
        # column instead of an attribute lookup through the model's class (cheaper; every
        # call writes two audit rows).
        self._values: operator.itemgetter[str] = operator.itemgetter(*self.columns)
        self.datetimes = frozenset(n for n, f in model.model_fields.items() if f.annotation in _DATETIME_ANNOTATIONS)
        self._datetime_at = tuple(i for i, n in enumerate(self.columns) if n in self.datetimes)
        """Positions of the datetime columns: only those are looked at (an audit row has one of 16)."""

    def values(self, record: _M, stamp: Callable[[datetime], object]) -> tuple[object, ...]:
        """The record's values in column order, every datetime passed through ``stamp``."""
        got: Any = self._values(record.__dict__)
        values: tuple[Any, ...] = (got,) if len(self.columns) == 1 else got
        if not self._datetime_at:
            return values
        stamped: list[Any] = list(values)
        for i in self._datetime_at:
            if (value := stamped[i]) is not None:
                stamped[i] = stamp(value)
        return tuple(stamped)

    def record(self, row: Row, parse: Callable[[Any], datetime] | None = None) -> _M:
        """The record in ``row``; ``parse`` turns each non-null datetime column back into a datetime."""
        data = {c: row[c] for c in self.columns}
        if parse is not None:
            for c in self.datetimes:
                if data[c] is not None:
                    data[c] = parse(data[c])
        return self.model.model_validate(data)


# -- audit --------------------------------------------------------------------------------------


def split_audits(records: Sequence[AuditRecord]) -> list[tuple[list[AuditRecord], bool]]:
    """``records`` as the writes they make, in this order: the ``started`` rows (True: for the
    ``audit_open`` table), then the outcomes (False: appended to ``audit``, each settling its call's
    open row, which may be among the first part). Empty parts are left out.

    Raises:
        ValueError: a ``started`` row without a ``call_id``: no outcome could ever settle it.
    """
    if len(records) == 1:  # every call's write
        record = records[0]
        opens = record.status == "started"
        if opens and record.call_id is None:
            raise ValueError("a started audit row needs a call_id")
        return [([record], opens)]
    started = [r for r in records if r.status == "started"]
    if any(r.call_id is None for r in started):
        raise ValueError("a started audit row needs a call_id")
    settled = [r for r in records if r.status != "started"]
    return [(rows, opens) for rows, opens in ((started, True), (settled, False)) if rows]


def replayed_rows(records: Sequence[AuditRecord]) -> Sequence[AuditRecord]:
    """``records``, checked: what ``replay_audits`` takes. A ``started`` row (journaled when the store
    refused it before its request left) must name its call.

    Raises:
        ValueError: a ``started`` row without a ``call_id``.
    """
    if any(r.status == "started" and r.call_id is None for r in records):
        raise ValueError("a replayed started row needs its call_id")
    return records


def audit_identity(record: AuditRecord) -> tuple[datetime, str | None, str, str]:
    """What makes two audit rows the same row for ``replay_audits``: the instant, the call, who, what."""
    return (record.at, record.call_id, record.user, record.requested)


# -- catalog ------------------------------------------------------------------------------------


def encode_actions(actions: list[Action]) -> bytes:
    # One action a line: the same JSON array, which a reader can split without parsing (``catalog_lines``).
    return zlib.compress(encode_lines(actions), ZLIB_LEVEL)


def decode_actions(blob: bytes, validate: ActionsDecoder = ACTIONS_ADAPTER.validate_json) -> list[Action]:
    return validate(zlib.decompress(blob))


async def catalog_params(record: CatalogRecord) -> tuple[str, str, str, bytes]:
    """The catalog row of ``record``, in ``CATALOG_COLUMNS`` order; compressed on a worker thread."""
    blob = await anyio.to_thread.run_sync(encode_actions, record.actions)
    info = record.model_dump_json(exclude=set(_CATALOG_OWN_COLUMNS))
    return (record.slug, record.fingerprint, info, blob)


async def load_catalog(
    slug: str, row: Row, log: logging.Logger, validate: ActionsDecoder = ACTIONS_ADAPTER.validate_json
) -> CatalogRecord | None:
    """The catalog in ``row`` (its ``fingerprint``, ``info`` and ``actions``), or None when this build
    can no longer read it: a row written by a build whose ``Action`` had another shape is a miss,
    reported on the backend's ``log``, so the next sync rebuilds it instead of the connector failing."""
    try:
        # A few MB of JSON: decompress and validate on a worker thread, outside the store's lock.
        actions = await anyio.to_thread.run_sync(decode_actions, row["actions"], validate)
        info = {k: v for k, v in json.loads(row["info"]).items() if k in CatalogRecord.model_fields}
        return CatalogRecord.model_validate(
            {**info, "slug": slug, "fingerprint": row["fingerprint"], "actions": actions}
        )
    except (zlib.error, ValueError) as exc:  # ValueError covers pydantic's ValidationError and bad JSON
        log.warning("stored catalog of %s is unreadable by this build (%s); it will be rebuilt", slug, exc)
        return None
