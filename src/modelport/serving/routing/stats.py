"""Per-version traffic windows (requests, errors, latencies) and shadow comparisons.

Kept in this process's memory: the canary controller judges the candidate on the
traffic this process routed. Latencies keep the last ``MAX_SAMPLES`` of a window.
Thread-safe: recorded on the event loop, read from anywhere.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelport.serving.endpoints.types import ShadowStats, Stats

MAX_SAMPLES = 4096
RECENT_SHADOW = 20


def _percentiles(samples: deque[float] | list[float]) -> tuple[float, float]:
    if not samples:
        return 0.0, 0.0
    p50, p99 = np.percentile(np.fromiter(samples, dtype=np.float64), [50, 99])
    return float(p50), float(p99)


@dataclass
class _Window:
    requests: int = 0
    errors: int = 0
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=MAX_SAMPLES))


@dataclass
class _Shadow:
    requests: int = 0
    errors: int = 0
    dropped: int = 0
    disagreements: int = 0
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=MAX_SAMPLES))
    primary: deque[float] = field(default_factory=lambda: deque(maxlen=MAX_SAMPLES))
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_SHADOW))


class TrafficStats:
    """Windows keyed by (deployment, version ref); ``reset`` starts a deployment's anew."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: dict[tuple[int, str], _Window] = {}
        self._shadows: dict[tuple[int, str], _Shadow] = {}

    # ---- traffic
    def record(self, deployment: int, ref: str, seconds: float, *, ok: bool) -> None:
        with self._lock:
            window = self._windows.setdefault((deployment, ref), _Window())
            window.requests += 1
            if ok:
                window.latencies.append(seconds)
            else:
                window.errors += 1

    def window(self, deployment: int, ref: str) -> Stats:
        with self._lock:
            window = self._windows.get((deployment, ref))
            if window is None:
                return Stats()
            requests, errors, samples = window.requests, window.errors, list(window.latencies)
        p50, p99 = _percentiles(samples)
        return Stats(requests=requests, errors=errors, p50=p50, p99=p99)

    def reset(self, deployment: int) -> None:
        with self._lock:
            for key in [k for k in self._windows if k[0] == deployment]:
                del self._windows[key]

    # ---- shadow
    def shadow_dropped(self, deployment: int, ref: str) -> None:
        with self._lock:
            self._shadows.setdefault((deployment, ref), _Shadow()).dropped += 1

    def shadow_result(
        self,
        deployment: int,
        ref: str,
        *,
        prediction_id: str,
        seconds: float,
        primary_seconds: float,
        agreed: bool | None,
        detail: str,
    ) -> None:
        """One shadow answer (``agreed`` None: the shadow failed)."""
        with self._lock:
            shadow = self._shadows.setdefault((deployment, ref), _Shadow())
            shadow.requests += 1
            shadow.primary.append(primary_seconds)
            if agreed is None:
                shadow.errors += 1
            else:
                shadow.latencies.append(seconds)
                shadow.disagreements += 0 if agreed else 1
            shadow.recent.append(
                {
                    "prediction_id": prediction_id,
                    "agreed": agreed,
                    "latency_ms": seconds * 1000,
                    "primary_latency_ms": primary_seconds * 1000,
                    "detail": detail,
                }
            )

    def shadow(self, deployment: int, ref: str) -> tuple[ShadowStats, list[dict[str, Any]]]:
        with self._lock:
            shadow = self._shadows.get((deployment, ref))
            if shadow is None:
                return ShadowStats(), []
            latencies, primary = list(shadow.latencies), list(shadow.primary)
            counts = (shadow.requests, shadow.errors, shadow.dropped, shadow.disagreements)
            recent = list(shadow.recent)
        p50, p99 = _percentiles(latencies)
        primary_p50, primary_p99 = _percentiles(primary)
        requests, errors, dropped, disagreements = counts
        stats = ShadowStats(
            requests=requests,
            errors=errors,
            dropped=dropped,
            disagreements=disagreements,
            p50=p50,
            p99=p99,
            primary_p50=primary_p50,
            primary_p99=primary_p99,
        )
        return stats, recent
