"""Plain records of the runtime (no I/O): version keys, load states, timings, results."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np


class LoadState(StrEnum):
    """Where a hosted version stands. A version absent from the host is simply not loaded."""

    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"
    UNLOADING = "unloading"


class Priority(StrEnum):
    """Scheduling class, most urgent first: ``interactive`` requests never wait behind
    ``batch`` ones, and ``offline`` ones (jobs and batches) run only when neither waits."""

    INTERACTIVE = "interactive"
    BATCH = "batch"
    OFFLINE = "offline"


PRIORITIES = (Priority.INTERACTIVE, Priority.BATCH, Priority.OFFLINE)
"""Every class, most urgent first: the order queues are served in."""


class Execution(StrEnum):
    """Where a tensor version's model executes (the manifest's ``runtime.execution``)."""

    THREAD = "thread"
    """On threads of the serving process: fastest; a hung execution cannot be stopped."""
    PROCESS = "process"
    """In worker processes: tensors cross shared memory; a call past its deadline kills
    its worker, and a crash ends only that worker."""


class Phase(StrEnum):
    """Phases of a load, timed separately."""

    FETCH = "fetch"
    VERIFY = "verify"
    LOAD = "load"
    WARMUP = "warmup"


@dataclass(frozen=True)
class VersionKey:
    """Identity of a hosted version: ``owner/name``, version, and the manifest's digest."""

    model: str
    version: str
    manifest_digest: str

    @property
    def ref(self) -> str:
        return f"{self.model}:{self.version}"

    def __str__(self) -> str:
        return self.ref


@dataclass(frozen=True)
class BatchingConfig:
    """How one version's requests are queued and merged."""

    max_batch_size: int = 1
    """Most rows (dim 0) merged into one execution; 1 means no merging."""
    max_queue_delay_us: int = 0
    """How long a batch may wait for more requests while an executor is free."""
    preferred_batch_sizes: tuple[int, ...] = ()
    """Row counts dispatched at once when reached, without waiting for the delay."""
    max_queue_size: int = 1024
    """Requests held queued at most; more are refused (``queue_full``)."""
    offline_queue_share: float = 0.5
    """Share of ``max_queue_size`` that ``offline`` requests may hold at most, so a flood
    of them leaves the rest of the queue to interactive and batch traffic."""
    instances: int = 1
    """Batches that may execute at the same time."""

    @property
    def batching(self) -> bool:
        return self.max_batch_size > 1

    @property
    def max_offline_queued(self) -> int:
        """Offline requests held queued at most (at least one)."""
        return max(1, int(self.max_queue_size * self.offline_queue_share))


@dataclass(frozen=True)
class VersionStatus:
    """A snapshot of one hosted version, as ``ModelHost.status`` reports it."""

    key: VersionKey
    state: LoadState
    pinned: bool
    cause: str | None = None
    """Why a load failed (state ``failed``)."""
    cause_code: str | None = None
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds each load phase took (``fetch``, ``verify``, ``load``, ``warmup``)."""
    host_memory_bytes: int = 0
    device_memory_bytes: int = 0
    memory_source: str = "estimated"
    """``measured`` (RSS delta around the load), ``declared`` (manifest) or ``estimated``."""
    warm_up: str = ""
    """What warm-up did: ran an example, or none was declared."""
    in_flight: int = 0
    batching: BatchingConfig = field(default_factory=BatchingConfig)
    queued: int = 0
    """Requests waiting in the version's queues (every event loop's batcher)."""
    crashes: int = 0
    """Crashes of its worker processes within the crash window (``process`` execution)."""
    quarantined_seconds: float = 0.0
    """How long its calls stay refused after too many crashes (0.0: not quarantined)."""


@dataclass(slots=True)
class InferenceTimings:
    """Where one request's time went inside the runtime. Treat as immutable: it is not
    ``frozen`` because a frozen dataclass's ``__init__`` costs several times more, once
    per request on the event loop."""

    queue_seconds: float
    """From queueing to the start of its batch's execution."""
    execute_seconds: float
    """Execution of the whole batch it was part of."""
    batch_size: int
    """Rows in that batch."""
    batch_requests: int
    """Requests merged into that batch."""
    gpu_seconds: float = 0.0
    """Of ``execute_seconds``, the GPU's time (0.0: on the CPU, or not measured)."""


@dataclass(slots=True)
class InferenceResult:
    """One request's outputs and timings. Treat as immutable (not ``frozen``, as
    ``InferenceTimings``)."""

    outputs: dict[str, np.ndarray]
    timings: InferenceTimings


class Contract(StrEnum):
    """How a runtime serves a version, chosen from its manifest's format and its task."""

    TENSOR = "tensor"
    """Load, execute batches of tensors, unload; requests merged by the ``Batcher``."""
    GENERATIVE = "generative"
    """Submit a request, receive a stream of chunks, cancel; the engine schedules."""


@dataclass(frozen=True)
class ToolCall:
    """A function call an assistant message made (OpenAI's ``tool_calls`` item)."""

    id: str
    name: str
    arguments: str
    """The arguments as the model wrote them: a JSON object's text."""


@dataclass(frozen=True)
class ChatMessage:
    """One message of a chat."""

    role: str
    """``system``, ``user``, ``assistant``, ``tool`` (or another role the model's
    template knows)."""
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    """An assistant message's calls."""
    tool_call_id: str | None = None
    """A ``tool`` message: the call it answers."""

    def as_template(self) -> dict[str, object]:
        """The message as chat templates read it (``transformers``' convention)."""
        out: dict[str, object] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _arguments(c.arguments)},
                }
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


def _arguments(text: str) -> object:
    """Templates index the arguments as an object; the text where it is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class GenerationRequest:
    """One request to a generative engine."""

    prompt: str
    """The text to continue (completions); empty when ``messages`` is given."""
    max_tokens: int
    """Most output tokens the engine may produce per choice; it stops there (``length``)."""
    parameters: dict[str, object] = field(default_factory=dict)
    """Sampling: ``temperature``, ``top_p``, ``top_k``, ``stop``, ``seed``, ``logprobs``."""
    request_id: str = ""
    messages: tuple[ChatMessage, ...] | None = None
    """A chat (``role``/``content`` pairs): the engine renders it with the model's own
    chat template. None for a plain completion of ``prompt``."""
    n: int = 1
    """Choices to generate; each chunk says which (``GenerationChunk.choice``)."""
    to_context_end: bool = False
    """The caller set no bound: ``max_tokens`` is the model's context, and the engine
    cuts it to what the context (and the KV budget) leaves after the prompt."""
    priority: Priority = Priority.INTERACTIVE
    """``interactive`` is scheduled before ``batch``, and both before ``offline``; a
    waiting sequence may preempt running ones of a lower class (``offline`` first)."""


@dataclass(frozen=True)
class GenerationChunk:
    """A piece of a generation as the engine produced it, in order."""

    text: str
    tokens: int
    """Output tokens this chunk carries."""
    finish_reason: str | None = None
    """On a choice's last chunk only: ``stop`` (the engine ended) or ``length``
    (``max_tokens``)."""
    choice: int = 0
    """Which of the request's ``n`` choices this chunk continues."""
    logprobs: tuple[float, ...] | None = None
    """Log-probabilities of the chunk's tokens, when the request asked for them."""
    compute_seconds: float = 0.0
    """The engine's step time spent on this choice since its last chunk: each step's
    time shared over its sequences by the tokens each computed in it (its cost)."""
