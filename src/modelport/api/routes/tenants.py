"""/api/tenants: tenants (the platform admin creates them), their members and service
accounts with roles (their owners manage them)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import forbidden, require_platform, require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.tenancy_json import member_json, tenant_json
from modelport.tenancy.policy import Permission, assignable_roles, permissions_of
from modelport.tenancy.types import Principal, Tier, principal_id

router = APIRouter(tags=["tenants"])
MEMBER_PATH = "/tenants/{tenant}/members/{member}"


class CreateTenant(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slug: str = Field(description="Also the model namespace the tenant owns")
    name: str = ""
    require_separation: bool = Field(
        default=False,
        description="Approvers may not approve or reject versions they published themselves",
    )
    owner: str | None = Field(default=None, description="Name of a first member, made owner")


class UpdateTenant(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    require_separation: bool | None = None
    no_cache: bool | None = Field(
        default=None,
        description="Never answer the tenant's calls from the response cache, nor store them",
    )
    shared_cache: bool | None = Field(
        default=None,
        description=(
            "Answer from, and add to, the response cache shared with other tenants that "
            "opted in (never with a no-cache tenant)"
        ),
    )


class Suspend(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(description="Why: shown to the operator and kept in the audit log")


class SetTier(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tier: Tier = Field(description="free, standard or premium: whose calls give way under load")


class AddMember(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    kind: str = Field(default="member", description="'member' or 'service_account'")
    roles: list[str]


class SetRoles(BaseModel):
    model_config = ConfigDict(extra="forbid")

    roles: list[str]


@router.post("/tenants", status_code=201)
def create_tenant(
    tenancy: deps.Tenancy,
    body: CreateTenant,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    request.state.audit_tenant = body.slug
    tenant = tenancy.create_tenant(
        body.slug,
        actor=principal.id,
        name=body.name,
        require_separation=body.require_separation,
        owner=body.owner,
    )
    response.headers["Location"] = f"/api/tenants/{tenant.slug}"
    return tenant_json(tenant)


@router.get("/tenants")
def list_tenants(
    tenancy: deps.Tenancy, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Every tenant for the platform admin; one's own tenant for anyone else."""
    if Permission.PLATFORM_MANAGE in permissions_of(principal):
        tenants = tenancy.list_tenants()
    elif principal.tenant is None:
        tenants = []
    else:
        tenants = tenancy.list_tenants(only=principal.tenant)
    return {"items": [tenant_json(t) for t in tenants]}


@router.get("/tenants/{tenant}")
def get_tenant(
    tenancy: deps.Tenancy, tenant: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    require_tenant(request, principal, tenant, Permission.TENANT_READ)
    return tenant_json(tenancy.get_tenant(tenant))


@router.patch("/tenants/{tenant}")
def update_tenant(
    tenancy: deps.Tenancy,
    tenant: str,
    body: UpdateTenant,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    require_tenant(request, principal, tenant, Permission.TENANT_MANAGE)
    updated = tenancy.update_tenant(
        tenant,
        name=body.name,
        require_separation=body.require_separation,
        no_cache=body.no_cache,
        shared_cache=body.shared_cache,
    )
    return tenant_json(updated)


@router.post("/tenants/{tenant}/suspend")
def suspend_tenant(
    tenancy: deps.Tenancy, tenant: str, body: Suspend, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Suspend a tenant (the platform admin only): its keys and its people's tokens are
    refused with 403 ``tenant_suspended``, and its queued jobs wait. Suspending again
    changes the reason only."""
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    request.state.audit_reason = body.reason
    return tenant_json(tenancy.suspend_tenant(tenant, reason=body.reason))


@router.put("/tenants/{tenant}/tier")
def set_tier(
    tenancy: deps.Tenancy, tenant: str, body: SetTier, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Move a tenant to another tier (the platform admin only): under load, the calls of
    the tiers a degradation policy names give way (``free`` by default)."""
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    return tenant_json(tenancy.set_tier(tenant, body.tier))


@router.post("/tenants/{tenant}/reactivate")
def reactivate_tenant(
    tenancy: deps.Tenancy, tenant: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Lift a tenant's suspension (the platform admin only)."""
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    return tenant_json(tenancy.reactivate_tenant(tenant))


@router.get("/tenants/{tenant}/members")
def list_members(
    tenancy: deps.Tenancy, tenant: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    require_tenant(request, principal, tenant, Permission.MEMBERS_READ)
    return {"items": [member_json(m) for m in tenancy.list_members(tenant)]}


@router.post("/tenants/{tenant}/members", status_code=201)
def add_member(
    tenancy: deps.Tenancy,
    tenant: str,
    body: AddMember,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Add a member or a service account with its roles."""
    require_tenant(request, principal, tenant, Permission.MEMBERS_MANAGE)
    _check_assignable(principal, body.roles)
    member = tenancy.add_member(
        tenant, body.name, roles=body.roles, kind=body.kind, actor=principal.id
    )
    response.headers["Location"] = f"/api/tenants/{tenant}/members/{member.name}"
    return member_json(member)


@router.get(MEMBER_PATH)
def get_member(
    tenancy: deps.Tenancy, tenant: str, member: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """A member; anyone may read their own record."""
    if principal.id != principal_id(tenant, member):
        require_tenant(request, principal, tenant, Permission.MEMBERS_READ)
    return member_json(tenancy.get_member(tenant, member))


@router.patch(MEMBER_PATH)
def set_roles(
    tenancy: deps.Tenancy,
    tenant: str,
    member: str,
    body: SetRoles,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Replace the roles of a member; its keys carry the new roles from the next request."""
    require_tenant(request, principal, tenant, Permission.MEMBERS_MANAGE)
    _check_assignable(principal, body.roles)
    return member_json(tenancy.set_roles(tenant, member, body.roles))


@router.delete(MEMBER_PATH, status_code=204)
def remove_member(
    tenancy: deps.Tenancy, tenant: str, member: str, request: Request, principal: CurrentPrincipal
) -> Response:
    """Remove a member or service account; its keys stop working at once."""
    require_tenant(request, principal, tenant, Permission.MEMBERS_MANAGE)
    tenancy.remove_member(tenant, member)
    return Response(status_code=204)


def _check_assignable(principal: Principal, roles: list[str]) -> None:
    # Unknown roles are the service's 400; the platform role only an admin may give.
    if "admin" in roles and "admin" not in assignable_roles(principal):
        raise forbidden(Permission.PLATFORM_MANAGE)
