"""The pool's autoscaler: how many replicas each placed version has, grown and shrunk
with its predicted queue wait and request rate (``scaling.decide``).

State shared by the gateways lives in Redis (``ScaleStore``): each version's replica
target (``…:workers:replicas``), its calls counted over every gateway
(``…:workers:calls``) and when it was last called (``…:workers:called``, by the
injected ``Clock``'s wall time). Each gateway counts the calls it routes to the pool
(``CallCounter``) and adds them to Redis at each step; one gateway at a time, under
a short Redis lock, then decides every wanted version's target and writes those that
changed (``move_target``: not over a target changed since it was read, and no
scale-down of a version called or woken meanwhile). The placer places and removes replicas to meet the targets.

A call for a version with no ready replica wakes it (``wake``): its target becomes at
least one and its last call now, at once, so the placer places it while the call
waits (``replicas.NoReadyReplica``).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from modelport.background.loops import BackgroundLoop
from modelport.clock import Clock, SystemClock
from modelport.keyspace import Keyspace
from modelport.logs import log_event
from modelport.serving.pool.placement import PlacerLock
from modelport.serving.pool.scaling import LOW_WAIT_FRACTION, Bounds, Demand, ScalePolicy, decide
from modelport.serving.pool.view import PoolView

_log = logging.getLogger(__name__)

# Raise the target to at least one; only ever move the last call forward.
_WAKE = """
local current = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if current < 1 then redis.call('hset', KEYS[1], ARGV[1], 1) end
local last = tonumber(redis.call('hget', KEYS[2], ARGV[1]) or '0')
if tonumber(ARGV[2]) > last then redis.call('hset', KEYS[2], ARGV[1], ARGV[2]) end
return current
"""
_CALLED = """
for i = 1, #ARGV, 2 do
  local last = tonumber(redis.call('hget', KEYS[1], ARGV[i]) or '0')
  if tonumber(ARGV[i + 1]) > last then redis.call('hset', KEYS[1], ARGV[i], ARGV[i + 1]) end
end
return 0
"""
# Write a decided target only if nothing moved since it was decided: the target is still
# the one read, and a lower one is refused once the version was called (or woken) after
# the last call read.
_MOVE = """
local current = redis.call('hget', KEYS[1], ARGV[1])
if (current or '') ~= ARGV[3] then return 0 end
if tonumber(ARGV[2]) < tonumber(current) then
  local last = tonumber(redis.call('hget', KEYS[2], ARGV[1]) or '0')
  if last > tonumber(ARGV[4]) then return 0 end
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


class ScaleStore(Protocol):
    """The scaling state the gateways share (see the module)."""

    def targets(self) -> dict[str, int]:
        """Each version's replica target."""
        ...

    def set_target(self, ref: str, replicas: int) -> None: ...

    def move_target(self, ref: str, replicas: int, *, was: int, called: float) -> bool:
        """Set ``ref``'s target from ``was`` (as read) to ``replicas``, unless it changed
        since, or (a lower target) ``ref`` was called after ``called``; whether it did."""
        ...

    def initial(self, ref: str, replicas: int, at: float) -> int:
        """Set ``ref``'s target unless it has one, and its last call to ``at`` unless
        it was called (its idle time counts from its first placement); the target now."""
        ...

    def wake(self, ref: str, at: float) -> int:
        """Target at least one, last called ``at``; the target before."""
        ...

    def add_calls(self, counts: Mapping[str, int], last: Mapping[str, float]) -> None:
        """Count ``counts`` more calls, the last of each made at ``last`` (wall seconds)."""
        ...

    def calls(self) -> tuple[dict[str, int], dict[str, float]]:
        """Calls counted per version, and when each was last called."""
        ...

    def forget(self, refs: Collection[str]) -> None:
        """Drop every trace of ``refs`` (no deployment holds them)."""
        ...


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


class RedisScaleStore:
    """``ScaleStore`` on three Redis hashes (see the module)."""

    def __init__(self, client: Any, keys: Keyspace) -> None:
        self.client = client
        self._replicas = keys.name("workers", "replicas")
        self._calls = keys.name("workers", "calls")
        self._called = keys.name("workers", "called")

    def targets(self) -> dict[str, int]:
        return {_text(k): int(v) for k, v in self.client.hgetall(self._replicas).items()}

    def set_target(self, ref: str, replicas: int) -> None:
        self.client.hset(self._replicas, ref, replicas)

    def move_target(self, ref: str, replicas: int, *, was: int, called: float) -> bool:
        moved = self.client.eval(
            _MOVE, 2, self._replicas, self._called, ref, replicas, was, repr(called)
        )
        return bool(int(moved))

    def initial(self, ref: str, replicas: int, at: float) -> int:
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hsetnx(self._replicas, ref, replicas)
            pipe.hsetnx(self._called, ref, repr(at))
            pipe.hget(self._replicas, ref)
            *_, now = pipe.execute()
        return int(now)

    def wake(self, ref: str, at: float) -> int:
        return int(self.client.eval(_WAKE, 2, self._replicas, self._called, ref, repr(at)))

    def add_calls(self, counts: Mapping[str, int], last: Mapping[str, float]) -> None:
        if not counts:
            return
        with self.client.pipeline(transaction=True) as pipe:
            for ref, count in counts.items():
                pipe.hincrby(self._calls, ref, count)
            args: list[str] = []
            for ref, at in last.items():
                args += [ref, repr(at)]
            pipe.eval(_CALLED, 1, self._called, *args)
            pipe.execute()

    def calls(self) -> tuple[dict[str, int], dict[str, float]]:
        with self.client.pipeline(transaction=False) as pipe:
            pipe.hgetall(self._calls)
            pipe.hgetall(self._called)
            totals, called = pipe.execute()
        return (
            {_text(k): int(v) for k, v in totals.items()},
            {_text(k): float(v) for k, v in called.items()},
        )

    def forget(self, refs: Collection[str]) -> None:
        if not refs:
            return
        with self.client.pipeline(transaction=True) as pipe:
            for name in (self._replicas, self._calls, self._called):
                pipe.hdel(name, *refs)
            pipe.execute()


class CallCounter:
    """Calls this gateway routed to the pool, per version, and when each was last
    called (``clock``'s wall time): drained into the ``ScaleStore`` at each step, and
    counted in total for ``/metrics``."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._pending: Counter[str] = Counter()
        self._last: dict[str, float] = {}
        self.totals: Counter[str] = Counter()
        self.cold_starts: Counter[tuple[str, str]] = Counter()

    def cold_start(self, ref: str, outcome: str) -> None:
        """A call that waited for ``ref`` to start on the pool: ``served`` or ``refused``."""
        with self._lock:
            self.cold_starts[ref, outcome] += 1

    def cold_started(self) -> dict[tuple[str, str], int]:
        """Every call that waited on a cold start so far, per version and outcome."""
        with self._lock:
            return dict(self.cold_starts)

    def record(self, ref: str) -> None:
        at = self.clock.now().timestamp()
        with self._lock:
            self._pending[ref] += 1
            self._last[ref] = at
            self.totals[ref] += 1

    def counted(self) -> dict[str, int]:
        """Every call counted so far, per version."""
        with self._lock:
            return dict(self.totals)

    def drain(self) -> tuple[dict[str, int], dict[str, float]]:
        """The calls counted since the last drain, and when each version was last called."""
        with self._lock:
            pending, self._pending = self._pending, Counter()
            last, self._last = self._last, {}
        return dict(pending), last


class PoolScaler:
    """The autoscaler's periodic step on a gateway (see the module). ``wanted``: the
    versions the placer holds on the pool; ``bounds``: each live deployment version's
    ``min_replicas``/``max_replicas``; ``kick``: runs the placer now."""

    def __init__(
        self,
        view: PoolView,
        store: ScaleStore,
        lock: PlacerLock,
        counter: CallCounter,
        *,
        wanted: Callable[[], Collection[str]],
        bounds: Callable[[], Mapping[str, Bounds]],
        kick: Callable[[], object],
        policy: ScalePolicy = ScalePolicy(),
        clock: Clock | None = None,
        interval_seconds: float = 5.0,
    ) -> None:
        self.view = view
        self.store = store
        self.lock = lock
        self.counter = counter
        self.policy = policy
        self.clock = clock or SystemClock()
        self._wanted = wanted
        self._bounds = bounds
        self._kick = kick
        self._first: dict[str, float] = {}
        """When this gateway first saw each version wanted (wall seconds): its idle time
        counts from then if Redis knows no call of it."""
        self._seen: dict[str, tuple[int, float]] = {}
        """Each version's call count at the last step, and when (monotonic)."""
        self._calm: dict[str, float] = {}
        """Since when each version's wait has stayed calm (monotonic)."""
        self.loop = BackgroundLoop(
            "worker scaler", self.step, interval_seconds, clock=clock, max_backoff=5.0
        )

    def wake(self, ref: str) -> None:
        """A call wants ``ref`` and no replica is ready (see the module). The call itself
        is counted when it reaches a replica."""
        before = self.store.wake(ref, self.clock.now().timestamp())
        if before < 1:
            log_event(_log, "workers.woken", version=ref)
        self._kick()

    def step(self) -> None:
        """Add this gateway's calls to the shared count; then, if this gateway holds
        the lock, decide every wanted version's replicas."""
        counts, last = self.counter.drain()
        if counts:
            self.store.add_calls(counts, last)
        if not self.view.fresh:
            return
        self._observe()
        if not self.lock.acquire():
            return
        try:
            changed = self._decide()
        finally:
            self.lock.release()
        if changed:
            self._kick()

    def _wait(self, ref: str) -> tuple[int, float]:
        """``ref``'s ready replicas and their mean predicted wait."""
        ready = self.view.ready(ref)
        wait = sum(w.waits.get(ref, 0.0) for w in ready) / len(ready) if ready else 0.0
        return len(ready), wait

    def _observe(self) -> None:
        """Restart the calm of each wanted version whose wait is not calm now: at every
        step, the lock's or not, since the gateway holding it changes from step to step
        and a busy spell seen at another's step must still count."""
        for ref in self._wanted():
            _, wait = self._wait(ref)
            if wait >= self.policy.target_wait_seconds * LOW_WAIT_FRACTION:
                self._calm.pop(ref, None)

    def _decide(self) -> bool:
        now, mono = self.clock.now().timestamp(), self.clock.monotonic()
        wanted = set(self._wanted())
        targets = self.store.targets()
        totals, called = self.store.calls()
        bounds = self._bounds()
        changed = False
        for ref in sorted(wanted):
            current = targets.get(ref)
            if current is None or ref not in bounds:
                continue  # the placer sets its first target; no live deployment: left alone
            first = self._first.setdefault(ref, now)
            total = totals.get(ref, 0)
            seen = self._seen.get(ref)
            rate = 0.0
            if seen is not None and mono > seen[1]:
                rate = max(0, total - seen[0]) / (mono - seen[1])
            self._seen[ref] = (total, mono)
            ready, wait = self._wait(ref)
            if wait < self.policy.target_wait_seconds * LOW_WAIT_FRACTION:
                calm = mono - self._calm.setdefault(ref, mono)
            else:
                self._calm.pop(ref, None)
                calm = 0.0
            demand = Demand(
                replicas=current,
                ready=ready,
                wait_seconds=wait,
                rate=rate,
                idle_seconds=max(0.0, now - called.get(ref, first)),
                calm_seconds=calm,
            )
            target = decide(demand, bounds[ref], self.policy)
            moved = target != current and self.store.move_target(
                ref, target, was=current, called=called.get(ref, 0.0)
            )
            if moved:
                self._calm.pop(ref, None)  # a new size: calm counts again from here
                changed = True
                log_event(
                    _log,
                    "workers.scaled",
                    version=ref,
                    replicas=target,
                    before=current,
                    wait=round(wait, 4),
                    rate=round(rate, 3),
                    idle=round(demand.idle_seconds, 1),
                )
        for ref in [r for r in self._first if r not in wanted]:
            self._first.pop(ref, None)
            self._seen.pop(ref, None)
            self._calm.pop(ref, None)
        return changed

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()
