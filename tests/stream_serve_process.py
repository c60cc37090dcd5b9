"""A serving process for tests of streamed calls across processes.

The platform's application, built from the environment's ``MODELPORT_*`` settings as
``modelport serve`` builds it, whose local backend streams from a toy generative
engine, plus one route standing in for a streaming surface (until the
OpenAI-compatible ``/v1`` lands, which calls the same service):

``POST /test/streams/{owner}/{name}`` with ``{"prompt", "max_tokens"}`` and a bearer
key: ``InferenceService.stream``, its chunks as ``data:`` lines, then a last line with
the usage. A refusal is the platform's problem answer (429 with ``Retry-After``...).

Run: ``python -m tests.stream_serve_process PORT``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from fastapi import Request
from starlette.responses import StreamingResponse

from modelport.api import create_app
from modelport.api.auth import CurrentPrincipal
from modelport.app import build_services
from modelport.config import Settings
from modelport.inference.streaming import GenerateRequest
from modelport.inference.types import Caller, ModelTarget
from modelport.runtime.cache import ModelCache
from modelport.runtime.engines import GenerativeHost
from modelport.serving.backends.local import LocalBackend
from modelport.serving.routing.replicas import PerVersionReplicas
from modelport.testing.toy_engine import TOY_FORMAT, ToyEngine, ToyGenerativeFormat


def main(port: int) -> None:
    settings = Settings()
    services = build_services(settings)
    engines = GenerativeHost(
        cache=ModelCache(settings.home / "toy-cache"),
        formats={TOY_FORMAT: ToyGenerativeFormat(ToyEngine(mode="count", delay=0.01))},
    )
    assert services.host is not None

    def local(name: str) -> LocalBackend:
        return LocalBackend(services.host, services.blob_store, name=name, engines=engines)  # type: ignore[arg-type]

    replicas = PerVersionReplicas(local)
    services.inference.replicas_for = replicas
    services.serving.router.replicas_for = replicas
    app = create_app(services)

    @app.post("/test/streams/{owner}/{name}")
    async def stream(
        owner: str, name: str, request: Request, principal: CurrentPrincipal
    ) -> StreamingResponse:
        body: dict[str, Any] = await request.json()
        call = await services.inference.stream(
            Caller(principal),
            ModelTarget(owner, name),
            GenerateRequest(prompt=body["prompt"], max_tokens=body["max_tokens"]),
            time.monotonic() + 30,
        )

        async def lines() -> AsyncIterator[str]:
            async with call:
                async for chunk in call:
                    yield f"data: {json.dumps({'text': chunk.text})}\n\n"
            usage = {unit.value: n for unit, n in call.usage.items()}
            yield f"data: {json.dumps({'usage': usage, 'status': str(call.status)})}\n\n"

        return StreamingResponse(lines(), media_type="text/event-stream")

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]))
