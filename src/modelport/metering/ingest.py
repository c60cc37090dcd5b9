"""Usage reported by external backends: JSON documents to usage events.

A document names the call (``tenant``, ``key_id``, ``model``, ``version``, ``unit``,
``quantity``, ``status``...) at its top level or, CloudEvents style, under ``data``
(a field under ``data`` wins over the same field at the top level).
CloudEvents attributes are accepted as aliases: ``id`` for ``event_id``, ``source``
(who reports), ``type`` (ignored), ``time`` for ``finished_at``. The reporter never
sets a price: the price book's rule effective at the call's start applies, and is
snapshotted into the event like on the ``/v2`` path. ``call_id`` names the call the
usage belongs to (the id of the reservation the platform took for it); who may report
what is ``modelport.metering.authorizations``'s to decide, on the parsed events.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from modelport.errors import InvalidInput
from modelport.metering.events import priced_event
from modelport.metering.prices import PriceBook
from modelport.metering.types import Unit, UsageEvent, UsageStatus

MAX_BATCH = 1000
EXTERNAL_SOURCE = "external"
_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:+=/-@")


class ReportedEvent(NamedTuple):
    """A reported event as parsed, and the call id it names (None: none)."""

    event: UsageEvent
    call_id: str | None = None


DigestOf = Callable[[str, str], str | None]
"""``(model, version)`` → the version's manifest digest, or None when it is unknown."""

PublisherCheck = Callable[[int, str], None]
"""``(index, model)``: raises when the reporter may not report usage of ``model``'s
owner; runs before the version is looked up, so a refusal tells nothing of whether it
exists."""


def _bad(index: int, message: str) -> InvalidInput:
    return InvalidInput(f"event {index}: {message}", code="invalid_usage_event", index=index)


def _str(doc: dict[str, Any], name: str, index: int, *, required: bool = True) -> str | None:
    value = doc.get(name)
    if value is None:
        if required:
            raise _bad(index, f"'{name}' is required")
        return None
    if not isinstance(value, str) or not value or len(value) > 256:
        raise _bad(index, f"'{name}' must be a non-empty string of at most 256 characters")
    return value


def _number(doc: dict[str, Any], name: str, index: int) -> float:
    value = doc.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise _bad(index, f"'{name}' must be a number of at least 0")
    if not math.isfinite(value):
        raise _bad(index, f"'{name}' must be finite")
    return float(value)


def _time(value: Any, name: str, index: int) -> datetime:
    if not isinstance(value, str):
        raise _bad(index, f"'{name}' must be an RFC 3339 time")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise _bad(index, f"'{name}' is not an RFC 3339 time: {value!r}") from None
    if parsed.tzinfo is None:
        raise _bad(index, f"'{name}' needs a time zone offset")
    return parsed


def _fields(doc: Any, index: int) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise _bad(index, "must be an object")
    data = doc.get("data")
    if data is None:
        return doc
    if not isinstance(data, dict):
        raise _bad(index, "'data' must be an object")
    # CloudEvents: the envelope's attributes, then the payload's fields.
    return {**{k: v for k, v in doc.items() if k != "data"}, **data}


def parse_event(
    doc: Any,
    index: int,
    prices: PriceBook,
    digest_of: DigestOf,
    now: datetime,
    check_publisher: PublisherCheck | None = None,
) -> ReportedEvent:
    """One reported document as a priced usage event and the call id it names
    (InvalidInput names what is wrong). The one reading of a document's fields: what
    is authorized is what is recorded."""
    fields = _fields(doc, index)
    event_id = _str(fields, "event_id", index, required=False) or _str(fields, "id", index)
    assert event_id is not None
    if not set(event_id) <= _ID_CHARS:
        raise _bad(index, "'event_id' may hold letters, digits and ._:+=/-@ only")
    model = _str(fields, "model", index)
    version = _str(fields, "version", index)
    tenant = _str(fields, "tenant", index)
    assert model is not None and version is not None and tenant is not None
    if model.count("/") != 1:
        raise _bad(index, "'model' must be 'owner/name'")
    if check_publisher is not None:
        check_publisher(index, model)
    unit_name = _str(fields, "unit", index)
    assert unit_name is not None
    try:
        unit = Unit(unit_name)
        status = UsageStatus(fields.get("status", UsageStatus.SUCCEEDED.value))
    except ValueError as exc:
        raise _bad(index, str(exc)) from None
    quantity = fields.get("quantity")
    if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity < 0:
        raise _bad(index, "'quantity' must be an integer of at least 0")
    wall_ms = _number(fields, "wall_ms", index)
    finished = fields.get("finished_at", fields.get("time"))
    finished_at = now if finished is None else _time(finished, "finished_at", index)
    started = fields.get("started_at")
    started_at = (
        finished_at - timedelta(milliseconds=wall_ms)
        if started is None
        else _time(started, "started_at", index)
    )
    if started_at > finished_at:
        raise _bad(index, "'started_at' is after 'finished_at'")
    digest = _str(fields, "manifest_digest", index, required=False) or digest_of(model, version)
    if digest is None:
        raise _bad(index, f"{model}:{version} is not a known version")
    event = priced_event(
        event_id=event_id,
        price=prices.price(model, version, unit, started_at),
        unit=unit,
        quantity=quantity,
        status=status,
        tenant=tenant,
        key_id=_str(fields, "key_id", index, required=False),
        model=model,
        version=version,
        manifest_digest=digest,
        started_at=started_at,
        finished_at=finished_at,
        endpoint=_str(fields, "endpoint", index, required=False),
        task=_str(fields, "task", index, required=False) or "",
        compute_ms=_number(fields, "compute_ms", index),
        wall_ms=wall_ms,
        request_id=_str(fields, "request_id", index, required=False) or "",
        prediction_id=_str(fields, "prediction_id", index, required=False) or "",
        source=_str(fields, "source", index, required=False) or EXTERNAL_SOURCE,
        reservation_id=None,  # charged when recorded, whatever call it names
    )
    return ReportedEvent(event, _str(fields, "call_id", index, required=False))


def parse_batch(
    docs: Any,
    prices: PriceBook,
    digest_of: DigestOf,
    now: datetime,
    check_publisher: PublisherCheck | None = None,
) -> list[ReportedEvent]:
    """A batch (a JSON array, or ``{"events": [...]}``) as usage events; the whole batch
    is refused when one of its events is malformed."""
    if isinstance(docs, dict) and "events" in docs:
        docs = docs["events"]
    if not isinstance(docs, list):
        raise InvalidInput(
            "expected a JSON array of usage events (or an object with 'events')",
            code="invalid_usage_event",
        )
    if len(docs) > MAX_BATCH:
        raise InvalidInput(
            f"at most {MAX_BATCH} events per batch", code="invalid_usage_event", limit=MAX_BATCH
        )
    return [
        parse_event(doc, i, prices, digest_of, now, check_publisher) for i, doc in enumerate(docs)
    ]
