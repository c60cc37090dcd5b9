"""An endpoint's drift and quality monitor: its policy and its report.

- ``GET /api/endpoints/{name}/monitor``: the policy (the defaults, ``configured``
  false, when none was set).
- ``PUT /api/endpoints/{name}/monitor``: set the policy; the scheduled check runs it.
- ``DELETE /api/endpoints/{name}/monitor``: stop monitoring (404 ``monitor_not_found``).
- ``GET /api/endpoints/{name}/monitoring``: the report, computed now over the policy's
  windows: per version and arm, input and output drift per feature, and quality
  (overall and by the policy's slice) from joined outcomes.

Who: reading needs ``model.read`` in the endpoint's tenant, changing the policy
``version.deploy`` (as deploying does: a monitor may halt a canary).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request, Response

from modelport.api import deps
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.endpoints import readable_endpoint, require_endpoint
from modelport.errors import NotFound
from modelport.monitoring.types import MonitoringReport, MonitorPolicy
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["monitoring"])


def policy_json(policy: MonitorPolicy, *, configured: bool) -> dict[str, Any]:
    return {**policy.model_dump(mode="json"), "configured": configured}


def report_json(report: MonitoringReport) -> dict[str, Any]:
    return {
        "endpoint": report.endpoint,
        "computed_at": report.computed_at.isoformat(),
        "window": [moment.isoformat() for moment in report.window],
        "reference": report.policy.reference,
        "reference_window": None
        if report.reference_window is None
        else [moment.isoformat() for moment in report.reference_window],
        "versions": [
            {
                "model": v.model,
                "version": v.version,
                "arm": v.arm,
                "predictions": v.predictions,
                "reference_predictions": v.reference_predictions,
                "in_breach": v.in_breach,
                "breaches": v.breaches,
                "inputs": [asdict(d) for d in v.inputs],
                "outputs": [asdict(d) for d in v.outputs],
                "quality": [asdict(q) for q in v.quality],
            }
            for v in report.versions
        ],
    }


def _managed(request: Request, principal: CurrentPrincipal, name: str) -> None:
    endpoint = readable_endpoint(request, principal, name)
    require_endpoint(request, principal, endpoint, Permission.VERSION_DEPLOY)


@router.get("/endpoints/{name}/monitor")
def get_monitor(
    monitoring: deps.Monitoring, name: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """The endpoint's monitor policy."""
    readable_endpoint(request, principal, name)
    policy = monitoring.policy(name)
    return policy_json(policy or MonitorPolicy(), configured=policy is not None)


@router.put("/endpoints/{name}/monitor")
def put_monitor(
    monitoring: deps.Monitoring,
    name: str,
    body: MonitorPolicy,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Set the endpoint's monitor policy."""
    _managed(request, principal, name)
    stored = monitoring.set_policy(name, body, actor=principal.id)
    return policy_json(stored, configured=True)


@router.delete("/endpoints/{name}/monitor", status_code=204)
def delete_monitor(
    monitoring: deps.Monitoring, name: str, request: Request, principal: CurrentPrincipal
) -> Response:
    """Stop monitoring the endpoint."""
    _managed(request, principal, name)
    if not monitoring.delete_policy(name):
        raise NotFound(f"endpoint {name} has no monitor", code="monitor_not_found")
    return Response(status_code=204)


@router.get("/endpoints/{name}/monitoring")
async def get_monitoring(
    monitoring: deps.Monitoring, name: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Drift and quality per version of the endpoint, computed now."""
    await anyio.to_thread.run_sync(readable_endpoint, request, principal, name)
    report = await anyio.to_thread.run_sync(monitoring.report, name)
    return report_json(report)
