"""The format plugin contracts: tensor models and generative engines.

A format plugin serves one of two contracts (``runtime.types.Contract``), chosen from
the manifest's format and the model's task (``runtime.engines.choose_contract``).

**Tensor models** (``ModelFormat`` → ``LoadedModel``). Call order: ``load(files, manifest)`` once → ``execute`` any number of
times (from worker threads; implementations must be thread-safe for concurrent
``execute``) → ``unload`` once. ``estimate_memory`` may be called before ``load`` to
decide admission. The host's ``Batcher`` merges requests into the batches it executes.

**Generative engines** (``GenerativeFormat`` → ``GenerativeEngine``). ``load`` once →
``submit`` any number of times, from the event loop; each submission is a
``Generation``: an async iterator of chunks in order, which ``cancel`` stops (the
engine frees what the request held; chunks already produced stay delivered). The
engine schedules its requests itself (continuous batching belongs to it, not to the
host's batcher). ``unload`` once, after every generation ended.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Protocol

import numpy as np

from modelport.manifest import Manifest
from modelport.runtime.types import GenerationChunk, GenerationRequest


class LoadedModel(Protocol):
    """A model in memory, ready to execute batches."""

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one batch; inputs and outputs by tensor name."""
        ...

    def memory_bytes(self) -> int:
        """Host memory this model holds, measured where possible."""
        ...

    def unload(self) -> None: ...


class DeviceTimedModel(Protocol):
    """A loaded model that can run on a GPU and measures the device's time: the
    executor calls ``execute_timed`` instead of ``execute`` where a model has it."""

    def execute_timed(self, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], float]:
        """``execute``, and the seconds the GPU spent on it (0.0 on the CPU)."""
        ...


TensorModel = LoadedModel
"""The tensor contract's loaded model, by the name of its contract."""


class ModelFormat(Protocol):
    """Loads one tensor model format from local files."""

    name: str

    def estimate_memory(self, manifest: Manifest) -> int:
        """Host bytes a load is expected to take, decided from the manifest alone, before
        any file is fetched or anything allocated."""
        ...

    def load(self, files: dict[str, Path], manifest: Manifest) -> LoadedModel:
        """Load from ``files`` (manifest path -> local verified file)."""
        ...


TensorFormat = ModelFormat
"""The tensor contract's format plugin, by the name of its contract."""


class Generation(Protocol):
    """One submitted request: iterate it for its chunks; ``cancel`` stops it."""

    def __aiter__(self) -> AsyncIterator[GenerationChunk]: ...

    def cancel(self) -> None:
        """Stop producing (idempotent; nothing once the generation ended). Chunks not
        yet taken are dropped; the iterator then ends."""
        ...

    @property
    def input_tokens(self) -> int:
        """Tokens of the prompt, as the engine counted them (known on submission). At
        most one per byte of the prompt's UTF-8: what a gateway without the tokenizer
        reserves for."""
        ...


class GenerativeEngine(Protocol):
    """A generative model in memory, ready for requests."""

    def submit(self, request: GenerationRequest) -> Generation:
        """Queue ``request``; its chunks come as it is scheduled."""
        ...

    def memory_bytes(self) -> int: ...

    def unload(self) -> None: ...


class GenerativeFormat(Protocol):
    """Loads one generative format from local files."""

    name: str

    def estimate_memory(self, manifest: Manifest) -> int: ...

    def load(
        self, files: dict[str, Path], manifest: Manifest, *, name: str = ""
    ) -> GenerativeEngine:
        """Load from ``files``; ``name`` (``owner/name:version``) labels the engine's
        metrics and logs."""
        ...
