"""Redis limits without blocking the caller: releases queued off the caller's thread,
admissions of concurrent calls sent in shared pipelines (real Redis)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from modelport.app import build_keyspace, build_limits
from modelport.config import Settings
from modelport.errors import Overloaded, Unavailable
from modelport.store import Database, create_database
from modelport.tenancy.limits import (
    Lease,
    LimitService,
    RateItem,
    RateLimited,
    ScopeType,
    SlotItem,
    Subject,
)
from modelport.tenancy.limits.admitter import GroupAdmitter
from modelport.tenancy.limits.redis import RedisConcurrencyLimiter, RedisGate, RedisRateLimiter
from tests.databases import migrated_sqlite
from tests.limits.conftest import KEYS, Platform, PlatformFactory
from tests.polling import eventually


class SilentServer:
    """A server that accepts connections and never answers, until ``hang_up``."""

    def __init__(self) -> None:
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(16)
        self.port: int = self._server.getsockname()[1]
        self._accepted: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        self._server.settimeout(0.1)
        while not self._stop.is_set():
            try:
                self._accepted.append(self._server.accept()[0])
            except OSError:
                continue

    def hang_up(self) -> None:
        """Close every connection and stop listening: a call waiting for an answer, or
        connecting anew, fails at once instead of at its timeout."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        for conn in self._accepted:
            conn.close()
        self._server.close()


@pytest.fixture
def silent() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.hang_up()


# ---- releasing


def test_release_returns_at_once_when_redis_does_not_answer(silent: SilentServer) -> None:
    client = redis.Redis(
        port=silent.port,
        socket_timeout=10,
        socket_connect_timeout=10,
        retry=Retry(NoBackoff(), 0),
    )
    slots = RedisConcurrencyLimiter(client, KEYS, keep_alive=False, release_delay=0)
    started = time.monotonic()
    for i in range(100):
        slots.release(Lease(f"lease{i}", ("b",)))
    assert time.monotonic() - started < 2  # far under one round trip that never ends
    silent.hang_up()  # rather than wait out the socket timeout of the round trip under way
    slots.close()  # the lost releases are logged, not raised: the leases expire
    client.close()


def test_a_released_slot_comes_free_promptly_for_every_process(
    redis_client: redis.Redis, redis_url: str
) -> None:
    slots = RedisConcurrencyLimiter(redis_client, KEYS)
    other_client = redis.Redis.from_url(redis_url)
    other = RedisConcurrencyLimiter(other_client, KEYS)  # another gateway: carries nothing of ours
    try:
        lease = slots.acquire([SlotItem("b", 1)]).lease
        assert lease is not None
        assert other.acquire([SlotItem("b", 1)]).lease is None
        slots.release(lease)
        assert slots._keeper is not None and slots._keeper.held() == []  # renewals stop
        assert eventually(lambda: other.in_use("b") == 0, 2.0)
        assert eventually(lambda: slots.release_batches == 1, 2.0)
    finally:
        other.close()
        other_client.close()
        slots.close()


def test_this_process_sees_its_own_release_at_its_next_admission(redis_client: redis.Redis) -> None:
    # The releaser would wait a minute: the acquire carries the release itself.
    slots = RedisConcurrencyLimiter(redis_client, KEYS, release_delay=60)
    gate = RedisGate(RedisRateLimiter(redis_client, KEYS), slots)
    try:
        for _ in range(20):
            _, slot = gate.admit([], 1, [SlotItem("b", 1)])
            assert slot is not None and slot.lease is not None
            slots.release(slot.lease)
            lease = slots.acquire([SlotItem("b", 1)]).lease
            assert lease is not None
            slots.release(lease)
        assert slots.release_batches == 39  # the last release is still queued
    finally:
        slots.close()


def test_releasing_twice_never_frees_another_holders_slot(redis_client: redis.Redis) -> None:
    slots = RedisConcurrencyLimiter(redis_client, KEYS)
    try:
        first = slots.acquire([SlotItem("b", 1)]).lease
        assert first is not None
        slots.release(first)
        second = slots.acquire([SlotItem("b", 1)]).lease
        assert second is not None
        slots.release(first)
        slots.flush()
        assert slots.acquire([SlotItem("b", 1)]).lease is None
        assert slots.in_use("b") == 1
        slots.release(second)
        assert slots.in_use("b") == 0
    finally:
        slots.close()


def test_close_sends_what_is_queued(redis_client: redis.Redis, redis_url: str) -> None:
    slots = RedisConcurrencyLimiter(redis_client, KEYS, release_delay=60)
    lease = slots.acquire([SlotItem("b", 2)]).lease
    assert lease is not None
    slots.release(lease)
    assert redis_client.zcard(KEYS.name("limits", "slots", "b")) == 1  # still queued
    slots.close()
    assert redis_client.zcard(KEYS.name("limits", "slots", "b")) == 0


def test_a_lost_release_still_expires(redis_client: redis.Redis) -> None:
    """The ZREM never reaches Redis (the process dies, or Redis errs): the lease comes
    back after ``lease_seconds``, as a crashed holder's does."""
    slots = RedisConcurrencyLimiter(
        redis_client, KEYS, lease_seconds=0.5, keep_alive=False, release_delay=60
    )
    lease = slots.acquire([SlotItem("b", 1)]).lease
    assert lease is not None
    slots.release(lease)  # queued, and held back by the delay...
    assert redis_client.zcard(KEYS.name("limits", "slots", "b")) == 1
    with slots._ready:
        slots._released.clear()  # ...then lost, as if the process died here
    assert eventually(lambda: slots.in_use("b") == 0, 2.0)
    slots.close()


# ---- group admission


def admitter_on(redis_client: redis.Redis) -> tuple[GroupAdmitter, RedisConcurrencyLimiter]:
    slots = RedisConcurrencyLimiter(redis_client, KEYS)
    return GroupAdmitter(RedisGate(RedisRateLimiter(redis_client, KEYS), slots)), slots


async def admit_at_once(
    admitter: GroupAdmitter, n: int, rate: list[RateItem], slot: list[SlotItem]
) -> list:
    return await asyncio.gather(*(admitter.admit(rate, 1, slot) for _ in range(n)))


def test_concurrent_admissions_share_pipelines_and_decide_as_one_by_one(
    redis_client: redis.Redis,
) -> None:
    admitter, slots = admitter_on(redis_client)
    try:
        # 50 an hour: no unit comes back (one each 72 s) while a loaded machine admits 200.
        rate = [RateItem("r", 50, period=3600, label="tenant acme")]
        slot = [SlotItem("s", 1000)]
        answers = asyncio.run(admit_at_once(admitter, 200, rate, slot))
        allowed = [d for d, _ in answers if d.allowed]
        assert len(allowed) == 50  # exactly the limit
        assert sorted(d.remaining for d in allowed) == list(range(50))
        assert all(s is None for d, s in answers if not d.allowed)
        assert all(d.retry_after > 0 for d, _ in answers if not d.allowed)
        assert admitter.batches < 20  # 200 calls, a few pipelines
        assert slots.in_use("s") == 50
        for _, s in answers:
            if s is not None and s.lease is not None:
                slots.release(s.lease)
        assert slots.in_use("s") == 0
    finally:
        admitter.close()
        slots.close()


def test_grouped_concurrency_limit_is_never_exceeded(redis_client: redis.Redis) -> None:
    admitter, slots = admitter_on(redis_client)
    try:
        answers = asyncio.run(admit_at_once(admitter, 100, [], [SlotItem("s", 5)]))
        leases = [s.lease for _, s in answers if s is not None and s.lease is not None]
        refused = [s.refused for _, s in answers if s is not None and s.lease is None]
        assert len(leases) == 5 and len(refused) == 95
        assert slots.in_use("s") == 5
    finally:
        admitter.close()
        slots.close()


def test_at_concurrency_one_a_call_waits_only_for_its_own_pipeline(
    redis_client: redis.Redis,
) -> None:
    admitter, slots = admitter_on(redis_client)

    async def one_by_one() -> None:
        for _ in range(20):
            _, slot = await admitter.admit([RateItem("r", 1000)], 1, [SlotItem("s", 1)])
            assert slot is not None and slot.lease is not None
            slots.release(slot.lease)  # carried by the next call's pipeline

    try:
        asyncio.run(one_by_one())
        assert admitter.batches == 20
    finally:
        admitter.close()
        slots.close()


def test_a_redis_error_fails_the_batch_closed() -> None:
    dead = redis.Redis(port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    admitter, slots = admitter_on(dead)

    async def calls() -> list:
        return await asyncio.gather(
            *(admitter.admit([RateItem("r", 10)], 1, [SlotItem("s", 1)]) for _ in range(10)),
            return_exceptions=True,
        )

    try:
        errors = asyncio.run(calls())
        assert all(isinstance(e, Unavailable) for e in errors)
        assert {e.code for e in errors} == {"limiter_unavailable"}
    finally:
        admitter.close()
        slots.close()
        dead.close()


def test_a_cancelled_caller_leaves_no_slot_taken(redis_client: redis.Redis) -> None:
    admitter, slots = admitter_on(redis_client)

    async def cancel_while_waiting() -> None:
        task = asyncio.ensure_future(admitter.admit([], 1, [SlotItem("s", 1)]))
        await asyncio.sleep(0)  # queued
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The answer arrives after the caller left: the thread's resolution releases it.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if admitter.released:
                break
            await asyncio.sleep(0.005)

    try:
        asyncio.run(cancel_while_waiting())
        assert admitter.released == 1
        assert slots.in_use("s") == 0
    finally:
        admitter.close()
        slots.close()


# ---- through the service and /v2


ACME = Subject(tenant="acme", key="k1", model="vendor/model")


@pytest.fixture
def service(tmp_path, redis_url: str) -> Iterator[LimitService]:
    url = migrated_sqlite(tmp_path / "modelport.db")
    database: Database = create_database(url)
    settings = Settings(home=tmp_path, limits_cache_ttl_seconds=60, redis_url=redis_url)
    limits = build_limits(settings, database, build_keyspace(database))
    yield limits
    limits.close()
    database.dispose()


def test_grouped_admission_keeps_the_order_and_errors(service: LimitService) -> None:
    fields = {"rpm": 3, "concurrency": 1, "tpm": None}
    service.set_limits(ScopeType.TENANT, "acme", tenant=None, actor="test", **fields)
    service.admit(ACME).release()  # rows and budget cached
    assert service.admitter is not None and service.is_cached(ACME)
    assert not service.is_warm(ACME)

    async def calls() -> None:
        held = await service.admit_grouped(ACME)
        assert held.decision.remaining == 1
        with pytest.raises(Overloaded) as full:
            await service.admit_grouped(ACME)  # charged the rate, then refused a slot
        assert full.value.code == "concurrency_limited"
        held.release()
        with pytest.raises(RateLimited) as refused:
            await service.admit_grouped(ACME)
        assert refused.value.decision.remaining == 0 and refused.value.decision.limit == 3

    asyncio.run(calls())
    assert service.slots.in_use("slots:tenant:acme") == 0


def test_v2_infer_admits_through_the_group_and_429_carries_the_decision(
    make_platform: PlatformFactory, redis_url: str
) -> None:
    platform: Platform = make_platform(redis_url=redis_url, limits_cache_ttl_seconds=60)
    key = platform.tenant("acme", ("app", ["consumer"]))["app"]
    platform.publisher.adder()
    platform.limit(ScopeType.TENANT, "acme", rpm=3, concurrency=2)
    admitter = platform.services.limits.admitter
    assert admitter is not None
    statuses = [platform.infer(key) for _ in range(4)]
    assert [r.status_code for r in statuses] == [200, 200, 200, 429]
    assert [r.headers["RateLimit-Remaining"] for r in statuses] == ["2", "1", "0", "0"]
    assert statuses[3].headers["RateLimit-Limit"] == "3"
    assert int(statuses[3].headers["Retry-After"]) >= 19
    assert admitter.batches >= 2  # the first call read the rows in a thread, the rest grouped
    assert platform.services.limits.slots.in_use("slots:tenant:acme") == 0
