"""The pool as a gateway sees it, on its ``/metrics``: what an autoscaler (KEDA's
Prometheus scaler) scales workers on. Read from the view at each scrape.

- ``modelport_pool_workers{pool}``: live workers;
- ``modelport_pool_ready_replicas{version}``: ready replicas of each version;
- ``modelport_pool_queued_requests{version}``: requests queued for each version over the
  live workers, as their last heartbeats reported them;
- ``modelport_pool_queue_wait_seconds{version}``: the predicted queue wait of each
  version, the mean over its ready replicas (what the pool's autoscaler scales a
  version's replicas on, and KEDA the workers);
- ``modelport_pool_target_wait_seconds``: the wait past which a version gets one more
  replica (``MODELPORT_WORKER_TARGET_WAIT_SECONDS``), for dashboards and alerts;
- ``modelport_pool_requests_total{version}``: calls this gateway routed to the pool
  (its ``rate()`` is the request rate);
- ``modelport_pool_cold_starts_total{version,outcome}``: calls that found no ready
  replica of a version the pool holds and waited for one to start: ``served`` (one was
  ready within the call's deadline) or ``refused`` (503 ``cold_start``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from modelport.serving.pool.scaler import CallCounter
from modelport.serving.pool.types import READY
from modelport.serving.pool.view import PoolView


class PoolCollector(Collector):
    def __init__(
        self,
        view: PoolView,
        calls: CallCounter | None = None,
        target_wait_seconds: float | None = None,
    ) -> None:
        self.view = view
        self.calls = calls
        self.target_wait_seconds = target_wait_seconds

    def collect(self) -> Iterator[Metric]:
        workers = list(self.view.workers.values())
        pools = GaugeMetricFamily(
            "modelport_pool_workers", "Live workers of the pool.", labels=("pool",)
        )
        for pool, count in sorted(Counter(w.pool for w in workers).items()):
            pools.add_metric((pool,), count)
        ready = GaugeMetricFamily(
            "modelport_pool_ready_replicas",
            "Ready replicas of each version on live workers.",
            labels=("version",),
        )
        queued = GaugeMetricFamily(
            "modelport_pool_queued_requests",
            "Requests queued for each version over the live workers (last heartbeats).",
            labels=("version",),
        )
        wait = GaugeMetricFamily(
            "modelport_pool_queue_wait_seconds",
            "Predicted queue wait of each version, mean over its ready replicas.",
            labels=("version",),
        )
        ready_count: Counter[str] = Counter()
        queued_count: Counter[str] = Counter()
        wait_sum: dict[str, float] = {}
        for worker in workers:
            for ref, state in worker.versions.items():
                if state == READY:
                    ready_count[ref] += 1
                    wait_sum[ref] = wait_sum.get(ref, 0.0) + worker.waits.get(ref, 0.0)
            for ref, waiting in worker.queued.items():
                queued_count[ref] += int(waiting)
        for ref, count in sorted(ready_count.items()):
            ready.add_metric((ref,), count)
        for ref, count in sorted(queued_count.items()):
            queued.add_metric((ref,), count)
        for ref, count in sorted(ready_count.items()):
            wait.add_metric((ref,), wait_sum[ref] / count)
        yield pools
        yield ready
        yield queued
        yield wait
        if self.target_wait_seconds is not None:
            yield GaugeMetricFamily(
                "modelport_pool_target_wait_seconds",
                "Predicted queue wait past which a version gets one more replica.",
                value=self.target_wait_seconds,
            )
        if self.calls is not None:
            calls = CounterMetricFamily(
                "modelport_pool_requests",
                "Calls this gateway routed to the pool, per version.",
                labels=("version",),
            )
            for ref, count in sorted(self.calls.counted().items()):
                calls.add_metric((ref,), count)
            yield calls
            cold = CounterMetricFamily(
                "modelport_pool_cold_starts",
                "Calls that waited for a version to start on the pool, by outcome.",
                labels=("version", "outcome"),
            )
            for (ref, outcome), count in sorted(self.calls.cold_started().items()):
                cold.add_metric((ref, outcome), count)
            yield cold
