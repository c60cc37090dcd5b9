"""At a remote backend's edge: its HTTP error answers as modelport's errors, and its
health probe."""

from __future__ import annotations

import httpx

from modelport.errors import (
    DeadlineExceeded,
    InvalidInput,
    ModelportError,
    Overloaded,
    Unavailable,
)
from modelport.serving.types import Health


def remote_error(backend: str, response: httpx.Response, ref: str, message: str) -> ModelportError:
    """The error a non-200 ``response`` from ``backend`` stands for; ``message`` is the
    remote's own text. Caller errors stay caller errors (not counted by the breaker); a
    model the remote lacks is version-scoped; anything else makes the backend unavailable."""
    status = response.status_code
    detail = f"{backend}: {message}"
    if status in (400, 413, 422):
        return InvalidInput(detail, code="invalid_request", backend=backend)
    if status in (401, 403):
        return Unavailable(
            f"{backend} refused our credentials ({status})",
            code="backend_unauthorized",
            backend=backend,
        )
    if status == 404:
        return Unavailable(
            f"{backend} does not serve {ref}: {detail}",
            code="backend_model_not_found",
            backend=backend,
            scope="version",
        )
    if status == 429:
        retry_after = response.headers.get("retry-after", "1")
        return Overloaded(
            detail,
            code="backend_overloaded",
            backend=backend,
            retry_after=float(retry_after) if retry_after.isdigit() else 1.0,
        )
    if status == 504:
        return DeadlineExceeded(detail, code="deadline_exceeded", backend=backend)
    return Unavailable(f"{detail} (status {status})", code="backend_unavailable", backend=backend)


async def probe_health(client: httpx.AsyncClient, path: str, timeout: float) -> Health:
    """Healthy when ``GET path`` answers 200 within ``timeout`` seconds."""
    try:
        response = await client.get(path, timeout=httpx.Timeout(timeout))
    except httpx.HTTPError:
        return Health.UNHEALTHY
    return Health.HEALTHY if response.status_code == 200 else Health.UNHEALTHY
