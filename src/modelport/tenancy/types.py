"""Plain identity and tenancy records (frozen, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class MemberKind(StrEnum):
    """A person, or a service account (a machine identity of the tenant)."""

    MEMBER = "member"
    SERVICE_ACCOUNT = "service_account"


@dataclass(frozen=True)
class Principal:
    """An authenticated caller.

    ``roles`` are the principal's roles (in ``tenant``, or ``admin`` for the platform
    operator). ``scopes``, when not None, narrow what this credential may do to those
    permissions (see ``modelport.tenancy.policy``).
    """

    id: str
    roles: frozenset[str] = field(default_factory=frozenset)
    tenant: str | None = None
    """Slug of the principal's tenant; None for the operator's admin key."""
    key_id: str | None = None
    """The API key this request authenticated with; None for the admin key."""
    scopes: frozenset[str] | None = None
    kind: str = MemberKind.MEMBER.value

    @property
    def is_admin(self) -> bool:
        """The platform operator: the ``admin`` role on a credential that keeps
        ``platform.manage`` (a key of an admin member scoped away from it is an ordinary
        member of its tenant, as ``policy.permissions_of`` has it)."""
        return "admin" in self.roles and (self.scopes is None or "platform.manage" in self.scopes)


class Tier(StrEnum):
    """A tenant's service tier, lowest first: under load the calls of the tiers a
    degradation policy names give way (``inference.degrade``: ``free`` by default)."""

    FREE = "free"
    STANDARD = "standard"
    PREMIUM = "premium"


@dataclass(frozen=True)
class Tenant:
    slug: str
    """Also the model namespace the tenant owns (``<slug>/<model>``)."""
    name: str
    require_separation: bool
    """Approvers may not approve or reject versions they published themselves."""
    created_at: datetime
    created_by: str
    no_cache: bool = False
    """Its calls are never answered from, nor stored in, the response cache."""
    shared_cache: bool = False
    """It may be answered from another opted-in tenant's cached answers (and add to them)."""
    suspended_at: datetime | None = None
    """Set while the operator has suspended it (``TenancyService.suspend_tenant``)."""
    suspension_reason: str = ""
    tier: Tier = Tier.STANDARD
    """Set by the platform operator (``TenancyService.set_tier``)."""

    @property
    def suspended(self) -> bool:
        return self.suspended_at is not None


@dataclass(frozen=True)
class Member:
    tenant: str
    name: str
    kind: MemberKind
    roles: tuple[str, ...]
    created_at: datetime
    created_by: str

    @property
    def principal_id(self) -> str:
        return principal_id(self.tenant, self.name)


def principal_id(tenant: str, name: str) -> str:
    """The stable id of a tenant member, as it appears in ``created_by`` and the audit log."""
    return f"{tenant}/{name}"


@dataclass(frozen=True)
class ApiKey:
    """An API key's record; the secret itself is never stored, only its hash."""

    id: str
    tenant: str
    member: str
    name: str
    scopes: tuple[str, ...] | None
    created_at: datetime
    created_by: str
    expires_at: datetime | None
    revoked_at: datetime | None
    rotated_from: str | None

    @property
    def principal_id(self) -> str:
        return principal_id(self.tenant, self.member)


@dataclass(frozen=True)
class IssuedKey:
    """A key just created or rotated: the only time its secret is ever seen."""

    key: ApiKey
    secret: str


@dataclass(frozen=True)
class Grant:
    """``namespace`` (a tenant) shares its private models, or one ``model``, with ``grantee``."""

    id: int
    namespace: str
    model: str | None
    grantee: str
    created_at: datetime
    created_by: str


@dataclass(frozen=True)
class GrantSet:
    """What a tenant was granted by others: whole namespaces and single models."""

    namespaces: frozenset[str] = frozenset()
    models: frozenset[tuple[str, str]] = frozenset()

    def covers(self, namespace: str, model: str) -> bool:
        return namespace in self.namespaces or (namespace, model) in self.models


@dataclass(frozen=True)
class AuditEvent:
    id: int
    at: datetime
    actor: str
    actor_tenant: str | None
    key_id: str | None
    action: str
    method: str
    target: str
    tenant: str | None
    """The tenant the target belongs to (who may read this event besides the actor's)."""
    outcome: str
    status: int
    reason: str
    request_id: str


@dataclass(frozen=True)
class AuditQuery:
    """Filters of the audit log; every given one must match. ``cursor`` is opaque."""

    tenant: str | None = None
    """Events about or by this tenant."""
    actor: str | None = None
    action: str | None = None
    outcome: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 50
    cursor: str | None = None


@dataclass(frozen=True)
class AuditPage:
    items: tuple[AuditEvent, ...]
    next_cursor: str | None
