"""/api/endpoints/{name}/slos and /api/slos/rules: an endpoint's service level
objectives, and the Prometheus rules that watch them.

Reading an endpoint's SLOs needs ``model.read`` in its tenant, replacing them
``version.deploy``; the rule file, which names every endpoint, is the operator's
(``platform.manage``).
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from modelport.api.access import require_platform
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.endpoints import readable_endpoint, require_endpoint, serving
from modelport.observability.slo import MAX_SLOS, SLO
from modelport.observability.slo_rules import endpoint_rules
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["endpoints"])


class SetSLOs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slos: list[SLO] = Field(max_length=MAX_SLOS, description="Replaces every SLO of the endpoint")


def _json(name: str, slos: tuple[SLO, ...]) -> dict[str, Any]:
    return {"endpoint": name, "items": [s.model_dump(mode="json") for s in slos]}


@router.get("/endpoints/{name}/slos")
def get_slos(name: str, request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
    """The endpoint's service level objectives."""
    endpoint = readable_endpoint(request, principal, name)
    return _json(endpoint.name, endpoint.slos)


@router.put("/endpoints/{name}/slos")
async def set_slos(
    name: str, body: SetSLOs, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Replace the endpoint's SLOs (``invalid_slo`` names the field at fault); the rules
    of ``GET /api/slos/rules`` follow."""
    plane = serving(request)
    endpoint = await anyio.to_thread.run_sync(plane.endpoints.get_endpoint, name)
    require_endpoint(request, principal, endpoint, Permission.VERSION_DEPLOY)
    changed = await anyio.to_thread.run_sync(plane.endpoints.set_slos, name, body.slos)
    return _json(changed.name, changed.slos)


@router.get(
    "/slos/rules",
    response_class=Response,
    responses={
        200: {
            "description": "A Prometheus rule file",
            "content": {
                "application/yaml": {
                    "schema": {
                        "type": "object",
                        "required": ["groups"],
                        "properties": {"groups": {"type": "array", "items": {"type": "object"}}},
                    }
                }
            },
        }
    },
)
def slo_rules(request: Request, principal: CurrentPrincipal) -> Response:
    """A Prometheus rule file (YAML) for every endpoint's SLOs: error ratios, burn
    rates, error budgets and multi-window, multi-burn-rate alerts."""
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    endpoints = serving(request).endpoints.list_endpoints(None)
    text = endpoint_rules((e.name, e.slos) for e in endpoints if e.slos)
    return Response(text, media_type="application/yaml")
