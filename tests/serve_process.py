"""``modelport serve`` as a real process, for tests of what crosses processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.conftest import ADMIN_KEY


def serve(home: Path, port: int, **settings: str) -> subprocess.Popen[bytes]:
    """Start a server on ``home`` and ``port``; ``settings`` are ``MODELPORT_*`` variables.
    The test's own ``MODELPORT_*`` environment is not passed on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
    env |= {
        "MODELPORT_HOME": str(home),
        "MODELPORT_ADMIN_KEY": ADMIN_KEY,
        "MODELPORT_RUNTIME_EXECUTION": "manifest",  # threads, as the suite's (tests/conftest.py)
        "MODELPORT_RUNTIME_INTRA_OP_THREADS": "1",
        **settings,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "modelport.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_healthy(url: str, proc: subprocess.Popen[bytes], seconds: float = 60) -> None:
    """Wait until the server at ``url`` answers ``/healthz``; fail if it exits first."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited"
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"{url} did not start")


def wait_for(check: Callable[[], bool], seconds: float = 60) -> None:
    """Poll ``check`` until it holds; fail after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
