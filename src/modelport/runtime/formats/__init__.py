"""Model format plugins (the ``modelport.formats`` entry point group). Each format
implements ``modelport.runtime.formats.base.ModelFormat``."""

from modelport.runtime.formats.base import LoadedModel, ModelFormat
from modelport.runtime.formats.registry import (
    FormatRegistry,
    discover,
    get_format,
    installed_formats,
    known_formats,
)

__all__ = [
    "FormatRegistry",
    "LoadedModel",
    "ModelFormat",
    "discover",
    "get_format",
    "installed_formats",
    "known_formats",
]
