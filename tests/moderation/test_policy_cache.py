"""The policy cache: known tenants cost no I/O; a change is seen at once here and, by
the change event, in every process; a lost event is bounded by the TTL. And the
migration makes the tables the code declares."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from modelport.app import Services, build_services
from modelport.changes import ModerationPolicyChanged
from modelport.clock import ManualClock
from modelport.config import Settings
from modelport.keyspace import Keyspace
from modelport.moderation import PolicyDraft, Rule
from modelport.moderation import repository as moderation_repo
from modelport.moderation.service import CACHE_TTL_SECONDS
from modelport.store import upgrade
from modelport.store.base import Base
from modelport.store.installation import installation_id
from tests.conftest import ADMIN_KEY
from tests.metering import conftest as metering_fixtures
from tests.polling import eventually

redis_url = metering_fixtures.redis_url  # the real Redis; skips (or fails) without it

DRAFT = PolicyDraft(rules=(Rule("x", words=("bad",)),), sync=True)


@pytest.fixture
def clocked(tmp_path: Path, database_url: str) -> Iterator[tuple[Services, ManualClock]]:
    clock = ManualClock()
    settings = Settings(
        home=tmp_path / "home",
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
    )
    services = build_services(settings, clock=clock)
    yield services, clock
    services.close()


def test_a_change_is_seen_at_once_and_a_lost_one_after_the_ttl(
    clocked: tuple[Services, ManualClock],
) -> None:
    services, clock = clocked
    moderation = services.moderation
    services.tenancy.create_tenant("beta", actor="admin")
    assert asyncio.run(moderation.policy_for("beta")) is None
    assert moderation.cached("beta") == (True, None)  # known: no I/O on the next call
    moderation.set_policy("beta", DRAFT, "test")
    policy = asyncio.run(moderation.policy_for("beta"))
    assert policy is not None and policy.version == 1
    # A version stored behind the service's back (as if its event were lost): the
    # cached one is used until the TTL passes.
    with services.database.transaction() as session:
        moderation_repo.add_policy_version(session, "beta", DRAFT, "test", clock.now())
    assert asyncio.run(moderation.policy_for("beta")).version == 1  # type: ignore[union-attr]
    clock.advance(CACHE_TTL_SECONDS + 1)
    assert asyncio.run(moderation.policy_for("beta")).version == 2  # type: ignore[union-attr]
    # The event drops it at once.
    with services.database.transaction() as session:
        moderation_repo.add_policy_version(session, "beta", DRAFT, "test", clock.now())
    services.changes.publish(ModerationPolicyChanged("beta"))
    assert asyncio.run(moderation.policy_for("beta")).version == 3  # type: ignore[union-attr]


def test_another_process_sees_a_change_through_redis(tmp_path: Path, redis_url: str) -> None:
    def build() -> Services:
        return build_services(
            Settings(
                home=tmp_path / "home",
                admin_key=ADMIN_KEY,
                redis_url=redis_url,
                runtime_intra_op_threads=1,
            )
        )

    first, second = build(), build()
    try:
        first.tenancy.create_tenant("beta", actor="admin")
        assert second.changes.wait_live(30)
        assert asyncio.run(second.moderation.policy_for("beta")) is None
        first.moderation.set_policy("beta", DRAFT, "test")
        assert eventually(lambda: second.moderation.cached("beta") == (False, None))
        assert asyncio.run(second.moderation.policy_for("beta")) is not None
    finally:
        prefix = Keyspace(installation_id(first.database)).prefix
        first.close()
        second.close()
        client = redis.Redis.from_url(redis_url)
        for key in client.scan_iter(prefix + "*"):
            client.delete(key)
        client.close()


def test_the_migration_makes_the_declared_tables(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(url)
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    finally:
        engine.dispose()
    ours = [d for d in diff if "moderation" in repr(d)]
    assert ours == []
