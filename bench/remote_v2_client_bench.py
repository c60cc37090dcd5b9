"""The ``remote_v2`` HTTP client alone: ``RemoteV2Backend`` against a minimal ``/v2``
server, on its transport (``aio_transport``) and on httpx's own (httpcore's pool, the
baseline: what the backend used before), at c=1 and c=64 in one run.

    .venv/bin/python bench/remote_v2_client_bench.py [--seconds 3]

The server (another process: uvicorn, h11, one event loop) answers every inference
with the same small binary-tensor body, so what varies is the client. Printed per
point: calls/s and this process's CPU ms per call (the client's cost, what a gateway
pays), and the transport's ratio to the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time

import httpx
import numpy as np
import psutil

from modelport.serving.backends.remote_v2 import RemoteV2Backend
from modelport.serving.types import BackendRequest, VersionRef

SERVER = """
import sys, orjson, uvicorn
raw = bytes(16)
header = orjson.dumps({"outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 4],
                                    "parameters": {"binary_data_size": len(raw)}}]})
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/octet-stream"),
        (b"inference-header-content-length", str(len(header)).encode())]})
    await send({"type": "http.response.body", "body": header + raw})
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
            access_log=False, http="h11", lifespan="off")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int) -> None:
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the server did not start")


async def measure(
    url: str, httpx_pool: bool, concurrency: int, seconds: float
) -> tuple[float, float]:
    """Calls/s and client CPU ms per call."""
    transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=100))
    backend = RemoteV2Backend("bench", url, transport=transport if httpx_pool else None)
    version = VersionRef("acme/mlp", "1", "", None)  # type: ignore[arg-type]
    inputs = {"features": np.zeros((1, 16), np.float32)}

    def call() -> BackendRequest:
        return BackendRequest(version, inputs, deadline=time.monotonic() + 30)

    calls = 0

    async def loop(until: float) -> None:
        nonlocal calls
        while time.perf_counter() < until:
            await backend.infer(call())
            calls += 1

    try:
        await asyncio.gather(*(backend.infer(call()) for _ in range(concurrency)))  # warm
        me = psutil.Process()
        cpu = sum(me.cpu_times()[:2])
        start = time.perf_counter()
        await asyncio.gather(*(loop(start + seconds) for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
        return calls / elapsed, (sum(me.cpu_times()[:2]) - cpu) / calls * 1000
    finally:
        await backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per point")
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], env=dict(os.environ))
    try:
        wait_listening(port)
        url = f"http://127.0.0.1:{port}"
        for c in (1, 64):
            before = asyncio.run(measure(url, True, c, args.seconds))
            after = asyncio.run(measure(url, False, c, args.seconds))
            print(
                f"c={c:<3} httpx pool (baseline) {before[0]:6.0f} calls/s {before[1]:.3f} ms CPU/call"
                f" | aio_transport {after[0]:6.0f} calls/s {after[1]:.3f} ms CPU/call"
                f" | x{after[0] / before[0]:.2f} calls/s, x{after[1] / before[1]:.2f} CPU",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
