"""Install tenancy on the ASGI app: its routes, request ids and the audit log."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

from modelport.api.context import RequestContextMiddleware
from modelport.api.routes import audit, grants, keys, tenants


def include_tenancy(router: APIRouter) -> None:
    """Tenants, keys, grants and the audit log's routes, under ``/api``."""
    for module in (tenants, keys, grants, audit):
        router.include_router(module.router, prefix="/api")


def install_tenancy(app: FastAPI) -> None:
    """Request ids and the audit record of every request (the routes: ``include_tenancy``)."""
    app.add_middleware(RequestContextMiddleware)
