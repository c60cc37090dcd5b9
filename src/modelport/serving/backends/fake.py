"""An in-process backend whose behaviour a test scripts (the fake of ``Backend``).

By default it answers every request with its first input plus ``offset`` under the
manifest's first output name. Set ``failure`` to make every call raise it, queue
errors in ``script`` to fail the next calls one by one, ``delay`` to make calls slow
(it honours the deadline), and ``healthy`` for what probes see. ``calls`` and
``probes`` count what reached it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping

import numpy as np

from modelport.clock import Clock, SystemClock
from modelport.errors import DeadlineExceeded, ModelportError
from modelport.serving.backends.base import refuse_stream
from modelport.serving.types import (
    BackendRequest,
    BackendResponse,
    Capabilities,
    Health,
    StreamChunk,
    StreamRequest,
)

Answer = Callable[[BackendRequest], Mapping[str, np.ndarray]]


class FakeBackend:
    def __init__(
        self,
        name: str,
        *,
        capabilities: Capabilities | None = None,
        answer: Answer | None = None,
        offset: float = 1.0,
        delay: float = 0.0,
        clock: Clock | None = None,
    ) -> None:
        self.name = name
        self.clock = clock or SystemClock()
        """What requests' deadlines are on."""
        self._capabilities = capabilities or Capabilities(
            formats=frozenset({"onnx"}), max_batch_size=1 << 20
        )
        self._answer = answer or self._add_offset
        self.offset = offset
        self.delay = delay
        self.failure: ModelportError | None = None
        self.script: deque[ModelportError] = deque()
        self.healthy = True
        self.calls: list[BackendRequest] = []
        self.probes = 0
        self.closed = False

    def capabilities(self) -> Capabilities:
        return self._capabilities

    async def health(self) -> Health:
        self.probes += 1
        return Health.HEALTHY if self.healthy else Health.UNHEALTHY

    async def infer(self, request: BackendRequest) -> BackendResponse:
        self.calls.append(request)
        if self.delay:
            remaining = request.deadline - self.clock.monotonic()
            if remaining < self.delay:
                await asyncio.sleep(max(0.0, remaining))
                raise DeadlineExceeded(f"{self.name}: deadline passed")
            await asyncio.sleep(self.delay)
        if self.script:
            raise self.script.popleft()
        if self.failure is not None:
            raise self.failure
        return BackendResponse(
            outputs=dict(self._answer(request)),
            backend=self.name,
            timings={"execute": self.delay},
            batch_size=1,
        )

    def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        """Tensor answers only: ``streaming_unsupported``."""
        return refuse_stream(self.name, request)

    async def close(self) -> None:
        self.closed = True

    def _add_offset(self, request: BackendRequest) -> Mapping[str, np.ndarray]:
        first = next(iter(request.inputs.values()))
        name = request.version.manifest.outputs[0].name
        return {name: (np.asarray(first) + self.offset).astype(first.dtype)}
