"""/api/predictions and an endpoint's outcome report: the prediction log as the API sees it.

- ``GET /api/predictions/{id}``: one logged prediction (inputs and outputs only where
  the endpoint's logging policy kept them).
- ``POST /api/predictions/{id}/outcome`` with ``{"label": ...}`` or ``{"value": ...}``:
  attach the delayed true label or value. 201 the first time, 200 when the same
  outcome is posted again, 409 ``outcome_conflict`` for a different one.
- ``GET /api/endpoints/{name}/outcomes``: accuracy (labels) and MAE (numbers) per
  version, arm and shadow flag, over the predictions that have outcomes.

Who: the caller's tenant (``model.call``) and the endpoint's tenant
(``version.deploy``) may attach outcomes; both may read the prediction (the
endpoint's tenant with ``model.read``). Anyone else gets the 404 a missing
prediction gives. The report needs ``model.read`` in the endpoint's tenant.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from modelport.api import deps
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.endpoints import readable_endpoint
from modelport.errors import Forbidden
from modelport.observability.types import StoredPrediction
from modelport.serving.outcomes import Outcome, VersionAccuracy, prediction_not_found
from modelport.tenancy.policy import Decision, Permission, TenantScoped, authorize
from modelport.tenancy.types import Principal

router = APIRouter(tags=["predictions"])


class OutcomeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str | int | bool | None = Field(
        default=None, description="The true class (name or index)"
    )
    value: float | None = Field(default=None, description="The true number")

    @model_validator(mode="after")
    def _one(self) -> OutcomeBody:
        if (self.label is None) == (self.value is None):
            raise ValueError("give exactly one of 'label' and 'value'")
        if self.value is not None and not math.isfinite(self.value):
            raise ValueError("'value' must be a finite number")
        return self


def outcome_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "prediction_id": outcome.prediction_id,
        "label": outcome.label,
        "value": outcome.value,
        "recorded_at": outcome.recorded_at.isoformat(),
        "recorded_by": outcome.recorded_by,
    }


def prediction_json(p: StoredPrediction, outcome: Outcome | None) -> dict[str, Any]:
    return {
        "id": p.id,
        "endpoint": p.endpoint,
        "model": p.model,
        "version": p.version,
        "backend": p.backend,
        "received_at": p.received_at.isoformat(),
        "latency_seconds": p.latency_seconds,
        "stages": p.stages,
        "status": p.status,
        "tenant": p.tenant,
        "key_id": p.key_id,
        "request_id": p.request_id,
        "fallback": p.fallback,
        "shadow_of": p.shadow_of,
        "arm": p.arm,
        "answer": {"label": p.answer_label, "value": p.answer_value},
        "detail": p.detail,
        "inputs": p.inputs,
        "outputs": p.outputs,
        "outcome": outcome_json(outcome) if outcome is not None else None,
    }


def accuracy_json(row: VersionAccuracy) -> dict[str, Any]:
    return {
        "model": row.model,
        "version": row.version,
        "arm": row.arm,
        "shadow": row.shadow,
        "predictions": row.predictions,
        "outcomes": row.outcomes,
        "labelled": row.labelled,
        "correct": row.correct,
        "accuracy": row.accuracy,
        "numeric": row.numeric,
        "mae": row.mae,
    }


def _utc(moment: datetime | None) -> datetime | None:
    """Query times without a zone are UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def _require(
    request: Request,
    principal: Principal,
    prediction: StoredPrediction,
    caller: Permission,
    owner: Permission,
) -> None:
    """Allowed through the caller's tenant or the endpoint's; else 403, or 404 if hidden."""
    decisions = [
        authorize(principal, permission, TenantScoped(tenant))
        for tenant, permission in ((prediction.tenant, caller), (prediction.owner, owner))
        if tenant is not None
    ]
    if not decisions:
        decisions = [authorize(principal, owner, TenantScoped(""))]  # only the admin passes
    if Decision.ALLOW in decisions:
        request.state.audit_tenant = prediction.owner or prediction.tenant
        return
    if Decision.DENY in decisions:
        raise Forbidden("this API key may not do this to the prediction", code="forbidden")
    raise prediction_not_found(prediction.id)


@router.get("/predictions/{prediction_id}")
async def get_prediction(
    outcomes: deps.Outcomes, prediction_id: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    prediction = await outcomes.find_prediction(prediction_id)
    _require(request, principal, prediction, Permission.MODEL_CALL, Permission.MODEL_READ)
    outcome = await anyio.to_thread.run_sync(outcomes.get, prediction_id)
    return prediction_json(prediction, outcome)


class RecordedOutcome(BaseModel):
    """A prediction's true outcome, as recorded."""

    prediction_id: str
    label: str | None
    value: float | None
    recorded_at: str = Field(description="ISO 8601")
    recorded_by: str = Field(description="The principal that recorded it")


@router.post(
    "/predictions/{prediction_id}/outcome",
    status_code=201,
    response_model=RecordedOutcome,
    responses={200: {"model": RecordedOutcome, "description": "The same outcome, again"}},
)
async def post_outcome(
    outcomes: deps.Outcomes,
    prediction_id: str,
    body: OutcomeBody,
    request: Request,
    principal: CurrentPrincipal,
) -> JSONResponse:
    """Attach the prediction's true label or value (idempotent)."""
    prediction = await outcomes.find_prediction(prediction_id)
    _require(request, principal, prediction, Permission.MODEL_CALL, Permission.VERSION_DEPLOY)
    outcome, created = await anyio.to_thread.run_sync(
        lambda: outcomes.attach(
            prediction_id, label=body.label, value=body.value, actor=principal.id
        )
    )
    return JSONResponse(outcome_json(outcome), status_code=201 if created else 200)


@router.get("/endpoints/{name}/outcomes")
def outcome_report(
    outcomes: deps.Outcomes,
    name: str,
    request: Request,
    principal: CurrentPrincipal,
    since: datetime | None = None,
    until: datetime | None = None,
) -> dict[str, Any]:
    """Accuracy-style metrics per version over predictions joined with their outcomes."""
    endpoint = readable_endpoint(request, principal, name)
    rows = outcomes.report(name, owner=endpoint.tenant, since=_utc(since), until=_utc(until))
    return {"endpoint": name, "versions": [accuracy_json(row) for row in rows]}
