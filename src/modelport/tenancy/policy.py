"""Who may do what: the role → permission table as plain data, and one pure ``authorize``.

``authorize(principal, permission, resource)`` answers ALLOW, DENY (the caller may see
the resource but not do this: 403) or HIDE (the caller may not even know the resource
exists: 404). It does no I/O; callers describe the resource with the facts it needs
(its tenant, a model's visibility, whether a grant shares it with the caller's tenant).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum, StrEnum
from types import MappingProxyType

from modelport.tenancy.types import Principal


class Permission(StrEnum):
    PLATFORM_MANAGE = "platform.manage"
    """Create tenants; act on every tenant (the platform operator)."""
    TENANT_READ = "tenant.read"
    TENANT_MANAGE = "tenant.manage"
    """Change the tenant's settings (e.g. separation of duties)."""
    MEMBERS_READ = "members.read"
    MEMBERS_MANAGE = "members.manage"
    KEYS_SELF = "keys.self"
    """Create, list, rotate and revoke one's own API keys."""
    KEYS_MANAGE = "keys.manage"
    """The same for every member and service account of the tenant."""
    GRANTS_READ = "grants.read"
    GRANTS_MANAGE = "grants.manage"
    AUDIT_READ = "audit.read"
    MODEL_READ = "model.read"
    """See models, versions, aliases, lineage, and read their blobs."""
    MODEL_REGISTER = "model.register"
    """Create models and publish versions; validate, deprecate, archive; sign; upload blobs."""
    VERSION_APPROVE = "version.approve"
    """Move versions to approved or rejected."""
    VERSION_DEPLOY = "version.deploy"
    """Move versions to deployed, load and unload them, move aliases, manage deployments."""
    VERSION_OVERRIDE = "version.override"
    """Approve or reject one's own version where the tenant requires separation of duties."""
    MODEL_CALL = "model.call"
    """Call models (inference)."""
    USAGE_READ = "usage.read"
    """Usage, invoices and statements."""
    USAGE_REPORT = "usage.report"
    """Report usage of one's models served by an external backend (``POST /api/usage/events``)."""
    USAGE_AUTHORIZE = "usage.authorize"
    """Authorize another tenant to report one's usage of its models, up to a cap, and
    withdraw that (``/api/usage/authorizations``): a spending commitment."""


P = Permission
ALL_PERMISSIONS = frozenset(P)
_EVERY_MEMBER = frozenset({P.TENANT_READ, P.KEYS_SELF, P.MODEL_READ})

ROLE_PERMISSIONS: MappingProxyType[str, frozenset[Permission]] = MappingProxyType(
    {
        "admin": ALL_PERMISSIONS,
        "owner": ALL_PERMISSIONS - {P.PLATFORM_MANAGE},
        "publisher": _EVERY_MEMBER | {P.MODEL_REGISTER},
        "approver": _EVERY_MEMBER | {P.VERSION_APPROVE},
        "deployer": _EVERY_MEMBER | {P.VERSION_DEPLOY},
        "consumer": _EVERY_MEMBER | {P.MODEL_CALL},
        "billing": _EVERY_MEMBER | {P.USAGE_READ, P.USAGE_AUTHORIZE},
    }
)
"""Every role and what it may do. ``admin`` is the platform operator's role."""

TENANT_ROLES = frozenset(ROLE_PERMISSIONS) - {"admin"}
"""Roles an owner may give to members of their tenant (``admin`` only an admin may give)."""

CROSS_TENANT = frozenset({P.MODEL_READ, P.MODEL_CALL})
"""What a principal may do, at most, with another tenant's model it can see."""


class Decision(Enum):
    ALLOW = "allow"
    DENY = "deny"
    """403: the caller may know the resource exists, but may not do this."""
    HIDE = "hide"
    """404: the caller may not learn that the resource exists."""


@dataclass(frozen=True)
class Platform:
    """Platform-wide things: the tenant list, creating tenants."""


@dataclass(frozen=True)
class TenantScoped:
    """Something that belongs to a tenant: its settings, members, keys, grants, audit."""

    tenant: str
    principal_id: str | None = None
    """The principal it belongs to, for things one manages for oneself (API keys)."""


@dataclass(frozen=True)
class Namespace:
    """A model namespace, for creating models in it (``owner`` of ``owner/name``)."""

    namespace: str


@dataclass(frozen=True)
class ModelResource:
    """A model (and its versions, aliases, lineage, blobs)."""

    namespace: str
    visibility: str
    shared: bool = False
    """A grant shares it with the caller's tenant (computed by the caller from grant data)."""

    @property
    def public(self) -> bool:
        return self.visibility == "public"


Resource = Platform | TenantScoped | Namespace | ModelResource


def permissions_of(principal: Principal) -> frozenset[Permission]:
    """What the principal's roles allow, narrowed by its credential's scopes."""
    return _permissions(principal.roles, principal.scopes)


@functools.lru_cache(maxsize=1024)
def _permissions(roles: frozenset[str], scopes: frozenset[str] | None) -> frozenset[Permission]:
    # Pure and asked on every request by a handful of distinct role sets: remembered.
    granted: frozenset[Permission] = frozenset()
    for role in roles:
        granted |= ROLE_PERMISSIONS.get(role, frozenset())
    if scopes is not None:
        granted &= {p for p in ALL_PERMISSIONS if p.value in scopes}
    return granted


def authorize(principal: Principal, permission: Permission, resource: Resource) -> Decision:
    """May ``principal`` do ``permission`` on ``resource``? Pure."""
    held = permissions_of(principal)
    if P.PLATFORM_MANAGE in held:
        # The platform operator may do everything its credential's scopes allow.
        return Decision.ALLOW if permission in held else Decision.DENY
    if isinstance(resource, Platform):
        return Decision.DENY
    if isinstance(resource, TenantScoped):
        return _tenant_scoped(principal, held, permission, resource)
    if isinstance(resource, Namespace):
        own = principal.tenant is not None and principal.tenant == resource.namespace
        return Decision.ALLOW if own and permission in held else Decision.DENY
    return _model(principal, held, permission, resource)


def _tenant_scoped(
    principal: Principal, held: frozenset[Permission], permission: Permission, res: TenantScoped
) -> Decision:
    if principal.tenant is None or principal.tenant != res.tenant:
        return Decision.HIDE
    if permission in held:
        return Decision.ALLOW
    # One's own keys: KEYS_SELF stands in for KEYS_MANAGE.
    if permission is P.KEYS_MANAGE and res.principal_id == principal.id and P.KEYS_SELF in held:
        return Decision.ALLOW
    return Decision.DENY


def _model(
    principal: Principal, held: frozenset[Permission], permission: Permission, res: ModelResource
) -> Decision:
    if principal.tenant is not None and principal.tenant == res.namespace:
        return Decision.ALLOW if permission in held else Decision.DENY
    if not (res.public or res.shared):
        return Decision.HIDE
    if permission in CROSS_TENANT and permission in held:
        return Decision.ALLOW
    return Decision.DENY


def transition_permission(to_state: str) -> Permission:
    """The permission a lifecycle transition to ``to_state`` needs."""
    if to_state in ("approved", "rejected"):
        return P.VERSION_APPROVE
    if to_state == "deployed":
        return P.VERSION_DEPLOY
    return P.MODEL_REGISTER


def check_scopes(scopes: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Known permission names, sorted and deduplicated; ValueError names an unknown one."""
    known = {p.value for p in ALL_PERMISSIONS}
    for scope in scopes:
        if scope not in known:
            raise ValueError(scope)
    return tuple(sorted(set(scopes)))


def delegable_scopes(
    creator: Principal, requested: tuple[str, ...] | None
) -> tuple[str, ...] | None:
    """The scopes of a key ``creator`` makes, which may never exceed its own.

    An unscoped request inherits the creator's scopes (None: not narrowed). Raises
    ValueError naming the first requested permission the creator does not hold: what
    its roles allow, narrowed by its credential's scopes (an unscoped credential, the
    platform admin's included, holds no more than its roles).
    """
    held = {p.value for p in permissions_of(creator)}
    if requested is None:
        return None if creator.scopes is None else tuple(sorted(held))
    for scope in requested:
        if scope not in held:
            raise ValueError(scope)
    return requested


def may_issue_for(issuer: Principal, holder_roles: Iterable[str]) -> bool:
    """Whether ``issuer`` may obtain a key (create or rotate one) for a principal with
    ``holder_roles``: never one that could do what the issuer's own roles cannot (an
    owner may not mint a key for a member the platform admin made ``admin``)."""
    own = permissions_of(Principal(id=issuer.id, roles=issuer.roles))
    if P.PLATFORM_MANAGE in permissions_of(issuer):
        return True
    held = permissions_of(Principal(id="holder", roles=frozenset(holder_roles)))
    return held <= own


def assignable_roles(assigner: Principal) -> frozenset[str]:
    """Roles ``assigner`` may give: an admin any, a tenant's owner the tenant roles."""
    return (
        frozenset(ROLE_PERMISSIONS)
        if P.PLATFORM_MANAGE in permissions_of(assigner)
        else TENANT_ROLES
    )


def separation_forbids(principal: Principal, published_by: str, require_separation: bool) -> bool:
    """Whether separation of duties stops ``principal`` approving or rejecting a version
    ``published_by`` published."""
    return (
        require_separation
        and published_by == principal.id
        and P.VERSION_OVERRIDE not in permissions_of(principal)
    )
