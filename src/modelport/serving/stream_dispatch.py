"""A stream, as the replica loop runs it: up to its first chunk, and none after it.

``Dispatcher.open_stream`` (``modelport.serving.dispatch``) runs ``StreamMode`` through
the same replica loop as a whole call (``modelport.serving.replica_loop``), so the
same rules hold up to the stream's first chunk:

1. Capability filter: a backend must serve the version (format, protocol and task,
   hardware) and fit its context (the prompt at about one token per 4 bytes, plus
   ``max_tokens``). None left: ``Unavailable`` ``no_capable_backend``.
2. Replicas last seen unhealthy go last; those whose breaker is open are skipped.
3. An attempt succeeds when its replica yields a first chunk (the backend accepted
   the request); while other replicas remain, the wait for it may take at most
   ``attempt_timeout_seconds``. A failure before it is classified and retried as for
   a whole call.
4. Only when every replica failed does the fallback chain run. A stream can fall back
   only to another version; a cached or static answer is a tensor answer, which a
   stream cannot give, so those steps are passed over; ``UnavailableOption`` stops
   with ``endpoint_unavailable``.
5. Once the first chunk came, the stream belongs to that backend: a failure later
   ends it (no retry, no fallback: the consumer may have chunks already). The
   backend's breaker hears the stream's outcome when it ends: a clean end is a
   success, a failure of the backend a failure, the consumer leaving or the deadline
   nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace

from modelport.clock import Clock, SystemClock
from modelport.errors import DeadlineExceeded, ModelportError, Unavailable
from modelport.observability.serving_metrics import ServingMetrics
from modelport.serving.backends.base import Backend
from modelport.serving.breaker import CircuitBreaker
from modelport.serving.capability import unmet_by_stream
from modelport.serving.fallback import CALLER_ERRORS, CacheOption, StaticOption
from modelport.serving.types import (
    Attempt,
    Capabilities,
    Provenance,
    StreamChunk,
    StreamRequest,
    VersionRef,
)


@dataclass(frozen=True)
class OpenedStream:
    """A stream some backend accepted: its first chunk, the rest, and who serves it."""

    first: StreamChunk
    rest: AsyncIterator[StreamChunk]
    """The chunks after the first; closing it closes the backend's stream."""
    provenance: Provenance


@dataclass(frozen=True)
class Started:
    """A backend's stream that yielded its first chunk."""

    first: StreamChunk
    rest: AsyncIterator[StreamChunk]
    backend: str


class StreamMode:
    """A stream up to its first chunk; its breaker hears the outcome when it ends."""

    what = "stream"
    goal = "a stream"

    def __init__(self, metrics: ServingMetrics | None = None, clock: Clock | None = None) -> None:
        self.metrics = metrics
        self.clock = clock or SystemClock()

    def unmet(self, capabilities: Capabilities, request: StreamRequest) -> str | None:
        return unmet_by_stream(capabilities, request)

    async def attempt(self, backend: Backend, request: StreamRequest, until: float) -> Started:
        ref = request.version.ref
        chunks = backend.stream(request)
        try:
            async with asyncio.timeout(max(0.0, until - self.clock.monotonic())):
                first = await anext(chunks)
        except TimeoutError:
            error: ModelportError = DeadlineExceeded(
                f"{backend.name} did not start streaming {ref} in time",
                code="deadline_exceeded",
            )
        except StopAsyncIteration:
            error = Unavailable(
                f"{backend.name} ended the stream of {ref} before its first chunk",
                code="backend_bad_response",
            )
        except BaseException:
            await _close(chunks)  # cancelled or failed: its engine stops
            raise
        else:
            return Started(first, chunks, backend.name)
        await _close(chunks)
        raise error

    def accepted(
        self, request: StreamRequest, won: Started, breaker: CircuitBreaker, epoch: int
    ) -> Started:
        return replace(won, rest=self._rest(won.rest, won.backend, breaker, epoch, request.n))

    def retarget(self, request: StreamRequest, version: VersionRef) -> StreamRequest:
        return replace(request, version=version)

    def answer(self, won: Started, provenance: Provenance) -> OpenedStream:
        # The first chunk names the version that runs it: a fallback's is billed as its own.
        return OpenedStream(replace(won.first, version=provenance.version), won.rest, provenance)

    def stand_in(
        self,
        option: CacheOption | StaticOption,
        request: StreamRequest,
        reason: str,
        attempts: Sequence[Attempt],
    ) -> OpenedStream | None:
        return None  # a cached or static answer is a whole tensor answer: not a stream

    async def _rest(
        self,
        chunks: AsyncIterator[StreamChunk],
        backend: str,
        breaker: CircuitBreaker,
        epoch: int,
        choices: int,
    ) -> AsyncIterator[StreamChunk]:
        """The backend's chunks after the first; its breaker hears how the stream ended."""
        outcome = "ignored"  # the consumer left, or the deadline cut it
        open_choices = set(range(choices))
        try:
            async for chunk in chunks:
                if chunk.finish_reason is not None:
                    open_choices.discard(chunk.choice)
                    if not open_choices:
                        outcome = "ok"  # whole: its consumer may stop reading here
                yield chunk
            outcome = "ok"
        except ModelportError as exc:
            if exc.kind not in CALLER_ERRORS and exc.kind not in ("deadline", "overloaded"):
                outcome = "failed"
            raise
        except Exception as exc:
            outcome = "failed"
            raise Unavailable(
                f"{backend} failed mid-stream: {exc!r}", code="backend_error"
            ) from exc
        finally:
            await _close(chunks)
            if outcome == "ok":
                breaker.on_success(epoch)
            elif outcome == "failed":
                breaker.on_failure(epoch)
                if self.metrics is not None:
                    self.metrics.attempt(backend, "failed")
            else:
                breaker.on_ignored(epoch)


async def _close(chunks: AsyncIterator[StreamChunk]) -> None:
    """Close a backend's stream (its engine stops); never raises."""
    close = getattr(chunks, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()
