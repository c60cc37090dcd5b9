"""Metering fixtures: the metering parts on each database (SQLite and PostgreSQL), a
settable clock, the real Redis (when configured), and event factories."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis
from sqlalchemy import event, select
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.clock import ManualClock
from modelport.config import Settings
from modelport.keyspace import Keyspace
from modelport.metering.balances import BalanceRepository
from modelport.metering.events import priced_event
from modelport.metering.ledger import Ledger
from modelport.metering.meter import InferenceMeter
from modelport.metering.outbox import LedgerSink, Outbox
from modelport.metering.prices import PriceBook
from modelport.metering.reservations import Reservations
from modelport.metering.types import (
    FREE,
    BalanceScope,
    CallInfo,
    LedgerEntry,
    NewPriceRule,
    PriceSnapshot,
    Unit,
    UsageEvent,
    UsageStatus,
)
from modelport.registry import repository as registry_repo
from modelport.registry.types import LifecycleState
from modelport.store import Database, create_database
from modelport.store.tables import BudgetRow
from tests.api_v2.conftest import Publisher
from tests.conftest import ADMIN_KEY, LiveServer, skip_or_fail

REDIS_ENV = "MODELPORT_TEST_REDIS_URL"
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DIGEST = "sha256:" + "ab" * 32


class Clock:
    """Wall time a test moves by hand."""

    def __init__(self, at: datetime = T0) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> None:
        self.at += timedelta(**delta)


@dataclass
class Metering:
    """The metering parts on one database, sharing a clock."""

    database: Database
    clock: Clock
    prices: PriceBook
    ledger: Ledger
    outbox: Outbox
    balances: BalanceRepository
    reservations: Reservations
    meter: InferenceMeter

    @property
    def sink(self) -> LedgerSink:
        return LedgerSink(self.ledger)


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    """The ``database_url`` fixture's database, already migrated."""
    db = create_database(database_url)
    yield db
    db.dispose()


@pytest.fixture
def metering(database: Database) -> Metering:
    clock = Clock()
    prices = PriceBook(database, default_revenue_share_bps=7000, cache_ttl_seconds=0, now=clock)
    ledger = Ledger(database, now=clock)
    outbox = Outbox(database, lease_seconds=30, now=clock)
    reservations = Reservations(database, outbox, now=clock)
    return Metering(
        database=database,
        clock=clock,
        prices=prices,
        ledger=ledger,
        outbox=outbox,
        balances=BalanceRepository(database, now=clock),
        reservations=reservations,
        meter=InferenceMeter(prices, reservations, grace_seconds=60, now=clock),
    )


PRICE = 1_000
"""What ``price_predictions`` charges per prediction of acme/adder, in micros."""


def call_info(n: int = 0, key_id: str | None = "k1") -> CallInfo:
    """Call number ``n`` of tenant beta (with ``key_id``) to acme/adder:1."""
    return CallInfo(
        tenant="beta",
        key_id=key_id,
        model="acme/adder",
        version="1",
        manifest_digest=DIGEST,
        request_id=f"req-{n}",
        timeout_seconds=2.0,
    )


def price_predictions(metering: Metering, balance_micros: int) -> Metering:
    """Price acme/adder's predictions at ``PRICE`` and give tenant beta a prepaid
    balance of ``balance_micros``."""
    metering.prices.add(
        NewPriceRule(model="acme/adder", unit=Unit.PREDICTION, unit_price_micros=PRICE),
        actor="t",
    )
    metering.balances.credit(BalanceScope.TENANT, "beta", balance_micros, tenant="beta")
    return metering


def usage_event(
    event_id: str | None = None,
    *,
    tenant: str = "beta",
    price: PriceSnapshot = FREE,
    quantity: int = 1,
    status: UsageStatus = UsageStatus.SUCCEEDED,
    unit: Unit = Unit.PREDICTION,
    at: datetime = T0,
    **fields: Any,
) -> UsageEvent:
    """A usage event of ``tenant`` calling acme/adder:1."""
    values: dict[str, Any] = {
        "tenant": tenant,
        "key_id": None,
        "model": "acme/adder",
        "version": "1",
        "manifest_digest": DIGEST,
        "started_at": at,
        "finished_at": at,
        "source": "test",
        **fields,
    }
    return priced_event(
        event_id=event_id or uuid.uuid4().hex,
        price=price,
        unit=unit,
        quantity=quantity,
        status=status,
        **values,
    )


@pytest.fixture
def redis_url() -> Iterator[str]:
    """The real Redis of MODELPORT_TEST_REDIS_URL."""
    url = os.environ.get(REDIS_ENV)
    if not url:
        skip_or_fail(f"Redis tests need {REDIS_ENV} (e.g. redis://127.0.0.1:6379/0)")
    assert url is not None
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.RedisError as exc:
        skip_or_fail(f"Redis at {REDIS_ENV} does not answer: {exc}")
    finally:
        client.close()
    yield url


KEYS = Keyspace("metering-test")
"""The keyspace of the streams tests build themselves."""


@pytest.fixture
def stream(redis_url: str) -> Iterator[tuple[redis.Redis, str]]:
    """A Redis client and a stream name of this test's own (in ``KEYS``, or in the
    keyspace of an app the test builds), removed afterwards."""
    client = redis.Redis.from_url(redis_url)
    name = f"usage-{uuid.uuid4().hex}"
    yield client, name
    for key in client.scan_iter(f"modelport:*:{name}"):
        client.delete(key)
    client.close()


@dataclass
class Platform:
    """A running app (admin client) with tenant acme publishing acme/adder, and tenant
    beta with a consumer key calling it."""

    client: TestClient
    services: Services
    publisher: Publisher
    key: str
    """beta's consumer key."""
    closed: bool = False

    def infer(self, secret: str | None = None, model: str = "acme/adder", **kwargs: Any):
        headers = {"Authorization": f"Bearer {secret or self.key}", **kwargs.pop("headers", {})}
        return self.client.post(
            f"/v2/models/{model}/infer", json=kwargs.pop("json", ADDER_BODY), headers=headers
        )

    def price(self, micros: int, **fields: Any) -> dict[str, Any]:
        response = self.client.post(
            "/api/prices",
            json={
                "model": "acme/adder",
                "unit": "prediction",
                "unit_price_micros": micros,
                **fields,
            },
        )
        assert response.status_code == 201, response.text
        return response.json()

    def live(self) -> LiveServer:
        """Serve these services over HTTP instead of the in-process client (one app runs
        their lifespan at a time)."""
        self.close_client()
        return LiveServer(self.services).start()

    def close_client(self) -> None:
        if not self.closed:
            self.closed = True
            self.client.__exit__(None, None, None)

    def entries(self) -> list[LedgerEntry]:
        self.services.metering.deliver()
        return self.services.metering.ledger.entries()


ADDER_BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}


def approve(services: Services, owner: str, name: str, version: str) -> None:
    """Seed the version as validated and approved (skips the validation run), so other
    tenants may call it."""
    with services.database.transaction() as session:
        vid = registry_repo.version_id(session, owner, name, version, lock=True)
        for state in (LifecycleState.VALIDATED, LifecycleState.APPROVED):
            current = registry_repo.current_state(session, vid)
            registry_repo.append_event(session, vid, current, state, actor="seed", reason="seed")


def make_platform(
    home: Path,
    database_url: str,
    *,
    seed: bool = True,
    clock: ManualClock | None = None,
    **overrides: Any,
) -> Platform:
    """Services (on ``clock``, the system's by default) and an in-process client; with
    ``seed``, tenants acme (publishing acme/adder, public and approved) and beta (a
    consumer key), else beta's key only (another gateway over the same database)."""
    settings = Settings(
        home=home,
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
        runtime_intra_op_threads=1,
        **overrides,
    )
    services = build_services(settings, clock=clock)
    client = TestClient(create_app(services), headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    client.__enter__()
    tenancy = services.tenancy
    publisher = Publisher(client, services)
    if not seed:
        key = tenancy.create_key("beta", "app", name="other", actor="admin").secret
        return Platform(client, services, publisher, key)
    for slug in ("acme", "beta"):
        tenancy.create_tenant(slug, actor="admin")
    tenancy.add_member("beta", "app", roles=["consumer"], actor="admin")
    key = tenancy.create_key("beta", "app", name="test", actor="admin").secret
    public = {"owner": "acme", "name": "adder", "license": "MIT", "visibility": "public"}
    assert client.post("/api/models", json=public).status_code == 201
    publisher.models.add("acme/adder")
    publisher.adder()
    approve(services, "acme", "adder", "1")
    return Platform(client, services, publisher, key)


@pytest.fixture
def platform(tmp_path: Path, database_url: str) -> Iterator[Platform]:
    built = make_platform(tmp_path / "home", database_url)
    yield built
    built.close_client()
    built.services.close()


def bound_rows(multiparams: Any, params: Any) -> list[dict[str, Any]]:
    """The parameter sets of a ``before_execute`` event, one dict each."""
    found = [params] if params else []
    for entry in multiparams:
        found.extend(entry if isinstance(entry, list | tuple) else [entry])
    return found


T = TypeVar("T")


def recording_levels(metering: Metering, work: Callable[[], T]) -> tuple[T, list[str]]:
    """``work()``'s result, and every money-level statement it ran, in order: the UPDATEs
    of balances and budgets, and the reads that lock a level (``balances.room``)."""
    touched: list[str] = []

    def statement(
        conn: Any, clauseelement: Any, multiparams: Any, params: Any, execution_options: Any
    ) -> None:
        sql = str(clauseelement)
        for bound in bound_rows(multiparams, params):
            if sql.startswith(("UPDATE balances", "SELECT balance_micros - reserved_micros")):
                touched.append(f"balance:{bound['scope']}:{bound['id']}")
            elif sql.startswith(("UPDATE budgets", "SELECT hard_cap_micros")):
                touched.append(f"budget:{bound['id']}")

    engine = metering.database.engine
    event.listen(engine, "before_execute", statement)
    try:
        result = work()
    finally:
        event.remove(engine, "before_execute", statement)
    return result, touched


def budget_reserved(metering: Metering, tenant: str) -> int | None:
    """What the tenant's budget holds now (None: it has no budget)."""
    with metering.database.transaction() as session:
        return session.scalar(select(BudgetRow.reserved_micros).where(BudgetRow.tenant == tenant))
