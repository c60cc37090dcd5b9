"""The generative versions a deployment holds on this process: its ``GenerativeHost``.

``LocalPlacement`` hands a version here when the runtime serves it with a generative
engine (``runtime.engines.choose_contract`` on its format and ``runtime.task``). A
load runs on the event loop that placed it (the engine host's loads are shared per
loop), and its outcome is kept as a ``VersionStatus``, as the model host keeps those
of tensor models, so a deployment's progress reads the same for both.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future

from modelport.errors import ModelportError
from modelport.manifest import Manifest
from modelport.runtime.cache import BlobSource
from modelport.runtime.engines import GenerativeHost, choose_contract
from modelport.runtime.formats.registry import known_formats
from modelport.runtime.types import Contract, LoadState, VersionKey, VersionStatus


def is_generative(manifest: Manifest, engines: GenerativeHost | None) -> bool:
    """Whether a version of ``manifest`` runs on a generative engine here."""
    if engines is None or manifest.format not in engines.formats:
        return False
    task = str(manifest.runtime.get("task") or "")
    contract = choose_contract(
        manifest.format,
        task,
        tensor_formats=known_formats(),
        generative_formats=frozenset(engines.formats),
    )
    return contract is Contract.GENERATIVE


class GenerativePlacement:
    """Loads, statuses and releases of this process's generative versions."""

    def __init__(self, engines: GenerativeHost, blobs: BlobSource) -> None:
        self.engines = engines
        self.blobs = blobs
        self._status: dict[VersionKey, VersionStatus] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def estimate(self, manifest: Manifest) -> int:
        return self.engines.formats[manifest.format].estimate_memory(manifest)

    def place(self, key: VersionKey, manifest: Manifest) -> Future[VersionStatus]:
        """Begin loading ``key``'s engine (from the event loop); the future fails with
        the cause."""
        done: Future[VersionStatus] = Future()
        status = self._status.get(key)
        if status is not None and status.state is LoadState.READY:
            done.set_result(status)
            return done
        self._status[key] = VersionStatus(key, LoadState.LOADING, pinned=True)
        task = asyncio.get_running_loop().create_task(self._load(key, manifest, done))
        self._tasks.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._tasks.discard)
        return done

    async def _load(self, key: VersionKey, manifest: Manifest, done: Future[VersionStatus]) -> None:
        started = time.perf_counter()
        try:
            engine = await self.engines.ensure_loaded(key, manifest, self.blobs)
        except ModelportError as exc:
            self._status[key] = VersionStatus(
                key, LoadState.FAILED, pinned=True, cause=exc.message, cause_code=exc.code
            )
            done.set_exception(exc)
            return
        except Exception as exc:  # a library's failure: the load failed, say why
            self._status[key] = VersionStatus(
                key, LoadState.FAILED, pinned=True, cause=f"{type(exc).__name__}: {exc}"
            )
            done.set_exception(exc)
            return
        status = VersionStatus(
            key,
            LoadState.READY,
            pinned=True,
            phases={"load": time.perf_counter() - started},
            host_memory_bytes=engine.memory_bytes(),
            memory_source="measured",
            warm_up="none: a generative engine warms up on its first request",
        )
        self._status[key] = status
        done.set_result(status)

    def status(self, key: VersionKey) -> VersionStatus | None:
        return self._status.get(key)

    def keys(self) -> list[VersionKey]:
        """The versions placed here (loading, ready or failed)."""
        return list(self._status)

    def lookup(self, model: str, version: str) -> VersionStatus | None:
        for key, status in self._status.items():
            if key.model == model and key.version == version:
                return status
        return None

    def release(self, key: VersionKey) -> bool:
        """Unload ``key``'s engine; False when it is not held here."""
        if self._status.pop(key, None) is None:
            return False
        self.engines.unload(key)
        return True
