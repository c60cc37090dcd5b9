"""Operational probes."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from modelport.api.deps import get_services

router = APIRouter(tags=["operations"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(request: Request) -> JSONResponse:
    """The process can serve: its database answers."""
    services = get_services(request)
    try:
        with services.database.transaction() as session:
            session.execute(text("SELECT 1"))
    except Exception as exc:  # any driver error means not ready
        return JSONResponse({"status": "unavailable", "database": str(exc)}, status_code=503)
    return JSONResponse({"status": "ok"})
