"""The tenancy service: tenants, members and service accounts, API keys, grants, audit.

Authorization is decided by the caller with ``modelport.tenancy.policy``; this
service enforces the invariants of the data (names, known roles and scopes, at
least one owner, keys shown once) and keeps every process's key cache honest:
each change that affects a key publishes its id after the commit.

Every method opens its own transaction.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from modelport.changes import (
    ChangeBus,
    GrantChanged,
    LocalChangeBus,
    TenantCacheChanged,
    TenantSuspensionChanged,
    TenantTierChanged,
)
from modelport.errors import Conflict, Forbidden, InvalidInput
from modelport.logs import log_event
from modelport.store import Database
from modelport.store.base import utcnow
from modelport.tenancy import audit
from modelport.tenancy import repository as repo
from modelport.tenancy.enforce import check_separation_of_duties
from modelport.tenancy.invalidation import Invalidation
from modelport.tenancy.keys import format_key, hash_secret, new_key_id, new_secret
from modelport.tenancy.policy import (
    ROLE_PERMISSIONS,
    Permission,
    check_scopes,
    delegable_scopes,
    permissions_of,
    transition_permission,
)
from modelport.tenancy.types import (
    ApiKey,
    AuditPage,
    AuditQuery,
    Grant,
    GrantSet,
    IssuedKey,
    Member,
    MemberKind,
    Principal,
    Tenant,
    Tier,
)

log = logging.getLogger(__name__)

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
"""Tenant slugs; a subset of model owner names, since a slug is a model namespace."""
MEMBER_RE = re.compile(r"^[a-z0-9][a-z0-9._@+-]{0,63}$")
MODEL_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")
MAX_LABEL = 256
MAX_KEY_NAME = 128


class TenancyService:
    def __init__(
        self,
        database: Database,
        invalidation: Invalidation,
        *,
        clock: Callable[[], datetime] = utcnow,
        changes: ChangeBus | None = None,
    ) -> None:
        self.database = database
        self.invalidation = invalidation
        self.changes: ChangeBus = changes or LocalChangeBus()  # told of grants given or withdrawn
        self._clock = clock

    # ---- tenants

    def create_tenant(
        self,
        slug: str,
        *,
        actor: str,
        name: str = "",
        require_separation: bool = False,
        owner: str | None = None,
    ) -> Tenant:
        """Create a tenant (409 ``tenant_exists``), with a first owner member if named."""
        check_slug(slug)
        _check_label(name, "name")
        if owner is not None:
            check_member_name(owner)
        try:
            with self.database.transaction() as session:
                tenant = repo.insert_tenant(
                    session,
                    slug=slug,
                    name=name,
                    require_separation=require_separation,
                    actor=actor,
                )
                if owner is not None:
                    repo.upsert_member(
                        session,
                        slug,
                        name=owner,
                        kind=MemberKind.MEMBER,
                        roles=["owner"],
                        actor=actor,
                    )
                return tenant
        except IntegrityError:
            raise Conflict(
                f"tenant {slug} already exists", code="tenant_exists", tenant=slug
            ) from None

    def get_tenant(self, slug: str) -> Tenant:
        with self.database.transaction() as session:
            return repo.get_tenant(session, slug)

    def check_transition(
        self, principal: Principal, owner: str, ref: str, published_by: str, to: str
    ) -> None:
        """Separation of duties: where ``owner`` requires it, ``principal`` may not approve
        or reject (``to``) the version ``ref`` if it published it (``published_by``)."""
        if principal.tenant != owner or transition_permission(to) is not Permission.VERSION_APPROVE:
            return
        tenant = self.get_tenant(owner)
        check_separation_of_duties(principal, ref, published_by, tenant.require_separation, to)

    def list_tenants(self, only: str | None = None) -> list[Tenant]:
        with self.database.transaction() as session:
            return repo.list_tenants(session, only)

    def update_tenant(
        self,
        slug: str,
        *,
        name: str | None = None,
        require_separation: bool | None = None,
        no_cache: bool | None = None,
        shared_cache: bool | None = None,
    ) -> Tenant:
        """Change a tenant's settings (None: unchanged). A change of its cache flags is
        published (``TenantCacheChanged``): every process's response cache reads them
        afresh."""
        if name is not None:
            _check_label(name, "name")
        with self.database.transaction() as session:
            tenant = repo.update_tenant(
                session,
                slug,
                name=name,
                require_separation=require_separation,
                no_cache=no_cache,
                shared_cache=shared_cache,
            )
        if no_cache is not None or shared_cache is not None:
            self.changes.publish(TenantCacheChanged(slug))
        return tenant

    def suspend_tenant(self, slug: str, *, reason: str) -> Tenant:
        """Suspend a tenant: from the next request in every process, its keys and its
        people's tokens are refused (403 ``tenant_suspended``) and its queued jobs are not
        started. Its data, its published models and the jobs already running stay as they
        are; ``reactivate_tenant`` lifts it."""
        reason = reason.strip()
        if not reason:
            raise InvalidInput("a suspension needs a reason", code="reason_required")
        _check_label(reason, "reason")
        return self._set_suspension(slug, at=self._clock(), reason=reason)

    def set_tier(self, slug: str, tier: Tier) -> Tenant:
        """Move a tenant to ``tier`` (the operator's to decide); every process reads it
        afresh (``TenantTierChanged``)."""
        with self.database.transaction() as session:
            tenant = repo.set_tier(session, slug, tier)
        self.changes.publish(TenantTierChanged(slug))
        return tenant

    def reactivate_tenant(self, slug: str) -> Tenant:
        """Lift a tenant's suspension (nothing changes for one that is not suspended)."""
        return self._set_suspension(slug, at=None, reason="")

    def _set_suspension(self, slug: str, *, at: datetime | None, reason: str) -> Tenant:
        with self.database.transaction() as session:
            tenant = repo.set_suspension(session, slug, at=at, reason=reason)
            keys = repo.tenant_key_ids(session, slug)
        # Cached credentials carry the tenant's state: every process reads them afresh.
        self.invalidation.publish(keys)
        self.changes.publish(TenantSuspensionChanged(slug))
        return tenant

    # ---- members and service accounts

    def add_member(
        self,
        tenant: str,
        name: str,
        *,
        roles: list[str] | tuple[str, ...],
        actor: str,
        kind: str = MemberKind.MEMBER.value,
    ) -> Member:
        """Add a member or service account (409 ``member_exists`` if it is already there)."""
        check_member_name(name)
        clean = check_roles(roles)
        member_kind = _member_kind(kind)
        with self.database.transaction() as session:
            member, created = repo.upsert_member(
                session, tenant, name=name, kind=member_kind, roles=clean, actor=actor
            )
        if not created:
            raise Conflict(
                f"{tenant} already has a member {name}",
                code="member_exists",
                tenant=tenant,
                member=name,
            )
        return member

    def get_member(self, tenant: str, name: str) -> Member:
        with self.database.transaction() as session:
            return repo.get_member(session, tenant, name)

    def list_members(self, tenant: str) -> list[Member]:
        with self.database.transaction() as session:
            return repo.list_members(session, tenant)

    def set_roles(self, tenant: str, name: str, roles: list[str] | tuple[str, ...]) -> Member:
        """Replace a member's roles; its keys carry the new roles from the next request."""
        clean = check_roles(roles)
        with self.database.transaction() as session:
            before = repo.get_member(session, tenant, name)
            member = repo.set_roles(session, tenant, name, clean)
            if "owner" in before.roles and "owner" not in member.roles:
                _keep_an_owner(session, tenant)
            keys = repo.live_key_ids(session, tenant, name)
        self.invalidation.publish(keys)
        return member

    def remove_member(self, tenant: str, name: str) -> Member:
        """Remove a member and revoke its keys (409 ``last_owner`` for the last owner)."""
        with self.database.transaction() as session:
            member, revoked = repo.remove_member(session, tenant, name)
            if "owner" in member.roles:
                _keep_an_owner(session, tenant)
        self.invalidation.publish(revoked)
        return member

    # ---- API keys

    def create_key(
        self,
        tenant: str,
        member: str,
        *,
        name: str,
        actor: str,
        scopes: list[str] | tuple[str, ...] | None = None,
        expires_at: datetime | None = None,
        issuer: Principal | None = None,
    ) -> IssuedKey:
        """A new key for a member or service account; its secret is in the result only.

        ``issuer`` is the principal making the key (None: the operator, from the
        command line): the key's scopes never exceed what the issuer holds (403
        ``scope_not_held``), and a key asked for without scopes inherits the issuer's.
        """
        _check_key_name(name)
        clean = _check_scopes(scopes)
        if issuer is not None:
            clean = _delegable(issuer, clean)
        self._check_expiry(expires_at)
        key_id, secret = new_key_id(), new_secret()
        with self.database.transaction() as session:
            key = repo.insert_key(
                session,
                key_id=key_id,
                tenant=tenant,
                member=member,
                name=name,
                secret_hash=hash_secret(key_id, secret),
                scopes=clean,
                expires_at=expires_at,
                actor=actor,
            )
        log_event(
            log,
            "key.created",
            key_id=key_id,
            tenant=tenant,
            member=member,
            key_name=name,
            scopes=",".join(clean or ()),
            actor=actor,
        )
        return IssuedKey(key, format_key(key_id, secret))

    def get_key(self, key_id: str) -> ApiKey:
        with self.database.transaction() as session:
            return repo.get_key(session, key_id)

    def list_keys(self, *, tenant: str | None = None, member: str | None = None) -> list[ApiKey]:
        with self.database.transaction() as session:
            if tenant is not None:
                repo.get_tenant(session, tenant)
            return repo.list_keys(session, tenant=tenant, member=member)

    def revoke_key(self, key_id: str) -> ApiKey:
        """Revoke a key: it stops working at once, in every process (idempotent)."""
        with self.database.transaction() as session:
            key = repo.revoke_key(session, key_id)
        self.invalidation.publish([key_id])
        log_event(log, "key.revoked", key_id=key_id, tenant=key.tenant, member=key.member)
        return key

    def rotate_key(self, key_id: str, *, actor: str, issuer: Principal | None = None) -> IssuedKey:
        """Replace a key with a new one (same member, name, scopes and expiry); the old
        one is revoked in the same transaction (409 ``key_revoked`` if it already was).

        ``issuer`` receives the new key's secret, so, as for ``create_key``, it must hold
        everything the key can do (403 ``scope_not_held``): its scopes, or, for an
        unscoped key, what its holder's roles allow."""
        new_id, secret = new_key_id(), new_secret()
        with self.database.transaction() as session:
            old = repo.get_key(session, key_id, lock=True)
            if old.revoked_at is not None:
                raise Conflict(
                    f"API key {key_id} is revoked; create a new key instead",
                    code="key_revoked",
                    key=key_id,
                )
            if issuer is not None:
                can_do = old.scopes
                if can_do is None:
                    holder = repo.get_member(session, old.tenant, old.member)
                    held = permissions_of(
                        Principal(id=holder.principal_id, roles=frozenset(holder.roles))
                    )
                    can_do = tuple(sorted(p.value for p in held))
                _delegable(issuer, can_do)
            repo.revoke_key(session, key_id)
            key = repo.insert_key(
                session,
                key_id=new_id,
                tenant=old.tenant,
                member=old.member,
                name=old.name,
                secret_hash=hash_secret(new_id, secret),
                scopes=old.scopes,
                expires_at=old.expires_at,
                actor=actor,
                rotated_from=key_id,
            )
        self.invalidation.publish([key_id])
        log_event(
            log,
            "key.rotated",
            key_id=key_id,
            new_key_id=new_id,
            tenant=key.tenant,
            member=key.member,
            actor=actor,
        )
        return IssuedKey(key, format_key(new_id, secret))

    def _check_expiry(self, expires_at: datetime | None) -> None:
        if expires_at is None:
            return
        if expires_at.tzinfo is None:
            raise InvalidInput(
                "expires_at needs a time zone (e.g. 2030-01-01T00:00:00Z)",
                code="invalid_expiry",
                field="expires_at",
            )
        if expires_at <= self._clock():
            raise InvalidInput(
                "expires_at is in the past", code="invalid_expiry", field="expires_at"
            )

    # ---- grants

    def create_grant(
        self, namespace: str, grantee: str, *, actor: str, model: str | None = None
    ) -> tuple[Grant, bool]:
        """Share a private model (or the whole namespace) with another tenant; idempotent:
        (grant, created)."""
        if model is not None and not MODEL_NAME_RE.match(model):
            raise InvalidInput(f"invalid model name {model!r}", code="invalid_model_name")
        if namespace == grantee:
            raise InvalidInput(
                "a tenant cannot grant access to itself", code="invalid_grant", field="grantee"
            )
        try:
            with self.database.transaction() as session:
                existing = repo.find_grant(session, namespace, model, grantee)
                if existing is not None:
                    return existing, False
                grant = repo.insert_grant(
                    session, namespace=namespace, model=model, grantee=grantee, actor=actor
                )
        except IntegrityError:  # an identical grant was created concurrently
            with self.database.transaction() as session:
                found = repo.find_grant(session, namespace, model, grantee)
            if found is None:
                raise
            return found, False
        self.changes.publish(GrantChanged(namespace, grantee, model, given=True))
        return grant, True

    def get_grant(self, grant_id: int) -> Grant:
        with self.database.transaction() as session:
            return repo.get_grant(session, grant_id)

    def list_grants(self, *, involving: str | None = None) -> list[Grant]:
        with self.database.transaction() as session:
            return repo.list_grants(session, involving=involving)

    def delete_grant(self, grant_id: int) -> None:
        with self.database.transaction() as session:
            grant = repo.get_grant(session, grant_id)
            repo.delete_grant(session, grant_id)
        self.changes.publish(GrantChanged(grant.namespace, grant.grantee, grant.model, given=False))

    def grants_to(self, tenant: str) -> GrantSet:
        """Everything other tenants shared with ``tenant``."""
        with self.database.transaction() as session:
            return repo.grants_to(session, tenant)

    def models_holding_blob(self, digest: str) -> list[tuple[str, str, str]]:
        """(owner, name, visibility) of the models whose versions list this blob and
        whose owner holds it (``repository.models_holding_blob``)."""
        with self.database.transaction() as session:
            return repo.models_holding_blob(session, digest)

    # ---- audit

    def record(self, event: audit.NewAuditEvent) -> None:
        with self.database.transaction() as session:
            audit.append(session, event)

    def audit_log(self, query: AuditQuery) -> AuditPage:
        with self.database.transaction() as session:
            return audit.search(session, query)


def check_slug(slug: str) -> str:
    if not isinstance(slug, str) or not SLUG_RE.match(slug):
        raise InvalidInput(
            f"invalid tenant slug {slug!r}: 1-64 lowercase letters, digits or '-', "
            "starting with a letter or digit",
            code="invalid_slug",
            field="slug",
        )
    return slug


def check_member_name(name: str) -> str:
    if not isinstance(name, str) or not MEMBER_RE.match(name):
        raise InvalidInput(
            f"invalid member name {name!r}: 1-64 lowercase letters, digits, or '.', '_', "
            "'@', '+', '-', starting with a letter or digit",
            code="invalid_member_name",
            field="name",
        )
    return name


def check_roles(roles: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if not roles:
        raise InvalidInput("a member needs at least one role", code="invalid_role", field="roles")
    for role in roles:
        if role not in ROLE_PERMISSIONS:
            raise InvalidInput(
                f"unknown role {role!r} (known: {', '.join(sorted(ROLE_PERMISSIONS))})",
                code="invalid_role",
                field="roles",
            )
    return tuple(sorted(set(roles)))


def _check_scopes(scopes: list[str] | tuple[str, ...] | None) -> tuple[str, ...] | None:
    if scopes is None:
        return None
    try:
        return check_scopes(scopes)
    except ValueError as exc:
        raise InvalidInput(
            f"unknown scope {exc.args[0]!r}: scopes are permission names",
            code="invalid_scope",
            field="scopes",
        ) from None


def _delegable(issuer: Principal, scopes: tuple[str, ...] | None) -> tuple[str, ...] | None:
    try:
        return delegable_scopes(issuer, scopes)
    except ValueError as exc:
        raise Forbidden(
            f"a key cannot get {exc.args[0]!r}: the key making it does not hold it",
            code="scope_not_held",
            scope=exc.args[0],
        ) from None


def _check_label(value: str, field: str) -> None:
    if len(value) > MAX_LABEL:
        raise InvalidInput(
            f"{field} is longer than {MAX_LABEL} characters", code="invalid_name", field=field
        )


def _check_key_name(name: str) -> None:
    if not 1 <= len(name) <= MAX_KEY_NAME or not name.isprintable():
        raise InvalidInput(
            f"a key name is 1-{MAX_KEY_NAME} printable characters",
            code="invalid_key_name",
            field="name",
        )


def _member_kind(kind: str) -> MemberKind:
    try:
        return MemberKind(kind)
    except ValueError:
        raise InvalidInput(
            "kind must be 'member' or 'service_account'", code="invalid_member_kind", field="kind"
        ) from None


def _keep_an_owner(session: Session, tenant: str) -> None:
    if not repo.owners_of(session, tenant):
        raise Conflict(
            f"{tenant} would have no owner left; make another member owner first",
            code="last_owner",
            tenant=tenant,
        )
