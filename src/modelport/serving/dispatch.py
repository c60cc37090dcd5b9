"""Dispatch one request to the backends that can run its version, then to its fallbacks.

``Dispatcher.dispatch(request, replicas, fallback=...)`` is the serving layer's
request path once the router has chosen a version and ordered its replicas:

1. Capability filter first: replicas whose ``capabilities()`` cannot honour the
   request (format, protocol/task, hardware, batch rows, context length) are never
   tried. None left: ``Unavailable`` (``no_capable_backend``).
2. Replicas the last probe saw unhealthy go last; replicas whose circuit breaker
   is open are skipped. Every one open: ``Unavailable`` (``no_available_backend``)
   with ``retry_after``.
3. Try them in order, at most ``max_attempts``, within the request's deadline. A
   failed attempt is retried on the next replica of the same version; while other
   replicas remain, one attempt may take at most ``attempt_timeout_seconds``.
   Errors about the request itself (invalid input...) are raised at once and not
   counted against the backend; ``Overloaded`` and version-scoped failures move on
   without counting; other failures count on the backend's breaker.
4. An answer missing a requested output, or with an output whose datatype or rank
   differs from the manifest, is a failed attempt: it is never returned.
5. Only when every replica failed does the endpoint's fallback chain run
   (``modelport.serving.fallback``): a different version is used only through it.

``open_stream`` does the same for a generative request up to its first chunk, and
nothing after it (``modelport.serving.stream_dispatch``).

With a ``cache`` step in the chain, each primary answer is remembered for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from modelport.errors import DeadlineExceeded, ModelportError, Unavailable
from modelport.manifest import Manifest, TensorSpec
from modelport.observability.serving_metrics import ServingMetrics
from modelport.runtime.tensors import OIP_TO_NUMPY
from modelport.serving.answer_cache import input_key
from modelport.serving.backend_failures import (
    REFUSED,
    capable_in_order,
    circuits_open,
    judge_failure,
)
from modelport.serving.backends.base import Backend
from modelport.serving.capability import unmet_by_request, unmet_by_version
from modelport.serving.fallback import (
    CALLER_ERRORS,
    CacheOption,
    FallbackOption,
    run_chain,
)
from modelport.serving.health import HealthBoard
from modelport.serving.stream_dispatch import OpenedStream, StreamOpener
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
    ) -> None:
        self.board = board
        self.config = config
        self.metrics = metrics
        self._static: dict[tuple[int, int], tuple[Capabilities, VersionRef, str | None]] = {}
        """What the version alone decides of a backend's fitness (the objects are kept, so
        their ids are not reused while cached)."""
        self.streams = StreamOpener(
            board,
            max_attempts=config.max_attempts,
            attempt_timeout_seconds=config.attempt_timeout_seconds,
            unmet_by_version=self._unmet_by_version,
            metrics=metrics,
        )

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
        return await self.streams.open(request, replicas, fallback=fallback, endpoint=endpoint)

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
        attempts: list[Attempt] = []
        try:
            response = await self.run_version(request, replicas, attempts)
        except ModelportError as failure:
            if failure.kind in CALLER_ERRORS:
                raise
            return await run_chain(
                fallback,
                request,
                failure,
                attempts=attempts,
                run_version=self.run_version,
                endpoint=endpoint,
                metrics=self.metrics,
            )
        for option in fallback:
            if isinstance(option, CacheOption):
                option.cache.put(
                    input_key(request), response.outputs, request.version, response.backend
                )
        return Served(
            outputs=response.outputs,
            provenance=Provenance(request.version, response.backend, attempts=tuple(attempts)),
            timings=response.timings,
            batch_size=response.batch_size,
        )

    async def run_version(
        self, request: BackendRequest, replicas: Sequence[Backend], attempts: list[Attempt]
    ) -> BackendResponse:
        """Run the request's version on the first replica that answers; append each try
        to ``attempts``. Raises the last failure when none answers."""
        version = request.version
        ref = version.ref
        ordered = capable_in_order(
            replicas,
            self.board,
            lambda c: self._unmet_by_version(c, version) or unmet_by_request(c, request),
            f"serve {ref}",
        )
        last_error: ModelportError | None = None
        tried = 0
        open_breakers: list[str] = []
        for index, backend in enumerate(ordered):
            if tried >= self.config.max_attempts:
                break
            now = time.monotonic()
            if now >= request.deadline:
                last_error = DeadlineExceeded(f"{ref}: the deadline passed before an answer")
                break
            breaker = self.board.breaker(backend.name)
            if not breaker.try_acquire():
                open_breakers.append(backend.name)
                continue
            epoch = breaker.epoch
            tried += 1
            deadline = request.deadline
            others_left = index < len(ordered) - 1 and tried < self.config.max_attempts
            timeout = self.config.attempt_timeout_seconds
            if others_left and timeout is not None:
                deadline = min(deadline, now + timeout)
            attempt = (
                request if deadline == request.deadline else replace(request, deadline=deadline)
            )
            try:
                if deadline == request.deadline and getattr(backend, "keeps_deadline", False):
                    # It gives up by the deadline itself: no timer task per call.
                    response = await backend.infer(attempt)
                else:
                    response = await asyncio.wait_for(
                        backend.infer(attempt), timeout=max(0.0, deadline - now)
                    )
                _check_outputs(request, response)
            except asyncio.CancelledError:
                breaker.on_ignored(epoch)
                raise
            except TimeoutError:
                error: ModelportError = DeadlineExceeded(
                    f"{backend.name} did not answer {ref} in time", code="deadline_exceeded"
                )
            except ModelportError as exc:
                error = exc
            except Exception as exc:  # a backend bug must not escape as a 500 with no breaker
                error = Unavailable(f"{backend.name} failed: {exc!r}", code="backend_error")
            else:
                breaker.on_success(epoch)
                attempts.append(Attempt(backend.name, ref, "ok", time.monotonic() - now))
                self._count(backend.name, "ok")
                return response
            attempts.append(Attempt(backend.name, ref, error.code, time.monotonic() - now))
            outcome = judge_failure(error, breaker, epoch)
            self._count(backend.name, outcome)
            if outcome == REFUSED:
                raise error
            last_error = error
        if last_error is not None:
            raise last_error
        raise circuits_open(self.board, f"serve {ref}", open_breakers)

    def _unmet_by_version(self, capabilities: Capabilities, version: VersionRef) -> str | None:
        """``unmet_by_version``, kept per capabilities and version (both immutable)."""
        key = (id(capabilities), id(version))
        known = self._static.get(key)
        if known is not None and known[0] is capabilities and known[1] is version:
            return known[2]
        why = unmet_by_version(capabilities, version)
        if len(self._static) >= 4096:  # many versions or rebuilt backends: start over
            self._static.clear()
        self._static[key] = (capabilities, version, why)
        return why

    def _count(self, backend: str, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.attempt(backend, outcome)


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
