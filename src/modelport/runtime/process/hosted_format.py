"""A generative format whose engines run in model hosts (``process`` execution).

``HostedGenerativeFormat`` wraps a generative plugin: memory estimates are the
plugin's, computed here from the manifest alone; ``load`` starts a model host through
the launcher (the sandbox: a clean exec, an empty environment, the version's files
only) that loads the plugin there (``runtime.process.generative_worker``) and answers
a ``HostedEngine``. No file of the publisher's is parsed in the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from modelport.manifest import Manifest
from modelport.runtime.formats.base import GenerativeEngine, GenerativeFormat
from modelport.runtime.generative.metrics import GenerationMetrics
from modelport.runtime.process.client import Worker, WorkerSpec
from modelport.runtime.process.hosted_engine import HostedEngine
from modelport.runtime.process.launching import GENERATIVE_WORKER_MODULE, WorkerLauncher


class HostedGenerativeFormat:
    """``inner``'s engines, each in a model host (implements ``GenerativeFormat``)."""

    def __init__(
        self,
        inner: GenerativeFormat,
        *,
        entry: str,
        options: Mapping[str, object],
        launcher: WorkerLauncher,
        start_timeout: float,
        metrics: GenerationMetrics | None = None,
    ) -> None:
        """``entry`` and ``options`` build ``inner`` again in the host (``module:Class``
        and JSON-serialisable keyword arguments)."""
        self.inner = inner
        self.name = inner.name
        self.entry = entry
        self.options = dict(options)
        self.launcher = launcher
        self.start_timeout = start_timeout
        self.metrics = metrics

    def estimate_memory(self, manifest: Manifest) -> int:
        return self.inner.estimate_memory(manifest)

    def load(
        self, files: dict[str, Path], manifest: Manifest, *, name: str = ""
    ) -> GenerativeEngine:
        spec = WorkerSpec(manifest.format, self.entry, self.options, dict(files), manifest, name)
        worker = Worker(spec, name=name, launcher=self.launcher, module=GENERATIVE_WORKER_MODULE)
        engine = HostedEngine(
            worker,
            memory_bytes=self.inner.estimate_memory(manifest),
            name=name,
            metrics=self.metrics,
        )
        engine.start(self.start_timeout)
        return engine
