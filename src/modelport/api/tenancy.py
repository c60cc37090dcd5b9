"""Tenancy's routes on the ASGI app (request ids and the audit log: ``api.envelope``)."""

from __future__ import annotations

from fastapi import APIRouter

from modelport.api.routes import audit, grants, keys, tenants


def include_tenancy(router: APIRouter) -> None:
    """Tenants, keys, grants and the audit log's routes, under ``/api``."""
    for module in (tenants, keys, grants, audit):
        router.include_router(module.router, prefix="/api")
