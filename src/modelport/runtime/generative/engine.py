"""``BatchingEngine``: continuous batching of a causal LM over swappable kernels.

``submit`` (on the event loop) tokenizes the request (a chat through the model's chat
template), checks it against the context length, the KV budget and the waiting queue
(``Scheduler.check``: errors before anything is queued or allocated) and queues one
sequence per choice. The engine thread then loops, one step at a time::

    IDLE --work--> STEP: take cancellations (free their sequences and KV)
                         -> schedule (admit / preempt)
                         -> kernels: prefill the admitted, decode the others
                         -> detokenize, check stops -> chunks to the event loop
                         -> finished sequences leave (their KV is released)
         <--no work--

What executes a step (tokenizer, KV cells, forward passes, sampling) is the kernels'
(``kernels.Kernels``): ``torch_engine`` for ``transformers`` models, ``llama`` for GGUF
files on llama.cpp.

Chunks reach each ``Generation``'s asyncio queue through
``loop.call_soon_threadsafe``: the event loop never waits on the model. ``unload``
stops the thread; generations still open end with ``model_unloading``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from modelport.errors import InvalidInput, Unavailable
from modelport.runtime.generative.kv import KvLedger
from modelport.runtime.generative.metrics import EngineMetrics, GenerationMetrics
from modelport.runtime.generative.sampling import SamplingParams, parse_sampling
from modelport.runtime.generative.scheduler import ScheduledSequence, Scheduler
from modelport.runtime.generative.stops import IncrementalDetokenizer, StopText
from modelport.runtime.types import GenerationChunk, GenerationRequest

if TYPE_CHECKING:
    from modelport.runtime.generative.kernels import Kernels

_log = logging.getLogger(__name__)

MAX_CHOICES = 16


@dataclass(frozen=True)
class EngineConfig:
    kv_budget_bytes: int
    """KV cache memory this version may use (preallocated as a pool of token slots)."""
    context_length: int
    """The model's max positions (prompt + output)."""
    max_running: int = 32
    """Sequences decoded together at most."""
    max_waiting: int = 256
    """Bounded waiting queue (sequences); beyond it 429 ``queue_full``."""
    offline_waiting_share: float = 0.5
    """Share of ``max_waiting`` that ``offline`` sequences may hold."""
    device: str = "cpu"
    max_prefill_tokens: int = 4096
    """Prompt tokens prefilled in one step at most (one sequence always is), so joining
    sequences do not stall the running ones for long."""


class _End:
    """Wakes an iterator whose generation was cancelled or failed."""


class EngineGeneration:
    """One submitted request: chunks of its ``n`` choices in order of production."""

    def __init__(self, engine: BatchingEngine, input_tokens: int, n: int) -> None:
        self._engine = engine
        self._input_tokens = input_tokens
        self._open = n
        self._queue: asyncio.Queue[GenerationChunk | BaseException | _End] = asyncio.Queue()
        self.cancelled = False
        self.sequences: list[EngineSequence] = []

    @property
    def input_tokens(self) -> int:
        return self._input_tokens

    def __aiter__(self) -> AsyncIterator[GenerationChunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[GenerationChunk]:
        while self._open and not self.cancelled:
            item = await self._queue.get()
            if self.cancelled or isinstance(item, _End):
                return
            if isinstance(item, BaseException):
                self._open = 0
                raise item
            if item.finish_reason is not None:
                self._open -= 1
            yield item

    def cancel(self) -> None:
        if self._open and not self.cancelled:
            self.cancelled = True
            self._engine._cancel(self)
            self._queue.put_nowait(_End())

    def _deliver(self, items: list[GenerationChunk | BaseException]) -> None:
        for item in items:
            self._queue.put_nowait(item)


class EngineSequence(ScheduledSequence):
    """One choice of a request, as the engine runs it."""

    def __init__(
        self,
        generation: EngineGeneration,
        loop: asyncio.AbstractEventLoop,
        request: GenerationRequest,
        choice: int,
        prompt_ids: list[int],
        params: SamplingParams,
        tokenizer: Any,
    ) -> None:
        super().__init__(len(prompt_ids), request.max_tokens, request.priority)
        self.generation, self.loop, self.choice = generation, loop, choice
        self.prompt_ids, self.params = prompt_ids, params
        self.detokenizer = IncrementalDetokenizer(tokenizer, prompt_ids)
        self.text = StopText(params.stop)
        self.output_ids: list[int] = []
        self.state: Any = None
        """The kernels' (KV cells, sampler), from admission until it leaves."""
        self.submitted_at = time.monotonic()
        self.first_token_at: float | None = None
        self.unsent_tokens = 0
        self.unsent_logprobs: list[float] = []
        self.unsent_compute = 0.0
        """Its share of the steps' time since its last chunk (``GenerationChunk``)."""


class BatchingEngine:
    """A causal LM served by continuous batching (implements ``GenerativeEngine``).

    ``name`` (``owner/name:version``) labels the metrics; ``metrics`` is the registry
    holder to record them on (a private one by default)."""

    def __init__(
        self,
        kernels: Kernels,
        config: EngineConfig,
        *,
        name: str = "",
        metrics: GenerationMetrics | None = None,
    ) -> None:
        self.kernels = kernels
        self.config = config
        self.name = name
        self.scheduler = Scheduler(
            ledger=KvLedger(kernels.capacity_tokens, kernels.bytes_per_token, kernels.reclaimable),
            context_length=config.context_length,
            max_running=config.max_running,
            max_waiting=config.max_waiting,
            offline_waiting_share=config.offline_waiting_share,
            max_prefill_tokens=config.max_prefill_tokens,
        )
        self.metrics_holder = metrics or GenerationMetrics()
        model_label, _, version_label = name.rpartition(":") if ":" in name else (name, "", "")
        self.metrics: EngineMetrics = self.metrics_holder.engine(
            model_label, version_label, kernels.kind
        )
        self.step_seconds = 0.0
        """The time its steps took, all shared among their sequences (written by the
        engine thread only)."""
        self._cond = threading.Condition()
        self._cancelled: list[EngineSequence] = []
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"engine {name}", daemon=True)
        self._thread.start()

    @property
    def kind(self) -> str:
        """Which kernels run this engine (``llama.cpp``, ``transformers``)."""
        return self.kernels.kind

    # -- the event loop's side ---------------------------------------------------------

    def submit(self, request: GenerationRequest) -> EngineGeneration:
        if self._stopping:
            raise Unavailable(f"{self.name} is unloading", code="model_unloading", retry_after=1)
        params = parse_sampling(request.parameters)
        self.kernels.check(params)
        if request.max_tokens < 1:
            raise InvalidInput("'max_tokens' must be at least 1", code="invalid_parameter")
        if not 1 <= request.n <= MAX_CHOICES:
            raise InvalidInput(f"'n' must be 1 to {MAX_CHOICES}", code="invalid_parameter")
        prompt_ids = self.encode(request)
        if not prompt_ids:
            raise InvalidInput("the prompt is empty", code="empty_prompt")
        if request.to_context_end:
            room = min(self.config.context_length, self.scheduler.ledger.capacity_tokens)
            # At least one token: a prompt that leaves none is refused by the check below.
            request = replace(
                request, max_tokens=max(1, min(request.max_tokens, room - len(prompt_ids)))
            )
        loop = asyncio.get_running_loop()
        generation = EngineGeneration(self, len(prompt_ids), request.n)
        generation.sequences = [
            EngineSequence(generation, loop, request, i, prompt_ids, params, self.kernels.tokenizer)
            for i in range(request.n)
        ]
        with self._cond:
            self.scheduler.check(
                len(prompt_ids), request.max_tokens, request.n, priority=request.priority
            )
            self.scheduler.add(generation.sequences)
            self.metrics.waiting.set(self.scheduler.waiting_count)
            self._cond.notify()
        self.metrics.prompt_tokens.inc(len(prompt_ids))
        return generation

    def encode(self, request: GenerationRequest) -> list[int]:
        """The prompt's tokens: a chat rendered with the model's template (ending with the
        assistant's turn), or the prompt with the tokenizer's special tokens."""
        return self.kernels.encode(request)

    def _cancel(self, generation: EngineGeneration) -> None:
        with self._cond:
            self._cancelled.extend(generation.sequences)
            self._cond.notify()

    def memory_bytes(self) -> int:
        return self.kernels.memory_bytes()

    def unload(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread is not threading.current_thread():
            self._thread.join()
        with self._cond:
            left = [*self.scheduler.running, *self.scheduler.waiting()]
            for seq in left:
                self.scheduler.finish(seq)
        error = Unavailable(f"{self.name} was unloaded", code="model_unloading", retry_after=1)
        self._fail([s for s in left if isinstance(s, EngineSequence)], error)
        self.kernels.unload()
        self._gauges()

    # -- the engine thread -------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopping and not (
                    self._cancelled or self.scheduler.running or self.scheduler.waiting_count
                ):
                    self._cond.wait()
                if self._stopping:
                    return
                for seq in self._cancelled:
                    self._leave(seq)
                self._cancelled.clear()
                out = self.scheduler.schedule()
                admitted = [s for s in out.admitted if isinstance(s, EngineSequence)]
                decoding = [
                    s
                    for s in self.scheduler.running
                    if isinstance(s, EngineSequence) and s not in out.admitted
                ]
                preempted = [s for s in out.preempted if isinstance(s, EngineSequence)]
            try:
                self._step(admitted, decoding, preempted)
            except Exception as exc:
                _log.exception("generation step failed (%s)", self.name)
                with self._cond:
                    failed = [*self.scheduler.running, *self.scheduler.waiting()]
                    for gone in failed:
                        self._leave(gone)
                self._fail([s for s in failed if isinstance(s, EngineSequence)], exc)
            self._gauges()

    def _step(
        self,
        admitted: list[EngineSequence],
        decoding: list[EngineSequence],
        preempted: list[EngineSequence],
    ) -> None:
        for seq in preempted:
            self._close(seq)
        if preempted:
            self.metrics.preemptions.inc(len(preempted))
        # Each group's time (from the last group, or the step's start, to its tokens) is
        # shared over its sequences by the tokens each computed: a prefill's prompt, or
        # one decoded token.
        last = time.perf_counter()
        computed = {id(s): s.prefill_tokens for s in admitted}
        if admitted:
            hits = self.kernels.open(admitted)
            self.metrics.prefix_queried_tokens.inc(sum(s.prefill_tokens for s in admitted))
            if hits:
                self.metrics.prefix_hit_tokens.inc(hits)
        finished: list[EngineSequence] = []
        produced = 0
        for group in self.kernels.step(admitted, decoding):
            now = time.monotonic()
            ended = time.perf_counter()
            elapsed, last = ended - last, ended
            self.step_seconds += elapsed
            weights = [computed.get(id(s.sequence), 1) for s in group]
            total = sum(weights) or 1
            for sampled, weight in zip(group, weights, strict=True):
                sampled.sequence.unsent_compute += elapsed * weight / total
            chunks: dict[EngineGeneration, list[GenerationChunk | BaseException]] = {}
            for sampled in group:
                row: EngineSequence = sampled.sequence
                chunk = self._accept(row, sampled.token, sampled.logprob, now)
                if chunk is not None:
                    chunks.setdefault(row.generation, []).append(chunk)
                    if chunk.finish_reason is not None:
                        finished.append(row)
            produced += len(group)
            # Sent before the next group is computed: a joining sequence's first token
            # does not wait for the others' step.
            for generation, items in chunks.items():
                self._post(generation, items)
        self.metrics.generated_tokens.inc(produced)
        if finished:
            with self._cond:
                for seq in finished:
                    self._leave(seq)

    def _accept(
        self, seq: EngineSequence, token: int, logprob: float | None, now: float
    ) -> GenerationChunk | None:
        """Take ``seq``'s next token; the chunk to send, if any (text, or its end)."""
        seq.output_ids.append(token)
        seq.generated_tokens += 1
        seq.unsent_tokens += 1
        if logprob is not None:
            seq.unsent_logprobs.append(logprob)
        if seq.first_token_at is None:
            seq.first_token_at = now
            self.metrics.time_to_first_token.observe(now - seq.submitted_at)
        finish: str | None = None
        text = ""
        if self.kernels.is_end(token):
            finish = "stop"
        else:
            text = seq.text.add(seq.detokenizer.push(token))
            if seq.text.stopped:
                finish = "stop"
            elif seq.generated_tokens >= seq.max_tokens:
                finish = "length"
        if finish is not None and not seq.text.stopped:
            # The end: a character still incomplete, then the text held back for stops.
            text += seq.text.add(seq.detokenizer.flush())
            if seq.text.stopped:
                finish = "stop"
            text += seq.text.flush()
        if not text and finish is None:
            return None
        chunk = GenerationChunk(
            text=text,
            tokens=seq.unsent_tokens,
            finish_reason=finish,
            choice=seq.choice,
            logprobs=tuple(seq.unsent_logprobs) if seq.params.logprobs else None,
            compute_seconds=seq.unsent_compute,
        )
        seq.unsent_tokens, seq.unsent_logprobs, seq.unsent_compute = 0, [], 0.0
        if finish is not None and seq.generated_tokens > 1:
            self.metrics.time_per_output_token.observe(
                (now - seq.first_token_at) / (seq.generated_tokens - 1)
            )
        return chunk

    def _leave(self, seq: ScheduledSequence) -> None:
        """Forget a finished, cancelled or failed sequence and free its KV (under the
        lock)."""
        self.scheduler.finish(seq)
        if isinstance(seq, EngineSequence):
            self._close(seq)

    def _close(self, seq: EngineSequence) -> None:
        if seq.state is not None:
            self.kernels.close(seq)
            seq.state = None

    def _fail(self, sequences: list[EngineSequence], error: BaseException) -> None:
        for generation in {s.generation: None for s in sequences}:
            self._post(generation, [error])

    def _post(
        self, generation: EngineGeneration, items: list[GenerationChunk | BaseException]
    ) -> None:
        if generation.cancelled:
            return
        loop = generation.sequences[0].loop
        try:
            loop.call_soon_threadsafe(generation._deliver, items)
        except RuntimeError:  # its event loop is closed: nobody is listening any more
            generation.cancelled = True
            with self._cond:
                self._cancelled.extend(generation.sequences)

    def _gauges(self) -> None:
        with self._cond:
            running, waiting = len(self.scheduler.running), self.scheduler.waiting_count
            kv = self.scheduler.ledger.used_bytes
        self.metrics.running.set(running)
        self.metrics.waiting.set(waiting)
        self.metrics.kv_cache_bytes.set(kv)
