"""Service level objectives of an endpoint: what they promise, checked once (no I/O).

An endpoint's definition carries its SLOs (``Endpoint.slos``). Each promises that a
share (``objective``) of its events is good over a rolling window:

- ``availability``: calls to the endpoint that did not fail on the platform's side
  (a caller's mistake, refused access or a spent budget is not counted either way);
- ``latency``: calls answered within ``threshold_ms`` (an objective of 0.99 with a
  threshold of 250 ms is "p99 under 250 ms"), for interactive traffic;
- ``completion``: jobs on the endpoint that succeeded within ``threshold_ms`` of their
  submission, for batch and offline traffic.

Thresholds are bucket bounds of the histograms the SLIs are read from
(``slo_metrics``): a good event is then an exact bucket count, not an estimate.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum

from prometheus_client.utils import floatToGoString
from pydantic import BaseModel, ConfigDict, Field

from modelport.errors import InvalidInput
from modelport.observability.metrics import LATENCY_BUCKETS

JOB_BUCKETS = (
    1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 43200.0, 86400.0,
)  # fmt: skip
"""Bounds (seconds) of ``modelport_job_duration_seconds``: a completion SLO's thresholds."""
MAX_SLOS = 8
MAX_WINDOW_DAYS = 90
SLO_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


class SLOKind(StrEnum):
    AVAILABILITY = "availability"
    LATENCY = "latency"
    COMPLETION = "completion"


class SLO(BaseModel):
    """One objective of an endpoint (``check_slos`` says what makes one valid)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Unique on the endpoint: a-z, 0-9 and '_', at most 32")
    kind: SLOKind
    objective: float = Field(description="Share of good events, e.g. 0.999 (0.5 to 0.99999)")
    threshold_ms: float | None = Field(
        default=None,
        description="latency and completion: the bound a good event stays within; a "
        "bucket bound of the SLI's histogram",
    )
    window_days: int = Field(default=30, description="The rolling window of the error budget")

    @property
    def threshold_le(self) -> str:
        """The threshold as the ``le`` label of its bucket (a checked SLO's)."""
        bound = bound_of(self.kind, self.threshold_ms)
        assert bound is not None
        return str(floatToGoString(bound))


def buckets_of(kind: SLOKind) -> tuple[float, ...]:
    return tuple(float(b) for b in LATENCY_BUCKETS) if kind is SLOKind.LATENCY else JOB_BUCKETS


def bound_of(kind: SLOKind, threshold_ms: float | None) -> float | None:
    """The bucket bound (seconds) ``threshold_ms`` names, or None."""
    if threshold_ms is None:
        return None
    return next((b for b in buckets_of(kind) if abs(b * 1000 - threshold_ms) < 1e-6), None)


def check_slos(slos: Sequence[SLO]) -> tuple[SLO, ...]:
    """``slos`` as stored, or ``InvalidInput`` (code ``invalid_slo``) naming the field."""
    if len(slos) > MAX_SLOS:
        _bad(f"an endpoint has at most {MAX_SLOS} SLOs", "slos")
    names: set[str] = set()
    for index, slo in enumerate(slos):
        at = f"slos.{index}"
        if not SLO_NAME_RE.match(slo.name):
            _bad("an SLO name is 1-32 of a-z, 0-9 and '_', starting with a letter", f"{at}.name")
        if slo.name in names:
            _bad(f"the SLO name {slo.name!r} is used twice", f"{at}.name")
        names.add(slo.name)
        if not 0.5 <= slo.objective <= 0.99999:
            _bad("objective is a share between 0.5 and 0.99999", f"{at}.objective")
        if not 1 <= slo.window_days <= MAX_WINDOW_DAYS:
            _bad(f"window_days is between 1 and {MAX_WINDOW_DAYS}", f"{at}.window_days")
        if slo.kind is SLOKind.AVAILABILITY:
            if slo.threshold_ms is not None:
                _bad("an availability SLO has no threshold", f"{at}.threshold_ms")
            continue
        bounds = buckets_of(slo.kind)
        if bound_of(slo.kind, slo.threshold_ms) is None:
            shown = ", ".join(f"{b * 1000:g}" for b in bounds)
            _bad(f"a {slo.kind.value} SLO's threshold_ms is one of {shown}", f"{at}.threshold_ms")
    return tuple(slos)


def _bad(message: str, field: str) -> None:
    raise InvalidInput(message, code="invalid_slo", field=field)
