"""/api/tenants/{tenant}/moderation-policy and /api/moderation/decisions: a tenant's
content policy (each change a new version) and the audit of its moderation decisions.

Only the tenant's owners (and the platform admin) read or change its policy and read
its decisions; anyone else gets the 404 of a tenant that does not exist.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.api.openapi.problem import problems
from modelport.errors import InvalidInput
from modelport.moderation.repository import MAX_LIMIT
from modelport.moderation.types import (
    DecisionQuery,
    DecisionRecord,
    Disposition,
    Policy,
    PolicyDraft,
    Rule,
    Severity,
    Stage,
    Strictness,
    Threshold,
)
from modelport.tenancy.policy import Permission, permissions_of
from modelport.tenancy.repository import tenant_not_found
from modelport.tenancy.types import Principal

router = APIRouter(tags=["moderation"])


class RuleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    category: str = Field(min_length=1, max_length=64)
    words: list[str] = Field(default_factory=list, description="whole words, any case")
    patterns: list[str] = Field(
        default_factory=list, description="regular expressions, matched case-insensitively"
    )
    severity: Literal["low", "medium", "high"] = "high"


class ThresholdBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    flag: float = Field(ge=0.0, le=1.0)
    block: float = Field(ge=0.0, le=1.0)


class PutPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    strictness: Strictness = Field(
        default=Strictness.MEDIUM, description="off, low, medium or high"
    )
    rules: list[RuleBody] = Field(default_factory=list)
    classifier: str | None = Field(
        default=None, description="a classifier model, owner/name or owner/name:version"
    )
    thresholds: dict[str, ThresholdBody] = Field(
        default_factory=dict, description="per category, instead of the strictness's"
    )
    sync: bool = Field(default=False, description="moderate synchronous /v1 and /v2 calls too")


def policy_json(policy: Policy) -> dict[str, Any]:
    return {
        "tenant": policy.tenant,
        "id": policy.id,
        "version": policy.version,
        "strictness": policy.strictness.value,
        "rules": [
            {
                "category": r.category,
                "words": list(r.words),
                "patterns": list(r.patterns),
                "severity": r.severity.name.lower(),
            }
            for r in policy.rules
        ],
        "classifier": policy.classifier,
        "thresholds": {k: {"flag": t.flag, "block": t.block} for k, t in policy.thresholds.items()},
        "sync": policy.sync,
        "created_at": None if policy.created_at is None else policy.created_at.isoformat(),
        "created_by": policy.created_by,
    }


def decision_json(record: DecisionRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "tenant": record.tenant,
        "stage": record.stage.value,
        "disposition": record.disposition.value,
        "reason": record.reason,
        "categories": list(record.categories),
        "scores": dict(record.scores),
        "policy_id": record.policy_id,
        "policy_version": record.policy_version,
        "model": record.model,
        "version": record.version,
        "request_id": record.request_id,
        "job_id": record.job_id,
        "created_at": record.created_at.isoformat(),
    }


def _owner_of(request: Request, principal: Principal, tenant: str) -> str:
    slug = deps.tenancy_service(request).get_tenant(tenant).slug
    require_tenant(request, principal, slug, Permission.TENANT_MANAGE)
    return slug


@router.get(
    "/tenants/{tenant}/moderation-policy",
    responses=problems(404),
)
def get_policy(
    moderation: deps.Moderation,
    tenant: str,
    request: Request,
    principal: CurrentPrincipal,
    version: Annotated[int | None, Query(ge=1, description="an earlier version")] = None,
) -> dict[str, Any]:
    """The tenant's policy in force (or one of its versions)."""
    slug = _owner_of(request, principal, tenant)
    return policy_json(moderation.get_policy(slug, version))


@router.put(
    "/tenants/{tenant}/moderation-policy",
    responses=problems(400, 409),
)
def put_policy(
    moderation: deps.Moderation,
    tenant: str,
    body: PutPolicy,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Replace the tenant's policy: stored as its next version, in force at once."""
    slug = _owner_of(request, principal, tenant)
    draft = PolicyDraft(
        strictness=body.strictness,
        rules=tuple(
            Rule(r.category, tuple(r.words), tuple(r.patterns), Severity[r.severity.upper()])
            for r in body.rules
        ),
        classifier=body.classifier,
        thresholds={k: Threshold(t.flag, t.block) for k, t in body.thresholds.items()},
        sync=body.sync,
    )
    policy = moderation.set_policy(slug, draft, principal.id)
    return policy_json(policy)


@router.get("/moderation/decisions", responses=problems(400))
def list_decisions(
    moderation: deps.Moderation,
    request: Request,
    principal: CurrentPrincipal,
    tenant: Annotated[
        str | None, Query(description="Whose decisions (the admin must name one)")
    ] = None,
    disposition: Disposition | None = None,
    stage: Stage | None = None,
    model: str | None = None,
    request_id: str | None = None,
    job_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The tenant's moderation decisions, newest first; pass ``next_cursor`` back as
    ``cursor`` for the next page."""
    if Permission.PLATFORM_MANAGE not in permissions_of(principal):
        if principal.tenant is None or tenant not in (None, principal.tenant):
            raise tenant_not_found(tenant or "")
        tenant = principal.tenant
    if tenant is None:
        raise InvalidInput("name the tenant", code="tenant_required", field="tenant")
    require_tenant(request, principal, tenant, Permission.AUDIT_READ)
    query = DecisionQuery(
        tenant=tenant,
        disposition=disposition,
        stage=stage,
        model=model,
        request_id=request_id,
        job_id=job_id,
        since=_utc(since),
        until=_utc(until),
        limit=limit,
        cursor=cursor,
    )
    page = moderation.decisions(query)
    return {"items": [decision_json(r) for r in page.items], "next_cursor": page.next_cursor}


def _utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)
