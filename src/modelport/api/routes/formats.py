"""/api/formats: which formats' versions may be approved, and the operator's decisions.

Reading needs any authenticated caller. Accepting a format the platform does not run
(``PUT``, with a reason) or withdrawing that decision (``DELETE``) is a platform
admin's act (``platform.manage``); both are written to the audit log with the reason.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import require_platform
from modelport.api.auth import CurrentPrincipal
from modelport.registry.types import FormatDecision
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["formats"])


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(max_length=2000, description="Why this format may be approved")


def decision_json(decision: FormatDecision) -> dict[str, Any]:
    return {
        "format": decision.format,
        "reason": decision.reason,
        "decided_by": decision.decided_by,
        "decided_at": decision.decided_at.isoformat(),
    }


@router.get("/formats")
def list_formats(
    registry: deps.Registry, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """The formats the platform runs, and those an operator accepted for approval."""
    return {
        "runnable": sorted(registry.runnable_formats()),
        "accepted": [decision_json(d) for d in registry.format_decisions()],
    }


@router.put("/formats/{fmt}")
def accept_format(
    registry: deps.Registry, fmt: str, body: Decision, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Accept a format the platform does not run, so its versions may be approved."""
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    request.state.audit_action = "formats.accept"
    request.state.audit_reason = body.reason
    decision = registry.decide_format(fmt, reason=body.reason, actor=principal.id)
    return decision_json(decision)


@router.delete("/formats/{fmt}", status_code=204)
def withdraw_format(
    registry: deps.Registry, fmt: str, request: Request, principal: CurrentPrincipal
) -> Response:
    """Withdraw the decision: further approvals of the format are refused."""
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    request.state.audit_action = "formats.withdraw"
    registry.withdraw_format(fmt)
    return Response(status_code=204)
