"""``GET /metrics``: Prometheus text exposition (no authentication, like /healthz)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from modelport.api.deps import get_services
from modelport.observability.metrics import CONTENT_TYPE, render

router = APIRouter(tags=["operations"])


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    return Response(render(get_services(request).metrics.registry), media_type=CONTENT_TYPE)
