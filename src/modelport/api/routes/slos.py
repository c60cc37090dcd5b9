"""/api/endpoints/{name}/slos and /api/slos/rules: an endpoint's service level
objectives, where they stand now (``/slos/status``: the error budget left and the burn
rates, from the prediction log), and the Prometheus rules that watch them.

Reading an endpoint's SLOs or their status needs ``model.read`` in its tenant, replacing them
``version.deploy``; the rule file, which names every endpoint, is the operator's
(``platform.manage``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from modelport.api import deps
from modelport.api.access import require_platform
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.endpoints import readable_endpoint, require_endpoint, serving
from modelport.observability.slo import MAX_SLOS, SLO
from modelport.observability.slo_rules import endpoint_rules
from modelport.observability.slo_status import SLOStatus
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


def status_json(status: SLOStatus) -> dict[str, Any]:
    return {
        **status.slo.model_dump(mode="json"),
        "measured": status.measured,
        "events": status.events,
        "bad_events": status.bad,
        "error_budget_remaining": status.budget_remaining,
        "burn_rates": [
            {"window": b.window, "events": b.events, "bad_events": b.bad, "burn_rate": b.burn_rate}
            for b in status.burn
        ],
    }


@router.get("/endpoints/{name}/slos/status")
async def get_slo_status(
    slo_status: deps.SLOStatus, name: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Each SLO of the endpoint now: events and bad events over its window, the share of
    its error budget left, and its burn rate over 5m, 1h, 6h, 1d and 3d (``completion``
    SLOs: ``measured`` false, their events are jobs)."""
    endpoint = await anyio.to_thread.run_sync(readable_endpoint, request, principal, name)
    # Wall time, not the services' clock: the log stamps predictions with wall time.
    now = datetime.now(UTC)
    found = await anyio.to_thread.run_sync(
        lambda: slo_status.status(endpoint.name, owner=endpoint.tenant, slos=endpoint.slos, now=now)
    )
    return {
        "endpoint": endpoint.name,
        "at": now.isoformat(),
        "items": [status_json(s) for s in found],
    }


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
