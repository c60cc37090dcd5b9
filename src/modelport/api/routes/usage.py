"""``GET /api/usage``: the usage ledger, filtered by tenant, model and period, as JSON
pages or as one streamed CSV (``Accept: text/csv`` or ``?format=csv``).

A tenant's owners and ``billing`` members read their own tenant's calls; the
platform admin reads everyone's. A period holds the usage the ledger recorded in it,
which is what that period's invoices bill, so a period's CSV adds up to its invoice.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from starlette.responses import StreamingResponse

from modelport.api import deps
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.billing_access import readable_tenant
from modelport.api.routes.billing_json import USAGE_COLUMNS, usage_json
from modelport.errors import InvalidInput
from modelport.metering.billing.periods import Period
from modelport.metering.billing.service import BillingService
from modelport.metering.billing.types import UsageQuery

router = APIRouter(tags=["billing"])

MAX_PAGE = 1000
CSV_BATCH = 1000
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
"""Characters kept out of the download's file name: the admin may name any tenant, and
the name goes into a response header (latin-1 only, and no quotes or line breaks)."""
_FORMULA = ("=", "+", "-", "@", "\t", "\r")
_SEQ_MAX = 2**63 - 1


def _cursor(cursor: str | None) -> int:
    if cursor is None:
        return 0
    # ASCII digits only ("²" is a digit to str.isdigit), within the ledger's 64-bit seq.
    if not (cursor.isascii() and cursor.isdigit()) or int(cursor) > _SEQ_MAX:
        raise InvalidInput(
            "invalid cursor: pass back the next_cursor of a previous page",
            code="invalid_cursor",
            field="cursor",
        )
    return int(cursor)


def _wants_csv(request: Request, format: str | None) -> bool:
    if format is not None:
        return format == "csv"
    accept = request.headers.get("accept", "")
    return any(part.split(";")[0].strip() == "text/csv" for part in accept.split(","))


def _cell(value: Any) -> Any:
    """Text a spreadsheet would run as a formula is prefixed with a quote (caller-chosen
    ids, such as request ids, reach this file)."""
    if isinstance(value, str) and value.startswith(_FORMULA):
        return "'" + value
    return "" if value is None else value


def _csv(billing: BillingService, query: UsageQuery) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(USAGE_COLUMNS)
    for rows, entry in enumerate(billing.iter_usage(query, batch=CSV_BATCH), start=1):
        record = usage_json(entry)
        writer.writerow([_cell(record[column]) for column in USAGE_COLUMNS])
        if rows % CSV_BATCH == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


@router.get(
    "/usage",
    responses={
        200: {
            "description": "A page of usage events (JSON), or all of them (CSV)",
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "required": ["items", "next_cursor"],
                        "properties": {
                            "items": {"type": "array", "items": {"type": "object"}},
                            "next_cursor": {"type": ["string", "null"]},
                        },
                    }
                },
                "text/csv": {"schema": {"type": "string"}},
            },
        }
    },
)
def usage(
    billing: deps.Billing,
    request: Request,
    principal: CurrentPrincipal,
    tenant: Annotated[
        str | None, Query(description="The calling tenant; default one's own")
    ] = None,
    model: Annotated[str | None, Query(description="owner/name")] = None,
    version: str | None = None,
    period: Annotated[str | None, Query(description="YYYY-MM")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    cursor: str | None = None,
    format: Annotated[
        Literal["json", "csv"] | None, Query(description="Default: by Accept")
    ] = None,
) -> Any:
    """Usage events in arrival order. JSON: a page and its ``next_cursor``. CSV: every
    matching event, streamed (``cursor`` still sets where it starts)."""
    tenant = readable_tenant(request, principal, tenant)
    if period is not None:
        period = str(Period.parse(period))
    query = UsageQuery(
        tenant=tenant, model=model, version=version, period=period, after_seq=_cursor(cursor)
    )
    if _wants_csv(request, format):
        name = _UNSAFE.sub("_", "-".join(["usage", tenant or "all", period or "all"]))
        return StreamingResponse(
            _csv(billing, query),
            media_type="text/csv; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{name}.csv"'},
        )
    page = billing.usage(query, limit=limit + 1)
    more = len(page) > limit
    page = page[:limit]
    return {
        "items": [usage_json(entry) for entry in page],
        "next_cursor": str(page[-1].seq) if more else None,
    }
