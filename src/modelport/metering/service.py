"""The metering service: the price book, balances, the inference hook, reported usage,
and the delivery of usage events from the outbox to the ledger.

Embedded, the outbox drains straight into the ledger in this process. With Redis
(the distributed shape) it drains into a Redis stream, and every serving process
also runs a ledger consumer of the stream's consumer group (see ``.stream``).

With a usage journal (``.journal``), settlements reach the database (and the outbox)
through it: its applier runs with the other background loops.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from modelport.background.loops import BackgroundLoop
from modelport.clock import Clock
from modelport.metering.authorizations import (
    UsageAuthorizations,
    authorize_reported,
    publisher_check,
)
from modelport.metering.balances import BalanceRepository
from modelport.metering.costs import CostReport
from modelport.metering.ingest import DigestOf, parse_batch
from modelport.metering.journal import UsageJournal
from modelport.metering.ledger import Ledger
from modelport.metering.meter import InferenceMeter
from modelport.metering.outbox import Outbox, UsageSink
from modelport.metering.prices import PriceBook
from modelport.metering.reservations import Reservations
from modelport.metering.stream import RedisLedgerConsumer
from modelport.metering.types import IngestResult, Reporter
from modelport.store.base import utcnow


class MeteringService:
    """Everything metering offers the surfaces, and its background work."""

    def __init__(
        self,
        *,
        prices: PriceBook,
        ledger: Ledger,
        outbox: Outbox,
        balances: BalanceRepository,
        reservations: Reservations,
        authorizations: UsageAuthorizations,
        meter: InferenceMeter,
        sink: UsageSink,
        digest_of: DigestOf,
        consumer: RedisLedgerConsumer | None = None,
        journal: UsageJournal | None = None,
        drain_interval_seconds: float = 0.25,
        sweep_interval_seconds: float = 30.0,
        now: Callable[[], datetime] = utcnow,
        closers: Sequence[Callable[[], object]] = (),
        clock: Clock | None = None,
        costs: CostReport | None = None,
    ) -> None:
        self.prices = prices
        self.costs = costs
        """What calls cost to serve and earned, read from the ledger (None: not wired)."""
        self.ledger = ledger
        self.outbox = outbox
        self.balances = balances
        self.reservations = reservations
        self.authorizations = authorizations
        self.meter = meter
        self.sink = sink
        self.consumer = consumer
        self.journal = journal
        self._digest_of = digest_of
        self._now = now
        self._closers = closers
        # The loops wait on ``clock`` (the system's by default).
        self._loops = [
            BackgroundLoop("usage-outbox", self.drain_outbox, drain_interval_seconds, clock=clock),
            BackgroundLoop(
                "reservation-sweep", self.reservations.sweep, sweep_interval_seconds, clock=clock
            ),
        ]
        if consumer is not None:
            self._loops.append(
                BackgroundLoop(
                    "usage-consumer", lambda: consumer.consume_once(1000), 0.0, clock=clock
                )
            )
        self._running = 0
        self._lock = threading.Lock()

    def ingest(self, docs: Any, reporter: Reporter) -> IngestResult:
        """Record a batch of usage ``reporter`` reports (see ``.ingest``), once it is
        authorized (see ``.authorizations``: ``Forbidden`` refuses the whole batch);
        idempotent by ``event_id``."""
        now = self._now()
        reported = parse_batch(docs, self.prices, self._digest_of, now, publisher_check(reporter))
        return self.ledger.record(
            [r.event for r in reported],
            guard=lambda session: authorize_reported(session, reporter, reported, now),
        )

    def drain_outbox(self) -> int:
        """Deliver every outbox event to the sink; how many."""
        return self.outbox.drain(self.sink)

    @property
    def pending_settlements(self) -> int:
        """Settlements durable in the journal and not yet applied to the database."""
        return self.journal.pending if self.journal is not None else 0

    def deliver(self, timeout: float = 10.0) -> int:
        """Bring every pending event into the ledger now (tests, shutdown): apply the
        journal, drain the outbox and, with a stream, consume it until it is empty. Rows
        a background drainer holds are waited for, up to ``timeout`` seconds. How many
        events this call delivered."""
        deadline = time.monotonic() + timeout  # real: it waits on other threads' real work
        if self.journal is not None:
            self.journal.flush(timeout)
        total = 0
        while True:
            total += self.drain_outbox()
            if self.consumer is not None:
                while recorded := self.consumer.consume_once(None):
                    total += recorded
            backlog = self.outbox.pending()
            if self.consumer is not None:
                backlog += self.consumer.backlog()
            if not backlog or time.monotonic() > deadline:
                return total
            time.sleep(0.01)

    def sweep(self) -> int:
        """Expire reservations past their time; how many."""
        return self.reservations.sweep()

    def start(self) -> None:
        """Start the background loops (nested starts count; the last ``stop`` stops)."""
        with self._lock:
            self._running += 1
            if self._running == 1:
                if self.journal is not None:
                    self.journal.start()
                for loop in self._loops:
                    loop.start()

    def stop(self) -> None:
        """Stop the background loops once the last ``start`` is matched; what the journal
        holds is applied first."""
        with self._lock:
            self._running = max(0, self._running - 1)
            if self._running:
                return
        if self.journal is not None:
            self.journal.stop()
            self.journal.flush()
        for loop in self._loops:
            loop.stop()

    def close(self) -> None:
        """Stop everything, apply and close the journal, and close the clients."""
        with self._lock:
            self._running = 0
        if self.journal is not None:
            self.journal.close()
        for loop in self._loops:
            loop.stop()
        for close in self._closers:
            close()
