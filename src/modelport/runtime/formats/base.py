"""The format plugin contract.

Call order: ``load(files, manifest)`` once → ``execute`` any number of
times (from worker threads; implementations must be thread-safe for concurrent
``execute``) → ``unload`` once. ``estimate_memory`` may be called before ``load`` to
decide admission.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import numpy as np

from modelport.manifest import Manifest


class LoadedModel(Protocol):
    """A model in memory, ready to execute batches."""

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one batch; inputs and outputs by tensor name."""
        ...

    def memory_bytes(self) -> int:
        """Host memory this model holds, measured where possible."""
        ...

    def unload(self) -> None: ...


class ModelFormat(Protocol):
    """Loads one model format from local files."""

    name: str

    def estimate_memory(self, manifest: Manifest) -> int:
        """Host bytes a load is expected to take, decided from the manifest alone, before
        any file is fetched or anything allocated."""
        ...

    def load(self, files: dict[str, Path], manifest: Manifest) -> LoadedModel:
        """Load from ``files`` (manifest path -> local verified file)."""
        ...
