"""Backends: anything that can run a version (local runtime, remote OIP, remote OpenAI)."""

from modelport.serving.backends.base import Backend

__all__ = ["Backend"]
