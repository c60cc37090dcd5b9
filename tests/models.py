"""Test models: re-exported from ``modelport.testing`` so tests, benchmarks and the demo share them."""

from modelport.testing.onnx_models import add_one, mlp, save

__all__ = ["add_one", "mlp", "save"]
