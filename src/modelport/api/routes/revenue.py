"""``GET /api/revenue``: a publisher's calls and revenue by day, model and version in
one period, from the usage ledger as it stands (a statement is made only when the
platform generates the month's billing; this answers at any time).

Read as statements are: the publishing tenant's owners and ``billing`` members read
their own tenant's; the platform admin reads any publisher's (or, naming none,
every publisher's); naming another tenant is 404 ``tenant_not_found``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from modelport.api import deps
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.billing_access import readable_tenant
from modelport.metering.billing.periods import Period

router = APIRouter(tags=["billing"])


@router.get("/revenue")
def revenue(
    billing: deps.Billing,
    clock: deps.Clock,
    request: Request,
    principal: CurrentPrincipal,
    publisher: Annotated[
        str | None, Query(description="The publishing tenant; default one's own")
    ] = None,
    period: Annotated[str | None, Query(description="YYYY-MM; default the current one")] = None,
    model: Annotated[str | None, Query(description="owner/name")] = None,
    version: str | None = None,
) -> dict[str, Any]:
    """Calls, revenue and the publisher's share per UTC day, model and version (oldest
    day first), and the period's totals; 400 ``invalid_period``. ``calls`` counts calls
    (a chat's input and output token lines are one call), ``events`` usage lines."""
    publisher = readable_tenant(request, principal, publisher)
    parsed = Period.parse(period) if period is not None else Period.of(clock.now())
    days = billing.revenue(publisher, str(parsed), model=model, version=version)
    return {
        "publisher": publisher,
        "period": str(parsed),
        "calls": sum(d.calls for d in days),
        "events": sum(d.events for d in days),
        "revenue_micros": sum(d.revenue_micros for d in days),
        "publisher_share_micros": sum(d.publisher_share_micros for d in days),
        "items": [
            {
                "day": d.day,
                "model": d.model,
                "version": d.version,
                "calls": d.calls,
                "events": d.events,
                "revenue_micros": d.revenue_micros,
                "publisher_share_micros": d.publisher_share_micros,
            }
            for d in days
        ],
    }
