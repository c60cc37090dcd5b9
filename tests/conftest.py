"""Shared fixtures: a database per backend (SQLite always, PostgreSQL when configured),
wired services on a temporary home, an in-process client and a live server."""

from __future__ import annotations

import os
import secrets
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

import psycopg
import pytest
import uvicorn
from filelock import FileLock
from sqlalchemy import text
from sqlalchemy.engine import make_url
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.config import Settings
from modelport.sandbox import isolation_available
from modelport.store import upgrade
from modelport.store.base import Base
from tests.databases import migrated_template
from tests.isolation import free_port, isolate_redis, worker_id
from tests.slow_tier import (  # noqa: F401  (hooks: unmarked tests may not start processes)
    pytest_configure,
    pytest_runtest_call,
    pytest_runtest_setup,
)

ADMIN_KEY = "test-admin-key-" + "x" * 24
TEST_SECRET_KEY = "ZmRzYWZkc2FmZHNhZmRzYWZkc2FmZHNhZmRzYWZkc2E="  # a Fernet key, tests only
PG_ENV = "MODELPORT_TEST_DATABASE_URL"
REQUIRE_ENV = "MODELPORT_TEST_REQUIRE_SERVICES"


def services_required() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0", "false")


def skip_or_fail(reason: str) -> None:
    if services_required():
        pytest.fail(f"{reason} (required because {REQUIRE_ENV} is set)")
    pytest.skip(reason)


def suite_environment() -> dict[str, str]:
    """The ``MODELPORT_*`` settings of every installation a test builds, in process or in
    a child: secrets sealed with ``TEST_SECRET_KEY`` (tests of the unkeyed shapes remove
    it); and, on a laptop without bubblewrap, validation unisolated (``tests/sandbox``
    says why it skips there; CI installs bubblewrap).

    Tensor versions execute on threads (``MODELPORT_RUNTIME_EXECUTION=manifest``), not in
    model hosts, the production default: a model host is a process started per version
    loaded, and the suite loads thousands, which would blow its time budget. Process
    execution, and the default itself, have their own tests, which set it explicitly
    (``tests/api_v2/test_process_execution.py``, ``tests/runtime/process/``), and the
    demo's test runs on the production default."""
    environment = {
        "MODELPORT_SECRET_KEY": TEST_SECRET_KEY,
        "MODELPORT_RUNTIME_EXECUTION": "manifest",
    }
    if not isolation_available() and not services_required():
        environment["MODELPORT_SANDBOX"] = "unisolated"
    return environment


# Set at import too: module- and session-scoped fixtures build their installations
# before any test's own environment is made.
os.environ.update(suite_environment())
isolate_redis()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules marked ``heavy`` first (the rest keep their order): a parallel run hands
    modules to workers in this order, and a long one started last would finish alone."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


@pytest.fixture(autouse=True)
def _clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("MODELPORT_") and not key.startswith("MODELPORT_TEST_"):
            monkeypatch.delenv(key)
    for key, value in suite_environment().items():
        monkeypatch.setenv(key, value)


# FastAPI classifies each dependency's callable in module-level LRU caches (4,096 entries
# each, keyed by the callable): an endpoint closure there keeps its whole app, and the
# app its Services (engines, hosts, registries), alive after the test has closed them.
# A full run otherwise ends with about 8 GB of dead apps, and collecting that heap pauses
# every live server in the process for seconds.
_FASTAPI_CALLABLE_CACHES = (
    "_is_gen_callable_cached",
    "_is_async_gen_callable_cached",
    "_is_coroutine_callable_cached",
)


@pytest.fixture(autouse=True)
def _release_fastapi_callable_caches() -> Iterator[None]:
    yield
    from fastapi.dependencies import models

    for name in _FASTAPI_CALLABLE_CACHES:
        cached = getattr(models, name, None)
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str | None]:
    """This worker's own PostgreSQL database, copied from the run's migrated template,
    with an installation id of its own (so its Redis names and channels are its own)."""
    base = os.environ.get(PG_ENV)
    if not base:
        yield None
        return
    url = make_url(base)
    admin_dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    template = postgres_template(url, admin_dsn, run_folder(tmp_path_factory))
    name = f"mp_test_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    test_url = url.set(database=name).render_as_string(hide_password=False)
    own_dsn = url.set(drivername="postgresql", database=name).render_as_string(hide_password=False)
    with psycopg.connect(own_dsn, autocommit=True) as conn:
        conn.execute("UPDATE installation SET id = %s", (uuid.uuid4().hex,))
    yield test_url
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this run shares (pytest's base temp of the run)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if worker_id() != "master" else base


TEMPLATE_MARKER = "postgres-template"


def postgres_template(url: Any, admin_dsn: str, shared: Path) -> str:
    """The run's migrated template database: the first worker to need it makes it under a
    file lock, the others copy it; the run's controller drops it at the end."""
    marker = shared / TEMPLATE_MARKER
    with FileLock(str(shared / f"{TEMPLATE_MARKER}.lock")):
        if marker.exists():
            return marker.read_text()
        name = f"mp_template_{os.getpid()}_{secrets.token_hex(3)}"
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        marker.write_text(name)  # before the migration: the controller drops it whatever
        upgrade(url.set(database=name).render_as_string(hide_password=False))
        return name


def pytest_unconfigure(config: pytest.Config) -> None:
    """On the run's controller (or a run without workers): drop the template database."""
    base = os.environ.get(PG_ENV)
    factory = getattr(config, "_tmp_path_factory", None)
    if not base or worker_id() != "master" or factory is None:
        return
    marker = factory.getbasetemp() / TEMPLATE_MARKER
    if not marker.exists():
        return
    admin_dsn = make_url(base).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{marker.read_text()}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqlite_template() -> Path:
    """A SQLite database migrated once per test process; each test gets a copy."""
    return migrated_template()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    postgres_url: str | None,
    sqlite_template: Path,
) -> str:
    """Each test using this runs once on SQLite and once on the real PostgreSQL."""
    if request.param == "sqlite":
        path = tmp_path / "modelport.db"
        shutil.copyfile(sqlite_template, path)
        return f"sqlite:///{path}"
    if postgres_url is None:
        skip_or_fail(f"PostgreSQL tests need {PG_ENV}")
    assert postgres_url is not None
    truncate_tables(postgres_url)
    return postgres_url


def truncate_tables(url: str) -> None:
    """Empty every table of the PostgreSQL database at ``url`` but the installation's
    id, which its migration made once."""
    from sqlalchemy import create_engine

    engine = create_engine(url)
    with engine.begin() as conn:
        tables = [t for t in Base.metadata.sorted_tables if t.name != "installation"]
        names = ", ".join(f'"{t.name}"' for t in tables)
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
    engine.dispose()


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(
        home=tmp_path / "home",
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
    )


@pytest.fixture
def services(settings: Settings) -> Iterator[Services]:
    built = build_services(settings)
    yield built
    built.close()


@pytest.fixture
def client(services: Services) -> Iterator[TestClient]:
    with TestClient(
        create_app(services), headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    ) as test_client:
        yield test_client


@pytest.fixture
def anon_client(services: Services) -> Iterator[TestClient]:
    with TestClient(create_app(services)) as test_client:
        yield test_client


def ensure_tenant(client: Any, slug: str) -> None:
    """Create the tenant ``slug`` unless it exists (models are published into a tenant)."""
    response = client.post("/api/tenants", json={"slug": slug})
    assert response.status_code in (201, 409), response.text


class ThreadedServer:
    """uvicorn serving an ASGI application on a loopback port in a background thread
    (``lifespan="off"`` for an application whose lifespan already runs elsewhere)."""

    def __init__(self, app: Any, *, lifespan: str = "auto") -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan=lifespan
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, timeout: float = 60) -> Self:
        """Serve, and wait until the server listens. A server that does not start in time
        is stopped before the error is raised: left running, its background loops (outbox
        drain, deployment controller) would go on acting on the shared test database
        during the tests that follow."""
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("server exited before it started listening")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server did not start within {timeout:.0f} s")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class LiveServer(ThreadedServer):
    """The platform's application over ``services``, served in a background thread."""

    def __init__(self, services: Services) -> None:
        self.services = services
        super().__init__(create_app(services))


@pytest.fixture
def live_server(services: Services) -> Iterator[LiveServer]:
    server = LiveServer(services).start()
    yield server
    server.stop()
