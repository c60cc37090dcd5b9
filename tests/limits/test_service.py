"""LimitService on both databases: which limits apply, the cache, token charges, budgets."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from modelport.app import build_keyspace, build_limits
from modelport.clock import ManualClock
from modelport.config import Settings
from modelport.errors import InvalidInput, NotFound, Overloaded, PaymentRequired
from modelport.store import Database, create_database, upgrade
from modelport.tenancy.limits import (
    BudgetRepository,
    LimitService,
    RateLimited,
    ScopeType,
    Subject,
    period_of,
)
from modelport.tenancy.limits.budgets import DatabaseBudgetGuard
from tests.polling import eventually

ACME = Subject(tenant="acme", key="k1", model="vendor/model")


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    if database_url.startswith("sqlite"):
        upgrade(database_url)
    db = create_database(database_url)
    yield db
    db.dispose()


@pytest.fixture(params=["in-process", "redis"])
def limit_settings(request: pytest.FixtureRequest, tmp_path) -> Settings:
    """Each service test runs with the embedded limiters and with the Redis ones."""
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else None
    return Settings(home=tmp_path, limits_cache_ttl_seconds=60, redis_url=redis_url)


@pytest.fixture
def limits(database: Database, limit_settings: Settings) -> Iterator[LimitService]:
    service = build_limits(limit_settings, database, build_keyspace(database))
    yield service
    service.close()


def put(service: LimitService, scope: ScopeType, scope_id: str, **values: int | None) -> None:
    fields = {"rpm": None, "concurrency": None, "tpm": None, **values}
    service.set_limits(scope, scope_id, tenant=None, actor="test", **fields)  # type: ignore[arg-type]


def admit_all(service: LimitService, subject: Subject, n: int) -> int:
    admitted = 0
    for _ in range(n):
        try:
            service.admit(subject).release()
            admitted += 1
        except RateLimited:
            pass
    return admitted


def test_no_rows_means_no_limits(limits: LimitService) -> None:
    admission = limits.admit(ACME)
    assert admission.decision.limit == 0
    admission.release()


def test_tenant_key_and_model_limits_all_apply(limits: LimitService) -> None:
    put(limits, ScopeType.TENANT, "acme", rpm=10)
    put(limits, ScopeType.KEY, "k1", rpm=4)
    assert admit_all(limits, ACME, 6) == 4
    # Another key of the same tenant has the rest of the tenant's allowance.
    assert admit_all(limits, Subject("acme", "k2", "vendor/model"), 10) == 6


def test_a_models_limit_holds_per_calling_tenant(limits: LimitService) -> None:
    put(limits, ScopeType.MODEL, "vendor/model", rpm=3)
    assert admit_all(limits, Subject("acme", model="vendor/model"), 5) == 3
    assert admit_all(limits, Subject("globex", model="vendor/model"), 5) == 3
    assert admit_all(limits, Subject("acme", model="vendor/other"), 5) == 5


def test_refusal_says_which_limit_and_when_to_retry(limits: LimitService) -> None:
    put(limits, ScopeType.MODEL, "vendor/model", rpm=1)
    limits.admit(ACME).release()
    with pytest.raises(RateLimited) as info:
        limits.admit(ACME)
    error = info.value
    assert error.code == "rate_limited" and error.kind == "overloaded"
    assert "model vendor/model" in error.message
    assert error.extra["retry_after"] == 60
    assert error.decision.limit == 1


def test_concurrency_refuses_at_once_and_frees_on_release(limits: LimitService) -> None:
    put(limits, ScopeType.TENANT, "acme", concurrency=2)
    first, second = limits.admit(ACME), limits.admit(ACME)
    with pytest.raises(Overloaded) as info:
        limits.admit(ACME)
    assert info.value.code == "concurrency_limited"
    assert "tenant acme" in info.value.message
    first.release()
    first.release()
    third = limits.admit(ACME)
    second.release()
    third.release()
    assert limits.slots.in_use("slots:tenant:acme") == 0


def test_api_and_inference_are_counted_apart(limits: LimitService) -> None:
    put(limits, ScopeType.TENANT, "acme", rpm=2)
    limits.check_rate(ACME)
    limits.check_rate(ACME)
    with pytest.raises(RateLimited):
        limits.check_rate(ACME)
    assert admit_all(limits, ACME, 3) == 2


def test_a_concurrency_refusal_keeps_the_rate_charge(limits: LimitService) -> None:
    put(limits, ScopeType.TENANT, "acme", rpm=3, concurrency=1)
    held = limits.admit(ACME)
    with pytest.raises(Overloaded):
        limits.admit(ACME)
    held.release()
    last = limits.admit(ACME)
    assert last.decision.remaining == 0  # three charged: held, refused, last
    last.release()
    with pytest.raises(RateLimited):
        limits.admit(ACME)
    assert limits.slots.in_use("slots:tenant:acme") == 0


def test_token_charges(limits: LimitService) -> None:
    put(limits, ScopeType.KEY, "k1", tpm=1000)
    assert limits.charge_tokens(ACME, 900).remaining == 100
    with pytest.raises(RateLimited) as info:
        limits.charge_tokens(ACME, 200)
    assert "tokens per minute" in info.value.message


def test_changes_apply_at_once_here_and_after_the_ttl_elsewhere(
    limits: LimitService, database: Database, limit_settings: Settings
) -> None:
    other = build_limits(limit_settings, database, build_keyspace(database))
    try:
        assert admit_all(other, ACME, 3) == 3  # caches "no limits" for acme
        put(limits, ScopeType.TENANT, "acme", rpm=1)
        assert admit_all(limits, ACME, 3) == 1
        assert admit_all(other, ACME, 3) == 3  # still within its cache TTL
        other.policy.invalidate()
        # With Redis both count in one allowance, which the first service has used up.
        assert admit_all(other, ACME, 3) == (0 if limit_settings.store.redis_url else 1)
    finally:
        other.close()


def test_delete_and_validation(limits: LimitService) -> None:
    put(limits, ScopeType.TENANT, "acme", rpm=1)
    assert limits.get_limits(ScopeType.TENANT, "acme").rpm == 1
    limits.delete_limits(ScopeType.TENANT, "acme")
    assert admit_all(limits, ACME, 3) == 3
    with pytest.raises(NotFound):
        limits.delete_limits(ScopeType.TENANT, "acme")
    with pytest.raises(NotFound):
        limits.get_limits(ScopeType.KEY, "nope")
    for cap in (-1, 2**63):  # the column is 64-bit: a cap past it is bad input, not a 500
        with pytest.raises(InvalidInput):
            limits.set_budget("acme", hard_cap_micros=cap, soft_cap_micros=None)


def test_hard_cap_refuses_and_releases_the_slot(limits: LimitService) -> None:
    put(limits, ScopeType.TENANT, "acme", concurrency=1)
    limits.set_budget("acme", hard_cap_micros=1_000, soft_cap_micros=None)
    limits.add_spent("acme", 999)
    limits.admit(ACME).release()
    limits.add_spent("acme", 1)
    with pytest.raises(PaymentRequired) as info:
        limits.admit(ACME)
    assert info.value.code == "budget_exceeded"
    assert info.value.extra == {"spent_micros": 1_000, "cap_micros": 1_000}
    assert limits.slots.in_use("slots:tenant:acme") == 0
    limits.set_budget("acme", hard_cap_micros=None, soft_cap_micros=None)
    limits.admit(ACME).release()


def test_soft_cap_alert_is_recorded_once_per_period(
    limits: LimitService, database: Database
) -> None:
    limits.set_budget("acme", hard_cap_micros=None, soft_cap_micros=500)
    limits.add_spent("acme", 400)
    limits.admit(ACME).release()
    assert limits.budget_alerts("acme") == []
    limits.add_spent("acme", 100)
    for _ in range(3):
        limits.admit(ACME).release()
    # A second gateway (its own memory of what it alerted) must not record it again.
    other = DatabaseBudgetGuard(BudgetRepository(database), ttl_seconds=0)
    other.check("acme")
    alerts = limits.budget_alerts("acme")
    assert [(a.kind, a.spent_micros, a.cap_micros) for a in alerts] == [("soft_cap", 500, 500)]
    assert alerts[0].period == period_of(datetime.now(UTC))


def test_a_burst_past_both_caps_is_refused_and_still_alerts_at_the_soft_cap(
    limits: LimitService,
) -> None:
    # Within one cache period the tenant went from under the soft cap to over the hard
    # cap: the call is refused, and the soft-cap alert is recorded all the same.
    limits.set_budget("acme", hard_cap_micros=1_000, soft_cap_micros=500)
    limits.add_spent("acme", 400)
    limits.admit(ACME).release()
    limits.add_spent("acme", 700)
    for _ in range(2):
        with pytest.raises(PaymentRequired):
            limits.admit(ACME)
    alerts = limits.budget_alerts("acme")
    assert [(a.kind, a.spent_micros, a.cap_micros) for a in alerts] == [("soft_cap", 1_100, 500)]


def test_soft_cap_alerts_race_to_exactly_one(database: Database) -> None:
    repository = BudgetRepository(database)
    repository.put("acme", hard_cap_micros=None, soft_cap_micros=1)
    repository.add_spent("acme", 5)
    guards = [DatabaseBudgetGuard(repository, ttl_seconds=0) for _ in range(8)]
    barrier = threading.Barrier(len(guards))

    def check(guard: DatabaseBudgetGuard) -> None:
        barrier.wait()
        guard.check("acme")

    threads = [threading.Thread(target=check, args=(g,)) for g in guards]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(repository.alerts("acme")) == 1


def test_spending_starts_again_in_a_new_period(database: Database) -> None:
    now = [datetime(2026, 11, 30, 23, 59, tzinfo=UTC)]
    repository = BudgetRepository(database, now=lambda: now[0])
    repository.put("acme", hard_cap_micros=100, soft_cap_micros=None)
    repository.add_spent("acme", 100)
    guard = DatabaseBudgetGuard(repository, ttl_seconds=0, now=lambda: now[0])
    with pytest.raises(PaymentRequired):
        guard.check("acme")
    now[0] = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
    guard.check("acme")  # December has spent nothing yet
    assert repository.add_spent("acme", 30).spent_micros == 30
    assert repository.get("acme").period == "2026-12"  # type: ignore[union-attr]


def test_stale_rows_serve_calls_while_one_refresh_reads_them_again(
    database: Database, tmp_path
) -> None:
    clock = ManualClock()
    service = build_limits(
        Settings(home=tmp_path, limits_cache_ttl_seconds=0.2),
        database,
        build_keyspace(database),
        clock,
    )
    try:
        service.admit(ACME).release()  # rows and budget cached: no limits
        assert service.is_warm(ACME)
        # Another gateway sets a limit: this process learns it only by reading again.
        service.repository.put(
            ScopeType.TENANT, "acme", tenant=None, rpm=1, concurrency=None, tpm=None, actor="t"
        )
        clock.advance(0.25)
        assert service.policy.staleness(ACME) > 0  # type: ignore[operator]
        deadline = time.monotonic() + 30
        assert service.is_warm(ACME)  # stale, but usable: the refresh runs in a thread
        while service.policy.staleness(ACME) > 0 and time.monotonic() < deadline:  # type: ignore[operator]
            time.sleep(0.02)
        service.admit(ACME, stale_ok=True).release()
        with pytest.raises(RateLimited):
            service.admit(ACME, stale_ok=True)
    finally:
        service.close()


def test_stale_subjects_are_refreshed_in_turn_by_one_thread(database: Database, tmp_path) -> None:
    clock = ManualClock()
    service = build_limits(
        Settings(home=tmp_path, limits_cache_ttl_seconds=0.2),
        database,
        build_keyspace(database),
        clock,
    )
    subjects = [Subject(tenant=f"t{i}", key="k1", model="vendor/model") for i in range(5)]
    try:
        for subject in subjects:
            service.admit(subject).release()
        clock.advance(0.25)
        assert all(service.is_warm(subject) for subject in subjects)  # each queued a refresh

        def refreshed() -> bool:
            return all((service.policy.staleness(s) or 0) < 0 for s in subjects)

        assert eventually(refreshed), "every stale subject is read again"
        refreshers = [t for t in threading.enumerate() if t.name == "limits-refresh"]
        assert len(refreshers) == 1  # not a thread per refresh
    finally:
        service.close()
    assert not refreshers[0].is_alive()


def test_rows_far_past_their_time_are_read_again_before_a_call(
    database: Database, tmp_path
) -> None:
    clock = ManualClock()
    service = build_limits(
        Settings(home=tmp_path, limits_cache_ttl_seconds=0.01),
        database,
        build_keyspace(database),
        clock,
    )
    try:
        service.admit(ACME).release()
        clock.advance(0.2)  # more than STALE_LIMIT TTLs
        assert not service.is_warm(ACME)
    finally:
        service.close()


def test_with_redis_only_an_unlimited_subject_is_admitted_without_a_thread(
    database: Database, tmp_path, redis_url: str
) -> None:
    """A Redis limiter is network I/O: the event loop may admit a subject itself
    (``is_warm``) only when admitting it asks Redis nothing, i.e. it has no limits."""
    settings = Settings(home=tmp_path, limits_cache_ttl_seconds=60, redis_url=redis_url)
    service = build_limits(settings, database, build_keyspace(database))
    try:
        service.admit(ACME).release()  # rows and budget cached: no limits
        assert service.blocking and service.is_warm(ACME)
        put(service, ScopeType.TENANT, "acme", rpm=1)
        service.policy.refresh(ACME)
        assert not service.is_warm(ACME)  # a rate limit to charge in Redis
        service.admit(ACME).release()
        with pytest.raises(RateLimited):
            service.admit(ACME)
    finally:
        service.close()


def test_a_call_without_a_concurrency_limit_asks_the_limiter_nothing(
    limits: LimitService,
) -> None:
    """Every unlimited inference call would otherwise take a lease (a random id, and
    with Redis a round trip) only to give it back."""
    asked: list[object] = []
    acquire = limits.slots.acquire
    limits.slots.acquire = lambda items: asked.append(items) or acquire(items)  # type: ignore[method-assign]
    if limits.gate is not None:  # Redis: rate and slots in one script
        admit = limits.gate.admit
        limits.gate.admit = lambda *a: asked.append(a) or admit(*a)  # type: ignore[method-assign]
    limits.admit(ACME).release()
    assert asked == []
    put(limits, ScopeType.TENANT, "acme", concurrency=1)
    limits.policy.refresh(ACME)
    held = limits.admit(ACME)
    with pytest.raises(Overloaded):
        limits.admit(ACME)
    held.release()
    assert len(asked) == 2


def test_a_charge_of_the_month_before_never_takes_the_period_back(database: Database) -> None:
    # Two processes: one read the time just before midnight, and commits after the
    # other's charge of the new month.
    december = BudgetRepository(database, now=lambda: datetime(2026, 12, 1, 0, 0, 1, tzinfo=UTC))
    november = BudgetRepository(database, now=lambda: datetime(2026, 11, 30, 23, 59, tzinfo=UTC))
    december.put("acme", hard_cap_micros=1_000, soft_cap_micros=None)
    december.add_spent("acme", 300)
    november.add_spent("acme", 50)
    december.add_spent("acme", 200)
    budget = december.get("acme")
    assert budget is not None
    assert (budget.period, budget.spent_micros) == ("2026-12", 500)
