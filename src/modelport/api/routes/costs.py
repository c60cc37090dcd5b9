"""``GET /api/costs``: what serving cost over a billing period, what it earned, and the
margin, per tenant and model (the operator's view: ``platform.manage``).
``GET /api/tenants/{tenant}/costs``: a tenant's own share of the period's compute
(``usage.read`` in it): its calls, their compute and that compute's share of all
calls', without the operator's prices, costs or margins.

Cost is the measured compute of each call (``metering.costs``): its GPU time
(``gpu_ms``, where it ran on a GPU) priced per GPU-second (``cost_per_gpu_second_micros``),
the rest per core-second (``cost_per_core_second_micros``); revenue is what the calls were charged; a tenant's
share is its part of the period's compute.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request

from modelport.api import deps
from modelport.api.access import require_platform, require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.errors import Unavailable
from modelport.metering.billing.periods import Period
from modelport.metering.costs import CostLine, CostReport
from modelport.metering.service import MeteringService
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["billing"])


def _line(line: CostLine) -> dict[str, Any]:
    return {
        "tenant": line.tenant,
        "model": line.model,
        "calls": line.calls,
        "compute_ms": round(line.compute_ms, 3),
        "gpu_ms": round(line.gpu_ms, 3),
        "cost_micros": round(line.cost_micros, 3),
        "cost_per_call_micros": round(line.cost_micros / line.calls, 3) if line.calls else 0,
        "revenue_micros": line.revenue_micros,
        "margin_micros": round(line.margin_micros, 3),
    }


def _report(metering: MeteringService) -> CostReport:
    report = metering.costs
    if report is None:
        raise Unavailable("cost reports are not wired in this process", code="costs_unavailable")
    return report


@router.get("/costs")
async def costs(
    metering: deps.Metering,
    clock: deps.Clock,
    request: Request,
    principal: CurrentPrincipal,
    period: str | None = None,
    tenant: str | None = None,
) -> dict[str, Any]:
    """Per tenant and model: calls, measured compute, its cost, revenue and margin; per
    tenant its share of the compute; per model its margin. ``period``: ``YYYY-MM``
    (default: the current month)."""
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    report = _report(metering)
    month = Period.parse(period) if period is not None else Period.of(clock.now())
    lines = await anyio.to_thread.run_sync(
        lambda: report.lines(month.start, month.end, tenant=tenant)
    )
    total_ms = sum(line.compute_ms for line in lines)
    tenants: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    models: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for line in lines:
        tenants[line.tenant][0] += line.compute_ms
        tenants[line.tenant][1] += line.cost_micros
        found = models[line.model]
        found[0] += line.calls
        found[1] += line.compute_ms
        found[2] += line.cost_micros
        found[3] += line.revenue_micros
    return {
        "period": str(month),
        "prices": {
            "core_second_micros": report.prices.core_second_micros,
            "gpu_second_micros": report.prices.gpu_second_micros,
        },
        "items": [_line(line) for line in lines],
        "tenants": [
            {
                "tenant": name,
                "compute_ms": round(ms, 3),
                "cost_micros": round(cost, 3),
                "share": round(ms / total_ms, 6) if total_ms else 0.0,
            }
            for name, (ms, cost) in sorted(tenants.items())
        ],
        "models": [
            {
                "model": name,
                "calls": int(calls),
                "compute_ms": round(ms, 3),
                "cost_micros": round(cost, 3),
                "revenue_micros": int(revenue),
                "margin_micros": round(revenue - cost, 3),
            }
            for name, (calls, ms, cost, revenue) in sorted(models.items())
        ],
    }


@router.get("/tenants/{tenant}/costs")
async def tenant_costs(
    metering: deps.Metering,
    clock: deps.Clock,
    tenant: str,
    request: Request,
    principal: CurrentPrincipal,
    period: str | None = None,
) -> dict[str, Any]:
    """The tenant's calls and compute over ``period`` (``YYYY-MM``, default: the current
    month) and its share of every tenant's compute then."""
    require_tenant(request, principal, tenant, Permission.USAGE_READ)
    await anyio.to_thread.run_sync(deps.tenancy_service(request).get_tenant, tenant)
    report = _report(metering)
    month = Period.parse(period) if period is not None else Period.of(clock.now())
    lines = await anyio.to_thread.run_sync(lambda: report.lines(month.start, month.end))
    total_ms = sum(line.compute_ms for line in lines)
    own = [line for line in lines if line.tenant == tenant]
    ms = sum(line.compute_ms for line in own)
    return {
        "tenant": tenant,
        "period": str(month),
        "calls": sum(line.calls for line in own),
        "compute_ms": round(ms, 3),
        "share": round(ms / total_ms, 6) if total_ms else 0.0,
        "models": [
            {"model": line.model, "calls": line.calls, "compute_ms": round(line.compute_ms, 3)}
            for line in sorted(own, key=lambda line: line.model)
        ],
    }
