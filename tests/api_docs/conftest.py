"""One platform on SQLite per test module, for the API description tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.config import Settings
from tests.conftest import ADMIN_KEY


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[Services]:
    home = tmp_path_factory.mktemp("docs-home")
    shutil.copyfile(sqlite_template, home / "modelport.db")
    services = build_services(
        Settings(
            home=home,
            database_url=f"sqlite:///{home / 'modelport.db'}",
            admin_key=ADMIN_KEY,
            auto_migrate=False,
            runtime_intra_op_threads=1,
        )
    )
    yield services
    services.close()


@pytest.fixture(scope="module")
def anon(platform: Services) -> Iterator[TestClient]:
    with TestClient(create_app(platform)) as client:
        yield client
