"""/api/prices: the price book.

- ``GET /api/prices?model=owner/name[&version=V]``: the model's price rules, for
  anyone who can see the model (callers should know what they will pay). With
  ``&version=V&at=T`` (ISO 8601 with a time zone): only the rule that prices each unit
  of V at T, chosen as the meter chooses (``metering.prices.rules_in_effect``).
- ``POST /api/prices``: add a rule; the model's publishers and owners (and the
  platform admin). Only the admin sets ``revenue_share_bps``; others get the
  platform's default. Rules are never edited: a change is a new rule with a later
  ``effective_from`` (default now; never in the past).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import forbidden, require_model
from modelport.api.auth import CurrentPrincipal
from modelport.errors import InvalidInput
from modelport.metering.prices import rules_in_effect
from modelport.metering.types import BPS, FailureRule, NewPriceRule, PriceRule, Unit
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["prices"])


class NewPrice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="owner/name")
    version: str | None = Field(
        default=None, description="one version; null: every version without a rule of its own"
    )
    unit: Unit = Field(
        description=(
            "what is counted: prediction (a call), row (a row of a call's batch, a"
            " :predict instance), input_token, output_token, image, second, compute_ms,"
            " cache_hit (a call answered from the response cache)"
        )
    )
    unit_price_micros: int = Field(ge=0, description="micro-units per `per_units` units")
    per_units: int = Field(default=1, ge=1, description="units the price is for (fractions)")
    revenue_share_bps: int | None = Field(
        default=None, ge=0, le=BPS, description="publisher's share; admin only"
    )
    failure_rule: FailureRule = FailureRule.NONE
    failure_bps: int = Field(
        default=0, ge=0, le=BPS, description="share of the full amount for `fraction`"
    )
    effective_from: datetime | None = Field(default=None, description="default now")


def price_json(rule: PriceRule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "model": rule.model,
        "version": rule.version,
        "unit": rule.unit.value,
        "unit_price_micros": rule.unit_price_micros,
        "per_units": rule.per_units,
        "revenue_share_bps": rule.revenue_share_bps,
        "failure_rule": rule.failure_rule.value,
        "failure_bps": rule.failure_bps,
        "effective_from": rule.effective_from.isoformat(),
        "created_at": rule.created_at.isoformat(),
        "created_by": rule.created_by,
    }


def _split(model: str) -> tuple[str, str]:
    owner, _, name = model.partition("/")
    if not owner or not name or "/" in name:
        raise InvalidInput("model must be 'owner/name'", code="invalid_price")
    return owner, name


@router.get("/prices")
def list_prices(
    metering: deps.Metering,
    model: str,
    request: Request,
    principal: CurrentPrincipal,
    version: str | None = None,
    at: datetime | None = None,
) -> dict[str, Any]:
    owner, name = _split(model)
    if at is not None and (version is None or at.tzinfo is None):
        raise InvalidInput(
            "at needs a version and a time zone (at=2026-12-05T12:00:00Z&version=1)",
            code="invalid_price",
        )
    require_model(request, principal, owner, name, Permission.MODEL_READ)
    rules = metering.prices.list(model, version=version)
    if at is not None and version is not None:
        rules = rules_in_effect(rules, version, at)
    return {"items": [price_json(rule) for rule in rules]}


@router.post("/prices", status_code=201)
def add_price(
    metering: deps.Metering,
    registry: deps.Registry,
    body: NewPrice,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    owner, name = _split(body.model)
    require_model(request, principal, owner, name, Permission.MODEL_REGISTER)
    if body.revenue_share_bps is not None and not principal.is_admin:
        raise forbidden(Permission.PLATFORM_MANAGE)
    if body.version is not None:
        registry.get_version(owner, name, body.version)  # 404 when unknown
    rule = metering.prices.add(
        NewPriceRule(
            model=body.model,
            version=body.version,
            unit=body.unit,
            unit_price_micros=body.unit_price_micros,
            per_units=body.per_units,
            revenue_share_bps=body.revenue_share_bps,
            failure_rule=body.failure_rule,
            failure_bps=body.failure_bps,
            effective_from=body.effective_from,
        ),
        actor=principal.id,
    )
    return price_json(rule)
