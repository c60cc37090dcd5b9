"""Prometheus series of what calls cost and earn, held by an instance on the process's
registry. Told once per metered call, as it ends (``CostMetrics.call_metered``).

- ``modelport_compute_seconds_total{tenant,model,device}``: measured compute attributed
  to calls (``device``: ``cpu`` core-seconds, ``gpu`` GPU-seconds): each call's rows'
  share of its executed batch's time;
- ``modelport_compute_cost_micros_total{tenant,model}``: that compute, priced;
- ``modelport_revenue_micros_total{tenant,model}``: what the calls were charged;
- ``modelport_compute_price_micros{device}``: the price of one second (settings).

Margin (revenue less cost), each tenant's share and each process's idle ratio (its CPU
time attributed to no call) are worked out by the shipped recording rules
(``deploy/prometheus``).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from modelport.observability.deferred import Deferred


class CostMetrics:
    def __init__(
        self, registry: CollectorRegistry, *, core_second_micros: float, gpu_second_micros: float
    ) -> None:
        self.registry = registry
        # The calls' figures are applied in batches (``deferred``): 3 series a call.
        self._deferred = Deferred(registry, self._apply)
        # per millisecond: what a call's cpu_ms and gpu_ms cost
        self._cpu_ms = core_second_micros / 1000
        self._gpu_ms = gpu_second_micros / 1000
        self.compute = Counter(
            "modelport_compute_seconds",
            "Measured compute attributed to calls, by tenant, model and device.",
            ("tenant", "model", "device"),
            registry=registry,
        )
        self.cost = Counter(
            "modelport_compute_cost_micros",
            "The compute attributed to calls, priced per second (micros).",
            ("tenant", "model"),
            registry=registry,
        )
        self.revenue = Counter(
            "modelport_revenue_micros",
            "What calls were charged (micros).",
            ("tenant", "model"),
            registry=registry,
        )
        price = Gauge(
            "modelport_compute_price_micros",
            "The price of one second of compute (micros), by device.",
            ("device",),
            registry=registry,
            multiprocess_mode="mostrecent",
        )
        price.labels("cpu").set(core_second_micros)
        price.labels("gpu").set(gpu_second_micros)
        # Labelled children kept per (tenant, model): ``labels`` locks and builds a key.
        self._children: dict[tuple[str, str], tuple[Any, Any, Any, Any]] = {}

    def call_metered(
        self, tenant: str, model: str, cpu_ms: float, gpu_ms: float, charged_micros: int
    ) -> None:
        if cpu_ms or gpu_ms or charged_micros:
            self._deferred.record((tenant, model, cpu_ms, gpu_ms, charged_micros))

    def _apply(self, calls: list[tuple[str, str, float, float, int]]) -> None:
        totals: dict[tuple[str, str], list[float]] = {}
        for tenant, model, cpu_ms, gpu_ms, charged in calls:
            found = totals.get((tenant, model))
            if found is None:
                found = totals[tenant, model] = [0.0, 0.0, 0.0]
            found[0] += cpu_ms
            found[1] += gpu_ms
            found[2] += charged
        for (tenant, model), (cpu, gpu, revenue) in totals.items():
            self._add(tenant, model, cpu, gpu, revenue)

    def _add(self, tenant: str, model: str, cpu_ms: float, gpu_ms: float, charged: float) -> None:
        key = (tenant, model)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = (
                self.compute.labels(tenant, model, "cpu"),
                self.compute.labels(tenant, model, "gpu"),
                self.cost.labels(tenant, model),
                self.revenue.labels(tenant, model),
            )
        cpu, gpu, cost, revenue = found
        if cpu_ms:
            cpu.inc(cpu_ms / 1000)
        if gpu_ms:
            gpu.inc(gpu_ms / 1000)
        if cpu_ms or gpu_ms:
            cost.inc(cpu_ms * self._cpu_ms + gpu_ms * self._gpu_ms)
        if charged:
            revenue.inc(charged)
