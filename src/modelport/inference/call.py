"""The state of one call as the pipeline's steps fill it in (no I/O).

``Call`` is the pipeline's context: a surface's ask (who, what, how), then what each
step found or holds, in the order the steps run. A step reads what the steps before it
left and writes its own fields; nothing else writes them. One is made per call on the
hot path: slotted, not frozen (each step fills its part).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from modelport.inference.types import (
    Caller,
    Decoder,
    EndpointTarget,
    InferenceRequest,
    InferenceResult,
    Replayed,
    Target,
    Usage,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from modelport.inference.cache import Lookup
    from modelport.inference.moderation import StreamOutputCheck
    from modelport.inference.streaming import CallStream, GenerateRequest, StreamSource
    from modelport.inference.targets import Target as Resolved
    from modelport.metering.meter import MeteredCall
    from modelport.moderation.types import Policy
    from modelport.serving.idempotency import Claim
    from modelport.serving.routing.router import Plan, Prediction
    from modelport.serving.routing.table import Route
    from modelport.serving.types import Served, VersionRef
    from modelport.tenancy.limits import Admission


Encoder = Callable[[InferenceResult], bytes]
"""The surface's encoding of an answer, for the service to keep under an idempotency key."""


class Mode(enum.Enum):
    """How a call answers: one whole answer, or a stream of chunks."""

    UNARY = "unary"
    STREAM = "stream"


class Kind(enum.Enum):
    """What a call names: a registry version, or an endpoint (its route chooses)."""

    VERSION = "version"
    ENDPOINT = "endpoint"


@dataclass(slots=True, eq=False)
class Call:
    """One call through the pipeline (see the module docstring)."""

    caller: Caller
    target: Target | None
    """What the surface named; None for a stream handed an already resolved version
    (``StreamingCalls``): the pipeline then skips resolve and authorize."""
    mode: Mode
    kind: Kind
    decode: Decoder | None = None
    """A unary call's decoding of its request (the surface's)."""
    generate: GenerateRequest | None = None
    """A stream's request, parsed by the surface."""
    deadline: float = 0.0
    """Absolute ``monotonic()`` of the service's clock: given for a stream, from the
    request for a unary call (set by read)."""
    moderated: bool = True
    """False: not moderated (a moderation classifier's own call)."""
    encode: Encoder | None = None
    """An endpoint call's encoding, for an answer kept under its idempotency key."""
    span: Span | None = None
    """The call's span, with tracing on: its steps' parent (``Pipeline``)."""
    owns_span: bool = False
    """The pipeline opened ``span`` (no surface's span to join) and ends it."""
    began: float = 0.0
    """``time.perf_counter()`` as an endpoint call entered the pipeline (its SLO time)."""

    # resolve
    resolved: Resolved | None = None
    """The version called, or the one an endpoint's route chose (its files' owner)."""
    route: Route | None = None
    plan: Plan | None = None
    ref: VersionRef | None = None
    """The version that is to run, as the serving layer runs it."""
    task: str = ""
    endpoint: str | None = None
    """The endpoint called, if any (on the metered call and the prediction log)."""
    source: StreamSource | None = None
    """Where a stream's chunks come from: the version's backend or the route."""
    # read
    request: InferenceRequest | None = None
    timeout: float = 0.0
    tokens: int | None = None
    """A unary call's input-token bound, held before it runs (embeddings), else None."""
    claim: Claim | None = None
    """The idempotency key this call holds until it answers (or fails: freed)."""
    replayed: Replayed | None = None
    """The first answer under the call's idempotency key: the call ends there."""
    # degrade
    degraded: bool = False
    """Moved to a fallback under load (``ref`` is the fallback's): an endpoint's unary
    call keeps its ``plan`` for its answer and log, but runs the fallback directly."""
    # admit
    admission: Admission | None = None
    """Held from admit until release; None once released."""
    # moderate
    policy: Policy | None = None
    check: StreamOutputCheck | None = None
    # reserve
    lookup: Lookup | None = None
    """The response cache's answer to the question, where it was asked."""
    metered: MeteredCall | None = None
    settled: bool = False
    """Settlement was made (or tried): a failure after it is no longer the call's."""
    received_at: datetime | None = None
    """When an endpoint call was admitted (its prediction-log record's time)."""
    received: float = 0.0
    """The same, as ``time.perf_counter()`` (its record's latency)."""
    # dispatch
    started: float = 0.0
    """``time.perf_counter()`` as it was dispatched (a unary call's usage seconds)."""
    served: Served | None = None
    prediction: Prediction | None = None
    stream: CallStream | None = None
    # record
    outputs: Mapping[str, np.ndarray] | None = None
    usage: Usage | None = None
    ended: BaseException | None = None
    """What ended a stream (None: it ended whole), set before its last steps run."""
    result: InferenceResult | None = None

    @staticmethod
    def kind_of(target: Target) -> Kind:
        return Kind.ENDPOINT if isinstance(target, EndpointTarget) else Kind.VERSION
