"""Observability: Prometheus metrics (``metrics``, ``serving_metrics``) and the prediction log
(``predictions``, ``prediction_store``); traces and drift later."""

from modelport.observability.metrics import RuntimeMetrics, render

__all__ = ["RuntimeMetrics", "render"]
