"""/api/endpoints/{name}/degradation: how an endpoint's calls give way under load
(``inference.degrade``). Reading it needs ``model.read`` in the endpoint's tenant,
replacing or removing it ``version.deploy``."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request

from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.endpoints import readable_endpoint, require_endpoint, serving
from modelport.serving.endpoints.types import DegradePolicy
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["endpoints"])


def _json(name: str, policy: DegradePolicy | None) -> dict[str, Any]:
    return {
        "endpoint": name,
        "policy": None if policy is None else policy.model_dump(mode="json"),
    }


@router.get("/endpoints/{name}/degradation")
def get_degradation(name: str, request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
    """The endpoint's policy (``policy`` null: the installation's applies)."""
    endpoint = readable_endpoint(request, principal, name)
    return _json(endpoint.name, endpoint.degradation)


@router.put("/endpoints/{name}/degradation")
async def set_degradation(
    name: str, body: DegradePolicy, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Replace the endpoint's policy; a part left out is the installation's. A fallback
    the endpoint's owner may not call is refused (``degrade_fallback_not_callable``)."""
    return await _set(name, body, request, principal)


@router.delete("/endpoints/{name}/degradation")
async def remove_degradation(
    name: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Back to the installation's policy."""
    return await _set(name, None, request, principal)


async def _set(
    name: str, policy: DegradePolicy | None, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    plane = serving(request)
    endpoint = await anyio.to_thread.run_sync(plane.endpoints.get_endpoint, name)
    require_endpoint(request, principal, endpoint, Permission.VERSION_DEPLOY)
    changed = await plane.set_degradation(name, policy)
    return _json(changed.name, changed.degradation)
