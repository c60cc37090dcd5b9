"""Degradation under load: when a version's predicted queue wait passes a threshold,
its low-priority calls (``batch`` and ``offline``: jobs, batches, callers that said so)
are served by a cheaper fallback version the operator configured, or shed with 503
``degraded`` and ``Retry-After``, so that its interactive calls keep their latency.

The predicted wait comes from a ``WaitSource`` (this process's runtime: a generative
version's scheduler, a tensor version's batchers, wired by ``app.build_degradation``; a
test's own). The pipeline's
``degrade`` step (``inference.steps.degrade``) applies it to calls of a version, once
the request is read (its priority is in it) and before it is admitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from modelport.runtime.types import Priority
from modelport.serving.types import VersionRef

DEGRADED = "degraded"
"""The code of a call shed under load (503)."""


class WaitSource(Protocol):
    """How long a new call of a version would wait in its queue now."""

    def predicted_wait(self, version: VersionRef) -> float | None:
        """Seconds, or None where it is not known (never degraded then)."""
        ...


@dataclass(frozen=True, slots=True)
class Degradation:
    """The policy: above ``threshold_seconds`` of predicted wait, a low-priority call of
    a model in ``fallbacks`` goes to its fallback (``owner/name`` or
    ``owner/name:version``), any other is shed."""

    waits: WaitSource
    threshold_seconds: float
    fallbacks: Mapping[str, str] = field(default_factory=dict)

    def degrades(self, priority: Priority | None) -> bool:
        """Whether calls of ``priority`` give way under load (None: interactive)."""
        return priority is not None and priority is not Priority.INTERACTIVE

    def over(self, version: VersionRef) -> float | None:
        """``version``'s predicted wait where it passes the threshold, else None."""
        wait = self.waits.predicted_wait(version)
        if wait is None or wait <= self.threshold_seconds:
            return None
        return wait
