"""This machine's GPUs on ``/metrics``, read through NVML (``nvidia-ml-py``) at each
scrape: utilization, memory, temperature and power per device. Where NVML's library is
absent (no NVIDIA driver) or sees no device, nothing is registered: the series are
absent, not zero."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Metric
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)
LABELS = ("gpu", "name", "uuid")


class GpuCollector(Collector):
    """The devices NVML (``nvml``: the ``pynvml`` module, initialised) sees."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml

    def collect(self) -> Iterable[Metric]:
        nvml = self._nvml
        families = {
            "utilization": GaugeMetricFamily(
                "modelport_gpu_utilization_ratio",
                "Share of the last sample period a kernel ran on the GPU (0-1).",
                labels=LABELS,
            ),
            "memory_used": GaugeMetricFamily(
                "modelport_gpu_memory_used_bytes", "GPU memory in use.", labels=LABELS
            ),
            "memory_total": GaugeMetricFamily(
                "modelport_gpu_memory_total_bytes", "GPU memory in all.", labels=LABELS
            ),
            "temperature": GaugeMetricFamily(
                "modelport_gpu_temperature_celsius", "GPU core temperature.", labels=LABELS
            ),
            "power": GaugeMetricFamily(
                "modelport_gpu_power_watts", "GPU power draw.", labels=LABELS
            ),
        }
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            log.warning("NVML could not count the GPUs: %s", exc)
            return []
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                labels = [str(index), _text(nvml.nvmlDeviceGetName(handle)),
                          _text(nvml.nvmlDeviceGetUUID(handle))]  # fmt: skip
                rates = nvml.nvmlDeviceGetUtilizationRates(handle)
                memory = nvml.nvmlDeviceGetMemoryInfo(handle)
                celsius = nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)
            except nvml.NVMLError as exc:  # a device that fell off the bus: the others stay
                log.warning("NVML could not read GPU %d: %s", index, exc)
                continue
            families["utilization"].add_metric(labels, rates.gpu / 100)
            families["memory_used"].add_metric(labels, memory.used)
            families["memory_total"].add_metric(labels, memory.total)
            families["temperature"].add_metric(labels, celsius)
            with contextlib.suppress(nvml.NVMLError):  # not every board reports its power
                families["power"].add_metric(labels, nvml.nvmlDeviceGetPowerUsage(handle) / 1000)
        return list(families.values())


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def install(registry: CollectorRegistry) -> bool:
    """Register the GPU series on ``registry`` where NVML sees a device; whether it did."""
    try:
        import pynvml
    except ImportError:
        return False
    try:
        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() == 0:
            return False
    except pynvml.NVMLError:  # no driver library, or no device it can use
        return False
    registry.register(GpuCollector(pynvml))
    return True
