"""Billing's routes: usage, invoices, statements, a publisher's revenue, balances and the
admin's billing operations."""

from __future__ import annotations

from fastapi import APIRouter

from modelport.api.routes import balances, billing, invoices, revenue, statements, usage


def include_billing(router: APIRouter) -> None:
    """Billing's routes, under ``/api``."""
    for module in (usage, invoices, statements, revenue, balances, billing):
        router.include_router(module.router, prefix="/api")
