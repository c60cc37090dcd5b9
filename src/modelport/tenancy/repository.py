"""Tenancy queries. Each function takes a ``Session`` and returns frozen records.

Rows never leave this module.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.selectable import NamedFromClause

from modelport.errors import NotFound
from modelport.store.base import is_row_id, utcnow
from modelport.store.blob_lenders import blob_lenders
from modelport.store.tables import (
    ApiKeyRow,
    GrantRow,
    MemberRow,
    TenantRow,
)
from modelport.tenancy.types import ApiKey, Grant, GrantSet, Member, MemberKind, Tenant, Tier

# ---- tenants -----------------------------------------------------------------


def tenant_not_found(slug: str) -> NotFound:
    return NotFound(f"tenant {slug} not found", code="tenant_not_found", tenant=slug)


def _tenant(row: TenantRow) -> Tenant:
    return Tenant(
        slug=row.slug,
        name=row.name,
        require_separation=row.require_separation,
        created_at=row.created_at,
        created_by=row.created_by,
        no_cache=row.no_cache,
        shared_cache=row.shared_cache,
        suspended_at=row.suspended_at,
        suspension_reason=row.suspension_reason,
        tier=Tier(row.tier),
    )


def _tenant_row(session: Session, slug: str, *, lock: bool = False) -> TenantRow:
    stmt = select(TenantRow).where(TenantRow.slug == slug)
    if lock:
        stmt = stmt.with_for_update()
    row = session.scalar(stmt)
    if row is None:
        raise tenant_not_found(slug)
    return row


def insert_tenant(
    session: Session, *, slug: str, name: str, require_separation: bool, actor: str
) -> Tenant:
    row = TenantRow(slug=slug, name=name, require_separation=require_separation, created_by=actor)
    session.add(row)
    session.flush()
    return _tenant(row)


def get_tenant(session: Session, slug: str) -> Tenant:
    return _tenant(_tenant_row(session, slug))


def list_tenants(session: Session, only: str | None = None) -> list[Tenant]:
    stmt = select(TenantRow).order_by(TenantRow.slug)
    if only is not None:
        stmt = stmt.where(TenantRow.slug == only)
    return [_tenant(r) for r in session.scalars(stmt)]


def update_tenant(
    session: Session,
    slug: str,
    *,
    name: str | None,
    require_separation: bool | None,
    no_cache: bool | None = None,
    shared_cache: bool | None = None,
) -> Tenant:
    row = _tenant_row(session, slug, lock=True)
    if name is not None:
        row.name = name
    if require_separation is not None:
        row.require_separation = require_separation
    if no_cache is not None:
        row.no_cache = no_cache
    if shared_cache is not None:
        row.shared_cache = shared_cache
    session.flush()
    return _tenant(row)


def set_tier(session: Session, slug: str, tier: Tier) -> Tenant:
    row = _tenant_row(session, slug, lock=True)
    row.tier = tier.value
    session.flush()
    return _tenant(row)


def set_suspension(session: Session, slug: str, *, at: datetime | None, reason: str) -> Tenant:
    """Suspend the tenant (``at``), or lift its suspension (None)."""
    row = _tenant_row(session, slug, lock=True)
    # Suspending again changes the reason, not when it began.
    row.suspended_at = None if at is None else (row.suspended_at or at)
    row.suspension_reason = reason if at is not None else ""
    session.flush()
    return _tenant(row)


def tenant_key_ids(session: Session, slug: str) -> list[str]:
    """Every unrevoked key of the tenant's members (whatever the members' state)."""
    return list(
        session.scalars(
            select(ApiKeyRow.id)
            .join(MemberRow, MemberRow.id == ApiKeyRow.member_id)
            .join(TenantRow, TenantRow.id == MemberRow.tenant_id)
            .where(TenantRow.slug == slug, ApiKeyRow.revoked_at.is_(None))
        )
    )


# ---- members -----------------------------------------------------------------


def member_not_found(tenant: str, name: str) -> NotFound:
    return NotFound(
        f"tenant {tenant} has no member {name}",
        code="member_not_found",
        tenant=tenant,
        member=name,
    )


def _member(row: MemberRow, tenant: str) -> Member:
    return Member(
        tenant=tenant,
        name=row.name,
        kind=MemberKind(row.kind),
        roles=tuple(sorted(row.roles)),
        created_at=row.created_at,
        created_by=row.created_by,
    )


def _member_row(
    session: Session, tenant_id: int, tenant: str, name: str, *, active: bool = True
) -> MemberRow:
    row = session.scalar(
        select(MemberRow).where(MemberRow.tenant_id == tenant_id, MemberRow.name == name)
    )
    if row is None or (active and row.removed_at is not None):
        raise member_not_found(tenant, name)
    return row


def upsert_member(
    session: Session, tenant: str, *, name: str, kind: MemberKind, roles: Iterable[str], actor: str
) -> tuple[Member, bool]:
    """Add a member, or bring a removed one back; (member, False) if already active."""
    tenant_row = _tenant_row(session, tenant, lock=True)
    row = session.scalar(
        select(MemberRow).where(MemberRow.tenant_id == tenant_row.id, MemberRow.name == name)
    )
    if row is not None and row.removed_at is None:
        return _member(row, tenant), False
    if row is None:
        row = MemberRow(tenant_id=tenant_row.id, name=name, removed_at=None)
        session.add(row)
    row.kind = kind.value
    row.roles = sorted(set(roles))
    row.created_at = utcnow()
    row.created_by = actor
    row.removed_at = None
    session.flush()
    return _member(row, tenant), True


def get_member(session: Session, tenant: str, name: str) -> Member:
    tenant_row = _tenant_row(session, tenant)
    return _member(_member_row(session, tenant_row.id, tenant, name), tenant)


def list_members(session: Session, tenant: str) -> list[Member]:
    tenant_row = _tenant_row(session, tenant)
    rows = session.scalars(
        select(MemberRow)
        .where(MemberRow.tenant_id == tenant_row.id, MemberRow.removed_at.is_(None))
        .order_by(MemberRow.name)
    )
    return [_member(r, tenant) for r in rows]


def set_roles(session: Session, tenant: str, name: str, roles: Iterable[str]) -> Member:
    tenant_row = _tenant_row(session, tenant, lock=True)
    row = _member_row(session, tenant_row.id, tenant, name)
    row.roles = sorted(set(roles))
    session.flush()
    return _member(row, tenant)


def remove_member(session: Session, tenant: str, name: str) -> tuple[Member, list[str]]:
    """Mark the member removed and revoke its live keys; returns the revoked key ids."""
    tenant_row = _tenant_row(session, tenant, lock=True)
    row = _member_row(session, tenant_row.id, tenant, name)
    now = utcnow()
    row.removed_at = now
    revoked = list(
        session.scalars(
            select(ApiKeyRow.id).where(
                ApiKeyRow.member_id == row.id, ApiKeyRow.revoked_at.is_(None)
            )
        )
    )
    session.execute(
        update(ApiKeyRow)
        .where(ApiKeyRow.member_id == row.id, ApiKeyRow.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    session.flush()
    return _member(row, tenant), revoked


def owners_of(session: Session, tenant: str) -> list[str]:
    """Names of the tenant's active members with the owner role (rows locked by the caller)."""
    return [m.name for m in list_members(session, tenant) if "owner" in m.roles]


def live_key_ids(session: Session, tenant: str, name: str) -> list[str]:
    tenant_row = _tenant_row(session, tenant)
    row = _member_row(session, tenant_row.id, tenant, name)
    return list(
        session.scalars(
            select(ApiKeyRow.id).where(
                ApiKeyRow.member_id == row.id, ApiKeyRow.revoked_at.is_(None)
            )
        )
    )


# ---- API keys ----------------------------------------------------------------


def key_not_found(key_id: str) -> NotFound:
    return NotFound(f"API key {key_id} not found", code="key_not_found", key=key_id)


@dataclass(frozen=True)
class KeyCredential:
    """What authenticating with a key needs: its hash, state, and who it speaks for."""

    key_id: str
    secret_hash: str
    tenant: str
    member: str
    kind: str
    roles: frozenset[str]
    scopes: frozenset[str] | None
    expires_at: datetime | None
    revoked: bool
    """The key was revoked, or its member removed."""
    tenant_suspended: bool = False
    """The operator has suspended the key's tenant."""


_KEY_COLUMNS = (ApiKeyRow, MemberRow.name, TenantRow.slug)


def _key(row: ApiKeyRow, member: str, tenant: str) -> ApiKey:
    return ApiKey(
        id=row.id,
        tenant=tenant,
        member=member,
        name=row.name,
        scopes=None if row.scopes is None else tuple(row.scopes),
        created_at=row.created_at,
        created_by=row.created_by,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
        rotated_from=row.rotated_from,
    )


def _keys_query() -> Select[ApiKeyRow, str, str]:
    return (
        select(*_KEY_COLUMNS)
        .join(MemberRow, MemberRow.id == ApiKeyRow.member_id)
        .join(TenantRow, TenantRow.id == MemberRow.tenant_id)
    )


def insert_key(
    session: Session,
    *,
    key_id: str,
    tenant: str,
    member: str,
    name: str,
    secret_hash: str,
    scopes: tuple[str, ...] | None,
    expires_at: datetime | None,
    actor: str,
    rotated_from: str | None = None,
) -> ApiKey:
    tenant_row = _tenant_row(session, tenant)
    member_row = _member_row(session, tenant_row.id, tenant, member)
    row = ApiKeyRow(
        id=key_id,
        member_id=member_row.id,
        name=name,
        secret_hash=secret_hash,
        scopes=None if scopes is None else list(scopes),
        created_by=actor,
        expires_at=expires_at,
        revoked_at=None,
        rotated_from=rotated_from,
    )
    session.add(row)
    session.flush()
    return _key(row, member, tenant)


def get_key(session: Session, key_id: str, *, lock: bool = False) -> ApiKey:
    stmt = _keys_query().where(ApiKeyRow.id == key_id)
    if lock:
        stmt = stmt.with_for_update(of=ApiKeyRow)
    found = session.execute(stmt).first()
    if found is None:
        raise key_not_found(key_id)
    return _key(*found)


def list_keys(session: Session, *, tenant: str | None, member: str | None) -> list[ApiKey]:
    stmt = _keys_query().order_by(ApiKeyRow.created_at, ApiKeyRow.id)
    if tenant is not None:
        stmt = stmt.where(TenantRow.slug == tenant)
    if member is not None:
        stmt = stmt.where(MemberRow.name == member)
    return [_key(*found) for found in session.execute(stmt)]


def revoke_key(session: Session, key_id: str) -> ApiKey:
    """Set ``revoked_at`` now (kept as it was if already revoked)."""
    session.execute(
        update(ApiKeyRow)
        .where(ApiKeyRow.id == key_id, ApiKeyRow.revoked_at.is_(None))
        .values(revoked_at=utcnow())
    )
    return get_key(session, key_id)


def credential(session: Session, key_id: str) -> KeyCredential | None:
    found = session.execute(
        select(ApiKeyRow, MemberRow, TenantRow.slug, TenantRow.suspended_at)
        .join(MemberRow, MemberRow.id == ApiKeyRow.member_id)
        .join(TenantRow, TenantRow.id == MemberRow.tenant_id)
        .where(ApiKeyRow.id == key_id)
    ).first()
    if found is None:
        return None
    key, member, tenant, suspended_at = found
    return KeyCredential(
        key_id=key.id,
        secret_hash=key.secret_hash,
        tenant=tenant,
        member=member.name,
        kind=member.kind,
        roles=frozenset(member.roles),
        scopes=None if key.scopes is None else frozenset(key.scopes),
        expires_at=key.expires_at,
        revoked=key.revoked_at is not None or member.removed_at is not None,
        tenant_suspended=suspended_at is not None,
    )


# ---- grants ------------------------------------------------------------------


def grant_not_found(grant_id: int) -> NotFound:
    return NotFound(f"grant {grant_id} not found", code="grant_not_found", grant=grant_id)


def _grants_query() -> tuple[Select[GrantRow, str, str], NamedFromClause, NamedFromClause]:
    grantor = TenantRow.__table__.alias("grantor")
    grantee = TenantRow.__table__.alias("grantee")
    return (
        (
            select(GrantRow, grantor.c.slug, grantee.c.slug)
            .join(grantor, grantor.c.id == GrantRow.tenant_id)
            .join(grantee, grantee.c.id == GrantRow.grantee_id)
        ),
        grantor,
        grantee,
    )


def _grant(row: GrantRow, namespace: str, grantee: str) -> Grant:
    return Grant(
        id=row.id,
        namespace=namespace,
        model=row.model or None,
        grantee=grantee,
        created_at=row.created_at,
        created_by=row.created_by,
    )


def find_grant(session: Session, namespace: str, model: str | None, grantee: str) -> Grant | None:
    stmt, grantor_t, grantee_t = _grants_query()
    found = session.execute(
        stmt.where(
            grantor_t.c.slug == namespace,
            grantee_t.c.slug == grantee,
            GrantRow.model == (model or ""),
        )
    ).first()
    return None if found is None else _grant(*found)


def insert_grant(
    session: Session, *, namespace: str, model: str | None, grantee: str, actor: str
) -> Grant:
    grantor_row = _tenant_row(session, namespace)
    grantee_row = _tenant_row(session, grantee)
    row = GrantRow(
        tenant_id=grantor_row.id, model=model or "", grantee_id=grantee_row.id, created_by=actor
    )
    session.add(row)
    session.flush()
    return _grant(row, namespace, grantee)


def get_grant(session: Session, grant_id: int) -> Grant:
    if not is_row_id(grant_id):
        raise grant_not_found(grant_id)
    stmt, _, _ = _grants_query()
    found = session.execute(stmt.where(GrantRow.id == grant_id)).first()
    if found is None:
        raise grant_not_found(grant_id)
    return _grant(*found)


def list_grants(session: Session, *, involving: str | None) -> list[Grant]:
    """Every grant, or those given by or to the tenant ``involving``."""
    stmt, grantor_t, grantee_t = _grants_query()
    stmt = stmt.order_by(GrantRow.id)
    if involving is not None:
        stmt = stmt.where((grantor_t.c.slug == involving) | (grantee_t.c.slug == involving))
    return [_grant(*found) for found in session.execute(stmt)]


def delete_grant(session: Session, grant_id: int) -> None:
    row = session.get(GrantRow, grant_id) if is_row_id(grant_id) else None
    if row is None:
        raise grant_not_found(grant_id)
    session.delete(row)
    session.flush()


def grants_to(session: Session, tenant: str) -> GrantSet:
    stmt, _, grantee_t = _grants_query()
    namespaces: set[str] = set()
    models: set[tuple[str, str]] = set()
    for grant in (_grant(*f) for f in session.execute(stmt.where(grantee_t.c.slug == tenant))):
        if grant.model is None:
            namespaces.add(grant.namespace)
        else:
            models.add((grant.namespace, grant.model))
    return GrantSet(frozenset(namespaces), frozenset(models))


# ---- facts about registry things that authorization needs ----------------------


def models_holding_blob(session: Session, digest: str) -> list[tuple[str, str, str]]:
    """(owner, name, visibility) of every model with a version that lists ``digest`` and
    whose owner holds the blob itself (``store.blob_lenders``). A version
    that only borrowed the blob, through read access to another tenant's version, is no
    way to the bytes: the lender's version is, for as long as the reader may see it."""
    return blob_lenders(session, [digest]).get(digest, [])
