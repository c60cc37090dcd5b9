"""Console fixtures: a platform (tests/metering's) where acme publishes a public, priced
model with a card (acme/summer, an adder) and a private one (acme/secret), beta's member ana (consumer and billing) has a key and a
prepaid balance, and gamma is another tenant with a key of its own."""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.metering.types import BalanceScope
from tests.api_openai.conftest import World, build_world
from tests.metering.conftest import Platform, approve, make_platform, open_platform

MODEL = "acme/summer"
PRICE_MICROS = 2_500
CARD = "# Adder\n\nAdds **one**. <script>alert('card')</script> [click](javascript:alert(1))"


@dataclass
class Console:
    platform: Platform
    beta_key: str
    beta_key_id: str
    gamma_key: str

    @property
    def services(self):  # type: ignore[no-untyped-def]
        return self.platform.services


def member_with_key(platform: Platform, tenant: str, member: str) -> tuple[str, str]:
    tenancy = platform.services.tenancy
    tenancy.add_member(tenant, member, roles=["consumer", "billing"], actor="admin")
    issued = tenancy.create_key(tenant, member, name="laptop", actor="admin")
    return issued.secret, issued.key.id


def seed(platform: Platform) -> Console:
    admin = platform.client
    platform.services.tenancy.create_tenant("gamma", actor="admin")
    beta_key, beta_key_id = member_with_key(platform, "beta", "ana")
    gamma_key, _ = member_with_key(platform, "gamma", "gil")
    public = {
        "owner": "acme",
        "name": "summer",
        "license": "MIT",
        "visibility": "public",
        "description": CARD,
        "task": "tabular-regression",
        "tags": ["math"],
    }
    assert admin.post("/api/models", json=public).status_code == 201
    platform.publisher.models.add(MODEL)
    platform.publisher.adder(MODEL)
    approve(platform.services, "acme", "summer", "1")
    platform.price(PRICE_MICROS, model=MODEL)
    platform.services.metering.balances.credit(
        BalanceScope.TENANT, "beta", 1_000_000, tenant="beta"
    )
    platform.publisher.adder("acme/secret")  # private: acme's members only
    return Console(platform, beta_key, beta_key_id, gamma_key)


@pytest.fixture
def chat_world(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    """tests/api_openai's platform (a live server hosting the toy chat model
    acme/writer, beta's consumer key) on each database."""
    built = build_world(tmp_path / "home", database_url, monkeypatch)
    yield built
    built.server.stop()
    built.services.close()


@dataclass(frozen=True)
class SeededConsole:
    """The files of a seeded console world (SQLite) and what its seeding handed out."""

    database: Path
    home: Path
    platform_key: str
    models: frozenset[str]
    beta_key: str
    beta_key_id: str
    gamma_key: str

    def open(self, home: Path, database: Path, **overrides: Any) -> Console:
        """A platform over a copy of the seeded files, at ``home`` and ``database``
        (``overrides``: settings, as ``open_platform`` takes them)."""
        shutil.copyfile(self.database, database)
        shutil.copytree(self.home, home, dirs_exist_ok=True)
        platform = open_platform(home, f"sqlite:///{database}", self.platform_key, **overrides)
        platform.publisher.models.update(self.models)
        return Console(platform, self.beta_key, self.beta_key_id, self.gamma_key)


@pytest.fixture(scope="session")
def seeded_console(
    tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path
) -> SeededConsole:
    """The console world seeded once per process on SQLite (seeding takes most of a
    second); each test on SQLite gets a copy of its files."""
    folder = tmp_path_factory.mktemp("console-seed")
    database = folder / "modelport.db"
    shutil.copyfile(sqlite_template, database)
    platform = make_platform(folder / "home", f"sqlite:///{database}")
    try:
        world = seed(platform)
    finally:
        platform.close_client()
        platform.services.close()
    with sqlite3.connect(database) as conn:  # the write-ahead log into the file that is copied
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return SeededConsole(
        database,
        folder / "home",
        platform.key,
        frozenset(platform.publisher.models),
        world.beta_key,
        world.beta_key_id,
        world.gamma_key,
    )


@pytest.fixture
def console(tmp_path: Path, database_url: str, request: pytest.FixtureRequest) -> Iterator[Console]:
    yield from console_world(tmp_path, database_url, request)


def console_world(
    tmp_path: Path, database_url: str, request: pytest.FixtureRequest, **overrides: Any
) -> Iterator[Console]:
    """The seeded console world on the test's database, with settings ``overrides``."""
    if database_url.startswith("sqlite"):
        seeded: SeededConsole = request.getfixturevalue("seeded_console")
        world = seeded.open(
            tmp_path / "home", Path(database_url.removeprefix("sqlite:///")), **overrides
        )
    else:
        platform = make_platform(tmp_path / "home", database_url, **overrides)
        try:
            world = seed(platform)
        except BaseException:
            platform.close_client()
            platform.services.close()
            raise
    try:
        yield world
    finally:
        world.platform.close_client()
        world.services.close()


def browser_client(console: Console, *, https: bool = False) -> TestClient:
    """A client of the app as a browser: cookies, no Authorization header."""
    base = "https://testserver" if https else "http://testserver"
    return TestClient(create_app(console.services), base_url=base)


def csrf_of(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "the page has no CSRF token"
    return found[1]


def sign_in(client: TestClient, key: str) -> None:
    form = client.get("/console/sign-in")
    response = client.post(
        "/console/sign-in",
        data={"csrf_token": csrf_of(form.text), "api_key": key, "next": "/console/models"},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/console/models"
