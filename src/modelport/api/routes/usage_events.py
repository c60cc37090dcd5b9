"""``POST /api/usage/events``: usage reported by external backends.

The body is a batch: a JSON array of events (``application/cloudevents-batch+json``
works as is) or ``{"events": [...]}``; see ``modelport.metering.ingest`` for the
fields. Idempotent by ``event_id`` (CloudEvents ``id``): an event already in the
ledger is counted as a duplicate and changes nothing. A malformed event refuses the
whole batch (400 naming its index), so a reporter can retry the batch as is.

Who may report: the platform admin, and principals holding ``usage.report`` (a
tenant's owners, or a service account key scoped to it) for models of their own
tenant only: a publisher reports the usage of its own models.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from modelport.api.access import forbidden
from modelport.api.auth import CurrentPrincipal
from modelport.api.deps import get_services
from modelport.errors import Forbidden, InvalidInput
from modelport.tenancy.policy import Permission, permissions_of

router = APIRouter(tags=["usage"])


def _models(doc: Any) -> set[str]:
    """The ``model`` of every event of a batch (those that name one)."""
    items = doc.get("events") if isinstance(doc, dict) else doc
    found = set()
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            fields = item.get("data") if isinstance(item.get("data"), dict) else item
            if isinstance(fields.get("model"), str):
                found.add(fields["model"])
    return found


@router.post("/usage/events")
async def report_usage(request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
    """Record a batch of usage events; answers which were new and which duplicates."""
    if Permission.USAGE_REPORT not in permissions_of(principal):
        raise forbidden(Permission.USAGE_REPORT)
    try:
        doc = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"request body is not valid JSON: {exc}", code="invalid_json") from None
    if not principal.is_admin:
        foreign = sorted(m for m in _models(doc) if m.split("/", 1)[0] != principal.tenant)
        if foreign:
            raise Forbidden(
                f"usage of {foreign[0]} may only be reported by its publisher",
                code="forbidden",
                permission=Permission.USAGE_REPORT.value,
            )
    result = await run_in_threadpool(get_services(request).metering.ingest, doc)
    return {
        "accepted": len(result.inserted) + len(result.duplicates),
        "inserted": list(result.inserted),
        "duplicates": list(result.duplicates),
    }
