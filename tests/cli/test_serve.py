"""`modelport serve` refuses weak admin keys and, with --dev, generates and prints one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import free_port

pytestmark = pytest.mark.slow  # starts real processes


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
    env["MODELPORT_HOME"] = str(home)
    env.update(extra)
    return env


def _serve(home: Path, port: int, *args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "modelport.cli", "serve", "--port", str(port), *args],
        env=_env(home, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_serve_refuses_empty_admin_key(tmp_path: Path) -> None:
    proc = _serve(tmp_path, free_port())
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "MODELPORT_ADMIN_KEY must be at least" in out


def test_serve_refuses_short_admin_key(tmp_path: Path) -> None:
    proc = _serve(tmp_path, free_port(), MODELPORT_ADMIN_KEY="tooshort")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "at least 24 characters" in out


def test_serve_dev_generates_key_and_serves(tmp_path: Path) -> None:
    port = free_port()
    proc = _serve(tmp_path, port, "--dev")
    try:
        assert proc.stdout is not None
        key = None
        deadline = time.monotonic() + 60
        while key is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            match = re.search(r"generated admin key: (\S+)", line)
            if match:
                key = match.group(1)
        assert key, "no key printed"
        url = f"http://127.0.0.1:{port}"
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        assert httpx.get(f"{url}/api/openapi.json").status_code == 200
        assert httpx.get(f"{url}/api/models").status_code == 401
        ok = httpx.get(f"{url}/api/models", headers={"Authorization": f"Bearer {key}"})
        assert ok.status_code == 200
        assert (tmp_path / "modelport.db").exists(), "embedded mode migrates a SQLite file"
    finally:
        proc.terminate()
        rest, _ = proc.communicate(timeout=30)
    assert "GET /api/models" not in rest, "no access log unless asked for"


def test_serve_access_log_on_request(tmp_path: Path) -> None:
    port = free_port()
    proc = _serve(tmp_path, port, "--dev", "--access-log")
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        assert httpx.get(f"{url}/api/models").status_code == 401
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert re.search(r'"GET /api/models HTTP/1.1" 401', out), out


def test_serve_with_workers_refuses_to_start_without_redis(tmp_path: Path) -> None:
    proc = _serve(tmp_path, free_port(), "--workers", "2", "--dev")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "--workers 2 needs MODELPORT_REDIS_URL" in out
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_serve_with_workers_refuses_a_setting_that_cannot_work(tmp_path: Path) -> None:
    proc = _serve(
        tmp_path,
        free_port(),
        "--workers",
        "2",
        "--dev",
        MODELPORT_REDIS_URL="redis://127.0.0.1:6379/0",
        MODELPORT_BLOB_URL="ftp://example.com/blobs",
    )
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode != 0
    assert "ftp" in out, out
