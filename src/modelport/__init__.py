"""modelport: a self-hosted model marketplace and serving platform."""

from modelport.errors import ModelportError

__version__ = "0.1.0"

__all__ = ["ModelportError", "__version__"]
