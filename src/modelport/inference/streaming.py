"""The streamed call: a stream of chunks, metered as it goes, settled when it ends.

The inference service (``InferenceService.stream``, for the OpenAI-compatible ``/v1``)
runs a generative call through the pipeline (``inference.pipeline``: resolve,
authorize, read, admit, moderate, reserve, dispatch) and hands back a ``CallStream``::

    stream = await inference.stream(caller, target, request, deadline)  # 429/402/4xx/5xx
    async with stream:                       # leaving the block ends the call
        async for chunk in stream:
            ...send chunk...

It comes back once the call is admitted (its token bound charged too: the prompt's
bytes plus ``max_tokens``), its upper bound held (the prompt's input tokens, at most one
per byte, and ``max_tokens`` output tokens, drawn from the caller's hold where it names
one) and the backend's first chunk came, so refusals come before any chunk, when a
surface can still answer with a plain error. Chunks then come in order, each counted as
delivered when it is handed over. The call ends, once, in one of these ways, and its
last steps (record, settle, release: ``Pipeline.finish``) run then:

- the stream ended: ``succeeded``, the quantities delivered;
- the consumer stopped (``aclose``, leaving the ``async with`` block, or its task
  cancelled): the backend's stream is closed first, which cancels the engine's work,
  then ``cancelled``, charged for what was delivered;
- the deadline passed: the backend's stream is cut, ``timeout``; what was delivered
  is priced by the failure rule;
- the backend failed: ``failed`` (or the hold given back whole when it refused
  before running: ``Unavailable``, ``Overloaded``).

This module owns the streamed lifecycle between dispatch and the end. The chunks come
from a ``StreamSource``: a version's backend, or an endpoint's routing (replicas,
breakers and fallbacks up to the first chunk; a first chunk naming another version
bills the call at that version's prices). ``StreamingCalls`` runs the pipeline for a
version resolved by its caller.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, cast

from modelport.clock import Clock, SystemClock
from modelport.errors import DeadlineExceeded, ModelportError
from modelport.inference.steps.read import MAX_CHOICES, MAX_TOKENS_LIMIT
from modelport.inference.types import Caller
from modelport.metering.meter import InferenceMeter, MeteredCall
from modelport.metering.types import Unit, UsageStatus
from modelport.runtime.types import ChatMessage, Priority
from modelport.serving.capability import BYTES_PER_TOKEN
from modelport.serving.types import StreamChunk, StreamRequest, VersionRef
from modelport.tenancy.limits import LimitService

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env

__all__ = [
    "MAX_CHOICES",
    "MAX_TOKENS_LIMIT",
    "CallStream",
    "GenerateRequest",
    "OutputCheck",
    "StreamSource",
    "StreamTarget",
    "StreamingCalls",
    "status_of",
]

_log = logging.getLogger(__name__)

_closing: set[asyncio.Task[None]] = set()
"""Calls being ended because they were dropped without being ended."""

CHAT_TEMPLATE_ALLOWANCE = 1024
"""Bytes held beyond a chat's contents: its template wraps them in tokens of its own
(roles, separators, a default system prompt)."""


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
    max_tokens: int | None
    """Most output tokens to generate per choice: with ``n``, the upper bound the call
    is held for. None (a chat that sets none): to the end of the model's context, which
    the read step fills in from the version (``to_context_end``)."""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    request_id: str = ""
    messages: tuple[ChatMessage, ...] | None = None
    """A chat to answer (rendered by the engine with the model's template); None for a
    completion of ``prompt``."""
    n: int = 1
    priority: Priority = Priority.INTERACTIVE
    to_context_end: bool = False
    """``max_tokens`` is the model's context, filled in by the read step: the engine
    cuts it to what the prompt leaves."""
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
        assert self.max_tokens is not None, "the read step fills max_tokens in"
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


StreamEnd = Callable[[BaseException | None], Awaitable[None]]
"""The call's last steps, run once when its stream ended, with what ended it (None: the
stream ended whole)."""


class StreamingCalls:
    """Streamed calls of a version already resolved, from one source, admitted by
    ``limits`` and metered by ``meter``: the inference pipeline without its resolve
    and authorize steps (``inference.pipeline``), for callers that found the version
    themselves."""

    def __init__(
        self,
        *,
        backend: StreamSource,
        meter: InferenceMeter,
        limits: LimitService,
        clock: Clock | None = None,
    ) -> None:
        from modelport.inference.pipeline import Pipeline  # it runs this module's streams

        self.clock = clock or SystemClock()
        """What calls' deadlines are on."""
        self.backend = backend
        self.meter = meter
        self.limits = limits
        self.moderation = None
        self.cache = None
        self.degradation = None
        self.sampling = None  # a stream: never in the sampled log of direct calls
        self.pipeline = Pipeline(cast("Env", self))

    async def stream(
        self, caller: Caller, target: StreamTarget, request: GenerateRequest, deadline: float
    ) -> CallStream:
        """Admit, hold the upper bound, start the backend's stream; see the module
        docstring. ``caller``: who calls, with its repeatable call's id (``call_id``,
        charged once) and the hold it draws from (``hold_id``), if any; the rate
        decision is left on it. ``deadline`` is an absolute ``clock.monotonic()``."""
        from modelport.inference.call import Call, Kind, Mode

        call = Call(
            caller,
            None,
            Mode.STREAM,
            Kind.VERSION,
            generate=request,
            deadline=deadline,
            ref=target.version,
            task=target.task,
            endpoint=target.endpoint,
            source=self.backend,
        )
        await self.pipeline.run(call)
        assert call.stream is not None
        return call.stream


class CallStream:
    """One streamed call: iterate it (or ``receive``) for its chunks; ``aclose`` it, or
    use it as an async context manager, to end it. ``usage`` is what was delivered so
    far, ``status`` how the call ended (None while it runs)."""

    def __init__(
        self,
        chunks: AsyncIterator[StreamChunk],
        metered: MeteredCall,
        deadline: float,
        max_tokens: int,
        choices: int = 1,
        *,
        end: StreamEnd,
        input_estimate: int = 0,
        check: OutputCheck | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._chunks = chunks
        self._clock = clock or SystemClock()
        """What ``deadline`` is on; the times of the chunks are real (engine time)."""
        self._check = check
        self._end_call = end
        self.input_estimate = input_estimate
        """The prompt's tokens when no backend counted them (``GenerateRequest``)."""
        self._started = time.monotonic()
        self._last_chunk_at: float | None = None
        """When the backend's latest chunk came: the engine worked for the call until then."""
        self._first_chunk_at: float | None = None
        self.compute_seconds = 0.0
        """The engine's step time shared to the call, as its chunks reported it (0: the
        backend reports none, a remote one)."""
        self._metered = metered
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
    def served_by(self) -> str:
        """The version that serves the stream, ``owner/name:version`` (a routed call's
        choice)."""
        call = self._metered.call
        return f"{call.model}:{call.version}"

    @property
    def worked_seconds(self) -> float | None:
        """How long the engine worked for the call: from its submission to the last chunk
        it produced (None: it produced none)."""
        if self._last_chunk_at is None:
            return None
        return self._last_chunk_at - self._started

    @property
    def first_chunk_seconds(self) -> float | None:
        """From the stream's start to the backend's first chunk with output tokens (its
        time to first token; None: none came)."""
        if self._first_chunk_at is None:
            return None
        return self._first_chunk_at - self._started

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
        remaining = self._deadline - self._clock.monotonic()
        try:
            async with asyncio.timeout(max(0.0, remaining)):
                chunk = await anext(self._chunks)
        except TimeoutError:
            raise DeadlineExceeded(
                "the stream was still running at the deadline", code="deadline_exceeded"
            ) from None
        self._last_chunk_at = time.monotonic()
        self.compute_seconds += chunk.compute_seconds
        if self._first_chunk_at is None and (chunk.output_tokens or chunk.text):
            self._first_chunk_at = self._last_chunk_at
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
        """Close the backend's stream, then the call's last steps (record, settle,
        release: ``Pipeline.finish``): once."""
        if self._ending is not None:
            await asyncio.shield(self._ending)
            return
        self._ending = asyncio.get_running_loop().create_future()
        try:
            await self._close_backend()
        finally:
            try:
                await self._end_call(exc)
            finally:
                self._ending.set_result(None)

    def settled_as(self, exc: BaseException) -> BaseException:
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


def status_of(exc: BaseException) -> UsageStatus:
    """How a stream that ``exc`` ended is settled."""
    if isinstance(exc, DeadlineExceeded):
        return UsageStatus.TIMEOUT
    if isinstance(exc, asyncio.CancelledError | GeneratorExit):
        return UsageStatus.CANCELLED
    return UsageStatus.FAILED
