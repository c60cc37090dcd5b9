"""``/v1/embeddings`` as a tensor call of an embedding model.

The model's tensors (the embeddings contract): input ``text``, BYTES, one UTF-8 text
per row (shape ``[-1]``, or ``[-1, 1]``); outputs ``embedding``, FP32 ``[-1, d]``, and
``tokens``, INT64 ``[-1]``, the tokens of each text, which the service bills per
input token (``inference.tokens``) and which ``usage.prompt_tokens`` reports. A model
without a BYTES input is not an embedding model (400 ``not_an_embedding_model``).
``dimensions`` is accepted only when it is the model's own (400
``unsupported_dimensions``): the platform does not shorten embeddings.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np

from modelport.api.openai.requests import EmbeddingRequest
from modelport.errors import InvalidInput
from modelport.inference.tokens import TEXT_INPUT, TOKENS_OUTPUT
from modelport.inference.types import InferenceRequest, InferenceResult
from modelport.manifest import TensorSpec

EMBEDDING_OUTPUT = "embedding"
_FLOATS = ("FP32", "FP16", "FP64", "BF16")


class EmbeddingDecoder:
    """Builds the tensor request once the service resolved the model's tensors."""

    def __init__(self, request: EmbeddingRequest) -> None:
        self.request = request
        self.embedding = EMBEDDING_OUTPUT
        """The output holding the embeddings."""

    async def __call__(
        self, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
    ) -> InferenceRequest:
        texts = [s for s in inputs if s.datatype == "BYTES"]
        text = next((s for s in texts if s.name == TEXT_INPUT), texts[0] if texts else None)
        if text is None or len(inputs) != 1:
            raise InvalidInput(
                f"{self.request.model} is not an embedding model: it does not take one "
                "input of texts",
                code="not_an_embedding_model",
                param="model",
            )
        floats = [s for s in outputs if s.datatype in _FLOATS]
        vectors = next((s for s in floats if s.name == EMBEDDING_OUTPUT), None)
        if vectors is None and floats:
            vectors = floats[0]
        if vectors is None:
            raise InvalidInput(
                f"{self.request.model} is not an embedding model: it has no output of floats",
                code="not_an_embedding_model",
                param="model",
            )
        self.embedding = vectors.name
        wanted = self.request.dimensions
        declared = vectors.shape[-1] if vectors.shape else -1
        if wanted is not None and declared not in (-1, wanted):
            raise _dimensions(self.request.model, declared, wanted)
        array: np.ndarray = np.empty(len(self.request.texts), dtype=object)
        array[:] = [t.encode("utf-8") for t in self.request.texts]
        if len(text.shape) == 2:
            array = array.reshape(-1, 1)
        asked = [vectors.name]
        if any(s.name == TOKENS_OUTPUT for s in outputs):
            asked.append(TOKENS_OUTPUT)
        return InferenceRequest(
            {text.name: array},
            outputs=tuple(asked),
            subject=self.request.user,
            priority=self.request.priority,
        )


def embedding_answer(
    request: EmbeddingRequest, decoder: EmbeddingDecoder, result: InferenceResult
) -> dict[str, Any]:
    """OpenAI's embeddings list, with ``usage`` from the tokens the call was billed."""
    raw = result.outputs.get(decoder.embedding)
    count = len(request.texts)
    if raw is None or raw.size % max(count, 1):
        raise InvalidInput(
            f"{request.model} answered no embedding per text", code="bad_model_output"
        )
    vectors = np.asarray(raw, dtype=np.float32).reshape(count, -1)
    if request.dimensions is not None and vectors.shape[1] != request.dimensions:
        raise _dimensions(request.model, vectors.shape[1], request.dimensions)
    base64_wanted = request.encoding_format == "base64"
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": (
                base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
                if base64_wanted
                else vector.tolist()
            ),
        }
        for i, vector in enumerate(vectors)
    ]
    tokens = result.usage.input_tokens
    return {
        "object": "list",
        "data": data,
        "model": request.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _dimensions(model: str, own: int, wanted: int) -> InvalidInput:
    return InvalidInput(
        f"{model} makes embeddings of {own} dimensions; dimensions={wanted} cannot be served "
        "(embeddings are not shortened here)",
        code="unsupported_dimensions",
        param="dimensions",
    )
