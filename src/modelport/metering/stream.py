"""Usage events through a Redis stream (the distributed shape).

Gateways drain their outbox into one stream (``XADD``); ledger consumers read it
as one consumer group (``XREADGROUP``), record each batch in the ledger and only
then acknowledge it (``XACK``). A consumer that dies before acknowledging leaves
its entries pending; another consumer takes them over once they have been idle
``claim_idle_ms`` (``XAUTOCLAIM``) and records them again, which the ledger
deduplicates by ``event_id``. Delivery is at least once end to end.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Sequence
from typing import cast

import orjson
import redis

from modelport.keyspace import Keyspace
from modelport.metering.events import event_from_doc
from modelport.metering.outbox import EncodedEvent, Recorder, event_doc
from modelport.metering.types import UsageEvent

STREAM = "usage"
"""The stream's name in the installation's keyspace (``modelport:{installation}:usage``)."""
GROUP = "ledger"
FIELD = b"event"
LEGACY_STREAM = "modelport:usage"
"""The stream of releases before installation ids, outside any keyspace."""
_LEGACY_ROUNDS = 100
_log = logging.getLogger(__name__)


class RedisStreamSink:
    """A ``UsageSink`` that appends events to the stream, one pipeline per batch."""

    def __init__(
        self, client: redis.Redis, keys: Keyspace, *, stream: str = STREAM, max_len: int = 1_000_000
    ) -> None:
        self._client = client
        self._stream = keys.name(stream)
        self._max_len = max_len

    def deliver(self, events: Sequence[UsageEvent | EncodedEvent]) -> None:
        pipe = self._client.pipeline(transaction=False)
        for event in events:
            pipe.xadd(
                self._stream,
                {FIELD: orjson.dumps(event_doc(event))},
                maxlen=self._max_len,
                approximate=True,
            )
        pipe.execute()


class RedisLedgerConsumer:
    """One member of the ledger's consumer group."""

    def __init__(
        self,
        client: redis.Redis,
        ledger: Recorder,
        keys: Keyspace,
        *,
        consumer: str,
        stream: str = STREAM,
        group: str = GROUP,
        claim_idle_ms: int = 30_000,
        batch: int = 500,
        legacy_stream: str | None = None,
    ) -> None:
        self._client = client
        self._ledger = ledger
        self.consumer = consumer
        self._stream = keys.name(stream)
        self._group = group
        self._claim_idle_ms = claim_idle_ms
        self._batch = batch
        self._last_claim = 0.0
        self._group_ready = False
        # What an earlier release left unacknowledged in its stream, taken over once.
        self._legacy_stream = legacy_stream

    def ensure_group(self) -> None:
        """Create the stream and group when missing (from the stream's start)."""
        if self._group_ready:
            return
        try:
            self._client.xgroup_create(self._stream, self._group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    def _regroup_if_lost(self, exc: redis.ResponseError) -> None:
        """Re-raise ``exc`` unless it says the group is gone (``NOGROUP``: Redis lost the
        stream, restarted without persistence or failed over, and a gateway's ``XADD``
        made it again without the group); then make the group again, from the
        stream's start (the ledger records an entry read twice once)."""
        if "NOGROUP" not in str(exc):
            raise exc
        _log.warning("usage stream %s lost its consumer group: creating it again", self._stream)
        self._group_ready = False
        self.ensure_group()

    def read(self, block_ms: int | None = None) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """New entries for this consumer (waiting up to ``block_ms`` for some)."""
        self.ensure_group()
        try:
            found = self._client.xreadgroup(
                self._group, self.consumer, {self._stream: ">"}, count=self._batch, block=block_ms
            )
        except redis.ResponseError as exc:
            self._regroup_if_lost(exc)
            return []  # the next read takes what the stream holds
        # The client speaks RESP2, where a read answers [[stream, entries], ...].
        streams = cast("list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]", found or [])
        return [entry for _, entries in streams for entry in entries]

    def claim(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        """Take over entries other consumers read but never acknowledged."""
        self.ensure_group()
        try:
            return self._claim()
        except redis.ResponseError as exc:
            self._regroup_if_lost(exc)
            return []  # a new group has nothing pending

    def _claim(self) -> list[tuple[bytes, dict[bytes, bytes]]]:
        claimed: list[tuple[bytes, dict[bytes, bytes]]] = []
        start = "0-0"
        while True:
            reply = self._client.xautoclaim(
                self._stream,
                self._group,
                self.consumer,
                min_idle_time=self._claim_idle_ms,
                start_id=start,
                count=self._batch,
            )
            start, entries = reply[0], reply[1]
            claimed.extend(e for e in entries if e[1] is not None)
            if start in (b"0-0", "0-0") or not entries:
                return claimed

    def record(self, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> int:
        """Record entries in the ledger, then acknowledge them; how many were recorded."""
        if not entries:
            return 0
        events = []
        for entry_id, fields in entries:
            try:
                events.append(event_from_doc(orjson.loads(fields[FIELD])))
            except (KeyError, ValueError, TypeError):
                # Undecodable: acknowledged (below) so it cannot block the group forever.
                _log.error("dropping malformed usage stream entry %r", entry_id)
        self._ledger.record(events)
        self._client.xack(self._stream, self._group, *[entry_id for entry_id, _ in entries])
        return len(events)

    def backlog(self) -> int:
        """Entries of the stream the group has not acknowledged yet (read or not)."""
        self.ensure_group()
        for group in self._client.xinfo_groups(self._stream):
            name = group["name"]
            if (name.decode() if isinstance(name, bytes) else name) == self._group:
                lag = group.get("lag")
                if lag is None:  # Redis < 7, or unknown: count what was never read as none
                    lag = 0
                return int(group["pending"]) + int(lag)
        return 0

    def consume_once(self, block_ms: int | None = None) -> int:
        """Claim what dead consumers left (at most every ``claim_idle_ms``), read new
        entries, record and acknowledge them; how many events were recorded."""
        done = self._take_over_legacy() if self._legacy_stream is not None else 0
        now = time.monotonic()  # real time: Redis measures the entries' idle time on its own
        if now - self._last_claim >= self._claim_idle_ms / 1000:
            self._last_claim = now
            done += self.record(self.claim())
        return done + self.record(self.read(block_ms))

    def _take_over_legacy(self) -> int:
        """Record what the group never acknowledged in the stream of a release before
        installation ids (its gateways stopped before their consumers read it), once:
        on upgrade, usage already in Redis is not lost. That stream was shared by every
        installation on the Redis, as before; the ledger deduplicates by ``event_id``."""
        assert self._legacy_stream is not None
        done = 0
        if self._client.exists(self._legacy_stream):
            legacy = copy.copy(self)
            legacy._stream, legacy._legacy_stream = self._legacy_stream, None
            legacy._claim_idle_ms, legacy._group_ready = 0, False
            for _ in range(_LEGACY_ROUNDS):  # old gateways may still be adding to it
                recorded = legacy.record(legacy.claim()) + legacy.record(legacy.read())
                done += recorded
                if not recorded:
                    break
            _log.info("took over %d usage events from %s", done, self._legacy_stream)
        self._legacy_stream = None  # only once it went through: else again next time
        return done
