"""/api/usage/authorizations: a consumer tenant's mandates for publishers to report its
usage (see ``modelport.metering.authorizations`` for what they allow).

- ``POST``: the consumer (its owners, or members with the ``billing`` role:
  ``usage.authorize``) authorizes a publisher tenant, for one model or for all of
  its models, up to ``cap_micros`` in all, optionally until ``expires_at``.
- ``GET``: mandates given by or to the caller's tenant (``usage.read``,
  ``usage.report`` or ``usage.authorize``): the consumer sees what it committed, the
  publisher what it may still report.
- ``DELETE /{id}``: the consumer withdraws a mandate; it stays listed, withdrawn.

Creating and withdrawing are audited like every mutating request.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import enforce, forbidden, note_tenant, require_model, require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.errors import InvalidInput
from modelport.metering.authorizations import authorization_not_found
from modelport.metering.types import UsageAuthorization
from modelport.store.base import utcnow
from modelport.tenancy.policy import Permission, TenantScoped, permissions_of
from modelport.tenancy.repository import tenant_not_found
from modelport.tenancy.types import Principal

router = APIRouter(tags=["usage"])

_READERS = (Permission.USAGE_READ, Permission.USAGE_REPORT, Permission.USAGE_AUTHORIZE)


class NewUsageAuthorization(BaseModel):
    model_config = ConfigDict(extra="forbid")

    publisher: str = Field(description="Slug of the tenant allowed to report usage")
    model: str | None = Field(
        default=None, description="owner/name, one of the publisher's; default: all of them"
    )
    cap_micros: int = Field(ge=1, description="The most the publisher may report in all")
    expires_at: datetime | None = Field(default=None, description="Default: no end")
    consumer: str | None = Field(default=None, description="Default: the caller's tenant")


def authorization_json(authorization: UsageAuthorization) -> dict[str, Any]:
    def time(value: datetime | None) -> str | None:
        return None if value is None else value.isoformat()

    return {
        "id": authorization.id,
        "consumer": authorization.consumer,
        "publisher": authorization.publisher,
        "model": authorization.model,
        "cap_micros": authorization.cap_micros,
        "spent_micros": authorization.spent_micros,
        "remaining_micros": authorization.remaining_micros,
        "state": authorization.state(utcnow()),
        "expires_at": time(authorization.expires_at),
        "created_at": time(authorization.created_at),
        "created_by": authorization.created_by,
        "withdrawn_at": time(authorization.withdrawn_at),
        "withdrawn_by": authorization.withdrawn_by,
    }


def _may_read(principal: Principal, tenant: str) -> bool:
    return principal.tenant == tenant and any(p in permissions_of(principal) for p in _READERS)


def _visible(request: Request, principal: Principal, authorization_id: int) -> UsageAuthorization:
    """A mandate given by or to the caller's tenant (404 otherwise)."""
    authorization = deps.metering_service(request).authorizations.get(authorization_id)
    note_tenant(request, authorization.consumer)
    if Permission.PLATFORM_MANAGE in permissions_of(principal):
        return authorization
    sides = (authorization.consumer, authorization.publisher)
    if principal.tenant not in sides:
        raise authorization_not_found(authorization_id)
    if not _may_read(principal, principal.tenant):
        raise forbidden(Permission.USAGE_READ)
    return authorization


@router.post("/usage/authorizations", status_code=201)
def create_authorization(
    metering: deps.Metering,
    tenancy: deps.Tenancy,
    body: NewUsageAuthorization,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Authorize a publisher to report the caller's tenant's usage, up to a cap."""
    consumer = body.consumer or principal.tenant
    if consumer is None:
        raise InvalidInput("name the consumer tenant", code="invalid_request", field="consumer")
    require_tenant(request, principal, consumer, Permission.USAGE_AUTHORIZE)
    publisher = tenancy.get_tenant(body.publisher).slug
    if body.model is not None:
        owner, _, name = body.model.partition("/")
        if owner != publisher or not name or "/" in name:
            raise InvalidInput(
                f"'model' must be 'owner/name', a model of {publisher}",
                code="invalid_usage_authorization",
                field="model",
            )
        require_model(request, principal, owner, name, Permission.MODEL_READ)
        note_tenant(request, consumer)
    authorization = metering.authorizations.create(
        consumer,
        publisher,
        model=body.model,
        cap_micros=body.cap_micros,
        expires_at=body.expires_at,
        actor=principal.id,
    )
    response.headers["Location"] = f"/api/usage/authorizations/{authorization.id}"
    return authorization_json(authorization)


@router.get("/usage/authorizations")
def list_authorizations(
    metering: deps.Metering,
    request: Request,
    principal: CurrentPrincipal,
    tenant: str | None = None,
) -> dict[str, Any]:
    """Mandates given by or to a tenant (one's own; any for the platform admin)."""
    if Permission.PLATFORM_MANAGE not in permissions_of(principal):
        if principal.tenant is None or tenant not in (None, principal.tenant):
            raise tenant_not_found(tenant or "")
        tenant = principal.tenant
        if not _may_read(principal, tenant):
            enforce(
                principal,
                Permission.USAGE_READ,
                TenantScoped(tenant),
                hidden=lambda: tenant_not_found(tenant or ""),
            )
    found = metering.authorizations.list(involving=tenant)
    return {"items": [authorization_json(a) for a in found]}


@router.get("/usage/authorizations/{authorization_id}")
def get_authorization(
    authorization_id: int, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    return authorization_json(_visible(request, principal, authorization_id))


@router.delete("/usage/authorizations/{authorization_id}")
def withdraw_authorization(
    metering: deps.Metering, authorization_id: int, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Withdraw a mandate (only the consumer may): reports under it are refused from now
    on; what was reported before stays. Answers the mandate, withdrawn."""
    authorization = _visible(request, principal, authorization_id)
    if principal.tenant == authorization.publisher and not principal.is_admin:
        raise forbidden(Permission.USAGE_AUTHORIZE)  # the consumer's to withdraw
    require_tenant(request, principal, authorization.consumer, Permission.USAGE_AUTHORIZE)
    withdrawn = metering.authorizations.withdraw(authorization_id, actor=principal.id)
    return authorization_json(withdrawn)
