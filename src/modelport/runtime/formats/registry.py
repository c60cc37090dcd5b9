"""Known formats by manifest ``format`` name; unsafe formats are refused by name."""

from __future__ import annotations

from modelport.errors import InvalidInput, Unprocessable
from modelport.manifest import UNSAFE_FORMATS
from modelport.runtime.formats.base import ModelFormat
from modelport.runtime.formats.onnx import OnnxFormat

FORMATS: dict[str, type[ModelFormat]] = {"onnx": OnnxFormat}


def get_format(name: str, **options: object) -> ModelFormat:
    if name in UNSAFE_FORMATS:
        raise InvalidInput(
            f"format '{name}' executes code when loaded and is refused", code="unsafe_format"
        )
    try:
        cls = FORMATS[name]
    except KeyError:
        raise Unprocessable(
            f"no runtime for format '{name}' (known: {', '.join(sorted(FORMATS))})",
            code="unsupported_format",
        ) from None
    return cls(**options)


class FormatRegistry:
    """Format plugins with per-format options (from settings), one instance per format."""

    def __init__(self, options: dict[str, dict[str, object]] | None = None) -> None:
        self._options = options or {}
        self._instances: dict[str, ModelFormat] = {}

    def __call__(self, name: str) -> ModelFormat:
        """The plugin for ``name``; raises ``unsafe_format`` / ``unsupported_format``."""
        if name not in self._instances:
            self._instances[name] = get_format(name, **self._options.get(name, {}))
        return self._instances[name]
