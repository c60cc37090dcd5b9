"""``modelport serve`` with ``MODELPORT_LOG_FORMAT=json`` writes only JSON lines, uvicorn's
own records included, each request's records with its id, and never the admin key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_KEY, free_port

pytestmark = pytest.mark.slow  # starts a real server process


def test_serve_writes_json_logs_with_request_ids(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
    env |= {
        "MODELPORT_HOME": str(tmp_path),
        "MODELPORT_ADMIN_KEY": ADMIN_KEY,
        "MODELPORT_LOG_FORMAT": "json",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "modelport.cli", "serve", "--port", str(port), "--access-log"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        wrong = {"Authorization": "Bearer mp_live_0123456789abcdef_" + "x" * 40}
        refused = httpx.get(f"{url}/api/models", headers={**wrong, "X-Request-Id": "req-serve-1"})
        assert refused.status_code == 401
        assert refused.headers["X-Request-Id"] == "req-serve-1"
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        assert httpx.get(f"{url}/api/models", headers=admin).status_code == 200
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    records = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert any(r["logger"].startswith("uvicorn") for r in records), err
    refusals = [r for r in records if r.get("event") == "login.refused"]
    assert refusals and refusals[0]["request_id"] == "req-serve-1"
    assert refusals[0]["key_id"] == "0123456789abcdef"
    access = [r for r in records if r["logger"] == "uvicorn.access"]
    assert any("GET /api/models" in r["message"] and "401" in r["message"] for r in access)
    assert ADMIN_KEY not in err
