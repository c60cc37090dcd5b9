"""Plain records of observability (no I/O): prediction log records and logging policy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class LogPolicy(BaseModel):
    """What an endpoint lets the prediction log keep beyond the audit fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    inputs: bool = False
    """Keep each prediction's inputs."""
    outputs: bool = False
    """Keep each prediction's outputs."""
    max_bytes: int = Field(default=64 << 10, ge=0, le=16 << 20)
    """Inputs or outputs larger than this (raw tensor bytes) are not kept."""


class Detail(StrEnum):
    """Why a record has (or lacks) inputs and outputs."""

    NONE = "none"
    """The endpoint's policy does not keep them."""
    LOGGED = "logged"
    SAMPLED_OUT = "sampled_out"
    """Left out under buffer pressure (the audit fields were kept)."""
    TOO_LARGE = "too_large"
    """Above the policy's ``max_bytes``."""


@dataclass(frozen=True)
class PredictionRecord:
    """One prediction, as the log keeps it. Immutable once written.

    Everything but ``inputs`` and ``outputs`` is a required audit field: kept even
    when the log's buffer is under pressure.
    """

    id: str
    """The prediction id returned to the caller."""
    endpoint: str
    owner: str | None
    """Tenant that owns the endpoint."""
    model: str | None
    """``owner/name`` of the version that answered; None for a static answer."""
    version: str | None
    backend: str | None
    received_at: datetime
    latency_seconds: float
    stages: Mapping[str, float] = field(default_factory=dict)
    """Seconds per stage: auth, queue, batch_wait, execute (those known)."""
    status: str = "ok"
    """``ok``, or the error code the caller got."""
    tenant: str | None = None
    """The caller's tenant."""
    key_id: str | None = None
    request_id: str = ""
    fallback: str | None = None
    """The fallback kind that answered (``version``, ``cache``, ``static``), if any."""
    shadow_of: str | None = None
    """For a shadow copy: the id of the prediction it copied."""
    arm: str | None = None
    """Experiment arm (e.g. ``stable`` or ``canary``)."""
    answer_label: str | None = None
    """The predicted class (label or index) when the answer is one, for outcome joins."""
    answer_value: float | None = None
    """The predicted number when the answer is one scalar."""
    inputs: Mapping[str, np.ndarray] | None = None
    outputs: Mapping[str, np.ndarray] | None = None
    detail: Detail = Detail.NONE
    max_detail_bytes: int = 64 << 10

    @property
    def shadow(self) -> bool:
        return self.shadow_of is not None


@dataclass(frozen=True)
class StoredPrediction:
    """A prediction read back from the log (detail in Open Inference Protocol JSON)."""

    id: str
    endpoint: str
    owner: str | None
    model: str | None
    version: str | None
    backend: str | None
    received_at: datetime
    latency_seconds: float
    stages: dict[str, float]
    status: str
    tenant: str | None
    key_id: str | None
    request_id: str
    fallback: str | None
    shadow_of: str | None
    arm: str | None
    answer_label: str | None
    answer_value: float | None
    inputs: list[dict[str, object]] | None
    outputs: list[dict[str, object]] | None
    detail: str


@dataclass(frozen=True)
class Timed:
    """A count of events and their total duration in nanoseconds."""

    count: int = 0
    ns: int = 0


@dataclass(frozen=True)
class VersionStatistics:
    """What this process's runtime measured of one version since it started: the
    figures of Triton's statistics extension (``GET /v2/models/.../stats``)."""

    model: str
    version: str
    success: Timed = Timed()
    """Requests answered, and their time in the runtime (queue and execution)."""
    fail: Timed = Timed()
    """Requests that did not succeed (invalid, queue full, deadline, cancelled, error);
    counted, not timed."""
    queue: Timed = Timed()
    """Requests that waited in the queue, and their waits."""
    execution: Timed = Timed()
    """Batches executed, and their execution time."""
    rows: int = 0
    """Rows inferred: the sum of the executed batches' sizes."""
    last_inference_ms: int = 0
    """When a request last left the runtime, in milliseconds since the epoch (0: never)."""
