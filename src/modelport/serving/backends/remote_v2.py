"""A remote Open Inference Protocol server as a backend: another modelport worker,
Triton or MLServer, over HTTP (httpx) with binary tensor data.

A version ``owner/name:v`` is called at ``POST {url}/v2/models/{remote}/versions/{v}/infer``
where ``remote`` is ``models[owner/name]`` if configured (Triton and MLServer name
models without an owner) or ``owner/name`` itself (modelport). The request's
remaining time goes along as the ``Inference-Timeout`` header and bounds the HTTP
call; the call's id, when the platform holds money for it, as ``Modelport-Call-Id``
(what its usage may be reported against). Health is ``GET {url}/v2/health/ready``.

Errors are mapped at this edge (httpx never leaks):

====================================  =============================================
remote answer                         raised
====================================  =============================================
400, 413, 422                         ``InvalidInput`` (the remote refused the input)
401, 403                              ``Unavailable`` ``backend_unauthorized``
404                                   ``Unavailable`` ``backend_model_not_found``, version-scoped
429                                   ``Overloaded`` ``backend_overloaded``
504, or no answer by the deadline     ``DeadlineExceeded``
other 5xx                             ``Unavailable`` ``backend_unavailable``
connection refused, reset, ...        ``Unavailable`` ``backend_unreachable``
a body that does not decode           ``Unavailable`` ``backend_bad_response``
====================================  =============================================
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from urllib.parse import quote

import httpx

from modelport.clock import Clock, SystemClock
from modelport.errors import (
    DeadlineExceeded,
    ModelportError,
    Unavailable,
)
from modelport.netpolicy import UrlPolicy
from modelport.observability import tracing
from modelport.runtime.types import Priority
from modelport.serving.backends import v2_wire
from modelport.serving.backends.aio_transport import AiohttpTransport
from modelport.serving.backends.base import refuse_stream
from modelport.serving.backends.guard import PolicyTransport
from modelport.serving.backends.http_errors import probe_health, remote_error
from modelport.serving.types import (
    CALL_ID_HEADER,
    BackendRequest,
    BackendResponse,
    Capabilities,
    Health,
    StreamChunk,
    StreamRequest,
    VersionRef,
)

DEFAULT_CAPABILITIES = Capabilities(formats=frozenset({"onnx"}), max_batch_size=1 << 20)


class RemoteV2Backend:
    """One remote OIP server (a replica). See the module docstring."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        api_key: str | None = None,
        models: Mapping[str, str] | None = None,
        capabilities: Capabilities = DEFAULT_CAPABILITIES,
        health_timeout: float = 2.0,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int = 100,
        policy: UrlPolicy | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``transport``: how requests are sent (by default up to ``max_connections``
        kept-alive connections, ``aio_transport``); ``policy``: where connections may go,
        checked at each one (``guard``); ``clock``: what requests' deadlines are on."""
        self.clock = clock or SystemClock()
        self.name = name
        self.url = url.rstrip("/")
        self.models = dict(models or {})
        self._capabilities = capabilities
        self._health_timeout = health_timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # Not httpx's own transport: its pool costs a gateway ms of CPU a call under
        # concurrency (``aio_transport``).
        transport = transport or AiohttpTransport(max_connections=max_connections)
        if policy is not None:
            transport = PolicyTransport(policy, transport)
        self._client = httpx.AsyncClient(
            base_url=self.url,
            headers=headers,
            transport=transport,
            timeout=None,  # every call passes its own, from the request's deadline
            trust_env=policy is None,  # a proxy from the environment would bypass the policy
        )

    def capabilities(self) -> Capabilities:
        return self._capabilities

    async def health(self) -> Health:
        return await probe_health(self._client, "/v2/health/ready", self._health_timeout)

    async def prepare(self, version: VersionRef, *, timeout: float = 60.0) -> str | None:
        """Make ``version`` ready on the remote: ready already, or loaded through the
        repository extension (``POST /v2/repository/models/{remote}/load``) and ready
        then. Returns why not (None: ready). A deployment served by this backend alone
        becomes ready this way instead of loading on the local host."""
        remote = quote(self.models.get(version.model, version.model), safe="/")
        ready = f"/v2/models/{remote}/versions/{quote(version.version, safe='')}/ready"
        limit = httpx.Timeout(timeout)
        try:
            if (await self._client.get(ready, timeout=limit)).status_code == 200:
                return None
            loaded = await self._client.post(
                f"/v2/repository/models/{remote}/load",
                json={"parameters": {"version": version.version}},
                timeout=limit,
            )
            if loaded.status_code != 200:
                message = v2_wire.error_message(loaded.content)
                return f"{self.name} could not load it ({loaded.status_code}): {message}"
            if (await self._client.get(ready, timeout=limit)).status_code == 200:
                return None
        except httpx.HTTPError as exc:
            return f"{self.name} ({self.url}) is unreachable: {type(exc).__name__}"
        return f"{self.name} does not report it ready"

    async def infer(self, request: BackendRequest) -> BackendResponse:
        version = request.version
        remaining = request.deadline - self.clock.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded(f"{self.name}: the deadline passed before the call")
        body, headers = v2_wire.encode_request(
            request.inputs,
            outputs=request.outputs,
            parameters=_parameters(request),
            request_id=request.request_id,
        )
        headers["Inference-Timeout"] = f"{remaining:.6f}"
        if request.call_id:
            headers[CALL_ID_HEADER] = request.call_id
        tracing.inject(headers)  # the call's trace continues on the server (W3C)
        remote = quote(self.models.get(version.model, version.model), safe="/")
        path = f"/v2/models/{remote}/versions/{quote(version.version, safe='')}/infer"
        started = time.perf_counter()
        try:
            response = await self._client.post(
                path, content=body, headers=headers, timeout=httpx.Timeout(remaining)
            )
        except httpx.TimeoutException:
            raise DeadlineExceeded(
                f"{self.name} did not answer {version.ref} in time", code="deadline_exceeded"
            ) from None
        except httpx.HTTPError as exc:
            raise Unavailable(
                f"{self.name} ({self.url}) is unreachable: {type(exc).__name__}: {exc}",
                code="backend_unreachable",
                backend=self.name,
            ) from None
        elapsed = time.perf_counter() - started
        if response.status_code != 200:
            raise self._error(response, version.ref)
        try:
            outputs = v2_wire.decode_response(
                response.content, response.headers.get(v2_wire.INFERENCE_HEADER)
            )
        except ValueError as exc:
            raise Unavailable(
                f"{self.name} sent a response that does not decode: {exc}",
                code="backend_bad_response",
                backend=self.name,
            ) from None
        return BackendResponse(outputs=outputs, backend=self.name, timings={"remote": elapsed})

    def _error(self, response: httpx.Response, ref: str) -> ModelportError:
        return remote_error(self.name, response, ref, v2_wire.error_message(response.content))

    def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        """Not yet: ``streaming_unsupported`` (another backend may stream the version)."""
        return refuse_stream(self.name, request)

    async def close(self) -> None:
        await self._client.aclose()


def _parameters(request: BackendRequest) -> dict[str, object]:
    parameters = dict(request.parameters)
    if request.priority is Priority.BATCH:
        parameters["priority"] = 2  # Triton's levels: 0 default, lower is more urgent
    return parameters
