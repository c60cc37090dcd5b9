"""GPU series through NVML: absent where no NVIDIA driver library or device is (this
machine's case: a real NVML call fails), and, for the devices NVML reports, one series
per device and reading, a device that fails to answer left out, a board without power
readings without that one series."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from modelport.observability import gpu_metrics


def test_without_a_driver_no_gpu_series_exist() -> None:
    import pynvml  # nvidia-ml-py, a dependency of the base install

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver: the series exist here")
    registry = CollectorRegistry()
    assert gpu_metrics.install(registry) is False
    assert b"modelport_gpu" not in generate_latest(registry)


class NVMLError(Exception):
    pass


@dataclass
class Rates:
    gpu: int


@dataclass
class Memory:
    used: int
    total: int


class ReportedDevices:
    """What NVML's functions answer for two boards and a third that fell off the bus
    (the shapes ``pynvml`` returns; the values are this test's)."""

    NVMLError = NVMLError
    NVML_TEMPERATURE_GPU = 0

    def nvmlDeviceGetCount(self) -> int:
        return 3

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if index == 2:
            raise NVMLError("GPU is lost")
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return f"GPU-{handle}".encode()

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Rates:
        return Rates(gpu=37 + handle)

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Memory:
        return Memory(used=(handle + 1) << 30, total=80 << 30)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return 60 + handle

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        if handle == 1:
            raise NVMLError("Not Supported")
        return 312_500


def sample(registry: CollectorRegistry, name: str, gpu: str) -> Any:
    return registry.get_sample_value(
        name, {"gpu": gpu, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{gpu}"}
    )


def test_each_device_nvml_reports_has_its_series() -> None:
    registry = CollectorRegistry()
    registry.register(gpu_metrics.GpuCollector(ReportedDevices()))
    assert sample(registry, "modelport_gpu_utilization_ratio", "0") == pytest.approx(0.37)
    assert sample(registry, "modelport_gpu_memory_used_bytes", "1") == 2 << 30
    assert sample(registry, "modelport_gpu_memory_total_bytes", "0") == 80 << 30
    assert sample(registry, "modelport_gpu_temperature_celsius", "1") == 61
    assert sample(registry, "modelport_gpu_power_watts", "0") == pytest.approx(312.5)
    assert sample(registry, "modelport_gpu_power_watts", "1") is None
    assert sample(registry, "modelport_gpu_temperature_celsius", "2") is None
