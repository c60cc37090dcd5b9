"""Where a ``transformers`` model runs and in which precision, from the settings
(``MODELPORT_LLM_DEVICE``, ``MODELPORT_LLM_DTYPE``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelport.errors import InvalidInput

if TYPE_CHECKING:
    import torch

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "float16", "bfloat16")
BYTES_PER_DTYPE = {"float32": 4, "float16": 2, "bfloat16": 2}


def resolve_device(name: str) -> str:
    """``cpu`` or ``cuda``: ``auto`` is ``cuda`` when torch sees a GPU; ``cuda`` without
    one is refused (``device_unavailable``) rather than silently run on the CPU."""
    import torch

    if name not in DEVICES:
        raise InvalidInput(f"unknown device {name!r} (one of {', '.join(DEVICES)})")
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise InvalidInput(
            "device 'cuda' is configured but torch sees no GPU", code="device_unavailable"
        )
    return name


def resolve_dtype(name: str, device: str) -> torch.dtype:
    """The torch dtype: ``auto`` is float32 on the CPU, and on CUDA bfloat16 where the
    GPU supports it, float16 otherwise."""
    import torch

    if name not in DTYPES:
        raise InvalidInput(f"unknown dtype {name!r} (one of {', '.join(DTYPES)})")
    if name == "auto":
        if device == "cpu":
            return torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    dtype: torch.dtype = getattr(torch, name)
    return dtype


def dtype_name(dtype: torch.dtype) -> str:
    """``float32`` for ``torch.float32``."""
    return str(dtype).removeprefix("torch.")


class CudaTimer:
    """The GPU's time of the work queued on the current CUDA stream between ``start`` and
    ``stop``, by CUDA events (host time is not in it: the events are timestamped by the
    device as it reaches them)."""

    def __init__(self) -> None:
        import torch

        self._start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        self._stop = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]

    def start(self) -> None:
        self._start.record()

    def stop(self) -> None:
        self._stop.record()

    def seconds(self) -> float:
        """Waits for the device to reach ``stop``; the seconds between the two events."""
        self._stop.synchronize()
        return float(self._start.elapsed_time(self._stop)) / 1000
