"""The usage journal: where a settlement becomes durable before its call is answered.

Committing each settlement to the database before answering costs a commit wait per
call (and, under load, the committer's database work competes with the event loop
for the GIL). With a journal, the request path instead appends the settlement (its
reservation and usage events) as one JSON line to a file of this process's own, in
one ``write(2)``: a few microseconds, no fsync, no database, no thread hand-off. A
write the kernel took survives the process (a crash, ``kill -9``); it does not
survive a power loss before the next fsync, which is what SQLite's
``synchronous=NORMAL`` promises for its own commits too.

An applier thread then, every ``interval`` seconds:

1. reads the complete lines written after what it applied (a trailing partial line,
   a torn write of a crash, belongs to a call that was never answered);
2. fsyncs the file once;
3. settles them in groups of up to ``max_batch`` with ``Reservations.settle_many`` (one
   transaction a group: reservations and money levels) and hands their events to the
   sink (the ledger, or the Redis stream): the journal is their outbox already.
   Without a sink, the events go into the outbox table in the settling transaction;
4. when everything written has been applied, truncates the file to nothing.

There is no checkpoint: after a crash the whole file is applied again, which
settling allows (a reservation already settled is not charged again; the ledger
records each ``event_id`` once).

A group that fails is settled again one settlement at a time; a settlement that
fails alone while the database takes writes (others settled, or a probe write
succeeds) is moved to ``rejected.jsonl`` beside the journals and logged, so one bad
record never blocks the rest. When the database cannot be reached (or is read-only),
nothing is rejected: the records stay and are tried again.

Files: ``<dir>/<writer>.journal``, one per writer (a ``UsageJournal`` instance), each
held with an exclusive ``flock`` for the writer's life. A journal whose lock can be
taken has no writer any more (its process died, or closed it with records it could
not apply): every applier looks for such files at start and every
``recover_seconds``, applies them whole, and deletes them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import exc as sa_exc

from modelport.background.loops import BackgroundLoop, Backoff
from modelport.clock import Clock, SystemClock
from modelport.metering.events import event_to_doc
from modelport.metering.outbox import EncodedEvent, UsageSink
from modelport.metering.reservations import (
    Reservations,
    reservation_from_doc,
    reservation_to_doc,
)
from modelport.metering.types import Reservation, UsageEvent

_log = logging.getLogger(__name__)

SUFFIX = ".journal"
REJECTED = "rejected.jsonl"
_NEW = ".new"
"""A writer's file before it holds its lock (never matched by recovery's ``*.journal``)."""
_READ = 4 << 20
"""Most bytes read from a journal at once."""
_STALE_NEW = 60.0
"""A ``.new`` file nobody locks and older than this was left by a crash: removed."""
_BACKOFF = 1.0
"""Longest wait between tries while the database is unreachable."""
_CATCH_UP_ROUNDS = 4
"""Rounds a cycle may go to apply what arrived while it applied, to empty the file."""


def _gil_held_write() -> Callable[[int, bytes], int] | None:
    """The C library's ``write(2)``, called without letting go of the GIL (``ctypes.PyDLL``).

    ``os.write`` releases the GIL around the system call. On the busy event loop
    that hands the GIL to whichever thread waits for it (the applier, executor
    callbacks), and the loop then waits to get it back: measured on two cores at 64
    concurrent calls, about 40 µs of loop time per call, for a write of a few µs. A
    write of one line to the page cache does not block for long, so holding the GIL
    through it is the cheaper choice. None where the C library cannot be reached
    this way (``os.write`` is used then)."""
    try:
        import ctypes

        libc_write = ctypes.PyDLL(None, use_errno=True).write
    except (ImportError, OSError, AttributeError):
        return None
    libc_write.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
    libc_write.restype = ctypes.c_ssize_t

    def write(fd: int, data: bytes) -> int:
        while True:
            written = int(libc_write(fd, data, len(data)))
            if written >= 0:
                return written
            code = ctypes.get_errno()
            if code != errno.EINTR:
                raise OSError(code, os.strerror(code))

    return write


write_line: Callable[[int, bytes], int] = _gil_held_write() or os.write
"""How ``append`` writes its line: one ``write(2)``."""

Settlement = tuple[Reservation | None, Sequence[UsageEvent | EncodedEvent]]
_EVENT_FIELDS = frozenset(
    [
        "event_id",
        "tenant",
        "key_id",
        "model",
        "version",
        "manifest_digest",
        "unit",
        "quantity",
        "status",
        "started_at",
        "finished_at",
        "price_rule_id",
        "price_unit_price_micros",
        "price_per_units",
        "price_failure_rule",
        "price_failure_bps",
        "price_revenue_share_bps",
        "amount_micros",
        "publisher_micros",
        "source",
    ]
)
"""The fields ``event_from_doc`` cannot do without."""


def encode(reservation: Reservation | None, events: Sequence[UsageEvent]) -> bytes:
    """One settlement as one journal line (ends with a newline)."""
    return encode_docs(reservation, [event_to_doc(e) for e in events])


def encode_docs(reservation: Reservation | None, docs: Sequence[dict[str, Any]]) -> bytes:
    """``encode`` for events already as their documents (``event_to_doc``)."""
    doc = {"r": None if reservation is None else reservation_to_doc(reservation), "e": docs}
    return orjson.dumps(doc, option=orjson.OPT_APPEND_NEWLINE)


def decode(line: bytes) -> Settlement:
    """A journal line (without its newline) as a settlement; raises on a malformed line.
    The events stay documents (their outbox payload): not rebuilt, only checked for
    every field ``event_from_doc`` needs."""
    doc = orjson.loads(line)
    r = doc["r"]
    return (None if r is None else reservation_from_doc(r)), [_encoded(e) for e in doc["e"]]


def _encoded(doc: dict[str, Any]) -> EncodedEvent:
    if not isinstance(doc, dict) or not doc.keys() >= _EVENT_FIELDS:
        raise ValueError("not a usage event document")
    event_id, amount = doc["event_id"], doc["amount_micros"]
    if not isinstance(event_id, str) or not event_id or type(amount) is not int:
        raise ValueError("a usage event needs an event_id and an integer amount_micros")
    return EncodedEvent(event_id, amount, doc)


def transient(exc: BaseException) -> bool:
    """True for errors that say the database could not be reached (or was busy), not
    that this settlement is wrong: such settlements are kept and tried again."""
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(
        exc,
        sa_exc.OperationalError | sa_exc.InterfaceError | sa_exc.TimeoutError | ConnectionError,
    )


class _Record:
    """One journal line on its way to the database."""

    __slots__ = ("end", "error", "line", "settlement")

    def __init__(self, line: bytes, end: int) -> None:
        self.line = line
        self.end = end
        """Offset just past this line's newline."""
        self.settlement: Settlement | None = None
        self.error: BaseException | None = None
        try:
            self.settlement = decode(line)
        except Exception as exc:
            self.error = exc


class UsageJournal:
    """Appends settlements to this writer's journal file and applies them to the
    database in the background (see the module docstring)."""

    def __init__(
        self,
        directory: Path,
        reservations: Reservations,
        *,
        sink: UsageSink | None = None,
        interval_seconds: float = 0.1,
        max_batch: int = 512,
        recover_seconds: float = 5.0,
        clock: Clock | None = None,
    ) -> None:
        self.directory = Path(directory)
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._reservations = reservations
        self._sink = sink
        self._max_batch = max_batch
        self._recover_seconds = recover_seconds
        self._new_writer()
        self._write_lock = threading.Lock()
        self._apply_lock = threading.Lock()
        self._fd: int | None = None
        self._written = 0
        """Bytes in this writer's file (under ``_write_lock``)."""
        self._applied = 0
        """Bytes of it applied (under ``_apply_lock``)."""
        self._appended = 0
        self._resolved = 0
        self._retry_at = 0.0
        self._retry = Backoff(None, _BACKOFF)
        self._recover_at = 0.0
        self._loop = BackgroundLoop(
            "usage-journal", self._cycle, interval_seconds, clock=self._clock
        )
        self.rejected = 0
        """Settlements moved to ``rejected.jsonl`` by this applier."""
        self.recovered = 0
        """Journals of dead writers this applier applied and deleted."""

    @property
    def pending(self) -> int:
        """Settlements this writer appended and has not applied (nor rejected) yet."""
        return self._appended - self._resolved

    # ---- the request path

    def append(self, reservation: Reservation | None, events: Sequence[UsageEvent]) -> None:
        """Make one settlement durable (against a crash of this process): one line, one
        ``write(2)`` (``write_line``). Cheap and non-blocking enough for the event loop;
        thread-safe. Raises ``OSError`` when the write fails (nothing of it is left in
        the file)."""
        self._write(encode(reservation, events))

    def append_docs(self, reservation: Reservation | None, docs: Sequence[dict[str, Any]]) -> None:
        """``append`` for events already as their documents (``event_to_doc``)."""
        self._write(encode_docs(reservation, docs))

    def _write(self, line: bytes) -> None:
        with self._write_lock:
            fd = self._fd if self._fd is not None else self._open()
            try:
                written = write_line(fd, line)
                if written != len(line):
                    raise OSError(errno.ENOSPC, f"short write to {self.path}")
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, self._written)  # no torn line in front of the next
                raise
            self._written += written
            self._appended += 1

    def _open(self) -> int:
        """Create this writer's file and lock it (under ``_write_lock``). The file is
        created under a name recovery ignores and renamed once locked, so no recovery
        can take it for a dead writer's."""
        self.directory.mkdir(parents=True, exist_ok=True)
        fresh = self.directory / f"{self.writer}{_NEW}"
        fd = os.open(fresh, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(fresh, self.path)
            _fsync_dir(self.directory)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._written = 0
        return fd

    # ---- applying

    def start(self) -> None:
        """Start the applier thread (recovery of dead writers' journals first)."""
        self._recover_at = 0.0
        self._loop.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the applier thread; appends still work (``flush`` or ``close`` apply them)."""
        self._loop.stop(timeout)

    def flush(self, timeout: float = 10.0) -> bool:
        """Apply everything appended so far now (and recover dead writers' journals).
        True when nothing of this writer's is left to apply."""
        deadline = time.monotonic() + timeout
        if not self._apply_lock.acquire(timeout=max(0.0, timeout)):
            return False
        try:
            self._retry_at = 0.0
            self._apply_own()
            if time.monotonic() < deadline:
                self._recover()
        finally:
            self._apply_lock.release()
        return self.pending == 0

    def close(self, timeout: float = 10.0) -> None:
        """Flush, stop the applier and let go of the file: removed when empty, else left
        (unlocked) for recovery."""
        self._loop.stop(timeout)
        self.flush(timeout)
        with self._apply_lock, self._write_lock:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            if self._written == 0:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
            os.close(fd)  # releases the lock
            self._written = self._applied = 0
            # A later append starts a file of its own: what is left here (if anything)
            # is now a dead writer's, for recovery.
            self._new_writer()

    def _new_writer(self) -> None:
        self.writer = f"{os.getpid()}-{secrets.token_hex(6)}"
        self.path = self.directory / f"{self.writer}{SUFFIX}"

    def _cycle(self) -> None:
        if not self._apply_lock.acquire(blocking=False):
            return  # a flush is applying
        try:
            now = self._clock.monotonic()
            if now >= self._retry_at:
                self._apply_own()
            if now >= self._recover_at:
                self._recover_at = now + self._recover_seconds
                self._recover()
        finally:
            self._apply_lock.release()

    def _apply_own(self) -> None:
        """Apply this writer's new lines; truncate the file when all are applied.

        Calls keep appending while a group is applied, so the file is only ever empty
        again if the applier catches up: it goes round again for what arrived
        meanwhile (a short tail each time), a few times, before giving up until the
        next cycle."""
        for _ in range(_CATCH_UP_ROUNDS):
            with self._write_lock:
                fd, end = self._fd, self._written
            if fd is None:
                return
            if end > self._applied:
                self._applied, count, reachable = self._apply(fd, self._applied, end)
                self._resolved += count
                if not reachable:
                    return
            with self._write_lock:
                if self._fd != fd or self._applied != self._written:
                    continue
                if self._written:
                    os.ftruncate(fd, 0)
                    self._written = self._applied = 0
                return

    def _apply(self, fd: int, start: int, end: int) -> tuple[int, int, bool]:
        """Apply the complete lines of ``fd`` between ``start`` and ``end``: the offset up
        to which every line is settled or rejected, how many lines that is, and False
        when it stopped short because the database is unreachable."""
        offset, count, synced = start, 0, False
        while offset < end:
            data = os.pread(fd, min(end - offset, _READ), offset)
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                if len(data) < _READ:
                    break  # a partial last line: never answered, or still being written
                data = os.pread(fd, end - offset, offset)  # one line longer than a read
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    break
            if not synced:
                os.fsync(fd)
                synced = True
            records, position = [], offset
            for line in data[: cut - 1].split(b"\n"):
                position += len(line) + 1
                records.append(_Record(line, position))
            for first in range(0, len(records), self._max_batch):
                group = records[first : first + self._max_batch]
                done = self._settle(group)
                count += done
                if done < len(group):
                    return (group[done - 1].end if done else offset), count, False
                offset = group[-1].end
        return offset, count, True

    def _settle(self, group: list[_Record]) -> int:
        """Settle a group of records (reject the bad ones); how many of them, from the
        start, are settled or rejected (fewer than all: the database is unreachable)."""
        good = [r for r in group if r.error is None]
        try:
            self._commit([r.settlement for r in good])  # type: ignore[misc]
        except Exception as exc:
            if transient(exc):
                return self._unreachable(group, exc)
            self._one_by_one(good)
        else:
            self._retry.succeeded()
        done = 0
        for record in group:
            if record.error is not None:
                if transient(record.error):
                    return self._unreachable(group[done:], record.error) + done
                self._reject(record)
            done += 1
        return done

    def _commit(self, settlements: list[Settlement]) -> None:
        """Settle, then hand the events to the sink (straight to the ledger or stream: the
        journal is their outbox already), or without a sink write them to the outbox in
        the settling transaction. A failure keeps the records; applying them again
        settles nothing twice, and the ledger keeps each event once."""
        if self._sink is None:
            self._reservations.settle_many(settlements)
            return
        self._reservations.settle_many(settlements, outbox=False)
        # As documents: the sinks read them without building events.
        events = [e for _, encoded in settlements for e in encoded]
        if events:
            self._sink.deliver(events)

    def _one_by_one(self, records: list[_Record]) -> None:
        """Settle each record alone; mark those that fail (``error``). A record failing
        alone is only rejected (see ``_settle``) when the database takes writes (another
        record settled, or a probe write succeeds): otherwise its error is made
        transient, and it is kept."""
        settled = False
        for index, record in enumerate(records):
            try:
                self._commit([record.settlement])  # type: ignore[list-item]
            except Exception as exc:
                record.error = exc
                if transient(exc):  # the database went away: keep the rest untried
                    for rest in records[index + 1 :]:
                        rest.error = exc
                    return
            else:
                settled = True
        failed = [r for r in records if r.error is not None]
        if failed and not settled and not self._reservations.writable():
            outage = ConnectionError("the database does not take writes")
            for record in failed:
                record.error = outage

    def _unreachable(self, kept: list[_Record], exc: BaseException) -> int:
        self._retry_at = self._clock.monotonic() + self._retry.failed()
        _log.warning(
            "usage journal: %d settlement(s) kept, the database is unreachable: %s",
            len(kept),
            exc,
        )
        return 0

    def _reject(self, record: _Record) -> None:
        error = record.error
        _log.error(
            "usage journal: a settlement failed alone and was moved to %s: %s",
            self.directory / REJECTED,
            error,
            exc_info=error,
        )
        doc: dict[str, Any] = {
            "error": f"{type(error).__name__}: {error}",
            "rejected_at": time.time(),
            "line": record.line.decode("utf-8", "replace"),
        }
        path = self.directory / REJECTED
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, orjson.dumps(doc, option=orjson.OPT_APPEND_NEWLINE))
            os.fsync(fd)
        finally:
            os.close(fd)
        self.rejected += 1

    # ---- recovery

    def _recover(self) -> None:
        """Apply and delete the journals of dead writers (their lock is free)."""
        for path, fd in self._orphans():
            size = os.fstat(fd).st_size
            if path.name.endswith(_NEW):
                if size == 0 and time.time() - os.fstat(fd).st_mtime > _STALE_NEW:
                    os.unlink(path)
                continue
            if not self._apply(fd, 0, size)[2]:
                continue  # the database is unreachable: try again later
            # Every complete line is applied; what may be left is a torn last line.
            os.unlink(path)
            self.recovered += 1
            _log.info("usage journal: applied and removed %s (its writer is gone)", path.name)

    def _orphans(self) -> Iterator[tuple[Path, int]]:
        """Other writers' files whose lock this applier holds while it handles them."""
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return
        for name in names:
            if not (name.endswith(SUFFIX) or name.endswith(_NEW)):
                continue
            path = self.directory / name
            if name.startswith(self.writer + "."):
                continue
            try:
                fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its writer is alive
                try:  # another applier may have removed it while we waited for the lock
                    if os.stat(path).st_ino != os.fstat(fd).st_ino:
                        continue
                except FileNotFoundError:
                    continue
                yield path, fd
            finally:
                os.close(fd)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
