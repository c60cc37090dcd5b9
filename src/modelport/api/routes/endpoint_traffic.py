"""``GET /api/endpoints/{name}/traffic``: error rate and latency per version of an
endpoint over a time window of its prediction log (default: the last 24 hours).

Read-only; needs ``model.read`` in the endpoint's tenant (another tenant gets the 404
of an endpoint that does not exist). ``since`` after ``until``, or a window longer
than ``MAX_WINDOW``: 400 ``invalid_window``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request

from modelport.api import deps
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.endpoints import readable_endpoint
from modelport.errors import InvalidInput
from modelport.observability.version_traffic import VersionTraffic

router = APIRouter(tags=["endpoints"])

DEFAULT_WINDOW = timedelta(hours=24)
MAX_WINDOW = timedelta(days=31)


def _utc(moment: datetime) -> datetime:
    """A query time in UTC (one without a zone is UTC); OverflowError past the calendar."""
    return moment.astimezone(UTC) if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def traffic_json(row: VersionTraffic) -> dict[str, Any]:
    return {
        "model": row.model,
        "version": row.version,
        "shadow": row.shadow,
        "predictions": row.predictions,
        "errors": row.errors,
        "error_rate": row.error_rate,
        "fallbacks": row.fallbacks,
        "latency_ms": {"p50": row.p50_ms, "p95": row.p95_ms, "p99": row.p99_ms},
        "error_codes": row.error_codes,
    }


@router.get("/endpoints/{name}/traffic")
async def endpoint_traffic(
    traffic: deps.VersionTraffic,
    name: str,
    request: Request,
    principal: CurrentPrincipal,
    since: datetime | None = None,
    until: datetime | None = None,
) -> dict[str, Any]:
    """Predictions, errors (by code), fallbacks and latency percentiles per version."""
    endpoint = await anyio.to_thread.run_sync(readable_endpoint, request, principal, name)
    # Wall time, not the services' clock: the log stamps predictions with wall time.
    window_error = InvalidInput(
        f"'since' must be before 'until', at most {MAX_WINDOW.days} days apart",
        code="invalid_window",
        field="since",
    )
    try:
        end = _utc(until) if until is not None else datetime.now(UTC)
        start = _utc(since) if since is not None else end - DEFAULT_WINDOW
    except OverflowError:  # in UTC, or a day before 'until', falls outside years 1-9999
        raise window_error from None
    if start >= end or end - start > MAX_WINDOW:
        raise window_error
    report = await anyio.to_thread.run_sync(
        lambda: traffic.report(name, owner=endpoint.tenant, since=start, until=end)
    )
    return {
        "endpoint": name,
        "since": start.isoformat(),
        "until": end.isoformat(),
        "truncated": report.truncated,
        "versions": [traffic_json(v) for v in report.versions],
    }
