"""Distributed limiters: every gateway process shares one Redis.

Each decision is one Lua script, so it is atomic on the server, and all
clocks are Redis's own ``TIME``: gateways with drifting clocks still agree.

- Rate: GCRA, one string key per bucket holding its theoretical arrival time
  (µs since the epoch), expiring once the bucket is whole again.
- Concurrency: one sorted set per bucket; members are lease ids, scores their
  expiry (ms). Expired members are dropped before counting, so a crashed
  holder's slots come back after ``lease_seconds``; live holders renew theirs
  through a :class:`~modelport.tenancy.limits.concurrency.LeaseKeeper`.

Releases do no I/O on the caller's thread: they are queued, carried at the head of
the next pipeline this process sends (an admission's or a count's), or removed by
a releaser thread shortly after (see ``RedisConcurrencyLimiter.release``).

Redis errors become ``Unavailable`` (503 ``limiter_unavailable``): limits fail
closed rather than letting every caller through.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis
from redis.client import Pipeline
from redis.commands.core import Script

from modelport.errors import Unavailable
from modelport.keyspace import Keyspace
from modelport.tenancy.limits.concurrency import LeaseKeeper
from modelport.tenancy.limits.types import (
    UNLIMITED,
    Lease,
    RateDecision,
    RateItem,
    SlotDecision,
    SlotItem,
)

_log = logging.getLogger(__name__)

# KEYS[i]: bucket i's TAT. ARGV[1]: cost; ARGV[2i], ARGV[2i+1]: interval (µs) and limit.
# Returns {allowed, limit, remaining, reset µs, retry µs, index} of the most restrictive bucket.
# Same algorithm as inprocess.gcra. Numbers stay below 2^53, exact in Lua's doubles;
# '%.0f' writes them whole (tostring would switch to exponent notation).
_GCRA_CHECK = """
local cost = tonumber(ARGV[1])
local allowed = 1
local retry = 0
local best_remaining, best_limit, best_reset, best_index = nil, 0, 0, 0
local new_tats = {}
for i = 1, n do
  local interval = tonumber(ARGV[A + 2 * i - 1])
  local limit = tonumber(ARGV[A + 2 * i])
  local capacity = interval * limit
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  local new_tat = tat + cost * interval
  local allow_at = new_tat - capacity
  if now < allow_at then
    allowed = 0
    local wait = allow_at - now
    if wait >= retry then
      retry = wait
      best_remaining, best_limit, best_reset, best_index = -1, limit, tat - now, i
    end
  else
    new_tats[i] = new_tat
    local remaining = math.floor((now - allow_at) / interval)
    if allowed == 1 and (best_remaining == nil or remaining < best_remaining) then
      best_remaining, best_limit, best_reset, best_index = remaining, limit, new_tat - now, i
    end
  end
end
if best_remaining == nil or best_remaining < 0 then best_remaining = 0 end
local function charge()
  for i = 1, n do
    local ttl = math.ceil((new_tats[i] - now) / 1000) + 1
    redis.call('SET', KEYS[i], string.format('%.0f', new_tats[i]), 'PX', ttl)
  end
end
"""

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
"""

# KEYS[i]: bucket i's TAT. ARGV[1]: cost; ARGV[2i], ARGV[2i+1]: interval (µs) and limit.
# Returns {allowed, limit, remaining, reset µs, retry µs, index} of the most restrictive bucket.
# Same algorithm as inprocess.gcra. Numbers stay below 2^53, exact in Lua's doubles;
# '%.0f' writes them whole (tostring would switch to exponent notation).
GCRA_LUA = (
    _NOW
    + "local n, A = #KEYS, 1\n"
    + _GCRA_CHECK
    + """
if allowed == 1 then charge() end
return {allowed, best_limit, best_remaining, best_reset, retry, best_index}
"""
)

# One round trip for a call's admission: the rate allowances, then (when they pass) the
# concurrency slots. KEYS: n TAT keys, then the lease sets. ARGV[1]: cost, ARGV[2]: n,
# ARGV[3]: lease id, ARGV[4]: ttl ms, then interval and limit per TAT key, then the limit
# per lease set. Returns GCRA_LUA's six values and the index of a full lease set (0: none).
ADMIT_LUA = (
    _NOW
    + "local n, A = tonumber(ARGV[2]), 4\n"
    + _GCRA_CHECK
    + """
if allowed == 0 then return {0, best_limit, best_remaining, best_reset, retry, best_index, 0} end
charge()
local now_ms = math.floor(now / 1000)
local first = 4 + 2 * n
for j = n + 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[j], '-inf', now_ms)
  if redis.call('ZCARD', KEYS[j]) >= tonumber(ARGV[first + j - n]) then
    return {1, best_limit, best_remaining, best_reset, 0, best_index, j - n}
  end
end
local expiry = string.format('%.0f', now_ms + tonumber(ARGV[4]))
for j = n + 1, #KEYS do
  redis.call('ZADD', KEYS[j], expiry, ARGV[3])
  redis.call('PEXPIRE', KEYS[j], ARGV[4])
end
return {1, best_limit, best_remaining, best_reset, 0, best_index, 0}
"""
)

# KEYS[i]: bucket i's lease set. ARGV[1]: lease id, ARGV[2]: ttl ms, ARGV[2+i]: limit.
# Returns 0 when the lease was taken in every bucket, else the index of the full bucket.
ACQUIRE_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #KEYS do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now)
  if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[2 + i]) then return i end
end
local expiry = string.format('%.0f', now + tonumber(ARGV[2]))
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], expiry, ARGV[1])
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 0
"""

# KEYS: a lease's buckets. ARGV[1]: lease id, ARGV[2]: ttl ms. Only extends a live lease.
RENEW_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = string.format('%.0f', now + tonumber(ARGV[2]))
for i = 1, #KEYS do
  if redis.call('ZADD', KEYS[i], 'XX', 'CH', expiry, ARGV[1]) == 1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
return 0
"""

# KEYS[1]: a lease set. Drops expired leases and counts the rest.
COUNT_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
"""


@contextmanager
def _redis_errors() -> Iterator[None]:
    try:
        yield
    except redis.RedisError as exc:
        raise Unavailable(
            f"the limiter's Redis is unavailable: {exc}", code="limiter_unavailable"
        ) from exc


class _Batch:
    """Commands for one pipeline (``transaction=False``): each script stays atomic on
    the server, and they run in the order queued.

    Scripts go as plain ``EVALSHA``: redis-py's pipeline would ask ``SCRIPT EXISTS``
    first on every execute, one round trip too many. A script the server lacks (it
    restarted) is loaded and only its commands are sent again.
    """

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._pipe: Pipeline = client.pipeline(transaction=False)
        self._scripts: dict[int, tuple[Script, list[Any]]] = {}
        self._size = 0

    def command(self, *args: Any) -> int:
        """Queue a command; its index in ``execute``'s results."""
        self._pipe.execute_command(*args)
        self._size += 1
        return self._size - 1

    def script(self, script: Script, keys: Sequence[str], args: Sequence[Any]) -> int:
        call = ["EVALSHA", script.sha, len(keys), *keys, *args]
        self._scripts[self._size] = (script, call)
        return self.command(*call)

    def execute(self) -> list[Any]:
        """Every command's result, a failed command's error in its place; raises
        ``redis.RedisError`` when the batch as a whole failed (connection, timeout)."""
        if not self._size:
            return []
        results = self._pipe.execute(raise_on_error=False)
        missing = [
            i for i in self._scripts if isinstance(results[i], redis.exceptions.NoScriptError)
        ]
        if missing:
            for script in {id(self._scripts[i][0]): self._scripts[i][0] for i in missing}.values():
                self._client.script_load(script.script)
            again = self._client.pipeline(transaction=False)
            for i in missing:
                again.execute_command(*self._scripts[i][1])
            for i, result in zip(missing, again.execute(raise_on_error=False), strict=True):
                results[i] = result
        return results


def _result(results: list[Any], index: int) -> Any:
    """One command's result, raising its error."""
    result = results[index]
    if isinstance(result, Exception):
        raise result
    return result


class RedisRateLimiter:
    """GCRA shared by every process of the installation ``keys`` names."""

    def __init__(self, client: redis.Redis, keys: Keyspace) -> None:
        self._client = client
        self._prefix = keys.name("limits", "rate", "")
        self._script = client.register_script(GCRA_LUA)

    def hit(self, items: Sequence[RateItem], cost: int = 1) -> RateDecision:
        if not items:
            return UNLIMITED
        keys = [self._prefix + item.bucket for item in items]
        args: list[int] = [cost]
        for item in items:
            args += [item.interval_us(), item.limit]
        with _redis_errors():
            allowed, limit, remaining, reset, retry, index = self._script(keys=keys, args=args)
        return RateDecision(
            allowed=bool(allowed),
            limit=int(limit),
            remaining=int(remaining),
            reset_after=int(reset) / 1_000_000,
            retry_after=int(retry) / 1_000_000,
            bucket=items[int(index) - 1].bucket,
            label=items[int(index) - 1].label,
        )

    def close(self) -> None:
        """The client belongs to the caller (the composition root closes it)."""


class RedisConcurrencyLimiter:
    """Leases in Redis sorted sets, expiring after ``lease_seconds`` unless renewed.

    ``release`` queues the lease and returns: no network I/O on the caller's thread
    (an event loop's). The queued ZREMs ride at the head of the next pipeline this
    limiter (or its gate) sends, so this process's later admissions and counts see
    its earlier releases; when none goes by within ``release_delay``, a releaser
    thread (started on demand, gone after ``idle_seconds`` without work) sends them
    in one pipeline per batch. A release whose ZREM is lost (Redis error, the
    process died) comes back when the lease expires, as a crashed holder's does.
    """

    def __init__(
        self,
        client: redis.Redis,
        keys: Keyspace,
        *,
        lease_seconds: float = 30.0,
        keep_alive: bool = True,
        release_delay: float = 0.002,
        idle_seconds: float = 5.0,
    ) -> None:
        self._client = client
        self._prefix = keys.name("limits", "slots", "")
        self._ttl_ms = max(1, int(lease_seconds * 1000))
        self._acquire = client.register_script(ACQUIRE_LUA)
        self._renew = client.register_script(RENEW_LUA)
        self._count = client.register_script(COUNT_LUA)
        # Without keep-alive (tests of a crashed holder) leases simply expire.
        self._keeper = LeaseKeeper(self._renew_all, lease_seconds / 3) if keep_alive else None
        self._release_delay = release_delay
        self._idle = idle_seconds
        self._released: list[Lease] = []
        self._ready = threading.Condition(threading.Lock())
        self._releasing = False
        # Held from taking queued releases until their pipeline has run: whoever sends
        # next waits for it, so a release queued before a decision is applied before it.
        self._sending = threading.Lock()
        self.release_batches = 0
        """Pipelines that carried queued releases (tests read it)."""

    def acquire(self, items: Sequence[SlotItem]) -> SlotDecision:
        lease = Lease(secrets.token_hex(12), tuple(item.bucket for item in items))
        if not items:
            return SlotDecision(lease)
        keys = [self._prefix + bucket for bucket in lease.buckets]
        args: list[str | int] = [lease.id, self._ttl_ms, *(item.limit for item in items)]
        batch = _Batch(self._client)
        with _redis_errors():
            with self.carrying_releases(batch):
                index = batch.script(self._acquire, keys, args)
                results = batch.execute()
            full = int(_result(results, index))
        if full:
            return SlotDecision(None, refused=items[full - 1])
        if self._keeper is not None:
            self._keeper.add(lease)
        return SlotDecision(lease)

    def release(self, lease: Lease) -> None:
        """Give the lease's slots back. No I/O: queued (see the class docstring); the
        lease is no longer renewed from now on. Releasing twice is harmless (a ZREM of
        this lease's own random id)."""
        if self._keeper is not None:
            self._keeper.discard(lease)
        if not lease.buckets:
            return
        with self._ready:
            self._released.append(lease)
            if self._releasing:
                self._ready.notify()
            else:
                self._releasing = True
                threading.Thread(
                    target=self._run_releases, name="modelport-lease-release", daemon=True
                ).start()

    @contextmanager
    def carrying_releases(self, batch: _Batch) -> Iterator[None]:
        """Put the queued releases at the head of ``batch``, which the block executes.
        Waits for releases another thread is sending, so the block's commands see every
        release queued before it started."""
        self._sending.acquire()
        with self._ready:
            leases, self._released = self._released, []
        if not leases:
            self._sending.release()
            yield
            return
        try:
            # Their results matter to no one: a lease already gone is released already.
            self._queue_releases(batch, leases)
            yield
            self.release_batches += 1
        except redis.RedisError:
            _log.warning("%d queued lease releases were lost; they expire", len(leases))
            raise
        finally:
            self._sending.release()

    def flush(self) -> None:
        """Send the queued releases now and wait for them (blocking). Errors are logged,
        not raised: those leases expire after ``lease_seconds``."""
        batch = _Batch(self._client)
        try:
            with self.carrying_releases(batch):
                batch.execute()
        except redis.RedisError:
            pass  # logged by carrying_releases

    def _queue_releases(self, batch: _Batch, leases: Sequence[Lease]) -> None:
        for lease in leases:
            for bucket in lease.buckets:
                batch.command("ZREM", self._prefix + bucket, lease.id)

    def _run_releases(self) -> None:
        while True:
            with self._ready:
                if not self._released:
                    self._ready.wait(self._idle)
                if not self._released:
                    self._releasing = False
                    return
            # An admission under way most likely carries them first: one round trip fewer.
            time.sleep(self._release_delay)
            try:
                self.flush()
            except Exception:  # never let the thread die with releases queued
                _log.exception("releasing concurrency leases failed")

    def _renew_all(self, leases: Sequence[Lease]) -> None:
        batch = _Batch(self._client)
        for lease in leases:
            keys = [self._prefix + bucket for bucket in lease.buckets]
            batch.script(self._renew, keys, [lease.id, self._ttl_ms])
        for result in batch.execute():
            if isinstance(result, Exception):
                raise result

    def in_use(self, bucket: str) -> int:
        """Slots held in ``bucket``, after this process's queued releases."""
        batch = _Batch(self._client)
        with _redis_errors():
            with self.carrying_releases(batch):
                index = batch.script(self._count, [self._prefix + bucket], [])
                results = batch.execute()
            return int(_result(results, index))

    def close(self) -> None:
        """Stop renewing and send what is queued (a release lost here expires)."""
        if self._keeper is not None:
            self._keeper.close()
        self.flush()


@dataclass(frozen=True, slots=True)
class GateRequest:
    """One call's admission: rate allowances charged ``cost``, then slots."""

    rate_items: Sequence[RateItem]
    cost: int
    slot_items: Sequence[SlotItem]


GateAnswer = tuple[RateDecision, SlotDecision | None]


class RedisGate:
    """A call's rate allowances and concurrency slots in one script (``ADMIT_LUA``).

    Same decisions as ``rates.hit`` followed by ``slots.acquire``: a rate refusal
    charges nothing; a concurrency refusal after the rate passed keeps the charge.
    ``admit_many`` sends many calls' scripts in one pipeline, decided as if one by one
    in that order (each script is atomic on the server).
    """

    def __init__(self, rates: RedisRateLimiter, slots: RedisConcurrencyLimiter) -> None:
        self._rates = rates
        self._slots = slots
        self._script = slots._client.register_script(ADMIT_LUA)

    def admit(
        self, rate_items: Sequence[RateItem], cost: int, slot_items: Sequence[SlotItem]
    ) -> GateAnswer:
        """The rate decision, and the slot decision when the rate passed (else None)."""
        (answer,) = self.admit_many([GateRequest(rate_items, cost, slot_items)])
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def admit_many(self, requests: Sequence[GateRequest]) -> list[GateAnswer | Unavailable]:
        """Each request's answer, or ``Unavailable`` for one whose script failed; raises
        ``Unavailable`` when the pipeline as a whole failed. Releases queued before the
        call are applied first, in the same pipeline."""
        slots = self._slots
        batch = _Batch(slots._client)
        calls: list[tuple[int, Lease]] = []
        with _redis_errors(), slots.carrying_releases(batch):
            for request in requests:
                lease = Lease(
                    secrets.token_hex(12), tuple(item.bucket for item in request.slot_items)
                )
                keys = [self._rates._prefix + item.bucket for item in request.rate_items]
                keys += [slots._prefix + bucket for bucket in lease.buckets]
                args: list[str | int] = [
                    request.cost,
                    len(request.rate_items),
                    lease.id,
                    slots._ttl_ms,
                ]
                for item in request.rate_items:
                    args += [item.interval_us(), item.limit]
                args += [item.limit for item in request.slot_items]
                calls.append((batch.script(self._script, keys, args), lease))
            results = batch.execute()
        answers: list[GateAnswer | Unavailable] = []
        for request, (index, lease) in zip(requests, calls, strict=True):
            try:
                with _redis_errors():
                    answers.append(self._decide(request, lease, _result(results, index)))
            except Unavailable as exc:
                answers.append(exc)
        return answers

    def release(self, lease: Lease) -> None:
        """Give back a lease ``admit_many`` took (no I/O, see the limiter)."""
        self._slots.release(lease)

    def _decide(self, request: GateRequest, lease: Lease, raw: Sequence[Any]) -> GateAnswer:
        allowed, limit, remaining, reset, retry, index, full = raw
        rate_items, slot_items = request.rate_items, request.slot_items
        decision = UNLIMITED
        if rate_items:
            item = rate_items[int(index) - 1]
            decision = RateDecision(
                allowed=bool(allowed),
                limit=int(limit),
                remaining=int(remaining),
                reset_after=int(reset) / 1_000_000,
                retry_after=int(retry) / 1_000_000,
                bucket=item.bucket,
                label=item.label,
            )
        if not allowed:
            return decision, None
        if int(full):
            return decision, SlotDecision(None, refused=slot_items[int(full) - 1])
        if self._slots._keeper is not None and lease.buckets:
            self._slots._keeper.add(lease)
        return decision, SlotDecision(lease)
