"""Causal LMs of the ``transformers`` format, served by the continuous-batching engine
(``modelport.runtime.generative.engine``) on llama.cpp kernels (a GGUF file, where the
library runs) or ``transformers`` kernels (see ``gguf_engine`` for the choice).

Memory: the weights (on llama.cpp, the GGUF file's size: quantized weights stay
quantized; on ``transformers``, parameters times the bytes of the dtype when the
manifest says how many, ``runtime.parameters``, else the weight files' size, eight
times for a GGUF file, which is de-quantized on load) plus the version's KV cache
budget (``runtime.kv_cache_bytes``, else the ``llm_kv_cache_bytes`` setting). The
context length is the manifest's ``runtime.context_length``, else the model's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from modelport.errors import InvalidInput
from modelport.manifest import Example, Manifest
from modelport.runtime.formats.transformers.availability import require_llm
from modelport.runtime.formats.transformers.device import (
    BYTES_PER_DTYPE,
    resolve_device,
    resolve_dtype,
)
from modelport.runtime.formats.transformers.gguf_engine import (
    AUTO,
    LLAMA_CPP,
    choose_engine,
    llama_example_outputs,
    load_kernels,
    pinned_engine,
)
from modelport.runtime.formats.transformers.loading import LoadedCausalLM, load_causal_lm
from modelport.runtime.formats.transformers.package import check_package, inspect_layout

if TYPE_CHECKING:
    from modelport.runtime.formats.base import GenerativeEngine
    from modelport.runtime.generative.metrics import GenerationMetrics

_OVERHEAD = 64 << 20
_GGUF_EXPANSION = 8
"""A 4-bit GGUF file de-quantized to float32 grows about this much."""


def _positive_int(manifest: Manifest, key: str) -> int | None:
    value = manifest.runtime.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInput(f"runtime.{key} must be a positive integer", code="invalid_manifest")
    return value


class TransformersGenerativeFormat:
    """Loads ``transformers`` causal LMs and builds their ``TorchGenerativeEngine``."""

    name = "transformers"

    def __init__(
        self,
        *,
        device: str = "auto",
        dtype: str = "auto",
        kv_cache_bytes: int = 256 << 20,
        max_running: int = 32,
        max_waiting: int = 256,
        offline_waiting_share: float = 0.5,
        metrics: GenerationMetrics | None = None,
        engine: str = AUTO,
        threads: int = 0,
    ) -> None:
        require_llm()
        self.engine_setting = engine
        """``auto`` (llama.cpp for GGUF where it runs) or ``transformers`` (always)."""
        self.threads = threads
        """llama.cpp threads per version; 0: every CPU the process may use."""
        self.metrics = metrics
        """Where every engine's series go (one ``/metrics`` page); None: the engine's own."""
        self.device_setting = device
        self.dtype_setting = dtype
        self.kv_cache_bytes = kv_cache_bytes
        self.max_running = max_running
        self.max_waiting = max_waiting
        self.offline_waiting_share = offline_waiting_share

    def kv_budget(self, manifest: Manifest) -> int:
        """KV cache bytes the version may use."""
        return _positive_int(manifest, "kv_cache_bytes") or self.kv_cache_bytes

    def engine_for(self, manifest: Manifest) -> str:
        """The engine that runs this version here (``llama.cpp`` or ``transformers``)."""
        layout = inspect_layout(entry.path for entry in manifest.files)
        return choose_engine(layout, pinned=pinned_engine(manifest), setting=self.engine_setting)

    def weights_bytes(self, manifest: Manifest) -> int:
        """Memory the weights take once loaded, from the manifest alone."""
        if self.engine_for(manifest) == LLAMA_CPP:
            return sum(e.size for e in manifest.files if e.path.endswith(".gguf"))
        parameters = _positive_int(manifest, "parameters")
        if parameters is not None:
            dtype = self.dtype_setting if self.dtype_setting != "auto" else "float32"
            return parameters * BYTES_PER_DTYPE[dtype]
        weights = 0
        for entry in manifest.files:
            if entry.path.endswith(".gguf"):
                weights += _GGUF_EXPANSION * entry.size
            elif entry.path.endswith(".safetensors"):
                weights += entry.size
        return weights

    def estimate_memory(self, manifest: Manifest) -> int:
        declared = manifest.resources.host_memory_bytes
        if declared:
            return declared
        return self.weights_bytes(manifest) + self.kv_budget(manifest) + _OVERHEAD

    def load_model(self, files: dict[str, Path], manifest: Manifest) -> LoadedCausalLM:
        """Model and tokenizer on the configured device, without an engine."""
        device = resolve_device(self.device_setting)
        return load_causal_lm(files, device=device, dtype=resolve_dtype(self.dtype_setting, device))

    def load(
        self, files: dict[str, Path], manifest: Manifest, *, name: str = ""
    ) -> GenerativeEngine:
        # The engine (and torch with it) is imported only when a model is loaded.
        from modelport.runtime.generative.engine import BatchingEngine, EngineConfig
        from modelport.runtime.generative.llama.kernels import MAX_SEQUENCES
        from modelport.runtime.generative.torch_engine import TorchGenerativeEngine

        if self.engine_for(manifest) == LLAMA_CPP:
            layout = check_package(files)
            assert layout.gguf is not None
            max_running = min(self.max_running, MAX_SEQUENCES)
            kernels = load_kernels(
                files[layout.gguf],
                kv_budget_bytes=self.kv_budget(manifest),
                max_running=max_running,
                threads=self.threads,
            )
            context = _positive_int(manifest, "context_length") or kernels.context_length
            llama_config = EngineConfig(
                kv_budget_bytes=self.kv_budget(manifest),
                context_length=context,
                max_running=max_running,
                max_waiting=self.max_waiting,
                offline_waiting_share=self.offline_waiting_share,
            )
            return BatchingEngine(kernels, llama_config, name=name, metrics=self.metrics)
        loaded = self.load_model(files, manifest)
        context = _positive_int(manifest, "context_length") or int(
            getattr(loaded.model.config, "max_position_embeddings", 0) or 2048
        )
        config = EngineConfig(
            kv_budget_bytes=self.kv_budget(manifest),
            context_length=context,
            max_running=self.max_running,
            max_waiting=self.max_waiting,
            offline_waiting_share=self.offline_waiting_share,
            device=loaded.device,
        )
        engine: GenerativeEngine = TorchGenerativeEngine(
            loaded.model, loaded.tokenizer, config, name=name, metrics=self.metrics
        )
        return engine

    def example_outputs(
        self, files: dict[str, Path], manifest: Manifest
    ) -> Callable[[Example], dict[str, np.ndarray]]:
        """Load the model (no engine) and answer what decodes one example greedily: its
        outputs ``tokens`` and ``text`` (validation compares them, outside this process)."""
        from modelport.runtime.formats.transformers.examples import generate_example

        if self.engine_for(manifest) == LLAMA_CPP:
            layout = check_package(files)
            assert layout.gguf is not None
            kernels = load_kernels(
                files[layout.gguf], kv_budget_bytes=16 << 20, max_running=1, threads=0
            )
            return functools.partial(llama_example_outputs, kernels)
        loaded = self.load_model(files, manifest)
        return functools.partial(generate_example, loaded)
