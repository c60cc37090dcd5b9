"""Calls per second of ``/v2`` infer answered from the response cache, against a miss and
against a version that is never cached, measured in one run.

    .venv/bin/python bench/response_cache_bench.py
    .venv/bin/python bench/response_cache_bench.py -n 3000 --concurrency 16

Two models, each published twice (version 1 not declared deterministic, version 2
declared ``runtime.deterministic``): the add-one graph (the cheapest model: what the
cache saves beyond the model is the dispatch, batching and executor hop) and an MLP of
512 features and a 2048-wide hidden layer (about 1 M multiply-adds a row). Each is
called through the whole app over the ASGI interface (no sockets; SQLite; auth, limits
and metering on), in three modes run interleaved in rounds so drift hits them alike:

- uncached: version 1, the cache never consulted;
- miss: version 2, a new input every call (hashed, looked up, run, stored);
- hit: version 2, the same input every call (answered from memory).

Prints calls/s per mode and hit/miss, the ratio this page's figure quotes.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
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
from modelport.testing.onnx_models import add_one, mlp

ADMIN_KEY = "bench-admin-key-" + "x" * 24
ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
FEATURES = 512


def publish(client: Any, ref: str, model: onnx.ModelProto, inputs: Any, outputs: Any) -> None:
    """Upload, create, publish versions 1 (not deterministic) and 2 (deterministic)."""
    data = model.SerializeToString()
    digest = sha256_digest(data)
    client.post("/api/uploads", params={"digest": digest}, content=data).raise_for_status()
    owner, name = ref.split("/")
    client.post("/api/models", json={"owner": owner, "name": name, "license": "MIT"})
    for version, runtime in (("1", {}), ("2", {"deterministic": True})):
        manifest = {
            "format": "onnx",
            "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
            "inputs": inputs,
            "outputs": outputs,
            "license": "MIT",
            "runtime": runtime,
        }
        published = client.post(
            f"/api/models/{ref}/versions", json={"version": version, "manifest": manifest}
        )
        published.raise_for_status()  # loaded on its first call (the warm-up)


def body(name: str, row: np.ndarray) -> bytes:
    tensor = {"name": name, "datatype": "FP32", "shape": [1, row.size], "data": row.tolist()}
    return orjson.dumps({"inputs": [tensor]})


async def run(
    app: ASGIApp,
    headers: list[tuple[bytes, bytes]],
    plan: dict[str, tuple[str, list[bytes]]],
    n: int,
    rounds: int,
    concurrency: int,
) -> dict[str, float]:
    """Calls/s per mode: ``plan`` maps a mode to its path and the bodies it sends in turn."""
    spent = dict.fromkeys(plan, 0.0)
    done = dict.fromkeys(plan, 0)
    cursor = dict.fromkeys(plan, 0)
    per_round = max(concurrency, n // rounds)

    async def worker(path: str, bodies: list[bytes], mode: str, count: int) -> None:
        for _ in range(count):
            i = cursor[mode]
            cursor[mode] = i + 1
            status = await post(app, path, headers, bodies[i % len(bodies)])
            if status != 200:
                raise SystemExit(f"{mode}: status {status}")

    for mode, (path, bodies) in plan.items():  # warm up (a miss warms only the model)
        await worker(path, bodies, mode, 50)
    for _ in range(rounds):
        for mode, (path, bodies) in plan.items():
            started = time.perf_counter()
            share = per_round // concurrency
            await asyncio.gather(*(worker(path, bodies, mode, share) for _ in range(concurrency)))
            spent[mode] += time.perf_counter() - started
            done[mode] += share * concurrency
    return {mode: done[mode] / spent[mode] for mode in plan}


def setup(home: Path) -> tuple[Services, str]:
    settings = Settings(home=home, admin_key=ADMIN_KEY, response_cache_max_bytes=256 << 20)
    services = build_services(settings)
    services.tenancy.create_tenant("acme", actor="bench")
    services.tenancy.add_member("acme", "app", roles=["consumer", "publisher"], actor="bench")
    key = services.tenancy.create_key("acme", "app", name="bench", actor="bench").secret
    return services, key


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=4000, help="calls per mode and model")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    models = {
        "add-one": ("acme/adder", "x", 4, add_one(), "y", 4),
        "mlp 512x2048": (
            "acme/mlp",
            "features",
            FEATURES,
            mlp(n_features=FEATURES, hidden=2048, n_classes=8),
            "probabilities",
            8,
        ),
    }
    from starlette.testclient import TestClient

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="modelport-bench-") as tmp:
        services, key = setup(Path(tmp))
        app = create_app(services)
        with TestClient(app, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as client:
            headers = [
                (b"authorization", f"Bearer {key}".encode()),
                (b"content-type", b"application/json"),
            ]
            for label, (ref, name, width, model, out, n_out) in models.items():
                spec_in = [{"name": name, "datatype": "FP32", "shape": [-1, width]}]
                spec_out = [{"name": out, "datatype": "FP32", "shape": [-1, n_out]}]
                publish(client, ref, model, spec_in, spec_out)
                fresh = [
                    body(name, rng.standard_normal(width).astype(np.float32))
                    for _ in range(args.n + 200)
                ]
                same = [fresh[0]]
                plan = {
                    "uncached": (f"/v2/models/{ref}/versions/1/infer", same),
                    "miss": (f"/v2/models/{ref}/versions/2/infer", fresh[1:]),
                    "hit": (f"/v2/models/{ref}/versions/2/infer", same),
                }
                results[label] = client.portal.call(
                    run,
                    app,  # type: ignore[arg-type]
                    headers,
                    plan,
                    args.n,
                    args.rounds,
                    args.concurrency,
                )
        services.close()
    print(f"{'model':<14} {'uncached/s':>11} {'miss/s':>9} {'hit/s':>9} {'hit/miss':>9}")
    for label, rates in results.items():
        print(
            f"{label:<14} {rates['uncached']:11.0f} {rates['miss']:9.0f} {rates['hit']:9.0f}"
            f" {rates['hit'] / rates['miss']:8.2f}x"
        )
    print(
        f"({args.n} calls per mode and model, concurrency {args.concurrency}, in-process "
        "ASGI, SQLite, one process)"
    )


if __name__ == "__main__":
    main()
