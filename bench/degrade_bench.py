"""Interactive p99 latency under a mixed load, with degradation under load off and on,
in one run.

    .venv/bin/python bench/degrade_bench.py
    .venv/bin/python bench/degrade_bench.py --seconds 6 --batch-rate 800 --rounds 3

Two ONNX MLPs with the same inputs: ``acme/big`` (512 features, a ``--hidden``-wide
hidden layer: its cost grows with the rows merged into an execution) and its cheaper
fallback ``acme/small`` (a 32-wide hidden layer). Called through the whole app over the
ASGI interface (no sockets; SQLite; auth, limits and metering on), in one process:
``--interactive-callers`` callers send interactive calls to big, one every
``--interval-ms`` (or as soon as the last is answered, if later), while ``batch`` calls
arrive at ``--batch-rate`` a second (open loop: the same offered load in every mode,
whatever answers it). The batcher serves interactive requests first, but merges batch
rows into its executions (up to 16 rows). Three modes, alternating, ``--rounds`` times
each: "off" (no degradation), "shed" (above ``--threshold-ms`` of big's predicted queue
wait, batch calls are shed with 503 ``degraded``) and "fallback" (they go to small).

Prints the interactive p50/p99 of each mode, the batch calls answered (by big, or by
small) and shed, and the interactive p99 of off against each other mode (the ratio
``docs/benchmarks.md`` quotes: above 1 means degradation lowered it).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import orjson
from asgi_calls import post

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.config import Settings
from modelport.digests import sha256_digest
from modelport.testing.onnx_models import mlp

ADMIN_KEY = "bench-admin-key-" + "x" * 24
FEATURES = 512
CLASSES = 8
INPUTS = [{"name": "features", "datatype": "FP32", "shape": [-1, FEATURES]}]
OUTPUTS = [{"name": "probabilities", "datatype": "FP32", "shape": [-1, CLASSES]}]


def publish(client: Any, ref: str, model: onnx.ModelProto) -> None:
    data = model.SerializeToString()
    digest = sha256_digest(data)
    client.post("/api/uploads", params={"digest": digest}, content=data).raise_for_status()
    owner, name = ref.split("/")
    client.post("/api/models", json={"owner": owner, "name": name, "license": "MIT"})
    manifest = {
        "format": "onnx",
        "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
        "inputs": INPUTS,
        "outputs": OUTPUTS,
        "license": "MIT",
    }
    published = client.post(
        f"/api/models/{ref}/versions", json={"version": "1", "manifest": manifest}
    )
    published.raise_for_status()


def body(row: np.ndarray, priority: str) -> bytes:
    tensor = {"name": "features", "datatype": "FP32", "shape": [1, FEATURES], "data": row.tolist()}
    return orjson.dumps({"inputs": [tensor], "parameters": {"priority": priority}})


async def load(
    app: Any,
    headers: list[tuple[bytes, bytes]],
    interactive: bytes,
    batch: bytes,
    callers: int,
    rate: float,
    seconds: float,
    interval: float,
) -> tuple[list[float], dict[int, int], dict[int, int]]:
    """Interactive latencies (s) of the calls answered, batch statuses, and the
    interactive calls refused by status: ``callers`` interactive callers,
    batch calls arriving at ``rate`` a second."""
    path = "/v2/models/acme/big/infer"
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    failed: dict[int, int] = {}
    until = time.perf_counter() + seconds

    async def interactive_caller() -> None:
        while time.perf_counter() < until:
            started = time.perf_counter()
            status = await post(app, path, headers, interactive)
            took = time.perf_counter() - started
            if status == 200:
                latencies.append(took)
            else:  # refused: a miss of any SLO, counted apart
                failed[status] = failed.get(status, 0) + 1
            await asyncio.sleep(max(0.0, interval - took))  # arrivals paced, not back to back

    async def batch_call() -> None:
        status = await post(app, path, headers, batch)
        statuses[status] = statuses.get(status, 0) + 1

    async def batch_arrivals() -> None:
        # Open loop: the batch load offered is the same whatever answers it (a shed
        # call is not retried within the round), so every mode pays the same surfaces.
        calls: set[asyncio.Task[None]] = set()
        started = time.perf_counter()
        sent = 0
        while time.perf_counter() < until:
            due = started + sent / rate
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            task = asyncio.ensure_future(batch_call())
            calls.add(task)
            task.add_done_callback(calls.discard)
            sent += 1
        await asyncio.gather(*calls)

    await asyncio.gather(*(interactive_caller() for _ in range(callers)), batch_arrivals())
    return latencies, statuses, failed


def quantile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def setup(home: Path, threshold: float) -> Services:
    settings = Settings(
        home=home,
        admin_key=ADMIN_KEY,
        runtime_max_batch_size=16,
        degrade_queue_wait_seconds=threshold,
        degrade_fallbacks={"acme/big": "acme/small"},
    )
    services = build_services(settings)
    services.tenancy.create_tenant("acme", actor="bench")
    return services


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="per round and mode")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--interactive-callers", type=int, default=2)
    parser.add_argument("--batch-rate", type=float, default=400.0, help="batch calls a second")
    parser.add_argument(
        "--interval-ms", type=float, default=20.0, help="between an interactive caller's calls"
    )
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--threshold-ms", type=float, default=5.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    row = rng.standard_normal(FEATURES).astype(np.float32)
    from starlette.testclient import TestClient

    results: dict[str, tuple[list[float], dict[int, int], dict[int, int]]] = {
        mode: ([], {}, {}) for mode in ("off", "shed", "fallback")
    }
    with tempfile.TemporaryDirectory(prefix="modelport-bench-") as tmp:
        services = setup(Path(tmp), args.threshold_ms / 1000)
        app = create_app(services)
        with TestClient(app, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as client:
            publish(
                client, "acme/big", mlp(n_features=FEATURES, hidden=args.hidden, n_classes=CLASSES)
            )
            publish(client, "acme/small", mlp(n_features=FEATURES, hidden=32, n_classes=CLASSES))
            headers = [
                (b"authorization", f"Bearer {ADMIN_KEY}".encode()),
                (b"content-type", b"application/json"),
            ]
            wired = services.inference.degradation
            assert wired is not None
            modes = {
                "off": replace(wired, threshold_seconds=None),
                "shed": replace(wired, fallbacks={}),
                "fallback": wired,
            }
            interactive, batch = body(row, "interactive"), body(row, "batch")
            for ref in ("acme/big", "acme/small"):  # loaded and warm before any round
                client.post(f"/v2/models/{ref}/infer", content=interactive).raise_for_status()
            for _ in range(args.rounds):
                for mode, policy in modes.items():
                    services.inference.degradation = policy
                    latencies, statuses, failed = client.portal.call(
                        load,
                        app,
                        headers,
                        interactive,
                        batch,
                        args.interactive_callers,
                        args.batch_rate,
                        args.seconds,
                        args.interval_ms / 1000,
                    )
                    results[mode][0].extend(latencies)
                    for into, counts in ((results[mode][1], statuses), (results[mode][2], failed)):
                        for status, count in counts.items():
                            into[status] = into.get(status, 0) + count
        services.close()
    print(
        f"{'mode':<9} {'interactive':>12} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'refused':>8} {'batch ok':>9} {'batch 503':>10}"
    )
    for mode, (latencies, statuses, failed) in results.items():
        print(
            f"{mode:<9} {len(latencies):12d} {statistics.median(latencies) * 1000:8.1f} "
            f"{quantile(latencies, 0.99) * 1000:8.1f} {sum(failed.values()):8d} "
            f"{statuses.get(200, 0):9d} "
            f"{statuses.get(503, 0):10d}"
        )
    off = quantile(results["off"][0], 0.99)
    for mode in ("shed", "fallback"):
        print(f"interactive p99 off/{mode}: {off / quantile(results[mode][0], 0.99):.2f}x")
    print(
        f"({args.seconds:g} s x {args.rounds} rounds per mode, {args.interactive_callers} "
        f"interactive callers every {args.interval_ms:g} ms, {args.batch_rate:g} batch calls/s, "
        f"threshold {args.threshold_ms:g} ms, hidden "
        f"{args.hidden}, in-process ASGI, SQLite, one process)"
    )


if __name__ == "__main__":
    main()
