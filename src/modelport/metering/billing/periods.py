"""Billing periods: calendar months in UTC, named ``YYYY-MM`` (``2026-11``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from modelport.errors import InvalidInput

_PERIOD = re.compile(r"^(\d{4})-(\d{2})$")


@dataclass(frozen=True, order=True)
class Period:
    """One calendar month in UTC; ``str(period)`` is its id."""

    year: int
    month: int

    def __post_init__(self) -> None:
        if not (1 <= self.month <= 12 and 1970 <= self.year <= 9998):
            raise InvalidInput(
                f"no such billing period: {self.year:04d}-{self.month:02d}",
                code="invalid_period",
                field="period",
            )

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"

    @property
    def start(self) -> datetime:
        """The first instant of the period (inclusive)."""
        return datetime(self.year, self.month, 1, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        """The first instant after the period (exclusive): the next period's start."""
        return self.next().start

    def next(self) -> Period:
        return Period(self.year + self.month // 12, self.month % 12 + 1)

    def contains(self, at: datetime) -> bool:
        return self.start <= at < self.end

    @classmethod
    def parse(cls, text: str) -> Period:
        """``YYYY-MM`` to a period; 400 ``invalid_period`` otherwise."""
        match = _PERIOD.match(text.strip())
        if match is None:
            raise InvalidInput(
                f"a billing period is written YYYY-MM (e.g. 2026-11), not {text!r}",
                code="invalid_period",
                field="period",
            )
        return cls(int(match.group(1)), int(match.group(2)))

    @classmethod
    def of(cls, at: datetime) -> Period:
        """The period an aware instant falls in."""
        if at.tzinfo is None:
            raise ValueError("naive datetime")
        at = at.astimezone(UTC)
        return cls(at.year, at.month)
