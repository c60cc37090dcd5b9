"""What authentication and limiting add to a request, measured in one run.

    .venv/bin/python bench/auth_overhead_bench.py                     # Redis at 127.0.0.1:6379/0
    .venv/bin/python bench/auth_overhead_bench.py --redis-url redis://host:6379/3 -n 20000

The same trivial endpoint is called through the ASGI interface (no sockets, so the
figures are the code's own cost) with, in turn:

- off: no authentication, no limits;
- auth: the bearer API key checked through the key cache (hash + constant-time compare);
- auth + limits (in-process): plus the inference gate (tenant and key rpm, a model
  concurrency slot, the budget check) and the ``RateLimit-*`` headers;
- auth + limits (Redis): the same gate with the counts in Redis (one GCRA script, one
  lease script, one release pipeline per request, over loopback);
- auth, key cache miss: the key read from the database each time (SQLite).

The modes run interleaved in rounds so drift hits them alike. For scale, the last
line is a real ``/v2`` infer call of a tiny ONNX model through the whole app with
everything on. Each mode prints p50 and p99 in microseconds, what it adds to ``off``
at p50, and its p50 as a multiple of ``off``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis
from asgi_calls import percentile, post
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from modelport.api import create_app
from modelport.api.auth import require_principal_async
from modelport.api.calls import caller_of, note_call
from modelport.api.limiting import RateLimitHeaders
from modelport.api.problems import install_error_handlers
from modelport.app import Services, build_services
from modelport.config import Settings
from modelport.digests import sha256_digest
from modelport.tenancy.limits import ScopeType
from modelport.testing.onnx_models import add_one

ADMIN_KEY = "bench-admin-key-" + "x" * 24
MODEL = "acme/adder"
ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def bench_app(services: Services, mode: str) -> ASGIApp:
    """The trivial endpoint, with ``mode``'s amount of authentication and limiting."""

    async def endpoint(request: Request) -> Response:
        if mode == "off":
            return Response(b"{}", media_type="application/json")
        if mode == "cold":
            services.authenticator.cache.clear()
        principal = await require_principal_async(request)
        if mode in ("auth", "cold"):
            return Response(b"{}", media_type="application/json")
        caller = caller_of(request, principal)
        try:
            admission = await services.inference.admit(caller, MODEL)
        finally:
            note_call(request, caller)
        admission.release()
        return Response(b"{}", media_type="application/json")

    app = Starlette(routes=[Route("/bench", endpoint, methods=["POST"])])
    app.state.services = services
    install_error_handlers(app)  # type: ignore[arg-type]
    if mode.startswith("limits"):
        return RateLimitHeaders(app)  # type: ignore[return-value]
    return app  # type: ignore[return-value]


async def measure(
    targets: dict[str, tuple[ASGIApp, str, bytes]],
    headers: list[tuple[bytes, bytes]],
    n: int,
    rounds: int,
) -> dict[str, list[int]]:
    samples: dict[str, list[int]] = {name: [] for name in targets}
    for name, (app, path, body) in targets.items():  # warm up
        for _ in range(200):
            assert await post(app, path, headers, body) == 200, name
    per_round = max(1, n // rounds)
    for _ in range(rounds):
        for name, (app, path, body) in targets.items():
            times = samples[name]
            for _ in range(per_round):
                start = time.perf_counter_ns()
                status = await post(app, path, headers, body)
                times.append(time.perf_counter_ns() - start)
                if status != 200:
                    raise SystemExit(f"{name}: status {status}")
    return samples


def setup(home: Path, redis_url: str | None) -> tuple[Services, Services | None, str]:
    settings = Settings(home=home, admin_key=ADMIN_KEY, runtime_intra_op_threads=1)
    local = build_services(settings)
    local.tenancy.create_tenant("acme", actor="bench")
    local.tenancy.add_member("acme", "app", roles=["consumer", "publisher"], actor="bench")
    key = local.tenancy.create_key("acme", "app", name="bench", actor="bench").secret
    key_id = key.removeprefix("mp_live_").split("_")[0]
    many = 10**7  # never reached: every call pays the full check
    for scope, scope_id, values in [
        (ScopeType.TENANT, "acme", {"rpm": many}),
        (ScopeType.KEY, key_id, {"rpm": many}),
        (ScopeType.MODEL, MODEL, {"concurrency": 64}),
    ]:
        fields: dict[str, Any] = {"rpm": None, "concurrency": None, "tpm": None} | values
        local.limits.set_limits(scope, scope_id, tenant="acme", actor="bench", **fields)
    shared = None
    if redis_url:
        shared = build_services(settings.model_copy(update={"redis_url": redis_url}))
    return local, shared, key


def publish_adder(client: Any) -> bytes:
    """Upload, create, publish and load the add-one model through the API; an infer body."""
    data = add_one().SerializeToString()
    digest = sha256_digest(data)
    client.post("/api/uploads", params={"digest": digest}, content=data).raise_for_status()
    owner, name = MODEL.split("/")
    client.post("/api/models", json={"owner": owner, "name": name, "license": "MIT"})
    manifest = {
        "format": "onnx",
        "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        "license": "MIT",
    }
    published = client.post(
        f"/api/models/{MODEL}/versions", json={"version": "1", "manifest": manifest}
    )
    published.raise_for_status()
    client.post(f"/v2/repository/models/{MODEL}/load", json={}).raise_for_status()
    return b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=20_000, help="requests per mode")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()

    redis_url: str | None = args.redis_url
    try:
        probe = redis.Redis.from_url(args.redis_url, socket_connect_timeout=1)
        probe.ping()
        probe.close()
    except redis.RedisError as exc:
        print(f"(no Redis at {args.redis_url}: {exc}; skipping the Redis mode)", file=sys.stderr)
        redis_url = None

    with tempfile.TemporaryDirectory(prefix="modelport-bench-") as tmp:
        local, shared, key = setup(Path(tmp), redis_url)
        from starlette.testclient import TestClient

        full = create_app(local)
        with TestClient(full, headers={"Authorization": f"Bearer {ADMIN_KEY}"}) as client:
            infer_body = publish_adder(client)
            headers = [
                (b"authorization", f"Bearer {key}".encode()),
                (b"content-type", b"application/json"),
            ]
            targets: dict[str, tuple[ASGIApp, str, bytes]] = {
                "off": (bench_app(local, "off"), "/bench", b"{}"),
                "auth (cached key)": (bench_app(local, "auth"), "/bench", b"{}"),
                "auth + limits (in-process)": (bench_app(local, "limits"), "/bench", b"{}"),
            }
            if shared is not None:
                targets["auth + limits (Redis)"] = (bench_app(shared, "limits"), "/bench", b"{}")
            targets["auth, key cache miss (DB)"] = (bench_app(local, "cold"), "/bench", b"{}")
            targets["real /v2 infer, all on"] = (
                full,  # type: ignore[dict-item]
                f"/v2/models/{MODEL}/infer",
                infer_body,
            )
            samples = client.portal.call(measure, targets, headers, args.n, args.rounds)
        for services in (local, shared):
            if services is not None:
                services.close()

    base = statistics.median(samples["off"]) / 1000
    print(f"{'mode':<30} {'p50 µs':>9} {'p99 µs':>9} {'+p50 µs':>9} {'x off':>7}")
    for name, times in samples.items():
        p50, p99 = statistics.median(times) / 1000, percentile(times, 0.99)
        print(f"{name:<30} {p50:9.1f} {p99:9.1f} {p50 - base:9.1f} {p50 / base:7.2f}")
    print(f"({len(samples['off'])} requests per mode, in-process ASGI, SQLite, one at a time)")


if __name__ == "__main__":
    main()
