"""Operational probes."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from modelport.api import deps
from modelport.api.readiness import database_answers

router = APIRouter(tags=["operations"])


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
    """The process can serve: its database answers (``api.readiness``)."""
    if not database_answers(database):
        return JSONResponse({"status": "unavailable", "database": "unavailable"}, status_code=503)
    return JSONResponse({"status": "ok"})
