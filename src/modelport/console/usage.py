"""A tenant's usage lines (``GET /api/usage`` items) as calls.

The ledger keeps one line per unit a call used: a chat is an ``input_token`` line and an
``output_token`` line, a refused ``/v1`` call a failed line of each unit it was priced
by. A person counts calls, so lines are grouped by their call id (``prediction_id``);
quantities and money stay per line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SUCCEEDED = "succeeded"


def call_id(event: dict[str, Any]) -> str:
    """The call a usage line belongs to: its prediction id (a line reported without one
    is a call of its own)."""
    return str(event.get("prediction_id") or f"event:{event.get('event_id')}")


@dataclass(frozen=True)
class Line:
    unit: str
    quantity: int
    amount_micros: int


@dataclass(frozen=True)
class Call:
    """One call and the ledger lines it was charged by."""

    id: str
    finished_at: str
    model: str
    version: str
    status: str
    """``succeeded`` when every line did, else the first other status of its lines."""
    lines: tuple[Line, ...]

    @property
    def amount_micros(self) -> int:
        return sum(line.amount_micros for line in self.lines)

    @property
    def quantities(self) -> str:
        """``input_token 12, output_token 30``: what the call used, unit by unit."""
        return ", ".join(f"{line.unit} {line.quantity}" for line in self.lines)


def calls(events: list[dict[str, Any]]) -> list[Call]:
    """The calls of ``events``, in the order of their first line."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        grouped.setdefault(call_id(event), []).append(event)
    found = []
    for cid, lines in grouped.items():
        failed = [str(e.get("status")) for e in lines if e.get("status") != SUCCEEDED]
        found.append(
            Call(
                id=cid,
                finished_at=max(str(e.get("finished_at") or "") for e in lines),
                model=str(lines[0].get("model") or ""),
                version=str(lines[0].get("version") or ""),
                status=failed[0] if failed else SUCCEEDED,
                lines=tuple(
                    Line(
                        str(e.get("unit")),
                        int(e.get("quantity") or 0),
                        int(e.get("amount_micros") or 0),
                    )
                    for e in lines
                ),
            )
        )
    return found
