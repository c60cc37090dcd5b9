"""Distributed limiters: every gateway process shares one Redis.

Each decision is one Lua script, so it is atomic on the server, and all
clocks are Redis's own ``TIME``: gateways with drifting clocks still agree.

- Rate: GCRA, one string key per bucket holding its theoretical arrival time
  (µs since the epoch), expiring once the bucket is whole again.
- Concurrency: one sorted set per bucket; members are lease ids, scores their
  expiry (ms). Expired members are dropped before counting, so a crashed
  holder's slots come back after ``lease_seconds``; live holders renew theirs
  through a :class:`~modelport.tenancy.limits.concurrency.LeaseKeeper`.

Redis errors become ``Unavailable`` (503 ``limiter_unavailable``): limits fail
closed rather than letting every caller through.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import redis

from modelport.errors import Unavailable
from modelport.tenancy.limits.concurrency import LeaseKeeper
from modelport.tenancy.limits.types import (
    UNLIMITED,
    Lease,
    RateDecision,
    RateItem,
    SlotDecision,
    SlotItem,
)

DEFAULT_PREFIX = "modelport:limits:"

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


class RedisRateLimiter:
    """GCRA shared by every process using the same Redis and ``prefix``."""

    def __init__(self, client: redis.Redis, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        self._prefix = prefix + "rate:"
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
    """Leases in Redis sorted sets, expiring after ``lease_seconds`` unless renewed."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        lease_seconds: float = 30.0,
        keep_alive: bool = True,
    ) -> None:
        self._client = client
        self._prefix = prefix + "slots:"
        self._ttl_ms = max(1, int(lease_seconds * 1000))
        self._acquire = client.register_script(ACQUIRE_LUA)
        self._renew = client.register_script(RENEW_LUA)
        self._count = client.register_script(COUNT_LUA)
        # Without keep-alive (tests of a crashed holder) leases simply expire.
        self._keeper = LeaseKeeper(self._renew_all, lease_seconds / 3) if keep_alive else None

    def acquire(self, items: Sequence[SlotItem]) -> SlotDecision:
        lease = Lease(secrets.token_hex(12), tuple(item.bucket for item in items))
        if not items:
            return SlotDecision(lease)
        keys = [self._prefix + bucket for bucket in lease.buckets]
        args: list[str | int] = [lease.id, self._ttl_ms, *(item.limit for item in items)]
        with _redis_errors():
            full = int(self._acquire(keys=keys, args=args))
        if full:
            return SlotDecision(None, refused=items[full - 1])
        if self._keeper is not None:
            self._keeper.add(lease)
        return SlotDecision(lease)

    def release(self, lease: Lease) -> None:
        if self._keeper is not None:
            self._keeper.discard(lease)
        if not lease.buckets:
            return
        with _redis_errors():
            pipe = self._client.pipeline(transaction=False)
            for bucket in lease.buckets:
                pipe.zrem(self._prefix + bucket, lease.id)
            pipe.execute()

    def _renew_all(self, leases: Sequence[Lease]) -> None:
        pipe = self._client.pipeline(transaction=False)
        for lease in leases:
            keys = [self._prefix + bucket for bucket in lease.buckets]
            self._renew(keys=keys, args=[lease.id, self._ttl_ms], client=pipe)
        pipe.execute()

    def in_use(self, bucket: str) -> int:
        with _redis_errors():
            return int(self._count(keys=[self._prefix + bucket]))

    def close(self) -> None:
        if self._keeper is not None:
            self._keeper.close()


class RedisGate:
    """A call's rate allowances and concurrency slots in one round trip (``ADMIT_LUA``).

    Same decisions as ``rates.hit`` followed by ``slots.acquire``: a rate refusal
    charges nothing; a concurrency refusal after the rate passed keeps the charge.
    """

    def __init__(self, rates: RedisRateLimiter, slots: RedisConcurrencyLimiter) -> None:
        self._rates = rates
        self._slots = slots
        self._script = slots._client.register_script(ADMIT_LUA)

    def admit(
        self, rate_items: Sequence[RateItem], cost: int, slot_items: Sequence[SlotItem]
    ) -> tuple[RateDecision, SlotDecision | None]:
        """The rate decision, and the slot decision when the rate passed (else None)."""
        slots = self._slots
        lease = Lease(secrets.token_hex(12), tuple(item.bucket for item in slot_items))
        keys = [self._rates._prefix + item.bucket for item in rate_items]
        keys += [slots._prefix + bucket for bucket in lease.buckets]
        args: list[str | int] = [cost, len(rate_items), lease.id, slots._ttl_ms]
        for item in rate_items:
            args += [item.interval_us(), item.limit]
        args += [item.limit for item in slot_items]
        with _redis_errors():
            allowed, limit, remaining, reset, retry, index, full = self._script(
                keys=keys, args=args
            )
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
        if slots._keeper is not None and lease.buckets:
            slots._keeper.add(lease)
        return decision, SlotDecision(lease)
