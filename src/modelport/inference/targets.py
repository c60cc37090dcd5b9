"""Which version a model reference names, cached for the hot path.

A model is addressed as ``owner/name`` with an optional version (a version string or
an alias); without one, the registry's ``resolve(owner, name, None)`` picks the
default. Answers are cached for ``resolve_ttl`` seconds so a call rarely touches the
database. For one more ``resolve_ttl`` an expired answer is still served while one
refresh runs; an older one never is. So an alias moved, or a version's lifecycle
state changed (which decides whether other tenants may call it), takes effect at
once wherever the change event reaches (``forget``, subscribed in ``modelport.app``),
and within twice ``resolve_ttl`` should an event be lost.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from modelport.background.single_flight import SingleFlight
from modelport.inference.tokens import counts_tokens
from modelport.manifest import Manifest
from modelport.registry.service import RegistryService
from modelport.registry.types import LifecycleState, ModelVersion
from modelport.runtime.observer import RuntimeObserver, VersionObserver
from modelport.runtime.types import VersionKey
from modelport.serving.types import VersionRef

CacheKey = tuple[str, str, str | None]


@dataclass(frozen=True)
class Target:
    """A resolved version: what to validate against and where it is hosted."""

    model: str
    version: str
    manifest: Manifest
    key: VersionKey
    observer: VersionObserver
    state: LifecycleState
    """The version's lifecycle state when it was resolved."""
    ref: VersionRef
    """The version as the serving layer runs it (built once, not per call)."""
    borrowed: tuple[tuple[tuple[str, str, str], ...], ...] = ()
    """For each file its publisher does not hold but mounted, the (owner, name,
    visibility) of the models that lend it (``RegistryService.borrowed_files``)."""

    @cached_property
    def counts_tokens(self) -> bool:
        """Whether the model reports its input tokens (``inference.tokens``): worked out
        once per resolved version, not per call."""
        return counts_tokens(self.manifest.inputs, self.manifest.outputs)


class VersionTargets:
    """Resolved versions by ``(owner, name, version or alias)``, one lookup at a time."""

    def __init__(
        self,
        registry: RegistryService,
        observer: RuntimeObserver,
        *,
        resolve_ttl: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.observer = observer
        self.resolve_ttl = resolve_ttl
        self._clock = clock
        self._targets: dict[CacheKey, tuple[float, Target]] = {}
        self._lookups: SingleFlight[CacheKey, Target] = SingleFlight()

    async def target(self, owner: str, name: str, version: str | None) -> Target:
        """The version ``owner/name`` [``version``] names (NotFound when there is none).

        An answer expired less than ``resolve_ttl`` ago is still returned while one
        refresh runs for every caller (a busy model would otherwise send each of its
        concurrent callers to the database at every expiry); an older one is not. With
        no answer to serve, callers share one lookup."""
        cache_key = (owner, name, version)
        cached = self._targets.get(cache_key)
        if cached is not None:
            expires = cached[0]
            now = self._clock()
            if now < expires:
                return cached[1]
            if now < expires + self.resolve_ttl:
                self._lookup(cache_key)
                return cached[1]
        return await asyncio.shield(self._lookup(cache_key))

    def cached(self, owner: str, name: str, version: str | None) -> Target | None:
        """The cached answer for ``owner/name`` [``version``] while it is fresh, without
        awaiting (None: ask ``target``)."""
        cached = self._targets.get((owner, name, version))
        if cached is not None and self._clock() < cached[0]:
            return cached[1]
        return None

    def forget(self, owner: str, name: str) -> None:
        """Drop what is cached of ``owner/name`` (its aliases, versions or lifecycle states
        changed): the next call resolves it afresh, not joining a lookup begun before.
        Safe from any thread."""
        # First, so that a lookup ending from here on keeps nothing (``generation``).
        self._lookups.drop(lambda cache_key: cache_key[:2] == (owner, name))
        for cache_key in list(self._targets):
            if cache_key[0] == owner and cache_key[1] == name:
                self._targets.pop(cache_key, None)

    def forget_all(self) -> None:
        """Drop every cached resolution (changes may have been missed). Safe from any thread."""
        self._lookups.drop(lambda cache_key: True)
        self._targets.clear()

    def _lookup(self, cache_key: CacheKey) -> asyncio.Future[Target]:
        return self._lookups.start(cache_key, lambda: self._resolve(cache_key))

    async def _resolve(self, cache_key: CacheKey) -> Target:
        generation = self._lookups.generation  # a forget meanwhile: keep nothing
        try:
            found, borrowed = await asyncio.to_thread(self._read, *cache_key)
        except BaseException:
            self._targets.pop(cache_key, None)  # gone or failing: the next call asks again
            raise
        target = self._target(found, borrowed)
        if generation != self._lookups.generation:
            return target  # forgotten meanwhile: answer this caller, keep nothing
        if len(self._targets) > 4096:  # many distinct names: start over rather than grow
            self._targets.clear()
        self._targets[cache_key] = (self._clock() + self.resolve_ttl, target)
        return target

    def _read(
        self, owner: str, name: str, ref: str | None
    ) -> tuple[ModelVersion, tuple[tuple[tuple[str, str, str], ...], ...]]:
        found = self.registry.resolve(owner, name, ref)
        digests = {entry.digest for entry in found.manifest.files}
        borrowed = self.registry.borrowed_files(found.owner, digests)
        return found, tuple(borrowed.values())

    def _target(
        self, found: ModelVersion, borrowed: tuple[tuple[tuple[str, str, str], ...], ...] = ()
    ) -> Target:
        model = f"{found.owner}/{found.name}"
        return Target(
            model=model,
            version=found.version,
            manifest=found.manifest,
            key=VersionKey(model, found.version, found.manifest_digest),
            observer=self.observer.version(model, found.version),
            state=found.state,
            ref=VersionRef(model, found.version, found.manifest_digest, found.manifest),
            borrowed=borrowed,
        )
