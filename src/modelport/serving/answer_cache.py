"""Recent answers by input hash: the ``cache`` step of a fallback chain.

An LRU of at most ``max_entries`` answers, each usable for ``ttl_seconds`` after it
was computed. The key hashes what makes two requests the same question: every
input's name, datatype, shape and bytes, the requested outputs and the model
parameters. It never holds answers of endpoints that do not allow caching: the
dispatcher stores an answer only when the endpoint's chain has a ``cache`` step.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import orjson

from modelport.runtime.tensors import encode_binary_tensor
from modelport.serving.types import BackendRequest, VersionRef


@dataclass(frozen=True)
class CachedAnswer:
    outputs: Mapping[str, np.ndarray]
    version: VersionRef
    backend: str
    stored_at: float


def input_key(request: BackendRequest) -> str:
    """A digest of the question a request asks (not of its version or deadline)."""
    digest = hashlib.sha256()
    for name in sorted(request.inputs):
        array = np.asarray(request.inputs[name])
        header = f"{name}\0{array.dtype.str}\0{array.shape}\0"
        digest.update(header.encode())
        digest.update(encode_binary_tensor(array))
    extra = {"outputs": request.outputs, "parameters": dict(request.parameters)}
    digest.update(orjson.dumps(extra, option=orjson.OPT_SORT_KEYS, default=str))
    return digest.hexdigest()


class AnswerCache:
    """An LRU with a TTL. Not thread-safe: one event loop owns it."""

    def __init__(
        self,
        *,
        max_entries: int = 1024,
        ttl_seconds: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._entries: OrderedDict[str, CachedAnswer] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def put(
        self, key: str, outputs: Mapping[str, np.ndarray], version: VersionRef, backend: str
    ) -> None:
        # Copies: a backend's arrays may be views of a buffer that is reused.
        kept = {name: np.array(value, copy=True) for name, value in outputs.items()}
        self._entries[key] = CachedAnswer(kept, version, backend, self._clock())
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def get(self, key: str) -> tuple[CachedAnswer, float] | None:
        """The answer and its age in seconds, or None when absent or expired."""
        found = self._entries.get(key)
        if found is None:
            return None
        age = self._clock() - found.stored_at
        if age > self.ttl_seconds:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return found, age


class AnswerCaches:
    """One ``AnswerCache`` per endpoint, rebuilt when its size or TTL changes."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._caches: dict[str, AnswerCache] = {}

    def for_endpoint(self, endpoint: str, *, max_entries: int, ttl_seconds: float) -> AnswerCache:
        cache = self._caches.get(endpoint)
        if cache is None or (cache.max_entries, cache.ttl_seconds) != (max_entries, ttl_seconds):
            cache = self._caches[endpoint] = AnswerCache(
                max_entries=max_entries, ttl_seconds=ttl_seconds, clock=self._clock
            )
        return cache

    def drop(self, endpoint: str) -> None:
        self._caches.pop(endpoint, None)
