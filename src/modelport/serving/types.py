"""Plain records shared by the serving layer (no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from modelport.manifest import ExampleTensor, Manifest
from modelport.runtime.types import ChatMessage, Priority

HOT_PATH_RECORDS = "BackendRequest, BackendResponse, Attempt, Provenance, Served"
"""Records made on every call: treat them as immutable, but they are not ``frozen``, since
a frozen dataclass's ``__init__`` (``object.__setattr__`` per field) costs microseconds
per call on the event loop (as ``metering.types.CallInfo``)."""


@dataclass(frozen=True)
class VersionRef:
    """A registry version as the serving layer needs it."""

    model: str
    """``owner/name``"""
    version: str
    manifest_digest: str
    manifest: Manifest

    @property
    def ref(self) -> str:
        return f"{self.model}:{self.version}"


@dataclass(frozen=True)
class Capabilities:
    """What a backend can honour; routing filters on these before choosing."""

    formats: frozenset[str] = frozenset()
    max_batch_size: int = 1
    context_length: int | None = None
    hardware: frozenset[str] = frozenset({"cpu"})
    protocols: frozenset[str] = frozenset({"v2"})
    """``v2`` (tensors) and/or ``openai`` (text generation, embeddings)."""
    tasks: frozenset[str] = frozenset()
    """With ``openai``: the operations served, among ``chat``, ``completions``, ``embeddings``."""


class Health(StrEnum):
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    UNKNOWN = "unknown"


CALL_ID_HEADER = "Modelport-Call-Id"
"""The header a remote backend receives a call's ``call_id`` in."""


@dataclass(slots=True)  # not frozen: made per call (see HOT_PATH_RECORDS)
class BackendRequest:
    """One tensor inference to run on a backend, with the caller's remaining time."""

    version: VersionRef
    inputs: Mapping[str, np.ndarray]
    deadline: float
    """Absolute ``monotonic()`` of the dispatcher's clock by which the answer must be back."""
    priority: Priority = Priority.INTERACTIVE
    outputs: tuple[str, ...] | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    request_id: str = ""
    call_id: str = ""
    """The platform's id of the metered call (its reservation), or '' when nothing was
    held. Remote backends send it as ``CALL_ID_HEADER``: their publisher may report
    the call's usage against it (``POST /api/usage/events``, ``call_id``)."""


GPU_SECONDS = "gpu"
"""The ``BackendResponse.timings`` key of the GPU's share of ``execute``, where a model
on a GPU measured it (absent on the CPU)."""


@dataclass(slots=True)  # not frozen: made per call (see HOT_PATH_RECORDS)
class BackendResponse:
    outputs: Mapping[str, np.ndarray]
    backend: str
    """Name of the backend (replica) that answered."""
    timings: Mapping[str, float] = field(default_factory=dict)
    """Seconds per stage where the backend knows them: queue, batch_wait, execute, and
    ``GPU_SECONDS`` (of execute, the GPU's)."""
    batch_size: int | None = None


@dataclass(frozen=True)
class StreamRequest:
    """One generative request to stream from a backend, with the caller's remaining time."""

    version: VersionRef
    prompt: str
    max_tokens: int
    """Most output tokens the stream may carry."""
    deadline: float
    """Absolute ``monotonic()`` of the dispatcher's clock by which the stream must have ended."""
    task: str = ""
    """The model's task: with its manifest's format, it decides the runtime's contract."""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    request_id: str = ""
    call_id: str = ""
    """As ``BackendRequest.call_id``."""
    messages: tuple[ChatMessage, ...] | None = None
    """A chat to answer (``GenerationRequest.messages``); None for a completion."""
    n: int = 1
    """Choices to generate: ``max_tokens`` bounds each."""
    to_context_end: bool = False
    """As ``GenerationRequest.to_context_end``: no bound was asked for."""
    priority: Priority = Priority.INTERACTIVE
    prediction_id: str = ""
    """The metered call's prediction id (a shadow copy is recorded against it)."""


@dataclass(frozen=True)
class StreamChunk:
    """One piece of a stream, in order. The first chunk a backend yields may carry no
    text: it reports ``input_tokens`` as soon as the engine accepted the request."""

    index: int
    """0, 1, 2, ... in the order produced."""
    text: str
    output_tokens: int
    """Output tokens this chunk carries."""
    backend: str
    input_tokens: int = 0
    """The prompt's tokens as the engine counted them, on one chunk of the stream (the
    first); 0 on the others."""
    finish_reason: str | None = None
    """On a choice's last chunk only: ``stop`` (the engine ended), ``length``
    (``max_tokens`` reached)."""
    choice: int = 0
    """Which of the request's ``n`` choices the chunk continues."""
    logprobs: tuple[float, ...] | None = None
    version: VersionRef | None = None
    """Set by routing on a stream's first chunk: the version whose stream this is (not
    the one asked for when a fallback answered), so the call is billed at its price."""
    compute_seconds: float = 0.0
    """A local engine's step time spent on it since the previous chunk (its compute)."""


class FallbackKind(StrEnum):
    """Which step of an endpoint's fallback chain answered (absent: the primary did)."""

    VERSION = "version"
    """Another version (e.g. a smaller model) with schema-compatible outputs."""
    CACHE = "cache"
    """A recent answer to the same inputs, kept where the endpoint allows it."""
    STATIC = "static"
    """A fixed, rule-based answer configured on the endpoint."""
    UNAVAILABLE = "unavailable"
    """An explicit unavailable error (never an answer)."""


@dataclass(slots=True)  # not frozen: made per call (see HOT_PATH_RECORDS)
class Attempt:
    """One try of one backend while dispatching a request."""

    backend: str
    version: str
    """``owner/name:version`` it was asked to run."""
    outcome: str
    """``ok``, or the error code of the failure."""
    seconds: float


@dataclass(slots=True)  # not frozen: made per call (see HOT_PATH_RECORDS)
class Provenance:
    """Where an answer came from."""

    version: VersionRef | None
    """The version whose answer this is; None for a static answer."""
    backend: str | None
    """The backend (replica) that computed it; None for cached and static answers."""
    fallback: FallbackKind | None = None
    reason: str | None = None
    """With a fallback: the error code that made the primary fail."""
    attempts: tuple[Attempt, ...] = ()
    age_seconds: float | None = None
    """With a cached answer: how old it is."""
    cached: bool = False
    """Answered from the response cache (``inference.cache``): the model did not run."""


@dataclass(slots=True)  # not frozen: made per call (see HOT_PATH_RECORDS)
class Served:
    """A dispatched request's answer and its provenance."""

    outputs: Mapping[str, np.ndarray]
    provenance: Provenance
    timings: Mapping[str, float] = field(default_factory=dict)
    """Seconds per stage where the backend knows them: queue, batch_wait, execute."""
    batch_size: int | None = None


# ---- fallback chain configuration (stored on an endpoint) ---------------------


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VersionFallback(_Step):
    """Answer with another version; its inputs and outputs must match the primary's schema."""

    kind: Literal["version"] = "version"
    model: str = Field(description="owner/name")
    version: str


class CacheFallback(_Step):
    """Answer with a recent prediction for the same inputs (the endpoint allows caching)."""

    kind: Literal["cache"] = "cache"
    ttl_seconds: float = Field(default=300.0, gt=0, le=7 * 86400)
    max_entries: int = Field(default=1024, ge=1, le=1_000_000)


class StaticFallback(_Step):
    """Answer with fixed outputs (a rule-based default), in Open Inference Protocol JSON."""

    kind: Literal["static"] = "static"
    outputs: list[ExampleTensor] = Field(min_length=1)


class UnavailableFallback(_Step):
    """Give up with an explicit ``unavailable`` error (what happens at the end anyway)."""

    kind: Literal["unavailable"] = "unavailable"
    message: str = Field(default="the endpoint cannot answer right now", max_length=1000)


FallbackStep = Annotated[
    VersionFallback | CacheFallback | StaticFallback | UnavailableFallback,
    Field(discriminator="kind"),
]


class FallbackChain(BaseModel):
    """What an endpoint does, in order, when its primary version cannot answer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    steps: list[FallbackStep] = Field(default_factory=list, max_length=8)

    @model_validator(mode="after")
    def _order(self) -> FallbackChain:
        kinds = [step.kind for step in self.steps]
        if "unavailable" in kinds[:-1]:
            raise ValueError("an 'unavailable' step ends the chain: it must be the last")
        if kinds.count("cache") > 1 or kinds.count("static") > 1:
            raise ValueError("at most one 'cache' and one 'static' step")
        return self
