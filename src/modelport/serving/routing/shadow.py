"""Shadow traffic: a copy of a request to the shadow version, off the request path.

The copy runs after the primary answered, as a task the caller never waits for,
at ``batch`` priority (the runtime serves ``interactive`` requests first) and
through no fallback. At most ``max_in_flight`` copies run at once; a request
that finds them all busy is not copied, and the drop is counted. The shadow's
answer is compared with the primary's and recorded (agreement, latency), never
returned and never billed.

A stream is copied the same way once the primary's stream ended whole
(``offer_stream``): the shadow's stream is drained here, its texts joined per choice
and compared with the primary's (equal texts agree), as ``prompt`` and ``text`` BYTES
tensors in the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
from opentelemetry import trace
from opentelemetry.trace import Tracer

from modelport.errors import ModelportError
from modelport.observability import tracing
from modelport.runtime.types import Priority
from modelport.serving.backends.base import Backend
from modelport.serving.endpoints.types import Endpoint
from modelport.serving.routing.interface import Dispatcher
from modelport.serving.routing.stats import TrafficStats
from modelport.serving.routing.streams import prompt_tensor, texts_tensor
from modelport.serving.types import (
    BackendRequest,
    Provenance,
    Served,
    StreamChunk,
    StreamRequest,
    VersionRef,
)

log = logging.getLogger(__name__)
RTOL = 1e-4
ATOL = 1e-5


def compare(
    primary: Mapping[str, np.ndarray], shadow: Mapping[str, np.ndarray]
) -> tuple[bool, str]:
    """Whether the shadow gave the primary's outputs (numbers within tolerance), and how not."""
    for name, want in primary.items():
        got = shadow.get(name)
        if got is None:
            return False, f"output '{name}' missing"
        want, got = np.asarray(want), np.asarray(got)
        if want.shape != got.shape:
            return False, f"output '{name}': shape {list(got.shape)}, not {list(want.shape)}"
        if want.dtype.kind in "fciub" and got.dtype.kind in "fciub":
            if not np.allclose(want, got, rtol=RTOL, atol=ATOL, equal_nan=True):
                diff = float(np.max(np.abs(want.astype(np.float64) - got.astype(np.float64))))
                return False, f"output '{name}': max |difference| {diff:.6g}"
        elif not np.array_equal(want, got):
            return False, f"output '{name}' differs"
    return True, ""


@dataclass(frozen=True)
class ShadowResult:
    """One shadow copy's answer (or failure), for the prediction log."""

    endpoint: Endpoint
    prediction_id: str
    """The prediction it copied."""
    version: VersionRef
    inputs: Mapping[str, np.ndarray]
    received_at: datetime
    seconds: float
    served: Served | None
    """None when the shadow failed (``status`` says how)."""
    status: str
    agreed: bool | None


class ShadowRunner:
    def __init__(
        self,
        dispatcher: Dispatcher,
        stats: TrafficStats,
        *,
        max_in_flight: int,
        record: Callable[[ShadowResult], object] | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        """``record`` receives every shadow result (e.g. to the prediction log); it must
        not block. ``tracer``: each copy runs in a ``shadow`` span, child of the call's
        span that offered it."""
        self.dispatcher = dispatcher
        self.tracer = tracer
        self.stats = stats
        self.max_in_flight = max_in_flight
        self.record = record
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def offer(
        self,
        endpoint: Endpoint,
        deployment: int,
        shadow: VersionRef,
        replicas: Sequence[Backend],
        request: BackendRequest,
        primary: Mapping[str, np.ndarray],
        primary_seconds: float,
        timeout: float,
    ) -> bool:
        """Start a copy of ``request`` on ``shadow`` unless at the bound; True if started."""
        if len(self._tasks) >= self.max_in_flight:
            self.stats.shadow_dropped(deployment, shadow.ref)
            return False
        copy = dataclasses.replace(
            request,
            version=shadow,
            priority=Priority.BATCH,
            deadline=self.dispatcher.clock.monotonic() + timeout,
            outputs=None,
        )
        task = asyncio.get_running_loop().create_task(
            self._traced(
                self._run(endpoint, deployment, copy, replicas, primary, primary_seconds),
                endpoint,
                shadow,
            )
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _traced(self, run: Awaitable[None], endpoint: Endpoint, shadow: VersionRef) -> None:
        """``run`` in a ``shadow`` span (the task was started in the call's context)."""
        # The call's span may have ended by now: whether it was sampled is what counts.
        if (
            self.tracer is None
            or not trace.get_current_span().get_span_context().trace_flags.sampled
        ):
            await run  # no tracing, or the call was sampled out
            return
        attributes = {tracing.ENDPOINT: endpoint.name, tracing.VERSION: shadow.ref}
        with tracing.span_under(self.tracer, "shadow", attributes=attributes):
            await run

    async def _run(
        self,
        endpoint: Endpoint,
        deployment: int,
        request: BackendRequest,
        replicas: Sequence[Backend],
        primary: Mapping[str, np.ndarray],
        primary_seconds: float,
    ) -> None:
        received_at = datetime.now(UTC)
        started = time.perf_counter()
        agreed: bool | None
        served: Served | None = None
        status = "ok"
        try:
            served = await self.dispatcher.dispatch(request, replicas)
        except ModelportError as exc:
            agreed, detail, status = None, f"{exc.code}: {exc.message}", exc.code
        except Exception as exc:  # a shadow must never take anything else down
            log.exception("shadow request to %s failed", request.version.ref)
            agreed, detail, status = None, f"{type(exc).__name__}: {exc}", "internal_error"
        else:
            agreed, detail = compare(primary, served.outputs)
        self._done(
            endpoint,
            deployment,
            request.version,
            request.request_id,
            request.inputs,
            received_at,
            started,
            primary_seconds,
            served,
            status,
            agreed,
            detail,
        )

    def offer_stream(
        self,
        endpoint: Endpoint,
        deployment: int,
        shadow: VersionRef,
        replicas: Sequence[Backend],
        request: StreamRequest,
        primary: Mapping[str, np.ndarray],
        primary_seconds: float,
        timeout: float,
    ) -> bool:
        """Start a copy of the streamed ``request`` on ``shadow`` unless at the bound;
        ``primary`` is the primary's answer as ``texts_tensor`` gives it."""
        if len(self._tasks) >= self.max_in_flight:
            self.stats.shadow_dropped(deployment, shadow.ref)
            return False
        copy = dataclasses.replace(
            request,
            version=shadow,
            priority=Priority.BATCH,
            deadline=self.dispatcher.clock.monotonic() + timeout,
            call_id="",  # not a metered call: nobody is billed for it
        )
        task = asyncio.get_running_loop().create_task(
            self._traced(
                self._run_stream(endpoint, deployment, copy, replicas, primary, primary_seconds),
                endpoint,
                shadow,
            )
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _run_stream(
        self,
        endpoint: Endpoint,
        deployment: int,
        request: StreamRequest,
        replicas: Sequence[Backend],
        primary: Mapping[str, np.ndarray],
        primary_seconds: float,
    ) -> None:
        received_at = datetime.now(UTC)
        started = time.perf_counter()
        agreed: bool | None
        served: Served | None = None
        status = "ok"
        try:
            opened = await self.dispatcher.open_stream(request, replicas)
            texts: dict[int, list[str]] = {}
            chunks: list[StreamChunk] = [opened.first]
            try:
                chunks.extend([chunk async for chunk in opened.rest])
            finally:
                await opened.rest.aclose()  # type: ignore[attr-defined]
            for chunk in chunks:
                texts.setdefault(chunk.choice, []).append(chunk.text)
            outputs = texts_tensor(texts)
            served = Served(outputs, Provenance(request.version, opened.provenance.backend))
        except ModelportError as exc:
            agreed, detail, status = None, f"{exc.code}: {exc.message}", exc.code
        except Exception as exc:  # a shadow must never take anything else down
            log.exception("shadow stream to %s failed", request.version.ref)
            agreed, detail, status = None, f"{type(exc).__name__}: {exc}", "internal_error"
        else:
            agreed, detail = compare(primary, outputs)
        self._done(
            endpoint,
            deployment,
            request.version,
            request.prediction_id or request.request_id,
            prompt_tensor(request.prompt, request.messages),
            received_at,
            started,
            primary_seconds,
            served,
            status,
            agreed,
            detail,
        )

    def _done(
        self,
        endpoint: Endpoint,
        deployment: int,
        version: VersionRef,
        prediction_id: str,
        inputs: Mapping[str, np.ndarray],
        received_at: datetime,
        started: float,
        primary_seconds: float,
        served: Served | None,
        status: str,
        agreed: bool | None,
        detail: str,
    ) -> None:
        """Count and record one shadow copy's result."""
        seconds = time.perf_counter() - started
        self.stats.shadow_result(
            deployment,
            version.ref,
            prediction_id=prediction_id,
            seconds=seconds,
            primary_seconds=primary_seconds,
            agreed=agreed,
            detail=detail,
        )
        if self.record is not None:
            result = ShadowResult(
                endpoint=endpoint,
                prediction_id=prediction_id,
                version=version,
                inputs=inputs,
                received_at=received_at,
                seconds=seconds,
                served=served,
                status=status,
                agreed=agreed,
            )
            try:
                self.record(result)
            except Exception:
                log.exception("could not record the shadow result of %s", prediction_id)

    async def drain(self) -> None:
        """Wait for the copies in flight (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
