"""Install tenancy on the ASGI app: its routes, request ids and the audit log."""

from __future__ import annotations

from fastapi import FastAPI

from modelport.api.context import RequestContextMiddleware
from modelport.api.routes import audit, grants, keys, tenants


def install_tenancy(app: FastAPI) -> None:
    app.include_router(tenants.router, prefix="/api")
    app.include_router(keys.router, prefix="/api")
    app.include_router(grants.router, prefix="/api")
    app.include_router(audit.router, prefix="/api")
    app.add_middleware(RequestContextMiddleware)
