"""The metering hook of the inference path: reserve before the work, settle after.

A surface wraps the backend call::

    async with meter.metered(CallInfo(...)) as call:   # 402 budget_exceeded: nothing runs
        result = await backend(...)
        call.record(compute_seconds=...)

Entering prices the call at its start (the version's rules effective then) and
reserves its upper-bound cost (through the ``GroupReserver``: one transaction for
the calls that reserve meanwhile; a free call holds nothing and, its prices
cached, does no I/O); leaving settles by what was done, durably, before the
surface answers. With a ``UsageJournal`` (the embedded default) the settlement
is appended to this process's journal file, synchronously and without touching the
database; the journal's applier settles it in the database moments later. Without
one, a call that succeeded settles through the ``SettlementCommitter`` (one
transaction for all the calls that settled meanwhile, each call answered only once
its own is committed), and a call that raised in a transaction of its own. How the
block ends sets the status:

- normally: ``succeeded``;
- ``DeadlineExceeded``: ``timeout``; any other error: ``failed`` (both charged by the
  price rule's failure rule);
- cancelled (the client went away): ``cancelled``, charged for what was done;
- ``Overloaded`` / ``Unavailable`` (refused before running): the hold is released
  and no event is written; nothing ran.

A call answered from the response cache (``CallInfo.cached``) is priced by the
version's ``cache_hit`` rule alone where it has one (one ``cache_hit`` event); without
one it is priced as any call, with no executor time. A ``cache_hit`` rule never prices a
call that ran (``for_call``).

Units metered for a call: ``prediction`` (1 per call that produced an answer),
``row`` (the rows it answered, of the ``CallInfo.rows`` it asked for and held; a call
that failed or timed out counts the rows it asked for, priced by the failure rule as
its ``prediction`` is; one cancelled before its answer, none), ``compute_ms`` (the
call's share of its batch's executor time), ``second`` (wall time, rounded up), and
counted units the surface records (tokens, images). One
event per unit the version has a price for, ids ``<prediction_id>:<unit>``; a
version with no price at all still yields one free ``prediction`` event, and a
counted unit without a price (a stream's tokens) a free event of its own, so usage
is recorded whatever it costs. Time-priced units are charged at most up to the
call's deadline (what was reserved), so a call can never overrun its hold.

A streamed call (``modelport.inference.streaming``) has the same lifecycle, bounded
up front by ``stream_call``: its hold covers the prompt's input tokens (at most one
per byte of it) and ``max_tokens`` output tokens, taken before the first chunk. As
chunks go out, ``MeteredCall.deliver`` counts what was delivered (never above those
bounds); the end settles it as any call: ``succeeded`` when the stream ended,
``cancelled`` when the consumer went away (charged in full for what was delivered,
as cancelled work is), ``timeout`` at the deadline (what was delivered, priced by
the failure rule).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from modelport.errors import ModelportError
from modelport.ids import unique_id
from modelport.metering.commit import SettlementCommitter
from modelport.metering.events import price_doc, priced_event
from modelport.metering.journal import UsageJournal
from modelport.metering.prices import PriceBook
from modelport.metering.reservations import Reservations
from modelport.metering.reserve_group import GroupReserver
from modelport.metering.types import (
    EVENT_SOURCE_INFERENCE,
    FREE,
    CallInfo,
    PriceSnapshot,
    Reservation,
    Unit,
    Usage,
    UsageEvent,
    UsageStatus,
)
from modelport.store.base import utcnow

_log = logging.getLogger(__name__)
_NOT_RUN = frozenset({"overloaded", "unavailable"})
"""Error kinds a backend raises before doing any work."""


def repeatable_id(call_id: str) -> str:
    """The reservation id of the repeatable call ``call_id`` (``CallInfo.call_id``): 32
    hex characters, as random ones are, derived from it."""
    return hashlib.sha256(call_id.encode()).hexdigest()[:32]


def upper_bound(call: CallInfo, unit: Unit) -> int:
    """The most of ``unit`` a call can use before its deadline."""
    if unit is Unit.PREDICTION or unit is Unit.CACHE_HIT:
        return 1
    if unit is Unit.ROW:
        return call.rows
    if unit is Unit.COMPUTE_MS:
        return math.ceil(call.timeout_seconds * 1000)
    if unit is Unit.SECOND:
        return math.ceil(call.timeout_seconds)
    return call.quantities.get(unit, 0)


def stream_call(call: CallInfo, *, prompt_bytes: int, max_tokens: int) -> CallInfo:
    """``call`` bounded as a stream of at most ``max_tokens`` output tokens for a prompt
    of ``prompt_bytes`` UTF-8 bytes: an engine counts at most one input token per byte,
    so the hold covers the prompt before any tokenizer has seen it."""
    bounds = {
        Unit.INPUT_TOKEN: prompt_bytes,
        Unit.OUTPUT_TOKEN: max_tokens,
    }
    return dataclasses.replace(call, quantities={**call.quantities, **bounds})


def for_call(prices: dict[Unit, PriceSnapshot], call: CallInfo) -> dict[Unit, PriceSnapshot]:
    """The prices that apply to ``call``: a cached answer's ``cache_hit`` rule alone where
    the version has one, else the version's other rules."""
    hit = prices.get(Unit.CACHE_HIT)
    if hit is None:
        return prices
    if call.cached:
        return {Unit.CACHE_HIT: hit}
    return {unit: price for unit, price in prices.items() if unit is not Unit.CACHE_HIT}


def _upper_cost(call: CallInfo, prices: dict[Unit, PriceSnapshot]) -> int:
    """What the call costs at most: what ``reserve`` holds for it."""
    return sum(price.amount(upper_bound(call, unit)) for unit, price in prices.items())


class MeteredCall:
    """One call between reservation and settlement. ``record`` what it did; the meter
    settles it when the ``metered`` block ends."""

    def __init__(
        self,
        call: CallInfo,
        prices: dict[Unit, PriceSnapshot],
        reservation: Reservation | None,
        started_at: datetime,
        started: float,
    ) -> None:
        self.call = call
        self.prices = prices
        self.reservation = reservation
        self.started_at = started_at
        # Real monotonic time, not the injected clock: the wall ms billed measure the
        # call's real work (a ``ManualClock`` would bill nothing).
        self.started = started
        self.prediction_id = call.call_id or unique_id()
        self.compute_ms = 0.0
        self.gpu_ms = 0.0
        self.quantities: dict[Unit, int] = {}
        self.rows: int | None = None
        """Rows answered, once the work recorded them (``record_usage``)."""
        self.ran: tuple[str, str, str] | None = None
        self.charged_micros = 0
        """What its settlement charged (every unit's amount), once settled."""

    def record(
        self, *, compute_seconds: float | None = None, quantities: dict[Unit, int] | None = None
    ) -> None:
        """What the work did: executor time attributed to it, counted units."""
        if compute_seconds is not None:
            self.compute_ms = compute_seconds * 1000
        if quantities:
            self.quantities.update(quantities)

    def deliver(self, *, input_tokens: int = 0, output_tokens: int = 0) -> None:
        """Count what a stream delivered: the prompt's tokens once the engine counted
        them, output tokens as each chunk goes out (a negative count corrects an
        estimate, as a remote server's final usage may). Kept between 0 and the call's
        bounds (``stream_call``), so a settlement never exceeds its hold."""
        quantities = self.quantities
        for unit, n in ((Unit.INPUT_TOKEN, input_tokens), (Unit.OUTPUT_TOKEN, output_tokens)):
            if n:
                done = max(0, quantities.get(unit, 0) + n)
                quantities[unit] = min(done, self.call.quantities.get(unit, done))

    def record_usage(self, usage: Usage) -> None:
        """What the work used, as the inference service measured it: compute from its
        ``cpu_ms`` and ``gpu_ms``, counted units from its quantities."""
        self.compute_ms = usage.cpu_ms + usage.gpu_ms
        self.gpu_ms = usage.gpu_ms
        self.rows = usage.rows
        if usage.input_tokens or usage.output_tokens or usage.images:
            self.quantities.update(usage.quantities())

    def ran_version(self, model: str, version: str, manifest_digest: str) -> None:
        """Another version than the one called ran (fallback, retry): bill at its price."""
        self.ran = (model, version, manifest_digest)

    def quantity(self, unit: Unit, status: UsageStatus, wall_ms: float) -> int:
        if unit is Unit.PREDICTION or unit is Unit.CACHE_HIT:
            return 0 if status is UsageStatus.CANCELLED else 1
        if unit is Unit.ROW:
            return self.rows_done(status)
        if unit is Unit.COMPUTE_MS:
            done = math.ceil(self.compute_ms)
        elif unit is Unit.SECOND:
            done = math.ceil(wall_ms / 1000)
        else:
            return self.quantities.get(unit, 0)
        return min(done, upper_bound(self.call, unit))

    def rows_done(self, status: UsageStatus) -> int:
        """The ``row`` quantity: the rows answered, never above the rows held for; for
        work that recorded none, every row asked when it failed or timed out (priced by
        the failure rule, as its ``prediction`` is) or succeeded (a surface that counts
        no rows), none when it was cancelled before an answer."""
        asked = self.call.rows
        if self.rows is not None:
            return min(self.rows, asked)
        return 0 if status is UsageStatus.CANCELLED else asked

    def events(
        self, status: UsageStatus, prices: dict[Unit, PriceSnapshot], finished_at: datetime
    ) -> list[UsageEvent]:
        wall_ms = (time.monotonic() - self.started) * 1000
        call = self.call
        model, version, digest = self.ran or (call.model, call.version, call.manifest_digest)
        units = _units(prices, call)
        events = [
            priced_event(
                event_id=f"{self.prediction_id}:{unit.value}",
                price=price,
                unit=unit,
                quantity=self.quantity(unit, status, wall_ms),
                status=status,
                tenant=call.tenant,
                key_id=call.key_id,
                model=model,
                version=version,
                manifest_digest=digest,
                started_at=self.started_at,
                finished_at=finished_at,
                endpoint=call.endpoint,
                task=call.task,
                compute_ms=self.compute_ms,
                gpu_ms=self.gpu_ms,
                wall_ms=wall_ms,
                request_id=call.request_id,
                prediction_id=self.prediction_id,
                source=EVENT_SOURCE_INFERENCE,
                reservation_id=self.reservation.id if self.reservation else None,
            )
            for unit, price in sorted(units.items())
        ]
        self.charged_micros = sum(e.amount_micros for e in events)
        return events

    def event_docs(
        self, status: UsageStatus, prices: dict[Unit, PriceSnapshot], finished_at: datetime
    ) -> list[dict[str, Any]]:
        """``[event_to_doc(e) for e in self.events(...)]``, without building the events:
        what the journal writes on the request path, where every microsecond is the
        event loop's."""
        wall_ms = (time.monotonic() - self.started) * 1000
        call = self.call
        model, version, digest = self.ran or (call.model, call.version, call.manifest_digest)
        started_at, finished = self.started_at.isoformat(), finished_at.isoformat()
        reservation_id = self.reservation.id if self.reservation else None
        prediction_id = self.prediction_id
        docs = []
        charged = 0
        for unit, price in sorted(_units(prices, call).items()):
            quantity = self.quantity(unit, status, wall_ms)
            amount = price.amount(quantity, status)
            charged += amount
            docs.append(
                {
                    "event_id": f"{prediction_id}:{unit.value}",
                    "tenant": call.tenant,
                    "key_id": call.key_id,
                    "model": model,
                    "version": version,
                    "manifest_digest": digest,
                    "unit": unit.value,
                    "quantity": quantity,
                    "status": status.value,
                    "started_at": started_at,
                    "finished_at": finished,
                    **price_doc(price),
                    "amount_micros": amount,
                    "publisher_micros": price.publisher_share(amount),
                    "endpoint": call.endpoint,
                    "task": call.task,
                    "compute_ms": self.compute_ms,
                    "gpu_ms": self.gpu_ms,
                    "wall_ms": wall_ms,
                    "request_id": call.request_id,
                    "prediction_id": prediction_id,
                    "source": EVENT_SOURCE_INFERENCE,
                    "reservation_id": reservation_id,
                }
            )
        self.charged_micros = charged
        return docs


_FREE_ONLY = {Unit.PREDICTION: FREE}


def _units(prices: dict[Unit, PriceSnapshot], call: CallInfo) -> dict[Unit, PriceSnapshot]:
    """The units a call's events are written for: its priced units (a free
    ``prediction`` when it has none), and free ones for what it counted but has no price
    for (a stream's tokens), so its usage is recorded whatever it costs."""
    units = prices or _FREE_ONLY
    if call.quantities and not call.quantities.keys() <= units.keys():
        units = {unit: FREE for unit in call.quantities} | units
    return units


class InferenceMeter:
    """Prices, reserves and settles inference calls (see the module docstring)."""

    def __init__(
        self,
        prices: PriceBook,
        reservations: Reservations,
        *,
        grace_seconds: float = 60.0,
        now: Callable[[], datetime] = utcnow,
        committer: SettlementCommitter | None = None,
        reserver: GroupReserver | None = None,
        journal: UsageJournal | None = None,
    ) -> None:
        self.prices = prices
        self.reservations = reservations
        self.grace_seconds = grace_seconds
        self._now = now
        self.committer = committer or SettlementCommitter(reservations)
        self.reserver = reserver or GroupReserver(reservations)
        self.journal = journal
        """Where settlements become durable; None: straight into the database."""

    def begin(self, call: CallInfo) -> MeteredCall:
        """Price the call and hold its upper-bound cost (``PaymentRequired`` if it does not
        fit). Blocking: may touch the database."""
        started_at = self._now()
        prices = for_call(self.prices.prices(call.model, call.version, started_at), call)
        reservation = self.reservations.reserve(
            call.tenant,
            call.key_id,
            _upper_cost(call, prices),
            ttl_seconds=call.timeout_seconds + self.grace_seconds,
            model=call.model,
        )
        return MeteredCall(call, prices, reservation, started_at, time.monotonic())

    def upper_cost(self, call: CallInfo) -> int:
        """What ``begin`` would hold for ``call`` now. Blocking: may touch the database."""
        prices = self.prices.prices(call.model, call.version, self._now())
        return _upper_cost(call, prices)

    def settlement(self, metered: MeteredCall, status: UsageStatus) -> list[UsageEvent]:
        """The call's usage events, ended with ``status``. Touches the database only
        when another version ran and its prices are not cached."""
        prices = metered.prices
        if metered.ran is not None:
            model, version, _ = metered.ran
            prices = for_call(self.prices.prices(model, version, metered.started_at), metered.call)
        return metered.events(status, prices, self._now())

    def finish(self, metered: MeteredCall, status: UsageStatus) -> list[UsageEvent]:
        """Settle the call: into the journal, or (without one) the database, events into
        the outbox. Blocking without a journal."""
        events = self.settlement(metered, status)
        if self.journal is not None:
            self.journal.append(metered.reservation, events)
        else:
            self.reservations.settle(metered.reservation, events)
        return events

    def abandon(self, metered: MeteredCall) -> None:
        """Give the hold back whole: the work never ran. Blocking."""
        self.reservations.release(metered.reservation)

    @asynccontextmanager
    async def metered(self, call: CallInfo) -> AsyncIterator[MeteredCall]:
        """Reserve before the block, settle after it (see the module docstring)."""
        metered = await self.open(call)
        try:
            yield metered
        except BaseException as exc:
            await self.failed(metered, exc)
            raise
        await self.succeeded(metered)

    async def open(self, call: CallInfo) -> MeteredCall:
        """``metered``'s entry, for a caller that cannot use a block: price and reserve
        (402 ``budget_exceeded``). End with ``succeeded`` or ``failed``. A caller
        cancelled while it waits leaves no hold behind."""
        now = self._now()
        prices = self.prices.cached(call.model, call.version, now)
        if prices is None:
            prices = await asyncio.to_thread(self.prices.prices, call.model, call.version, now)
        prices = for_call(prices, call)
        if not prices:
            return MeteredCall(call, prices, None, now, time.monotonic())  # free: no hold
        if call.call_id is not None:
            return await asyncio.to_thread(self._open_again, call, prices, now)
        reservation = await self.reserver.reserve(
            call.tenant,
            call.key_id,
            _upper_cost(call, prices),
            ttl_seconds=call.timeout_seconds + self.grace_seconds,
            model=call.model,
        )
        return MeteredCall(call, prices, reservation, now, time.monotonic())

    def _open_again(
        self, call: CallInfo, prices: dict[Unit, PriceSnapshot], now: datetime
    ) -> MeteredCall:
        """``open`` for a repeatable call: its hold is taken under ``repeatable_id``, and
        a run after the first reuses the hold it finds there, whatever its state. Settling
        is idempotent per reservation, so a call settled before is not charged again
        (its events, the same ids, are recorded once by the ledger); one still held, or
        expired unsettled (its process died), is charged once by this run. With a
        ``hold_id``, its first run draws its reservation from that hold, and holds anew
        only when the hold is gone or does not cover it."""
        reservation_id = repeatable_id(call.call_id or "")
        found = self.reservations.get(reservation_id)
        cost = _upper_cost(call, prices)
        if found is None and call.hold_id is not None and cost > 0:
            found = self.reservations.draw(
                call.hold_id,
                call.tenant,
                cost,
                reservation_id=reservation_id,
                ttl_seconds=call.timeout_seconds + self.grace_seconds,
                model=call.model,
            )
        if found is None:
            found = self.reservations.reserve(
                call.tenant,
                call.key_id,
                cost,
                ttl_seconds=call.timeout_seconds + self.grace_seconds,
                model=call.model,
                reservation_id=reservation_id,
            )
        return MeteredCall(call, prices, found, now, time.monotonic())

    async def succeeded(self, metered: MeteredCall) -> None:
        """Settle a call whose work succeeded: durable when this returns (journal or
        database), and the commit stands even if the caller is cancelled meanwhile."""
        if metered.ran is not None and not self.prices.is_cached(*metered.ran[:2]):
            events = await asyncio.to_thread(self.settlement, metered, UsageStatus.SUCCEEDED)
        elif self.journal is not None:
            # Durable in the journal before the caller answers; applied moments later.
            docs = metered.event_docs(UsageStatus.SUCCEEDED, self._prices_of(metered), self._now())
            self.journal.append_docs(metered.reservation, docs)
            return
        else:
            events = self.settlement(metered, UsageStatus.SUCCEEDED)
        if self.journal is not None:
            self.journal.append(metered.reservation, events)
        else:
            # Committed (with the settlements of concurrent calls) before the caller
            # answers; the commit stands even if this task is cancelled meanwhile.
            await self.committer.settle(metered.reservation, events)

    async def failed(self, metered: MeteredCall, exc: BaseException) -> None:
        """Settle (or release) a call whose work raised ``exc``; never raises itself."""
        if self.journal is not None and self._ends_without_io(metered, exc):
            try:  # an append: no thread, no await (a cancelled task cannot skip it)
                self._ended_by(metered, exc)
            except Exception:
                _log.exception("settling a metered call failed")
        else:
            await _shielded(self._ended_by, metered, exc)

    def _prices_of(self, metered: MeteredCall) -> dict[Unit, PriceSnapshot]:
        if metered.ran is None:
            return metered.prices
        model, version, _ = metered.ran
        return for_call(self.prices.prices(model, version, metered.started_at), metered.call)

    def _ends_without_io(self, metered: MeteredCall, exc: BaseException) -> bool:
        """True when settling a block that raised ``exc`` needs no database: it is not
        given back whole (a release), and the prices of the version that ran are known."""
        if isinstance(exc, ModelportError) and exc.kind in _NOT_RUN:
            return False
        return metered.ran is None or self.prices.is_cached(*metered.ran[:2])

    def _ended_by(self, metered: MeteredCall, exc: BaseException) -> None:
        if isinstance(exc, ModelportError) and exc.kind in _NOT_RUN:
            self.abandon(metered)
        elif isinstance(exc, ModelportError) and exc.kind == "deadline":
            self.finish(metered, UsageStatus.TIMEOUT)
        elif isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | GeneratorExit):
            self.finish(metered, UsageStatus.CANCELLED)
        else:
            self.finish(metered, UsageStatus.FAILED)


async def _shielded(
    fn: Callable[[MeteredCall, BaseException], None], metered: MeteredCall, exc: BaseException
) -> None:
    """Run ``fn`` in a thread and wait for it, unless this task is being cancelled:
    then let it finish on its own (the caller is gone; nobody waits for an answer)."""
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(None, fn, metered, exc)
    future.add_done_callback(_log_failure)
    # A failure is logged by _log_failure; the block's own error is what the caller sees.
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await asyncio.shield(future)


def _log_failure(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        _log.error("settling a metered call failed", exc_info=future.exception())
