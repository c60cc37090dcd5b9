"""A generative engine in a model host: the server's handle on a version whose engine
runs in its own sandboxed process (``runtime.process.generative_worker``).

``HostedEngine`` implements ``GenerativeEngine`` over the worker's control socket: a
submission is sent at once and accepted or refused by the engine there
(``HostedGeneration.accepted``), its chunks come back as messages, a cancel is a
message. One reader thread takes the worker's messages and hands each to its
generation's event loop. What the worker sends is checked before it is used; a message
outside the protocol kills it. When the worker ends, however it ends, every open
generation fails with 503 ``model_host_crashed`` and the engine is dead: the host
loads the version again on its next call. The engine's gauges and counters reach this
process's ``/metrics`` from the worker's ``stats`` messages; time to first token and
per output token are measured here, as a caller sees them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from modelport.errors import ModelportError, Unavailable
from modelport.runtime.generative.metrics import EngineMetrics, GenerationMetrics
from modelport.runtime.process.client import Worker, rebuild
from modelport.runtime.process.protocol import Message, receive, send
from modelport.runtime.types import GenerationChunk, GenerationRequest

_log = logging.getLogger(__name__)

CRASHED = "model_host_crashed"


def request_message(request: GenerationRequest) -> Message:
    """A request's JSON form (``generative_worker.request_of`` reads it)."""
    return {
        "prompt": request.prompt,
        "max_tokens": request.max_tokens,
        "parameters": dict(request.parameters),
        "request_id": request.request_id,
        "messages": None
        if request.messages is None
        else [
            {
                "role": m.role,
                "content": m.content,
                "tool_calls": [[c.id, c.name, c.arguments] for c in m.tool_calls],
                "tool_call_id": m.tool_call_id,
            }
            for m in request.messages
        ],
        "n": request.n,
        "priority": request.priority.value,
        "to_context_end": request.to_context_end,
    }


class HostedGeneration:
    """One submission to the host's engine."""

    def __init__(self, engine: HostedEngine, ident: int, loop: asyncio.AbstractEventLoop) -> None:
        self._engine = engine
        self.ident = ident
        self.loop = loop
        self._accepted: asyncio.Future[int] = loop.create_future()
        self._queue: asyncio.Queue[Message] = asyncio.Queue()
        self.input_tokens = 0
        self.submitted_at = time.monotonic()
        self.first_at: float | None = None
        self.tokens = 0
        self.done = False

    async def accepted(self) -> None:
        """Returns once the engine took the request; raises its refusal."""
        self.input_tokens = await self._accepted

    def __aiter__(self) -> AsyncIterator[GenerationChunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[GenerationChunk]:
        await self.accepted()
        while True:
            message = await self._queue.get()
            op = message["op"]
            if op == "end":
                self.done = True
                return
            if op != "chunk":
                self.done = True
                raise self._engine.error_of(message)
            yield chunk_of(message)

    def cancel(self) -> None:
        if not self.done:
            self.done = True
            self._engine.cancel(self.ident)

    # -- from the reader thread, on the generation's loop ----------------------------
    def deliver(self, message: Message) -> None:
        op = message["op"]
        if op == "accepted":
            if not self._accepted.done():
                self._accepted.set_result(int(message["input_tokens"]))
            return
        if op in ("refused", "gone"):
            if not self._accepted.done():
                self._accepted.set_exception(self._engine.error_of(message))
                self._accepted.exception()  # retrieved: an unawaited refusal is not logged
            if op == "refused":
                return
        if op == "chunk":
            self._engine.observe(self, message)
        self._queue.put_nowait(message)


def chunk_of(message: Message) -> GenerationChunk:
    """A chunk message, checked: the worker is not trusted to keep to the protocol."""
    text, tokens, finish, choice = (
        message.get("text"),
        message.get("tokens"),
        message.get("finish"),
        message.get("choice"),
    )
    logprobs = message.get("logprobs")
    compute = message.get("compute", 0.0)
    if (
        not isinstance(text, str)
        or type(tokens) is not int
        or tokens < 0
        or finish not in (None, "stop", "length")
        or type(choice) is not int
        or choice < 0
        or not (logprobs is None or isinstance(logprobs, list))
        or type(compute) not in (int, float)
        or not 0 <= compute < 1e9  # NaN fails both
    ):
        raise Unavailable("the model host answered outside the protocol", code=CRASHED)
    return GenerationChunk(
        text,
        tokens,
        finish,
        choice,
        None if logprobs is None else tuple(map(float, logprobs)),
        float(compute),
    )


class HostedEngine:
    """A version's engine in a model-host process (implements ``GenerativeEngine``)."""

    def __init__(
        self,
        worker: Worker,
        *,
        memory_bytes: int,
        name: str = "",
        metrics: GenerationMetrics | None = None,
        on_crash: Callable[[str], None] | None = None,
    ) -> None:
        self.worker = worker
        self.name = name
        self.kind = "hosted"
        self._memory = memory_bytes
        self._on_crash = on_crash
        self._ids = itertools.count(1)
        self._open: dict[int, HostedGeneration] = {}
        self._lock = threading.Lock()
        self.dead: str | None = None
        """Why the host is gone (None while it runs)."""
        self._counters = {"preemptions": 0.0, "prefix_queried": 0.0, "prefix_hits": 0.0}
        holder = metrics or GenerationMetrics()
        model, _, version = name.rpartition(":") if ":" in name else (name, "", "")
        self._labels = (model, version)
        self._holder = holder
        self.metrics: EngineMetrics | None = None
        self._reader = threading.Thread(target=self._read, name=f"host {name}", daemon=True)

    def start(self, timeout: float) -> None:
        """Start the host and wait for its engine (the load's own error otherwise)."""
        self.worker.start(timeout)
        self.kind = str(self.worker.ready.get("kind") or "unknown")
        model, version = self._labels
        self.metrics = self._holder.engine(model, version, self.kind)
        self._reader.start()

    # -- GenerativeEngine --------------------------------------------------------------
    def submit(self, request: GenerationRequest) -> HostedGeneration:
        if self.dead is not None:
            raise Unavailable(f"{self.name}: its model host is gone ({self.dead})", code=CRASHED)
        generation = HostedGeneration(self, next(self._ids), asyncio.get_running_loop())
        with self._lock:
            self._open[generation.ident] = generation
        self._send({"op": "submit", "id": generation.ident, "request": request_message(request)})
        return generation

    def memory_bytes(self) -> int:
        return self._memory

    def unload(self) -> None:
        self.worker.stop()
        self._fail_all("unloaded")

    # -- the handle's own ------------------------------------------------------------
    def cancel(self, ident: int) -> None:
        with self._lock:
            self._open.pop(ident, None)
        if self.dead is None:
            with contextlib.suppress(ModelportError):
                self._send({"op": "cancel", "id": ident})

    def error_of(self, message: Message) -> ModelportError:
        if message["op"] == "gone":
            return Unavailable(
                f"{self.name}: its model host ended ({message['how']})", code=CRASHED
            )
        return rebuild(message, default_code="generation_failed", unavailable=False)

    def observe(self, generation: HostedGeneration, message: Message) -> None:
        """A chunk's share of the metrics measured here (time to first token, tokens)."""
        metrics = self.metrics
        tokens = message.get("tokens")
        if metrics is None or type(tokens) is not int or tokens <= 0:
            return
        now = time.monotonic()
        if generation.first_at is None:
            generation.first_at = now
            metrics.time_to_first_token.observe(now - generation.submitted_at)
            metrics.prompt_tokens.inc(generation.input_tokens)
        generation.tokens += tokens
        metrics.generated_tokens.inc(tokens)
        if message.get("finish") is not None and generation.tokens > 1:
            per = (now - generation.first_at) / (generation.tokens - 1)
            metrics.time_per_output_token.observe(per)

    def _send(self, message: Message) -> None:
        conn = self.worker.connection
        try:
            with self._lock:
                send(conn, message)
        except (OSError, ValueError):
            raise Unavailable(f"{self.name}: its model host is gone", code=CRASHED) from None

    def _read(self) -> None:
        conn = self.worker.connection
        while True:
            try:
                message = receive(conn)
            except (EOFError, OSError):
                break
            op = message.get("op")
            if op == "stats":
                self._stats(message)
                continue
            ident = message.get("id")
            with self._lock:
                generation = self._open.get(ident) if type(ident) is int else None
                if op in ("end", "error") and type(ident) is int:
                    self._open.pop(ident, None)
            if op not in ("accepted", "refused", "chunk", "end", "error"):
                _log.error("%s: the model host answered outside the protocol: %r", self.name, op)
                break
            if generation is not None:
                with contextlib.suppress(RuntimeError):  # its loop is closed: nobody listens
                    generation.loop.call_soon_threadsafe(generation.deliver, message)
        how = self.worker.how()
        self.worker.kill()
        if self.dead is None and self._on_crash is not None:
            self._on_crash(how)
        self._fail_all(how)

    def _fail_all(self, how: str) -> None:
        if self.dead is None:
            self.dead = how
        with self._lock:
            left, self._open = list(self._open.values()), {}
        for generation in left:
            with contextlib.suppress(RuntimeError):
                generation.loop.call_soon_threadsafe(
                    generation.deliver, {"op": "gone", "id": generation.ident, "how": how}
                )
        if self.metrics is not None:
            for gauge in (self.metrics.running, self.metrics.waiting, self.metrics.kv_cache_bytes):
                gauge.set(0)

    def _stats(self, message: Message) -> None:
        metrics = self.metrics
        if metrics is None:
            return
        values: dict[str, Any] = {}
        for key in ("running", "waiting", "kv_bytes", *self._counters):
            value = message.get(key)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                return
            values[key] = float(value)
        metrics.running.set(values["running"])
        metrics.waiting.set(values["waiting"])
        metrics.kv_cache_bytes.set(values["kv_bytes"])
        for key, counter in (
            ("preemptions", metrics.preemptions),
            ("prefix_queried", metrics.prefix_queried_tokens),
            ("prefix_hits", metrics.prefix_hit_tokens),
        ):
            delta = values[key] - self._counters[key]
            if delta > 0:
                counter.inc(delta)
                self._counters[key] = values[key]
