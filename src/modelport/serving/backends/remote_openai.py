"""A remote OpenAI-compatible server (vLLM, TGI, llama.cpp, OpenAI itself) as a backend
for text generation and embeddings.

A version served this way declares ``runtime: {"protocol": "openai", "task": T}`` with
``T`` one of ``chat``, ``completions``, ``embeddings``; routing only sends it to a
backend whose ``capabilities().tasks`` has ``T`` and whose ``context_length`` fits the
prompt (see ``modelport.serving.capability``). Tensors map to calls like this:

- input: the manifest's first input, a BYTES tensor of UTF-8 texts, shape ``[n]`` or
  ``[n, 1]`` (one text per row);
- ``completions``: one ``POST /v1/completions`` with every text as ``prompt``; the
  first output is BYTES, the same shape as the input, one generated text per row;
- ``chat``: one ``POST /v1/chat/completions`` per row (concurrently), each text as
  the user message; output as for completions;
- ``embeddings``: one ``POST /v1/embeddings``; the first output is FP32 ``[n, d]``.

Request parameters ``max_tokens``, ``temperature``, ``top_p``, ``stop``, ``seed``
and ``n`` = 1 pass through. The call's id goes along as ``Modelport-Call-Id`` (see
the remote V2 backend). The remote model is ``models[owner/name]`` if configured,
else ``owner/name``. Health is ``GET {url}/v1/models``. Errors are mapped as in the
remote V2 backend (400 → ``InvalidInput``, 404 → version-scoped ``Unavailable``,
429 → ``Overloaded``, other failures → ``Unavailable``), reading OpenAI's
``{"error": {"message": ...}}`` body.

``stream`` serves ``chat`` and ``completions`` as the server's server-sent events
(``stream: true`` with ``stream_options.include_usage``), chunk by chunk; the wire
format and the token accounting are ``modelport.serving.backends.openai_sse``'s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import numpy as np

from modelport.clock import Clock, SystemClock
from modelport.errors import (
    DeadlineExceeded,
    InvalidInput,
    ModelportError,
    Unavailable,
)
from modelport.netpolicy import UrlPolicy
from modelport.observability import tracing
from modelport.serving.backends.base import STREAMING_UNSUPPORTED
from modelport.serving.backends.guard import PolicyTransport
from modelport.serving.backends.http_errors import probe_health, remote_error
from modelport.serving.backends.openai_sse import (
    STREAMED_TASKS,
    SseEvents,
    StreamReader,
    stream_body,
)
from modelport.serving.types import (
    CALL_ID_HEADER,
    BackendRequest,
    BackendResponse,
    Capabilities,
    Health,
    StreamChunk,
    StreamRequest,
)

TASKS = frozenset({"chat", "completions", "embeddings"})
PASSED_PARAMETERS = ("max_tokens", "temperature", "top_p", "stop", "seed")


class RemoteOpenAIBackend:
    """One OpenAI-compatible server (a replica). See the module docstring."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        formats: frozenset[str],
        tasks: frozenset[str] = TASKS,
        context_length: int | None = None,
        max_batch_size: int = 64,
        api_key: str | None = None,
        models: Mapping[str, str] | None = None,
        health_timeout: float = 2.0,
        transport: httpx.AsyncBaseTransport | None = None,
        policy: UrlPolicy | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``policy``: where connections may go, checked at each one (``guard``);
        ``clock``: what requests' deadlines are on."""
        self.clock = clock or SystemClock()
        unknown = set(tasks) - TASKS
        if unknown:
            raise ValueError(f"unknown tasks {sorted(unknown)} (known: {sorted(TASKS)})")
        self.name = name
        self.url = url.rstrip("/")
        self.models = dict(models or {})
        self._capabilities = Capabilities(
            formats=formats,
            max_batch_size=max_batch_size,
            context_length=context_length,
            protocols=frozenset({"openai"}),
            tasks=frozenset(tasks),
        )
        self._health_timeout = health_timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if policy is not None:
            transport = PolicyTransport(policy, transport)
        self._client = httpx.AsyncClient(
            base_url=self.url,
            headers=headers,
            transport=transport,
            timeout=None,
            trust_env=policy is None,  # a proxy from the environment would bypass the policy
        )

    def capabilities(self) -> Capabilities:
        return self._capabilities

    async def health(self) -> Health:
        return await probe_health(self._client, "/v1/models", self._health_timeout)

    async def infer(self, request: BackendRequest) -> BackendResponse:
        manifest = request.version.manifest
        task = manifest.runtime.get("task")
        if task not in self._capabilities.tasks:
            raise Unavailable(
                f"{self.name} does not serve task {task!r}",
                code="unsupported_task",
                scope="version",
            )
        source = manifest.inputs[0].name
        array = request.inputs.get(source)
        if array is None or array.dtype.kind not in ("O", "S", "U"):
            raise InvalidInput(
                f"input '{source}' must be a BYTES tensor of texts", code="invalid_tensor_data"
            )
        texts = [_text(item) for item in array.reshape(-1).tolist()]
        model = self.models.get(request.version.model, request.version.model)
        output = manifest.outputs[0].name
        started = time.perf_counter()
        if task == "embeddings":
            doc = await self._post(request, "/v1/embeddings", {"model": model, "input": texts})
            vectors = _by_index(doc, "data", len(texts))
            result = np.asarray([v.get("embedding") for v in vectors], dtype=np.float32)
            if result.ndim != 2:
                raise Unavailable(
                    f"{self.name} sent embeddings of uneven length", code="backend_bad_response"
                )
        elif task == "completions":
            body = {"model": model, "prompt": texts, **_options(request)}
            doc = await self._post(request, "/v1/completions", body)
            choices = _by_index(doc, "choices", len(texts))
            result = _texts([c.get("text") for c in choices], array.shape)
        else:
            docs = await asyncio.gather(
                *(
                    self._post(
                        request,
                        "/v1/chat/completions",
                        {
                            "model": model,
                            "messages": [{"role": "user", "content": text}],
                            **_options(request),
                        },
                    )
                    for text in texts
                )
            )
            answers = [(_by_index(d, "choices", 1)[0].get("message") or {}) for d in docs]
            result = _texts([m.get("content") for m in answers], array.shape)
        elapsed = time.perf_counter() - started
        return BackendResponse(
            outputs={output: result},
            backend=self.name,
            timings={"remote": elapsed},
            batch_size=len(texts),
        )

    async def _post(self, request: BackendRequest, path: str, body: dict[str, Any]) -> Any:
        remaining = request.deadline - self.clock.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded(f"{self.name}: the deadline passed before the call")
        try:
            response = await self._client.post(
                path,
                json=body,
                headers=_headers(request.call_id),
                timeout=httpx.Timeout(remaining),
            )
        except httpx.TimeoutException:
            raise DeadlineExceeded(
                f"{self.name} did not answer in time", code="deadline_exceeded"
            ) from None
        except httpx.HTTPError as exc:
            raise Unavailable(
                f"{self.name} ({self.url}) is unreachable: {type(exc).__name__}: {exc}",
                code="backend_unreachable",
                backend=self.name,
            ) from None
        if response.status_code != 200:
            raise self._error(response, request.version.ref)
        try:
            return response.json()
        except ValueError:
            raise Unavailable(
                f"{self.name} sent a body that is not JSON", code="backend_bad_response"
            ) from None

    def _error(self, response: httpx.Response, ref: str) -> ModelportError:
        return remote_error(self.name, response, ref, _message(response))

    async def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        """Stream a chat or a completion as the server's server-sent events (see
        ``modelport.serving.backends.openai_sse``); the first chunk comes with the
        server's first event, so every refusal (mapped as ``infer``'s are) comes before
        it and another backend may still be tried."""
        version = request.version
        task = request.task or str(version.manifest.runtime.get("task") or "")
        if task not in STREAMED_TASKS or task not in self._capabilities.tasks:
            raise Unavailable(
                f"{self.name} does not stream task {task!r}",
                code=STREAMING_UNSUPPORTED,
                scope="version",
            )
        model = self.models.get(version.model, version.model)
        body = stream_body(request, task, model)
        path = "/v1/chat/completions" if task == "chat" else "/v1/completions"
        remaining = request.deadline - self.clock.monotonic()
        if remaining <= 0:
            raise DeadlineExceeded(f"{self.name}: the deadline passed before the call")
        sent = self._client.build_request(
            "POST",
            path,
            json=body,
            headers=_headers(request.call_id),
            timeout=httpx.Timeout(remaining),
        )
        try:
            async with asyncio.timeout(remaining):
                response = await self._client.send(sent, stream=True)
        except TimeoutError:
            raise DeadlineExceeded(
                f"{self.name} did not answer in time", code="deadline_exceeded"
            ) from None
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        try:
            if response.status_code != 200:
                await response.aread()
                raise self._error(response, version.ref)
            events = SseEvents(response.aiter_lines(), self.name)
            reader = StreamReader(self.name, chat=task == "chat")
            while True:
                remaining = request.deadline - self.clock.monotonic()
                try:
                    async with asyncio.timeout(max(0.0, remaining)):
                        event = await anext(events)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise DeadlineExceeded(
                        f"{self.name} was still streaming {version.ref} at the deadline",
                        code="deadline_exceeded",
                    ) from None
                except httpx.HTTPError as exc:
                    raise self._unreachable(exc) from None
                for chunk in reader.read(event):
                    yield chunk
            for chunk in reader.end():
                yield chunk
        finally:
            await response.aclose()  # a consumer that left: the server sees the hang-up

    def _unreachable(self, exc: httpx.HTTPError) -> Unavailable:
        return Unavailable(
            f"{self.name} ({self.url}) is unreachable: {type(exc).__name__}: {exc}",
            code="backend_unreachable",
            backend=self.name,
        )

    async def close(self) -> None:
        await self._client.aclose()


def _text(item: Any) -> str:
    if isinstance(item, bytes):
        try:
            return item.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput("a text input is not UTF-8", code="invalid_tensor_data") from None
    return str(item)


def _options(request: BackendRequest) -> dict[str, Any]:
    options = {k: request.parameters[k] for k in PASSED_PARAMETERS if k in request.parameters}
    options["n"] = 1
    return options


def _by_index(doc: Any, key: str, count: int) -> list[dict[str, Any]]:
    items = doc.get(key) if isinstance(doc, dict) else None
    if not isinstance(items, list) or len(items) != count:
        raise Unavailable(
            f"expected {count} '{key}' entries in the answer", code="backend_bad_response"
        )
    if not all(isinstance(item, dict) for item in items):
        raise Unavailable(f"malformed '{key}' entries in the answer", code="backend_bad_response")
    return sorted(items, key=lambda item: item.get("index", 0))


def _texts(values: list[Any], shape: tuple[int, ...]) -> np.ndarray:
    if not all(isinstance(v, str) for v in values):
        raise Unavailable("an answer has no text", code="backend_bad_response")
    result = np.empty(len(values), dtype=object)
    result[:] = [v.encode("utf-8") for v in values]
    return result.reshape(shape)


def _message(response: httpx.Response) -> str:
    try:
        doc = response.json()
    except ValueError:
        return response.text[:200]
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return response.text[:200]


def _headers(call_id: str) -> dict[str, str]:
    """A request's own headers: its repeatable call's id, and the call's trace (W3C
    ``traceparent``, with tracing on)."""
    headers = {CALL_ID_HEADER: call_id} if call_id else {}
    tracing.inject(headers)
    return headers
