"""What the runtime reports as it works, behind small Protocols.

The host asks its ``RuntimeObserver`` once per hosted version for a
``VersionObserver`` and keeps it, so the hot path never looks up labels.
``modelport.observability.metrics.RuntimeMetrics`` implements both with
Prometheus; ``NullObserver`` discards everything (tests, tools).
"""

from __future__ import annotations

from typing import Protocol


class VersionObserver(Protocol):
    """Events of one hosted version. Called from the event loop and from worker threads.

    The per-request events (``request_done``, ``enqueued``, ``queued``,
    ``batch_executed``, ``queue_depth``) sit on the hot path: an implementation must keep them to a few
    plain operations and must not block (``RuntimeMetrics`` tallies them and hands them
    to Prometheus later, see ``modelport.observability.metrics``).
    """

    def request_done(self, outcome: str, seconds: float) -> None:
        """A request left the runtime: ``success``, ``deadline_exceeded``, ``queue_full``,
        ``cancelled``, ``error`` (or ``invalid`` from a surface); ``seconds`` in the runtime."""
        ...

    def enqueued(self, priority: str) -> None:
        """A request of class ``priority`` (``interactive``, ``batch``, ``offline``) was
        queued."""
        ...

    def queued(self, seconds: float) -> None:
        """A request waited ``seconds`` in the queue before its batch started."""
        ...

    def batch_executed(self, size: int, seconds: float) -> None:
        """A batch of ``size`` rows executed in ``seconds``."""
        ...

    def queue_depth(self, depth: int) -> None: ...

    def load_phase(self, phase: str, seconds: float) -> None: ...

    def cold_start(self) -> None:
        """A request found its version not loaded and had it loaded."""
        ...

    def memory(self, host_bytes: int, device_bytes: int) -> None:
        """Memory accounted to the version (0, 0 once unloaded)."""
        ...


class RuntimeObserver(Protocol):
    def version(self, model: str, version: str) -> VersionObserver:
        """The observer of one version (``model`` is ``owner/name``)."""
        ...


class _NullVersionObserver:
    def request_done(self, outcome: str, seconds: float) -> None:
        pass

    def enqueued(self, priority: str) -> None:
        pass

    def queued(self, seconds: float) -> None:
        pass

    def batch_executed(self, size: int, seconds: float) -> None:
        pass

    def queue_depth(self, depth: int) -> None:
        pass

    def load_phase(self, phase: str, seconds: float) -> None:
        pass

    def cold_start(self) -> None:
        pass

    def memory(self, host_bytes: int, device_bytes: int) -> None:
        pass


class NullObserver:
    """Observes nothing."""

    def version(self, model: str, version: str) -> VersionObserver:
        return _NullVersionObserver()
