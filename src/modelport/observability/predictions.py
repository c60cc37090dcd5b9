"""The prediction log: one immutable record per prediction, written off the request path.

``PredictionLog.record`` is called on the request path and never waits: it appends
to an in-memory buffer. A background writer (``running()``) takes batches of up to
``batch_size`` records every ``flush_interval`` seconds (sooner when a batch is
full) and inserts them in a worker thread. A batch that fails to write goes back to
the buffer and is retried with backoff; inserts skip ids already written, so a
retried batch never duplicates (at-least-once delivery, deduplicated by id).

The buffer is bounded twice:

- past ``detail_capacity`` waiting records it is *under pressure*: a new record's
  optional detail (inputs and outputs) is kept for only one record in
  ``pressure_sample_every`` and dropped from the others (``detail`` becomes
  ``sampled_out``); the required audit fields are always kept. Counted in
  ``modelport_prediction_log_detail_sampled_out_total``.
- at ``capacity`` waiting records it is *full*: a new record is dropped whole,
  counted in ``modelport_prediction_log_records_total{result="dropped"}``. Size
  ``capacity`` so this happens only when the database is away for long.

``record`` may be called from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from modelport.background.loops import BackgroundTask
from modelport.observability.serving_metrics import ServingMetrics
from modelport.observability.types import Detail, LogPolicy, PredictionRecord

log = logging.getLogger(__name__)


class PredictionSink(Protocol):
    """Where batches go (``PredictionRepository``); called in a worker thread."""

    def insert(self, records: Sequence[PredictionRecord]) -> int: ...


def detail_fields(
    policy: LogPolicy,
    inputs: Mapping[str, np.ndarray] | None,
    outputs: Mapping[str, np.ndarray] | None,
) -> dict[str, Any]:
    """The ``inputs``/``outputs``/``detail`` fields of a record, as ``policy`` allows."""
    kept_inputs = inputs if policy.inputs else None
    kept_outputs = outputs if policy.outputs else None
    logged = kept_inputs is not None or kept_outputs is not None
    return {
        "inputs": kept_inputs,
        "outputs": kept_outputs,
        "detail": Detail.LOGGED if logged else Detail.NONE,
        "max_detail_bytes": policy.max_bytes,
    }


def answer_of(
    outputs: Mapping[str, np.ndarray], labels: Sequence[str] | None = None
) -> tuple[str | None, float | None]:
    """What one prediction answered, for joining with its outcome: ``(label, value)``.

    From the first output: a single text is a label; a single integer is a label
    (the class index, or its name from ``labels``) and a value; a single float is a
    value; one row of scores is a label (the argmax, named from ``labels`` if
    given). Anything else (several rows) has no single answer: ``(None, None)``.
    """
    if not outputs:
        return None, None
    array = np.asarray(next(iter(outputs.values())))
    if array.dtype.kind in ("O", "S", "U"):
        if array.size != 1:
            return None, None
        item = array.reshape(-1)[0]
        text = item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)
        return text[:256], None
    if array.dtype.kind == "b" or array.size == 0:
        return None, None
    if array.size == 1:
        scalar = array.reshape(-1)[0]
        if array.dtype.kind in ("i", "u"):
            return _label(int(scalar), labels), float(scalar)
        return None, float(scalar)
    squeezed = array.reshape(-1) if array.ndim == 1 or array.shape[0] == 1 else None
    if squeezed is None or squeezed.ndim != 1:
        return None, None
    return _label(int(np.argmax(squeezed)), labels), None


def _label(index: int, labels: Sequence[str] | None) -> str:
    if labels is not None and 0 <= index < len(labels):
        return str(labels[index])
    return str(index)


class PredictionLog:
    """A bounded buffer of prediction records and its background writer."""

    def __init__(
        self,
        sink: PredictionSink,
        *,
        capacity: int = 100_000,
        detail_capacity: int = 10_000,
        pressure_sample_every: int = 10,
        batch_size: int = 500,
        flush_interval: float = 1.0,
        max_backoff: float = 30.0,
        metrics: ServingMetrics | None = None,
    ) -> None:
        if not 0 < detail_capacity <= capacity:
            raise ValueError("detail_capacity must be positive and at most capacity")
        if pressure_sample_every < 1 or batch_size < 1 or flush_interval <= 0:
            raise ValueError("pressure_sample_every, batch_size and flush_interval must be >= 1")
        self.sink = sink
        self.capacity = capacity
        self.detail_capacity = detail_capacity
        self.pressure_sample_every = pressure_sample_every
        self.batch_size = batch_size
        self.flush_interval = flush_interval
        self.max_backoff = max_backoff
        self.metrics = metrics
        self._buffer: deque[PredictionRecord] = deque()
        self._lock = threading.Lock()
        self._writing: list[PredictionRecord] = []
        """The batch being written: out of the buffer, not yet in the sink."""
        self._write_lock = threading.Lock()
        """One writer at a time: a flush waits for a batch already being written."""
        self._under_pressure = 0
        self._writers: list[BackgroundTask] = []
        """The running writers (one per ``running`` block): ``record`` kicks them on a full
        batch."""
        self.written = 0
        self.dropped = 0
        self.sampled_out = 0

    @property
    def depth(self) -> int:
        return len(self._buffer)

    # ---- the request path
    def record(self, record: PredictionRecord) -> bool:
        """Queue a record; False when the buffer was full and it was dropped."""
        with self._lock:
            depth = len(self._buffer)
            if depth >= self.capacity:
                self.dropped += 1
                self._count("dropped")
                return False
            if depth >= self.detail_capacity and record.detail is Detail.LOGGED:
                keep = self._under_pressure % self.pressure_sample_every == 0
                self._under_pressure += 1
                if not keep:
                    record = replace(record, inputs=None, outputs=None, detail=Detail.SAMPLED_OUT)
                    self.sampled_out += 1
                    if self.metrics is not None:
                        self.metrics.log_detail_sampled_out.inc()
            elif depth < self.detail_capacity:
                self._under_pressure = 0
            self._buffer.append(record)
            depth += 1
        self._count("queued")
        if self.metrics is not None:
            self.metrics.log_depth.set(depth)
        if depth >= self.batch_size:
            self._nudge()
        return True

    def pending(self, prediction_id: str) -> PredictionRecord | None:
        """A record not yet in the sink: waiting in the buffer, or being written."""
        with self._lock:
            waiting = (r for r in (*self._writing, *self._buffer) if r.id == prediction_id)
            return next(waiting, None)

    # ---- the writer
    async def flush(self) -> int:
        """Write everything waiting now, after any batch already being written (so that
        a record ``pending`` before the call is in the sink after it); returns how many
        this call wrote. A failing batch goes back to the buffer and the error is
        raised."""
        return await asyncio.to_thread(self._flush)

    def _flush(self) -> int:
        total = 0
        with self._write_lock:
            while True:
                with self._lock:
                    count = min(self.batch_size, len(self._buffer))
                    batch = [self._buffer.popleft() for _ in range(count)]
                    self._writing = batch
                if not batch:
                    return total
                try:
                    self.sink.insert(batch)
                except BaseException:
                    with self._lock:
                        self._buffer.extendleft(reversed(batch))
                        self._writing = []
                    if self.metrics is not None:
                        self.metrics.log_write_errors.inc()
                    raise
                with self._lock:
                    self._writing = []
                total += len(batch)
                self.written += len(batch)
                self._count("written", len(batch))
                if self.metrics is not None:
                    self.metrics.log_depth.set(len(self._buffer))

    @contextlib.asynccontextmanager
    async def running(self, *, final_flush_timeout: float = 10.0) -> AsyncIterator[PredictionLog]:
        """Run the writer for the duration of the block: it flushes every
        ``flush_interval``, or at once when a batch fills; after failed writes, every
        2, 4, 8... intervals, up to ``max_backoff``. Flush what is left at the end."""
        writer = BackgroundTask(
            "prediction-log-writer",
            self.flush,
            self.flush_interval,
            first_after=self.flush_interval,
            min_backoff=2 * self.flush_interval,
            max_backoff=self.max_backoff,
            failure="prediction log: writing a batch failed",
        )
        self._writers.append(writer)
        writer.start()
        if self.depth >= self.batch_size:  # filled before any writer ran
            writer.kick()
        try:
            yield self
        finally:
            self._writers.remove(writer)
            await writer.stop()
            try:
                await asyncio.wait_for(self.flush(), final_flush_timeout)
            except Exception:
                log.exception("prediction log: %d records not written at shutdown", self.depth)

    def _nudge(self) -> None:
        for writer in list(self._writers):
            writer.kick()

    def _count(self, result: str, amount: int = 1) -> None:
        if self.metrics is not None:
            self.metrics.log_records.labels(result).inc(amount)
