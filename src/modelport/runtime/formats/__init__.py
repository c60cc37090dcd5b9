"""Model format plugins. Each format implements ``modelport.runtime.formats.base.ModelFormat``."""

from modelport.runtime.formats.base import LoadedModel, ModelFormat
from modelport.runtime.formats.registry import FORMATS, FormatRegistry, get_format

__all__ = ["FORMATS", "FormatRegistry", "LoadedModel", "ModelFormat", "get_format"]
