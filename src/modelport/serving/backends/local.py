"""This process's model host as a backend.

``infer`` readies the version (a cold start loads it, within the request's deadline,
unless ``load_on_demand`` is off) and queues the request on the host's batcher. The
host's errors pass through, except those about one version only (not loaded, failed
to load or warm up, not enough memory, no runtime for its format): they become
``Unavailable`` with ``scope="version"``, never the caller's fault and never counted
against the backend's circuit breaker.

``stream`` serves a version whose runtime contract (its format and task, see
``runtime.engines.choose_contract``) is a generative engine, from the
``GenerativeHost`` the backend was given: the engine is loaded on first use (within
the deadline), the request submitted, and its chunks yielded as produced, the first
one (without text) as soon as the engine accepted the request, with its input tokens.
A consumer that stops (``aclose``, or its task cancelled) cancels the generation; so
does the deadline (``DeadlineExceeded``). A tensor model cannot stream:
``Unprocessable`` ``streaming_unsupported``.

A version with publisher processing (its manifest's ``processing``) runs pre → model →
post here, where its model runs, through ``processing`` (``serving.processing``); the
stages' seconds join the answer's timings as ``preprocess`` and ``postprocess``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from modelport.errors import DeadlineExceeded, ModelportError, Unavailable, Unprocessable
from modelport.runtime.cache import BlobSource
from modelport.runtime.engines import GenerativeHost, choose_contract
from modelport.runtime.formats.base import GenerativeEngine
from modelport.runtime.formats.registry import known_formats
from modelport.runtime.host import ModelHost
from modelport.runtime.types import Contract, GenerationRequest, VersionKey
from modelport.serving.backends.base import STREAMING_UNSUPPORTED
from modelport.serving.processing import ProcessingPools
from modelport.serving.types import (
    GPU_SECONDS,
    BackendRequest,
    BackendResponse,
    Capabilities,
    Health,
    StreamChunk,
    StreamRequest,
    VersionRef,
)

VERSION_SCOPED = frozenset(
    {
        "model_not_loaded",
        "model_load_failed",
        "model_loading",
        "model_unloading",
        "load_timeout",
        "load_failed",
        "insufficient_memory",
        "unsupported_format",
        "warmup_mismatch",
        "blob_corrupted",
        "version_digest_mismatch",
        # Process execution (runtime.process): the version's workers, not the host.
        "worker_start_timeout",
        "worker_start_failed",
        "execution_mode_unavailable",
        "version_quarantined",
    }
)
MODEL_FAILURES = frozenset(
    {
        "execution_failed",
        "output_datatype_mismatch",
        "missing_output",
        "execution_crashed",
        "execution_timeout",
    }
)
"""The model itself failed (raised, crashed its worker, or hung until its worker was
killed): still a 500 (504) to the caller, but it says nothing about the host serving
other versions, so it is not counted against this backend's breaker."""


class LocalBackend:
    """The in-process ``ModelHost``."""

    keeps_deadline = True
    """The host keeps the request's deadline itself (a load waits until it at most; the
    batcher drops a request still queued at it), so the dispatcher spares the timer task
    ``asyncio.wait_for`` would start per call."""

    def __init__(
        self,
        host: ModelHost,
        blobs: BlobSource,
        *,
        name: str = "local",
        load_on_demand: bool = True,
        capabilities: Capabilities | None = None,
        engines: GenerativeHost | None = None,
        processing: ProcessingPools | None = None,
    ) -> None:
        self.name = name
        self.processing = processing
        self.host = host
        self.blobs = blobs
        self.load_on_demand = load_on_demand
        self.engines = engines
        generative = frozenset(engines.formats) if engines is not None else frozenset()
        self._keys: dict[int, tuple[VersionRef, VersionKey]] = {}
        """Host keys by version (the version kept, so its id is not reused meanwhile)."""
        self._capabilities = capabilities or Capabilities(
            formats=known_formats() | generative,
            max_batch_size=1 << 20,  # the batcher takes requests of any size
            hardware=frozenset({"cpu"}),
            protocols=frozenset({"v2"}),
        )

    def capabilities(self) -> Capabilities:
        return self._capabilities

    async def health(self) -> Health:
        return Health.HEALTHY  # the process answering is the probe

    def _real(self, deadline: float) -> float:
        """A deadline on the host's clock as real ``time.monotonic()``: the processing
        workers are real processes, stopped on real time."""
        return time.monotonic() + (deadline - self.host.clock.monotonic())

    async def infer(self, request: BackendRequest) -> BackendResponse:
        version = request.version
        known = self._keys.get(id(version))
        if known is not None and known[0] is version:
            key = known[1]
        else:
            key = VersionKey(version.model, version.version, version.manifest_digest)
            if len(self._keys) >= 4096:  # many versions: start over rather than grow
                self._keys.clear()
            self._keys[id(version)] = (version, key)
        stages: dict[str, float] = {}
        processing = None
        inputs = request.inputs
        if version.manifest.processing is not None:
            if self.processing is None:
                raise Unavailable(
                    f"{version.ref} has processing code, which this process does not run",
                    code="processing_unavailable",
                    scope="version",
                )
            processing = await self.processing.get(version)
        if processing is not None and processing.has("preprocess"):
            inputs, stages["preprocess"] = await processing.run(
                "preprocess", inputs, self._real(request.deadline)
            )
        try:
            if not self.host.is_ready(key):
                await self._ready(key, request)
            result = await self.host.infer(
                key,
                inputs,
                deadline=request.deadline,
                priority=request.priority,
                parameters=request.parameters,
            )
        except ModelportError as exc:
            if exc.code in VERSION_SCOPED:
                # A load failure (even a 422 warm-up mismatch) is not the caller's fault.
                raise Unavailable(
                    exc.message, code=exc.code, **(exc.extra | {"scope": "version"})
                ) from exc
            if exc.code in MODEL_FAILURES:
                exc.extra["scope"] = "version"
            raise
        outputs = result.outputs
        if processing is not None and processing.has("postprocess"):
            outputs, stages["postprocess"] = await processing.run(
                "postprocess", outputs, self._real(request.deadline)
            )
        if request.outputs is not None:
            outputs = {name: outputs[name] for name in request.outputs if name in outputs}
        timings = result.timings
        if timings.gpu_seconds:
            stages[GPU_SECONDS] = timings.gpu_seconds
        return BackendResponse(
            outputs=outputs,
            backend=self.name,
            timings={"queue": timings.queue_seconds, "execute": timings.execute_seconds} | stages,
            batch_size=timings.batch_size,
        )

    async def _ready(self, key: VersionKey, request: BackendRequest) -> None:
        if not self.load_on_demand and self.host.status(key) is None:
            raise Unavailable(
                f"{key.ref} is not loaded (load it through the repository API)",
                code="model_not_loaded",
                scope="version",
            )
        remaining = request.deadline - self.host.clock.monotonic()
        try:
            # The load itself is shielded by the host: it goes on for later requests.
            await asyncio.wait_for(
                self.host.ensure_loaded(key, request.version.manifest, self.blobs),
                timeout=max(0.0, remaining),
            )
        except TimeoutError:
            raise DeadlineExceeded(
                f"{key.ref} is still loading (cold start) at the deadline",
                code="deadline_exceeded",
                scope="version",
            ) from None

    async def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        version = request.version
        generative = frozenset(self.engines.formats) if self.engines is not None else ()
        contract = choose_contract(
            version.manifest.format,
            request.task,
            tensor_formats=known_formats(),
            generative_formats=generative,
        )
        if contract is not Contract.GENERATIVE or self.engines is None:
            raise Unprocessable(
                f"{version.ref} is a tensor model: it answers whole, it cannot stream",
                code=STREAMING_UNSUPPORTED,
            )
        engine = await self._engine(request, self.engines)
        generation = engine.submit(
            GenerationRequest(
                prompt=request.prompt,
                max_tokens=request.max_tokens,
                parameters=dict(request.parameters),
                request_id=request.request_id,
                messages=request.messages,
                n=request.n,
                priority=request.priority,
                to_context_end=request.to_context_end,
            )
        )
        try:
            # An engine in a model host answers whether it took the request (its
            # refusal raised here); one in this process took it on submission.
            accepted = getattr(generation, "accepted", None)
            if accepted is not None:
                await accepted()
            yield StreamChunk(0, "", 0, self.name, input_tokens=generation.input_tokens)
            index = 1
            chunks = aiter(generation)
            while True:
                remaining = request.deadline - self.host.clock.monotonic()
                try:
                    async with asyncio.timeout(max(0.0, remaining)):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise DeadlineExceeded(
                        f"{version.ref} was still generating at the deadline",
                        code="deadline_exceeded",
                    ) from None
                yield StreamChunk(
                    index,
                    chunk.text,
                    chunk.tokens,
                    self.name,
                    0,
                    chunk.finish_reason,
                    chunk.choice,
                    chunk.logprobs,
                    compute_seconds=chunk.compute_seconds,
                )
                index += 1
        finally:
            # Normal end: nothing to stop. Otherwise the consumer left (aclose, its task
            # cancelled) or the deadline passed: the engine stops working for it.
            generation.cancel()

    async def _engine(self, request: StreamRequest, engines: GenerativeHost) -> GenerativeEngine:
        version = request.version
        key = VersionKey(version.model, version.version, version.manifest_digest)
        engine = engines.engine(key)
        if engine is not None:
            return engine
        if not self.load_on_demand:
            raise Unavailable(
                f"{key.ref} is not loaded here", code="model_not_loaded", scope="version"
            )
        remaining = request.deadline - self.host.clock.monotonic()
        try:
            return await asyncio.wait_for(
                engines.ensure_loaded(key, version.manifest, self.blobs),
                timeout=max(0.0, remaining),
            )
        except TimeoutError:
            raise DeadlineExceeded(
                f"{key.ref} is still loading (cold start) at the deadline",
                code="deadline_exceeded",
                scope="version",
            ) from None
        except ModelportError as exc:
            if exc.code in VERSION_SCOPED:
                raise Unavailable(
                    exc.message, code=exc.code, **(exc.extra | {"scope": "version"})
                ) from exc
            raise

    async def close(self) -> None:
        """The host belongs to the process (``Services.close`` shuts it)."""
