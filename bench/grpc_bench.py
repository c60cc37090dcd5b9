"""The OIP gRPC surface against HTTP/JSON with binary tensors, on one server and one model.

    .venv/bin/python bench/grpc_bench.py                        # 5 s per point, c=1 and 64
    .venv/bin/python bench/grpc_bench.py --duration 10 --concurrency 1,16,64

One ``modelport serve --grpc-port`` process (uvloop, httptools, no access log) serves both
surfaces; the model is ``serving_bench``'s MLP (64 float features -> 4 classes), published
and loaded through the platform's API before the clock starts, and called with the admin
key, one row per call, for a fixed time per point:

- **HTTP, binary**: ``POST /v2/models/bench/mlp/versions/1/infer`` with the binary tensor
  extension (a JSON header, the 256 bytes of the row after it, the output asked as
  binary), over ``c`` keep-alive connections, each a loop of one call at a time. The
  client is a bare asyncio HTTP/1.1 writer and reader, so the client's own cost stays
  small beside the server's.
- **gRPC**: ``ModelInfer`` with the row in ``raw_input_contents``, ``c`` concurrent
  loops over one channel (one HTTP/2 connection, as tritonclient uses), with
  ``grpc.aio`` and the platform's generated messages.

- **gRPC minimal** (``bench/minimal_grpc_server.py``): the same gRPC client against a
  bare ``grpc.aio`` server on uvloop answering ``ModelInfer`` with ``session.run``
  inline (no platform at all): what ``grpc.aio`` itself costs per call.

They run back to back at each concurrency (HTTP first), so drift in the machine's load
hits them alike. Each point prints calls/s, p50/p99 latency in ms and the server
process's CPU time per call (user + system, every thread: the figure the machine's load
and the client's own cost do not move much), then gRPC's ratio to HTTP (calls/s: higher
is better; latency and CPU: lower is better).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import grpc
import numpy as np
import orjson
import psutil
from serving_bench import (
    ADMIN_KEY,
    FEATURES,
    MODEL,
    batch_stats,
    build_mlp,
    free_port,
    publish,
    wait_ready,
)

from modelport.api.grpc import oip_pb2 as pb

PATH = f"/v2/models/{MODEL}/versions/1/infer"
HERE = Path(__file__).resolve().parent


@dataclass
class Point:
    calls: int
    seconds: float
    latencies: list[float]
    cpu_seconds: float = 0.0
    """The server process's CPU time (user + system, all its threads) during the point."""
    mean_batch: float | None = None
    """The platform's mean executed batch size during the point (rows per batch)."""

    @property
    def rate(self) -> float:
        return self.calls / self.seconds

    def percentile(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    @property
    def cpu_per_call_ms(self) -> float:
        return self.cpu_seconds / self.calls * 1000

    def __str__(self) -> str:
        batch = "" if self.mean_batch is None else f"  mean batch {self.mean_batch:.1f}"
        return (
            f"{self.rate:9.0f} calls/s  p50 {self.percentile(0.5):7.3f} ms  "
            f"p99 {self.percentile(0.99):7.3f} ms  server CPU {self.cpu_per_call_ms:.3f} ms/call"
            f"{batch}"
        )


def wait_live(port: int, timeout: float = 60.0) -> None:
    """Until a gRPC server answers ``ServerLive`` on ``port``."""
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        live = channel.unary_unary(
            "/inference.GRPCInferenceService/ServerLive",
            request_serializer=pb.ServerLiveRequest.SerializeToString,
            response_deserializer=pb.ServerLiveResponse.FromString,
        )
        while time.monotonic() < deadline:
            try:
                live(pb.ServerLiveRequest(), timeout=1)
                return
            except grpc.RpcError:
                time.sleep(0.1)
    raise RuntimeError(f"no gRPC server answered on port {port}")


@contextmanager
def server(
    command: list[str], env: dict[str, str], ready: Callable[[], None]
) -> Iterator[psutil.Process]:
    """A server as a child process, once ``ready`` returns; stopped on leaving."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
    try:
        ready()
        yield psutil.Process(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def measured(
    serving: psutil.Process, run: Callable[[], Awaitable[Point]], url: str | None = None
) -> Point:
    """``run``'s point with the server's CPU time during it (and, given the platform's
    ``url``, its mean executed batch, from ``/metrics``)."""
    batches = batch_stats(url) if url else None
    before = serving.cpu_times()
    point = asyncio.run(run())
    after = serving.cpu_times()
    point.cpu_seconds = (after.user - before.user) + (after.system - before.system)
    if url and batches:
        rows, count = (a - b for a, b in zip(batch_stats(url), batches, strict=True))
        point.mean_batch = rows / count if count else 0.0
    return point


def http_request(port: int, row: np.ndarray, path: str = PATH) -> bytes:
    header = orjson.dumps(
        {
            "inputs": [
                {
                    "name": "features",
                    "datatype": "FP32",
                    "shape": [1, FEATURES],
                    "parameters": {"binary_data_size": row.nbytes},
                }
            ],
            "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}],
        }
    )
    body = header + row.tobytes()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {ADMIN_KEY}\r\nContent-Type: application/octet-stream\r\n"
        f"Inference-Header-Content-Length: {len(header)}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def http_loop(port: int, request: bytes, until: float, latencies: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < until:
            start = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(head.decode("latin-1"))
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - start)
    finally:
        writer.close()


async def grpc_loop(
    call: grpc.aio.UnaryUnaryMultiCallable,
    request: pb.ModelInferRequest,
    until: float,
    latencies: list[float],
) -> None:
    metadata = (("authorization", f"Bearer {ADMIN_KEY}"),)
    while time.perf_counter() < until:
        start = time.perf_counter()
        await call(request, metadata=metadata)
        latencies.append(time.perf_counter() - start)


async def run_http(
    port: int, row: np.ndarray, concurrency: int, seconds: float, path: str = PATH
) -> Point:
    """``concurrency`` keep-alive connections posting ``row`` to ``path`` for ``seconds``."""
    request = http_request(port, row, path)
    latencies: list[float] = []
    start = time.perf_counter()
    until = start + seconds
    await asyncio.gather(*(http_loop(port, request, until, latencies) for _ in range(concurrency)))
    return Point(len(latencies), time.perf_counter() - start, latencies)


async def run_grpc(
    port: int, row: np.ndarray, concurrency: int, seconds: float, channels: int = 1
) -> Point:
    request = pb.ModelInferRequest(model_name=MODEL, model_version="1")
    request.inputs.add(name="features", datatype="FP32", shape=[1, FEATURES])
    request.raw_input_contents.append(row.tobytes())
    latencies: list[float] = []
    # Distinct channel arguments: gRPC would otherwise share one connection between them.
    opened = [
        grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[("modelport.bench.channel", i)])
        for i in range(channels)
    ]
    try:
        calls = [
            channel.unary_unary(
                "/inference.GRPCInferenceService/ModelInfer",
                request_serializer=pb.ModelInferRequest.SerializeToString,
                response_deserializer=pb.ModelInferResponse.FromString,
            )
            for channel in opened
        ]
        start = time.perf_counter()
        until = start + seconds
        await asyncio.gather(
            *(grpc_loop(calls[i % channels], request, until, latencies) for i in range(concurrency))
        )
        return Point(len(latencies), time.perf_counter() - start, latencies)
    finally:
        for channel in opened:
            await channel.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per point")
    parser.add_argument("--concurrency", default="1,64", help="comma-separated levels")
    parser.add_argument(
        "--channels",
        type=int,
        default=1,
        help="gRPC channels (connections) the concurrent calls share (tritonclient: one)",
    )
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    row = np.random.default_rng(0).standard_normal((1, FEATURES)).astype("<f4")
    model = build_mlp().SerializeToString()
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="grpc-bench-")))
        port, grpc_port = free_port(), free_port()
        url = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "MODELPORT_HOME": str(work / "home"),
            "MODELPORT_ADMIN_KEY": ADMIN_KEY,
        }
        command = [
            *(sys.executable, "-m", "modelport.cli", "serve"),
            *("--port", str(port), "--grpc-port", str(grpc_port), "--log-level", "warning"),
        ]
        serving = stack.enter_context(server(command, env, partial(wait_ready, url)))
        publish(url, model)
        model_path = work / "mlp.onnx"
        model_path.write_bytes(model)
        minimal_port = free_port()
        minimal_command = [
            *(sys.executable, str(HERE / "minimal_grpc_server.py")),
            *("--port", str(minimal_port), "--model", str(model_path)),
        ]
        minimal = stack.enter_context(
            server(minimal_command, dict(os.environ), partial(wait_live, minimal_port))
        )
        asyncio.run(run_http(port, row, 4, 1.0))  # warm up every path
        asyncio.run(run_grpc(grpc_port, row, 4, 1.0))
        asyncio.run(run_grpc(minimal_port, row, 4, 1.0))
        print(f"model {MODEL} (MLP, 1 row of {FEATURES} FP32), {args.duration:g} s per point")
        for c in levels:
            http = measured(serving, partial(run_http, port, row, c, args.duration), url)
            print(f"HTTP binary c={c:<3} {http}", flush=True)
            rpc = measured(
                serving, partial(run_grpc, grpc_port, row, c, args.duration, args.channels), url
            )
            print(f"gRPC        c={c:<3} {rpc}", flush=True)
            floor = measured(
                minimal, partial(run_grpc, minimal_port, row, c, args.duration, args.channels)
            )
            print(f"gRPC minim. c={c:<3} {floor}", flush=True)
            print(
                f"gRPC / HTTP c={c:<3} calls/s x{rpc.rate / http.rate:.2f}  "
                f"p50 x{rpc.percentile(0.5) / http.percentile(0.5):.2f}  "
                f"p99 x{rpc.percentile(0.99) / http.percentile(0.99):.2f}  "
                f"server CPU/call x{rpc.cpu_per_call_ms / http.cpu_per_call_ms:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
