"""One seeded adversarial world per test module (building it loads and runs a model, so
it is shared by every attack in the module), on SQLite or on the real PostgreSQL."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import build_services
from modelport.config import Settings
from tests.conftest import ADMIN_KEY, PG_ENV, skip_or_fail
from tests.databases import truncate_tables
from tests.security.attacks import ESTATE, admin_view, hidden_ids
from tests.security.world import BACKEND_HOSTS, World, seed


def build_world(home: Path, database_url: str) -> Iterator[World]:
    settings = Settings(
        home=home,
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=False,
        runtime_intra_op_threads=1,
        # The world's backends are declared at names that never resolve.
        backend_allow_hosts=BACKEND_HOSTS,
    )
    services = build_services(settings)
    try:
        with TestClient(create_app(services)) as client:
            world = seed(client, services)
            world.estate = admin_view(world, ESTATE, hidden_ids(world))
            yield world
    finally:
        services.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[World]:
    """The world on SQLite."""
    home = tmp_path_factory.mktemp("security-home")
    shutil.copyfile(sqlite_template, home / "modelport.db")
    yield from build_world(home, f"sqlite:///{home / 'modelport.db'}")


@pytest.fixture(scope="module")
def pg_world(tmp_path_factory: pytest.TempPathFactory, postgres_url: str | None) -> Iterator[World]:
    """The world on the real PostgreSQL."""
    if postgres_url is None:
        skip_or_fail(f"PostgreSQL tests need {PG_ENV}")
    assert postgres_url is not None
    truncate_tables(postgres_url)
    yield from build_world(tmp_path_factory.mktemp("security-pg-home"), postgres_url)
