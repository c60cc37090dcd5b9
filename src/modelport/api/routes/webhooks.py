"""/api/webhooks: a tenant's webhook signing secret and its delivery log.

- ``GET /webhooks/secret``: the secret's metadata (never its value); 404
  ``webhook_secret_not_found`` before the first one (``tenant.read``).
- ``POST /webhooks/secret``: make the tenant's first secret (201) or rotate it (200);
  the only answers that carry a value. After a rotation the old secret still signs
  every delivery for ``webhook_secret_overlap_seconds`` (``tenant.manage``).
- ``GET /webhooks/deliveries?subject=&status=&cursor=``: the tenant's deliveries,
  newest first (``model.call``: whoever may submit the work that sends them).
- ``GET /webhooks/deliveries/{id}``: one, with its attempts.
- ``POST /webhooks/deliveries/{id}:redeliver``: the same message again (same
  ``webhook-id``), as a new delivery (202).

The admin names the tenant (``?tenant=``); a member acts on its own tenant. Another
tenant's delivery answers the 404 a missing one does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from modelport.api import deps
from modelport.api.access import enforce, note_tenant, require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.api.openapi.problem import problems
from modelport.errors import InvalidInput
from modelport.tenancy.policy import Permission, TenantScoped
from modelport.tenancy.types import Principal
from modelport.webhooks.repository import delivery_not_found
from modelport.webhooks.service import MAX_PAGE
from modelport.webhooks.types import (
    Attempt,
    Delivery,
    DeliveryDetail,
    DeliveryStatus,
    SecretInfo,
)

router = APIRouter(tags=["webhooks"])

TenantQuery = Annotated[
    str | None, Query(description="The tenant (the admin must name one); default: yours")
]


class WebhookSecret(BaseModel):
    """A tenant's signing secrets, without their values."""

    tenant: str
    created_at: str = Field(description="When the current secret was made (ISO 8601)")
    previous_valid_until: str | None = Field(
        description="Until when the secret it replaced still signs too (the overlap)"
    )
    signing_secrets: int = Field(description="How many secrets sign each delivery now")


class IssuedWebhookSecret(WebhookSecret):
    """A secret just made: the only answer that carries its value."""

    secret: str = Field(description="`whsec_<base64>`: verify deliveries with it")


class WebhookDelivery(BaseModel):
    """One message to one URL, tried until delivered or its retry window ends."""

    id: str
    tenant: str
    message_id: str = Field(description="The `webhook-id` header, the same on every retry")
    url: str
    event_type: str
    subject: str = Field(description="What the event is about (e.g. a job id)")
    status: DeliveryStatus
    attempts: int
    created_at: str
    next_attempt_at: str | None
    give_up_at: str
    finished_at: str | None
    last_status_code: int | None
    last_error: str | None
    redelivery_of: str | None


class WebhookAttempt(BaseModel):
    number: int
    attempted_at: str
    status_code: int | None = Field(description="None when no answer came")
    error: str | None
    duration_ms: int


class WebhookDeliveryDetail(WebhookDelivery):
    body: str = Field(description="The exact JSON body posted")
    attempts_log: list[WebhookAttempt]


class WebhookDeliveryPage(BaseModel):
    items: list[WebhookDelivery]
    next_cursor: str | None


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def secret_json(info: SecretInfo) -> dict[str, Any]:
    return {
        "tenant": info.tenant,
        "created_at": _time(info.created_at),
        "previous_valid_until": _time(info.previous_valid_until),
        "signing_secrets": info.signing_secrets,
    }


def delivery_json(delivery: Delivery) -> dict[str, Any]:
    return {
        "id": delivery.id,
        "tenant": delivery.tenant,
        "message_id": delivery.message_id,
        "url": delivery.url,
        "event_type": delivery.event_type,
        "subject": delivery.subject,
        "status": delivery.status.value,
        "attempts": delivery.attempts,
        "created_at": _time(delivery.created_at),
        "next_attempt_at": _time(delivery.next_attempt_at),
        "give_up_at": _time(delivery.give_up_at),
        "finished_at": _time(delivery.finished_at),
        "last_status_code": delivery.last_status_code,
        "last_error": delivery.last_error,
        "redelivery_of": delivery.redelivery_of,
    }


def attempt_json(attempt: Attempt) -> dict[str, Any]:
    return {
        "number": attempt.number,
        "attempted_at": _time(attempt.attempted_at),
        "status_code": attempt.status_code,
        "error": attempt.error,
        "duration_ms": attempt.duration_ms,
    }


def detail_json(detail: DeliveryDetail) -> dict[str, Any]:
    return {
        **delivery_json(detail.delivery),
        "body": detail.delivery.body,
        "attempts_log": [attempt_json(a) for a in detail.attempts],
    }


def _tenant(
    request: Request, principal: Principal, tenant: str | None, permission: Permission
) -> str:
    """The tenant the request acts on: the caller's, or the one the admin names."""
    chosen = tenant or principal.tenant
    if chosen is None:
        raise InvalidInput(
            "name the tenant: ?tenant=<slug>", code="tenant_required", field="query.tenant"
        )
    require_tenant(request, principal, chosen, permission)
    if chosen != principal.tenant:
        deps.tenancy_service(request).get_tenant(chosen)  # the admin's: 404 if none
    return chosen


async def _visible(
    request: Request, principal: Principal, delivery_id: str, permission: Permission
) -> DeliveryDetail:
    """A delivery of a tenant the caller may act for (the 404 of a missing one if not)."""
    webhooks = deps.webhooks_service(request)
    detail = await anyio.to_thread.run_sync(webhooks.delivery, delivery_id)
    tenant = detail.delivery.tenant
    note_tenant(request, tenant)
    enforce(
        principal, permission, TenantScoped(tenant), hidden=lambda: delivery_not_found(delivery_id)
    )
    return detail


@router.get("/webhooks/secret", response_model=WebhookSecret, responses=problems(400))
async def get_secret(
    webhooks: deps.Webhooks,
    request: Request,
    principal: CurrentPrincipal,
    tenant: TenantQuery = None,
) -> dict[str, Any]:
    """The tenant's signing secret's metadata; never its value."""
    slug = _tenant(request, principal, tenant, Permission.TENANT_READ)
    info = await anyio.to_thread.run_sync(webhooks.secret_info, slug)
    return secret_json(info)


@router.post(
    "/webhooks/secret",
    status_code=201,
    response_model=IssuedWebhookSecret,
    responses={
        200: {"model": IssuedWebhookSecret, "description": "The secret was rotated"},
        **problems(400),
    },
)
async def rotate_secret(
    webhooks: deps.Webhooks,
    request: Request,
    principal: CurrentPrincipal,
    tenant: TenantQuery = None,
) -> JSONResponse:
    """Make the tenant's signing secret, or rotate it: the answer is the only time the
    value (``whsec_...``) is shown."""
    slug = _tenant(request, principal, tenant, Permission.TENANT_MANAGE)
    issued = await anyio.to_thread.run_sync(webhooks.rotate_secret, slug)
    return JSONResponse(
        {**secret_json(issued.info), "secret": issued.secret},
        status_code=201 if issued.created else 200,
        headers={"cache-control": "no-store"},
    )


@router.get("/webhooks/deliveries", response_model=WebhookDeliveryPage, responses=problems(400))
async def list_deliveries(
    webhooks: deps.Webhooks,
    request: Request,
    principal: CurrentPrincipal,
    tenant: TenantQuery = None,
    subject: Annotated[str | None, Query(description="e.g. a job id", max_length=128)] = None,
    status: DeliveryStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    """The tenant's deliveries, newest first; pass ``next_cursor`` back as ``cursor``."""
    slug = _tenant(request, principal, tenant, Permission.MODEL_CALL)
    page = await anyio.to_thread.run_sync(
        lambda: webhooks.deliveries(
            slug, subject=subject, status=status, limit=limit, cursor=cursor
        )
    )
    return {"items": [delivery_json(d) for d in page.items], "next_cursor": page.next_cursor}


@router.get("/webhooks/deliveries/{delivery_id}", response_model=WebhookDeliveryDetail)
async def get_delivery(
    delivery_id: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """One delivery, its body and every attempt (status code, error, duration, time)."""
    return detail_json(await _visible(request, principal, delivery_id, Permission.MODEL_CALL))


@router.post(
    "/webhooks/deliveries/{delivery_id}:redeliver",
    status_code=202,
    response_model=WebhookDelivery,
    responses=problems(409),
)
async def redeliver(
    webhooks: deps.Webhooks, delivery_id: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Send a finished delivery's message again (same ``webhook-id`` and body) as a new
    delivery; 409 ``webhook_delivery_pending`` while it is still being tried."""
    await _visible(request, principal, delivery_id, Permission.MODEL_CALL)
    again = await anyio.to_thread.run_sync(webhooks.redeliver, delivery_id)
    return delivery_json(again)
