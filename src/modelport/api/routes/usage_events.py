"""``POST /api/usage/events``: usage reported by external backends.

The body is a batch: a JSON array of events (``application/cloudevents-batch+json``
works as is) or ``{"events": [...]}``; see ``modelport.metering.ingest`` for the
fields. Idempotent by ``event_id`` (CloudEvents ``id``): an event already in the
ledger is counted as a duplicate and changes nothing. A malformed event refuses the
whole batch (400 naming its index), so a reporter can retry the batch as is.

Who may report: principals holding ``usage.report`` (a tenant's owners, or a service
account key scoped to it). What each of them may report is the metering service's to
decide, on the parsed events (``modelport.metering.authorizations``): a publisher
reports usage of its own models, tied to a call the platform routed (``call_id``) or
to the consumer's usage authorization; the platform admin reports anything.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from modelport.api import deps
from modelport.api.access import forbidden
from modelport.api.auth import CurrentPrincipal
from modelport.errors import InvalidInput
from modelport.metering.types import Reporter, Unit
from modelport.tenancy.policy import Permission, permissions_of

router = APIRouter(tags=["usage"])

_EVENT = {
    "type": "object",
    "description": "a usage event, its fields at the top level or (CloudEvents) under 'data'",
    "required": ["model", "version", "tenant", "unit", "quantity"],
    "properties": {
        "event_id": {"type": "string", "description": "idempotency key (CloudEvents: 'id')"},
        "tenant": {"type": "string", "description": "the consumer tenant charged"},
        "model": {"type": "string", "description": "owner/name"},
        "version": {"type": "string"},
        "unit": {"type": "string", "enum": [unit.value for unit in Unit]},
        "quantity": {"type": "integer", "minimum": 0},
        "call_id": {
            "type": "string",
            "description": "the call the usage belongs to (the platform's reservation id)",
        },
        "data": {"type": "object"},
    },
}
_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"type": "array", "items": _EVENT, "maxItems": 1000},
                        {
                            "type": "object",
                            "required": ["events"],
                            "properties": {
                                "events": {"type": "array", "items": _EVENT, "maxItems": 1000}
                            },
                        },
                    ]
                }
            }
        },
    }
}


@router.post("/usage/events", openapi_extra=_BODY)
async def report_usage(
    metering: deps.Metering, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Record a batch of usage events; answers which were new and which duplicates."""
    if Permission.USAGE_REPORT not in permissions_of(principal):
        raise forbidden(Permission.USAGE_REPORT)
    try:
        doc = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"request body is not valid JSON: {exc}", code="invalid_json") from None
    reporter = Reporter(id=principal.id, tenant=principal.tenant, is_admin=principal.is_admin)
    result = await run_in_threadpool(metering.ingest, doc, reporter)
    return {
        "accepted": len(result.inserted) + len(result.duplicates),
        "inserted": list(result.inserted),
        "duplicates": list(result.duplicates),
    }
