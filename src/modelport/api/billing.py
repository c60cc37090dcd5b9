"""Install billing on the ASGI app: usage, invoices, statements, a publisher's revenue,
balances and the admin's billing operations."""

from __future__ import annotations

from fastapi import FastAPI

from modelport.api.routes import balances, billing, invoices, revenue, statements, usage


def install_billing(app: FastAPI) -> None:
    for module in (usage, invoices, statements, revenue, balances, billing):
        app.include_router(module.router, prefix="/api")
