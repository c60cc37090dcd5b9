"""A worker process for the multiprocess metrics tests (prometheus_client picks its mode at
import, so each side of the test is its own interpreter).

``python tests/metrics_process.py record SPEC``: record what the JSON ``SPEC`` says through
``RuntimeMetrics`` and ``ServingMetrics``, print ``ready``, then stay alive until stdin
closes (a live worker). ``SPEC`` may also say ``"loop": true`` (record the requests on a
running event loop, which stays running while the worker lives) and ``"memory": false``
(report no memory, which would fold the tallies at once).

``python tests/metrics_process.py render [--prepare]``: (``prepare_worker()`` first, then)
print one JSON line: ``{"dead": [pids marked dead], "text": render(...)}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from modelport.observability.metrics import RuntimeMetrics, render
from modelport.observability.multiprocess import prepare_worker
from modelport.observability.serving_metrics import ServingMetrics

MODEL, VERSION, BACKEND = "acme/mlp", "1", "remote-a"


def record(spec: dict[str, Any]) -> None:
    metrics = RuntimeMetrics()
    serving = ServingMetrics(metrics.registry)
    if spec.get("loop"):
        asyncio.run(_record_on_a_loop(metrics, spec))
        return
    _record_requests(metrics, spec)
    if spec.get("memory", True):
        metrics.version(MODEL, VERSION).memory(spec["host_bytes"], 0)
        serving.breaker(BACKEND, spec["breaker"])
        serving.backend_health(BACKEND, spec["up"])
        serving.log_depth.set(spec["log_depth"])
    print("ready", flush=True)
    sys.stdin.read()


def _record_requests(metrics: RuntimeMetrics, spec: dict[str, Any]) -> None:
    version = metrics.version(MODEL, VERSION)
    for _ in range(spec["requests"]):
        version.request_done("success", spec["seconds"])
        version.queued(spec["seconds"])
    version.queue_depth(spec["depth"])


async def _record_on_a_loop(metrics: RuntimeMetrics, spec: dict[str, Any]) -> None:
    _record_requests(metrics, spec)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


def main(argv: list[str]) -> None:
    if argv[0] == "record":
        record(json.loads(argv[1]))
        return
    dead = prepare_worker() if "--prepare" in argv else []
    text = render(RuntimeMetrics().registry).decode()
    print(json.dumps({"dead": dead, "text": text}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
