"""What tracing costs `/v2` throughput at concurrency 64, measured in one run.

    .venv/bin/python bench/tracing_bench.py                 # 8 rounds of 2 s per mode
    .venv/bin/python bench/tracing_bench.py --rounds 4 --seconds 1 --concurrency 64

One installation of a tiny ONNX model (add-one, a row a call), called through the ASGI
interface (no sockets: the figures are the platform's own cost, so tracing's share is
larger here than behind a real server) by 64 callers that each send their next call as
soon as the last one answered, with its tracer switched between bursts:

- off: no tracer anywhere (as with ``OTEL_*`` unset: the application built without the
  server span's middleware, every component handed None);
- on, 10%: the SDK's tracer with ``parentbased_traceidratio`` at 0.1, spans handed to the
  SDK's ``BatchSpanProcessor`` and an exporter that drops them (what an OTLP exporter adds
  runs on the processor's own thread);
- on, 0% and on, 100%: the same, no call or every call sampled (for scale: what every
  call pays, and what a sampled one pays);
- 10%, SDK: "on, 10%" without the surfaces' root sampling (``tracing.RootSampler``):
  every request's server span made and sampled by the SDK, as before it existed.

The same installation serves every mode (the same model host, database and caches), so
only the tracer differs. The modes run in turn, round after round (each round starting
with the next mode), so drift hits them alike; the garbage collector is tuned as a
serving process tunes it. Each mode prints, as medians over the rounds, its calls per
second and the process's CPU time per call (every thread's), each with its ratio to
``off`` in the same run, and the throughput loss the CPU time implies
(``1 - cpu_off / cpu_mode``: the calls are CPU-bound). On a machine shared with other
work the wall-clock rate swings with their load from one burst to the next; the CPU time
per call much less, so the loss is read from it. The target for "on, 10%" is a loss
under 5%.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asgi_calls import post
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased
from opentelemetry.trace import Tracer
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.config import Settings
from modelport.digests import sha256_digest
from modelport.observability.tracing import PresetIds, RootSampler, Tracing
from modelport.tenancy.limits import ScopeType
from modelport.testing.onnx_models import add_one

ADMIN_KEY = "bench-admin-key-" + "x" * 24
MODEL = "acme/adder"
BODY = b'{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}'


class Dropped(SpanExporter):
    """Counts the spans it is handed and keeps none."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def tracing_at(ratio: float | None, *, at_root: bool = True) -> tuple[Tracing, Dropped | None]:
    """The tracing ``build_tracing`` makes for ``parentbased_traceidratio`` at ``ratio``
    (``parentbased_always_on`` at 1), its spans dropped; ``at_root`` False: without its
    ``RootSampler``, every span sampled by the SDK (the path before root sampling)."""
    if ratio is None:
        return Tracing(), None
    exporter = Dropped()
    sampler = ParentBased(ALWAYS_ON if ratio >= 1 else TraceIdRatioBased(ratio))
    ids = PresetIds()
    provider = TracerProvider(sampler=sampler, id_generator=ids)  # type: ignore[arg-type]
    provider.add_span_processor(BatchSpanProcessor(exporter))
    roots = RootSampler(ratio, ids) if at_root and ratio < 1 else None
    tracer = provider.get_tracer("modelport")
    return Tracing(tracer, shutdown=provider.shutdown, roots=roots), exporter


def installation(home: Path) -> tuple[Services, str]:
    """Services with the model published and loaded, and a consumer's key."""
    # Threads of the server: the cost measured is tracing's, not the process boundary's.
    settings = Settings(
        home=home, admin_key=ADMIN_KEY, runtime_intra_op_threads=1, runtime_execution="manifest"
    )
    services = build_services(settings, tracing=Tracing())
    services.tenancy.create_tenant("acme", actor="bench")
    services.tenancy.add_member("acme", "app", roles=["consumer", "publisher"], actor="bench")
    key = services.tenancy.create_key("acme", "app", name="bench", actor="bench").secret
    many = 10**9  # never reached: every call pays the full check
    fields: dict[str, Any] = {"rpm": many, "concurrency": None, "tpm": None}
    services.limits.set_limits(ScopeType.TENANT, "acme", tenant="acme", actor="bench", **fields)
    client = TestClient(create_app(services), headers={"Authorization": f"Bearer {ADMIN_KEY}"})
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
    published = client.post(
        f"/api/models/{MODEL}/versions", json={"version": "1", "manifest": manifest}
    )
    published.raise_for_status()
    client.post(f"/v2/repository/models/{MODEL}/load", json={}).raise_for_status()
    client.close()
    return services, key


def application(services: Services, tracing: Tracing) -> Any:
    """The installation's application as a process with ``tracing`` builds it."""
    services.tracing = tracing
    return create_app(services)


def use_tracer(services: Services, tracer: Tracer | None) -> None:
    """Hand ``tracer`` to every component ``build_services`` hands it to (this is the
    bench's switch: a process has one tracer for its life)."""
    services.inference.pipeline.tracer = tracer
    router = services.serving.router
    router.dispatcher.loop.tracer = tracer  # type: ignore[attr-defined]
    router.shadow.tracer = tracer
    host = services.host
    assert host is not None
    host.tracer = tracer
    for hosted in host._hosted.values():
        for batcher in hosted.batchers.values():
            batcher.tracer = tracer
    services.job_runner.tracer = tracer


@dataclass(frozen=True)
class Burst:
    calls: int
    seconds: float
    cpu_seconds: float
    """The process's CPU time over the burst, every thread's (the runtime's, the span
    processor's): unlike the wall clock, it is not taken by other processes."""

    @property
    def rate(self) -> float:
        return self.calls / self.seconds

    @property
    def cpu_per_call_us(self) -> float:
        return self.cpu_seconds / self.calls * 1e6


async def burst(app: Any, key: str, concurrency: int, seconds: float) -> Burst:
    """The calls ``concurrency`` callers got answered within ``seconds``."""
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    path = f"/v2/models/{MODEL}/infer"
    done = 0
    until = time.monotonic() + seconds

    async def caller() -> None:
        nonlocal done
        while time.monotonic() < until:
            status = await post(app, path, headers, BODY)
            if status != 200:
                raise SystemExit(f"status {status}")
            done += 1

    started, cpu = time.monotonic(), time.process_time()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return Burst(done, time.monotonic() - started, time.process_time() - cpu)


Mode = tuple[Any, Tracer | None]
"""An application and the tracer its components get."""


async def run(
    services: Services,
    key: str,
    modes: dict[str, Mode],
    concurrency: int,
    seconds: float,
    rounds: int,
) -> dict[str, list[Burst]]:
    bursts: dict[str, list[Burst]] = {name: [] for name in modes}
    async with services.lifecycle.running():
        for app, tracer in modes.values():  # warm up
            use_tracer(services, tracer)
            await burst(app, key, concurrency, min(seconds, 1.0))
        names = list(modes)
        for round_ in range(rounds):
            # Each round starts with another mode, so no mode always follows the busiest.
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                app, tracer = modes[name]
                use_tracer(services, tracer)
                bursts[name].append(await burst(app, key, concurrency, seconds))
    return bursts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=2.0, help="per mode and round")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    ratios = {
        "off": (None, True),
        "on, 0%": (0.0, True),
        "10%, SDK": (0.1, False),
        "on, 10%": (0.1, True),
        "on, 100%": (1.0, True),
    }
    with tempfile.TemporaryDirectory(prefix="modelport-bench-") as tmp:
        services, key = installation(Path(tmp) / "home")
        modes: dict[str, Mode] = {}
        exporters: dict[str, Dropped | None] = {}
        tracings: list[Tracing] = []
        for name, (ratio, at_root) in ratios.items():
            tracing, exporters[name] = tracing_at(ratio, at_root=at_root)
            tracings.append(tracing)
            modes[name] = (application(services, tracing), tracing.tracer)
        # The collector as a serving process tunes it (``modelport.app.build_app``).
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 10, 10)
        bursts = asyncio.run(run(services, key, modes, args.concurrency, args.seconds, args.rounds))
        services.close()
        for tracing in tracings:
            tracing.shutdown()  # flushes the spans
    base_rate = statistics.median(b.rate for b in bursts["off"])
    base_cpu = statistics.median(b.cpu_per_call_us for b in bursts["off"])
    print(
        f"{'mode':<10} {'calls/s':>8} {'x off':>6} {'CPU µs/call':>12} {'x off':>6}"
        f" {'loss (CPU)':>11}  spans exported"
    )
    for name, runs in bursts.items():
        rate = statistics.median(b.rate for b in runs)
        cpu = statistics.median(b.cpu_per_call_us for b in runs)
        exporter = exporters[name]
        spans = "-" if exporter is None else str(exporter.spans)
        print(
            f"{name:<10} {rate:8.0f} {rate / base_rate:6.3f} {cpu:12.0f} {cpu / base_cpu:6.3f}"
            f" {1 - base_cpu / cpu:11.1%}  {spans}"
        )
    print(
        f"(concurrency {args.concurrency}, {args.rounds} rounds of {args.seconds:g} s per mode,"
        " medians; in-process ASGI, SQLite, add-one ONNX model)"
    )


if __name__ == "__main__":
    main()
