"""The audit trail: one row per call decision, never a secret, never in the way.

``Auditor.record`` never fails the call it describes: the call has already been
decided, and failing it now would be worse than a missing row. Storage failures are counted
(``failures``, shown on ``/healthz`` and the operator page) and logged at WARNING to stderr.

Inside ``async with auditor.running():`` (``runtime.open_gateway`` enters it) one background task
writes the rows: ``record`` puts the row on a bounded queue, and the writer writes whatever is queued
in one transaction (a group commit). With ``durable`` (the default) ``record`` then waits
until the batch holding its row is committed, so an answer never goes back before its audit row is
in the database; the writer does not linger, since callers wait: rows recorded while a batch is
being written form the next batch. Without ``durable`` ``record`` returns as soon as the row is
queued, and the writer waits ``linger`` (5 ms) after the first row for others to join it. Without
``running``, ``record`` writes the row before it returns, as a one-shot tool or a test that builds a
``Gateway`` by hand expects.

Durable rows on a store that can write on the caller's thread (``InlineAuditStore``: SQLite, where a
commit is a WAL append, no fsync) skip the queue while it is empty: ``record`` writes the row itself
and returns once it is committed, with no hop to a worker thread (which costs several times the
write in wake-ups). When the store cannot write without waiting (a lock held elsewhere) or fails, or
rows are already queued (their order is kept), the row takes the queued path above. Every
``CHECKPOINT_EVERY`` such rows the writer task runs the store's housekeeping (the WAL checkpoint,
which fsyncs) off the event loop.

A call that reaches for the upstream records twice (``Gateway.call``): a ``started`` row with a
``call_id`` before the request leaves, then its outcome with the same ``call_id``, which settles
that row (one row per call: the store keeps open rows apart and drops a call's open row when its
outcome is appended, in the same statement). ``open_gateway`` marks the rows a crash left
``started`` as ``interrupted`` when the gateway starts again (``Auditor.interrupt_started``).

No answer without a durable record: ``record`` tells its caller whether the row is durable. With a
``journal`` (``runtime.open_gateway`` gives one in the state folder), an outcome row (anything but
``started``) the store refuses while its caller waits (``durable``, or no writer) is retried for
``retry_for`` seconds (``RETRY_SECONDS``, with back-off), then appended to the journal
(``store.audit_journal.AuditJournal``: one fsynced JSON line per row, the same redacted row), and
``record`` answers True: the row is durable on the local disk. The journal is replayed into the
store exactly once (``AuditStore.replay_audits`` leaves out rows it already holds) by a task inside
``running``: soon after the next row the store commits, and every ``replay_every`` seconds while
rows wait; and at start, by ``interrupt_started``, before it marks calls ``interrupted``, which
skips the calls still journaled. When even the journal refuses the row (a full or read-only disk),
``record`` answers False and the row is counted in ``failures``: the ``Gateway`` then withholds the
upstream's answer from the agent and says that the call ran but its outcome could not be recorded
(``core.gateway.unrecorded``). Without a journal (a test or a tool that builds an ``Auditor`` by
hand), a refused row is counted and ``record`` answers False at once. Without ``durable`` nobody
waits for a row, so the writer journals a refused batch's outcome rows itself, without retrying.
A ``started`` row the store refuses is journaled at once, without the retries (its request waits to
leave): a call whose request reached the upstream has a record even when the store was down and the
process died before the outcome. Replayed, it opens its call in the store unless the outcome is there
already (``AuditStore.replay_audits``), so a start marks it ``interrupted`` only when no outcome came.
When the journal refuses it too, ``record`` answers False and the ``Gateway`` sends nothing.

Guarantees of the background writer:

- Every row handed to ``record`` is written or counted in ``failures``; a batch that cannot be
  written counts every row in it (it was one transaction, so none of it is in the table).
- The queue holds ``max_queued`` rows. When it is full, ``record`` waits for room (backpressure:
  the calls slow down to the disk's pace rather than lose rows) for at most ``full_wait`` seconds,
  then counts the row as a failure. It fills only when the database is stuck (another process
  holding the write lock past the busy timeout, a full disk), where writes would fail anyway.
- ``flush()`` returns once every row recorded before it was called is written or counted: for
  readers in this process (the operator page, tests) that read right after a call.
- Leaving ``running`` (gateway close, SIGTERM over HTTP, EOF on stdio: each unwinds
  ``open_gateway``) stops taking rows and writes everything queued before it returns, for at most
  ``drain_timeout`` seconds; rows still unwritten after that are counted and logged, never silently
  dropped. A signal under stdio cannot unwind (``server/app.py``); it calls ``close()``, which does
  the same, before the process ends.

Crash window: with ``durable``, none for answered calls (the answer waits for the commit), and a
call whose request reached the upstream has at least its ``started`` row. Without ``durable``, rows
are in memory between ``record`` and the writer's commit, normally the linger plus one write,
and at most the queue's worth when the disk is stuck; a process that dies without
unwinding (SIGKILL, OOM kill, power loss) loses those rows. A clean stop loses none either way.
(SQLite runs with ``synchronous=NORMAL`` in WAL mode: a commit survives a process crash, not a power
loss; PostgreSQL commits are durable by its own ``synchronous_commit``.)
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..store.audit_journal import AuditJournal
from ..store.contract import AuditRecord, AuditStore, InlineAuditStore
from ..store.wait_budget import WaitBudget, current_budget, sharing

__all__ = ["Auditor", "args_json", "args_preview", "capped_preview"]

JOURNAL_LOG_EVERY = 60.0
"""Seconds between two log lines about audit rows going to the journal during one outage."""

logger = logging.getLogger(__name__)
PREVIEW_CHARS = 512
MAX_QUEUED = 1024
MAX_BATCH = 256
FULL_WAIT_SECONDS = 5.0
DRAIN_SECONDS = 10.0
LINGER_SECONDS = 0.005
"""How long the writer waits after the first queued row for more to join its batch. Writing each row as it
comes costs a thread hop to aiosqlite's worker and a commit per call; lingering lets sequential calls
share both, and costs nothing a reader can notice (``flush`` cuts it short)."""


RETRY_SECONDS = 3.0
"""How long a waiting caller keeps trying to commit its outcome row before journaling it: a database
that restarts or fails over within that never sends a row to the journal."""
RETRY_FIRST_DELAY = 0.05
RETRY_MAX_DELAY = 1.0
MAX_UNWRITTEN = 10_000
"""Outcome rows kept in memory when the store and the journal both refused them (beyond: the oldest go)."""
REPLAY_EVERY = 5.0
"""Seconds between two replays of a journal holding rows (the next committed row starts one sooner)."""

CHECKPOINT_EVERY = 200
"""Rows written on the caller's thread between two store housekeeping runs. An audit row adds ~2
pages to SQLite's WAL (a call's two rows ~4.3): 200 rows stay under SQLite's own auto-checkpoint
threshold of 1,000 pages."""


def args_preview(args: Any) -> str:
    """A capped, compact rendering of already-redacted arguments."""
    return capped_preview(args_json(args))


_CANONICAL = json.JSONEncoder(sort_keys=True, default=str, ensure_ascii=False, separators=(",", ":"))
"""``json.dumps`` with these options builds an encoder on every call (every call's audit row renders
its arguments); this one is made once. ``encode`` keeps no state, so it is shared."""


def args_json(args: Any) -> str:
    """Arguments as canonical JSON (sorted keys, compact, not ASCII-escaped): ``args_preview`` uncapped."""
    return _CANONICAL.encode(args)


def capped_preview(text: str) -> str:
    """``args_json``'s text as the audit row shows it."""
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"


class Auditor:
    """Writes audit rows, and counts the ones it could not write.

    Args:
        store: where rows go.
        max_queued: rows the background queue holds before ``record`` waits.
        max_batch: rows the writer takes into one transaction at most.
        full_wait: seconds ``record`` waits for room in a full queue before counting the row as failed.
        drain_timeout: seconds leaving ``running`` waits for the queue to be written.
        linger: seconds the writer waits after the first row for more rows to batch with it
            (not with ``durable``: the callers wait, so it writes at once).
        durable: ``record`` returns only once its row is committed (or counted as failed).
        journal: where outcome rows the store refuses go (see the module docstring); None: nowhere.
        retry_for: seconds a refused outcome row is retried before it is journaled.
        replay_every: seconds between replays while the journal holds rows.
    """

    def __init__(
        self,
        store: AuditStore,
        *,
        max_queued: int = MAX_QUEUED,
        max_batch: int = MAX_BATCH,
        full_wait: float = FULL_WAIT_SECONDS,
        drain_timeout: float = DRAIN_SECONDS,
        linger: float = LINGER_SECONDS,
        durable: bool = True,
        journal: AuditJournal | None = None,
        retry_for: float = RETRY_SECONDS,
        replay_every: float = REPLAY_EVERY,
    ) -> None:
        if max_queued < 1 or max_batch < 1:
            raise ValueError("max_queued and max_batch must be at least 1")
        self._store = store
        self._max_queued = max_queued
        self._max_batch = max_batch
        self._full_wait = full_wait
        self._drain_timeout = drain_timeout
        self._linger = 0.0 if durable else linger
        self.durable = durable
        self._inline = store if durable and isinstance(store, InlineAuditStore) else None
        """The store's synchronous write, used for durable rows while nothing is queued."""
        self._inline_rows = 0
        """Rows written inline since the last housekeeping was asked for."""
        self._hurry = anyio.Event()
        """Set by ``flush`` and ``close``: write what is queued now, without lingering."""
        self.failures = 0
        """Rows that could not be written (storage errors, a full queue, a drain that timed out)."""
        self._send: MemoryObjectSendStream[_Queued | None] | None = None
        """The writer's queue: rows, and None for a housekeeping run (``CHECKPOINT_EVERY``)."""
        self._accepted = 0
        """Rows queued for the writer, ever."""
        self._settled = 0
        """Rows the writer has written or counted as failed, ever."""
        self._progress = anyio.Event()
        """Set (and replaced) whenever ``_settled`` moves or the writer stops: what ``flush`` waits on."""
        self._writing = False
        self._writer: anyio.CancelScope | None = None
        """The writer task's scope, while it runs."""
        self._stopped = anyio.Event()
        self._stopped.set()
        self._journal = journal
        self.retry_for = retry_for
        self._replay_every = replay_every
        self.journal_pending = journal is not None and journal.pending()
        """Rows may wait in the journal: the replay task runs, and a committed row wakes it."""
        self._replay_wanted = anyio.Event()
        self._replayer: anyio.CancelScope | None = None
        self.journaled = 0
        """Rows the store refused that went to the journal instead, ever."""
        self.replayed = 0
        """Journaled rows a replay appended to the store, ever."""
        self._journal_said: tuple[float, int] | None = None
        self._unwritten: list[AuditRecord] = []
        """Outcome rows the store and the journal both refused (a full disk): the call ran, and its outcome is
        known, so it is kept here and written by the replay task once either takes it, not left ``started``."""
        self._failed_said: tuple[float, int] | None = None
        """When a lost write was last logged, and the rows lost since without a line."""
        """When journaling was last logged, and the rows journaled since without a line (None: the
        journal is empty, so the next row journaled is logged at once)."""
        self.on_store: Callable[[BaseException | None], None] | None = None
        """Told how each write to the store went: None when it committed, else what the store raised (the
        gateway's ``StoreHealth``, which logs the cause: a row journaled is no sign the store is back)."""

    @property
    def backlog(self) -> int:
        """Rows accepted and not yet written (nor counted as failed), for the metrics."""
        return self._accepted - self._settled

    async def record(self, row: AuditRecord) -> bool:
        """Write ``row`` (or queue it, inside ``running``; with ``durable``, and wait for its batch's
        commit). Never raises for a storage problem.

        Returns:
            False when the row is lost: the store refused it and so did the journal (or there is
            none), and it is counted in ``failures``. True when it is committed or journaled, and,
            without ``durable``, as soon as it is queued.
        """
        send = self._send
        if send is None:
            return await self._written(row, await self._write([row]))
        if self._inline is not None and self._accepted == self._settled and self._write_now(row, send):
            return True
        # Counted before the hand-off, and settled exactly once whatever happens next, so ``flush``
        # also waits for a row still waiting for room.
        self._accepted += 1
        item = _Queued(row, anyio.Event() if self.durable else None, current_budget() if self.durable else None)
        try:
            send.send_nowait(item)
            return await self._when_settled(item)
        except anyio.WouldBlock:
            pass
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return await self._written(row, await self._write_here(row))
        # Backpressure, shielded: a caller cancelled meanwhile must not lose the row it decided.
        queued = False
        with anyio.move_on_after(self._full_wait, shield=True):
            try:
                await send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return await self._written(row, await self._write_here(row))
            queued = True
        if queued:
            return await self._when_settled(item)
        self._settle(1)
        return await self._written(row, "the audit queue stayed full")

    async def _when_settled(self, item: _Queued) -> bool:
        """Wait for the writer to settle a queued row, then see to it (``_written``). Shielded, like
        the back-off: a caller cancelled meanwhile must not leave a refused row unjournaled and
        uncounted; the writer settles every row it took, so the wait is bounded."""
        done = False
        with anyio.CancelScope(shield=True):
            await item.wait()
            done = await self._written(item.row, item.error)
        return done

    async def _written(self, row: AuditRecord, error: str | None) -> bool:
        """What became of a row its caller waits for: committed (``error`` None), else retried and
        journaled when it is an outcome and there is a journal, else counted as lost."""
        if error is None:
            self._committed()
            return True
        if self._journal is None:
            self._fail(1, error)
            return False
        if row.status == "started":
            # Its request waits to leave: journaled at once, not retried (see the module docstring).
            with anyio.CancelScope(shield=True):
                return await self._to_journal([row], error)
        return await self._rescue(row, error)

    async def _rescue(self, row: AuditRecord, error: str) -> bool:
        """Retry a refused outcome row for ``retry_for`` seconds (with back-off), then journal it.
        Shielded: the call was decided, and a caller cancelled now must not lose its row."""
        journaled = False
        with anyio.CancelScope(shield=True):
            deadline = anyio.current_time() + self.retry_for
            delay = RETRY_FIRST_DELAY
            while (left := deadline - anyio.current_time()) > 0 and not _spent(current_budget()):
                await anyio.sleep(min(delay, left))
                delay = min(delay * 2, RETRY_MAX_DELAY)
                left = deadline - anyio.current_time()
                if left <= 0:
                    break
                with anyio.move_on_after(left):
                    retried = await self._write([row], retry=True)
                    if retried is None:
                        self._committed()
                        return True
                    error = retried
            journaled = await self._to_journal([row], error)
        return journaled

    async def _to_journal(self, rows: list[AuditRecord], error: str) -> bool:
        """Append rows the store refused to the journal; False (and counted) when it refuses them too."""
        journal = self._journal
        assert journal is not None
        try:
            await anyio.to_thread.run_sync(journal.append, rows)
        except Exception as exc:
            why = getattr(exc, "strerror", None) or type(exc).__name__
            outcomes = [row for row in rows if row.status != "started"]  # a refused start sends nothing
            kept = "; kept in memory, to be written once the store or the journal takes them" if outcomes else ""
            self._fail(len(rows), f"{error}; the audit journal refused them too ({why}){kept}")
            if outcomes:
                self._unwritten = (self._unwritten + outcomes)[-MAX_UNWRITTEN:]
                self._replay_wanted.set()
            return False
        self.journaled += len(rows)
        self.journal_pending = True
        # The replay task may be asleep with nothing to replay: from now on it tries every replay_every
        # seconds, not only once the next row reaches the store (which may not come for a long while).
        self._replay_wanted.set()
        # One line when an outage starts journaling, then at most one a minute with the count: a busy
        # gateway journals a row per call for as long as the outage lasts.
        now = anyio.current_time()
        said = self._journal_said
        if said is not None and now - said[0] < JOURNAL_LOG_EVERY:
            self._journal_said = (said[0], said[1] + len(rows))
            return True
        self._journal_said = (now, 0)
        logger.warning(
            "audit: the store refused %d audit row(s) (%s); journaled in %s (%d so far), to be replayed "
            "into the store when it answers again",
            len(rows) + (said[1] if said is not None else 0),
            error,
            journal.path,
            self.journaled,
        )
        return True

    def _committed(self) -> None:
        """A row reached the store: it answers again, so a waiting journal can be replayed now."""
        self._failed_said = None  # the next lost row is a new outage's, said at once
        if self.on_store is not None:
            self.on_store(None)
        if self.journal_pending:
            self._replay_wanted.set()

    async def replay(self) -> int:
        """Replay the journal into the store now; how many rows the store took. Never raises for a
        storage problem (the rows stay journaled for the next try)."""
        if self._unwritten:
            await self._write_unwritten()
        journal = self._journal
        if journal is None or not self.journal_pending:
            return 0
        before = self.journaled
        try:
            added = await journal.replay(self._store)
        except Exception as exc:
            # The store is still down (the usual case), or the journal cannot be read.
            level = logging.WARNING if isinstance(exc, OSError) else logging.DEBUG
            logger.log(level, "audit journal replay failed (%s); the rows stay journaled", type(exc).__name__)
            return 0
        if self.journaled == before and not await anyio.to_thread.run_sync(journal.pending):
            self.journal_pending = False  # else rows came in meanwhile: the next round takes them
            self._journal_said = None
        self.replayed += added
        if added:
            if self.on_store is not None:
                self.on_store(None)  # the store took rows: it is back, said before what it took
            logger.warning(
                "audit: replayed %d journaled outcome row(s) into the store (%d so far)", added, self.replayed
            )
        return added

    async def _write_unwritten(self) -> None:
        """The outcome rows kept in memory: into the store (once: ``replay_audits`` skips what it holds),
        else into the journal, else kept for the next round."""
        rows, self._unwritten = self._unwritten, []
        try:
            added = await self._store.replay_audits(rows)
        except Exception:
            if self._journal is not None:
                try:
                    await anyio.to_thread.run_sync(self._journal.append, rows)
                except Exception:
                    pass
                else:
                    self.journaled += len(rows)
                    self.journal_pending = True
                    logger.warning("audit: %d outcome row(s) kept in memory are journaled now", len(rows))
                    return
            self._unwritten = (rows + self._unwritten)[-MAX_UNWRITTEN:]
            return
        logger.warning("audit: %d outcome row(s) kept in memory are written to the store now", added)

    async def _replay_loop(self, scope: anyio.CancelScope) -> None:
        with scope:
            while True:
                if self.journal_pending or self._unwritten:
                    with anyio.move_on_after(self._replay_every):
                        await self._replay_wanted.wait()
                else:
                    await self._replay_wanted.wait()
                self._replay_wanted = anyio.Event()
                await self.replay()

    def _write_now(self, row: AuditRecord, send: MemoryObjectSendStream[_Queued | None]) -> bool:
        """Write ``row`` on this thread (the store's inline write); False when it must be queued."""
        assert self._inline is not None
        try:
            if not self._inline.append_audits_now((row,)):
                return False
        except Exception as exc:
            # The queued path tries again, and counts the row if that fails too.
            logger.debug("inline audit write failed (%s); queueing the row", type(exc).__name__)
            return False
        self._committed()
        self._inline_rows += 1
        if self._inline_rows >= CHECKPOINT_EVERY:
            try:
                send.send_nowait(None)  # the writer runs the housekeeping
                self._inline_rows = 0
            except anyio.WouldBlock:
                pass  # asked again with the next row
        return True

    async def interrupt_started(self) -> int:
        """Mark the ``started`` rows left by a gateway that died mid-call ``interrupted`` (at start);
        how many. The journal is replayed first, and the calls still in it are left alone: their
        outcome is known. Logged; never raises for a storage problem."""
        keep: set[str] = set()
        if self._journal is not None and self.journal_pending:
            await self.replay()
            try:
                keep = await anyio.to_thread.run_sync(self._journal.call_ids)
            except OSError as exc:
                # Which calls it holds is unknown: marking none beats marking a finished one.
                logger.warning("cannot read the audit journal (%s); no call marked interrupted", exc.strerror)
                return 0
        try:
            count = await self._store.interrupt_started_audits(keep)
        except Exception as exc:
            logger.warning("could not mark interrupted calls in the audit: %s", type(exc).__name__)
            return 0
        if count:
            logger.warning(
                "%d call(s) reached an upstream before this start and have no recorded outcome yet; marked "
                "interrupted in the audit (a gateway that stopped mid-call left them)",
                count,
            )
        return count

    async def _write_here(self, row: AuditRecord) -> str | None:
        """The writer is stopping: write an accepted row in the caller's task instead (``_write``)."""
        try:
            return await self._write([row])
        finally:
            self._settle(1)

    async def flush(self) -> None:
        """Return once every row recorded before this call is written (or counted as failed)."""
        target = self._accepted
        while self._settled < target and self._writing:
            self._hurry.set()
            await self._progress.wait()

    async def recent(self, limit: int = 50) -> list[AuditRecord]:
        """The latest ``limit`` rows, newest first, once what was recorded before this call is written."""
        await self.flush()
        return await self._store.list_audit(limit)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Auditor]:
        """Run the background writer for the body's duration; on the way out, write what is queued."""
        if self._writing:
            raise RuntimeError("this Auditor's writer is already running")
        send, receive = anyio.create_memory_object_stream[_Queued | None](self._max_queued)
        self._writer, self._stopped, self._hurry = anyio.CancelScope(shield=True), anyio.Event(), anyio.Event()
        error: BaseException | None = None
        self._writing = True
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._write_loop, receive, self._writer, self._stopped)
            if self._journal is not None:
                self._replayer = anyio.CancelScope()
                tg.start_soon(self._replay_loop, self._replayer)
            self._send = send
            try:
                yield self
            except BaseException as exc:
                if isinstance(exc, anyio.get_cancelled_exc_class()):
                    raise  # the group must see a cancellation to account for it
                # Anything else propagates as it is: handed to the group it would come out wrapped
                # in an ExceptionGroup and change what every caller of the gateway catches.
                error = exc
            finally:
                await self.close()
        if error is not None:
            raise error

    async def close(self) -> None:
        """Stop queueing (later rows are written by ``record`` itself) and wait, at most
        ``drain_timeout`` seconds, until the writer has written everything queued. Idempotent;
        leaving ``running`` calls it, and so may a signal handler that is about to end the process."""
        send, self._send = self._send, None
        self._hurry.set()  # and stays set: no lingering while the writer drains
        if self._replayer is not None:
            self._replayer.cancel()  # what it did not replay, the next start does
        if send is not None:
            send.close()  # the writer drains the queue, then sees the end of the stream
        with anyio.move_on_after(self._drain_timeout, shield=True):
            await self._stopped.wait()
        if self._writer is not None:
            self._writer.cancel()  # a no-op when it finished; else it gives up on what is left

    async def _write_loop(
        self, receive: MemoryObjectReceiveStream[_Queued | None], scope: anyio.CancelScope, stopped: anyio.Event
    ) -> None:
        # Shielded: the writer outlives a cancelled gateway long enough to drain the queue; only
        # ``running`` ends it early, when the drain timed out.
        try:
            with scope:
                async for first in receive:
                    if self._linger and not self._hurry.is_set():
                        with anyio.move_on_after(self._linger):
                            await self._hurry.wait()
                    if self._hurry.is_set() and self._send is not None:
                        self._hurry = anyio.Event()
                    batch: list[_Queued] = []
                    housekeeping = first is None
                    if first is not None:
                        batch.append(first)
                    while len(batch) < self._max_batch:
                        try:
                            item = receive.receive_nowait()
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                        if item is None:
                            housekeeping = True
                        else:
                            batch.append(item)
                    if batch:
                        try:
                            # Bounded by the waiting callers' budgets: a stalled database answers them in time.
                            with sharing(item.budget for item in batch):
                                error = await self._write([item.row for item in batch])
                            if error is None:
                                self._committed()
                            else:
                                await self._refused(batch, error)
                        except anyio.get_cancelled_exc_class():
                            self._abandon(batch, "the gateway stopped while they were being written")
                            raise
                        finally:
                            self._settle(len(batch))
                            for item in batch:
                                item.done()
                    if housekeeping:
                        await self._housekeeping()
        finally:
            # Cut short by the drain timeout: whatever is still queued will never be written.
            lost: list[_Queued] = []
            while True:
                try:
                    item = receive.receive_nowait()
                except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                    break
                if item is not None:
                    lost.append(item)
            receive.close()
            if lost:
                self._abandon(lost, "the gateway stopped before they were written")
                self._settle(len(lost))
                for item in lost:
                    item.done()
            self._writing = False
            self._settle(0)
            stopped.set()

    async def _housekeeping(self) -> None:
        """The inline writes' upkeep (``InlineAuditStore.checkpoint_audits``); a failure is logged, and
        the next run (or SQLite's own checkpoint on the store's other connection) catches up."""
        if self._inline is None:
            return
        try:
            await self._inline.checkpoint_audits()
        except Exception as exc:
            logger.warning("audit housekeeping (WAL checkpoint) failed: %s", type(exc).__name__)

    def _abandon(self, items: list[_Queued], why: str) -> None:
        """Rows the writer gives up on: a waiting caller learns ``why`` (and settles its row itself),
        the others are counted."""
        unattended = 0
        for item in items:
            if item.waited:
                item.error = why
            else:
                unattended += 1
        if unattended:
            self._fail(unattended, why)

    async def _refused(self, batch: list[_Queued], error: str) -> None:
        """A batch the store refused: each waiting caller settles its own row (``_written``); rows
        nobody waits for (without ``durable``) are journaled here, else counted."""
        unattended: list[AuditRecord] = []
        for item in batch:
            if item.waited:
                item.error = error
            else:
                unattended.append(item.row)
        if not unattended:
            return
        if self._journal is None:
            self._fail(len(unattended), error)
            return
        await self._to_journal(unattended, error)

    async def _write(self, batch: list[AuditRecord], *, retry: bool = False) -> str | None:
        """Write rows in one transaction: None once committed, else why not (the error's type; the
        caller counts or rescues the rows). Never raises (but for cancellation). A ``retry`` refused
        is not told to ``on_store``: its first refusal was."""
        try:
            if len(batch) == 1:
                await self._store.append_audit(batch[0])
            else:
                await self._store.append_audits(batch)
        except Exception as exc:
            if self.on_store is not None and not retry:
                self.on_store(exc)
            return type(exc).__name__
        return None

    def _settle(self, rows: int) -> None:
        self._settled += rows
        self._progress.set()
        self._progress = anyio.Event()

    def _fail(self, rows: int, why: str) -> None:
        """Count rows lost: logged when it starts, then at most once a minute, as journaling is."""
        self.failures += rows
        now = anyio.current_time()
        said = self._failed_said
        if said is not None and now - said[0] < JOURNAL_LOG_EVERY:
            self._failed_said = (said[0], said[1] + rows)
            return
        self._failed_said = (now, 0)
        rows += said[1] if said is not None else 0
        logger.warning("audit write failed for %d row(s) (%d so far): %s", rows, self.failures, why)


def _spent(budget: WaitBudget | None) -> bool:
    """The request has waited on the database all it may: a retry would fail at once, so the row is
    journaled now."""
    return budget is not None and budget.left <= 0


class _Queued:
    """A row on the writer's queue, and (``durable``) the event its caller waits on until it is settled."""

    __slots__ = ("_settled", "budget", "error", "row")

    def __init__(self, row: AuditRecord, settled: anyio.Event | None, budget: WaitBudget | None = None) -> None:
        self.row = row
        self._settled = settled
        self.budget = budget
        """The waiting caller's wait on the database (``store/wait_budget.py``), which bounds the write."""
        self.error: str | None = None
        """Why the store refused the row (set before ``done`` for a waiting caller), else None."""

    @property
    def waited(self) -> bool:
        """A caller waits for this row, and settles it itself when the store refuses it."""
        return self._settled is not None

    async def wait(self) -> None:
        if self._settled is not None:
            await self._settled.wait()

    def done(self) -> None:
        if self._settled is not None:
            self._settled.set()
