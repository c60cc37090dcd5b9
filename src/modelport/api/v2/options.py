"""Per-request scheduling options of ``/v2`` infer: deadline and priority (pure functions).

Timeout: the shortest of those given wins, since each is a limit somebody set:

- HTTP header ``Inference-Timeout``: seconds, a decimal number (``0.25``).
- request parameter ``timeout``: microseconds, an integer. This is Triton's
  convention, and what ``tritonclient``'s ``infer(..., timeout=...)`` sends.
- neither: the server's ``runtime_infer_timeout_seconds``.

Priority, request parameter ``priority``: ``"interactive"``, ``"batch"`` or
``"offline"``, or Triton's integer levels, where 0 means the default and lower is more
urgent: 0 and 1 are interactive, 2 batch, 3 and above offline. Default interactive.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from modelport.errors import InvalidInput
from modelport.runtime.types import Priority

TIMEOUT_HEADER = "inference-timeout"
MAX_TIMEOUT_SECONDS = 3600.0


def timeout_seconds(header: str | None, parameters: Mapping[str, Any], default: float) -> float:
    """Seconds this request may take, from its header and ``timeout`` parameter."""
    limits = []
    if header is not None:
        try:
            limits.append(float(header))
        except ValueError:
            raise InvalidInput(
                f"Inference-Timeout must be a number of seconds, got {header[:32]!r}",
                code="invalid_timeout",
            ) from None
    micros = parameters.get("timeout")
    if micros is not None:
        if isinstance(micros, bool) or not isinstance(micros, int):
            raise InvalidInput(
                "parameter 'timeout' must be an integer number of microseconds",
                code="invalid_timeout",
            )
        limits.append(micros / 1e6)
    if not limits:
        return default
    seconds = min(limits)
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TIMEOUT_SECONDS):
        raise InvalidInput(
            f"timeout must be above 0 and at most {MAX_TIMEOUT_SECONDS:g} seconds",
            code="invalid_timeout",
        )
    return seconds


def priority_of(parameters: Mapping[str, Any]) -> Priority:
    value = parameters.get("priority")
    if value is None:
        return Priority.INTERACTIVE
    if isinstance(value, str):
        try:
            return Priority(value)
        except ValueError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        if value <= 1:
            return Priority.INTERACTIVE
        return Priority.BATCH if value == 2 else Priority.OFFLINE
    raise InvalidInput(
        "parameter 'priority' must be 'interactive', 'batch', 'offline' or a non-negative integer",
        code="invalid_priority",
    )


def model_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The request parameters meant for the model (scheduling and routing ones removed)."""
    return {k: v for k, v in parameters.items() if k not in ("timeout", "priority", "route")}
