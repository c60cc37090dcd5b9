"""Small real models and fakes for tests, benchmarks and the demo (no downloads)."""

from modelport.testing.onnx_models import add_one, mlp, save

__all__ = ["add_one", "mlp", "save"]
