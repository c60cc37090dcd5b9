"""The monitor policy an endpoint's owner sets, and the report computed from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from modelport.monitoring.drift import Drift
from modelport.monitoring.quality import Quality

SLICE_FIELDS = ("tenant", "arm", "key_id", "model_version")
"""Logged fields a report may slice by (besides a categorical input feature,
``feature:<name>``)."""


class MonitorPolicy(BaseModel):
    """How an endpoint is watched: its windows, limits and what a breach does."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    window_hours: float = Field(default=24.0, gt=0, le=24 * 90)
    """The current window: the last this many hours."""
    reference: Literal["window", "validation"] = "window"
    """``window``: the ``reference_hours`` before the current window; ``validation``:
    the inputs of each version's manifest examples (its validation data)."""
    reference_hours: float = Field(default=24.0 * 7, gt=0, le=24 * 365)
    psi_limit: float = Field(default=0.2, gt=0)
    """How far a feature's distribution may move (population stability index)."""
    p_value_limit: float = Field(default=0.01, gt=0, lt=1)
    """A feature drifted when its index passes ``psi_limit`` and its test's p-value
    falls below this (the samples show the move)."""
    min_samples: int = Field(default=30, ge=2, le=1_000_000)
    """Fewer values than this on either side: the feature is not judged."""
    min_accuracy: float | None = Field(default=None, ge=0, le=1)
    """Below this accuracy over joined outcomes, the version is in breach."""
    slice_by: str | None = None
    """``tenant``, ``arm``, ``key_id``, ``model_version``, or ``feature:<name>``."""
    halt_canary: bool = False
    """A canary whose candidate is in breach is halted (traffic back to the stable)."""
    interval_seconds: float = Field(default=300.0, ge=10)
    """How often the scheduled check runs for this endpoint."""

    @field_validator("slice_by")
    @classmethod
    def _slice(cls, value: str | None) -> str | None:
        if (
            value is None
            or value in SLICE_FIELDS
            or (value.startswith("feature:") and len(value) > len("feature:"))
        ):
            return value
        raise ValueError(f"must be one of {', '.join(SLICE_FIELDS)} or feature:<name>")


@dataclass(frozen=True)
class VersionReport:
    """One version (and experiment arm) of the endpoint over the windows."""

    model: str
    version: str
    arm: str | None
    predictions: int
    reference_predictions: int
    inputs: list[Drift]
    outputs: list[Drift]
    quality: list[Quality]
    breaches: list[str] = field(default_factory=list)
    """Why the version is in breach: drifted features, accuracy below the limit."""

    @property
    def in_breach(self) -> bool:
        return bool(self.breaches)


@dataclass(frozen=True)
class MonitoringReport:
    endpoint: str
    policy: MonitorPolicy
    computed_at: datetime
    window: tuple[datetime, datetime]
    reference_window: tuple[datetime, datetime] | None
    versions: list[VersionReport]
