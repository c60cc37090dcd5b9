"""Operational probes."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from modelport.api.deps import get_services

router = APIRouter(tags=["operations"])
log = logging.getLogger(__name__)


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
    except Exception:  # any driver error means not ready
        # Logged, not answered: the probe is open to anyone, and a driver's message names
        # hosts, users and databases.
        log.warning("readiness: the database does not answer", exc_info=True)
        return JSONResponse({"status": "unavailable", "database": "unavailable"}, status_code=503)
    return JSONResponse({"status": "ok"})
