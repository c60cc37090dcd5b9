"""The server's logs: every lifecycle event as a structured record with the request id,
JSON lines or text by setting, and never a secret (API keys, the admin key, the metrics
token, the database password, a wrong key's secret)."""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url
from starlette.testclient import TestClient

from modelport import logs
from modelport.api import create_app
from modelport.app import build_services, configure_logging
from modelport.config import Settings
from modelport.digests import sha256_digest
from tests.conftest import ADMIN_KEY
from tests.registry.helpers import manifest_for, onnx_bytes

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
SCRAPER = "scraper-token-" + "q" * 24
DB_PASSWORD = "db-pass-Zx81-never-logged"
WRONG_SECRET = "WrongSecret" + "x" * 29  # the length of a real secret


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    captured = io.StringIO()
    level = logging.getLogger().level
    logs.configure("json", "DEBUG", captured)
    yield captured
    logs.unconfigure()
    logging.getLogger().setLevel(level)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def with_password(url: str) -> str:
    if url.startswith("sqlite"):
        return url
    # The test server trusts local connections: the password is carried, never checked.
    return make_url(url).set(password=DB_PASSWORD).render_as_string(hide_password=False)


def test_lifecycle_events_are_logged_with_request_ids_and_no_secrets(
    stream: io.StringIO, database_url: str, tmp_path: Path
) -> None:
    settings = Settings(
        home=tmp_path / "home",
        database_url=with_password(database_url),
        admin_key=ADMIN_KEY,
        metrics_token=SCRAPER,
        auto_migrate=database_url.startswith("sqlite"),
        runtime_intra_op_threads=1,
    )
    services = build_services(settings)
    secrets = [ADMIN_KEY, SCRAPER, WRONG_SECRET]
    try:
        with TestClient(create_app(services)) as client:
            ok(
                client.post("/api/tenants", json={"slug": "acme", "owner": "alice"}, headers=ADMIN),
                201,
            )
            key = ok(
                client.post(
                    "/api/keys",
                    json={"name": "ci", "tenant": "acme", "member": "alice"},
                    headers=ADMIN,
                ),
                201,
            )
            owner = bearer(key["key"])
            secrets.append(key["key"])
            data = onnx_bytes()
            digest = sha256_digest(data)
            ok(
                client.post("/api/uploads", params={"digest": digest}, content=data, headers=owner),
                201,
            )
            ok(
                client.post(
                    "/api/models",
                    json={"owner": "acme", "name": "adder", "license": "MIT"},
                    headers=owner,
                ),
                201,
            )
            publish = {"version": "1", "manifest": manifest_for(data)}
            ok(
                client.post(
                    "/api/models/acme/adder/versions",
                    json=publish,
                    headers={**owner, "X-Request-Id": "req-publish-1"},
                ),
                201,
            )
            for state in ("validated", "approved"):
                ok(
                    client.post(
                        "/api/models/acme/adder/versions/1/transitions",
                        json={"to": state},
                        headers=ADMIN,
                    ),
                    201,
                )
            # A deployment: its steps, and the load with its phases.
            ok(client.post("/api/endpoints", json={"name": "adder"}, headers=owner), 201)
            spec = {"versions": [{"model": "acme/adder", "version": "1", "weight": 100}]}
            deployment = ok(
                client.post("/api/endpoints/adder/deployments", json=spec, headers=owner), 202
            )
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                state = ok(
                    client.get(
                        f"/api/endpoints/adder/deployments/{deployment['id']}", headers=owner
                    )
                )["state"]
                if state != "pending" and state != "rolling_out":
                    break
                time.sleep(0.05)
            assert state == "active", state
            # Refused logins: a wrong secret for a real key id, garbage, nothing at all.
            key_id = key["id"]
            wrong = f"mp_live_{key_id}_{WRONG_SECRET}"
            assert client.get("/api/models", headers=bearer(wrong)).status_code == 401
            assert client.get("/api/models", headers=bearer("not-a-key")).status_code == 401
            assert client.get("/api/models").status_code == 401
            # Rotation and revocation.
            rotated = ok(client.post(f"/api/keys/{key_id}/rotate", headers=ADMIN), 201)
            secrets.append(rotated["key"])
            ok(client.delete(f"/api/keys/{rotated['id']}", headers=ADMIN))
            assert client.get("/api/models", headers=bearer(rotated["key"])).status_code == 401
            # An unload through the repository extension, and the metrics scrape.
            ok(client.post("/v2/repository/models/acme/adder/unload", json={}, headers=ADMIN))
            assert client.get("/metrics", headers=bearer(SCRAPER)).status_code == 200
    finally:
        services.close()

    text = stream.getvalue()
    lines = text.splitlines()
    bad = [line for line in lines if not line.startswith("{")]
    assert not bad, bad[:5]
    records = [json.loads(line) for line in lines]  # every line is JSON
    events: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        assert {"time", "level", "logger", "message", "request_id"} <= set(record), record
        if "event" in record:
            events.setdefault(record["event"], []).append(record)

    published = events["version.published"][0]
    assert published["model"] == "acme/adder" and published["version"] == "1"
    assert published["request_id"] == "req-publish-1"
    assert events["version.validation"][0]["passed"] is True
    assert [e["to_state"] for e in events["version.transitioned"]] == ["validated", "approved"]
    assert {"deployment.rolling_out", "deployment.version_ready", "deployment.activated"} <= set(
        events
    )
    loaded = events["model.loaded"][0]
    assert {"fetch", "verify", "load", "warmup"} <= {
        part.split("=")[0] for part in loaded["phases"].split(",")
    }
    assert {"model.load_started", "model.unload_started", "model.unloaded"} <= set(events)
    assert events["key.created"][0]["key_id"] == key_id
    assert events["key.rotated"][0]["key_id"] == key_id
    assert events["key.revoked"][0]["key_id"] == rotated["id"]
    refused = {e["code"] for e in events["login.refused"]}
    assert {"invalid_credentials", "missing_credentials", "key_revoked"} <= refused
    assert any(e["key_id"] == key_id for e in events["login.refused"])
    assert all(e["request_id"] != "-" for e in events["login.refused"])

    for secret in secrets:
        assert secret not in text
        assert secret.rsplit("_", 1)[-1] not in text  # a key's secret part alone, too
    if not database_url.startswith("sqlite"):
        assert DB_PASSWORD not in text


def test_text_is_the_default_format_with_the_request_id() -> None:
    captured = io.StringIO()
    logs.configure(stream=captured)
    try:
        token = logs.REQUEST_ID.set("req-text-1")
        try:
            logs.log_event(logging.getLogger("modelport.test"), "thing.done", model="acme/x", n=2)
        finally:
            logs.REQUEST_ID.reset(token)
        logs.log_event(logging.getLogger("modelport.test"), "thing.idle", why="no request")
    finally:
        logs.unconfigure()
    first, second = captured.getvalue().splitlines()
    assert first.endswith("INFO modelport.test [req-text-1] thing.done model=acme/x n=2")
    assert second.endswith('[-] thing.idle why="no request"')


def test_fields_named_like_secrets_are_never_written() -> None:
    captured = io.StringIO()
    logs.configure("json", stream=captured)
    try:
        logs.log_event(
            logging.getLogger("modelport.test"),
            "backend.created",
            api_key="sk-123",
            password="hunter2",
            token="t0k",
            name="b1",
        )
    finally:
        logs.unconfigure()
    text = captured.getvalue()
    record = json.loads(text)
    assert record["api_key"] == record["password"] == record["token"] == "[redacted]"
    assert record["name"] == "b1"
    assert "sk-123" not in text and "hunter2" not in text and "t0k" not in text


def test_the_serving_process_configures_logging_from_its_settings(tmp_path: Path) -> None:
    root = logging.getLogger()
    level = root.level
    try:
        configure_logging(Settings(home=tmp_path, log_format="json", log_level="WARNING"))
        ours = [h for h in root.handlers if h.get_name() == "modelport"]
        assert len(ours) == 1 and isinstance(ours[0].formatter, logs.JsonFormatter)
        assert root.level == logging.WARNING
        configure_logging(Settings(home=tmp_path))  # again: replaced, not added
        ours = [h for h in root.handlers if h.get_name() == "modelport"]
        assert len(ours) == 1 and not isinstance(ours[0].formatter, logs.JsonFormatter)
        assert root.level == logging.INFO
    finally:
        logs.unconfigure()
        root.setLevel(level)


def test_the_log_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="log_format"):
        Settings(home=tmp_path, log_format="xml")  # type: ignore[arg-type]
