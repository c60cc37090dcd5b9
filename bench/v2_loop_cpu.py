"""Event-loop CPU per ``/v2`` infer request, in process (no sockets, no wrk).

    .venv/bin/python bench/v2_loop_cpu.py                  # admin key, as serving_bench
    .venv/bin/python bench/v2_loop_cpu.py --tenant-key     # a tenant's consumer key
    .venv/bin/python bench/v2_loop_cpu.py --consumer       # another tenant's public model
    .venv/bin/python bench/v2_loop_cpu.py --consumer --priced    # priced, nothing to hold on
    .venv/bin/python bench/v2_loop_cpu.py --consumer --balance   # priced, held on a balance
    .venv/bin/python bench/v2_loop_cpu.py --consumer --limited   # a tenant rate and concurrency limit
    .venv/bin/python bench/v2_loop_cpu.py --consumer --limited --redis-url redis://host:6379/3
    .venv/bin/python bench/v2_loop_cpu.py --profile out.prof --concurrency 64

The serving benchmark's MLP is published into a fresh SQLite home and called
through the whole ASGI application on uvloop by ``--concurrency`` callers, each
posting the same single-row JSON request. ``time.thread_time`` of the loop thread
over the run, divided by the requests answered, is the figure to cut: the
loop thread is what every request shares, while the model runs on executor
threads. Prints requests/s, and loop and whole-process CPU µs per request (the
process figure includes the model's own compute on the executor threads).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import serving_bench  # beside this script
import uvloop
from asgi_calls import post

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.config import Settings
from modelport.digests import sha256_digest
from modelport.metering.types import BalanceScope, NewPriceRule, Unit
from modelport.tenancy.limits import ScopeType

ADMIN_KEY = "bench-admin-key-" + "c" * 24


def setup(
    home: Path,
    tenant_key: bool,
    consumer: bool = False,
    *,
    priced: bool = False,
    balance: bool = False,
    limited: bool = False,
    redis_url: str | None = None,
) -> tuple[Services, str, str]:
    """Services with the MLP published (as acme/mlp), and the key to call it with.
    ``consumer``: public and approved instead, called with a key of tenant globex (the
    marketplace's call across tenants). ``priced``: each prediction costs 1,000
    micro-units, so every call is reserved before it runs (with no balance nor budget
    the reservation finds nothing to hold); ``balance`` (priced too): the caller's
    tenant has a prepaid balance, so every call holds money on it. ``limited``: the
    caller's tenant has a rate (10^7 a minute) and a concurrency (1,000) limit that never
    refuse, so every call is charged and holds a slot; ``redis_url``: counted in that
    Redis (the distributed limiters) instead of in process."""
    settings = Settings(home=home, admin_key=ADMIN_KEY, redis_url=redis_url)
    services = build_services(settings)
    data = serving_bench.build_mlp().SerializeToString()
    digest = sha256_digest(data)
    upload = uuid.uuid4().hex
    writer = services.blob_store.open_staging(upload, 0)
    writer.write(data)
    writer.publish()
    services.blob_store.commit_staging(upload, digest, len(data))
    services.blob_store.discard_staging(upload)
    key = ADMIN_KEY
    if tenant_key or consumer:
        caller = "globex" if consumer else "acme"
        services.tenancy.create_tenant("acme", actor="bench")
        if consumer:
            services.tenancy.create_tenant("globex", actor="bench")
        services.tenancy.add_member(caller, "app", roles=["owner"], actor="bench")
        key = services.tenancy.create_key(caller, "app", name="bench", actor="bench").secret
    visibility = "public" if consumer else "private"
    services.registry.create_model(
        "acme", "mlp", actor="bench", license="MIT", visibility=visibility
    )
    manifest = {
        "format": "onnx",
        "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
        "inputs": [{"name": "features", "datatype": "FP32", "shape": [-1, serving_bench.FEATURES]}],
        "outputs": [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 4]}],
        "license": "MIT",
        "resources": {"max_batch_size": 64},
        "examples": [example(data)],
    }
    services.registry.publish("acme", "mlp", "1", manifest, actor="bench")
    if consumer:  # other tenants may call approved versions only
        for state in ("validated", "approved"):
            services.registry.transition("acme", "mlp", "1", state, actor="bench")
    if priced or balance:
        rule = NewPriceRule(model="acme/mlp", unit=Unit.PREDICTION, unit_price_micros=1_000)
        services.metering.prices.add(rule, actor="bench")
    if balance:  # ample: no call is refused
        caller = "globex" if consumer else "acme"
        services.metering.balances.credit(BalanceScope.TENANT, caller, 10**15, tenant=caller)
    if limited:
        caller = "globex" if consumer else "acme"
        services.limits.set_limits(
            ScopeType.TENANT,
            caller,
            tenant=caller,
            rpm=10**7,
            concurrency=1000,
            tpm=None,
            actor="bench",
        )
    return services, key, "/v2/models/acme/mlp/versions/1/infer"


def example(model: bytes) -> dict[str, Any]:
    """One row and the model's answer to it, as a manifest example."""
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    row = np.ones((1, serving_bench.FEATURES), np.float32)
    (out,) = session.run(None, {"features": row})

    def tensor(name: str, array: np.ndarray) -> dict[str, Any]:
        shape = list(array.shape)
        return {"name": name, "datatype": "FP32", "shape": shape, "data": array.ravel().tolist()}

    return {"inputs": [tensor("features", row)], "outputs": [tensor("probabilities", out)]}


async def call(app: Any, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    status = await post(app, path, headers, body)
    if status != 200:
        raise SystemExit(f"{path}: status {status}")


async def measure(
    app: Any, path: str, headers: list[tuple[bytes, bytes]], body: bytes, c: int, seconds: float
) -> tuple[float, float, float]:
    """(requests per second, loop CPU and process CPU µs per request) for ``c`` callers."""
    done = 0
    stop = time.perf_counter() + seconds

    async def caller() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await call(app, path, headers, body)
            done += 1

    cpu, process, wall = time.thread_time(), time.process_time(), time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(c)))
    cpu, process = time.thread_time() - cpu, time.process_time() - process
    wall = time.perf_counter() - wall
    return done / wall, cpu / done * 1e6, process / done * 1e6


async def run(args: argparse.Namespace, services: Services, key: str, path: str) -> None:
    app = create_app(services)
    row = np.random.default_rng(0).standard_normal(serving_bench.FEATURES).astype(np.float32)
    body = serving_bench.request_body(row)
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    async with app.router.lifespan_context(app):
        await measure(app, path, headers, body, 4, 1.0)  # load, warm caches
        print("| concurrency | req/s | loop CPU µs/request | process CPU µs/request |")
        print("|---:|---:|---:|---:|")
        for c in [int(x) for x in args.concurrency.split(",")]:
            profiler = cProfile.Profile() if args.profile else None
            if profiler:
                profiler.enable()
            rate, cpu, process = await measure(app, path, headers, body, c, args.seconds)
            if profiler:
                profiler.disable()
                profiler.dump_stats(f"{args.profile}.c{c}")
            print(f"| {c} | {rate:.0f} | {cpu:.0f} | {process:.0f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,64")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--tenant-key", action="store_true", help="call with a tenant's key")
    parser.add_argument(
        "--consumer", action="store_true", help="call another tenant's public model"
    )
    parser.add_argument(
        "--priced", action="store_true", help="price the version: every call is reserved"
    )
    parser.add_argument(
        "--balance",
        action="store_true",
        help="priced, and the caller's tenant has a prepaid balance every call holds on",
    )
    parser.add_argument(
        "--limited",
        action="store_true",
        help="a tenant rate and concurrency limit every call is charged to (never refusing)",
    )
    parser.add_argument("--redis-url", help="count limits in this Redis (with --limited)")
    parser.add_argument("--profile", help="write cProfile stats to PROFILE.c<concurrency>")
    args = parser.parse_args()
    if args.balance and not (args.tenant_key or args.consumer):
        parser.error("--balance needs a tenant's key: --tenant-key or --consumer")
    if args.limited and not (args.tenant_key or args.consumer):
        parser.error("--limited needs a tenant's key: --tenant-key or --consumer")
    with tempfile.TemporaryDirectory(prefix="modelport-bench-") as tmp:
        services, key, path = setup(
            Path(tmp),
            args.tenant_key,
            args.consumer,
            priced=args.priced,
            balance=args.balance,
            limited=args.limited,
            redis_url=args.redis_url,
        )
        try:
            uvloop.run(run(args, services, key, path))
        finally:
            services.close()


if __name__ == "__main__":
    main()
