"""The pool as a gateway sees it, on its ``/metrics``: what an autoscaler (KEDA's
Prometheus scaler) scales workers on. Read from the view at each scrape.

- ``modelport_pool_workers{pool}``: live workers;
- ``modelport_pool_ready_replicas{version}``: ready replicas of each version;
- ``modelport_pool_queued_requests{version}``: requests queued for each version over the
  live workers, as their last heartbeats reported them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from modelport.serving.pool.types import READY
from modelport.serving.pool.view import PoolView


class PoolCollector(Collector):
    def __init__(self, view: PoolView) -> None:
        self.view = view

    def collect(self) -> Iterator[GaugeMetricFamily]:
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
        ready_count: Counter[str] = Counter()
        queued_count: Counter[str] = Counter()
        for worker in workers:
            for ref, state in worker.versions.items():
                if state == READY:
                    ready_count[ref] += 1
            for ref, waiting in worker.queued.items():
                queued_count[ref] += int(waiting)
        for ref, count in sorted(ready_count.items()):
            ready.add_metric((ref,), count)
        for ref, count in sorted(queued_count.items()):
            queued.add_metric((ref,), count)
        yield pools
        yield ready
        yield queued
