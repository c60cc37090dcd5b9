"""``TorchGenerativeEngine``: continuous batching of a ``transformers`` causal LM.

``submit`` (on the event loop) tokenizes the request (a chat through the tokenizer's
chat template), checks it against the context length, the KV budget and the waiting
queue (``Scheduler.check``: errors before anything is queued or allocated) and queues
one sequence per choice. The engine thread then loops, one step at a time::

    IDLE --work--> STEP: take cancellations (free their sequences and KV)
                         -> schedule (admit / preempt)
                         -> prefill the admitted, decode the others (one batched step)
                         -> sample, detokenize, check stops -> chunks to the event loop
                         -> finished sequences leave (their KV is released)
         <--no work--

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from modelport.errors import InvalidInput, Unavailable
from modelport.runtime.generative.kv import KvLedger, kv_bytes_per_token
from modelport.runtime.generative.metrics import EngineMetrics, GenerationMetrics
from modelport.runtime.generative.runner import BatchRunner, DecodeRow, PrefillRow
from modelport.runtime.generative.sampling import (
    SamplingParams,
    make_generator,
    parse_sampling,
    sample,
)
from modelport.runtime.generative.scheduler import ScheduledSequence, Scheduler
from modelport.runtime.generative.stops import IncrementalDetokenizer, StopText, eos_token_ids
from modelport.runtime.types import GenerationChunk, GenerationRequest

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

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


class TorchGeneration:
    """One submitted request: chunks of its ``n`` choices in order of production."""

    def __init__(self, engine: TorchGenerativeEngine, input_tokens: int, n: int) -> None:
        self._engine = engine
        self._input_tokens = input_tokens
        self._open = n
        self._queue: asyncio.Queue[GenerationChunk | BaseException | _End] = asyncio.Queue()
        self.cancelled = False
        self.sequences: list[_Sequence] = []

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


class _Sequence(ScheduledSequence):
    """One choice of a request, as the engine runs it."""

    def __init__(
        self,
        generation: TorchGeneration,
        loop: asyncio.AbstractEventLoop,
        request: GenerationRequest,
        choice: int,
        prompt_ids: list[int],
        params: SamplingParams,
        tokenizer: Any,
        device: str,
    ) -> None:
        super().__init__(len(prompt_ids), request.max_tokens, request.priority)
        self.generation, self.loop, self.choice = generation, loop, choice
        self.prompt_ids, self.params = prompt_ids, params
        seed = None if params.seed is None else params.seed + choice
        self.generator = make_generator(seed, device if device.startswith("cuda") else "cpu")
        self.detokenizer = IncrementalDetokenizer(tokenizer, prompt_ids)
        self.text = StopText(params.stop)
        self.output_ids: list[int] = []
        self.slots: torch.Tensor | None = None
        self.submitted_at = time.monotonic()
        self.first_token_at: float | None = None
        self.unsent_tokens = 0
        self.unsent_logprobs: list[float] = []


class TorchGenerativeEngine:
    """A causal LM served by continuous batching (implements ``GenerativeEngine``).

    ``name`` (``owner/name:version``) labels the metrics; ``metrics`` is the registry
    holder to record them on (a private one by default)."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        config: EngineConfig,
        *,
        name: str = "",
        metrics: GenerationMetrics | None = None,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.config = config
        self.name = name
        bytes_per_token = kv_bytes_per_token(model.config, model.dtype)
        capacity = config.kv_budget_bytes // bytes_per_token
        self.scheduler = Scheduler(
            ledger=KvLedger(capacity, bytes_per_token),
            context_length=config.context_length,
            max_running=config.max_running,
            max_waiting=config.max_waiting,
            offline_waiting_share=config.offline_waiting_share,
            max_prefill_tokens=config.max_prefill_tokens,
        )
        self.runner = BatchRunner(model, capacity, config.device)
        self.eos = eos_token_ids(tokenizer, getattr(model, "generation_config", None))
        self.metrics_holder = metrics or GenerationMetrics()
        model_label, _, version_label = name.rpartition(":") if ":" in name else (name, "", "")
        self.metrics: EngineMetrics = self.metrics_holder.engine(model_label, version_label)
        self._cond = threading.Condition()
        self._cancelled: list[_Sequence] = []
        self._stopping = False
        self._weights_bytes = sum(p.nbytes for p in model.parameters())
        self._thread = threading.Thread(target=self._run, name=f"engine {name}", daemon=True)
        self._thread.start()

    # -- the event loop's side ---------------------------------------------------------

    def submit(self, request: GenerationRequest) -> TorchGeneration:
        if self._stopping:
            raise Unavailable(f"{self.name} is unloading", code="model_unloading", retry_after=1)
        params = parse_sampling(request.parameters)
        if request.max_tokens < 1:
            raise InvalidInput("'max_tokens' must be at least 1", code="invalid_parameter")
        if not 1 <= request.n <= MAX_CHOICES:
            raise InvalidInput(f"'n' must be 1 to {MAX_CHOICES}", code="invalid_parameter")
        prompt_ids = self.encode(request)
        if not prompt_ids:
            raise InvalidInput("the prompt is empty", code="empty_prompt")
        loop = asyncio.get_running_loop()
        generation = TorchGeneration(self, len(prompt_ids), request.n)
        generation.sequences = [
            _Sequence(
                generation,
                loop,
                request,
                i,
                prompt_ids,
                params,
                self.tokenizer,
                self.config.device,
            )
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
        """The prompt's tokens: a chat rendered with the tokenizer's template (ending with
        the assistant's turn), or the prompt with the tokenizer's special tokens."""
        tok: Any = self.tokenizer
        if request.messages is not None:
            if not getattr(tok, "chat_template", None):
                raise InvalidInput("this model has no chat template", code="no_chat_template")
            messages = [{"role": m.role, "content": m.content} for m in request.messages]
            text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            ids = tok(text, add_special_tokens=False)["input_ids"]
        else:
            ids = tok(request.prompt)["input_ids"]
        return [int(i) for i in ids]

    def _cancel(self, generation: TorchGeneration) -> None:
        with self._cond:
            self._cancelled.extend(generation.sequences)
            self._cond.notify()

    def memory_bytes(self) -> int:
        return self._weights_bytes + self.runner.pool_bytes()

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
        self._fail([s for s in left if isinstance(s, _Sequence)], error)
        self.runner.pools.clear()
        self._gauges()

    # -- the engine thread -------------------------------------------------------------

    def _run(self) -> None:
        torch.set_grad_enabled(False)
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
                admitted = [s for s in out.admitted if isinstance(s, _Sequence)]
                decoding = [
                    s
                    for s in self.scheduler.running
                    if isinstance(s, _Sequence) and s not in out.admitted
                ]
                preempted = [s for s in out.preempted if isinstance(s, _Sequence)]
            try:
                with torch.inference_mode():
                    self._step(admitted, decoding, preempted)
            except Exception as exc:
                _log.exception("generation step failed (%s)", self.name)
                with self._cond:
                    failed = [*self.scheduler.running, *self.scheduler.waiting()]
                    for gone in failed:
                        self._leave(gone)
                self._fail([s for s in failed if isinstance(s, _Sequence)], exc)
            self._gauges()

    def _step(
        self, admitted: list[_Sequence], decoding: list[_Sequence], preempted: list[_Sequence]
    ) -> None:
        for seq in preempted:
            self._release_slots(seq)
        if preempted:
            self.metrics.preemptions.inc(len(preempted))
        for seq in admitted:
            seq.slots = self.runner.allocate(seq.reserve_tokens)
        finished: list[_Sequence] = []
        produced = 0
        for rows, run in (
            (admitted, self._prefill),
            (decoding, self._decode),
        ):
            if not rows:
                continue
            logits = run(rows)
            tokens, logprobs = sample(logits, [s.params for s in rows], [s.generator for s in rows])
            now = time.monotonic()
            chunks: dict[TorchGeneration, list[GenerationChunk | BaseException]] = {}
            for seq, token, logprob in zip(rows, tokens, logprobs, strict=True):
                chunk = self._accept(seq, token, logprob, now)
                if chunk is not None:
                    chunks.setdefault(seq.generation, []).append(chunk)
                    if chunk.finish_reason is not None:
                        finished.append(seq)
            produced += len(rows)
            # Sent before the decode that follows: a joining sequence's first token
            # does not wait for the others' step.
            for generation, items in chunks.items():
                self._post(generation, items)
        self.metrics.generated_tokens.inc(produced)
        if finished:
            with self._cond:
                for seq in finished:
                    self._leave(seq)

    def _prefill(self, rows: list[_Sequence]) -> torch.Tensor:
        return self.runner.prefill(
            [PrefillRow(s.prompt_ids + s.output_ids, self._slots(s)) for s in rows]
        )

    def _decode(self, rows: list[_Sequence]) -> torch.Tensor:
        return self.runner.decode(
            [
                DecodeRow(s.output_ids[-1], s.prompt_tokens + len(s.output_ids) - 1, self._slots(s))
                for s in rows
            ]
        )

    @staticmethod
    def _slots(seq: _Sequence) -> torch.Tensor:
        assert seq.slots is not None, "a running sequence holds its KV slots"
        return seq.slots

    def _accept(
        self, seq: _Sequence, token: int, logprob: float | None, now: float
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
        if token in self.eos:
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
        )
        seq.unsent_tokens, seq.unsent_logprobs = 0, []
        if finish is not None and seq.generated_tokens > 1:
            self.metrics.time_per_output_token.observe(
                (now - seq.first_token_at) / (seq.generated_tokens - 1)
            )
        return chunk

    def _leave(self, seq: ScheduledSequence) -> None:
        """Forget a finished, cancelled or failed sequence and free its KV (under the
        lock)."""
        self.scheduler.finish(seq)
        if isinstance(seq, _Sequence):
            self._release_slots(seq)

    def _release_slots(self, seq: _Sequence) -> None:
        if seq.slots is not None:
            self.runner.release(seq.slots)
            seq.slots = None

    def _fail(self, sequences: list[_Sequence], error: BaseException) -> None:
        for generation in {s.generation: None for s in sequences}:
            self._post(generation, [error])

    def _post(
        self, generation: TorchGeneration, items: list[GenerationChunk | BaseException]
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
