"""The one replica-attempt loop: a call on its version's replicas, then on its
endpoint's fallback chain, for every kind of call (``serving.call_mode``).

1. Capability filter first: replicas that cannot run the version (format, protocol
   and task, hardware) or take the request (the mode's ``unmet``: batch rows, context
   length) are never tried. None left: ``Unavailable`` ``no_capable_backend``.
2. Replicas the last probe saw unhealthy go last; replicas whose circuit breaker is
   open are skipped. Every one open: ``Unavailable`` ``no_available_backend`` with
   ``retry_after``.
3. Try them in order, at most ``max_attempts``, within the request's deadline. While
   other replicas remain, one attempt may take at most ``attempt_timeout_seconds``.
   Errors about the request itself (invalid input...) are raised at once and not
   counted against the backend; ``Overloaded`` and version-scoped failures move on
   without counting; other failures count on the backend's breaker.
4. Only when every replica failed, and not for the caller's own errors, does the
   endpoint's fallback chain run (``serving.fallback.run_chain``): a different
   version is used only through it, on its own replicas by this same loop.

The answer's provenance names its version, its backend, the fallback step and every
attempt made. With a tracer, each attempt of an endpoint's call is a span of its own
(``attempt``, or ``fallback attempt`` on the fallback chain's versions) naming its
backend and version: a failed one records its error. A version called directly has one
replica and no chain: its attempt is its ``dispatch`` step.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from functools import partial

from opentelemetry import trace
from opentelemetry.trace import Tracer

from modelport.clock import Clock, SystemClock
from modelport.errors import DeadlineExceeded, ModelportError, Unavailable
from modelport.observability import tracing
from modelport.observability.serving_metrics import ServingMetrics
from modelport.serving.backend_failures import (
    REFUSED,
    capable_in_order,
    circuits_open,
    judge_failure,
)
from modelport.serving.backends.base import Backend
from modelport.serving.call_mode import CallMode, OutT, ReqT, WonT
from modelport.serving.capability import unmet_by_version
from modelport.serving.fallback import CALLER_ERRORS, FallbackOption, run_chain
from modelport.serving.health import HealthBoard
from modelport.serving.types import Attempt, Capabilities, Provenance, VersionRef


class ReplicaLoop:
    """Runs calls of any mode on replicas with breakers, retries and fallbacks."""

    def __init__(
        self,
        board: HealthBoard,
        *,
        max_attempts: int,
        attempt_timeout_seconds: float | None,
        metrics: ServingMetrics | None = None,
        tracer: Tracer | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.board = board
        self.clock = clock or SystemClock()
        """What requests' deadlines are on (the attempts' latencies are real time)."""
        self.tracer = tracer
        self.max_attempts = max_attempts
        self.attempt_timeout_seconds = attempt_timeout_seconds
        self.metrics = metrics
        self._static: dict[tuple[int, int], tuple[Capabilities, VersionRef, str | None]] = {}
        """What the version alone decides of a backend's fitness (the objects are kept, so
        their ids are not reused while cached)."""

    async def call(
        self,
        mode: CallMode[ReqT, WonT, OutT],
        request: ReqT,
        replicas: Sequence[Backend],
        *,
        fallback: Sequence[FallbackOption] = (),
        endpoint: str = "",
    ) -> OutT:
        """``request`` answered by ``replicas`` of its version (in the router's order),
        else by the ``fallback`` chain; provenance says which."""
        attempts: list[Attempt] = []
        try:
            won = await self.run_version(
                mode, request, replicas, attempts, traced=bool(endpoint or fallback)
            )
        except ModelportError as failure:
            if failure.kind in CALLER_ERRORS:
                raise
            return await run_chain(
                fallback,
                request,
                failure,
                mode=mode,
                attempts=attempts,
                run_version=partial(self.run_version, mode, fallback=True, traced=True),
                endpoint=endpoint,
                metrics=self.metrics,
                clock=self.clock,
            )
        return mode.answer(won, Provenance(request.version, won.backend, attempts=tuple(attempts)))

    async def run_version(
        self,
        mode: CallMode[ReqT, WonT, OutT],
        request: ReqT,
        replicas: Sequence[Backend],
        attempts: list[Attempt],
        *,
        fallback: bool = False,
        traced: bool = True,
    ) -> WonT:
        """The call accepted by the first replica of the request's version that takes
        it; each try is appended to ``attempts`` (``fallback``: a version of the fallback
        chain; ``traced``: each try in a span, with tracing on). Raises the last failure
        when none does."""
        version = request.version
        ref = version.ref
        what = f"{mode.what} {ref}"
        ordered = capable_in_order(
            replicas,
            self.board,
            lambda c: self._unmet_by_version(c, version) or mode.unmet(c, request),
            what,
        )
        last_error: ModelportError | None = None
        tried = 0
        open_breakers: list[str] = []
        for index, backend in enumerate(ordered):
            if tried >= self.max_attempts:
                break
            now = self.clock.monotonic()
            started = time.perf_counter()
            if now >= request.deadline:
                last_error = DeadlineExceeded(f"{ref}: the deadline passed before {mode.goal}")
                break
            breaker = self.board.breaker(backend.name)
            if not breaker.try_acquire():
                open_breakers.append(backend.name)
                continue
            epoch = breaker.epoch
            tried += 1
            until = request.deadline
            others_left = index < len(ordered) - 1 and tried < self.max_attempts
            if others_left and self.attempt_timeout_seconds is not None:
                # A slow replica must leave time to try the next one.
                until = min(until, now + self.attempt_timeout_seconds)
            try:
                if self.tracer is None or not traced or not trace.get_current_span().is_recording():
                    won = await mode.attempt(backend, request, until)
                else:
                    with tracing.span_under(
                        self.tracer,
                        "fallback attempt" if fallback else "attempt",
                        attributes={
                            tracing.BACKEND: backend.name,
                            tracing.VERSION: ref,
                            tracing.FALLBACK: fallback,
                        },
                    ):
                        won = await mode.attempt(backend, request, until)
            except asyncio.CancelledError:
                breaker.on_ignored(epoch)
                raise
            except ModelportError as exc:
                error = exc
            except Exception as exc:  # a backend bug must not escape as a 500 with no breaker
                error = Unavailable(f"{backend.name} failed: {exc!r}", code="backend_error")
            else:
                attempts.append(Attempt(backend.name, ref, "ok", time.perf_counter() - started))
                self._count(backend.name, "ok")
                return mode.accepted(request, won, breaker, epoch)
            attempts.append(Attempt(backend.name, ref, error.code, time.perf_counter() - started))
            outcome = judge_failure(error, breaker, epoch)
            self._count(backend.name, outcome)
            if outcome == REFUSED:
                raise error
            last_error = error
        if last_error is not None:
            raise last_error
        raise circuits_open(self.board, what, open_breakers)

    def _unmet_by_version(self, capabilities: Capabilities, version: VersionRef) -> str | None:
        """``unmet_by_version``, kept per capabilities and version (both immutable)."""
        key = (id(capabilities), id(version))
        known = self._static.get(key)
        if known is not None and known[0] is capabilities and known[1] is version:
            return known[2]
        why = unmet_by_version(capabilities, version)
        if len(self._static) >= 4096:  # many versions or rebuilt backends: start over
            self._static.clear()
        self._static[key] = (capabilities, version, why)
        return why

    def _count(self, backend: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.attempt(backend, outcome)
