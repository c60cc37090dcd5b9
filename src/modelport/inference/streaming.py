"""The streamed call: admit, reserve the upper bound, stream, settle what was delivered.

The inference service (for the OpenAI-compatible ``/v1``) calls::

    stream = await calls.stream(caller, target, request, deadline)  # 429 / 402 / 4xx / 5xx
    async with stream:                       # leaving the block ends the call
        async for chunk in stream:
            ...send chunk...

``stream`` returns once the call is admitted by the admission step every call goes
through (``inference.admission.admit``: rate, concurrency, budget, and its
tokens-per-minute allowances charged with its token bound: the prompt's bytes plus
``max_tokens``; the decision left on the ``Caller`` for the surface's headers), its
upper bound held (``InferenceMeter``: the prompt's input tokens, at most one per byte,
and ``max_tokens`` output tokens, drawn from the caller's hold where it names one,
``Caller.hold_id``; 402 ``budget_exceeded`` when that does not fit) and the backend has accepted the request, so refusals come before
any chunk, when a surface can still answer with a plain error. Chunks then come in
order, each counted as delivered when it is handed over. The call ends, once, in one
of these ways, and is settled and its admission released then:

- the stream ended: ``succeeded``, the quantities delivered;
- the consumer stopped (``aclose``, leaving the ``async with`` block, or its task
  cancelled): the backend's stream is closed first, which cancels the engine's work,
  then ``cancelled``, charged for what was delivered;
- the deadline passed: the backend's stream is cut, ``timeout``; what was delivered
  is priced by the failure rule;
- the backend failed: ``failed`` (or the hold given back whole when it refused
  before running: ``Unavailable``, ``Overloaded``).

The target is already resolved, and access and callable state checked, by the
inference service that wires this in; this module owns the streamed lifecycle only.
The chunks come from a ``StreamSource``: a version's backend, or an endpoint's routing
(replicas, breakers and fallbacks up to the first chunk; a first chunk naming another
version bills the call at that version's prices).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

from modelport.errors import DeadlineExceeded, InvalidInput, ModelportError
from modelport.inference.admission import admit
from modelport.inference.types import Caller
from modelport.metering.meter import InferenceMeter, MeteredCall, stream_call
from modelport.metering.types import CallInfo, Unit, UsageStatus
from modelport.runtime.types import ChatMessage, Priority
from modelport.serving.capability import BYTES_PER_TOKEN
from modelport.serving.types import StreamChunk, StreamRequest, VersionRef
from modelport.tenancy.limits import Admission, LimitService

_log = logging.getLogger(__name__)

_closing: set[asyncio.Task[None]] = set()
"""Calls being ended because they were dropped without being ended."""

MAX_TOKENS_LIMIT = 1 << 20
"""The most output tokens one request may ask for (its hold grows with it)."""

CHAT_TEMPLATE_ALLOWANCE = 1024
"""Bytes held beyond a chat's contents: its template wraps them in tokens of its own
(roles, separators, a default system prompt)."""

MAX_CHOICES = 16
"""The most choices (``n``) one request may ask for."""


@dataclass(frozen=True)
class StreamTarget:
    """What a stream runs: the resolved version, the model's task (it chooses the
    runtime's contract with the manifest's format) and the endpoint called, if any."""

    version: VersionRef
    task: str = ""
    endpoint: str | None = None


@dataclass(frozen=True)
class GenerateRequest:
    """A decoded generative request."""

    prompt: str
    max_tokens: int
    """Most output tokens to generate per choice: with ``n``, the upper bound the call
    is held for."""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    request_id: str = ""
    messages: tuple[ChatMessage, ...] | None = None
    """A chat to answer (rendered by the engine with the model's template); None for a
    completion of ``prompt``."""
    n: int = 1
    priority: Priority = Priority.INTERACTIVE
    subject: str | None = None
    """For an endpoint: who the call is for, so a canary keeps a subject on one version
    (as a tensor call's ``subject``); None: chosen by the weights alone."""

    @property
    def prompt_bytes(self) -> int:
        """UTF-8 bytes of the prompt or the chat's contents: at least its tokens."""
        if self.messages is None:
            return len(self.prompt.encode("utf-8"))
        contents = sum(len(m.content.encode("utf-8")) + len(m.role) for m in self.messages)
        return contents + CHAT_TEMPLATE_ALLOWANCE

    @property
    def input_estimate(self) -> int:
        """The prompt's tokens when no backend counted them (a remote server that
        reports no usage, or a stream cut before it did): about one per
        ``BYTES_PER_TOKEN`` bytes of its text."""
        if self.messages is None:
            size = len(self.prompt.encode("utf-8"))
        else:
            size = sum(len(m.content.encode("utf-8")) for m in self.messages)
        return math.ceil(size / BYTES_PER_TOKEN)

    @property
    def output_bound(self) -> int:
        """The most output tokens the call may produce, all choices together."""
        return self.max_tokens * self.n


class StreamSource(Protocol):
    """Where a call's chunks come from: a backend (``Backend.stream``), or an endpoint's
    routing (``serving.routing.streams.PlannedStream``: replicas, breakers, fallbacks
    before the first chunk). Same contract as ``Backend.stream``."""

    def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]: ...


class OutputCheck(Protocol):
    """Looks at each chunk with text before it is released (output moderation): raising
    stops the stream there, settled as answered for what was produced; ``ended`` is told
    once the call ended. Neither may block the loop."""

    async def __call__(self, chunk: StreamChunk) -> None: ...

    def ended(self) -> None: ...


StreamEnded = Callable[["CallStream | None", BaseException | None], None]
"""Told once a call ended and was settled, with what ended it (None: the stream ended
whole); the stream is None when the call was refused before it had one. Must not
block."""


class StreamingCalls:
    """Streamed calls from one source, admitted by ``limits`` and metered by ``meter``."""

    def __init__(
        self, *, backend: StreamSource, meter: InferenceMeter, limits: LimitService
    ) -> None:
        self.backend = backend
        self.meter = meter
        self.limits = limits

    async def stream(
        self,
        caller: Caller,
        target: StreamTarget,
        request: GenerateRequest,
        deadline: float,
        *,
        on_end: StreamEnded | None = None,
        check: OutputCheck | None = None,
    ) -> CallStream:
        """Admit, hold the upper bound, start the backend's stream; see the module
        docstring. ``caller``: who calls, with its repeatable call's id (``call_id``,
        charged once) and the hold it draws from (``hold_id``), if any; the rate
        decision is left on it. ``deadline`` is an absolute ``time.monotonic()``;
        ``on_end`` hears how the call ended, after its settlement; ``check`` sees each
        chunk first."""
        if not 1 <= request.max_tokens <= MAX_TOKENS_LIMIT:
            raise InvalidInput(
                f"max_tokens must be between 1 and {MAX_TOKENS_LIMIT}",
                code="invalid_max_tokens",
            )
        if not 1 <= request.n <= MAX_CHOICES:
            raise InvalidInput(f"n must be between 1 and {MAX_CHOICES}", code="invalid_n")
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise DeadlineExceeded("the deadline passed before the call started")
        version = target.version
        principal = caller.principal
        # Tokens per minute count what the call may use at most, before it runs.
        bound = request.prompt_bytes + request.output_bound
        admission = await admit(self.limits, caller, version.model, tokens=bound)
        try:
            call = CallInfo(
                tenant=principal.tenant or principal.id,
                key_id=principal.key_id,
                model=version.model,
                version=version.version,
                manifest_digest=version.manifest_digest,
                task=target.task,
                endpoint=target.endpoint,
                request_id=request.request_id,
                timeout_seconds=timeout,
                call_id=caller.call_id,
                hold_id=caller.hold_id,
            )
            metered = await self.meter.open(
                stream_call(
                    call, prompt_bytes=request.prompt_bytes, max_tokens=request.output_bound
                )
            )
        except BaseException:
            admission.release()
            raise
        try:
            chunks = self.backend.stream(
                StreamRequest(
                    version=version,
                    prompt=request.prompt,
                    max_tokens=request.max_tokens,
                    deadline=deadline,
                    task=target.task,
                    parameters=request.parameters,
                    request_id=request.request_id,
                    call_id=metered.reservation.id if metered.reservation else "",
                    messages=request.messages,
                    n=request.n,
                    priority=request.priority,
                    prediction_id=metered.prediction_id,
                )
            )
        except BaseException as exc:
            await self.meter.failed(metered, exc)
            admission.release()
            if on_end is not None:
                on_end_safely(on_end, None, exc)
            raise
        stream = CallStream(
            chunks,
            metered,
            self.meter,
            admission,
            deadline,
            request.output_bound,
            request.n,
            on_end=on_end,
            input_estimate=request.input_estimate,
            check=check,
        )
        await stream.start()
        return stream


class CallStream:
    """One streamed call: iterate it (or ``receive``) for its chunks; ``aclose`` it, or
    use it as an async context manager, to end it. ``usage`` is what was delivered so
    far, ``status`` how the call ended (None while it runs)."""

    def __init__(
        self,
        chunks: AsyncIterator[StreamChunk],
        metered: MeteredCall,
        meter: InferenceMeter,
        admission: Admission,
        deadline: float,
        max_tokens: int,
        choices: int = 1,
        *,
        on_end: StreamEnded | None = None,
        input_estimate: int = 0,
        check: OutputCheck | None = None,
    ) -> None:
        self._chunks = chunks
        self._check = check
        self._on_end = on_end
        self._input_estimate = input_estimate
        self._started = time.monotonic()
        self._last_chunk_at: float | None = None
        """When the backend's latest chunk came: the engine worked for the call until then."""
        self._metered = metered
        self._meter = meter
        self._admission = admission
        self._deadline = deadline
        self._max_tokens = max_tokens
        self._open_choices = set(range(choices))
        self._first: StreamChunk | None = None
        self._finished = False
        """The last chunk went out (or the bound was reached): ending now is a success."""
        self._ending: asyncio.Future[None] | None = None
        self.status: UsageStatus | None = None

    @property
    def prediction_id(self) -> str:
        return self._metered.prediction_id

    @property
    def usage(self) -> dict[Unit, int]:
        """Quantities delivered so far, in the platform's units."""
        quantities = self._metered.quantities
        return {unit: quantities.get(unit, 0) for unit in (Unit.INPUT_TOKEN, Unit.OUTPUT_TOKEN)}

    async def start(self) -> None:
        """Wait for the backend's first chunk, so that a refusal comes before any."""
        try:
            self._first = await self._receive()
        except StopAsyncIteration:
            self._finished = True
            await self._end(None)
        except BaseException as exc:
            await self._end(exc)
            raise

    def __aiter__(self) -> AsyncIterator[StreamChunk]:
        """The chunks, in order. Leaving the loop early and dropping the iterator ends
        the call as ``aclose`` does (the iterator is an async generator, closed by the
        event loop when collected); ``async with`` ends it at a known moment."""
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[StreamChunk]:
        try:
            while (chunk := await self.receive()) is not None:
                yield chunk
        finally:
            await self.aclose()

    async def receive(self) -> StreamChunk | None:
        """The next chunk with text (or the last one), None once the call ended."""
        while True:
            if self._ending is not None or self._finished:
                await self.aclose()
                return None
            try:
                chunk, self._first = self._first or await self._receive(), None
            except StopAsyncIteration:
                self._finished = True
                await self._end(None)
                return None
            except BaseException as exc:
                await self._end(exc)
                raise
            if self._ending is not None:
                return None  # ended meanwhile (``aclose`` from another task): not delivered
            self._metered.deliver(output_tokens=chunk.output_tokens)
            if chunk.finish_reason is not None:
                self._open_choices.discard(chunk.choice)
                if not self._open_choices:
                    self._finished = True
            elif self.usage[Unit.OUTPUT_TOKEN] >= self._max_tokens and chunk.output_tokens:
                self._finished = True  # the bound it was held for: nothing more is billed
            if self._check is not None and chunk.text:
                try:
                    await self._check(chunk)
                except ModelportError:
                    # Withheld (moderation blocked it): the model ran, so the call is
                    # settled as answered for what it produced, this chunk included.
                    self._finished = True
                    await self._end(None)
                    raise
                except BaseException as exc:
                    await self._end(exc)
                    raise
            if chunk.text or chunk.finish_reason is not None:
                return chunk

    async def _receive(self) -> StreamChunk:
        remaining = self._deadline - time.monotonic()
        try:
            async with asyncio.timeout(max(0.0, remaining)):
                chunk = await anext(self._chunks)
        except TimeoutError:
            raise DeadlineExceeded(
                "the stream was still running at the deadline", code="deadline_exceeded"
            ) from None
        self._last_chunk_at = time.monotonic()
        if chunk.input_tokens:
            # The engine took the prompt: its tokens are used, whatever comes next.
            self._metered.deliver(input_tokens=chunk.input_tokens)
        ran, call = chunk.version, self._metered.call
        if ran is not None and (ran.model, ran.version) != (call.model, call.version):
            # A fallback version streams it: billed at that version's prices.
            self._metered.ran_version(ran.model, ran.version, ran.manifest_digest)
        return chunk

    async def aclose(self) -> None:
        """End the call now: a success when its last chunk went out, a cancellation
        otherwise (the engine's work for it stops). Idempotent."""
        await self._end(None if self._finished else asyncio.CancelledError())

    async def __aenter__(self) -> CallStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _end(self, exc: BaseException | None) -> None:
        """Close the backend's stream, settle, release the admission: once."""
        if self._ending is not None:
            await asyncio.shield(self._ending)
            return
        self._ending = asyncio.get_running_loop().create_future()
        try:
            await self._close_backend()
            if self._last_chunk_at is not None:
                # The time the engine worked for the call: from its submission to the
                # last chunk it produced (``compute_ms`` on the usage events).
                self._metered.record(compute_seconds=self._last_chunk_at - self._started)
                if not self._metered.quantities.get(Unit.INPUT_TOKEN):
                    # It ran, but no backend counted the prompt (a remote server that
                    # reports usage only at the end, or never): estimated.
                    self._metered.deliver(input_tokens=self._input_estimate)
            if exc is None:
                await self._meter.succeeded(self._metered)
                self.status = UsageStatus.SUCCEEDED
            else:
                await self._meter.failed(self._metered, self._settled_as(exc))
                self.status = _status_of(exc)
        finally:
            self._admission.release()
            self._ending.set_result(None)
            if self._check is not None:
                self._check.ended()
            if self._on_end is not None:
                on_end_safely(self._on_end, self, exc)

    def _settled_as(self, exc: BaseException) -> BaseException:
        """What the meter settles the call by. A backend that became unavailable or
        overloaded once its stream had begun did run: the call is ``failed`` (priced by
        the failure rule), not given back whole as a refusal before running is."""
        if (
            self._last_chunk_at is not None
            and isinstance(exc, ModelportError)
            and exc.kind in ("unavailable", "overloaded")
        ):
            return RuntimeError(f"the stream broke: {exc.code}")
        return exc

    async def _close_backend(self) -> None:
        """Close the backend's stream before settling: the engine stops working for a
        consumer that left."""
        close = getattr(self._chunks, "aclose", None)
        if close is None:
            return
        try:
            await close()
        except RuntimeError:
            # Another task is waiting on it (``aclose`` called beside the consumer): the
            # stream ends when that wait returns. Cancel the consuming task instead to
            # stop the engine at once.
            _log.warning("a stream was closed while its consumer waited on it")

    def __del__(self) -> None:
        if self._ending is None:
            # Never ended: end it now rather than hold the admission and the reservation
            # until the reservation expires.
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            task = loop.create_task(self.aclose())
            _closing.add(task)  # the loop keeps only a weak reference to a task
            task.add_done_callback(_closing.discard)


def on_end_safely(
    on_end: StreamEnded, stream: CallStream | None, exc: BaseException | None
) -> None:
    """Tell ``on_end`` (a stream that never started is None); its failure is logged."""
    try:
        on_end(stream, exc)
    except Exception:
        _log.exception("a stream's end hook failed")


def _status_of(exc: BaseException) -> UsageStatus:
    if isinstance(exc, DeadlineExceeded):
        return UsageStatus.TIMEOUT
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        return UsageStatus.CANCELLED
    return UsageStatus.FAILED
