"""The hop to a pool worker: all-in-one against a gateway and one worker over gRPC.

    .venv/bin/python bench/pool_bench.py \\
        --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench_pool \\
        --redis-url redis://127.0.0.1:6379/9          # 5 s per point, c=1 and 64

The model is ``serving_bench``'s MLP (64 float features -> 4 classes), one row per call,
called with the admin key over HTTP with the binary tensor extension (``grpc_bench``'s
bare asyncio client), for a fixed time per point:

- **all-in-one**: one ``modelport serve`` (SQLite, local blobs), the version loaded on
  its own host.
- **gateway + worker**: ``modelport serve --role gateway`` and one ``--role worker`` on
  the given PostgreSQL (an empty database: it is migrated here) and Redis, sharing a
  local blob folder, ``MODELPORT_WORKER_TOKEN`` set, one replica; the version deployed
  to an endpoint (so the pool places it), then called by version on the gateway, which
  calls the worker over OIP gRPC.

Each point prints calls/s, p50/p99 in ms and each server process's CPU time per call
(user + system, every thread); the pool's line adds the ratios to all-in-one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import httpx
import numpy as np
import psutil
from grpc_bench import Point, run_http, server
from serving_bench import (
    ADMIN_KEY,
    FEATURES,
    MODEL,
    build_mlp,
    example,
    free_port,
    publish,
    wait_ready,
)

from modelport.digests import sha256_digest

TOKEN = "bench-worker-token-" + "x" * 24
AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}


def command(port: int, *extra: str) -> list[str]:
    return [
        *(sys.executable, "-m", "modelport.cli", "serve"),
        *("--port", str(port), "--log-level", "warning", *extra),
    ]


def measured(processes: list[psutil.Process], run: partial[object]) -> tuple[Point, list[float]]:
    """The point and each process's CPU ms per call during it."""
    before = [p.cpu_times() for p in processes]
    point = asyncio.run(run())  # type: ignore[arg-type]
    after = [p.cpu_times() for p in processes]
    seconds = [
        (a.user - b.user) + (a.system - b.system) for a, b in zip(after, before, strict=True)
    ]
    point.cpu_seconds = sum(seconds)
    return point, [s / point.calls * 1000 for s in seconds]


def manifest_of(data: bytes) -> dict[str, object]:
    """The MLP's manifest (``data``: its ONNX bytes)."""
    return {
        "format": "onnx",
        "files": [{"path": "model.onnx", "digest": sha256_digest(data), "size": len(data)}],
        "inputs": [{"name": "features", "datatype": "FP32", "shape": [-1, FEATURES]}],
        "outputs": [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 4]}],
        "license": "MIT",
        "resources": {"max_batch_size": 64},
        "examples": [example(data)],
    }


def publish_approved(http: httpx.Client, data: bytes) -> None:
    """Upload the model, create and approve its version 1 (deployments hold approved
    versions only)."""
    digest = sha256_digest(data)
    http.post("/api/uploads", params={"digest": digest}, content=data).raise_for_status()
    owner, name = MODEL.split("/")
    http.post("/api/tenants", json={"slug": owner})
    http.post("/api/models", json={"owner": owner, "name": name, "license": "MIT"})
    http.post(
        f"/api/models/{MODEL}/versions", json={"version": "1", "manifest": manifest_of(data)}
    ).raise_for_status()
    for state in ("validated", "approved"):
        moved = http.post(f"/api/models/{MODEL}/versions/1/transitions", json={"to": state})
        if moved.status_code >= 400:
            raise RuntimeError(f"{state}: {moved.status_code} {moved.text}")


def deploy(http: httpx.Client, endpoint: str, **version: object) -> None:
    """Create ``endpoint`` with version 1 (``version``: more of its entry, such as
    ``backends``) and wait until its deployment is active (its replicas ready)."""
    owner = MODEL.split("/")[0]
    http.post("/api/endpoints", json={"name": endpoint, "tenant": owner}).raise_for_status()
    made = http.post(
        f"/api/endpoints/{endpoint}/deployments",
        json={"versions": [{"model": MODEL, "version": "1", "weight": 100, **version}]},
    )
    made.raise_for_status()
    ident = made.json()["id"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = http.get(f"/api/endpoints/{endpoint}/deployments/{ident}").json()["state"]
        if state == "active":
            return
        if state == "failed":
            raise RuntimeError(f"the deployment of {endpoint} failed")
        time.sleep(0.2)
    raise RuntimeError(f"the deployment of {endpoint} never became active")


def deploy_on_pool(url: str, data: bytes) -> None:
    """Upload, create and publish the model through the gateway, then deploy it to an
    endpoint and wait until it is active (its replica ready on the worker)."""
    with httpx.Client(base_url=url, headers=AUTH, timeout=120) as http:
        publish_approved(http, data)
        deploy(http, "mlp")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per point")
    parser.add_argument("--concurrency", default="1,64", help="comma-separated levels")
    parser.add_argument("--database-url", required=True, help="an empty PostgreSQL database")
    parser.add_argument("--redis-url", required=True)
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    row = np.random.default_rng(0).standard_normal((1, FEATURES)).astype("<f4")
    model = build_mlp().SerializeToString()
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pool-bench-")))
        base = {**os.environ, "MODELPORT_ADMIN_KEY": ADMIN_KEY}
        one_port = free_port()
        one_url = f"http://127.0.0.1:{one_port}"
        one = stack.enter_context(
            server(
                command(one_port),
                {**base, "MODELPORT_HOME": str(work / "one")},
                partial(wait_ready, one_url),
            )
        )
        publish(one_url, model)

        pool_env = {
            **base,
            "MODELPORT_DATABASE_URL": args.database_url,
            "MODELPORT_REDIS_URL": args.redis_url,
            "MODELPORT_BLOB_URL": str(work / "blobs"),
            "MODELPORT_WORKER_TOKEN": TOKEN,
            "MODELPORT_WORKER_REPLICAS": "1",
        }
        subprocess.run([sys.executable, "-m", "modelport.cli", "migrate"], env=pool_env, check=True)
        worker_port, gateway_port = free_port(), free_port()
        worker = stack.enter_context(
            server(
                command(worker_port, "--role", "worker", "--grpc-port", str(free_port())),
                {**pool_env, "MODELPORT_HOME": str(work / "worker")},
                partial(wait_ready, f"http://127.0.0.1:{worker_port}"),
            )
        )
        gateway_url = f"http://127.0.0.1:{gateway_port}"
        gateway = stack.enter_context(
            server(
                command(gateway_port, "--role", "gateway"),
                {**pool_env, "MODELPORT_HOME": str(work / "gateway")},
                partial(wait_ready, gateway_url),
            )
        )
        deploy_on_pool(gateway_url, model)
        asyncio.run(run_http(one_port, row, 4, 1.0))  # warm up both paths
        asyncio.run(run_http(gateway_port, row, 4, 1.0))
        print(f"model {MODEL} (MLP, 1 row of {FEATURES} FP32), {args.duration:g} s per point")
        for c in levels:
            alone, (alone_cpu,) = measured(
                [one], partial(run_http, one_port, row, c, args.duration)
            )
            print(f"all-in-one        c={c:<3} {alone}", flush=True)
            hop, (gateway_cpu, worker_cpu) = measured(
                [gateway, worker], partial(run_http, gateway_port, row, c, args.duration)
            )
            print(
                f"gateway + worker  c={c:<3} {hop.rate:9.0f} calls/s  "
                f"p50 {hop.percentile(0.5):7.3f} ms  p99 {hop.percentile(0.99):7.3f} ms  "
                f"CPU gateway {gateway_cpu:.3f} + worker {worker_cpu:.3f} ms/call",
                flush=True,
            )
            print(
                f"pool / alone      c={c:<3} calls/s x{hop.rate / alone.rate:.2f}  "
                f"p50 x{hop.percentile(0.5) / alone.percentile(0.5):.2f}  "
                f"p99 x{hop.percentile(0.99) / alone.percentile(0.99):.2f}  "
                f"CPU/call x{(gateway_cpu + worker_cpu) / alone_cpu:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
