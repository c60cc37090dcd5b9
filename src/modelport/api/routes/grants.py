"""/api/grants: a tenant shares a private model, or its whole namespace, with another.

A grant lets the grantee tenant's members see the shared models and call them
(with the roles they hold in their own tenant); nothing more.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import enforce, forbidden, note_tenant, require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.tenancy_json import grant_json
from modelport.errors import InvalidInput
from modelport.tenancy.policy import Permission, TenantScoped, permissions_of
from modelport.tenancy.repository import grant_not_found, tenant_not_found
from modelport.tenancy.types import Grant, Principal

router = APIRouter(tags=["grants"])


class CreateGrant(BaseModel):
    model_config = ConfigDict(extra="forbid")

    grantee: str = Field(description="Slug of the tenant given access")
    namespace: str | None = Field(default=None, description="Default: the caller's tenant")
    model: str | None = Field(
        default=None, description="One model, dataset or template, by name; default: the namespace"
    )


def _visible_grant(request: Request, principal: Principal, grant_id: int) -> Grant:
    """A grant given by or to the caller's tenant (404 otherwise)."""
    grant = deps.tenancy_service(request).get_grant(grant_id)
    side = grant.grantee if principal.tenant == grant.grantee else grant.namespace
    note_tenant(request, grant.namespace)
    enforce(
        principal,
        Permission.GRANTS_READ,
        TenantScoped(side),
        hidden=lambda: grant_not_found(grant_id),
    )
    return grant


@router.post("/grants", status_code=201)
def create_grant(
    tenancy: deps.Tenancy,
    registry: deps.Registry,
    datasets: deps.Datasets,
    templates: deps.Templates,
    body: CreateGrant,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Share; 201 when created, 200 when the same grant already exists."""
    namespace = body.namespace or principal.tenant
    if namespace is None:
        raise InvalidInput("name the namespace to share", code="invalid_request", field="namespace")
    require_tenant(request, principal, namespace, Permission.GRANTS_MANAGE)
    tenancy.get_tenant(body.grantee)
    if body.model is not None and not (
        datasets.exists(namespace, body.model) or templates.exists(namespace, body.model)
    ):
        registry.get_model(namespace, body.model)  # a model, else its 404
    grant, created = tenancy.create_grant(
        namespace, body.grantee, model=body.model, actor=principal.id
    )
    response.status_code = 201 if created else 200
    response.headers["Location"] = f"/api/grants/{grant.id}"
    return grant_json(grant)


@router.get("/grants")
def list_grants(
    tenancy: deps.Tenancy, request: Request, principal: CurrentPrincipal, tenant: str | None = None
) -> dict[str, Any]:
    """Grants given by or to a tenant (one's own; any for the platform admin)."""
    if Permission.PLATFORM_MANAGE not in permissions_of(principal):
        if principal.tenant is None or tenant not in (None, principal.tenant):
            raise tenant_not_found(tenant or "")
        require_tenant(request, principal, principal.tenant, Permission.GRANTS_READ)
        tenant = principal.tenant
    return {"items": [grant_json(g) for g in tenancy.list_grants(involving=tenant)]}


@router.get("/grants/{grant_id}")
def get_grant(grant_id: int, request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
    return grant_json(_visible_grant(request, principal, grant_id))


@router.delete("/grants/{grant_id}", status_code=204)
def delete_grant(
    tenancy: deps.Tenancy, grant_id: int, request: Request, principal: CurrentPrincipal
) -> Response:
    """Withdraw a grant (only the granting tenant may)."""
    grant = _visible_grant(request, principal, grant_id)
    if principal.tenant == grant.grantee:
        raise forbidden(Permission.GRANTS_MANAGE)
    require_tenant(request, principal, grant.namespace, Permission.GRANTS_MANAGE)
    tenancy.delete_grant(grant_id)
    return Response(status_code=204)
