"""Tokens-per-minute limits, per key and per tenant, set through the API and exact across
processes: two serving processes sharing the real Redis and PostgreSQL stream
concurrently for two keys of one tenant; the tokens admitted (each stream's bound, its
prompt's bytes plus ``max_tokens``) never exceed either allowance, and each refusal
is a 429 ``rate_limited`` with ``Retry-After``. The streams go through ``/v1/completions``
as an OpenAI client's would."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelport.testing.toy_engine import TOY_FORMAT
from tests.conftest import ADMIN_KEY, free_port, skip_or_fail
from tests.databases import truncate_tables
from tests.limits.conftest import Platform, PlatformFactory, bearer
from tests.registry.helpers import put_blob
from tests.serve_process import wait_healthy

pytestmark = pytest.mark.slow  # starts real processes

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "a b c d e f g"  # 13 bytes
MAX_TOKENS = 87
BOUND = len(PROMPT) + MAX_TOKENS  # 100 tokens charged at admission
TENANT_TPM, KEY_TPM = 1000, 300


def start(home: Path, port: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
    environ |= {
        "MODELPORT_HOME": str(home),
        "MODELPORT_ADMIN_KEY": ADMIN_KEY,
        "MODELPORT_RUNTIME_INTRA_OP_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        **env,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.stream_serve_process", str(port)],
        cwd=ROOT,
        env=environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.fixture
def processes(
    make_platform: PlatformFactory, postgres_url: str | None, redis_url: str
) -> Iterator[tuple[list[str], Platform, dict[str, str]]]:
    if postgres_url is None:
        skip_or_fail("needs PostgreSQL (MODELPORT_TEST_DATABASE_URL)")
    assert postgres_url is not None
    truncate_tables(postgres_url)
    platform = make_platform(postgres_url, redis_url=redis_url)
    services = platform.services
    keys = platform.tenant("acme", ("one", ["consumer"]), ("two", ["consumer"]))
    services.registry.create_model("acme", "writer", actor="test", license="MIT")
    data = b"toy weights"
    digest = put_blob(services.blob_store, data)
    manifest = {
        "format": TOY_FORMAT,
        "files": [{"path": "w.bin", "digest": digest, "size": len(data)}],
        "inputs": [{"name": "prompt", "datatype": "BYTES", "shape": [1]}],
        "outputs": [{"name": "text", "datatype": "BYTES", "shape": [1]}],
        "license": "MIT",
    }
    services.registry.publish("acme", "writer", "1", manifest, actor="test")
    # Through the API, before the processes start (they cache limits for a while).
    for path, tpm in (
        ("tenant/acme", TENANT_TPM),
        (f"key/{platform.key_id(keys['one'])}", KEY_TPM),
    ):
        put = platform.client.put(
            f"/api/limits/{path}", json={"tpm": tpm}, headers=bearer(ADMIN_KEY)
        )
        assert put.status_code == 200, put.text
        assert put.json()["tpm"] == tpm
    home = services.settings.store.home  # shared: the blobs too
    env = {"MODELPORT_DATABASE_URL": postgres_url, "MODELPORT_REDIS_URL": redis_url}
    procs, urls = [], []
    try:
        for _ in range(2):
            port = free_port()
            procs.append(start(home, port, env))
            urls.append(f"http://127.0.0.1:{port}")
        for url, proc in zip(urls, procs, strict=True):
            wait_healthy(url, proc)
        yield urls, platform, keys
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


def test_token_allowances_hold_across_two_processes(processes: Any) -> None:
    urls, _platform, keys = processes
    results: list[dict[str, Any]] = []
    lock = threading.Lock()
    callers = [("one", i) for i in range(12)] + [("two", i) for i in range(12)]
    barrier = threading.Barrier(len(callers))

    def call(key: str, i: int) -> None:
        url = urls[i % 2]
        with httpx.Client(timeout=60) as client:
            barrier.wait()
            sent = time.monotonic()
            with client.stream(
                "POST",
                f"{url}/v1/completions",
                json={
                    "model": "acme/writer",
                    "prompt": PROMPT,
                    "max_tokens": MAX_TOKENS,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                },
                headers=bearer(keys[key]),
            ) as response:
                result: dict[str, Any] = {"key": key, "process": i % 2, "sent": sent}
                result["status"] = response.status_code
                result["headers"] = dict(response.headers)
                if response.status_code == 200:
                    events = [
                        json.loads(line[5:])
                        for line in response.iter_lines()
                        if line.startswith("data:") and line != "data: [DONE]"
                    ]
                    result["events"] = events
                else:
                    result["body"] = json.loads(response.read())
        with lock:
            results.append(result)

    began = time.monotonic()
    threads = [threading.Thread(target=call, args=c) for c in callers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    assert len(results) == len(callers)

    admitted = [r for r in results if r["status"] == 200]
    refused = [r for r in results if r["status"] != 200]

    # GCRA refills an allowance continuously: over the test's run it may have given
    # back tpm * elapsed / 60 tokens on top of the minute's burst.
    def refill(tpm: int) -> int:
        return math.floor(tpm * elapsed / 60)

    assert len(admitted) * BOUND <= TENANT_TPM + refill(TENANT_TPM)
    one = [r for r in admitted if r["key"] == "one"]
    assert len(one) * BOUND <= KEY_TPM + refill(KEY_TPM)
    assert len(one) >= 1 and len(admitted) >= TENANT_TPM // BOUND - 1  # the allowances were used
    for r in admitted:  # each admitted stream ran to its end
        finishes = [c["finish_reason"] for e in r["events"] for c in e["choices"]]
        assert finishes[-1] == "length"
        assert r["events"][-1]["usage"]["completion_tokens"] == MAX_TOKENS
    assert refused, "nothing was refused: the limits did not hold"
    for r in refused:
        assert r["status"] == 429
        assert r["body"]["error"]["code"] == "rate_limited"  # OpenAI's error object
        assert int(r["headers"]["retry-after"]) >= 1
    assert {r["process"] for r in refused} == {0, 1}  # both processes refused some
