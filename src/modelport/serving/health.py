"""Backend health: a board of per-backend breakers and probe results, and the prober.

``HealthBoard`` is what the dispatcher consults: for every registered backend, its
``CircuitBreaker`` and what the last health probe saw. ``HealthProber`` is the
background task that calls ``Backend.health()`` on every registered backend each
``interval`` seconds (never on the request path) and reports each probe to the
backend's breaker like a call: an unhealthy answer is a failure, so a dead backend
that gets no traffic still opens; while open, probes are skipped; once the
cool-down is over a probe is the half-open trial that closes it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from modelport.background.loops import BackgroundTask
from modelport.clock import Clock
from modelport.observability.serving_metrics import ServingMetrics
from modelport.serving.backends.base import Backend
from modelport.serving.breaker import BreakerConfig, BreakerState, CircuitBreaker
from modelport.serving.types import Health

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackendStatus:
    name: str
    health: Health
    """What the last probe saw (``unknown`` before the first)."""
    breaker: BreakerState
    retry_after: float


class HealthBoard:
    """Breakers and last probe results by backend name."""

    def __init__(
        self,
        config: BreakerConfig = BreakerConfig(),
        *,
        clock: Callable[[], float] = time.monotonic,
        metrics: ServingMetrics | None = None,
        on_change: Callable[[str, BreakerState, BreakerState], None] | None = None,
    ) -> None:
        """``on_change(backend, before, after)`` is called on every breaker transition."""
        self.config = config
        self._clock = clock
        self._metrics = metrics
        self._on_change = on_change
        self._backends: dict[str, Backend] = {}
        self._breakers: dict[str, CircuitBreaker] = {}
        self._health: dict[str, Health] = {}

    # ---- membership (the prober probes what is registered)
    def register(self, backend: Backend) -> None:
        """Probe ``backend`` from now on (replacing one of the same name; its breaker stays)."""
        self._backends[backend.name] = backend
        self.breaker(backend.name)

    def unregister(self, name: str) -> Backend | None:
        self._health.pop(name, None)
        self._breakers.pop(name, None)
        return self._backends.pop(name, None)

    def backends(self) -> list[Backend]:
        return list(self._backends.values())

    # ---- state
    def breaker(self, name: str) -> CircuitBreaker:
        breaker = self._breakers.get(name)
        if breaker is None:
            breaker = self._breakers[name] = CircuitBreaker(
                self.config, clock=self._clock, on_change=self._changed(name)
            )
            if self._metrics is not None:
                self._metrics.breaker(name, BreakerState.CLOSED, changed=False)
        return breaker

    def health(self, name: str) -> Health:
        return self._health.get(name, Health.UNKNOWN)

    def status(self, name: str) -> BackendStatus:
        snap = self.breaker(name).snapshot()
        return BackendStatus(name, self.health(name), snap.state, snap.retry_after)

    def statuses(self) -> list[BackendStatus]:
        return [self.status(name) for name in sorted(self._backends)]

    def record_probe(self, name: str, health: Health, epoch: int | None = None) -> None:
        self._health[name] = health
        if self._metrics is not None:
            self._metrics.backend_health(name, health is Health.HEALTHY)
        breaker = self.breaker(name)
        if health is Health.HEALTHY:
            breaker.on_success(epoch)
        elif health is Health.UNHEALTHY:
            breaker.on_failure(epoch)
        else:
            breaker.on_ignored(epoch)

    def _changed(self, name: str) -> Callable[[BreakerState, BreakerState], None]:
        def changed(before: BreakerState, after: BreakerState) -> None:
            log.warning("backend %s: circuit breaker %s -> %s", name, before, after)
            if self._metrics is not None:
                self._metrics.breaker(name, after)
            if self._on_change is not None:
                self._on_change(name, before, after)

        return changed


class HealthProber:
    """Probes every backend on a board each ``interval`` seconds (on ``clock``, the
    system's by default), each within ``timeout``."""

    def __init__(
        self,
        board: HealthBoard,
        *,
        interval: float = 5.0,
        timeout: float = 2.0,
        clock: Clock | None = None,
    ) -> None:
        if interval <= 0 or timeout <= 0:
            raise ValueError("interval and timeout must be positive")
        self.board = board
        self.clock = clock
        self.interval = interval
        self.timeout = timeout
        self.rounds = 0

    async def probe_once(self) -> None:
        """Probe every registered backend whose breaker lets a call through, concurrently."""
        await asyncio.gather(*(self._probe(b) for b in self.board.backends()))
        self.rounds += 1

    async def _probe(self, backend: Backend) -> None:
        breaker = self.board.breaker(backend.name)
        if not breaker.try_acquire():
            return  # open: wait for the cool-down, then this probe is the trial
        epoch = breaker.epoch
        try:
            health = await asyncio.wait_for(backend.health(), self.timeout)
        except asyncio.CancelledError:
            breaker.on_ignored(epoch)
            raise
        except Exception as exc:  # a probe that raises or times out: the backend is unhealthy
            log.info("health probe of %s failed: %r", backend.name, exc)
            health = Health.UNHEALTHY
        self.board.record_probe(backend.name, health, epoch)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[HealthProber]:
        """Probe every ``interval`` seconds (start to start) as a background task for
        the duration of the block."""
        prober = BackgroundTask("health-prober", self.probe_once, self.interval, clock=self.clock)
        async with prober.running():
            yield self
