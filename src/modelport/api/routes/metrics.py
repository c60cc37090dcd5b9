"""``GET /metrics``: Prometheus text exposition, for the operator only.

The series are labelled with model names, private ones included, so a scrape needs a
bearer: the ``metrics_token`` setting (for the scraper: it opens nothing else), the
admin key, or an API key holding ``platform.manage``. Missing or wrong: 401; a
tenant's key: 403.
"""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request
from starlette.responses import Response

from modelport.api import deps
from modelport.api.access import forbidden
from modelport.api.auth import bearer_token
from modelport.observability.metrics import exposition
from modelport.tenancy.policy import Permission, permissions_of

router = APIRouter(tags=["operations"])


def require_operator(request: Request) -> None:
    """Let through the metrics token or an operator's credential; raise otherwise."""
    token = bearer_token(request)
    scraper = deps.settings_service(request).security.metrics_token
    if token and scraper and hmac.compare_digest(token.encode(), scraper.encode()):
        return
    principal = deps.authenticator_service(request).authenticate(token)
    if Permission.PLATFORM_MANAGE not in permissions_of(principal):
        raise forbidden(Permission.PLATFORM_MANAGE)


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition (or OpenMetrics, when asked for in "
            "`Accept`)",
            "content": {
                "text/plain": {"schema": {"type": "string"}},
                "application/openmetrics-text": {"schema": {"type": "string"}},
            },
        }
    },
)
def metrics(metrics: deps.Metrics, request: Request) -> Response:
    require_operator(request)
    body, content_type = exposition(metrics.registry, request.headers.get("accept", ""))
    return Response(body, headers={"Content-Type": content_type})
