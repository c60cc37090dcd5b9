"""/api/tenants/{tenant}/prediction-log and
/api/models/{owner}/{name}/versions/{version}/prediction-log: the share of direct version
calls the prediction log keeps, and whether with their inputs and outputs
(``observability.sampling``). A tenant's policy covers its own calls: reading it needs
``tenant.read``, setting it ``tenant.manage``, in that tenant. A version's covers the calls
of that version: reading it needs ``model.read`` on the model, setting it
``model.register`` (its owner's publishers); a model the caller may not see is 404."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import require_model, require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.observability.sampling import PredictionSampling, SamplingPolicy
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["predictions"])
TENANT_PATH = "/tenants/{tenant}/prediction-log"
VERSION_PATH = "/models/{owner}/{name}/versions/{version}/prediction-log"


class SetSampling(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rate: float | None = Field(
        description="Share of direct calls logged, 0 to 1 (400 ``invalid_sampling`` "
        "outside); null: no policy (off)"
    )
    payloads: bool = Field(
        default=False, description="Keep the logged calls' inputs and outputs too"
    )

    def policy(self) -> SamplingPolicy | None:
        return None if self.rate is None else SamplingPolicy(self.rate, self.payloads)


def _json(policy: SamplingPolicy, own: bool, **subject: str) -> dict[str, Any]:
    return {**subject, "rate": policy.rate, "payloads": policy.payloads, "default": not own}


async def _tenant(request: Request, principal: Any, tenant: str, permission: Permission) -> None:
    require_tenant(request, principal, tenant, permission)
    await anyio.to_thread.run_sync(deps.tenancy_service(request).get_tenant, tenant)


@router.get(TENANT_PATH)
async def get_tenant_sampling(
    sampling: deps.Sampling, tenant: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """The share of the tenant's direct calls the prediction log keeps."""
    await _tenant(request, principal, tenant, Permission.TENANT_READ)
    policy, own = await anyio.to_thread.run_sync(sampling.tenant_policy, tenant)
    return _json(policy, own, tenant=tenant)


@router.put(TENANT_PATH)
async def set_tenant_sampling(
    sampling: deps.Sampling,
    tenant: str,
    body: SetSampling,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Log ``rate`` of the tenant's direct calls (decided by call id), with their inputs
    and outputs where ``payloads``; the tenant's ``payloads`` wins over a version's."""
    await _tenant(request, principal, tenant, Permission.TENANT_MANAGE)
    await anyio.to_thread.run_sync(
        lambda: sampling.set_tenant(tenant, body.policy(), actor=principal.id)
    )
    policy, own = await anyio.to_thread.run_sync(sampling.tenant_policy, tenant)
    return _json(policy, own, tenant=tenant)


def _version(
    request: Request,
    principal: Any,
    owner: str,
    name: str,
    version: str,
    permission: Permission,
) -> None:
    require_model(request, principal, owner, name, permission)
    deps.registry_service(request).get_version(owner, name, version)  # 404 if none


async def _version_json(
    sampling: PredictionSampling, owner: str, name: str, version: str
) -> dict[str, Any]:
    model = f"{owner}/{name}"
    policy, own = await anyio.to_thread.run_sync(sampling.version_policy, model, version)
    return _json(policy, own, model=model, version=version)


@router.get(VERSION_PATH)
async def get_version_sampling(
    sampling: deps.Sampling,
    owner: str,
    name: str,
    version: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """The share of the version's direct calls the prediction log keeps."""
    await anyio.to_thread.run_sync(
        _version, request, principal, owner, name, version, Permission.MODEL_READ
    )
    return await _version_json(sampling, owner, name, version)


@router.put(VERSION_PATH)
async def set_version_sampling(
    sampling: deps.Sampling,
    owner: str,
    name: str,
    version: str,
    body: SetSampling,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Log ``rate`` of the calls made of the version, whoever makes them (its owner's
    log), with inputs and outputs where ``payloads`` and the caller's tenant did not
    set otherwise."""
    await anyio.to_thread.run_sync(
        _version, request, principal, owner, name, version, Permission.MODEL_REGISTER
    )
    await anyio.to_thread.run_sync(
        lambda: sampling.set_version(f"{owner}/{name}", version, body.policy(), actor=principal.id)
    )
    return await _version_json(sampling, owner, name, version)
