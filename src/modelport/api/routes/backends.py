"""/api/backends: remote inference servers a tenant's deployments may run versions on.

A backend belongs to a tenant; another tenant gets 404 for it, exactly as for one that
does not exist. Declaring and removing need ``version.deploy`` in that tenant, reading
``model.read``. The API key is stored and used, never returned.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import enforce, note_tenant, require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.errors import InvalidInput, Unavailable
from modelport.serving.backends.catalog import BackendCatalog, backend_not_found
from modelport.serving.backends.types import RemoteBackendInfo
from modelport.serving.endpoints.types import DeploymentState
from modelport.tenancy.policy import Permission, TenantScoped
from modelport.tenancy.types import Principal

router = APIRouter(tags=["backends"])


class CapabilitiesBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    formats: list[str] = Field(default_factory=list, max_length=16)
    max_batch_size: int | None = Field(default=None, ge=1)
    hardware: list[str] = Field(default_factory=list, max_length=16)
    context_length: int | None = Field(default=None, ge=1)
    models: dict[str, str] = Field(
        default_factory=dict, description="Registry owner/name to the remote's model name"
    )


class CreateBackend(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="1-63 lowercase letters, digits and '-'; unique; not 'local'")
    tenant: str | None = Field(default=None, description="Default: the caller's tenant")
    kind: Literal["remote_v2", "remote_openai"]
    url: str = Field(max_length=2048)
    api_key: str | None = Field(default=None, max_length=4096, description="Never returned")
    capabilities: CapabilitiesBody = Field(default_factory=CapabilitiesBody)


def backend_json(info: RemoteBackendInfo, request: Request) -> dict[str, Any]:
    status = _catalog(request).board.status(info.name)
    return {
        "name": info.name,
        "tenant": info.tenant,
        "kind": info.kind.value,
        "url": info.url,
        "has_api_key": info.has_api_key,
        "capabilities": info.capabilities,
        "health": status.health.value,
        "breaker": status.breaker.value,
        "created_at": info.created_at.isoformat(),
        "created_by": info.created_by,
    }


def _catalog(request: Request) -> BackendCatalog:
    catalog = deps.serving_service(request).backends
    if catalog is None:
        raise Unavailable("remote backends are not configured", code="backends_unavailable")
    return catalog


def _backend(
    request: Request, principal: Principal, name: str, permission: Permission
) -> RemoteBackendInfo:
    info = _catalog(request).get(name)
    note_tenant(request, info.tenant)
    enforce(
        principal, permission, TenantScoped(info.tenant), hidden=lambda: backend_not_found(name)
    )
    return info


@router.post("/backends", status_code=201)
def create_backend(
    tenancy: deps.Tenancy,
    body: CreateBackend,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Declare a remote backend in the caller's tenant (the platform admin names the tenant).
    It is probed for health from now on; deployments of the tenant may name it."""
    tenant = body.tenant or principal.tenant
    if tenant is None:
        raise InvalidInput(
            "'tenant' is required for a caller without one", code="invalid_request", field="tenant"
        )
    require_tenant(request, principal, tenant, Permission.VERSION_DEPLOY)
    tenancy.get_tenant(tenant)
    capabilities = body.capabilities.model_dump(exclude_none=True, exclude_defaults=True)
    info = _catalog(request).create(
        tenant,
        body.name,
        kind=body.kind,
        url=body.url,
        api_key=body.api_key,
        capabilities=capabilities,
        actor=principal.id,
    )
    response.headers["Location"] = f"/api/backends/{info.name}"
    return backend_json(info, request)


@router.get("/backends")
def list_backends(
    request: Request, principal: CurrentPrincipal, tenant: str | None = None
) -> dict[str, Any]:
    """Backends of the caller's tenant (the platform admin: all, or ``tenant``'s)."""
    scope = tenant if principal.tenant is None else principal.tenant
    if scope is not None:
        require_tenant(request, principal, scope, Permission.MODEL_READ)
    return {"items": [backend_json(i, request) for i in _catalog(request).list(scope)]}


@router.get("/backends/{name}")
def get_backend(name: str, request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
    """The backend as declared, with its last probe and breaker state."""
    return backend_json(_backend(request, principal, name, Permission.MODEL_READ), request)


@router.delete("/backends/{name}", status_code=204)
async def delete_backend(
    serving: deps.Serving, name: str, request: Request, principal: CurrentPrincipal
) -> Response:
    """Remove a backend (409 ``backend_in_use`` while a live deployment names it)."""
    await anyio.to_thread.run_sync(_backend, request, principal, name, Permission.VERSION_DEPLOY)
    plane = serving
    live = [s for s in DeploymentState if s.live]
    deployments = await anyio.to_thread.run_sync(plane.endpoints.deployments_in, live)
    in_use = any(name in v.backends for d in deployments for v in d.spec.versions)
    removed = await anyio.to_thread.run_sync(lambda: _catalog(request).delete(name, in_use=in_use))
    if removed is not None:
        await removed.close()
    return Response(status_code=204)
