"""What the endpoint layer adds to a prediction, over calling the runtime directly.

    .venv/bin/python bench/endpoint_overhead_bench.py            # 5000 calls per mode
    .venv/bin/python bench/endpoint_overhead_bench.py -n 20000 --rounds 20

One tiny ONNX model (add-one), published, approved and deployed to an endpoint
(one version, weight 100), then called one request at a time, in turn:

- host.infer: the model host in-process (batcher and executor thread, no routing);
- router.predict: the endpoint's routing (snapshot, weighted choice, dispatcher with
  its breaker and output checks, traffic stats), in-process, no HTTP;
- /v2 infer: the Open Inference Protocol route through the whole app;
- :predict: ``POST /api/endpoints/{name}:predict`` through the whole app (tensor form);
- :predict simple: the same with the simple ``{"inputs": {"x": [[...]]}}`` form;
- :predict + Idempotency-Key: a new key each call (one claim and one completion
  written to the database per call).

The app is driven through its ASGI interface (no sockets: the figures are the code's
own cost), with a tenant's API key (authentication from the key cache, rate and
concurrency limits, metering with no price rule, the prediction log). The modes run
interleaved in rounds so drift hits them alike. Each prints p50 and p99 in
microseconds and what it adds to host.infer at p50 and p99.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from asgi_calls import percentile, post
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.config import Settings
from modelport.digests import sha256_digest
from modelport.registry import repository as registry_repo
from modelport.registry.types import LifecycleState
from modelport.runtime.types import VersionKey
from modelport.testing.onnx_models import add_one

ADMIN_KEY = "bench-admin-key-" + "x" * 24
MODEL = "acme/adder"
ENDPOINT = "adder"
ROW = [1.0, 2.0, 3.0, 4.0]
Target = Callable[[], Awaitable[None]]


def setup(home: Path) -> tuple[Services, str]:
    """Services with a tenant, a consumer key, and the adder published and approved."""
    settings = Settings(home=home, admin_key=ADMIN_KEY, runtime_intra_op_threads=1)
    services = build_services(settings)
    services.tenancy.create_tenant("acme", actor="bench")
    services.tenancy.add_member("acme", "app", roles=["consumer"], actor="bench")
    key = services.tenancy.create_key("acme", "app", name="bench", actor="bench").secret
    data = add_one().SerializeToString()
    digest = sha256_digest(data)
    upload = uuid.uuid4().hex
    writer = services.blob_store.open_staging(upload, 0)
    writer.write(data)
    writer.publish()
    services.blob_store.commit_staging(upload, digest, len(data))
    services.blob_store.discard_staging(upload)
    owner, name = MODEL.split("/")
    services.registry.create_model(owner, name, actor="bench", license="MIT")
    manifest = {
        "format": "onnx",
        "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        "license": "MIT",
    }
    services.registry.publish(owner, name, "1", manifest, actor="bench")
    with services.database.transaction() as session:
        vid = registry_repo.version_id(session, owner, name, "1", lock=True)
        for state in (LifecycleState.VALIDATED, LifecycleState.APPROVED):
            current = registry_repo.current_state(session, vid)
            registry_repo.append_event(session, vid, current, state, actor="bench", reason="")
    return services, key


def deploy(client: TestClient) -> None:
    client.post("/api/endpoints", json={"name": ENDPOINT, "tenant": "acme"}).raise_for_status()
    body = {"versions": [{"model": MODEL, "version": "1", "weight": 100}]}
    created = client.post(f"/api/endpoints/{ENDPOINT}/deployments", json=body)
    created.raise_for_status()
    location = created.headers["Location"]
    deadline = time.monotonic() + 60
    while client.get(location).json()["state"] == "pending":
        if time.monotonic() > deadline:
            raise SystemExit("the deployment did not become active")
        time.sleep(0.05)


def targets(services: Services, key: str) -> dict[str, Target]:
    app = create_app(services)
    host, router = services.host, services.serving.router
    version_key = host.find(MODEL, "1")
    assert isinstance(version_key, VersionKey)
    x = {"x": np.array([ROW], dtype=np.float32)}
    auth = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    tensors = orjson.dumps(
        {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ROW}]}
    )
    simple = orjson.dumps({"inputs": {"x": [ROW]}})
    predict = f"/api/endpoints/{ENDPOINT}:predict"

    async def direct() -> None:
        await host.infer(version_key, x, deadline=time.monotonic() + 10)

    async def routed() -> None:
        await router.predict(router.plan(ENDPOINT), x, deadline=time.monotonic() + 10)

    async def idempotent() -> None:
        headers = [*auth, (b"idempotency-key", uuid.uuid4().hex.encode())]
        await call(app, predict, headers, tensors)

    return {
        "host.infer": direct,
        "router.predict": routed,
        "/v2 infer": lambda: call(app, f"/v2/models/{MODEL}/infer", auth, tensors),
        ":predict": lambda: call(app, predict, auth, tensors),
        ":predict simple": lambda: call(app, predict, auth, simple),
        ":predict + Idempotency-Key": idempotent,
    }


async def measure(modes: dict[str, Target], n: int, rounds: int) -> dict[str, list[int]]:
    samples: dict[str, list[int]] = {name: [] for name in modes}
    for run in modes.values():  # warm up
        for _ in range(100):
            await run()
    per_round = max(1, n // rounds)
    for _ in range(rounds):
        for name, run in modes.items():
            times = samples[name]
            for _ in range(per_round):
                start = time.perf_counter_ns()
                await run()
                times.append(time.perf_counter_ns() - start)
    return samples


async def call(app: Any, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    status = await post(app, path, headers, body)
    if status != 200:
        raise SystemExit(f"{path}: status {status}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=5000, help="calls per mode")
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="modelport-bench-") as tmp:
        services, key = setup(Path(tmp))
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        # The client's lifespan runs the serving controller; calls run on its event loop.
        with TestClient(create_app(services), headers=admin) as client:
            deploy(client)
            modes = targets(services, key)
            samples = client.portal.call(measure, modes, args.n, args.rounds)
        services.close()

    base50 = statistics.median(samples["host.infer"]) / 1000
    base99 = percentile(samples["host.infer"], 0.99)
    print(f"{'mode':<28} {'p50 µs':>9} {'p99 µs':>9} {'+p50 µs':>9} {'+p99 µs':>9}")
    for name, times in samples.items():
        p50, p99 = statistics.median(times) / 1000, percentile(times, 0.99)
        print(f"{name:<28} {p50:9.1f} {p99:9.1f} {p50 - base50:9.1f} {p99 - base99:9.1f}")
    print(
        f"({len(samples['host.infer'])} calls per mode, one at a time, in-process ASGI, "
        "SQLite; + columns: added to host.infer)"
    )


if __name__ == "__main__":
    main()
