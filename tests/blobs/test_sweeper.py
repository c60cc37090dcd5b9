"""The server removes expired uploads by itself, every upload_sweep_interval_seconds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import build_services
from modelport.blobs.sweeper import periodic_upload_sweep
from modelport.config import Settings
from tests.blobs.support import FakeClock
from tests.conftest import ADMIN_KEY


def test_the_running_server_sweeps_expired_uploads(tmp_path: Path, database_url: str) -> None:
    settings = Settings(
        home=tmp_path / "home",
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
        upload_sweep_interval_seconds=0.05,
    )
    services = build_services(settings)
    clock = FakeClock()
    services.uploads.clock = clock
    try:
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        with TestClient(create_app(services), headers=headers) as client:
            location = client.post("/api/uploads").headers["location"]
            client.patch(location, content=b"abandoned")
            assert len(list(services.blob_store.staged_uploads())) == 1
            clock.advance(settings.uploads.ttl_seconds + 1)
            deadline = time.monotonic() + 30
            while list(services.blob_store.staged_uploads()):
                assert time.monotonic() < deadline, "the sweeper never ran"
                time.sleep(0.02)
            clock.advance(-settings.uploads.ttl_seconds)  # the row is gone, not just expired
            assert client.get(location).status_code == 404
    finally:
        services.close()


class FlakyUploads:
    """Fails its first sweep; the loop must carry on."""

    def __init__(self) -> None:
        self.calls = 0

    def sweep_expired(self) -> int:
        self.calls += 1
        if self.calls == 1:
            raise OSError("store unavailable")
        return 0


def test_a_failed_sweep_does_not_stop_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    uploads: Any = FlakyUploads()

    async def main() -> None:
        async with periodic_upload_sweep(uploads, 0.01):
            with anyio.fail_after(30):
                while uploads.calls < 3:
                    await anyio.sleep(0.01)

    anyio.run(main)
    assert "sweeping expired uploads failed" in caplog.text
