"""The prices the console quotes. Which rule prices a unit is the meter's choice, asked
of the API (``GET /api/prices?model=…&version=…&at=…``: a version's own rule before the
model-wide one, the latest ``effective_from`` not after ``at``); the console only
multiplies, as the ledger does for a call that succeeds (``quantity * unit price /
per units``, rounded down)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from modelport.console.calls import PlatformAPI

TOKEN_UNITS = {"input_token": "prompt_tokens", "output_token": "completion_tokens"}
"""The token units and the OpenAI usage field that counts each."""

Rule = dict[str, Any]
"""A price rule as ``GET /api/prices`` lists it."""


async def rules_at(api: PlatformAPI, model: str, version: str, at: datetime) -> list[Rule]:
    """The rules that price ``version``'s units at ``at``, one a unit (none when the API
    refuses: the page then quotes no price rather than a wrong one)."""
    answer = await api.get("/api/prices", model=model, version=version, at=at.isoformat())
    return list(answer.body.get("items", [])) if answer.ok else []


async def scheduled(api: PlatformAPI, model: str, version: str, at: datetime) -> list[Rule]:
    """Rules that start after ``at`` and will then price ``version``, soonest first."""
    answer = await api.get("/api/prices", model=model, version=version)
    listed = answer.body.get("items", []) if answer.ok else []
    starts = sorted({s for r in listed if (s := _start(r)) > at})
    found = []
    for start in starts:  # a few at most: rules are added by hand
        found += [r for r in await rules_at(api, model, version, start) if _start(r) == start]
    return found


def amount_micros(rule: Rule, quantity: int) -> int:
    """What ``quantity`` units of a successful call cost by ``rule``."""
    return quantity * int(rule["unit_price_micros"]) // max(int(rule.get("per_units") or 1), 1)


def price_per_call_micros(rules: list[Rule], rows: int = 1) -> int | None:
    """What one call of ``rows`` rows costs by the ``prediction`` and ``row`` rules of
    ``rules`` (those in effect); None when there is neither. Rules priced by other units
    (tokens, compute) add to this by what the call used."""
    total: int | None = None
    for unit, quantity in (("prediction", 1), ("row", rows)):
        for rule in rules:
            if rule.get("unit") == unit:
                total = (total or 0) + amount_micros(rule, quantity)
    return total


def price_of_tokens_micros(rules: list[Rule], usage: dict[str, int]) -> int | None:
    """What a chat's tokens (OpenAI ``usage``) cost by the token rules of ``rules`` (those
    in effect); None when there is no token price."""
    total: int | None = None
    for rule in rules:
        field = TOKEN_UNITS.get(str(rule.get("unit")))
        if field is not None:
            total = (total or 0) + amount_micros(rule, int(usage.get(field) or 0))
    return total


def _start(rule: Rule) -> datetime:
    return datetime.fromisoformat(str(rule["effective_from"]))
