"""Usage and invoices: what a tenant was charged for, and its monthly documents."""

from __future__ import annotations

from modelport.client.family import AsyncFamily, Family
from modelport.client.transport import Call
from modelport.client.types import Invoice, Json, Page, items_of, page_of


def usage_call(
    *,
    tenant: str | None = None,
    model: str | None = None,
    version: str | None = None,
    period: str | None = None,
    limit: int = 100,
    cursor: str | None = None,
) -> Call[Page[Json]]:
    params: dict[str, str | int | None] = {
        "tenant": tenant,
        "model": model,
        "version": version,
        "period": period,
    }
    params |= {"limit": limit, "cursor": cursor, "format": "json"}
    return Call("GET", "/api/usage", page_of(dict), params=params)


def invoices_call(
    *, tenant: str | None = None, period: str | None = None, status: str | None = None
) -> Call[list[Invoice]]:
    params = {"tenant": tenant, "period": period, "status": status}
    return Call("GET", "/api/invoices", items_of(Invoice.from_json), params=params)


def invoice_call(invoice_id: int) -> Call[Invoice]:
    return Call("GET", f"/api/invoices/{int(invoice_id)}", Invoice.from_json)


class Usage(Family):
    """``client.usage``: usage events in arrival order, a page at a time."""

    def list(
        self,
        *,
        tenant: str | None = None,
        model: str | None = None,
        version: str | None = None,
        period: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[Json]:
        call = usage_call(
            tenant=tenant, model=model, version=version, period=period, limit=limit, cursor=cursor
        )
        return self._t.run(call)


class Invoices(Family):
    """``client.invoices``."""

    def list(
        self, *, tenant: str | None = None, period: str | None = None, status: str | None = None
    ) -> list[Invoice]:
        """Invoices, newest period first (without their lines)."""
        return self._t.run(invoices_call(tenant=tenant, period=period, status=status))

    def get(self, invoice_id: int) -> Invoice:
        """An invoice with its lines and credit notes (in ``raw``)."""
        return self._t.run(invoice_call(invoice_id))


class AsyncUsage(AsyncFamily):
    async def list(
        self,
        *,
        tenant: str | None = None,
        model: str | None = None,
        version: str | None = None,
        period: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[Json]:
        call = usage_call(
            tenant=tenant, model=model, version=version, period=period, limit=limit, cursor=cursor
        )
        return await self._t.run(call)


class AsyncInvoices(AsyncFamily):
    async def list(
        self, *, tenant: str | None = None, period: str | None = None, status: str | None = None
    ) -> list[Invoice]:
        return await self._t.run(invoices_call(tenant=tenant, period=period, status=status))

    async def get(self, invoice_id: int) -> Invoice:
        return await self._t.run(invoice_call(invoice_id))
