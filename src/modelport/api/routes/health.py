"""Operational probes."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import text

from modelport.api import deps

router = APIRouter(tags=["operations"])
log = logging.getLogger(__name__)


class Health(BaseModel):
    status: str = Field(description="`ok`", examples=["ok"])


class Readiness(BaseModel):
    status: str = Field(description="`ok`, or `unavailable`", examples=["ok"])
    database: str | None = Field(default=None, description="`unavailable` when it does not answer")


@router.get("/healthz", response_model=Health)
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Not ready: the database does not answer"}},
)
def readyz(database: deps.Database, request: Request) -> JSONResponse:
    """The process can serve: its database answers."""
    try:
        with database.transaction() as session:
            session.execute(text("SELECT 1"))
    except Exception:  # any driver error means not ready
        # Logged, not answered: the probe is open to anyone, and a driver's message names
        # hosts, users and databases.
        log.warning("readiness: the database does not answer", exc_info=True)
        return JSONResponse({"status": "unavailable", "database": "unavailable"}, status_code=503)
    return JSONResponse({"status": "ok"})
