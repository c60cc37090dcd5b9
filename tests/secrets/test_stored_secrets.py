"""Remote backends' API keys sealed at rest: the raw rows hold no plain key, the API
never returns it, legacy plain values are read and sealed, rotation re-seals with the
newest key, and the shapes without a configured key behave as documented."""

from __future__ import annotations

import logging
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_secret_box, build_services
from modelport.cli import modelport
from modelport.config import Settings
from modelport.errors import InvalidInput, Unavailable
from modelport.store.secrets import SCHEME, SecretBox, generate_key
from tests.conftest import ADMIN_KEY, TEST_SECRET_KEY, ensure_tenant

PLAIN = "sk-remote-" + "q" * 30
BACKEND = {"name": "pool", "tenant": "acme", "kind": "remote_v2", "url": "http://127.0.0.1:9"}


def raw_keys(url: str) -> list[str | None]:
    """The api_key column as the database holds it, read with plain SQL."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [r[0] for r in conn.execute(text("SELECT api_key FROM remote_backends"))]
    finally:
        engine.dispose()


def sent_key(services: Services, name: str = "pool") -> str | None:
    """The bearer token the built backend sends to its server."""
    backend = services.serving.router.remotes(name)
    assert backend is not None
    header: str | None = backend._client.headers.get("Authorization")  # type: ignore[attr-defined]
    return None if header is None else header.removeprefix("Bearer ")


def declare(client: TestClient, **body: Any) -> dict[str, Any]:
    ensure_tenant(client, "acme")
    response = client.post("/api/backends", json={**BACKEND, "api_key": PLAIN, **body})
    assert response.status_code == 201, response.text
    assert PLAIN not in response.text
    result: dict[str, Any] = response.json()
    return result


class Process:
    """Services built from settings, as a (re)started server process would."""

    def __init__(self, settings: Settings) -> None:
        self.services = build_services(settings)
        self.client = TestClient(
            create_app(self.services), headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        )
        self.client.__enter__()

    def close(self) -> None:
        self.client.__exit__(None, None, None)
        self.services.close()


@pytest.fixture
def start(settings: Settings) -> Iterator[Any]:
    opened: list[Process] = []

    def factory(**overrides: Any) -> Process:
        process = Process(settings.model_copy(update=overrides))
        opened.append(process)
        return process

    yield factory
    for process in reversed(opened):
        process.close()


def test_the_database_holds_no_plain_key_and_the_api_never_returns_it(
    client: TestClient, services: Services, settings: Settings
) -> None:
    created = declare(client)
    assert created["has_api_key"] is True and "api_key" not in created
    [stored] = raw_keys(settings.store.resolved_database_url)
    assert stored is not None and stored.startswith(SCHEME) and PLAIN not in stored
    for response in (client.get("/api/backends"), client.get("/api/backends/pool")):
        assert response.status_code == 200 and PLAIN not in response.text
        assert stored not in response.text
    assert sent_key(services) == PLAIN


def test_a_backend_without_a_key_stores_none(client: TestClient, settings: Settings) -> None:
    assert declare(client, api_key=None)["has_api_key"] is False
    assert declare(client, name="empty", api_key="")["has_api_key"] is False
    assert raw_keys(settings.store.resolved_database_url) == [None, None]


def test_a_restarted_process_opens_the_sealed_key(start: Any, settings: Settings) -> None:
    first = start()
    declare(first.client)
    first.close()
    assert sent_key(start().services) == PLAIN


def test_a_legacy_plain_key_is_read_and_sealed_at_start(
    start: Any, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    first = start()
    declare(first.client)
    first.close()
    engine = create_engine(settings.store.resolved_database_url)
    with engine.begin() as conn:  # as an earlier release stored it
        conn.execute(text("UPDATE remote_backends SET api_key = :k"), {"k": PLAIN})
    engine.dispose()
    with caplog.at_level(logging.INFO):
        again = start()
    assert sent_key(again.services) == PLAIN
    [stored] = raw_keys(settings.store.resolved_database_url)
    assert stored is not None and stored.startswith(SCHEME)
    assert "secrets.sealed_legacy" in caplog.text and PLAIN not in caplog.text


def rotate(settings: Settings, keys: str) -> dict[str, Any]:
    env = {
        "MODELPORT_DATABASE_URL": settings.store.resolved_database_url,
        "MODELPORT_HOME": str(settings.store.home),
        "MODELPORT_SECRET_KEY": keys,
    }
    result = CliRunner().invoke(modelport, ["--json", "secrets", "rotate"], env=env)
    assert result.exit_code == 0, result.output
    done: dict[str, Any] = orjson.loads(result.output)
    return done


def test_rotation_reseals_with_the_newest_key(start: Any, settings: Settings) -> None:
    first = start()
    declare(first.client)
    first.close()
    newest = generate_key()
    # Both keys: the old one still opens what it sealed.
    both = start(secret_key=f"{newest},{TEST_SECRET_KEY}")
    assert sent_key(both.services) == PLAIN
    both.close()
    assert rotate(settings, f"{newest},{TEST_SECRET_KEY}")["remote_backends.api_key"] == {
        "resealed": 1,
        "legacy": 0,
        "current": 0,
    }
    [stored] = raw_keys(settings.store.resolved_database_url)
    assert stored is not None and SecretBox([newest]).open(stored) == PLAIN
    with pytest.raises(Unavailable) as refused:
        SecretBox([TEST_SECRET_KEY]).open(stored)
    assert refused.value.code == "secret_unreadable"
    # The old key removed: everything still opens.
    assert sent_key(start(secret_key=newest).services) == PLAIN
    # Rotating again changes nothing.
    assert rotate(settings, newest)["remote_backends.api_key"]["current"] == 1


def test_rotation_seals_legacy_plain_values(client: TestClient, settings: Settings) -> None:
    declare(client)
    engine = create_engine(settings.store.resolved_database_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE remote_backends SET api_key = :k"), {"k": PLAIN})
    engine.dispose()
    assert rotate(settings, TEST_SECRET_KEY)["remote_backends.api_key"]["legacy"] == 1
    [stored] = raw_keys(settings.store.resolved_database_url)
    assert stored is not None and SecretBox([TEST_SECRET_KEY]).open(stored) == PLAIN


def test_a_start_without_the_sealing_key_fails_clearly(start: Any) -> None:
    declare(start().client)
    with pytest.raises(Unavailable) as refused:
        start(secret_key=generate_key())
    assert refused.value.code == "secret_unreadable"
    assert PLAIN not in str(refused.value)


def test_a_distributed_installation_without_a_key_refuses_to_store_one(
    start: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    if settings.store.is_embedded_database:
        pytest.skip("the distributed shape: PostgreSQL")
    monkeypatch.delenv("MODELPORT_SECRET_KEY")
    process = start(secret_key="")
    ensure_tenant(process.client, "acme")
    response = process.client.post("/api/backends", json={**BACKEND, "api_key": PLAIN})
    assert response.status_code == 503, response.text
    assert response.json()["code"] == "secret_key_required"
    assert not settings.resolved_secret_key_path.exists()
    assert raw_keys(settings.store.resolved_database_url) == []
    # A backend without a key needs no secret key.
    ok = process.client.post("/api/backends", json=BACKEND)
    assert ok.status_code == 201, ok.text


def test_an_embedded_installation_without_a_key_makes_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(home=tmp_path / "home", admin_key=ADMIN_KEY, secret_key="")
    with caplog.at_level(logging.INFO):
        box = build_secret_box(settings)
    path = settings.resolved_secret_key_path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "secrets.key_created" in caplog.text and path.read_text().strip() not in caplog.text
    sealed = box.seal(PLAIN)
    # The next start reads the same key; once MODELPORT_SECRET_KEY is set, the file's key
    # still opens what it sealed.
    assert build_secret_box(settings).open(sealed) == PLAIN
    keyed = build_secret_box(settings.model_copy(update={"secret_key": generate_key()}))
    assert keyed.open(sealed) == PLAIN and not keyed.sealed_by_newest(sealed)


def test_the_box() -> None:
    key, other = generate_key(), generate_key()
    box = SecretBox([key])
    sealed = box.seal(PLAIN)
    assert sealed.startswith("fernet:v1:") and box.open(sealed) == PLAIN
    assert box.open("plain-legacy") == "plain-legacy"
    assert SecretBox([other, key]).open(sealed) == PLAIN
    assert SecretBox([other, key]).reseal(sealed) != sealed
    with pytest.raises(Unavailable) as unreadable:
        SecretBox([other]).open(sealed)
    assert unreadable.value.code == "secret_unreadable"
    with pytest.raises(Unavailable) as unknown:
        box.open("fernet:v9:abc")
    assert unknown.value.code == "secret_unreadable"
    with pytest.raises(Unavailable) as keyless:
        SecretBox([]).seal(PLAIN)
    assert keyless.value.code == "secret_key_required"
    with pytest.raises(InvalidInput) as bad:
        SecretBox(["not-a-key"])
    assert bad.value.code == "invalid_secret_key" and "not-a-key" not in bad.value.message


def test_rotation_without_a_key_is_refused(settings: Settings) -> None:
    if settings.store.is_embedded_database:
        pytest.skip("the distributed shape: PostgreSQL (an embedded one makes its key)")
    env = {
        "MODELPORT_DATABASE_URL": settings.store.resolved_database_url,
        "MODELPORT_HOME": str(settings.store.home),
        "MODELPORT_SECRET_KEY": "",
    }
    result = CliRunner().invoke(modelport, ["secrets", "rotate"], env=env)
    assert result.exit_code == 1 and "MODELPORT_SECRET_KEY" in result.output


def test_generate_key_prints_a_usable_key() -> None:
    result = CliRunner().invoke(modelport, ["secrets", "generate-key"])
    assert result.exit_code == 0
    key = result.output.strip()
    assert SecretBox([key]).open(SecretBox([key]).seal(PLAIN)) == PLAIN


def test_webhook_signing_secrets_are_sealed_and_rotated(start: Any, settings: Settings) -> None:
    first = start()
    first.services.tenancy.create_tenant("acme", actor="admin")
    issued = first.services.webhooks.rotate_secret("acme")
    first.close()
    engine = create_engine(settings.store.resolved_database_url)
    with engine.begin() as conn:
        [stored] = conn.execute(text("SELECT value FROM webhook_secrets")).scalars().all()
    assert stored.startswith(SCHEME) and issued.secret not in stored
    newest = generate_key()
    rotated = rotate(settings, f"{newest},{TEST_SECRET_KEY}")["webhook_secrets.value"]
    assert rotated == {"resealed": 1, "legacy": 0, "current": 0}
    with engine.begin() as conn:
        [resealed] = conn.execute(text("SELECT value FROM webhook_secrets")).scalars().all()
    engine.dispose()
    assert SecretBox([newest]).open(resealed) == issued.secret
    # Only the newest key now: deliveries are still signed with the tenant's secret.
    again = start(secret_key=newest)
    now = again.services.clock.now()
    assert again.services.webhooks._repo.signing_secrets("acme", now) == [issued.secret]
