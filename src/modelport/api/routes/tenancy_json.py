"""JSON shapes of tenancy records on ``/api`` (plain dicts; the routes stay thin)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from modelport.tenancy.types import ApiKey, AuditEvent, Grant, IssuedKey, Member, Tenant


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def tenant_json(tenant: Tenant) -> dict[str, Any]:
    return {
        "slug": tenant.slug,
        "name": tenant.name,
        "require_separation": tenant.require_separation,
        "no_cache": tenant.no_cache,
        "shared_cache": tenant.shared_cache,
        "created_at": _time(tenant.created_at),
        "created_by": tenant.created_by,
        "suspended_at": _time(tenant.suspended_at),
        "suspension_reason": tenant.suspension_reason,
        "tier": tenant.tier.value,
    }


def member_json(member: Member) -> dict[str, Any]:
    return {
        "tenant": member.tenant,
        "name": member.name,
        "principal": member.principal_id,
        "kind": member.kind.value,
        "roles": list(member.roles),
        "created_at": _time(member.created_at),
        "created_by": member.created_by,
    }


def key_json(key: ApiKey) -> dict[str, Any]:
    """A key without its secret (which is never stored)."""
    return {
        "id": key.id,
        "tenant": key.tenant,
        "member": key.member,
        "principal": key.principal_id,
        "name": key.name,
        "scopes": None if key.scopes is None else list(key.scopes),
        "created_at": _time(key.created_at),
        "created_by": key.created_by,
        "expires_at": _time(key.expires_at),
        "revoked_at": _time(key.revoked_at),
        "rotated_from": key.rotated_from,
    }


def issued_json(issued: IssuedKey) -> dict[str, Any]:
    """A new key with its secret: shown this once."""
    return key_json(issued.key) | {"key": issued.secret}


def grant_json(grant: Grant) -> dict[str, Any]:
    return {
        "id": grant.id,
        "namespace": grant.namespace,
        "model": grant.model,
        "grantee": grant.grantee,
        "created_at": _time(grant.created_at),
        "created_by": grant.created_by,
    }


def audit_event_json(event: AuditEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "at": _time(event.at),
        "actor": event.actor,
        "actor_tenant": event.actor_tenant,
        "key_id": event.key_id,
        "action": event.action,
        "method": event.method,
        "target": event.target,
        "tenant": event.tenant,
        "outcome": event.outcome,
        "status": event.status,
        "reason": event.reason,
        "request_id": event.request_id,
    }
