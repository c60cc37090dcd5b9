"""Plain records of the inference use case (no I/O): what a surface hands the service
and what it gets back.

Plain slotted dataclasses, not pydantic: one of each is made per call on the hot path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from modelport.manifest import TensorSpec
from modelport.metering.types import Usage
from modelport.runtime.types import Priority
from modelport.serving.routing.router import Prediction
from modelport.serving.types import Provenance
from modelport.tenancy.limits import RateDecision
from modelport.tenancy.types import Principal

__all__ = [
    "Caller",
    "Decoder",
    "EndpointTarget",
    "InferenceRequest",
    "InferenceResult",
    "ModelTarget",
    "Replayed",
    "Target",
    "Usage",
]


@dataclass(frozen=True, slots=True)
class ModelTarget:
    """A registry model, ``owner/name``, at a version or alias (None: its default)."""

    owner: str
    name: str
    version: str | None = None


@dataclass(frozen=True, slots=True)
class EndpointTarget:
    """An endpoint by name: its active deployment chooses the version."""

    name: str


Target = ModelTarget | EndpointTarget


class Watch(Protocol):
    """The surface's watch on its caller (``api.disconnect.CallerWatch``)."""

    def stop(self) -> None: ...

    def caller_gone(self) -> bool: ...


class Caller:
    """Who calls, and what the service tells the surface back about the call while it
    runs (the rate decision for its headers, the tenant it is about for the audit)."""

    __slots__ = ("about", "call_id", "hold_id", "principal", "rate", "request_id", "watch")

    def __init__(
        self,
        principal: Principal,
        request_id: str = "",
        call_id: str | None = None,
        hold_id: str | None = None,
    ) -> None:
        self.principal = principal
        self.request_id = request_id
        self.call_id = call_id
        """A deterministic id for a call that may be repeated (a job's stage): the
        metered call's ``CallInfo.call_id``, so a repeat is charged once."""
        self.hold_id = hold_id
        """The hold of the work the call is part of (a job's): ``CallInfo.hold_id``."""
        self.rate: RateDecision | None = None
        """The limiter's decision once admitted (or refused)."""
        self.about: str | None = None
        """The tenant the call is about: the model's owner, the endpoint's tenant."""
        self.watch: Watch | None = None
        """Set by the surface once its caller may hang up; stopped once answered (from
        then on the call is billed as answered, whoever reads it)."""


@dataclass(slots=True)
class InferenceRequest:
    """A decoded request, checked against the target's declared tensors."""

    inputs: Mapping[str, np.ndarray]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    """For the model (scheduling parameters removed)."""
    outputs: tuple[str, ...] | None = None
    """Outputs asked for (None: every output)."""
    timeout: float | None = None
    """Seconds the caller allows (None: the target's default)."""
    priority: Priority | None = None
    """None: the target's default (interactive, or the endpoint's)."""
    subject: str | None = None
    """Sticky routing key of an endpoint call."""
    idempotency: tuple[str, str] | None = None
    """An endpoint call's idempotency key and the fingerprint of its request."""


Decoder = Callable[[Sequence[TensorSpec], Sequence[TensorSpec]], Awaitable[InferenceRequest]]
"""The surface's decoding of its request, checked against the target's declared inputs
and outputs; called by the pipeline's read step, once the target is resolved and
authorized and before the call is admitted (an endpoint's version, which admission is
for, is chosen from the request)."""


@dataclass(slots=True)
class InferenceResult:
    """An answer, with where it came from and what it used."""

    outputs: Mapping[str, np.ndarray]
    model: str
    """The model called: ``owner/name``, or the endpoint's name."""
    version: str
    """The version that answered (``owner/name:version`` for an endpoint; '' for a
    static fallback)."""
    usage: Usage
    provenance: Provenance
    timings: Mapping[str, float]
    """Seconds per stage where the backend knows them: queue, execute."""
    batch_size: int | None
    prediction_id: str
    prediction: Prediction | None = None
    """An endpoint call's routing outcome (deployment, chosen version, fallback)."""
    body: bytes | None = None
    """The encoded answer, when the service needed it (an idempotency key completed)."""
    cache: str | None = None
    """The response cache's part: ``hit``, ``miss``, or None where it was not consulted
    (a version not declared deterministic, a no-cache tenant, an endpoint call)."""


@dataclass(frozen=True, slots=True)
class Replayed:
    """The first answer of an idempotent call, replayed as it was encoded."""

    body: bytes
    status: int
