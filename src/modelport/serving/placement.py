"""Where deployed versions are held: the interface the endpoint controller and the
deployment check budget against, instead of this process's model host.

Today a placement answers for the local host (``LocalPlacement``, roles ``all`` and
``worker``) or for none (``RemotePlacement``, role ``gateway``: every version is served
by remote backends, and no local memory is budgeted); tomorrow one answers for a pool
of workers.
"""

from __future__ import annotations

from collections.abc import Collection
from concurrent.futures import Future
from typing import Protocol

from modelport.errors import Unavailable, Unprocessable
from modelport.manifest import Manifest
from modelport.runtime.cache import BlobSource
from modelport.runtime.engines import GenerativeHost
from modelport.runtime.host import ModelHost
from modelport.runtime.types import VersionKey, VersionStatus
from modelport.serving.generative_placement import GenerativePlacement, is_generative
from modelport.serving.types import VersionRef

ROLE_LACKS_SERVICE = "role_lacks_service"
"""The code of an answer a process cannot give in its role (e.g. a gateway asked to
host a version itself)."""


def key_of(ref: VersionRef) -> VersionKey:
    return VersionKey(ref.model, ref.version, ref.manifest_digest)


class Placement(Protocol):
    """Memory and loads of the versions deployments hold outside remote backends."""

    def capacity(self) -> int | None:
        """Bytes the held versions may take together; None: no limit known."""
        ...

    def fits(self, needed_bytes: int, refs: Collection[str]) -> None:
        """Raise when the live deployments' versions and a new deployment's ``refs``
        (``owner/name:version``, those not on remote backends), needing
        ``needed_bytes`` together, cannot be held."""
        ...

    def estimate(self, manifest: Manifest) -> int:
        """Bytes one copy of a version takes, when its manifest does not say."""
        ...

    def place(self, ref: VersionRef) -> Future[VersionStatus]:
        """Begin holding ``ref`` (pinned); the future fails with the cause. Raises at
        once when it cannot be placed at all."""
        ...

    def status(self, ref: VersionRef) -> VersionStatus | None:
        """What is known of ``ref``'s load; None: not held."""
        ...

    def lookup(self, model: str, version: str) -> VersionStatus | None:
        """The status of ``model:version`` under whichever manifest it is held."""
        ...

    def release(self, ref: VersionRef) -> None:
        """Stop holding ``ref`` (blocking: call it off the event loop)."""
        ...


class LocalPlacement:
    """This process's ``ModelHost``: its memory budget, its loads; and, for versions a
    generative engine serves, its ``GenerativeHost`` (``engines``)."""

    def __init__(
        self, host: ModelHost, blobs: BlobSource, engines: GenerativeHost | None = None
    ) -> None:
        self.host = host
        self.blobs = blobs
        self.generative = None if engines is None else GenerativePlacement(engines, blobs)
        self._engines = engines

    def capacity(self) -> int | None:
        return self.host.budget.host_bytes

    def fits(self, needed_bytes: int, refs: Collection[str]) -> None:
        budget = self.capacity()
        if budget is not None and needed_bytes > budget:
            raise Unprocessable(
                f"the deployments would need {needed_bytes} bytes of host memory together; "
                f"the budget is {budget}",
                code="insufficient_memory",
                needed_bytes=needed_bytes,
                budget_bytes=budget,
            )

    def estimate(self, manifest: Manifest) -> int:
        if self.generative is not None and is_generative(manifest, self._engines):
            return self.generative.estimate(manifest)
        return self.host.formats(manifest.format).estimate_memory(manifest)

    def place(self, ref: VersionRef) -> Future[VersionStatus]:
        if self.generative is not None and is_generative(ref.manifest, self._engines):
            return self.generative.place(key_of(ref), ref.manifest)
        return self.host.start_load(key_of(ref), ref.manifest, self.blobs, pinned=True)

    def status(self, ref: VersionRef) -> VersionStatus | None:
        key = key_of(ref)
        if self.generative is not None and (found := self.generative.status(key)):
            return found
        return self.host.status(key)

    def lookup(self, model: str, version: str) -> VersionStatus | None:
        if self.generative is not None and (found := self.generative.lookup(model, version)):
            return found
        key = self.host.find(model, version)
        return None if key is None else self.host.status(key)

    def release(self, ref: VersionRef) -> None:
        if self.generative is not None and self.generative.release(key_of(ref)):
            return
        self.host.unload(key_of(ref))


class RemotePlacement:
    """A process without a model host (a gateway): every version is held by remote
    backends, so nothing is budgeted here, and a version asked to be held here is
    refused (503 ``role_lacks_service``)."""

    def __init__(self, role: str = "gateway") -> None:
        self.role = role

    def capacity(self) -> int | None:
        return 0

    def fits(self, needed_bytes: int, refs: Collection[str]) -> None:
        if refs:
            raise self._refusal(", ".join(sorted(refs)))

    def estimate(self, manifest: Manifest) -> int:
        return 0  # not held here: whoever holds it budgets it

    def place(self, ref: VersionRef) -> Future[VersionStatus]:
        raise self._refusal(ref.ref)

    def status(self, ref: VersionRef) -> VersionStatus | None:
        return None

    def lookup(self, model: str, version: str) -> VersionStatus | None:
        return None

    def release(self, ref: VersionRef) -> None:
        return None

    def _refusal(self, what: str = "a version") -> Unavailable:
        return Unavailable(
            f"this process ({self.role}) hosts no models: {what} must run on a remote "
            "backend (name it in the deployment's backends)",
            code=ROLE_LACKS_SERVICE,
            role=self.role,
        )
