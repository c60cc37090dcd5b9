"""Who may read and do what in billing, on top of ``modelport.api.access``:

- a tenant's owners and ``billing`` members read its usage, invoices and credit
  notes, its prepaid balance, and (as a publisher) its statements;
- only the platform admin generates, finalises, credits and recomputes;
- anything of another tenant is 404, exactly as if it did not exist.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request

from modelport.api.access import enforce, note_tenant, require_tenant
from modelport.errors import NotFound
from modelport.tenancy.policy import Permission, TenantScoped, permissions_of
from modelport.tenancy.repository import tenant_not_found
from modelport.tenancy.types import Principal


def is_platform(principal: Principal) -> bool:
    return Permission.PLATFORM_MANAGE in permissions_of(principal)


def readable_tenant(request: Request, principal: Principal, tenant: str | None) -> str | None:
    """The tenant a billing list is about: any (None: all) for the platform admin, one's
    own otherwise (the default); naming another tenant is 404."""
    if is_platform(principal):
        note_tenant(request, tenant)
        return tenant
    if principal.tenant is None or tenant not in (None, principal.tenant):
        raise tenant_not_found(tenant or "")
    require_tenant(request, principal, principal.tenant, Permission.USAGE_READ)
    return principal.tenant


def require_document(
    request: Request,
    principal: Principal,
    tenant: str,
    permission: Permission,
    hidden: Callable[[], NotFound],
) -> None:
    """A billing document of ``tenant``: ``hidden()`` (404) to other tenants, 403 to its
    own members who may not do ``permission``."""
    note_tenant(request, tenant)
    enforce(principal, permission, TenantScoped(tenant), hidden=hidden)
