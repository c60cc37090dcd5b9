"""`modelport serve` refuses weak admin keys and, with --dev, generates and prints one."""

from __future__ import annotations

import os
import re
import socket
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


def _first_lines(proc: subprocess.Popen[str], wanted: str) -> list[str]:
    """The lines printed up to and including the first one holding ``wanted``."""
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line)
        if wanted in line:
            return lines
    raise AssertionError(f"{wanted!r} never printed: {''.join(lines)}")


def test_serve_announces_once_it_listens_and_warns_once_without_a_sandbox(
    tmp_path: Path,
) -> None:
    port = free_port()
    proc = _serve(tmp_path, port, "--dev", MODELPORT_SANDBOX_BWRAP="/nonexistent/bwrap")
    try:
        lines = _first_lines(proc, "modelport serving on")
        # Printed once the server listens: the first request needs no retry.
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
    finally:
        proc.terminate()
        rest, _ = proc.communicate(timeout=30)
    out = "".join(lines) + rest
    assert out.count("the sandbox cannot run here") == 1, out
    assert "'/nonexistent/bwrap'" in out and "apt install bubblewrap" in out
    assert "MODELPORT_SANDBOX=unisolated" in out
    assert out.index("the sandbox cannot run here") < out.index("modelport serving on")


def test_serve_on_a_taken_port_is_one_line_naming_it(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        proc = _serve(tmp_path, port, "--dev")
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: cannot serve on 127.0.0.1:{port}: port {port} is already in use (stop "
        "what holds it, or choose another with --port)"
    ], out
    assert "Traceback" not in out and "serving on" not in out


def test_serve_with_a_grpc_port_says_where_grpc_listens_and_answers_there(
    tmp_path: Path,
) -> None:
    import tritonclient.grpc as triton

    port, grpc_port = free_port(), free_port()
    proc = _serve(tmp_path, port, "--dev", "--grpc-port", str(grpc_port))
    try:
        lines = _first_lines(proc, "modelport serving on")
        client = triton.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        try:
            # Printed once both listen: the first call needs no retry.
            assert client.is_server_live() and client.is_server_ready()
        finally:
            client.close()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert f"http://127.0.0.1:{port} and grpc://127.0.0.1:{grpc_port}" in lines[-1]
