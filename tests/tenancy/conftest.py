"""A seeded world of two tenants, acme and globex: a member of every role in each (plus
a publishing service account), one API key each, and models of every visibility."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.clock import ManualClock
from modelport.config import Settings
from modelport.registry import repository as registry_repo
from modelport.registry.types import LifecycleState
from tests.conftest import ADMIN_KEY, skip_or_fail
from tests.databases import RowSnapshot, truncate_tables
from tests.models import add_one
from tests.registry.helpers import manifest_for, put_blob

REDIS_ENV = "MODELPORT_TEST_REDIS_URL"
ROLES = ("owner", "publisher", "approver", "deployer", "consumer", "billing")
"""Each tenant has one member per role, named after it."""
SERVICE_ACCOUNT = "ci"
"""A service account with the publisher role in each tenant."""
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def model_bytes(label: str) -> bytes:
    """The add_one graph, made distinct per label so each tenant's blob has its own digest."""
    model = add_one()
    model.doc_string = label
    return model.SerializeToString()


@dataclass
class World:
    """What the seeding made; ``key(tenant, role)`` is the bearer header of that member."""

    client: TestClient
    services: Services
    keys: dict[tuple[str, str], str] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    """Blob digest of each seeded model (``owner/name``)."""

    def key(self, tenant: str, role: str) -> dict[str, str]:
        return bearer(self.keys[tenant, role])

    def force_state(self, owner: str, name: str, version: str, state: str) -> None:
        """Append a lifecycle event directly (seeding only: skips the validation run)."""
        with self.services.database.transaction() as session:
            vid = registry_repo.version_id(session, owner, name, version, lock=True)
            current = registry_repo.current_state(session, vid)
            registry_repo.append_event(
                session, vid, current, LifecycleState(state), actor="seed", reason="seed"
            )

    def publish(
        self, owner: str, name: str, version: str, *, actor: str = "seed", **manifest: Any
    ) -> dict[str, Any]:
        data = model_bytes(f"{owner}/{name}")
        self.digests[f"{owner}/{name}"] = put_blob(self.services.blob_store, data)
        body = manifest_for(data, **manifest)
        self.services.registry.publish(owner, name, version, body, actor=actor)
        return body


def seed(client: TestClient, services: Services) -> World:
    world = World(client, services)
    tenancy = services.tenancy
    registry = services.registry
    for tenant in ("acme", "globex"):
        tenancy.create_tenant(tenant, actor="admin", name=tenant.title())
        for role in ROLES:
            tenancy.add_member(tenant, role, roles=[role], actor="admin")
        tenancy.add_member(
            tenant, SERVICE_ACCOUNT, roles=["publisher"], kind="service_account", actor="admin"
        )
        for member in (*ROLES, SERVICE_ACCOUNT):
            issued = tenancy.create_key(tenant, member, name="seed", actor="admin")
            world.keys[tenant, member] = issued.secret
        # private: version 1 candidate, 2 approved; public: 1 approved, 2 candidate
        registry.create_model(tenant, "private", actor="seed", license="MIT")
        registry.create_model(tenant, "public", actor="seed", license="MIT", visibility="public")
        for name in ("private", "public"):
            world.publish(tenant, name, "1")
            world.publish(tenant, name, "2")
        registry.set_alias(tenant, "private", "stable", "1", actor="seed")
        for name, version in (("private", "2"), ("public", "1")):
            world.force_state(tenant, name, version, "validated")
            world.force_state(tenant, name, version, "approved")
    return world


@pytest.fixture
def clock() -> ManualClock:
    """The clock tenancy's services wait on: a test moves it to pass a TTL or an expiry."""
    return ManualClock()


@dataclass(frozen=True)
class Seeded:
    """The seeded world, made once per test process and database kind: its database's
    content (a SQLite file, or PostgreSQL's rows), its home, and the secrets and digests
    seeding returned. A test gets a copy, so it still starts from the seeded state alone
    and changes nothing another test sees."""

    home: Path
    keys: dict[tuple[str, str], str]
    digests: dict[str, str]
    database: Path | None = None
    rows: RowSnapshot | None = None

    def restore(self, settings: Settings) -> None:
        """Put the seeded content and home where ``settings`` look for them."""
        url = settings.store.database_url
        assert url is not None
        if self.rows is not None:
            self.rows.restore(url)
        elif self.database is not None:
            shutil.copyfile(self.database, url.removeprefix("sqlite:///"))
        shutil.copytree(self.home, settings.store.home, dirs_exist_ok=True)


def seed_once(folder: Path, database_url: str) -> tuple[Path, World]:
    """Seed the world into ``database_url`` with a home in ``folder``; its home and world."""
    settings = Settings(home=folder / "home", database_url=database_url, admin_key=ADMIN_KEY)
    services = build_services(settings)
    try:
        with TestClient(create_app(services)) as client:
            return settings.store.home, seed(client, services)
    finally:
        services.close()


@pytest.fixture(scope="session")
def seeded_sqlite(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Seeded:
    folder = tmp_path_factory.mktemp("tenancy-seed")
    database = folder / "modelport.db"
    shutil.copyfile(sqlite_template, database)
    home, world = seed_once(folder, f"sqlite:///{database}")
    with sqlite3.connect(database) as conn:  # the write-ahead log into the file that is copied
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return Seeded(home, dict(world.keys), dict(world.digests), database=database)


@pytest.fixture(scope="session")
def seeded_postgres(tmp_path_factory: pytest.TempPathFactory, postgres_url: str | None) -> Seeded:
    """Seeded in this worker's own database (emptied first), then its rows kept."""
    assert postgres_url is not None
    truncate_tables(postgres_url)
    home, world = seed_once(tmp_path_factory.mktemp("tenancy-seed-pg"), postgres_url)
    rows = RowSnapshot.take(postgres_url)
    return Seeded(home, dict(world.keys), dict(world.digests), rows=rows)


def seeded_for(request: pytest.FixtureRequest, settings: Settings) -> Seeded | None:
    """The seeded copy this test's world comes from, for tests that ask for the world
    (seeding takes about a second; a copy milliseconds)."""
    if "world" not in request.fixturenames or settings.store.database_url is None:
        return None
    if settings.store.database_url.startswith("sqlite"):
        return request.getfixturevalue("seeded_sqlite")
    return request.getfixturevalue("seeded_postgres")


@pytest.fixture
def services(
    settings: Settings, clock: ManualClock, request: pytest.FixtureRequest
) -> Iterator[Services]:
    seeded = seeded_for(request, settings)
    if seeded is not None:
        seeded.restore(settings)
    built = build_services(settings, clock=clock)
    yield built
    built.close()


@pytest.fixture
def world(services: Services, request: pytest.FixtureRequest) -> Iterator[World]:
    with TestClient(create_app(services)) as client:
        seeded = seeded_for(request, services.settings)
        if seeded is not None:
            yield World(client, services, dict(seeded.keys), dict(seeded.digests))
        else:
            yield seed(client, services)


@pytest.fixture
def redis_url() -> str:
    url = os.environ.get(REDIS_ENV)
    if not url:
        skip_or_fail(f"Redis tests need {REDIS_ENV} (e.g. redis://127.0.0.1:6379/15)")
    assert url is not None
    return url
