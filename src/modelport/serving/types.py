"""Plain records shared by the serving layer (no I/O)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from modelport.manifest import Manifest
from modelport.runtime.types import Priority


@dataclass(frozen=True)
class VersionRef:
    """A registry version as the serving layer needs it."""

    model: str
    """``owner/name``"""
    version: str
    manifest_digest: str
    manifest: Manifest

    @property
    def ref(self) -> str:
        return f"{self.model}:{self.version}"


@dataclass(frozen=True)
class Capabilities:
    """What a backend can honour; routing filters on these before choosing."""

    formats: frozenset[str] = frozenset()
    max_batch_size: int = 1
    context_length: int | None = None
    hardware: frozenset[str] = frozenset({"cpu"})
    protocols: frozenset[str] = frozenset({"v2"})
    """``v2`` (tensors) and/or ``openai`` (text generation, embeddings)."""


class Health(StrEnum):
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class BackendRequest:
    """One tensor inference to run on a backend, with the caller's remaining time."""

    version: VersionRef
    inputs: Mapping[str, np.ndarray]
    deadline: float
    """Absolute ``time.monotonic()`` by which the answer must be back."""
    priority: Priority = Priority.INTERACTIVE
    outputs: tuple[str, ...] | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    request_id: str = ""


@dataclass(frozen=True)
class BackendResponse:
    outputs: Mapping[str, np.ndarray]
    backend: str
    """Name of the backend (replica) that answered."""
    timings: Mapping[str, float] = field(default_factory=dict)
    """Seconds per stage where the backend knows them: queue, batch_wait, execute."""
    batch_size: int | None = None
