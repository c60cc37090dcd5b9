"""A validation refused because the sandbox cannot run prints its reason once (the
start-up warning of such a server: ``test_serve``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from modelport.app import build_services
from modelport.cli import modelport
from modelport.client import Client
from modelport.config import Settings
from modelport.testing import add_one, save
from tests.client.platform import MODEL, Platform
from tests.conftest import ADMIN_KEY, LiveServer

MISSING = "/nonexistent/bwrap"


@pytest.fixture
def unsandboxed(tmp_path: Path, database_url: str) -> Iterator[Platform]:
    settings = Settings(
        home=tmp_path / "home",
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
        sandbox="auto",
        sandbox_bwrap=MISSING,
    )
    services = build_services(settings)
    server = LiveServer(services).start()
    save(add_one(), tmp_path / "model.onnx")
    admin = Client(server.url, ADMIN_KEY)
    services.tenancy.create_tenant("acme", actor="admin", name="Acme")
    admin.models.create(MODEL, task="regression", license="MIT")
    yield Platform(server, services, admin, "", "", tmp_path)
    admin.close()
    server.stop()
    services.close()


def test_a_refused_validation_says_why_once(unsandboxed: Platform) -> None:
    ref = unsandboxed.publish("1")
    auth = ["--url", unsandboxed.server.url, "--api-key", ADMIN_KEY]
    result = CliRunner().invoke(
        modelport, [*auth, "versions", "transition", ref, "--to", "validated"]
    )
    assert result.exit_code == 1
    assert result.output.count("cannot isolate other people's code") == 1, result.output
    assert "apt install bubblewrap" in result.output
