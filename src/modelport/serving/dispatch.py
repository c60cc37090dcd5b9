"""Dispatch a request to its version's replicas, else to its endpoint's fallbacks.

The serving layer's request path once the router has chosen a version and ordered
its replicas. ``Dispatcher`` runs both kinds of call through the one replica-attempt
loop (``modelport.serving.replica_loop``: capability filter, health order, breakers,
attempts within the deadline, the fallback chain, provenance):

- ``dispatch``: a whole answer (``UnaryMode``). An answer missing a requested
  output, or with an output whose datatype or rank differs from the manifest, is a
  failed attempt: it is never returned. Every fallback step can answer; with a
  ``cache`` step in the chain, each primary answer is remembered for it.
- ``open_stream``: a generative request up to its first chunk, and nothing after it
  (``StreamMode``, ``modelport.serving.stream_dispatch``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from opentelemetry.trace import Tracer

from modelport.clock import Clock, SystemClock
from modelport.errors import DeadlineExceeded, Unavailable
from modelport.manifest import Manifest, TensorSpec
from modelport.observability.serving_metrics import ServingMetrics
from modelport.runtime.tensors import OIP_TO_NUMPY
from modelport.serving.answer_cache import input_key
from modelport.serving.backends.base import Backend
from modelport.serving.breaker import CircuitBreaker
from modelport.serving.capability import unmet_by_request
from modelport.serving.fallback import (
    CacheOption,
    FallbackOption,
    StaticOption,
    tensor_stand_in,
)
from modelport.serving.health import HealthBoard
from modelport.serving.replica_loop import ReplicaLoop
from modelport.serving.stream_dispatch import OpenedStream, StreamMode
from modelport.serving.types import (
    Attempt,
    BackendRequest,
    BackendResponse,
    Capabilities,
    Provenance,
    Served,
    StreamRequest,
    VersionRef,
)


@dataclass(frozen=True)
class DispatchConfig:
    max_attempts: int = 3
    """Replicas of one version tried for one request (the first try and the retries)."""
    attempt_timeout_seconds: float | None = None
    """Longest one attempt may take while other replicas remain (None: the deadline)."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.attempt_timeout_seconds is not None and self.attempt_timeout_seconds <= 0:
            raise ValueError("attempt_timeout_seconds must be positive")


class Dispatcher:
    """Runs requests on backends with breakers, retries and fallbacks. One per process."""

    def __init__(
        self,
        board: HealthBoard,
        *,
        config: DispatchConfig = DispatchConfig(),
        metrics: ServingMetrics | None = None,
        tracer: Tracer | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.board = board
        self.clock = clock or SystemClock()
        """What requests' deadlines are on."""
        self.config = config
        self.metrics = metrics
        self.loop = ReplicaLoop(
            board,
            max_attempts=config.max_attempts,
            attempt_timeout_seconds=config.attempt_timeout_seconds,
            metrics=metrics,
            tracer=tracer,
            clock=self.clock,
        )
        self._unary = UnaryMode(self.clock)
        self._stream = StreamMode(metrics, self.clock)

    async def dispatch(
        self,
        request: BackendRequest,
        replicas: Sequence[Backend],
        *,
        fallback: Sequence[FallbackOption] = (),
        endpoint: str = "",
    ) -> Served:
        """Answer ``request`` from ``replicas`` of its version (in the router's order),
        else from the ``fallback`` chain; provenance says which."""
        served = await self.loop.call(
            self._unary, request, replicas, fallback=fallback, endpoint=endpoint
        )
        backend = served.provenance.backend
        if served.provenance.fallback is None and backend is not None:
            for option in fallback:
                if isinstance(option, CacheOption):
                    option.cache.put(input_key(request), served.outputs, request.version, backend)
        return served

    async def open_stream(
        self,
        request: StreamRequest,
        replicas: Sequence[Backend],
        *,
        fallback: Sequence[FallbackOption] = (),
        endpoint: str = "",
    ) -> OpenedStream:
        """Start ``request``'s stream on ``replicas`` of its version, else on the
        ``fallback`` chain's versions, up to its first chunk (see
        ``modelport.serving.stream_dispatch``)."""
        return await self.loop.call(
            self._stream, request, replicas, fallback=fallback, endpoint=endpoint
        )


class UnaryMode:
    """A whole answer: checked against the manifest, its breaker told at once."""

    what = "serve"
    goal = "an answer"

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def unmet(self, capabilities: Capabilities, request: BackendRequest) -> str | None:
        return unmet_by_request(capabilities, request)

    async def attempt(
        self, backend: Backend, request: BackendRequest, until: float
    ) -> BackendResponse:
        keeps_own = until == request.deadline
        call = request if keeps_own else replace(request, deadline=until)
        try:
            if keeps_own and getattr(backend, "keeps_deadline", False):
                # It gives up by the deadline itself: no timer task per call.
                response = await backend.infer(call)
            else:
                response = await asyncio.wait_for(
                    backend.infer(call), timeout=max(0.0, until - self.clock.monotonic())
                )
        except TimeoutError:
            raise DeadlineExceeded(
                f"{backend.name} did not answer {request.version.ref} in time",
                code="deadline_exceeded",
            ) from None
        _check_outputs(request, response)
        return response

    def accepted(
        self,
        request: BackendRequest,
        won: BackendResponse,
        breaker: CircuitBreaker,
        epoch: int,
    ) -> BackendResponse:
        breaker.on_success(epoch)
        return won

    def retarget(self, request: BackendRequest, version: VersionRef) -> BackendRequest:
        return replace(request, version=version)

    def answer(self, won: BackendResponse, provenance: Provenance) -> Served:
        return Served(
            outputs=won.outputs,
            provenance=provenance,
            timings=won.timings,
            batch_size=won.batch_size,
        )

    def stand_in(
        self,
        option: CacheOption | StaticOption,
        request: BackendRequest,
        reason: str,
        attempts: Sequence[Attempt],
    ) -> Served | None:
        return tensor_stand_in(option, request, reason, attempts)


def _check_outputs(request: BackendRequest, response: BackendResponse) -> None:
    """Refuse an answer that does not match the version's declared outputs."""
    specs = _output_specs(request.version.manifest)
    wanted = request.outputs if request.outputs is not None else tuple(specs)
    for name in wanted:
        array = response.outputs.get(name)
        if array is None:
            raise Unavailable(
                f"{response.backend} gave no output '{name}'", code="backend_bad_output"
            )
        spec = specs.get(name)
        if not isinstance(array, np.ndarray):
            array = np.asarray(array)
        if spec is not None and not _conforms(array, spec):
            raise Unavailable(
                f"{response.backend} gave output '{name}' as {array.dtype}{list(array.shape)}, "
                f"declared {spec.datatype}{spec.shape}",
                code="backend_bad_output",
            )


_SPECS: dict[int, tuple[Manifest, dict[str, TensorSpec]]] = {}


def _output_specs(manifest: Manifest) -> dict[str, TensorSpec]:
    """The manifest's outputs by name, kept per manifest (immutable) object."""
    known = _SPECS.get(id(manifest))
    if known is not None and known[0] is manifest:
        return known[1]
    specs = {spec.name: spec for spec in manifest.outputs}
    if len(_SPECS) >= 4096:
        _SPECS.clear()
    _SPECS[id(manifest)] = (manifest, specs)
    return specs


def _conforms(array: np.ndarray, spec: TensorSpec) -> bool:
    if spec.datatype == "BYTES":
        dtype_ok = array.dtype.kind in ("O", "S", "U")
    else:
        dtype_ok = array.dtype == OIP_TO_NUMPY[spec.datatype]
    if not dtype_ok or array.ndim != len(spec.shape):
        return False
    for declared, actual in zip(spec.shape, array.shape, strict=True):
        if declared != -1 and declared != actual:
            return False
    return True
