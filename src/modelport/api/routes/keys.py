"""/api/keys: create, list, rotate and revoke API keys.

A key is shown once, when it is created or rotated. Members manage their own keys;
a tenant's owners manage everyone's in the tenant; the platform admin everyone's.
A key can never be made with more scopes than the key that makes it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import enforce, forbidden, note_tenant, require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.tenancy_json import issued_json, key_json
from modelport.errors import Forbidden, InvalidInput
from modelport.tenancy.policy import (
    Decision,
    Permission,
    TenantScoped,
    authorize,
    may_issue_for,
    permissions_of,
)
from modelport.tenancy.repository import key_not_found, tenant_not_found
from modelport.tenancy.types import ApiKey, Principal, principal_id

router = APIRouter(tags=["keys"])
NO_STORE = {"Cache-Control": "no-store"}


class CreateKey(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    tenant: str | None = Field(default=None, description="Default: the caller's tenant")
    member: str | None = Field(
        default=None, description="Member or service account; default: the caller"
    )
    scopes: list[str] | None = Field(
        default=None, description="Permissions the key is limited to; default: all it holds"
    )
    expires_at: datetime | None = None
    expires_in_seconds: int | None = Field(default=None, gt=0, le=10 * 365 * 86400)


def _member_of(principal: Principal) -> str | None:
    if principal.tenant is None:
        return None
    return principal.id.split("/", 1)[1]


def _check_issuable(request: Request, principal: Principal, tenant: str, member: str) -> None:
    holder = deps.tenancy_service(request).get_member(tenant, member)
    if not may_issue_for(principal, holder.roles):
        raise Forbidden(
            f"{holder.principal_id} can do more than this key's roles allow; only the "
            "platform admin (or the member itself) may obtain a key for it",
            code="holder_outranks_issuer",
        )


def _key_for(request: Request, principal: Principal, key_id: str) -> ApiKey:
    """A key the caller may manage (404 ``key_not_found`` for keys of other tenants)."""
    key = deps.tenancy_service(request).get_key(key_id)
    note_tenant(request, key.tenant)
    enforce(
        principal,
        Permission.KEYS_MANAGE,
        TenantScoped(key.tenant, key.principal_id),
        hidden=lambda: key_not_found(key_id),
    )
    return key


@router.post("/keys", status_code=201)
def create_key(
    tenancy: deps.Tenancy,
    clock: deps.Clock,
    body: CreateKey,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Create a key; the response holds its secret (``key``), shown this once."""
    tenant = body.tenant or principal.tenant
    member = body.member or _member_of(principal)
    if tenant is None or member is None:
        raise InvalidInput(
            "name the tenant and member the key is for", code="invalid_request", field="member"
        )
    require_tenant(
        request, principal, tenant, Permission.KEYS_MANAGE, owner_id=principal_id(tenant, member)
    )
    _check_issuable(request, principal, tenant, member)
    if body.expires_at is not None and body.expires_in_seconds is not None:
        raise InvalidInput("give expires_at or expires_in_seconds, not both", code="invalid_expiry")
    expires_at = body.expires_at
    if body.expires_in_seconds is not None:
        expires_at = clock.now() + timedelta(seconds=body.expires_in_seconds)
    issued = tenancy.create_key(
        tenant,
        member,
        name=body.name,
        scopes=body.scopes,
        expires_at=expires_at,
        actor=principal.id,
        issuer=principal,
    )
    response.headers.update(NO_STORE)
    response.headers["Location"] = f"/api/keys/{issued.key.id}"
    return issued_json(issued)


@router.get("/keys")
def list_keys(
    tenancy: deps.Tenancy,
    request: Request,
    principal: CurrentPrincipal,
    tenant: str | None = None,
    member: str | None = None,
) -> dict[str, Any]:
    """Keys (never their secrets): one's own, or a tenant's for its owners."""
    if Permission.PLATFORM_MANAGE in permissions_of(principal):
        return {"items": [key_json(k) for k in tenancy.list_keys(tenant=tenant, member=member)]}
    own = principal.tenant
    if own is None:
        return {"items": []}
    if tenant is not None and tenant != own:
        raise tenant_not_found(tenant)
    manage = TenantScoped(own)
    if authorize(principal, Permission.KEYS_MANAGE, manage) is not Decision.ALLOW:
        require_tenant(request, principal, own, Permission.KEYS_SELF)
        if member not in (None, _member_of(principal)):
            raise forbidden(Permission.KEYS_MANAGE)
        member = _member_of(principal)
    return {"items": [key_json(k) for k in tenancy.list_keys(tenant=own, member=member)]}


@router.get("/keys/{key_id}")
def get_key(key_id: str, request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
    return key_json(_key_for(request, principal, key_id))


@router.delete("/keys/{key_id}")
def revoke_key(
    tenancy: deps.Tenancy, key_id: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Revoke a key: it stops working at once, on every gateway."""
    _key_for(request, principal, key_id)
    return key_json(tenancy.revoke_key(key_id))


@router.post("/keys/{key_id}/rotate", status_code=201)
def rotate_key(
    tenancy: deps.Tenancy,
    key_id: str,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Replace a key with a new one (shown this once); the old one stops working."""
    key = _key_for(request, principal, key_id)
    _check_issuable(request, principal, key.tenant, key.member)
    issued = tenancy.rotate_key(key_id, actor=principal.id, issuer=principal)
    response.headers.update(NO_STORE)
    response.headers["Location"] = f"/api/keys/{issued.key.id}"
    return issued_json(issued)
