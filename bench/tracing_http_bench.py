"""What tracing costs `/v2` behind a real server: `modelport serve` with tracing off and
with a 10% sample exporting over OTLP, at concurrency 64, in one run.

    .venv/bin/python bench/tracing_http_bench.py                 # 6 rounds of 3 s each
    .venv/bin/python bench/tracing_http_bench.py --rounds 4 --seconds 2

Two `modelport serve` processes (one uvicorn worker each, SQLite, the add-one ONNX model
in threads of the server), identical but for their environment: **off** has no
``OTEL_*`` variable; **on, 10%** has ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a receiver in this
script that reads each export and keeps nothing), ``OTEL_TRACES_SAMPLER=
parentbased_traceidratio`` and ``OTEL_TRACES_SAMPLER_ARG=0.1``: the configuration an
operator would run, its spans really encoded and posted. This script's 64 callers
(HTTP/1.1 keep-alive connections, spoken by hand to keep the client's CPU small) call one
server then the other, round after round.

The figure is each server process's CPU time per call (user + system, from ``/proc``,
all its threads: the span processor's and the exporter's included): the server is
CPU-bound, and its CPU time is what another process's load moves least. The loss is
``1 - cpu_off / cpu_on``. The calls per second are printed too: on a shared 2-core
machine the client competes with the servers, so they say less.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from modelport.digests import sha256_digest
from modelport.testing.onnx_models import add_one

ADMIN_KEY = "bench-admin-key-" + "x" * 24
MODEL = "acme/adder"
BODY = b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}'


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Receiver:
    """An OTLP/HTTP receiver that reads every export and keeps only a count of bytes."""

    def __init__(self) -> None:
        self.exports = 0
        self.bytes = 0

        async def traces(request: Request) -> Response:
            self.bytes += len(await request.body())
            self.exports += 1
            return Response(b"", media_type="application/x-protobuf")

        self.port = free_port()
        config = uvicorn.Config(
            Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])]),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> None:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


class Server:
    """``modelport serve`` in a subprocess with ``extra`` environment."""

    def __init__(self, home: Path, extra: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MODELPORT_", "OTEL_"))}
        env |= {
            "MODELPORT_HOME": str(home),
            "MODELPORT_ADMIN_KEY": ADMIN_KEY,
            "MODELPORT_RUNTIME_EXECUTION": "manifest",
            "MODELPORT_RUNTIME_INTRA_OP_THREADS": "1",
            **extra,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "modelport.cli", "serve", "--port", str(self.port),
             "--log-level", "warning"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"modelport serve exited with {self.proc.returncode}")
            try:
                if httpx.get(f"{self.url}/v2/health/ready", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("modelport serve did not start")
            time.sleep(0.1)
        self.process = psutil.Process(self.proc.pid)
        self.key = self._publish()

    def _publish(self) -> str:
        """The model published and loaded through the API; a key of its tenant."""
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        with httpx.Client(base_url=self.url, headers=admin, timeout=120) as client:
            client.post("/api/tenants", json={"slug": "acme", "owner": "alice"}).raise_for_status()
            created = client.post(
                "/api/keys", json={"name": "bench", "tenant": "acme", "member": "alice"}
            )
            created.raise_for_status()
            data = add_one().SerializeToString()
            digest = sha256_digest(data)
            client.post("/api/uploads", params={"digest": digest}, content=data).raise_for_status()
            client.post("/api/models", json={"owner": "acme", "name": "adder", "license": "MIT"})
            manifest = {
                "format": "onnx",
                "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
                "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
                "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
                "license": "MIT",
                "resources": {"max_batch_size": 64},
            }
            client.post(
                f"/api/models/{MODEL}/versions", json={"version": "1", "manifest": manifest}
            ).raise_for_status()
            client.post(f"/v2/repository/models/{MODEL}/load", json={}).raise_for_status()
            key: str = created.json()["key"]
            return key

    def cpu_seconds(self) -> float:
        times = self.process.cpu_times()
        return float(times.user + times.system)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


async def burst(server: Server, concurrency: int, seconds: float) -> tuple[float, float]:
    """Calls per second, and the server's CPU microseconds per call, over one burst."""
    request = (
        f"POST /v2/models/{MODEL}/infer HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Authorization: Bearer {server.key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY
    done = 0
    until = time.monotonic() + seconds

    async def caller() -> None:
        # A keep-alive connection of its own, spoken by hand: a Python HTTP client would
        # cost more CPU than the server it measures, on the same two cores.
        nonlocal done
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            while time.monotonic() < until:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = head[9:12]
                length = 0
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                await reader.readexactly(length)
                if status != b"200":
                    raise SystemExit(f"status {status!r}")
                done += 1
        finally:
            writer.close()

    started, cpu = time.monotonic(), server.cpu_seconds()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    wall, used = time.monotonic() - started, server.cpu_seconds() - cpu
    return done / wall, used / done * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=3.0, help="per server and round")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    receiver = Receiver()
    receiver.start()
    on = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.1",
    }
    results: dict[str, list[tuple[float, float]]] = {"off": [], "on, 10%": []}
    with tempfile.TemporaryDirectory(prefix="modelport-bench-") as tmp:
        servers = {
            "off": Server(Path(tmp) / "off", {}),
            "on, 10%": Server(Path(tmp) / "on", on),
        }
        try:
            for server in servers.values():  # warm up
                asyncio.run(burst(server, args.concurrency, 1.0))
            names = list(servers)
            for round_ in range(args.rounds):
                for name in names[round_ % 2 :] + names[: round_ % 2]:
                    results[name].append(
                        asyncio.run(burst(servers[name], args.concurrency, args.seconds))
                    )
        finally:
            for server in servers.values():
                server.stop()
            receiver.stop()
    base_rate = statistics.median(r for r, _ in results["off"])
    base_cpu = statistics.median(c for _, c in results["off"])
    print(
        f"{'server':<9} {'calls/s':>8} {'x off':>6} {'server CPU µs/call':>19} {'x off':>6} {'loss (CPU)':>11}"
    )
    for name, runs in results.items():
        rate = statistics.median(r for r, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(
            f"{name:<9} {rate:8.0f} {rate / base_rate:6.3f} {cpu:19.0f} {cpu / base_cpu:6.3f}"
            f" {1 - base_cpu / cpu:11.1%}"
        )
    print(
        f"(concurrency {args.concurrency}, {args.rounds} rounds of {args.seconds:g} s per server,"
        f" medians; OTLP exports received: {receiver.exports}, {receiver.bytes} bytes)"
    )


if __name__ == "__main__":
    main()
