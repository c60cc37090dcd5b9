"""The price book: a model's price rules (``/api/prices``). Rules are never edited: a new
rule with a later ``effective_from`` replaces one."""

from __future__ import annotations

from typing import Any

from modelport.client.family import AsyncFamily, Family
from modelport.client.transport import Call
from modelport.client.types import Price, items_of


def list_call(model: str, version: str | None = None) -> Call[list[Price]]:
    params = {"model": model, "version": version}
    return Call("GET", "/api/prices", items_of(Price.from_json), params=params)


def set_call(model: str, unit: str, unit_price_micros: int, **options: Any) -> Call[Price]:
    body = {"model": model, "unit": unit, "unit_price_micros": unit_price_micros}
    body |= {k: v for k, v in options.items() if v is not None}
    return Call("POST", "/api/prices", Price.from_json, json=body)


class Prices(Family):
    """``client.prices``: prices in micro-units (1 unit = 1_000_000)."""

    def list(self, model: str, version: str | None = None) -> list[Price]:
        return self._t.run(list_call(model, version))

    def set(
        self,
        model: str,
        unit: str,
        unit_price_micros: int,
        *,
        version: str | None = None,
        per_units: int | None = None,
        effective_from: str | None = None,
    ) -> Price:
        """Add a rule: ``unit_price_micros`` per ``per_units`` of ``unit`` (request,
        token, ...) for ``version`` (None: every version without a rule of its own)."""
        call = set_call(
            model,
            unit,
            unit_price_micros,
            version=version,
            per_units=per_units,
            effective_from=effective_from,
        )
        return self._t.run(call)


class AsyncPrices(AsyncFamily):
    async def list(self, model: str, version: str | None = None) -> list[Price]:
        return await self._t.run(list_call(model, version))

    async def set(
        self,
        model: str,
        unit: str,
        unit_price_micros: int,
        *,
        version: str | None = None,
        per_units: int | None = None,
        effective_from: str | None = None,
    ) -> Price:
        call = set_call(
            model,
            unit,
            unit_price_micros,
            version=version,
            per_units=per_units,
            effective_from=effective_from,
        )
        return await self._t.run(call)
