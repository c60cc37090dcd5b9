"""Open a stream on the backends that can run its version, else on its fallbacks.

The streamed counterpart of ``Dispatcher.dispatch`` (``modelport.serving.dispatch``),
with the same rules up to the stream's first chunk, and none after it:

1. Capability filter: a backend must serve the version (format, protocol and task,
   hardware) and fit its context (the prompt at about one token per 4 bytes, plus
   ``max_tokens``). None left: ``Unavailable`` ``no_capable_backend``.
2. Replicas last seen unhealthy go last; those whose breaker is open are skipped
   (all open: ``Unavailable`` ``no_available_backend`` with ``retry_after``).
3. Each replica is tried in order, at most ``max_attempts``, until one yields its
   first chunk (the backend accepted the request). While other replicas remain, the
   wait for that chunk may take at most ``attempt_timeout_seconds``. A failure before
   it is classified as for tensor calls: errors about the request raise at once, not
   counted; ``Overloaded`` and version-scoped failures move on, not counted; any
   other failure counts on the backend's breaker and the next replica is tried.
4. Only when every replica failed does the fallback chain run. A stream can fall back
   only to another version (``VersionOption``, on its own replicas, same rules); a
   cached or static answer is a tensor answer, which a stream cannot give, so those
   steps are skipped; ``UnavailableOption`` stops with ``endpoint_unavailable``.
5. Once the first chunk came, the stream belongs to that backend: a failure later
   ends it (no retry, no fallback: the consumer may have chunks already). The
   backend's breaker hears the stream's outcome when it ends: a clean end is a
   success, a failure of the backend a failure, the consumer leaving or the deadline
   nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace

from modelport.errors import DeadlineExceeded, ModelportError, Unavailable
from modelport.observability.serving_metrics import ServingMetrics
from modelport.serving.backend_failures import (
    REFUSED,
    capable_in_order,
    circuits_open,
    judge_failure,
)
from modelport.serving.backends.base import Backend
from modelport.serving.breaker import CircuitBreaker
from modelport.serving.capability import unmet_by_stream
from modelport.serving.fallback import (
    CALLER_ERRORS,
    FallbackOption,
    UnavailableOption,
    VersionOption,
    schema_problems,
    with_attempts,
)
from modelport.serving.health import HealthBoard
from modelport.serving.types import (
    Attempt,
    Capabilities,
    FallbackKind,
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


class StreamOpener:
    """Opens streams with the dispatcher's board, limits and metrics (see the module
    docstring). ``unmet_by_version`` is the dispatcher's cached capability check."""

    def __init__(
        self,
        board: HealthBoard,
        *,
        max_attempts: int,
        attempt_timeout_seconds: float | None,
        unmet_by_version: Callable[[Capabilities, VersionRef], str | None],
        metrics: ServingMetrics | None = None,
    ) -> None:
        self.board = board
        self.max_attempts = max_attempts
        self.attempt_timeout_seconds = attempt_timeout_seconds
        self._unmet_by_version = unmet_by_version
        self.metrics = metrics

    async def open(
        self,
        request: StreamRequest,
        replicas: Sequence[Backend],
        *,
        fallback: Sequence[FallbackOption] = (),
        endpoint: str = "",
    ) -> OpenedStream:
        """The stream of ``request`` from ``replicas`` of its version, else from the
        ``fallback`` chain's versions; its provenance says which."""
        attempts: list[Attempt] = []
        try:
            first, rest, backend = await self.open_version(request, replicas, attempts)
        except ModelportError as failure:
            if failure.kind in CALLER_ERRORS:
                raise
            return await self._fall_back(fallback, request, failure, attempts, endpoint)
        provenance = Provenance(request.version, backend, attempts=tuple(attempts))
        return OpenedStream(replace(first, version=request.version), rest, provenance)

    async def _fall_back(
        self,
        options: Sequence[FallbackOption],
        request: StreamRequest,
        failure: ModelportError,
        attempts: list[Attempt],
        endpoint: str,
    ) -> OpenedStream:
        for option in options:
            if isinstance(option, VersionOption):
                if schema_problems(request.version.manifest, option.version.manifest):
                    continue  # checked when deployed; never stream from a misfit
                if time.monotonic() >= request.deadline:
                    continue
                other = replace(request, version=option.version)
                try:
                    first, rest, backend = await self.open_version(other, option.replicas, attempts)
                except ModelportError:
                    continue
                if self.metrics is not None:
                    self.metrics.fallback(endpoint, FallbackKind.VERSION.value)
                provenance = Provenance(
                    option.version, backend, FallbackKind.VERSION, failure.code, tuple(attempts)
                )
                return OpenedStream(replace(first, version=option.version), rest, provenance)
            if isinstance(option, UnavailableOption):
                if self.metrics is not None:
                    self.metrics.fallback(endpoint, FallbackKind.UNAVAILABLE.value)
                raise with_attempts(
                    Unavailable(
                        option.message,
                        code="endpoint_unavailable",
                        fallback=FallbackKind.UNAVAILABLE.value,
                        reason=failure.code,
                    ),
                    attempts,
                )
            # A cached or static answer is a whole tensor answer: not a stream.
        raise with_attempts(failure, attempts)

    async def open_version(
        self, request: StreamRequest, replicas: Sequence[Backend], attempts: list[Attempt]
    ) -> tuple[StreamChunk, AsyncIterator[StreamChunk], str]:
        """The first replica of the request's version that yields a first chunk: that
        chunk, the rest of its stream and the backend's name. Each try is appended to
        ``attempts``; raises the last failure when none starts."""
        version = request.version
        ref = version.ref
        ordered = capable_in_order(
            replicas,
            self.board,
            lambda c: self._unmet_by_version(c, version) or unmet_by_stream(c, request),
            f"stream {ref}",
        )
        last_error: ModelportError | None = None
        tried = 0
        open_breakers: list[str] = []
        for index, backend in enumerate(ordered):
            if tried >= self.max_attempts:
                break
            now = time.monotonic()
            if now >= request.deadline:
                last_error = DeadlineExceeded(f"{ref}: the deadline passed before a stream")
                break
            breaker = self.board.breaker(backend.name)
            if not breaker.try_acquire():
                open_breakers.append(backend.name)
                continue
            epoch = breaker.epoch
            tried += 1
            wait_until = request.deadline
            others_left = index < len(ordered) - 1 and tried < self.max_attempts
            if others_left and self.attempt_timeout_seconds is not None:
                wait_until = min(wait_until, now + self.attempt_timeout_seconds)
            chunks = backend.stream(request)
            try:
                async with asyncio.timeout(max(0.0, wait_until - now)):
                    first = await anext(chunks)
            except asyncio.CancelledError:
                breaker.on_ignored(epoch)
                await _close(chunks)
                raise
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
            except ModelportError as exc:
                error = exc
            except Exception as exc:  # a backend bug: counted, never a bare 500
                error = Unavailable(f"{backend.name} failed: {exc!r}", code="backend_error")
            else:
                attempts.append(Attempt(backend.name, ref, "ok", time.monotonic() - now))
                self._count(backend.name, "ok")
                return (
                    first,
                    self._rest(chunks, backend.name, breaker, epoch, request.n),
                    backend.name,
                )
            await _close(chunks)
            attempts.append(Attempt(backend.name, ref, error.code, time.monotonic() - now))
            outcome = judge_failure(error, breaker, epoch)
            self._count(backend.name, outcome)
            if outcome == REFUSED:
                raise error
            last_error = error
        if last_error is not None:
            raise last_error
        raise circuits_open(self.board, f"stream {ref}", open_breakers)

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
                self._count(backend, "failed")
            else:
                breaker.on_ignored(epoch)

    def _count(self, backend: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.attempt(backend, outcome)


async def _close(chunks: AsyncIterator[StreamChunk]) -> None:
    """Close a backend's stream (its engine stops); never raises."""
    close = getattr(chunks, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()
