"""A worker of the pool as a gateway's backend: the Open Inference Protocol over gRPC,
tensors as raw binary contents, one channel per worker (``WorkerChannels``).

Every call carries the worker token (``authorization: Bearer``), the metered call's id
(``modelport-call-id``: a call retried on another replica is the same call, billed once
by the gateway) and the caller's remaining time as the gRPC deadline. A worker's
refusal comes back as the ``ModelportError`` it raised (kind from the status, code
from the ``modelport-error-code`` trailer, version scope from
``modelport-error-scope``); a worker that cannot be reached (killed, restarting) is
``Unavailable`` ``backend_unreachable``, which the replica loop counts on its breaker
and retries on another replica.

``stream`` calls the worker's server-streaming ``ModelStreamInfer`` (see
``worker_stream``) with the same metadata and deadline. Before its first chunk a
failure is an attempt's, retried on another replica as for a whole call; after it, a
worker that cannot be reached any more ends the stream with ``Unavailable``
``worker_lost`` (the consumer has chunks already: the gateway settles what was
delivered). Closing the stream (the caller left) cancels the call, which cancels the
generation on the worker.

With ``PoolTls`` the channels speak TLS (``pool_tls``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import grpc
import numpy as np

from modelport.api.grpc import oip_pb2 as pb
from modelport.api.grpc.codec import set_parameter
from modelport.api.grpc.pool_tls import PoolTls, channel_credentials, channel_options
from modelport.api.grpc.service import SERVICE_NAME
from modelport.api.grpc.status import ERROR_CODE_KEY, RETRY_AFTER_KEY, STATUS_OF_KIND
from modelport.api.grpc.worker_stream import (
    STREAM_METHOD,
    decode_chunk,
    encode_stream_request,
)
from modelport.clock import Clock, SystemClock
from modelport.errors import (
    Conflict,
    DeadlineExceeded,
    Forbidden,
    Internal,
    InvalidInput,
    ModelportError,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    Unauthenticated,
    Unavailable,
    Unprocessable,
)
from modelport.runtime.tensors import decode_binary_tensor, encode_binary_tensor, oip_datatype
from modelport.serving.pool.types import WorkerInfo
from modelport.serving.types import (
    BackendRequest,
    BackendResponse,
    Capabilities,
    Health,
    StreamChunk,
    StreamRequest,
)

CALL_ID_KEY = "modelport-call-id"
SCOPE_KEY = "modelport-error-scope"
WORKER_LOST = "worker_lost"
"""A stream's worker could no longer be reached after its first chunk."""

_KINDS: dict[str, type[ModelportError]] = {
    cls.kind: cls
    for cls in (
        InvalidInput,
        Unauthenticated,
        Forbidden,
        NotFound,
        Conflict,
        PayloadTooLarge,
        Unprocessable,
        Overloaded,
        Unavailable,
        DeadlineExceeded,
        Internal,
    )
}
_UNREACHABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN}


def refusal_of(error: grpc.aio.AioRpcError, worker: str) -> ModelportError:
    """The platform error a worker's gRPC status stands for (see the module)."""
    trailers = {k: str(v) for k, v in (error.trailing_metadata() or ())}
    status = error.code()
    code = trailers.get(ERROR_CODE_KEY)
    if status == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceeded(f"{worker} did not answer in time", code="deadline_exceeded")
    if code is None:
        # Not an answer of the worker's own: the connection or the process failed.
        return Unavailable(
            f"{worker} is unreachable: {status.name} {error.details()}",
            code="backend_unreachable",
        )
    if status in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        # The gateway's own configuration is wrong: never the caller's fault.
        return Unavailable(f"{worker} refused the worker token", code="backend_unauthorized")
    kind = next((k for k, s in STATUS_OF_KIND.items() if s == status), "internal")
    if status == grpc.StatusCode.RESOURCE_EXHAUSTED and code != "payload_too_large":
        kind = "overloaded"
    if status == grpc.StatusCode.FAILED_PRECONDITION:
        kind = "unprocessable"
    extra: dict[str, object] = {}
    if trailers.get(SCOPE_KEY) == "version":
        extra["scope"] = "version"
    if RETRY_AFTER_KEY in trailers:
        extra["retry_after"] = float(trailers[RETRY_AFTER_KEY])
    message = (error.details() or "").removeprefix(f"{code}: ")
    if kind == "internal":
        # A worker's internal error is a failed attempt: another replica may answer.
        return Unavailable(f"{worker} failed: {message}", code="backend_error")
    return _KINDS.get(kind, Unavailable)(message, code=code, **extra)


class WorkerBackend:
    """One worker, for every version placed on it (see the module)."""

    keeps_deadline = True

    def __init__(
        self,
        info: WorkerInfo,
        channel: grpc.aio.Channel,
        token: str,
        clock: Clock | None = None,
    ) -> None:
        self.clock: Clock = clock or SystemClock()
        """The clock a call's deadline is on (the services')."""
        self.info = info
        self.name = f"worker:{info.id}"
        self._auth = ("authorization", f"Bearer {token}")
        self._infer = channel.unary_unary(
            f"/{SERVICE_NAME}/ModelInfer",
            request_serializer=pb.ModelInferRequest.SerializeToString,
            response_deserializer=pb.ModelInferResponse.FromString,
        )
        self._stream = channel.unary_stream(
            f"/{SERVICE_NAME}/{STREAM_METHOD}",
            request_serializer=pb.ModelInferRequest.SerializeToString,
            response_deserializer=pb.ModelStreamInferResponse.FromString,
        )
        self._capabilities = Capabilities(
            formats=frozenset(info.formats),
            max_batch_size=1 << 20,
            hardware=frozenset(info.accelerators),
        )

    def capabilities(self) -> Capabilities:
        return self._capabilities

    async def health(self) -> Health:
        return Health.HEALTHY  # its lease in the registry is its health

    async def infer(self, request: BackendRequest) -> BackendResponse:
        remaining = request.deadline - self.clock.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded(f"{self.name}: no time left", code="deadline_exceeded")
        version = request.version
        message = pb.ModelInferRequest(
            model_name=version.model, model_version=version.version, id=request.request_id
        )
        for name, array in request.inputs.items():
            array = np.asarray(array)
            message.inputs.add(name=name, datatype=oip_datatype(array), shape=array.shape)
            message.raw_input_contents.append(encode_binary_tensor(array))
        for name in request.outputs or ():
            message.outputs.add(name=name)
        for key, value in request.parameters.items():
            if isinstance(value, bool | int | float | str):
                set_parameter(message.parameters[key], value)
        set_parameter(message.parameters["priority"], request.priority.value)
        metadata = (self._auth, (CALL_ID_KEY, request.call_id or request.request_id))
        try:
            response = await self._infer(message, timeout=remaining, metadata=metadata)
        except grpc.aio.AioRpcError as exc:
            raise refusal_of(exc, self.name) from None
        outputs = {
            tensor.name: decode_binary_tensor(tensor.name, tensor.datatype, list(tensor.shape), raw)
            for tensor, raw in zip(response.outputs, response.raw_output_contents, strict=True)
        }
        return BackendResponse(outputs=outputs, backend=self.name)

    async def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        remaining = request.deadline - self.clock.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded(f"{self.name}: no time left", code="deadline_exceeded")
        metadata = (self._auth, (CALL_ID_KEY, request.call_id or request.request_id))
        call = self._stream(encode_stream_request(request), timeout=remaining, metadata=metadata)
        started = False
        try:
            async for message in call:
                started = True
                yield decode_chunk(message, self.name)
        except grpc.aio.AioRpcError as exc:
            error = refusal_of(exc, self.name)
            if started and error.code == "backend_unreachable":
                raise Unavailable(
                    f"{self.name} was lost mid-stream: {exc.code().name}", code=WORKER_LOST
                ) from None
            raise error from None
        finally:
            call.cancel()  # the consumer left, or it ended: the worker stops generating

    async def close(self) -> None:
        return None


def _same_worker(a: WorkerInfo, b: WorkerInfo) -> bool:
    return (a.address, a.formats, a.accelerators) == (b.address, b.formats, b.accelerators)


class WorkerChannels:
    """One gRPC channel per worker address, kept while the worker lives; a backend per
    worker over it (``backend``), remade when the worker's announcement changes."""

    def __init__(
        self,
        token: str,
        max_message_bytes: int,
        clock: Clock | None = None,
        tls: PoolTls | None = None,
    ) -> None:
        self.token = token
        self.tls = tls
        self.clock = clock
        self.max_message_bytes = max_message_bytes
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._backends: dict[str, WorkerBackend] = {}
        self._lost = False
        """Workers were forgotten: close their channels on the loop, at the next call."""
        self._closing: set[asyncio.Task[None]] = set()

    def backend(self, info: WorkerInfo) -> WorkerBackend:
        if self._lost:
            self._close_unused()
        known = self._backends.get(info.id)
        if known is not None and _same_worker(known.info, info):
            return known  # its versions and queues change each heartbeat; it does not
        channel = self._channels.get(info.address)
        if channel is None:
            options = [
                ("grpc.max_receive_message_length", self.max_message_bytes),
                ("grpc.max_send_message_length", self.max_message_bytes),
                # A killed worker is noticed by the next call, not after a backoff.
                ("grpc.initial_reconnect_backoff_ms", 100),
                ("grpc.max_reconnect_backoff_ms", 1000),
                *channel_options(self.tls),
            ]
            channel = self._channels[info.address] = (
                grpc.aio.insecure_channel(info.address, options=options)
                if self.tls is None
                else grpc.aio.secure_channel(
                    info.address, channel_credentials(self.tls), options=options
                )
            )
        made = self._backends[info.id] = WorkerBackend(info, channel, self.token, self.clock)
        return made

    def forget(self, live: Callable[[str], bool]) -> None:
        """Drop the backends of workers no longer live (``live(worker_id)`` false)."""
        # Called on the view's thread while calls add backends on the loop: a copy.
        for worker_id in [w for w in list(self._backends) if not live(w)]:
            self._backends.pop(worker_id, None)
            self._lost = True

    def _close_unused(self) -> None:
        """Close (on the running loop) the channels no backend uses any more."""
        self._lost = False
        used = {b.info.address for b in list(self._backends.values())}
        for address in [a for a in self._channels if a not in used]:
            channel = self._channels.pop(address)
            task = asyncio.get_running_loop().create_task(channel.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        self._backends.clear()
        await asyncio.gather(*(c.close() for c in channels), return_exceptions=True)
