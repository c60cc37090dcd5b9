"""Which contract serves a version, and the host of generative engines.

``choose_contract`` decides from the manifest's format and the model's task: a format
with only a tensor plugin is served as a tensor model, one with only a generative
plugin by a generative engine, and one with both (e.g. a format holding embedding
and text-generation models alike) by its generative plugin for a generative task
(``GENERATIVE_TASKS``), by its tensor plugin otherwise.

``GenerativeHost`` keeps this process's generative engines, one per version, loaded
on first use (files fetched and verified by the same ``ModelCache`` as tensor models).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from modelport.errors import InvalidInput, Unprocessable
from modelport.manifest import UNSAFE_FORMATS, Manifest
from modelport.runtime.cache import BlobSource, ModelCache
from modelport.runtime.formats.base import GenerativeEngine, GenerativeFormat
from modelport.runtime.formats.registry import missing_runtime
from modelport.runtime.types import Contract, VersionKey

GENERATIVE_TASKS = frozenset({"text-generation", "chat", "completions"})
"""Tasks a generative engine serves when a format has both kinds of plugin."""


def choose_contract(
    format: str,
    task: str,
    *,
    tensor_formats: Collection[str],
    generative_formats: Collection[str],
) -> Contract:
    """The contract that serves a version of ``format`` whose model does ``task``;
    ``unsafe_format`` / ``unsupported_format`` as ``get_format``."""
    if format in UNSAFE_FORMATS:
        raise InvalidInput(
            f"format '{format}' executes code when loaded and is refused", code="unsafe_format"
        )
    tensor, generative = format in tensor_formats, format in generative_formats
    if generative and (not tensor or task in GENERATIVE_TASKS):
        return Contract.GENERATIVE
    if tensor:
        return Contract.TENSOR
    known = {*tensor_formats, *generative_formats}
    raise Unprocessable(missing_runtime(format, known), code="unsupported_format")


@dataclass(frozen=True)
class GenerativeStatus:
    """One loaded generative version, as ``/api/runtime/models`` shows it."""

    key: VersionKey
    engine: str
    """``llama.cpp``, ``transformers``; ``hosted`` for a host still starting."""
    memory_bytes: int
    ended: str | None
    """How its model host ended (the next call loads it again); None while it runs."""


class GenerativeHost:
    """Generative engines of this process by version. Loads are shared: concurrent
    first requests of a version wait for the same load."""

    def __init__(
        self,
        *,
        cache: ModelCache,
        formats: Mapping[str, GenerativeFormat],
        check_load: Callable[[VersionKey, Manifest], None] | None = None,
    ) -> None:
        """``check_load``: as ``ModelHost``'s, called in the loading thread first."""
        self.cache = cache
        self.formats = formats
        self._check_load = check_load
        self._engines: dict[VersionKey, GenerativeEngine] = {}
        self._loads: dict[VersionKey, asyncio.Future[GenerativeEngine]] = {}

    def engine(self, key: VersionKey) -> GenerativeEngine | None:
        """The loaded engine of ``key``, if any (no I/O). An engine whose model host has
        ended is forgotten: the next call loads the version again."""
        engine = self._engines.get(key)
        if engine is not None and getattr(engine, "dead", None) is not None:
            self._engines.pop(key, None)
            return None
        return engine

    async def ensure_loaded(
        self, key: VersionKey, manifest: Manifest, source: BlobSource
    ) -> GenerativeEngine:
        """The engine of ``key``, loaded (in a worker thread) if it is not yet. The load
        goes on for later requests when this caller is cancelled."""
        engine = self.engine(key)
        if engine is not None:
            return engine
        load = self._loads.get(key)
        if load is None:
            load = asyncio.ensure_future(asyncio.to_thread(self._load, key, manifest, source))
            self._loads[key] = load
            load.add_done_callback(lambda _: self._loads.pop(key, None))
        return await asyncio.shield(load)

    def _load(self, key: VersionKey, manifest: Manifest, source: BlobSource) -> GenerativeEngine:
        plugin = self.formats.get(manifest.format)
        if plugin is None:
            raise Unprocessable(
                f"no generative runtime for format '{manifest.format}'", code="unsupported_format"
            )
        if self._check_load is not None:
            self._check_load(key, manifest)
        files = self.cache.materialize(manifest, key.manifest_digest, source).files
        engine = plugin.load(files, manifest, name=key.ref)
        self._engines[key] = engine
        return engine

    def statuses(self) -> list[GenerativeStatus]:
        """The loaded engines: which kernels run each, its memory, whether its model host
        (if it has one) has ended."""
        return [
            GenerativeStatus(
                key,
                str(getattr(engine, "kind", "unknown")),
                engine.memory_bytes(),
                getattr(engine, "dead", None),
            )
            for key, engine in sorted(self._engines.items(), key=lambda kv: kv[0].ref)
        ]

    def predicted_wait(self, key: VersionKey) -> float | None:
        """Seconds a new sequence of ``key`` would wait for its engine's scheduler now
        (0 with none waiting); None where no engine of it schedules here."""
        scheduler = getattr(self._engines.get(key), "scheduler", None)
        if scheduler is None:
            return None
        waiting = scheduler.waiting_count
        return float(scheduler.predicted_wait(waiting)) if waiting else 0.0

    def unload(self, key: VersionKey) -> None:
        engine = self._engines.pop(key, None)
        if engine is not None:
            engine.unload()

    def close(self) -> None:
        for key in list(self._engines):
            self.unload(key)
