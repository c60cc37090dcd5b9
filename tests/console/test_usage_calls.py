"""Usage lines read as calls: a chat's token lines are one call, a refused call's failed
lines one failed call; money and quantities stay by line."""

from __future__ import annotations

from typing import Any

from modelport.console.charts import spend
from modelport.console.usage import calls


def line(call: str, unit: str, quantity: int, micros: int, **fields: Any) -> dict[str, Any]:
    """A line as ``GET /api/usage`` lists it."""
    return {
        "event_id": f"{call}-{unit}",
        "prediction_id": call,
        "model": "acme/writer",
        "version": "1",
        "key_id": "k1",
        "unit": unit,
        "quantity": quantity,
        "status": "succeeded",
        "amount_micros": micros,
        "finished_at": "2026-12-05T10:00:00+00:00",
        **fields,
    }


def chats(n: int) -> list[dict[str, Any]]:
    return [
        entry
        for i in range(n)
        for entry in (line(f"c{i}", "input_token", 4, 8), line(f"c{i}", "output_token", 3, 24))
    ]


def refused(call: str) -> list[dict[str, Any]]:
    return [
        line(call, unit, 0, 0, status="failed")
        for unit in ("prediction", "input_token", "output_token")
    ]


def test_five_chats_are_five_calls_and_their_lines_money() -> None:
    totals = spend(chats(5))
    assert totals.by_model == [("acme/writer", 5, 5 * 32)]
    assert totals.by_day == [("2026-12-05", 5, 5 * 32)]
    assert totals.by_key == [("k1", 5, 5 * 32)]
    assert totals.total_micros == 160


def test_a_refused_call_is_one_failed_call() -> None:
    events = chats(1) + refused("r1")
    found = calls(events)
    assert [(c.id, c.status, c.amount_micros) for c in found] == [
        ("c0", "succeeded", 32),
        ("r1", "failed", 0),
    ]
    assert found[0].quantities == "input_token 4, output_token 3"
    assert found[1].quantities == "prediction 0, input_token 0, output_token 0"
    assert spend(events).by_model == [("acme/writer", 2, 32)]


def test_lines_without_a_call_id_are_calls_of_their_own() -> None:
    reported = [line("", "prediction", 1, 100), line("", "prediction", 1, 100)]
    reported[1]["event_id"] = "other"
    assert len(calls(reported)) == 2 and spend(reported).by_model[0][1] == 2
