"""Observability: Prometheus metrics (``metrics``); traces, prediction logs and drift later."""

from modelport.observability.metrics import RuntimeMetrics, render

__all__ = ["RuntimeMetrics", "render"]
