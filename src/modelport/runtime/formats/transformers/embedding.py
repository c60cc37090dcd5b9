"""Embedding models of the ``transformers`` format, served through the tensor contract.

Tensors (task ``embeddings``): input ``text`` BYTES ``[-1]`` (UTF-8 texts, one per
row), outputs ``embedding`` FP32 ``[-1, d]`` and ``tokens`` INT64 ``[-1]`` (the tokens
the model read for each text, what a call is billed by). Rows are independent, so the
host's ``Batcher`` merges requests along the first dimension.

On a CUDA device the model measures the GPU's time of each batch's forward pass with
CUDA events (``execute_timed``, a ``DeviceTimedModel``): a call's compute is then
priced as GPU time (``cost_per_gpu_second_micros``), the rest of its execution as CPU
time.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from modelport.errors import InvalidInput
from modelport.manifest import Manifest
from modelport.runtime.formats.transformers.availability import require_llm
from modelport.runtime.formats.transformers.device import CudaTimer
from modelport.runtime.formats.transformers.loading import LoadedEncoder, load_encoder

TEXT = "text"
EMBEDDING = "embedding"
TOKENS = "tokens"
_OVERHEAD = 64 << 20


def _texts(value: np.ndarray) -> list[str]:
    if value.ndim != 1:
        raise InvalidInput(
            f"input '{TEXT}' must have shape [-1], not {list(value.shape)}", code="bad_shape"
        )
    texts = []
    for item in value.tolist():
        if isinstance(item, bytes | bytearray):
            try:
                texts.append(bytes(item).decode("utf-8"))
            except UnicodeDecodeError:
                raise InvalidInput(
                    f"input '{TEXT}' must hold UTF-8 text", code="bad_encoding"
                ) from None
        elif isinstance(item, str):
            texts.append(item)
        else:
            raise InvalidInput(f"input '{TEXT}' must hold BYTES", code="bad_datatype")
    return texts


class EmbeddingModel:
    """A loaded encoder; ``execute`` may be called from several threads at once."""

    def __init__(self, encoder: LoadedEncoder, size_hint: int) -> None:
        self.encoder = encoder
        self._size_hint = size_hint
        # A fast tokenizer's padding and truncation settings live in the one Rust object
        # that each call reconfigures: calls must not interleave. The forward pass holds
        # no such state and runs concurrently.
        self._tokenizing = threading.Lock()

    def embed(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Embeddings ``[n, d]`` (float32) and tokens per text ``[n]`` (int64)."""
        embedding, tokens, _ = self._embed(texts, timed=False)
        return embedding, tokens

    def _embed(self, texts: list[str], *, timed: bool) -> tuple[np.ndarray, np.ndarray, float]:
        """``embed``, and the GPU seconds of its forward pass where ``timed`` on CUDA."""
        import torch

        encoder = self.encoder
        if encoder.pooling.lowercase:
            texts = [t.lower() for t in texts]
        if not texts:
            width = int(getattr(encoder.model.config, "hidden_size", 0)) * len(
                encoder.pooling.modes
            )
            return np.zeros((0, width), np.float32), np.zeros((0,), np.int64), 0.0
        with self._tokenizing:
            batch = encoder.tokenizer(
                texts,
                padding=True,
                truncation="longest_first",
                max_length=encoder.max_length,
                return_tensors="pt",
            )
        batch = batch.to(encoder.device)
        timer = CudaTimer() if timed and encoder.device == "cuda" else None
        with torch.inference_mode():
            if timer is not None:
                timer.start()
            states = encoder.model(**batch).last_hidden_state
            pooled = encoder.pooling.apply(states, batch["attention_mask"])
            if timer is not None:
                timer.stop()
        tokens = batch["attention_mask"].sum(dim=1)
        return (
            pooled.float().cpu().numpy().astype(np.float32, copy=False),
            tokens.cpu().numpy().astype(np.int64),
            0.0 if timer is None else timer.seconds(),
        )

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.execute_timed(inputs)[0]

    def execute_timed(self, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], float]:
        """``execute``, and its forward pass's GPU seconds (0.0 on the CPU)."""
        if TEXT not in inputs:
            raise InvalidInput(f"input '{TEXT}' is required", code="missing_input")
        embedding, tokens, gpu = self._embed(_texts(np.asarray(inputs[TEXT])), timed=True)
        return {EMBEDDING: embedding, TOKENS: tokens}, gpu

    def memory_bytes(self) -> int:
        return self._size_hint

    def unload(self) -> None:
        device = self.encoder.device
        del self.encoder
        if device == "cuda":
            import torch

            torch.cuda.empty_cache()  # hand the freed blocks back for other versions


class TransformersEmbeddingFormat:
    """Loads ``transformers`` encoders as tensor models (see the module docstring)."""

    name = "transformers"

    def __init__(self, *, device: str = "auto", dtype: str = "auto") -> None:
        require_llm()
        self.device_setting = device
        self.dtype_setting = dtype

    def estimate_memory(self, manifest: Manifest) -> int:
        declared = manifest.resources.host_memory_bytes
        if declared:
            return declared
        # Weights plus activations of a batch; an encoder's activations are small.
        return 2 * sum(f.size for f in manifest.files) + _OVERHEAD

    def load(self, files: dict[str, Path], manifest: Manifest) -> EmbeddingModel:
        from modelport.runtime.formats.transformers.device import resolve_device, resolve_dtype

        device = resolve_device(self.device_setting)
        encoder = load_encoder(
            files, device=device, dtype=resolve_dtype(self.dtype_setting, device)
        )
        return EmbeddingModel(encoder, self.estimate_memory(manifest))
