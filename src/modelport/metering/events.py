"""Usage events as JSON documents (outbox payloads, Redis stream entries) and back.

The document is flat and versionless on purpose: every field of ``UsageEvent``, the
price snapshot's fields prefixed ``price_``, datetimes as ISO 8601 strings.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from modelport.metering.types import FailureRule, PriceSnapshot, Unit, UsageEvent, UsageStatus


def price_doc(price: PriceSnapshot) -> dict[str, Any]:
    """The ``price_*`` fields of an event's document."""
    return {
        "price_rule_id": price.rule_id,
        "price_unit_price_micros": price.unit_price_micros,
        "price_per_units": price.per_units,
        "price_failure_rule": price.failure_rule.value,
        "price_failure_bps": price.failure_bps,
        "price_revenue_share_bps": price.revenue_share_bps,
    }


def event_to_doc(event: UsageEvent) -> dict[str, Any]:
    price = event.price
    return {
        "event_id": event.event_id,
        "tenant": event.tenant,
        "key_id": event.key_id,
        "model": event.model,
        "version": event.version,
        "manifest_digest": event.manifest_digest,
        "unit": event.unit.value,
        "quantity": event.quantity,
        "status": event.status.value,
        "started_at": event.started_at.isoformat(),
        "finished_at": event.finished_at.isoformat(),
        **price_doc(price),
        "amount_micros": event.amount_micros,
        "publisher_micros": event.publisher_micros,
        "endpoint": event.endpoint,
        "task": event.task,
        "compute_ms": event.compute_ms,
        "gpu_ms": event.gpu_ms,
        "wall_ms": event.wall_ms,
        "request_id": event.request_id,
        "prediction_id": event.prediction_id,
        "source": event.source,
        "reservation_id": event.reservation_id,
    }


def event_from_doc(doc: dict[str, Any]) -> UsageEvent:
    """The inverse of ``event_to_doc`` (KeyError or ValueError on a malformed document)."""
    return UsageEvent(
        event_id=doc["event_id"],
        tenant=doc["tenant"],
        key_id=doc["key_id"],
        model=doc["model"],
        version=doc["version"],
        manifest_digest=doc["manifest_digest"],
        unit=Unit(doc["unit"]),
        quantity=int(doc["quantity"]),
        status=UsageStatus(doc["status"]),
        started_at=datetime.fromisoformat(doc["started_at"]),
        finished_at=datetime.fromisoformat(doc["finished_at"]),
        price=PriceSnapshot(
            rule_id=doc["price_rule_id"],
            unit_price_micros=int(doc["price_unit_price_micros"]),
            per_units=int(doc["price_per_units"]),
            failure_rule=FailureRule(doc["price_failure_rule"]),
            failure_bps=int(doc["price_failure_bps"]),
            revenue_share_bps=int(doc["price_revenue_share_bps"]),
        ),
        amount_micros=int(doc["amount_micros"]),
        publisher_micros=int(doc["publisher_micros"]),
        endpoint=doc.get("endpoint"),
        task=doc.get("task", ""),
        compute_ms=float(doc.get("compute_ms", 0.0)),
        gpu_ms=float(doc.get("gpu_ms", 0.0)),
        wall_ms=float(doc.get("wall_ms", 0.0)),
        request_id=doc.get("request_id", ""),
        prediction_id=doc.get("prediction_id", ""),
        source=doc["source"],
        reservation_id=doc.get("reservation_id"),
    )


def priced_event(
    *,
    event_id: str,
    price: PriceSnapshot,
    unit: Unit,
    quantity: int,
    status: UsageStatus,
    **fields: Any,
) -> UsageEvent:
    """A usage event with its amount and the publisher's share computed from ``price``."""
    amount = price.amount(quantity, status)
    return UsageEvent(
        event_id=event_id,
        price=price,
        unit=unit,
        quantity=quantity,
        status=status,
        amount_micros=amount,
        publisher_micros=price.publisher_share(amount),
        **fields,
    )
